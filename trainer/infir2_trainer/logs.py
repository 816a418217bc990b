"""Megatron's progress lines, byte for byte (megatron/training/training.py at core_v0.14.0: training_log,
evaluate_and_print_results, print_datetime).

The orchestrator parses these, exactly as it parses a real Megatron/slime run, so the format is the contract:
 [2025-10-01 12:00:00] iteration      100/    4000 | consumed samples:        12800 | elapsed time per iteration
 (ms): 83.6 | throughput per GPU (TFLOP/s/GPU): 0.1 | learning rate: 2.000000E-06 | global batch size:   128 |
 lm loss: 2.345678E+00 | loss scale: 1.0 | grad norm: 0.123 | number of skipped iterations:   0 | number of nan
 iterations:   0 |                                                                   (one line; RL adds reward)
and, between dashed rules, ` validation loss at iteration 100 | lm loss value: … | lm loss PPL: … | ` every
--eval-interval, `… at iteration N on validation set | …` and `… on test set | …` once when training ends.
"""
import datetime
import math
import sys


def now() -> str:
    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")


_quiet = False


def set_quiet(quiet: bool):
    """Ranks other than 0 of a data-parallel run print nothing but errors (Megatron's print_rank_0)."""
    global _quiet
    _quiet = quiet


def log(msg: str = ""):
    if not _quiet:
        print(msg, flush=True)


def print_datetime(what: str):
    log(f"[{what}] datetime: {now()}")


def warn(msg: str):
    if not _quiet:
        print(msg, file=sys.stderr, flush=True)


def training_log(iteration, train_iters, consumed_samples, elapsed_ms, tflops, lr, global_batch_size, losses,
                 grad_norm, skipped, nans, reward=None) -> str:
    s = f" [{now()}]"
    s += " iteration {:8d}/{:8d} |".format(iteration, train_iters)
    s += " consumed samples: {:12d} |".format(consumed_samples)
    s += " elapsed time per iteration (ms): {:.1f} |".format(elapsed_ms)
    s += f" throughput per GPU (TFLOP/s/GPU): {tflops:.1f} |"
    s += f" learning rate: {lr:.6E} |"
    s += f" global batch size: {global_batch_size:5d} |"
    for key, value in losses.items():
        # Megatron prints a loss only `if avg > 0.0` (training.py:1565): none for an interval whose iterations
        # were all skipped or NaN. Its losses are cross-entropies; the RL loss here may be below zero, so only a
        # missing or non-finite one is left out.
        if value is not None and math.isfinite(value):
            s += " {}: {:.6E} |".format(key, value)
        if key == "lm loss" and reward is not None:
            s += f" reward: {reward:.6E} |"
    s += " loss scale: 1.0 |"
    if grad_norm is not None:
        s += f" grad norm: {grad_norm:.3f} |"
    s += " number of skipped iterations: {:3d} |".format(skipped)
    s += " number of nan iterations: {:3d} |".format(nans)
    return s


def validation_log(prefix: str, loss: float) -> str:
    """evaluate_and_print_results (training.py:2524–2552): `prefix` is `iteration N` every --eval-interval
    (2219), `iteration N on validation set` (747) and `iteration N on test set` (762) when training ends."""
    body = f" validation loss at {prefix} | lm loss value: {loss:.6E} | " \
           f"lm loss PPL: {math.exp(min(20.0, loss)):.6E} | "
    rule = "-" * (len(body) + 1)
    return f"{rule}\n{body}\n{rule}"
