#!/usr/bin/env bash
# Evaluate one model on one benchmark the way InfiR2's scripts/eval/*.sh do (an SGLang server, evalscope in
# service mode against it), with the fixes infir2 lists in FIXES: a real readiness check instead of `sleep 5`,
# the server stopped on every exit path, and the score written to --report as JSON.
#
# usage: evalscope-runner.sh --model-path DIR --served-name NAME --port N --tp N --warmups N
#          --max-running-requests N --chunked-prefill-size N --ready-timeout SEC --work-dir DIR
#          --benchmark NAME --dataset NAME --dataset-args JSON --generation-config JSON --eval-batch-size N
#          --timeout SEC --api-key KEY --report FILE [--python PYTHON]
set -uo pipefail

PYTHON=python3
while [[ $# -gt 0 ]]; do
  [[ $# -ge 2 ]] || { echo "error: evalscope-runner: $1 needs a value" >&2; exit 2; }
  case "$1" in
    --model-path) MODEL_PATH=$2 ;;
    --served-name) SERVED_NAME=$2 ;;
    --port) PORT=$2 ;;
    --tp) TP=$2 ;;
    --warmups) WARMUPS=$2 ;;
    --max-running-requests) MAX_RUNNING=$2 ;;
    --chunked-prefill-size) CHUNKED_PREFILL=$2 ;;
    --ready-timeout) READY_TIMEOUT=$2 ;;
    --work-dir) WORK_DIR=$2 ;;
    --benchmark) BENCHMARK=$2 ;;
    --dataset) DATASET=$2 ;;
    --dataset-args) DATASET_ARGS=$2 ;;
    --generation-config) GENERATION_CONFIG=$2 ;;
    --eval-batch-size) EVAL_BATCH=$2 ;;
    --timeout) EVAL_TIMEOUT=$2 ;;
    --api-key) API_KEY=$2 ;;
    --report) REPORT=$2 ;;
    --python) PYTHON=$2 ;;
    *) echo "error: evalscope-runner: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift 2
done
for v in MODEL_PATH SERVED_NAME PORT TP WARMUPS MAX_RUNNING CHUNKED_PREFILL READY_TIMEOUT WORK_DIR BENCHMARK \
         DATASET DATASET_ARGS GENERATION_CONFIG EVAL_BATCH EVAL_TIMEOUT API_KEY REPORT; do
  [[ -n "${!v:-}" ]] || { echo "error: evalscope-runner: missing --$(tr 'A-Z_' 'a-z-' <<<"$v")" >&2; exit 2; }
done
for cmd in "$PYTHON" evalscope; do
  command -v "$cmd" >/dev/null 2>&1 || { echo "error: $cmd is required but was not found in PATH" >&2; exit 2; }
done
[[ -d "$MODEL_PATH" ]] || { echo "error: model directory $MODEL_PATH does not exist" >&2; exit 2; }
mkdir -p "$WORK_DIR"

SERVER_PID=
EVAL_PID=
# The server and every process it started (SGLang spawns one worker per TP rank), children first.
descendants() { local c; for c in $(pgrep -P "$1" 2>/dev/null); do descendants "$c"; echo "$c"; done; }
# Live (not zombie) processes among the given pids.
living() { local p; for p in "$@"; do [[ "$(ps -o stat= -p "$p" 2>/dev/null)" =~ ^[^Z] ]] && echo "$p"; done; }
# SIGTERM, up to `grace` seconds for every one of them to exit, then SIGKILL and wait until they are gone.
stop_pids() {
  local grace=$1; shift
  [[ $# -gt 0 ]] || return 0
  kill -TERM "$@" 2>/dev/null
  for _ in $(seq 1 $((grace * 10))); do [[ -z "$(living "$@")" ]] && return 0; sleep 0.1; done
  kill -KILL "$@" 2>/dev/null
  for _ in $(seq 1 50); do [[ -z "$(living "$@")" ]] && return 0; sleep 0.1; done
}
stop_server() {
  [[ -n "$SERVER_PID" ]] || return 0
  # shellcheck disable=SC2046
  stop_pids 30 $(descendants "$SERVER_PID") "$SERVER_PID"
  wait "$SERVER_PID" 2>/dev/null
  SERVER_PID=
}
trap 'stop_server; [[ -z "$EVAL_PID" ]] || stop_pids 10 "$EVAL_PID"' EXIT
trap 'echo "evalscope-runner: stopped by signal" >&2; exit 143' TERM INT HUP

echo "starting SGLang for $MODEL_PATH on port $PORT (log: $WORK_DIR/sglang.log)"
"$PYTHON" -m sglang.launch_server \
  --model "$MODEL_PATH" \
  --served-model-name "$SERVED_NAME" \
  --port "$PORT" \
  --trust-remote-code \
  --tensor-parallel-size "$TP" \
  --warmups "$WARMUPS" \
  --max-running-requests "$MAX_RUNNING" \
  --chunked-prefill-size "$CHUNKED_PREFILL" >"$WORK_DIR/sglang.log" 2>&1 &
SERVER_PID=$!

# Ready = the server generates a token (/health_generate), not merely listens.
probe() {
  if command -v curl >/dev/null 2>&1; then
    curl -sf -m 10 -o /dev/null "http://127.0.0.1:$PORT/health_generate"
  else
    "$PYTHON" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)' \
      "http://127.0.0.1:$PORT/health_generate" 2>/dev/null
  fi
}
deadline=$((SECONDS + READY_TIMEOUT))
until probe; do
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "error: the SGLang server exited before it was ready; last lines of $WORK_DIR/sglang.log:" >&2
    tail -n 20 "$WORK_DIR/sglang.log" >&2
    exit 1
  fi
  if ((SECONDS >= deadline)); then
    echo "error: the SGLang server did not answer /health_generate within ${READY_TIMEOUT}s" >&2
    exit 1
  fi
  sleep 2
done
echo "SGLang is ready after ${SECONDS}s"

started=$(date +%s)
evalscope eval \
  --model "$SERVED_NAME" \
  --generation-config "$GENERATION_CONFIG" \
  --api-url "http://127.0.0.1:$PORT/v1/chat/completions" \
  --api-key "$API_KEY" \
  --eval-type service \
  --work-dir "$WORK_DIR" \
  --datasets "$DATASET" \
  --dataset-args "$DATASET_ARGS" \
  --eval-batch-size "$EVAL_BATCH" \
  --timeout "$EVAL_TIMEOUT" &
EVAL_PID=$!
# `wait` (unlike a foreground child) lets a SIGTERM to this script run the traps at once.
wait "$EVAL_PID"
rc=$?
EVAL_PID=
if ((rc != 0)); then
  echo "error: evalscope exited with $rc" >&2
  exit "$rc"
fi
stop_server

# evalscope writes reports/<model>/<dataset>.json under a timestamped run directory of --work-dir (the layout
# moves between versions, so search): take the newest one written by this run and keep its score.
"$PYTHON" - "$WORK_DIR" "$DATASET" "$started" "$REPORT" "$BENCHMARK" "$MODEL_PATH" "$GENERATION_CONFIG" <<'PY'
import json, os, sys, tempfile
work, dataset, started, report, benchmark, model_path, gen = sys.argv[1:8]
# <work>/**/reports/**/<dataset>*.json, walked without following a link (glob's ** follows them: a loop hangs it).
found = [os.path.join(root, n) for root, _, names in os.walk(work) for n in names
         if "reports" in os.path.relpath(root, work).split(os.sep) and n.startswith(dataset) and n.endswith(".json")
         and os.path.getmtime(os.path.join(root, n)) >= float(started) - 1]
if not found:
    sys.exit(f"error: evalscope wrote no report for {dataset} under {work}")
path = max(found, key=os.path.getmtime)
with open(path) as f:
    data = json.load(f)
score = data.get("score")
if not isinstance(score, (int, float)):
    sys.exit(f"error: {path} has no numeric 'score'")
g = json.loads(gen)
out = {"benchmark": benchmark, "dataset": dataset, "model_path": model_path, "accuracy": score,
       "n_samples": g.get("n"), "temperature": g.get("temperature"), "top_p": g.get("top_p"),
       "max_tokens": g.get("max_tokens", g.get("max_new_tokens")), "evalscope_report": path}
# An unguessable temporary name, created exclusively: never written through a link planted at a guessable one.
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(report) or ".", prefix=os.path.basename(report) + ".tmp-")
os.fchmod(fd, 0o644)
with os.fdopen(fd, "w") as f:
    json.dump(out, f, indent=2)
os.replace(tmp, report)
print(f"{benchmark}: accuracy {score} ({path})")
PY
