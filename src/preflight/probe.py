"""What a step's interpreter finds on this node, as one JSON line: the preflight's probe (src/preflight/).

Run by the interpreter the trainer runs under, with the trainer's environment (PYTHONPATH and all), before the
trainer starts; under srun, once per node. Standard library only, so that it runs where torch and the rest are
missing or broken: a package is first looked up without importing it (its distribution's metadata, a checkout's
files and git HEAD), then imported in a child process, one package at a time, each import time-bound, so that an
import that hangs or crashes the interpreter (a segfaulting extension) is reported, not fatal.

    python probe.py --spec '<json>'

spec: {"imports": [keys], "paths": {role: path}, "disk": dir | null, "gpu": bool, "pythonPath": [dirs],
       "importTimeout": seconds, "cached": [fingerprints whose import results the caller holds]}
Prints the report as base64 in short lines, `INFIR2-PREFLIGHT <token> <i> <n> <chunk>`: srun cuts long lines of
a task's output into pieces (each with its `--label` prefix), and the marker finds the lines among stray output.
"""
import base64
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

MARKER = "INFIR2-PREFLIGHT "
# Base64 characters per line: well under the 1 KiB pieces srun was seen to cut a task's long lines into.
CHUNK = 400

# The recipe's package keys (recipe/software-checks.ts), their distributions and what importing one means.
PACKAGES = {
    "torch": {"dists": ["torch"], "module": "torch", "imports": ["torch"]},
    # `import transformer_engine` swallows the ImportError of its torch extension (TE 3cd6870
    # transformer_engine/__init__.py): the pytorch module is what must load.
    "transformerEngine": {
        "dists": ["transformer-engine", "transformer-engine-torch", "transformer-engine-cu12"],
        "module": "transformer_engine",
        "imports": ["transformer_engine", "transformer_engine.pytorch"],
    },
    "numpy": {"dists": ["numpy"], "module": "numpy", "imports": ["numpy"]},
    "flashAttn": {"dists": ["flash-attn"], "module": "flash_attn", "imports": ["flash_attn"]},
    "megatron": {"dists": ["megatron-core"], "module": "megatron", "imports": ["megatron.core"]},
    "slime": {"dists": ["slime"], "module": "slime", "imports": ["slime"]},
    # sgl_kernel is where SGLang's torch extension lives (sgl-project/sglang#5247).
    "sglang": {"dists": ["sglang", "sgl-kernel"], "module": "sglang", "imports": ["sglang", "sgl_kernel"]},
    "ray": {"dists": ["ray"], "module": "ray", "imports": ["ray"]},
}

NP_PRODUCT = re.compile(r"\bnp\.product\(")


def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions():
    """Every installed distribution by normalised name: version, where, and the commit pip recorded (PEP 610)."""
    out = {}
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        return out
    for d in metadata.distributions():
        try:
            name = d.metadata["Name"]
        except Exception:
            continue
        if not name or norm(name) in out:  # the first on sys.path wins, as for an import
            continue
        commit = None
        try:
            direct = d.read_text("direct_url.json")
            if direct:
                commit = (json.loads(direct).get("vcs_info") or {}).get("commit_id")
        except Exception:
            pass
        out[norm(name)] = {"version": d.version, "commit": commit, "where": str(getattr(d, "_path", "") or "")}
    return out


def find_module_dir(module):
    """The directory of a top-level package on sys.path, found without importing it."""
    for entry in sys.path:
        base = os.path.join(entry or os.getcwd(), module)
        if os.path.isdir(base):
            return base
    return None


def read_text(path, limit=1 << 20):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return None


def git_info(start):
    """The git HEAD commit and the tags on it of the checkout holding `start`, read from .git's files (no git)."""
    d = os.path.abspath(start)
    for _ in range(4):
        dot = os.path.join(d, ".git")
        if os.path.exists(dot):
            break
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent
    else:
        return None
    gitdir = dot
    if os.path.isfile(dot):  # a worktree or submodule: "gitdir: <path>"
        text = read_text(dot) or ""
        m = re.match(r"gitdir:\s*(.+)", text.strip())
        if not m:
            return None
        gitdir = os.path.normpath(os.path.join(d, m.group(1).strip()))
    common = gitdir
    common_file = read_text(os.path.join(gitdir, "commondir"))
    if common_file:
        common = os.path.normpath(os.path.join(gitdir, common_file.strip()))
    head = (read_text(os.path.join(gitdir, "HEAD")) or "").strip()
    refs = {}
    packed = read_text(os.path.join(common, "packed-refs")) or ""
    last = None
    for line in packed.splitlines():
        if line.startswith("^") and last:  # the commit an annotated tag points at
            refs[last] = line[1:].strip()
        elif line and not line.startswith("#"):
            parts = line.split(" ", 1)
            if len(parts) == 2:
                refs[parts[1].strip()] = parts[0]
                last = parts[1].strip()

    def resolve(ref):
        for base in (gitdir, common):
            loose = read_text(os.path.join(base, ref))
            if loose:
                return loose.strip()
        return refs.get(ref)

    commit = resolve(head[5:].strip()) if head.startswith("ref:") else head
    if not commit or not re.match(r"^[0-9a-f]{7,40}$", commit):
        return {"root": d, "commit": None, "tags": []}
    tags = [r[len("refs/tags/"):] for r, c in refs.items() if r.startswith("refs/tags/") and c == commit]
    tag_dir = os.path.join(common, "refs", "tags")
    for root, _, files in os.walk(tag_dir):
        for f in files:
            if (read_text(os.path.join(root, f)) or "").strip() == commit:
                tags.append(os.path.relpath(os.path.join(root, f), tag_dir))
    return {"root": d, "commit": commit, "tags": sorted(set(tags))}


def megatron_facts(pkg_dir, findings):
    """Megatron core's version (megatron/core/package_info.py) and where its source calls np.product."""
    info = read_text(os.path.join(pkg_dir, "core", "package_info.py"))
    version = None
    if info:
        parts = {}
        for key in ("MAJOR", "MINOR", "PATCH", "PRE_RELEASE"):
            m = re.search(r"^%s\s*=\s*['\"]?([^'\"\n]*)['\"]?\s*$" % key, info, re.M)
            parts[key] = m.group(1).strip() if m else ""
        if parts["MAJOR"] and parts["MINOR"]:
            version = "%s.%s.%s%s" % (parts["MAJOR"], parts["MINOR"], parts["PATCH"] or "0", parts["PRE_RELEASE"])
    hits = []
    core = os.path.join(pkg_dir, "core")
    root = os.path.dirname(pkg_dir)
    for dirpath, dirnames, files in os.walk(core):
        dirnames.sort()
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            text = read_text(os.path.join(dirpath, f), limit=4 << 20) or ""
            if "np.product(" not in text:
                continue
            for n, line in enumerate(text.splitlines(), 1):
                if NP_PRODUCT.search(line) and not line.lstrip().startswith("#"):
                    hits.append("%s:%d" % (os.path.relpath(os.path.join(dirpath, f), root), n))
    if hits:
        # The save path first: validation.py is what a distributed-optimizer save calls (issue 32).
        hits.sort(key=lambda h: (0 if "validation.py" in h else 1, h))
        findings["megatron.npProduct"] = hits[0] + (" (and %d more)" % (len(hits) - 1) if len(hits) > 1 else "")
    return version


def package_facts(key, dists, findings):
    spec = PACKAGES[key]
    found = None
    for d in spec["dists"]:
        if norm(d) in dists:
            found = dists[norm(d)]
            break
    pkg_dir = find_module_dir(spec["module"])
    facts = {"installed": bool(found or pkg_dir), "version": found and found["version"], "commits": [], "location": pkg_dir or (found and found["where"])}
    if found and found.get("commit"):
        facts["commits"].append(found["commit"])
    if found:
        # A wheel built from git carries its commit as the local label (TransformerEngine: 2.4.0+3cd6870).
        m = re.search(r"\+(?:g|git)?([0-9a-f]{7,40})$", found["version"] or "")
        if m:
            facts["commits"].append(m.group(1))
        # TransformerEngine's parts must agree (TE 3cd6870 transformer_engine/common/__init__.py).
        facts["dists"] = {d: dists[norm(d)]["version"] for d in spec["dists"] if norm(d) in dists}
    if pkg_dir:
        if key == "megatron":
            v = megatron_facts(pkg_dir, findings)
            if v:
                facts["version"] = v
        git = git_info(pkg_dir)
        if git and git["commit"]:
            facts["commits"].insert(0, git["commit"])
            facts["tags"] = git["tags"]
            facts["checkout"] = git["root"]
    return facts


def nvidia_smi():
    """GPU models, compute capability and the driver, from nvidia-smi (no CUDA context is made)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,compute_cap,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20,
        )
    except FileNotFoundError:
        return {"error": "nvidia-smi not found"}
    except subprocess.TimeoutExpired:
        return {"error": "nvidia-smi did not answer in 20 s"}
    if out.returncode != 0:
        said = (out.stderr or out.stdout).strip().splitlines()
        return {"error": "nvidia-smi: %s" % (said[-1] if said else "exit %d" % out.returncode)}
    gpus = []
    driver = None
    for line in out.stdout.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 4:
            continue
        driver = cells[1]
        gpus.append({"name": cells[0], "capability": cells[2] if re.match(r"^\d+\.\d+$", cells[2]) else None, "memoryMiB": cells[3]})
    return {"gpus": gpus, "driver": driver}


def path_facts(paths):
    out = {}
    for role, p in paths.items():
        targets = [p]
        if not os.path.exists(p) and os.path.exists(p + ".bin"):  # a Megatron indexed-dataset prefix
            targets = [p + ".bin", p + ".idx"]
        why = None
        for t in targets:
            try:
                if os.path.isdir(t):
                    os.listdir(t)
                else:
                    with open(t, "rb") as f:
                        f.read(1)
            except OSError as e:
                why = "%s: %s" % (t, e.strerror or str(e))
                break
        out[role] = {"path": p, "ok": why is None, "why": why}
    return out


def disk_facts(d):
    p = os.path.abspath(d)
    while not os.path.exists(p) and os.path.dirname(p) != p:
        p = os.path.dirname(p)
    try:
        st = os.statvfs(p)
    except OSError as e:
        return {"dir": d, "at": p, "free": None, "why": e.strerror}
    return {"dir": d, "at": p, "free": st.f_bavail * st.f_frsize}


def fingerprint(spec, dists, packages):
    """What the import results depend on: the interpreter, its path and libraries, what is installed, what is asked."""
    h = hashlib.sha256()
    h.update(json.dumps([sys.executable, sys.version, spec.get("imports"), spec.get("gpu")]).encode())
    for entry in sys.path:
        try:
            h.update(("%s:%s" % (entry, os.stat(entry or ".").st_mtime_ns)).encode())
        except OSError:
            h.update(entry.encode())
    for var in ("LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_HOME", "CUDA_VISIBLE_DEVICES"):
        h.update(("%s=%s" % (var, os.environ.get(var, ""))).encode())
    h.update(json.dumps(sorted((k, v["version"]) for k, v in dists.items())).encode())
    h.update(json.dumps({k: [v.get("version"), v.get("commits")] for k, v in packages.items()}, sort_keys=True).encode())
    return h.hexdigest()[:32]


# --- the child: imports one package after another, a JSON line after each --------------------------------------

def cublaslt_version():
    """The cuBLASLt torch loaded (or ships), asked through cublasLtGetVersion: no GPU is touched."""
    import ctypes
    candidates = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                m = re.search(r"(/\S*libcublasLt\.so[.\d]*)$", line.strip())
                if m and m.group(1) not in candidates:
                    candidates.append(m.group(1))
    except OSError:
        pass
    if not candidates:
        import glob
        import torch
        here = os.path.dirname(torch.__file__)
        for pattern in ("lib/libcublasLt.so*", "../nvidia/cublas/lib/libcublasLt.so*"):
            candidates += sorted(glob.glob(os.path.join(here, pattern)))
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
            lib.cublasLtGetVersion.restype = ctypes.c_size_t
            v = int(lib.cublasLtGetVersion())
            return "%d.%d.%d" % (v // 10000, (v // 100) % 100, v % 100)
        except (OSError, AttributeError):
            continue
    return None


def after_import(key, want_gpu):
    """What a package says about itself once imported."""
    facts = {}
    if key == "torch":
        import torch
        facts["version"] = torch.__version__
        facts["cuda"] = getattr(torch.version, "cuda", None)
        if facts["cuda"]:
            facts["cublasLt"] = cublaslt_version()
            if want_gpu:
                facts["cudaAvailable"] = bool(torch.cuda.is_available())
                facts["deviceCount"] = torch.cuda.device_count() if facts["cudaAvailable"] else 0
    elif key == "numpy":
        import numpy
        facts["version"] = numpy.__version__
        facts["hasProduct"] = hasattr(numpy, "product")
    else:
        mod = sys.modules.get(PACKAGES[key]["module"])
        v = getattr(mod, "__version__", None)
        if isinstance(v, str):
            facts["version"] = v
    return facts


def child(keys, want_gpu):
    # The trainer's stdout is for progress lines; the parent reads this child's.
    for key in keys:
        t0 = time.time()
        rec = {"key": key}
        try:
            for m in PACKAGES[key]["imports"]:
                __import__(m)
            rec.update(after_import(key, want_gpu))
            rec["ok"] = True
        except BaseException as e:  # noqa: BLE001 - a broken package is a finding, never a crash
            lines = str(e).strip().splitlines()
            rec["ok"] = False
            rec["error"] = "%s: %s" % (type(e).__name__, lines[-1] if lines else "")
        rec["seconds"] = round(time.time() - t0, 3)
        sys.__stdout__.write(json.dumps(rec) + "\n")
        sys.__stdout__.flush()


def run_imports(keys, want_gpu, timeout):
    """Each package imported in a child, in order; a hung or crashed import is recorded, and the rest go on."""
    results = {}
    todo = list(keys)
    while todo:
        # What a package prints on import goes to a file: a full stderr pipe would block the child.
        errors = tempfile.TemporaryFile(mode="w+")
        proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--child", json.dumps({"keys": todo, "gpu": want_gpu})],
            stdout=subprocess.PIPE, stderr=errors,
        )
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        current = todo[0]
        deadline = time.time() + timeout
        buf = ""
        while todo:
            left = deadline - time.time()
            if left <= 0:
                proc.kill()
                results[current] = {"ok": False, "error": "import did not finish in %g s" % timeout, "timeout": True}
                todo.pop(0)
                break
            if not sel.select(timeout=min(left, 1.0)):
                continue
            chunk = os.read(proc.stdout.fileno(), 65536).decode("utf-8", "replace")
            if not chunk:  # the child is gone: the import in progress killed it
                proc.wait()
                errors.seek(0)
                err = [l for l in errors.read().strip().splitlines() if l.strip()]
                results[current] = {"ok": False, "error": "the interpreter died importing it (exit %s)%s" % (proc.returncode, ": " + err[-1] if err else "")}
                todo.pop(0)
                break
            buf += chunk
            while "\n" in buf:
                line, buf = buf.split("\n", 1)
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                key = rec.pop("key", None)
                if key in todo:
                    results[key] = rec
                    todo.remove(key)
                    current = todo[0] if todo else None
                    deadline = time.time() + timeout
        sel.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
        errors.close()
    return results


def main():
    # The probe's own directory is not the trainer's: only the step's entries stay on sys.path.
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        sys.path.pop(0)
    if len(sys.argv) >= 3 and sys.argv[1] == "--child":
        spec = json.loads(sys.argv[2])
        sys.stdout = sys.stderr  # a package that prints on import must not break the JSON lines
        child(spec["keys"], spec["gpu"])
        return
    t0 = time.time()
    spec = json.loads(sys.argv[sys.argv.index("--spec") + 1]) if "--spec" in sys.argv else {}
    for d in reversed(spec.get("pythonPath") or []):
        sys.path.insert(0, d)
        os.environ["PYTHONPATH"] = os.pathsep.join([d] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    findings = {}
    dists = distributions()
    packages = {key: package_facts(key, dists, findings) for key in PACKAGES}
    fp = fingerprint(spec, dists, packages)
    imports = [k for k in spec.get("imports", []) if k in PACKAGES and packages[k]["installed"]]
    report = {
        "host": socket.gethostname(),
        "python": {"executable": sys.executable, "version": sys.version.split()[0]},
        "packages": packages,
        "findings": findings,
        "fingerprint": fp,
    }
    if fp in (spec.get("cached") or []):
        report["imports"] = "cached"
    else:
        report["imports"] = run_imports(imports, bool(spec.get("gpu")), float(spec.get("importTimeout") or 60))
    if spec.get("gpu"):
        report["nvidia"] = nvidia_smi()
    report["paths"] = path_facts(spec.get("paths") or {})
    if spec.get("disk"):
        report["disk"] = disk_facts(spec["disk"])
    report["seconds"] = round(time.time() - t0, 3)
    data = base64.b64encode(json.dumps(report).encode("utf-8")).decode("ascii")
    chunks = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)] or [""]
    token = "%s-%d-%d" % (re.sub(r"[^A-Za-z0-9.]", "", socket.gethostname()) or "node", os.getpid(), int(t0 * 1000))
    sys.stdout.write("".join("%s%s %d %d %s\n" % (MARKER, token, i, len(chunks), c) for i, c in enumerate(chunks)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
