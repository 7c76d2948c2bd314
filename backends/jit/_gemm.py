"""A float32 GEMM for constant right-hand sides (convolution filters, FULLY_CONNECTED weights), with the
bias and a clamp applied in registers: C = clamp(A @ B + bias, lo, hi).

B is packed once, at prepare time, into panels of PANEL = 2 x LANES columns ([panels, K, PANEL], zero
padded past N). The kernel holds a block of 6 rows x one panel of C in 12 vector accumulators
(jit/_simd.py) and, for each k, loads the panel's two vectors once and broadcasts each row's A value
into them: 12 fused multiply-adds per 2 loads and 6 broadcasts. Each output is one sum over k in
order, with fused multiply-adds, as XNNPACK's micro-kernels compute it (not OpenBLAS's order: results
differ from the cpu kernel's sgemm by rounding, within the conformance tolerances).

Measured (one thread, AVX-512 on a 2-core EPYC VM, 1x1 convolutions of the mediapipe models: M = 256..4096,
K, N = 24..128): ~55 multiply-adds/ns, against OpenBLAS's sgemm at 33-48 on the same shapes.
A is read through strides (sm, sk) so that a transposed im2col matrix needs no copy, and a
convolution's windows are read in place (conv_gemm): its K sum runs over KH filter rows of KW * C
consecutive floats of the zero-bordered input, so no im2col copy is made at all.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numba
import numpy as np

from onert_py.backends.jit._numba import compile_now, kernel, prange, threads
from onert_py.backends.jit._simd import (LANES, vadd, vclamp, vfma, vload, vsplat, vsplat_at, vstore, vstore_first,
                                        vzero)
from onert_py.backends.jit.codegen import channel_loop, compile_source
from onert_py.exec.memory_plan import aligned_empty

if TYPE_CHECKING:
    from onert_py.backends.jit.elementwise import Chain

_inline = numba.njit(inline="always")   # compiled into the caller, where literal arguments propagate

PANEL = 2 * LANES     # columns of C per panel: two vectors
_ROWS = 6             # rows of C per register block


def pack_panels(b: np.ndarray) -> np.ndarray:
    """B [K, N] as the kernel reads it: panels of PANEL columns, each [K, PANEL] contiguous, flat."""
    k, n = b.shape
    panels = -(-n // PANEL)
    padded = np.zeros((k, panels * PANEL), np.float32)
    padded[:, :n] = b
    out = aligned_empty(padded.size)        # vector loads of whole cache lines
    out.reshape(panels, k, PANEL)[...] = padded.reshape(k, panels, PANEL).transpose(1, 0, 2)
    return out


def pad_bias(bias: np.ndarray | None, n: int) -> np.ndarray:
    """The bias (zeros when None) padded to whole panels, as the kernel loads it."""
    out = aligned_empty(-(-n // PANEL) * PANEL, zero=True)
    if bias is not None:
        out[:n] = np.asarray(bias, np.float32).reshape(-1)
    return out


@_inline
def _store(c, at, v0, v1, cols):
    """c[at : at + cols] = the first `cols` lanes of (v0, v1); a literal cols = PANEL compiles to two
    plain vector stores, others to masked ones."""
    if cols == PANEL:
        vstore(c, at, v0)
        vstore(c, at + LANES, v1)
    else:
        vstore_first(c, at, v0, min(cols, LANES))
        if cols > LANES:
            vstore_first(c, at + LANES, v1, cols - LANES)


@_inline
def _panel(a, a0, sm, sk, seg, KH, KWC, bp, base, bias0, bias1, lov, hiv, c, c0, col, cols, m0, m1, N):
    """Rows m0..m1 of C's columns col..col + cols, from the packed panel at bp[base:]. Row m of A starts
    at a[a0 + m * sm] and its K = KH * KWC values lie in KH segments `seg` apart, KWC values `sk` apart
    each (a matrix: KH = 1; a convolution's windows read in place: KH filter rows of KW * C floats); row
    m of C starts at c[c0 + m * N]."""
    m = m0
    while m + _ROWS <= m1:
        c00 = vzero(); c01 = vzero(); c10 = vzero(); c11 = vzero(); c20 = vzero(); c21 = vzero()  # noqa: E702
        c30 = vzero(); c31 = vzero(); c40 = vzero(); c41 = vzero(); c50 = vzero(); c51 = vzero()  # noqa: E702
        kb = base
        for i in range(KH):
            r = a0 + m * sm + i * seg
            for j in range(KWC):
                b0 = vload(bp, kb)
                b1 = vload(bp, kb + LANES)
                kb += PANEL
                at = r + j * sk
                x = vsplat_at(a, at)
                c00 = vfma(x, b0, c00); c01 = vfma(x, b1, c01)  # noqa: E702
                x = vsplat_at(a, at + sm)
                c10 = vfma(x, b0, c10); c11 = vfma(x, b1, c11)  # noqa: E702
                x = vsplat_at(a, at + 2 * sm)
                c20 = vfma(x, b0, c20); c21 = vfma(x, b1, c21)  # noqa: E702
                x = vsplat_at(a, at + 3 * sm)
                c30 = vfma(x, b0, c30); c31 = vfma(x, b1, c31)  # noqa: E702
                x = vsplat_at(a, at + 4 * sm)
                c40 = vfma(x, b0, c40); c41 = vfma(x, b1, c41)  # noqa: E702
                x = vsplat_at(a, at + 5 * sm)
                c50 = vfma(x, b0, c50); c51 = vfma(x, b1, c51)  # noqa: E702
        at = c0 + m * N + col
        _store(c, at, vclamp(vadd(c00, bias0), lov, hiv), vclamp(vadd(c01, bias1), lov, hiv), cols)
        _store(c, at + N, vclamp(vadd(c10, bias0), lov, hiv), vclamp(vadd(c11, bias1), lov, hiv), cols)
        _store(c, at + 2 * N, vclamp(vadd(c20, bias0), lov, hiv), vclamp(vadd(c21, bias1), lov, hiv), cols)
        _store(c, at + 3 * N, vclamp(vadd(c30, bias0), lov, hiv), vclamp(vadd(c31, bias1), lov, hiv), cols)
        _store(c, at + 4 * N, vclamp(vadd(c40, bias0), lov, hiv), vclamp(vadd(c41, bias1), lov, hiv), cols)
        _store(c, at + 5 * N, vclamp(vadd(c50, bias0), lov, hiv), vclamp(vadd(c51, bias1), lov, hiv), cols)
        m += _ROWS
    # The last rows: three, then two at a time (six or four chains of multiply-adds; one row's two
    # chains wait on the FMA latency: [4, 256] x [256, 256] took 1.8x the sgemm, 1.0x for 6 rows), then
    # one; four as two and two. Every element still sums its products in k order.
    while m + 3 <= m1 and m1 - m != 4:
        c00 = vzero(); c01 = vzero(); c10 = vzero(); c11 = vzero(); c20 = vzero(); c21 = vzero()  # noqa: E702
        kb = base
        for i in range(KH):
            r = a0 + m * sm + i * seg
            for j in range(KWC):
                b0 = vload(bp, kb)
                b1 = vload(bp, kb + LANES)
                kb += PANEL
                at = r + j * sk
                x = vsplat_at(a, at)
                c00 = vfma(x, b0, c00); c01 = vfma(x, b1, c01)  # noqa: E702
                x = vsplat_at(a, at + sm)
                c10 = vfma(x, b0, c10); c11 = vfma(x, b1, c11)  # noqa: E702
                x = vsplat_at(a, at + 2 * sm)
                c20 = vfma(x, b0, c20); c21 = vfma(x, b1, c21)  # noqa: E702
        at = c0 + m * N + col
        _store(c, at, vclamp(vadd(c00, bias0), lov, hiv), vclamp(vadd(c01, bias1), lov, hiv), cols)
        _store(c, at + N, vclamp(vadd(c10, bias0), lov, hiv), vclamp(vadd(c11, bias1), lov, hiv), cols)
        _store(c, at + 2 * N, vclamp(vadd(c20, bias0), lov, hiv), vclamp(vadd(c21, bias1), lov, hiv), cols)
        m += 3
    while m + 2 <= m1:
        c00 = vzero(); c01 = vzero(); c10 = vzero(); c11 = vzero()  # noqa: E702
        kb = base
        for i in range(KH):
            r = a0 + m * sm + i * seg
            for j in range(KWC):
                b0 = vload(bp, kb)
                b1 = vload(bp, kb + LANES)
                kb += PANEL
                at = r + j * sk
                x = vsplat_at(a, at)
                c00 = vfma(x, b0, c00); c01 = vfma(x, b1, c01)  # noqa: E702
                x = vsplat_at(a, at + sm)
                c10 = vfma(x, b0, c10); c11 = vfma(x, b1, c11)  # noqa: E702
        at = c0 + m * N + col
        _store(c, at, vclamp(vadd(c00, bias0), lov, hiv), vclamp(vadd(c01, bias1), lov, hiv), cols)
        _store(c, at + N, vclamp(vadd(c10, bias0), lov, hiv), vclamp(vadd(c11, bias1), lov, hiv), cols)
        m += 2
    while m < m1:
        c00 = vzero()
        c01 = vzero()
        kb = base
        for i in range(KH):
            r = a0 + m * sm + i * seg
            for j in range(KWC):
                x = vsplat_at(a, r + j * sk)
                c00 = vfma(x, vload(bp, kb), c00)
                c01 = vfma(x, vload(bp, kb + LANES), c01)
                kb += PANEL
        _store(c, c0 + m * N + col, vclamp(vadd(c00, bias0), lov, hiv), vclamp(vadd(c01, bias1), lov, hiv), cols)
        m += 1


@_inline
def _half_panel(a, a0, sm, sk, seg, KH, KWC, bp, base, bias0, lov, hiv, c, c0, col, cols, m0, m1, N):
    """_panel for a last panel of at most LANES columns: one vector per row, 8 rows a block (8 chains of
    multiply-adds keep both FMA units busy; a whole panel would spend half its work on padding)."""
    m = m0
    while m + 8 <= m1:
        c0_ = vzero(); c1 = vzero(); c2 = vzero(); c3 = vzero()  # noqa: E702
        c4 = vzero(); c5 = vzero(); c6 = vzero(); c7 = vzero()  # noqa: E702
        kb = base
        for i in range(KH):
            r = a0 + m * sm + i * seg
            for j in range(KWC):
                b0 = vload(bp, kb)
                kb += PANEL
                at = r + j * sk
                c0_ = vfma(vsplat_at(a, at), b0, c0_)
                c1 = vfma(vsplat_at(a, at + sm), b0, c1)
                c2 = vfma(vsplat_at(a, at + 2 * sm), b0, c2)
                c3 = vfma(vsplat_at(a, at + 3 * sm), b0, c3)
                c4 = vfma(vsplat_at(a, at + 4 * sm), b0, c4)
                c5 = vfma(vsplat_at(a, at + 5 * sm), b0, c5)
                c6 = vfma(vsplat_at(a, at + 6 * sm), b0, c6)
                c7 = vfma(vsplat_at(a, at + 7 * sm), b0, c7)
        at = c0 + m * N + col
        vstore_first(c, at, vclamp(vadd(c0_, bias0), lov, hiv), cols)
        vstore_first(c, at + N, vclamp(vadd(c1, bias0), lov, hiv), cols)
        vstore_first(c, at + 2 * N, vclamp(vadd(c2, bias0), lov, hiv), cols)
        vstore_first(c, at + 3 * N, vclamp(vadd(c3, bias0), lov, hiv), cols)
        vstore_first(c, at + 4 * N, vclamp(vadd(c4, bias0), lov, hiv), cols)
        vstore_first(c, at + 5 * N, vclamp(vadd(c5, bias0), lov, hiv), cols)
        vstore_first(c, at + 6 * N, vclamp(vadd(c6, bias0), lov, hiv), cols)
        vstore_first(c, at + 7 * N, vclamp(vadd(c7, bias0), lov, hiv), cols)
        m += 8
    while m < m1:
        c0_ = vzero()
        kb = base
        for i in range(KH):
            r = a0 + m * sm + i * seg
            for j in range(KWC):
                c0_ = vfma(vsplat_at(a, r + j * sk), vload(bp, kb), c0_)
                kb += PANEL
        vstore_first(c, c0 + m * N + col, vclamp(vadd(c0_, bias0), lov, hiv), cols)
        m += 1


@_inline
def _panels(a, a0, sm, sk, seg, KH, KWC, bp, bias, lov, hiv, c, c0, m0, m1, N):
    """Rows m0..m1 of C (see _panel), panel by panel: the whole ones, then the last, partial one."""
    K = KH * KWC
    whole = N // PANEL
    for p in range(whole):
        _panel(a, a0, sm, sk, seg, KH, KWC, bp, p * K * PANEL, vload(bias, p * PANEL),
               vload(bias, p * PANEL + LANES), lov, hiv, c, c0, p * PANEL, PANEL, m0, m1, N)
    p = whole
    if N - p * PANEL > LANES:
        _panel(a, a0, sm, sk, seg, KH, KWC, bp, p * K * PANEL, vload(bias, p * PANEL),
               vload(bias, p * PANEL + LANES), lov, hiv, c, c0, p * PANEL, N - p * PANEL, m0, m1, N)
    elif N > p * PANEL:
        _half_panel(a, a0, sm, sk, seg, KH, KWC, bp, p * K * PANEL, vload(bias, p * PANEL), lov, hiv,
                    c, c0, p * PANEL, N - p * PANEL, m0, m1, N)


@kernel
def _rows_of(a, sm, sk, bp, bias, lo, hi, c, m0, m1, K, N):
    """Rows m0..m1 of a matrix product, compiled for rows of A contiguous (sk = 1) and for columns
    contiguous (sm = 1), as literal arguments: the 6 rows' addresses then need no multiply per k (a
    runtime stride kept LLVM's integer registers spilling, 10-20 % slower)."""
    lov, hiv = vsplat(lo), vsplat(hi)
    if sk == 1:
        _panels(a, 0, sm, 1, 0, 1, K, bp, bias, lov, hiv, c, 0, m0, m1, N)
    else:
        _panels(a, 0, 1, sk, 0, 1, K, bp, bias, lov, hiv, c, 0, m0, m1, N)


@kernel(parallel=True)
def gemm(a, sm, sk, bp, bias, lo, hi, c, M, K, N, chunks):
    """c[m * N + n] = clamp(sum_k a[m * sm + k * sk] * B[k, n] + bias[n], lo, hi) for m < M, n < N (sk = 1
    or sm = 1: rows or columns of A contiguous), with B packed by pack_panels and bias padded by
    pad_bias; the rows in `chunks` parts (multiples of the register block) on numba's threads when
    chunks > 1. The caller checks the sizes: nothing here does."""
    if chunks > 1:
        blocks = (M + _ROWS - 1) // _ROWS
        for t in prange(chunks):
            q = np.int64(t)
            _rows_of(a, sm, sk, bp, bias, lo, hi, c, min(M, q * blocks // chunks * _ROWS),
                     min(M, (q + 1) * blocks // chunks * _ROWS), K, N)
    else:   # m0 as an int64, not a literal 0: one specialization of _rows_of for every caller
        _rows_of(a, sm, sk, bp, bias, lo, hi, c, np.int64(0), M, K, N)


@kernel
def _conv_rows(xp, geo, bp, bias, lo, hi, c, r0, r1, N):
    """Output rows r0..r1 (r = n * OH + oy) of a convolution read in place from xp, the zero-bordered
    input [N, Hp, Wp, C] (flat): output pixel (oy, ox)'s window starts at padded row oy * sh, column
    ox * sw, and its filter rows are KW * C consecutive floats (dilation_w 1). geo = (OH, OW, Hp, Wp, C,
    sh, sw, dh, KH, KW)."""
    OH, OW, Hp, Wp, C = geo[0], geo[1], geo[2], geo[3], geo[4]
    sh, sw, dh, KH, KW = geo[5], geo[6], geo[7], geo[8], geo[9]
    lov, hiv = vsplat(lo), vsplat(hi)
    for r in range(r0, r1):
        n, oy = r // OH, r % OH
        _panels(xp, ((n * Hp + oy * sh) * Wp) * C, sw * C, 1, dh * Wp * C, KH, KW * C, bp, bias, lov, hiv,
                c, r * OW * N, 0, OW, N)


@kernel(parallel=True)
def conv_gemm(xp, geo, bp, bias, lo, hi, c, N, chunks):
    """y = clamp(conv(x, w) + bias, lo, hi) (see _conv_rows; B = the filter [KH * KW * C, N] packed by
    pack_panels), the output rows in `chunks` parts on numba's threads when chunks > 1."""
    rows = c.shape[0] // (geo[1] * N)
    if chunks > 1:
        for t in prange(chunks):
            q = np.int64(t)
            _conv_rows(xp, geo, bp, bias, lo, hi, c, q * rows // chunks, (q + 1) * rows // chunks, N)
    else:
        _conv_rows(xp, geo, bp, bias, lo, hi, c, 0, rows, N)


def padded_width(n: int) -> int:
    """Columns the kernel computes for N: whole panels, then a half or whole panel for the rest."""
    whole, rest = divmod(n, PANEL)
    return whole * PANEL + (0 if rest == 0 else LANES if rest <= LANES else PANEL)


def gemm_wins(n: int) -> bool:
    """The packed GEMM (with its bias and clamp) measured at or above OpenBLAS's sgemm (without them)
    when at least 70 % of the columns it computes are N's (K = 48, M = 64 and 1024, AVX-512: N = 8 0.85x,
    12-16 1.05-1.25x, 20 0.7-0.9x, 24-128 1.0-1.27x); below that padding costs more than it saves."""
    return n >= 1 and n >= 0.7 * padded_width(n)


# ------------------------------------------------------------- elementwise ops fused after the product
#
# The ops fused after a convolution or FULLY_CONNECTED (a residual ADD, a PRELU: jit/elementwise.Chain)
# run inside the product's kernel: each thread computes its rows of C a block of about BLOCK floats at a
# time and applies the chain to that block while it is in L1. A pass of its own would run on one thread
# and read C back from L2 or memory (at 2 threads it was 17-23 % of iris_landmark and face_landmark).
# The values are the same: the chain reads what the product stored.

BLOCK = 4096

_FUSED = """from numba import prange
from onert_py.backends.jit._gemm import BLOCK, _ROWS, _conv_rows, _rows_of


@kernel
def _then(c, p0, p1, channels{e}):
{views}
{loop}


@kernel
def _matrix_rows(a, sm, sk, bp, bias, lo, hi, c, m0, m1, K, N{e}):
    step = max(_ROWS, BLOCK // N // _ROWS * _ROWS)
    for s in range(m0, m1, step):
        s1 = min(s + step, m1)
        _rows_of(a, sm, sk, bp, bias, lo, hi, c, s, s1, K, N)
        _then(c, s, s1, N{e})


@kernel(parallel=True)
def matrix(a, sm, sk, bp, bias, lo, hi, c, M, K, N, chunks{e}):
    if chunks > 1:
        blocks = (M + _ROWS - 1) // _ROWS
        for t in prange(chunks):
            q = np.int64(t)
            _matrix_rows(a, sm, sk, bp, bias, lo, hi, c, min(M, q * blocks // chunks * _ROWS),
                         min(M, (q + 1) * blocks // chunks * _ROWS), K, N{e})
    else:
        _matrix_rows(a, sm, sk, bp, bias, lo, hi, c, 0, M, K, N{e})


@kernel
def _window_rows(xp, geo, bp, bias, lo, hi, c, r0, r1, N{e}):
    OW = geo[1]
    step = max(1, BLOCK // (OW * N))
    for s in range(r0, r1, step):
        s1 = min(s + step, r1)
        _conv_rows(xp, geo, bp, bias, lo, hi, c, s, s1, N)
        _then(c, s * OW, s1 * OW, N{e})


@kernel(parallel=True)
def windows(xp, geo, bp, bias, lo, hi, c, N, chunks{e}):
    rows = c.shape[0] // (geo[1] * N)
    if chunks > 1:
        for t in prange(chunks):
            q = np.int64(t)
            _window_rows(xp, geo, bp, bias, lo, hi, c, q * rows // chunks, (q + 1) * rows // chunks, N{e})
    else:
        _window_rows(xp, geo, bp, bias, lo, hi, c, 0, rows, N{e})
"""


def _fused_kernels(then: Chain):
    """The module of `matrix` and `windows` (as gemm and conv_gemm, taking the chain's operands last)
    for this chain."""
    e = "".join(f", e{j}" for j in range(len(then.modes)))
    loop = "\n".join(channel_loop("    ", "(p1 - p0) * channels", "channels", ["v = c[k]", *then.lines, "c[k] = v"]))
    # the block's own views: an index from 0 up, which LLVM sees is never negative (numba wraps
    # negative indices: with p0 + p it kept the loop scalar, 2x slower than the GEMM itself)
    views = "\n".join(f"    {name} = {name}[p0 * channels:p1 * channels]" for name in
                       ("c", *(f"e{j}" for j, mode in enumerate(then.modes) if mode == "same")))
    source = _FUSED.format(e=e, loop=loop, views=views)
    return compile_source(source, "matrix"), compile_source(source, "windows")


class PackedProduct:
    """A constant right-hand side w [K, N] packed for the kernels, with its bias and clamp: `matrix(a, y)`
    gives y = clamp(a @ w + bias) for a [M, K] float32 (rows or columns contiguous; others are copied)
    and y a C-contiguous float32 array of M * N values (the output, of its own shape); `windows(xp,
    geo, y)` the same for a convolution's windows read in place (conv_gemm; w = the filter as
    [KH * KW * C, N]). bounds None: no clamp (NaN kept either way). `then`: elementwise ops applied to
    the output in the same kernel (fused after the op); `uses`: which of the two products the op runs,
    compiled now when `then` is given. Work is split over numba's threads from `parallel_min`
    multiply-adds on."""

    def __init__(self, w: np.ndarray, bias: np.ndarray | None, bounds: tuple[float, float] | None,
                 parallel_min: int, then: Chain | None = None, uses: tuple[str, ...] = ("matrix", "windows")):
        self.k, self.n = w.shape
        self.panels = pack_panels(np.asarray(w, np.float32))
        self.bias = pad_bias(bias, self.n)
        lo, hi = (-np.inf, np.inf) if bounds is None else bounds
        self.lo, self.hi = np.float32(lo), np.float32(hi)
        self.parallel_min = parallel_min
        self.then = then
        self._gemm, self._conv_gemm = gemm, conv_gemm
        if then is not None:
            self._gemm, self._conv_gemm = _fused_kernels(then)
            f32, i64 = np.zeros(1, np.float32), np.zeros(1, np.int64)
            operands = [f32] * len(then.modes)
            if "matrix" in uses:
                compile_now(self._gemm, f32, 1, 1, f32, f32, self.lo, self.hi, f32, 1, 1, 1, 1, *operands)
            if "windows" in uses:
                compile_now(self._conv_gemm, f32, i64, f32, f32, self.lo, self.hi, f32, 1, 1, *operands)

    def _chunks(self, rows: int, blocks: int) -> int:
        return min(threads(), blocks) if rows * self.k * self.n >= self.parallel_min else 1

    def matrix(self, a: np.ndarray, y: np.ndarray) -> None:
        m, k, n = a.shape[0], self.k, self.n
        flags = a.flags
        if not flags.writeable:         # numba compiles read-only arrays apart: copy instead
            a = np.array(a, np.float32, order="C")
            flags = a.flags
        if flags.c_contiguous:
            flat, sm, sk = a.ravel(), k, 1
        elif flags.f_contiguous:
            flat, sm, sk = a.T.ravel(), 1, m
        else:
            flat, sm, sk = np.ascontiguousarray(a).ravel(), k, 1
        chunks = self._chunks(m, -(-m // _ROWS))
        if self.then is None:
            self._gemm(flat, sm, sk, self.panels, self.bias, self.lo, self.hi, y.ravel(), m, k, n, chunks)
        else:
            self._gemm(flat, sm, sk, self.panels, self.bias, self.lo, self.hi, y.ravel(), m, k, n, chunks,
                       *self.then.args(y.shape))

    def windows(self, xp: np.ndarray, geo: np.ndarray, y: np.ndarray) -> None:
        pixels = y.size // self.n
        chunks = self._chunks(pixels, pixels // int(geo[1]))
        if self.then is None:
            self._conv_gemm(xp, geo, self.panels, self.bias, self.lo, self.hi, y.ravel(), self.n, chunks)
        else:
            self._conv_gemm(xp, geo, self.panels, self.bias, self.lo, self.hi, y.ravel(), self.n, chunks,
                            *self.then.args(y.shape))
