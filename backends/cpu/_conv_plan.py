"""Per-shape execution plans for the float32 convolutions of conv.py (NHWC / NDHWC).

A plan is made once per input shape (at prepare time for static shapes) and holds everything a run needs:
strided views that put every filter tap at a fixed offset of a work buffer, tiled weights, the bias laid
out for long inner loops. Runs then cost a few numpy calls:

* depthwise: one `np.einsum` over a view [KH, KW, N, OH, Q, L] of the input; einsum's multiply-accumulate
  loop sums the taps of each output in (i, j) order, as LiteRT's reference kernel does (no temporaries,
  and results do not depend on the layout chosen);
* convolution: pointwise = one sgemm on the input itself; otherwise one im2col copy of a window view
  into a [M, KH*KW*C] buffer and one sgemm; a single output channel (2-D, large) = the depthwise einsum
  over the input channels and a channel sum.

Work buffers (zero-bordered copies of the input, im2col matrices) belong to the runtime, not to the op:
ops run one at a time and use a buffer only within their run, so same-purpose buffers are shared (see
`arena`). Outputs are always fresh arrays: a caller may hold on to them.
"""
from __future__ import annotations

import weakref
from typing import Sequence

import numpy as np

from onert_py.exec.memory_plan import aligned_empty

try:  # einsum's C entry point: np.einsum's Python wrapper (array-function dispatch) costs ~5 us a call
    from numpy._core.multiarray import c_einsum as _einsum
except ImportError:  # numpy < 2
    from numpy.core.multiarray import c_einsum as _einsum

_F32 = np.float32
_ISZ = 4                    # bytes per float32

# Inner loops of at least this many floats: numpy's per-inner-loop overhead is then small (measured:
# einsum over 8-float rows is ~40x slower per element than over 1024-float rows, and whole output rows
# of up to 8K floats another 2-10 % faster than 1K-float chunks in the models).
_INNER = 8192
# A per-channel constant (bias, 1x1 depthwise weights) is tiled to rows of at least this many floats:
# numpy's broadcasting ufunc loops measured ~1.6x faster per element from ~6K-float rows on than on 1K-4K
# (bias add on [9216, 32]: 63 -> 38 us).
ROW = 8192
# Zero-bordered buffers up to this size get their own buffer (shared only by ops with the same shape and
# interior), whose border is zeroed once; larger ones share one buffer per runtime and zero their border
# on every run (a few slice fills, negligible next to the op).
_PRIVATE_PAD_BYTES = 256 << 10
# im2col matrices up to this size live in a shared work buffer; larger ones are allocated per run.
_KEEP_COLS_BYTES = 16 << 20
# Convolutions (2-D, at most 9 taps) of inputs with at most this many channels gather their patches
# transposed (measured 10-20 % faster on the 3x3 RGB stems; 5x5 stems are faster untransposed).
_FEW_CHANNELS = 4
# Strided depthwise with at least this many channels: C-long inner loops (see DepthwisePlan).
_INNER_C_MIN = 96
# Strided depthwise with padding and at least this many outputs runs on column phases. Without padding
# the taps read x itself (no copy at all), which measured faster in the models than the phase copy
# (C-float inner loops) plus one einsum per phase; small ops pay more for the extra calls than they save.
_PHASES_MIN_OUT = 16384


def chunk(n: int, c: int, target: int = _INNER) -> int:
    """Smallest t dividing n with t*c >= target (else n): rows of t*c floats for inner loops."""
    for t in range(1, n + 1):
        if n % t == 0 and t * c >= target:
            return t
    return max(n, 1)


class Arena:
    """A float32 work buffer of one runtime, as large as its largest user: users reserve at plan time
    (plans of static shapes are made at prepare time) and bind at their first run, so it is allocated
    once. A user bound to an older, smaller buffer keeps using it."""
    __slots__ = ("need", "buf", "__weakref__")

    def __init__(self) -> None:
        self.need = 0
        self.buf: np.ndarray | None = None

    def reserve(self, n: int) -> None:
        self.need = max(self.need, n)

    def take(self, n: int) -> np.ndarray:
        self.reserve(n)
        if self.buf is None or self.buf.size < self.need:
            self.buf = aligned_empty(self.need, _F32, zero=True)
        return self.buf[:n]


_ARENAS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # runtime -> {key: Arena}


def arena(owner, key) -> Arena:
    """The runtime's arena for `key` (a private one when there is no weak-referenceable runtime)."""
    try:
        pool = _ARENAS.setdefault(owner, {})
    except TypeError:
        return Arena()
    a = pool.get(key)
    if a is None:
        a = pool[key] = Arena()
    return a


class Padded:
    """The input inside a zero border: a buffer [N, *padded, C] with x at inside[d] = (start, size)."""

    def __init__(self, owner, shape: tuple[int, ...], inside: Sequence[tuple[int, int]]):
        self.shape, self.inside = shape, tuple(inside)
        self.size = int(np.prod(shape))
        self.shared = self.size * _ISZ > _PRIVATE_PAD_BYTES
        self.arena = arena(owner, "pad" if self.shared else ("pad", shape, self.inside))
        self.arena.reserve(self.size)
        self.array: np.ndarray | None = None

    def bind(self) -> np.ndarray:
        a = self.array = self.arena.take(self.size).reshape(self.shape)
        spans = [slice(s, s + n) for s, n in self.inside]
        self.interior = a[(slice(None), *spans)]
        self.border = []
        if self.shared:     # other users write their data here: zero the border on every run
            for d, (s, n) in enumerate(self.inside):
                before = (slice(None), *spans[:d])
                for part in (slice(0, s), slice(s + n, self.shape[d + 1])):
                    if part.stop > part.start:
                        self.border.append(a[before + (part,)])
        return a

    def clear_border(self) -> None:
        for b in self.border:
            b.fill(0)


class Phased:
    """The input split into its column phases inside a zero border, for strided depthwise convolution:
    a buffer [N, Hp, S, Wq, C] whose plane p holds padded columns p, p + S, p + 2S, ... (Wq = ceil(Wp/S)).
    A tap at padded column q*S + j then reads plane j % S at index q + j // S: consecutive output pixels
    read consecutive floats, so inner loops are long whatever C is."""

    def __init__(self, owner, x_shape, s: int, pads):
        n, h, wd, c = x_shape
        (pt, pb), (pl, pr) = pads
        hp, wp = h + pt + pb, wd + pl + pr
        wq = -(-wp // s)
        self.shape = (n, hp, s, wq, c)
        self.size = int(np.prod(self.shape))
        # per plane p: the x columns w0::s it holds, from index i0 on, cnt of them
        self.fills = []
        for p in range(s):
            w0 = (p - pl) % s
            cnt = len(range(w0, wd, s))
            self.fills.append((p, w0, (w0 + pl) // s, cnt))
        self.rows = (pt, h)
        self.shared = self.size * _ISZ > _PRIVATE_PAD_BYTES
        key = "pad" if self.shared else ("phases", self.shape, pt, pl, h, wd)
        self.arena = arena(owner, key)
        self.arena.reserve(self.size)
        self.array: np.ndarray | None = None

    def bind(self, mult: int) -> np.ndarray:
        a = self.array = self.arena.take(self.size).reshape(self.shape)
        pt, h = self.rows
        rows = slice(pt, pt + h)
        n, hp, s, wq, c = self.shape
        self.copies = []
        self.border = [a[:, :pt], a[:, pt + h:]] if self.shared else []
        for p, w0, i0, cnt in self.fills:
            dst = a[:, rows, p, i0:i0 + cnt]
            if mult > 1:
                dst = dst.reshape(dst.shape[:-1] + (c // mult, mult))
            self.copies.append((dst, (slice(None), slice(None), slice(w0, None, s))))
            if self.shared:
                self.border += [a[:, rows, p, :i0], a[:, rows, p, i0 + cnt:]]
        self.border = [b for b in self.border if b.size]
        return a

    def fill(self, x: np.ndarray, mult: int) -> None:
        for b in self.border:
            b.fill(0)
        for dst, cols in self.copies:
            src = x[cols]
            dst[...] = src[..., None] if mult > 1 else src


class DepthwisePlan:
    """Depthwise convolution for one input shape [N, H, W, C]: taps [KH, KW, C*M], output channel
    c*M + m reads input channel c.

    y = einsum over V[KH, KW', N, OH, Q, L] (einsum's multiply-accumulate loop, no temporaries): tap (i, j)
    of output row r reads padded row r*sh + i*dh. The innermost L floats:
      * stride_w == 1: L = t*C' consecutive output pixels (t divides OW, L >= 8192 where possible) with
        the tap's weights tiled t times, so the inner loop is long whatever C' is;
      * stride_w == S > 1 (dilation_w 1, padding, >= 16K outputs): the input is copied into its S column
        phases (`Phased`) instead of a zero-bordered copy; the taps of phase p (j = p, p + S, ...) are
        one einsum over that plane, again with L = t*C' consecutive output pixels; the S partial sums
        are added (taps summed phase by phase);
      * 1x1, stride 1, no multiplier: y = x * w + b on long rows (two ufunc passes);
      * other strided cases (no padding, dilation_w > 1, small outputs): C' >= 96: L = C' (one output
        pixel); smaller C': every column is computed as for stride_w == 1 and every sw-th one kept.
    """

    def __init__(self, x_shape, mult: int, taps: np.ndarray, bias: np.ndarray | None, strides, dils,
                 out: tuple[int, int], pads, owner=None):
        n, h, wd, cin = x_shape
        kh, kw, c = taps.shape
        (sh, sw), (dh, dw) = strides, dils
        oh, ow = out
        (pt, pb), (pl, pr) = pads
        self.out_shape = (n, oh, ow, c)
        self.kind = "empty" if n * oh * ow * c == 0 else "rows"
        if self.kind == "empty":
            return
        hp, wp = h + pt + pb, wd + pl + pr
        self.mult, self.cin = mult, cin
        m = n * oh * ow
        tb = chunk(m, c, ROW)                    # the bias goes on the output viewed as long rows
        self.y_rows = (m // tb, tb * c)
        self.bias = None if bias is None else np.tile(np.asarray(bias, _F32), tb)
        self.subsample = None
        self.direct = False
        if kh == kw == 1 and sh == sw == 1 and mult == 1 and not any(pads[0] + pads[1]):
            self.kind = "scale"
            self.w_row = np.tile(np.asarray(taps[0, 0], _F32), tb)
            return
        no_pad = pt == pb == pl == pr == 0 and mult == 1
        if sw > 1 and dw == 1 and not no_pad and m * c >= _PHASES_MIN_OUT:
            self.kind = "phases"
            self.phased = Phased(owner, (n, h, wd, c), sw, pads)
            _, _, _, wq, _ = self.phased.shape
            t = chunk(ow, c)
            self.y_shape = (n, oh, ow // t, t * c)
            row, img = sw * wq * c * _ISZ, hp * sw * wq * c * _ISZ
            self.phase_views = []                 # (offset, shape, strides, tiled taps) per plane
            for p in range(min(sw, kw)):
                tp = taps[:, p::sw]
                self.phase_views.append((p * wq * c * _ISZ, (kh, tp.shape[1]) + self.y_shape,
                                         (dh * row, c * _ISZ, img, sh * row, t * c * _ISZ, _ISZ),
                                         np.ascontiguousarray(np.tile(tp, t), dtype=_F32)))
            self.views = None
            if len(self.phase_views) > 1:
                self.tmp_arena = arena(owner, "dwtmp")
                self.tmp_arena.reserve(m * c)
            return
        # Without padding or channel repeats the taps read x itself (the view is made per run).
        self.direct = no_pad
        self.padded = None if self.direct else Padded(owner, (n, hp, wp, c), ((pt, h), (pl, wd)))
        row, img = wp * c * _ISZ, hp * wp * c * _ISZ
        if sw > 1 and c >= _INNER_C_MIN:
            y_shape = (n, oh, ow, c)
            last = (sw * c * _ISZ, _ISZ)
            self.wt = np.ascontiguousarray(taps, dtype=_F32)
        else:
            cols = ow if sw == 1 else (ow - 1) * sw + 1
            if sw > 1:
                self.subsample = ((n, oh, cols, c), (slice(None), slice(None), slice(None, None, sw)))
            t = chunk(cols, c)
            y_shape = (n, oh, cols // t, t * c)
            last = (t * c * _ISZ, _ISZ)
            self.wt = np.ascontiguousarray(np.tile(taps, t), dtype=_F32)
        self.y_shape = y_shape
        self.vshape = (kh, kw) + y_shape
        self.vstrides = (dh * row, dw * c * _ISZ, img, sh * row) + last
        self.view = None

    def _bind(self) -> None:
        buf = self.padded.bind()
        self.view = np.ndarray(self.vshape, _F32, buffer=buf, strides=self.vstrides)
        inner = self.padded.interior
        if self.mult > 1:
            n, h, wd, _ = inner.shape
            inner = inner.reshape(n, h, wd, self.cin, self.mult)
        self.fill_dst = inner

    def _bind_phases(self) -> None:
        buf = self.phased.bind(self.mult)
        self.views = [(np.ndarray(shape, _F32, buffer=buf, offset=off, strides=st), wt)
                      for off, shape, st, wt in self.phase_views]
        if len(self.views) > 1:
            self.tmp = self.tmp_arena.take(int(np.prod(self.y_shape))).reshape(self.y_shape)

    def run(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The convolution plus bias, written into `out` (a fresh [N, OH, OW, C'] array) when given."""
        kind = self.kind
        if kind == "empty":
            return np.zeros(self.out_shape, _F32)
        y = np.empty(self.out_shape, _F32) if out is None else out
        if kind == "scale":
            yr = y.reshape(self.y_rows)
            np.multiply(x.reshape(self.y_rows), self.w_row, out=yr)
            if self.bias is not None:
                yr += self.bias
            return y
        if kind == "phases":
            if self.views is None:
                self._bind_phases()
            self.phased.fill(x, self.mult)
            y4 = y.reshape(self.y_shape)
            (v0, w0), *rest = self.views
            _einsum("ijnrqe,ije->nrqe", v0, w0, out=y4)
            for v, w in rest:
                _einsum("ijnrqe,ije->nrqe", v, w, out=self.tmp)
                y4 += self.tmp
        else:
            if self.direct:
                view = np.ndarray(self.vshape, _F32, buffer=np.ascontiguousarray(x), strides=self.vstrides)
            else:
                if self.view is None:
                    self._bind()
                self.padded.clear_border()
                self.fill_dst[...] = x[..., None] if self.mult > 1 else x
                view = self.view
            if self.subsample is None:
                _einsum("ijnrqe,ije->nrqe", view, self.wt, out=y.reshape(self.y_shape))
            else:
                full, keep = self.subsample
                t = _einsum("ijnrqe,ije->nrqe", view, self.wt)
                np.copyto(y, t.reshape(full)[keep])
        if self.bias is not None:
            yr = y.reshape(self.y_rows)
            yr += self.bias
        return y


def _sgemm(w2: np.ndarray):
    def product(a: np.ndarray, y: np.ndarray) -> None:
        np.matmul(a, w2, out=y.reshape(a.shape[0], -1))
    return product


class ConvPlan:
    """Non-grouped N-d convolution for one input shape [N, *S, C]; w2 is [KH*..*C, O] in (taps, channel)
    order. The bias is added to the output viewed as long rows (a broadcast over a short last axis is
    several times slower)."""

    def __init__(self, x_shape, w2: np.ndarray, filt, strides, dils, out, pads, bias: np.ndarray | None,
                 owner=None, product=None, windows_product=None):
        nd = len(filt)
        # product(a, y): y (the output, C-contiguous) viewed as [m, cout] = a[m, k] @ w2 (a is C- or
        # Fortran-contiguous); the jit backend passes its own GEMM here (with the bias and clamp in it,
        # and the ops fused after the convolution), the default is BLAS's sgemm.
        # windows_product(xp, geo, y): the same product read from the windows of the zero-bordered input
        # xp in place (no im2col copy), for 2-D convolutions with dilation_w 1; geo = (OH, OW, Hp, Wp, C,
        # sh, sw, dh, KH, KW).
        self.product = product if product is not None else _sgemm(w2)
        self.windows_product = windows_product if nd == 2 and dils[-1] == 1 else None
        n, sp, c = x_shape[0], x_shape[1:-1], x_shape[-1]
        k, cout = w2.shape
        self.out_shape = (n,) + tuple(out) + (cout,)
        self.m = m = n * int(np.prod(out))
        self.out_size = m * cout
        self.w2 = w2
        if m * cout == 0:
            self.kind = "empty"
        elif all(f == 1 for f in filt) and all(s == 1 for s in strides):
            self.kind = "pointwise"
        elif cout == 1 and nd == 2 and m * k * _ISZ > _PRIVATE_PAD_BYTES:
            # A large im2col copy (KH*KW times the input) would feed a single gemv.
            self.kind = "channel-sum"
            taps = np.ascontiguousarray(w2[:, 0].reshape(tuple(filt) + (c,)))
            self.dw = DepthwisePlan(x_shape, 1, taps, None, strides, dils, out, pads, owner)
            self.ones = np.ones((c, 1), _F32)
        else:
            self.kind = "im2col"
            padded = tuple(s + a + b for s, (a, b) in zip(sp, pads))
            dim = [c * _ISZ]                                  # byte strides of [N, *padded, C]
            for s in reversed(padded):
                dim.insert(0, dim[0] * s)
            self.vshape = (n,) + tuple(out) + tuple(filt) + (c,)
            self.vstrides = ((dim[0],) + tuple(s * d for s, d in zip(strides, dim[1:]))
                             + tuple(dl * d for dl, d in zip(dils, dim[1:])) + (_ISZ,))
            # Few input channels (an RGB image): the patches are gathered transposed, [*filt, C, N, *out],
            # whose copy runs along output columns instead of C-float rows; sgemm reads them transposed.
            self.transposed = nd == 2 and c <= _FEW_CHANNELS and int(np.prod(filt)) <= 9
            if self.transposed:
                order = (3, 4, 5, 0, 1, 2)
                self.vshape = tuple(self.vshape[i] for i in order)
                self.vstrides = tuple(self.vstrides[i] for i in order)
            self.direct = not any(a or b for a, b in pads)
            self.padded = None if self.direct else Padded(owner, (n,) + padded + (c,),
                                                          [(a, s) for s, (a, _) in zip(sp, pads)])
            self.view = None
            if self.windows_product is not None:
                self.geo = np.array([*out, *padded, c, *strides, dils[0], *filt], np.int64)
                self.cols_arena = None
            else:
                self.cols_arena = arena(owner, "cols") if m * k * _ISZ <= _KEEP_COLS_BYTES else None
            if self.cols_arena is not None:
                self.cols_arena.reserve(m * k)
            self.cols = None
        if self.kind != "empty":
            t = chunk(m, cout, ROW)
            self.y_rows = (m // t, t * cout)
            self.bias = None if bias is None else np.tile(np.asarray(bias, _F32), t)

    def _bordered(self, x: np.ndarray) -> np.ndarray:
        """x inside its zero border [N, *padded, C] (the padded buffer, bound at the first run); x itself,
        C-contiguous, when there is no padding."""
        if self.direct:
            return np.ascontiguousarray(x)
        if self.padded.array is None:
            self.padded.bind()
        self.padded.clear_border()
        self.padded.interior[...] = x
        return self.padded.array

    def run(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The convolution plus bias, written into `out` (a fresh array of out_shape) when given."""
        kind, m = self.kind, self.m
        if kind == "empty":
            return np.zeros(self.out_shape, _F32)
        y = np.empty(self.out_shape, _F32) if out is None else out
        if kind == "pointwise":
            self.product(x.reshape(m, -1), y)
        elif kind == "im2col" and self.windows_product is not None:
            self.windows_product(self._bordered(x).reshape(-1), self.geo, y)
        elif kind == "im2col":
            xp = self._bordered(x)
            if self.direct:
                view = np.ndarray(self.vshape, _F32, buffer=xp, strides=self.vstrides)
            else:
                if self.view is None:
                    self.view = np.ndarray(self.vshape, _F32, buffer=xp, strides=self.vstrides)
                view = self.view
            if self.cols is None:
                self.cols = (self.cols_arena.take(m * self.w2.shape[0]).reshape(self.vshape)
                             if self.cols_arena is not None else None)
            cols = self.cols if self.cols is not None else np.empty(self.vshape, _F32)
            np.copyto(cols, view)
            self.product(cols.reshape(-1, m).T if self.transposed else cols.reshape(m, -1), y)
        else:   # channel-sum
            np.matmul(self.dw.run(x).reshape(m, -1), self.ones, out=y.reshape(m, -1))
        if self.bias is not None:
            yr = y.reshape(self.y_rows)
            yr += self.bias
        return y
