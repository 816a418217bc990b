#!/usr/bin/env bash
# What a session lent a GPU machine runs there, in one call (its device time is short, and the machine reaches no
# registry): real Megatron-LM core_v0.14.0 behind infir2's launcher under the machine's torchrun, stopped the ways the
# supervisor stops a step (test/gpu/megatron_stop.py), then the trainer's CUDA tests. Results land in $OUT.
#
# Prepared here first (the tree travels; .gpu-carry is ignored by git and named in the call's carry):
#   mkdir -p .gpu-carry && (cd <Megatron-LM clone> && git archive --format=tar.gz --prefix=Megatron-LM/ \
#     core_v0.14.0 megatron pretrain_gpt.py) > .gpu-carry/megatron-core_v0.14.0.tar.gz
# and called as: run(command="bash scripts/device-check.sh", carry=[".gpu-carry"], timeout_s=590)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/.tmp/device}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import sys, torch, numpy; print(sys.version.split()[0], "torch", torch.__version__, "numpy", numpy.__version__)'
  command -v torchrun; } > "$out/machine.txt" 2>&1
cat "$out/machine.txt"
rc=0
if [ -f .gpu-carry/megatron-core_v0.14.0.tar.gz ]; then
  rm -rf /tmp/Megatron-LM && tar -xzf .gpu-carry/megatron-core_v0.14.0.tar.gz -C /tmp
  timeout "${MEGATRON_STOP_TIMEOUT:-330}" python3 test/gpu/megatron_stop.py --megatron /tmp/Megatron-LM --out "$out" \
    --work /tmp/megatron-stop || rc=1
else
  echo "device-check: .gpu-carry/megatron-core_v0.14.0.tar.gz is missing: the Megatron check is skipped"; rc=1
fi
(cd trainer && timeout "${CUDA_TESTS_TIMEOUT:-200}" python3 -m pytest -m cuda -q -p no:cacheprovider) 2>&1 \
  | tee "$out/pytest-cuda.log" | tail -n 15
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
exit $rc
