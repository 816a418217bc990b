"""Megatron's checkpoint layout and completeness rule."""
import json
import os

import pytest
import torch

from conftest import ok, pretrain_args, run
from infir2_trainer import checkpoint as ckpt


def test_layout_metadata_last_tracker_after(tmp_path, monkeypatch):
    root = str(tmp_path / "c")
    order = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (order.append(os.path.basename(b)), real_replace(a, b)))
    ckpt.save(root, 5, {"x": 1}, {"w": torch.ones(2)}, {"o": 2}, log=lambda m: None)
    assert order == ["common.pt", "model.pt", "optimizer.pt", "metadata.json", ckpt.TRACKER]
    d = ckpt.iter_dir(root, 5)
    assert sorted(os.listdir(d)) == ["common.pt", "metadata.json", "model.pt", "optimizer.pt"]
    meta = json.load(open(os.path.join(d, "metadata.json")))
    assert meta["iteration"] == 5 and set(meta["files"]) == {"common.pt", "model.pt", "optimizer.pt"}
    assert open(os.path.join(root, ckpt.TRACKER)).read().strip() == "5"
    assert ckpt.is_complete(root, 5)


def test_crash_during_save_leaves_previous_checkpoint(tmp_path, monkeypatch):
    root = str(tmp_path / "c")
    ckpt.save(root, 2, {}, {"w": torch.ones(1)}, {}, log=lambda m: None)
    real = torch.save
    def boom(obj, path, *a, **k):
        if path.endswith("optimizer.pt.tmp"):
            raise OSError(28, "No space left on device")
        return real(obj, path, *a, **k)
    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(ckpt.CheckpointError, match="No space left"):
        ckpt.save(root, 4, {}, {"w": torch.ones(1)}, {}, log=lambda m: None)
    assert ckpt.read_tracker(root) == 2  # the tracker never moved
    assert not os.path.exists(os.path.join(ckpt.iter_dir(root, 4), "metadata.json"))
    assert ckpt.resolve(root) == 2 and not ckpt.is_complete(root, 4)
    with pytest.raises(ckpt.CheckpointError, match="incomplete"):
        ckpt.resolve(root, ckpt_step=4)


def test_partial_newer_dir_is_ignored_on_resume(tmp_path):
    root = str(tmp_path / "c")
    ok(run(pretrain_args(root, iters=4, extra=["--exit-interval", "2"])))
    assert ckpt.read_tracker(root) == 2
    partial = ckpt.iter_dir(root, 3)  # a crash while saving iteration 3: files, no metadata.json
    os.makedirs(partial)
    open(os.path.join(partial, "model.pt"), "wb").write(b"garbage")
    p = ok(run(pretrain_args(root, iters=4)))
    assert "successfully loaded checkpoint" in p.stdout and "at iteration 2" in p.stdout
    assert ckpt.read_tracker(root) == 4 and ckpt.is_complete(root, 4)


def test_rerun_after_completion_trains_nothing(tmp_path):
    root = str(tmp_path / "c")
    ok(run(pretrain_args(root, iters=3)))
    before = os.path.getmtime(os.path.join(ckpt.iter_dir(root, 3), "metadata.json"))
    p = ok(run(pretrain_args(root, iters=3)))
    assert " iteration " not in p.stdout.replace("at iteration", "")  # no training log line
    assert "[after training is done]" in p.stdout
    assert os.path.getmtime(os.path.join(ckpt.iter_dir(root, 3), "metadata.json")) == before
