"""Indexing ops: slicing, gathers and scatters, segment reductions, one-hot, where, unique, cumsum,
bucketize. Out-of-range indices raise (as LiteRT's kernels fail) instead of being clamped or wrapped."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from onert_py.backends.cpu._common import per_key
from onert_py.backends.cpu._quant import qparams
from onert_py.backends.cpu.shape import FIXED_TYPES, check_dtype, int_input, register_value_movers
from onert_py.backends import gradients as gr
from onert_py.backends.registry import CPU, KernelContext, Run, grad_rule, no_gradient, shape_rule, value_rule
from onert_py.backends.shape_rules import Node, Shape, axis_of, fmt, is_static, same_shape, shape_from_value


_UNSIGNED = {np.dtype(f"int{b}"): np.dtype(f"uint{b}") for b in (8, 16, 32, 64)}


def _check_indices(idx: np.ndarray, limit: int, what: str = "index") -> None:
    if not idx.size:
        return
    u = _UNSIGNED.get(idx.dtype)
    if u is not None and limit <= 1 << (8 * u.itemsize - 1):
        # read as unsigned, a negative index is >= 2**(bits-1) >= limit: one reduction instead of two
        if np.maximum.reduce(idx.view(u), axis=None) < limit:
            return
    elif idx.min() >= 0 and idx.max() < limit:
        return
    bad = idx[(idx < 0) | (idx >= limit)].ravel()[0]
    raise IndexError(f"{what} {int(bad)} out of range [0, {limit})")


# ----------------------------------------------------------------------------- slices

@CPU.register("SLICE", dtypes=FIXED_TYPES + ("string",))
def slice_(ctx: KernelContext) -> Run:
    ctx.expect_inputs(3)
    check_dtype(ctx)
    x, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    get_begin, get_size = int_input(ctx, 1), int_input(ctx, 2)

    def run() -> None:
        a = v[x]
        begin, size = get_begin(), get_size()
        shape = np.shape(a)
        if len(begin) != len(shape) or len(size) != len(shape):
            raise ValueError(f"begin {list(begin)} / size {list(size)} do not match rank {len(shape)}")
        sl = []
        for b, s, d in zip(begin, size, shape):
            e = d if s == -1 else b + s
            if b < 0 or s < -1 or e > d or b > d:
                raise IndexError(f"slice begin {list(begin)} size {list(size)} out of range for shape "
                                 f"{list(shape)}")
            sl.append(slice(b, e))
        v[o] = a[tuple(sl)]
    return run


@shape_rule("SLICE")
def slice_shape(n: Node):
    s, begin, size = n.shape(0), n.ints(1), n.ints(2)
    if s is None:
        return [None]
    declared = n.sg.tensors[n.op.outputs[0]]
    if n.litert_quirks and declared.shape and not declared.is_dynamic:
        # LiteRT keeps a declared static output as it is and only checks it when it can.
        if begin is not None and size is not None and is_static(s):
            got = _slice_shape(n, s, begin, size)
            if got != tuple(declared.shape):
                raise n.fail(f"slice of shape {list(got)} does not match the declared output "
                             f"{list(declared.shape)}")
        return [tuple(declared.shape)]
    if begin is None or size is None:
        return [(-1,) * len(s)]
    return [_slice_shape(n, s, begin, size)]


@value_rule("SLICE")
def slice_value(n: Node, v: list):
    return [v[0][tuple(slice(b, b + z) for b, z in zip(np.ravel(v[1]), n.engine.current_out[0]))]]


# ----------------------------------------------------------------------------- gathers

@CPU.register("GATHER", dtypes=("float32", "float16", "int32", "int64", "int8", "uint8", "int16", "uint16",
                                "bool", "string"))
def gather(ctx: KernelContext) -> Run:
    ctx.expect_inputs(2)
    check_dtype(ctx)
    x, p, (o,) = ctx.inputs[0], ctx.inputs[1], ctx.outputs
    v = ctx.values
    rank, prank = len(ctx.input_tensor(0).shape), len(ctx.input_tensor(1).shape)
    if ctx.input_tensor(1).dtype.kind not in "iu":
        raise ctx.fail(f"positions must be integers, not {ctx.input_tensor(1).dtype}")
    axis = int(ctx.options.get("axis", 0))
    if axis < 0:
        axis += rank
    bd = int(ctx.options.get("batch_dims", 0))
    if bd < 0:
        bd += prank
    if not 0 <= axis < rank or not 0 <= bd <= axis or bd > prank:
        raise ctx.fail(f"axis {ctx.options.get('axis', 0)} / batch_dims {ctx.options.get('batch_dims', 0)} "
                       f"invalid for input rank {rank} and positions rank {prank}")

    if bd == 0:
        def run() -> None:
            a, idx = v[x], np.asarray(v[p])
            _check_indices(idx, a.shape[axis], "gather index")
            v[o] = np.asarray(np.take(a, idx, axis=axis))   # 0-d results come back as scalars
        return run

    def make_plan(a_shape: tuple, i_shape: tuple) -> tuple:
        """The reshapes, the axis move and the batch index for an input and positions shape."""
        if a_shape[:bd] != i_shape[:bd]:
            raise ValueError(f"batch dims of input {a_shape} and positions {i_shape} differ")
        batch = a_shape[:bd]
        nb = int(np.prod(batch, dtype=np.int64))
        ar, ir = (nb,) + a_shape[bd:], (nb,) + i_shape[bd:]
        ax = axis - bd + 1                                   # the gathered axis in ar
        to_front = (0, ax) + tuple(d for d in range(1, len(ar)) if d != ax)   # [B, A, pre..., post...]
        bidx = np.arange(nb).reshape((nb,) + (1,) * (len(ir) - 1))
        ni, npre = len(ir) - 1, ax - 1
        gathered = 1 + ni + len(ar) - 2                      # rank of [B, I..., pre..., post...]
        perm = (0, *range(1 + ni, 1 + ni + npre), *range(1, 1 + ni), *range(1 + ni + npre, gathered))
        out = batch + a_shape[bd:axis] + i_shape[bd:] + a_shape[axis + 1:]
        return ar, ir, to_front, bidx, perm, out
    plan = per_key(make_plan)

    def run_batched() -> None:
        a, idx = v[x], np.asarray(v[p])
        ar, ir, to_front, bidx, perm, out = plan(a.shape, idx.shape)
        _check_indices(idx, a.shape[axis], "gather index")
        g = a.reshape(ar).transpose(to_front)[bidx, idx.reshape(ir)]   # [B, I..., pre..., post...]
        v[o] = g.transpose(perm).reshape(out)
    return run_batched


@shape_rule("GATHER")
def gather_shape(n: Node):
    x, idx = n.shape(0), n.shape(1)
    if x is None or idx is None:
        return [None]
    axis = axis_of(n, int(n.opts.get("axis", 0)), len(x))
    bd = int(n.opts.get("batch_dims", 0))
    if bd < 0:
        bd += len(idx)
    return [x[:axis] + idx[bd:] + x[axis + 1:]]


@value_rule("GATHER", litert=True)
def gather_value(n: Node, v: list):
    if int(n.opts.get("batch_dims", 0)):
        return None
    return [np.take(v[0], v[1], axis=int(n.opts.get("axis", 0)))]


@CPU.register("GATHER_ND", dtypes=("float32", "float16", "int32", "int64", "int8", "uint8", "int16",
                                   "bool", "string"))
def gather_nd(ctx: KernelContext) -> Run:
    ctx.expect_inputs(2)
    check_dtype(ctx)
    x, p, (o,) = ctx.inputs[0], ctx.inputs[1], ctx.outputs
    v = ctx.values

    def run() -> None:
        a, idx = v[x], np.asarray(v[p])
        if idx.ndim < 1:
            raise ValueError("GATHER_ND indices must have rank >= 1")
        k = idx.shape[-1]
        if k > a.ndim:
            raise ValueError(f"index depth {k} exceeds input rank {a.ndim}")
        for j in range(k):
            _check_indices(idx[..., j], a.shape[j], "gather_nd index")
        v[o] = np.asarray(a[tuple(idx[..., j] for j in range(k))])
    return run


@shape_rule("GATHER_ND")
def gather_nd_shape(n: Node):
    p, idx = n.shape(0), n.shape(1)
    if p is None or idx is None or not idx or idx[-1] < 0:
        return [None]
    if idx[-1] > len(p):
        raise n.fail(f"index depth {idx[-1]} exceeds the params rank {len(p)}")
    return [idx[:-1] + p[idx[-1]:]]


@value_rule("GATHER_ND")
def gather_nd_value(n: Node, v: list):
    idx = np.asarray(v[1])
    return [np.asarray(v[0][tuple(np.moveaxis(idx, -1, 0))])]


@CPU.register("SCATTER_ND", dtypes=("float32", "int32", "int64", "int8", "uint8", "bool"))
def scatter_nd(ctx: KernelContext) -> Run:
    ctx.expect_inputs(3)
    check_dtype(ctx, 1)
    i_t, u_t, (o,) = ctx.inputs[0], ctx.inputs[1], ctx.outputs
    v = ctx.values
    get_shape = int_input(ctx, 2)
    dt = ctx.output_dtype()
    check = ctx.alloc_check()

    def run() -> None:
        idx, upd = np.asarray(v[i_t]), np.asarray(v[u_t])
        shape = get_shape()
        check(shape)
        k = idx.shape[-1]
        if k > len(shape) or upd.shape != idx.shape[:-1] + tuple(shape[k:]):
            raise ValueError(f"indices {idx.shape} / updates {upd.shape} do not fit shape {list(shape)}")
        for j in range(k):
            _check_indices(idx[..., j], shape[j], "scatter_nd index")
        out = np.zeros(shape, dtype=dt)
        key = tuple(idx[..., j] for j in range(k))
        if dt == np.bool_:
            np.logical_or.at(out, key, upd)
        else:
            np.add.at(out, key, upd)
        v[o] = out
    return run


@shape_rule("SCATTER_ND")
def scatter_nd_shape(n: Node):
    idx, upd, out = n.shape(0), n.shape(1), shape_from_value(n, 2)
    if idx and is_static(out) and idx[-1] > len(out):
        raise n.fail(f"index depth {idx[-1]} exceeds the output rank {len(out)}")
    if idx and upd is not None and is_static(out) and idx[-1] >= 0:
        outer = len(idx) - 1
        want = idx[:-1] + out[idx[-1]:]
        if len(upd) != len(want) or any(a >= 0 and b >= 0 and a != b for a, b in zip(upd, want)):
            raise n.fail(f"updates {fmt(upd)} do not match indices {fmt(idx)} into shape {list(out)} "
                         f"(expected {fmt(want)}; {outer} index dims)")
    return [out]


def strided_slice_items(options: dict, shape, begin, end, strides) -> list[tuple[int | None, Any]]:
    """TF strided-slice semantics (the op's masks and offset applied to begin/end/strides) as a list of
    (input dim, item): item is a slice, an int index (shrink; may be negative or out of range: the
    caller checks against the dim) or None (a new axis, dim None). Dims an ellipsis covers and trailing
    dims get full slices. `shape` dims may be -1 (shape inference). ValueError for a malformed spec."""
    bm, em = int(options.get("begin_mask", 0)), int(options.get("end_mask", 0))
    elm, nam = int(options.get("ellipsis_mask", 0)), int(options.get("new_axis_mask", 0))
    sam, offset = int(options.get("shrink_axis_mask", 0)), bool(options.get("offset", False))
    if not len(begin) == len(end) == len(strides):
        raise ValueError(f"begin {list(begin)}, end {list(end)}, strides {list(strides)} differ in length")
    items: list[tuple[int | None, Any]] = []
    dim, ell_seen = 0, False
    for i, (b, e, st) in enumerate(zip(begin, end, strides)):
        if elm >> i & 1 and not ell_seen:
            ell_seen = True
            # dims the ellipsis covers: the rest minus those named by later sparse entries
            later = sum(1 for j in range(i + 1, len(begin)) if not (nam >> j & 1 and not elm >> j & 1))
            for _ in range(max(0, len(shape) - dim - later)):
                items.append((dim, slice(None)))
                dim += 1
            continue
        if elm >> i & 1:                     # a second ellipsis: a full slice of one dim
            items.append((dim, slice(None)))
            dim += 1
            continue
        if nam >> i & 1:
            items.append((None, None))
            continue
        if st == 0:
            raise ValueError("strided slice: stride must be non-zero")
        if dim >= len(shape):
            raise ValueError(f"strided slice spec {list(begin)} is too long for rank {len(shape)}")
        d = shape[dim]
        if sam >> i & 1:
            items.append((dim, b))
        else:
            start = None if bm >> i & 1 else b
            if em >> i & 1:
                stop = None
            elif offset:
                stop = None if d < 0 and b < 0 else (b + d if b < 0 else b) + e
            else:
                stop = e
            items.append((dim, slice(start, stop, st)))
        dim += 1
    while dim < len(shape):
        items.append((dim, slice(None)))
        dim += 1
    return items


def strided_slice_index(options: dict, shape, begin, end, strides) -> tuple:
    """The numpy index (basic indexing) of a strided slice of an array of `shape`; IndexError for a
    shrink index out of range."""
    idx = []
    for dim, item in strided_slice_items(options, shape, begin, end, strides):
        if dim is not None and not isinstance(item, slice):   # shrink: one index of the dim
            d = shape[dim]
            k = item + d if item < 0 else item
            if not 0 <= k < d:
                raise IndexError(f"strided slice: index {item} out of range for dim {d}")
            item = k
        idx.append(item)
    return tuple(idx)


@CPU.register("STRIDED_SLICE", dtypes=FIXED_TYPES + ("string",))
def strided_slice(ctx: KernelContext) -> Run:
    """TF strided-slice semantics built as a numpy index (basic indexing: the result is a view)."""
    ctx.expect_inputs(4)
    check_dtype(ctx)
    x, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    get_b, get_e, get_s = int_input(ctx, 1), int_input(ctx, 2), int_input(ctx, 3)
    opt = ctx.options
    # constant begin / end / strides (the converters' v[1:], v[0]): the numpy index of each input shape
    # made once (building it is ~2 us of Python, a loop's whole step otherwise)
    def index_of(shape: tuple) -> tuple:
        return strided_slice_index(opt, shape, get_b(), get_e(), get_s())
    known = per_key(index_of) if all(ctx.const(i) is not None for i in (1, 2, 3)) else None

    def run() -> None:
        a = v[x]
        shape = np.shape(a)
        r = a[known(shape) if known is not None else index_of(shape)]
        # a full index gives a numpy scalar (the executor's rank-0 form), or a bare object for strings
        v[o] = r if isinstance(r, (np.ndarray, np.generic)) else np.array(r, dtype=object)

    in_t = ctx.input_tensor(0)
    if known is None or in_t.is_dynamic or in_t.dtype == object:
        return run
    # The declared shape's index made now (a converter's v[0] of a [1]-shaped loop value: the generic
    # path's np.shape, dict lookup and isinstance tests were most of the step)
    declared = tuple(in_t.shape)
    try:
        index = index_of(declared)
    except (IndexError, ValueError):
        return run    # raised, with its message, when a run gets there

    def run_declared() -> None:
        a = v[x]
        if a.shape != declared:
            return run()
        v[o] = a[index]
    return run_declared


def _slice_shape(n: Node, s: Shape, begin: Sequence[int], size: Sequence[int]) -> Shape:
    if len(begin) != len(s) or len(size) != len(s):
        raise n.fail(f"begin {list(begin)} / size {list(size)} do not match rank {len(s)}")
    out = []
    for b, z, d in zip(begin, size, s):
        e = (d if d >= 0 else -1) if z == -1 else b + z
        if b < 0 or z < -1 or (d >= 0 and (e > d or b > d)):
            raise n.fail(f"slice begin {list(begin)} size {list(size)} is out of range")
        out.append(e - b if e >= 0 else -1)
    return tuple(out)


@shape_rule("STRIDED_SLICE")
def strided_slice_shape(n: Node):
    s = n.shape(0)
    b, e, st = n.ints(1), n.ints(2), n.ints(3)
    if s is None:
        return [None]
    if b is None or e is None or st is None:
        masks = sum(int(n.opts.get(k, 0)) for k in ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask"))
        return [(-1,) * len(s) if masks == 0 else None]   # without masks the rank is kept
    out = []
    try:
        items = strided_slice_items(n.opts, s, b, e, st)
    except ValueError as err:
        raise n.fail(str(err)) from None
    for dim, item in items:
        if dim is None:
            out.append(1)
        elif isinstance(item, slice):
            d = s[dim]
            if d < 0:
                out.append(-1)
            else:
                out.append(len(range(*item.indices(d))))
        elif s[dim] >= 0 and not -s[dim] <= item < s[dim]:
            raise n.fail(f"strided slice index {item} is out of range for dim {s[dim]}")
    return [tuple(out)]


@value_rule("STRIDED_SLICE", litert=True)
def strided_slice_value(n: Node, v: list):
    items = strided_slice_items(n.opts, np.shape(v[0]), *(tuple(int(x) for x in np.ravel(a)) for a in v[1:4]))
    index = tuple(it for _, it in items)
    return [np.asarray(v[0][index])]


@CPU.register("DYNAMIC_UPDATE_SLICE", dtypes=FIXED_TYPES + ("complex128",))
def dynamic_update_slice(ctx: KernelContext) -> Run:
    """Start indices are clamped so the update fits (as XLA and LiteRT do)."""
    ctx.expect_inputs(3)
    check_dtype(ctx)
    x, u, (o,) = ctx.inputs[0], ctx.inputs[1], ctx.outputs
    v = ctx.values
    get_start = int_input(ctx, 2)

    def run() -> None:
        a, upd = v[x], v[u]
        start = get_start()
        if np.ndim(upd) != np.ndim(a) or len(start) != np.ndim(a):
            raise ValueError(f"update {np.shape(upd)} / start {list(start)} do not fit operand {np.shape(a)}")
        if any(du > da for du, da in zip(np.shape(upd), np.shape(a))):
            raise ValueError(f"update {np.shape(upd)} larger than operand {np.shape(a)}")
        out = np.array(a, copy=True)
        sl = tuple(slice(s, s + du) for s, du in
                   ((min(max(s, 0), da - du), du) for s, du, da in zip(start, np.shape(upd), np.shape(a))))
        out[sl] = upd
        v[o] = out
    return run


@CPU.register("ONE_HOT", dtypes=("float32", "int32", "int64", "int8", "uint8", "bool"))
def one_hot(ctx: KernelContext) -> Run:
    ctx.expect_inputs(4)
    check_dtype(ctx, 2)
    i_t, d_t, on_t, off_t = ctx.inputs
    (o,) = ctx.outputs
    v = ctx.values
    rank = len(ctx.input_tensor(0).shape)
    axis = int(ctx.options.get("axis", -1))
    if axis == -1:
        axis = rank
    if not 0 <= axis <= rank:
        raise ctx.fail(f"axis {ctx.options.get('axis')} out of range for indices of rank {rank}")
    get_depth = int_input(ctx, 1)
    dt = ctx.output_dtype()
    check = ctx.alloc_check()

    def make_plan(shape: tuple, depth: int) -> tuple:
        """The indices' shape with the new axis, and the depth range along it."""
        if depth < 0:
            raise ValueError(f"depth {depth} must be non-negative")
        check((int(np.prod(shape)), depth))
        along = [1] * (len(shape) + 1)
        along[axis] = depth
        return shape[:axis] + (1,) + shape[axis:], np.arange(depth).reshape(along)
    plan = per_key(make_plan)

    def run() -> None:
        idx = np.asarray(v[i_t])
        (depth,) = get_depth()
        expanded, positions = plan(idx.shape, depth)
        v[o] = np.where(idx.reshape(expanded) == positions, np.asarray(v[on_t], dt), np.asarray(v[off_t], dt))
    return run


@shape_rule("ONE_HOT")
def one_hot_shape(n: Node):
    s, depth = n.shape(0), n.scalar(1)
    if s is None:
        return [None]
    axis = int(n.opts.get("axis", -1))
    a = len(s) if axis == -1 else axis_of(n, axis, len(s), extra=1)
    return [s[:a] + (depth if depth is not None else -1,) + s[a:]]


@CPU.register("WHERE", dtypes=("bool", "float32", "int32", "uint32", "int64", "int8", "uint8"))
def where(ctx: KernelContext) -> Run:
    ctx.expect_inputs(1)
    check_dtype(ctx, same_output=False)
    c, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    dt = ctx.output_dtype()

    def run() -> None:
        cond = np.asarray(v[c])
        v[o] = np.argwhere(cond).astype(dt, copy=False)
    return run


@shape_rule("WHERE")
def where_shape(n: Node):
    s, v = n.shape(0), n.value(0)
    if s is None:
        return [None]
    return [(int(np.count_nonzero(v)) if v is not None else -1, len(s))]


@CPU.register("UNIQUE", dtypes=("float32", "int32", "int64", "int8", "uint8", "int16"))
def unique(ctx: KernelContext) -> Run:
    ctx.expect_inputs(1)
    check_dtype(ctx)
    x, (y, idx) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    idx_dt = ctx.output_dtype(1)

    def run() -> None:
        a = v[x]
        if np.ndim(a) != 1:
            raise ValueError(f"UNIQUE input must be 1-D, has shape {np.shape(a)}")
        vals, first, inverse = np.unique(a, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")        # unique values in order of first appearance
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        v[y] = vals[order]
        v[idx] = rank[inverse.reshape(-1)].astype(idx_dt)
    return run


@shape_rule("UNIQUE")
def unique_shape(n: Node):
    s, v = n.shape(0), n.value(0)
    count = len(np.unique(v)) if v is not None else -1
    return [(count,), s]


# ----------------------------------------------------------------------------- segment reductions

_SEGMENT = {
    "SUM": (np.add, lambda dt: 0),
    "PROD": (np.multiply, lambda dt: 1),
    "MAX": (np.maximum, lambda dt: np.finfo(dt).min if dt.kind == "f" else np.iinfo(dt).min),
    "MIN": (np.minimum, lambda dt: np.finfo(dt).max if dt.kind == "f" else np.iinfo(dt).max),
}


def _segment_reduce(data, ids, n: int, kind: str, dt) -> np.ndarray:
    ufunc, init = _SEGMENT[kind]
    data = np.asarray(data)
    out = np.full((n,) + data.shape[ids.ndim:], init(dt), dtype=dt)
    keep = ids >= 0
    if not keep.all():
        ids, data = ids[keep], data[keep]
    ufunc.at(out, ids.reshape(-1), data.reshape((-1,) + data.shape[ids.ndim:]))
    return out


def _segment_count(ids: np.ndarray) -> int:
    """Number of output rows (max id + 1) for sorted non-negative segment ids; ValueError otherwise."""
    if ids.ndim != 1:
        raise ValueError(f"segment ids must be 1-D, have shape {ids.shape}")
    if not ids.size:
        return 0
    if ids[0] < 0:
        raise ValueError(f"segment ids must be non-negative, the first is {int(ids[0])}")
    down = np.flatnonzero(ids[1:] < ids[:-1])
    if down.size:
        k = int(down[0]) + 1
        raise ValueError(f"segment ids must be sorted: id {int(ids[k])} at position {k} follows "
                         f"{int(ids[k - 1])}")
    return int(ids[-1]) + 1


@CPU.register("SEGMENT_SUM", dtypes=("float32", "int32"))
def segment_sum(ctx: KernelContext) -> Run:
    """TensorFlow's segment_sum: ids sorted and non-negative; ids that do not occur (gaps, or ids
    starting above 0) give zero rows. LiteRT refuses such ids (it requires 0, 1, 2, ... with repeats);
    we accept them, as TensorFlow does, constant or computed at run time."""
    ctx.expect_inputs(2)
    dt = check_dtype(ctx)
    d, s, (o,) = ctx.inputs[0], ctx.inputs[1], ctx.outputs
    v = ctx.values
    ids_const = ctx.const(1)
    check = ctx.alloc_check()
    n_const = None
    if ids_const is not None:
        try:
            n_const = _segment_count(np.asarray(ids_const))
        except ValueError as e:
            raise ctx.fail(str(e)) from None

    def run() -> None:
        data, ids = v[d], np.asarray(v[s])
        n = n_const if n_const is not None else _segment_count(ids)
        if len(ids) != np.shape(data)[0]:
            raise ValueError(f"{len(ids)} segment ids do not match data of shape {np.shape(data)}")
        check((n, *np.shape(data)[1:]))
        v[o] = _segment_reduce(data, ids, n, "SUM", dt)
    return run


@shape_rule("SEGMENT_SUM")
def segment_sum_shape(n: Node):
    s, ids = n.shape(0), n.ints(1)
    if s is None or not s:
        return [None]
    return [((max(ids) + 1 if ids else 0) if ids is not None else -1,) + s[1:]]


def _register_unsorted(kind: str) -> None:
    @CPU.register(f"UNSORTED_SEGMENT_{kind}", dtypes=("float32", "int32"))
    def unsorted_segment(ctx: KernelContext) -> Run:
        ctx.expect_inputs(3)
        dt = check_dtype(ctx)
        d, s, (o,) = ctx.inputs[0], ctx.inputs[1], ctx.outputs
        v = ctx.values
        get_n = int_input(ctx, 2)
        check = ctx.alloc_check()

        def run() -> None:
            data, ids = v[d], np.asarray(v[s])
            (n,) = get_n()
            check((n, *np.shape(data)[ids.ndim:]))
            if np.shape(data)[:ids.ndim] != ids.shape:
                raise ValueError(f"segment ids {ids.shape} are not a prefix of data {np.shape(data)}")
            if ids.size and ids.max() >= n:
                raise IndexError(f"segment id {int(ids.max())} out of range for {n} segments")
            v[o] = _segment_reduce(data, ids, n, kind, dt)
        unsorted_segment.__name__ = f"unsorted_segment_{kind.lower()}"
        return run


for _kind in ("SUM", "PROD", "MAX", "MIN"):
    _register_unsorted(_kind)


# ----------------------------------------------------------------------------- lookups and dense

@CPU.register("EMBEDDING_LOOKUP", dtypes=FIXED_TYPES + ("complex128",))
def embedding_lookup(ctx: KernelContext) -> Run:
    ctx.expect_inputs(2)
    if _is_hybrid_lookup(ctx):
        return _embedding_lookup_hybrid(ctx)
    check_dtype(ctx, 1)
    i_t, w_t, (o,) = ctx.inputs[0], ctx.inputs[1], ctx.outputs
    v = ctx.values
    if len(ctx.input_tensor(1).shape) < 2:
        raise ctx.fail("the lookup table must have rank >= 2 (as LiteRT requires)")

    def run() -> None:
        ids, table = np.asarray(v[i_t]), v[w_t]
        if ids.ndim != 1:
            raise ValueError(f"lookup ids must be 1-D, have shape {ids.shape}")
        _check_indices(ids, np.shape(table)[0], "embedding id")
        v[o] = np.take(table, ids, axis=0)
    return run


def _is_hybrid_lookup(ctx: KernelContext) -> bool:
    """An int8 or uint8 table with quantization and a float32 output: LiteRT's EvalHybrid."""
    t, out = ctx.input_tensor(1), ctx.output_tensor(0)
    return (t is not None and out is not None and t.type_name in ("INT8", "UINT8")
            and out.dtype == np.float32 and qparams(t) is not None)


def _embedding_lookup_hybrid(ctx: KernelContext) -> Run:
    """EMBEDDING_LOOKUP dequantizing its rows, as LiteRT's EvalHybrid: out[i] = float32(table[id]) *
    scale in float32, with the table's one scale, or per channel (along dimension 0, one scale per row)
    the looked-up row's. LiteRT requires the (first) zero point to be 0 and reads no other; it reads a
    uint8 table's bytes as int8 (200 gives -56), which is reproduced."""
    t = ctx.input_tensor(1)
    if len(t.shape) < 2:
        raise ctx.fail("the lookup table must have rank >= 2 (as LiteRT requires)")
    q = qparams(t)
    if int(q.zero_point[0]) != 0:
        raise ctx.fail(f"a hybrid lookup (quantized table, float32 output) needs a symmetric table: zero "
                       f"point {int(q.zero_point[0])}, not 0")
    rows = t.shape[0]
    if q.per_channel and (q.axis != 0 or q.scale.size != rows
                          or q.zero_point.size not in (1, rows)):
        raise ctx.fail(f"a per-channel lookup table needs one scale per row along dimension 0: have "
                       f"{q.scale.size} scales ({q.zero_point.size} zero points) along dimension {q.axis} "
                       f"of shape {list(t.shape)}")
    scale = q.scale.astype(np.float32)
    i_t, w_t, (o,) = ctx.inputs[0], ctx.inputs[1], ctx.outputs
    v = ctx.values

    def run() -> None:
        ids, table = np.asarray(v[i_t]), np.asarray(v[w_t])
        if ids.ndim != 1:
            raise ValueError(f"lookup ids must be 1-D, have shape {ids.shape}")
        _check_indices(ids, table.shape[0], "embedding id")
        rows_ = np.take(table.view(np.int8), ids, axis=0).astype(np.float32)
        s = scale[ids] if q.per_channel else scale[:1]
        v[o] = (rows_ * s.reshape((-1,) + (1,) * (rows_.ndim - 1))).astype(np.float32)
    return run


@shape_rule("EMBEDDING_LOOKUP")
def embedding_lookup_shape(n: Node):
    ids, table = n.shape(0), n.shape(1)
    return [None if ids is None or table is None else ids[:1] + table[1:]]


@CPU.register("SPARSE_TO_DENSE", dtypes=("float32", "int32", "int64", "int8", "uint8", "bool"))
def sparse_to_dense(ctx: KernelContext) -> Run:
    ctx.expect_inputs(4)
    check_dtype(ctx, 2)
    i_t, _, val_t, def_t = ctx.inputs
    (o,) = ctx.outputs
    v = ctx.values
    get_shape = int_input(ctx, 1)
    dt = ctx.output_dtype()
    check = ctx.alloc_check()

    def run() -> None:
        idx, vals = np.asarray(v[i_t]), np.asarray(v[val_t])
        shape = get_shape()
        check(shape)
        if idx.ndim == 0:
            idx = idx.reshape(1, 1)
        elif idx.ndim == 1:
            idx = idx.reshape(-1, 1) if len(shape) == 1 else idx.reshape(1, -1)
        n, k = idx.shape
        if k != len(shape):
            raise ValueError(f"indices of depth {k} for a rank-{len(shape)} output")
        for j in range(k):
            _check_indices(idx[:, j], shape[j], "sparse index")
        out = np.full(shape, np.asarray(v[def_t]).reshape(-1)[0], dtype=dt)
        vals = np.broadcast_to(vals.reshape(-1) if vals.ndim else vals, (n,))
        out[tuple(idx[:, j] for j in range(k))] = vals
        v[o] = out
    return run


@shape_rule("SPARSE_TO_DENSE")
def sparse_to_dense_shape(n: Node):
    idx, out = n.shape(0), shape_from_value(n, 1)
    if idx is not None and len(idx) == 2 and idx[1] >= 0 and out is not None and idx[1] != len(out):
        raise n.fail(f"indices of depth {idx[1]} do not index a rank-{len(out)} output")
    return [out]


@CPU.register("CUMSUM", dtypes=("float32", "int32", "int64"))
def cumsum(ctx: KernelContext) -> Run:
    ctx.expect_inputs(2)
    dt = check_dtype(ctx)
    x, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    get_axis = int_input(ctx, 1)
    exclusive, reverse = bool(ctx.options.get("exclusive", False)), bool(ctx.options.get("reverse", False))

    def run() -> None:
        a = v[x]
        (axis,) = get_axis()
        r = np.ndim(a)
        if not -r <= axis < r:
            raise ValueError(f"axis {axis} out of range for rank {r}")
        axis %= r
        if reverse:
            a = np.flip(a, axis)
        out = np.cumsum(a, axis=axis, dtype=dt)
        if exclusive:
            out = np.concatenate([np.zeros_like(np.take(out, [0], axis=axis)),
                                  np.take(out, np.arange(out.shape[axis] - 1), axis=axis)], axis=axis)
        v[o] = np.flip(out, axis) if reverse else out
    return run


@CPU.register("BUCKETIZE", dtypes=("float32", "float64", "int32", "int64"))
def bucketize(ctx: KernelContext) -> Run:
    ctx.expect_inputs(1)
    check_dtype(ctx, same_output=False)
    x, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    boundaries = np.asarray(ctx.options.get("boundaries", ()) or (), dtype=np.float32)
    if np.any(np.diff(boundaries) < 0):
        raise ctx.fail("boundaries must be sorted")
    dt = ctx.output_dtype()

    def run() -> None:
        a = v[x]
        # bucket = number of boundaries <= x (compared as LiteRT does, in the input's type vs float)
        r = np.searchsorted(boundaries, a, side="right")
        v[o] = r.astype(dt) if isinstance(r, np.ndarray) else dt.type(r)
    return run


@shape_rule("UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_MIN", "UNSORTED_SEGMENT_PROD")
def unsorted_segment_shape(n: Node):
    s, ids, num = n.shape(0), n.shape(1), n.scalar(2)
    if s is None or ids is None:
        return [None]
    if n.litert_quirks and n.value(1) is None:
        num = None                      # LiteRT sizes the output at run time unless the ids are known
    return [(num if num is not None else -1,) + s[len(ids):]]


# Shape rules: every output has input 0's shape.
shape_rule("CUMSUM", "BUCKETIZE", "DYNAMIC_UPDATE_SLICE")(same_shape)


@CPU.register_quantized("EMBEDDING_LOOKUP", dtypes=("int8", "uint8", "int16"))
def embedding_lookup_quantized(ctx: KernelContext) -> Run:
    """LiteRT copies a quantized table's rows to a quantized output of its type (EvalSimple's memcpy), the
    parameters unread; a per-channel table is dequantized by its float (hybrid) path only."""
    t = ctx.input_tensor(1) if len(ctx.inputs) > 1 else None
    q = None if t is None else t.quantization
    if q is not None and np.size(q.scale) > 1:
        raise ctx.fail("a per-channel quantized lookup table needs a float output (LiteRT's hybrid lookup)")
    return embedding_lookup(ctx)


# GATHER (LiteRT copies the integers whatever the output's parameters), SPARSE_TO_DENSE and ONE_HOT (their
# values and default / on and off values copied as integers, no parameter read) move values.
register_value_movers({"SLICE": slice_, "STRIDED_SLICE": strided_slice, "GATHER": gather, "GATHER_ND": gather_nd})
register_value_movers({"SPARSE_TO_DENSE": sparse_to_dense, "ONE_HOT": one_hot}, types=("int8", "uint8"))


# ----------------------------------------------------------------------------------- gradients

def _shape_of(g: gr.GradNode, t: int, dtype=np.int32) -> int:
    """SHAPE(t) as an int32 (or int64) vector."""
    dtype = np.dtype(dtype)
    return g.emit("SHAPE", t, dtype=dtype, out_type=2 if dtype == np.int32 else 4)


@grad_rule("SLICE")
def slice_grad(g: gr.GradNode):
    # dy padded with zeros back to the input's shape: before = begin, after = input - begin - size
    d = g.dy()
    begin, s, so = g.const_input(1), g.shape(0), g.shape(g.op.outputs[0], tensor=True)
    if begin is not None and s is not None and so is not None and all(k >= 0 for k in s + so):
        b = np.ravel(begin).astype(np.int64)
        paddings = g.const(np.stack([b, np.asarray(s, np.int64) - b - np.asarray(so, np.int64)], axis=1), np.int32)
    else:
        b = g.x(1)
        if g.in_dtype(1) != np.int32:
            b = g.emit("CAST", b, dtype=np.int32)
        after = gr.sub(g, gr.sub(g, _shape_of(g, g.x(0)), b), _shape_of(g, d))
        paddings = g.emit("PACK", b, after, dtype=np.int32, axis=1, values_count=2)
    return [g.emit("PAD", d, paddings), None, None]


@CPU.register("OnertPyStridedSliceGrad", dtypes=("float32", "float16", "float64"))
def strided_slice_grad_kernel(ctx: KernelContext) -> Run:
    """onert-py's gradient op: zeros of the shape of input 1 with input 0 written where STRIDED_SLICE
    (the same options; begin, end and strides are inputs 2-4) took its values."""
    ctx.expect_inputs(5)
    d_i, x_i = ctx.inputs[:2]
    (o,) = ctx.outputs
    v = ctx.values
    get_b, get_e, get_s = int_input(ctx, 2), int_input(ctx, 3), int_input(ctx, 4)
    opt, dt = ctx.options, ctx.output_dtype()

    def run() -> None:
        shape = np.shape(v[x_i])
        out = np.zeros(shape, dt)
        out[strided_slice_index(opt, shape, get_b(), get_e(), get_s())] = v[d_i]
        v[o] = out
    return run


@shape_rule("OnertPyStridedSliceGrad")
def strided_slice_grad_shape(n: Node):
    return [n.shape(1)]


@grad_rule("OnertPyStridedSliceGrad")
def strided_slice_grad_grad(g: gr.GradNode):
    return [g.emit("STRIDED_SLICE", g.dy(), g.x(2), g.x(3), g.x(4), **g.opts), None, None, None, None]


@grad_rule("STRIDED_SLICE")
def strided_slice_grad(g: gr.GradNode):
    # the slice's positions are distinct (basic indexing): dy written into zeros of the input's shape
    dx = g.emit("OnertPyStridedSliceGrad", g.dy(), g.x(0), g.x(1), g.x(2), g.x(3),
                custom="OnertPyStridedSliceGrad", **g.opts)
    return [dx, None, None, None]


@CPU.register("OnertPyGatherGrad", dtypes=("float32", "float16", "float64"))
def gather_grad_kernel(ctx: KernelContext) -> Run:
    """onert-py's gradient op: zeros of the shape of input 2, with input 0 added at the positions
    GATHER (options axis, batch_dims) took with the indices of input 1 (repeated indices add up)."""
    ctx.expect_inputs(3)
    d_i, p_i, x_i = ctx.inputs
    (o,) = ctx.outputs
    v = ctx.values
    axis0, bd0 = int(ctx.options.get("axis", 0)), int(ctx.options.get("batch_dims", 0))
    dt = ctx.output_dtype()

    def run() -> None:
        d, idx, shape = np.asarray(v[d_i]), np.asarray(v[p_i]), np.shape(v[x_i])
        axis = axis0 + len(shape) if axis0 < 0 else axis0
        bd = bd0 + idx.ndim if bd0 < 0 else bd0
        _check_indices(idx, shape[axis], "gather index")
        out = np.zeros(shape, dt)
        if bd == 0:
            np.add.at(out, (slice(None),) * axis + (idx,), d)
        else:
            for b in np.ndindex(*shape[:bd]):
                np.add.at(out[b], (slice(None),) * (axis - bd) + (idx[b],), d[b])
        v[o] = out
    return run


@shape_rule("OnertPyGatherGrad")
def gather_grad_shape(n: Node):
    return [n.shape(2)]


@grad_rule("OnertPyGatherGrad")
def gather_grad_grad(g: gr.GradNode):
    return [g.emit("GATHER", g.dy(), g.x(1), axis=int(g.opts.get("axis", 0)),
                   batch_dims=int(g.opts.get("batch_dims", 0))), None, None]


@grad_rule("GATHER")
def gather_grad(g: gr.GradNode):
    # TensorFlow's IndexedSlices, made dense: dy added into zeros at the gathered positions
    dx = g.emit("OnertPyGatherGrad", g.dy(), g.x(1), g.x(0), custom="OnertPyGatherGrad",
                axis=int(g.opts.get("axis", 0)), batch_dims=int(g.opts.get("batch_dims", 0)))
    return [dx, None]


@grad_rule("EMBEDDING_LOOKUP", params=(1,))
def embedding_lookup_grad(g: gr.GradNode):
    if not g.differentiable(1):          # a quantized table (hybrid lookup)
        return [None, None]
    return [None, g.emit("OnertPyGatherGrad", g.dy(), g.x(0), g.x(1), custom="OnertPyGatherGrad",
                         axis=0, batch_dims=0)]


@grad_rule("GATHER_ND")
def gather_nd_grad(g: gr.GradNode):
    # dy scattered (adding up repeated indices) into zeros of the input's shape
    d = g.dy()
    shape = _shape_of(g, g.x(0), g.in_dtype(1))
    return [g.emit("SCATTER_ND", g.x(1), d, shape, dtype=g.b_dtype(d)), None]


@grad_rule("SCATTER_ND")
def scatter_nd_grad(g: gr.GradNode):
    return [None, g.emit("GATHER_ND", g.dy(), g.x(0)) if g.differentiable(1) else None, None]


@grad_rule("CUMSUM")
def cumsum_grad(g: gr.GradNode):
    # each input adds to the outputs after it (before it, reversed): the cumulative sum the other way
    return [g.emit("CUMSUM", g.dy(), g.x(1), exclusive=bool(g.opts.get("exclusive", False)),
                   reverse=not bool(g.opts.get("reverse", False))), None]


@grad_rule("SEGMENT_SUM")
def segment_sum_grad(g: gr.GradNode):
    return [g.emit("GATHER", g.dy(), g.x(1), axis=0, batch_dims=0), None]


no_gradient("ONE_HOT", "WHERE", "UNIQUE", "BUCKETIZE")


@grad_rule("DYNAMIC_UPDATE_SLICE")
def dynamic_update_slice_grad(g: gr.GradNode):
    # the operand gets dy with the updated window zeroed, the update the window of dy (the start clamped
    # as the kernel clamps it so the update fits); the start indices take none
    d = g.dy()
    dx = g.emit("DYNAMIC_UPDATE_SLICE", d, gr.zeros_like(g, g.x(1)), g.x(2)) if g.differentiable(0) else None
    du = None
    if g.differentiable(1):
        start = g.x(2)
        if g.in_dtype(2) != np.int32:
            start = g.emit("CAST", start, dtype=np.int32)
        size = _shape_of(g, g.x(1))
        hi = gr.sub(g, _shape_of(g, g.x(0)), size)
        start = g.emit("MINIMUM", g.emit("MAXIMUM", start, g.const(0, np.int32)), hi)
        du = g.emit("SLICE", d, start, size)
    return [dx, du, None]


def _segment_rows(g: gr.GradNode):
    """For the gradients of UNSORTED_SEGMENT_*: the segment ids clipped at 0 (to gather with) and the
    bool mask of the data rows whose id is not negative, shaped to broadcast against the data
    (TensorFlow's _GatherDropNegatives)."""
    sd, si = g.shape(0), g.shape(1)
    if sd is None or si is None:
        raise g.fail("the gradient of an unsorted segment reduction needs the ranks of the data and ids")
    ids = g.x(1)
    zero = g.const(0, g.in_dtype(1))
    clipped = g.emit("MAXIMUM", ids, zero)
    keep = g.emit("GREATER_EQUAL", ids, zero, dtype=np.bool_)
    extra = len(sd) - len(si)
    if extra:
        shape = g.emit("CONCATENATION", _shape_of(g, ids), g.const(np.ones(extra), np.int32), dtype=np.int32,
                       axis=0, fused_activation_function=0)
        keep = g.emit("RESHAPE", keep, shape, dtype=np.bool_)
    return clipped, keep


def _gather_rows(g: gr.GradNode, t: int, clipped: int) -> int:
    return g.emit("GATHER", t, clipped, axis=0, batch_dims=0)


@grad_rule("UNSORTED_SEGMENT_SUM")
def unsorted_segment_sum_grad(g: gr.GradNode):
    if not g.differentiable(0):
        return [None, None, None]
    clipped, keep = _segment_rows(g)
    return [gr.mask(g, keep, _gather_rows(g, g.dy(), clipped)), None, None]


def _unsorted_segment_min_max_grad(g: gr.GradNode):
    # TensorFlow's _UnsortedSegmentMinOrMaxGrad: the elements equal to their segment's result share its
    # gradient equally
    if not g.differentiable(0):
        return [None, None, None]
    x, ids, n = g.x(0), g.x(1), g.x(2)
    clipped, keep = _segment_rows(g)
    hit = g.emit("EQUAL", x, _gather_rows(g, g.y(), clipped), dtype=np.bool_)
    hit = g.emit("LOGICAL_AND", hit, keep, dtype=np.bool_)
    count = g.emit("UNSORTED_SEGMENT_SUM", g.emit("CAST", hit, dtype=g.b_dtype(x)), ids, n)
    share = _gather_rows(g, gr.div(g, g.dy(), count), clipped)
    return [gr.mask(g, hit, share), None, None]


grad_rule("UNSORTED_SEGMENT_MAX")(_unsorted_segment_min_max_grad)
grad_rule("UNSORTED_SEGMENT_MIN")(_unsorted_segment_min_max_grad)


@grad_rule("UNSORTED_SEGMENT_PROD")
def unsorted_segment_prod_grad(g: gr.GradNode):
    # TensorFlow's _UnsortedSegmentProdGrad: prod / x, or for a zero element the product of the others
    # (none when the segment has two zeros or more)
    if not g.differentiable(0):
        return [None, None, None]
    x, ids, n, d = g.x(0), g.x(1), g.x(2), g.dy()
    clipped, keep = _segment_rows(g)
    zero, one = gr.scalar(g, 0.0, x), gr.scalar(g, 1.0, x)
    is_zero = g.emit("EQUAL", x, zero, dtype=np.bool_)
    zeros = g.emit("UNSORTED_SEGMENT_SUM", g.emit("CAST", is_zero, dtype=g.b_dtype(x)), ids, n)
    d = gr.where(g, g.emit("GREATER", zeros, one, dtype=np.bool_), zero, d)
    nonzero_prod = g.emit("UNSORTED_SEGMENT_PROD", gr.where(g, is_zero, one, x), ids, n)
    partial = gr.where(g, is_zero, _gather_rows(g, nonzero_prod, clipped),
                       gr.div(g, _gather_rows(g, g.y(), clipped), x))
    return [gr.mul(g, gr.mask(g, keep, _gather_rows(g, d, clipped)), partial), None, None]


@grad_rule("SPARSE_TO_DENSE")
def sparse_to_dense_grad(g: gr.GradNode):
    # TensorFlow's _SparseToDenseGrad: the values get dy at their indices, the default value the rest
    dv_on, dd_on = g.differentiable(2), g.differentiable(3)
    if not (dv_on or dd_on):
        return [None, None, None, None]
    si, so = g.shape(0), g.shape(1)
    if si is None or (len(si) == 1 and (so is None or so[0] < 0)):
        raise g.fail("the gradient of SPARSE_TO_DENSE needs the rank of the indices and of the output")
    idx = g.x(0)
    if len(si) < 2:                   # as the kernel reads them: one index, or indices into a vector
        shape = [1, 1] if not si else ([-1, 1] if so[0] == 1 else [1, -1])
        idx = g.emit("RESHAPE", idx, g.const(shape, np.int32), dtype=g.in_dtype(0))
    d = g.dy()
    picked = g.emit("GATHER_ND", d, idx)
    dv = gr.sum_to(g, picked, g.x(2)) if dv_on else None
    dd = None
    if dd_on:
        flat = g.emit("RESHAPE", d, g.const([-1], np.int32))
        axis0 = g.const([0], np.int32)
        rest = gr.sub(g, g.emit("SUM", flat, axis0, keep_dims=False), g.emit("SUM", picked, axis0, keep_dims=False))
        dd = gr.reshape_like(g, rest, g.x(3))
    return [None, None, dv, dd]
