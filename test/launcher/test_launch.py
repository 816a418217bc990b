"""The launcher (src/launcher/infir2_launch.py) with real processes, against a stand-in of torchrun >= 2.1's layout:
an agent that starts each rank in a session of its own with RANK/LOCAL_RANK/TORCHELASTIC_RUN_ID set, each rank with
a data-loader-like worker child that inherits them and dies on SIGTERM (torch's workers do; the rank then fails as
torch's does: docs/real-engines.md). A rank "saves" on SIGTERM only while its worker is alive, as Megatron's handler
runs at the end of an iteration, after the data loader was asked for the next batch.
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAUNCHER = os.path.join(ROOT, "src", "launcher", "infir2_launch.py")

AGENT = r'''
import os, signal, subprocess, sys, time
out = sys.argv[1]
ignore = os.environ.get("RANKS_IGNORE_TERM") == "1"
ranks = []
for r in range(2):
    env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), TORCHELASTIC_RUN_ID="rdzv")
    ranks.append(subprocess.Popen([sys.executable, __file__.replace("agent.py", "rank.py"), out, str(r), "1" if ignore else "0"], env=env, start_new_session=True))
with open(os.path.join(out, "agent.pid.tmp"), "w") as f:
    f.write(str(os.getpid()))
os.replace(os.path.join(out, "agent.pid.tmp"), os.path.join(out, "agent.pid"))
monitor = float(os.environ.get("AGENT_MONITOR", "0"))
if monitor:
    # torchrun's agent: it looks at its ranks every monitor interval, and a SIGTERM makes it raise SignalException
    # (exit 1) whatever its ranks did.
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(1))
    while any(p.poll() is None for p in ranks):
        time.sleep(monitor)
codes = [p.wait() for p in ranks]
sys.exit(max(codes))
'''

RANK = r'''
import os, signal, subprocess, sys, time
out, rank, ignore = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
# The handler before the pids file that says the rank is up (Megatron installs its own before training): a stop
# that arrives as soon as the file appears must find it.
term = []
signal.signal(signal.SIGTERM, (lambda s, f: None) if ignore else (lambda s, f: term.append(time.time())))
worker = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"])
with open(os.path.join(out, "rank%s.pids.tmp" % rank), "w") as f:  # whole when it appears
    f.write("%d %d" % (os.getpid(), worker.pid))
os.replace(os.path.join(out, "rank%s.pids.tmp" % rank), os.path.join(out, "rank%s.pids" % rank))
while not term:
    time.sleep(0.05)
time.sleep(0.3)  # the end of the iteration
if worker.poll() is not None:
    print("RuntimeError: DataLoader worker (pid %d) is killed by signal: Terminated." % worker.pid, flush=True)
    sys.exit(1)
time.sleep(0.5)  # the save
with open(os.path.join(out, "saved%s" % rank), "w") as f:
    f.write("1")
print("[exiting program after receiving SIGTERM.]", flush=True)
sys.exit(0)
'''


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def wait_for(what, fn, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


@pytest.fixture
def job(tmp_path):
    """Start the launcher in front of the stand-in agent; yields (launcher Popen, dir, pids())."""
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "rank.py").write_text(RANK)
    procs = []

    def start(extra=(), env=None):
        e = dict(os.environ, INFIR2_LAUNCH="t-%d" % os.getpid(), **(env or {}))
        p = subprocess.Popen([sys.executable, LAUNCHER, *extra, "--", sys.executable, str(tmp_path / "agent.py"), str(tmp_path)],
                             cwd=str(tmp_path), env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        procs.append(p)
        wait_for("the agent, both ranks and their workers", lambda: (tmp_path / "agent.pid").exists() and all((tmp_path / ("rank%d.pids" % r)).exists() for r in range(2)))
        return p

    def pids():
        out = [int(x) for r in range(2) for x in (tmp_path / ("rank%d.pids" % r)).read_text().split()]
        return out + [int((tmp_path / "agent.pid").read_text())]

    yield start, tmp_path, pids
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def stop_file(d, req):
    path = d / (".infir2-stop.t-%d" % os.getpid())
    tmp = d / "stop.tmp"
    tmp.write_text(req if isinstance(req, str) else json.dumps(req))
    os.replace(tmp, path)


def test_a_graceful_stop_reaches_the_rank_mains_only_and_they_save(job):
    start, d, pids = job
    p = start()
    stop_file(d, {"mode": "stop", "allowanceSec": 30})
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 0, out
    assert (d / "saved0").exists() and (d / "saved1").exists(), out
    assert "DataLoader worker" not in out
    assert out.count("[exiting program after receiving SIGTERM.]") == 2
    assert "stop requested: SIGTERM to processes" in out
    assert [pid for pid in pids() if alive(pid)] == []


def test_an_agent_that_notices_its_ranks_late_ends_with_their_code_not_the_stops(job):
    """torchrun exits 1 if SIGTERMed before its monitor pass sees the saved ranks gone: a stop they honoured must
    not read as a crash, so the agent gets --rest-grace to end alone."""
    start, d, pids = job
    p = start(env={"AGENT_MONITOR": "0.5"})
    stop_file(d, {"mode": "stop", "allowanceSec": 30})
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 0, out
    assert out.count("[exiting program after receiving SIGTERM.]") == 2
    assert [pid for pid in pids() if alive(pid)] == []


def test_sigterm_to_the_launcher_is_the_same_graceful_stop(job):
    start, d, pids = job
    p = start()
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 0, out
    assert (d / "saved0").exists() and (d / "saved1").exists(), out
    assert "SIGTERM received: SIGTERM to processes" in out
    assert [pid for pid in pids() if alive(pid)] == []


def test_the_old_way_sigterm_to_the_whole_tree_loses_the_save(job):
    """The control: what a process-group SIGTERM did (every process at once) crashes the ranks before they save."""
    start, d, pids = job
    p = start()
    for pid in pids():
        os.kill(pid, signal.SIGTERM)
    wait_for("the ranks to end", lambda: not any(alive(pid) for pid in pids()[:4]))
    stop_file(d, {"mode": "kill"})
    out, _ = p.communicate(timeout=30)
    assert not (d / "saved0").exists() and not (d / "saved1").exists()
    assert "DataLoader worker" in out


def test_a_kill_request_stops_everything_at_once(job):
    start, d, pids = job
    p = start(env={"RANKS_IGNORE_TERM": "1"})
    t0 = time.time()
    stop_file(d, {"mode": "kill"})
    p.communicate(timeout=30)
    assert time.time() - t0 < 5
    # The agent was SIGKILLed: the launcher dies by the same signal.
    assert p.returncode == -signal.SIGKILL
    assert [pid for pid in pids() if alive(pid)] == []
    assert not (d / "saved0").exists()


def test_ranks_that_outlive_their_allowance_are_stopped(job):
    start, d, pids = job
    p = start(["--rest-grace", "1"], env={"RANKS_IGNORE_TERM": "1"})
    t0 = time.time()
    stop_file(d, {"mode": "stop", "allowanceSec": 1})
    out, _ = p.communicate(timeout=30)
    took = time.time() - t0
    assert 1.5 < took < 6, out
    assert "still running after" in out
    assert [pid for pid in pids() if alive(pid)] == []


def test_an_agent_sigkilled_alone_leaves_ranks_the_launcher_adopts_and_stops_gracefully(job):
    start, d, pids = job
    p = start(["--stop-allowance", "30"])
    agent = pids()[-1]
    os.kill(agent, signal.SIGKILL)
    out, _ = p.communicate(timeout=30)
    assert "the command ended, leaving processes: SIGTERM to processes" in out
    assert (d / "saved0").exists() and (d / "saved1").exists(), out
    assert p.returncode == -signal.SIGKILL
    assert [pid for pid in pids() if alive(pid)] == []


def test_a_malformed_stop_file_is_ignored_and_a_later_one_honoured(job):
    start, d, pids = job
    p = start()
    stop_file(d, {"mode": "stop", "allowanceSec": "soon"})
    time.sleep(0.6)
    assert p.poll() is None
    stop_file(d, '{"mode": "stop", "allowanceSec": 1e999}')
    time.sleep(0.6)
    assert p.poll() is None
    stop_file(d, {"mode": "stop", "allowanceSec": 20})
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 0, out
    assert out.count("ignoring the stop file") == 2, out


@pytest.mark.parametrize("code", [0, 3])
def test_the_exit_code_is_the_commands(tmp_path, code):
    r = subprocess.run([sys.executable, LAUNCHER, "--", sys.executable, "-c", "import sys; sys.exit(%d)" % code], cwd=str(tmp_path))
    assert r.returncode == code


def test_a_command_that_cannot_start_is_named(tmp_path):
    r = subprocess.run([sys.executable, LAUNCHER, "--", str(tmp_path / "nothing")], cwd=str(tmp_path), capture_output=True, text=True)
    assert r.returncode == 127
    # On stdout, which carries the command's output and the launcher's lines alike (the step's log).
    assert "cannot start" in r.stdout and "nothing" in r.stdout


def test_bad_arguments_exit_2_with_one_line(tmp_path):
    r = subprocess.run([sys.executable, LAUNCHER, "--stop-allowance", "-1", "--", "true"], cwd=str(tmp_path), capture_output=True, text=True)
    assert r.returncode == 2
    assert "--stop-allowance: expected seconds" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, LAUNCHER], cwd=str(tmp_path), capture_output=True, text=True)
    assert r.returncode == 2 and "no command to run" in r.stderr


def test_the_tree_outlives_a_reader_that_went_away(tmp_path):
    """The worker reading the output SIGKILLed: the command keeps running (its output dropped), not dying of EPIPE."""
    script = tmp_path / "chatty.py"
    script.write_text("import sys, time\nfor i in range(40):\n    print('line', i, flush=True)\n    time.sleep(0.05)\nopen(sys.argv[1], 'w').write('done')\n")
    r, w = os.pipe()
    p = subprocess.Popen([sys.executable, LAUNCHER, "--", sys.executable, str(script), str(tmp_path / "done")], cwd=str(tmp_path), stdout=w, stderr=w)
    os.close(w)
    first = b""
    while b"line 0\n" not in first:
        first += os.read(r, 100)
    os.close(r)  # the reader goes away
    assert p.wait(timeout=30) == 0
    assert (tmp_path / "done").read_text() == "done"


def test_the_output_is_relayed_whole(tmp_path):
    r = subprocess.run([sys.executable, LAUNCHER, "--", sys.executable, "-c", "import sys\nfor i in range(2000): print('x' * 100, i)\nprint('err', file=sys.stderr)"],
                       cwd=str(tmp_path), capture_output=True, text=True)
    assert r.returncode == 0
    assert r.stdout.count("\n") == 2001 and r.stdout.rstrip().endswith("err")


def test_the_command_inherits_only_its_output_and_default_signal_dispositions(tmp_path):
    """As subprocess.Popen started it: no other fd of the launcher (one its own parent leaked to it here), and
    SIGPIPE and SIGXFSZ at their defaults, which the launcher's Python ignores."""
    r, w = os.pipe()
    os.set_inheritable(w, True)
    try:
        p = subprocess.run([sys.executable, LAUNCHER, "--", "sh", "-c", "ls /proc/self/fd; grep SigIgn /proc/self/status"],
                           cwd=str(tmp_path), capture_output=True, text=True, pass_fds=(w,), timeout=30)
    finally:
        os.close(r)
        os.close(w)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.split()
    fds = lines[:lines.index("SigIgn:")]
    assert sorted(int(x) for x in fds) == [0, 1, 2, 3]  # 3: ls's own listing of the directory
    ignored = int(lines[lines.index("SigIgn:") + 1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1)) and not ignored & (1 << (signal.SIGXFSZ - 1))
