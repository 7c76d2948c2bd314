"""RESIZE_BILINEAR on the jit backend: float32, static shapes and a constant size.

The cpu kernel (backends/cpu/image.py) stays the reference: the same separable passes (along W into a
scratch of the input's height, then along H), the same float32 positions and weights from its
`_bilinear_plan`, the same blend a + (b - a) * t rounded per step, so the results are bit for bit the
cpu kernel's (which are LiteRT's default path's). numpy needs five passes per stage (two gathers, a
subtract, a multiply, an add); here each stage is one pass.
"""
from __future__ import annotations

import numpy as np

from onert_py.backends.cpu._common import Scratch
from onert_py.backends.cpu.image import _bilinear_plan
from onert_py.backends.jit._numba import compile_now, kernel
from onert_py.backends.registry import CPU, JIT, KernelContext, Run

# Below this many output elements the call costs about what the passes save (the cpu kernel's numpy
# passes are ~1 µs each on small tensors).
_MIN_OUTPUT = 2048


@kernel
def _bilinear(x, x0, x1, dx, y0, y1, dy, mid, out):
    """x [N, IH, IW, C] -> mid [N, IH, OW, C] (blend along W) -> out [N, OH, OW*C] (blend along H)."""
    n, ih, _, c = x.shape
    ow = x0.shape[0]
    for b in range(n):
        for r in range(ih):
            for j in range(ow):
                i0, i1, t = x0[j], x1[j], dx[j]
                for ch in range(c):
                    a = x[b, r, i0, ch]
                    mid[b, r, j * c + ch] = a + (x[b, r, i1, ch] - a) * t
        for i in range(out.shape[1]):
            r0, r1, t = y0[i], y1[i], dy[i]
            for k in range(ow * c):
                a = mid[b, r0, k]
                out[b, i, k] = a + (mid[b, r1, k] - a) * t


def _static_size(op, sg):
    """The constant (h, w) of the size input, or None."""
    if len(op.inputs) < 2 or op.inputs[1] < 0:
        return None
    size = sg.tensors[op.inputs[1]].data
    if size is None or np.size(size) != 2:
        return None
    h, w = (int(d) for d in np.ravel(size))
    return (h, w) if h > 0 and w > 0 else None


def _accepts(op, sg) -> bool:
    if not op.inputs or op.inputs[0] < 0 or not op.outputs:
        return False
    x = sg.tensors[op.inputs[0]]
    o = op.options
    if (x.dtype != np.float32 or x.is_dynamic or len(x.shape) != 4 or min(x.shape) <= 0
            or bool(o.get("align_corners")) and bool(o.get("half_pixel_centers"))):
        return False
    size = _static_size(op, sg)
    return size is not None and x.shape[0] * size[0] * size[1] * x.shape[3] >= _MIN_OUTPUT


@JIT.register("RESIZE_BILINEAR", dtypes=("float32",), accepts=_accepts)
def resize_bilinear(ctx: KernelContext) -> Run:
    x_t = ctx.input_tensor(0)
    x_shape = tuple(int(d) for d in x_t.shape)
    n, ih, _, c = x_shape
    oh, ow = _static_size(ctx.op, ctx.subgraph)
    o = ctx.options
    w_pass, h_pass, *_ = _bilinear_plan(x_shape, (oh, ow), bool(o.get("align_corners", False)),
                                        bool(o.get("half_pixel_centers", False)))
    _, x0, x1, dx_rows = w_pass
    _, y0, y1, dy = h_pass
    tables = (x0.astype(np.int64), x1.astype(np.int64), np.ascontiguousarray(dx_rows[:, 0]),
              y0.astype(np.int64), y1.astype(np.int64), np.ascontiguousarray(dy.reshape(-1)))
    out_shape = (n, oh, ow, c)
    mid_n = n * ih * ow * c
    scratch = Scratch.of(ctx, np.float32)
    alloc = ctx.output_buffer(0)
    other_shapes = CPU.kernel("RESIZE_BILINEAR")(ctx)   # a value whose shape differs: numpy's way
    compile_now(_bilinear, np.zeros((1, 1, 1, 1), np.float32), *tables[:3], *tables[3:],
                np.zeros((1, 1, 1), np.float32), np.zeros((1, 1, 1), np.float32))
    x_i, (o_i,), v = ctx.inputs[0], ctx.outputs, ctx.values
    contiguous = np.ascontiguousarray

    def run() -> None:
        x = v[x_i]
        if x.shape != x_shape:
            return other_shapes()
        out = alloc(out_shape)
        mid = scratch.get(mid_n).reshape(n, ih, ow * c)
        _bilinear(contiguous(x), *tables, mid, out.reshape(n, oh, ow * c))
        v[o_i] = out
    return run
