"""The quantiser against a brute-force E4M3/E5M2 table, the TE scale rules, block layout, and the FP8 linear."""
import math

import numpy as np
import pytest
import torch

from infir2_trainer import fp8
from infir2_trainer.fp8 import (E4M3, E5M2, Precision, compute_scale, e4m3_from_bytes, e4m3_to_bytes,
                                fake_quant_2d, fake_quant_rowwise, linear, round_to_fp8)


def grid(fmt):
    """Every finite non-negative value of the format, in code order (so index parity = mantissa LSB parity)."""
    vals = []
    for e in range(0, 2 ** (7 - fmt.man_bits)):
        for m in range(2 ** fmt.man_bits):
            v = (m / 2 ** fmt.man_bits) * 2.0 ** fmt.min_exp if e == 0 else \
                (1 + m / 2 ** fmt.man_bits) * 2.0 ** (e - 1 + fmt.min_exp)
            if v <= fmt.max:
                vals.append(v)
    assert vals[-1] == fmt.max
    return np.array(vals)


def brute_force(x, fmt):
    """Nearest grid value by exhaustive search; ties to the even code; saturate at the max (TE semantics)."""
    g = grid(fmt)
    x = np.asarray(x, dtype=np.float64)
    a = np.minimum(np.abs(x), fmt.max)
    d = np.abs(a[:, None] - g[None, :])
    best = d.min(axis=1, keepdims=True)
    cand = d == best
    even = (np.arange(len(g)) % 2 == 0)[None, :]
    idx = np.where(cand.sum(1) > 1, np.argmax(cand & even, axis=1), np.argmin(d, axis=1))
    return np.copysign(g[idx], x)


def hard_inputs(fmt):
    g = grid(fmt).astype(np.float32)
    mids = ((g[1:].astype(np.float64) + g[:-1]) / 2).astype(np.float32)  # exact in FP32
    near = np.concatenate([np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(np.inf)),
                           np.nextafter(g, np.float32(0)), np.nextafter(g, np.float32(np.inf))])
    rng = np.random.default_rng(0)
    rand = np.exp(rng.uniform(np.log(1e-6), np.log(fmt.max * 4), 200000)).astype(np.float32)
    special = np.array([0.0, fmt.max, fmt.max * 1.03, fmt.max * 1.1, fmt.max * 2, 1e6, 3e38,
                        2.0 ** (fmt.min_exp - fmt.man_bits - 1), 2.0 ** (fmt.min_exp - fmt.man_bits - 2),
                        2.0 ** -30, 1e-45], dtype=np.float32)
    x = np.concatenate([g, mids, near, rand, special])
    return np.concatenate([x, -x])


@pytest.mark.parametrize("fmt", [E4M3, E5M2], ids=["e4m3", "e5m2"])
def test_round_matches_brute_force(fmt):
    x = hard_inputs(fmt)
    got = round_to_fp8(torch.from_numpy(x), fmt).numpy().astype(np.float64)
    want = brute_force(x, fmt)
    bad = np.nonzero(got != want)[0]
    assert len(bad) == 0, f"{len(bad)} mismatches, e.g. x={x[bad[:5]]} got={got[bad[:5]]} want={want[bad[:5]]}"
    assert np.signbit(got[x < 0]).all()  # negatives (and -0) keep their sign


def test_specific_e4m3_values():
    cases = {448.0: 448.0, 464.0: 448.0, 470.0: 448.0, 1e9: 448.0,  # saturation, never NaN/480
             0.0: 0.0, 2.0 ** -9: 2.0 ** -9, 2.0 ** -10: 0.0,  # min subnormal; half of it ties to even (0)
             3 * 2.0 ** -10: 2.0 ** -8,  # 1.5 ulp in the subnormal range: tie -> even code (2)
             1.0625: 1.0, 1.1875: 1.25, 17.0: 16.0, 19.0: 20.0, 0.0146484375: 0.015625}
    for x, want in cases.items():
        for s in (1, -1):
            assert round_to_fp8(torch.tensor([s * x])).item() == s * want, x


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="torch without float8 dtypes")
def test_matches_torch_float8_cast():
    """TE's reference: clamp(-448, 448) then .to(float8_e4m3fn)."""
    x = torch.from_numpy(hard_inputs(E4M3))
    ref = x.clamp(-448, 448).to(torch.float8_e4m3fn).float()
    assert torch.equal(round_to_fp8(x), ref)


def test_byte_codes_round_trip():
    codes = torch.tensor([c for c in range(256) if c not in (0x7F, 0xFF)], dtype=torch.uint8)
    vals = e4m3_from_bytes(codes)
    back = e4m3_to_bytes(vals)
    assert torch.equal(back[vals != 0], codes[vals != 0])
    assert e4m3_to_bytes(torch.tensor([0.0])).item() == 0 and e4m3_to_bytes(torch.tensor([-0.0])).item() == 0x80
    assert math.isnan(e4m3_from_bytes(torch.tensor([0x7F], dtype=torch.uint8)).item())
    assert e4m3_from_bytes(torch.tensor([0x7E], dtype=torch.uint8)).item() == 448.0


def test_pow2_scale_rules():
    amax = torch.tensor([1.0, 448.0, 3.0, 0.001, 1000.0, 0.0, float("inf"), float("nan"), 1e-40])
    s = compute_scale(amax, E4M3, pow2=True)
    # 448/amax floored to a power of two; zero/inf/nan amax -> 1; no epsilon floor (amax_epsilon = 0)
    for a, got in zip(amax.tolist()[:5], s.tolist()[:5]):
        assert got == 2.0 ** math.floor(math.log2(448.0 / a))
        assert got * a <= 448.0
    assert s[5:8].tolist() == [1.0, 1.0, 1.0]
    assert s[8].item() == 2.0 ** 127  # 448/1e-40 overflows -> FP32 max -> 2^127
    m, e = torch.frexp(s[:5])
    assert torch.all(m == 0.5)  # exact powers of two: x*scale and q/scale are exact
    s32 = compute_scale(amax[:5], E4M3, pow2=False)
    assert torch.equal(s32, torch.tensor(448.0) / amax[:5])


def test_pow2_scale_matches_reference_formula():
    """TE's Python reference: scale = fp32(448 / amax) (correctly rounded), then frexp -> 2^(exp-1)."""
    rng = np.random.default_rng(1)
    amax = np.exp(rng.uniform(np.log(1e-30), np.log(1e30), 100000)).astype(np.float32)
    amax = np.concatenate([amax, (448.0 / 2.0 ** np.arange(-60, 60)).astype(np.float32)])
    amax = np.concatenate([amax, np.nextafter(amax, np.float32(0)), np.nextafter(amax, np.float32(np.inf))])
    scale = np.float32(448.0) / amax  # numpy float32 division is IEEE round-to-nearest
    m, e = np.frexp(scale)
    want = np.ldexp(np.float32(1.0), e - 1).astype(np.float32)
    got = compute_scale(torch.from_numpy(amax), E4M3, pow2=True).numpy()
    assert np.array_equal(got, want)


def test_rowwise_blocks_are_independent_and_padded():
    torch.manual_seed(0)
    x = torch.randn(3, 40)
    x[1, :16] *= 1000  # a loud block must not change its neighbours' scales
    q = fake_quant_rowwise(x, 16)
    for r in range(3):
        for b0 in range(0, 40, 16):
            blk = x[r, b0:b0 + 16]
            s = compute_scale(blk.abs().max(), E4M3, True)
            assert torch.equal(q[r, b0:b0 + 16], round_to_fp8(blk * s) / s)
    assert q.shape == x.shape


def test_weight_blocks():
    torch.manual_seed(1)
    w = torch.randn(40, 24)
    w[:16, :16] *= 100
    q = fake_quant_2d(w, 16)
    for i in range(0, 40, 16):
        for j in range(0, 24, 16):
            blk = w[i:i + 16, j:j + 16]
            s = compute_scale(blk.abs().max(), E4M3, True)
            assert torch.equal(q[i:i + 16, j:j + 16], round_to_fp8(blk * s) / s)


def test_fp8_linear_forward_backward_is_the_recipe():
    """fprop Q1xB(x) @ QBxB(W)^T; dgrad Q1xB(dy) @ QBxB(W); wgrad with token-dim blocks; outputs BF16."""
    torch.manual_seed(2)
    B = 16
    prec = Precision(bf16=True, fp8="e4m3", block=B)
    x = torch.randn(48, 32, requires_grad=True)
    w = (torch.randn(24, 32) * 0.1).requires_grad_()
    b = torch.randn(24).requires_grad_()
    y = linear(x, w, b, prec)
    dy = torch.randn_like(y)
    y.backward(dy)
    bf = fp8.round_bf16
    xb = bf(x.detach())
    wq = fake_quant_2d(w.detach(), B)
    assert torch.equal(y, bf(fake_quant_rowwise(xb, B) @ wq.t() + b.detach()))
    dyb = bf(dy)
    assert torch.allclose(x.grad, bf(fake_quant_rowwise(dyb, B) @ wq), atol=1e-6, rtol=0)
    dw = fake_quant_rowwise(dyb.t().contiguous(), B).matmul(fake_quant_rowwise(xb.t().contiguous(), B).t())
    assert torch.allclose(w.grad, dw, rtol=1e-5, atol=1e-5)
    assert torch.allclose(b.grad, dyb.sum(0), rtol=1e-6, atol=1e-6)


def sqnr(ref, test):
    return 20 * torch.log10(ref.norm() / (ref - test).norm()).item()


def test_fp8_linear_sqnr_vs_high_precision():
    """The acceptance suggested in the numerics notes: >= 25 dB forward, >= 30 dB... for our E4M3 grads we check
    the weaker torchao Float8Linear bound (>= 17 dB) plus the 25 dB forward bound."""
    torch.manual_seed(3)
    x = torch.randn(256, 128, requires_grad=True)
    w = (torch.randn(64, 128) * 0.05).requires_grad_()
    y8 = linear(x, w, None, Precision(bf16=True, fp8="e4m3", block=128))
    y8.backward(torch.ones_like(y8))
    gx8, gw8 = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    y = x @ w.t()
    y.backward(torch.ones_like(y))
    assert sqnr(y, y8) >= 25
    assert sqnr(x.grad, gx8) >= 25
    assert sqnr(w.grad, gw8) >= 25
