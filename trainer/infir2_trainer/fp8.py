"""FP8 numerics of the InfiR2 recipe, emulated in FP32 (docs/fp8-numerics.md).

InfiR2 trains with Megatron + TransformerEngine `Float8BlockScaling` (`--fp8-format e4m3 --fp8-recipe blockwise`):

  * every FP8 tensor is E4M3 (with `--fp8-format hybrid` gradients would be E5M2);
  * activations (GEMM inputs) and output gradients: 1 x B blocks (per token, B channels);
  * weights: B x B blocks, quantised from the FP32 master weights;
  * scale = 448 / amax in FP32, floored to a power of two (TE default; `NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1`
    turns the flooring off), q = RNE_saturate(x * scale), x_hat = q * (1 / scale);
  * GEMMs accumulate in FP32; fprop/dgrad outputs are BF16, wgrad is FP32;
  * embeddings, norms, attention, softmax, the LM head and the optimizer stay in BF16/FP32.

Nothing here needs a float8 dtype: quantise-dequantise is done on FP32 values with bit arithmetic, which is exact
(with power-of-two scales x*scale and q/scale are exact in FP32), so a CPU run reproduces the recipe's rounding.
"""
import os
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class FP8Format:
    name: str
    man_bits: int  # stored mantissa bits
    min_exp: int   # exponent of the smallest normal; subnormals share it
    max: float     # largest finite value (saturation point)


E4M3 = FP8Format("e4m3", man_bits=3, min_exp=-6, max=448.0)
E5M2 = FP8Format("e5m2", man_bits=2, min_exp=-14, max=57344.0)
FP32_MAX = 3.4028234663852886e38


def round_to_fp8(x: torch.Tensor, fmt: FP8Format = E4M3) -> torch.Tensor:
    """Round FP32 values to the nearest `fmt` value, ties to even, saturating at +-fmt.max (TE's cast semantics).

    The ulp of |x| in its FP8 binade is 2^(E - man_bits) with E = the FP32 exponent clamped below at min_exp
    (subnormals). Dividing by a power of two is exact and torch.round is round-half-to-even, so the result is
    the RNE value; max/ulp is an integer (14 for E4M3, 7 for E5M2), so rounding never passes the max. E comes
    from the FP32 bits (cheaper than frexp); the ops are in place because allocation dominates at these sizes.
    """
    x = x.float()
    a = x.abs().clamp_(max=fmt.max)  # saturate first, like clamp(-448, 448) before the cast in TE's reference
    ulp = torch.bitwise_right_shift(a.view(torch.int32), 23).clamp_(min=127 + fmt.min_exp)
    ulp = ulp.sub_(fmt.man_bits).bitwise_left_shift_(23).view(torch.float32)
    return a.div_(ulp).round_().mul_(ulp).copysign_(x)


def compute_scale(amax: torch.Tensor, fmt: FP8Format = E4M3, pow2: bool = True) -> torch.Tensor:
    """TE `compute_scale_from_amax` with amax_epsilon = 0: scale = fmt.max / amax (FP32), optional pow-2 floor."""
    amax = amax.float()
    scale = torch.full_like(amax, fmt.max) / amax  # a true FP32 division (__fdiv_rn); `448 / t` in torch is
    # 448 * reciprocal(t), which can round across a power of two and change the floored scale
    scale = torch.where(torch.isinf(scale), torch.full_like(scale, FP32_MAX), scale)
    bad = (amax == 0) | torch.isinf(amax) | torch.isnan(amax)
    scale = torch.where(bad, torch.ones_like(scale), scale)
    if pow2:  # keep sign + exponent bits: 2^floor(log2(scale)), exactly as the CUDA kernel masks the bits
        scale = torch.bitwise_and(scale.view(torch.int32), -8388608).view(torch.float32)  # 0xFF800000
    return scale


def _pad_to(x: torch.Tensor, dim: int, block: int) -> torch.Tensor:
    """Zero-pad `dim` to a multiple of `block` (TE's reference pads partial blocks with zeros)."""
    rem = x.shape[dim] % block
    if rem == 0:
        return x
    pad = [0, 0] * x.dim()
    pad[2 * (x.dim() - 1 - dim) + 1] = block - rem
    return F.pad(x, pad)


def quantize_rowwise(x: torch.Tensor, block: int, fmt: FP8Format = E4M3, pow2: bool = True):
    """1 x B blocks along the last dim of a 2-D tensor. Returns (q values on the FP8 grid, scale_inv per block)."""
    n = x.shape[0]
    xp = _pad_to(x.float().contiguous(), 1, block).view(n, -1, block)
    scale = compute_scale(xp.abs().amax(dim=2, keepdim=True), fmt, pow2)
    q = round_to_fp8(xp * scale, fmt)
    return q, 1.0 / scale  # q: [n, k/B, B], scale_inv: [n, k/B, 1]


def fake_quant_rowwise(x: torch.Tensor, block: int, fmt: FP8Format = E4M3, pow2: bool = True) -> torch.Tensor:
    """Quantise-dequantise a 2-D tensor in 1 x B blocks along its last dim (values as FP32)."""
    n, k = x.shape
    q, scale_inv = quantize_rowwise(x, block, fmt, pow2)
    q = q.mul_(scale_inv).view(n, -1)
    return q if q.shape[1] == k else q[:, :k]


def quantize_2d(w: torch.Tensor, block: int, fmt: FP8Format = E4M3, pow2: bool = True):
    """B x B blocks of a 2-D weight. Returns (q [M/B, B, N/B, B] on the FP8 grid, scale_inv [M/B, 1, N/B, 1])."""
    wp = _pad_to(_pad_to(w.float(), 0, block), 1, block).contiguous()
    mb, nb = wp.shape[0] // block, wp.shape[1] // block
    wb = wp.view(mb, block, nb, block)
    scale = compute_scale(wb.abs().amax(dim=(1, 3), keepdim=True), fmt, pow2)
    return round_to_fp8(wb * scale, fmt), 1.0 / scale


def fake_quant_2d(w: torch.Tensor, block: int, fmt: FP8Format = E4M3, pow2: bool = True) -> torch.Tensor:
    m, n = w.shape
    q, scale_inv = quantize_2d(w, block, fmt, pow2)
    return q.mul_(scale_inv).view(q.shape[0] * block, q.shape[2] * block)[:m, :n]


def round_bf16(x: torch.Tensor) -> torch.Tensor:
    """Round FP32 to BF16 (RNE) and back: where Megatron keeps a tensor in BF16, we keep its BF16 value in FP32."""
    return x.to(torch.bfloat16).to(torch.float32)


_KERNELS = "auto"


def set_kernels(mode: str):
    """--kernels: 'auto' = on CUDA, real BF16 tensors and real FP8 GEMMs (fp8_gemm.py), on CPU the emulation;
    'emulated' = this module's FP32 emulation on any device (the reference numerics, slow on a GPU)."""
    global _KERNELS
    if mode not in ("auto", "emulated"):
        raise ValueError(f"kernels must be 'auto' or 'emulated', not {mode!r}")
    _KERNELS = mode


@dataclass(frozen=True)
class Precision:
    """How a run computes. fp8=None and bf16=False is plain FP32 (used by tests and as a debugging aid).

    bf16: activations, linear inputs/outputs and the compute copy of the weights are BF16 values (FP32 master).
    fp8: 'e4m3' or 'hybrid' (E5M2 gradients); linears run the blockwise FP8 GEMMs described above.
    pow2: power-of-two scales (TE default); False = NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1.
    weights_prequantized: weights already lie on the FP8 grid (an FP8 HF checkpoint): quantise activations only,
      like SGLang serving a block-FP8 model with dynamic activation scales.
    native: set by on(device): this forward runs real BF16 tensors and real FP8 GEMMs (fp8_gemm.py) instead of
      the FP32 emulation; see set_kernels().
    """
    bf16: bool = False
    fp8: str = None
    block: int = 128
    pow2: bool = True
    weights_prequantized: bool = False
    native: bool = False

    def on(self, device) -> "Precision":
        """The precision a forward on `device` runs with: native kernels on CUDA unless --kernels emulated."""
        native = torch.device(device).type == "cuda" and _KERNELS == "auto"
        return self if native == self.native else replace(self, native=native)

    @property
    def low(self) -> bool:
        """BF16 or FP8: activations are BF16."""
        return bool(self.bf16 or self.fp8)

    @property
    def fwd_fmt(self) -> FP8Format:
        return E4M3

    @property
    def bwd_fmt(self) -> FP8Format:
        return E5M2 if self.fp8 == "hybrid" else E4M3  # Megatron: e4m3 -> every FP8 tensor is E4M3

    def act(self, x: torch.Tensor) -> torch.Tensor:
        """A tensor that Megatron would hold in BF16 (layer outputs, residual stream, norm outputs): a BF16 tensor
        on the native path, its BF16 value in FP32 in the emulation."""
        if not self.low:
            return x
        return x.to(torch.bfloat16) if self.native else round_bf16(x)

    def describe(self) -> str:
        if self.fp8:
            return f"fp8 ({self.fp8}, blockwise 1x{self.block}/{self.block}x{self.block}, " \
                   f"{'pow2' if self.pow2 else 'fp32'} scales)"
        return "bf16" if self.bf16 else "fp32"

    def gemm_kind(self) -> str:
        """What the linears of a forward with this precision run: 'fp8' (real FP8 GEMMs), 'bf16' / 'fp32' (native
        GEMMs of that type) or 'emulated' (this module's FP32 emulation)."""
        if not self.native:
            return "emulated"
        if not self.fp8:
            return "bf16" if self.bf16 else "fp32"
        from . import fp8_gemm
        ok, _ = fp8_gemm.available()
        return "fp8" if ok and self.block == fp8_gemm.BLOCK and not self.weights_prequantized else "emulated"

    def kernels_note(self) -> str:
        """One line for the log: which kernels this run's linears use, and why when FP8 falls back."""
        kind = self.gemm_kind()
        if not self.native:
            return "FP32 emulation of the recipe's numerics (fp8.py)"
        if kind == "fp8":
            from . import fp8_gemm
            return f"real FP8 GEMMs ({fp8_gemm.describe()})"
        if kind != "emulated":
            return f"native {kind.upper()} GEMMs"
        from . import fp8_gemm
        ok, why = fp8_gemm.available()
        reason = why if not ok else (f"--fp8-block-size {self.block} (cuBLAS scales 128 blocks only)"
                                     if self.block != fp8_gemm.BLOCK else "weights already on the FP8 grid")
        return f"FP8 emulated on the GPU: {reason}"


def _probe_mkldnn() -> bool:
    """oneDNN's FP32 GEMM (the engine behind torch's mkldnn tensors) is ~10x faster than the reference BLAS that
    Debian's CPU torch links; use it for our GEMMs when it is there and works. INFIR2_NO_MKLDNN=1 turns it off."""
    if os.environ.get("INFIR2_NO_MKLDNN") == "1" or not torch.backends.mkldnn.is_available():
        return False
    try:
        a, b = torch.randn(4, 8), torch.randn(3, 8)
        y = torch._C._nn.mkldnn_linear(a.to_mkldnn(), b.to_mkldnn(), None).to_dense()
        return bool(torch.allclose(y, a @ b.t(), atol=1e-5))
    except Exception:  # noqa: BLE001 - any failure: use the plain path
        return False


_MKLDNN = _probe_mkldnn()


def gemm_nt(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b.T in FP32 (a [M, K], b [N, K])."""
    if _MKLDNN and a.device.type == "cpu" and a.numel() and b.numel():
        return torch._C._nn.mkldnn_linear(a.contiguous().to_mkldnn(), b.contiguous().to_mkldnn(), None).to_dense()
    return a @ b.t()


class _LinearFn(torch.autograd.Function):
    """y = x W^T + b with the recipe's GEMM numerics (TE Linear with Float8BlockScaling).

    forward : y  = bf16( Q1xB(x) @ QBxB(W)^T  [fp32 accumulate] + b )
    backward: dx = bf16( Q1xB(dy) @ QBxB(W) )              dgrad: same weight blocks, transposed
              dW = fp32( Q1xB_tokens(dy)^T @ Q1xB_tokens(x) )  wgrad: both re-quantised from the BF16 source
                                                            along the token dim (TE's "columnwise" copies)
    Without FP8 the Q's are identities and this is a BF16 GEMM with FP32 accumulation (or plain FP32).
    """

    @staticmethod
    def forward(ctx, x, weight, bias, prec: Precision):
        shape = x.shape
        x2 = prec.act(x.reshape(-1, shape[-1]).float())
        if prec.fp8:
            xq = fake_quant_rowwise(x2, prec.block, prec.fwd_fmt, prec.pow2)
            wq = weight.float() if prec.weights_prequantized else fake_quant_2d(weight, prec.block, prec.fwd_fmt,
                                                                                 prec.pow2)
        else:
            xq, wq = x2, prec.act(weight)
        y = gemm_nt(xq, wq)
        if bias is not None:
            y = y + bias  # TE adds the bias in FP32 before the output cast
        ctx.save_for_backward(x2, wq)
        ctx.prec, ctx.has_bias = prec, bias is not None
        return prec.act(y).view(*shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, dy):
        x2, wq = ctx.saved_tensors
        prec = ctx.prec
        shape = dy.shape
        dy2 = prec.act(dy.reshape(-1, shape[-1]).float())
        if prec.fp8:
            fmt, b, p2 = prec.bwd_fmt, prec.block, prec.pow2
            dx = gemm_nt(fake_quant_rowwise(dy2, b, fmt, p2), wq.t())
            # wgrad: 1 x B blocks along the token dim for both operands (TE's "columnwise" copies, B x 1 blocks
            # of the row-major tensors), re-quantised from the BF16 sources, not from their rowwise FP8 copies
            dw = gemm_nt(fake_quant_rowwise(dy2.t().contiguous(), b, fmt, p2),
                         fake_quant_rowwise(x2.t().contiguous(), b, prec.fwd_fmt, p2))
        else:
            dx = gemm_nt(dy2, wq.t())
            dw = gemm_nt(dy2.t(), x2.t())
        db = dy2.sum(0) if ctx.has_bias else None
        return prec.act(dx).view(*shape[:-1], wq.shape[1]), dw, db, None


def linear(x: torch.Tensor, weight: torch.Tensor, bias, prec: Precision) -> torch.Tensor:
    if not prec.native:
        return _LinearFn.apply(x, weight, bias, prec)
    kind = prec.gemm_kind()
    if kind == "fp8" and not (weight.shape[0] % 16 or weight.shape[1] % 16):  # cuBLAS FP8: dims multiple of 16
        from .fp8_gemm import fp8_linear
        return fp8_linear(x, weight, bias, prec)
    if kind == "bf16":  # cuBLAS BF16 GEMM, FP32 accumulation; the casts carry the gradient to the FP32 master
        return F.linear(x.to(torch.bfloat16), weight.to(torch.bfloat16),
                        None if bias is None else bias.to(torch.bfloat16))
    if kind == "fp32":
        return F.linear(x.float(), weight, bias)
    # FP8 that cuBLAS cannot do (another block size, weights already on the grid): the emulation, on the GPU
    return _LinearFn.apply(x, weight, bias, replace(prec, native=False)).to(torch.bfloat16)


# ---------------------------------------------------------------------------------------------------------------
# E4M3 byte codes, for writing real FP8 checkpoints (safetensors dtype F8_E4M3) on torch builds without float8.

def _e4m3_decode_table() -> torch.Tensor:
    vals = []
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e, m = (code >> 3) & 0xF, code & 0x7
        if e == 0xF and m == 0x7:
            vals.append(float("nan"))
        elif e == 0:
            vals.append(sign * m * 2.0 ** -9)
        else:
            vals.append(sign * (1 + m / 8) * 2.0 ** (e - 7))
    return torch.tensor(vals, dtype=torch.float32)


E4M3_TABLE = _e4m3_decode_table()


def e4m3_to_bytes(q: torch.Tensor) -> torch.Tensor:
    """Encode values that already lie on the E4M3 grid (output of round_to_fp8) as uint8 codes."""
    q = q.float().cpu()
    sign = (torch.signbit(q)).to(torch.int32) << 7
    a = q.abs()
    bits = a.view(torch.int32)
    exp = (bits >> 23) - 127  # unbiased FP32 exponent
    normal = a >= 2.0 ** -6
    man_n = (bits >> 20) & 0x7
    code_n = ((exp + 7) << 3) | man_n
    code_s = (a * 512.0).round().to(torch.int32)  # subnormal: m * 2^-9
    code = torch.where(normal, code_n, code_s)
    return (code | sign).to(torch.uint8)


def e4m3_from_bytes(codes: torch.Tensor) -> torch.Tensor:
    return E4M3_TABLE[codes.long()]
