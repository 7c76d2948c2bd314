"""INT4 constant weights (two values per byte, low nibble first) of quantized FULLY_CONNECTED with int8
activations, bit-exact with LiteRT's builtin kernels."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import check_builtin, rng, run_litert_builtin, run_onert
from onert_py.errors import PrepareError
from onert_py.schema.writer import ModelBuilder

NONE, RELU, RELU_N1_TO_1, RELU6 = 0, 1, 2, 3


def _int4(shape, seed):
    """Random int4 values with both ends (-8, 7) present."""
    w = rng(seed).integers(-8, 7, shape, endpoint=True).astype(np.int8)
    flat = w.reshape(-1)
    flat[0], flat[-1] = -8, 7
    return w


def _fc_model(x_shape, w, wq, xq, oq, out_shape, bias=None, **options):
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", list(x_shape), np.int8, quantization=xq)
    wi = sg.const("w", w, np.int8, quantization=wq, type_name="INT4")
    bi = -1
    if bias is not None:
        scales = np.float32(xq[0]) * np.asarray(wq[0], np.float32).reshape(-1)
        bq = (scales, np.zeros(scales.size, np.int64), 0) if scales.size > 1 else (float(scales[0]), 0)
        bi = sg.const("b", bias.astype(np.int32), np.int32, quantization=bq)
    y = sg.tensor("y", list(out_shape), np.int8, quantization=oq)
    sg.inputs.append(x)
    sg.outputs = [y]
    sg.op("FULLY_CONNECTED", [x, wi, bi], [y], **options)
    mb.signature("serving_default", sg)
    return mb


def _x(shape, seed):
    x = rng(seed).integers(-128, 127, shape, endpoint=True).astype(np.int8)
    flat = x.reshape(-1)
    flat[0], flat[-1] = -128, 127
    return x


# (input, weights scale(s), output): effective multipliers below and above 1, input zero points at
# int8's ends, an output scale small enough to saturate, per-channel scales over four decades.
_PARAMS = [
    ((0.05, 3), 0.02, (0.1, -2)),
    ((0.5, -128), 0.3, (0.01, 127)),         # multiplier 15: saturates
    ((0.01, 127), 0.001, (0.2, -128)),
    ((0.02, 0), np.array([1e-4, 3e-3, 0.05, 0.9, 0.01, 0.2, 2e-4], np.float32), (0.05, 10)),
]
_SHAPES = [((2, 7), 7, 5), ((3, 33), 33, 4), ((1, 16), 16, 1), ((4, 3, 9), 9, 7)]


@pytest.mark.parametrize("k", range(len(_PARAMS)))
@pytest.mark.parametrize("j", range(len(_SHAPES)))
@pytest.mark.parametrize("with_bias", [False, True])
def test_fully_connected_int4(k, j, with_bias):
    xq, ws, oq = _PARAMS[k]
    x_shape, depth, units = _SHAPES[j]
    if np.ndim(ws):
        units = ws.size
        wq = (ws, np.zeros(units, np.int64), 0)
    else:
        wq = (ws, 0)
    w = _int4((units, depth), 10 * k + j)        # odd element counts pad the last byte
    bias = rng(k + j).integers(-3000, 3000, units) if with_bias else None
    keep = len(x_shape) == 3
    out_shape = (x_shape[:-1] + (units,)) if keep else (int(np.prod(x_shape)) // depth, units)
    mb = _fc_model(x_shape, w, wq, xq, oq, out_shape, bias, keep_num_dims=keep)
    check_builtin(mb, [_x(x_shape, 100 + k + j)])


@pytest.mark.parametrize("act", [NONE, RELU, RELU_N1_TO_1, RELU6])
def test_fully_connected_int4_activations(act):
    w = _int4((6, 11), act)
    mb = _fc_model((5, 11), w, (0.04, 0), (0.03, -7), (0.02, 4), (5, 6), rng(act).integers(-500, 500, 6),
                   fused_activation_function=act)
    check_builtin(mb, [_x((5, 11), act)])


def test_fully_connected_int4_matches_int8_weights():
    """The INT4 model computes what the same weights stored as INT8 compute."""
    w = _int4((9, 13), 3)
    x = [_x((4, 13), 4)]
    mb4 = _fc_model((4, 13), w, (0.02, 0), (0.05, 1), (0.07, -3), (4, 9))
    mb8 = ModelBuilder()
    sg = mb8.subgraph("main")
    xi = sg.tensor("x", [4, 13], np.int8, quantization=(0.05, 1))
    wi = sg.const("w", w, np.int8, quantization=(0.02, 0))
    y = sg.tensor("y", [4, 9], np.int8, quantization=(0.07, -3))
    sg.inputs.append(xi)
    sg.outputs = [y]
    sg.op("FULLY_CONNECTED", [xi, wi, -1], [y])
    mb8.signature("serving_default", sg)
    np.testing.assert_array_equal(run_onert(mb4, x)[0], run_onert(mb8, x)[0])
    np.testing.assert_array_equal(run_onert(mb4, x)[0], run_litert_builtin(mb4, x)[0])


def test_fully_connected_int4_refusals():
    # Asymmetric INT4 weights: LiteRT fails at prepare.
    mb = _fc_model((2, 7), _int4((5, 7), 1), (0.02, 3), (0.05, 1), (0.1, 0), (2, 5))
    xs = [_x((2, 7), 1)]
    with pytest.raises(RuntimeError, match="zero-point"):
        run_litert_builtin(mb, xs)
    with pytest.raises(PrepareError, match="zero point 0"):
        run_onert(mb, xs)
    # A uint8 input: LiteRT 2.3 runs it, but not as the int4 values' product (it reads the packed bytes
    # otherwise); onert-py refuses it.
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [2, 4], np.uint8, quantization=(0.05, 128))
    wi = sg.const("w", _int4((3, 4), 0), np.int8, quantization=(0.02, 0), type_name="INT4")
    y = sg.tensor("y", [2, 3], np.uint8, quantization=(0.1, 128))
    sg.inputs.append(x)
    sg.outputs = [y]
    sg.op("FULLY_CONNECTED", [x, wi, -1], [y])
    mb.signature("serving_default", sg)
    with pytest.raises(PrepareError, match="int8 x int4"):
        run_onert(mb, [np.zeros((2, 4), np.uint8)])
