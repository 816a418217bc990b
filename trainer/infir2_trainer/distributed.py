"""Data parallelism the way torchrun starts Megatron: one process per rank, rank and world from torchrun's
environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), gloo on CPU and NCCL on CUDA.

Each rank holds a full replica. The global batch's micro-batches are dealt to the ranks as Megatron's sampler
deals them (micro-batch m of an iteration to rank m mod world), each rank sums its micro-batches' gradients, and
an all-reduce adds the ranks' sums, so every rank steps the optimizer with the gradient of the whole global
batch: the same optimisation as one process, up to the order of float additions. Rank 0 alone prints progress
and writes checkpoints (between two barriers); every rank loads them. A SIGTERM seen by any rank is agreed on
by all before the iteration's save-or-exit decision, so the ranks never part ways.

Without WORLD_SIZE (or with 1) nothing here talks to anyone: the single-process trainer is unchanged.
"""
import datetime
import os

import torch
import torch.distributed as dist

from . import logs

# A hang is the orchestrator's to catch (its stall limit follows the trainer's rhythm); the collective timeout is
# only the last resort, as NCCL_TIMEOUT / Megatron's --distributed-timeout-minutes are.
DEFAULT_TIMEOUT_MIN = 30


class World:
    def __init__(self, rank: int = 0, size: int = 1, local_rank: int = 0):
        self.rank, self.size, self.local_rank = rank, size, local_rank

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def parallel(self) -> bool:
        return self.size > 1


_world = World()


def world() -> World:
    return _world


def env_world() -> World:
    """The world torchrun describes in the environment (rank 0 of 1 when it does not)."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    return World(int(os.environ.get("RANK", "0")), size, int(os.environ.get("LOCAL_RANK", "0")))


def init(device: torch.device, timeout_min: int = DEFAULT_TIMEOUT_MIN) -> torch.device:
    """Join the process group torchrun set up; the device this rank trains on. Ranks other than 0 print nothing
    but errors."""
    global _world
    _world = env_world()
    if not _world.parallel:
        return device
    if device.type == "cuda":
        device = torch.device("cuda", _world.local_rank)
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=_world.rank, world_size=_world.size,
                            timeout=datetime.timedelta(minutes=timeout_min))
    logs.set_quiet(not _world.main)
    logs.log(f" > data parallel: {_world.size} ranks ({dist.get_backend()}), master "
             f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}")
    return device


def shutdown():
    if _world.parallel and dist.is_initialized():
        dist.destroy_process_group()


def my_micro_batches(n_micro: int) -> range:
    """The micro-batches of an iteration this rank computes: m ≡ rank (mod world), as Megatron's sampler."""
    return range(_world.rank, n_micro, _world.size)


def barrier():
    if _world.parallel:
        dist.barrier()


def all_reduce_grads(model):
    """Sum every parameter's gradient over the ranks, in one flat buffer (one collective per iteration)."""
    if not _world.parallel:
        return
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    dist.all_reduce(flat)
    offset = 0
    for p in params:
        n = p.grad.numel()
        p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
        offset += n


def sum_over_ranks(x: torch.Tensor) -> torch.Tensor:
    if _world.parallel:
        x = x.clone()
        dist.all_reduce(x)
    return x


def any_rank(flag: bool) -> bool:
    """True on every rank when it is true on any (a SIGTERM that reached some ranks first)."""
    if not _world.parallel:
        return flag
    t = torch.tensor([1 if flag else 0], dtype=torch.int32)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())
