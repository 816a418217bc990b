"""Bad input gives one `error: ...` line and a non-zero exit, never a traceback and never a silent fresh start."""
import os

import pytest

from conftest import DATA, ok, pretrain_args, run
from infir2_trainer import checkpoint as ckpt


def one_error_line(p, code):
    assert p.returncode == code, (p.returncode, p.stdout[-2000:], p.stderr)
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("error: "), p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    return err[0]


@pytest.mark.parametrize("args,needle", [
    (["pretrain", "--data-path", "x.jsonl"], "--train-iters"),
    (["pretrain", "--data-path", "x.jsonl", "--train-iters", "-3"], "positive"),
    (["pretrain", "--data-path", "x.jsonl", "--train-iters", "5", "--fp8-format", "e5m2"], "fp8-format"),
    (["pretrain", "--data-path", "x.jsonl", "--train-iters", "5", "--fp8-format", "e4m3", "--fp8-recipe",
      "delayed"], "blockwise"),
    (["pretrain", "--data-path", "x.jsonl", "--train-iters", "5", "--global-batch-size", "6",
      "--micro-batch-size", "4"], "multiple"),
    (["pretrain", "--data-path", "x.jsonl", "--train-iters", "5", "--lr-decay-style", "WSD"], "wsd"),
    (["convert-fp8", "--input-bf16-hf-path", "a", "--output-fp8-hf-path", "b", "--force-pow-2-scale", "maybe"],
     "true or false"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_arguments_exit_2(args, needle):
    line = one_error_line(run(args), 2)
    assert needle.lower() in line.lower()


def test_missing_data_file(tmp_path):
    args = pretrain_args(str(tmp_path / "c"), iters=2)
    args[args.index("--data-path") + 1] = str(tmp_path / "nope.jsonl")
    assert "not found" in one_error_line(run(args), 1)


def test_missing_checkpoint_step_and_exit_on_missing(tmp_path):
    root = str(tmp_path / "c")
    ok(run(pretrain_args(root, iters=2)))
    line = one_error_line(run(pretrain_args(root, iters=4, extra=["--ckpt-step", "7"])), 1)
    assert "iter_0000007" in line and "does not exist" in line
    empty = str(tmp_path / "empty")
    line = one_error_line(run(pretrain_args(empty, iters=2, extra=["--exit-on-missing-checkpoint"])), 1)
    assert "no checkpoint" in line
    assert not os.path.exists(os.path.join(empty, ckpt.TRACKER))


def test_no_tracker_warns_like_megatron(tmp_path):
    p = ok(run(pretrain_args(str(tmp_path / "fresh"), iters=1)))
    assert "WARNING: could not find the metadata file" in p.stdout
    assert "will not load any checkpoints and will start from random" in p.stdout


def test_corrupt_checkpoint(tmp_path):
    root = str(tmp_path / "c")
    ok(run(pretrain_args(root, iters=2)))
    model = os.path.join(ckpt.iter_dir(root, 2), "model.pt")
    with open(model, "r+b") as f:
        f.seek(100)
        f.write(b"\x00\x01\x02\x03")
    assert "corrupt checkpoint" in one_error_line(run(pretrain_args(root, iters=4)), 1)
    with open(os.path.join(root, ckpt.TRACKER), "w") as f:
        f.write("banana\n")
    assert "corrupt checkpoint tracker" in one_error_line(run(pretrain_args(root, iters=4)), 1)


def test_unwritable_save_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    line = one_error_line(run(pretrain_args(str(blocker / "ckpt"), iters=2)), 1)
    assert "cannot write to save directory" in line


def test_sft_without_ref_load_or_checkpoint(tmp_path):
    p = run(["sft", "--load", str(tmp_path / "s"), "--save", str(tmp_path / "s"), "--data-path",
             os.path.join(DATA, "sft_stage1.jsonl")])
    assert "--ref-load" in one_error_line(p, 1)
    p = run(["sft", "--ref-load", str(tmp_path / "missing"), "--save", str(tmp_path / "s"), "--data-path",
             os.path.join(DATA, "sft_stage1.jsonl")])
    assert "no complete checkpoint" in one_error_line(p, 1)


def test_sft_architecture_mismatch(tmp_path, cpt_root):
    p = run(["sft", "--ref-load", cpt_root, "--save", str(tmp_path / "s"), "--data-path",
             os.path.join(DATA, "sft_stage1.jsonl"), "--rotary-base", "1000000"])
    assert "--rotary-base" in one_error_line(p, 1)


def test_convert_errors(tmp_path, cpt_root):
    line = one_error_line(run(["convert-hf", "--input-dir", cpt_root, "--output-dir", str(tmp_path / "h")]), 1)
    assert "iter_XXXXXXX" in line and "iter_0000008" in line
    out = tmp_path / "exists"
    out.mkdir()
    line = one_error_line(run(["convert-hf", "--input-dir", ckpt.iter_dir(cpt_root, 8), "--output-dir",
                               str(out)]), 1)
    assert "--force" in line
    line = one_error_line(run(["eval", "--model-path", str(tmp_path), "--data-path",
                               os.path.join(DATA, "eval_arith.jsonl"), "--output", str(tmp_path / "r.json")]), 1)
    assert "not an HF model directory" in line


def test_save_failure_during_training(tmp_path):
    root = tmp_path / "c"
    root.mkdir()
    (root / "iter_0000002").write_text("a file where the checkpoint directory should go")
    line = one_error_line(run(pretrain_args(str(root), iters=3, extra=["--save-interval", "2"])), 1)
    assert "cannot save checkpoint" in line and "iter_0000002" in line
