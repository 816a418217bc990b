"""SIGTERM: finish the current iteration, save, print Megatron's line, exit 0; the next run resumes from it."""
import os
import signal
import subprocess
import sys

from conftest import MAIN, ok, pretrain_args, run
from infir2_trainer import checkpoint as ckpt


def test_sigterm_saves_and_exits_zero(tmp_path):
    root = str(tmp_path / "c")
    proc = subprocess.Popen([sys.executable, MAIN, *pretrain_args(root, iters=100000)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    lines = []
    for line in proc.stdout:  # wait until training really runs
        lines.append(line)
        if " iteration        3/" in line:
            proc.send_signal(signal.SIGTERM)
            break
    out, err = proc.communicate(timeout=60)
    lines.append(out)
    text = "".join(lines)
    assert proc.returncode == 0, err
    assert "[exiting program after receiving SIGTERM.] datetime:" in text
    it = ckpt.read_tracker(root)
    assert it is not None and it >= 3 and ckpt.is_complete(root, it)
    assert f"successfully saved checkpoint from iteration {it:7d}" in text
    p = ok(run(pretrain_args(root, iters=100000, extra=["--exit-interval", str(it + 1)])))  # same schedule
    assert f"at iteration {it}" in p.stdout and ckpt.read_tracker(root) == it + 1
