#!/usr/bin/env python3
"""Real FP8 on a Hopper GPU, against BF16: GEMMs, a ~0.6B Qwen2-style model end to end, and the loss gap.

  gemm   TFLOP/s of BF16 (torch.mm) and FP8 (torch._scaled_mm, the recipe's 1x128/128x128 block scales) at
         4096^3 and at the linears' shapes of the tiny model and of the 0.6B model; FP8 also with the activation
         quantiser in the timing (what a forward linear pays), and per-tensor FP8 as the tensor cores' ceiling.
  model  the trainer (`trainer/main.py pretrain --device cuda`) on a 12-layer, hidden-2048 Qwen2-style model
         (~0.6B parameters with a 32768-row vocabulary, random init), 8 x 2048 tokens a step: tokens/s and peak
         memory (Megatron's `max allocated`) in BF16 and FP8.
  loss   FP8 vs BF16 after a fixed number of steps on the committed CPT corpus (the 0.6B model, 200 steps of
         16 x 1024 tokens, and the tiny recipe's CPT, 600 steps), with a second BF16 seed as the noise floor.

    python bench/gpu_fp8.py [--sections gemm,model,loss] [--json OUT.json]

Prints a table per section; needs CUDA, torch >= 2.1 with float8, Triton, and an sm_90 GPU for the FP8 parts.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "trainer"))
MAIN = os.path.join(ROOT, "trainer", "main.py")
CPT = os.path.join(ROOT, "trainer", "data", "cpt.jsonl")

FP8 = ["--bf16", "--fp8-format", "e4m3", "--fp8-recipe", "blockwise", "--fp8-block-size", "128"]
BF16 = ["--bf16"]
# ~0.6B Qwen2-style: 12 x (QKV 2048->3072 + proj + SwiGLU 2x5632) = 540M + 2 x 32768 x 2048 embeddings/head
MID = ["--num-layers", "12", "--hidden-size", "2048", "--ffn-hidden-size", "5632", "--num-attention-heads", "16",
       "--num-query-groups", "4", "--rotary-base", "1000000", "--untie-embeddings-and-output-weights",
       "--make-vocab-size-divisible-by", "32768", "--init-method-std", "0.02"]
TINY = ["--num-layers", "2", "--hidden-size", "64", "--ffn-hidden-size", "128", "--num-attention-heads", "4",
        "--num-query-groups", "2", "--max-position-embeddings", "128", "--rotary-base", "500",
        "--init-method-std", "0.05"]


def linears(tokens, h, ffn, heads, groups):
    hd = h // heads
    return [("qkv", tokens, h, (heads + 2 * groups) * hd), ("proj", tokens, h, h), ("fc1", tokens, h, 2 * ffn),
            ("fc2", tokens, ffn, h)]


# ---------------------------------------------------------------------------------------------------------------

def bench_ms(fn):
    from triton.testing import do_bench
    return do_bench(fn, warmup=25, rep=200, return_mode="median")


def gemm_section():
    from infir2_trainer import fp8_gemm as G
    from infir2_trainer.fp8 import E4M3
    shapes = [("square", 4096, 4096, 4096)]
    shapes += [(f"tiny {n}", m, k, nn) for n, m, k, nn in linears(16 * 64, 64, 128, 4, 2)]
    shapes += [(f"0.6B {n}", m, k, nn) for n, m, k, nn in linears(8 * 2048, 2048, 5632, 16, 4)]
    rows = []
    for name, m, k, n in shapes:
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        w = torch.randn(n, k, device="cuda") * 0.02
        wb = w.to(torch.bfloat16)
        wq, _, ws = G.quant_weight(w, E4M3)
        xq, xs = G.quant_rows(x, E4M3, width=wq.shape[1])
        t_bf16 = bench_ms(lambda: torch.mm(x, wb.t()))
        t_fp8 = bench_ms(lambda: G.scaled_mm(xq, wq.t(), xs.t(), ws.t(), torch.bfloat16))

        def fwd():
            q, s = G.quant_rows(x, E4M3, width=wq.shape[1])
            return G.scaled_mm(q, wq.t(), s.t(), ws.t(), torch.bfloat16)
        t_fwd = bench_ms(fwd)
        one = torch.ones((), device="cuda")
        xt, wt = x.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
        t_tensor = bench_ms(lambda: torch._scaled_mm(xt, wt.t(), scale_a=one, scale_b=one,
                                                     out_dtype=torch.bfloat16, use_fast_accum=True)) \
            if k % 16 == 0 and n % 16 == 0 else float("nan")
        t_q = bench_ms(lambda: G.quant_rows(x, E4M3))
        flop = 2.0 * m * k * n
        rows.append({"shape": name, "m": m, "k": k, "n": n,
                     "bf16_tflops": flop / t_bf16 / 1e9, "fp8_tflops": flop / t_fp8 / 1e9,
                     "fp8_with_quant_tflops": flop / t_fwd / 1e9, "fp8_tensorwise_tflops": flop / t_tensor / 1e9,
                     "quant_rows_gbs": (m * k * 3 + m * k // 128 * 4) / t_q / 1e6})
    print(f"\nGEMM TFLOP/s on {torch.cuda.get_device_name()} (median of do_bench; M x K x N; FP8 = E4M3 with 1x128 "
          f"activation and 128x128 weight FP32 scales)")
    print(f"{'shape':14} {'M':>6} {'K':>5} {'N':>6} {'BF16':>7} {'FP8':>7} {'ratio':>6} {'FP8+quant':>9} "
          f"{'ratio':>6} {'FP8 tensorwise':>14} {'quant GB/s':>10}")
    for r in rows:
        print(f"{r['shape']:14} {r['m']:6} {r['k']:5} {r['n']:6} {r['bf16_tflops']:7.1f} {r['fp8_tflops']:7.1f} "
              f"{r['fp8_tflops'] / r['bf16_tflops']:5.2f}x {r['fp8_with_quant_tflops']:9.1f} "
              f"{r['fp8_with_quant_tflops'] / r['bf16_tflops']:5.2f}x {r['fp8_tensorwise_tflops']:14.1f} "
              f"{r['quant_rows_gbs']:10.0f}")
    return rows


# ---------------------------------------------------------------------------------------------------------------

ITER = re.compile(r"iteration\s+(\d+)/.*elapsed time per iteration \(ms\): ([\d.]+) .*lm loss: ([-+.\dEe]+|NAN|INF)")


def train(args, tag):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    t0 = time.time()
    p = subprocess.run([sys.executable, MAIN, "pretrain", *args, "--device", "cuda"], capture_output=True, text=True,
                       env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{tag}: exit {p.returncode}: {p.stderr.strip()[-2000:]}")
    its = [(int(a), float(b), float(c)) for a, b, c in ITER.findall(p.stdout)]
    if not its:
        raise RuntimeError(f"{tag}: no iteration lines in the output: {p.stdout[-1500:]!r} {p.stderr[-1500:]!r}")
    mem = re.findall(r"max allocated: ([\d.]+)", p.stdout)
    valid = re.findall(r"lm loss value: ([-+.\dEe]+)", p.stdout)
    kernels = re.search(r" > kernels: (.*)", p.stdout)
    return {"its": its, "max_alloc_mb": float(mem[-1]) if mem else float("nan"),
            "valid": float(valid[-1]) if valid else float("nan"), "wall_s": time.time() - t0,
            "kernels": kernels.group(1) if kernels else "?"}


def model_section(iters=30, mbs=8, seq=2048):
    common = ["--data-path", CPT, *MID, "--seq-length", str(seq), "--max-position-embeddings", str(seq),
              "--micro-batch-size", str(mbs), "--global-batch-size", str(mbs), "--train-iters", str(iters),
              "--lr", "2e-4", "--min-lr", "2e-5", "--lr-decay-style", "cosine", "--lr-warmup-iters", "20",
              "--clip-grad", "1.0", "--log-interval", "1", "--seed", "1234"]
    res = {}
    for name, prec in (("bf16", BF16), ("fp8", FP8)):
        r = train(common + prec, f"model {name}")
        ms = statistics.median([b for i, b, _ in r["its"] if i > 5])
        res[name] = {"ms_per_iter": ms, "tokens_per_s": mbs * seq * 1000.0 / ms, "max_alloc_gib":
                     r["max_alloc_mb"] / 1024, "kernels": r["kernels"], "last_loss": r["its"][-1][2]}
    b, f = res["bf16"], res["fp8"]
    print(f"\n0.6B Qwen2-style model (12 x 2048, FFN 5632, GQA 16/4, vocab 32768), {mbs} x {seq} tokens a step, "
          f"median of iterations 6-{iters}")
    print(f"{'':6} {'ms/iter':>8} {'tokens/s':>9} {'peak mem GiB':>12}  kernels")
    for name, r in res.items():
        print(f"{name:6} {r['ms_per_iter']:8.1f} {r['tokens_per_s']:9.0f} {r['max_alloc_gib']:12.2f}  {r['kernels']}")
    print(f"FP8 / BF16: throughput {f['tokens_per_s'] / b['tokens_per_s']:.3f}x, peak memory "
          f"{f['max_alloc_gib'] / b['max_alloc_gib']:.3f}x")
    return res


def loss_runs(tag, common, decay):
    out = {}
    for name, prec, seed in (("bf16", BF16, "1234"), ("bf16_seed2", BF16, "4321"), ("fp8", FP8, "1234")):
        r = train(common + prec + ["--seed", seed], f"{tag} {name}")
        tail = [c for _, _, c in r["its"][-decay:]]
        out[name] = {"valid": r["valid"], "train_tail": sum(tail) / len(tail), "wall_s": r["wall_s"]}
    b, b2, f = out["bf16"], out["bf16_seed2"], out["fp8"]
    gap, noise = abs(f["valid"] - b["valid"]) / b["valid"], abs(b2["valid"] - b["valid"]) / b["valid"]
    out["gap_rel"], out["noise_rel"] = gap, noise
    print(f"{tag:28} valid loss: BF16 {b['valid']:.4f}  BF16 seed 2 {b2['valid']:.4f}  FP8 {f['valid']:.4f} | "
          f"FP8-BF16 {100 * gap:.2f}%  seed noise {100 * noise:.2f}% | train (last {decay}): BF16 "
          f"{b['train_tail']:.4f} seed2 {b2['train_tail']:.4f} FP8 {f['train_tail']:.4f}")
    return out


def loss_section(only_tiny=False):
    print("\nFP8 vs BF16 after a fixed number of steps (validation loss on the corpus' held-out 3%), same seed; a "
          "second BF16 seed (init and data order) is the noise floor")
    mid = ["--data-path", CPT, *MID, "--seq-length", "1024", "--max-position-embeddings", "1024",
           "--micro-batch-size", "16", "--global-batch-size", "16", "--train-iters", "200", "--lr", "3e-4",
           "--min-lr", "3e-5", "--lr-decay-style", "WSD", "--lr-warmup-iters", "20", "--lr-wsd-decay-iters", "40",
           "--lr-wsd-decay-style", "cosine", "--weight-decay", "0.1", "--clip-grad", "1.0", "--log-interval", "1",
           "--eval-interval", "200", "--eval-iters", "4"]
    tiny = ["--data-path", CPT, *TINY, "--seq-length", "64", "--micro-batch-size", "16", "--global-batch-size", "16",
            "--train-iters", "600", "--lr", "5e-3", "--min-lr", "5e-4", "--lr-decay-style", "WSD",
            "--lr-warmup-iters", "10", "--lr-wsd-decay-iters", "120", "--lr-wsd-decay-style", "cosine",
            "--weight-decay", "0.1", "--adam-beta2", "0.99", "--clip-grad", "1.0", "--log-interval", "1",
            "--eval-interval", "600", "--eval-iters", "8"]
    out = {"tiny CPT, 600 x 16 x 64": loss_runs("tiny CPT, 600 x 16 x 64 tokens", tiny, 50)}
    if only_tiny:
        return out
    out["0.6B, 200 x 16 x 1024"] = loss_runs("0.6B, 200 x 16 x 1024 tokens", mid, 40)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="gemm,model,loss")
    ap.add_argument("--json", default=None, help="also write every figure to this file")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/gpu_fp8.py needs a CUDA GPU")
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"cuBLASLt {torch._C._cuda_getCompiledVersion() if hasattr(torch._C, '_cuda_getCompiledVersion') else '?'}")
    result, failed = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}, []
    for section in args.sections.split(","):
        fn = {"gemm": gemm_section, "model": model_section, "loss": loss_section,
              "tinyloss": lambda: loss_section(only_tiny=True)}[section]
        try:
            result[section] = fn()
        except Exception as e:  # noqa: BLE001 - report and go on to the next section
            failed.append(section)
            print(f"\n{section}: FAILED: {type(e).__name__}: {e}")
        if args.json:  # after every section: a run cut short keeps what it measured
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory():
        sys.exit(main())
