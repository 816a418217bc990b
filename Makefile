# infir2: two commands do everything on a fresh machine —
#   make demo   set up, start the embedded Temporal server + worker, run recipes/tiny.yaml end to end
#   make test   set up, then the whole test suite (TypeScript + Python trainer)
#   make test-cluster   the cluster tier: Temporal server on PostgreSQL as docker-compose.yml runs it, built
#                       from Go modules, and a real Slurm for srun + torchrun (make setup-cluster; docs/cluster.md)
SHELL := /bin/bash
.PHONY: setup setup-gpu setup-cluster build test test-cluster test-ts test-py demo bench bench-gpu docs clean

setup:
	@bash scripts/setup.sh

build:
	@bash scripts/build.sh

# A GPU node: the pinned CUDA PyTorch + Triton and .venv on them (offline: make setup-gpu WHEELS=dir).
setup-gpu:
	@bash scripts/setup-gpu.sh $(if $(WHEELS),--wheels $(WHEELS)) $(if $(PYTHON),--python $(PYTHON))

test:
	@bash scripts/setup.sh --test
	@bash scripts/test.sh

# The Temporal server and SQL tool of the release docker-compose.yml pins, and Debian's PostgreSQL server.
setup-cluster:
	@bash scripts/setup-cluster.sh

test-cluster:
	@bash scripts/test-cluster.sh

# Settings: PORT (gRPC, default 7233; TEMPORAL_ADDRESS=127.0.0.1:N says the same), UI_PORT (default PORT + 1000),
# INFIR2_HOME (state: server database, logs, runs; default .infir2/), e.g. `make demo PORT=7301`.
demo: setup
	@bash scripts/demo.sh

bench: setup
	@bash scripts/bench.sh

# Real FP8 on a Hopper GPU vs BF16: GEMMs, a 0.6B model end to end, the loss gap (docs/gpu.md).
bench-gpu:
	@.venv/bin/python bench/gpu_fp8.py

# Regenerate the tables of docs/recipe-reference.md from the recipe schema (a unit test checks they match).
docs:
	@npx tsx scripts/docs.ts

# The build, and the embedded default's state in the checkout (.infir2/: its server's history, its logs and the
# runs of the presets and recipes/tiny.yaml), after `infir2 down` has stopped what `infir2 up` started there. Run
# directories elsewhere (a recipe's own runDir, an INFIR2_HOME outside the checkout) are not touched.
clean:
	@if [ -f dist/cli/main.js ] && [ -f .infir2/embedded.json ]; then INFIR2_HOME="$$PWD/.infir2" node bin/infir2.js down || true; fi
	rm -rf dist .infir2 .tmp
