"""jit kernels of the reductions family (cpu/reduce.py): the 8-bit MEAN over height and width that ends
a quantized CNN (global average pooling), where numpy's dozen passes over a few thousand values cost
~30 us and one compiled loop ~2 us, and the 8-bit MEAN over trailing axes of a quantized layer norm.
The rescale is the cpu kernel's (MeanRescale, mean_is_pool); the loop sums each channel (or row) and
applies it value by value (jit/conv.py's _requantize, the same fixed-point steps).

Inside compiled loops (jit/loop.py): SUM, MEAN, REDUCE_MAX and REDUCE_MIN of float32 / int32 tensors over
constant axes, each slice folded in order (codegen.reduction_statement)."""
from __future__ import annotations

import numpy as np

from onert_py.backends.cpu._quant import qparams
from onert_py.backends.cpu.reduce import MeanRescale, _normalise_axes, _q_params, mean_is_pool, mean_vector_channels
from onert_py.backends.jit._numba import compile_now, kernel
from onert_py.backends.jit.codegen import (Statement, declared_shape_run, flat_positions, reduction_statement,
                                           statement)
from onert_py.backends.jit.conv import _requantize
from onert_py.backends.registry import CPU, JIT, KernelContext, Run


@kernel
def _mean_pixels(x, offset, mult, left, right, add, lo, hi, vec, acc, y):
    """y[b, c] = the rescaled sum over pixels p of x[b, p, c] (x [N, P, C] 8-bit, acc [C] int64), the
    first `vec` channels rounded halves up (mean_vector_channels)."""
    for b in range(x.shape[0]):
        acc[:] = 0
        for p in range(x.shape[1]):
            for c in range(x.shape[2]):
                acc[c] += x[b, p, c]
        for c in range(x.shape[2]):
            y[b, c] = _requantize(acc[c] + offset, mult, left, right, c < vec, add, lo, hi)


@kernel
def _mean_rows(x, offset, mult, left, right, add, lo, hi, y):
    """y[r] = the rescaled sum of x[r, :] (x [R, M] 8-bit): MEAN over trailing axes, whose rescale is
    the reference one (MeanRescale without mean_is_pool: no halves-up channels)."""
    for r in range(x.shape[0]):
        total = np.int64(0)
        for k in range(x.shape[1]):
            total += x[r, k]
        y[r] = _requantize(total + offset, mult, left, right, False, add, lo, hi)


def _mean_axes(op, sg, rank: int) -> tuple[int, ...] | None:
    """The constant axes of a MEAN, normalised as the cpu kernel does (None when not constant)."""
    if len(op.inputs) != 2 or op.inputs[1] < 0:
        return None
    axes = sg.tensors[op.inputs[1]].data
    if axes is None or axes.dtype.kind not in "iu":
        return None
    try:
        return _normalise_axes(axes, rank)
    except ValueError:
        return None


def _hw_axes(op, sg) -> bool:
    """The constant axes of a rank-4 MEAN are {1, 2} (height and width), as the cpu kernel normalises them."""
    return _mean_axes(op, sg, 4) == (1, 2)


def _trailing_axes(op, sg, rank: int) -> int:
    """How many trailing axes a MEAN reduces when its constant axes are exactly the last ones (a layer
    norm's mean over features), else 0."""
    axes = _mean_axes(op, sg, rank)
    return len(axes) if axes and axes == tuple(range(rank - len(axes), rank)) and axes[0] > 0 else 0


def _accepts_mean(op, sg) -> bool:
    """Static 8-bit input with per-tensor parameters, axes {1, 2} of a rank-4 input or the trailing
    axes of any rank, sums that stay in int32."""
    if len(op.outputs) != 1 or op.inputs[0] < 0:
        return False
    x = sg.tensors[op.inputs[0]]
    if x.type_name not in ("INT8", "UINT8") or x.is_dynamic or qparams(x) is None:
        return False
    shape = tuple(x.shape)
    if len(shape) == 4 and _hw_axes(op, sg):
        n = shape[1] * shape[2]
    else:
        k = _trailing_axes(op, sg, len(shape))
        n = int(np.prod(shape[len(shape) - k:], dtype=np.int64)) if k else 0
    return 0 < n < (1 << 23)      # |sum| + |zp * n| < 2**31: no int32 wrap


@JIT.register_quantized("MEAN", dtypes=("int8", "uint8"), accepts=_accepts_mean)
def mean_quantized(ctx: KernelContext) -> Run:
    """8-bit MEAN over height and width, or over trailing axes: the cpu kernel's checks and rescale,
    one compiled loop (a layer norm's mean of [2, 16, 32] over the last axis: 26 us of numpy passes on
    cpu)."""
    cpu = CPU.kernel("MEAN", True)(ctx)     # the checks (and the fallback for other shapes)
    dt, s_in, z_in, s_out, z_out = _q_params(ctx)
    shape = tuple(ctx.input_tensor(0).shape)
    keep = bool(ctx.options.get("keep_dims", False))
    info = np.iinfo(dt)
    lo, hi = int(info.min), int(info.max)
    out_shape = tuple(ctx.output_tensor(0).shape)
    rescale = MeanRescale(s_in, z_in, s_out, z_out)
    if not (len(shape) == 4 and _hw_axes(ctx.op, ctx.subgraph)):
        k = _trailing_axes(ctx.op, ctx.subgraph, len(shape))
        n = int(np.prod(shape[len(shape) - k:], dtype=np.int64))
        axes = tuple(range(len(shape) - k, len(shape)))
        offset, mult, shift, add = rescale(n, mean_is_pool(dt, keep, len(shape), axes))
        left, right = max(shift, 0), max(-shift, 0)
        compile_now(_mean_rows, np.zeros((1, 1), dt), offset, mult, left, right, add, lo, hi, np.zeros(1, dt))
        return declared_shape_run(ctx, cpu, lambda x, y: _mean_rows(
            np.ascontiguousarray(x).reshape(-1, n), offset, mult, left, right, add, lo, hi, y.reshape(-1)),
            out_shape)
    n = shape[1] * shape[2]
    is_pool = mean_is_pool(dt, keep, 4, (1, 2))
    offset, mult, shift, add = rescale(n, is_pool)
    vec = mean_vector_channels(dt, is_pool, shape[3])
    left, right = max(shift, 0), max(-shift, 0)
    acc = np.zeros(shape[3], np.int64)
    compile_now(_mean_pixels, np.zeros((1, 1, 1), dt), offset, mult, left, right, add, lo, hi, vec, acc,
                np.zeros((1, 1), dt))
    return declared_shape_run(ctx, cpu, lambda x, y: _mean_pixels(
        np.ascontiguousarray(x).reshape(shape[0], n, shape[3]), offset, mult, left, right, add, lo, hi, vec, acc,
        y.reshape(shape[0], shape[3])), out_shape)


@kernel
def _mean_pixels_float(x, acc, y):
    """y[b, c] = the mean over pixels p of x[b, p, c] (x [N, P, C] float32, P > 0), summed in float64
    (acc [C]) and rounded once."""
    n = x.shape[1]
    for b in range(x.shape[0]):
        acc[:] = 0.0
        for p in range(n):
            for c in range(x.shape[2]):
                acc[c] += x[b, p, c]
        for c in range(x.shape[2]):
            y[b, c] = np.float32(acc[c] / n)


def _accepts_float_mean(op, sg) -> bool:
    """Static rank-4 float32 input, axes {1, 2}, at least one pixel."""
    if len(op.outputs) != 1 or op.inputs[0] < 0 or not _hw_axes(op, sg):
        return False
    x, y = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
    return (x.dtype == np.float32 and y.dtype == np.float32 and not x.is_dynamic and len(x.shape) == 4
            and x.shape[1] * x.shape[2] > 0 and qparams(x) is None)


@JIT.register("MEAN", dtypes=("float32",), accepts=_accepts_float_mean)
def mean(ctx: KernelContext) -> Run:
    """float32 MEAN over height and width (a global average pool, squeeze-and-excitation's first op):
    one compiled pass over the input, where the cpu kernel's gemv, divide and reshapes cost 5 us alone
    and ~10 inside a model (other run-time shapes: the cpu kernel)."""
    cpu = CPU.kernel("MEAN")(ctx)
    shape = tuple(ctx.input_tensor(0).shape)
    n = shape[1] * shape[2]
    out_shape = tuple(ctx.output_tensor(0).shape)
    acc = np.zeros(shape[3], np.float64)
    compile_now(_mean_pixels_float, np.zeros((1, 1, 1), np.float32), acc, np.zeros((1, 1), np.float32))
    return declared_shape_run(ctx, cpu, lambda x, y: _mean_pixels_float(
        np.ascontiguousarray(x, np.float32).reshape(shape[0], n, shape[3]), acc, y.reshape(shape[0], shape[3])),
        out_shape)


# ------------------------------------------------------------ inside compiled loops (jit/loop.py)

_F32, _I32 = np.dtype(np.float32), np.dtype(np.int32)
# (step, init by dtype, finish) of each reduction: LiteRT's reference order, each slice folded from its
# first element in row-major order; REDUCE_MAX / MIN as LiteRT's acc = (acc > x) ? acc : x, so a NaN
# behaves as the cpu kernel's _litert_nan_extremum says
_FOLDS = {
    "SUM": ("{acc} + {x}", {_F32: "np.float32(0.0)", _I32: "np.int32(0)"}),
    "MEAN": ("{acc} + {x}", {_F32: "np.float32(0.0)"}),
    "REDUCE_MAX": ("{acc} if {acc} > {x} else {x}", {_F32: "np.float32(-np.inf)", _I32: f"np.int32({-2**31})"}),
    "REDUCE_MIN": ("{acc} if {acc} < {x} else {x}", {_F32: "np.float32(np.inf)", _I32: f"np.int32({2**31 - 1})"}),
}


@statement(*_FOLDS)
def _reduction(op, sg) -> Statement | None:
    """A float32 / int32 reduction over constant axes (int32 SUM wraps, as LiteRT's)."""
    if len(op.inputs) != 2 or min(op.inputs) < 0:
        return None
    x, axes_t, out = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]], sg.tensors[op.outputs[0]]
    step, inits = _FOLDS[op.opcode]
    if (x.dtype != out.dtype or x.dtype not in inits or axes_t.data is None or axes_t.dtype.kind not in "iu"
            or qparams(x) is not None):
        return None
    shape = tuple(x.shape)
    try:
        axes = _normalise_axes(axes_t.data, len(shape))
    except ValueError:
        return None
    rest = [d for d in range(len(shape)) if d not in axes]
    m = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    index = np.transpose(flat_positions(shape), rest + list(axes)).reshape(-1, m) if m else None
    if index is None or not axes or index.shape[0] != int(np.prod(out.shape, dtype=np.int64)):
        return None   # nothing to reduce, or an empty axis: the cpu kernel's way
    if x.dtype == _I32 and op.opcode == "SUM":
        step = "np.int32({acc} + {x})"
    finish = f"{{acc}} / np.float32({m})" if op.opcode == "MEAN" else "{acc}"
    return reduction_statement(index, inits[x.dtype], step, finish)
