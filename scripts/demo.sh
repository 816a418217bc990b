#!/usr/bin/env bash
# `make demo`: start the embedded default (Temporal dev server + Web UI + a local worker) and run the tiny
# recipe end to end with the local reference trainer; print the run's summary and where to watch it.
set -euo pipefail
cd "$(dirname "$0")/.."
infir2() { node bin/infir2.js "$@"; }
infir2 up
run_id="demo-$(date +%Y%m%d-%H%M%S)"
echo
echo "running recipes/tiny.yaml as run ${run_id} (every stage really trains, on CPU) ..."
set +e
infir2 run recipes/tiny.yaml --run-id "$run_id"
rc=$?
set -e
echo
if [ $rc -eq 0 ]; then
  echo "demo finished. The server and worker keep running so you can browse the run:"
  ui=$(node -e "try{const s=require(require('path').resolve(process.env.INFIR2_HOME||'.infir2','embedded.json'));console.log(s.uiUrl||'')}catch{}")
  [ -n "$ui" ] && echo "  Web UI: ${ui}/namespaces/default/workflows/tiny-${run_id}"
else
  echo "demo run failed (exit $rc). Inspect it with: npx infir2 status tiny-${run_id}; logs are in the run directory."
fi
echo "  npx infir2 status tiny-${run_id}"
echo "  npx infir2 report tiny-${run_id}   # its report (HTML page + PNG charts), as written at the run's end"
echo "  npx infir2 down      # stop the embedded server and worker"
exit $rc
