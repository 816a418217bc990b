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

clean:
	rm -rf dist .infir2 .tmp
