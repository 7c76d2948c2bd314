"""Activation functions: ReLU family, leaky/parametric ReLU, ELU, tanh, logistic, hard-swish, GELU,
softmax and log-softmax.

float32 is computed in float32. float16 (accepted by LiteRT through XNNPACK) is computed in float32
and rounded once at the end, so multi-step formulas do not round after every step.
"""
from __future__ import annotations

import math

import numpy as np

from onert_py.backends.cpu._common import Scratch
from onert_py.backends.cpu._common import clip_ufunc as _clip_ufunc
from onert_py.backends.cpu._conv_plan import ROW, chunk
from onert_py.backends.cpu._quant import (gemmlowp_table, multiply_by_quantized_multiplier, qparams,
                                          quantize_multiplier, round_half_away32, rounding_divide_by_pot,
                                          same_type_qparams, saturating_rounding_doubling_high_mul16,
                                          to_int32_x86, wrap_int32)
from onert_py.backends.cpu.shape import check_dtype
from onert_py.backends import gradients as gr
from onert_py.backends.registry import CPU, KernelContext, Run, grad_rule, shape_rule
from onert_py.backends.shape_rules import broadcasting, same_shape

_FLOATS = ("float32", "float16")
_F32 = np.float32
_I64 = np.int64


def _unary(ctx: KernelContext, fn, fn_out=None) -> Run:
    """Run closure for out = fn(x) with `fn` working in float32; float16 is widened and narrowed.

    `fn_out(x, y)` (optional) writes the result into y, a fresh float32 array of x's shape: float32
    inputs of rank >= 1 then write into the planned output buffer (no new array, no page faults)."""
    ctx.expect_inputs(1)
    # int8/uint8/int16 activations are quantized-only in LiteRT: refuse them here, not mid-run
    check_dtype(ctx)
    (a,), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values
    x_t = ctx.input_tensor(0)
    if x_t.dtype == np.float16:
        def run() -> None:
            v[o] = np.asarray(fn(np.asarray(v[a], np.float32))).astype(np.float16)
    elif fn_out is not None and len(x_t.shape) > 0:
        alloc = ctx.output_buffer(0)

        def run() -> None:
            x = v[a]
            v[o] = fn_out(x, alloc(x.shape))
    else:
        def run() -> None:
            v[o] = fn(v[a])
    return run


def _clip(lo: float, hi: float):
    lo32, hi32 = _F32(lo), _F32(hi)

    def clip(x, out=None):
        # One pass of the clip ufunc, which replaces only values strictly outside [lo, hi] (as LiteRT's
        # x < lo ? lo : x): NaN stays NaN and -0 stays -0, where np.maximum(-0, 0) gives +0. It is
        # also ~4x faster than np.maximum against a scalar.
        return _clip_ufunc(x, lo32, hi32, out=out)
    return clip


def _clip_unary(ctx: KernelContext, lo: float, hi: float) -> Run:
    c = _clip(lo, hi)
    return _unary(ctx, c, c)


# --------------------------------------------------------------------------------------------------
# Quantized kernels (LiteRT's builtin ones, bit for bit). TFLite keeps scales as float32 and derives
# every real multiplier in float32 arithmetic (float / float) before QuantizeMultiplier widens it, so
# the multipliers here are computed in float32 too.

_I8 = ("int8", "uint8")
_I8_16 = ("int8", "uint8", "int16")


def _q_unary(ctx: KernelContext, types: tuple[str, ...], symmetric16: bool = True):
    """Checks of a one-input quantized activation (_quant.same_type_qparams): (input scale, input zero
    point, output scale, output zero point) with float32 scales."""
    ctx.expect_inputs(1)
    return same_type_qparams(ctx, types, "a quantized activation", symmetric16)[1:]






def _lut(dt: np.dtype, s_in, z_in: int, s_out, z_out: int, fn) -> np.ndarray:
    """LiteRT's LUTPopulate for int8/uint8: every input value dequantized in float32, transformed by
    `fn` (float32 -> float32), multiplied by 1/s_out, rounded half away, offset by z_out (a float32
    add), truncated to int32 and clamped. The table is indexed by the input's bytes (x.view(uint8))."""
    info = np.iinfo(dt)
    vals = np.arange(info.min, info.max + 1, dtype=np.int64)
    deq = _F32(s_in) * (vals - z_in).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        tr = np.asarray(fn(deq), np.float32)
        inv = _F32(1) / _F32(s_out)
        q = round_half_away32((tr * inv).astype(np.float32)) + _F32(z_out)
    q = np.clip(to_int32_x86(q.astype(np.float32)), info.min, info.max)
    table = np.empty(256, dt)
    table[vals.astype(dt).view(np.uint8)] = q.astype(dt)
    return table


def _lut_run(ctx: KernelContext, table: np.ndarray) -> Run:
    (a,), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values

    def run() -> None:
        v[o] = table[np.asarray(v[a]).view(np.uint8)]
    return run


def _libm32(fn):
    """A float32 libm function (expf, tanhf, ...) as the float64 one rounded to float32: the correctly
    rounded value, which glibc's float functions return but for rare last-ulp cases."""
    return lambda x: fn(np.asarray(x, np.float64)).astype(np.float32)


_exp32, _tanh32, _expm1_32 = _libm32(np.exp), _libm32(np.tanh), _libm32(np.expm1)
_erfc32 = _libm32(np.vectorize(math.erfc, otypes=[np.float64]))


def _q_relu_x(ctx: KernelContext, lo: float, hi: float, types: tuple[str, ...]) -> Run:
    """LiteRT's QuantizedReluX: (x - zp_in) rescaled by s_in / s_out, plus zp_out, clamped to the
    bounds [zp_out + round(lo / s_out), zp_out + round(hi / s_out)] (float32 division, roundf) within
    the type (an infinite hi is the type's maximum)."""
    s_in, z_in, s_out, z_out = _q_unary(ctx, types)
    info = np.iinfo(ctx.input_tensor(0).dtype)
    mult, shift = quantize_multiplier(float(np.float32(s_in / s_out)))
    with np.errstate(over="ignore", divide="ignore"):
        qlo = max(int(info.min), z_out + int(round_half_away32(np.float32(_F32(lo) / s_out))))
        qhi = int(info.max) if hi == np.inf else min(int(info.max),
                                                      z_out + int(round_half_away32(np.float32(_F32(hi) / s_out))))
    dt = info.dtype
    (a,), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values

    def run() -> None:
        x = np.asarray(v[a], np.int64) - z_in
        r = multiply_by_quantized_multiplier(x, mult, shift) + z_out
        v[o] = np.minimum(np.maximum(r, qlo), qhi).astype(dt)
    return run


@CPU.register("RELU", dtypes=_FLOATS)
def relu(ctx: KernelContext) -> Run:
    return _clip_unary(ctx, 0, np.inf)


@CPU.register_quantized("RELU", dtypes=_I8_16)
def relu_quantized(ctx: KernelContext) -> Run:
    return _q_relu_x(ctx, 0, np.inf, _I8_16)


@CPU.register("RELU6", dtypes=_FLOATS)
def relu6(ctx: KernelContext) -> Run:
    return _clip_unary(ctx, 0, 6)


@CPU.register_quantized("RELU6", dtypes=_I8_16)
def relu6_quantized(ctx: KernelContext) -> Run:
    return _q_relu_x(ctx, 0, 6, _I8_16)


@CPU.register("RELU_N1_TO_1", dtypes=_FLOATS)
def relu_n1_to_1(ctx: KernelContext) -> Run:
    return _clip_unary(ctx, -1, 1)


@CPU.register_quantized("RELU_N1_TO_1", dtypes=_I8)
def relu_n1_to_1_quantized(ctx: KernelContext) -> Run:
    return _q_relu_x(ctx, -1, 1, _I8)


@CPU.register("RELU_0_TO_1", dtypes=("float32",))
def relu_0_to_1(ctx: KernelContext) -> Run:
    return _clip_unary(ctx, 0, 1)


@CPU.register_quantized("RELU_0_TO_1", dtypes=_I8)
def relu_0_to_1_quantized(ctx: KernelContext) -> Run:
    return _q_relu_x(ctx, 0, 1, _I8)


@CPU.register("LEAKY_RELU", dtypes=_FLOATS)
def leaky_relu(ctx: KernelContext) -> Run:
    alpha = _F32(ctx.options.get("alpha", 0.0))
    if alpha == 0:     # +inf * 0 is NaN: the select (and -0.0 for x < 0, as LiteRT gives)
        return _unary(ctx, lambda x: np.where(x > 0, x, x * alpha))
    pick = np.maximum if alpha < 1 else np.minimum

    def fn(x):
        # x > 0 ? x : x * alpha as max(x, x * alpha) (min above alpha 1): the larger of the two is x
        # above 0 and x * alpha below (NaN stays NaN; on equal zeros max / min return their second
        # operand, x * alpha's sign as the select gives it; tests/backends/jit/test_activations.py
        # compares the bits). Two passes instead of np.where's three (32768 values: 58 -> ~10 us).
        y = x * alpha
        return pick(x, y, out=y) if type(y) is np.ndarray else pick(x, y)
    return _unary(ctx, fn)


@CPU.register_quantized("LEAKY_RELU", dtypes=_I8_16)
def leaky_relu_quantized(ctx: KernelContext) -> Run:
    """LiteRT's QuantizeLeakyRelu: x - zp_in rescaled by s_in / s_out where it is >= 0, by
    s_in * alpha / s_out below (float32 arithmetic), plus zp_out, clamped to the type."""
    s_in, z_in, s_out, z_out = _q_unary(ctx, _I8_16)
    alpha = _F32(ctx.options.get("alpha", 0.0))
    m_id, sh_id = quantize_multiplier(float(np.float32(s_in / s_out)))
    m_al, sh_al = quantize_multiplier(float(np.float32(np.float32(s_in * alpha) / s_out)))
    # A negative alpha: LiteRT's 8-bit kernel rescales by |multiplier| and negates after (halves round
    # differently from a negative multiplier's); its int16 kernel uses the negative multiplier.
    sign_al = 1
    if m_al < 0 and ctx.input_tensor(0).dtype != np.int16:
        sign_al, m_al = -1, -m_al
    info = np.iinfo(ctx.input_tensor(0).dtype)
    lo, hi, dt = int(info.min), int(info.max), info.dtype
    (a,), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values

    def run() -> None:
        x = np.asarray(v[a], np.int64) - z_in
        pos = x >= 0
        r = np.where(pos, multiply_by_quantized_multiplier(x, m_id, sh_id),
                     sign_al * multiply_by_quantized_multiplier(x, m_al, sh_al)) + z_out
        v[o] = np.clip(r, lo, hi).astype(dt)
    return run


def _prelu_plan(x_shape: tuple[int, ...], alpha: np.ndarray):
    """(rows shape, formula, tiled constants) for a constant alpha that varies at most along x's last
    axis and holds no 0 or NaN; None when the generic formula must be used.

    With a != 0 and not NaN, `x >= 0 ? x : a*x` equals max(x, a*x) where a <= 1 and min(x, a*x) where
    a >= 1, bit for bit (the product is LiteRT's, -0 stays -0, +-inf and NaN come out the same; a == 0
    would turn +inf into max(inf, NaN)). Mixed channels use s*max(s*x, (s*a)*x) with s = +-1: a sign
    flip is exact, so (s*a)*x == s*(a*x) and the max picks what min would for s = -1. numpy's max and
    min return their second argument on ties, so x goes second: a negative a makes a*x == x at x = +-0
    with the other sign of zero, and the result must be x (pinned by the tests)."""
    if not x_shape or alpha.ndim > len(x_shape) or any(d != 1 for d in alpha.shape[:-1]):
        return None
    c = x_shape[-1]
    a = alpha.reshape(-1)
    if a.size not in (1, c) or np.isnan(a).any() or (a == 0).any():
        return None
    m = int(np.prod(x_shape[:-1], dtype=np.int64))
    if m * c == 0:
        return None
    t = chunk(m, c, ROW)   # long rows: a broadcast over a C-float last axis costs a loop call per pixel
    rows = (m // t, t * c)
    a_row = np.tile(np.broadcast_to(a, (c,)).astype(np.float32), t)
    if (a_row <= 1).all():
        return rows, "max", (a_row,)
    if (a_row >= 1).all():
        return rows, "min", (a_row,)
    s = np.where(a_row <= 1, np.float32(1), np.float32(-1)).astype(np.float32)
    return rows, "mixed", (s, s * a_row)


@CPU.register("PRELU", dtypes=("float32",))
def prelu(ctx: KernelContext) -> Run:
    """y = x >= 0 ? x : alpha * x, alpha broadcasting against x (LiteRT's reference formula)."""
    ctx.expect_inputs(2)
    check_dtype(ctx)
    check_dtype(ctx, 1)
    (a, s), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values
    alpha = ctx.const(1)
    x_t = ctx.input_tensor(0)

    def run() -> None:
        x, al = v[a], v[s]
        v[o] = np.where(x >= 0, x, x * al)   # alpha broadcasts against x
    if alpha is None or x_t.is_dynamic or np.asarray(alpha).dtype != np.float32:
        return run
    x_shape = tuple(x_t.shape)
    plan = _prelu_plan(x_shape, np.asarray(alpha))
    if plan is None:
        return run
    rows, kind, consts = plan
    alloc = ctx.output_buffer(0)       # every path below writes a fresh array
    scratch = Scratch.of(ctx, np.float32)
    n = rows[0] * rows[1]
    mul, maximum, minimum = np.multiply, np.maximum, np.minimum

    if kind == "mixed":
        sign, s_alpha = consts

        def run_mixed() -> None:
            x = v[a]
            if x.shape != x_shape:
                return run()
            xr = x.reshape(rows)
            y = alloc(x_shape)
            yr = y.reshape(rows)
            t = scratch.get(n).reshape(rows)
            mul(xr, s_alpha, out=yr)
            mul(xr, sign, out=t)
            maximum(yr, t, out=yr)
            mul(yr, sign, out=yr)
            v[o] = y
        return run_mixed

    (a_row,) = consts
    pick = maximum if kind == "max" else minimum

    def run_tiled() -> None:
        x = v[a]
        if x.shape != x_shape:
            return run()
        xr = x.reshape(rows)
        y = alloc(x_shape)
        yr = y.reshape(rows)
        mul(xr, a_row, out=yr)
        pick(yr, xr, out=yr)
        v[o] = y
    return run_tiled


@CPU.register_quantized("PRELU", dtypes=_I8_16)
def prelu_quantized(ctx: KernelContext) -> Run:
    """LiteRT's reference quantized PRELU, alpha a quantized tensor broadcasting against x (int8 alpha
    for int8 and int16 x, uint8 for uint8): x - zp_in rescaled by s_in / s_out where it is >= 0, else
    (x - zp_in) * (alpha - zp_alpha) rescaled by s_in * s_alpha / s_out (float32 arithmetic), plus
    zp_out, clamped to the type. The output has x's shape (LiteRT's check)."""
    ctx.expect_inputs(2)
    x_t, al_t, y_t = ctx.input_tensor(0), ctx.input_tensor(1), ctx.output_tensor(0)
    name = x_t.dtype.name
    if name not in _I8_16:
        raise ctx.fail(f"quantized input type {name} is not supported (supported: int8, uint8, int16)")
    if y_t.dtype != x_t.dtype:
        raise ctx.fail(f"output type {y_t.dtype.name} differs from input type {name}")
    want = "uint8" if name == "uint8" else "int8"
    if al_t.dtype.name != want:
        raise ctx.fail(f"alpha type {al_t.dtype.name} is not supported with {name} input (supported: {want})")
    qi, qa, qo = qparams(x_t), qparams(al_t), qparams(y_t)
    if qi is None or qa is None or qo is None:
        raise ctx.fail("a quantized PRELU needs quantization parameters on input, alpha and output")
    if qi.per_channel or qa.per_channel or qo.per_channel:
        raise ctx.fail("a quantized PRELU needs per-tensor quantization parameters")
    s_in, s_al, s_out = _F32(qi.scale[0]), _F32(qa.scale[0]), _F32(qo.scale[0])
    z_in, z_al, z_out = int(qi.zero_point[0]), int(qa.zero_point[0]), int(qo.zero_point[0])
    x_shape, al_shape = tuple(x_t.shape), tuple(al_t.shape)
    if not x_t.is_dynamic and not al_t.is_dynamic:
        try:
            out_shape = np.broadcast_shapes(x_shape, al_shape)
        except ValueError:
            raise ctx.fail(f"alpha shape {list(al_shape)} does not broadcast against input shape "
                           f"{list(x_shape)}") from None
        if out_shape != x_shape:
            raise ctx.fail(f"alpha shape {list(al_shape)} broadcasts the input shape {list(x_shape)} "
                           f"to {list(out_shape)}: the output must have the input's shape")
    m1, sh1 = quantize_multiplier(float(_F32(s_in / s_out)))
    m2, sh2 = quantize_multiplier(float(_F32(_F32(s_in * s_al) / s_out)))
    info = np.iinfo(x_t.dtype)
    lo, hi, dt = int(info.min), int(info.max), info.dtype
    (a, s), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values

    def run() -> None:
        x = np.asarray(v[a], np.int64) - z_in
        al = np.asarray(v[s], np.int64) - z_al
        x, al = np.broadcast_arrays(x, al)
        r = np.where(x >= 0, multiply_by_quantized_multiplier(x, m1, sh1),
                     multiply_by_quantized_multiplier(x * al, m2, sh2)) + z_out
        v[o] = np.clip(r, lo, hi).astype(dt)
    return run


@CPU.register("ELU", dtypes=_FLOATS)
def elu(ctx: KernelContext) -> Run:
    zero = _F32(0)

    def fn(x):
        # LiteRT's x < 0 ? expm1(x) : x as max(expm1(min(x, 0)), x): expm1(x) > x below 0 and
        # expm1(0) = 0 <= x above (NaN stays NaN; -0.0 keeps its sign, max returning its second operand
        # on equal values; tests/backends/cpu/test_activations.py). Three passes, where np.where's
        # select alone cost more than the three (32768 values: 72 -> 36 us).
        y = np.minimum(x, zero)
        if type(y) is not np.ndarray:       # rank 0: a numpy scalar
            return np.maximum(np.expm1(y), x)
        np.expm1(y, out=y)
        return np.maximum(y, x, out=y)
    return _unary(ctx, fn)


@CPU.register_quantized("ELU", dtypes=("int8",))
def elu_quantized(ctx: KernelContext) -> Run:
    """int8 only (LiteRT's table of x < 0 ? expm1(x) : x)."""
    s_in, z_in, s_out, z_out = _q_unary(ctx, ("int8",))
    zero = _F32(0)
    table = _lut(np.dtype(np.int8), s_in, z_in, s_out, z_out,
                 lambda x: np.where(x < zero, _expm1_32(np.minimum(x, zero)), x))
    return _lut_run(ctx, table)


# LiteRT's table of sigmoid(i / 24) in Q0.16 (sigmoid_table_uint16), which its int16 TANH and
# LOGISTIC interpolate: data, its entries are not a plain rounding of the function.
_SIGMOID_Q16 = np.array([
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794, 41432,
    42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443, 48964, 49475,
    49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485,
    55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519,
    59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279, 61441, 61599, 61750, 61896, 62036,
    62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186, 63279, 63368, 63454, 63536,
    63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308, 64357, 64405,
    64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900,
    64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179,
    65194, 65208, 65221, 65234, 65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337,
    65345, 65352, 65360, 65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425,
    65429, 65433, 65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474,
    65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
    65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516, 65517,
    65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524, 65525, 65525,
    65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530,
    65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533,
    65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534,
    65534, 65534, 65534, 65535,
], np.int64)


def _checked_log2(scale) -> tuple[bool, int]:
    """CheckedLog2 (float32): (log2(scale) within 1e-3 of an integer, that integer)."""
    l2 = _F32(_F32(np.log(_F32(scale))) * _F32(_F32(1) / _F32(np.log(_F32(2)))))
    r = _F32(round_half_away32(l2))
    return bool(abs(_F32(l2 - r)) < _F32(1e-3)), int(r)


def _tanh_logistic16(ctx: KernelContext, tanh: bool) -> Run:
    """int16 TANH / LOGISTIC (zero points 0, output scale 2**-15): LiteRT's reference_integer_ops
    kernels, which rescale x to 1/(3*4096) per unit (x * multiplier, a rounding right shift), then
    interpolate sigmoid_table_uint16 linearly on |x| (9 low bits for LOGISTIC, 8 for TANH = 2*sigmoid(2x)
    - 1) and mirror negative inputs. A power-of-two input scale (2**-12, or 2**-11 for TANH: LiteRT's
    input_left_shift 0 or 1) runs LiteRT's optimized gemmlowp kernel instead: x as FixedPoint<int16, 3>
    (doubled, saturating, for TANH at 2**-11) through gemmlowp's tanh / logistic, an F0 result, which
    `_quant.gemmlowp_table` tabulates for all 65536 inputs. (Its SSE blocks round the int16 high
    multiply half up, its scalar tail half away from zero: the outputs are the same for every input.)"""
    op = "TANH" if tanh else "LOGISTIC"
    s_in, _, s_out, _ = _q_unary(ctx, ("int16",))
    pot_out, l2_out = _checked_log2(s_out)
    if not tanh and float(s_out) != 1.0 / 32768:
        raise ctx.fail(f"int16 LOGISTIC needs output scale 1/32768, has {float(s_out)}")
    if not pot_out or l2_out != -15:
        raise ctx.fail(f"int16 {op} needs output scale 2**-15, has {float(s_out)}")
    pot_in, l2_in = _checked_log2(s_in)
    if pot_in and 12 + l2_in in ((0, 1) if tanh else (0,)):
        table = gemmlowp_table("tanh" if tanh else "logistic", 3)
        if 12 + l2_in == 1:
            # SaturatingRoundingMultiplyByPOT<1> of the input, then the 2**-12 table
            table = table[np.clip(np.arange(-32768, 32768) * 2, -32768, 32767) + 32768]
        (a,), (o,) = ctx.inputs, ctx.outputs
        v = ctx.values

        def run_pot() -> None:
            v[o] = table[np.asarray(v[a]).view(np.uint16) ^ 0x8000]
        return run_pot
    m = float(s_in) * 4096.0 * 3.0
    shift = 0
    while m <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        m *= 2.0
    mult = int(m)
    rnd = (1 << (shift - 1)) if shift > 0 else 0
    frac = 8 if tanh else 9
    table = _SIGMOID_Q16
    (a,), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values

    def run() -> None:
        xi = wrap_int32(np.asarray(v[a], np.int64) * mult + rnd) >> shift
        ab = np.abs(xi)
        uh = ab >> frac
        ok = uh < 255
        k = np.where(ok, uh, 0)
        ua = table[k]
        lerp = (ua << frac) + (ab & ((1 << frac) - 1)) * (table[k + 1] - ua)
        pos = xi >= 0
        if tanh:
            r = np.where(ok, lerp, 0xFFFF << 8)
            r = np.where(pos, r - (1 << 23) + (1 << 7), -r + (1 << 23) + (1 << 7) - 1) >> 8
        else:
            r = np.where(ok, lerp, 0x7FFF << 10)
            r = np.where(pos, r + (1 << 9), (1 << 25) - r + (1 << 9) - 1) >> 10
        v[o] = r.astype(np.int16)
    return run


@CPU.register("TANH", dtypes=_FLOATS)
def tanh(ctx: KernelContext) -> Run:
    return _unary(ctx, np.tanh, np.tanh)


@CPU.register_quantized("TANH", dtypes=_I8_16)
def tanh_quantized(ctx: KernelContext) -> Run:
    """int8/uint8: LiteRT's 256-entry table of tanh (its default generic-optimized kernel); int16:
    `_tanh_logistic16`."""
    if ctx.input_tensor(0).dtype == np.int16:
        return _tanh_logistic16(ctx, tanh=True)
    s_in, z_in, s_out, z_out = _q_unary(ctx, _I8)
    return _lut_run(ctx, _lut(ctx.input_tensor(0).dtype, s_in, z_in, s_out, z_out, _tanh32))


def _logistic(x):
    # 1 / (1 + e^-x) without overflow: with e = exp(-|x|), it is 1/(1+e) for x >= 0, e/(1+e) below.
    e = np.exp(-np.abs(x))
    r = np.reciprocal(_F32(1) + e)
    return np.where(x >= 0, r, e * r)


def _logistic_out(x, y):
    # 1 / (1 + e^-x) in four in-place passes (no select: a data-dependent np.where mispredicts on every
    # other element). e^-x overflows to inf below x = -88.7, where the result 0 is within 3e-39.
    with np.errstate(over="ignore"):
        np.negative(x, out=y)
        np.exp(y, out=y)
    y += _F32(1)
    return np.divide(1, y, out=y)   # 1/y, as exact as np.reciprocal and twice as fast


@CPU.register("LOGISTIC", dtypes=_FLOATS)
def logistic(ctx: KernelContext) -> Run:
    return _unary(ctx, _logistic, _logistic_out)


@CPU.register_quantized("LOGISTIC", dtypes=_I8_16)
def logistic_quantized(ctx: KernelContext) -> Run:
    """int8/uint8: LiteRT's 256-entry table of 1 / (1 + exp(-x)) in float32; the output scale must be
    1/256 (LiteRT's check). int16: `_tanh_logistic16`."""
    if ctx.input_tensor(0).dtype == np.int16:
        return _tanh_logistic16(ctx, tanh=False)
    s_in, z_in, s_out, z_out = _q_unary(ctx, _I8)
    if float(s_out) != 1.0 / 256:
        raise ctx.fail(f"quantized LOGISTIC needs output scale 1/256, has {float(s_out)}")
    one = _F32(1)

    def sigmoid(x):
        return one / (one + _exp32(-x))
    return _lut_run(ctx, _lut(ctx.input_tensor(0).dtype, s_in, z_in, s_out, z_out, sigmoid))


@CPU.register("HARD_SWISH", dtypes=_FLOATS)
def hard_swish(ctx: KernelContext) -> Run:
    three, zero, six = _F32(3), _F32(0), _F32(6)

    def hswish(x):
        r = np.minimum(np.maximum(x + three, zero), six)
        return (x * r) / six

    def hswish_out(x, y):
        # LiteRT's x * min(6, max(0, x + 3)) / 6, in place: one clip pass for the max/min (NaN stays NaN
        # as with max/min: x * NaN is NaN either way)
        np.add(x, three, out=y)
        _clip_ufunc(y, zero, six, out=y)
        np.multiply(x, y, out=y)
        return np.divide(y, six, out=y)
    return _unary(ctx, hswish, hswish_out)


def _sat_shl16(x, amount: int):
    return np.clip(x * (1 << amount), -32768, 32767)


def _downscale_multiplier16(m: int) -> int:
    """DownScaleInt32ToInt16Multiplier: a Q0.31 multiplier rounded to Q0.15."""
    return 32767 if m >= (1 << 31) - 1 - (1 << 15) else (m + (1 << 15)) >> 16


@CPU.register_quantized("HARD_SWISH", dtypes=_I8)
def hard_swish_quantized(ctx: KernelContext) -> Run:
    """int8/uint8: LiteRT's reference fixed-point HardSwish in int16 arithmetic (its optimized kernel
    is NEON-only and falls back to it on x86). x - zp_in is taken to the "hires" scale s_in / 128 (x128);
    its value on the output scale is a rounding doubling high multiply by the Q0.15 multiplier of
    s_in / 128 / s_out; the "reluish" factor rescales it so that 3.0 is 32768 (saturating), maps [-1, 1]
    to [0, 1], and a truncating doubling high multiply of the two, a rounding right shift and zp_out
    give the output. LiteRT refuses s_in / s_out >= 128 (the output exponent must be <= 0).
    Each output depends on its input value alone, so the arithmetic runs once, at prepare time, over
    the 256 values, and a run looks the bytes up (MobileNetV3's [1, 64, 64, 16]: 301 us of numpy int64
    passes -> a table lookup)."""
    s_in, z_in, s_out, z_out = _q_unary(ctx, _I8)
    hires = _F32(_F32(1.0 / 128.0) * s_in)
    m_out32, e_out = quantize_multiplier(float(_F32(hires / s_out)))
    if e_out > 0:
        raise ctx.fail(f"quantized HARD_SWISH needs input scale / output scale below 128, has "
                       f"{float(s_in)} / {float(s_out)}")
    m_rel32, e_rel = quantize_multiplier(float(_F32(hires / _F32(3.0 / 32768.0))))
    m_out, m_rel = _downscale_multiplier16(m_out32), _downscale_multiplier16(m_rel32)
    info = np.iinfo(ctx.input_tensor(0).dtype)
    lo, hi, dt = int(info.min), int(info.max), info.dtype
    x_hi = (np.arange(256, dtype=np.uint8).view(dt).astype(np.int64) - z_in) * 128   # per byte; fits int16
    pre = saturating_rounding_doubling_high_mul16(x_hi, m_out)
    r = x_hi
    if e_rel > 0:
        r = _sat_shl16(r, e_rel - 1)
    r = saturating_rounding_doubling_high_mul16(r, m_rel)
    if e_rel > 0:
        r = _sat_shl16(r, 1)
    elif e_rel < 0:
        r = rounding_divide_by_pot(r, -e_rel)
    r = (r + (1 << 15)) >> 1
    p = r * pre
    p = np.where(p >= 0, p >> 15, -((-p) >> 15))          # SaturatingDoublingHighMul: truncates
    y = _wrap_int16(rounding_divide_by_pot(p, -e_out) + z_out)
    return _lut_run(ctx, np.clip(y, lo, hi).astype(dt))


def _wrap_int16(x):
    return ((x + (1 << 15)) & 0xFFFF) - (1 << 15)


# erfc(z) for z >= 0 as t * exp(-z^2 + P(t)), t = 1 / (1 + z/2): the Chebyshev fit of Numerical
# Recipes (relative error below 1.2e-7 everywhere), evaluated in float32.
_ERFC_COEFFS = tuple(_F32(c) for c in (
    0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418,
    0.37409196, 1.00002368, -1.26551223))


def _erfc(x):
    z = np.abs(x)
    t = np.reciprocal(_F32(1) + _F32(0.5) * z)
    p = _ERFC_COEFFS[0]
    for c in _ERFC_COEFFS[1:]:
        p = p * t + c
    r = t * np.exp(p - z * z)
    return np.where(x >= 0, r, _F32(2) - r)


# GELU's constants (the jit expression reads them too): the tanh form's sqrt(2 / pi) and 0.044715, and
# the erfc form's -1 / sqrt(2)
GELU_K, GELU_C, GELU_MINUS_SQRT_HALF = _F32(np.sqrt(2.0 / np.pi)), _F32(0.044715), _F32(-np.sqrt(0.5))


@CPU.register("GELU", dtypes=_FLOATS)
def gelu(ctx: KernelContext) -> Run:
    half, one = _F32(0.5), _F32(1)
    if ctx.options.get("approximate", False):
        k, c = GELU_K, GELU_C

        def fn(x):
            return half * x * (one + np.tanh(k * (x + c * x * x * x)))
    else:
        m = GELU_MINUS_SQRT_HALF

        def fn(x):
            # 0.5 x erfc(-x / sqrt 2): LiteRT's form, which keeps precision for large negative x.
            return half * x * _erfc(x * m)
    return _unary(ctx, fn)


@CPU.register_quantized("GELU", dtypes=_I8)
def gelu_quantized(ctx: KernelContext) -> Run:
    """int8/uint8: LiteRT's 256-entry table of its float32 GELU (GeluTransform / GeluTransformApproximate)."""
    s_in, z_in, s_out, z_out = _q_unary(ctx, _I8)
    half, one = _F32(0.5), _F32(1)
    if ctx.options.get("approximate", False):
        k, c = _F32(2 / math.sqrt(math.pi) * math.sqrt(0.5)), _F32(0.044715)

        def fn(x):
            return (half * x) * (one + _tanh32(k * (x + ((c * x) * x) * x)))
    else:
        m = _F32(-math.sqrt(0.5))

        def fn(x):
            return (half * x) * _erfc32(x * m)
    return _lut_run(ctx, _lut(ctx.input_tensor(0).dtype, s_in, z_in, s_out, z_out, fn))


@CPU.register("SOFTMAX", dtypes=_FLOATS)
def softmax(ctx: KernelContext) -> Run:
    beta = _F32(ctx.options.get("beta", 1.0))
    if len(ctx.input_tensor(0).shape) == 0:
        raise ctx.fail("SOFTMAX needs an input of rank 1 or more")

    def fn(x):
        e = x - x.max(axis=-1, keepdims=True)
        if beta != 1:
            e *= beta
        np.exp(e, out=e)
        e /= e.sum(axis=-1, keepdims=True)
        return e
    return _unary(ctx, fn)


def _round_away(x):
    """std::round of float64 values (halves away from zero), exactly."""
    t = np.trunc(x)
    return t + np.where(np.abs(x - t) >= 0.5, np.sign(x), 0.0)


def _lut16_populate(in_scale: float, in_zp: int, out_scale: float, out_zp: int, fn,
                    ftype=np.float64) -> np.ndarray:
    """LiteRT's LUTPopulate<int16_t>: 513 entries, fn sampled at 512 even steps over the input range and
    at its end, in `ftype` arithmetic (float64 for SOFTMAX's tables, float32 otherwise); each sample is
    biased by half the error of linear interpolation at the step's midpoint. int64 array."""
    f = ftype
    in_scale, out_scale = f(in_scale), f(out_scale)
    in_min = f(in_scale * f(-32768 - in_zp))
    in_max = f(in_scale * f(32767 - in_zp))
    out_min = f(out_scale * f(-32768 - out_zp))
    out_max = f(out_scale * f(32767 - out_zp))
    step = f((in_max - in_min) / f(512))
    half = f(step / f(2))
    inv = f(f(65536) / f(out_max - out_min))
    i = np.arange(512).astype(f)
    x0 = (in_min + (i * step).astype(f)).astype(f)
    xm = (x0 + half).astype(f)
    x1 = (in_min + ((i + f(1)) * step).astype(f)).astype(f)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        val, mid, nxt = (np.asarray(fn(x), f) for x in (x0, xm, x1))
        sample = _round_away((val * inv).astype(f))
        interp = _round_away((((nxt * inv).astype(f) + sample) / f(2)).astype(f))
        bias = _round_away(((interp - _round_away((mid * inv).astype(f))) / f(2)).astype(f))
        last = _round_away((np.asarray(fn(np.asarray([in_max], f)), f) * inv).astype(f))
    lut = np.concatenate([(sample - bias).astype(f), last])
    return np.clip(lut, -32768, 32767).astype(np.int64)


def _lut16_lookup(x, lut: np.ndarray):
    """LiteRT's LUTLookup for int16: entry 256 + (x >> 7), plus the slope to the next entry times the
    low 7 bits, rounded ((slope * offset + 64) >> 7). int64 in and out."""
    idx = 256 + (x >> 7)
    base = lut[idx]
    return base + (((lut[idx + 1] - base) * (x & 0x7F) + 64) >> 7)


def _softmax_int16(ctx: KernelContext) -> Run:
    """int16 in and out (zero points 0, output scale 1/32768): LiteRT's reference SoftmaxInt16. x - max
    rescaled so that [-65535, 0] maps onto [-10, 0], exp by a 513-entry interpolated table (Q0.15), the
    row's int32 sum normalised by its leading zeros, 1/(1 + x) by a second table, and each exp times
    that reciprocal shifted back, clamped to [0, 32767]."""
    x_t, y_t = ctx.input_tensor(0), ctx.output_tensor(0)
    if y_t.dtype != np.int16:
        raise ctx.fail(f"output type {y_t.dtype.name} is not supported with int16 input (supported: int16)")
    if len(x_t.shape) == 0:
        raise ctx.fail("SOFTMAX needs an input of rank 1 or more")
    qi, qo = qparams(x_t), qparams(y_t)
    if qi is None or qo is None or qi.per_channel or qo.per_channel:
        raise ctx.fail("a quantized SOFTMAX needs per-tensor quantization parameters on input and output")
    zi, zo, s_out = int(qi.zero_point[0]), int(qo.zero_point[0]), _F32(qo.scale[0])
    if zo != 0 or abs(float(s_out) - 1 / 32768) > float(_F32(0.001) * _F32(1 / 32768)):
        raise ctx.fail(f"int16 SOFTMAX output needs zero point 0 and scale 1/32768, has {zo} "
                       f"and {float(s_out)}")
    if zi != 0:
        raise ctx.fail(f"int16 SOFTMAX input needs zero point 0, has {zi}")
    beta = _F32(ctx.options.get("beta", 1.0))
    mult, shift = quantize_multiplier(float(_F32(_F32(qi.scale[0]) * beta)) / (10.0 / 65535.0))
    rng = 65535
    exp_lut = _lut16_populate(10.0 / rng, 32767, 2.0 / rng, 0, np.exp)
    recip_lut = _lut16_populate(1.0 / rng, -32768, 2.0 / rng, 0, lambda x: 1.0 / (1.0 + x))
    (a,), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values

    def run() -> None:
        x = np.asarray(v[a], np.int64)
        if x.size == 0:
            v[o] = np.zeros(x.shape, np.int16)
            return
        diff = x - x.max(axis=-1, keepdims=True)
        scaled = multiply_by_quantized_multiplier(diff, mult, shift) + 32767
        e = _lut16_lookup(np.clip(scaled, -32768, 32767), exp_lut)
        total = wrap_int32(e.sum(axis=-1, keepdims=True))
        # CountLeadingZeros of the sum as uint32 (it is positive: the row's max contributes ~32767)
        clz = 32 - np.frexp(total.astype(np.float64))[1].astype(np.int64)
        shifted = ((total << (clz - 1)) + (1 << 13)) >> 14
        recip = _lut16_lookup(np.clip(shifted - ((1 << 15) + (1 << 16)), -32768, 32767), recip_lut)
        right = 31 - clz
        r = (e * recip + (_I64(1) << (right - 1))) >> right
        v[o] = np.clip(wrap_int32(r), 0, 32767).astype(np.int16)
    return run


@CPU.register_quantized("SOFTMAX", dtypes=_I8_16)
def softmax_quantized(ctx: KernelContext) -> Run:
    """int8/uint8 input, output of the same type or int16: LiteRT's optimized float-table softmax.
    table[d] = expf(-s_in * beta * d) for d = max - x in [0, 255]; each row's sum is accumulated in
    float32 in order, p = table[d] * (1 / (sum * s_out)) and the output is round(p) + zp_out (uint8:
    (int)(p + 0.5), the zero point ignored), clamped. An int8 output needs zero point -128 and scale
    1/256 (LiteRT's check)."""
    ctx.expect_inputs(1)
    x_t, y_t = ctx.input_tensor(0), ctx.output_tensor(0)
    if x_t.dtype == np.int16:
        return _softmax_int16(ctx)
    if x_t.dtype.name not in _I8:
        raise ctx.fail(f"quantized input type {x_t.dtype.name} is not supported "
                       "(supported: int8, uint8, int16)")
    if y_t.dtype not in (x_t.dtype, np.dtype(np.int16)):
        raise ctx.fail(f"output type {y_t.dtype.name} is not supported with {x_t.dtype.name} input "
                       f"(supported: {x_t.dtype.name}, int16)")
    if len(x_t.shape) == 0:
        raise ctx.fail("SOFTMAX needs an input of rank 1 or more")
    qi, qo = qparams(x_t), qparams(y_t)
    if qi is None or qo is None or qi.per_channel or qo.per_channel:
        raise ctx.fail("a quantized SOFTMAX needs per-tensor quantization parameters on input and output")
    s_out, z_out = _F32(qo.scale[0]), int(qo.zero_point[0])
    if y_t.dtype == np.int8 and x_t.dtype == np.int8:
        if z_out != -128 or abs(float(s_out) - 1 / 256) > 0.001 / 256:
            raise ctx.fail(f"int8 SOFTMAX output needs zero point -128 and scale 1/256, has {z_out} "
                           f"and {float(s_out)}")
    beta = _F32(ctx.options.get("beta", 1.0))
    table = _exp32((_F32(-(_F32(qi.scale[0]) * beta)) * np.arange(256, dtype=np.float32)).astype(np.float32))
    return Softmax8(ctx, table, s_out, z_out)


class Softmax8:
    """The run of an 8-bit-input SOFTMAX (softmax_quantized), with what a compiled kernel needs to do the
    same (`table`, `s_out`, `z_out`, `out_dtype`, its range `lo`..`hi`, `trunc_half`)."""

    def __init__(self, ctx: KernelContext, table: np.ndarray, s_out: np.float32, z_out: int):
        self.table, self.s_out, self.z_out = table, s_out, z_out
        self.out_dtype = ctx.output_dtype()
        info = np.iinfo(self.out_dtype)
        self.lo, self.hi = int(info.min), int(info.max)
        self.trunc_half = self.out_dtype == np.uint8      # uint8: (int)(p + 0.5), the zero point ignored
        (self._a,), (self._o,) = ctx.inputs, ctx.outputs
        self._values = ctx.values

    def __call__(self) -> None:
        v, out_dt, s_out = self._values, self.out_dtype, self.s_out
        x = np.asarray(v[self._a], np.int64)
        if x.size == 0:
            v[self._o] = np.zeros(x.shape, out_dt)
            return
        e = self.table[x.max(axis=-1, keepdims=True) - x]
        total = np.add.accumulate(e, axis=-1, dtype=np.float32)[..., -1:]   # in order, as LiteRT
        inv = (_F32(1) / (total * s_out).astype(np.float32)).astype(np.float32)
        p = (e * inv).astype(np.float32)
        if self.trunc_half:
            q = to_int32_x86((p + _F32(0.5)).astype(np.float32))
        else:
            q = to_int32_x86(round_half_away32(p)) + self.z_out
        v[self._o] = np.clip(q, self.lo, self.hi).astype(out_dt)


@CPU.register("LOG_SOFTMAX", dtypes=("float32",))
def log_softmax(ctx: KernelContext) -> Run:
    if len(ctx.input_tensor(0).shape) == 0:
        raise ctx.fail("LOG_SOFTMAX needs an input of rank 1 or more")

    def fn(x):
        d = x - x.max(axis=-1, keepdims=True)
        d -= np.log(np.exp(d).sum(axis=-1, keepdims=True))
        return d
    return _unary(ctx, fn)


@CPU.register_quantized("LOG_SOFTMAX", dtypes=_I8)
def log_softmax_quantized(ctx: KernelContext) -> Run:
    """int8/uint8: LiteRT's optimized float-table LOG_SOFTMAX. The output must have scale 16/256 and
    zero point 127 (int8) or 255 (uint8) (LiteRT's checks). In float32: sum = the row's expf(-s_in *
    (max - x)) accumulated in order, p = (s_in / s_out) * x - (s_in * max + logf(sum)) / s_out on the raw
    values (the zero point cancels), output rint(p) + zp_out truncated, clamped."""
    s_in, _, s_out, z_out = _q_unary(ctx, _I8)
    x_t = ctx.input_tensor(0)
    if len(x_t.shape) == 0:
        raise ctx.fail("LOG_SOFTMAX needs an input of rank 1 or more")
    want_zp = 127 if x_t.dtype == np.int8 else 255
    if float(s_out) != 16.0 / 256 or z_out != want_zp:
        raise ctx.fail(f"{x_t.dtype.name} LOG_SOFTMAX output needs scale 16/256 and zero point {want_zp}, "
                       f"has {float(s_out)} and {z_out}")
    table = _exp32((_F32(-s_in) * np.arange(256, dtype=np.float32)).astype(np.float32))
    ratio = _F32(s_in / s_out)
    info = np.iinfo(x_t.dtype)
    dt = info.dtype
    (a,), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values

    def run() -> None:
        x = np.asarray(v[a], np.int64)
        if x.size == 0:
            v[o] = np.zeros(x.shape, dt)
            return
        mx = x.max(axis=-1, keepdims=True)
        total = np.add.accumulate(table[mx - x], axis=-1, dtype=np.float32)[..., -1:]   # in order
        lse = np.log(total.astype(np.float64)).astype(np.float32)       # logf, correctly rounded
        pre = ((s_in * mx.astype(np.float32)).astype(np.float32) + lse).astype(np.float32)
        pre = (pre / s_out).astype(np.float32)
        p = ((ratio * x.astype(np.float32)).astype(np.float32) - pre).astype(np.float32)
        q = to_int32_x86((np.rint(p) + _F32(z_out)).astype(np.float32))
        v[o] = np.clip(q, int(info.min), int(info.max)).astype(dt)
    return run


# Shape rules: every output has input 0's shape.
shape_rule("RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LEAKY_RELU", "ELU", "TANH", "LOGISTIC",
           "HARD_SWISH", "GELU", "SOFTMAX", "LOG_SOFTMAX")(same_shape)

# Shape rules: the inputs' broadcast shape.
shape_rule("PRELU")(broadcasting)


# ----------------------------------------------------------------------------------- gradients

def _between(g: gr.GradNode, x: int, lo: float | None, hi: float | None) -> int:
    """bool: lo < x < hi (either bound may be absent)."""
    conds = []
    if lo is not None:
        conds.append(g.emit("GREATER", x, gr.scalar(g, lo, x), dtype=np.bool_))
    if hi is not None:
        conds.append(g.emit("LESS", x, gr.scalar(g, hi, x), dtype=np.bool_))
    return conds[0] if len(conds) == 1 else g.emit("LOGICAL_AND", *conds, dtype=np.bool_)


_RELU_RANGES = {"RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0), "RELU_0_TO_1": (0.0, 1.0)}


@grad_rule(*_RELU_RANGES)
def relu_grad(g: gr.GradNode):
    # the gradient passes where the input is strictly inside the clamp (TensorFlow's ReluGrad/Relu6Grad)
    lo, hi = _RELU_RANGES[g.op.opcode]
    return [gr.mask(g, _between(g, g.x(0), lo, hi), g.dy())]


@grad_rule("TANH")
def tanh_grad(g: gr.GradNode):
    y = g.y()
    return [gr.mul(g, g.dy(), gr.sub(g, gr.scalar(g, 1.0, y), gr.square(g, y)))]


@grad_rule("LOGISTIC")
def logistic_grad(g: gr.GradNode):
    y = g.y()
    return [gr.mul(g, g.dy(), gr.mul(g, y, gr.sub(g, gr.scalar(g, 1.0, y), y)))]


@grad_rule("SOFTMAX")
def softmax_grad(g: gr.GradNode):
    # y = softmax(beta * x) over the last axis: dx = beta * y * (dy - sum(dy * y, last axis))
    y, d = g.y(), g.dy()
    s = g.emit("SUM", gr.mul(g, d, y), g.const([-1], np.int32), keep_dims=True)
    dx = gr.mul(g, y, gr.sub(g, d, s))
    beta = float(g.opts.get("beta", 1.0))
    return [dx if beta == 1.0 else gr.mul(g, dx, gr.scalar(g, beta, y))]


@grad_rule("LOG_SOFTMAX")
def log_softmax_grad(g: gr.GradNode):
    # y = x - log(sum(exp(x))): dx = dy - exp(y) * sum(dy, last axis)
    d = g.dy()
    s = g.emit("SUM", d, g.const([-1], np.int32), keep_dims=True)
    return [gr.sub(g, d, gr.mul(g, g.emit("EXP", g.y()), s))]


@grad_rule("LEAKY_RELU")
def leaky_relu_grad(g: gr.GradNode):
    # TF's LeakyReluGrad: dy where x > 0, alpha * dy elsewhere (x = 0 included)
    x, d = g.x(0), g.dy()
    alpha = float(g.opts.get("alpha", 0.0))
    pos = g.emit("GREATER", x, gr.scalar(g, 0.0, x), dtype=np.bool_)
    return [gr.where(g, pos, d, gr.mul(g, d, gr.scalar(g, alpha, d)))]


@grad_rule("PRELU", params=(1,))
def prelu_grad(g: gr.GradNode):
    # y = x > 0 ? x : alpha * x (alpha broadcasting against x): dx = dy where x > 0, alpha * dy
    # elsewhere (LeakyReluGrad's convention at 0); dalpha = dy * x where x <= 0, summed over the axes
    # alpha was broadcast along
    x, a, d = g.x(0), g.x(1), g.dy()
    zero = gr.scalar(g, 0.0, d)
    pos = g.emit("GREATER", x, gr.scalar(g, 0.0, x), dtype=np.bool_)
    dx = gr.where(g, pos, d, gr.mul(g, d, a)) if g.differentiable(0) else None
    da = gr.where(g, pos, zero, gr.mul(g, d, x)) if g.differentiable(1) else None
    return [gr.sum_to_input(g, 0, dx), gr.sum_to_input(g, 1, da)]


@grad_rule("ELU")
def elu_grad(g: gr.GradNode):
    # TF's EluGrad (alpha 1): dy * (y + 1) where y < 0, dy elsewhere
    y, d = g.y(), g.dy()
    neg = g.emit("LESS", y, gr.scalar(g, 0.0, y), dtype=np.bool_)
    return [gr.where(g, neg, gr.mul(g, d, gr.add(g, y, gr.scalar(g, 1.0, y))), d)]


@grad_rule("HARD_SWISH")
def hard_swish_grad(g: gr.GradNode):
    # x * relu6(x + 3) / 6 differentiated as TF/Keras do: relu6(x + 3) / 6 + x / 6 where -3 < x < 3
    # (relu6's gradient passes strictly inside its clamp): 0 below -3, (2x + 3) / 6 inside, 1 above 3
    x, d = g.x(0), g.dy()
    sixth = gr.scalar(g, 1.0 / 6.0, x)
    hs = gr.mul(g, g.emit("RELU6", gr.add(g, x, gr.scalar(g, 3.0, x))), sixth)
    inside = gr.mask(g, _between(g, x, -3.0, 3.0), gr.mul(g, x, sixth))
    return [gr.mul(g, d, gr.add(g, hs, inside))]


@grad_rule("GELU")
def gelu_grad(g: gr.GradNode):
    x, d = g.x(0), g.dy()

    def s(v: float) -> int:
        return gr.scalar(g, v, x)
    x2 = gr.square(g, x)
    if g.opts.get("approximate", False):
        # 0.5 x (1 + tanh(k (x + c x^3))): 0.5 (1 + t) + 0.5 k x (1 - t^2) (1 + 3 c x^2)
        k, c = math.sqrt(2.0 / math.pi), 0.044715
        t = g.emit("TANH", gr.mul(g, gr.add(g, x, gr.mul(g, gr.mul(g, x, x2), s(c))), s(k)))
        a = gr.mul(g, gr.add(g, t, s(1.0)), s(0.5))
        b = gr.mul(g, gr.mul(g, gr.mul(g, x, s(0.5 * k)), gr.sub(g, s(1.0), gr.square(g, t))),
                   gr.add(g, gr.mul(g, x2, s(3.0 * c)), s(1.0)))
    else:
        # 0.5 x erfc(-x / sqrt 2): Phi(x) + x phi(x), Phi(x) = 0.5 erfc(-x / sqrt 2),
        # phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
        a = gr.mul(g, _erfc_op(g, gr.mul(g, x, s(-math.sqrt(0.5)))), s(0.5))
        b = gr.mul(g, gr.mul(g, x, s(1.0 / math.sqrt(2.0 * math.pi))), g.emit("EXP", gr.mul(g, x2, s(-0.5))))
    return [gr.mul(g, d, gr.add(g, a, b))]


def _erfc_op(g: gr.GradNode, x: int) -> int:
    return g.emit("OnertPyErfc", x, custom="OnertPyErfc")


@CPU.register("OnertPyErfc", dtypes=_FLOATS)
def erfc(ctx: KernelContext) -> Run:
    """onert-py's gradient op: erfc elementwise (the exact GELU's gradient; no TFLite op has it)."""
    return _unary(ctx, _erfc)


shape_rule("OnertPyErfc")(same_shape)


@grad_rule("OnertPyErfc")
def erfc_grad(g: gr.GradNode):
    # d/dx erfc(x) = -2 / sqrt(pi) exp(-x^2)
    x = g.x(0)
    e = g.emit("EXP", gr.neg(g, gr.square(g, x)))
    return [gr.mul(g, g.dy(), gr.mul(g, e, gr.scalar(g, -2.0 / math.sqrt(math.pi), x)))]
