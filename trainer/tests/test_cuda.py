"""The CUDA path on a Hopper GPU: real FP8 kernels against the emulation, and the trainer end to end.

Marked `cuda`: skipped, saying why, where there is no GPU / no float8 PyTorch / no Hopper (conftest.py).
Tolerances (measured on an H100, see docs/gpu.md): the Triton activation and gradient quantisers are bit-identical to
fp8.py, the weight quantiser value-identical (a zero may lose its sign); the tensor-core GEMMs differ from fp8.py's
FP32 products by accumulation order and output rounding only: a relative (L2) error under 2e-3 for the BF16 outputs
(forward, dgrad; 6e-4 to 8e-4 measured) and under 1e-3 for the FP32 wgrad (1.2e-4 measured).
"""
import os

import pytest
import torch

from conftest import MAIN, MODEL, ok, losses, pretrain_args, run

pytestmark = pytest.mark.cuda

FP8_128 = ["--bf16", "--fp8-format", "e4m3", "--fp8-recipe", "blockwise", "--fp8-block-size", "128"]
BF16 = ["--bf16"]


def _bits(t):
    return t.view(torch.uint8) if t.element_size() == 1 else t.view(torch.int32)


def _hard(m, k, seed):
    """BF16 values over 20 binades, with blocks that are zero, hold an exact amax of 1.75 * 2^e (448 / amax is a
    power of two), a subnormal, and ties of the FP8 grid."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g) * torch.logspace(-10, 10, k, base=2.0)
    x[1, :] = 0
    x[2, :128] = 3.5
    x[2, 5] = -3.5
    x[3, 0] = 1e-39
    x[4, :16] = torch.tensor([1.0625, 1.1875, 17.0, 19.0, 9.5, 10.5, 0.0078125, 3.5, -1.0625, -17.0, 448.0, 449.0,
                              2.0 ** -9, 3 * 2.0 ** -10, 2.0 ** -7, 240.0])
    return x.to(torch.bfloat16).cuda()


@pytest.mark.parametrize("fmt_name", ["e4m3", "e5m2"])
@pytest.mark.parametrize("m,k", [(1024, 2048), (333, 200), (128, 64)])
def test_triton_quantisers_are_bit_identical(fmt_name, m, k):
    from infir2_trainer import fp8_gemm as G
    from infir2_trainer.fp8 import E4M3, E5M2
    fmt = E4M3 if fmt_name == "e4m3" else E5M2
    x = _hard(m, k, m + k)
    for fast, ref in ((G.quant_rows, G.quant_rows_ref), (G.quant_cols, G.quant_cols_ref)):
        a, b = fast(x, fmt), ref(x, fmt)
        for u, v in zip(a, b):
            assert u.shape == v.shape
            assert torch.equal(_bits(u), _bits(v)), f"{fast.__name__}: {(_bits(u) != _bits(v)).sum()} differ"
    w = (torch.randn(k, m, device="cuda") * 0.02)
    w[0, :] = 0
    for u, v in zip(G.quant_weight(w, fmt), G.quant_weight_ref(w, fmt)):
        # the weight kernel may write +0 where the emulation has -0 (fp8_kernels.to_grid): equal values
        assert u.shape == v.shape and torch.equal(u.float(), v.float())


def _rel(a, b):
    a, b = a.detach().float(), b.detach().float()
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("m,k,n", [(4096, 2048, 3072), (2048, 5632, 2048), (1024, 64, 128), (1000, 192, 80)])
def test_tensor_core_gemms_match_the_emulation(m, k, n):
    from infir2_trainer import fp8_gemm as G
    from infir2_trainer.fp8 import Precision, _LinearFn
    torch.manual_seed(0)
    prec = Precision(bf16=True, fp8="e4m3", block=128)
    x = (torch.randn(m, k, device="cuda") * 2).to(torch.bfloat16)
    w = torch.randn(n, k, device="cuda") * 0.02
    dy = torch.randn(m, n, device="cuda").to(torch.bfloat16)
    xe, we = x.float().requires_grad_(), w.clone().requires_grad_()
    ye = _LinearFn.apply(xe, we, None, prec)  # FP32 GEMMs on the FP8 grid (TF32 off: runtime.setup does it too)
    ye.backward(dy.float())
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    yr = G.fp8_linear(xr, wr, None, prec)
    yr.backward(dy)
    assert _rel(yr, ye) < 2e-3
    assert _rel(xr.grad, xe.grad) < 2e-3
    assert _rel(wr.grad, we.grad) < 1e-3


def _train(tmp_path, name, extra, iters=8, prec=FP8_128):
    save = str(tmp_path / name)
    return ok(run(pretrain_args(save, iters=iters, extra=["--device", "cuda", *extra], prec=prec), timeout=300)), save


def test_trainer_runs_real_fp8_and_resumes(tmp_path):
    """pretrain on CUDA with real FP8 GEMMs: the log names them, reports memory as Megatron does, saves Megatron
    checkpoints; a run stopped by --exit-interval resumes and ends where the straight run ends."""
    p, save = _train(tmp_path, "straight", ["--save-interval", "4"])
    assert "real FP8 GEMMs" in p.stdout, p.stdout
    assert "[Rank 0] (after 8 iterations) memory (MB) | allocated:" in p.stdout
    assert open(os.path.join(save, "latest_checkpointed_iteration.txt")).read().strip() == "8"
    straight = losses(p.stdout)
    # stop at 4, then resume from the checkpoint
    p1, save2 = _train(tmp_path, "resumed", ["--save-interval", "4", "--exit-interval", "4"])
    p2, _ = _train(tmp_path, "resumed", ["--save-interval", "4"])
    assert "successfully loaded checkpoint" in p2.stdout
    resumed = losses(p1.stdout) + losses(p2.stdout)
    assert [it for it, _, _ in resumed] == [it for it, _, _ in straight]
    for (_, a, _), (_, b, _) in zip(resumed, straight):
        assert abs(float(a) - float(b)) <= 1e-3 * abs(float(b)), (resumed, straight)


def test_trainer_bf16_native_and_checkpoint_loads_on_cpu(tmp_path):
    """--bf16 on CUDA runs native BF16 GEMMs; its checkpoint continues on the CPU (SFT from it)."""
    p, save = _train(tmp_path, "bf16", ["--save-interval", "4"], prec=BF16)
    assert "native BF16 GEMMs" in p.stdout
    sft = str(tmp_path / "sft")
    q = ok(run(["sft", "--ref-load", save, "--load", sft, "--save", sft, "--data-path",
                os.path.join(os.path.dirname(MAIN), "data", "sft_stage1.jsonl"), "--train-iters", "2",
                "--global-batch-size", "4", "--micro-batch-size", "4", "--lr", "1e-3", "--bf16", "--device", "cpu",
                "--log-interval", "1"]))
    assert "FP32 emulation" in q.stdout and len(losses(q.stdout)) == 2


def test_emulated_kernels_on_cuda_match_cpu(tmp_path):
    """--kernels emulated on the GPU is the reference numerics: the same losses as the CPU run to ~1e-5."""
    p_gpu, _ = _train(tmp_path, "emu", ["--kernels", "emulated"], iters=3, prec=FP8_128)
    p_cpu = ok(run(pretrain_args(str(tmp_path / "cpu"), iters=3, extra=["--device", "cpu"], prec=FP8_128)))
    assert "FP32 emulation" in p_gpu.stdout
    for (_, a, _), (_, b, _) in zip(losses(p_gpu.stdout), losses(p_cpu.stdout)):
        assert abs(float(a) - float(b)) <= 1e-3 * abs(float(b))


def test_model_forward_real_vs_emulated_fp8():
    """The whole tiny model: logits of the real path within BF16 noise of the emulated path's."""
    from infir2_trainer import fp8
    from infir2_trainer.fp8 import Precision
    from infir2_trainer.model import GPTModel, ModelConfig
    cfg = ModelConfig(vocab_size=256, num_layers=2, hidden_size=128, ffn_hidden_size=384, num_attention_heads=4,
                      num_query_groups=2, max_position_embeddings=128)
    model = GPTModel(cfg, Precision(bf16=True, fp8="e4m3", block=128))
    model.init_weights(1)
    model = model.cuda()
    ids = torch.randint(0, 256, (4, 64), device="cuda")
    with torch.no_grad():
        real = model(ids).float()
        fp8.set_kernels("emulated")
        try:
            emu = model(ids).float()
        finally:
            fp8.set_kernels("auto")
    assert _rel(real, emu) < 3e-2
    assert model.prec.on("cuda").gemm_kind() == "fp8"
