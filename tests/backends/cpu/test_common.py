"""Fused activations shared by the CPU kernels, against independent numpy formulas."""
import numpy as np
import pytest

from onert_py.backends.cpu._common import RELU, RELU6, RELU_N1_TO_1, Scratch, fused_activation

CLAMPS = {RELU: (0, None), RELU_N1_TO_1: (-1, 1), RELU6: (0, 6)}


def _expected(x, lo, hi):
    y = np.maximum(x, lo)        # np.maximum / np.minimum propagate NaN, as the fused clamp does
    return y if hi is None else np.minimum(y, hi)


@pytest.mark.parametrize("code", list(CLAMPS))
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int32, np.int8, np.uint8, np.int64])
def test_clamp_in_place(code, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        x = np.array([-np.inf, -7.5, -1, -0.5, 0, 0.25, 1, 5.9, 6, 6.5, 1e4, np.inf, np.nan], dt)
    else:
        info = np.iinfo(dt)
        x = np.array([info.min, -7, -1, 0, 1, 6, 7, info.max], dt) if info.min < 0 else \
            np.array([0, 1, 6, 7, info.max], dt)
    lo, hi = CLAMPS[code]
    if dt.kind == "f":
        want = _expected(x, dt.type(lo), None if hi is None else dt.type(hi))
    else:   # exact in Python ints; a bound outside an unsigned range clamps nothing
        want = np.array([max(int(v), lo) if hi is None else min(max(int(v), lo), hi) for v in x], dt)
    y = x.copy()
    got = fused_activation(code)(y)
    assert got is y and got.dtype == dt          # in place on the fresh array, dtype kept
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("code", list(CLAMPS))
def test_clamp_numpy_scalar(code):
    lo, hi = CLAMPS[code]
    act = fused_activation(code)
    for v in (np.float32(-3.5), np.float32(0.5), np.float32(9), np.int32(-4), np.int32(8)):
        got = act(v)
        assert type(got) is type(v)
        assert got == _expected(v, type(v)(lo), None if hi is None else type(v)(hi))


def test_tanh_and_none():
    x = np.linspace(-4, 4, 9, dtype=np.float32)
    y = x.copy()
    assert fused_activation(4)(y) is y
    np.testing.assert_allclose(y, np.tanh(x.astype(np.float64)), rtol=1e-6)
    assert fused_activation(0) is None


def test_scratch_keeps_large_buffers_only():
    s = Scratch(np.dtype(np.float32))
    big = Scratch.min_bytes // 4
    a = s.get(big)
    assert a.shape == (big,) and a.dtype == np.float32
    assert np.shares_memory(s.get(big), a)                   # the same request reuses the buffer
    b = s.get(2 * big)                                       # a larger one grows it
    assert b.shape == (2 * big,) and not np.shares_memory(a, b)
    small = s.get(16)                                        # a small one is a fresh array
    assert small.shape == (16,) and not np.shares_memory(small, b)
