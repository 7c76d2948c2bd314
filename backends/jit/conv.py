"""DEPTHWISE_CONV_2D (float32 and int8) and CONV_2D (float32 and int8) on the jit backend.

Depthwise convolutions are direct numba kernels, one pass over the output with the bias and the fused
activation (or the quantized output stage) applied before the store; output rows (batch x output
height) are split over numba's threads. Geometry, padding, activation ranges and quantization
parameters come from the cpu module (backends/cpu/conv.py, _quant.py), which stays the reference and
takes every convolution declined here: other types (float16, hybrid, uint8, int16, int4), grouped
convolutions, dynamic shapes, filters not known at compile time, and the geometries
where its numpy/BLAS plans measured faster (`_wins`).

How the loops vectorise (numba/LLVM, measured on AVX-512): an innermost loop whose index is a plain
`range` variable added to an *unsigned* base (np.uint64) vectorises; a signed index `base + k` keeps
numba's negative-index wraparound and does not. Filter sizes 3x3 and 5x5 are compiled as constants
(`inline="always"` helpers called with literal sizes), so that their tap loops unroll inside the lane
loop and every tap's sum stays in a register: one store per output instead of one per tap. LLVM gives
up vectorising when a loop reads through too many unrelated offsets (runtime alias checks): blocking
4 output pixels with a runtime stride, 2 rows whose windows do not overlap, or a 5x5x3 window
broadcast over the output channels all ran scalar (3-4x slower), so the blocking below is the one
that stayed vectorised.

Float depthwise (multiplier M > 1: the input is first expanded to C*M channels), by channel count:
* C >= the vector width (16 floats with AVX-512, jit/_simd.py), any stride and dilation: explicit
  vectors of a pixel's channels, eight neighbouring output pixels a block (eight sums in flight hide the
  FMA's latency; each weight vector load serves all eight), the filter rows inside the input only, the
  edge pixels' taps checked one by one (`_vector_row`); 3x3 and 5x5 filters compile as constants (the
  taps unroll). Strides stay arguments except for 5x5 at stride 1 (`_vector_row_5x5_s1`): literal unit
  strides measured no faster for the others, and every compiled function is compiled again inside
  the parallel driver on a cold cache (its first compile: 22 s before these kernels, 36 s now).
* fewer channels, dividing the vector width, stride_w 1: the same blocks over a row's interior floats,
  each vector LANES / C whole pixels with the taps' weights tiled (`_flat_vector_row`; 3x3 as
  constants, the only size of such layers in the mediapipe models).
* other channel counts, stride_w 1 (most layers): lanes run over (output pixel, channel) pairs of an
  output row, i.e. over consecutive floats of the output and of every input row whatever C, the taps'
  weights tiled to the lane block (`_lanes`); two output rows at once when stride_h == dilation_h
  (`_lanes2`: each weight load serves both, and LLVM shares the input rows both windows read). Rows whose
  windows lie inside the input vertically take this path on their interior columns; border rows and
  columns accumulate tap by tap over the in-bounds spans (`_acc_span`): padding is never materialised.
* other strides: lanes run over the channels of one output pixel (`_pixel`).
Every layout forms each sum the same way: the bias, then the in-bounds taps in (i, j) order, one
rounding per tap (FMA). 96x96x16 3x3 on one thread: stride 1 55 us, stride 2 19 us (the lane layouts:
100 and 58 us); arrays the vector kernels read start on a cache line (exec/memory_plan.aligned_empty:
numpy's large arrays start 16 bytes past one, which cost the same kernel 1.3x). Against the cpu
kernel's einsum (`python benchmarks/jit_conv.py --only dw`, one thread): 1.7-6x, 2.4-6x on the
mediapipe layers.

int8 depthwise: the lane layouts (the last two) on int32 sums into a row buffer, then the output stage
of that row.
int8 CONV_2D: with AVX-512 VNNI, the byte dot-product GEMM (jit/_qgemm.py: int32 sums rescaled in
registers, one numba call, `_byte_dot_run`); elsewhere exact float32 sums (the cpu kernel's plan with
jit/_gemm.py's packed GEMM; sums of integers below 2**24 are exact in any order), then the output
stage in one numba pass. Float32
CONV_2D: the packed GEMM with the bias and clamp in its registers, pointwise on the input itself and
other filters on their windows read in place from the zero-bordered input (no im2col copy), with the
elementwise ops fused after it (jit/elementwise.Chain) applied to each block of the output inside the
GEMM's kernel; for output channel counts the GEMM would pad by over 30 % (pointwise, or below 8
channels), the cpu kernel's im2col + sgemm and then bias, clamp and the fused ops in one pass
(epilogue_pass). Earlier direct kernels (lanes over the output channels) measured 0.55-0.9x of
im2col + sgemm, and a numba GEMM of scalar accumulators ran scalar: the packed GEMM's explicit
vectors (jit/_simd.py) are what made it 1.1-1.3x OpenBLAS.
"""
from __future__ import annotations

import numba
import numpy as np

from onert_py.backends.cpu._common import NONE, RELU, RELU6, RELU_N1_TO_1, SIGN_BIT, TANH, Scratch
from onert_py.backends.cpu._conv_plan import ConvPlan, arena
from onert_py.backends.cpu._quant import qparams
from onert_py.backends.cpu.conv import _CLAMPS as _CONV_CLAMPS
from onert_py.backends.cpu.conv import (_EXACT_F32, SAME, VALID, _QuantConv, _bias, _cached, _conv_filter_groups,
                                        _geometry, _plan_static, conv_2d_matrix, conv_plan_run,
                                        _strides_dilations, _window_geometry, conv_output_size, pad_spatial,
                                        window_view)
from onert_py.backends.cpu.elementwise import _activation_range
from onert_py.backends.jit import _qgemm
from onert_py.backends.jit._gemm import PackedProduct, gemm_wins
from onert_py.backends.jit._numba import kernel, prange, threads
from onert_py.backends.jit._simd import LANES, copy16, vclamp, vfma, vload, vsplat, vstore
from onert_py.backends.jit.elementwise import (_op_context, epilogue_fits, epilogue_pass, fused_chain,
                                               pairs_epilogue_fits, pairs_pass, unfused)
from onert_py.backends.registry import CPU, JIT, KernelContext, Run
from onert_py.exec.memory_plan import aligned_empty

# The fused activations taken; their clamp is LiteRT's activation range (the cpu elementwise kernels'
# _activation_range), which is no clamp for TANH and SIGN_BIT.
_ACTIVATIONS = (NONE, RELU, RELU_N1_TO_1, RELU6, TANH, SIGN_BIT)
_CONTRACT = {"contract"}          # a*b + c as one FMA (more exact than two roundings; XNNPACK does too)

# Lane blocks of the stride-1 depthwise layout: about this many floats (whole pixels of C channels).
_LANES = 128
# Below this many multiply-adds an op runs on one thread. Waking numba's workers costs 1-3 us while they
# spin (GOMP_SPINCOUNT, __init__.py) and ~60 us once they sleep. An op on one thread after one split over
# two also reads half its input from the other core's cache: splitting the small ops too keeps each
# thread on the rows it made. Two threads on the 2-core VM (each model's own process, best of 4 rounds
# alternated, 300 runs): 32K against 256K gave face_detection_short_range 0.90 / 1.01 ms, face_landmark
# 1.01 / 1.07, hand_landmark_lite 2.61 / 2.68, iris_landmark 1.18 / 1.20, hand_recrop 0.70 / 0.70 (with
# the epilogues run in the GEMM's blocks; before them 256K had measured best, 4M worst).
_PARALLEL_MIN = 1 << 15

_inline = numba.njit(inline="always")   # helpers compiled into their caller (constants propagate)
_ZERO = np.int64(0)     # a 0 argument that is not a literal (a literal 0 compiles its own specialisation)


# ----------------------------------------------------------------------------------- shared helpers

def _static(t) -> bool:
    return t is not None and not t.is_dynamic and len(t.shape) > 0 and all(d > 0 for d in t.shape)


def _compile_time(sg, t: int, seen: int = 0) -> bool:
    """Tensor t is known at compile time: a constant, or the output of ops whose inputs all are (the
    compiler folds them, e.g. DEQUANTIZE of float16 weights), so the kernel will see it as ctx.const."""
    if t < 0:
        return False
    tensor = sg.tensors[t]
    if tensor.data is not None:
        return True
    if tensor.is_variable or seen > 8:
        return False
    for op in sg.operations:
        if t in op.outputs:
            return bool(op.inputs) and all(i < 0 or _compile_time(sg, i, seen + 1) for i in op.inputs)
    return False


def _wins(kind: str, x_shape: tuple[int, ...], y_shape: tuple[int, ...], k: int, exact_f32: bool = True) -> bool:
    """The geometry rule: where the jit kernel measured faster than the cpu one (benchmarks/jit_conv.py;
    the benchmark replaces this rule to time the others). kind: "dw" (float depthwise), "qdw", "qconv";
    k: the filter's taps (x input channels for a convolution); exact_f32: a quantized convolution's sums
    are exact in float32 (its cpu kernel's fast BLAS plan)."""
    if kind == "qconv":
        if _qgemm.available():
            return True     # the byte dot-product GEMM: 3-5x the cpu kernel's sgemm alone (_qgemm.py)
        # Only the output stage differs from the cpu kernel (whose numpy passes over int64 cost ~2.4 ns
        # per output value, the numba pass ~0.4): it pays for its call from ~2K outputs on (8x8x3 -> 4:
        # 0.93x, 12x12x96 -> 16: 1.16x), and is kept to the sums that are exact in float32 (the cpu
        # kernel's BLAS plan; its float64 path is the slow part of those ops).
        return exact_f32 and int(np.prod(y_shape)) >= 2048
    if kind == "dw" and k == 1 and x_shape[1:] == y_shape[1:]:
        return False        # 1x1, stride 1, multiplier 1: the cpu kernel's x * w + b on long rows (0.63x)
    return True


def _options_ok(o: dict) -> bool:
    return (o.get("padding", SAME) in (SAME, VALID)
            and min(o.get("stride_h", 1), o.get("stride_w", 1), o.get("dilation_h_factor", 1),
                    o.get("dilation_w_factor", 1)) >= 1)


# ----------------------------------------------------------------------- float depthwise kernels

@_inline
def _interior_columns(OW, W, KW, sw, dw, pl):
    """(oxa, oxb), oxa <= oxb: the output columns [oxa, oxb) of a row whose windows lie inside the input
    horizontally (every tap's column in range); the others are at its left and right edges."""
    oxa = min(OW, (pl + sw - 1) // sw) if pl > 0 else 0
    last = W - 1 + pl - (KW - 1) * dw                     # column ox is inside while ox * sw <= last
    return oxa, max(oxa, min(OW, last // sw + 1) if last >= 0 else 0)


@_inline
def _clamp(v, lo, hi):
    # comparisons, not min/max: NaN stays NaN and the select vectorises
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


@_inline
def _lanes(x1, wt, bt, y1, xb, rs, ts, yb, L, lo, hi, KH, KW):
    """y1[yb + k] = clamp(bias + sum over taps (i, j) of x1[xb + i*rs + j*ts + k] * w[i, j]), k < L:
    consecutive output floats of one row (stride_w 1), every tap in range. Offsets unsigned."""
    for k in range(np.uint64(L)):
        acc = bt[k]
        for i in range(KH):
            for j in range(KW):
                acc += x1[xb + np.uint64(i) * rs + np.uint64(j) * ts + k] * wt[i, j, k]
        y1[yb + k] = _clamp(acc, lo, hi)


@_inline
def _lanes2(x1, wt, bt, y1, xb, rs, ts, ss, yb, ys, L, lo, hi, KH, KW):
    """_lanes for two output rows at once (the second's input ss floats further, its output ys
    further): each weight load serves two sums."""
    for k in range(np.uint64(L)):
        a0 = bt[k]
        a1 = a0
        for i in range(KH):
            for j in range(KW):
                wv = wt[i, j, k]
                a0 += x1[xb + np.uint64(i) * rs + np.uint64(j) * ts + k] * wv
                a1 += x1[xb + ss + np.uint64(i) * rs + np.uint64(j) * ts + k] * wv
        y1[yb + k] = _clamp(a0, lo, hi)
        y1[yb + ys + k] = _clamp(a1, lo, hi)


@kernel(fastmath=_CONTRACT)
def _acc_span(x1, wt, bt, y1, n, oy, ox0, ox1, H, W, C, OH, OW, sh, dh, dw, pt, pl, lo, hi):
    """Output pixels [ox0, ox1) of row (n, oy), stride_w 1, multiplier 1, any padding: the bias, then
    tap by tap its in-bounds span added (lanes over pixels x channels in blocks of the tiled weights),
    then the clamp. For the rows and columns whose windows cross the border."""
    if ox1 <= ox0:
        return
    KH, KW = wt.shape[0], wt.shape[1]
    t = wt.shape[2] // C
    cu = np.uint64(C)
    yrow = np.uint64((n * OH + oy) * OW)
    for p in range(ox0, ox1, t):
        yb = (yrow + np.uint64(p)) * cu
        for k in range(np.uint64(min(t, ox1 - p) * C)):
            y1[yb + k] = bt[k]
    for i in range(KH):
        iy = oy * sh - pt + i * dh
        if iy < 0 or iy >= H:
            continue
        xrow = np.uint64((n * H + iy) * W)
        for j in range(KW):
            off = j * dw - pl                    # input column = output column + off
            a = max(ox0, -off)
            e = min(ox1, W - off)
            for p in range(a, e, t):
                yb = (yrow + np.uint64(p)) * cu
                xb = (xrow + np.uint64(p + off)) * cu
                for k in range(np.uint64(min(t, e - p) * C)):
                    y1[yb + k] += x1[xb + k] * wt[i, j, k]
    yb = (yrow + np.uint64(ox0)) * cu
    for k in range(np.uint64((ox1 - ox0) * C)):
        y1[yb + k] = _clamp(y1[yb + k], lo, hi)


@_inline
def _flat_row(x, wt, bt, y, n, oy, sh, dh, dw, pt, pl, lo, hi, KH, KW):
    """Output row (n, oy) of a stride_w 1, multiplier 1 depthwise convolution with a KH x KW filter
    (constants when inlined with literal sizes: the taps unroll into the lane loop)."""
    _, H, W, C = x.shape
    _, OH, OW, _ = y.shape
    x1, y1 = x.reshape(-1), y.reshape(-1)
    T = wt.shape[2]
    t = T // C
    iy0 = oy * sh - pt
    oxa, oxb = _interior_columns(OW, W, KW, 1, dw, pl)
    if iy0 < 0 or iy0 + (KH - 1) * dh >= H or oxb <= oxa:
        _acc_span(x1, wt, bt, y1, n, oy, _ZERO, OW, H, W, C, OH, OW, sh, dh, dw, pt, pl, lo, hi)
        return
    _edge_span(x, x1, wt, bt, y, y1, n, oy, _ZERO, oxa, sh, dh, dw, pt, pl, lo, hi)
    cu = np.uint64(C)
    rs = np.uint64(W * C * dh)
    ts = np.uint64(dw * C)
    for p in range(oxa, oxb, t):
        xb = np.uint64(((n * H + iy0) * W + p - pl) * C)
        yb = np.uint64((n * OH + oy) * OW + p) * cu
        _lanes(x1, wt, bt, y1, xb, rs, ts, yb, min(t, oxb - p) * C, lo, hi, KH, KW)
    _edge_span(x, x1, wt, bt, y, y1, n, oy, oxb, OW, sh, dh, dw, pt, pl, lo, hi)


@_inline
def _pixel(x, w, b, y, n, oy, ox, iy0, ix0, dh, dw, lo, hi, KH, KW):
    """One output pixel, multiplier 1, every tap in range: lanes over its channels."""
    C = x.shape[3]
    xr = x[n]
    out = y[n, oy, ox]
    for c in range(C):
        acc = b[c]
        for i in range(KH):
            for j in range(KW):
                acc += xr[iy0 + i * dh, ix0 + j * dw, c] * w[i, j, c]
        out[c] = _clamp(acc, lo, hi)


@kernel(fastmath=_CONTRACT)
def _pixel_border(x, w, b, y, n, oy, ox, iy0, ix0, dh, dw, lo, hi):
    """One output pixel whose window crosses the border: accumulated tap by tap (in-bounds taps only)
    in the output, lanes over channels."""
    _, H, W, C = x.shape
    KH, KW = w.shape[0], w.shape[1]
    out = y[n, oy, ox]
    for c in range(C):
        out[c] = b[c]
    for i in range(KH):
        iy = iy0 + i * dh
        if iy < 0 or iy >= H:
            continue
        for j in range(KW):
            ix = ix0 + j * dw
            if ix < 0 or ix >= W:
                continue
            xp = x[n, iy, ix]
            wp = w[i, j]
            for c in range(C):
                out[c] += xp[c] * wp[c]
    for c in range(C):
        out[c] = _clamp(out[c], lo, hi)


@_inline
def _edge_span(x, x1, wt, bt, y, y1, n, oy, ox0, ox1, sh, dh, dw, pt, pl, lo, hi):
    """Output pixels [ox0, ox1) of row (n, oy) at the left or right edge (stride_w 1): a few pixels
    (a padding's width) one at a time, channels in lanes (_pixel_border: the same in-bounds taps in the
    same order as _acc_span, with less per-call work: 3x3 SAME, 1 thread, best of 3 runs of medians,
    24x24x128 38.7 -> 34.3 us, 48x48x64 68.3 -> 64.2 us); wider spans as _acc_span."""
    _, H, W, C = x.shape
    _, OH, OW, _ = y.shape
    if ox1 - ox0 > 4:
        _acc_span(x1, wt, bt, y1, n, oy, ox0, ox1, H, W, C, OH, OW, sh, dh, dw, pt, pl, lo, hi)
        return
    for ox in range(ox0, ox1):
        _pixel_border(x, wt, bt, y, n, oy, ox, oy * sh - pt, ox - pl, dh, dw, lo, hi)


@_inline
def _pixel_row(x, w, b, y, n, oy, sh, sw, dh, dw, pt, pl, lo, hi, KH, KW):
    """Output row (n, oy) pixel by pixel (any stride), lanes over the channels."""
    _, H, W, C = x.shape
    OW = y.shape[2]
    iy0 = oy * sh - pt
    rows_in = iy0 >= 0 and iy0 + (KH - 1) * dh < H
    oxa, oxb = _interior_columns(OW, W, KW, sw, dw, pl)
    for ox in range(OW):
        ix0 = ox * sw - pl
        if rows_in and oxa <= ox < oxb:
            _pixel(x, w, b, y, n, oy, ox, iy0, ix0, dh, dw, lo, hi, KH, KW)
        else:
            _pixel_border(x, w, b, y, n, oy, ox, iy0, ix0, dh, dw, lo, hi)


@_inline
def _flat_rows(x, wt, bt, y, n, oy, sh, dh, dw, pt, pl, lo, hi, KH, KW):
    """Output rows oy and oy + 1 (when there is one) of a stride_w 1 depthwise convolution: when both
    windows lie inside the input vertically, their interior columns run together (_lanes2)."""
    _, H, W, C = x.shape
    _, OH, OW, _ = y.shape
    iy0 = oy * sh - pt
    oxa, oxb = _interior_columns(OW, W, KW, 1, dw, pl)
    # (sh == dh: the second row's window is the first's moved by one filter row, so LLVM shares the
    # loads of the rows both read; with distinct offsets it left the 5x5 lane loop scalar, 4x slower)
    if sh != dh or oy + 1 >= OH or iy0 < 0 or iy0 + sh + (KH - 1) * dh >= H or oxb <= oxa:
        _flat_row(x, wt, bt, y, n, oy, sh, dh, dw, pt, pl, lo, hi, KH, KW)
        if oy + 1 < OH:
            _flat_row(x, wt, bt, y, n, oy + 1, sh, dh, dw, pt, pl, lo, hi, KH, KW)
        return
    x1, y1 = x.reshape(-1), y.reshape(-1)
    t = wt.shape[2] // C
    for r in range(2):
        _edge_span(x, x1, wt, bt, y, y1, n, oy + r, _ZERO, oxa, sh, dh, dw, pt, pl, lo, hi)
        _edge_span(x, x1, wt, bt, y, y1, n, oy + r, oxb, OW, sh, dh, dw, pt, pl, lo, hi)
    cu = np.uint64(C)
    rs = np.uint64(W * C * dh)
    ts = np.uint64(dw * C)
    ys = np.uint64(OW * C)
    for p in range(oxa, oxb, t):
        xb = np.uint64(((n * H + iy0) * W + p - pl) * C)
        yb = np.uint64((n * OH + oy) * OW + p) * cu
        _lanes2(x1, wt, bt, y1, xb, rs, ts, rs, yb, ys, min(t, oxb - p) * C, lo, hi, KH, KW)


@_inline
def _vector_taps(x1, w1, acc, xo, c, rs, ts, C, ia, ib, KW):
    """acc plus the taps of filter rows [ia, ib) (every column) at input offset xo, channels c..c+LANES:
    one vector FMA per tap, in (i, j) order."""
    for i in range(ia, ib):
        for j in range(KW):
            acc = vfma(vload(x1, xo + i * rs + j * ts), vload(w1, (i * KW + j) * C + c), acc)
    return acc


@_inline
def _vector_block(x1, w1, y1, bias, xo, yo, sxs, ys, rs, ts, C, c, ia, ib, lov, hiv, KW):
    """Eight neighbouring vectors of an output row, sxs input and ys output floats apart (a pixel's
    channels c..c+LANES each, or, in the flat layout, LANES consecutive floats each): the bias, then the
    taps of filter rows [ia, ib) as vector FMAs in (i, j) order (tap (i, j)'s weights at w1[(i * KW + j)
    * C + c]), then the clamp. Eight sums in flight hide the FMA's latency (four measured 0.8x:
    96x96x16, 3x3, one thread); each weight load serves all eight."""
    a0 = bias
    a1 = bias
    a2 = bias
    a3 = bias
    a4 = bias
    a5 = bias
    a6 = bias
    a7 = bias
    for i in range(ia, ib):
        for j in range(KW):
            wv = vload(w1, (i * KW + j) * C + c)
            at = xo + i * rs + j * ts
            a0 = vfma(vload(x1, at), wv, a0)
            a1 = vfma(vload(x1, at + sxs), wv, a1)
            a2 = vfma(vload(x1, at + 2 * sxs), wv, a2)
            a3 = vfma(vload(x1, at + 3 * sxs), wv, a3)
            a4 = vfma(vload(x1, at + 4 * sxs), wv, a4)
            a5 = vfma(vload(x1, at + 5 * sxs), wv, a5)
            a6 = vfma(vload(x1, at + 6 * sxs), wv, a6)
            a7 = vfma(vload(x1, at + 7 * sxs), wv, a7)
    vstore(y1, yo, vclamp(a0, lov, hiv))
    vstore(y1, yo + ys, vclamp(a1, lov, hiv))
    vstore(y1, yo + 2 * ys, vclamp(a2, lov, hiv))
    vstore(y1, yo + 3 * ys, vclamp(a3, lov, hiv))
    vstore(y1, yo + 4 * ys, vclamp(a4, lov, hiv))
    vstore(y1, yo + 5 * ys, vclamp(a5, lov, hiv))
    vstore(y1, yo + 6 * ys, vclamp(a6, lov, hiv))
    vstore(y1, yo + 7 * ys, vclamp(a7, lov, hiv))


@_inline
def _vector_span(x1, w1, b1, y1, xb, yb, ox0, ox1, sxs, rs, ts, C, ia, ib, lov, hiv, KW):
    """Output pixels [ox0, ox1) of one row whose windows lie inside the input horizontally (filter rows
    [ia, ib) inside it vertically), multiplier 1, C >= LANES, per vector of channels (the last one
    overlapping the one before when LANES does not divide C): blocks of eight pixels (_vector_block),
    the last block moved back to end at ox1 (its first pixels computed twice, the same sums), spans
    under eight pixel by pixel. The sums of _lanes / _acc_span: bias first, in-bounds taps in (i, j)
    order, one rounding per tap. xb, yb: the float offsets of the row's pixel 0 in x and y; sxs: input
    floats from one output pixel to the next (stride_w * C)."""
    for cv in range(0, C, LANES):
        c = min(cv, C - LANES)
        bias = vload(b1, c)
        if ox1 - ox0 >= 8:
            ox = ox0
            while ox < ox1:
                o = min(ox, ox1 - 8)
                _vector_block(x1, w1, y1, bias, xb + o * sxs + c, yb + o * C + c, sxs, C, rs, ts, C, c, ia,
                              ib, lov, hiv, KW)
                ox += 8
        else:
            for ox in range(ox0, ox1):
                acc = _vector_taps(x1, w1, bias, xb + ox * sxs + c, c, rs, ts, C, ia, ib, KW)
                vstore(y1, yb + ox * C + c, vclamp(acc, lov, hiv))


@_inline
def _flat_vector_span(x1, wt1, bt, y1, xb, yb, F, rs, ts, T, lov, hiv, KH, KW):
    """Floats [0, F) (F >= LANES) of a stride_w 1 row's interior columns, C < LANES channels dividing
    LANES: _lanes' layout in explicit vectors, each LANES / C whole pixels with the taps' weights tiled
    (wt1: T floats per tap), eight vectors a block, the last vector or block moved back to end at F (a
    multiple of C, so every vector still starts on a pixel). xb, yb: the offsets of the first column."""
    bias = vload(bt, 0)
    block = 8 * LANES
    f = 0
    if F >= block:
        while f < F:
            o = min(f, F - block)
            _vector_block(x1, wt1, y1, bias, xb + o, yb + o, LANES, LANES, rs, ts, T, 0, 0, KH, lov, hiv, KW)
            f += block
    else:
        while f < F:
            o = min(f, F - LANES)
            acc = _vector_taps(x1, wt1, bias, xb + o, 0, rs, ts, T, 0, KH, KW)
            vstore(y1, yb + o, vclamp(acc, lov, hiv))
            f += LANES


@_inline
def _flat_vector_row(x, w, wt, bt, b, y, n, oy, sh, dh, dw, pt, pl, lo, hi, KH, KW):
    """Output row (n, oy), stride_w 1, multiplier 1, C < LANES dividing LANES (8 channels with
    AVX-512): the interior columns as _flat_vector_span when the window lies inside the input
    vertically and they span a vector, the edge pixels (_pixel_border); other rows as _acc_span."""
    _, H, W, C = x.shape
    OH, OW = y.shape[1], y.shape[2]
    iy0 = oy * sh - pt
    oxa, oxb = _interior_columns(OW, W, KW, 1, dw, pl)
    x1, y1 = x.reshape(-1), y.reshape(-1)
    if iy0 < 0 or iy0 + (KH - 1) * dh >= H or (oxb - oxa) * C < LANES:
        _acc_span(x1, wt, bt, y1, n, oy, _ZERO, OW, H, W, C, OH, OW, sh, dh, dw, pt, pl, lo, hi)
        return
    for ox in range(oxa):
        _pixel_border(x, w, b, y, n, oy, ox, iy0, ox - pl, dh, dw, lo, hi)
    T = wt.shape[2]
    _flat_vector_span(x1, wt.reshape(-1), bt, y1, ((n * H + iy0) * W + oxa - pl) * C, ((n * OH + oy) * OW + oxa) * C,
                      (oxb - oxa) * C, W * C * dh, dw * C, T, vsplat(lo), vsplat(hi), KH, KW)
    for ox in range(oxb, OW):
        _pixel_border(x, w, b, y, n, oy, ox, iy0, ox - pl, dh, dw, lo, hi)


@kernel(fastmath=_CONTRACT)
def _flat_vector_row_3x3(x, w, wt, bt, b, y, n, oy, sh, dh, dw, pt, pl, lo, hi):
    _flat_vector_row(x, w, wt, bt, b, y, n, oy, sh, dh, dw, pt, pl, lo, hi, 3, 3)


@kernel(fastmath=_CONTRACT)
def _flat_vector_row_any(x, w, wt, bt, b, y, n, oy, sh, dh, dw, pt, pl, lo, hi):
    _flat_vector_row(x, w, wt, bt, b, y, n, oy, sh, dh, dw, pt, pl, lo, hi, w.shape[0], w.shape[1])


@_inline
def _vector_edge(x1, w1, b1, y1, xb, yb, ox, sw, sxs, rs, ts, W, C, ia, ib, pl, dw, lov, hiv, KW):
    """Output pixel ox of a row, at its left or right edge: _vector_span's sums over the taps whose
    input column is inside the input."""
    ix0 = ox * sw - pl
    for cv in range(0, C, LANES):
        c = min(cv, C - LANES)
        acc = vload(b1, c)
        xo = xb + ox * sxs + c
        for i in range(ia, ib):
            for j in range(KW):
                ix = ix0 + j * dw
                if ix >= 0 and ix < W:
                    acc = vfma(vload(x1, xo + i * rs + j * ts), vload(w1, (i * KW + j) * C + c), acc)
        vstore(y1, yb + ox * C + c, vclamp(acc, lov, hiv))


@_inline
def _vector_row(x, w, b, y, n, oy, sh, sw, dh, dw, pt, pl, lo, hi, KH, KW):
    """Output row (n, oy), any stride and dilation, multiplier 1, C >= LANES: the columns whose windows
    lie inside the input horizontally as _vector_span (over the filter rows inside it vertically), the
    few at the left and right edges pixel by pixel (_vector_edge)."""
    _, H, W, C = x.shape
    OW = y.shape[2]
    iy0 = oy * sh - pt
    ia = 0 if iy0 >= 0 else min(KH, (-iy0 + dh - 1) // dh)     # first filter row inside the input
    ib = KH if iy0 + (KH - 1) * dh < H else max(0, (H - 1 - iy0) // dh + 1)
    oxa, oxb = _interior_columns(OW, W, KW, sw, dw, pl)
    x1, w1, y1 = x.reshape(-1), w.reshape(-1), y.reshape(-1)
    xb = ((n * H + iy0) * W - pl) * C                         # may be negative: offsets stay in range
    yb = (n * y.shape[1] + oy) * OW * C
    lov, hiv = vsplat(lo), vsplat(hi)
    rs = W * C * dh
    for ox in range(oxa):
        _vector_edge(x1, w1, b, y1, xb, yb, ox, sw, sw * C, rs, dw * C, W, C, ia, ib, pl, dw, lov, hiv, KW)
    if ia == 0 and ib == KH:
        # literal bounds: the tap loops unroll
        _vector_span(x1, w1, b, y1, xb, yb, oxa, oxb, sw * C, rs, dw * C, C, 0, KH, lov, hiv, KW)
    else:       # a border row (one span loop only: a second one, inlined beside it, slowed both)
        for ox in range(oxa, oxb):
            _vector_edge(x1, w1, b, y1, xb, yb, ox, sw, sw * C, rs, dw * C, W, C, ia, ib, pl, dw, lov, hiv, KW)
    for ox in range(oxb, OW):
        _vector_edge(x1, w1, b, y1, xb, yb, ox, sw, sw * C, rs, dw * C, W, C, ia, ib, pl, dw, lov, hiv, KW)


# The common filter sizes as compiled constants (each its own function: compiled once, cached).
@kernel(fastmath=_CONTRACT)
def _vector_row_3x3(x, w, b, y, n, oy, sh, sw, dh, dw, pt, pl, lo, hi):
    _vector_row(x, w, b, y, n, oy, sh, sw, dh, dw, pt, pl, lo, hi, 3, 3)


@kernel(fastmath=_CONTRACT)
def _vector_row_5x5(x, w, b, y, n, oy, sh, sw, dh, dw, pt, pl, lo, hi):
    _vector_row(x, w, b, y, n, oy, sh, sw, dh, dw, pt, pl, lo, hi, 5, 5)


@kernel(fastmath=_CONTRACT)
def _vector_row_5x5_s1(x, w, b, y, n, oy, sh, dh, pt, pl, lo, hi):
    # stride_w and dilation_w literal 1: the pixel and tap steps are then one value, and LLVM loads each
    # input vector once for the taps and pixels sharing it (12 loads instead of 40 per filter row and
    # block, where 5x5's 40 FMAs would otherwise wait on loads: palm_detection_lite 7.5 -> 6.8 ms, 1
    # thread; 3x3 measured the same either way, so it has no such twin)
    _vector_row(x, w, b, y, n, oy, sh, 1, dh, 1, pt, pl, lo, hi, 5, 5)


@kernel(fastmath=_CONTRACT)
def _vector_row_any(x, w, b, y, n, oy, sh, sw, dh, dw, pt, pl, lo, hi):
    _vector_row(x, w, b, y, n, oy, sh, sw, dh, dw, pt, pl, lo, hi, w.shape[0], w.shape[1])


@_inline
def _vector_rows(x, w, b, y, n, oy, sh, sw, dh, dw, pt, pl, lo, hi):
    """Output rows oy and oy + 1 (when there is one), C >= LANES: _vector_row for the filter's size."""
    KH, KW = w.shape[0], w.shape[1]
    for q in range(oy, min(oy + 2, y.shape[1])):
        if KH == 3 and KW == 3:
            _vector_row_3x3(x, w, b, y, n, q, sh, sw, dh, dw, pt, pl, lo, hi)
        elif KH == 5 and KW == 5 and sw == 1 and dw == 1:
            _vector_row_5x5_s1(x, w, b, y, n, q, sh, dh, pt, pl, lo, hi)
        elif KH == 5 and KW == 5:
            _vector_row_5x5(x, w, b, y, n, q, sh, sw, dh, dw, pt, pl, lo, hi)
        else:
            _vector_row_any(x, w, b, y, n, q, sh, sw, dh, dw, pt, pl, lo, hi)


# The common filter sizes as compiled constants (each its own function: compiled once, cached).
@kernel(fastmath=_CONTRACT)
def _pixel_row_3x3(x, w, b, y, n, oy, sh, sw, dh, dw, pt, pl, lo, hi):
    _pixel_row(x, w, b, y, n, oy, sh, sw, dh, dw, pt, pl, lo, hi, 3, 3)


@kernel(fastmath=_CONTRACT)
def _pixel_row_any(x, w, b, y, n, oy, sh, sw, dh, dw, pt, pl, lo, hi):
    _pixel_row(x, w, b, y, n, oy, sh, sw, dh, dw, pt, pl, lo, hi, w.shape[0], w.shape[1])


@kernel(fastmath=_CONTRACT)
def _flat_rows_3x3(x, wt, bt, y, n, oy, sh, dh, dw, pt, pl, lo, hi):
    _flat_rows(x, wt, bt, y, n, oy, sh, dh, dw, pt, pl, lo, hi, 3, 3)


@_inline
def _dw_rows(x, w, wt, bt, b, y, geo, lohi, r):
    """Output rows 2q and 2q + 1 (r = n * ceil(OH / 2) + q) of a float32 depthwise convolution with
    multiplier 1 (x expanded first otherwise): x [N, H, W, C], w [KH, KW, C] (wt, bt: taps and bias
    tiled to the lane block), y [N, OH, OW, C]; geo = (stride_h, stride_w, dilation_h, dilation_w,
    pad_top, pad_left), lohi the clamp (LiteRT's activation range: none for TANH and SIGN_BIT)."""
    OH = y.shape[1]
    pairs = (OH + 1) // 2
    n, oy = r // pairs, 2 * (r % pairs)
    sh, sw, dh, dw, pt, pl = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5]
    lo, hi = lohi[0], lohi[1]
    KH, KW = w.shape[0], w.shape[1]
    C = x.shape[3]
    if C >= LANES:
        _vector_rows(x, w, b, y, n, oy, sh, sw, dh, dw, pt, pl, lo, hi)
    elif sw == 1 and LANES % C == 0:
        for q in range(oy, min(oy + 2, OH)):
            if KH == 3 and KW == 3:     # (the mediapipe models' layers of 8 channels are all 3x3)
                _flat_vector_row_3x3(x, w, wt, bt, b, y, n, q, sh, dh, dw, pt, pl, lo, hi)
            else:
                _flat_vector_row_any(x, w, wt, bt, b, y, n, q, sh, dh, dw, pt, pl, lo, hi)
    elif sw == 1 and KH == 3 and KW == 3:
        _flat_rows_3x3(x, wt, bt, y, n, oy, sh, dh, dw, pt, pl, lo, hi)
    else:
        for q in range(oy, min(oy + 2, OH)):
            if sw == 1:
                _acc_span(x.reshape(-1), wt, bt, y.reshape(-1), n, q, _ZERO, y.shape[2], x.shape[1], x.shape[2],
                          x.shape[3], OH, y.shape[2], sh, dh, dw, pt, pl, lo, hi)
            elif KH == 3 and KW == 3:
                _pixel_row_3x3(x, w, b, y, n, q, sh, sw, dh, dw, pt, pl, lo, hi)
            else:
                _pixel_row_any(x, w, b, y, n, q, sh, sw, dh, dw, pt, pl, lo, hi)


# The drivers: all output rows, in `chunks` contiguous parts on numba's threads when chunks > 1 (one
# parallel function with a serial branch: each entry point costs numba a re-optimisation of every
# kernel it reaches, seconds, so there is one per kind).

@kernel(parallel=True, fastmath=_CONTRACT)
def _dw(x, w, wt, bt, b, y, geo, lohi, chunks):
    """A float32 depthwise convolution (_dw_rows) over all output row pairs."""
    pairs = y.shape[0] * ((y.shape[1] + 1) // 2)
    if chunks > 1:
        for t in prange(chunks):
            q = np.int64(t)                                 # (prange's index is unsigned)
            for r in range(q * pairs // chunks, (q + 1) * pairs // chunks):
                _dw_rows(x, w, wt, bt, b, y, geo, lohi, r)
    else:
        for r in range(pairs):
            _dw_rows(x, w, wt, bt, b, y, geo, lohi, r)


@kernel
def _repeat_channels(x, mult, out):
    """out[..., c * mult + m] = x[..., c]: a depthwise input expanded to its output channels."""
    x2 = x.reshape(-1, x.shape[-1])
    o2 = out.reshape(-1, out.shape[-1])
    C = x.shape[-1]
    for p in range(x2.shape[0]):
        for c in range(C):
            v = x2[p, c]
            for m in range(mult):
                o2[p, c * mult + m] = v


# --------------------------------------------------------------------------- float depthwise: prepare

def _float_tensors(op, sg):
    """(x, filter, output) when every tensor of the op is float32 (FLOAT32 filter: not hybrid) with a
    static rank-4 input and output, a filter known at compile time and a constant or absent bias."""
    ins = op.inputs
    if len(ins) not in (2, 3) or len(op.outputs) != 1 or ins[0] < 0 or ins[1] < 0:
        return None
    x, w, y = sg.tensors[ins[0]], sg.tensors[ins[1]], sg.tensors[op.outputs[0]]
    if any(t.type_name != "FLOAT32" for t in (x, w, y)):
        return None
    if len(ins) > 2 and ins[2] >= 0 and (sg.tensors[ins[2]].type_name != "FLOAT32"
                                         or not _compile_time(sg, ins[2])):
        return None
    if not (_static(x) and _static(y) and len(x.shape) == 4 and len(y.shape) == 4 and len(w.shape) == 4
            and _compile_time(sg, ins[1])):
        return None
    return x, w, y


def _output_ok(op, x, y, kh: int, kw: int, cout: int) -> bool:
    """The declared output shape is the one the geometry gives (else cpu reports the mismatch)."""
    o = op.options
    p = o.get("padding", SAME)
    oh = conv_output_size(x.shape[1], kh, o.get("stride_h", 1), o.get("dilation_h_factor", 1), p)
    ow = conv_output_size(x.shape[2], kw, o.get("stride_w", 1), o.get("dilation_w_factor", 1), p)
    return tuple(y.shape) == (x.shape[0], oh, ow, cout) and oh > 0 and ow > 0


def _accepts_depthwise(op, sg) -> bool:
    ts = _float_tensors(op, sg)
    if ts is None or not _options_ok(op.options):
        return False
    x, w, y = ts
    one, kh, kw, cout = w.shape
    cin = x.shape[3]
    if one != 1 or cout % cin or (op.options.get("fused_activation_function") or NONE) not in _ACTIVATIONS:
        return False
    return _output_ok(op, x, y, kh, kw, cout) and _wins("dw", tuple(x.shape), tuple(y.shape), kh * kw)


def _zero_padding_of(producer, sg) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """((top, bottom), (left, right)) when `producer` is a PAD (or a PADV2 with the value 0.0) of a
    static float32 rank-4 tensor by constant non-negative amounts along H and W only; else None."""
    ins = producer.inputs
    if producer.opcode not in ("PAD", "PADV2") or len(ins) < 2 or ins[0] < 0 or ins[1] < 0:
        return None
    x, amounts = sg.tensors[ins[0]], sg.tensors[ins[1]].data
    if x.type_name != "FLOAT32" or not _static(x) or len(x.shape) != 4 or amounts is None:
        return None
    if len(ins) > 2 and ins[2] >= 0:
        value = sg.tensors[ins[2]].data
        if value is None or np.size(value) != 1 or np.asarray(value, np.float32).reshape(-1)[0] != 0:
            return None           # (-0.0 too pads +0.0, as LiteRT and the PAD kernels do: the same bits)
    p = np.asarray(amounts)
    if p.shape != (4, 2) or p.dtype.kind not in "iu" or (p < 0).any() or p[0].any() or p[3].any():
        return None
    return (int(p[1, 0]), int(p[1, 1])), (int(p[2, 0]), int(p[2, 1]))


def _depthwise_absorbs(op, producer, sg) -> bool:
    """A float depthwise convolution takes a zero padding of its input into its reads (the converter's
    ZeroPadding2D before a VALID depthwise, 42 times in face_detection_full_range_sparse): its kernels
    skip the taps outside the input as they do for SAME padding, and a padded zero's product adds
    nothing (x + 0 * w == x for a finite w; the kernel checks the filter, and its sums are otherwise
    formed in the same order)."""
    return _zero_padding_of(producer, sg) is not None


def _unabsorbed(ctx: KernelContext, prepare) -> Run:
    """`prepare`, a kernel of ctx.op alone (reading the padded tensor), after ctx.prologue run as an op
    of its own on the cpu backend: for a case the folding kernel does not take after all."""
    producer = ctx.prologue
    pad = CPU.kernel(producer.kernel_name)(_op_context(ctx, producer))
    run = prepare(_op_context(ctx, ctx.op))
    v, padded = ctx.values, producer.outputs[0]

    def run_padded() -> None:
        pad()
        run()
        v[padded] = None
    return run_padded


def _geometry_of(ctx: KernelContext, kh: int, kw: int):
    """get(input shape) -> (output sizes, geo): the kernels' int64 geometry array (stride_h, stride_w,
    dilation_h, dilation_w, pad_top, pad_left) of ctx's options, cached per shape; with a zero padding
    folded in (ctx.prologue), the geometry of the padded input, its padding added to the offsets."""
    o = ctx.options
    strides = (o.get("stride_h", 1), o.get("stride_w", 1))
    dils = (o.get("dilation_h_factor", 1), o.get("dilation_w_factor", 1))
    padding = o.get("padding", SAME)
    (top, bottom), (left, right) = ((0, 0), (0, 0)) if ctx.prologue is None else _zero_padding_of(ctx.prologue, ctx.subgraph)
    cache: dict = {}

    def get(shape: tuple[int, ...]):
        g = cache.get(shape)
        if g is None:
            padded = (shape[1] + top + bottom, shape[2] + left + right)
            out, pads = _geometry(padded, (kh, kw), strides, dils, padding)
            geo = np.array([strides[0], strides[1], dils[0], dils[1], pads[0][0] + top, pads[1][0] + left], np.int64)
            if len(cache) > 8:      # a shape that keeps changing: do not hoard plans
                cache.clear()
            g = cache[shape] = (out, geo)
        return g
    return get


@JIT.register("DEPTHWISE_CONV_2D", dtypes=("float32",), accepts=_accepts_depthwise, prologue=_depthwise_absorbs)
def depthwise_conv_2d(ctx: KernelContext) -> Run:
    """input [N, H, W, C], filter [1, KH, KW, C*M], bias [C*M]: the direct kernels above (a multiplier
    M > 1 expands the input to C*M channels first, one pass, so that every layout applies); a zero
    padding folded in (ctx.prologue) is read in place."""
    w = ctx.const(1)
    if w is None or (ctx.has_input(2) and ctx.const(2) is None):
        general = CPU.kernel("DEPTHWISE_CONV_2D")       # not folded after all: the general kernel
        return general(ctx) if ctx.prologue is None else _unabsorbed(ctx, general)
    if ctx.prologue is not None and not np.isfinite(w).all():
        return _unabsorbed(ctx, depthwise_conv_2d)
    _, kh, kw, cout = w.shape
    cin = ctx.input_tensor(0).shape[3]
    mult = cout // cin
    # own writeable copies: folded constants are read-only, which numba types (and compiles) apart
    # (aligned: the vector kernels load them whole)
    taps = aligned_empty((kh, kw, cout))
    taps[...] = w.reshape(kh, kw, cout)
    bias = aligned_empty(cout, zero=True)
    if ctx.has_input(2):
        bias[...] = ctx.const(2).reshape(-1)
    t = max(1, -(-_LANES // cout))
    wt = np.ascontiguousarray(np.tile(taps, (1, 1, t)))
    bt = np.tile(bias, t)
    code = ctx.options.get("fused_activation_function", NONE) or NONE
    lohi = np.array(_activation_range(code, np.dtype(np.float32)), np.float32)

    def compute(x, y, geo, chunks) -> None:
        _dw(x, taps, wt, bt, bias, y, geo, lohi, chunks)
    return _depthwise_run(ctx, cin, mult, kh, kw, compute)


def _depthwise_run(ctx: KernelContext, cin: int, mult: int, kh: int, kw: int, compute) -> Run:
    """The run closure of both depthwise kernels: the input made C-contiguous and writeable, its
    channels checked, the output allocated, a multiplier M > 1 expanded into C*M input channels, the
    thread split chosen; `compute(x, y, geometry, chunks)` then fills y."""
    get = _geometry_of(ctx, kh, kw)
    x_i, (o_i,) = ctx.inputs[0], ctx.outputs
    dtype = ctx.input_tensor(0).dtype
    cout = cin * mult
    v = ctx.values
    alloc = ctx.output_buffer(0)

    def run() -> None:
        x = v[x_i]
        if not (x.flags.c_contiguous and x.flags.writeable):
            x = np.array(x, dtype, order="C")
        n, h, wd, c = x.shape
        if c != cin:
            raise ValueError(f"input has {c} channels, the filter expects {cin}")
        (oh, ow), geo = get(x.shape)
        y = alloc((n, oh, ow, cout))
        if y.size:
            if mult > 1:
                xe = aligned_empty((n, h, wd, cout), dtype)
                _repeat_channels(x, mult, xe)
                x = xe
            chunks = min(threads(), n * oh) if y.size * kh * kw >= _PARALLEL_MIN else 1
            compute(x, y, geo, chunks)
        v[o_i] = y
    return run


# ------------------------------------------------------------------------------ float CONV_2D

def _accepts_conv(op, sg) -> bool:
    """float32, one group, a clamp (or no) activation, at least 2 output channels (one is the cpu
    kernel's channel sum)."""
    ts = _float_tensors(op, sg)
    if ts is None or not _options_ok(op.options):
        return False
    x, w, y = ts
    cout, kh, kw, cin = w.shape
    code = op.options.get("fused_activation_function") or NONE
    return (cin == x.shape[3] and cout >= 2 and (code == NONE or code in _CONV_CLAMPS)
            and _output_ok(op, x, y, kh, kw, cout))


def _conv_epilogue_fits(producer, chain, sg) -> bool:
    """The ops that can follow a convolution in its kernel: elementwise float32 ops (epilogue_pass) after
    a float one, 8-bit ADD / SUB / MUL gathers (pairs_pass) after an int8 one."""
    if sg.tensors[producer.outputs[0]].type_name == "INT8":
        return pairs_epilogue_fits(producer, chain, sg)
    return epilogue_fits(producer, chain, sg)


def _windows_win(cout: int, filt: tuple[int, int], strides: tuple[int, int], dils: tuple[int, int]) -> bool:
    """A convolution whose windows the GEMM reads in place (not pointwise, dilation_w 1) takes it from 8
    output channels on, however many of its lanes are padding: the sgemm path's im2col copy costs more
    (hand_recrop's 3x3/2 RGB stem, 8 channels: the model 1.39 -> 1.02 ms; gemm_wins' 70 % rule was
    measured on products without that copy)."""
    return cout >= 8 and (tuple(filt) != (1, 1) or tuple(strides) != (1, 1)) and dils[1] == 1


@JIT.register("CONV_2D", dtypes=("float32",), accepts=_accepts_conv, epilogue=_conv_epilogue_fits)
def conv_2d(ctx: KernelContext) -> Run:
    """The cpu kernel's convolution plan with the packed GEMM as its product (bias and activation in
    its registers, windows read in place, the elementwise ops fused after it (ctx.epilogue) on each
    block of the output in the same kernel), or, where the GEMM would mostly compute padding, the plan's
    own sgemm and then bias, activation and the fused ops in one compiled pass."""
    if ctx.const(1) is None or (ctx.has_input(2) and ctx.const(2) is None):
        return unfused(ctx, CPU.kernel("CONV_2D"))      # not folded after all: the general kernel
    w, groups = _conv_filter_groups(ctx)
    cout, kh, kw, _ = w.shape
    strides, dils = _strides_dilations(ctx)
    bias = _bias(ctx, 2, cout)
    bounds = _CONV_CLAMPS.get(ctx.options.get("fused_activation_function") or NONE)
    w2 = conv_2d_matrix(w, groups)[0]
    if gemm_wins(cout) or _windows_win(cout, (kh, kw), strides, dils):
        # bias, clamp and the fused ops in the GEMM's kernel (ConvPlan reads the windows in place unless
        # the filter is 1x1 with stride 1)
        windows = (kh, kw) != (1, 1) or tuple(strides) != (1, 1)
        packed = PackedProduct(w2, bias, bounds, _PARALLEL_MIN, fused_chain(ctx),
                               ("windows",) if windows and dils[1] == 1 else ("matrix",))
        return conv_plan_run(ctx, w2, (kh, kw), strides, dils, None, None, packed.matrix, packed.windows)
    finish = epilogue_pass(ctx, bias, bounds)
    return conv_plan_run(ctx, w2, (kh, kw), strides, dils, None, finish)


# -------------------------------------------------------------------- quantized (int8) kernels
#
# LiteRT's integer convolutions: acc = sum over the in-bounds taps of (x - zp_in) * w (exact int32: the
# padding contributes nothing), plus the int32 bias, then per output channel the fixed-point rescale
# of cpu/_quant.OutputStage._general (which is bit-exact with LiteRT's kernels): the first `half`
# channels as LiteRT's optimized x86 kernels round (multiply_by_quantized_multiplier_half_up), the others
# as its reference (multiply_by_quantized_multiplier), plus the output zero point, clamped. Each output
# row is accumulated into an int32 row buffer (in cache), then rescaled into the int8 output.

_INT32_MAX = (1 << 31) - 1


@_inline
def _wrap32(v):
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


@_inline
def _requantize(a, m, left, right, half, zp, lo, hi):
    """acc + bias (int64) -> the int8 output value: _quant.OutputStage._general, one value."""
    a = _wrap32(a)
    if half:
        x = _wrap32(a << left)
        total = ((x * m + (1 << 30)) >> 31) + ((1 << right) >> 1)
        r = (1 << (31 - right)) if total > _INT32_MAX else total >> right
    else:
        q = ((a << left) * m + (1 << 30)) >> 31
        if q > _INT32_MAX:
            q = _INT32_MAX
        r = (q + (((1 << right) >> 1) - (1 if q < 0 and right > 0 else 0))) >> right
    r += zp
    if r < lo:
        r = lo
    if r > hi:
        r = hi
    return r


@kernel
def _q_store_row(acc, bias, qp, q32, yrow, zp, lo, hi, fast):
    """The output stage of one output row: acc [OW * C] sums (int32, or floats holding exact integers)
    -> yrow [OW * C] int8, in blocks of whole pixels (bias [T], qp [7, T] and q32 [3, T]: the
    per-channel parameters tiled to T lanes, _output_stage). `fast`: no value (sum + bias, shifted
    left) can leave int32, so both roundings reduce to one shift, as OutputStage's fast path:
    (v * m - tie fix + offset) >> (31 + right). ~0.4 ns per value on one thread."""
    T = bias.size
    L = acc.size
    m, left = qp[0], qp[1]
    if fast:
        # sum + bias and its left shift in int32 (the bound says they fit), then one 64-bit product
        off, tsh, fix = qp[4], qp[5], qp[6]
        b32, m32, l32 = q32[0], q32[1], q32[2]
        for p in range(0, L, T):
            a = acc[p:]
            o = yrow[p:]
            for k in range(min(T, L - p)):
                v = np.int64((np.int32(a[k]) + b32[k]) << l32[k]) * np.int64(m32[k])
                if v < -(1 << 30):
                    v -= fix[k]            # the reference rounding's negative ties
                r = ((v + off[k]) >> tsh[k]) + zp
                if r < lo:
                    r = lo
                if r > hi:
                    r = hi
                o[k] = r
        return
    right, half = qp[2], qp[3]
    for p in range(0, L, T):
        a = acc[p:]
        o = yrow[p:]
        for k in range(min(T, L - p)):
            o[k] = _requantize(np.int64(a[k]) + bias[k], m[k], left[k], right[k], half[k], zp, lo, hi)


@_inline
def _q_lanes(x1, wt, acc, xb, rs, ts, L, zp, KH, KW):
    """acc[k] = sum over taps of (x1[xb + i*rs + j*ts + k] - zp) * w[i, j], k < L (_lanes, int32)."""
    for k in range(np.uint64(L)):
        s = np.int32(0)
        for i in range(KH):
            for j in range(KW):
                s += (np.int32(x1[xb + np.uint64(i) * rs + np.uint64(j) * ts + k]) - zp) * wt[i, j, k]
        acc[k] = s


@kernel
def _q_acc_span(x1, wt, acc, n, oy, ox0, ox1, H, W, C, sh, dh, dw, pt, pl, zp):
    """Pixels [ox0, ox1) of output row (n, oy) into acc (the row's int32 sums; stride_w 1): tap by tap
    over the in-bounds spans (_acc_span)."""
    if ox1 <= ox0:
        return
    KH, KW = wt.shape[0], wt.shape[1]
    t = wt.shape[2] // C
    cu = np.uint64(C)
    a0 = np.uint64(ox0) * cu
    for k in range(np.uint64((ox1 - ox0) * C)):
        acc[a0 + k] = 0
    for i in range(KH):
        iy = oy * sh - pt + i * dh
        if iy < 0 or iy >= H:
            continue
        xrow = np.uint64((n * H + iy) * W)
        for j in range(KW):
            off = j * dw - pl
            a = max(ox0, -off)
            e = min(ox1, W - off)
            for p in range(a, e, t):
                ab = np.uint64(p) * cu
                xb = (xrow + np.uint64(p + off)) * cu
                for k in range(np.uint64(min(t, e - p) * C)):
                    acc[ab + k] += (np.int32(x1[xb + k]) - zp) * wt[i, j, k]


@_inline
def _q_flat_row(x, wt, acc, n, oy, sh, dh, dw, pt, pl, zp, OW, KH, KW):
    """The int32 sums of output row (n, oy), stride_w 1 (_flat_row)."""
    _, H, W, C = x.shape
    x1 = x.reshape(-1)
    t = wt.shape[2] // C
    iy0 = oy * sh - pt
    oxa, oxb = _interior_columns(OW, W, KW, 1, dw, pl)
    if iy0 < 0 or iy0 + (KH - 1) * dh >= H or oxb <= oxa:
        _q_acc_span(x1, wt, acc, n, oy, _ZERO, OW, H, W, C, sh, dh, dw, pt, pl, zp)
        return
    _q_acc_span(x1, wt, acc, n, oy, _ZERO, oxa, H, W, C, sh, dh, dw, pt, pl, zp)
    rs = np.uint64(W * C * dh)
    ts = np.uint64(dw * C)
    for p in range(oxa, oxb, t):
        xb = np.uint64(((n * H + iy0) * W + p - pl) * C)
        _q_lanes(x1, wt, acc[p * C:], xb, rs, ts, min(t, oxb - p) * C, zp, KH, KW)
    _q_acc_span(x1, wt, acc, n, oy, oxb, OW, H, W, C, sh, dh, dw, pt, pl, zp)


@_inline
def _q_pixel_row(x, w, acc, n, oy, sh, sw, dh, dw, pt, pl, zp, OW, KH, KW):
    """The int32 sums of output row (n, oy) pixel by pixel (any stride), lanes over channels."""
    _, H, W, C = x.shape
    iy0 = oy * sh - pt
    rows_in = iy0 >= 0 and iy0 + (KH - 1) * dh < H
    oxa, oxb = _interior_columns(OW, W, KW, sw, dw, pl)
    xn = x[n]
    for ox in range(OW):
        ix0 = ox * sw - pl
        a = acc[ox * C:ox * C + C]
        if rows_in and oxa <= ox < oxb:
            for c in range(C):
                s = np.int32(0)
                for i in range(KH):
                    for j in range(KW):
                        s += (np.int32(xn[iy0 + i * dh, ix0 + j * dw, c]) - zp) * w[i, j, c]
                a[c] = s
        else:
            for c in range(C):
                a[c] = 0
            for i in range(KH):
                iy = iy0 + i * dh
                if iy < 0 or iy >= H:
                    continue
                for j in range(KW):
                    ix = ix0 + j * dw
                    if ix < 0 or ix >= W:
                        continue
                    xp = xn[iy, ix]
                    wp = w[i, j]
                    for c in range(C):
                        a[c] += (np.int32(xp[c]) - zp) * wp[c]


@kernel
def _q_pixel_row_3x3(x, w, acc, n, oy, sh, sw, dh, dw, pt, pl, zp, OW):
    _q_pixel_row(x, w, acc, n, oy, sh, sw, dh, dw, pt, pl, zp, OW, 3, 3)


@kernel
def _q_pixel_row_5x5(x, w, acc, n, oy, sh, sw, dh, dw, pt, pl, zp, OW):
    _q_pixel_row(x, w, acc, n, oy, sh, sw, dh, dw, pt, pl, zp, OW, 5, 5)


@kernel
def _q_pixel_row_any(x, w, acc, n, oy, sh, sw, dh, dw, pt, pl, zp, OW):
    _q_pixel_row(x, w, acc, n, oy, sh, sw, dh, dw, pt, pl, zp, OW, w.shape[0], w.shape[1])


@kernel
def _q_flat_3x3(x, wt, acc, n, oy, sh, dh, dw, pt, pl, zp, OW):
    _q_flat_row(x, wt, acc, n, oy, sh, dh, dw, pt, pl, zp, OW, 3, 3)


@kernel
def _q_flat_5x5(x, wt, acc, n, oy, sh, dh, dw, pt, pl, zp, OW):
    _q_flat_row(x, wt, acc, n, oy, sh, dh, dw, pt, pl, zp, OW, 5, 5)


@kernel
def _q_dw_row(x, w, wt, bias, y, geo, qp, q32, r):
    """Output row r (= n * OH + oy) of an int8 depthwise convolution with multiplier 1: x [N, H, W, C]
    int8, w [KH, KW, C] int32 (wt tiled to the lane block), y [N, OH, OW, C] int8; bias, qp, q32: the
    output stage's per-channel parameters tiled to the lane block (_output_stage, _tiled); geo =
    (stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left, zp_in, zp_out, lo, hi, fast)."""
    _, OH, OW, C = y.shape
    n, oy = r // OH, r % OH
    sh, sw, dh, dw, pt, pl = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5]
    zp = np.int32(geo[6])
    KH, KW = w.shape[0], w.shape[1]
    acc = np.empty(OW * C, np.int32)
    if sw == 1 and KH == 3 and KW == 3:
        _q_flat_3x3(x, wt, acc, n, oy, sh, dh, dw, pt, pl, zp, OW)
    elif sw == 1 and KH == 5 and KW == 5:
        _q_flat_5x5(x, wt, acc, n, oy, sh, dh, dw, pt, pl, zp, OW)
    elif sw == 1:
        _q_acc_span(x.reshape(-1), wt, acc, n, oy, _ZERO, OW, x.shape[1], x.shape[2], C, sh, dh, dw, pt, pl,
                    zp)
    elif KH == 3 and KW == 3:
        _q_pixel_row_3x3(x, w, acc, n, oy, sh, sw, dh, dw, pt, pl, zp, OW)
    elif KH == 5 and KW == 5:
        _q_pixel_row_5x5(x, w, acc, n, oy, sh, sw, dh, dw, pt, pl, zp, OW)
    else:
        _q_pixel_row_any(x, w, acc, n, oy, sh, sw, dh, dw, pt, pl, zp, OW)
    _q_store_row(acc, bias, qp, q32, y[n, oy].reshape(-1), geo[7], geo[8], geo[9], geo[10] != 0)


@kernel(parallel=True)
def _q_dw(x, w, wt, bias, y, geo, qp, q32, chunks):
    """An int8 depthwise convolution (_q_dw_row) over all output rows, as _dw."""
    rows = y.shape[0] * y.shape[1]
    if chunks > 1:
        for t in prange(chunks):
            q = np.int64(t)
            for r in range(q * rows // chunks, (q + 1) * rows // chunks):
                _q_dw_row(x, w, wt, bias, y, geo, qp, q32, r)
    else:
        for r in range(rows):
            _q_dw_row(x, w, wt, bias, y, geo, qp, q32, r)


# ------------------------------------------------------------------------ quantized: prepare

def _int8_tensors(op, sg):
    """(x, filter, output) of an int8 convolution the kernels here run: int8 input and output with
    per-tensor parameters, an INT8 filter known at compile time, a constant int32 bias or none, static
    rank-4 shapes."""
    ins = op.inputs
    if len(ins) not in (2, 3) or len(op.outputs) != 1 or ins[0] < 0 or ins[1] < 0:
        return None
    x, w, y = sg.tensors[ins[0]], sg.tensors[ins[1]], sg.tensors[op.outputs[0]]
    if x.type_name != "INT8" or y.type_name != "INT8" or w.type_name != "INT8":
        return None
    qi, qw, qo = qparams(x), qparams(w), qparams(y)
    if qi is None or qo is None or qw is None or qi.per_channel or qo.per_channel:
        return None
    if len(ins) > 2 and ins[2] >= 0 and (sg.tensors[ins[2]].type_name != "INT32"
                                         or not _compile_time(sg, ins[2])):
        return None
    if not (_static(x) and _static(y) and len(x.shape) == 4 and len(y.shape) == 4 and len(w.shape) == 4
            and _compile_time(sg, ins[1])):
        return None
    if (op.options.get("fused_activation_function") or NONE) not in (NONE, RELU, RELU6, RELU_N1_TO_1):
        return None
    return x, w, y


def _accepts_depthwise_int8(op, sg) -> bool:
    ts = _int8_tensors(op, sg)
    if ts is None or not _options_ok(op.options):
        return False
    x, w, y = ts
    one, kh, kw, cout = w.shape
    cin = x.shape[3]
    if one != 1 or cout % cin:
        return False
    qw = qparams(w)
    if qw.per_channel and (qw.scale.size != cout or qw.axis != 3):
        return False
    return _output_ok(op, x, y, kh, kw, cout) and _wins("qdw", tuple(x.shape), tuple(y.shape), kh * kw)


def _output_stage(q: _QuantConv, cout: int):
    """(bias int64 [cout], qp int64 [7, cout], q32 int32 [3, cout], fast) of a prepared cpu _QuantConv
    for _q_store_row: per channel the multiplier, left shift, right shift, rounds half up (the first
    q.half_up channels), and for the fast path the offset, total shift and tie fix of OutputStage (its
    `fast` condition: the largest |sum + bias| shifted left stays below 2**30) and the bias, multiplier
    and left shift as int32."""
    bias = np.zeros(cout, np.int64) if q.bias is None else np.ascontiguousarray(q.bias, np.int64)
    shift = np.broadcast_to(np.asarray(q.shift, np.int64), (cout,))
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    half = np.arange(cout) < q.half_up
    qp = np.zeros((7, cout), np.int64)
    qp[0] = np.broadcast_to(np.asarray(q.mult, np.int64), (cout,))
    qp[1], qp[2], qp[3] = left, right, half
    qp[4] = (1 << 30) + np.where(right > 0, np.int64(1) << (30 + right), 0)
    qp[5] = 31 + right
    qp[6] = np.where((right > 0) & ~half, np.int64(1) << 31, 0)
    fast = cout > 0 and int(q.bound) << int(left.max(initial=0)) < (1 << 30)
    q32 = np.zeros((3, cout), np.int32)
    if fast:
        q32[0], q32[1], q32[2] = bias, qp[0], left
    return bias, qp, q32, fast


def _tiled(bias: np.ndarray, qp: np.ndarray, q32: np.ndarray, t: int):
    """The output stage's per-channel parameters repeated t times: lanes of t whole pixels."""
    return np.tile(bias, t), np.ascontiguousarray(np.tile(qp, (1, t))), np.ascontiguousarray(np.tile(q32, (1, t)))


@JIT.register_quantized("DEPTHWISE_CONV_2D", dtypes=("int8",), accepts=_accepts_depthwise_int8)
def depthwise_conv_2d_quantized(ctx: KernelContext) -> Run:
    """int8 DEPTHWISE_CONV_2D (int8 filter per channel or per tensor): the checks, multipliers and
    roundings of the cpu kernel (_QuantConv), the sums and the output stage in one numba pass per row."""
    ctx.expect_inputs(2, 3)
    w = ctx.const(1)
    if w is None or (ctx.has_input(2) and ctx.const(2) is None):
        return CPU.kernel("DEPTHWISE_CONV_2D", True)(ctx)
    _, kh, kw, cout = w.shape
    cin = ctx.input_tensor(0).shape[3]
    mult = cout // cin
    q = _QuantConv(ctx, w, cout, 3, kh * kw, bias_required=False)
    q.half_up = cout // 8 * 8              # as the cpu kernel: LiteRT's 8-channel SIMD blocks round half up
    taps = np.ascontiguousarray(q.w.reshape(kh, kw, cout), dtype=np.int32)
    t = max(1, -(-_LANES // cout))
    wt = np.ascontiguousarray(np.tile(taps, (1, 1, t)))
    bias, qp, q32, fast = _output_stage(q, cout)
    bias, qp, q32 = _tiled(bias, qp, q32, t)
    tail = np.array([q.zp_in, q.zp_out, q.lo, q.hi, fast], np.int64)
    geos: dict = {}

    def compute(x, y, geo, chunks) -> None:
        g = geos.get(x.shape)
        if g is None:
            g = geos[x.shape] = np.concatenate((geo[:6], tail))
        _q_dw(x, taps, wt, bias, y, g, qp, q32, chunks)
    return _depthwise_run(ctx, cin, mult, kh, kw, compute)


@kernel
def _q_stage(sums, bias, qp, q32, y, zp, lo, hi, fast):
    """The output stage over exact integer sums [rows, L] (float32 or float64, from the cpu kernel's
    BLAS plans) into y [rows, L] int8. On one thread: right after BLAS's threads, numba's would wait
    for the cores (and the stage is cheap)."""
    for r in range(sums.shape[0]):
        _q_store_row(sums[r], bias, qp, q32, y[r], zp, lo, hi, fast)


def _accepts_conv_int8(op, sg) -> bool:
    ts = _int8_tensors(op, sg)
    if ts is None or not _options_ok(op.options):
        return False
    x, w, y = ts
    cout, kh, kw, cin = w.shape
    if cin != x.shape[3]:
        return False                       # grouped: LiteRT's reference kernel, the cpu one
    qw = qparams(w)
    if (qw.per_channel and (qw.scale.size != cout or qw.axis != 0)) or np.any(qw.zero_point != 0):
        return False
    # the sums are exact in float32 (_QuantConv.float): taps * max |x - zp| * max |w| < 2**24
    qi = qparams(x)
    zp = int(qi.zero_point[0])
    data = sg.tensors[op.inputs[1]].data
    w_abs = int(np.abs(data.astype(np.int64)).max(initial=0)) if data is not None else 128
    exact = kh * kw * cin * max(zp - qi.qmin, qi.qmax - zp) * w_abs < _EXACT_F32
    if _qgemm.available() and kh * kw * cin > _qgemm.MAX_K:
        return False
    if not _output_ok(op, x, y, kh, kw, cout):
        return False
    # a residual ADD after it runs in its kernel (pairs_pass), which pays for the call at any size
    readers = [r for r in sg.operations if op.outputs[0] in r.inputs]
    takes_residual = len(readers) == 1 and pairs_epilogue_fits(op, readers, sg)
    return _wins("qconv", tuple(x.shape), tuple(y.shape), kh * kw * cin, exact) or (exact and takes_residual)


@JIT.register_quantized("CONV_2D", dtypes=("int8",), accepts=_accepts_conv_int8)
def conv_2d_quantized(ctx: KernelContext) -> Run:
    """int8 CONV_2D: the cpu kernel's exact integer sums (its BLAS plan: im2col + sgemm in float32 when
    every partial sum is an exact float32 integer, else float64), then bias, rescale, zero point and
    clamp in one numba pass (_q_stage) instead of the cpu kernel's numpy passes over int64 (measured
    ~2.4 ns per output value there, ~0.4 here). A direct numba convolution measured slower than the
    sums from BLAS (see the module docstring), so only the output stage is compiled here."""
    ctx.expect_inputs(2, 3)
    w = ctx.const(1)
    if w is None or (ctx.has_input(2) and ctx.const(2) is None):
        return unfused(ctx, CPU.kernel("CONV_2D", True))
    cout, kh, kw, cin = w.shape
    strides, dils = _strides_dilations(ctx)
    k = kh * kw * cin
    # the conv's own output parameters (ctx.outputs are a fused chain's last op's)
    q = _QuantConv(_op_context(ctx, ctx.op), w, cout, 0, k, bias_required=True)
    q.half_up = cout                       # LiteRT's optimized kernel (ruy's output stage): halves up
    bias, qp, q32, fast = _output_stage(q, cout)
    t = max(1, -(-_LANES // cout))
    get_geometry = _window_geometry(ctx, (kh, kw), cin, strides, dils)
    if fast and _qgemm.available() and k <= _qgemm.MAX_K:
        return _byte_dot_run(ctx, q, get_geometry, (kh, kw, cin, cout), strides, dils, bias, qp)
    w_mat = np.ascontiguousarray(q.w.reshape(cout, k).T, dtype=q.float)
    x_i, (o_i,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    alloc = ctx.output_buffer(0)
    if q.float == np.float32:
        # as the cpu kernel (_quantized_window_run): the bias joins the float sums when they stay exact
        # with it; unpadded, the input's zero point joins the bias too (sum x*w - zp * sum w)
        bias_f = q.bias.astype(np.float32) if q.bias is not None and q.bound < _EXACT_F32 else None
        shift_input = True
        if q.zp_in and ((kh, kw) == (1, 1) or ctx.options.get("padding", SAME) == VALID):
            folded = q.w.reshape(cout, -1).sum(axis=1) * -q.zp_in + (0 if q.bias is None else q.bias)
            if q.x_abs_raw * q.taps_w_abs + int(np.abs(folded).max(initial=0)) < _EXACT_F32:
                bias_f, shift_input = folded.astype(np.float32), False
        # the packed GEMM's sums are the same exact integers as BLAS's (every partial sum is exact)
        packed = PackedProduct(w_mat, bias_f, None, _PARALLEL_MIN) if gemm_wins(cout) else None
        plan = _cached(lambda shape: ConvPlan(shape, w_mat, (kh, kw), strides, dils, *get_geometry(shape),
                                              None if packed else bias_f, ctx.runtime,
                                              product=packed and packed.matrix,
                                              windows_product=packed and packed.windows))
        _plan_static(ctx, plan)
        scratch = Scratch.of(ctx, np.float32)

        def sums_f32(x: np.ndarray, out: tuple[int, int], pads) -> np.ndarray:
            xs = q.shifted(x) if shift_input else x.astype(np.float32)
            p = plan(x.shape)
            return p.run(xs, scratch.get(p.out_size).reshape(p.out_shape))
        sums_of = sums_f32
        if bias_f is not None:             # the sums hold the bias already
            bias, q32 = np.zeros_like(bias), q32.copy()
            q32[0] = 0
    else:
        def sums_f64(x: np.ndarray, out: tuple[int, int], pads) -> np.ndarray:
            win = window_view(pad_spatial(q.shifted(x), pads), (kh, kw), strides, dils, out)
            return np.matmul(win.reshape(-1, k), w_mat)
        sums_of = sums_f64
    bias, qp, q32 = _tiled(bias, qp, q32, t)
    zp, lo, hi = q.zp_out, q.lo, q.hi
    finish = pairs_pass(ctx)               # a residual ADD fused after it (_conv_epilogue_fits)

    def run() -> None:
        x = v[x_i]
        out, pads = get_geometry(x.shape)
        n = x.shape[0]
        y = alloc((n,) + out + (cout,))
        if y.size:
            sums = sums_of(x, out, pads)
            rows = n * out[0]
            _q_stage(sums.reshape(rows, -1), bias, qp, q32, y.reshape(rows, -1), zp, lo, hi, fast)
        v[o_i] = y if finish is None else finish(y)
    return run


# ---------------------------------------------------- int8 CONV_2D on the byte dot product (_qgemm.py)

@kernel(parallel=True)
def _q_dot(a, bp, qv, y, M, K4, N, zp, lo, hi, chunks):
    """_qgemm.quad_rows over M rows split in `chunks` parts on numba's threads (one part measured 2x
    slower through this parallel function than through quad_rows itself: run() calls that instead)."""
    for t in prange(chunks):
        q = np.int64(t)
        _qgemm.quad_rows(a, bp, qv, y, q * M // chunks, (q + 1) * M // chunks, K4, N, zp, lo, hi)


@kernel
def _byte_windows(xp, geo, rows, K4):
    """rows [M, K4 * 4] int8 (flat) = the windows of xp, the input inside its border [N, Hp, Wp, C]
    (flat): row r * OW + ox holds window (oy, ox) of image n (r = n * OH + oy), filter row by filter
    row, KW * C bytes each, consecutive in xp (dilation_w 1). Runs of up to 16 bytes are copied 16 at
    a time, in increasing order: what a copy writes past its run, the next one overwrites (the last
    one, 16 bytes of slack past the rows), and xp has 16 bytes of slack to be read past its end.
    geo = (OH, OW, Hp, Wp, C, sh, sw, dh, KH, KW). numpy's strided copy of the window view took
    34 us for a 96x96x3 stem."""
    OH, OW, Hp, Wp, C = geo[0], geo[1], geo[2], geo[3], geo[4]
    sh, sw, dh, KH, KW = geo[5], geo[6], geo[7], geo[8], geo[9]
    width = KW * C
    for r in range((rows.size - 16) // (OW * K4 * 4)):
        n, oy = r // OH, r % OH
        for ox in range(OW):
            dst = (r * OW + ox) * K4 * 4
            for i in range(KH):
                src = ((n * Hp + oy * sh + i * dh) * Wp + ox * sw) * C
                at = dst + i * width
                for j in range(0, width, 16):
                    copy16(rows, at + j, xp, src + j)


class _ByteRows:
    """The rows A [M, K4 * 4] int8 of an int8 convolution for one input shape: the input itself for a
    1x1 stride-1 filter over a multiple of 4 channels; with dilation_w 1, its windows (_byte_windows)
    from the input inside a border of its zero point (whose products LiteRT's kernels skip:
    (zp - zp) * w = 0), each row padded to whole quads (what the padding holds meets zero filter rows);
    otherwise numpy's copy of the window view. The rows live in the runtime's shared work buffer (as
    the cpu kernel's im2col matrices: ops use it only within their run)."""

    def __init__(self, x_shape, filt, strides, dils, out, pads, zp: int, owner=None):
        n, h, wd, c = x_shape
        kh, kw = filt
        self.m = n * out[0] * out[1]
        self.k4 = _qgemm.quads(kh * kw * c) // 4
        self.direct = filt == (1, 1) and strides == (1, 1) and c % 4 == 0
        if self.direct:
            return
        (pt, pb), (pl, pr) = pads
        shape = (n, h + pt + pb, wd + pl + pr, c)
        size = int(np.prod(shape))
        self.buffer = np.full(size + 16, zp, np.int8)           # 16 bytes of slack (_byte_windows)
        self.bordered = self.buffer[:size].reshape(shape)
        self.interior = self.bordered[:, pt:pt + h, pl:pl + wd]
        self.words = self.m * self.k4 + 4                        # 16 bytes of slack past the rows
        self.arena = arena(owner, "cols")
        self.arena.reserve(self.words)
        self.geo = np.array([*out, *shape[1:], *strides, dils[0], kh, kw], np.int64) if dils[1] == 1 else None
        if self.geo is None:
            self.windows = window_view(self.bordered, filt, strides, dils, out)   # [N, OH, OW, KH, KW, C]
            row = self.k4 * 4
            self.strides = (out[0] * out[1] * row, out[1] * row, row, kw * c, c, 1)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """A as a flat int32 array of M * K4 words."""
        if self.direct:
            if x.flags.c_contiguous and x.ctypes.data % 4 == 0 and x.flags.writeable:
                return x.reshape(-1).view(np.int32)
            return np.ascontiguousarray(x).reshape(-1).view(np.int32).copy()
        self.interior[...] = x
        words = self.arena.take(self.words).view(np.int32)
        if self.geo is not None:
            _byte_windows(self.buffer, self.geo, words.view(np.int8), self.k4)
        else:
            dst = np.lib.stride_tricks.as_strided(words.view(np.int8), self.windows.shape, self.strides)
            np.copyto(dst, self.windows)
        return words[:-4]


def _byte_dot_run(ctx: KernelContext, q: _QuantConv, get_geometry, dims, strides, dils, bias, qp) -> Run:
    """int8 CONV_2D as one numba call: _ByteRows' rows times the filter packed for the byte dot
    product, rescaled in registers (_qgemm.quad_rows; the output stage's fast path only)."""
    kh, kw, cin, cout = dims
    w_mat = q.w.reshape(cout, kh * kw * cin).T                   # [K, cout], int8 values
    panels = _qgemm.pack_quads(w_mat.astype(np.int8))
    # the sums hold (x + 128) * w: 128 * sum w more than (x - zp) * w's sum plus zp * sum w
    bias = bias - (_qgemm.column_sums(w_mat) + q.zp_in * w_mat.sum(axis=0, dtype=np.int64))
    table = _qgemm.stage_table(bias, qp[0], qp[1], qp[6], qp[4], qp[5])
    zp, lo, hi = np.int64(q.zp_out), np.int64(q.lo), np.int64(q.hi)
    rows_of = _cached(lambda shape: _ByteRows(shape, (kh, kw), strides, dils, *get_geometry(shape), q.zp_in,
                                              ctx.runtime))
    _plan_static(ctx, rows_of)
    finish = pairs_pass(ctx)               # a residual ADD fused after it (_conv_epilogue_fits)
    x_i, (o_i,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    alloc = ctx.output_buffer(0)

    def run() -> None:
        x = v[x_i]
        out, _ = get_geometry(x.shape)
        y = alloc((x.shape[0],) + out + (cout,))
        if y.size:
            rows = rows_of(x.shape)
            chunks = min(threads(), rows.m // 6 or 1) if rows.m * rows.k4 * 4 * cout >= _PARALLEL_MIN else 1
            if chunks > 1:
                _q_dot(rows(x), panels, table, y.reshape(-1), rows.m, rows.k4, cout, zp, lo, hi, chunks)
            else:
                _qgemm.quad_rows(rows(x), panels, table, y.reshape(-1), _ZERO, rows.m, rows.k4, cout, zp, lo, hi)
        v[o_i] = y if finish is None else finish(y)
    return run
