"""jit kernels of the array family (cpu/array.py): a constant PAD / PADV2 of a static float32 tensor; and,
inside compiled loops (jit/loop.py), CONCATENATION and PACK (each input copied to its positions in the
output) and TRANSPOSE (a gather).

The converters' channel padding (a block's input widened to the next block's channels before the
residual ADD: face_detection_short_range has 11, 15 % of its time at 2 threads) and the spatial pads
before strided convolutions are short strided runs for numpy: a fill of the whole output, then a copy
whose inner loop is one pixel's channels (14.8 µs per op on average in that model). Here each output
row (batch x height) is written once, in order: the pad value where the row is border, the input's
pixels with their channel pads between, the rows split over numba's threads when the output is large.
The values are the cpu kernel's: a copy, and the pad value (PAD: 0; PADV2: its constant) as float32.
Quantized pads, mirror pads, ranks above 4 and paddings that are not constant stay with cpu.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from onert_py.backends.cpu._common import NONE
from onert_py.backends.cpu._quant import qparams
from onert_py.backends.cpu.array import _split_into
from onert_py.backends.jit._numba import compile_now, kernel, prange, threads
from onert_py.backends.jit.codegen import (GIVE_UP, Statement, flat_positions, gather_statement, split_statement,
                                            statement)
from onert_py.backends.jit.elementwise import other_shapes
from onert_py.backends.jit.indexing import INDEX_TYPES
from onert_py.backends.registry import JIT, KernelContext, Run

_F32 = np.dtype(np.float32)
# Below this many output values the cpu kernel's numpy calls cost no more than the call into numba.
_MIN_SIZE = 1024
# From this many output values the rows are split over numba's threads (as conv.py's ops).
_PARALLEL_MIN = 1 << 15


@kernel
def _pad_rows(x, y, geo, value, r0, r1):
    """Output rows r0..r1 (r = n * H + h) of y [N, H, W, C] (flat), x [n, h, w, c] (flat) placed at
    (bn, bh, bw, bc); geo = (n, h, w, c, bn, bh, bw, bc, H, W, C). Indices inside a row are unsigned:
    numba wraps negative indices, and LLVM keeps a loop scalar where an index might be one (slice
    assignments instead check the arrays for overlap at every call: twice as slow on 24-channel pixels)."""
    n, h, w, c = geo[0], geo[1], geo[2], geo[3]
    bn, bh, bw, bc = geo[4], geo[5], geo[6], geo[7]
    H, W, C = geo[8], geo[9], geo[10]
    uc, ubc, uC = np.uint64(c), np.uint64(bc), np.uint64(C)
    for r in range(r0, r1):
        row = y[r * W * C:(r + 1) * W * C]
        ni, hi = r // H - bn, r % H - bh
        if ni < 0 or ni >= n or hi < 0 or hi >= h:
            for k in range(row.size):
                row[np.uint64(k)] = value
            continue
        src = x[(ni * h + hi) * w * c:(ni * h + hi + 1) * w * c]
        for k in range(bw * C):
            row[np.uint64(k)] = value
        for k in range((bw + w) * C, W * C):
            row[np.uint64(k)] = value
        for p in range(w):
            o = np.uint64(bw + p) * uC
            i = np.uint64(p) * uc
            for k in range(bc):
                row[o + np.uint64(k)] = value
            for k in range(c):
                row[o + ubc + np.uint64(k)] = src[i + np.uint64(k)]
            for k in range(bc + c, C):
                row[o + np.uint64(k)] = value


@kernel(parallel=True)
def _pad(x, y, geo, value, chunks):
    rows = y.size // (geo[9] * geo[10])
    if chunks > 1:
        for t in prange(chunks):
            q = np.int64(t)
            _pad_rows(x, y, geo, value, q * rows // chunks, (q + 1) * rows // chunks)
    else:
        _pad_rows(x, y, geo, value, 0, rows)


def _constant_pads(op, sg) -> list[tuple[int, int]] | None:
    """The (before, after) pairs of a float32 PAD / PADV2 with constant paddings and value, of a static
    input of rank 1-4 and at least _MIN_SIZE output values; None when the op is not taken."""
    ins = op.inputs
    if len(ins) < 2 or ins[0] < 0 or ins[1] < 0 or len(op.outputs) != 1:
        return None
    x, p, y = sg.tensors[ins[0]], sg.tensors[ins[1]], sg.tensors[op.outputs[0]]
    if (x.dtype != _F32 or y.dtype != _F32 or x.is_dynamic or y.is_dynamic or p.data is None
            or not 1 <= len(x.shape) <= 4):
        return None
    if op.opcode == "PADV2" and len(ins) > 2 and ins[2] >= 0 and sg.tensors[ins[2]].data is None:
        return None
    flat = np.asarray(p.data).reshape(-1)
    if flat.size != 2 * len(x.shape) or (flat < 0).any():
        return None
    pairs = [(int(flat[2 * k]), int(flat[2 * k + 1])) for k in range(len(x.shape))]
    out = tuple(d + b + e for d, (b, e) in zip(x.shape, pairs))
    if out != tuple(y.shape) or int(np.prod(out, dtype=np.int64)) < _MIN_SIZE:
        return None
    return pairs


@JIT.register("PAD", "PADV2", dtypes=("float32",), accepts=lambda op, sg: _constant_pads(op, sg) is not None)
def pad(ctx: KernelContext) -> Run:
    """Each output row written once: border value, pixels, channel pads (see the module's docstring)."""
    pairs = _constant_pads(ctx.op, ctx.subgraph)
    value = np.float32(0.0)
    if ctx.op.opcode == "PADV2" and ctx.has_input(2):
        value = np.float32(np.ravel(ctx.const(2))[0]) + np.float32(0)     # -0.0 pads +0.0, as LiteRT
    shape = tuple(ctx.input_tensor(0).shape)
    lead = 4 - len(shape)
    dims = (1,) * lead + shape
    before = (0,) * lead + tuple(b for b, _ in pairs)
    out_shape = tuple(ctx.output_tensor(0).shape)
    out4 = (1,) * lead + out_shape
    geo = np.array([*dims, *before, *out4[1:]], np.int64)
    example = np.zeros(1, _F32)
    compile_now(_pad, example, example, geo, value, 1)
    parallel = int(np.prod(out_shape, dtype=np.int64)) >= _PARALLEL_MIN
    alloc = ctx.output_buffer(0)
    fallback = other_shapes(ctx)
    x_i, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values

    def run() -> None:
        x = v[x_i]
        if x.shape != shape:        # resized: the cpu kernel
            return fallback()
        if not x.flags.writeable:   # numba compiles read-only arrays apart
            x = np.array(x)
        y = alloc(out_shape)
        chunks = min(threads(), out4[0] * out4[1]) if parallel else 1
        _pad(np.ascontiguousarray(x, _F32).reshape(-1), y.reshape(-1), geo, value, chunks)
        v[o] = y
    return run


# ------------------------------------------------------------ inside compiled loops (jit/loop.py)

def _placed(parts: list[np.ndarray]) -> Statement:
    """out[parts[j][k]] = input j's element k: each input's flat positions in the output."""
    def emit(out, ins, arg, tmp):
        lines = []
        for j, (name, where) in enumerate(zip(ins, parts)):
            at = arg(f"at{j}", np.ascontiguousarray(where, np.int64).reshape(-1))
            lines += [f"for k in range({where.size}):", f"    {out}[{at}[k]] = {name}[k]"]
        return lines
    return Statement(tuple(range(len(parts))), emit)


def _joined(op, sg) -> tuple[list, object] | None:
    """(input tensors, output tensor) of a CONCATENATION / PACK the loop copies as it is: one type, no
    quantization or fused activation."""
    ins = [sg.tensors[t] if t >= 0 else None for t in op.inputs]
    out = sg.tensors[op.outputs[0]]
    if (not ins or any(t is None or t.dtype != out.dtype or qparams(t) for t in ins) or qparams(out)
            or op.options.get("fused_activation_function", NONE) not in (NONE, None)):
        return None
    return ins, out


@statement("CONCATENATION", spans=True)
def _concatenation(op, sg) -> Statement | None:
    got = _joined(op, sg)
    if got is None:
        return None
    ins, out = got
    if any(t.is_dynamic or -1 in tuple(t.shape_signature or ()) for t in ins):
        return _set_item(op, sg)
    shapes = [tuple(t.shape) for t in ins]
    rank = len(out.shape)
    if any(len(s) != rank for s in shapes) or rank == 0:
        return None
    axis = int(op.options.get("axis", 0))
    axis += rank if axis < 0 else 0
    if not 0 <= axis < rank or sum(s[axis] for s in shapes) != out.shape[axis]:
        return None
    parts = np.split(flat_positions(out.shape), np.cumsum([s[axis] for s in shapes])[:-1], axis=axis)
    # each input's positions have its shape: the other dims agree with the declared output's
    return _placed(parts) if all(p.shape == s for p, s in zip(parts, shapes)) else None


@statement("PACK")
def _pack(op, sg) -> Statement | None:
    got = _joined(op, sg)
    if got is None:
        return None
    ins, out = got
    shape = tuple(ins[0].shape)
    axis = int(op.options.get("axis", 0))
    axis += len(shape) + 1 if axis < 0 else 0
    if any(tuple(t.shape) != shape for t in ins) or not 0 <= axis <= len(shape) \
            or tuple(out.shape) != shape[:axis] + (len(ins),) + shape[axis:]:
        return None
    return _placed(_slices_along(out.shape, axis, len(ins)))


def _slices_along(shape, axis: int, n: int) -> list[np.ndarray]:
    """The flat positions of an array of `shape` at index j of `axis`, for j < n (PACK's inputs in its
    output; UNPACK's outputs in its input)."""
    positions = flat_positions(shape)
    return [np.take(positions, j, axis=axis) for j in range(n)]


@statement("TRANSPOSE")
def _transpose(op, sg) -> Statement | None:
    if len(op.inputs) != 2 or min(op.inputs) < 0:
        return None
    x, perm_t, out = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]], sg.tensors[op.outputs[0]]
    if perm_t.data is None or perm_t.dtype.kind not in "iu" or x.dtype != out.dtype:
        return None
    rank = len(x.shape)
    perm = [int(p) + rank if int(p) < 0 else int(p) for p in np.ravel(perm_t.data)]
    if sorted(perm) != list(range(rank)):
        return None
    index = np.transpose(flat_positions(x.shape), perm)
    return gather_statement(index) if tuple(index.shape) == tuple(out.shape) else None


def _split_parts(op, sg, x_at: int, axis_at: int, sizes_of: Callable[[int], list[int] | None]) -> Statement | None:
    """SPLIT / SPLIT_V as the cpu kernel's `_split_into` applied to x's flat positions, along a
    constant axis, into sizes_of(the axis's length) (None: not taken), which the declared outputs must
    have."""
    if min(op.inputs) < 0:
        return None
    x, axis_t = sg.tensors[op.inputs[x_at]], sg.tensors[op.inputs[axis_at]]
    outs = [sg.tensors[t] for t in op.outputs]
    if axis_t.data is None or axis_t.dtype.kind not in "iu" or np.size(axis_t.data) != 1 \
            or any(t.dtype != x.dtype or qparams(t) for t in outs) or qparams(x):
        return None
    rank, axis = len(x.shape), int(np.ravel(axis_t.data)[0])
    axis += rank if axis < 0 else 0
    if not 0 <= axis < rank:
        return None
    sizes = sizes_of(int(x.shape[axis]))
    if sizes is None or len(sizes) != len(outs) or sum(sizes) != x.shape[axis]:
        return None
    parts: dict = {}
    _split_into(flat_positions(x.shape), sizes, axis, range(len(outs)), parts)
    if any(tuple(parts[j].shape) != tuple(t.shape) for j, t in enumerate(outs)):
        return None
    return split_statement([parts[j] for j in range(len(outs))], inputs=(x_at,))


@statement("SPLIT")
def _split(op, sg) -> Statement | None:
    n = len(op.outputs)
    return None if len(op.inputs) != 2 else _split_parts(
        op, sg, 1, 0, lambda dim: [dim // n] * n if dim % n == 0 else None)


@statement("SPLIT_V")
def _split_v(op, sg) -> Statement | None:
    if len(op.inputs) != 3 or op.inputs[1] < 0:
        return None
    sizes_t = sg.tensors[op.inputs[1]]
    if sizes_t.data is None or sizes_t.dtype.kind not in "iu":
        return None
    given = [int(k) for k in np.ravel(sizes_t.data)]
    if any(k < 0 for k in given):
        return None   # a -1 (the rest) or a bad size: the cpu kernel resolves or refuses it
    return _split_parts(op, sg, 0, 2, lambda dim: given)


@statement("UNPACK")
def _unpack(op, sg) -> Statement | None:
    if len(op.inputs) != 1 or op.inputs[0] < 0:
        return None
    x = sg.tensors[op.inputs[0]]
    outs = [sg.tensors[t] for t in op.outputs]
    rank = len(x.shape)
    axis = int(op.options.get("axis", 0))
    axis += rank if axis < 0 else 0
    if not 0 <= axis < rank or x.shape[axis] != len(outs) or qparams(x) \
            or any(t.dtype != x.dtype or qparams(t) for t in outs):
        return None
    parts = _slices_along(x.shape, axis, len(outs))
    if any(tuple(p.shape) != tuple(t.shape) for p, t in zip(parts, outs)):
        return None
    return split_statement(parts)


def _producer(sg, t: int):
    return next((o for o in sg.operations if t in o.outputs), None)


def _set_item(op, sg) -> Statement | None:
    """The converter's TensorListSetItem (a Keras layer's `return_sequences`, a TensorArray written in a
    loop): CONCATENATION along axis 0 of [SLICE(L, 0, [k, -1, ..]), item, SLICE(L, [k + r, 0, ..], [-1,
    ..])], the slices' shapes known only at run time. As one statement: L with rows k .. k + r replaced
    by the item's r rows. begin and size are read at run time and checked against that form (a
    negative size -1: to the end); anything else gives up, and the executors' SLICE kernels run it."""
    if len(op.inputs) != 3 or int(op.options.get("axis", 0)) != 0:
        return None
    first, second = _producer(sg, op.inputs[0]), _producer(sg, op.inputs[2])
    if first is None or second is None or first is second or any(
            p.opcode != "SLICE" or len(p.inputs) != 3 or min(p.inputs) < 0 for p in (first, second)) \
            or first.inputs[0] != second.inputs[0]:
        return None
    whole, item, out = (sg.tensors[t] for t in (first.inputs[0], op.inputs[1], op.outputs[0]))
    shape = tuple(whole.shape)
    if not shape or tuple(out.shape) != shape or whole.dtype != out.dtype or item.dtype != out.dtype \
            or tuple(item.shape)[1:] != shape[1:] or len(item.shape) != len(shape) \
            or any(tuple(sg.tensors[t].shape) != (len(shape),) or sg.tensors[t].dtype not in INDEX_TYPES
                   for t in (*first.inputs[1:], *second.inputs[1:])):
        return None
    rows, r = shape[0], int(item.shape[0])
    inner = int(np.prod(shape[1:], dtype=np.int64))

    def emit(out_name, ins, arg, tmp):
        x, begin_a, size_a, begin_b, size_b, it = ins
        k = tmp("k")
        bad = [f"{begin_a}[0] != 0", f"{k} < 0", f"{k} + {r} > {rows}", f"{begin_b}[0] != {k} + {r}",
               f"({size_b}[0] != -1 and {size_b}[0] != {rows} - {k} - {r})"]
        for d in range(1, len(shape)):
            bad += [f"{begin_a}[{d}] != 0", f"{begin_b}[{d}] != 0",
                    f"({size_a}[{d}] != -1 and {size_a}[{d}] != {shape[d]})",
                    f"({size_b}[{d}] != -1 and {size_b}[{d}] != {shape[d]})"]
        return [f"{k} = np.int64({size_a}[0])", f"if {' or '.join(bad)}:", f"    {GIVE_UP}",
                f"for q in range({rows * inner}):", f"    {out_name}[q] = {x}[q]",
                f"for q in range({r * inner}):", f"    {out_name}[{k} * {inner} + q] = {it}[q]"]
    tensors = (first.inputs[0], *first.inputs[1:], *second.inputs[1:], op.inputs[1])
    return Statement(tuple(range(6)), emit, fails=True, tensors=tensors, absorbs=(first.index, second.index))
