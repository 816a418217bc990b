"""Checkpoints in Megatron's layout, with Megatron's completeness rule.

  <root>/iter_0000100/common.pt       args, iteration, consumed samples, scheduler, RNG, data cursor, model config
  <root>/iter_0000100/model.pt        FP32 master weights (MCore parameter names)
  <root>/iter_0000100/optimizer.pt    AdamW state (FP32 exp_avg / exp_avg_sq)
  <root>/iter_0000100/metadata.json   written LAST inside the directory: sizes and sha256 of the files above
  <root>/latest_checkpointed_iteration.txt   rewritten atomically (tmp + os.replace) after the directory is whole

An iteration is complete when its metadata.json exists and the tracker has reached it. A directory newer than the
tracker is a partial save from a crash: it is never loaded, and the next save of that iteration replaces it.
Loading verifies the hashes, so a truncated or damaged file is an error, never a silent fresh start.
"""
import datetime
import hashlib
import json
import os

import torch

from .runtime import TrainerError

TRACKER = "latest_checkpointed_iteration.txt"
FORMAT = "infir2-local/1"
PARTS = ("common", "model", "optimizer")


class CheckpointError(TrainerError):
    """A missing, incomplete or damaged checkpoint, or one that cannot be written: a one-line error, exit 1."""


def iter_dir(root: str, iteration: int) -> str:
    return os.path.join(root, f"iter_{iteration:07d}")


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _write_atomic(path: str, data: bytes):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _fsync_dir(path: str):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_writable(root: str):
    """Fail at start-up, not after an hour of training, when the save directory cannot be written."""
    try:
        os.makedirs(root, exist_ok=True)
        probe = os.path.join(root, f".write_test.{os.getpid()}")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as e:
        raise CheckpointError(f"cannot write to save directory {root}: {e.strerror or e}") from None


def read_tracker(root: str):
    """The tracker's iteration, or None when there is no tracker."""
    path = os.path.join(root, TRACKER)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        text = f.read().strip()
    if text == "release":
        raise CheckpointError(f"{path} says 'release': release checkpoints are not supported by the local trainer")
    try:
        it = int(text)
    except ValueError:
        raise CheckpointError(f"corrupt checkpoint tracker {path}: {text[:40]!r} is not an iteration") from None
    if it <= 0:
        raise CheckpointError(f"corrupt checkpoint tracker {path}: iteration {it} (must be > 0)")
    return it


def is_complete(root: str, iteration: int) -> bool:
    tracker = read_tracker(root)
    return tracker is not None and iteration <= tracker and \
        os.path.isfile(os.path.join(iter_dir(root, iteration), "metadata.json"))


def save(root: str, iteration: int, common: dict, model_state: dict, optimizer_state: dict, log=print):
    """Write iter dir (metadata.json last), then move the tracker. Prints Megatron's two save lines."""
    root_abs = os.path.abspath(root)
    d = iter_dir(root_abs, iteration)
    log(f"saving checkpoint at iteration {iteration:7d} to {root_abs} in torch_dist format")
    try:
        os.makedirs(d, exist_ok=True)
        meta_path = os.path.join(d, "metadata.json")
        if os.path.exists(meta_path):  # re-saving an iteration: make it incomplete until it is whole again
            os.remove(meta_path)
        files = {}
        for name, obj in (("common", common), ("model", model_state), ("optimizer", optimizer_state)):
            path = os.path.join(d, f"{name}.pt")
            tmp = path + ".tmp"
            torch.save(obj, tmp)
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)
            files[f"{name}.pt"] = {"bytes": os.path.getsize(path), "sha256": _sha256(path)}
        meta = {"format": FORMAT, "iteration": iteration, "files": files,
                "saved_at": datetime.datetime.now().isoformat(timespec="seconds")}
        _write_atomic(meta_path, (json.dumps(meta, indent=1) + "\n").encode())
        _fsync_dir(d)
        _write_atomic(os.path.join(root_abs, TRACKER), f"{iteration}\n".encode())
        _fsync_dir(root_abs)
    except OSError as e:
        raise CheckpointError(f"cannot save checkpoint to {d}: {e.strerror or e}") from None
    log(f"  successfully saved checkpoint from iteration {iteration:7d} to {root_abs} [ t 1/1, p 1/1 ]")


def resolve(root: str, ckpt_step=None):
    """The iteration to load from root: --ckpt-step N (must be complete) or the tracker's. None = nothing to load."""
    if ckpt_step is not None:
        d = iter_dir(root, ckpt_step)
        if not os.path.isdir(d):
            raise CheckpointError(f"--ckpt-step {ckpt_step}: {d} does not exist")
        if not os.path.isfile(os.path.join(d, "metadata.json")):
            raise CheckpointError(f"--ckpt-step {ckpt_step}: {d} is incomplete (no metadata.json)")
        return ckpt_step
    if not os.path.isdir(root):
        return None
    it = read_tracker(root)
    if it is None:
        return None
    if not os.path.isfile(os.path.join(iter_dir(root, it), "metadata.json")):
        raise CheckpointError(f"corrupt checkpoint: tracker in {root} names iteration {it} but "
                              f"{iter_dir(root, it)} has no metadata.json")
    return it


def load(root: str, iteration: int, parts=PARTS, map_location="cpu", log=print) -> dict:
    """Verify and load the parts of one complete iteration. Any damage is a CheckpointError."""
    root_abs = os.path.abspath(root)
    d = iter_dir(root_abs, iteration)
    log(f" loading distributed checkpoint from {root_abs} at iteration {iteration}")
    try:
        with open(os.path.join(d, "metadata.json")) as f:
            meta = json.load(f)
        files = meta["files"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"corrupt checkpoint {d}: unreadable metadata.json ({e})") from None
    if meta.get("iteration") != iteration:
        raise CheckpointError(f"corrupt checkpoint {d}: metadata.json is for iteration {meta.get('iteration')}")
    out = {}
    for name in parts:
        fname = f"{name}.pt"
        path = os.path.join(d, fname)
        if fname not in files or not os.path.isfile(path):
            raise CheckpointError(f"corrupt checkpoint {d}: {fname} is missing")
        if os.path.getsize(path) != files[fname]["bytes"] or _sha256(path) != files[fname]["sha256"]:
            raise CheckpointError(f"corrupt checkpoint {d}: {fname} does not match metadata.json (damaged file)")
        try:
            # our own files, checked against metadata.json above; explicit because torch >= 2.6 defaults to
            # weights_only=True and torch 1.13's weights-only unpickler rejects plain floats and bools
            out[name] = torch.load(path, map_location=map_location, weights_only=False)
        except Exception as e:  # noqa: BLE001 - any unpickling failure means a bad file
            raise CheckpointError(f"corrupt checkpoint {d}: cannot read {fname} ({type(e).__name__})") from None
    log(f"  successfully loaded checkpoint from {root_abs} [ t 1/1, p 1/1 ] at iteration {iteration}")
    return out
