# infir2: two commands do everything on a fresh machine —
#   make demo   set up, start the embedded Temporal server + worker, run recipes/tiny.yaml end to end
#   make test   set up, then the whole test suite (TypeScript + Python trainer)
SHELL := /bin/bash
.PHONY: setup build test test-ts test-py demo bench docs clean

setup:
	@bash scripts/setup.sh

build:
	@bash scripts/build.sh

test:
	@bash scripts/setup.sh --test
	@bash scripts/test.sh

demo: setup
	@bash scripts/demo.sh

bench: setup
	@bash scripts/bench.sh

# Regenerate the tables of docs/recipe-reference.md from the recipe schema (a unit test checks they match).
docs:
	@npx tsx scripts/docs.ts

clean:
	rm -rf dist .infir2 .tmp
