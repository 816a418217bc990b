"""Exact resume: stop at a checkpoint, resume, and the loss trajectory equals an uninterrupted run's, bit for bit
(as printed: 7 significant digits of the loss and the grad norm, compared as strings)."""
import os

from conftest import DATA, PREC, losses, ok, pretrain_args, run


def test_pretrain_resume_is_bit_identical(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    full = losses(ok(run(pretrain_args(a, iters=10))).stdout)
    first = ok(run(pretrain_args(b, iters=10, extra=["--exit-interval", "4"])))
    assert "[exiting program at iteration 4]" in first.stdout
    second = ok(run(pretrain_args(b, iters=10)))
    assert losses(first.stdout) + losses(second.stdout) == full
    assert len(full) == 10


def test_decay_fork_from_stable_checkpoint(tmp_path):
    """--load ROOT --ckpt-step N --override-opt_param-scheduler into a new save dir, as the decay phase does."""
    a, d = str(tmp_path / "a"), str(tmp_path / "decay")
    full = losses(ok(run(pretrain_args(a, iters=10, extra=["--save-interval", "6"]))).stdout)
    args = pretrain_args(d, iters=10, extra=["--ckpt-step", "6", "--override-opt_param-scheduler",
                                              "--exit-on-missing-checkpoint"])
    args[args.index("--load") + 1] = a
    decay = losses(ok(run(args)).stdout)
    assert decay == full[6:]  # same arguments: the fork continues exactly where the stable run was
    assert open(os.path.join(d, "latest_checkpointed_iteration.txt")).read().strip() == "10"


def sft_args(ref, save, iters=None, extra=()):
    return ["sft", "--ref-load", ref, "--load", save, "--save", save, "--data-path",
            os.path.join(DATA, "sft_stage1.jsonl"), "--global-batch-size", "8", "--micro-batch-size", "4",
            "--train-iters", str(iters or 8), "--lr", "2e-3", "--lr-warmup-fraction", "0.1", "--log-interval", "1",
            *PREC, *extra]


def test_sft_resume_is_bit_identical(tmp_path, cpt_root):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    full = losses(ok(run(sft_args(cpt_root, a))).stdout)
    first = ok(run(sft_args(cpt_root, b, extra=["--exit-interval", "3"])))
    second = ok(run(sft_args(cpt_root, b)))
    assert "starting from" not in second.stdout  # resumed from --load, not re-initialised from --ref-load
    assert losses(first.stdout) + losses(second.stdout) == full and len(full) == 8


def rl_args(ref, save, extra=()):
    return ["rl", "--ref-load", ref, "--load", save, "--save", save, "--prompt-data",
            os.path.join(DATA, "rl.jsonl"), "--num-rollout", "4", "--rollout-batch-size", "4",
            "--n-samples-per-prompt", "4", "--global-batch-size", "8", "--rollout-max-response-len", "24",
            "--rollout-temperature", "1.0", "--lr", "1e-3", "--log-interval", "1", *PREC, *extra]


def test_rl_resume_is_bit_identical(tmp_path, cpt_root):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    full = ok(run(rl_args(cpt_root, a)))
    first = ok(run(rl_args(cpt_root, b, extra=["--exit-interval", "2"])))
    second = ok(run(rl_args(cpt_root, b)))
    assert losses(first.stdout) + losses(second.stdout) == losses(full.stdout)
    rewards = lambda s: [ln.split("reward:")[1].split("|")[0] for ln in s.splitlines() if "reward:" in ln]
    assert rewards(first.stdout) + rewards(second.stdout) == rewards(full.stdout)
