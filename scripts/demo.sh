#!/usr/bin/env bash
# `make demo`: start the embedded default (Temporal dev server + Web UI + a local worker) and run the tiny
# recipe end to end with the local reference trainer; print the run's summary and where to watch it.
#
# Settings (environment, or `make demo PORT=7301`):
#   PORT / TEMPORAL_ADDRESS   the server's gRPC port (default 7233; TEMPORAL_ADDRESS=127.0.0.1:N says the same)
#   UI_PORT                   the Web UI's port (default PORT + 1000)
#   INFIR2_HOME               the state directory: server database, logs, and the runs (default .infir2/)
set -euo pipefail
cd "$(dirname "$0")/.."
infir2() { node bin/infir2.js "$@"; }
if [ -n "${PORT:-}" ]; then
  if [ -n "${TEMPORAL_ADDRESS:-}" ] && [ "${TEMPORAL_ADDRESS##*:}" != "$PORT" ]; then
    echo "error: PORT=$PORT disagrees with TEMPORAL_ADDRESS=$TEMPORAL_ADDRESS: give one of them" >&2
    exit 2
  fi
  export TEMPORAL_ADDRESS="127.0.0.1:$PORT"
fi
up_args=()
[ -n "${UI_PORT:-}" ] && up_args+=(--ui-port "$UI_PORT")
infir2 up "${up_args[@]}"
run_id="demo-$(date +%Y%m%d-%H%M%S)"
echo
echo "running recipes/tiny.yaml as run ${run_id} (every stage really trains, on CPU) ..."
set +e
infir2 run recipes/tiny.yaml --run-id "$run_id"
rc=$?
set -e
echo
# The other verbs look for the server at TEMPORAL_ADDRESS (default localhost:7233): say it when it is elsewhere.
addr=""
[ -n "${TEMPORAL_ADDRESS:-}" ] && addr="TEMPORAL_ADDRESS=${TEMPORAL_ADDRESS} "
[ -n "${INFIR2_HOME:-}" ] && addr="${addr}INFIR2_HOME=${INFIR2_HOME} "
if [ $rc -eq 0 ]; then
  echo "demo finished. The server and worker keep running so you can browse the run:"
  ui=$(node -e "try{const s=require(require('path').resolve(process.env.INFIR2_HOME||'.infir2','embedded.json'));console.log(s.uiUrl||'')}catch{}")
  [ -n "$ui" ] && echo "  Web UI: ${ui}/namespaces/default/workflows/tiny-${run_id}"
else
  echo "demo run failed (exit $rc). Inspect it with: ${addr}./bin/infir2 status tiny-${run_id}; its logs: ${addr}./bin/infir2 logs tiny-${run_id}"
fi
echo "  ${addr}./bin/infir2 status tiny-${run_id}"
echo "  ${addr}./bin/infir2 report tiny-${run_id}   # its report (HTML page + PNG charts), as written at the run's end"
echo "  ${addr}./bin/infir2 down      # stop the embedded server and worker"
echo "  (./bin/infir2 is this checkout's CLI: put bin/ on PATH to type just \`infir2\`)"
exit $rc
