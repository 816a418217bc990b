#!/usr/bin/env python3
"""Run InfiR2's tools/bf16_cast_fp8.py unchanged, then mend what its output lacks (infir2 FIXES `fp8-fmt`).

bf16_cast_fp8.py writes quantization_config without "fmt" (slime asserts fmt == "e4m3": KeyError 'fmt'),
copies only five tokenizer/config files (vocab.json and merges.txt are lost), and copies the index's
metadata.total_size unchanged although it added the scale tensors. Its --force-pow-2-scale is argparse
type=bool, so only an empty string means False. Standard library only: it runs beside the tool's own Python.

usage: fp8-cast.py --tool bf16_cast_fp8.py --input-bf16-hf-path IN --output-fp8-hf-path OUT
                   [--force-pow-2-scale true|false] [--fmt e4m3]
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tool", required=True)
    p.add_argument("--input-bf16-hf-path", required=True)
    p.add_argument("--output-fp8-hf-path", required=True)
    p.add_argument("--force-pow-2-scale", choices=["true", "false"], default="true")
    p.add_argument("--fmt", default=None)
    a = p.parse_args()
    src, out = a.input_bf16_hf_path, a.output_fp8_hf_path

    # A retry starts from scratch: a half-written output from a killed attempt must not survive.
    if os.path.isdir(out):
        shutil.rmtree(out)
    cmd = [sys.executable, a.tool, "--input-bf16-hf-path", src, "--output-fp8-hf-path", out]
    if a.force_pow_2_scale == "false":
        cmd += ["--force-pow-2-scale", ""]  # argparse type=bool: only "" is False
    print("running:", " ".join(cmd), flush=True)
    rc = subprocess.call(cmd)
    if rc != 0:
        print(f"error: {a.tool} exited with {rc}", file=sys.stderr)
        return rc

    # Tokenizer and config files the tool does not copy.
    for name in sorted(os.listdir(src)):
        if name.endswith(".safetensors") or name == "model.safetensors.index.json":
            continue
        if os.path.isfile(os.path.join(src, name)) and not os.path.exists(os.path.join(out, name)):
            shutil.copy2(os.path.join(src, name), os.path.join(out, name))
            print(f"copied {name}", flush=True)

    # The index's total_size, recomputed from the shards' safetensors headers.
    index_path = os.path.join(out, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
        total = 0
        for shard in sorted(set(index.get("weight_map", {}).values())):
            with open(os.path.join(out, shard), "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n))
            total += sum(t["data_offsets"][1] - t["data_offsets"][0] for k, t in header.items() if k != "__metadata__")
        index.setdefault("metadata", {})["total_size"] = total
        write_json(index_path, index)

    config_path = os.path.join(out, "config.json")
    with open(config_path) as f:
        config = json.load(f)
    if a.fmt:
        config.setdefault("quantization_config", {})["fmt"] = a.fmt
    write_json(config_path, config)
    print(f"quantization_config: {json.dumps(config.get('quantization_config'))}", flush=True)
    return 0


def write_json(path: str, data: object) -> None:
    """Write through a temporary file so a crash never leaves half a config. The temporary file has an
    unguessable name and is created exclusively: a link planted at a guessable one would be written through."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=os.path.basename(path) + ".tmp-")
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


if __name__ == "__main__":
    sys.exit(main())
