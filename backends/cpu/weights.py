"""Weight-format ops: DEQUANTIZE, DENSIFY and QUANTIZE.

Models shipped for mobile keep their weights small: float16 or int8 constants expanded by DEQUANTIZE,
sparse constants expanded by DENSIFY. Their inputs are almost always constants, so both kernels compute
the expanded value once at prepare time and the run closure only publishes it (as LiteRT does: it
evaluates such ops once and marks the result persistent).
"""
from __future__ import annotations

import math

import numpy as np

from onert_py.backends import gradients as gr

from onert_py.backends.cpu._quant import (multiply_by_quantized_multiplier, multiply_by_quantized_multiplier_half_up,
                                          qparams, quantize_multiplier)
from onert_py.backends.registry import CPU, KernelContext, Run, grad_rule, no_gradient, shape_rule
from onert_py.backends.shape_rules import same_shape
from onert_py.exec.budget import check_alloc

# DimensionType of the schema's DimensionMetadata.
DENSE, SPARSE_CSR = 0, 1


def _publish(ctx: KernelContext, value: np.ndarray) -> Run:
    """Run closure that stores a value precomputed at prepare time in the op's single output.
    (The compiler folds such ops away, so consumers like CONV_2D see a constant filter.)"""
    value = np.array(value, order="C")      # (np.ascontiguousarray would make a 0-d value 1-d)
    value.setflags(write=False)
    (o,) = ctx.outputs
    v = ctx.values

    def run() -> None:
        v[o] = value
    return run


# ---------------------------------------------------------------------------------------- DEQUANTIZE

def _dequantizer(ctx: KernelContext):
    """fn(x) -> float32 array computing TFLite's reference dequantization for input 0."""
    t = ctx.input_tensor(0)
    out_dtype = ctx.output_dtype(0)
    if out_dtype != np.float32:
        raise ctx.fail(f"DEQUANTIZE output must be FLOAT32, not {ctx.output_tensor(0).type_name}")
    if t.type_name == "FLOAT16":
        return lambda x: np.asarray(x, dtype=np.float16).astype(np.float32)
    if t.type_name not in ("INT8", "UINT8", "INT16", "INT4"):
        raise ctx.fail(f"DEQUANTIZE does not support input type {t.type_name}")
    q = t.quantization
    if q is None or q.scale.size == 0:
        raise ctx.fail(f"DEQUANTIZE input {t.name!r} ({t.type_name}) has no quantization parameters")
    scale = np.asarray(q.scale, dtype=np.float32).reshape(-1)
    zp = np.asarray(q.zero_point, dtype=np.int64).reshape(-1)
    if zp.size == 0:
        zp = np.zeros(scale.size, np.int64)
    if scale.size == 1:
        # reference_ops::Dequantize: static_cast<float>(double(scale) * (value - zero_point)).
        s, z = np.float64(scale[0]), int(zp[0])
        return lambda x: ((np.asarray(x, dtype=np.int64) - z) * s).astype(np.float32)
    # Per channel: (value - zero_point[c]) * scale[c] in float along quantized_dimension.
    rank = len(t.shape)
    axis = q.quantized_dimension
    if not 0 <= axis < max(rank, 1):
        raise ctx.fail(f"DEQUANTIZE input {t.name!r}: quantized_dimension {axis} out of range for rank {rank}")
    if zp.size not in (1, scale.size):
        raise ctx.fail(f"DEQUANTIZE input {t.name!r}: {scale.size} scales but {zp.size} zero points")
    if rank and t.shape[axis] != scale.size:
        raise ctx.fail(f"DEQUANTIZE input {t.name!r}: {scale.size} scales for dimension {axis} of size "
                       f"{t.shape[axis]}")
    bshape = [1] * rank
    bshape[axis] = scale.size
    s32 = scale.reshape(bshape)
    z64 = np.broadcast_to(zp, scale.shape).reshape(bshape)
    return lambda x: ((np.asarray(x, dtype=np.int64) - z64).astype(np.float32) * s32).astype(np.float32)


@CPU.register("DEQUANTIZE", dtypes=("float16", "int8", "uint8", "int16", "int4"))
def dequantize(ctx: KernelContext) -> Run:
    ctx.expect_inputs(1)
    fn = _dequantizer(ctx)
    t = ctx.input_tensor(0)
    if t.data is not None and t.sparsity is None:
        return _publish(ctx, fn(t.data))
    (i,), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values

    def run() -> None:
        v[o] = fn(v[i])
    return run


# ------------------------------------------------------------------------------------------ DENSIFY

def densify_array(values: np.ndarray, shape: tuple[int, ...], sparsity: dict,
                  max_memory: int | float = math.inf) -> np.ndarray:
    """Expand the compressed `values` of a sparse tensor of dense `shape` (TFLite's sparsity format).

    The tensor's n original dims are split by `block_map` into n blocked dims plus one inner dim per
    block; `traversal_order` lists these n + k expanded dims in storage order, and `dim_metadata[level]`
    describes the dim stored at that level: DENSE (a full range of dense_size) or SPARSE_CSR
    (array_segments indexed by the position in the level above, array_indices holding coordinates).
    Raises ValueError for inconsistent metadata, ResourceError when the dense array or the int64
    coordinates built on the way would be over `max_memory` bytes (checked before each is made).
    """
    check_alloc(shape, values.dtype, "the densified constant", max_memory)
    order = [int(d) for d in sparsity.get("traversal_order") or ()]
    block_map = [int(d) for d in sparsity.get("block_map") or ()]
    levels = sparsity.get("dim_metadata") or []
    n, k = len(shape), len(block_map)
    if not order:
        order = list(range(n + k))
    if sorted(order) != list(range(n + k)):
        raise ValueError(f"traversal_order {order} is not a permutation of the {n + k} expanded dims "
                         f"(rank {n}, {k} block dims)")
    if len(levels) != n + k:
        raise ValueError(f"{len(levels)} dim_metadata entries, expected {n + k}")
    if any(not 0 <= d < n for d in block_map) or len(set(block_map)) != k:
        raise ValueError(f"block_map {block_map} must name distinct dims of a rank-{n} tensor")

    # Block sizes: the dense_size of the level that stores each block dim (block dims are dense).
    block_size = []
    for b in range(k):
        lvl = levels[order.index(n + b)]
        if lvl["format"] != DENSE:
            raise ValueError(f"block dim {b} is stored SPARSE_CSR; only dense blocks are defined")
        size = int(lvl["dense_size"])
        if size <= 0 or shape[block_map[b]] % size:
            raise ValueError(f"block size {size} does not divide dim {block_map[b]} of shape {list(shape)}")
        block_size.append(size)
    expanded = list(shape) + block_size
    for b, d in enumerate(block_map):
        expanded[d] = shape[d] // block_size[b]

    # Walk the levels, keeping for every stored element-prefix its position (the index into the next
    # level's segments) and its coordinate in each expanded dim visited so far.
    pos = np.zeros(1, dtype=np.int64)
    coords: list[tuple[int, np.ndarray]] = []
    for level, (dim, meta) in enumerate(zip(order, levels)):
        size = expanded[dim]
        if meta["format"] == DENSE:
            if int(meta["dense_size"]) != size:
                raise ValueError(f"level {level}: dense_size {meta['dense_size']} but expanded dim {dim} "
                                 f"has size {size}")
            # one int64 coordinate per stored prefix and level, and the positions
            check_alloc((pos.size * size, len(coords) + 2), np.int64, f"level {level} coordinates", max_memory)
            coords = [(d, np.repeat(c, size)) for d, c in coords]
            coords.append((dim, np.tile(np.arange(size, dtype=np.int64), pos.size)))
            pos = (pos[:, None] * size + np.arange(size, dtype=np.int64)).reshape(-1)
        elif meta["format"] == SPARSE_CSR:
            seg, idx = meta.get("array_segments"), meta.get("array_indices")
            if seg is None or idx is None:
                raise ValueError(f"level {level}: SPARSE_CSR without array_segments/array_indices")
            seg, idx = np.asarray(seg, np.int64), np.asarray(idx, np.int64)
            if pos.size and (pos.max() + 1 >= seg.size):
                raise ValueError(f"level {level}: array_segments has {seg.size} entries, needs "
                                 f"{int(pos.max()) + 2}")
            if seg.size and (np.any(np.diff(seg) < 0) or seg[0] < 0 or seg[-1] > idx.size):
                raise ValueError(f"level {level}: array_segments must rise from 0 to at most "
                                 f"{idx.size} (the number of array_indices)")
            starts, stops = seg[pos], seg[pos + 1]
            counts = stops - starts
            total = int(counts.sum())
            check_alloc((total, len(coords) + 3), np.int64, f"level {level} coordinates", max_memory)
            # element ids: concatenation of range(starts[j], stops[j]) for every prefix j.
            offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
            ids = np.arange(total, dtype=np.int64) + offsets
            new = idx[ids]
            if new.size and (new.min() < 0 or new.max() >= size):
                raise ValueError(f"level {level}: array_indices out of range [0, {size}) for dim {dim}")
            coords = [(d, np.repeat(c, counts)) for d, c in coords]
            coords.append((dim, new))
            pos = ids
        else:
            raise ValueError(f"level {level}: unknown dimension format {meta['format']}")

    count = pos.size
    if values.size != count:
        raise ValueError(f"sparsity metadata describes {count} stored values, buffer holds {values.size}")
    by_dim = dict(coords)
    flat = np.zeros(count, dtype=np.int64)
    for d in range(n):
        c = by_dim[d]
        if d in block_map:
            b = block_map.index(d)
            c = c * block_size[b] + by_dim[n + b]
        flat = flat * shape[d] + c
    dense = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=values.dtype)
    dense[flat] = values.reshape(-1)
    return dense.reshape(shape)


@CPU.register("DENSIFY", dtypes=("float32", "float16", "int8", "int32"))
def densify(ctx: KernelContext) -> Run:
    ctx.expect_inputs(1)
    t = ctx.input_tensor(0)
    if t.data is None:
        raise ctx.fail(f"DENSIFY input {t.name!r} must be a constant")
    if t.sparsity is None:
        raise ctx.fail(f"DENSIFY input {t.name!r} has no sparsity parameters")
    out = ctx.output_tensor(0)
    if out.dtype != t.dtype:
        raise ctx.fail(f"DENSIFY output type {out.type_name} differs from input type {t.type_name}")
    try:
        dense = densify_array(np.asarray(t.data), tuple(t.shape), t.sparsity, ctx.runtime.options.max_memory)
    except ValueError as e:
        raise ctx.fail(f"DENSIFY input {t.name!r}: {e}") from None
    return _publish(ctx, dense)


# ----------------------------------------------------------------------------------------- QUANTIZE

@CPU.register_quantized("QUANTIZE", dtypes=("float32", "int8", "uint8", "int16"))
@CPU.register("QUANTIZE", dtypes=("float32",))
def quantize(ctx: KernelContext) -> Run:
    """float32 -> int8/uint8/int16: clamp(round(x / scale) + zero_point), per tensor or per channel.

    Rounding is to nearest, ties to even: that is what LiteRT's x86 kernels do (checked in the tests;
    the portable reference_ops::AffineQuantize would round ties away from zero). An integer input is
    requantized (_requantize).
    """
    ctx.expect_inputs(1)
    t, out = ctx.input_tensor(0), ctx.output_tensor(0)
    if t.dtype.kind in "iu" and qparams(t) is not None:
        return _requantize(ctx)
    if t.dtype != np.float32:
        raise ctx.fail(f"QUANTIZE supports FLOAT32 input only, not {t.type_name}")
    if out.type_name not in ("INT8", "UINT8", "INT16"):
        raise ctx.fail(f"QUANTIZE output type {out.type_name} is not supported (INT8, UINT8, INT16)")
    q = out.quantization
    if q is None or q.scale.size == 0:
        raise ctx.fail(f"QUANTIZE output {out.name!r} has no quantization parameters")
    info = np.iinfo(out.dtype)
    scale = np.asarray(q.scale, np.float32).reshape(-1)
    zp = np.asarray(q.zero_point, np.int64).reshape(-1)
    if zp.size == 0:
        zp = np.zeros(scale.size, np.int64)
    if np.any(scale <= 0) or not np.all(np.isfinite(scale)):
        raise ctx.fail(f"QUANTIZE output {out.name!r} has a non-positive or non-finite scale")
    rank = len(out.shape)
    if scale.size > 1:
        axis = q.quantized_dimension
        if not 0 <= axis < rank or out.shape[axis] != scale.size:
            raise ctx.fail(f"QUANTIZE output {out.name!r}: {scale.size} scales do not match dimension "
                           f"{axis} of shape {list(out.shape)}")
        bshape = [1] * rank
        bshape[axis] = scale.size
        scale = scale.reshape(bshape)
        zp = np.broadcast_to(zp, (scale.size,)).reshape(bshape)
    else:
        scale, zp = scale[0], int(zp[0])
    dt = out.dtype
    # round(x / scale) clamped to [min - zp, max - zp] (float32 holds these integers exactly; inf too),
    # NaN to 0, then + zp: five numpy calls where nan_to_num and two int64 clips took ~25 us on 32 values
    low = np.asarray(info.min - zp, np.float32)
    high = np.asarray(info.max - zp, np.float32)
    (i,), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values

    def run() -> None:
        x = np.asarray(v[i], dtype=np.float32)
        with np.errstate(invalid="ignore"):
            r = np.asarray(np.rint(x / scale))
        np.clip(r, low, high, out=r)
        r[r != r] = 0                                      # NaN -> 0 (-> the zero point)
        v[o] = (r + zp).astype(dt)
    return run


def _requantize(ctx: KernelContext) -> Run:
    """int8/uint8/int16 -> int8/uint8/int16 with new parameters, as LiteRT's quantize.cc: (x - zp_in)
    rescaled by scale_in / scale_out in fixed point, plus zp_out, clamped."""
    t, out = ctx.input_tensor(0), ctx.output_tensor(0)
    if out.type_name not in ("INT8", "UINT8", "INT16"):
        raise ctx.fail(f"QUANTIZE output type {out.type_name} is not supported (INT8, UINT8, INT16)")
    if t.type_name == "INT16" and out.type_name == "UINT8":
        raise ctx.fail("QUANTIZE from INT16 runs to INT8 or INT16 only (as LiteRT)")
    qi, qo = qparams(t), qparams(out)
    if qo is None:
        raise ctx.fail(f"QUANTIZE output {out.name!r} has no quantization parameters")
    if qi.per_channel or qo.per_channel:
        raise ctx.fail("QUANTIZE between integer types needs per-tensor parameters")
    mult, shift = quantize_multiplier(float(qi.scale[0]) / float(qo.scale[0]))
    zi, zo, dt = int(qi.zero_point[0]), int(qo.zero_point[0]), out.dtype
    eight_bit = t.dtype.itemsize == 1 and out.dtype.itemsize == 1
    (i,), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values

    def run() -> None:
        x = np.asarray(v[i], np.int64).reshape(-1) - zi
        # Between 8-bit types LiteRT's optimized Requantize rescales blocks of 16 values with (emulated)
        # SIMD, rounding halves up; the values after the last full block, and every int16 case, take the
        # scalar reference rounding (away from zero).
        simd = x.size // 16 * 16 if eight_bit else 0
        r = np.concatenate([multiply_by_quantized_multiplier_half_up(x[:simd], mult, shift),
                            multiply_by_quantized_multiplier(x[simd:], mult, shift)]) + zo
        v[o] = np.clip(r, qo.qmin, qo.qmax).astype(dt).reshape(np.shape(v[i]))
    return run


# Dequantization reads its input's parameters itself.
CPU.register_quantized("DEQUANTIZE", dtypes=("int8", "uint8", "int16", "int4"))(dequantize)

# Shape rules: every output has input 0's shape.
shape_rule("DEQUANTIZE", "QUANTIZE", "DENSIFY")(same_shape)


# ----------------------------------------------------------------------------------- gradients

@grad_rule("DEQUANTIZE")
def dequantize_grad(g: gr.GradNode):
    # float16 weights widened to float32: the gradient goes back narrowed; an integer input takes none
    if g.in_dtype(0) != np.float16:
        return [None]
    return [g.emit("CAST", g.dy(), dtype=np.float16)]


no_gradient("QUANTIZE")      # integer results
