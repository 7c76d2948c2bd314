"""Quantized reductions (MEAN, SUM, REDUCE_MAX, REDUCE_MIN), bit-exact with LiteRT's builtin kernels."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import fit_quantization, check_builtin, run_litert_builtin, int32_const, rng, run_onert, single_op_model
from onert_py.errors import PrepareError, UnsupportedOpError




def _out_shape(shape, axes, keep):
    ax = {a % len(shape) for a in axes}
    if keep:
        return [1 if k in ax else d for k, d in enumerate(shape)]
    return [d for k, d in enumerate(shape) if k not in ax]


def _case(op, dt, shape, axes, keep, q_in, q_out, seed=0, x=None):
    info = np.iinfo(dt)
    if x is None:
        x = rng(seed).integers(int(info.min), int(info.max) + 1, shape).astype(dt)
    mb = single_op_model(op, [("x", list(shape), dt, q_in), int32_const(axes)],
                         [("y", _out_shape(shape, axes, keep), dt, q_out)], keep_dims=keep)
    return check_builtin(mb, [x])


_SHAPES = [((2, 5, 7, 3), [1, 2]), ((2, 5, 7, 3), [2, 1]), ((2, 5, 7, 3), [3]), ((2, 5, 7, 3), [0, 3]),
           ((3, 17), [-1]), ((3, 17), [0, 1]), ((4, 3, 9), [1]), ((2, 5, 7, 3), [1, 2, 3]), ((6,), [0])]
_Q = [((0.05, 3), (0.1, -2)), ((0.2, -128), (0.03, 127)), ((0.0123, 127), (0.0123, 127)),
      ((0.5, 0), (0.02, -128)), ((1e-3, 10), (0.7, -5)), ((0.05, -7), (0.05, -7))]


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("shape,axes", _SHAPES)
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("q", _Q)
def test_mean(dt, shape, axes, keep, q):
    _case("MEAN", dt, shape, axes, keep, fit_quantization(q[0], dt), fit_quantization(q[1], dt))


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("shape,axes", _SHAPES)
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("q", _Q)
def test_sum(dt, shape, axes, keep, q):
    _case("SUM", dt, shape, axes, keep, fit_quantization(q[0], dt), fit_quantization(q[1], dt))


@pytest.mark.parametrize("op", ["MEAN", "SUM"])
@pytest.mark.parametrize("dt", [np.int8, np.uint8])
def test_mean_sum_saturate_at_type_ends(op, dt):
    info = np.iinfo(dt)
    for fill in (info.min, info.max):
        x = np.full((1, 6, 6, 4), fill, dt)
        _case(op, dt, x.shape, [1, 2], True, fit_quantization((0.1, 0), dt), fit_quantization((0.01, 0), dt), x=x)
        _case(op, dt, x.shape, [3], False, fit_quantization((0.1, 0), dt), fit_quantization((0.01, 0), dt), x=x)


@pytest.mark.parametrize("shape", [(1, 3, 3, 1280), (2, 4, 5, 40), (1, 2, 2, 16), (1, 7, 7, 15)], ids=str)
@pytest.mark.parametrize("q", [((0.07, -3), (0.05, 4)), ((0.05, 3), (0.1, -2)), ((0.07, -3), (0.07, -3))])
def test_mean_int8_global_pool_vector_channels(shape, q):
    """int8 Mean4D rescales channels in blocks of 16 with NEON's roundings (halves up), the remaining
    channels as the reference (halves away from zero): negative ties differ by one."""
    _case("MEAN", np.int8, shape, [1, 2], True, *q, seed=sum(shape))


def test_mean_large_reduction():
    # a reduced size above 2**16: the multiplier's widening shift and the int32 sum
    _case("MEAN", np.int8, (1, 300, 301), [1, 2], False, (0.07, -100), (0.002, 20))
    _case("MEAN", np.int8, (1, 300, 301, 1), [1, 2], True, (0.07, -100), (0.002, 20))


@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("shape,axes", _SHAPES + [((3, 4), [])])
@pytest.mark.parametrize("keep", [False, True])
def test_max_min(op, dt, shape, axes, keep):
    q = fit_quantization((0.05, -3), dt)
    _case(op, dt, shape, axes, keep, q, q)


@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
def test_max_min_need_equal_params(op):
    mb = single_op_model(op, [("x", [2, 3], np.int8, (0.1, 0)), int32_const([1])],
                         [("y", [2], np.int8, (0.2, 0))])
    with pytest.raises(PrepareError, match="must equal"):
        run_onert(mb, [np.zeros((2, 3), np.int8)])
    with pytest.raises(Exception):   # LiteRT refuses it too
        run_litert_builtin(mb, [np.zeros((2, 3), np.int8)])


@pytest.mark.parametrize("op", ["MEAN", "SUM"])
def test_int16_needs_zero_point_0(op):
    mb = single_op_model(op, [("x", [2, 3], np.int16, (0.1, 4)), int32_const([1])],
                         [("y", [2], np.int16, (0.2, 0))])
    with pytest.raises(PrepareError, match="zero point 0"):
        run_onert(mb, [np.zeros((2, 3), np.int16)])
    with pytest.raises(Exception):   # LiteRT refuses it too
        run_litert_builtin(mb, [np.zeros((2, 3), np.int16)])


# --------------------------------------------------------------------------------------------------
# ARG_MAX / ARG_MIN on quantized values: the stored integers compared (ties: the first index).

@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("shape,axis", [((2, 5, 7, 3), 1), ((2, 5, 7, 3), -1), ((3, 17), 0), ((9,), 0),
                                        ((4, 3, 33), 2), ((1, 1), 1)])
@pytest.mark.parametrize("out_dt", [np.int32, np.int64])
def test_arg_max_min_quantized(op, dt, shape, axis, out_dt):
    info = np.iinfo(dt)
    # few distinct values: many ties, and both ends of the type
    x = rng(len(shape)).choice(np.array([info.min, info.min + 1, 0 if info.min else 128, info.max - 1, info.max]),
                               shape).astype(dt)
    out = [d for k, d in enumerate(shape) if k != axis % len(shape)]
    q = fit_quantization((0.05, -128), dt)
    mb = single_op_model(op, [("x", list(shape), dt, q), int32_const([axis])], [("y", out, out_dt)],
                         output_type=2 if out_dt == np.int32 else 4)
    check_builtin(mb, [x])
    x = rng(7).integers(int(info.min), int(info.max) + 1, shape).astype(dt)
    check_builtin(mb, [x])


@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
def test_arg_max_min_int16_quantized_is_refused(op):
    mb = single_op_model(op, [("x", [3, 4], np.int16, (0.01, 0)), int32_const([1])], [("y", [3], np.int32)],
                         output_type=2)
    x = np.zeros((3, 4), np.int16)
    with pytest.raises(UnsupportedOpError, match="quantized int16"):
        run_onert(mb, [x])
    with pytest.raises(Exception):     # LiteRT: "Unknown input type"
        run_litert_builtin(mb, [x])


# --------------------------------------------------------------------------------------------------
# REDUCE_PROD: a chain of rescaled products.

_PROD_SHAPES = [((2, 5, 7, 3), [1, 2]), ((2, 5, 7, 3), [3]), ((2, 5, 7, 3), [0, 3]), ((3, 17), [-1]),
                ((3, 17), [0, 1]), ((4, 3, 9), [1]), ((2, 5, 7, 3), [2, 0]), ((6,), [0]), ((4, 1, 3), [1]),
                ((3, 4), [])]
_PROD_Q = [((0.05, 3), (0.1, -2)), ((0.9, -128), (0.03, 127)), ((0.0123, 127), (0.0123, 127)),
           ((0.5, 0), (0.02, -128)), ((1e-2, 10), (0.7, -5))]


@pytest.mark.parametrize("dt", [np.int8, np.int16])
@pytest.mark.parametrize("shape,axes", _PROD_SHAPES)
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("q", _PROD_Q)
def test_reduce_prod(dt, shape, axes, keep, q):
    q_in, q_out = fit_quantization(q[0], dt), fit_quantization(q[1], dt)
    _case("REDUCE_PROD", dt, shape, axes, keep, q_in, q_out)
    # values near 1.0 (real), so long products neither vanish nor saturate at once
    one = q_in[1] + round(1.0 / q_in[0])
    x = np.clip(one + rng(3).integers(-3, 4, shape), np.iinfo(dt).min, np.iinfo(dt).max).astype(dt)
    _case("REDUCE_PROD", dt, shape, axes, keep, q_in, q_out, x=x)


def test_reduce_prod_uint8_is_refused():
    mb = single_op_model("REDUCE_PROD", [("x", [2, 3], np.uint8, (0.1, 128)), int32_const([1])],
                         [("y", [2], np.uint8, (0.1, 128))])
    x = np.full((2, 3), 130, np.uint8)
    with pytest.raises(UnsupportedOpError, match="quantized uint8"):
        run_onert(mb, [x])
    with pytest.raises(Exception):     # LiteRT: "Unsupported quantized data type"
        run_litert_builtin(mb, [x])


def test_reduce_prod_int16_needs_zero_point_0():
    mb = single_op_model("REDUCE_PROD", [("x", [2, 3], np.int16, (0.1, 3)), int32_const([1])],
                         [("y", [2], np.int16, (0.1, 0))])
    x = np.full((2, 3), 13, np.int16)
    with pytest.raises(PrepareError, match="zero point 0"):
        run_onert(mb, [x])
    with pytest.raises(Exception):
        run_litert_builtin(mb, [x])
