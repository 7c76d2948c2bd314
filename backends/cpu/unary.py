"""Unary math, casts, bit manipulation and element selection.

Float ops compute in the tensor's own dtype (float16 is computed by numpy in float32 and rounded once,
as LiteRT's XNNPACK path does). Every run closure returns a fresh array or a view; none of them writes
into an input. inf/NaN results are values, not warnings: the session runs under np.errstate(all="ignore").
"""
from __future__ import annotations

import numpy as np

from onert_py.backends.cpu._quant import (same_type_qparams, 
    INT32_MAX,
    INT32_MIN,
    multiply_by_quantized_multiplier,
    qparams,
    quantize_multiplier,
    round_half_away32,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
    to_int32_x86,
    wrap_int32,
)
from onert_py.backends.cpu.shape import check_dtype, check_same_types
from onert_py.backends import gradients as gr
from onert_py.backends.registry import CPU, KernelContext, Run, grad_rule, no_gradient, shape_rule, value_rule
from onert_py.backends.shape_rules import Node, broadcasting, same_shape

_FLOATS = ("float32", "float16")


def _unary(ctx: KernelContext, fn, same_output: bool = True) -> Run:
    """Run closure for out = fn(x); `fn` must not write into x. x must have a registered type (and
    the output the same one, when `same_output`)."""
    ctx.expect_inputs(1)
    check_dtype(ctx, 0, same_output)
    (a,), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values
    out_t = ctx.output_tensor(0)
    if (isinstance(fn, np.ufunc) and fn.nin == 1 and fn.nout == 1 and same_output
            and len(out_t.shape) > 0):
        # A ufunc computes into the planned output buffer (its result is never a view of x); a
        # dynamic shape gets the slot a resize planned for it.
        alloc = ctx.output_buffer(0)

        def run_planned() -> None:
            x = v[a]
            v[o] = fn(x, out=alloc(np.shape(x)))
        if out_t.is_dynamic or int(np.prod(out_t.shape)) != 1:
            return run_planned
        # One value (a converter's [1]-shaped loop value): the ufunc on the numpy scalar, the same inner
        # loop at half the cost of a call on an array
        declared, first = tuple(out_t.shape), (0,) * len(out_t.shape)
        planned, slot = ctx.output_slot(0)
        dtype = out_t.dtype

        def run_one() -> None:
            x = v[a]
            if x.shape != declared:
                return run_planned()
            r = planned[slot]
            if r is None:
                r = np.empty(declared, dtype)
            r[first] = fn(x[first])
            v[o] = r
        return run_one

    def run() -> None:
        v[o] = fn(v[a])
    return run


def _binary(ctx: KernelContext, fn) -> Run:
    ctx.expect_inputs(2)
    check_same_types(ctx, 0, *range(1, len(ctx.inputs)))
    (a, b), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values

    def run() -> None:
        v[o] = fn(v[a], v[b])
    return run


def _then(second):
    """Apply `second` to a freshly computed result, in place when it is an ndarray."""
    def apply(y):
        if type(y) is np.ndarray:
            return second(y, out=y)
        return second(y)
    return apply


# --------------------------------------------------------------------------------------------------
# Quantized unary math (LiteRT's builtin kernels, bit for bit). Each output is a function of the input
# value alone, so prepare tabulates it over every value of the type (256, or 65536 for int16) and a run
# is one table lookup.

_F32 = np.float32


def _q_unary(ctx: KernelContext, types: tuple[str, ...]):
    """Checks of a one-input quantized op (_quant.same_type_qparams): (dtype, s_in, z_in, s_out, z_out)."""
    ctx.expect_inputs(1)
    return same_type_qparams(ctx, types)


def _is_quantized(t) -> bool:
    return t.dtype.kind in "iu" and qparams(t) is not None


def _all_values(dt: np.dtype) -> np.ndarray:
    """Every value of an 8- or 16-bit type, int64, in the order of their unsigned bit patterns (the
    order a table indexed by x.view(uint8/uint16) needs)."""
    u = np.dtype(f"uint{dt.itemsize * 8}")
    return np.arange(1 << (8 * dt.itemsize), dtype=np.int64).astype(u).view(dt).astype(np.int64)


def _table_run(ctx: KernelContext, fn, check=None) -> Run:
    """Run closure of a quantized unary op: `fn(values)` (int64 array of every input value -> results)
    tabulated at prepare; `check(x)`, when given, validates each input at run time."""
    dt = ctx.input_tensor(0).dtype
    u = np.dtype(f"uint{dt.itemsize * 8}")
    table = np.asarray(fn(_all_values(dt))).astype(dt)
    (a,), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values

    def run() -> None:
        x = np.asarray(v[a])
        if check is not None:
            check(x)
        r = table[x.view(u)]
        v[o] = r[()] if r.ndim == 0 else r
    return run


def _c_max(a, b):
    """std::max(a, b) of floats: (a < b) ? b : a (a NaN in `a` survives)."""
    return np.where(a < b, b, a)


def _c_min(a, b):
    """std::min(a, b) of floats: (b < a) ? b : a."""
    return np.where(b < a, b, a)


def _lut8(dt: np.dtype, s_in, z_in: int, s_out, z_out: int, fn):
    """LiteRT's LUTPopulate for int8/uint8 as a function of the input values: each value dequantized in
    float32, transformed by `fn` (float32 -> float32), times 1/s_out, rounded half away, plus z_out (in
    float32), truncated to int32 and clamped. A value beyond the int32 range saturates (LiteRT's EXP
    gives 127 for exp(x) / s_out > 2**31, not the x86 cast's INT32_MIN)."""
    info = np.iinfo(dt)

    def table(vals):
        deq = _F32(s_in) * (vals - z_in).astype(np.float32)
        with np.errstate(all="ignore"):
            tr = np.asarray(fn(deq), np.float32)
            q = (round_half_away32((tr * (_F32(1) / _F32(s_out))).astype(np.float32)) + _F32(z_out))
        return to_int32_x86(np.clip(q.astype(np.float32), _F32(info.min), _F32(info.max)))
    return table


def _lut16(s_in, z_in: int, s_out, z_out: int, fn):
    """LiteRT's int16 LUTPopulate (513 entries over the input range, each sample biased by half the
    interpolation error at its midpoint, all in float32) and LUTLookup (the top 9 bits of the value
    pick an entry, the low 7 interpolate to the next one), as a function of the input values."""
    f = _F32
    in_min = f(s_in) * f(-32768 - z_in)
    in_max = f(s_in) * f(32767 - z_in)
    out_min = f(s_out) * f(-32768 - z_out)
    out_max = f(s_out) * f(32767 - z_out)
    step = f((in_max - in_min) / f(512))
    half = f(step / f(2))
    inv = f(f(65536) / f(out_max - out_min))
    i = np.arange(512, dtype=np.float32)
    lo, hi = f(-32768), f(32767)
    with np.errstate(all="ignore"):
        at = (in_min + (i * step).astype(np.float32)).astype(np.float32)
        mid = (at + half).astype(np.float32)
        nxt = (in_min + ((i + f(1)) * step).astype(np.float32)).astype(np.float32)
        val, val_mid, val_next = (np.asarray(fn(t), np.float32) for t in (at, mid, nxt))
        sample = round_half_away32((val * inv).astype(np.float32))
        interp = round_half_away32((((val_next * inv).astype(np.float32) + sample) / f(2)).astype(np.float32))
        err = (interp - round_half_away32((val_mid * inv).astype(np.float32))).astype(np.float32)
        bias = round_half_away32((err / f(2)).astype(np.float32))
        entries = _c_min(_c_max((sample - bias).astype(np.float32), lo), hi)
        last = _c_min(_c_max(round_half_away32((np.asarray(fn(np.array([in_max], np.float32)), np.float32)
                                                * inv).astype(np.float32)), lo), hi)
    lut = wrap_int32(to_int32_x86(np.concatenate([entries, last]).astype(np.float32)))
    lut = ((lut + 32768) & 0xFFFF) - 32768          # static_cast<int16_t> keeps the low 16 bits

    def table(vals):
        index = 256 + (vals >> 7)
        offset = vals & 0x7F
        base = lut[index]
        slope = ((lut[index + 1] - base + 32768) & 0xFFFF) - 32768     # an int16 difference
        r = base + ((slope * offset + 64) >> 7)
        return ((r + 32768) & 0xFFFF) - 32768
    return table


def _libm32(fn):
    """A float32 libm function (expf, logf) as the float64 one rounded to float32: the correctly
    rounded value, which glibc's float functions return."""
    return lambda x: fn(np.asarray(x, np.float64)).astype(np.float32)


def _sat_shift_left(x, e: int):
    """gemmlowp's SaturatingRoundingMultiplyByPOT<e> for e > 0 on int32 values: x * 2**e saturated."""
    threshold = (1 << (31 - e)) - 1
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, x << e))


def _inv_sqrt_multiplier_exp(d: np.ndarray):
    """TFLite's GetInvSqrtQuantizedMultiplierExp(d, reverse_shift=-1) for int values 1 < d < 2**29: a
    Newton-Raphson 1/sqrt in gemmlowp fixed point. Returns (multiplier, left shift) int64 arrays."""
    d = np.asarray(d, np.int64)
    bits = sum((d >> k) > 0 for k in range(31)).astype(np.int64)   # bit length
    left = (31 - bits) // 2 - 1                                  # pairs of bits to shift left by
    shift = 11 - left
    x_in = (d << (2 * left)) >> 1                                # F3 raw
    half_input = rounding_divide_by_pot(x_in, 1)
    half_three = (1 << 28) + (1 << 27)
    srdhm = saturating_rounding_doubling_high_mul
    x = np.full(d.shape, 1 << 28, np.int64)                      # F3 one
    for _ in range(5):
        x3 = _sat_shift_left(srdhm(srdhm(x, x), x), 6)
        x = _sat_shift_left(wrap_int32(srdhm(half_three, x) - srdhm(half_input, x3)), 3)
    x = srdhm(x, 1518500250)                                     # times sqrt(2)/2 (F0)
    neg = shift < 0
    x = np.where(neg, wrap_int32(x << np.where(neg, -shift, 0)), x)
    shift = np.where(neg, 0, shift)
    return x, -shift


# --------------------------------------------------------------------------------------------------
# Plain elementwise math.

@CPU.register("ABS", dtypes=("float32", "float16", "int32", "int16"))
def abs_(ctx: KernelContext) -> Run:
    return _unary(ctx, np.abs)   # like C++ std::abs, INT_MIN stays INT_MIN


@CPU.register_quantized("ABS", dtypes=("int8", "int16"))
def abs_quantized(ctx: KernelContext) -> Run:
    """LiteRT's quantized ABS: |x - zp_in|, rescaled by s_in / s_out (MultiplyByQuantizedMultiplier,
    skipped when the float32 scales are equal), plus zp_out, clamped."""
    dt, s_in, z_in, s_out, z_out = _q_unary(ctx, ("int8", "int16"))
    info = np.iinfo(dt)
    mult, shift = quantize_multiplier(float(_F32(s_in / s_out)))
    rescale = s_in != s_out

    def fn(vals):
        a = np.abs(vals - z_in)
        if rescale:
            a = multiply_by_quantized_multiplier(a, mult, shift)
        return np.clip(a + z_out, info.min, info.max)
    return _table_run(ctx, fn)


@CPU.register("NEG", dtypes=("float32", "float16", "int64", "int32", "int16", "int8"))
def neg(ctx: KernelContext) -> Run:
    return _unary(ctx, np.negative)


@CPU.register_quantized("NEG", dtypes=("int8", "int16"))
def neg_quantized(ctx: KernelContext) -> Run:
    """LiteRT's NEG ignores quantization: the stored integers are negated (wrapping, -(-128) = -128)
    whatever the input's and output's parameters."""
    return _unary(ctx, np.negative)


@value_rule("NEG", "ABS", "ZEROS_LIKE", "CAST")
def unary_value(n: Node, v: list):
    if n.op.opcode == "ABS" and _is_quantized(n.sg.tensors[n.op.inputs[0]]):
        return None   # quantized ABS rescales: not np.abs
    fn = {"NEG": np.negative, "ABS": np.abs, "ZEROS_LIKE": np.zeros_like, "CAST": np.asarray}[n.op.opcode]
    return [fn(v[0])]


@CPU.register("EXP", dtypes=_FLOATS)
def exp(ctx: KernelContext) -> Run:
    return _unary(ctx, np.exp)


@CPU.register_quantized("EXP", dtypes=("int8", "int16"))
def exp_quantized(ctx: KernelContext) -> Run:
    """LiteRT's EXP: a lookup table of expf (LUTPopulate; int16 interpolates a 513-entry table)."""
    dt, s_in, z_in, s_out, z_out = _q_unary(ctx, ("int8", "int16"))
    lut = _lut8 if dt != np.int16 else (lambda dt, *a: _lut16(*a))
    return _table_run(ctx, lut(dt, s_in, z_in, s_out, z_out, _libm32(np.exp)))


@CPU.register("LOG", dtypes=_FLOATS)
def log(ctx: KernelContext) -> Run:
    return _unary(ctx, np.log)      # log(0) = -inf, log(<0) = NaN


@CPU.register_quantized("LOG", dtypes=("int8", "int16"))
def log_quantized(ctx: KernelContext) -> Run:
    """LiteRT's LOG: a lookup table of logf, with x <= 0 mapped to the output's lowest value
    ((type min - zp_out) * s_out)."""
    dt, s_in, z_in, s_out, z_out = _q_unary(ctx, ("int8", "int16"))
    out_min = _F32(np.iinfo(dt).min - z_out) * s_out
    log32 = _libm32(np.log)

    def fn(x):
        x = np.asarray(x, np.float32)
        return np.where(x <= 0, out_min, log32(np.where(x <= 0, _F32(1), x)))
    lut = _lut8 if dt != np.int16 else (lambda dt, *a: _lut16(*a))
    return _table_run(ctx, lut(dt, s_in, z_in, s_out, z_out, fn))


@CPU.register("SQRT", dtypes=_FLOATS)
def sqrt(ctx: KernelContext) -> Run:
    return _unary(ctx, np.sqrt)


@CPU.register("RSQRT", dtypes=_FLOATS)
def rsqrt(ctx: KernelContext) -> Run:
    recip = _then(np.reciprocal)   # 1 / sqrt(x), rounded twice like LiteRT's float kernel
    return _unary(ctx, lambda x: recip(np.sqrt(x)))


@CPU.register_quantized("SQRT", dtypes=("int8", "int16"))
def sqrt_quantized(ctx: KernelContext) -> Run:
    """LiteRT's quantized SQRT, in float32: sqrtf(s_in * (x - zp_in)) / s_out truncated toward zero,
    plus zp_out, clamped. A negative real input fails the run, as in LiteRT."""
    dt, s_in, z_in, s_out, z_out = _q_unary(ctx, ("int8", "int16"))
    info = np.iinfo(dt)

    def fn(vals):
        deq = (s_in * (vals - z_in).astype(np.float32)).astype(np.float32)
        with np.errstate(all="ignore"):
            r = (np.sqrt(np.maximum(deq, _F32(0))) / s_out).astype(np.float32)
        return np.clip(to_int32_x86(r) + z_out, info.min, info.max)

    def check(x):
        if np.size(x) and s_in * _F32(int(np.min(x)) - z_in) < 0:
            raise ValueError("SQRT is only defined for non-negative values (an input is below the zero point)")
    return _table_run(ctx, fn, check)


@CPU.register_quantized("RSQRT", dtypes=("int8", "int16"))
def rsqrt_quantized(ctx: KernelContext) -> Run:
    """LiteRT's quantized RSQRT. int8: d = x - zp_in; d = 0 gives 127; else 1/sqrt(d) in fixed point
    (GetInvSqrtQuantizedMultiplierExp, scaled by 2**20), rescaled by 1 / (sqrt(s_in) * s_out) with the
    2**20 taken back, plus zp_out, clamped. int16: a lookup table of 1/sqrtf (x <= 0 -> 32767 * s_out).
    An input below zp_in (a negative real value) fails the run, as in LiteRT."""
    dt, s_in, z_in, s_out, z_out = _q_unary(ctx, ("int8", "int16"))
    if dt == np.int16:
        def inv_sqrt(x):
            x = np.asarray(x, np.float32)
            pos = x > 0
            return np.where(pos, _F32(1) / np.sqrt(np.where(pos, x, _F32(1))), _F32(32767) * s_out)
        fn = _lut16(s_in, z_in, s_out, z_out, inv_sqrt)
    else:
        info = np.iinfo(dt)
        mult, shift = quantize_multiplier(1.0 / float(_F32(np.sqrt(s_in) * s_out)))
        k = 20

        def fn(vals):
            d = vals - z_in
            ok = d > 1
            m, e = _inv_sqrt_multiplier_exp(np.where(ok, d, 2))
            # d <= 1 (d = 1; d < 0 never runs): multiplier INT32_MAX, shift 0
            m = np.where(ok, m, INT32_MAX)
            e = np.where(ok, e, 0)
            data = multiply_by_quantized_multiplier(1, m, e + k)
            out = multiply_by_quantized_multiplier(data, mult, shift - k) + z_out
            return np.where(d == 0, info.max, np.clip(out, info.min, info.max))

    def check(x):
        if np.size(x) and np.min(x) < z_in:
            raise ValueError("RSQRT is only defined for positive values (an input is below the zero point)")
    return _table_run(ctx, fn, check)


@CPU.register("SQUARE", dtypes=_FLOATS)
def square(ctx: KernelContext) -> Run:
    return _unary(ctx, np.square)


@CPU.register("SIN", dtypes=_FLOATS)
def sin(ctx: KernelContext) -> Run:
    return _unary(ctx, np.sin)


@CPU.register("COS", dtypes=_FLOATS)
def cos(ctx: KernelContext) -> Run:
    return _unary(ctx, np.cos)


@CPU.register("FLOOR", dtypes=_FLOATS)
def floor(ctx: KernelContext) -> Run:
    return _unary(ctx, np.floor)


@CPU.register("CEIL", dtypes=_FLOATS)
def ceil(ctx: KernelContext) -> Run:
    return _unary(ctx, np.ceil)


@CPU.register("ROUND", dtypes=_FLOATS)
def round_(ctx: KernelContext) -> Run:
    # TFLite rounds half to even; so does np.rint.
    return _unary(ctx, np.rint)


@CPU.register("SIGN", dtypes=("float32", "float64", "int32"))
def sign(ctx: KernelContext) -> Run:
    return _unary(ctx, np.sign)   # NaN stays NaN, as in LiteRT


@CPU.register("LOGICAL_NOT", dtypes=("bool",))
def logical_not(ctx: KernelContext) -> Run:
    return _unary(ctx, np.logical_not)


@CPU.register("ZEROS_LIKE", dtypes=("float32", "int32", "int64"))
def zeros_like(ctx: KernelContext) -> Run:
    dt = ctx.output_dtype()
    return _unary(ctx, lambda x: np.zeros(np.shape(x), dt))


@CPU.register("ATAN2", dtypes=("float32", "float64", "float16"))
def atan2(ctx: KernelContext) -> Run:
    return _binary(ctx, np.arctan2)


@CPU.register("ADD_N", dtypes=("float32", "int32"))
def add_n(ctx: KernelContext) -> Run:
    ins, (o,) = ctx.inputs, ctx.outputs
    if len(ins) < 2:
        raise ctx.fail(f"ADD_N expects at least 2 inputs, has {len(ins)}")
    check_same_types(ctx, 0, *range(1, len(ctx.inputs)))
    v = ctx.values
    first, second, rest = ins[0], ins[1], ins[2:]
    dt = ctx.output_dtype()
    if dt.kind == "f":
        # LiteRT adds pairwise in input order and clamps every partial sum to the finite range
        # (so inf + 1 becomes FLT_MAX before the next input is added); NaN stays NaN.
        hi = np.finfo(dt).max
        lo = dt.type(-hi)

        def step(acc):
            return np.clip(acc, lo, hi, out=acc) if type(acc) is np.ndarray else np.clip(acc, lo, hi)
    else:
        def step(acc):  # integers wrap
            return acc

    def run() -> None:
        acc = step(np.add(v[first], v[second]))
        for i in rest:
            if type(acc) is np.ndarray:
                acc = step(np.add(acc, v[i], out=acc))
            else:
                acc = step(np.add(acc, v[i]))
        v[o] = acc
    return run


# --------------------------------------------------------------------------------------------------
# CAST: all pairs of LiteRT's cast kernel. Float -> integer saturates (NaN -> max, out of range ->
# the limit, else truncation toward zero); integer -> integer wraps like static_cast; complex sources
# use their real part; anything -> bool is `!= 0`; anything -> float16 goes through float32 first.

_CAST_TYPES = ("float32", "float64", "float16", "int8", "uint8", "int16", "uint16", "int32", "uint32",
               "int64", "bool", "complex64")


def _saturating_float_to_int(to: np.dtype):
    info = np.iinfo(to)

    def cast(x):
        x = np.asarray(x)
        if x.dtype == np.float16:
            x = x.astype(np.float32)
        ft = x.dtype.type
        lo = ft(info.min)                       # a power of two (or 0): exact
        hi = ft(info.max)
        if int(hi) > info.max:                  # rounded up past the limit: step back toward 0
            hi = np.nextafter(hi, ft(0))
        clipped = np.clip(np.nan_to_num(x, nan=0.0, posinf=hi, neginf=lo), lo, hi)
        out = np.asarray(clipped).astype(to)
        out[(x > hi) | np.isnan(x)] = info.max
        out[x < lo] = info.min
        return out
    return cast


def _cast_fn(src: np.dtype, dst: np.dtype):
    if src == dst:
        return lambda x: np.array(x, copy=True)
    if src.kind == "c" and dst.kind != "c":
        real = _cast_fn(np.dtype(np.float32), dst)
        return lambda x: real(np.real(x))
    if dst == np.bool_:
        return lambda x: np.not_equal(x, 0)
    if dst == np.float16 and src != np.float32:
        return lambda x: np.asarray(x).astype(np.float32).astype(np.float16)
    if src.kind == "f" and dst.kind in "iu":
        return _saturating_float_to_int(dst)
    return lambda x: np.asarray(x).astype(dst)   # int -> int wraps; to float rounds to nearest


@CPU.register("CAST", dtypes=_CAST_TYPES)
def cast(ctx: KernelContext) -> Run:
    src, dst = ctx.input_tensor(0).dtype, ctx.output_dtype()
    for d in (src, dst):
        if d.name not in _CAST_TYPES:
            raise ctx.fail(f"cannot cast {src} to {dst}")
    return _unary(ctx, _cast_fn(src, dst), same_output=False)


# --------------------------------------------------------------------------------------------------
# Reinterpretation and bits.

@CPU.register("BITCAST", dtypes=("float32", "float64", "float16", "int8", "uint8", "int16", "uint16",
                                 "int32", "uint32", "int64", "uint64", "bool", "complex64", "complex128"))
def bitcast(ctx: KernelContext) -> Run:
    src, dst = ctx.input_tensor(0).dtype, ctx.output_dtype()
    if src.itemsize > dst.itemsize:
        # [...] -> [..., src/dst]
        def fn(x):
            x = np.ascontiguousarray(x)     # ndim >= 1 is fine: we add a trailing axis
            return x.reshape(np.shape(x) + (1,)).view(dst)
        if ctx.input_tensor(0).shape == ():
            def fn(x):  # noqa: F811 - a 0-d input becomes [src/dst]
                return np.ascontiguousarray(np.reshape(x, (1,))).view(dst)
    elif src.itemsize < dst.itemsize:
        ratio = dst.itemsize // src.itemsize
        in_shape = ctx.input_tensor(0).shape
        if not in_shape or (in_shape[-1] != ratio and in_shape[-1] >= 0):
            raise ctx.fail(f"BITCAST {src} -> {dst} needs a last dimension of {ratio}, "
                           f"input shape is {list(in_shape)}")

        def fn(x):
            x = np.ascontiguousarray(x)
            return x.view(dst).reshape(x.shape[:-1])
    else:
        def fn(x):
            x = np.asarray(x)
            if not x.flags.c_contiguous:
                x = x.copy()
            return x.view(dst)
    return _unary(ctx, fn, same_output=False)


@shape_rule("BITCAST")
def bitcast_shape(n: Node):
    s = n.shape(0)
    a, b = n.in_dtype(0).itemsize, n.out_dtype().itemsize
    if s is None or a == b:
        return [s]
    if a > b:
        return [s + (a // b,)]
    if s and s[-1] >= 0 and s[-1] != b // a:
        raise n.fail(f"the last dim must be {b // a} to bitcast {n.in_dtype(0)} to {n.out_dtype()}")
    return [s[:-1]]


_BIT_TYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32")


@CPU.register("BITWISE_XOR", dtypes=_BIT_TYPES)
def bitwise_xor(ctx: KernelContext) -> Run:
    return _binary(ctx, np.bitwise_xor)


@CPU.register("RIGHT_SHIFT", dtypes=_BIT_TYPES)
def right_shift(ctx: KernelContext) -> Run:
    dt = ctx.output_dtype()
    lo, hi = dt.type(0), dt.type(dt.itemsize * 8 - 1)

    def shift(x, y):
        # LiteRT clamps the shift amount to [0, bits - 1]; signed shifts are arithmetic.
        return np.right_shift(x, np.clip(y, lo, hi))
    return _binary(ctx, shift)


# --------------------------------------------------------------------------------------------------
# Complex parts.

def _complex_part(ctx: KernelContext, part) -> Run:
    dt = ctx.output_dtype()
    return _unary(ctx, lambda x: np.array(part(x), dtype=dt, copy=True), same_output=False)


@CPU.register("REAL", dtypes=("complex64", "complex128"))
def real(ctx: KernelContext) -> Run:
    return _complex_part(ctx, np.real)


@CPU.register("IMAG", dtypes=("complex64", "complex128"))
def imag(ctx: KernelContext) -> Run:
    return _complex_part(ctx, np.imag)


@CPU.register("COMPLEX_ABS", dtypes=("complex64", "complex128"))
def complex_abs(ctx: KernelContext) -> Run:
    return _complex_part(ctx, np.abs)


# --------------------------------------------------------------------------------------------------
# SELECT / SELECT_V2.

_SELECT_TYPES = ("bool", "float32", "float16", "float64", "int8", "uint8", "int16", "uint16", "int32",
                 "uint32", "int64", "uint64", "complex64")


def _select(ctx: KernelContext, v1: bool) -> Run:
    ctx.expect_inputs(3)
    if ctx.input_tensor(0).dtype != np.bool_:
        raise ctx.fail(f"the condition must be bool, not {ctx.input_tensor(0).dtype}")
    dt = check_same_types(ctx, 1, 2)
    (c, a, b), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values
    shapes = [ctx.input_tensor(i).shape for i in range(3)]
    out_t = ctx.output_tensor(0)
    cond_shape, x_shape, y_shape = shapes
    reshape_cond = None
    if v1 and not (cond_shape == x_shape == y_shape):
        # SELECT (v1): x and y match; the condition is a scalar, or rank 1 picking whole rows.
        if len(cond_shape) == 1 and len(x_shape) > 1:
            reshape_cond = (-1,) + (1,) * (len(x_shape) - 1)
        elif len(cond_shape) != 0 and cond_shape != x_shape:
            raise ctx.fail(f"SELECT condition shape {list(cond_shape)} is neither a scalar, rank 1 "
                           f"nor the shape of x {list(x_shape)}")
    # LiteRT keeps the declared output shape when every operand holds exactly one element.
    keep_shape = None
    sigs = [ctx.input_tensor(i).shape_signature for i in range(3)] + [out_t.shape_signature]
    if (all(int(np.prod(s)) == 1 for s in shapes + [out_t.shape])
            and all(s is None or all(d >= 0 for d in s) for s in sigs)
            and len({tuple(s) for s in shapes + [out_t.shape]}) > 1):
        keep_shape = tuple(out_t.shape)

    if reshape_cond is not None:
        def run() -> None:
            v[o] = np.where(np.reshape(v[c], reshape_cond), v[a], v[b])
    elif keep_shape is not None:
        def run() -> None:
            v[o] = np.where(v[c], v[a], v[b]).reshape(keep_shape)
    else:
        def run() -> None:
            v[o] = np.where(v[c], v[a], v[b])
    return run


@CPU.register("SELECT", dtypes=_SELECT_TYPES)
def select(ctx: KernelContext) -> Run:
    return _select(ctx, v1=True)


# LiteRT's SELECT / SELECT_V2 copy the stored integers whatever the quantization parameters (they may
# differ between x, y and the output): the plain kernels are the quantized ones.
CPU.register_quantized("SELECT", dtypes=("int8", "uint8", "int16"))(select)


@shape_rule("SELECT")
def select_shape(n: Node):
    # SELECT (v1): the condition may be a scalar or a vector over the first dim; x and y agree.
    return [n.shape(1)]


@CPU.register("SELECT_V2", dtypes=_SELECT_TYPES)
def select_v2(ctx: KernelContext) -> Run:
    return _select(ctx, v1=False)


CPU.register_quantized("SELECT_V2", dtypes=("int8", "uint8", "int16"))(select_v2)


@value_rule("SELECT_V2")
def select_value(n: Node, v: list):
    return [np.where(v[0], v[1], v[2])]


# Shape rules: every output has input 0's shape.
shape_rule("ABS", "NEG", "EXP", "LOG", "SQRT", "RSQRT", "SQUARE", "SIN", "COS", "FLOOR", "CEIL", "ROUND",
           "SIGN", "LOGICAL_NOT", "ZEROS_LIKE", "CAST", "REAL", "IMAG", "COMPLEX_ABS", "ADD_N")(same_shape)

# Shape rules: the inputs' broadcast shape.
shape_rule("BITWISE_XOR", "RIGHT_SHIFT", "ATAN2", "SELECT_V2")(broadcasting)


# ----------------------------------------------------------------------------------- gradients
# TensorFlow's definitions (math_grad.py, array_grad.py): LOG, SQRT and RSQRT at 0 give inf as TF's do.

@grad_rule("EXP")
def exp_grad(g: gr.GradNode):
    return [gr.mul(g, g.dy(), g.y())]


@grad_rule("LOG")
def log_grad(g: gr.GradNode):
    return [gr.div(g, g.dy(), g.x(0))]


@grad_rule("SQRT")
def sqrt_grad(g: gr.GradNode):
    # TF's SqrtGrad: dy * 0.5 / y
    y = g.y()
    return [gr.div(g, gr.mul(g, g.dy(), gr.scalar(g, 0.5, y)), y)]


@grad_rule("RSQRT")
def rsqrt_grad(g: gr.GradNode):
    # TF's RsqrtGrad: dy * -0.5 * y^3
    # (multiplied left to right, so that y = inf at x = 0 gives the largest magnitude, not half of it)
    y = g.y()
    t = gr.mul(g, g.dy(), gr.scalar(g, -0.5, y))
    return [gr.mul(g, gr.mul(g, gr.mul(g, t, y), y), y)]


@grad_rule("SQUARE")
def square_grad(g: gr.GradNode):
    x = g.x(0)
    return [gr.mul(g, g.dy(), gr.mul(g, x, gr.scalar(g, 2.0, x)))]


@grad_rule("ABS")
def abs_grad(g: gr.GradNode):
    # dy * sign(x): 0 at x = 0
    return [gr.mul(g, g.dy(), g.emit("SIGN", g.x(0)))] if g.differentiable(0) else [None]


@grad_rule("NEG")
def neg_grad(g: gr.GradNode):
    return [gr.neg(g, g.dy())] if g.differentiable(0) else [None]


@grad_rule("SIN")
def sin_grad(g: gr.GradNode):
    return [gr.mul(g, g.dy(), g.emit("COS", g.x(0)))]


@grad_rule("COS")
def cos_grad(g: gr.GradNode):
    return [gr.neg(g, gr.mul(g, g.dy(), g.emit("SIN", g.x(0))))]


@grad_rule("SIGN")
def sign_grad(g: gr.GradNode):
    # TF's _SignGrad returns zeros (FLOOR, CEIL and ROUND return none)
    return [gr.zeros_like(g, g.x(0))] if g.differentiable(0) else [None]


@grad_rule("CAST")
def cast_grad(g: gr.GradNode):
    # float -> float passes the gradient back in the source type; to or from an integer: none
    if not g.differentiable(0) or g.out_dtype().kind != "f":
        return [None]
    d = g.dy()
    src = g.in_dtype(0)
    return [d if g.b_dtype(d) == src else g.emit("CAST", d, dtype=src)]


@grad_rule("ADD_N")
def add_n_grad(g: gr.GradNode):
    d = g.dy()
    return [d if g.differentiable(i) else None for i in range(len(g.op.inputs))]


@grad_rule("ATAN2")
def atan2_grad(g: gr.GradNode):
    # z = atan2(y, x): dy = d * x / (x^2 + y^2), dx = -d * y / (x^2 + y^2)
    y, x = g.x(0), g.x(1)
    inv = gr.div(g, g.dy(), gr.add(g, gr.square(g, x), gr.square(g, y)))
    return [gr.sum_to_input(g, 0, gr.mul(g, inv, x) if g.differentiable(0) else None),
            gr.sum_to_input(g, 1, gr.neg(g, gr.mul(g, inv, y)) if g.differentiable(1) else None)]


@grad_rule("SELECT")
def select_grad(g: gr.GradNode):
    # SELECT (v1): x and y have the output's shape, the condition may pick whole rows; SELECT itself
    # takes the same condition, so the masks are SELECTs of the cotangent and zeros
    d = g.dy()
    zeros = gr.zeros_like(g, d)
    c = g.x(0)
    return [None,
            g.emit("SELECT", c, d, zeros, dtype=g.b_dtype(d)) if g.differentiable(1) else None,
            g.emit("SELECT", c, zeros, d, dtype=g.b_dtype(d)) if g.differentiable(2) else None]


@grad_rule("SELECT_V2")
def select_v2_grad(g: gr.GradNode):
    # the condition takes none; x and y get the cotangent where they were picked, summed back over the
    # axes broadcasting stretched
    d = g.dy()
    c = g.x(0)
    zero = gr.scalar(g, 0.0, d)
    dx = gr.where(g, c, d, zero) if g.differentiable(1) else None
    dy = gr.where(g, c, zero, d) if g.differentiable(2) else None
    return [None, gr.sum_to_input(g, 1, dx), gr.sum_to_input(g, 2, dy)]


# TF: Floor, Ceil, Round return no gradient; LogicalNot, ZerosLike, Bitcast are not differentiable;
# the bitwise ops are integer-only.
no_gradient("FLOOR", "CEIL", "ROUND", "LOGICAL_NOT", "ZEROS_LIKE", "BITCAST", "BITWISE_XOR", "RIGHT_SHIFT")
