import numpy as np
import pytest

import onert_py
from helpers import assert_matches_litert, check_builtin, rng, run_onert, single_op_model
from onert_py.ir import Quantization

AXES = [[1], [-1], [0, 2], [2, 0, -1], [0, 1, 2], [1, 1], []]
REDUCERS = ["SUM", "MEAN", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"]


def _out_shape(shape, axes, keep):
    ax = {a % len(shape) for a in axes}
    if keep:
        return [1 if i in ax else d for i, d in enumerate(shape)]
    return [d for i, d in enumerate(shape) if i not in ax]


def _data(shape, dtype, op, seed=0):
    g = rng(seed)
    if dtype == np.float32:
        lo, hi = (0.5, 1.5) if op == "REDUCE_PROD" else (-10, 10)
        return g.uniform(lo, hi, shape).astype(np.float32)
    if dtype == np.bool_:
        return g.random(shape) < 0.5
    lo, hi = (-3, 4) if op == "REDUCE_PROD" else (-1000, 1000)
    return g.integers(lo, hi, shape).astype(dtype)


def _model(op, shape, dtype, axes, keep, runtime_axes=False):
    axes = np.array(axes, np.int32)
    ax_spec = ("axes", list(axes.shape), np.int32) if runtime_axes else ("const", axes)
    return single_op_model(op, [("x", shape, dtype), ax_spec], [("o", _out_shape(shape, axes.tolist(), keep), dtype)],
                           keep_dims=keep)


@pytest.mark.parametrize("op", REDUCERS)
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_reduce_const_axes(op, axes, keep, dtype):
    shape = [3, 4, 5]
    x = _data(shape, dtype, op)
    assert_matches_litert(_model(op, shape, dtype, axes, keep), [x], fmts=("tflite",))


@pytest.mark.parametrize("op", REDUCERS)
@pytest.mark.parametrize("dtype", [np.int64])
def test_reduce_int64(op, dtype):
    shape = [2, 3, 4]
    x = _data(shape, dtype, op)
    assert_matches_litert(_model(op, shape, dtype, [0, 2], False), [x])


@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
def test_reduce_minmax_small_ints(op, dtype):
    info = np.iinfo(dtype)
    x = rng(1).integers(info.min, info.max, [4, 6], endpoint=True).astype(dtype)
    assert_matches_litert(_model(op, [4, 6], dtype, [1], True), [x])


@pytest.mark.parametrize("op", REDUCERS + ["REDUCE_ANY", "REDUCE_ALL"])
@pytest.mark.parametrize("axes", [[1], [-1, 0], [2, 2]], ids=str)
def test_reduce_runtime_axes(op, axes):
    dtype = np.bool_ if op in ("REDUCE_ANY", "REDUCE_ALL") else np.float32
    shape = [2, 3, 4]
    x = _data(shape, dtype, op, seed=2)
    mb = _model(op, shape, dtype, axes, False, runtime_axes=True)
    assert_matches_litert(mb, [x, np.array(axes, np.int32)])


@pytest.mark.parametrize("op", ["REDUCE_ANY", "REDUCE_ALL"])
@pytest.mark.parametrize("axes", [[0], [1, -1], [0, 1, 2]], ids=str)
@pytest.mark.parametrize("keep", [False, True])
def test_reduce_logical(op, axes, keep):
    shape = [3, 2, 4]
    x = rng(3).random(shape) < (0.2 if op == "REDUCE_ANY" else 0.8)
    assert_matches_litert(_model(op, shape, np.bool_, axes, keep), [x])


def test_mean_int_truncates_and_does_not_overflow():
    x = np.array([[-5, 0, 0], [5, 0, 0], [-7, 3, 0], [2**30, 2**30, 2**30]], np.int32)
    assert_matches_litert(_model("MEAN", [4, 3], np.int32, [1], False), [x])


def test_sum_large_float_tolerance():
    # A 4-D spatial mean/sum over 64k values: numpy sums pairwise, LiteRT sequentially; compare relative
    # to the magnitude of the result (values are positive, so rtol alone is meaningful).
    x = rng(4).uniform(0, 1, [2, 128, 256, 3]).astype(np.float32)
    for op in ("SUM", "MEAN"):
        assert_matches_litert(_model(op, list(x.shape), np.float32, [1, 2], True), [x], rtol=1e-5, fmts=("tflite",))


# Axis blocks the BLAS path takes (x as [pre, R, post]: post 1, pre 1, both > 1, everything) and ones it
# leaves to numpy (a non-contiguous axis set).
@pytest.mark.parametrize("op", ["SUM", "MEAN"])
@pytest.mark.parametrize("shape,axes", [([1, 36, 64, 16], [1, 2]), ([2, 9, 16, 24], [1, 2]), ([3, 40, 50], [1, 2]),
                                        ([6, 70], [0]), ([4, 5, 6], [0, 1, 2]), ([4, 5, 6], [0, 2]),
                                        ([1, 1, 1, 8], [1, 2])], ids=str)
@pytest.mark.parametrize("keep", [False, True])
def test_float_sum_blocks_match_litert(op, shape, axes, keep):
    x = rng(7).uniform(-1, 1, shape).astype(np.float32)
    assert_matches_litert(_model(op, shape, np.float32, axes, keep), [x], rtol=1e-5, atol=1e-5, fmts=("tflite",))


def test_float_sum_non_finite_and_views():
    # inf, -inf and NaN propagate as in a sum; an input that is a strided view (a SLICE output) and one
    # reused afterwards are not modified
    x = rng(8).uniform(-1, 1, [2, 6, 5, 3]).astype(np.float32)
    x[0, 1, 2, 0], x[1, 3, 3, 1], x[1, 4, 0, 1], x[0, 0, 0, 2] = np.inf, np.inf, -np.inf, np.nan
    before = x.copy()
    for op in ("SUM", "MEAN"):
        got = run_onert(_model(op, list(x.shape), np.float32, [1, 2], False), [x])[0]
        with np.errstate(invalid="ignore"):   # inf + -inf in the reference
            want = (np.sum if op == "SUM" else np.mean)(x.astype(np.float64), axis=(1, 2))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        assert got.dtype == np.float32
    np.testing.assert_array_equal(x, before)
    assert_matches_litert(_model("MEAN", list(x.shape), np.float32, [1, 2], True), [x], rtol=1e-5, atol=1e-5,
                          fmts=("tflite",))


@pytest.mark.parametrize("op", ["SUM", "MEAN", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"])
def test_reduce_empty_axis(op):
    x = np.zeros((2, 0, 3), np.float32)
    assert_matches_litert(_model(op, [2, 0, 3], np.float32, [1], False), [x], fmts=("tflite",))


def test_reduce_to_scalar():
    x = rng(5).uniform(-1, 1, [7]).astype(np.float32)
    for op in REDUCERS:
        assert_matches_litert(_model(op, [7], np.float32, [0], False), [x], fmts=("tflite",))


def test_reduce_bad_axis_is_prepare_error():
    mb = _model("SUM", [2, 3], np.float32, [1], False)
    mb.subgraphs[0].tensors[1].data = np.array([2], np.int32)
    with pytest.raises(onert_py.PrepareError, match="out of range"):
        run_onert(mb, [np.zeros((2, 3), np.float32)])


def test_reduce_bad_dtype_is_prepare_error():
    # LiteRT's int8 SUM is the quantized kernel only (without parameters its output is meaningless)
    with pytest.raises(onert_py.PrepareError, match="not supported"):
        run_onert(_model("SUM", [2, 3], np.int8, [1], False), [np.zeros((2, 3), np.int8)])
    with pytest.raises(onert_py.PrepareError, match="not supported"):
        run_onert(_model("REDUCE_PROD", [2, 3], np.float16, [1], False), [np.zeros((2, 3), np.float16)])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("axes", [[1], [0, 2], [0, 1, 2]], ids=str)
def test_reduce_prod_small_ints_wrap(dtype, axes):
    # LiteRT's builtin kernel multiplies non-quantized small integers in their own type (wrapping)
    x = rng(4).integers(-7 if dtype != np.uint8 else 0, 8, [3, 4, 5]).astype(dtype)
    x[x == 0] = 3
    expected = check_builtin(_model("REDUCE_PROD", [3, 4, 5], dtype, axes, False), [x])[0]
    # the int64 product agrees with the wrapped one modulo 2^8 / 2^16 even when it overflows itself
    np.testing.assert_array_equal(expected, np.prod(x.astype(np.int64), axis=tuple(axes)).astype(dtype))
    if len(axes) == 3:
        assert abs(int(np.prod(x.astype(object)))) > np.iinfo(dtype).max   # the case does wrap


def test_reduce_prod_quantized_runs_the_quantized_kernel():
    # A quantized input selects the rescaling kernel (tests/backends/cpu/test_reduce_quantized.py
    # covers it), bit-exact with LiteRT, not the plain wrapping product.
    mb = single_op_model("REDUCE_PROD", [("x", [2, 3], np.int8), ("const", np.array([1], np.int32))],
                         [("o", [2], np.int8)], keep_dims=False)
    mb.subgraphs[0].tensors[0].quantization = Quantization(np.array([0.5], np.float32), np.array([0]))
    mb.subgraphs[0].tensors[2].quantization = Quantization(np.array([0.25], np.float32), np.array([-3]))
    x = np.array([[2, 3, -4], [1, 5, 6]], np.int8)
    out = check_builtin(mb, [x])
    assert not np.array_equal(out[0], np.prod(x, axis=1).astype(np.int8))
    # without output parameters it is refused
    mb.subgraphs[0].tensors[2].quantization = None
    with pytest.raises(onert_py.PrepareError, match="quantization parameters"):
        run_onert(mb, [x])


@pytest.mark.parametrize("op", ["SUM", "MEAN", "REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("axes", [[1], [0, 2], [0, 1, 2]], ids=str)   # XNNPACK rejects no axes
@pytest.mark.parametrize("keep", [False, True])
def test_reduce_float16(op, axes, keep):
    # float16 reductions run only on LiteRT's XNNPACK delegate (the default interpreter): float32
    # accumulation, one rounding. 600 elements of ~1: a float16 running sum would drift by ~ulp(600).
    shape = [3, 40, 5]
    x = rng(5).uniform(0.5, 1.5, shape).astype(np.float16)
    assert_matches_litert(_model(op, shape, np.float16, axes, keep), [x], rtol=1e-3, atol=1e-3)
    if op == "SUM" and axes == [0, 1, 2]:
        np.testing.assert_allclose(run_onert(_model(op, shape, np.float16, axes, keep), [x])[0],
                                   np.sum(x.astype(np.float64), keepdims=keep), rtol=1e-3)


@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
def test_reduce_max_min_float16_ignores_nan(op):
    # XNNPACK's float16 max/min skip NaN (an all-NaN row gives the identity -inf / +inf), unlike the
    # builtin float32 kernel
    x = np.array([[np.nan, np.nan, np.nan], [np.nan, 1, 2], [-3, np.nan, 5], [np.inf, -np.inf, 0]],
                 np.float16)
    got = assert_matches_litert(_model(op, [4, 3], np.float16, [1], False), [x])[0]
    fill = -np.inf if op == "REDUCE_MAX" else np.inf
    np.testing.assert_array_equal(got, (np.fmax if op == "REDUCE_MAX" else np.fmin).reduce(
        np.where(np.isnan(x), fill, x), axis=1))


# ---------------------------------------------------------------------------------------------- ARG_*

@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
@pytest.mark.parametrize("axis", [0, 1, -1, -3])
@pytest.mark.parametrize("out_dtype", [np.int32, np.int64])
def test_arg(op, axis, out_dtype):
    shape = [3, 4, 5]
    x = rng(6).integers(-3, 3, shape).astype(np.float32)  # many ties: first index wins
    out_shape = [d for i, d in enumerate(shape) if i != axis % 3]
    code = 2 if out_dtype == np.int32 else 4
    mb = single_op_model(op, [("x", shape, np.float32), ("const", np.array([axis], np.int32))],
                         [("o", out_shape, out_dtype)], output_type=code)
    assert_matches_litert(mb, [x])


@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, np.bool_])
def test_arg_dtypes(op, dtype):
    x = _data([4, 6], dtype, "SUM", seed=7) if dtype != np.bool_ else rng(7).random([4, 6]) < 0.5
    if dtype in (np.int8, np.uint8):
        x = rng(7).integers(0, 100, [4, 6]).astype(dtype)
    mb = single_op_model(op, [("x", [4, 6], dtype), ("const", np.array([1], np.int64))],
                         [("o", [4], np.int32)], output_type=2)
    assert_matches_litert(mb, [x])


NAN_ROWS = np.array([[1, np.nan, 2, -3], [np.nan] * 4, [-0.0, 0.0, np.nan, 0.0], [np.nan, 1, 2, 3],
                     [3, 1, 2, np.nan], [np.nan, -np.inf, np.inf, 1], [np.inf, np.nan, -np.inf, -1]], np.float32)
# LiteRT folds a slice left to right with acc = (acc > x) ? acc : x (MIN: <): a NaN replaces the
# accumulator and the next element replaces the NaN, so only the elements after the last NaN count
NAN_ROWS_WANT = {"REDUCE_MAX": [2, np.nan, 0, 3, np.nan, np.inf, -1],
                 "REDUCE_MIN": [-3, np.nan, 0, 1, np.nan, -np.inf, -np.inf]}


def _exact(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg="sign of zero")


@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
def test_reduce_max_min_nan_rows(op):
    mb = _model(op, [7, 4], np.float32, [1], False)
    want = np.array(NAN_ROWS_WANT[op], np.float32)
    from helpers import run_litert_builtin
    _exact(run_litert_builtin(mb, [NAN_ROWS])[0], want)       # the rule above is LiteRT's
    for fmt in ("tflite", "circle"):
        _exact(run_onert(mb, [NAN_ROWS], fmt)[0], want)


@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("seed", range(6))
def test_reduce_max_min_nan_like_litert(op, seed):
    # random shapes, axes (several, negative, unsorted), keep_dims and NaN densities, checked bit for bit
    # (sign of zero included) against LiteRT's builtin kernel; large slices too (multi-axis, 2000 elements)
    from helpers import run_litert_builtin
    g = rng(100 + seed)
    for case in range(12):
        rank = int(g.integers(1, 5)) if case < 10 else 3
        shape = [int(d) for d in g.integers(1, 5, rank)] if case < 10 else [int(d) for d in g.integers(8, 16, 3)]
        picked = g.choice(rank, int(g.integers(1, rank + 1)), replace=False)
        axes = [int(a) - (rank if g.random() < 0.3 else 0) for a in picked]
        keep = bool(g.random() < 0.5)
        x = g.choice(np.array([-2, -1, -0.0, 0.0, 1, 2, np.inf, -np.inf], np.float32), shape).astype(np.float32)
        x[g.random(shape) < g.choice([0.05, 0.3, 0.7])] = np.nan
        mb = _model(op, shape, np.float32, axes, keep)
        want = run_litert_builtin(mb, [x])[0]
        for fmt in ("tflite", "circle"):
            _exact(run_onert(mb, [x], fmt)[0], want)


@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
def test_arg_nan_is_ignored(op):
    nan, inf = np.nan, np.inf
    x = np.array([[nan, 1, 2], [1, nan, nan], [1, nan, 0.5], [nan, nan, nan], [nan, -inf, inf], [nan, inf, -inf],
                  [3, 1, nan]], np.float32)
    mb = single_op_model(op, [("x", [7, 3], np.float32), ("const", np.array([1], np.int32))],
                         [("o", [7], np.int32)], output_type=2)
    assert_matches_litert(mb, [x])


def test_arg_runtime_axis():
    x = rng(8).normal(size=[3, 4]).astype(np.float32)
    mb = single_op_model("ARG_MAX", [("x", [3, 4], np.float32), ("axis", [1], np.int32)],
                         [("o", [3], np.int64)], output_type=4)
    assert_matches_litert(mb, [x, np.array([0], np.int32)])


# ---------------------------------------------------------------------------------------------- TOPK

@pytest.mark.parametrize("shape,k", [([6], 3), ([2, 3, 8], 8), ([4, 10], 1), ([4, 10], 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_topk(shape, k, dtype):
    x = rng(9).integers(-4, 4, shape).astype(dtype)  # ties: lower index first
    if dtype == np.int32:
        x.reshape(-1)[0] = np.iinfo(np.int32).min
    out = shape[:-1] + [k]
    mb = single_op_model("TOPK_V2", [("x", shape, dtype), ("const", np.array(k, np.int32))],
                         [("v", out, dtype), ("i", out, np.int32)])
    assert_matches_litert(mb, [x])


def test_topk_nan_ranks_last():
    x = np.array([[np.nan, 1, 2, np.nan, -1, -np.inf]], np.float32)
    mb = single_op_model("TOPK_V2", [("x", [1, 6], np.float32), ("const", np.array(6, np.int32))],
                         [("v", [1, 6], np.float32), ("i", [1, 6], np.int32)])
    assert_matches_litert(mb, [x])


def test_topk_runtime_k_and_bad_k():
    x = rng(10).normal(size=[3, 5]).astype(np.float32)
    mb = single_op_model("TOPK_V2", [("x", [3, 5], np.float32), ("k", [], np.int32)],
                         [("v", [3, 2], np.float32), ("i", [3, 2], np.int32)])
    assert_matches_litert(mb, [x, np.array(2, np.int32)])
    bad = single_op_model("TOPK_V2", [("x", [3, 5], np.float32), ("const", np.array(6, np.int32))],
                          [("v", [3, 6], np.float32), ("i", [3, 6], np.int32)])
    with pytest.raises(onert_py.PrepareError, match="k = 6"):
        run_onert(bad, [x])
