"""The jit backend's AVERAGE_POOL_2D and MAX_POOL_2D (backends/jit/pool.py): float32 against LiteRT,
quantized int8 bit for bit against LiteRT's builtin kernels, every geometry the kernel's row and column
passes distinguish (interior spans with stride 1, per-pixel edges, windows wider than the input,
strides wider than the window, single-row/column windows), and the ops it leaves to cpu."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

import onert_py  # noqa: E402
from helpers import (assert_close, assert_matches_litert, check_builtin, declared_backends, rng,  # noqa: E402
                     run_litert, run_litert_builtin, single_op_model)
from onert_py.backends.cpu.conv import conv_output_size  # noqa: E402

SAME, VALID = 0, 1
NONE, RELU, RELU_N1_TO_1, RELU6, TANH = 0, 1, 2, 3, 4
POOLS = ["AVERAGE_POOL_2D", "MAX_POOL_2D"]


def _model(op, x_shape, k, s, padding, act=NONE, q=None, q_out=None):
    n, h, w, c = x_shape
    oh, ow = conv_output_size(h, k[0], s[0], 1, padding), conv_output_size(w, k[1], s[1], 1, padding)
    if q is None:
        x_spec, y_spec = ("x", list(x_shape), np.float32), ("o", [n, oh, ow, c], np.float32)
    else:
        x_spec, y_spec = ("x", list(x_shape), np.int8, q), ("o", [n, oh, ow, c], np.int8, q_out or q)
    return single_op_model(op, [x_spec], [y_spec], padding=padding, stride_h=s[0], stride_w=s[1],
                           filter_height=k[0], filter_width=k[1], fused_activation_function=act)


def _backend(mb, **options) -> str:
    return onert_py.infer.session(mb.to_bytes("tflite"), **options).executors[0].backend_names[0]


def _int8(shape, seed):
    x = rng(seed).integers(-128, 128, shape).astype(np.int8)
    x.reshape(-1)[:2] = -128, 127
    return x


# (input shape, filter, stride): channels 1, 3, 5, 17, 33 (around the vector widths), odd sizes,
# batch > 1, windows wider than the input (SAME), strides wider than the window, 1-row / 1-column
# windows, a global pool written with stride 1, non-square everything.
GEOMETRY = [([1, 6, 6, 3], (2, 2), (2, 2)),
            ([2, 7, 5, 17], (3, 3), (2, 2)),
            ([1, 9, 11, 5], (3, 3), (1, 1)),
            ([1, 5, 8, 33], (3, 2), (1, 3)),
            ([3, 4, 4, 5], (4, 4), (1, 1)),
            ([1, 3, 3, 1], (1, 1), (2, 1)),
            ([1, 3, 4, 2], (5, 5), (1, 2)),
            ([2, 11, 10, 3], (2, 3), (3, 4)),
            ([1, 8, 9, 16], (1, 4), (1, 1)),
            ([1, 10, 7, 9], (5, 1), (2, 1)),
            ([1, 7, 7, 64], (7, 7), (1, 1)),
            ([1, 12, 12, 1], (3, 3), (2, 2))]


@pytest.mark.parametrize("op", POOLS)
@pytest.mark.parametrize("padding", [SAME, VALID])
def test_float_geometries(op, padding):
    for j, (shape, k, s) in enumerate(GEOMETRY):
        if padding == VALID and (k[0] > shape[1] or k[1] > shape[2]):
            continue
        mb = _model(op, shape, k, s, padding)
        assert _backend(mb) == "jit", (shape, k, s)
        x = rng(j).normal(size=shape).astype(np.float32)
        assert_matches_litert(mb, [x], fmts=("tflite",))


@pytest.mark.parametrize("op", POOLS)
@pytest.mark.parametrize("act", [NONE, RELU, RELU_N1_TO_1, RELU6])
def test_float_activations(op, act):
    x = (rng(act).normal(size=[2, 9, 7, 6]) * 4).astype(np.float32)
    for k, s, padding in [((3, 3), (2, 2), SAME), ((2, 2), (1, 1), VALID)]:
        mb = _model(op, [2, 9, 7, 6], k, s, padding, act)
        assert _backend(mb) == "jit"
        assert_matches_litert(mb, [x])


@pytest.mark.parametrize("op", POOLS)
def test_float_special_values(op):
    """inf and large values pass through (a NONE pool clamps nothing); a window of -inf stays -inf."""
    x = rng(3).normal(size=[1, 6, 6, 4]).astype(np.float32)
    x[0, 0, 0, 0], x[0, 3, 3, 1], x[0, 5, 5, 2] = np.inf, -np.inf, 3e38
    x[0, 4:6, 0:2, 3] = -np.inf
    assert_matches_litert(_model(op, [1, 6, 6, 4], (2, 2), (2, 2), VALID), [x], fmts=("tflite",))


@pytest.mark.parametrize("op", POOLS)
def test_float_two_threads(op):
    """A pool large enough to be split over numba's threads (by output rows), two threads."""
    mb = _model(op, [2, 40, 33, 24], (3, 3), (2, 2), SAME, RELU6)
    x = (rng(4).normal(size=[2, 40, 33, 24]) * 4).astype(np.float32)
    sess = onert_py.infer.session(mb.to_bytes("tflite"), num_threads=2)
    assert sess.executors[0].backend_names == ["jit"]
    assert_close(sess.infer([x]), run_litert(mb, [x]))


def test_float_declined_to_cpu():
    """One channel from 512 outputs (where the cpu kernel's passes over whole rows win), TANH,
    L2_POOL_2D and dynamic shapes (as declared) go to cpu; small one-channel pools stay."""
    assert _backend(_model("MAX_POOL_2D", [1, 64, 64, 1], (2, 2), (2, 2), VALID)) == "cpu"
    assert _backend(_model("AVERAGE_POOL_2D", [1, 64, 64, 1], (3, 3), (2, 2), SAME)) == "cpu"
    assert _backend(_model("MAX_POOL_2D", [1, 16, 16, 1], (2, 2), (2, 2), VALID)) == "jit"
    assert _backend(_model("MAX_POOL_2D", [1, 64, 64, 2], (2, 2), (2, 2), VALID)) == "jit"
    assert _backend(_model("AVERAGE_POOL_2D", [1, 6, 6, 2], (2, 2), (2, 2), VALID, TANH)) == "cpu"
    mb = single_op_model("L2_POOL_2D", [("x", [1, 4, 4, 2], np.float32)], [("o", [1, 2, 2, 2], np.float32)],
                         padding=VALID, stride_h=2, stride_w=2, filter_height=2, filter_width=2)
    assert _backend(mb) == "cpu"
    mb = single_op_model("MAX_POOL_2D", [("x", [-1, -1, -1, 3], np.float32)], [("o", [-1, -1, -1, 3], np.float32)],
                         padding=SAME, stride_h=2, stride_w=2, filter_height=3, filter_width=2)
    assert declared_backends(mb) == ["cpu"]   # a session compiles it again for the shapes it runs with


def test_float_resized_input():
    """A static-shape model whose input is resized (Interpreter.resize_tensor_input): the kernel plans
    the new shape, and the old one again."""
    mb = _model("AVERAGE_POOL_2D", [1, 9, 8, 5], (3, 2), (2, 2), SAME, RELU)
    it = onert_py.Interpreter(model_content=mb.to_bytes("tflite"))
    for k, shape in enumerate([(1, 9, 8, 5), (2, 13, 6, 5), (1, 9, 8, 5)]):
        it.resize_tensor_input(0, list(shape))
        it.allocate_tensors()
        x = rng(10 + k).normal(size=shape).astype(np.float32)
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        assert_close([it.get_tensor(it.get_output_details()[0]["index"])], run_litert(mb, [x]))


# ------------------------------------------------------------------------------------ int8

@pytest.mark.parametrize("op", POOLS)
@pytest.mark.parametrize("padding", [SAME, VALID])
def test_int8_geometries(op, padding):
    q = (0.05, -3)
    for j, (shape, k, s) in enumerate(GEOMETRY):
        if padding == VALID and (k[0] > shape[1] or k[1] > shape[2]):
            continue
        mb = _model(op, shape, k, s, padding, q=q)
        assert _backend(mb) == "jit", (shape, k, s)
        check_builtin(mb, [_int8(shape, j)])


# Activation ranges in the output's parameters: zero points at the type's ends, a scale where RELU6
# and RELU_N1_TO_1 cut inside the type, output parameters that differ from the input's.
ACT_PARAMS = [((0.05, -3), (0.05, -3)), ((0.03, -128), (0.03, -128)), ((0.1, 127), (0.1, 127)),
              ((0.004, 20), (0.02, -60))]


@pytest.mark.parametrize("op", POOLS)
@pytest.mark.parametrize("act", [NONE, RELU, RELU_N1_TO_1, RELU6])
def test_int8_activations(op, act):
    for j, (q_in, q_out) in enumerate(ACT_PARAMS):
        for shape, k, s, padding in [([2, 7, 9, 5], (3, 3), (2, 2), SAME), ([1, 6, 6, 19], (2, 2), (1, 1), VALID)]:
            mb = _model(op, shape, k, s, padding, act, q=q_in, q_out=q_out)
            assert _backend(mb) == "jit"
            check_builtin(mb, [_int8(shape, 7 * act + j)])


def test_int8_average_rounds_half_away_from_zero():
    """Sums that are exact halves of their counts, both signs, in interior and edge windows: 2x2
    windows of +-(1, 1, 0, 0) give +-1 (0.5 -> 1), the same with stride 1 and SAME edge windows."""
    x = np.zeros((1, 4, 6, 3), np.int8)
    x[0, 0, :, 0], x[0, 0, :, 1] = [1, 1, 0, 0, 1, 1], [-1, -1, 0, 0, -1, -1]
    x[0, 2, :, 2] = [3, 2, -3, -2, 5, 0]
    for k, s, padding in [((2, 2), (2, 2), VALID), ((2, 3), (1, 1), SAME), ((3, 3), (1, 1), SAME)]:
        mb = _model("AVERAGE_POOL_2D", [1, 4, 6, 3], k, s, padding, q=(0.1, 0))
        assert _backend(mb) == "jit"
        check_builtin(mb, [x])
    (y,) = run_litert_builtin(_model("AVERAGE_POOL_2D", [1, 4, 6, 3], (2, 2), (2, 2), VALID, q=(0.1, 0)), [x])
    assert y[0, 0, :, 0].tolist() == [1, 0, 1] and y[0, 0, :, 1].tolist() == [-1, 0, -1]


def test_int8_extremes_and_large_windows():
    """All -128 / all 127 windows (sums of up to 225 taps) and a global average over 1000 channels."""
    for v in (-128, 127):
        x = np.full((1, 15, 15, 7), v, np.int8)
        check_builtin(_model("AVERAGE_POOL_2D", [1, 15, 15, 7], (15, 15), (1, 1), VALID, q=(0.1, 0)), [x])
    mb = _model("AVERAGE_POOL_2D", [1, 5, 5, 1000], (5, 5), (5, 5), VALID, q=(0.02, 5))
    assert _backend(mb) == "jit"
    check_builtin(mb, [_int8([1, 5, 5, 1000], 2)])


@pytest.mark.parametrize("op", POOLS)
def test_int8_two_threads(op):
    mb = _model(op, [1, 48, 40, 32], (3, 3), (2, 2), SAME, RELU, q=(0.05, 10), q_out=(0.04, -20))
    x = _int8([1, 48, 40, 32], 5)
    sess = onert_py.infer.session(mb.to_bytes("tflite"), num_threads=2)
    assert sess.executors[0].backend_names == ["jit"]
    np.testing.assert_array_equal(sess.infer([x])[0], run_litert_builtin(mb, [x])[0])


def test_int8_declined_to_cpu():
    """uint8 / int16 pools, one-channel max pools from 8192 outputs and a TANH activation (which cpu
    refuses) are not the jit kernel's; one-channel average pools are."""
    mb = single_op_model("MAX_POOL_2D", [("x", [1, 4, 4, 2], np.uint8, (0.1, 128))],
                         [("o", [1, 2, 2, 2], np.uint8, (0.1, 128))], padding=VALID, stride_h=2, stride_w=2,
                         filter_height=2, filter_width=2)
    assert _backend(mb) == "cpu"
    mb = single_op_model("AVERAGE_POOL_2D", [("x", [1, 4, 4, 2], np.int16, (0.1, 0))],
                         [("o", [1, 2, 2, 2], np.int16, (0.1, 0))], padding=VALID, stride_h=2, stride_w=2,
                         filter_height=2, filter_width=2)
    assert _backend(mb) == "cpu"
    assert _backend(_model("MAX_POOL_2D", [1, 256, 256, 1], (2, 2), (2, 2), VALID, q=(0.1, 0))) == "cpu"
    assert _backend(_model("MAX_POOL_2D", [1, 128, 128, 1], (2, 2), (2, 2), VALID, q=(0.1, 0))) == "jit"
    mb = _model("AVERAGE_POOL_2D", [1, 256, 256, 1], (2, 2), (2, 2), VALID, q=(0.1, 0))
    assert _backend(mb) == "jit"
    check_builtin(mb, [_int8([1, 256, 256, 1], 4)])
    with pytest.raises(onert_py.PrepareError, match="fused activation"):
        _backend(_model("MAX_POOL_2D", [1, 4, 4, 1], (2, 2), (2, 2), VALID, TANH, q=(0.1, 0)))
