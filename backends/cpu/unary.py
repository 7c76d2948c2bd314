"""Unary math, casts, bit manipulation and element selection.

Float ops compute in the tensor's own dtype (float16 is computed by numpy in float32 and rounded once,
as LiteRT's XNNPACK path does). Every run closure returns a fresh array or a view; none of them writes
into an input. inf/NaN results are values, not warnings: the session runs under np.errstate(all="ignore").
"""
from __future__ import annotations

import numpy as np

from onert_py.backends.cpu.shape import check_dtype, check_same_types
from onert_py.backends.registry import CPU, KernelContext, Run, shape_rule, value_rule
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
        return run_planned

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
# Plain elementwise math.

@CPU.register("ABS", dtypes=("float32", "float16", "int32", "int16"))
def abs_(ctx: KernelContext) -> Run:
    return _unary(ctx, np.abs)   # like C++ std::abs, INT_MIN stays INT_MIN


@CPU.register("NEG", dtypes=("float32", "float16", "int64", "int32", "int16", "int8"))
def neg(ctx: KernelContext) -> Run:
    return _unary(ctx, np.negative)


@value_rule("NEG", "ABS", "ZEROS_LIKE", "CAST")
def unary_value(n: Node, v: list):
    fn = {"NEG": np.negative, "ABS": np.abs, "ZEROS_LIKE": np.zeros_like, "CAST": np.asarray}[n.op.opcode]
    return [fn(v[0])]


@CPU.register("EXP", dtypes=_FLOATS)
def exp(ctx: KernelContext) -> Run:
    return _unary(ctx, np.exp)


@CPU.register("LOG", dtypes=_FLOATS)
def log(ctx: KernelContext) -> Run:
    return _unary(ctx, np.log)      # log(0) = -inf, log(<0) = NaN


@CPU.register("SQRT", dtypes=_FLOATS)
def sqrt(ctx: KernelContext) -> Run:
    return _unary(ctx, np.sqrt)


@CPU.register("RSQRT", dtypes=_FLOATS)
def rsqrt(ctx: KernelContext) -> Run:
    recip = _then(np.reciprocal)   # 1 / sqrt(x), rounded twice like LiteRT's float kernel
    return _unary(ctx, lambda x: recip(np.sqrt(x)))


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


@shape_rule("SELECT")
def select_shape(n: Node):
    # SELECT (v1): the condition may be a scalar or a vector over the first dim; x and y agree.
    return [n.shape(1)]


@CPU.register("SELECT_V2", dtypes=_SELECT_TYPES)
def select_v2(ctx: KernelContext) -> Run:
    return _select(ctx, v1=False)


@value_rule("SELECT_V2")
def select_value(n: Node, v: list):
    return [np.where(v[0], v[1], v[2])]


# Shape rules: every output has input 0's shape.
shape_rule("ABS", "NEG", "EXP", "LOG", "SQRT", "RSQRT", "SQUARE", "SIN", "COS", "FLOOR", "CEIL", "ROUND",
           "SIGN", "LOGICAL_NOT", "ZEROS_LIKE", "CAST", "REAL", "IMAG", "COMPLEX_ABS", "ADD_N")(same_shape)

# Shape rules: the inputs' broadcast shape.
shape_rule("BITWISE_XOR", "RIGHT_SHIFT", "ATAN2", "SELECT_V2")(broadcasting)
