"""Genuine FP8 GEMMs for the CUDA path: the recipe's blockwise numerics (fp8.py) with real E4M3 tensors.

fp8.py is the reference: it rounds FP32 values onto the FP8 grid and multiplies in FP32. Here the same blocks are
real float8 tensors and the GEMMs run on the tensor cores through `torch._scaled_mm` with cuBLASLt's block scaling
(Hopper, cuBLAS >= 12.9): 1x128 scales for activations and output gradients, 128x128 for weights, FP32 scales.

  forward  y  = mm(Q1x128(x),  Q128x128(W)^T)               -> BF16
  dgrad    dx = mm(Q1x128(dy), Q128x128(W))                 -> BF16  (the forward's weight blocks, transposed)
  wgrad    dW = mm(Q1x128_tok(dy)^T, Q1x128_tok(x))          -> FP32  (both along the token dim, from BF16 sources)

On the same inputs the quantised activations and gradients are bit-identical to fp8.py's and the weights
value-identical (fp8_kernels.to_grid); the GEMM outputs differ from fp8.py's FP32 products only by the order of
the FP32 accumulation and the output's rounding (tests/test_cuda.py, measured on an H100: docs/gpu.md).

The quantisers are Triton kernels: one read of the BF16 source, one write of FP8 values and scales. With
power-of-two scales (the recipe's default) the scale comes from the exponent bits of the block's amax, with no
division: 2^(E - e) or 2^(E - e - 1), where fmt.max = 1.75 * 2^E and amax = m * 2^e, whichever keeps
amax * scale <= fmt.max. That is floor_pow2(fmt.max / amax) exactly as TE computes it (an FP32 quotient can never
round up onto a power of two unless it is one). FP32 scales (NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1) use fp8.py's
quantisers cast to float8 (slower, same bits).

Only 128 blocks exist in cuBLAS; another --fp8-block-size runs fp8.py's emulation on the GPU (fp8.linear decides).
"""
import torch
import torch.nn.functional as F

from .fp8 import E4M3, FP8Format, quantize_2d, quantize_rowwise

BLOCK = 128

# What this PyTorch and device can do, decided once per process (see available()).
_state = {"checked": False, "ok": False, "why": "", "wgrad_fp32": True}


def float8_dtype(fmt: FP8Format):
    return torch.float8_e4m3fn if fmt.name == "e4m3" else torch.float8_e5m2


def _ceil(n: int, b: int) -> int:
    return (n + b - 1) // b


def available(device=None) -> tuple:
    """(ok, why): real blockwise FP8 GEMMs need float8 dtypes, torch._scaled_mm, Triton and a Hopper GPU."""
    if not _state["checked"]:
        _state["checked"] = True
        if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
            _state["why"] = f"torch {torch.__version__} has no float8 dtypes / torch._scaled_mm"
        elif not torch.cuda.is_available():
            _state["why"] = "no CUDA device"
        else:
            major, minor = torch.cuda.get_device_capability(device)
            try:
                import triton  # noqa: F401
            except ImportError:
                _state["why"] = "Triton is not installed"
            else:
                if major != 9:  # cuBLAS implements the 1x128/128x128 (DeepSeek) scaling on sm_90 only
                    _state["why"] = f"blockwise FP8 GEMMs need a Hopper GPU (sm_90), this is sm_{major}{minor}"
                else:
                    _state["ok"] = True
    return _state["ok"], _state["why"]


# ---------------------------------------------------------------------------------------------------------------
# Quantisers. Layouts are the ones torch._scaled_mm wants for block scaling:
#   rows: q [M, Kp] (K zero-padded), scale_inv stored as [Kp/128, M] (used as its .t())
#   cols: qT [K, Mp] (the token dim M zero-padded to a multiple of 128), scale_inv [Mp/128, K]
#   weight: q [Np, Kp] and its transpose qT [Kp, Np], scale_inv [Np/128, Kp/128]
# Weights are padded to multiples of WPAD = 512 in both dims, and activations along K to match: cuBLASLt reads a
# 128x128 scale tensor with its reduction-dim stride rounded up to 4 blocks (16 bytes), which _scaled_mm's
# stride check does not express, so a weight whose reduction dim has a number of blocks that is not a multiple of 4
# gets garbage for every output block but the first (seen on an H100: the dgrad of a [80, 192] weight). Zero padding
# changes no value; the InfiR2 models' dims are already multiples of 512 but for a few (1.5B's FFN 8960).

WPAD = 512


def _wpad(d: int) -> int:
    return _ceil(d, WPAD) * WPAD


def _widen(q: torch.Tensor, s: torch.Tensor, width: int, s_dim: int):
    """Zero FP8 columns (scale_inv 1, as for an all-zero block) up to `width`."""
    extra = width - q.shape[1]
    if extra <= 0:
        return q, s
    q = F.pad(q.view(torch.uint8), (0, extra)).view(q.dtype)
    pad = [0, 0, 0, 0]
    pad[1 if s_dim == 1 else 3] = extra // BLOCK
    return q, F.pad(s, pad, value=1.0)


def quant_rows_ref(x: torch.Tensor, fmt: FP8Format = E4M3, pow2: bool = True, width: int = None):
    """fp8.py's 1x128 quantiser, as float8 tensors (the reference and the FP32-scale path)."""
    m = x.shape[0]
    q, s_inv = quantize_rowwise(x, BLOCK, fmt, pow2)
    q, s = q.view(m, -1).to(float8_dtype(fmt)), s_inv.view(m, -1).t().contiguous()
    return _widen(q, s, width or q.shape[1], s_dim=0)


def quant_cols_ref(x: torch.Tensor, fmt: FP8Format = E4M3, pow2: bool = True):
    """1x128 blocks along the token dim (dim 0) of x [M, K]: TE's columnwise copy, as x^T [K, Mp]."""
    q, s_inv = quantize_rowwise(x.t().contiguous(), BLOCK, fmt, pow2)
    k = x.shape[1]
    return q.view(k, -1).to(float8_dtype(fmt)), s_inv.view(k, -1).t().contiguous()


def quant_weight_ref(w: torch.Tensor, fmt: FP8Format = E4M3, pow2: bool = True):
    q, s_inv = quantize_2d(w, BLOCK, fmt, pow2)
    nb, kb = q.shape[0], q.shape[2]
    q = q.view(nb * BLOCK, kb * BLOCK).to(float8_dtype(fmt))
    s = s_inv.view(nb, kb)
    np_, kp = _wpad(w.shape[0]), _wpad(w.shape[1])
    q = F.pad(q.view(torch.uint8), (0, kp - q.shape[1], 0, np_ - q.shape[0])).view(q.dtype)
    s = F.pad(s, (0, kp // BLOCK - s.shape[1], 0, np_ // BLOCK - s.shape[0]), value=1.0).contiguous()
    return q, q.t().contiguous(), s


def _triton(x: torch.Tensor) -> bool:
    """The kernels run on CUDA tensors. (Triton's CPU interpreter is no stand-in: its FP8 casts round otherwise.)"""
    return x.is_cuda


def _k():
    """The Triton kernels (fp8_kernels.py), imported on the CUDA path only: Triton is not needed elsewhere."""
    from . import fp8_kernels
    return fp8_kernels


def _fmt_args(fmt: FP8Format) -> dict:
    """The kernels' constants for a format; E_MAX: fmt.max = 1.75 * 2^E_MAX (8 for E4M3's 448, 15 for E5M2)."""
    return {"E_MAX": {448.0: 8, 57344.0: 15}[fmt.max], "FMAX": fmt.max, "MAN_BITS": fmt.man_bits,
            "MIN_EXP": fmt.min_exp}


def quant_rows(x: torch.Tensor, fmt: FP8Format = E4M3, pow2: bool = True, width: int = None):
    """1x128 blocks along K of x [M, K]; `width` pads K further (to the weight's padded K)."""
    if not pow2 or not _triton(x):
        return quant_rows_ref(x, fmt, pow2, width)
    m, kdim = x.shape
    x = x if x.stride(1) == 1 else x.contiguous()
    kp = width or _ceil(kdim, BLOCK) * BLOCK
    q = torch.empty(m, kp, dtype=float8_dtype(fmt), device=x.device)
    s = torch.empty(kp // BLOCK, m, dtype=torch.float32, device=x.device)
    _k().quant_rows[(_ceil(m, 32), kp // BLOCK)](x, q, s, m, kdim, x.stride(0), kp, **_fmt_args(fmt), BM=32)
    return q, s


def quant_cols(x: torch.Tensor, fmt: FP8Format = E4M3, pow2: bool = True):
    if not pow2 or not _triton(x):
        return quant_cols_ref(x, fmt, pow2)
    m, kdim = x.shape
    x = x if x.stride(1) == 1 else x.contiguous()
    mp = _ceil(m, BLOCK) * BLOCK
    q = torch.empty(kdim, mp, dtype=float8_dtype(fmt), device=x.device)
    s = torch.empty(mp // BLOCK, kdim, dtype=torch.float32, device=x.device)
    _k().quant_cols[(mp // BLOCK, _ceil(kdim, 64))](x, q, s, m, kdim, x.stride(0), mp, **_fmt_args(fmt), BK=64)
    return q, s


def quant_weight(w: torch.Tensor, fmt: FP8Format = E4M3, pow2: bool = True):
    if not pow2 or not _triton(w):
        return quant_weight_ref(w, fmt, pow2)
    n, kdim = w.shape
    w = w if w.stride(1) == 1 else w.contiguous()
    np_, kp = _wpad(n), _wpad(kdim)
    dt = float8_dtype(fmt)
    q = torch.empty(np_, kp, dtype=dt, device=w.device)
    qt = torch.empty(kp, np_, dtype=dt, device=w.device)
    s = torch.empty(np_ // BLOCK, kp // BLOCK, dtype=torch.float32, device=w.device)
    _k().quant_weight[(np_ // BLOCK, kp // BLOCK)](w, q, qt, s, n, kdim, w.stride(0), np_, kp, kp // BLOCK,
                                                   **_fmt_args(fmt), num_warps=8)
    return q, qt, s


# ---------------------------------------------------------------------------------------------------------------
# GEMMs

def scaled_mm(a, b, scale_a, scale_b, out_dtype):
    """a [M, K] row-major, b [K, N] column-major, both float8; block scales in the layouts above."""
    return torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype)


def _wgrad_mm(a, b, scale_a, scale_b):
    """The weight gradient in FP32 as TE computes it; if this cuBLAS refuses FP32 output for block scaling, BF16
    output upcast (decided once, and said in describe())."""
    if _state["wgrad_fp32"]:
        try:
            return scaled_mm(a, b, scale_a, scale_b, torch.float32)
        except RuntimeError:
            _state["wgrad_fp32"] = False
    return scaled_mm(a, b, scale_a, scale_b, torch.bfloat16).float()


def _pad_rows(x: torch.Tensor, mult: int) -> torch.Tensor:
    rem = x.shape[0] % mult
    return x if rem == 0 else F.pad(x, (0, 0, 0, mult - rem))


class _Fp8LinearFn(torch.autograd.Function):
    """fp8._LinearFn's numerics with real FP8 tensors and tensor-core GEMMs. Saves for the backward pass only FP8
    tensors: the columnwise copy of x (1 byte per element instead of BF16's 2) and the FP8 weight."""

    @staticmethod
    def forward(ctx, x, weight, bias, prec):
        shape = x.shape
        n, k = weight.shape
        x2 = x.reshape(-1, k)
        x2 = x2 if x2.dtype == torch.bfloat16 else x2.to(torch.bfloat16)
        m = x2.shape[0]
        fwd = prec.fwd_fmt
        wq, wqt, ws = quant_weight(weight.detach(), fwd, prec.pow2)
        xq, xs = quant_rows(_pad_rows(x2, 16), fwd, prec.pow2, width=wq.shape[1])
        y = scaled_mm(xq, wq.t(), xs.t(), ws.t(), torch.bfloat16)
        if y.shape != (m, n):
            y = y[:m, :n]
        if bias is not None:
            y = y + bias.to(torch.bfloat16)  # MCore with --bf16 holds the bias in BF16
        if ctx.needs_input_grad[1]:
            xqt, xst = quant_cols(x2, fwd, prec.pow2)
        else:
            xqt = xst = None
        ctx.save_for_backward(xqt, xst, wqt, ws)
        ctx.prec, ctx.has_bias, ctx.k = prec, bias is not None, k
        return y.reshape(*shape[:-1], n)

    @staticmethod
    def backward(ctx, dy):
        xqt, xst, wqt, ws = ctx.saved_tensors
        prec, k = ctx.prec, ctx.k
        shape = dy.shape
        n = shape[-1]
        dy2 = dy.reshape(-1, n)
        dy2 = dy2 if dy2.dtype == torch.bfloat16 else dy2.to(torch.bfloat16)
        m = dy2.shape[0]
        bwd = prec.bwd_fmt
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            # dgrad: the forward's 128x128 weight blocks, transposed (wqt holds W^T's values, ws.t() its scales)
            dyq, dys = quant_rows(_pad_rows(dy2, 16), bwd, prec.pow2, width=wqt.shape[1])  # N padded as W's
            dx = scaled_mm(dyq, wqt.t(), dys.t(), ws.t().contiguous().t(), torch.bfloat16)
            dx = dx[:m, :k].reshape(*shape[:-1], k)
        if ctx.needs_input_grad[1]:
            dyqt, dyst = quant_cols(dy2, bwd, prec.pow2)
            dw = _wgrad_mm(dyqt, xqt.t(), dyst.t(), xst)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = dy2.float().sum(0)
        return dx, dw, db, None


def fp8_linear(x, weight, bias, prec):
    return _Fp8LinearFn.apply(x, weight, bias, prec)


def describe() -> str:
    return "torch._scaled_mm, cuBLASLt 1x128/128x128 block scaling" + \
        ("" if _state["wgrad_fp32"] else " (wgrad output BF16: this cuBLAS refuses FP32 output)")
