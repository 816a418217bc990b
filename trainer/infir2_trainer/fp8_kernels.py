"""Triton kernels of the real FP8 path (fp8_gemm.py): one read of the source, one write of FP8 values + scales.

Imported only on CUDA. The layouts are the ones torch._scaled_mm wants for block scaling (fp8_gemm.py). Scales are
powers of two taken from the exponent bits of the block's amax (pow2_scale): no division, so they are exactly
TE's floor_pow2(fmt.max / amax).
"""
import triton
import triton.language as tl


@triton.jit
def pow2_scale(amax, E_MAX: tl.constexpr):
    """(scale, scale_inv) = largest 2^n <= fmt.max / amax, n <= 127; 1 for a zero/inf/NaN amax (TE)."""
    bits = amax.to(tl.int32, bitcast=True)
    e = (bits >> 23) & 0xFF
    man = bits & 0x7FFFFF
    n = E_MAX + 127 - e - (man > 0x600000).to(tl.int32)  # fmt.max = 1.75 * 2^E_MAX; 1.75 = mantissa 0x600000
    n = tl.minimum(n, 127)
    n = tl.where((amax > 0) & (e < 255), n, 0)
    scale = ((n + 127) << 23).to(tl.float32, bitcast=True)
    inv_bits = tl.where(n == 127, 0x400000, (127 - n) << 23)  # 2^-127 is subnormal
    return scale, inv_bits.to(tl.float32, bitcast=True)


@triton.jit
def to_grid(x, FMAX: tl.constexpr, MAN_BITS: tl.constexpr, MIN_EXP: tl.constexpr, SIGN_BIT: tl.constexpr):
    """fp8.round_to_fp8 in registers: saturate, then round to the FP8 grid, ties to even, so that the cast to the
    float8 type below is exact. (Triton's own FP32 -> FP8 cast rounds FP32 weights twice, through FP16.)

    SIGN_BIT: give the result x's sign bit, as copysign does (a negative value that rounds to zero is -0, bit for
    bit the emulation's). Without it the sign comes from a select on x < 0, which makes that zero +0: the same value.
    The weight kernel uses the select: on an H100 (Triton 3.6) the sign-bit version made its transposed store write
    wrong values (the dgrad went wrong while the forward stayed right); the select version was checked there."""
    a = tl.minimum(tl.abs(x), FMAX)
    e = tl.maximum((a.to(tl.int32, bitcast=True) >> 23), 127 + MIN_EXP)
    ulp = ((e - MAN_BITS) << 23).to(tl.float32, bitcast=True)
    inv_ulp = ((254 - e + MAN_BITS) << 23).to(tl.float32, bitcast=True)  # powers of two: both products are exact
    r = ((a * inv_ulp + 12582912.0) - 12582912.0) * ulp  # +-1.5 * 2^23: the FP32 add rounds to an integer, RNE
    if SIGN_BIT:
        sign = x.to(tl.uint32, bitcast=True) & 0x80000000
        return (r.to(tl.uint32, bitcast=True) | sign).to(tl.float32, bitcast=True)
    return tl.where(x < 0, -r, r)


@triton.jit
def quant_rows(x_ptr, q_ptr, s_ptr, M, K, stride_x, KP, E_MAX: tl.constexpr, FMAX: tl.constexpr,
               MAN_BITS: tl.constexpr, MIN_EXP: tl.constexpr, BM: tl.constexpr):
    pid_m = tl.program_id(0)
    kb = tl.program_id(1)
    rows = pid_m * BM + tl.arange(0, BM)
    cols = kb * 128 + tl.arange(0, 128)
    rmask = rows < M
    x = tl.load(x_ptr + rows[:, None].to(tl.int64) * stride_x + cols[None, :],
                mask=rmask[:, None] & (cols[None, :] < K), other=0.0).to(tl.float32)
    scale, scale_inv = pow2_scale(tl.max(tl.abs(x), axis=1), E_MAX)
    q = to_grid(x * scale[:, None], FMAX, MAN_BITS, MIN_EXP, True)
    tl.store(q_ptr + rows[:, None].to(tl.int64) * KP + cols[None, :], q.to(q_ptr.dtype.element_ty),
             mask=rmask[:, None])
    tl.store(s_ptr + kb * M + rows, scale_inv, mask=rmask)


@triton.jit
def quant_cols(x_ptr, q_ptr, s_ptr, M, K, stride_x, MP, E_MAX: tl.constexpr, FMAX: tl.constexpr,
               MAN_BITS: tl.constexpr, MIN_EXP: tl.constexpr, BK: tl.constexpr):
    mb = tl.program_id(0)
    pid_k = tl.program_id(1)
    rows = mb * 128 + tl.arange(0, 128)
    cols = pid_k * BK + tl.arange(0, BK)
    cmask = cols < K
    x = tl.load(x_ptr + rows[:, None].to(tl.int64) * stride_x + cols[None, :],
                mask=(rows[:, None] < M) & cmask[None, :], other=0.0).to(tl.float32)
    scale, scale_inv = pow2_scale(tl.max(tl.abs(x), axis=0), E_MAX)
    q = to_grid(x * scale[None, :], FMAX, MAN_BITS, MIN_EXP, True)
    tl.store(q_ptr + cols[:, None].to(tl.int64) * MP + rows[None, :], tl.trans(q).to(q_ptr.dtype.element_ty),
             mask=cmask[:, None])
    tl.store(s_ptr + mb * K + cols, scale_inv, mask=cmask)


@triton.jit
def quant_weight(w_ptr, q_ptr, qt_ptr, s_ptr, N, K, stride_w, NP, KP, KB, E_MAX: tl.constexpr,
                 FMAX: tl.constexpr, MAN_BITS: tl.constexpr, MIN_EXP: tl.constexpr):
    nb = tl.program_id(0)
    kb = tl.program_id(1)
    rows = nb * 128 + tl.arange(0, 128)
    cols = kb * 128 + tl.arange(0, 128)
    w = tl.load(w_ptr + rows[:, None].to(tl.int64) * stride_w + cols[None, :],
                mask=(rows[:, None] < N) & (cols[None, :] < K), other=0.0).to(tl.float32)
    amax = tl.max(tl.max(tl.abs(w), axis=1), axis=0)
    scale, scale_inv = pow2_scale(amax, E_MAX)
    q = to_grid(w * scale, FMAX, MAN_BITS, MIN_EXP, False)
    tl.store(q_ptr + rows[:, None].to(tl.int64) * KP + cols[None, :], q.to(q_ptr.dtype.element_ty))
    tl.store(qt_ptr + cols[:, None].to(tl.int64) * NP + rows[None, :], tl.trans(q).to(qt_ptr.dtype.element_ty))
    tl.store(s_ptr + nb * KB + kb, scale_inv)
