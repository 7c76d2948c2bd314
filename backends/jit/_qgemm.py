"""An int8 GEMM for constant right-hand sides (the int8 convolutions' filters) on VNNI's byte dot
product: int8 C = the output stage of A @ B for A [M, K] and B [K, N] int8, bit-exact with LiteRT
(exact int32 sums, then OutputStage's fixed-point rescale in vectors: _simd.vrequantize).

vpdpbusd multiplies four unsigned bytes by four signed bytes per int32 lane and adds the four products
to the lane: 64 multiply-adds per AVX-512 instruction, 4x a float32 FMA's 16. A's int8 values are
made unsigned by adding 128 (flipping each byte's sign bit as the row's four bytes are broadcast), so
every output gains 128 * sum_k B[k, n]: `column_sums` gives what the caller subtracts (folded into the
bias). K is padded to a multiple of 4 (`quads`); B's padding rows are zero, so A's padding bytes may
hold anything.

B is packed once into panels of QPANEL = 2 x DOT_LANES columns: [panels, K / 4, QPANEL] int32, each
int32 the four K-consecutive bytes of one column. The kernel holds 6 rows x one panel of C in 12
vector accumulators and, per four k, loads the panel's two vectors once and broadcasts each row's
four bytes into them, as jit/_gemm.py's float kernel does per k.

Measured (one thread, AVX-512 VNNI, 2-core EPYC VM, M = 36..2304, K = 16..576, N = 24..160): the
sums alone 144-221 multiply-adds/ns, against OpenBLAS's float32 sgemm at 38-49 on the same shapes;
with the output stage 83-160 where K >= 96 (for K = 16 the stage is most of the time: ~0.35 ns an
output, its 64-bit vector arithmetic).
"""
from __future__ import annotations

import numba
import numpy as np

from onert_py.backends.jit._numba import kernel
from onert_py.backends.jit._simd import (DOT_LANES, REQUANT_ROWS, ivload, ivsplat_unsigned, ivzero, vdot_bytes,
                                        vrequantize, vstore_bytes_first)
from onert_py.exec.memory_plan import aligned_empty

_inline = numba.njit(inline="always")

QPANEL = 2 * DOT_LANES     # columns of C per panel: two vectors
_ROWS = 6                  # rows of C per register block
# the unsigned offset's largest sum: K * 255 * 128 must stay an int32 (exact, unwrapped) for the bias fold
MAX_K = ((1 << 31) - 1) // (255 * 128)


def available() -> bool:
    """The machine has the byte dot product the kernel is compiled for."""
    return DOT_LANES > 0


def quads(k: int) -> int:
    """K rounded up to whole groups of four bytes."""
    return -(-k // 4) * 4


def pack_quads(w: np.ndarray) -> np.ndarray:
    """B [K, N] int8 as the kernel reads it: int32 [panels, K / 4, QPANEL] (flat), zero padded."""
    k, n = w.shape
    k4, panels = quads(k) // 4, -(-n // QPANEL)
    padded = np.zeros((k4 * 4, panels * QPANEL), np.int8)
    padded[:k, :n] = w
    packed = padded.reshape(k4, 4, panels, QPANEL).transpose(2, 0, 3, 1)   # [panels, k4, column, byte]
    out = aligned_empty(panels * k4 * QPANEL, np.int32)
    out.view(np.int8).reshape(packed.shape)[...] = packed
    return out


def column_sums(w: np.ndarray) -> np.ndarray:
    """What the unsigned offset adds to each output column: 128 * sum_k B[k, n] (int64 [N])."""
    return 128 * np.asarray(w, np.int64).sum(axis=0)


def stage_table(bias, mult, left, fix, offset, shift) -> np.ndarray:
    """The output stage's per-column parameters (int64 [N] each) as vrequantize reads them: int64
    [REQUANT_ROWS, whole panels] (flat), zero padded."""
    n = len(bias)
    table = np.zeros((REQUANT_ROWS, -(-n // QPANEL) * QPANEL), np.int64)
    for r, values in enumerate((bias, mult, left, fix, offset, shift)):
        table[r, :n] = values
    return table.reshape(-1)


@_inline
def _store(y, at, v0, v1, cols, qv, col, stride, zp, lo, hi):
    """y[at : at + cols] = the int8 outputs of columns col.. of the sums v0, v1 (cols <= QPANEL). No
    branch: numba then drops the arrays' reference counting around the inlined body (with one it kept
    an atomic call and spilled every accumulator per store, 4x slower)."""
    vstore_bytes_first(y, at, vrequantize(v0, qv, col, stride, zp, lo, hi), min(cols, DOT_LANES))
    vstore_bytes_first(y, at + DOT_LANES, vrequantize(v1, qv, col + DOT_LANES, stride, zp, lo, hi),
                       max(cols - DOT_LANES, 0))


@kernel
def quad_rows(a, bp, qv, y, m0, m1, K4, N, zp, lo, hi):
    """y[m * N + n] = the output stage (vrequantize, parameters qv from stage_table) of
    sum_k (A[m, k] + 128) * B[k, n], for m0 <= m < m1 and n < N: A's row m is the K4 int32 words
    a[m * K4:] (four int8 each), B packed by pack_quads, y int8 (flat)."""
    stride = qv.size // REQUANT_ROWS
    for p in range((N + QPANEL - 1) // QPANEL):
        base = p * K4 * QPANEL
        col = p * QPANEL
        cols = min(QPANEL, N - col)
        m = m0
        while m + _ROWS <= m1:
            c00 = ivzero(); c01 = ivzero(); c10 = ivzero(); c11 = ivzero(); c20 = ivzero(); c21 = ivzero()  # noqa: E702
            c30 = ivzero(); c31 = ivzero(); c40 = ivzero(); c41 = ivzero(); c50 = ivzero(); c51 = ivzero()  # noqa: E702
            r = m * K4
            for k in range(K4):
                at = base + k * QPANEL
                b0 = ivload(bp, at)
                b1 = ivload(bp, at + DOT_LANES)
                x = ivsplat_unsigned(a, r + k)
                c00 = vdot_bytes(c00, x, b0); c01 = vdot_bytes(c01, x, b1)  # noqa: E702
                x = ivsplat_unsigned(a, r + K4 + k)
                c10 = vdot_bytes(c10, x, b0); c11 = vdot_bytes(c11, x, b1)  # noqa: E702
                x = ivsplat_unsigned(a, r + 2 * K4 + k)
                c20 = vdot_bytes(c20, x, b0); c21 = vdot_bytes(c21, x, b1)  # noqa: E702
                x = ivsplat_unsigned(a, r + 3 * K4 + k)
                c30 = vdot_bytes(c30, x, b0); c31 = vdot_bytes(c31, x, b1)  # noqa: E702
                x = ivsplat_unsigned(a, r + 4 * K4 + k)
                c40 = vdot_bytes(c40, x, b0); c41 = vdot_bytes(c41, x, b1)  # noqa: E702
                x = ivsplat_unsigned(a, r + 5 * K4 + k)
                c50 = vdot_bytes(c50, x, b0); c51 = vdot_bytes(c51, x, b1)  # noqa: E702
            o = m * N + col
            _store(y, o, c00, c01, cols, qv, col, stride, zp, lo, hi)
            _store(y, o + N, c10, c11, cols, qv, col, stride, zp, lo, hi)
            _store(y, o + 2 * N, c20, c21, cols, qv, col, stride, zp, lo, hi)
            _store(y, o + 3 * N, c30, c31, cols, qv, col, stride, zp, lo, hi)
            _store(y, o + 4 * N, c40, c41, cols, qv, col, stride, zp, lo, hi)
            _store(y, o + 5 * N, c50, c51, cols, qv, col, stride, zp, lo, hi)
            m += _ROWS
        while m < m1:
            c00 = ivzero(); c01 = ivzero()  # noqa: E702
            r = m * K4
            for k in range(K4):
                at = base + k * QPANEL
                x = ivsplat_unsigned(a, r + k)
                c00 = vdot_bytes(c00, x, ivload(bp, at))
                c01 = vdot_bytes(c01, x, ivload(bp, at + DOT_LANES))
            _store(y, m * N + col, c00, c01, cols, qv, col, stride, zp, lo, hi)
            m += 1
