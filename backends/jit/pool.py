"""AVERAGE_POOL_2D and MAX_POOL_2D on the jit backend: float32, and quantized int8.

One pass over the output rows, each made in cache from its window's input rows (see "kernels" below:
the in-bounds rows combined into one row, then each output pixel's in-bounds columns, channels
innermost), the average divided by the count of in-bounds taps (LiteRT's rule, the cpu kernel's
`_plan`), the fused activation applied before the row is left. Output rows (batch x output height) are
split over numba's threads. Geometry, padding, the activation range and the quantized rounding are the
cpu module's (backends/cpu/pool.py), which stays the reference and takes every pool declined here
(L2_POOL_2D, TANH / SIGN_BIT activations, other types, dynamic shapes, the shapes where its numpy
passes win: `_wins`).
"""
from __future__ import annotations

import numpy as np

from onert_py.backends.cpu._common import NONE, RELU, RELU6, RELU_N1_TO_1
from onert_py.backends.cpu._quant import qparams
from onert_py.backends.cpu.conv import SAME, VALID, conv_output_size, conv_padding, padding_code
from onert_py.backends.cpu.elementwise import q_activation_range
from onert_py.backends.cpu.pool import _pool_window
from onert_py.backends.jit._numba import kernel, prange, threads
from onert_py.backends.registry import JIT, KernelContext, Run

_FLOAT_RANGE = {NONE: (-np.inf, np.inf), RELU: (0.0, np.inf), RELU_N1_TO_1: (-1.0, 1.0), RELU6: (0.0, 6.0)}

# Below this much work (output elements x (kh + kw * W / OW) operations) a pool runs on one thread:
# waking numba's threads costs more than the split saves.
_PARALLEL_MIN = 1 << 15


# ------------------------------------------------------------------------------------- kernels
# x and y are NHWC arrays passed flat (1-D, C-contiguous; shapes as ints). Output row r = (batch b,
# output row oy) is made in two steps, as the cpu kernel's passes but per row, in cache: its window's
# in-bounds input rows [ys, ye) (padding is never part of a window) are combined into one row of W*C
# values (long contiguous vector loops, whatever C), then each output pixel combines the in-bounds
# columns [xs, xe) of that row, channels innermost; with stride 1 the interior pixels' columns are
# whole contiguous spans. That is kh + kw operations per output element instead of kh * kw: measured
# faster than a direct window loop on every shape tried (1.3x on 3x3/2 with 64 channels, 10x on 5x5/1
# with 3). Every span is a 1-D slice indexed from 0: LLVM then drops numba's negative-index wraparound
# and vectorises (an offset index k + d kept a 3x3/1 pool 4x slower), and no reshape runs per row (each
# one is a C call: ~90 ns a row before).


@kernel
def _vmax(a, v):
    """np.maximum: for floats a NaN wins (as the cpu kernel's ufunc); for integers the max."""
    return v if (v > a) | (v != v) else a


@kernel
def _span(i, size, k, stride, pad):
    """[start, end): the in-bounds taps of window i along an axis."""
    start = i * stride - pad
    return max(start, 0), min(start + k, size)


@kernel
def _interior(ow, w, kw, sw, pl):
    """[oa, ob): the output columns whose windows lie wholly inside the input (oa == ob: none)."""
    oa = min((pl + sw - 1) // sw, ow)
    ob = min(max((w - kw + pl) // sw + 1, oa), ow)
    return oa, ob


@kernel
def _rows(xb, ys, ye, buf, is_max):
    """Rows [ys, ye) of xb (one image, flat) combined (max, or sum in buf's type) into buf (W*C)."""
    n = buf.size
    a = xb[ys * n:(ys + 1) * n]
    if ye - ys == 1:
        for k in range(n):
            buf[k] = a[k]
        return
    b = xb[(ys + 1) * n:(ys + 2) * n]
    if is_max:
        for k in range(n):
            buf[k] = _vmax(a[k], b[k])
        for iy in range(ys + 2, ye):
            t = xb[iy * n:(iy + 1) * n]
            for k in range(n):
                buf[k] = _vmax(buf[k], t[k])
    else:
        for k in range(n):
            buf[k] = a[k] + b[k]
        for iy in range(ys + 2, ye):
            t = xb[iy * n:(iy + 1) * n]
            for k in range(n):
                buf[k] += t[k]


@kernel
def _cols(rows, out, w, c, kw, sw, pl, is_max):
    """out (OW*C) = the windows of rows (W*C) along W combined (max or sum), edges without padding."""
    ow = out.size // c
    if c == 1:      # one channel: a scalar loop per pixel, no channel loops of one
        for ox in range(ow):
            xs, xe = _span(ox, w, kw, sw, pl)
            a = rows[xs]
            for ix in range(xs + 1, xe):
                a = _vmax(a, rows[ix]) if is_max else a + rows[ix]
            out[ox] = a
        return
    oa, ob = _interior(ow, w, kw, sw, pl)
    if sw != 1:
        oa = ob = ow
    if ob > oa:     # stride 1: out[ox] combines rows[ox - pl + j], j < kw: flat spans over (ox, c)
        fo = out[oa * c:ob * c]
        n = fo.size
        t = rows[(oa - pl) * c:]
        for k in range(n):
            fo[k] = t[k]
        for j in range(1, kw):
            t = rows[(oa - pl + j) * c:]
            if is_max:
                for k in range(n):
                    fo[k] = _vmax(fo[k], t[k])
            else:
                for k in range(n):
                    fo[k] += t[k]
    for ox in range(ow):
        if oa <= ox < ob:
            continue
        xs, xe = _span(ox, w, kw, sw, pl)
        o, t = out[ox * c:(ox + 1) * c], rows[xs * c:(xs + 1) * c]
        for ch in range(c):
            o[ch] = t[ch]
        for ix in range(xs + 1, xe):
            t = rows[ix * c:(ix + 1) * c]
            if is_max:
                for ch in range(c):
                    o[ch] = _vmax(o[ch], t[ch])
            else:
                for ch in range(c):
                    o[ch] += t[ch]


@kernel
def _clamp(f, lo, hi):
    """The fused activation's range in place; comparisons, not min/max: NaN stays NaN (as np.clip)."""
    for k in range(f.size):
        v = f[k]
        if v < lo:
            v = lo
        if v > hi:
            v = hi
        f[k] = v


@kernel
def _average_f32(out, c, n_rows, w, kw, sw, pl):
    """out (OW*C) sums divided by their windows' in-bounds tap counts (n_rows * columns)."""
    ow = out.size // c
    oa, ob = _interior(ow, w, kw, sw, pl)
    fo = out[oa * c:ob * c]
    count = np.float32(n_rows * kw)
    for k in range(fo.size):
        fo[k] = fo[k] / count
    for ox in range(ow):
        if oa <= ox < ob:
            continue
        xs, xe = _span(ox, w, kw, sw, pl)
        count = np.float32(n_rows * (xe - xs))
        o = out[ox * c:(ox + 1) * c]
        for ch in range(c):
            o[ch] = o[ch] / count


@kernel
def _average_i8(acc, out, c, n_rows, w, kw, sw, pl, lo, hi):
    """out (OW*C, int8) = the int32 sums acc divided as LiteRT's integer average pool: (|sum| + count/2)
    / count, the sign put back (halves away from zero), clamped to [lo, hi]. The quotient
    floor(m / count) is taken in float64, exact for m < 2**53 and vectorised (integer division is not)."""
    ow = out.size // c
    oa, ob = _interior(ow, w, kw, sw, pl)
    fa, fo = acc[oa * c:ob * c], out[oa * c:ob * c]
    count = n_rows * kw
    half, dcount = count // 2, np.float64(count)
    for k in range(fo.size):
        a = fa[k]
        q = np.int32(np.floor((abs(a) + half) / dcount))
        fo[k] = min(max(q if a >= 0 else -q, lo), hi)
    for ox in range(ow):
        if oa <= ox < ob:
            continue
        xs, xe = _span(ox, w, kw, sw, pl)
        count = n_rows * (xe - xs)
        half, dcount = count // 2, np.float64(count)
        t, o = acc[ox * c:(ox + 1) * c], out[ox * c:(ox + 1) * c]
        for ch in range(c):
            a = t[ch]
            q = np.int32(np.floor((abs(a) + half) / dcount))
            o[ch] = min(max(q if a >= 0 else -q, lo), hi)


@kernel
def _pool_rows(x, y, h, w, c, oh, ow, r0, r1, kh, kw, sh, sw, pt, pl, lo, hi, is_max):
    """Output rows [r0, r1) of a float32 pool, or an int8 max pool."""
    image, rowlen, out_len = h * w * c, w * c, ow * c
    buf = np.empty(rowlen, x.dtype)
    for r in range(r0, r1):
        b, oy = r // oh, r % oh
        ys, ye = _span(oy, h, kh, sh, pt)
        _rows(x[b * image:(b + 1) * image], ys, ye, buf, is_max)
        out = y[r * out_len:(r + 1) * out_len]
        _cols(buf, out, w, c, kw, sw, pl, is_max)
        if not is_max:
            _average_f32(out, c, ye - ys, w, kw, sw, pl)
        _clamp(out, lo, hi)


@kernel
def _avg_rows_i8(x, y, h, w, c, oh, ow, r0, r1, kh, kw, sh, sw, pt, pl, lo, hi):
    """Output rows [r0, r1) of an int8 average pool: exact int32 sums, then LiteRT's rounding."""
    image, rowlen, out_len = h * w * c, w * c, ow * c
    buf = np.empty(rowlen, np.int32)
    acc = np.empty(out_len, np.int32)
    for r in range(r0, r1):
        b, oy = r // oh, r % oh
        ys, ye = _span(oy, h, kh, sh, pt)
        _rows(x[b * image:(b + 1) * image], ys, ye, buf, False)
        _cols(buf, acc, w, c, kw, sw, pl, False)
        _average_i8(acc, y[r * out_len:(r + 1) * out_len], c, ye - ys, w, kw, sw, pl, lo, hi)


# The drivers: all N*OH output rows, in `chunks` contiguous parts on numba's threads when chunks > 1
# (a parallel=True function taking the serial branch costs ~1 µs more than a plain one; waking the
# threads ~3 µs more). Each part has its own scratch rows.

@kernel(parallel=True)
def _pool(x, y, n, h, w, c, oh, ow, kh, kw, sh, sw, pt, pl, lo, hi, is_max, chunks):
    rows = n * oh
    if chunks > 1:
        for t in prange(chunks):
            _pool_rows(x, y, h, w, c, oh, ow, t * rows // chunks, (t + 1) * rows // chunks,
                       kh, kw, sh, sw, pt, pl, lo, hi, is_max)
    else:
        _pool_rows(x, y, h, w, c, oh, ow, 0, rows, kh, kw, sh, sw, pt, pl, lo, hi, is_max)


@kernel(parallel=True)
def _avg_pool_i8(x, y, n, h, w, c, oh, ow, kh, kw, sh, sw, pt, pl, lo, hi, is_max, chunks):
    rows = n * oh
    if chunks > 1:
        for t in prange(chunks):
            _avg_rows_i8(x, y, h, w, c, oh, ow, t * rows // chunks, (t + 1) * rows // chunks,
                         kh, kw, sh, sw, pt, pl, lo, hi)
    else:
        _avg_rows_i8(x, y, h, w, c, oh, ow, 0, rows, kh, kw, sh, sw, pt, pl, lo, hi)


# ------------------------------------------------------------------------------- registration

def _window(op) -> tuple[int, int, int, int, int] | None:
    """(kh, kw, sh, sw, padding) of a pool's options, None when the cpu kernel must judge them."""
    o = op.options
    kh, kw = o.get("filter_height", 1), o.get("filter_width", 1)
    sh, sw = o.get("stride_h", 1), o.get("stride_w", 1)
    padding = o.get("padding", SAME)
    if min(kh, kw, sh, sw) < 1 or padding not in (SAME, VALID):
        return None
    return kh, kw, sh, sw, padding


def _static_pair(op, sg, type_name: str):
    """The input and output tensors of a pool with static rank-4 shapes of `type_name`, else None."""
    if len(op.inputs) != 1 or len(op.outputs) != 1 or op.inputs[0] < 0:
        return None
    x_t, y_t = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
    if x_t.type_name != type_name or y_t.type_name != type_name or x_t.is_dynamic or len(x_t.shape) != 4:
        return None
    return x_t, y_t


def _wins(x_shape: tuple[int, ...], win: tuple[int, int, int, int, int], kind: str) -> bool:
    """Where the jit pool beats the cpu kernel (benchmarks/jit_pool_matmul.py, 1 thread, median µs
    cpu/jit). kind: "float", "qmax" or "qavg".

    Float, more than one channel: 1.2x-5x on every shape measured (3x3/2 SAME on 112x112x64 380/226,
    2x2/2 on 56x56x64 46/35, 3x3/1 on 35x35x192 145/122, global 7x7 on 1280 channels 11.6/8.0, 5x5/1
    on 64x64x3 46/22). One channel: the jit kernel spends ~4 ns per output pixel where the cpu kernel's
    passes run over whole rows: 2x2/2 on 16x16x1 3.9/2.3 and 32x32x1 4.3/3.2, but 64x64x1 5.5/6.6 and
    128x128x1 8.8/21.2; 3x3/2 SAME on 64x64x1 13.7/7.2 but 128x128x1 20.5/22.5. One rule: one channel
    is declined from 512 outputs (giving up a few smaller wins).
    int8: the cpu kernel's integer pools are its general passes over int64; the jit kernel is 2x-33x
    faster (3x3/2 max on 112x112x64 165/58, 3x3/1 average on 35x35x192 6849/205), average pools
    always, max pools with one channel up to 2x2/2 on 128x128x1 (4096 outputs: 19.1/14.9) but not on
    256x256x1 (29.3/51.2): one-channel max pools are declined from 8192 outputs."""
    n, h, w, c = x_shape
    kh, kw, sh, sw, padding = win
    if c != 1 or kind == "qavg":
        return True
    outputs = n * conv_output_size(h, kh, sh, 1, padding) * conv_output_size(w, kw, sw, 1, padding)
    return outputs < (512 if kind == "float" else 8192)


def _accepts_float(op, sg) -> bool:
    pair = _static_pair(op, sg, "FLOAT32")
    win = _window(op)
    act = op.options.get("fused_activation_function", NONE) or NONE
    return pair is not None and win is not None and act in _FLOAT_RANGE and \
        _wins(tuple(pair[0].shape), win, "float")


def _accepts_int8(kind: str):
    def accepts(op, sg) -> bool:
        pair = _static_pair(op, sg, "INT8")
        win = _window(op)
        if pair is None or win is None:
            return False
        q = qparams(pair[1])
        act = op.options.get("fused_activation_function", NONE) or NONE
        return q is not None and not q.per_channel and act in _FLOAT_RANGE and \
            _wins(tuple(pair[0].shape), win, kind)
    return accepts


def _prepare(ctx: KernelContext, pool, lo, hi, is_max: bool) -> Run:
    """A run closure calling `pool` (one of the drivers above) on the input, into a planned output."""
    _, kh, kw, sh, sw = _pool_window(ctx)           # the cpu kernel's checks and messages
    padding = padding_code(ctx)
    x_i, (o_i,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    alloc = ctx.output_buffer(0)
    geometry: dict = {}

    def plan(shape: tuple[int, ...]) -> tuple:
        n, h, w, c = shape
        oh, ow = conv_output_size(h, kh, sh, 1, padding), conv_output_size(w, kw, sw, 1, padding)
        pt, pl = conv_padding(h, kh, sh, 1, padding, oh)[0], conv_padding(w, kw, sw, 1, padding, ow)[0]
        # (kh + W/OW * kw) operations per output element, roughly
        work = n * oh * ow * c * (kh + max(w // max(ow, 1), 1) * kw)
        if len(geometry) > 8:       # a shape that keeps changing: do not hoard plans
            geometry.clear()
        g = geometry[shape] = ((n, oh, ow, c), (n, h, w, c, oh, ow, kh, kw, sh, sw, pt, pl, lo, hi, is_max),
                               work >= _PARALLEL_MIN)
        return g

    def run() -> None:
        x = v[x_i]
        g = geometry.get(x.shape) or plan(x.shape)
        y = alloc(g[0])
        if y.size:
            chunks = min(threads(), g[0][0] * g[0][1]) if g[2] else 1
            # flat views (y is a fresh or planned array: contiguous, reshape(-1) is a view of it)
            pool(np.ascontiguousarray(x).reshape(-1), y.reshape(-1), *g[1], chunks)
        v[o_i] = y
    return run


def _prepare_float(ctx: KernelContext, is_max: bool) -> Run:
    lo, hi = _FLOAT_RANGE[ctx.options.get("fused_activation_function", NONE) or NONE]
    return _prepare(ctx, _pool, np.float32(lo), np.float32(hi), is_max)


def _prepare_int8(ctx: KernelContext, is_max: bool) -> Run:
    # LiteRT's quantized pools do not rescale: the output's parameters only give the activation range
    qo = qparams(ctx.output_tensor(0))
    lo, hi = q_activation_range(ctx, float(qo.scale[0]), int(qo.zero_point[0]), qo.qmin, qo.qmax)
    return _prepare(ctx, _pool if is_max else _avg_pool_i8, np.int32(lo), np.int32(hi), is_max)


@JIT.register("AVERAGE_POOL_2D", dtypes=("float32",), accepts=_accepts_float)
def average_pool_2d(ctx: KernelContext) -> Run:
    return _prepare_float(ctx, False)


@JIT.register("MAX_POOL_2D", dtypes=("float32",), accepts=_accepts_float)
def max_pool_2d(ctx: KernelContext) -> Run:
    return _prepare_float(ctx, True)


@JIT.register_quantized("AVERAGE_POOL_2D", dtypes=("int8",), accepts=_accepts_int8("qavg"))
def average_pool_2d_quantized(ctx: KernelContext) -> Run:
    return _prepare_int8(ctx, False)


@JIT.register_quantized("MAX_POOL_2D", dtypes=("int8",), accepts=_accepts_int8("qmax"))
def max_pool_2d_quantized(ctx: KernelContext) -> Run:
    return _prepare_int8(ctx, True)
