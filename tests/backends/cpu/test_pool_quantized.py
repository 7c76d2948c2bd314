"""Quantized AVERAGE_POOL_2D and MAX_POOL_2D (int8, uint8, int16), bit-exact with LiteRT's builtin
kernels."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import check_builtin, rng, run_onert, single_op_model
from onert_py.errors import PrepareError

NONE, RELU, RELU_N1_TO_1, RELU6 = 0, 1, 2, 3
SAME, VALID = 0, 1


def _values(dt, shape, seed):
    info = np.iinfo(dt)
    x = rng(seed).integers(int(info.min), int(info.max), shape, endpoint=True)
    x.reshape(-1)[:2] = info.min, info.max
    return x.astype(dt)


def _fit(q, dt):
    info = np.iinfo(dt)
    if info.bits == 16:
        return (q[0], 0)
    zp = q[1] + (128 if info.min == 0 else 0)
    return (q[0], int(np.clip(zp, info.min, info.max)))


def _out_size(n, k, s, padding):
    return (n + s - 1) // s if padding == SAME else (n - k + s) // s


def _check(op, dt, shape, k, s, padding, q_in, q_out, act=NONE, seed=0):
    n, h, w, c = shape
    oh, ow = _out_size(h, k[0], s[0], padding), _out_size(w, k[1], s[1], padding)
    mb = single_op_model(op, [("x", list(shape), dt, q_in)], [("y", [n, oh, ow, c], dt, q_out)],
                         padding=padding, stride_h=s[0], stride_w=s[1], filter_height=k[0],
                         filter_width=k[1], fused_activation_function=act)
    return check_builtin(mb, [_values(dt, shape, seed)])


# (shape, filter, stride): tiling 2x2/2, overlapping odd windows, a global pool, strides wider than
# the window, a window wider than the input with SAME padding.
_GEOMETRY = [([1, 8, 8, 3], (2, 2), (2, 2)),
             ([2, 7, 9, 5], (3, 3), (2, 2)),
             ([1, 5, 6, 4], (5, 6), (1, 1)),
             ([1, 11, 10, 2], (2, 3), (3, 4)),
             ([1, 3, 4, 1], (5, 5), (1, 2))]


@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("padding", [SAME, VALID])
def test_pool_geometries(op, dt, padding):
    q = _fit((0.05, -3), dt)
    for j, (shape, k, s) in enumerate(_GEOMETRY):
        if padding == VALID and (k[0] > shape[1] or k[1] > shape[2]):
            continue
        _check(op, dt, shape, k, s, padding, q, q, seed=j)


# Activation ranges in the output's parameters: zero points at the type's ends, a scale where RELU6
# and RELU_N1_TO_1 cut inside the type, output parameters different from the input's.
_ACT_PARAMS = [((0.05, -3), (0.05, -3)),
               ((0.03, -128), (0.03, -128)),
               ((0.1, 127), (0.1, 127)),
               ((0.004, 20), (0.02, -60))]


@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("act", [NONE, RELU, RELU_N1_TO_1, RELU6])
@pytest.mark.parametrize("qs", _ACT_PARAMS)
def test_pool_activations(op, dt, act, qs):
    q_in, q_out = (_fit(q, dt) for q in qs)
    _check(op, dt, [2, 7, 9, 5], (3, 3), (2, 2), SAME, q_in, q_out, act=act, seed=act)
    _check(op, dt, [1, 6, 6, 3], (2, 2), (2, 2), VALID, q_in, q_out, act=act, seed=act + 4)


def test_average_pool_rounds_half_away_from_zero():
    """Sums that are an exact half of the count, both signs (2x2 windows of +-(1, 1, 0, 0))."""
    x = np.array([1, 1, 0, 0, -1, -1, 0, 0, 3, 2, 2, 3, -3, -2, -2, -3], np.int8).reshape(1, 4, 4, 1)
    x = np.ascontiguousarray(x.reshape(1, 2, 2, 2, 2).transpose(0, 1, 3, 2, 4).reshape(1, 4, 4, 1))
    mb = single_op_model("AVERAGE_POOL_2D", [("x", [1, 4, 4, 1], np.int8, (0.1, 0))],
                         [("y", [1, 2, 2, 1], np.int8, (0.1, 0))], padding=VALID, stride_h=2, stride_w=2,
                         filter_height=2, filter_width=2, fused_activation_function=NONE)
    (y,) = check_builtin(mb, [x])
    assert y.reshape(-1).tolist() == [1, -1, 3, -3]


def test_pool_refusals():
    mb = single_op_model("MAX_POOL_2D", [("x", [1, 4, 4, 1], np.int8, (0.1, 0))],
                         [("y", [1, 2, 2, 1], np.int8, (0.1, 0))], padding=VALID, stride_h=2, stride_w=2,
                         filter_height=2, filter_width=2, fused_activation_function=4)
    with pytest.raises(PrepareError, match="fused activation"):
        run_onert(mb, [np.zeros((1, 4, 4, 1), np.int8)])
    mb = single_op_model("AVERAGE_POOL_2D", [("x", [1, 4, 4, 1], np.int8, (0.1, 0))],
                         [("y", [1, 2, 2, 1], np.uint8, (0.1, 128))], padding=VALID, stride_h=2,
                         stride_w=2, filter_height=2, filter_width=2, fused_activation_function=NONE)
    with pytest.raises(PrepareError, match="differs"):
        run_onert(mb, [np.zeros((1, 4, 4, 1), np.int8)])
