"""Shared helpers: run the trainer as the orchestrator does (a subprocess), with a model small enough that a
stage takes about a second."""
import os
import subprocess
import sys

import pytest

TRAINER = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
MAIN = os.path.join(TRAINER, "main.py")
DATA = os.path.join(TRAINER, "data")
sys.path.insert(0, TRAINER)

MODEL = ["--num-layers", "2", "--hidden-size", "32", "--ffn-hidden-size", "64", "--num-attention-heads", "4",
         "--num-query-groups", "2", "--max-position-embeddings", "96", "--rotary-base", "500"]
PREC = ["--bf16", "--fp8-format", "e4m3", "--fp8-recipe", "blockwise", "--fp8-block-size", "16"]


def pretrain_args(save, iters=8, extra=(), prec=PREC):
    return ["pretrain", "--data-path", os.path.join(DATA, "cpt.jsonl"), *MODEL, "--seq-length", "32",
            "--micro-batch-size", "4", "--global-batch-size", "8", "--train-iters", str(iters), "--lr", "3e-3",
            "--min-lr", "3e-4", "--lr-decay-style", "WSD", "--lr-warmup-iters", str(min(2, iters - 1)),
            "--lr-wsd-decay-iters", str(min(3, iters)),
            "--lr-wsd-decay-style", "cosine", "--init-method-std", "0.05", "--log-interval", "1",
            "--save", save, "--load", save, *prec, *extra]


def run(args, timeout=120, **kw):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("INFIR2_TRAINER_DEBUG", None)
    return subprocess.run([sys.executable, MAIN, *args], capture_output=True, text=True, timeout=timeout, env=env,
                          **kw)


def ok(p):
    assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{p.stdout[-3000:]}\nstderr:\n{p.stderr[-3000:]}"
    return p


def losses(stdout):
    """(iteration, lm loss string) of every Megatron log line: compared as strings, i.e. bit for bit as printed."""
    out = []
    for line in stdout.splitlines():
        if " iteration " in line and "lm loss:" in line:
            it = int(line.split(" iteration ")[1].split("/")[0])
            out.append((it, line.split("lm loss:")[1].split("|")[0].strip(),
                        line.split("grad norm:")[1].split("|")[0].strip()))
    return out


def cuda_missing():
    """Why the real-FP8 CUDA tests cannot run here (None: they can): they need float8 dtypes, torch._scaled_mm,
    Triton and a Hopper GPU (cuBLAS does 1x128/128x128 block scaling on sm_90 only)."""
    import torch
    if not hasattr(torch, "float8_e4m3fn"):
        return f"torch {torch.__version__} has no float8 dtypes (the CUDA path needs a recent PyTorch)"
    if not torch.cuda.is_available():
        return "no CUDA device"
    from infir2_trainer import fp8_gemm
    ok, why = fp8_gemm.available()
    return None if ok else why


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU with real FP8 GEMMs (Hopper); skipped elsewhere, "
                                       "saying why")


def pytest_collection_modifyitems(config, items):
    marked = [item for item in items if item.get_closest_marker("cuda")]
    why = cuda_missing() if marked else None
    if why:
        for item in marked:
            item.add_marker(pytest.mark.skip(reason=f"CUDA test: {why}"))


@pytest.fixture(scope="session")
def cpt_root(tmp_path_factory):
    """A finished tiny pretrain run (the base for sft/rl/convert tests)."""
    root = str(tmp_path_factory.mktemp("cpt") / "ckpt")
    ok(run(pretrain_args(root, iters=8, extra=["--save-interval", "4"])))
    return root
