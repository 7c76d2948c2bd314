"""Fixed-point arithmetic of TFLite's reference quantized kernels, vectorised over numpy arrays.

Every quantized kernel derives its multipliers and shifts from the tensors' scales the way LiteRT does
(`quantize_multiplier`), and rescales its int32/int64 accumulators with the same rounding
(`multiply_by_quantized_multiplier`: a saturating rounding doubling high multiply, then a rounding
right shift), so results are bit-exact with LiteRT's builtin kernels. Arrays are int64 throughout: the
products of int32 values fit, and nothing wraps where C would not.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from onert_py.backends.cpu._common import clip_ufunc

_I64 = np.int64
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


@dataclass(frozen=True)
class QParams:
    """One tensor's quantization: scale(s) and zero point(s) as arrays (one entry, or one per channel
    along `axis`), and its integer range."""
    scale: np.ndarray          # float64
    zero_point: np.ndarray     # int64
    axis: int
    qmin: int
    qmax: int

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1


def qparams(tensor) -> QParams | None:
    """A tensor's quantization parameters, or None for a tensor without any (a float tensor)."""
    q = tensor.quantization
    if q is None or np.size(q.scale) == 0:
        return None
    scale = np.asarray(q.scale, np.float64).reshape(-1)
    zp = np.asarray(q.zero_point, _I64).reshape(-1)
    if zp.size == 0:
        zp = np.zeros(1, _I64)
    if tensor.type_name == "INT4":
        lo, hi = -8, 7
    else:
        info = np.iinfo(tensor.dtype)
        lo, hi = int(info.min), int(info.max)
    return QParams(scale, zp, int(q.quantized_dimension), lo, hi)


def is_quantized(tensor) -> bool:
    """An integer tensor with quantization parameters (a quantized model's activation or weight)."""
    return tensor is not None and tensor.dtype.kind in "iu" and qparams(tensor) is not None


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier: real = q * 2**(shift - 31) with q in [2**30, 2**31) (Q0.31)."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = _round_half_away(q * (1 << 31))
    if q_fixed == 1 << 31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        return INT32_MAX, 30
    return int(q_fixed), int(shift)


def quantize_multipliers(reals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """quantize_multiplier of each entry (per-channel scales): (multipliers, shifts) as int64 arrays."""
    pairs = [quantize_multiplier(float(r)) for r in np.ravel(reals)]
    return (np.array([p[0] for p in pairs], _I64).reshape(np.shape(reals)),
            np.array([p[1] for p in pairs], _I64).reshape(np.shape(reals)))


def _round_half_away(x: float) -> int:
    """std::round: halves away from zero."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def saturating_rounding_doubling_high_mul(a, b):
    """gemmlowp's SaturatingRoundingDoublingHighMul on int32 values (as int64 arrays): round(a*b / 2**31),
    ties up, with INT32_MIN * INT32_MIN saturating to INT32_MAX."""
    # gemmlowp adds 2**30 (or 1 - 2**30 below zero) and divides truncating toward zero: the same as
    # flooring ab + 2**30 (halves round up). Only INT32_MIN * INT32_MIN reaches 2**31 (saturated).
    q = np.asarray(a, _I64) * np.asarray(b, _I64)
    q += 1 << 30
    q >>= 31
    return np.minimum(q, INT32_MAX, out=q) if q.ndim else min(q, _I64(INT32_MAX))


def rounding_divide_by_pot(x, exponent):
    """gemmlowp's RoundingDivideByPOT: x / 2**exponent rounded to nearest, ties away from zero."""
    x = np.asarray(x, _I64)
    if np.ndim(exponent) == 0:
        e = int(exponent)
        if e == 0:
            return x.copy()
        # half up is floor((x + 2**(e-1)) / 2**e); a negative tie goes down instead
        return (x + ((1 << (e - 1)) - (x < 0))) >> e
    exponent = np.asarray(exponent, _I64)
    negative_tie_fix = (x < 0) & (exponent > 0)
    return (x + (((_I64(1) << exponent) >> 1) - negative_tie_fix)) >> exponent


def multiply_by_quantized_multiplier(x, multiplier, shift):
    """TFLite's MultiplyByQuantizedMultiplier for int32 accumulators (the double-rounding form LiteRT's
    builtin kernels use): a left shift for shift > 0, the high multiply, a rounding right shift."""
    x = np.asarray(x, _I64)
    if np.ndim(shift) == 0:         # one shift (per tensor): no array passes for it (small tensors' cost)
        s = int(shift)
        return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x << s if s > 0 else x, multiplier),
                                      max(-s, 0))
    shift = np.asarray(shift, _I64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x << left, multiplier), right)


def multiply_by_quantized_multiplier_wrapping(x, multiplier, shift):
    """multiply_by_quantized_multiplier with C's int32 left shift: x * 2**shift wraps around int32 (as
    the compiled kernels do when the product is too large), then the same double rounding."""
    shift = np.asarray(shift, _I64)
    high = saturating_rounding_doubling_high_mul(wrap_int32(np.asarray(x, _I64) << np.maximum(shift, 0)),
                                                 multiplier)
    return rounding_divide_by_pot(high, np.maximum(-shift, 0) if shift.ndim else max(-int(shift), 0))


def multiply_by_quantized_multiplier_int64(x, multiplier, shift):
    """TFLite's MultiplyByQuantizedMultiplier for int64 accumulators (16x8 kernels): the multiplier
    reduced to 15 bits, one rounding shift."""
    x = np.asarray(x, _I64)
    multiplier = np.asarray(multiplier, _I64)
    reduced = np.where(multiplier < 0x7FFF0000, (multiplier + (1 << 15)) >> 16, _I64(0x7FFF))
    total_shift = 15 - np.asarray(shift, _I64)
    return (x * reduced + (_I64(1) << (total_shift - 1))) >> total_shift


def activation_range(code: int, scale: float, zero_point: int, qmin: int, qmax: int) -> tuple[int, int]:
    """CalculateActivationRangeQuantized: a fused activation's bounds in the output's integer domain,
    round(f / scale) divided in float32 as LiteRT does (a float64 division can round a tie otherwise)."""
    def q(x: float) -> int:
        return zero_point + int(round_half_away32(np.float32(x) / np.float32(scale)))
    if code == 1:          # RELU
        return max(qmin, q(0.0)), qmax
    if code == 3:          # RELU6
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    if code == 2:          # RELU_N1_TO_1
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    if code == 0:
        return qmin, qmax
    raise ValueError(f"fused activation {code} is not supported on quantized tensors")


def round_half_away32(x):
    """std::round of float32 values (halves away from zero), exactly (x + 0.5 in float32 misrounds)."""
    t = np.trunc(x)
    return t + np.where(np.abs(x - t) >= np.float32(0.5), np.sign(x), np.float32(0)).astype(np.float32)


def to_int32_x86(x):
    """static_cast<int32_t> of float values as x86 does it: truncation, and INT32_MIN for a value outside
    the int32 range (or NaN), where C leaves the result undefined. int64 array."""
    x = np.asarray(x, np.float64)
    ok = (x >= -2.0**31) & (x < 2.0**31)
    return np.where(ok, np.trunc(np.where(ok, x, 0)), -2.0**31).astype(_I64)


def wrap_int32(x):
    """int64 values cast to int32 as C does (modulo 2**32), kept as int64."""
    return ((np.asarray(x, _I64) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def multiply_by_quantized_multiplier_half_up(x, multiplier, shift):
    """MultiplyByQuantizedMultiplier as LiteRT's optimized x86 paths compute it (ruy's GEMM output stage,
    which runs int8/uint8 FULLY_CONNECTED and CONV_2D, and the emulated NEON vqrdmulh + vrshl of the
    optimized int8 DEPTHWISE_CONV_2D): x shifted left in int32, the high multiply rounded half up
    ((x*m + 2**30) >> 31), then a right shift also rounded half up, where the reference rounds both
    halves away from zero (they differ on negative ties); a sum that overflows int32 with the nudge
    gives 2**(31 - e), as ruy. E.g. -3201 * 2**-8 is -12 here, -13 in the reference form."""
    shift = np.asarray(shift, _I64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    x = wrap_int32(np.asarray(x, _I64) << left)
    high = (x * np.asarray(multiplier, _I64) + (1 << 30)) >> 31
    nudge = np.where(right > 0, _I64(1) << np.maximum(right - 1, 0), 0)
    total = high + nudge
    return np.where(total > INT32_MAX, _I64(1) << (31 - right), total >> right)


def neon_round(x: np.ndarray) -> np.ndarray:
    """RoundToNearest of LiteRT's NEON code as x86 runs it (NEON_2_SSE, no vcvtaq): truncate x +- 0.5
    computed in float32 (so 0.49999997 becomes 1, unlike std::round)."""
    half = np.where(x < 0, np.float32(-0.5), np.float32(0.5))
    return np.trunc((x + half).astype(np.float32))


def hybrid_quantize_rows(x: np.ndarray, asymmetric: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LiteRT's BatchQuantizeFloats on float32 rows [m, d] as its x86 build runs it (the NEON kernels
    through NEON_2_SSE): (int8 values as int64 [m, d], float32 scaling factors [m], int64 offsets [m]).

    Symmetric: scale = max|x| / 127 in float32, q = round(x * (127 / max|x|)) clamped to +-127, offset 0.
    Asymmetric: min and max capped at 0, scale = double(float(max - min)) / 255, the nudged zero point
    of the smaller error, q = round(x * float(1 / scale)) + zero point clamped to [-128, 127].
    An all-zero row gives scale 1, zeros. The first floor(d / 8) * 8 columns take the vector rounding
    (neon_round), the rest std::round."""
    m, d = x.shape
    n_vec = d // 8 * 8
    if asymmetric:
        rmin = np.minimum(np.float32(0), x.min(axis=1, initial=np.float32(0)))
        rmax = np.maximum(np.float32(0), x.max(axis=1, initial=np.float32(0)))
        flat = rmin == rmax
        scale = np.where(flat, 1.0, (rmax - rmin).astype(np.float64) / 255.0)
        lo, hi = rmin.astype(np.float64) / scale, rmax.astype(np.float64) / scale
        zp = np.where(128.0 + np.abs(lo) < 127.0 + np.abs(hi), -128.0 - lo, 127.0 - hi)
        nudged = np.clip(np.trunc(zp) + np.where(np.abs(zp - np.trunc(zp)) >= 0.5, np.sign(zp), 0.0),
                         -128.0, 127.0)
        offset = np.where(flat, 0, nudged).astype(np.int64)
        sf = np.where(flat, np.float32(1), scale.astype(np.float32))
        inv = (1.0 / sf.astype(np.float64)).astype(np.float32)
        qmin, qmax = -128, 127
    else:
        rng = np.abs(x).max(axis=1, initial=np.float32(0))
        flat = rng == 0
        safe = np.where(flat, np.float32(1), rng)
        sf = np.where(flat, np.float32(1), safe / np.float32(127)).astype(np.float32)
        inv = (np.float32(127) / safe).astype(np.float32)
        offset = np.zeros(m, np.int64)
        qmin, qmax = -127, 127
    prod = (x * inv[:, None]).astype(np.float32)
    r = np.empty(prod.shape, np.float32)
    r[:, :n_vec] = neon_round(prod[:, :n_vec])
    r[:, n_vec:] = round_half_away32(prod[:, n_vec:])
    q = np.clip(r.astype(np.int64) + offset[:, None], qmin, qmax)
    q[flat] = 0
    return q, sf, offset


def channel_shape(rank: int, axis: int, n: int) -> tuple[int, ...]:
    """The shape that broadcasts n per-channel values along `axis` of a rank-`rank` array."""
    shape = [1] * rank
    shape[axis] = n
    return tuple(shape)


def same_type_qparams(ctx, types: tuple[str, ...], what: str = "a quantized op", symmetric16: bool = True
                      ) -> tuple[np.dtype, np.float32, int, np.float32, int]:
    """Checks of an op whose output has its input 0's type (activations, unary ops, reductions): the
    type is one of `types`, both tensors have per-tensor parameters, int16 zero points are 0 (LiteRT's
    symmetric int16) when `symmetric16`. Returns (dtype, input scale, input zero point, output scale,
    output zero point), scales as float32 (LiteRT's TfLiteQuantizationParams)."""
    x_t, y_t = ctx.input_tensor(0), ctx.output_tensor(0)
    dt = x_t.dtype
    if dt.name not in types:
        raise ctx.fail(f"quantized input type {dt.name} is not supported (supported: {', '.join(types)})")
    if y_t.dtype != dt:
        raise ctx.fail(f"output type {y_t.dtype.name} differs from input type {dt.name}")
    qi, qo = qparams(x_t), qparams(y_t)
    if qi is None or qo is None:
        raise ctx.fail(f"{what} needs quantization parameters on its input and output")
    if qi.per_channel or qo.per_channel:
        raise ctx.fail(f"{what} needs per-tensor quantization parameters")
    zi, zo = int(qi.zero_point[0]), int(qo.zero_point[0])
    if symmetric16 and dt == np.int16 and (zi != 0 or zo != 0):
        raise ctx.fail(f"int16 input and output need zero point 0, have {zi} and {zo}")
    return dt, np.float32(qi.scale[0]), zi, np.float32(qo.scale[0]), zo


def is_hybrid(ctx) -> bool:
    """A float32 input with int8 weights (input 1) that carry quantization: LiteRT's hybrid (dynamic-range)
    form of FULLY_CONNECTED, BATCH_MATMUL and the convolutions, which their float kernels branch to."""
    x_t, w_t = ctx.input_tensor(0), ctx.input_tensor(1)
    return (x_t is not None and w_t is not None and x_t.dtype == np.float32 and w_t.type_name == "INT8"
            and qparams(w_t) is not None)


def _row_tile(rows: int, channels: int, width: int = 512) -> int:
    """The smallest divisor of rows whose multiple of channels reaches `width` (else rows): per-channel
    constants repeated that many times make the broadcast inner loops that long."""
    for r in range(1, rows + 1):
        if rows % r == 0 and (r * channels >= width or r == rows):
            return r
    return 1


class OutputStage:
    """The output stage of a quantized op, prepared once: int accumulators [..., C] times per-channel
    (last axis) multipliers and shifts, plus the output zero point, clamped to [lo, hi], in `dtype`.

    The first `half_up` channels round as LiteRT's optimized x86 kernels (multiply_by_quantized_multiplier_
    half_up), the rest as the reference (multiply_by_quantized_multiplier). When `bound` (the largest
    |accumulator + bias| the op can produce) keeps every value and its left shift inside int32, nothing
    can wrap or saturate, and both roundings collapse into one shift: the high multiply
    floor((x*m + 2**30) / 2**31) followed by the right shift floor((h + 2**(r-1)) / 2**r) is
    floor((x*m + 2**30 + 2**(30+r)) / 2**(31+r)) (nested floors of positive divisors), and the reference's
    halves away from zero only take one less where h < 0. That is three in-place passes over the
    accumulators instead of twenty; without such a bound the general functions above run.

    When moreover every channel's (|sum| bound * multiplier * 2**left + |constant term|) stays under
    2**53, the same floor is computed in float64 (`_float_path`): every product and sum is then an exact
    float64 integer, and scaling by 2**-(31 + r) is exact too. Float64 multiplies and adds vectorise where
    int64 multiplies and per-channel shifts do not, and the per-channel constants are tiled along rows so
    that a narrow layer's inner loops are long. `bound` may be one int or one per channel."""

    def __init__(self, mult, shift, zero_point: int, lo: int, hi: int, dtype, *, half_up: int = 0,
                 bound: int | None = None):
        self.mult = np.asarray(mult, _I64)
        self.shift = np.asarray(shift, _I64)
        self.zero_point, self.lo, self.hi, self.dtype = int(zero_point), int(lo), int(hi), np.dtype(dtype)
        self.half_up = int(half_up)
        left = np.maximum(self.shift, 0)
        right = np.maximum(-self.shift, 0)
        bounds = None if bound is None else [int(b) for b in np.broadcast_to(bound, self.mult.shape)]
        self.fast = (bounds is not None and self.mult.size > 0
                     and all(b << int(k) < (1 << 30) for b, k in zip(bounds, left)))
        self.left = left if left.any() else None
        self.total_shift = 31 + right
        self.offset = (1 << 30) + np.where(right > 0, _I64(1) << (30 + right), 0)
        # the reference's negative ties: one 2**31 less where the high product is negative and r > 0
        self.tie_fix = np.where(right > 0, _I64(1) << 31, 0)
        self.reference_from = self.half_up if self.tie_fix[self.half_up:].any() else self.mult.size
        # floor(v / 2**k) + zp is floor((v + zp * 2**k) / 2**k): the zero point joins the offset when
        # it cannot overflow (|x*m| < 2**61 on this path)
        self.zero_point_in_offset = self.fast and all(
            abs(self.zero_point) << int(k) < 1 << 61 for k in np.ravel(self.total_shift))
        if self.zero_point_in_offset:
            self.offset = self.offset + (_I64(self.zero_point) << self.total_shift)
        self.float_ok = self.fast and self.reference_from == self.mult.size and self._float_exact(bounds, left)
        if self.float_ok:   # m * 2**left and the constant term, both scaled by 2**-s (exact)
            scale = np.exp2(-self.total_shift.astype(np.float64))
            self._float_mult = np.ldexp(self.mult.astype(np.float64), left) * scale
            self._float_const = np.array(self._integer_constants(), np.float64) * scale
        self._float_tiles: dict = {}

    def _float_exact(self, bounds: list[int], left: np.ndarray) -> bool:
        """Whether every intermediate of _float_path is an integer below 2**53 (exact in float64): the
        product |(acc + bias) * m * 2**left| <= bound * m * 2**left, plus the constant term."""
        worst = 0
        for b, m, k, c in zip(bounds, self.mult, left, self._integer_constants()):
            worst = max(worst, (b * int(m) << int(k)) + abs(c))
        return worst < 1 << 53

    def _integer_constants(self) -> list[int]:
        """Per channel, what _float_path adds to the scaled product before the shift (bias aside): the
        rounding offset and (zp - lo) * 2**s, which moves the clamp's low end to 0."""
        zp_in = self.zero_point if self.zero_point_in_offset else 0
        return [int(c) - (zp_in << int(t)) + ((self.zero_point - self.lo) << int(t))
                for c, t in zip(np.broadcast_to(self.offset, self.mult.shape), np.broadcast_to(self.total_shift, self.mult.shape))]

    def __call__(self, acc: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
        """acc: integer-valued array (ints, or floats holding exact integers) of accumulators; bias: int
        per channel, added first. acc is not modified."""
        if self.float_ok:
            return self._float_path(np.asarray(acc), bias)
        a = np.asarray(acc).astype(_I64)
        if bias is not None:
            a += bias
        if not self.fast:
            return self._general(a)
        if self.left is not None:
            a <<= self.left
        a *= self.mult
        k = self.reference_from
        if k < self.mult.size:
            ref = a[..., k:]
            ref -= (ref < -(1 << 30)) * self.tie_fix[k:]      # x*m + 2**30 < 0: the high product is negative
        a += self.offset
        a >>= self.total_shift
        return self._finish(a, add_zero_point=not self.zero_point_in_offset)

    def _general(self, a: np.ndarray) -> np.ndarray:
        a = wrap_int32(a)                  # LiteRT's int32 accumulators wrap (as ruy's do)
        k = self.half_up
        if k >= self.mult.size:
            r = multiply_by_quantized_multiplier_half_up(a, self.mult, self.shift)
        elif k:
            r = np.concatenate([multiply_by_quantized_multiplier_half_up(a[..., :k], self.mult[:k], self.shift[:k]),
                                multiply_by_quantized_multiplier(a[..., k:], self.mult[k:], self.shift[k:])],
                               axis=-1)
        else:
            r = multiply_by_quantized_multiplier(a, self.mult, self.shift)
        return self._finish(r)

    def _float_path(self, acc: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        """floor(((acc + bias) * m * 2**left + offset + (zp - lo) * 2**s) / 2**s), clamped to [0, hi - lo],
        computed as acc * m' + c' in float64 (both exact scalings of exact integers), truncated into the
        unsigned type of the output's width, plus lo (wrapping, so that it lands in the signed range)."""
        channels = self.mult.size
        rows = acc.size // channels
        key = (rows, None if bias is None else id(bias))
        hit = self._float_tiles.get(key)
        if hit is None or hit[0] is not bias:
            tile = _row_tile(rows, channels)
            # the bias's term bias * m * 2**left * 2**-s joins the constant (exact: within the bound)
            const = self._float_const if bias is None else self._float_const + np.asarray(bias, np.float64) * self._float_mult
            hit = (bias, tile, np.tile(self._float_mult, tile), np.tile(const, tile))
            self._float_tiles[key] = hit
        _, tile, mult, const = hit
        t = acc.reshape(rows // tile, tile * channels).astype(np.float64)
        t *= mult
        t += const
        clip_ufunc(t, 0.0, float(self.hi - self.lo), out=t)
        out = t.astype(np.dtype(f"u{self.dtype.itemsize}")).view(self.dtype).reshape(acc.shape)
        if self.lo:
            out += self.dtype.type(self.lo)
        return out

    def _finish(self, a: np.ndarray, add_zero_point: bool = True) -> np.ndarray:
        if self.zero_point and add_zero_point:
            a += self.zero_point
        out = np.empty(a.shape, self.dtype)
        clip_ufunc(a, self.lo, self.hi, out=out, casting="unsafe")
        return out


# ------------------------------------------------------------- gemmlowp int16 fixed point
# gemmlowp's FixedPoint<int16> arithmetic (the integer LSTM's gates, int16 TANH/LOGISTIC with a
# power-of-two input scale) on int64 arrays; its sigmoid and tanh are tables over all 65536 inputs,
# built once.

def wrap_int16(x):
    """int64 values cast to int16 as C does (modulo 2**16), kept as int64."""
    return ((np.asarray(x, _I64) + 32768) & 0xFFFF) - 32768


def saturating_rounding_doubling_high_mul16(a, b):
    """gemmlowp's int16 SaturatingRoundingDoublingHighMul: (a*b + nudge) / 2**15 truncated, -1*-1 -> max."""
    ab = a * b
    total = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    q = np.where(total >= 0, total >> 15, -((-total) >> 15))
    return np.where((a == -32768) & (b == -32768), 32767, wrap_int16(q))


def _pot16(x, e: int):
    """gemmlowp's SaturatingRoundingMultiplyByPOT<e> on int16 values."""
    if e > 0:
        threshold = (1 << (15 - e)) - 1
        return np.where(x > threshold, 32767, np.where(x < -threshold, -32768, wrap_int16(x << e)))
    return rounding_divide_by_pot(x, -e) if e < 0 else x


def _const16(raw32: int) -> int:
    """GEMMLOWP_CHECKED_FIXEDPOINT_CONSTANT for int16: the int32 raw constant rounding-shifted by 16."""
    return int(rounding_divide_by_pot(np.int64(raw32), 16))


def _exp_on_negative16(a, ib: int):
    """gemmlowp exp_on_negative_values for FixedPoint<int16, ib>: an F0 result."""
    fb = 15 - ib
    quarter = 1 << (fb - 2)
    amq = wrap_int16((a & (quarter - 1)) - quarter)
    x = wrap_int16(_pot16(amq, ib) + (1 << 12))            # Rescale<0>, then + 1/8 (F0)
    x2 = saturating_rounding_doubling_high_mul16(x, x)
    x3 = saturating_rounding_doubling_high_mul16(x2, x)
    x4 = saturating_rounding_doubling_high_mul16(x2, x2)
    t = saturating_rounding_doubling_high_mul16(wrap_int16(rounding_divide_by_pot(x4, 2) + x3), _const16(715827883))
    t = rounding_divide_by_pot(wrap_int16(t + x2), 1)
    c = _const16(1895147668)
    result = np.clip(c + saturating_rounding_doubling_high_mul16(np.full_like(x, c), wrap_int16(x + t)), -32768, 32767)
    remainder = wrap_int16(amq - a)
    for exponent, mult in ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
                           (2, 39332535), (3, 720401), (4, 242)):
        if ib > exponent:
            bit = (remainder & (1 << (fb + exponent))) != 0
            result = np.where(bit, saturating_rounding_doubling_high_mul16(result, np.full_like(result, _const16(mult))), result)
    if ib > 5:
        result = np.where(a < _const16(-(1 << (36 - ib))), 0, result)
    return np.where(a == 0, 32767, result)


def _newton_reciprocal16(a, minus_one: bool):
    """gemmlowp's 1/(1+x) (or (1-x)/(1+x) when minus_one) for F0 x in (0, 1): Newton-Raphson in F2."""
    s = a + 32767
    half = wrap_int16(np.where(s >= 0, (s + 1) // 2, -((-(s - 1)) // 2)))   # RoundingHalfSum, C division
    x = wrap_int16(_const16(1515870810) + saturating_rounding_doubling_high_mul16(half, np.full_like(half, _const16(-1010580540))))
    for _ in range(3):
        one_minus = wrap_int16(8192 - saturating_rounding_doubling_high_mul16(half, x))
        x = wrap_int16(x + _pot16(saturating_rounding_doubling_high_mul16(x, one_minus), 2))
    return _pot16(wrap_int16(x - 8192), 2) if minus_one else _pot16(x, 1)


def _gemmlowp_logistic16(a, ib: int):
    pos = a > 0
    absx = np.where(pos, a, wrap_int16(-a))
    r_pos = _newton_reciprocal16(_exp_on_negative16(wrap_int16(-absx), ib), False)
    return np.where(a == 0, 16384, np.where(pos, r_pos, wrap_int16(32767 - r_pos)))


def _gemmlowp_tanh16(a, ib: int):
    neg = a < 0
    n = np.where(neg, a, wrap_int16(-a))
    t = _newton_reciprocal16(_exp_on_negative16(n, ib + 1), True)
    return np.where(a == 0, 0, np.where(neg, wrap_int16(-t), t))


_GEMMLOWP_TABLES: dict[tuple[str, int], np.ndarray] = {}


def gemmlowp_table(fn: str, ib: int) -> np.ndarray:
    """The int16 -> int16 table of gemmlowp's logistic or tanh of FixedPoint<int16, ib> (F0 result)."""
    key = (fn, ib)
    table = _GEMMLOWP_TABLES.get(key)
    if table is None:
        raw = np.arange(-32768, 32768, dtype=_I64)
        f = _gemmlowp_logistic16 if fn == "logistic" else _gemmlowp_tanh16
        table = _GEMMLOWP_TABLES[key] = f(raw, ib).astype(np.int16)
    return table
