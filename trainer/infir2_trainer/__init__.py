"""InfiR2 local reference trainer: a tiny Qwen2-style model trained through every InfiR2 stage with the recipe's
FP8 numerics emulated (see trainer/README.md for the contract with the orchestrator)."""
