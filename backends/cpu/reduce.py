"""Reductions (SUM, MEAN, REDUCE_*), ARG_MAX / ARG_MIN and TOPK_V2.

Axes may be a constant (normalised once at prepare time) or computed at run time; negative and
duplicate axes are allowed, as in TFLite. An empty axis list returns the input unchanged.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from onert_py.backends.cpu._common import int_divide, per_key
from onert_py.backends.cpu._quant import (same_type_qparams, 
    multiply_by_quantized_multiplier, multiply_by_quantized_multiplier_half_up,
    multiply_by_quantized_multiplier_int64,
    quantize_multiplier,
    round_half_away32,
    to_int32_x86,
    wrap_int32,
)
from onert_py.backends import gradients as gr
from onert_py.backends.registry import CPU, KernelContext, Run, grad_rule, no_gradient, shape_rule, value_rule
from onert_py.backends.shape_rules import Node, axis_of, unknown_like
from onert_py.exec.executor import scalar_or_array

_INT_AND_FLOAT = ("float32", "int32", "int64")
# float16 reductions run on LiteRT's default XNNPACK delegate only (its builtin kernels reject them),
# which accumulates in float32 and rounds once: so do we.
_SUM_TYPES = ("float32", "float16", "int32", "int64")
# REDUCE_PROD's builtin kernel multiplies non-quantized int8/uint8/int16 as plain (wrapping) integers.
_PROD_TYPES = ("float32", "int32", "int64", "int8", "uint8", "int16")


def _normalise_axes(axes, ndim: int) -> tuple[int, ...]:
    """Sorted unique non-negative axes; raises ValueError for an axis outside [-ndim, ndim)."""
    out = set()
    for a in np.ravel(axes).tolist():
        a = int(a)
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of range for a tensor of rank {ndim}")
        out.add(a % ndim)
    return tuple(sorted(out))


def const_input(ctx: KernelContext, i: int) -> np.ndarray | None:
    """Constant value of input i; a zero-element tensor with no producer (the writer stores no buffer
    for it) counts as an empty constant."""
    c = ctx.const(i)
    t = ctx.input_tensor(i)
    if c is None and t is not None and 0 in t.shape and not t.is_dynamic and ctx.inputs[i] not in _produced(ctx):
        c = np.zeros(t.shape, t.dtype)
    return c


def _produced(ctx: KernelContext) -> set[int]:
    sg = ctx.subgraph
    out = set(sg.inputs)
    for op in sg.operations:
        out.update(op.outputs)
    return out


def _static_rank(ctx: KernelContext, i: int = 0) -> int | None:
    t = ctx.input_tensor(i)
    return len(t.shape) if t is not None and t.has_rank else None


def _axes_getter(ctx: KernelContext, ndim_of_input: bool = True) -> Callable[[np.ndarray], tuple[int, ...]] | tuple:
    """Constant axes -> a tuple (normalised now); runtime axes -> a function of the input array."""
    axes_const = const_input(ctx, 1)
    rank = _static_rank(ctx)
    if axes_const is not None:
        if axes_const.dtype.kind not in "iu":
            raise ctx.fail(f"axis tensor must be an integer tensor, not {axes_const.dtype}")
        if rank is not None:
            try:
                return _normalise_axes(axes_const, rank)
            except ValueError as e:
                raise ctx.fail(str(e)) from None
        raw = axes_const
        return lambda x: _normalise_axes(raw, x.ndim)
    t = ctx.input_tensor(1)
    if t is not None and t.dtype.kind not in "iu":
        raise ctx.fail(f"axis tensor must be an integer tensor, not {t.dtype}")
    a, v = ctx.inputs[1], ctx.values
    return lambda x: _normalise_axes(v[a], x.ndim)


def _check_dtype(ctx: KernelContext, allowed: tuple[str, ...]) -> np.dtype:
    dt = ctx.input_tensor(0).dtype
    if dt.name not in allowed:
        raise ctx.fail(f"input type {dt.name} is not supported (supported: {', '.join(allowed)})")
    if ctx.output_dtype() != dt:
        raise ctx.fail(f"output type {ctx.output_dtype().name} differs from input type {dt.name}")
    return dt


def _reducer(ctx: KernelContext, allowed: tuple[str, ...],
             make: Callable[[np.dtype, bool], Callable[[np.ndarray, tuple[int, ...]], np.ndarray]]) -> Run:
    """Common prepare: reduce(x, axes) -> array; `make(dtype, keep_dims)` builds `reduce`."""
    ctx.expect_inputs(2)
    dt = _check_dtype(ctx, allowed)
    keep = bool(ctx.options.get("keep_dims", False))
    reduce = make(dt, keep)
    x_i = ctx.inputs[0]
    (o,) = ctx.outputs
    v = ctx.values
    axes = _axes_getter(ctx)
    if isinstance(axes, tuple):
        if not axes:
            def run() -> None:
                v[o] = v[x_i]  # nothing to reduce: the result is the input (shared, never written)
        else:
            def run() -> None:
                v[o] = scalar_or_array(reduce(v[x_i], axes))
        return run

    get_axes = axes

    def run_dynamic() -> None:
        x = v[x_i]
        ax = get_axes(x)
        v[o] = scalar_or_array(reduce(x, ax)) if ax else x
    return run_dynamic


def _float_sum(dt: np.dtype, keep: bool) -> Callable[[np.ndarray, tuple[int, ...]], np.ndarray]:
    """Sum of a float32/float64 tensor over `axes`. Axes that form one contiguous block of a
    C-contiguous input are summed by BLAS against a vector of ones (x viewed as [pre, R, post]): a
    global pool [1, H, W, C] -> [C] is one gemv instead of numpy's reduction, whose inner loops are C
    floats long (measured [1, 72, 128, 16]: 265 -> 18 us, and closer to the float64 sum). Other axes
    take numpy's pairwise reduction."""
    ones: dict[int, np.ndarray] = {}

    def total(x, axes):
        a, b = axes[0], axes[-1] + 1
        if b - a != len(axes) or not x.flags.c_contiguous or x.dtype != dt:
            return np.add.reduce(x, axis=axes, dtype=dt, keepdims=keep)
        shape = x.shape
        pre = post = r = 1
        for d in shape[:a]:
            pre *= d
        for d in shape[a:b]:
            r *= d
        for d in shape[b:]:
            post *= d
        one = ones.get(r)
        if one is None:
            one = ones[r] = np.ones(r, dt)
        if post == 1:
            s = np.dot(x.reshape(pre, r), one)
        elif pre == 1:
            s = np.dot(one, x.reshape(r, post))
        else:
            s = np.matmul(one, x.reshape(pre, r, post))
        out = shape[:a] + ((1,) * (b - a) if keep else ()) + shape[b:]
        return s.reshape(out)
    return total


def _ufunc_reduce(ufunc: np.ufunc):
    def make(dt: np.dtype, keep: bool):
        if ufunc is np.add and dt.kind == "f" and dt != np.float16:
            return _float_sum(dt, keep)
        if dt == np.float16:
            def reduce16(x, axes):
                return ufunc.reduce(x, axis=axes, dtype=np.float32, keepdims=keep).astype(dt)
            return reduce16

        def reduce(x, axes):
            return ufunc.reduce(x, axis=axes, dtype=dt, keepdims=keep)
        return reduce
    return make


def _not_quantized(ctx: KernelContext) -> None:
    t = ctx.input_tensor(0)
    if t.dtype.kind in "iu" and t.quantization is not None:
        raise ctx.fail(f"quantized {t.dtype.name} input {t.name!r} is not supported")


# --------------------------------------------------------------------------------------------------
# Quantized reductions (LiteRT's builtin kernels, bit for bit)

_Q_TYPES = ("int8", "uint8", "int16")
_F32 = np.float32


def _q_params(ctx: KernelContext, types: tuple[str, ...] = _Q_TYPES):
    """Checks of a quantized reduction (_quant.same_type_qparams): (dtype, s_in, z_in, s_out, z_out)."""
    ctx.expect_inputs(2)
    return same_type_qparams(ctx, types, "a quantized reduction")






def _q_reducer(ctx: KernelContext, make) -> Run:
    """_reducer for quantized kernels: `make()` builds reduce(x, axes) -> array of the output type.
    An empty axis list copies the input (LiteRT's generic kernels do)."""
    keep = bool(ctx.options.get("keep_dims", False))
    reduce = make(keep)
    x_i = ctx.inputs[0]
    (o,) = ctx.outputs
    v = ctx.values
    axes = _axes_getter(ctx)
    if isinstance(axes, tuple):
        def run() -> None:
            x = v[x_i]
            v[o] = scalar_or_array(reduce(x, axes))
        return run
    get_axes = axes

    def run_dynamic() -> None:
        x = v[x_i]
        v[o] = scalar_or_array(reduce(x, get_axes(x)))
    return run_dynamic


def _count(x, axes) -> int:
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n


@CPU.register("SUM", dtypes=_SUM_TYPES)
def sum_(ctx: KernelContext) -> Run:
    # numpy sums float32 pairwise in float32; TFLite sums sequentially. Both are float32 sums, so they
    # agree to a few ulps of the sum of magnitudes.
    return _reducer(ctx, _SUM_TYPES, _ufunc_reduce(np.add))


@CPU.register_quantized("SUM", dtypes=_Q_TYPES)
def sum_quantized(ctx: KernelContext) -> Run:
    """LiteRT's optimized QuantizedMeanOrSum (sum): the raw integer sum S of each slice, then
    round(S * s + b) + zp_out clamped, in float32, with s = s_in / s_out and b = -zp_in * s * n."""
    dt, s_in, z_in, s_out, z_out = _q_params(ctx)
    info = np.iinfo(dt)
    scale = _F32(s_in / s_out)

    def make(keep: bool):
        def reduce(x, axes):
            total = np.add.reduce(np.asarray(x), axis=axes, dtype=np.int64, keepdims=keep)
            n = _count(np.asarray(x), axes)
            if np.size(x) == 0:
                return np.zeros(np.shape(total), dt)   # LiteRT leaves the output unwritten
            bias = _F32(_F32(_F32(-z_in) * scale) * _F32(n))
            with np.errstate(over="ignore"):
                f = (np.asarray(total).astype(np.float32) * scale).astype(np.float32) + bias
            r = to_int32_x86(round_half_away32(np.asarray(f, np.float32))) + z_out
            return np.clip(r, info.min, info.max).astype(dt)
        return reduce
    return _q_reducer(ctx, make)


@shape_rule("SUM", "MEAN", "REDUCE_PROD", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_ANY", "REDUCE_ALL")
def reduce_shape(n: Node):
    s, axes = n.shape(0), n.ints(1)
    keep = bool(n.opts.get("keep_dims", False))
    if s is None:
        return [None]
    if axes is None:
        return [unknown_like(s) if keep else None]
    picked = {axis_of(n, a, len(s)) for a in axes} if s else set()
    if keep:
        return [tuple(1 if k in picked else d for k, d in enumerate(s))]
    return [tuple(d for k, d in enumerate(s) if k not in picked)]


@CPU.register("REDUCE_PROD", dtypes=_PROD_TYPES)
def reduce_prod(ctx: KernelContext) -> Run:
    _not_quantized(ctx)   # quantized products rescale every partial product: a different kernel
    return _reducer(ctx, _PROD_TYPES, _ufunc_reduce(np.multiply))


@CPU.register_quantized("REDUCE_PROD", dtypes=("int8", "int16"))
def reduce_prod_quantized(ctx: KernelContext) -> Run:
    """LiteRT's quantized REDUCE_PROD: each slice's values (x - zp_in) multiplied in row-major order,
    every partial product (int64) rescaled to int32 by s = s_in / s_out**(1/n) (the int64
    MultiplyByQuantizedMultiplier, n the slice length), the final product rescaled once more, plus
    zp_out, clamped. Reducing only size-1 axes (or a rank-0 input) copies the input unchanged, as
    LiteRT's optimized kernel drops size-1 dims first."""
    dt, s_in, z_in, s_out, z_out = _q_params(ctx, ("int8", "int16"))
    info = np.iinfo(dt)
    multipliers: dict[int, tuple[int, int]] = {}

    def make(keep: bool):
        def reduce(x, axes):
            x = np.asarray(x)
            out_shape = tuple(1 if k in axes else d for k, d in enumerate(x.shape)) if keep else \
                tuple(d for k, d in enumerate(x.shape) if k not in axes)
            if x.size == 0:
                return np.zeros(out_shape, dt)       # LiteRT leaves the output unwritten
            if all(x.shape[a] == 1 for a in axes):
                return x.reshape(out_shape).copy()
            n = _count(x, axes)
            if n not in multipliers:
                multipliers[n] = quantize_multiplier(float(s_in) / math.pow(float(s_out), 1.0 / n))
            mult, shift = multipliers[n]
            rest = [d for d in range(x.ndim) if d not in axes]
            rows = np.transpose(x, rest + list(axes)).reshape(-1, n).astype(np.int64) - z_in
            acc = rows[:, 0]
            for j in range(1, n):        # a chain of rescaled products: one vectorised step per element
                acc = wrap_int32(multiply_by_quantized_multiplier_int64(acc * rows[:, j], mult, shift))
            r = wrap_int32(multiply_by_quantized_multiplier_int64(acc, mult, shift)) + z_out
            return np.clip(r, info.min, info.max).astype(dt).reshape(out_shape)
        return reduce
    return _q_reducer(ctx, make)


_REDUCERS = {"REDUCE_PROD": np.prod, "SUM": np.sum, "REDUCE_MAX": np.max, "REDUCE_MIN": np.min}


@value_rule("REDUCE_PROD", litert=True)
@value_rule("SUM", "REDUCE_MAX", "REDUCE_MIN")
def reduce_value(n: Node, v: list):
    x = np.asarray(v[0])
    axes = tuple(int(a) % x.ndim for a in np.ravel(v[1])) if x.ndim else ()
    if x.size == 0 and n.op.opcode in ("REDUCE_MAX", "REDUCE_MIN"):
        return None
    return [_REDUCERS[n.op.opcode](x, axis=tuple(sorted(set(axes))),
                                   keepdims=bool(n.opts.get("keep_dims", False))).astype(x.dtype)]


def _litert_nan_extremum(ufunc: np.ufunc, x: np.ndarray, axes: tuple[int, ...], r):
    """Redo the slices where numpy's max/min gave NaN with LiteRT's rule. LiteRT folds each reduced
    slice in row-major order with acc = (acc > in) ? acc : in (MIN: <), so a NaN replaces the
    accumulator and is itself replaced by the next element: the result is the extremum of the elements
    after the last NaN, or NaN when the slice ends with a NaN."""
    rest = [d for d in range(x.ndim) if d not in axes]
    k = 1
    for a in axes:
        k *= x.shape[a]
    rows = np.transpose(x, rest + list(axes)).reshape(-1, k)
    out = np.array(r)                      # r: a fresh array (or a scalar); out.reshape(-1) is a view
    flat = out.reshape(-1)
    bad = np.flatnonzero(np.isnan(flat))
    sub = rows[bad]
    nan = np.isnan(sub)
    last = (k - 1) - np.argmax(nan[:, ::-1], axis=1)          # index of the last NaN in each slice
    after = np.arange(k) > last[:, None]
    fill = x.dtype.type(-np.inf if ufunc is np.maximum else np.inf)
    vals = ufunc.reduce(np.where(after, sub, fill), axis=1)
    vals[last == k - 1] = np.nan
    flat[bad] = vals
    return out if type(r) is np.ndarray else out[()]


def _extremum(ufunc: np.ufunc, float_init: float, int_init: str):
    def make(dt: np.dtype, keep: bool):
        # The identity over an empty axis is -inf / +inf for floats (as TFLite), the type's limit for ints.
        init = dt.type(float_init) if dt.kind == "f" else getattr(np.iinfo(dt), int_init)
        if dt == np.float16:
            # XNNPACK (the only LiteRT path for float16) ignores NaN like fmax/fmin: a slice is NaN
            # only when all of it is.
            nan_ignoring = np.fmax if ufunc is np.maximum else np.fmin

            def reduce16(x, axes):
                return nan_ignoring.reduce(x, axis=axes, keepdims=keep, initial=init)
            return reduce16

        def reduce(x, axes):
            return ufunc.reduce(x, axis=axes, keepdims=keep, initial=init)
        if dt.kind != "f":
            return reduce

        def reduce_float(x, axes):
            r = ufunc.reduce(x, axis=axes, keepdims=keep, initial=init)
            # numpy propagates NaN; only slices holding a NaN need LiteRT's NaN rule (a check on the
            # output, which is smaller than the input)
            if np.isnan(r).any():
                r = _litert_nan_extremum(ufunc, x, axes, r)
            return r
        return reduce_float
    return make


_MINMAX_TYPES = ("float32", "float16", "int32", "int64", "int16", "int8", "uint8")


@CPU.register("REDUCE_MAX", dtypes=_MINMAX_TYPES)
def reduce_max(ctx: KernelContext) -> Run:
    # NaN: LiteRT's running max lets a NaN through only when it is the last element of its slice (see
    # _litert_nan_extremum); numpy's NaN-propagating result is fixed up where it holds a NaN.
    return _reducer(ctx, _MINMAX_TYPES, _extremum(np.maximum, -np.inf, "min"))


def _q_extremum(ctx: KernelContext, ufunc: np.ufunc) -> Run:
    """Quantized REDUCE_MAX / REDUCE_MIN: LiteRT requires the output's parameters to equal the
    input's, and reduces the integers as they are."""
    dt, s_in, z_in, s_out, z_out = _q_params(ctx)
    if s_in != s_out or z_in != z_out:
        raise ctx.fail(f"output quantization ({float(s_out)}, {z_out}) must equal the input's "
                       f"({float(s_in)}, {z_in})")
    info = np.iinfo(dt)
    init = dt.type(info.min if ufunc is np.maximum else info.max)

    def make(keep: bool):
        def reduce(x, axes):
            if not axes:
                return np.array(x, copy=True)
            return ufunc.reduce(np.asarray(x), axis=axes, keepdims=keep, initial=init)
        return reduce
    return _q_reducer(ctx, make)


@CPU.register_quantized("REDUCE_MAX", dtypes=_Q_TYPES)
def reduce_max_quantized(ctx: KernelContext) -> Run:
    return _q_extremum(ctx, np.maximum)


@CPU.register("REDUCE_MIN", dtypes=_MINMAX_TYPES)
def reduce_min(ctx: KernelContext) -> Run:
    return _reducer(ctx, _MINMAX_TYPES, _extremum(np.minimum, np.inf, "max"))


@CPU.register_quantized("REDUCE_MIN", dtypes=_Q_TYPES)
def reduce_min_quantized(ctx: KernelContext) -> Run:
    return _q_extremum(ctx, np.minimum)


def _logical(ufunc: np.ufunc):
    def make(dt: np.dtype, keep: bool):
        def reduce(x, axes):
            return ufunc.reduce(x, axis=axes, keepdims=keep)
        return reduce
    return make


@CPU.register("REDUCE_ANY", dtypes=("bool",))
def reduce_any(ctx: KernelContext) -> Run:
    return _reducer(ctx, ("bool",), _logical(np.logical_or))


@CPU.register("REDUCE_ALL", dtypes=("bool",))
def reduce_all(ctx: KernelContext) -> Run:
    return _reducer(ctx, ("bool",), _logical(np.logical_and))


def _mean_make(dt: np.dtype, keep: bool):
    if dt.kind == "f":
        acc = np.dtype(np.float32) if dt == np.float16 else dt   # float16: float32 sum, one rounding
        total = _float_sum(acc, keep)
        # the count as a rank-0 array: a ufunc converts a numpy scalar operand on every call
        count_of = per_key(lambda n: np.array(n, acc))

        def mean(x, axes):
            # float32 sum divided by the count in float32; an empty axis gives NaN as in TFLite (0/0),
            # without numpy's warning.
            s = total(x, axes)
            n = 1
            for a in axes:
                n *= x.shape[a]
            if not n:
                with np.errstate(invalid="ignore", divide="ignore"):
                    return np.divide(s, acc.type(0)).astype(dt)
            # a count >= 1 raises no floating-point flag, so no errstate (~1.5 us: a small MEAN's cost)
            m = np.divide(s, count_of(n), out=s) if type(s) is np.ndarray else s / acc.type(n)
            return m if acc == dt else m.astype(dt)
        return mean

    def int_mean(x, axes):
        # TFLite accumulates integers in 64 bits and divides truncating toward zero.
        s = np.add.reduce(x, axis=axes, dtype=np.int64, keepdims=keep)
        n = 1
        for a in axes:
            n *= x.shape[a]
        if n == 0:
            return np.zeros(np.shape(s), dt)
        return int_divide(s, n).astype(dt)
    return int_mean


@CPU.register("MEAN", dtypes=_SUM_TYPES)
def mean(ctx: KernelContext) -> Run:
    return _reducer(ctx, _SUM_TYPES, _mean_make)


@CPU.register_quantized("MEAN", dtypes=_Q_TYPES)
def mean_quantized(ctx: KernelContext) -> Run:
    """LiteRT's quantized MEAN: each slice's raw sum (int64) rescaled as MeanRescale says for its path
    (mean_is_pool: the optimized Mean4D of a global pool, else the reference), clamped to the type."""
    dt, s_in, z_in, s_out, z_out = _q_params(ctx)
    info = np.iinfo(dt)
    rescale = MeanRescale(s_in, z_in, s_out, z_out)

    def make(keep: bool):
        def reduce(x, axes):
            x = np.asarray(x)
            total = np.add.reduce(x, axis=axes, dtype=np.int64, keepdims=keep)
            n = _count(x, axes)
            if n == 0 or x.size == 0:
                return np.zeros(np.shape(total), dt)
            is_pool = mean_is_pool(dt, keep, x.ndim, axes)
            offset, mult, shift, add = rescale(n, is_pool)
            acc = np.asarray(total) if is_pool else wrap_int32(np.asarray(total) + offset)   # int32 in the reference
            r = multiply_by_quantized_multiplier(acc, mult, shift) + add
            vec = mean_vector_channels(dt, is_pool, x.shape[-1])
            if vec:
                r[..., :vec] = multiply_by_quantized_multiplier_half_up(acc[..., :vec], mult, shift) + add
            return np.clip(r, info.min, info.max).astype(dt)
        return reduce
    return _q_reducer(ctx, make)


def mean_is_pool(dt: np.dtype, keep: bool, rank: int, axes: tuple) -> bool:
    """Whether quantized MEAN takes LiteRT's optimized Mean4D (a global pool) rather than the reference."""
    return dt != np.int16 and keep and rank == 4 and tuple(axes) == (1, 2)


def mean_vector_channels(dt: np.dtype, is_pool: bool, channels: int) -> int:
    """How many leading channels LiteRT's int8 Mean4D rescales in its vector body (blocks of 16, NEON
    emulated on x86: vqrdmulh and a rounding shift, both halves up) rather than its scalar tail (the
    reference rounding, halves away from zero): they differ on negative ties."""
    return channels - channels % 16 if is_pool and dt == np.int8 else 0


class MeanRescale:
    """How quantized MEAN turns a slice's raw sum S of n values into the output: multiply_by_quantized_
    multiplier(S + offset, mult, shift) + add (S + offset an int32 accumulator on the reference path).
    - the optimized Mean4D (mean_is_pool): S rescaled by s_in / (n * s_out) (float32, QuantizeMultiplier),
      offset by zp_out - trunc(zp_in * s_in / s_out +- 0.5) (float32);
    - the reference QuantizedMeanOrSum: (S - zp_in * n) rescaled by M / n, where M is
      QuantizeMultiplier(s_in / s_out in double) with its multiplier widened by 2**k (k = floor(log2 n),
      at most 32 and 31 + shift) and divided by n (integer division), plus zp_out."""

    def __init__(self, s_in, z_in: int, s_out, z_out: int):
        self.s_in, self.z_in, self.s_out, self.z_out = s_in, z_in, s_out, z_out
        self.base_mult, self.base_shift = quantize_multiplier(float(s_in) / float(s_out))
        temp = _F32(_F32(_F32(z_in) * s_in) / s_out)
        temp = _F32(temp + _F32(0.5)) if temp > 0 else _F32(temp - _F32(0.5))
        self.pool_bias = z_out - int(np.trunc(temp))
        self._cache: dict = {}

    def __call__(self, n: int, is_pool: bool) -> tuple[int, int, int, int]:
        """(offset, mult, shift, add) for slices of n values."""
        key = (n, is_pool)
        hit = self._cache.get(key)
        if hit is None:
            if is_pool:
                mult, shift = quantize_multiplier(float(_F32(self.s_in / _F32(_F32(n) * self.s_out))))
                hit = (0, mult, shift, self.pool_bias)
            else:
                k = min(n.bit_length() - 1, 32, 31 + self.base_shift)
                mult = (self.base_mult << k) // n if k >= 0 else (self.base_mult >> -k) // n
                hit = (-self.z_in * n, mult, self.base_shift - k, self.z_out)
            self._cache[key] = hit
        return hit


# --------------------------------------------------------------------------------------------------
# ARG_MAX / ARG_MIN

_ARG_TYPES = ("float32", "int32", "int8", "uint8", "bool")


def _arg(ctx: KernelContext, is_max: bool) -> Run:
    ctx.expect_inputs(2)
    dt = ctx.input_tensor(0).dtype
    if dt.name not in _ARG_TYPES:
        raise ctx.fail(f"input type {dt.name} is not supported (supported: {', '.join(_ARG_TYPES)})")
    out_dt = ctx.output_dtype()
    if out_dt not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise ctx.fail(f"output type must be int32 or int64, not {out_dt.name}")
    axis_const = ctx.const(1)
    if axis_const is not None and axis_const.size != 1:
        raise ctx.fail(f"axis must hold one value, has {axis_const.size}")
    rank = _static_rank(ctx)
    x_i, a_i = ctx.inputs
    (o,) = ctx.outputs
    v = ctx.values
    argf = np.argmax if is_max else np.argmin
    nan_fill = np.float32(-np.inf if is_max else np.inf)
    is_float = dt.kind == "f"

    def compute(x: np.ndarray, axis: int) -> np.ndarray:
        idx = argf(x, axis=axis)
        if is_float and x.size:
            # numpy picks the first NaN; LiteRT ignores NaN (a NaN wins only when the whole row is NaN,
            # and then the answer is index 0). Fix up only when there is a NaN (the max is NaN then: one
            # reduction, where reading back what argmax picked took 4x the argmax on small rows).
            if np.isnan(x.max()):
                nan = np.isnan(x)
                idx = argf(np.where(nan, nan_fill, x), axis=axis)
                picked = np.take_along_axis(nan, np.expand_dims(idx, axis), axis)
                # picked NaN although a number exists: every number equals the fill (+-inf) -> first number
                first_number = np.argmax(~nan, axis=axis)
                idx = np.where(np.squeeze(picked, axis), first_number, idx)
        return scalar_or_array(idx.astype(out_dt, copy=False))

    if axis_const is not None and rank is not None:
        try:
            (axis,) = _normalise_axes(axis_const, rank)
        except ValueError as e:
            raise ctx.fail(str(e)) from None

        def run() -> None:
            v[o] = compute(v[x_i], axis)
        return run

    def run_dynamic() -> None:
        x = v[x_i]
        a = v[a_i]
        if np.size(a) != 1:
            raise ValueError(f"axis must hold one value, has {np.size(a)}")
        (axis,) = _normalise_axes(a, x.ndim)
        v[o] = compute(x, axis)
    return run_dynamic


@CPU.register("ARG_MAX", dtypes=_ARG_TYPES)
def arg_max(ctx: KernelContext) -> Run:
    return _arg(ctx, True)


@shape_rule("ARG_MAX", "ARG_MIN")
def arg_shape(n: Node):
    s, axis = n.shape(0), n.scalar(1)
    if s is None:
        return [None]
    if axis is None:
        return [(-1,) * max(len(s) - 1, 0)]
    a = axis_of(n, axis, len(s))
    return [s[:a] + s[a + 1:]]


@CPU.register("ARG_MIN", dtypes=_ARG_TYPES)
def arg_min(ctx: KernelContext) -> Run:
    return _arg(ctx, False)


# LiteRT's ARG_MAX / ARG_MIN compare the stored integers whatever the quantization (a positive scale
# keeps the order of the real values; ties pick the first index): the plain kernels are the quantized
# ones. LiteRT has no int16 ARG_MAX / ARG_MIN (its prepare refuses the type).
CPU.register_quantized("ARG_MAX", dtypes=("int8", "uint8"))(arg_max)
CPU.register_quantized("ARG_MIN", dtypes=("int8", "uint8"))(arg_min)


# --------------------------------------------------------------------------------------------------
# TOPK_V2

_TOPK_TYPES = ("float32", "int32", "int64", "int16", "int8", "uint8")


@CPU.register("TOPK_V2", dtypes=_TOPK_TYPES)
def topk_v2(ctx: KernelContext) -> Run:
    """Largest k values along the last axis, sorted descending; ties keep the lower index first and
    NaN ranks below every number (as LiteRT's TopContainer)."""
    ctx.expect_inputs(2)
    if len(ctx.outputs) != 2:
        raise ctx.fail(f"expects 2 outputs, has {len(ctx.outputs)}")
    dt = ctx.input_tensor(0).dtype
    if dt.name not in _TOPK_TYPES:
        raise ctx.fail(f"input type {dt.name} is not supported (supported: {', '.join(_TOPK_TYPES)})")
    idx_dt = ctx.output_dtype(1)
    if idx_dt.kind != "i":
        raise ctx.fail(f"indices output must be an integer tensor, not {idx_dt.name}")
    x_i, k_i = ctx.inputs
    vo, io = ctx.outputs
    v = ctx.values
    k_const = ctx.const(1)
    rank = _static_rank(ctx)
    if rank == 0:
        raise ctx.fail("input must have rank >= 1")

    if dt.kind == "f":
        def key(x):
            return np.negative(x)          # -NaN is NaN: sorts last, as LiteRT orders it
    else:
        def key(x):
            return np.invert(x)            # ~x == -x - 1: order-reversing without INT_MIN overflow

    def check_k(k, n):
        if k < 0 or k > n:
            raise ValueError(f"k = {k} must be in [0, {n}] (the size of the last dimension)")

    if k_const is not None:
        if k_const.size != 1:
            raise ctx.fail(f"k must hold one value, has {k_const.size}")
        k_fixed = int(k_const.reshape(-1)[0])
        t = ctx.input_tensor(0)
        if rank and (t.shape_signature is None or t.shape_signature[-1] >= 0):
            try:
                check_k(k_fixed, t.shape[-1])
            except ValueError as e:
                raise ctx.fail(str(e)) from None
    else:
        k_fixed = None

    rows_of = per_key(lambda m: np.arange(m).reshape(m, 1))   # the row index picking each row's k values

    def run() -> None:
        x = v[x_i]
        k = k_fixed if k_fixed is not None else int(np.ravel(v[k_i])[0])
        n = x.shape[-1]
        check_k(k, n)
        order = np.argsort(key(x), axis=-1, kind="stable")[..., :k]
        m = x.size // n if n else 0
        rows = rows_of(m)
        # one fancy index on the [m, n] view: take_along_axis builds its index grids on every call
        v[vo] = x.reshape(m, n)[rows, order.reshape(m, k)].reshape(order.shape)
        v[io] = order.astype(idx_dt)
    return run


@shape_rule("TOPK_V2")
def topk_shape(n: Node):
    s, k = n.shape(0), n.scalar(1)
    if s is None or not s:
        return [None, None]
    if k is not None and s[-1] >= 0 and k > s[-1]:
        raise n.fail(f"k={k} is larger than the last dim")
    out = s[:-1] + (k if k is not None else -1,)
    return [out, out]


# ----------------------------------------------------------------------------------- gradients

def _grad_axes(g: gr.GradNode) -> tuple[int, ...]:
    """The reduced axes of the forward op (sorted, unique, non-negative): its axis input must be a
    constant and its input's rank known."""
    axes, s = g.const_input(1), g.shape(0)
    if axes is None or s is None:
        raise g.fail("the gradient of a reduction needs constant axes and an input of known rank")
    return _normalise_axes(axes, len(s))


def _kept(g: gr.GradNode, t: int) -> int:
    """Tensor t shaped as the reduction's output, in the keep_dims shape (reduced axes of size 1)."""
    if g.opts.get("keep_dims", False):
        return t
    for a in _grad_axes(g):          # ascending: each axis goes where it was in the input
        t = g.emit("EXPAND_DIMS", t, g.const(a, np.int32))
    return t


def _unreduce(g: gr.GradNode, d: int) -> int:
    """The output cotangent d broadcast back over the reduced axes, to the input's shape."""
    return g.emit("BROADCAST_TO", _kept(g, d), g.emit("SHAPE", g.x(0), dtype=np.int32, out_type=2))


@grad_rule("SUM")
def sum_grad(g: gr.GradNode):
    return [_unreduce(g, g.dy()), None]


@grad_rule("MEAN")
def mean_grad(g: gr.GradNode):
    # the sum's gradient divided by the number of values each output averages
    axes, s = _grad_axes(g), g.shape(0)
    dx = _unreduce(g, g.dy())
    if not axes:
        return [dx, None]
    if all(s[a] >= 0 for a in axes):
        count = gr.scalar(g, float(math.prod(s[a] for a in axes)), dx)
    else:
        dims = g.emit("GATHER", g.emit("SHAPE", g.x(0), dtype=np.int32, out_type=2),
                      g.const(list(axes), np.int32), axis=0, batch_dims=0)
        n = g.emit("REDUCE_PROD", dims, g.const([0], np.int32), keep_dims=False)
        count = g.emit("CAST", n, dtype=g.b_dtype(dx))
    return [gr.div(g, dx, count), None]


@grad_rule("REDUCE_PROD")
def reduce_prod_grad(g: gr.GradNode):
    # d prod / d x_i = the product of the slice's other values, computed without dividing by zero:
    # with no zero in the slice prod / x_i, with one zero the product of the nonzero values at the
    # zero (0 elsewhere), with more zeros 0 (TensorFlow gets the same with exclusive cumprods)
    x = g.x(0)
    axes = g.const(list(_grad_axes(g)), np.int32)
    zero, one = gr.scalar(g, 0.0, x), gr.scalar(g, 1.0, x)
    is_zero = g.emit("EQUAL", x, zero, dtype=np.bool_)
    x1 = g.emit("SELECT_V2", is_zero, one, x, dtype=g.b_dtype(x))
    p1 = g.emit("REDUCE_PROD", x1, axes, keep_dims=True)           # product of the nonzero values
    zeros = g.emit("SUM", g.emit("CAST", is_zero, dtype=g.b_dtype(x)), axes, keep_dims=True)
    no_zero = g.emit("EQUAL", zeros, zero, dtype=np.bool_)
    one_zero = g.emit("EQUAL", zeros, one, dtype=np.bool_)
    at_nonzero = gr.mask(g, no_zero, gr.div(g, p1, x1))
    at_zero = gr.mask(g, one_zero, p1)
    others = g.emit("SELECT_V2", is_zero, at_zero, at_nonzero, dtype=g.b_dtype(x))
    return [gr.mul(g, _kept(g, g.dy()), others), None]


@grad_rule("REDUCE_MAX", "REDUCE_MIN")
def reduce_extremum_grad(g: gr.GradNode):
    # TensorFlow's rule: the cotangent is shared equally by the values equal to the extremum
    x = g.x(0)
    hit = g.emit("CAST", g.emit("EQUAL", x, _kept(g, g.y()), dtype=np.bool_), dtype=g.b_dtype(x))
    count = g.emit("SUM", hit, g.const(list(_grad_axes(g)), np.int32), keep_dims=True)
    return [gr.mul(g, gr.div(g, hit, count), _kept(g, g.dy())), None]


@grad_rule("TOPK_V2")
def topk_grad(g: gr.GradNode):
    # the values' cotangent goes back to the positions they were taken from (a batched gather's)
    s = g.shape(0)
    if s is None:
        raise g.fail("the gradient of TOPK_V2 needs an input of known rank")
    r = len(s)
    dx = g.emit("OnertPyGatherGrad", g.dy(0), g.y(1), g.x(0), custom="OnertPyGatherGrad",
                axis=r - 1, batch_dims=r - 1)
    return [dx, None]


no_gradient("ARG_MAX", "ARG_MIN", "REDUCE_ANY", "REDUCE_ALL")
