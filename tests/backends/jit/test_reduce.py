"""The jit backend's 8-bit MEAN over height and width (backends/jit/reduce.py): the values and
parameters are tested in tests/backends/cpu/test_reduce_quantized.py (run_onert runs both backends
there, against LiteRT); here, that the compiled loop is the kernel taken, for which ops, and against
LiteRT on a classifier head's shapes."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

import onert_py  # noqa: E402
from helpers import int32_const, rng, run_interpreter, run_litert_builtin, single_op_model  # noqa: E402


def _mean(dt, shape, axes, keep, q_in=(0.07, -3), q_out=(0.05, 4)):
    ax = {a % len(shape) for a in axes}
    out = [1 if k in ax else d for k, d in enumerate(shape)] if keep else [d for k, d in enumerate(shape) if k not in ax]
    return single_op_model("MEAN", [("x", list(shape), dt, q_in), int32_const(axes)], [("y", out, dt, q_out)],
                           keep_dims=keep)


def _run(mb, x, backends="jit;cpu"):
    sess = onert_py.infer.session(mb.to_bytes("tflite"), backends=backends)
    return sess.executors[0].backend_names, sess.infer([x])[0]


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("shape, axes", [((1, 3, 3, 1280), [1, 2]), ((2, 7, 5, 24), [2, 1]), ((1, 7, 7, 3), [-3, -2])])
def test_global_average_pool(dt, keep, shape, axes):
    info = np.iinfo(dt)
    x = rng(2).integers(int(info.min), int(info.max), shape, endpoint=True).astype(dt)
    mb = _mean(dt, shape, axes, keep)
    backends, got = _run(mb, x)
    assert backends == ["jit"]
    np.testing.assert_array_equal(got, run_litert_builtin(mb, [x])[0])
    np.testing.assert_array_equal(got, _run(mb, x, "cpu")[1])


# MEAN over trailing axes (a converter-made layer norm's mean and variance over the features): the
# reference rescale, one compiled loop over rows
@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("shape, axes, q", [((2, 16, 32), [-1], ((0.07, -3), (0.05, 4))),
                                            ((3, 5, 7), [2, 1], ((0.02, 127), (0.3, -128))),
                                            ((2, 3, 4, 5), [3], ((0.5, -128), (0.001, 0))),
                                            ((2, 3, 4, 5), [1, 2, 3], ((0.01, 0), (0.01, 0))),
                                            ((4, 1000), [1], ((0.003, 10), (0.2, -7)))])
def test_mean_over_trailing_axes(dt, keep, shape, axes, q):
    info = np.iinfo(dt)
    q = tuple((s, z + 128 if dt == np.uint8 else z) for s, z in q)
    x = rng(len(shape) + keep).integers(int(info.min), int(info.max), shape, endpoint=True).astype(dt)
    x.reshape(-1)[:2] = info.min, info.max
    mb = _mean(dt, shape, axes, keep, *q)
    before = x.copy()
    backends, got = _run(mb, x)
    assert backends == ["jit"]
    np.testing.assert_array_equal(got, run_litert_builtin(mb, [x])[0])
    np.testing.assert_array_equal(got, _run(mb, x, "cpu")[1])
    np.testing.assert_array_equal(x, before)


def test_other_reductions_stay_on_cpu():
    x = np.zeros((2, 5, 7, 3), np.int8)
    for axes in ([1], [0, 1], [0, 3]):
        assert _run(_mean(np.int8, x.shape, axes, False), x)[0] == ["cpu"]
    x16 = np.zeros((1, 3, 3, 4), np.int16)
    assert _run(_mean(np.int16, x16.shape, [1, 2], True, (0.01, 0), (0.01, 0)), x16)[0] == ["cpu"]


# float32 MEAN over height and width (a global average pool, a squeeze-and-excitation block's first
# op): one compiled pass summing in float64, against LiteRT's builtin kernel and the cpu backend.
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("shape, axes", [((1, 56, 56, 16), [1, 2]), ((2, 7, 5, 24), [2, 1]), ((1, 7, 7, 3), [-3, -2]),
                                         ((1, 1, 1, 9), [1, 2])])
def test_float_global_average_pool(keep, shape, axes):
    x = (rng(4).standard_normal(shape) * 3 + 1).astype(np.float32)
    mb = _mean(np.float32, shape, axes, keep, None, None)
    backends, got = _run(mb, x)
    assert backends == ["jit"] and got.dtype == np.float32
    want = x.astype(np.float64).mean(axis=(1, 2), keepdims=keep)
    np.testing.assert_allclose(got, want, rtol=2e-7, atol=1e-7)     # summed in float64, rounded once
    np.testing.assert_allclose(got, run_litert_builtin(mb, [x])[0], rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(got, _run(mb, x, "cpu")[1], rtol=2e-6, atol=1e-6)


def test_float_mean_special_values_and_other_shapes():
    """inf and NaN as LiteRT gives them; an input resized at run time takes the cpu kernel."""
    x = np.ones((1, 4, 4, 3), np.float32)
    x[0, 1, 2] = [np.inf, np.nan, -np.inf]
    mb = _mean(np.float32, x.shape, [1, 2], True, None, None)
    got = _run(mb, x)[1]
    np.testing.assert_array_equal(got, run_litert_builtin(mb, [x])[0])
    big = rng(6).standard_normal((2, 3, 5, 3)).astype(np.float32)
    (got,) = run_interpreter(onert_py.Interpreter(model_content=mb.to_bytes("tflite")), [big])
    np.testing.assert_allclose(got, big.mean(axis=(1, 2), keepdims=True), rtol=1e-6, atol=1e-7)


def test_float_means_jit_does_not_take_stay_on_cpu():
    x = np.zeros((2, 5, 7, 3), np.float32)
    for axes in ([1], [3], [1, 2, 3], [0, 1]):
        assert _run(_mean(np.float32, x.shape, axes, False, None, None), x)[0] == ["cpu"]
    assert _run(_mean(np.float32, (1, 0, 4, 3), [1, 2], True, None, None), np.zeros((1, 0, 4, 3), np.float32))[0] == ["cpu"]
