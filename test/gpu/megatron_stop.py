#!/usr/bin/env python3
"""Real Megatron-LM behind infir2's launcher under torchrun: does each way the product stops a step keep the work?

This is the check the Megatron stand-in (test/fixtures/megatron_standin.py) stands for: it runs the real
core_v0.14.0 `pretrain_gpt.py` (BF16, `--transformer-impl local`, `--mock-data`, `--exit-signal-handler`,
`--ckpt-format torch_dist`) on a GPU, behind `python3 -I -S src/launcher/infir2_launch.py -- torchrun …`, exactly the
argv a Megatron step gets (docs/operations.md "Multi-node launches"), and stops it the ways the supervisor does:

  stop          the stop file asks for a graceful stop (cancel, worker SIGTERM, `down`): the rank must save at the
                iteration it stands at, print Megatron's exit line, and nothing of the tree may be left;
  torchrun-kill torchrun SIGKILLed alone (an OOM killer, a node agent): the launcher must stop the orphaned rank
                the same graceful way, so it saves where it stands, and leave nothing;
  kill          the stop file asks for a kill (a hang): everything gone at once, the last save kept.

Each scenario after the first resumes from the save the one before made, so a resume at the saved iteration is
checked too. Every figure comes from the output and the checkpoint directory: the last iteration printed, the
iteration `latest_checkpointed_iteration.txt` names, the stop → last-process-gone time, and the processes whose
environment still carries the launch's token (read from /proc, as the supervisor reads it).

    python3 test/gpu/megatron_stop.py --megatron DIR [--out DIR] [--nproc N] [--standin]

--megatron DIR   a Megatron-LM checkout (pretrain_gpt.py at its top); not needed with --standin
--standin        run the stand-in instead, with whatever torchrun is on PATH (a CPU dry run of this script)
Exit 0 when every check held; the summary goes to stdout and <out>/megatron-stop.json.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAUNCHER = os.path.join(ROOT, "src", "launcher", "infir2_launch.py")
sys.path.insert(0, os.path.dirname(LAUNCHER))
import infir2_launch  # noqa: E402  (its /proc reader: the launcher's own view of who is whose child)
STANDIN = os.path.join(ROOT, "test", "fixtures", "megatron_standin.py")
ITER_RE = re.compile(r"\biteration\s+(\d+)/\s*\d+ \|")
EXIT_LINE = "[exiting program after receiving SIGTERM.]"
TRACKER = "latest_checkpointed_iteration.txt"


def tree_left(token):
    """Pids whose environment carries INFIR2_LAUNCH=<token>: what the supervisor counts as the attempt's."""
    needle = ("INFIR2_LAUNCH=%s" % token).encode()
    left = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if needle in env:
            left.append(int(name))
    return left


def children_of(pid):
    return [p for p, ppid in infir2_launch.proc_table().items() if ppid == pid]


def saved_iteration(ckpt):
    try:
        with open(os.path.join(ckpt, TRACKER)) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


class Launch:
    """One launch of the launcher + torchrun + trainer, its output read line by line with arrival times."""

    def __init__(self, argv, cwd, token, log_path):
        env = dict(os.environ, INFIR2_LAUNCH=token, PYTHONUNBUFFERED="1")
        self.t0 = time.monotonic()
        self.log = open(log_path, "a")
        self.log.write("\n=== %s\n" % " ".join(argv))
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines = []  # (t, line)
        self.iters = []  # (t, iteration)
        self.lock = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            t = time.monotonic()
            self.log.write(line + "\n")
            with self.lock:
                self.lines.append((t, line))
                m = ITER_RE.search(line)
                if m:
                    self.iters.append((t, int(m.group(1))))
                self.lock.notify_all()
        with self.lock:
            self.lock.notify_all()

    def wait_iteration(self, at_least, timeout):
        end = time.monotonic() + timeout
        with self.lock:
            while not (self.iters and self.iters[-1][1] >= at_least):
                left = end - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    return None
                self.lock.wait(min(left, 0.5))
            return self.iters[-1][1]

    def last_iteration(self):
        with self.lock:
            return self.iters[-1][1] if self.iters else None

    def saw(self, text):
        with self.lock:
            return any(text in line for _, line in self.lines)

    def tail(self, n=25):
        with self.lock:
            return [line for _, line in self.lines[-n:]]


def run_scenario(name, o, step, resume_from):
    token = uuid.uuid4().hex
    stop_file = os.path.join(o.work, ".infir2-stop." + token)
    launch = Launch(o.argv_for(step), o.work, token, os.path.join(o.out, "megatron-stop.log"))
    result = {"scenario": name, "token": token, "resumedFrom": resume_from}
    first = launch.wait_iteration((resume_from or 0) + 1, o.start_timeout)
    if first is None:
        result.update(ok=False, why="no iteration within %d s" % o.start_timeout, tail=launch.tail())
        kill_all(launch, token)
        return result
    result["startToFirstIterationSec"] = round(launch.iters[0][0] - launch.t0, 1)
    result["firstIteration"] = launch.iters[0][1]
    # Stop between two saves: a few iterations past the first, never on a save interval.
    target = first + o.run_iters
    if target % o.save_interval == 0:
        target += 1
    if launch.wait_iteration(target, o.start_timeout) is None:
        result.update(ok=False, why="did not reach iteration %d" % target, tail=launch.tail())
        kill_all(launch, token)
        return result
    before = launch.last_iteration()
    t_stop = time.monotonic()
    if name == "stop":
        write_stop(stop_file, {"mode": "stop", "allowanceSec": 120})
    elif name == "kill":
        write_stop(stop_file, {"mode": "kill"})
    elif name == "torchrun-kill":
        torchruns = children_of(launch.proc.pid)
        result["torchrunPids"] = torchruns
        for pid in torchruns:
            os.kill(pid, signal.SIGKILL)
    try:
        rc = launch.proc.wait(timeout=o.stop_timeout)
    except subprocess.TimeoutExpired:
        rc = None
    launch.reader.join(timeout=10)
    gone_at = time.monotonic()
    left = tree_left(token)
    while left and time.monotonic() - gone_at < 5:
        time.sleep(0.1)
        left = tree_left(token)
    last = launch.last_iteration()
    saved = saved_iteration(o.ckpt)
    result.update(
        launcherExit=rc,
        iterationAtStop=before,
        lastIterationPrinted=last,
        savedIteration=saved,
        iterationsLost=(last - saved) if (last is not None and saved is not None) else None,
        exitLine=launch.saw(EXIT_LINE),
        stopToExitSec=round(gone_at - t_stop, 2),
        processesLeft=left,
        # Megatron: "  successfully loaded checkpoint from <dir> [ t 1/1, p 1/1 ] at iteration N"
        resumedAtSaved=resume_from is None or launch.saw("at iteration %d" % resume_from),
    )
    if left:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    result["newerPartialSaves"] = partial_saves(o.ckpt, saved)
    if name == "kill":
        # A hang's kill keeps the newest complete save, whatever save it cut short: the tracker names a whole one.
        ok = rc is not None and not left and saved is not None and saved >= (resume_from or 0) and complete(o.ckpt, saved)
    else:
        ok = rc is not None and not left and result["iterationsLost"] == 0 and result["exitLine"]
    result["ok"] = bool(ok and result["resumedAtSaved"])
    if not result["ok"]:
        result["tail"] = launch.tail()
    try:
        os.unlink(stop_file)
    except OSError:
        pass
    return result


def complete(ckpt, iteration):
    """A torch_dist save Megatron finished: its directory holds the metadata it writes last (real-engines.md)."""
    d = os.path.join(ckpt, "iter_%07d" % iteration)
    return os.path.isfile(os.path.join(d, ".metadata")) and os.path.isfile(os.path.join(d, "metadata.json"))


def partial_saves(ckpt, saved):
    """Save directories newer than the one the tracker names: a save a kill cut short (the product prunes them)."""
    try:
        names = os.listdir(ckpt)
    except OSError:
        return []
    its = [int(n[5:]) for n in names if n.startswith("iter_") and n[5:].isdigit()]
    return sorted(i for i in its if saved is None or i > saved)


def write_stop(path, req):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(req, f)
    os.rename(tmp, path)


def kill_all(launch, token):
    for pid in tree_left(token):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        launch.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


class Options:
    def __init__(self, a):
        self.out = os.path.abspath(a.out)
        self.work = os.path.join(self.out if a.work is None else os.path.abspath(a.work), "step")
        self.ckpt = os.path.join(self.work, "ckpt")
        self.save_interval = a.save_interval
        self.run_iters = a.run_iters
        self.start_timeout = a.start_timeout
        self.stop_timeout = a.stop_timeout
        self.nproc = a.nproc
        self.standin = a.standin
        self.megatron = a.megatron
        torchrun = shutil.which("torchrun")
        self.torchrun = [torchrun] if torchrun else [sys.executable, "-m", "torch.distributed.run"]

    def argv_for(self, step):
        common = ["--train-iters", "100000", "--save", self.ckpt, "--load", self.ckpt,
                  "--save-interval", str(self.save_interval), "--log-interval", "1", "--exit-signal-handler",
                  "--num-workers", "2"]
        if self.standin:
            script, extra = STANDIN, ["--iter-sleep", "0.1"]
        else:
            script = os.path.join(self.megatron, "pretrain_gpt.py")
            extra = ["--num-layers", "2", "--hidden-size", "256", "--num-attention-heads", "4",
                     "--seq-length", "512", "--max-position-embeddings", "512",
                     "--micro-batch-size", "4", "--global-batch-size", str(8 * self.nproc),
                     "--lr", "1e-4", "--min-lr", "1e-5", "--lr-decay-style", "cosine", "--lr-warmup-iters", "2",
                     "--bf16", "--transformer-impl", "local", "--mock-data", "--tokenizer-type", "NullTokenizer",
                     "--vocab-size", "8192", "--eval-interval", "100000", "--eval-iters", "1",
                     "--ckpt-format", "torch_dist", "--no-gradient-accumulation-fusion",
                     "--no-masked-softmax-fusion", "--no-bias-gelu-fusion", "--no-bias-dropout-fusion",
                     "--no-persist-layer-norm", "--distributed-timeout-minutes", "5"]
        return ([sys.executable, "-I", "-S", LAUNCHER, "--rest-grace", "5", "--"] + self.torchrun
                + ["--standalone", "--nnodes=1", "--nproc_per_node=%d" % self.nproc, script] + common + extra)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--megatron")
    p.add_argument("--standin", action="store_true")
    p.add_argument("--out", default="megatron-stop-out")
    p.add_argument("--work", help="where the step directory goes (default: --out)")
    p.add_argument("--nproc", type=int, default=1)
    p.add_argument("--save-interval", type=int, default=10)
    p.add_argument("--run-iters", type=int, default=14)
    p.add_argument("--start-timeout", type=int, default=180)
    p.add_argument("--stop-timeout", type=int, default=150)
    p.add_argument("--scenarios", default="stop,torchrun-kill,kill")
    a = p.parse_args()
    if not a.standin and not (a.megatron and os.path.isfile(os.path.join(a.megatron, "pretrain_gpt.py"))):
        p.error("--megatron: expected a Megatron-LM checkout with pretrain_gpt.py at its top")
    o = Options(a)
    os.makedirs(o.out, exist_ok=True)
    shutil.rmtree(o.work, ignore_errors=True)
    os.makedirs(o.ckpt)
    results = []
    resume = None
    for name in a.scenarios.split(","):
        r = run_scenario(name, o, len(results), resume)
        results.append(r)
        print(json.dumps({k: v for k, v in r.items() if k != "tail"}), flush=True)
        for line in r.get("tail", []):
            print("    | " + line, flush=True)
        resume = saved_iteration(o.ckpt)
        if not r["ok"] and resume is None:
            break
    with open(os.path.join(o.out, "megatron-stop.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("| scenario | launcher exit | stop at | last printed | saved | lost | exit line | stop → gone | left |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print("| %s | %s | %s | %s | %s | %s | %s | %s s | %s |" % (
            r["scenario"], r.get("launcherExit"), r.get("iterationAtStop"), r.get("lastIterationPrinted"),
            r.get("savedIteration"), r.get("iterationsLost"), r.get("exitLine"), r.get("stopToExitSec"),
            len(r.get("processesLeft", []))))
    ok = all(r["ok"] for r in results)
    print("megatron-stop: %s" % ("every check held" if ok else "FAILED"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
