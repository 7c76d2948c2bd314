"""jit facets of the indexing family (cpu/indexing.py) inside compiled loops (jit/loop.py): STRIDED_SLICE,
SLICE and GATHER as gathers (codegen.gather_statement). Where the op's parameters are constants, the
index of every output element is the cpu helper's slice of an array of flat positions, made when the
loop is compiled. The converters' `xs[t]` (a STRIDED_SLICE whose begin is the loop counter, shrinking
that axis) and `tf.gather(xs, t)` read the index at run time: the positions are made for index 0 and
shifted by the index times the axis's stride; an index out of range leaves the loop to the executors,
whose kernels raise the op's error.
"""
from __future__ import annotations

import numpy as np

from onert_py.backends.cpu.indexing import strided_slice_index, strided_slice_items
from onert_py.backends.jit.codegen import GIVE_UP, Statement, flat_positions, gather_statement, statement

# the index types of positions, begins and sizes read at run time (also jit/array.py's set-item)
INDEX_TYPES = (np.dtype(np.int32), np.dtype(np.int64))


def _tensors(op, sg):
    return [sg.tensors[t] if t >= 0 else None for t in op.inputs], sg.tensors[op.outputs[0]]


def _fits(index: np.ndarray, out) -> bool:
    """The positions computed give the declared output (a file can declare another shape)."""
    return tuple(index.shape) == tuple(out.shape)


def _ints(t) -> tuple[int, ...] | None:
    if t is None or t.data is None or t.dtype not in INDEX_TYPES:
        return None
    return tuple(int(x) for x in np.ravel(t.data))


@statement("STRIDED_SLICE")
def _strided_slice(op, sg) -> Statement | None:
    ins, out = _tensors(op, sg)
    if len(ins) != 4 or any(t is None for t in ins) or ins[0].dtype != out.dtype:
        return None
    x, begin, end, strides = ins
    stride_values = _ints(strides)
    if stride_values is None:
        return None
    shape = tuple(x.shape)
    b, e = _ints(begin), _ints(end)
    if b is not None and e is not None:
        try:
            index = flat_positions(x.shape)[strided_slice_index(op.options, shape, b, e, stride_values)]
        except (ValueError, IndexError):
            return None   # the cpu kernel gives the error
        return gather_statement(index) if _fits(index, out) else None
    return _strided_slice_at_run_time(op, x, begin, out, stride_values)


def _strided_slice_at_run_time(op, x, begin, out, strides) -> Statement | None:
    """Begin read at run time: every entry of the spec shrinks its axis (its index: begin's element) or
    takes the whole axis (begin and end masks both set, so begin and end are not read there)."""
    opts = op.options
    bm, em, sam = (int(opts.get(k, 0)) for k in ("begin_mask", "end_mask", "shrink_axis_mask"))
    if int(opts.get("ellipsis_mask", 0)) or int(opts.get("new_axis_mask", 0)) or begin.dtype not in INDEX_TYPES:
        return None
    n, shape = len(strides), tuple(x.shape)
    if tuple(begin.shape) != (n,) or n > len(shape):
        return None
    shrunk = [i for i in range(n) if sam >> i & 1]
    if not shrunk or any(not (sam >> i & 1) and not (bm >> i & 1 and em >> i & 1) for i in range(n)):
        return None
    try:
        items = strided_slice_items(opts, shape, [0] * n, [0] * n, strides)
    except ValueError:
        return None
    index = flat_positions(x.shape)[tuple(item for _, item in items)]   # shrunk axes at index 0
    if not _fits(index, out):
        return None
    axis_strides = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape))]

    def offset(ins, tmp):
        off, b = tmp("off"), tmp("b")
        lines = [f"{off} = 0"]
        for i in shrunk:   # spec entry i is axis i: no ellipsis or new axis before it
            lines += [f"{b} = np.int64({ins[1]}[{i}])", f"if {b} < 0:", f"    {b} += {shape[i]}",
                      f"if {b} < 0 or {b} >= {shape[i]}:", f"    {GIVE_UP}",
                      f"{off} += {b} * {axis_strides[i]}"]
        return lines
    return gather_statement(index, offset, inputs=(0, 1))


@statement("SLICE")
def _slice(op, sg) -> Statement | None:
    ins, out = _tensors(op, sg)
    if len(ins) != 3 or any(t is None for t in ins) or ins[0].dtype != out.dtype:
        return None
    begin, size = _ints(ins[1]), _ints(ins[2])
    shape = tuple(ins[0].shape)
    if begin is None or size is None or not len(begin) == len(size) == len(shape):
        return None
    items = []
    for b, s, d in zip(begin, size, shape):
        end = d if s == -1 else b + s
        if b < 0 or s < -1 or end > d or b > d:
            return None   # the cpu kernel gives the error
        items.append(slice(b, end))
    index = flat_positions(ins[0].shape)[tuple(items)]
    return gather_statement(index) if _fits(index, out) else None


@statement("GATHER")
def _gather(op, sg) -> Statement | None:
    """GATHER of an axis (no batch dims) at positions of any static shape, constant or read at run time:
    out[outer, j, inner] = x[outer, idx[j], inner]."""
    ins, out = _tensors(op, sg)
    if len(ins) != 2 or any(t is None for t in ins) or ins[0].dtype != out.dtype:
        return None
    x, positions = ins
    if positions.dtype not in INDEX_TYPES or int(op.options.get("batch_dims", 0)):
        return None
    shape = tuple(x.shape)
    axis = int(op.options.get("axis", 0))
    axis += len(shape) if axis < 0 else 0
    if not 0 <= axis < len(shape):
        return None
    count = int(np.prod(positions.shape, dtype=np.int64))
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    if tuple(out.shape) != shape[:axis] + tuple(positions.shape) + shape[axis + 1:]:
        return None
    dim = shape[axis]

    def emit(o, ins, arg, tmp):
        x_, idx = ins
        j, b, r, p = tmp("j"), tmp("b"), tmp("r"), tmp("p")
        return [f"for {j} in range({count}):", f"    {b} = np.int64({idx}[{j}])",
                f"    if {b} < 0 or {b} >= {dim}:", f"        {GIVE_UP}",
                f"    for {p} in range({outer}):",
                f"        for {r} in range({inner}):",
                f"            {o}[({p} * {count} + {j}) * {inner} + {r}] = {x_}[({p} * {dim} + {b}) * {inner} + {r}]"]
    return Statement((0, 1), emit, fails=True)
