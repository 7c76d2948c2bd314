"""Activation functions: ReLU family, leaky/parametric ReLU, ELU, tanh, logistic, hard-swish, GELU,
softmax and log-softmax.

float32 is computed in float32. float16 (accepted by LiteRT through XNNPACK) is computed in float32
and rounded once at the end, so multi-step formulas do not round after every step.
"""
from __future__ import annotations

import numpy as np

from onert_py.backends.cpu._common import Scratch, clip_ufunc as _clip_ufunc
from onert_py.backends.cpu._conv_plan import ROW, chunk
from onert_py.backends.cpu.shape import check_dtype
from onert_py.backends.registry import CPU, KernelContext, Run, shape_rule
from onert_py.backends.shape_rules import broadcasting, same_shape

_FLOATS = ("float32", "float16")
_F32 = np.float32


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


@CPU.register("RELU", dtypes=_FLOATS)
def relu(ctx: KernelContext) -> Run:
    return _clip_unary(ctx, 0, np.inf)


@CPU.register("RELU6", dtypes=_FLOATS)
def relu6(ctx: KernelContext) -> Run:
    return _clip_unary(ctx, 0, 6)


@CPU.register("RELU_N1_TO_1", dtypes=_FLOATS)
def relu_n1_to_1(ctx: KernelContext) -> Run:
    return _clip_unary(ctx, -1, 1)


@CPU.register("RELU_0_TO_1", dtypes=("float32",))
def relu_0_to_1(ctx: KernelContext) -> Run:
    return _clip_unary(ctx, 0, 1)


@CPU.register("LEAKY_RELU", dtypes=_FLOATS)
def leaky_relu(ctx: KernelContext) -> Run:
    alpha = _F32(ctx.options.get("alpha", 0.0))
    return _unary(ctx, lambda x: np.where(x > 0, x, x * alpha))


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


@CPU.register("ELU", dtypes=_FLOATS)
def elu(ctx: KernelContext) -> Run:
    zero = _F32(0)
    return _unary(ctx, lambda x: np.where(x < zero, np.expm1(np.minimum(x, zero)), x))


@CPU.register("TANH", dtypes=_FLOATS)
def tanh(ctx: KernelContext) -> Run:
    return _unary(ctx, np.tanh, np.tanh)


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


@CPU.register("GELU", dtypes=_FLOATS)
def gelu(ctx: KernelContext) -> Run:
    half, one = _F32(0.5), _F32(1)
    if ctx.options.get("approximate", False):
        k, c = _F32(np.sqrt(2.0 / np.pi)), _F32(0.044715)

        def fn(x):
            return half * x * (one + np.tanh(k * (x + c * x * x * x)))
    else:
        m = _F32(-np.sqrt(0.5))

        def fn(x):
            # 0.5 x erfc(-x / sqrt 2): LiteRT's form, which keeps precision for large negative x.
            return half * x * _erfc(x * m)
    return _unary(ctx, fn)


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


@CPU.register("LOG_SOFTMAX", dtypes=("float32",))
def log_softmax(ctx: KernelContext) -> Run:
    if len(ctx.input_tensor(0).shape) == 0:
        raise ctx.fail("LOG_SOFTMAX needs an input of rank 1 or more")

    def fn(x):
        d = x - x.max(axis=-1, keepdims=True)
        d -= np.log(np.exp(d).sum(axis=-1, keepdims=True))
        return d
    return _unary(ctx, fn)


# Shape rules: every output has input 0's shape.
shape_rule("RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LEAKY_RELU", "ELU", "TANH", "LOGISTIC",
           "HARD_SWISH", "GELU", "SOFTMAX", "LOG_SOFTMAX")(same_shape)

# Shape rules: the inputs' broadcast shape.
shape_rule("PRELU")(broadcasting)
