#!/usr/bin/env python3
"""infir2's launcher: runs in front of a step's command on every node, owns the command's whole process tree
there, and stops it the way a trainer that saves on SIGTERM needs. Python standard library only, so that it runs
with whatever python3 a node has, before any virtualenv is active.

Why it exists (docs/operations.md "What a stop does"; measured on real Megatron-LM core_v0.14.0 and torchrun 2.11,
docs/real-engines.md):
  - torch >= 2.1's torchrun starts each rank in a session of its own, and a rank whose torchrun died is reparented:
    a process group says nothing about which processes are the step's. This process is a child subreaper
    (prctl PR_SET_CHILD_SUBREAPER): whatever under it loses its parent becomes its child, so its tree on this node
    is its descendants, whatever sessions or groups they made, and it reaps them.
  - SIGTERM to torchrun's group, or to torchrun (its agent killpg's every rank's group), reaches the data-loader
    workers, which die at once; the rank then fails with "DataLoader worker (pid ...) is killed by signal:
    Terminated." before Megatron's signal handler (checked at the end of an iteration) saves. So a stop sends
    SIGTERM to each rank's main process only, waits until those exit (they save, print "exiting program after
    receiving SIGTERM." and exit 0), then stops what is left.

    infir2_launch.py [--stop-file PATH] [--stop-allowance SEC] [--rest-grace SEC] -- COMMAND [ARG...]

What starts a stop:
  - the stop file, polled every 0.2 s: JSON {"mode": "stop", "allowanceSec": N} (graceful, the rank mains get N
    seconds) or {"mode": "kill"} (a hang: every process at once). On the run's shared directory it reaches the
    launcher on every node of an srun job without going through Slurm, whose scancel and signal forwarding reach
    every process of the step, data-loader workers included. Default: <cwd>/.infir2-stop.<$INFIR2_LAUNCH>;
  - SIGTERM, SIGINT or SIGHUP to this process: a graceful stop with --stop-allowance;
  - the command exiting with processes of its tree left (torchrun SIGKILLed, its ranks orphaned): the same
    graceful stop of those left.

A rank's main process is a descendant whose torchrun variables (RANK, LOCAL_RANK, TORCHELASTIC_RUN_ID) differ from
its parent's: torchrun sets them for each rank it starts, and a rank's children (data-loader workers, a
checkpoint writer) inherit its values. With no rank at all (a single-process trainer, a tool, `ray job submit`),
the launcher's own children are the ones signalled.

Output: the command's stdout and stderr go through this process to its own stdout. When that breaks (the worker
reading it was SIGKILLed), the tree keeps running, its output dropped, instead of dying of EPIPE at its next log
line: its ranks wait for the next attempt, which stops them through the stop file so that they save first.

Exit: the command's exit code; a command killed by a signal makes this process die by the same signal, so that
the supervisor sees what it would have seen of the command.
"""
import ctypes
import math
import os
import select
import signal
import sys
import threading
import time

PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.2
RANK_KEYS = ("RANK", "LOCAL_RANK", "TORCHELASTIC_RUN_ID")
# A stop file asking for longer than a week is not a save allowance; refused as malformed.
MAX_ALLOWANCE_S = 7 * 24 * 3600


OUT = {"broken": False}


def write_out(data):
    """To this process's stdout, unless it broke: then dropped (the reader is gone; the tree must not follow)."""
    if OUT["broken"]:
        return
    try:
        while data:
            data = data[os.write(1, data):]
    except OSError:
        OUT["broken"] = True


def say(msg):
    write_out(("[infir2-launch] %s\n" % msg).encode())


def relay(fd):
    """Copy the command's output to stdout until every writer of the pipe is gone."""
    while True:
        try:
            data = os.read(fd, 1 << 16)
        except InterruptedError:
            continue
        if not data:
            break
        write_out(data)
    os.close(fd)


def wake_on_signals():
    """A fd that becomes readable when a signal arrives: SIGCHLD (a child exited: the command's exit ends this process
    at once, not at the next poll, which cost every step up to POLL_S at each end) and the stop signals."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)  # a full pipe still wakes the loop
    # Python delivers SIGCHLD (ignored by default) to the wakeup fd only with a handler of its own in place.
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    return r


def nap(wake):
    """Until the next poll, or sooner when a signal arrives."""
    if select.select([wake], [], [], POLL_S)[0]:
        try:
            os.read(wake, 4096)
        except BlockingIOError:
            pass


def become_subreaper():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        return True
    except (OSError, AttributeError) as err:
        say("not a subreaper (%s): orphans of the command go to init, where the supervisor still finds them" % err)
        return False


def proc_table():
    """{pid: ppid} of the live (non-zombie) processes of this host."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
        rest = text[text.rfind(")") + 2:].split()
        if len(rest) >= 2 and rest[0] not in ("Z", "X"):
            table[int(name)] = int(rest[1])
    return table


def descendants(root, table=None):
    """The live descendants of `root`, parents before children."""
    table = proc_table() if table is None else table
    children = {}
    for pid, ppid in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def rank_key(pid):
    """The torchrun variables of a process (empty where it has none or cannot be read)."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return ()
    wanted = tuple(k.encode() + b"=" for k in RANK_KEYS)
    return tuple(sorted(e for e in env if e.startswith(wanted)))


def mains_of(root, table):
    """(the rank mains under `root`, `root`'s own children): whom a graceful stop signals first."""
    desc = descendants(root, table)
    keys = {pid: rank_key(pid) for pid in desc}
    keys[root] = rank_key(root)
    ranks = [p for p in desc if keys[p] and keys[p] != keys.get(table.get(p), keys[root])]
    return ranks, [p for p in desc if table.get(p) == root]


def signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def read_stop(path, seen):
    """The request in the stop file if it changed since `seen` (a one-item list holding its last stat), else None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    if seen[0] == stamp:
        return None
    seen[0] = stamp
    try:
        import json  # here, not at the top: most launches never see a stop file (the import is ~5 ms of each start)

        with open(path) as f:
            req = json.load(f)
        mode = req.get("mode") if isinstance(req, dict) else None
        if mode == "kill":
            return {"mode": "kill"}
        allowance = req.get("allowanceSec") if mode == "stop" else None
        if isinstance(allowance, bool) or not isinstance(allowance, (int, float)) or not math.isfinite(allowance):
            raise ValueError('expected {"mode": "stop", "allowanceSec": <seconds>} or {"mode": "kill"}')
        if not 0 <= allowance <= MAX_ALLOWANCE_S:
            raise ValueError("allowanceSec %r is outside 0..%d" % (allowance, MAX_ALLOWANCE_S))
        return {"mode": "stop", "allowanceSec": float(allowance)}
    except (OSError, ValueError) as err:
        say("ignoring the stop file %s: %s" % (path, err))
        return None


class Stop:
    """A stop in progress: SIGTERM to the mains, then (once they are gone or their time is up) the rest."""

    def __init__(self, allowance_s, rest_grace_s, why):
        self.started = time.monotonic()
        self.deadline = self.started + allowance_s
        self.rest_grace_s = rest_grace_s
        self.rest_deadline = None
        self.settle_until = None
        self.kill = False
        self.termed = set()
        self.why = why

    def step(self, me, command_running):
        """One pass; True once nothing of the tree is left."""
        table = proc_table()
        desc = descendants(me, table)
        if not desc:
            return True
        now = time.monotonic()
        if self.kill or (self.rest_deadline is not None and now > self.rest_deadline):
            signal_all(desc, signal.SIGKILL)
            return False
        if self.rest_deadline is None:
            ranks, children = mains_of(me, table)
            # Ranks started meanwhile are signalled too; the launcher's children only where no rank ever was.
            fresh = [p for p in (ranks or ([] if self.termed else children)) if p not in self.termed]
            if fresh:
                signal_all(fresh, signal.SIGTERM)
                self.termed.update(fresh)
                say("%s: SIGTERM to %s %s" % (self.why, "process" if len(fresh) == 1 else "processes", " ".join(map(str, fresh))))
            alive = [p for p in self.termed if p in desc]
            if alive and now <= self.deadline:
                return False
            if not alive and command_running and self.termed:
                # The mains have saved and exited; torchrun notices at its next monitor pass (0.1 s in torch >= 2.2,
                # 5 s in 1.13) and exits with their code. A SIGTERM before that makes it raise SignalException and
                # exit 1, and a stop the trainer honoured would read as a crash: it gets --rest-grace to end alone.
                if self.settle_until is None:
                    self.settle_until = now + self.rest_grace_s
                if now < self.settle_until:
                    return False
            if alive:
                say("%d of them still running after %.0f s: stopping everything" % (len(alive), now - self.started))
            else:
                say("they exited after %.1f s; stopping the %d processes left" % (now - self.started, len(desc)))
            self.rest_deadline = now + self.rest_grace_s
            signal_all(desc, signal.SIGTERM)
        return False


USAGE = "usage: infir2_launch.py [--stop-file PATH] [--stop-allowance SEC] [--rest-grace SEC] -- COMMAND [ARG...]"
OPTIONS = {"--stop-file": "stop_file", "--stop-allowance": "stop_allowance", "--rest-grace": "rest_grace"}


class Usage(Exception):
    pass


def parse_args(argv):
    """{stop_file, stop_allowance, rest_grace, command}; Usage for bad input. By hand: argparse (and the re it
    pulls in) was a quarter of this process's start, paid before every step's trainer."""
    args = {"stop_file": None, "stop_allowance": 60.0, "rest_grace": 5.0}
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
        name, eq, value = argv[i].partition("=")
        if name in ("-h", "--help"):
            print(USAGE + "\n\n" + __doc__.split("\n")[0])
            sys.exit(0)
        if name not in OPTIONS:
            raise Usage("unknown option %s" % name)
        if not eq:
            i += 1
            if i >= len(argv):
                raise Usage("%s: expected a value" % name)
            value = argv[i]
        key = OPTIONS[name]
        if key == "stop_file":
            args[key] = value
        else:
            try:
                v = float(value)
            except ValueError:
                v = None
            if v is None or not (math.isfinite(v) and 0 <= v <= MAX_ALLOWANCE_S):
                raise Usage("%s: expected seconds in 0..%d, got %r" % (name, MAX_ALLOWANCE_S, value))
            args[key] = v
        i += 1
    command = argv[i + 1:] if argv[i:i + 1] == ["--"] else argv[i:]
    if not command:
        raise Usage("no command to run (expected: -- COMMAND [ARG...])")
    args["command"] = command
    return args


def spawn(command, out_fd):
    """Start the command with stdout and stderr on `out_fd`, as subprocess.Popen would (no other fd of this process
    inherited, SIGPIPE and SIGXFSZ back to their defaults, which Python ignores), without importing subprocess:
    another ~5 ms of every start. Python < 3.8 has no posix_spawnp: Popen there."""
    if not hasattr(os, "posix_spawnp"):
        import subprocess

        return subprocess.Popen(command, stdout=out_fd, stderr=out_fd).pid
    actions = [(os.POSIX_SPAWN_DUP2, out_fd, 1), (os.POSIX_SPAWN_DUP2, out_fd, 2)]
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd > 2 and fd != out_fd and os.get_inheritable(fd):
                actions.append((os.POSIX_SPAWN_CLOSE, fd))
        except OSError:
            pass
    actions.append((os.POSIX_SPAWN_CLOSE, out_fd))
    return os.posix_spawnp(command[0], command, os.environ, file_actions=actions,
                           setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))


def main(argv):
    try:
        args = parse_args(argv)
    except Usage as err:
        sys.stderr.write("%s\ninfir2_launch.py: error: %s\n" % (USAGE, err))
        return 2
    command = args["command"]
    token = os.environ.get("INFIR2_LAUNCH", "")
    stop_file = args["stop_file"] or (os.path.join(os.getcwd(), ".infir2-stop." + token) if token else None)

    become_subreaper()
    wake = wake_on_signals()
    asked = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: asked.append(signum))
    rfd, wfd = os.pipe()
    try:
        child_pid = spawn(command, wfd)
    except OSError as err:
        say("cannot start %s: %s" % (command[0], err.strerror or err))
        return 127 if isinstance(err, FileNotFoundError) else 126
    finally:
        os.close(wfd)
    relayer = threading.Thread(target=relay, args=(rfd,), daemon=True)
    relayer.start()

    me = os.getpid()
    status = None
    stop = None
    seen = [None]
    while True:
        while True:  # reap every child: the command, and the orphans this subreaper inherited
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid == child_pid:
                status = st
        req = read_stop(stop_file, seen) if stop_file else None
        if req and req["mode"] == "kill":
            if stop is None:
                stop = Stop(0, 0, "kill requested")
            stop.kill = True
            say("kill requested: SIGKILL to every process of the tree")
        elif req and stop is None:
            stop = Stop(req["allowanceSec"], args["rest_grace"], "stop requested")
        if asked and stop is None:
            stop = Stop(args["stop_allowance"], args["rest_grace"], "%s received" % signal.Signals(asked[0]).name)
        if status is not None and stop is None:
            if not descendants(me):
                break
            stop = Stop(args["stop_allowance"], args["rest_grace"], "the command ended, leaving processes")
        if stop is not None and stop.step(me, status is None) and status is not None:
            break
        nap(wake)

    relayer.join(timeout=2)  # the last lines the tree wrote (a writer that outlived it would hold the pipe open)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
            signal.signal(sig, signal.SIG_DFL)
        os.kill(me, sig)
        time.sleep(1)  # SIGKILL and the default-fatal signals end this process here
        return 128 + sig
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
