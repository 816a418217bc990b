#!/usr/bin/env python3
"""FP8 vs BF16 on the tiny CPT: same seed, same data, same schedule; only the linears' numerics differ.

Runs `trainer/main.py pretrain` twice (the tiny recipe's CPT, one uninterrupted run each) and prints the final
loss of each (the validation loss after the last iteration: 8 x 16 x 64 held-out tokens, the same for both),
their relative difference (must be within 1%), the training loss (mean of the last 50 iterations) and its
difference, the EMA(0.9)-smoothed per-step gap DeepSeek-V3 reports, and tokens/s in both precisions.

    .venv/bin/python bench/trainer_fp8_vs_bf16.py [--iters 600] [--device auto]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAIN = os.path.join(ROOT, "trainer", "main.py")
DATA = os.path.join(ROOT, "trainer", "data", "cpt.jsonl")
SEQ, GBS = 64, 16


def cpt_args(iters, save, device):
    decay = max(1, iters // 5)
    return ["pretrain", "--data-path", DATA, "--num-layers", "2", "--hidden-size", "64", "--ffn-hidden-size", "128",
            "--num-attention-heads", "4", "--num-query-groups", "2", "--max-position-embeddings", "128",
            "--rotary-base", "500", "--seq-length", str(SEQ), "--micro-batch-size", "16", "--global-batch-size",
            str(GBS), "--train-iters", str(iters), "--lr", "5e-3", "--min-lr", "5e-4", "--lr-decay-style", "WSD",
            "--lr-warmup-iters", str(min(10, iters // 10)), "--lr-wsd-decay-style", "cosine",
            "--lr-wsd-decay-iters", str(decay), "--weight-decay", "0.1", "--adam-beta2", "0.99",
            "--init-method-std", "0.05", "--seed", "1234", "--log-interval", "1", "--eval-interval", str(iters),
            "--eval-iters", "8", "--save", save, "--device", device]


def run(precision, iters, device, tmp):
    extra = ["--bf16"] + (["--fp8-format", "e4m3", "--fp8-recipe", "blockwise", "--fp8-block-size", "32"]
                          if precision == "fp8" else [])
    t0 = time.time()
    p = subprocess.run([sys.executable, MAIN, *cpt_args(iters, os.path.join(tmp, precision), device), *extra],
                       capture_output=True, text=True)
    wall = time.time() - t0
    if p.returncode != 0:
        sys.exit(f"{precision} run failed ({p.returncode}): {p.stderr.strip()}")
    losses, ms = [], []
    for line in p.stdout.splitlines():
        m = re.search(r"iteration\s+(\d+)/.*elapsed time per iteration \(ms\): ([\d.]+) .*lm loss: ([-+.\dEe]+)",
                      line)
        if m:
            ms.append(float(m.group(2)))
            losses.append(float(m.group(3)))
    valid = float(re.search(r"lm loss value: ([-+.\dEe]+)", p.stdout).group(1))
    steady = sorted(ms[len(ms) // 10:])[len(ms[len(ms) // 10:]) // 2]  # median, after warm-up
    return {"losses": losses, "valid": valid, "tok_s": GBS * SEQ / (steady / 1000.0), "wall": wall}


def ema(xs, c=0.9):
    out, v = [], None
    for x in xs:
        v = x if v is None else c * v + (1 - c) * x
        out.append(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=600, help="the tiny recipe's CPT length")
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        res = {p: run(p, args.iters, args.device, tmp) for p in ("bf16", "fp8")}
    b, f = res["bf16"], res["fp8"]
    tail_b = sum(b["losses"][-50:]) / len(b["losses"][-50:])
    tail_f = sum(f["losses"][-50:]) / len(f["losses"][-50:])
    rel = abs(tail_f - tail_b) / tail_b
    rel_v = abs(f["valid"] - b["valid"]) / b["valid"]
    eb, ef = ema(b["losses"]), ema(f["losses"])
    gaps = [abs(x - y) / y for x, y in zip(ef, eb)][len(eb) // 5:]
    print(f"tiny CPT, {args.iters} iterations x {GBS} x {SEQ} tokens, seed 1234, same data order")
    print(f"{'':6} {'final loss (valid)':>19} {'train loss (last 50)':>21} {'tokens/s':>10} {'wall s':>7}")
    for name, r, tail in (("bf16", b, tail_b), ("fp8", f, tail_f)):
        print(f"{name:6} {r['valid']:19.4f} {tail:21.4f} {r['tok_s']:10.0f} {r['wall']:7.1f}")
    print(f"relative difference: final loss {100 * rel_v:.3f}%  (train loss {100 * rel:.3f}%; EMA(0.9) per-step "
          f"gap after warm-up: mean {100 * sum(gaps) / len(gaps):.2f}%, max {100 * max(gaps):.2f}%)")
    if os.environ.get("BENCH_CURVES"):
        step = max(1, len(eb) // 12)
        print("EMA loss every", step, "iters: bf16", [round(x, 3) for x in eb[::step]])
        print("EMA loss every", step, "iters: fp8 ", [round(x, 3) for x in ef[::step]])
    print(f"FP8 / BF16 throughput: {f['tok_s'] / b['tok_s']:.2f}x (FP8 is emulated: expect a slowdown on CPU)")
    ok = rel_v <= 0.01
    print("PASS: final losses within 1%" if ok else "FAIL: FP8 and BF16 final losses differ by more than 1%")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
