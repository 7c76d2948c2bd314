"""Quantized unary math (ABS, NEG, EXP, LOG, SQRT, RSQRT) and SELECT / SELECT_V2 on quantized values,
bit-exact with LiteRT's builtin kernels over every input value (a strided sample for int16)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import (
    check_builtin,
    fit_quantization,
    rng,
    run_litert_builtin,
    run_onert,
    single_op_model,
)

from onert_py.errors import ExecutionError, PrepareError, UnsupportedOpError


def _all_values(dt, lo=None, step=None):
    """Every value of an 8-bit type (every 7th of int16, plus both ends) from `lo` up, shuffled."""
    info = np.iinfo(dt)
    lo = int(info.min) if lo is None else lo
    step = step or (1 if info.bits == 8 else 7)
    x = np.unique(np.concatenate([np.arange(lo, int(info.max) + 1, step), [lo, int(info.max)]]))
    return rng(info.bits).permutation(x).astype(dt)


def _model(op, dt, q_in, q_out, shape):
    return single_op_model(op, [("x", list(shape), dt, q_in)], [("y", list(shape), dt, q_out)])


def _check(op, dt, q_in, q_out, x=None):
    x = _all_values(dt) if x is None else x
    return check_builtin(_model(op, dt, q_in, q_out, x.shape), [x])


# Input/output parameters: multipliers below and above 1, zero points at the type's ends, equal scales.
_PARAMS = [((0.05, 3), (0.1, -2)),
           ((0.2, 0), (0.03, 1)),
           ((0.0123, -128), (0.0123, 127)),
           ((0.5, 127), (0.02, -128)),
           ((1e-3, 10), (0.7, -5)),
           ((0.04, -20), (0.04, -20)),
           ((3.0, -100), (0.001, 50))]


@pytest.mark.parametrize("dt", [np.int8, np.int16])
@pytest.mark.parametrize("q", _PARAMS)
def test_abs(dt, q):
    _check("ABS", dt, fit_quantization(q[0], dt), fit_quantization(q[1], dt))


@pytest.mark.parametrize("dt", [np.int8, np.int16])
@pytest.mark.parametrize("q", _PARAMS[:4])
def test_neg_ignores_quantization(dt, q):
    # LiteRT negates the stored integers (-(-128) wraps to -128) whatever the parameters say.
    out = _check("NEG", dt, fit_quantization(q[0], dt), fit_quantization(q[1], dt))
    assert np.iinfo(dt).min in out[0]


@pytest.mark.parametrize("dt", [np.int8, np.int16])
@pytest.mark.parametrize("q", [((0.05, 3), (0.1, -2)), ((0.02, -128), (0.01, -128)), ((0.1, 127), (0.5, -128)),
                               ((0.004, 0), (1e-4, 0)), ((0.001, 0), (0.3, 5)), ((0.5, -7), (0.02, 100))])
def test_exp(dt, q):
    _check("EXP", dt, fit_quantization(q[0], dt), fit_quantization(q[1], dt))


@pytest.mark.parametrize("dt", [np.int8, np.int16])
@pytest.mark.parametrize("q", [((0.05, -128), (0.03, 10)), ((0.02, 3), (0.05, 127)), ((0.5, 0), (0.01, -20)),
                               ((1e-3, -50), (0.1, 0)), ((0.001, 0), (2e-4, 0))])
def test_log(dt, q):
    # Values at or below the zero point map to the output's lowest value.
    _check("LOG", dt, fit_quantization(q[0], dt), fit_quantization(q[1], dt))


@pytest.mark.parametrize("q", [((0.05, -128), (0.03, -128)), ((0.02, 3), (0.05, 127)), ((0.5, 0), (0.01, -20)),
                               ((1e-3, -50), (0.1, 0)), ((0.01, -128), (0.0123, -128)), ((8.0, -128), (1e-3, 0)),
                               ((1e-4, -128), (2.0, -128)), ((0.1, 100), (0.05, -100))])
def test_rsqrt_int8(q):
    # Every value from the zero point up: 0 gives 127, small values saturate, large ones reach zp_out.
    x = _all_values(np.int8, lo=q[0][1])
    _check("RSQRT", np.int8, q[0], q[1], x)


@pytest.mark.parametrize("q", [((0.05, 0), (0.03, 0)), ((1e-4, 0), (0.01, 0)), ((0.5, 0), (3e-5, 0)),
                               ((3e-3, 0), (1e-3, 0))])
def test_rsqrt_int16(q):
    x = _all_values(np.int16, lo=0, step=3)
    _check("RSQRT", np.int16, q[0], q[1], x)


@pytest.mark.parametrize("dt", [np.int8, np.int16])
def test_rsqrt_below_zero_point_fails_the_run(dt):
    zp = 5 if dt == np.int8 else 0
    mb = _model("RSQRT", dt, (0.1, zp), (0.1, zp), (3,))
    x = np.array([zp, zp + 3, zp - 1], dt)
    with pytest.raises(Exception):           # LiteRT: "Rsqrt is only defined for positive values"
        run_litert_builtin(mb, [x])
    with pytest.raises(ExecutionError, match="positive values"):
        run_onert(mb, [x])


@pytest.mark.parametrize("op", ["ABS", "EXP", "RSQRT", "LOG", "NEG", "SQRT"])
def test_odd_shapes_and_rank0(op):
    q_in, q_out = (0.03, -128), (0.02, -3)
    for shape in [(), (1,), (2, 3, 5, 1)]:
        x = np.asarray(rng(len(shape)).integers(-128, 128, shape), np.int8)
        check_builtin(_model(op, np.int8, q_in, q_out, shape), [x])


@pytest.mark.parametrize("op", ["ABS", "EXP", "RSQRT", "LOG", "SQRT"])
def test_int16_needs_zero_point_0(op):
    mb = _model(op, np.int16, (0.01, 3), (0.01, 0), (4,))
    x = np.arange(4, dtype=np.int16) + 3
    with pytest.raises(PrepareError, match="zero point 0"):
        run_onert(mb, [x])
    with pytest.raises(Exception):   # LiteRT refuses it too
        run_litert_builtin(mb, [x])


@pytest.mark.parametrize("op", ["ABS", "EXP", "RSQRT", "LOG", "SQRT", "NEG"])
def test_uint8_is_refused(op):
    # LiteRT has none of these for uint8.
    mb = _model(op, np.uint8, (0.01, 128), (0.01, 128), (4,))
    x = np.arange(4, dtype=np.uint8) + 130
    with pytest.raises(UnsupportedOpError, match="quantized uint8"):
        run_onert(mb, [x])
    with pytest.raises(Exception):
        run_litert_builtin(mb, [x])


@pytest.mark.parametrize("dt", [np.int8, np.int16])
@pytest.mark.parametrize("q", [((0.05, -128), (0.03, -128)), ((0.02, 3), (0.05, 127)), ((0.5, 0), (0.01, -20)),
                               ((1e-3, -50), (0.1, 0)), ((0.001, 0), (2e-4, 0)), ((4.0, 0), (0.1, 0))])
def test_sqrt(dt, q):
    q_in, q_out = fit_quantization(q[0], dt), fit_quantization(q[1], dt)
    _check("SQRT", dt, q_in, q_out, _all_values(dt, lo=q_in[1]))


@pytest.mark.parametrize("dt", [np.int8, np.int16])
def test_sqrt_below_zero_point_fails_the_run(dt):
    zp = -3 if dt == np.int8 else 0
    mb = _model("SQRT", dt, (0.1, zp), (0.1, zp), (3,))
    x = np.array([zp, zp + 3, zp - 1], dt)
    with pytest.raises(Exception):           # LiteRT: "Sqrt is only defined for non-negative values"
        run_litert_builtin(mb, [x])
    with pytest.raises(ExecutionError, match="non-negative values"):
        run_onert(mb, [x])


# --------------------------------------------------------------------------------------------------
# SELECT / SELECT_V2: the stored integers are copied whatever the parameters.

def _rand(dt, shape, seed):
    info = np.iinfo(dt)
    return rng(seed).integers(int(info.min), int(info.max) + 1, shape).astype(dt)


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4), (3, 4)), ((4,), (2, 1), (1, 4)), ((), (2, 3), (2, 3)),
                                    ((2, 1, 5), (1, 3, 1), (2, 3, 5))])
def test_select_v2(dt, shapes):
    c_shape, x_shape, y_shape = shapes
    out = np.broadcast_shapes(c_shape, x_shape, y_shape)
    qx, qy, qo = fit_quantization((0.05, -128), dt), fit_quantization((0.2, 7), dt), fit_quantization((0.01, 127), dt)
    mb = single_op_model("SELECT_V2", [("c", list(c_shape), np.bool_), ("x", list(x_shape), dt, qx),
                                       ("y", list(y_shape), dt, qy)], [("o", list(out), dt, qo)])
    c = rng(1).integers(0, 2, c_shape).astype(np.bool_)
    check_builtin(mb, [c, _rand(dt, x_shape, 2), _rand(dt, y_shape, 3)])


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("c_shape", [(3, 4, 2), (3,), ()])
def test_select(dt, c_shape):
    q = fit_quantization((0.05, -3), dt)
    mb = single_op_model("SELECT", [("c", list(c_shape), np.bool_), ("x", [3, 4, 2], dt, q),
                                    ("y", [3, 4, 2], dt, q)], [("o", [3, 4, 2], dt, (0.1, 0))])
    c = rng(4).integers(0, 2, c_shape).astype(np.bool_)
    check_builtin(mb, [c, _rand(dt, (3, 4, 2), 5), _rand(dt, (3, 4, 2), 6)])


def test_select_v2_int8_output_without_quantized_inputs_is_quantized():
    # input 0 is bool: the op counts as quantized by its output; constant int8 operands work too.
    q = (0.1, -5)
    x = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    mb = single_op_model("SELECT_V2", [("c", [3, 1], np.bool_), ("const", x, q), ("y", [1, 4], np.int8, q)],
                         [("o", [3, 4], np.int8, q)])
    check_builtin(mb, [np.array([[True], [False], [True]]), np.array([[1, -2, 127, -128]], np.int8)])


def test_select_v2_mixed_types_are_refused():
    mb = single_op_model("SELECT_V2", [("c", [4], np.bool_), ("x", [4], np.int8, (0.1, 0)),
                                       ("y", [4], np.int16, (0.1, 0))], [("o", [4], np.int8, (0.1, 0))])
    args = [np.ones(4, np.bool_), np.zeros(4, np.int8), np.zeros(4, np.int16)]
    with pytest.raises(PrepareError, match="int16"):
        run_onert(mb, args)
    with pytest.raises(Exception):
        run_litert_builtin(mb, args)
