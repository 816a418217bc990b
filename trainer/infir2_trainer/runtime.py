"""Process-level plumbing shared by the stages: errors, device, threads, RNG state, the SIGTERM flag."""
import random
import signal

import torch

from . import fp8


class TrainerError(Exception):
    """An expected failure with a message for the user: printed as one `error: ...` line, exit status 1."""


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise TrainerError("--device cuda: no CUDA device is available")
    return torch.device(name)


def setup(args) -> torch.device:
    """Device and threads. One intra-op thread by default: at these sizes more threads only add overhead (measured
    on 2 cores: 2 threads are ~1.5x slower), and one thread makes CPU runs bit-reproducible."""
    if getattr(args, "num_threads", None):
        torch.set_num_threads(args.num_threads)
    device = pick_device(getattr(args, "device", "auto"))
    fp8.set_kernels(getattr(args, "kernels", "auto"))
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # keep FP32 GEMMs FP32: the FP8 emulation relies on it
        torch.backends.cudnn.allow_tf32 = False
    return device


def rng_state() -> dict:
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict):
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_all(seed: int):
    random.seed(seed)
    torch.manual_seed(seed)


class ExitSignal:
    """Megatron's --exit-signal-handler, always on: SIGTERM sets a flag; the loop finishes the iteration it is in,
    saves, prints `[exiting program after receiving SIGTERM.]` and exits 0. Installed at start-up (before the
    checkpoint and the data are loaded), like Megatron's handler, so an early SIGTERM is not lost either."""

    def __init__(self):
        self.received = False
        signal.signal(signal.SIGTERM, self._handler)

    def _handler(self, signum, frame):
        self.received = True


_exit_signal = None


def exit_signal() -> ExitSignal:
    global _exit_signal
    if _exit_signal is None:
        _exit_signal = ExitSignal()
    return _exit_signal
