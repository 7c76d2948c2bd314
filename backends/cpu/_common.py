"""Helpers shared by CPU kernel families."""
from __future__ import annotations

import weakref
from typing import Callable

import numpy as np

try:  # the clip ufunc itself: np.clip adds ~2.5 µs of Python argument handling per call (more than a
    # small op's whole clip); kernels that clamp use this one
    from numpy._core.umath import clip as clip_ufunc
except ImportError:  # numpy < 2
    try:
        from numpy.core.umath import clip as clip_ufunc
    except ImportError:
        clip_ufunc = np.clip

# ActivationFunctionType codes of the schema.
NONE, RELU, RELU_N1_TO_1, RELU6, TANH, SIGN_BIT = 0, 1, 2, 3, 4, 5


def per_key(make: Callable, limit: int = 8) -> Callable:
    """`make(*key)` remembered for up to `limit` keys: a kernel's plan per run-time shape (or per value it
    depends on), made once for the shapes a model runs with; past the limit (a model whose shapes keep
    changing), made again on each call rather than kept without bound."""
    plans: dict = {}

    def get(*key):
        plan = plans.get(key)
        if plan is None:
            plan = make(*key)
            if len(plans) < limit:
                plans[key] = plan
        return plan
    return get


def _bounds(dt: np.dtype, lo: float, hi: float) -> tuple:
    """[lo, hi] as rank-0 arrays of dtype `dt` (an infinite bound becomes the integer type's limit):
    a ufunc converts a numpy scalar operand to an array on every call, ~0.3 us of a small clip."""
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.array(max(lo, info.min), dt), np.array(min(hi, info.max), dt)
    return np.array(lo, dt), np.array(hi, dt)


def _clamp(lo: float, hi: float) -> Callable[[np.ndarray], np.ndarray]:
    """Clamp to [lo, hi] in one pass (the clip ufunc), in place on a fresh ndarray; numpy scalars get
    a new value. NaN stays NaN. One clip beats np.maximum even for RELU: numpy's float maximum against
    a scalar is not vectorised, clip is (measured 2.7x on a [512, 64] float32 array)."""
    by_dtype: dict = {}

    def apply(x):
        dt = x.dtype
        b = by_dtype.get(dt)
        if b is None:
            b = by_dtype[dt] = _bounds(dt, lo, hi)
        if type(x) is np.ndarray:
            return clip_ufunc(x, b[0], b[1], out=x)
        return clip_ufunc(x, b[0], b[1])
    return apply


def _tanh(x):
    return np.tanh(x, out=x) if type(x) is np.ndarray else np.tanh(x)


def fused_activation(code: int) -> Callable[[np.ndarray], np.ndarray] | None:
    """Fused activation for a freshly computed array (applied in place), or None for no activation."""
    if code == NONE:
        return None
    if code == RELU:
        return _clamp(0.0, np.inf)
    if code == RELU_N1_TO_1:
        return _clamp(-1.0, 1.0)
    if code == RELU6:
        return _clamp(0.0, 6.0)
    if code == TANH:
        return _tanh
    if code == SIGN_BIT:
        return lambda x: np.signbit(x).astype(x.dtype)
    raise ValueError(f"unknown fused activation function {code}")


class Scratch:
    """A reusable flat buffer for kernels' large intermediates (never for outputs, which callers and
    control flow may still hold). A fresh temporary of a few MB costs page faults on every run (new
    memory from mmap), 4x the work on a 2 MB resize; a small one comes hot from malloc's free lists,
    while a kept buffer has gone cold since it was last used: requests under `min_bytes` get a fresh
    array. Grows to the largest request.

    Use `Scratch.of(ctx, dtype)`: one buffer per session and dtype, shared by its kernels. Kernels run
    one at a time and hold no scratch across their own return, so sharing is safe, and the session keeps
    one buffer (the largest request) rather than one per op."""

    min_bytes = 1 << 18
    _by_runtime: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __init__(self, dtype: np.dtype):
        self.dtype = np.dtype(dtype)
        self.buf = np.empty(0, dtype)
        self.min_size = self.min_bytes // self.dtype.itemsize

    @classmethod
    def of(cls, ctx, dtype: np.dtype) -> "Scratch":
        """The scratch of ctx's session (its runtime state) for `dtype`."""
        per_dtype = cls._by_runtime.setdefault(ctx.runtime, {})
        dt = np.dtype(dtype)
        s = per_dtype.get(dt)
        if s is None:
            s = per_dtype[dt] = cls(dt)
        return s

    def get(self, size: int) -> np.ndarray:
        """A flat array of `size` elements, valid until the next call."""
        if size < self.min_size:
            return np.empty(size, self.dtype)
        if self.buf.size < size:
            self.buf = np.empty(size, self.dtype)
        return self.buf[:size]


_ACTIVATION_NAMES = {TANH: "TANH", SIGN_BIT: "SIGN_BIT"}


def activation_of(ctx, tanh_sign_bit: str = "apply") -> Callable[[np.ndarray], np.ndarray] | None:
    """The op's fused activation. LiteRT's kernels treat TANH and SIGN_BIT three ways, chosen per op:
    "apply" them (RNN cells), "ignore" them (convolutions and pools, whose CalculateActivationRange
    clamps nothing for them) or "refuse" them at prepare (FULLY_CONNECTED, CONCATENATION,
    L2_NORMALIZATION)."""
    code = ctx.options.get("fused_activation_function", NONE) or NONE
    if code in _ACTIVATION_NAMES and tanh_sign_bit != "apply":
        if tanh_sign_bit == "ignore":
            return None
        raise ctx.fail(f"fused activation {_ACTIVATION_NAMES[code]} is not supported by {ctx.op.kernel_name} "
                       "(LiteRT refuses it at prepare)")
    return fused_activation(code)


def activated(options: dict, x):
    """x, a value rule's fresh result, with the op's fused activation applied as its kernel does."""
    act = fused_activation(options.get("fused_activation_function", NONE) or NONE)
    return x if act is None else act(x)


def as_dtype(x, dtype: np.dtype) -> np.ndarray:
    """x as an array of `dtype`, without a copy when it already is one."""
    if isinstance(x, np.ndarray) and x.dtype == dtype:
        return x
    return np.asarray(x, dtype=dtype)


def int_divide(num: np.ndarray, den, half_away: bool = False) -> np.ndarray:
    """num / den of int64 values as LiteRT's integer kernels compute it: truncated toward zero (C's
    division), or with half_away rounded half away from zero ((|num| + den/2) / den, sign restored).
    numpy's // floors instead."""
    q = (np.abs(num) + (den // 2 if half_away else 0)) // den
    return np.where(num < 0, -q, q)
