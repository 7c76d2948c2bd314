"""Binary elementwise arithmetic, comparisons and logical ops, with numpy broadcasting.

Python operators are used where they mean the same as the ufunc: on arrays they dispatch to the same
ufunc, and on numpy scalars (rank-0 values) they are ten times cheaper than calling the ufunc.

ADD, SUB, MUL and DIV follow LiteRT's fused activation: the result is clamped to an activation range,
which for float32 is [-FLT_MAX, FLT_MAX] when there is no activation, so 1/0 gives 3.4028235e38 and
an overflow gives +-FLT_MAX (NaN stays NaN). TANH and SIGN_BIT have no range and act as NONE there.
"""
from __future__ import annotations

import operator
from math import isinf


import numpy as np

from onert_py.backends.cpu._common import (NONE, RELU, RELU6, RELU_N1_TO_1, SIGN_BIT, TANH, activated,
                                           clip_ufunc as _clip)
from onert_py.backends.cpu._conv_plan import ROW, chunk
from onert_py.backends.cpu.shape import check_same_types, type_name
from onert_py.backends.registry import CPU, KernelContext, Run, shape_rule, value_rule
from onert_py.backends.shape_rules import Node, broadcasting


def _check_operands(ctx: KernelContext, same_output: bool = True) -> np.dtype:
    """Both inputs of one registered type (and the output's, unless a comparison)."""
    ctx.expect_inputs(2)
    return check_same_types(ctx, 0, 1, same_output=same_output)


def _binary(ctx: KernelContext, fn, same_output: bool = True) -> Run:
    """Run closure for out = fn(a, b) (an op without fused activation)."""
    _check_operands(ctx, same_output)
    a, b = ctx.inputs
    (o,) = ctx.outputs
    v = ctx.values

    def run() -> None:
        v[o] = fn(v[a], v[b])
    return run


def _activation_range(code: int, dt: np.dtype) -> tuple | None:
    """(lo, hi) of LiteRT's CalculateActivationRange for `dt`, or None when nothing is clamped."""
    if code == RELU6:
        return dt.type(0), dt.type(6)
    if code == RELU_N1_TO_1:
        # unsigned: LiteRT's -1 wraps to the type's max, and min(max(x, lo), hi) then gives 1 everywhere
        return np.array(-1).astype(dt)[()], dt.type(1)
    if code not in (NONE, RELU, TANH, SIGN_BIT):
        raise ValueError(f"unknown fused activation function {code}")
    if dt.kind == "f":
        hi = dt.type(np.finfo(dt).max)
        return (dt.type(0) if code == RELU else -hi), hi
    if dt.kind in "iu" and code == RELU:
        return dt.type(0), dt.type(np.iinfo(dt).max)
    return None  # integers wrap, as LiteRT's do; complex has no activation


def _arithmetic(ctx: KernelContext, fn) -> Run:
    """Run closure for out = clamp(fn(a, b)) with LiteRT's activation range; `fn` returns a fresh
    array (clamped in place, one pass) or a numpy scalar."""
    _check_operands(ctx)
    a, b = ctx.inputs
    (o,) = ctx.outputs
    v = ctx.values
    code = ctx.options.get("fused_activation_function", NONE)
    try:
        rng = _activation_range(code, ctx.output_dtype())
    except ValueError as e:
        raise ctx.fail(str(e)) from None
    if rng is None:
        def run() -> None:
            v[o] = fn(v[a], v[b])
        return run
    lo, hi = rng
    fast = _float_into_buffer(ctx, fn, lo, hi)
    if fast is not None:
        return fast

    scalar_type = ctx.output_dtype().type
    if code == NONE and scalar_type is np.float32:
        # Rank-0 values (loop counters, scalar states) take the first branch: with no activation only
        # +-inf lies outside [-FLT_MAX, FLT_MAX], and math.isinf is the cheapest test of a numpy scalar.
        def run_unbounded() -> None:
            r = fn(v[a], v[b])
            if r.__class__ is scalar_type:
                if isinf(r):
                    r = hi if r > 0 else lo
            else:
                _clip(r, lo, hi, out=r)
            v[o] = r
        return run_unbounded

    def run_clamped() -> None:
        r = fn(v[a], v[b])
        if type(r) is np.ndarray:
            _clip(r, lo, hi, out=r)
        elif not lo <= r <= hi:  # rank-0: two comparisons are cheaper than a ufunc call
            r = _clip(r, lo, hi)
        v[o] = r
    return run_clamped


_UFUNCS = {operator.add: np.add, operator.sub: np.subtract, operator.mul: np.multiply,
           operator.truediv: np.divide}


def _float_into_buffer(ctx: KernelContext, fn, lo, hi) -> Run | None:
    """ADD/SUB/MUL/DIV of float32 tensors with static shapes (rank >= 1): the ufunc writes into the
    planned output buffer and the activation clamps it in place. An operand that varies only along the
    last axis while the other is the full output (a squeeze-excite scale) is tiled at run time to long
    rows. None when the shapes are not static."""
    ufunc = _UFUNCS.get(fn)
    ts = [ctx.input_tensor(0), ctx.input_tensor(1)]
    out_t = ctx.output_tensor(0)
    if (ufunc is None or out_t.dtype != np.float32 or any(t.dtype != np.float32 for t in ts)
            or any(t.is_dynamic for t in ts + [out_t]) or len(out_t.shape) == 0):
        return None
    shapes = [tuple(t.shape) for t in ts]
    out_shape = tuple(out_t.shape)
    try:
        if np.broadcast_shapes(*shapes) != out_shape:
            return None
    except ValueError:
        return None
    a, b = ctx.inputs
    (o,) = ctx.outputs
    v = ctx.values
    alloc = ctx.output_buffer(0)
    clip = _clip
    c = out_shape[-1]
    size = int(np.prod(out_shape))
    rows = None
    for k in (0, 1):
        full, chan = shapes[k], shapes[1 - k]
        if (full == out_shape and c > 1 and size >= 4 * ROW and len(chan) >= 1 and chan[-1] == c
                and int(np.prod(chan)) == c):
            m = size // c
            t = chunk(m, c, ROW)
            rows, tile_k, reps = (m // t, t * c), 1 - k, t
            break

    s0, s1 = shapes

    def run_any() -> None:   # values whose shapes differ from the declared ones: fresh arrays
        r = fn(v[a], v[b])
        clip(r, lo, hi, out=r)
        v[o] = r

    if rows is not None:
        def run_rows() -> None:
            x, y = v[a], v[b]
            if x.shape != s0 or y.shape != s1:
                return run_any()
            r = alloc(out_shape)
            if tile_k == 1:
                ufunc(x.reshape(rows), np.tile(y.reshape(c), reps), out=r.reshape(rows))
            else:
                ufunc(np.tile(x.reshape(c), reps), y.reshape(rows), out=r.reshape(rows))
            clip(r, lo, hi, out=r)
            v[o] = r
        return run_rows

    def run() -> None:
        x, y = v[a], v[b]
        if x.shape != s0 or y.shape != s1:
            return run_any()
        r = alloc(out_shape)
        ufunc(x, y, out=r)
        clip(r, lo, hi, out=r)
        v[o] = r
    return run


def _check_divisor(b) -> None:
    if np.any(b == 0):
        raise ZeroDivisionError("division by zero")


@CPU.register("ADD", dtypes=("float32", "float16", "int32", "int64", "int16"))
def add(ctx: KernelContext) -> Run:
    return _arithmetic(ctx, operator.add)


_BINARY_VALUES = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "FLOOR_DIV": np.floor_divide,
                  "FLOOR_MOD": np.mod, "MAXIMUM": np.maximum, "MINIMUM": np.minimum}


@value_rule("MUL", litert=True)
@value_rule("ADD", "SUB", "FLOOR_DIV", "FLOOR_MOD", "MAXIMUM", "MINIMUM")
def binary_value(n: Node, v: list):
    if n.op.opcode in ("FLOOR_DIV", "FLOOR_MOD") and not np.all(v[1]):
        return None
    return [activated(n.opts, _BINARY_VALUES[n.op.opcode](v[0], v[1]))]


@CPU.register("SUB", dtypes=("float32", "float16", "int32", "int64", "int16"))
def sub(ctx: KernelContext) -> Run:
    return _arithmetic(ctx, operator.sub)


@CPU.register("MUL", dtypes=("float32", "float16", "int32", "uint32", "int64", "int16", "complex64"))
def mul(ctx: KernelContext) -> Run:
    return _arithmetic(ctx, operator.mul)


@CPU.register("DIV", dtypes=("float32", "float16", "int32"))
def div(ctx: KernelContext) -> Run:
    if ctx.output_dtype().kind in "iu":
        def int_div(a, b):
            # C++ integer division truncates toward zero.
            _check_divisor(b)
            q = np.abs(a) // np.abs(b)
            return np.where((a < 0) != (b < 0), -q, q).astype(a.dtype)
        return _arithmetic(ctx, int_div)
    return _arithmetic(ctx, operator.truediv)


@CPU.register("FLOOR_DIV", dtypes=("float32", "int32", "int64", "int16", "int8"))
def floor_div(ctx: KernelContext) -> Run:
    if ctx.output_dtype().kind in "iu":
        def int_floor_div(a, b):
            _check_divisor(b)
            return np.floor_divide(a, b)
        return _binary(ctx, int_floor_div)

    def float_floor_div(a, b):
        # LiteRT refuses a zero divisor for float FLOOR_DIV too (where DIV and FLOOR_MOD give inf/NaN)
        _check_divisor(b)
        return np.floor(np.divide(a, b))
    return _binary(ctx, float_floor_div)


@CPU.register("FLOOR_MOD", dtypes=("float32", "int32", "int64", "int16", "int8"))
def floor_mod(ctx: KernelContext) -> Run:
    if ctx.output_dtype().kind in "iu":
        def int_floor_mod(a, b):
            _check_divisor(b)
            return np.mod(a, b)
        return _binary(ctx, int_floor_mod)

    def float_floor_mod(a, b):
        r = np.fmod(a, b)
        return np.where((r != 0) & ((b < 0) != (r < 0)), r + b, r).astype(r.dtype)
    return _binary(ctx, float_floor_mod)


@CPU.register("POW", dtypes=("float32", "int32"))
def pow_(ctx: KernelContext) -> Run:
    if ctx.output_dtype().kind in "iu":
        def int_pow(a, b):
            if np.any(b < 0):
                raise ValueError("POW: negative exponent for an integer tensor")
            return np.power(a, b)
        return _binary(ctx, int_pow)
    return _binary(ctx, np.power)


@CPU.register("MAXIMUM", dtypes=("float32", "float16", "int32", "int64", "int16", "int8", "uint8"))
def maximum(ctx: KernelContext) -> Run:
    # TFLite computes `a > b ? a : b`, so a NaN in `a` yields `b` (np.maximum would propagate it).
    return _binary(ctx, lambda a, b: np.where(a > b, a, b))


@CPU.register("MINIMUM", dtypes=("float32", "float16", "int32", "int64", "int16", "int8", "uint8"))
def minimum(ctx: KernelContext) -> Run:
    return _binary(ctx, lambda a, b: np.where(a < b, a, b))


@CPU.register("SQUARED_DIFFERENCE", dtypes=("float32", "float16", "int32"))
def squared_difference(ctx: KernelContext) -> Run:
    def sq_diff(a, b):
        d = np.subtract(a, b)
        return np.multiply(d, d)
    return _binary(ctx, sq_diff)


_COMPARISONS = {
    "EQUAL": operator.eq, "NOT_EQUAL": operator.ne, "LESS": operator.lt, "LESS_EQUAL": operator.le,
    "GREATER": operator.gt, "GREATER_EQUAL": operator.ge,
}


def _register_comparison(name: str, ufunc) -> None:
    @CPU.register(name, dtypes=("float32", "float16", "int32", "int64", "int16", "bool", "string"))
    def compare(ctx: KernelContext) -> Run:
        if ctx.output_dtype() != np.bool_:
            raise ctx.fail(f"output type {type_name(ctx.output_dtype())}, expected bool")
        return _binary(ctx, ufunc, same_output=False)
    compare.__name__ = name.lower()


for _name, _ufunc in _COMPARISONS.items():
    _register_comparison(_name, _ufunc)


@CPU.register("LOGICAL_AND", dtypes=("bool",))
def logical_and(ctx: KernelContext) -> Run:
    return _binary(ctx, np.logical_and)


@CPU.register("LOGICAL_OR", dtypes=("bool",))
def logical_or(ctx: KernelContext) -> Run:
    return _binary(ctx, np.logical_or)


# Shape rules: the inputs' broadcast shape.
shape_rule("ADD", "SUB", "MUL", "DIV", "FLOOR_DIV", "FLOOR_MOD", "POW", "MAXIMUM", "MINIMUM",
           "SQUARED_DIFFERENCE", "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL",
           "LOGICAL_AND", "LOGICAL_OR")(broadcasting)
