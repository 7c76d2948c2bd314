"""Array manipulation: concatenation, pack/unpack, split, tile, transpose, reverse, padding,
space/depth/batch rearrangements and matrix diagonals."""
from __future__ import annotations

import math

from typing import Sequence

import numpy as np

from onert_py.backends.cpu._common import activated, activation_of
from onert_py.backends.cpu._quant import qparams
from onert_py.backends.cpu.shape import (FIXED_TYPES, QUANTIZED_TYPES, check_dtype, equal_parameters, int_input,
                                         params32, register_value_movers)
from onert_py.backends import gradients as gr
from onert_py.backends.registry import CPU, KernelContext, Run, grad_rule, shape_rule, value_rule
from onert_py.backends.shape_rules import Node, Shape, axis_of, merge_same, need_rank, same_shape
from onert_py.errors import article


def _axis(axis: int, rank: int, ctx: KernelContext, extra: int = 0) -> int:
    """Normalise an axis in [-(rank+extra), rank+extra)."""
    n = rank + extra
    if not -n <= axis < n:
        raise ctx.fail(f"axis {axis} out of range for rank {rank}")
    return axis + n if axis < 0 else axis


def _rank(ctx: KernelContext, i: int = 0) -> int:
    return len(ctx.input_tensor(i).shape)


def _pad_value(ctx: KernelContext):
    """What padding fills with when no value is given: 0, or the zero point of a quantized output."""
    q = ctx.output_tensor(0).quantization
    if q is not None and np.size(q.zero_point):
        return int(np.ravel(q.zero_point)[0])
    return 0


def _pairs(ctx: KernelContext, i: int):
    """Getter for a [rank, 2] integer input (paddings, crops) as a tuple of (before, after)."""
    get = int_input(ctx, i)

    def pairs():
        flat = get()
        if len(flat) % 2:
            raise ValueError(f"paddings must have shape [rank, 2], got {len(flat)} values")
        return tuple((flat[k], flat[k + 1]) for k in range(0, len(flat), 2))
    return pairs


# ----------------------------------------------------------------------------- concat / pack / split

@CPU.register("CONCATENATION", dtypes=("float32", "float16", "int32", "int64", "int8", "uint8", "int16",
                                       "bool", "uint32"))
def concatenation(ctx: KernelContext) -> Run:
    """The fused activation is applied (as onert does); LiteRT ignores it (older) or rejects it (newer)."""
    check_dtype(ctx)
    if not ctx.inputs:
        raise ctx.fail("needs at least one input")
    ins, (o,) = ctx.inputs, ctx.outputs
    v = ctx.values
    rank = _rank(ctx)
    axis = int(ctx.options.get("axis", 0))
    # LiteRT turns rank-0 inputs with axis 0 into a vector (a stack).
    join = np.stack if rank == 0 else np.concatenate
    axis = 0 if rank == 0 and axis in (0, -1) else _axis(axis, rank, ctx)
    act = activation_of(ctx, tanh_sign_bit="refuse")
    if act is not None and ctx.output_dtype().kind not in "fi":
        raise ctx.fail(f"fused activation on {article(ctx.output_dtype().name)} output")

    check = ctx.alloc_check()
    itemsize = ctx.output_dtype().itemsize
    limit = ctx.runtime.options.max_memory

    def run() -> None:
        xs = [v[i] for i in ins]
        # the output holds every input's elements: one sum, not per element (a WHILE growing a tensor)
        n = sum(x.size for x in xs)
        if n * itemsize > limit:
            shp = [len(xs)] if rank == 0 else list(np.shape(xs[0]))
            if rank:
                shp[axis] = sum(np.shape(x)[axis] for x in xs)
            check(shp)
        out = join(xs, axis=axis)
        v[o] = out if act is None else act(out)

    ts = [ctx.input_tensor(k) for k in range(len(ins))] + [ctx.output_tensor(0)]
    if rank == 0 or any(t.is_dynamic for t in ts):
        return run
    # Static shapes: the join writes into the planned output buffer.
    in_shapes = tuple(tuple(t.shape) for t in ts[:-1])
    out_shape = tuple(ts[-1].shape)
    if np.concatenate([np.empty(s, np.uint8) for s in in_shapes], axis=axis).shape != out_shape:
        return run
    alloc = ctx.output_buffer(0)

    # each input copied into its slab of the output: np.concatenate's argument handling was most of a
    # small join's time (a converter's shift register in a loop body: [7] + [1], 2.1 -> 0.8 us)
    slabs, start = [], 0
    for i, shape in zip(ins, in_shapes):
        slabs.append((i, shape, (slice(None),) * axis + (slice(start, start + shape[axis]),)))
        start += shape[axis]

    def run_planned() -> None:
        out = alloc(out_shape)
        for i, shape, slab in slabs:
            x = v[i]
            if x.shape != shape:
                return run()
            out[slab] = x
        v[o] = out if act is None else act(out)
    return run_planned


def _parameters_differ(ctx: KernelContext) -> list[int]:
    """Inputs whose quantization (scale or zero point) differs from the output's."""
    qo = qparams(ctx.output_tensor(0))
    differ = []
    for k in range(len(ctx.inputs)):
        q = qparams(ctx.input_tensor(k))
        if q is None or q.scale[0] != qo.scale[0] or q.zero_point[0] != qo.zero_point[0]:
            differ.append(k)
    return differ


@CPU.register_quantized("CONCATENATION", dtypes=QUANTIZED_TYPES)
def concatenation_quantized(ctx: KernelContext) -> Run:
    """As LiteRT: inputs with the output's parameters are copied; int8 inputs with other parameters are
    refused, uint8 ones rescaled in float32 (ConcatenationWithScaling), int16 ones copied unchanged."""
    check_dtype(ctx)
    differ = _parameters_differ(ctx)
    dt = ctx.output_dtype()
    if not differ or dt == np.int16:
        return concatenation(ctx)
    if dt == np.int8:
        raise ctx.fail(f"input {differ[0]} has other quantization parameters than the output (LiteRT requires "
                       "equal ones for int8)")
    if activation_of(ctx) is not None:
        raise ctx.fail("a fused activation on a rescaling uint8 CONCATENATION is not supported")
    qo = qparams(ctx.output_tensor(0))
    inv_out = np.float32(1.0) / np.float32(qo.scale[0])
    zo = int(qo.zero_point[0])
    rescale = {}
    for k in differ:
        q = qparams(ctx.input_tensor(k))
        scale = np.float32(q.scale[0]) * inv_out
        rescale[k] = (scale, np.float32(-int(q.zero_point[0])) * scale)
    ins, (o,) = ctx.inputs, ctx.outputs
    v = ctx.values
    axis = _axis(int(ctx.options.get("axis", 0)), _rank(ctx), ctx)

    def run() -> None:
        parts = []
        for k, i in enumerate(ins):
            x = v[i]
            if k in rescale:
                scale, bias = rescale[k]
                y = np.asarray(x, np.float32) * scale + bias
                x = np.clip(np.trunc(y + np.copysign(np.float32(0.5), y)).astype(np.int32) + zo, 0, 255).astype(dt)
            parts.append(x)
        v[o] = np.concatenate(parts, axis=axis)
    return run


@shape_rule("CONCATENATION")
def concatenation_shape(n: Node):
    shapes = [n.shape(i) for i in range(len(n.op.inputs))]
    if any(s is None for s in shapes):
        return [None]
    rank = len(shapes[0])
    if rank == 0:              # LiteRT stacks scalars
        return [(len(shapes),)]
    axis = axis_of(n, int(n.opts.get("axis", 0)), rank)
    out = list(merge_same(n, shapes, skip_axis=axis))
    sizes = [s[axis] for s in shapes]
    out[axis] = sum(sizes) if all(d >= 0 for d in sizes) else -1
    return [tuple(out)]


@value_rule("CONCATENATION", litert=True)
def concat_value(n: Node, v: list):
    if np.ndim(v[0]) == 0:
        return [np.stack(v)]
    return [activated(n.opts, np.concatenate(v, axis=axis_of(n, int(n.opts.get("axis", 0)), np.ndim(v[0]))))]


@CPU.register_quantized("PACK", dtypes=QUANTIZED_TYPES)
def pack_quantized(ctx: KernelContext) -> Run:
    """LiteRT packs quantized values only when every input has the output's parameters."""
    check_dtype(ctx)
    differ = _parameters_differ(ctx)
    if differ:
        raise ctx.fail(f"input {differ[0]} has other quantization parameters than the output (LiteRT requires "
                       "equal ones)")
    return pack(ctx)


@CPU.register("PACK", dtypes=("float32", "int32", "int64", "int8", "uint8", "int16", "uint32"))
def pack(ctx: KernelContext) -> Run:
    check_dtype(ctx)
    ins, (o,) = ctx.inputs, ctx.outputs
    n = int(ctx.options.get("values_count", len(ins)) or len(ins))
    if n != len(ins):
        raise ctx.fail(f"values_count {n} but {len(ins)} inputs")
    v = ctx.values
    axis = _axis(int(ctx.options.get("axis", 0)), _rank(ctx), ctx, extra=1)

    def run() -> None:
        v[o] = np.stack([v[i] for i in ins], axis=axis)
    return run


@shape_rule("PACK")
def pack_shape(n: Node):
    s = merge_same(n, [n.shape(i) for i in range(len(n.op.inputs))])
    if s is None:
        return [None]
    axis = axis_of(n, int(n.opts.get("axis", 0)), len(s), extra=1)
    return [s[:axis] + (len(n.op.inputs),) + s[axis:]]


@value_rule("PACK")
def pack_value(n: Node, v: list):
    return [np.stack(v, axis=axis_of(n, int(n.opts.get("axis", 0)), np.ndim(v[0]), extra=1))]


@CPU.register("UNPACK", dtypes=("float32", "float16", "int32", "int8", "uint8", "int16", "bool"))
def unpack(ctx: KernelContext) -> Run:
    ctx.expect_inputs(1)
    check_dtype(ctx)
    x, outs = ctx.inputs[0], ctx.outputs
    v = ctx.values
    axis = _axis(int(ctx.options.get("axis", 0)), _rank(ctx), ctx)
    num = int(ctx.options.get("num", 0))
    if num and num != len(outs):
        raise ctx.fail(f"num {num} but {len(outs)} outputs")

    def run() -> None:
        a = v[x]
        if a.shape[axis] != len(outs):
            raise ValueError(f"cannot unpack dim {a.shape[axis]} of shape {a.shape} into {len(outs)} outputs")
        pre, shp = (slice(None),) * axis, a.shape[:axis] + a.shape[axis + 1:]
        for k, oi in enumerate(outs):
            v[oi] = a[pre + (slice(k, k + 1),)].reshape(shp)   # a view, and an ndarray even at rank 0
    return run


@shape_rule("UNPACK")
def unpack_shape(n: Node):
    s = n.shape(0)
    if s is None:
        return [None] * n.n_out
    axis = axis_of(n, int(n.opts.get("axis", 0)), len(s))
    if s[axis] >= 0 and s[axis] != n.n_out:
        raise n.fail(f"cannot unpack dim {s[axis]} into {n.n_out} outputs")
    return [s[:axis] + s[axis + 1:]] * n.n_out


def _split_into(a: np.ndarray, sizes, axis: int, outs, v) -> None:
    pre = (slice(None),) * axis
    start = 0
    for oi, n in zip(outs, sizes):
        v[oi] = a[pre + (slice(start, start + n),)]
        start += n


@CPU.register("SPLIT", dtypes=("float32", "float16", "int32", "int64", "int8", "uint8", "int16"))
def split(ctx: KernelContext) -> Run:
    ctx.expect_inputs(2)
    check_dtype(ctx, 1)
    x, outs = ctx.inputs[1], ctx.outputs
    v = ctx.values
    n = len(outs)
    num = int(ctx.options.get("num_splits", n) or n)
    if num != n:
        raise ctx.fail(f"num_splits {num} but {n} outputs")
    get_axis = int_input(ctx, 0)

    def run() -> None:
        a = v[x]
        (axis,) = get_axis()
        if not -a.ndim <= axis < a.ndim:
            raise ValueError(f"axis {axis} out of range for rank {a.ndim}")
        axis %= a.ndim
        if a.shape[axis] % n:
            raise ValueError(f"dim {a.shape[axis]} of shape {a.shape} is not divisible into {n} splits")
        _split_into(a, (a.shape[axis] // n,) * n, axis, outs, v)
    return run


def _split_shapes(n: Node, s: Shape | None, axis: int | None, sizes: Sequence[int] | None):
    if s is None:
        return [None] * n.n_out
    if axis is None:
        return [(-1,) * len(s)] * n.n_out
    a = axis_of(n, axis, len(s))
    if sizes is None:
        return [s[:a] + (-1,) + s[a + 1:]] * n.n_out
    return [s[:a] + (d,) + s[a + 1:] for d in sizes]


@shape_rule("SPLIT")
def split_shape(n: Node):
    s, axis, k = n.shape(1), n.scalar(0), n.n_out
    sizes = None
    if s is not None and axis is not None:
        d = s[axis_of(n, axis, len(s))]
        if d >= 0:
            if d % k:
                raise n.fail(f"dim {d} does not split into {k} equal parts")
            sizes = [d // k] * k
    return _split_shapes(n, s, axis, sizes)


@CPU.register("SPLIT_V", dtypes=("float32", "int32", "int64", "int8", "uint8", "int16"))
def split_v(ctx: KernelContext) -> Run:
    ctx.expect_inputs(3)
    check_dtype(ctx)
    x, outs = ctx.inputs[0], ctx.outputs
    v = ctx.values
    get_sizes, get_axis = int_input(ctx, 1), int_input(ctx, 2)

    def run() -> None:
        a = v[x]
        (axis,) = get_axis()
        if not -a.ndim <= axis < a.ndim:
            raise ValueError(f"axis {axis} out of range for rank {a.ndim}")
        axis %= a.ndim
        sizes = list(get_sizes())
        if len(sizes) != len(outs):
            raise ValueError(f"{len(sizes)} split sizes for {len(outs)} outputs")
        dim = a.shape[axis]
        if sizes.count(-1) > 1:
            raise ValueError(f"more than one -1 in split sizes {sizes}")
        if -1 in sizes:
            sizes[sizes.index(-1)] = dim - (sum(sizes) + 1)
        if sum(sizes) != dim or any(s < 0 for s in sizes):
            raise ValueError(f"split sizes {sizes} do not add up to dim {dim}")
        _split_into(a, sizes, axis, outs, v)
    return run


@shape_rule("SPLIT_V")
def split_v_shape(n: Node):
    s, given, axis = n.shape(0), n.ints(1), n.scalar(2)
    sizes = None
    if s is not None and axis is not None and given is not None:
        if len(given) != n.n_out:
            raise n.fail(f"{len(given)} split sizes for {n.n_out} outputs")
        d = s[axis_of(n, axis, len(s))]
        sizes = list(given)
        if -1 in sizes:
            rest = sum(x for x in sizes if x != -1)
            sizes[sizes.index(-1)] = d - rest if d >= 0 else -1
        if d >= 0 and all(x >= 0 for x in sizes) and sum(sizes) != d:
            raise n.fail(f"split sizes {list(given)} do not add up to dim {d}")
    return _split_shapes(n, s, axis, sizes)


# ----------------------------------------------------------------------------- tile / transpose / reverse

@CPU.register("TILE", dtypes=FIXED_TYPES + ("string",))
def tile(ctx: KernelContext) -> Run:
    ctx.expect_inputs(2)
    check_dtype(ctx)
    x, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    get_mult = int_input(ctx, 1)
    check = ctx.alloc_check()

    def run() -> None:
        a = v[x]
        m = get_mult()
        if len(m) != np.ndim(a):
            raise ValueError(f"{len(m)} multiples for an input of rank {np.ndim(a)}")
        if any(k < 0 for k in m):
            raise ValueError(f"negative multiples {list(m)}")
        check([d * k for d, k in zip(np.shape(a), m)])
        v[o] = np.tile(a, m)
    return run


@shape_rule("TILE")
def tile_shape(n: Node):
    s, mult = n.shape(0), n.ints(1)
    if s is None:
        return [None]
    if mult is None:
        return [(-1,) * len(s)]
    if len(mult) != len(s):
        raise n.fail(f"{len(mult)} multiples for rank {len(s)}")
    return [tuple(d * m if d >= 0 else -1 for d, m in zip(s, mult))]


@value_rule("TILE", litert=True)
def tile_value(n: Node, v: list):
    return [np.tile(v[0], tuple(int(m) for m in np.ravel(v[1])))]


@CPU.register("TRANSPOSE", dtypes=FIXED_TYPES + ("string",))
def transpose(ctx: KernelContext) -> Run:
    ctx.expect_inputs(2)
    check_dtype(ctx)
    x, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    get_perm = int_input(ctx, 1)

    def run() -> None:
        a = v[x]
        perm = get_perm()
        r = np.ndim(a)
        if len(perm) != r:
            raise ValueError(f"perm {list(perm)} does not match rank {r}")
        perm = tuple(p + r if p < 0 else p for p in perm)
        if sorted(perm) != list(range(r)):
            raise ValueError(f"perm {list(get_perm())} is not a permutation")
        v[o] = np.transpose(a, perm)
    return run


@shape_rule("TRANSPOSE")
def transpose_shape(n: Node):
    s, perm = n.shape(0), n.ints(1)
    if s is None:
        return [None]
    if perm is None:
        return [(-1,) * len(s)]
    if sorted(p + len(s) if p < 0 else p for p in perm) != list(range(len(s))):
        raise n.fail(f"perm {list(perm)} is not a permutation of rank {len(s)}")
    return [tuple(s[p] for p in perm)]


@value_rule("TRANSPOSE")
def transpose_value(n: Node, v: list):
    return [np.transpose(v[0], tuple(int(p) for p in np.ravel(v[1])))]


@CPU.register("REVERSE_V2", dtypes=("float32", "float16", "int32", "int64", "int8", "uint8", "int16",
                                    "bool", "string"))
def reverse_v2(ctx: KernelContext) -> Run:
    ctx.expect_inputs(2)
    check_dtype(ctx)
    x, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    get_axes = int_input(ctx, 1)

    def run() -> None:
        a = v[x]
        r = np.ndim(a)
        axes = get_axes()
        norm = []
        for ax in axes:
            if not -r <= ax < r:
                raise ValueError(f"axis {ax} out of range for rank {r}")
            norm.append(ax % r)
        v[o] = np.flip(a, axis=tuple(norm)) if norm else a
    return run


@CPU.register("REVERSE_SEQUENCE", dtypes=("float32", "int32", "int64", "int8", "uint8", "int16"))
def reverse_sequence(ctx: KernelContext) -> Run:
    ctx.expect_inputs(2)
    check_dtype(ctx)
    x, s, (o,) = ctx.inputs[0], ctx.inputs[1], ctx.outputs
    v = ctx.values
    rank = _rank(ctx)
    seq_dim = _axis(int(ctx.options.get("seq_dim", 0)), rank, ctx)
    batch_dim = _axis(int(ctx.options.get("batch_dim", 0)), rank, ctx)
    if seq_dim == batch_dim:
        raise ctx.fail("seq_dim and batch_dim must differ")

    def run() -> None:
        a = v[x]
        lens = np.ravel(v[s])
        if len(lens) != a.shape[batch_dim]:
            raise ValueError(f"{len(lens)} sequence lengths for batch dim {a.shape[batch_dim]}")
        if np.any(lens < 0) or np.any(lens > a.shape[seq_dim]):
            raise ValueError(f"sequence lengths {lens.tolist()} outside [0, {a.shape[seq_dim]}]")
        # index along seq_dim: j -> len-1-j for j < len, else j
        n = a.shape[seq_dim]
        j = np.arange(n)
        src = np.where(j[None, :] < lens[:, None], lens[:, None] - 1 - j[None, :], j[None, :])  # [B, n]
        shape = [1] * a.ndim
        shape[batch_dim], shape[seq_dim] = len(lens), n
        if batch_dim > seq_dim:
            src = src.T
        idx = src.reshape(shape)
        v[o] = np.take_along_axis(a, np.broadcast_to(idx, a.shape), axis=seq_dim)
    return run


# ----------------------------------------------------------------------------- padding

def _pad_layout(in_shape: tuple[int, ...], pads) -> tuple:
    """(output shape, interior index, border indices) of a constant pad. The border is cut into one
    slab per padded side (each slab spans the interior of the axes before it and all of the axes after
    it), so border and interior together are written exactly once."""
    if len(pads) != len(in_shape):
        raise ValueError(f"paddings for rank {len(pads)}, input has rank {len(in_shape)}")
    if any(p < 0 for pair in pads for p in pair):
        raise ValueError(f"negative paddings {[list(p) for p in pads]}")
    out_shape = tuple(d + b + e for d, (b, e) in zip(in_shape, pads))
    inner: list[slice] = []
    border = []
    for d, (b, e) in zip(in_shape, pads):
        if b:
            border.append(tuple(inner) + (slice(0, b),))
        if e:
            border.append(tuple(inner) + (slice(b + d, b + d + e),))
        inner.append(slice(b, b + d))
    return out_shape, tuple(inner), border


def _pad_run(ctx: KernelContext, get_value, mode: str = "constant", offset: int = 0) -> Run:
    x, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    get_pairs = _pairs(ctx, 1)
    check = ctx.alloc_check()

    if mode != "constant":
        def run_mirror() -> None:
            a = v[x]
            pads = get_pairs()
            if len(pads) != np.ndim(a):
                raise ValueError(f"paddings for rank {len(pads)}, input has rank {np.ndim(a)}")
            if any(p < 0 for pair in pads for p in pair):
                raise ValueError(f"negative paddings {[list(p) for p in pads]}")
            check([d + b + e for d, (b, e) in zip(np.shape(a), pads)])
            for d, (b, e) in zip(np.shape(a), pads):
                if b > d - offset or e > d - offset:
                    raise ValueError(f"paddings {[list(p) for p in pads]} too large for shape {np.shape(a)} "
                                     f"in {mode} mode")
            v[o] = np.pad(a, pads, mode=mode)
        return run_mirror

    layouts: dict = {}
    alloc = ctx.output_buffer(0)   # every path below writes a new array (or the planned slot)

    def run() -> None:
        a = v[x]
        pads = get_pairs()
        key = (np.shape(a), pads)
        lay = layouts.get(key)
        if lay is None:
            if len(layouts) > 16:   # shapes that keep changing: do not hoard layouts
                layouts.clear()
            if len(pads) == np.ndim(a) and all(p >= 0 for pair in pads for p in pair):
                check([d + b + e for d, (b, e) in zip(np.shape(a), pads)])
            lay = layouts[key] = _pad_layout(*key)
        out_shape, inner, border = lay
        value = get_value()
        if not pads or pads[-1] == (0, 0):
            # Outer axes padded: fill only the border slabs (most of the output is interior).
            out = alloc(out_shape)
            for sl in border:
                out[sl] = value
        else:
            # The last axis is padded: its border slabs are short strided runs, slower to fill than
            # the whole output (one memset into the planned slot; a fresh np.zeros of a large output
            # is new pages, faulted in by the copy: face_detection_short_range's [1, 64, 64, 28]
            # channel pad 145 -> 40 µs in the model).
            out = alloc(out_shape)
            out.fill(value)
        out[inner] = a
        v[o] = out
    return run


@CPU.register("PAD", dtypes=("float32", "float16", "int32", "int64", "int8", "uint8", "int16", "bool"))
def pad(ctx: KernelContext) -> Run:
    ctx.expect_inputs(2)
    check_dtype(ctx)
    value = _pad_value(ctx)
    return _pad_run(ctx, lambda: value)


@shape_rule("PAD", "PADV2", "MIRROR_PAD")
def pad_shape(n: Node):
    s, pads = n.shape(0), n.ints(1)
    if s is None:
        return [None]
    if pads is None:
        return [(-1,) * len(s)]
    if len(pads) != 2 * len(s):
        raise n.fail(f"paddings must have shape [{len(s)}, 2], hold {len(pads)} values")
    if any(p < 0 for p in pads):
        raise n.fail(f"negative padding {list(pads)}")
    if n.op.opcode == "MIRROR_PAD":     # REFLECT (mode 0) excludes the edge, SYMMETRIC repeats it
        limit_off = 1 if int(n.opts.get("mode", 0)) == 0 else 0
        for k, d in enumerate(s):
            if d >= 0 and max(pads[2 * k], pads[2 * k + 1]) > d - limit_off:
                raise n.fail(f"padding {pads[2 * k]}, {pads[2 * k + 1]} of dim {k} exceeds size {d} "
                             f"minus {limit_off}")
    return [tuple(d + pads[2 * k] + pads[2 * k + 1] if d >= 0 else -1 for k, d in enumerate(s))]


@CPU.register("PADV2", dtypes=("float32", "float16", "int32", "int64", "int8", "uint8", "int16", "bool"))
def padv2(ctx: KernelContext) -> Run:
    ctx.expect_inputs(2, 3)
    check_dtype(ctx)
    if not ctx.has_input(2):
        value = _pad_value(ctx)
        return _pad_run(ctx, lambda: value)
    # a value equal to zero pads with +0: LiteRT fills with zero bytes then (-0.0 gives +0.0)
    c = ctx.const(2)
    if c is not None:
        value = np.ravel(c)[0] + 0
        return _pad_run(ctx, lambda: value)
    v, t = ctx.values, ctx.inputs[2]
    return _pad_run(ctx, lambda: np.ravel(v[t])[0] + 0)


@CPU.register_quantized("PADV2", dtypes=QUANTIZED_TYPES)
def padv2_quantized(ctx: KernelContext) -> Run:
    """LiteRT's quantized PADV2 copies the input's integers (its parameters are not compared with the
    output's) and pads with the constant's integer, which must have the output's scale and zero point
    (LiteRT checks it when it runs; we at prepare); without a constant it pads with the output's zero
    point."""
    ctx.expect_inputs(2, 3)
    check_dtype(ctx)
    if ctx.has_input(2):
        t = ctx.input_tensor(2)
        if t.dtype != ctx.output_dtype():
            raise ctx.fail(f"the pad value has type {t.dtype}, the output {ctx.output_dtype()}")
        if params32(t) != params32(ctx.output_tensor(0)):
            raise ctx.fail("the pad value's quantization (scale {}, zero point {}) differs from the output's "
                           "(scale {}, zero point {}): LiteRT requires equal ones".format(
                               *params32(t), *params32(ctx.output_tensor(0))))
    return padv2(ctx)


@CPU.register("MIRROR_PAD", dtypes=FIXED_TYPES)
def mirror_pad(ctx: KernelContext) -> Run:
    ctx.expect_inputs(2)
    check_dtype(ctx)
    mode = int(ctx.options.get("mode", 0))
    if mode not in (0, 1):
        raise ctx.fail(f"unknown mirror pad mode {mode}")
    # REFLECT excludes the edge (padding <= dim - 1); SYMMETRIC repeats it (padding <= dim).
    return _pad_run(ctx, None, "reflect" if mode == 0 else "symmetric", offset=1 if mode == 0 else 0)


# ----------------------------------------------------------------------------- space / depth / batch

def _block_size(ctx: KernelContext) -> int:
    bs = int(ctx.options.get("block_size", 0))
    if bs < 1:
        raise ctx.fail(f"block_size must be >= 1, got {bs}")
    if _rank(ctx) != 4:
        raise ctx.fail(f"input must have rank 4, has {_rank(ctx)}")
    return bs


@CPU.register("SPACE_TO_DEPTH", dtypes=("float32", "float16", "int32", "int64", "int8", "uint8", "int16"))
def space_to_depth(ctx: KernelContext) -> Run:
    ctx.expect_inputs(1)
    check_dtype(ctx)
    x, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    bs = _block_size(ctx)

    def run() -> None:
        a = v[x]
        n, h, w, c = a.shape
        if h % bs or w % bs:
            raise ValueError(f"height {h} and width {w} must be multiples of block size {bs}")
        t = a.reshape(n, h // bs, bs, w // bs, bs, c).transpose(0, 1, 3, 2, 4, 5)
        v[o] = t.reshape(n, h // bs, w // bs, bs * bs * c)
    return run


@shape_rule("SPACE_TO_DEPTH", "DEPTH_TO_SPACE")
def space_depth_shape(n: Node):
    x = need_rank(n, 0, 4)
    bs = int(n.opts.get("block_size", 0))
    if x is None or bs < 1:
        return [None]
    nb, h, w, c = x
    if n.op.opcode == "SPACE_TO_DEPTH":
        if (h > 0 and h % bs) or (w > 0 and w % bs):
            raise n.fail(f"height {h} and width {w} must be multiples of block size {bs}")
        return [(nb, h // bs if h >= 0 else -1, w // bs if w >= 0 else -1, c * bs * bs if c >= 0 else -1)]
    if c > 0 and c % (bs * bs):
        raise n.fail(f"depth {c} must be a multiple of block size squared {bs * bs}")
    return [(nb, h * bs if h >= 0 else -1, w * bs if w >= 0 else -1, c // (bs * bs) if c >= 0 else -1)]


@CPU.register("DEPTH_TO_SPACE", dtypes=("float32", "float16", "int32", "int64", "int8", "uint8", "int16"))
def depth_to_space(ctx: KernelContext) -> Run:
    ctx.expect_inputs(1)
    check_dtype(ctx)
    x, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    bs = _block_size(ctx)

    def run() -> None:
        a = v[x]
        n, h, w, c = a.shape
        if c % (bs * bs):
            raise ValueError(f"depth {c} must be a multiple of block size squared {bs * bs}")
        t = a.reshape(n, h, w, bs, bs, c // (bs * bs)).transpose(0, 1, 3, 2, 4, 5)
        v[o] = t.reshape(n, h * bs, w * bs, c // (bs * bs))
    return run


@CPU.register("SPACE_TO_BATCH_ND", dtypes=FIXED_TYPES)
def space_to_batch_nd(ctx: KernelContext) -> Run:
    ctx.expect_inputs(3)
    check_dtype(ctx)
    x, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    get_block, get_pads = int_input(ctx, 1), _pairs(ctx, 2)
    fill_value = _pad_value(ctx)
    dt = ctx.output_dtype()
    check = ctx.alloc_check()

    def run() -> None:
        a = v[x]
        block, pads = get_block(), get_pads()
        m = len(block)
        if len(pads) != m or not 1 <= m <= a.ndim - 1:
            raise ValueError(f"block shape {list(block)} / paddings do not fit input shape {a.shape}")
        if any(b < 1 for b in block) or any(p < 0 for pr in pads for p in pr):
            raise ValueError(f"invalid block shape {list(block)} or paddings {[list(p) for p in pads]}")
        full = [(0, 0)] + list(pads) + [(0, 0)] * (a.ndim - 1 - m)
        check([d + b + e for d, (b, e) in zip(a.shape, full)])   # the padded input, as big as the output
        padded = np.full(tuple(d + b + e for d, (b, e) in zip(a.shape, full)), fill_value, dtype=dt)
        padded[tuple(slice(b, b + d) for d, (b, _) in zip(a.shape, full))] = a
        spatial = padded.shape[1:1 + m]
        if any(s % b for s, b in zip(spatial, block)):
            raise ValueError(f"padded spatial shape {spatial} is not divisible by block {list(block)}")
        rest = padded.shape[1 + m:]
        n = a.shape[0]
        shp = [n]
        for s, b in zip(spatial, block):
            shp += [s // b, b]
        t = padded.reshape(shp + list(rest))
        # [n, s0/b0, b0, s1/b1, b1, ..., rest] -> [b0, b1, ..., n, s0/b0, s1/b1, ..., rest]
        perm = [2 + 2 * k for k in range(m)] + [0] + [1 + 2 * k for k in range(m)] + \
            list(range(1 + 2 * m, 1 + 2 * m + len(rest)))
        t = t.transpose(perm)
        v[o] = t.reshape([n * int(np.prod(block))] + [s // b for s, b in zip(spatial, block)] + list(rest))
    return run


@shape_rule("SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND")
def space_batch_shape(n: Node):
    x, block, pads = n.shape(0), n.ints(1), n.ints(2)
    if x is None:
        return [None]
    if block is None or pads is None or len(pads) != 2 * len(block) or not 1 <= len(block) < len(x) \
            or any(b < 1 for b in block):
        return [(-1,) * len(x)]
    prod = math.prod(block)
    out = list(x)
    to_batch = n.op.opcode == "SPACE_TO_BATCH_ND"
    if not to_batch and x[0] >= 0 and x[0] % prod:
        raise n.fail(f"batch {x[0]} is not a multiple of the block size product {prod}")
    out[0] = -1 if x[0] < 0 else (x[0] * prod if to_batch else x[0] // prod)
    for k, b in enumerate(block):
        d, lo, hi = x[1 + k], pads[2 * k], pads[2 * k + 1]
        if d < 0:
            out[1 + k] = -1
        elif to_batch:
            if (d + lo + hi) % b:
                raise n.fail(f"padded dim {d + lo + hi} is not a multiple of block size {b}")
            out[1 + k] = (d + lo + hi) // b
        else:
            out[1 + k] = d * b - lo - hi
            if out[1 + k] < 0:
                raise n.fail(f"crops {lo}, {hi} exceed dim {d * b}")
    return [tuple(out)]


@CPU.register("BATCH_TO_SPACE_ND", dtypes=FIXED_TYPES)
def batch_to_space_nd(ctx: KernelContext) -> Run:
    ctx.expect_inputs(3)
    check_dtype(ctx)
    x, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    get_block, get_crops = int_input(ctx, 1), _pairs(ctx, 2)

    def run() -> None:
        a = v[x]
        block, crops = get_block(), get_crops()
        m = len(block)
        if len(crops) != m or not 1 <= m <= a.ndim - 1:
            raise ValueError(f"block shape {list(block)} / crops do not fit input shape {a.shape}")
        if any(b < 1 for b in block) or any(c < 0 for pr in crops for c in pr):
            raise ValueError(f"invalid block shape {list(block)} or crops {[list(c) for c in crops]}")
        prod = int(np.prod(block))
        if a.shape[0] % prod:
            raise ValueError(f"batch {a.shape[0]} is not divisible by the block size {prod}")
        n = a.shape[0] // prod
        spatial, rest = a.shape[1:1 + m], a.shape[1 + m:]
        t = a.reshape(list(block) + [n] + list(spatial) + list(rest))
        # [b0, ..., n, s0, s1, ..., rest] -> [n, s0, b0, s1, b1, ..., rest]
        perm = [m]
        for k in range(m):
            perm += [m + 1 + k, k]
        perm += list(range(2 * m + 1, 2 * m + 1 + len(rest)))
        t = t.transpose(perm).reshape([n] + [s * b for s, b in zip(spatial, block)] + list(rest))
        sl = tuple(slice(cb, t.shape[1 + k] - ce) for k, (cb, ce) in enumerate(crops))
        if any(s.start > s.stop for s in sl):
            raise ValueError(f"crops {[list(c) for c in crops]} larger than the spatial shape")
        v[o] = t[(slice(None),) + sl]
    return run


# ----------------------------------------------------------------------------- matrix diagonals

# LiteRT's MATRIX_DIAG / MATRIX_SET_DIAG switch on int8/uint8/int16/int32/int64 and copy every other
# type as a 4-byte float: right for float32 and uint32, wrong (and out of bounds) for float16, float64,
# uint16, uint64, bool, complex64 and complex128. We run those too, tested against the numpy definition.
_DIAG_TYPES = FIXED_TYPES + ("complex128",)


@CPU.register("MATRIX_DIAG", dtypes=_DIAG_TYPES)
def matrix_diag(ctx: KernelContext) -> Run:
    ctx.expect_inputs(1)
    check_dtype(ctx)
    x, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    dt = ctx.output_dtype()

    def run() -> None:
        a = v[x]
        if a.ndim < 1:
            raise ValueError("MATRIX_DIAG input must have rank >= 1")
        n = a.shape[-1]
        out = np.zeros(a.shape + (n,), dtype=dt)
        i = np.arange(n)
        out[..., i, i] = a
        v[o] = out
    return run


@shape_rule("MATRIX_DIAG")
def matrix_diag_shape(n: Node):
    s = n.shape(0)
    return [None if s is None or not s else s + (s[-1],)]


@CPU.register("MATRIX_SET_DIAG", dtypes=_DIAG_TYPES)
def matrix_set_diag(ctx: KernelContext) -> Run:
    ctx.expect_inputs(2)
    check_dtype(ctx)
    x, d, (o,) = ctx.inputs[0], ctx.inputs[1], ctx.outputs
    v = ctx.values

    def run() -> None:
        a, diag = v[x], v[d]
        if a.ndim < 2:
            raise ValueError("MATRIX_SET_DIAG input must have rank >= 2")
        k = min(a.shape[-2], a.shape[-1])
        if diag.shape != a.shape[:-2] + (k,):
            raise ValueError(f"diagonal shape {diag.shape} does not fit input shape {a.shape}")
        out = np.array(a, copy=True)
        i = np.arange(k)
        out[..., i, i] = diag
        v[o] = out
    return run


# Shape rules: every output has input 0's shape.
shape_rule("REVERSE_V2", "REVERSE_SEQUENCE", "MATRIX_SET_DIAG")(same_shape)


# SPLIT_V and PAD copy the integers whatever the parameters (PAD fills with the output's zero point);
# UNPACK, MIRROR_PAD, SPACE_TO_BATCH_ND (which pads with the zero point) and BATCH_TO_SPACE_ND require
# equal ones.
register_value_movers({"TRANSPOSE": transpose, "SPLIT": split, "SPLIT_V": split_v,
                       "UNPACK": equal_parameters(unpack), "TILE": tile,
                       "REVERSE_V2": reverse_v2, "PAD": pad,
                       "BATCH_TO_SPACE_ND": equal_parameters(batch_to_space_nd),
                       "MIRROR_PAD": equal_parameters(mirror_pad),
                       "SPACE_TO_BATCH_ND": equal_parameters(space_to_batch_nd)})
register_value_movers({"SPACE_TO_DEPTH": space_to_depth, "DEPTH_TO_SPACE": depth_to_space},
                      types=("int8", "uint8"))    # LiteRT refuses int16


# ----------------------------------------------------------------------------------- gradients

def _shape_of(g: gr.GradNode, t: int) -> int:
    return g.emit("SHAPE", t, dtype=np.int32, out_type=2)


def _int32(g: gr.GradNode, i: int) -> int:
    """Forward integer input i as int32."""
    return g.x(i) if g.in_dtype(i) == np.int32 else g.emit("CAST", g.x(i), dtype=np.int32)


def _static(s) -> bool:
    return s is not None and all(d >= 0 for d in s)


def _const_axis(g: gr.GradNode, i: int) -> int:
    a = g.const_input(i)
    if a is None:
        raise g.fail("the gradient needs a constant axis")
    return int(np.ravel(a)[0])


def _total(g: gr.GradNode, t: int) -> int:
    """The sum of all of t's values (a 0-d tensor), whatever t's rank."""
    return g.emit("SUM", g.emit("RESHAPE", t, g.const([-1], np.int32)), g.const([0], np.int32), keep_dims=False)


def _as_tuple(t) -> tuple:
    return t if isinstance(t, tuple) else (t,)


@grad_rule("CONCATENATION")
def concatenation_grad(g: gr.GradNode):
    # dy cut back into the inputs' extents along the axis
    d, n = g.dy(), len(g.op.inputs)
    s = g.shape(0)
    if s is None:
        raise g.fail("the gradient of CONCATENATION needs inputs of known rank")
    if len(s) == 0:                       # scalars are stacked
        parts = g.emit("UNPACK", d, n_out=n, axis=0, num=n)
    else:
        axis = int(g.opts.get("axis", 0)) % len(s)
        sizes = [g.shape(i)[axis] for i in range(n)]
        if all(k >= 0 for k in sizes):
            sizes_t = g.const(sizes, np.int32)
        else:
            at = g.const([axis], np.int32)
            sizes_t = g.emit("CONCATENATION", *[g.emit("GATHER", _shape_of(g, g.x(i)), at, axis=0, batch_dims=0)
                                                for i in range(n)], axis=0, fused_activation_function=0)
        parts = g.emit("SPLIT_V", d, sizes_t, g.const(axis, np.int32), n_out=n, num_splits=n)
    return [p if g.differentiable(i) else None for i, p in enumerate(_as_tuple(parts))]


@grad_rule("PACK")
def pack_grad(g: gr.GradNode):
    n = len(g.op.inputs)
    parts = g.emit("UNPACK", g.dy(), n_out=n, axis=int(g.opts.get("axis", 0)), num=n)
    return [p if g.differentiable(i) else None for i, p in enumerate(_as_tuple(parts))]


def _output_cotangents(g: gr.GradNode) -> list[int]:
    """Each output's cotangent, zeros for the outputs nothing depends on."""
    return [g.dy(j) if g.dy(j) is not None else gr.zeros_like(g, g.y(j)) for j in range(len(g.op.outputs))]


@grad_rule("UNPACK")
def unpack_grad(g: gr.GradNode):
    ds = _output_cotangents(g)
    return [g.emit("PACK", *ds, axis=int(g.opts.get("axis", 0)), values_count=len(ds))]


@grad_rule("SPLIT")
def split_grad(g: gr.GradNode):
    return [None, g.emit("CONCATENATION", *_output_cotangents(g), axis=_const_axis(g, 0),
                         fused_activation_function=0)]


@grad_rule("SPLIT_V")
def split_v_grad(g: gr.GradNode):
    return [g.emit("CONCATENATION", *_output_cotangents(g), axis=_const_axis(g, 2),
                   fused_activation_function=0), None, None]


@grad_rule("TILE")
def tile_grad(g: gr.GradNode):
    # dy as [m0, d0, m1, d1, ...] summed over the multiples' axes
    d, s, mult = g.dy(), g.shape(0), g.const_input(1)
    if s is None:
        raise g.fail("the gradient of TILE needs an input of known rank")
    if not s:
        return [d, None]
    if mult is not None and _static(s):
        shape = g.const([k for m, n in zip(np.ravel(mult).tolist(), s) for k in (m, n)], np.int32)
    else:
        both = g.emit("PACK", _int32(g, 1), _shape_of(g, g.x(0)), axis=1, values_count=2)
        shape = g.emit("RESHAPE", both, g.const([-1], np.int32))
    split = g.emit("RESHAPE", d, shape)
    return [g.emit("SUM", split, g.const(list(range(0, 2 * len(s), 2)), np.int32), keep_dims=False), None]


@grad_rule("TRANSPOSE")
def transpose_grad(g: gr.GradNode):
    # transposed back by the inverse permutation
    perm = g.const_input(1)
    if perm is not None:
        p = [int(k) % max(perm.size, 1) for k in np.ravel(perm)]
        inverse = g.const(np.argsort(p), np.int32)
    else:
        s = g.shape(0)
        if s is None:
            raise g.fail("the gradient of TRANSPOSE needs an input of known rank")
        r = len(s)
        p = g.emit("FLOOR_MOD", _int32(g, 1), g.const(r, np.int32))
        inverse = g.emit("SCATTER_ND", g.emit("RESHAPE", p, g.const([r, 1], np.int32)),
                         g.const(np.arange(r), np.int32), g.const([r], np.int32), dtype=np.int32)
    return [g.emit("TRANSPOSE", g.dy(), inverse), None]


@grad_rule("REVERSE_V2")
def reverse_v2_grad(g: gr.GradNode):
    return [g.emit("REVERSE_V2", g.dy(), g.x(1)), None]


@grad_rule("REVERSE_SEQUENCE")
def reverse_sequence_grad(g: gr.GradNode):
    return [g.emit("REVERSE_SEQUENCE", g.dy(), g.x(1), **g.opts), None]


def _unpad(g: gr.GradNode, d: int) -> int:
    """The part of the padded d that holds the input (a SLICE at the leading paddings)."""
    pads, s = g.const_input(1), g.shape(0)
    if pads is not None:
        begin = g.const(np.ravel(pads).reshape(-1, 2)[:, 0], np.int32)
    else:
        first = g.emit("SLICE", _int32(g, 1), g.const([0, 0], np.int32), g.const([-1, 1], np.int32))
        begin = g.emit("RESHAPE", first, g.const([-1], np.int32))
    size = g.const(s, np.int32) if _static(s) else _shape_of(g, g.x(0))
    return g.emit("SLICE", d, begin, size)


@grad_rule("PAD", "PADV2")
def pad_grad(g: gr.GradNode):
    d = g.dy()
    dx = _unpad(g, d) if g.differentiable(0) else None
    dv = None
    if g.has(2) and g.differentiable(2):
        # the pad value fills every padded position: the sum of their cotangents (TensorFlow gives None)
        dv = gr.sub(g, _total(g, d), _total(g, dx if dx is not None else _unpad(g, d)))
        if g.shape(2) != ():
            dv = gr.reshape_like(g, dv, g.x(2))
    return [dx, None, dv]


@CPU.register("OnertPyMirrorPadGrad", dtypes=("float32", "float16", "float64"))
def mirror_pad_grad_kernel(ctx: KernelContext) -> Run:
    """onert-py's gradient op: the cotangent of MIRROR_PAD (input 0, padded by the paddings of input 1
    in mode `mode`) folded back onto the input: each padded position adds to the value it copies."""
    ctx.expect_inputs(2)
    d_i, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    get_pairs = _pairs(ctx, 1)
    off = 1 if int(ctx.options.get("mode", 0)) == 0 else 0    # REFLECT skips the edge
    dt = ctx.output_dtype()

    def run() -> None:
        d = np.asarray(v[d_i])
        pads = get_pairs()
        if len(pads) != d.ndim:
            raise ValueError(f"paddings for rank {len(pads)}, the cotangent has rank {d.ndim}")
        for k, (b, e) in enumerate(pads):
            if not b and not e:
                continue
            m = np.moveaxis(d, k, 0)
            n = m.shape[0] - b - e
            core = np.array(m[b:b + n], dtype=dt, copy=True)
            if b:      # padded position i < b copies input b - 1 - i + off
                core[off:off + b] += m[:b][::-1]
            if e:      # padded position b + n + i copies input n - 1 - off - i
                core[n - off - e:n - off] += m[b + n:][::-1]
            d = np.moveaxis(core, 0, k)
        v[o] = np.array(d, dtype=dt, copy=True)
    return run


@shape_rule("OnertPyMirrorPadGrad")
def mirror_pad_grad_shape(n: Node):
    s, pads = n.shape(0), n.ints(1)
    if s is None:
        return [None]
    if pads is None:
        return [(-1,) * len(s)]
    return [tuple(d - pads[2 * k] - pads[2 * k + 1] if d >= 0 else -1 for k, d in enumerate(s))]


@grad_rule("OnertPyMirrorPadGrad")
def mirror_pad_grad_grad(g: gr.GradNode):
    return [g.emit("MIRROR_PAD", g.dy(), g.x(1), mode=int(g.opts.get("mode", 0))), None]


@grad_rule("MIRROR_PAD")
def mirror_pad_grad(g: gr.GradNode):
    return [g.emit("OnertPyMirrorPadGrad", g.dy(), g.x(1), custom="OnertPyMirrorPadGrad",
                   mode=int(g.opts.get("mode", 0))), None]


@grad_rule("SPACE_TO_DEPTH")
def space_to_depth_grad(g: gr.GradNode):
    return [g.emit("DEPTH_TO_SPACE", g.dy(), block_size=int(g.opts.get("block_size", 0)))]


@grad_rule("DEPTH_TO_SPACE")
def depth_to_space_grad(g: gr.GradNode):
    return [g.emit("SPACE_TO_DEPTH", g.dy(), block_size=int(g.opts.get("block_size", 0)))]


@grad_rule("SPACE_TO_BATCH_ND")
def space_to_batch_nd_grad(g: gr.GradNode):
    # a zero padding then a permutation: undone by the permutation back, cropping the padding
    return [g.emit("BATCH_TO_SPACE_ND", g.dy(), g.x(1), g.x(2)), None, None]


@grad_rule("BATCH_TO_SPACE_ND")
def batch_to_space_nd_grad(g: gr.GradNode):
    return [g.emit("SPACE_TO_BATCH_ND", g.dy(), g.x(1), g.x(2)), None, None]


@CPU.register("OnertPyMatrixDiagPart", dtypes=("float32", "float16", "float64"))
def matrix_diag_part(ctx: KernelContext) -> Run:
    """onert-py's gradient op: the main diagonal of the innermost matrices, [..., M, N] ->
    [..., min(M, N)] (TensorFlow's MatrixDiagPart; no TFLite op reads a diagonal)."""
    ctx.expect_inputs(1)
    x, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    dt = ctx.output_dtype()

    def run() -> None:
        a = np.asarray(v[x])
        if a.ndim < 2:
            raise ValueError("OnertPyMatrixDiagPart input must have rank >= 2")
        v[o] = np.diagonal(a, axis1=-2, axis2=-1).astype(dt, copy=True)
    return run


@shape_rule("OnertPyMatrixDiagPart")
def matrix_diag_part_shape(n: Node):
    s = n.shape(0)
    if s is None or len(s) < 2:
        return [None]
    m, k = s[-2], s[-1]
    return [s[:-2] + (min(m, k) if m >= 0 and k >= 0 else -1,)]


@grad_rule("OnertPyMatrixDiagPart")
def matrix_diag_part_grad(g: gr.GradNode):
    return [g.emit("MATRIX_SET_DIAG", gr.zeros_like(g, g.x(0)), g.dy())]


@grad_rule("MATRIX_DIAG")
def matrix_diag_grad(g: gr.GradNode):
    return [g.emit("OnertPyMatrixDiagPart", g.dy(), custom="OnertPyMatrixDiagPart")]


@grad_rule("MATRIX_SET_DIAG")
def matrix_set_diag_grad(g: gr.GradNode):
    # the input gets dy off the diagonal, the diagonal dy's diagonal
    d = g.dy()
    dx = g.emit("MATRIX_SET_DIAG", d, gr.zeros_like(g, g.x(1))) if g.differentiable(0) else None
    dd = g.emit("OnertPyMatrixDiagPart", d, custom="OnertPyMatrixDiagPart") if g.differentiable(1) else None
    return [dx, dd]
