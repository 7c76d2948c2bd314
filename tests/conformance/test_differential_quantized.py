"""Live differential tests of quantized single-op models against LiteRT's builtin kernels, driven by
hypothesis (bounded: 30 examples per test, derandomized; ONERT_PY_DIFF_EXAMPLES=N explores further).

Each example draws the quantization corners the kernels must get right: scales over four orders of
magnitude (effective multipliers above and below 1), zero points anywhere in the type including its
ends, per-channel weight scales, shapes and options; integer outputs must be EQUAL to LiteRT's. An
example LiteRT refuses at prepare (e.g. a rescale multiplier it does not support) must be refused by
onert-py too, with a PrepareError or UnsupportedOpError.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import onert_py  # noqa: E402
from helpers import run_litert_builtin, run_onert, single_op_model  # noqa: E402

_EXPLORE = int(os.environ.get("ONERT_PY_DIFF_EXAMPLES", "0"))
SETTINGS = settings(max_examples=_EXPLORE or 30, deadline=None, derandomize=not _EXPLORE, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TYPES = {"int8": np.int8, "uint8": np.uint8}


@st.composite
def qparams(draw, dtype, symmetric: bool = False):
    """(scale, zero point) for `dtype`: scale 1e-3..10 (log-uniform), zero point anywhere in the type."""
    scale = float(np.float32(10 ** draw(st.floats(-3, 1))))
    info = np.iinfo(dtype)
    zp = 0 if symmetric or info.bits == 16 else draw(st.integers(int(info.min), int(info.max)))
    return scale, zp


def values(draw, shape, dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    seed = draw(st.integers(0, 2**31 - 1))
    x = np.random.default_rng(seed).integers(int(info.min), int(info.max), size=shape, endpoint=True)
    return x.astype(dtype)


def check_against_litert(mb, inputs) -> None:
    """Equal integer outputs, or both runtimes refuse the model at prepare."""
    try:
        expected = run_litert_builtin(mb, inputs)
    except (RuntimeError, ValueError):
        with pytest.raises((onert_py.PrepareError, onert_py.UnsupportedOpError)):
            run_onert(mb, inputs)
        return
    got = run_onert(mb, inputs)
    for k, (g, e) in enumerate(zip(got, expected)):
        assert g.dtype == e.dtype and g.shape == e.shape, (k, g.dtype, e.dtype, g.shape, e.shape)
        np.testing.assert_array_equal(g, e, err_msg=f"output {k}")


@SETTINGS
@given(st.data())
def test_requantize(data):
    types = {**TYPES, "int16": np.int16}
    src = types[data.draw(st.sampled_from(sorted(types)))]
    dst = types[data.draw(st.sampled_from(sorted(types)))]
    shape = data.draw(st.lists(st.integers(1, 9), min_size=1, max_size=3))   # blocks of 16 and a tail
    mb = single_op_model("QUANTIZE", [("x", shape, src, data.draw(qparams(src)))],
                         [("y", shape, dst, data.draw(qparams(dst)))])
    check_against_litert(mb, [values(data.draw, shape, src)])


@SETTINGS
@given(st.data())
def test_fully_connected(data):
    dt = TYPES[data.draw(st.sampled_from(sorted(TYPES)))]
    batch, depth, units = (data.draw(st.integers(1, n)) for n in (4, 24, 12))
    q_in, q_out = data.draw(qparams(dt)), data.draw(qparams(dt))
    w = values(data.draw, [units, depth], np.int8 if dt == np.int8 else dt)
    if dt == np.int8 and data.draw(st.booleans()):      # per-channel weights
        scales = np.float32(10.0) ** np.array([data.draw(st.floats(-4, 0)) for _ in range(units)], np.float32)
        q_w = (scales.astype(np.float32), np.zeros(units, np.int64), 0)
        bias_scale = scales * np.float32(q_in[0])
        q_b = (bias_scale.astype(np.float32), np.zeros(units, np.int64), 0)
    else:
        q_w = data.draw(qparams(np.int8 if dt == np.int8 else dt, symmetric=dt == np.int8))
        q_b = (float(np.float32(q_w[0]) * np.float32(q_in[0])), 0)
    bias = np.random.default_rng(units).integers(-2000, 2000, units).astype(np.int32)
    act = data.draw(st.sampled_from([0, 1, 2, 3]))
    mb = single_op_model("FULLY_CONNECTED", [("x", [batch, depth], dt, q_in), ("const", w, q_w), ("const", bias, q_b)],
                         [("y", [batch, units], dt, q_out)], fused_activation_function=act, keep_num_dims=False,
                         weights_format=0, asymmetric_quantize_inputs=False)
    check_against_litert(mb, [values(data.draw, [batch, depth], dt)])


@SETTINGS
@given(st.data())
def test_conv_2d_int8(data):
    h, w_, cin, cout = (data.draw(st.integers(1, n)) for n in (9, 9, 5, 6))
    k = data.draw(st.integers(1, 3))
    q_in, q_out = data.draw(qparams(np.int8)), data.draw(qparams(np.int8))
    scales = np.float32(10.0) ** np.array([data.draw(st.floats(-4, 0)) for _ in range(cout)], np.float32)
    filt = values(data.draw, [cout, k, k, cin], np.int8)
    bias = np.random.default_rng(cout).integers(-5000, 5000, cout).astype(np.int32)
    opts = dict(padding=data.draw(st.sampled_from([0, 1])), stride_h=data.draw(st.integers(1, 2)),
                stride_w=data.draw(st.integers(1, 2)), dilation_h_factor=1, dilation_w_factor=1,
                fused_activation_function=data.draw(st.sampled_from([0, 1, 3])))
    oh = (h + opts["stride_h"] - 1) // opts["stride_h"] if opts["padding"] == 0 else (h - k) // opts["stride_h"] + 1
    ow = (w_ + opts["stride_w"] - 1) // opts["stride_w"] if opts["padding"] == 0 else (w_ - k) // opts["stride_w"] + 1
    if oh < 1 or ow < 1:
        return
    zeros = np.zeros(cout, np.int64)
    mb = single_op_model("CONV_2D", [("x", [1, h, w_, cin], np.int8, q_in),
                                     ("const", filt, (scales, zeros, 0)),
                                     ("const", bias, ((scales * np.float32(q_in[0])).astype(np.float32), zeros, 0))],
                         [("y", [1, oh, ow, cout], np.int8, q_out)], **opts)
    check_against_litert(mb, [values(data.draw, [1, h, w_, cin], np.int8)])


@SETTINGS
@given(st.data())
def test_sub_and_pools(data):
    dt = TYPES[data.draw(st.sampled_from(sorted(TYPES)))]
    shape = [1, data.draw(st.integers(2, 7)), data.draw(st.integers(2, 7)), data.draw(st.integers(1, 4))]
    q = [data.draw(qparams(dt)) for _ in range(3)]
    op = data.draw(st.sampled_from(["SUB", "AVERAGE_POOL_2D", "MAX_POOL_2D"]))
    act = data.draw(st.sampled_from([0, 1, 3]))
    if op == "SUB":
        mb = single_op_model(op, [("a", shape, dt, q[0]), ("b", shape, dt, q[1])], [("y", shape, dt, q[2])],
                             fused_activation_function=act)
        check_against_litert(mb, [values(data.draw, shape, dt), values(data.draw, shape, dt)])
        return
    out = [1, shape[1] // 2, shape[2] // 2, shape[3]]
    mb = single_op_model(op, [("x", shape, dt, q[0])], [("y", out, dt, q[0])], padding=1, stride_h=2, stride_w=2,
                         filter_height=2, filter_width=2, fused_activation_function=act)
    check_against_litert(mb, [values(data.draw, shape, dt)])
