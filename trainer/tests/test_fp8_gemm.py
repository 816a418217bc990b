"""The real-FP8 linear (fp8_gemm.py) against the emulation (fp8.py), with no GPU.

torch._scaled_mm's block scaling exists on Hopper only, so here a stand-in takes its place: it checks the shapes and
strides that torch's own dispatcher checks (ScaledBlas.cpp: 1x128 scales outer-dim-major, 128x128 scales
inner-dim-major, `a` row-major, `b` column-major) and multiplies the dequantised operands in FP32. That proves the
plumbing of the three GEMMs (layouts, transposes, padding, which scales go where) against the emulation; the real
kernels are checked on a GPU by test_cuda.py. Needs a PyTorch with float8 dtypes; skipped (saying so) on older ones.
"""
import math

import pytest
import torch

from infir2_trainer import fp8_gemm as G
from infir2_trainer.fp8 import E4M3, E5M2, Precision, _LinearFn

pytestmark = pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"),
                                reason=f"torch {torch.__version__} has no float8 dtypes (the real-FP8 path needs "
                                       f"torch >= 2.1)")


def _kind(rows: int, cols: int, scale: torch.Tensor) -> str:
    """torch's rule for the scale of an operand seen as [rows, cols] (cols = the reduction dim)."""
    kb = math.ceil(cols / 128)

    def fits(dim, size, stride):
        return scale.shape[dim] == size and (size <= 1 or scale.stride(dim) == stride)

    if scale.dtype != torch.float32 or scale.dim() != 2:
        raise AssertionError(f"scale must be a 2-D float32 tensor, got {scale.dtype} {tuple(scale.shape)}")
    if fits(0, math.ceil(rows / 128), kb) and fits(1, kb, 1):
        return "128x128"
    if fits(0, rows, 1) and fits(1, kb, rows):
        return "1x128"
    raise AssertionError(f"scale {tuple(scale.shape)} strides {scale.stride()} fits no block scaling of a "
                         f"[{rows}, {cols}] operand")


def _dequant(q: torch.Tensor, scale: torch.Tensor, kind: str) -> torch.Tensor:
    rows, cols = q.shape
    s = scale.repeat_interleave(128, dim=1)[:, :cols]
    if kind == "128x128":
        s = s.repeat_interleave(128, dim=0)[:rows]
    return q.float() * s


def stand_in_scaled_mm(a, b, scale_a, scale_b, out_dtype):
    assert a.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) and b.dtype in (torch.float8_e4m3fn,
                                                                                torch.float8_e5m2)
    assert not (a.dtype == b.dtype == torch.float8_e5m2), "cuBLAS refuses e5m2 x e5m2"
    (m, k), (k2, n) = a.shape, b.shape
    assert k == k2 and k % 16 == 0 and n % 16 == 0, (a.shape, b.shape)
    assert a.stride(1) == 1, "a must be row-major"
    assert b.stride(0) == 1, "b must be column-major"
    ka, kb = _kind(m, k, scale_a), _kind(n, k, scale_b.t())
    assert (ka, kb) != ("128x128", "128x128"), "cuBLAS has no 128x128 x 128x128 scaling"
    for kind, rows in ((ka, m), (kb, n)):  # cuBLASLt rounds a 128x128 scale's K-block stride up to 4 (16 bytes)
        assert kind != "128x128" or rows <= 128 or math.ceil(k / 128) % 4 == 0, \
            f"a 128x128-scaled operand [{rows}, {k}] needs K blocks in multiples of 4"
    out = _dequant(a, scale_a, ka) @ _dequant(b.t(), scale_b.t(), kb).t()
    return out.to(out_dtype)


@pytest.fixture
def stand_in(monkeypatch):
    monkeypatch.setattr(G, "scaled_mm", stand_in_scaled_mm)
    monkeypatch.setattr(G, "_triton", lambda x: False)  # the reference quantisers (the kernels need a GPU)


def _close(real, ref, tol):
    real, ref = real.detach().float(), ref.detach().float()
    err = float((real - ref).norm() / ref.norm().clamp(min=1e-30))
    assert err < tol, f"relative error {err:.2e} >= {tol:.0e}"


@pytest.mark.parametrize("fmt", ["e4m3", "hybrid"])
@pytest.mark.parametrize("m,k,n", [(64, 64, 128), (1024, 256, 384), (100, 192, 80), (7, 128, 16)])
def test_real_linear_matches_emulation(stand_in, fmt, m, k, n):
    """Forward, dgrad and wgrad of the real path equal the emulation's up to FP32 summation order (the stand-in
    accumulates over all of K at once, the emulation too, so only BF16 output rounding can differ by an ulp)."""
    torch.manual_seed(m + k + n)
    prec = Precision(bf16=True, fp8=fmt, block=128)
    x = (torch.randn(m, k) * 3).to(torch.bfloat16)
    w = torch.randn(n, k) * 0.05
    b = torch.randn(n) * 0.1
    dy = torch.randn(m, n).to(torch.bfloat16)

    xe, we, be = x.float().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()
    ye = _LinearFn.apply(xe, we, be, prec)
    ye.backward(dy.float())

    xr, wr, br = x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()
    yr = G.fp8_linear(xr, wr, br, prec)
    assert yr.dtype == torch.bfloat16 and yr.shape == (m, n)
    yr.backward(dy)
    assert xr.grad.dtype == torch.bfloat16 and wr.grad.dtype == torch.float32
    _close(yr, ye, 4e-3)  # the bias: BF16 on the real path (MCore --bf16), FP32 in the emulation
    _close(xr.grad, xe.grad, 4e-3)
    _close(wr.grad, we.grad, 1e-5)
    _close(br.grad, be.grad, 1e-5)


def test_reference_quantisers_are_the_emulation():
    """The float8 tensors hold exactly fp8.py's grid values, and the scales are laid out as _scaled_mm wants."""
    torch.manual_seed(0)
    x = (torch.randn(70, 200) * torch.logspace(-6, 4, 200)).to(torch.bfloat16)
    for fmt in (E4M3, E5M2):
        q, s = G.quant_rows_ref(x, fmt)
        assert q.shape == (70, 256) and s.shape == (2, 70)
        assert _kind(70, 256, s.t()) == "1x128"
        qt, st = G.quant_cols_ref(x, fmt)
        assert qt.shape == (200, 128) and st.shape == (1, 200)
        w = torch.randn(200, 70)
        wq, wqt, ws = G.quant_weight_ref(w, fmt)  # padded to multiples of 512 (fp8_gemm.WPAD)
        assert wq.shape == (512, 512) and torch.equal(wqt.float(), wq.float().t()) and ws.shape == (4, 4)
        assert _kind(512, 512, ws) == "128x128"
        assert torch.equal(ws[2:], torch.ones(2, 4)) and not wq.float()[200:].any()


def test_inference_saves_no_columnwise_copy(stand_in):
    """Under no_grad (rollouts, eval) the forward does not quantise x a second time for a wgrad."""
    prec = Precision(bf16=True, fp8="e4m3", block=128)
    calls = []
    orig = G.quant_cols
    G.quant_cols = lambda *a, **kw: calls.append(1) or orig(*a, **kw)
    try:
        with torch.no_grad():
            G.fp8_linear(torch.randn(16, 128).to(torch.bfloat16), torch.randn(128, 128), None, prec)
    finally:
        G.quant_cols = orig
    assert calls == []
