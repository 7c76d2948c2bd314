"""Hybrid (dynamic-range) convolutions: float32 input and output, int8 filter, float32 bias, as LiteRT's
builtin optimized hybrid kernels run them: each batch image quantized whole to int8 (symmetrically when
the filter has one scale, or equal scales; asymmetrically when its per-channel scales differ), an exact
integer im2col matmul, y = float32(acc) * float32(image scale * filter scale) + bias, clamped.

onert-py reproduces that arithmetic (the x86 NEON_2_SSE rounding of the quantization included), so the
outputs are compared for equality."""
from __future__ import annotations

import numpy as np
import pytest

import onert_py
from onert_py.backends.cpu.conv import SAME, VALID, conv_output_size
from onert_py.errors import PrepareError
from helpers import FORMATS, rng, run_litert_builtin, run_onert, single_op_model


def _conv_model(x_shape, w, w_q, bias, padding, strides, dils, act, op="CONV_2D", **extra):
    n, h, wd, _ = x_shape
    oh = conv_output_size(h, w.shape[1], strides[0], dils[0], padding)
    ow = conv_output_size(wd, w.shape[2], strides[1], dils[1], padding)
    cout = w.shape[-1] if op == "DEPTHWISE_CONV_2D" else w.shape[0]
    inputs = [("x", list(x_shape), np.float32), ("const", w, w_q)] + ([("const", bias)] if bias is not None else [])
    return single_op_model(op, inputs, [("o", [n, oh, ow, cout], np.float32)], padding=padding,
                           stride_h=strides[0], stride_w=strides[1], dilation_h_factor=dils[0],
                           dilation_w_factor=dils[1], fused_activation_function=act, **extra)


def _filter(r, shape, axis, mode):
    """mode: 'tensor' (one scale), 'equal' (per-channel, all equal: LiteRT's per-tensor path), 'channel'."""
    w = r.integers(-127, 128, shape).astype(np.int8)
    n = shape[axis]
    if mode == "tensor":
        return w, (float(10.0 ** r.uniform(-3, 0)), 0)
    if mode == "equal":
        return w, (np.full(n, 10.0 ** r.uniform(-3, 0), np.float32), np.zeros(n, np.int64), axis)
    return w, ((10.0 ** r.uniform(-4, 0, n)).astype(np.float32), np.zeros(n, np.int64), axis)


def _check(mb, xs):
    for x in xs:
        expected = run_litert_builtin(mb, [x])
        before = x.copy()
        for fmt in FORMATS:
            got = run_onert(mb, [x], fmt)
            for g, e in zip(got, expected):
                assert g.shape == e.shape and g.dtype == e.dtype
                np.testing.assert_array_equal(g, e)
        np.testing.assert_array_equal(x, before)


def _inputs(r, shape, mag, offset):
    xs = []
    for trial in range(3):
        x = (r.standard_normal(shape) * mag * 10.0 ** trial).astype(np.float32)
        x += np.float32(offset * mag * 10.0 ** trial)
        if trial == 2:
            x[0] = 0                    # an all-zero image: scale 1, zeros
        xs.append(x)
    return xs


CONV_CASES = [  # (x shape, (cout, kh, kw), padding, strides, dilations, act, magnitude)
    ((1, 6, 6, 3), (4, 3, 3), SAME, (1, 1), (1, 1), 0, 1.0),
    ((2, 7, 9, 4), (5, 3, 2), VALID, (2, 1), (1, 1), 1, 10.0),
    ((2, 5, 5, 8), (6, 1, 1), SAME, (1, 1), (1, 1), 3, 0.01),      # 1x1: no im2col in LiteRT
    ((1, 9, 8, 5), (3, 3, 3), SAME, (2, 2), (2, 2), 2, 100.0),      # dilated im2col
    ((3, 4, 6, 7), (9, 2, 3), SAME, (1, 2), (1, 1), 0, 1e-3),
    ((1, 20, 20, 16), (8, 5, 5), SAME, (1, 1), (1, 1), 0, 1.0),     # int32 sums beyond 2**24
]


@pytest.mark.parametrize("offset", [0.0, 0.8], ids=["centred", "offset"])
@pytest.mark.parametrize("mode", ["tensor", "equal", "channel"])
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_hybrid_conv_2d_bit_exact(case, mode, offset):
    x_shape, (cout, kh, kw), padding, strides, dils, act, mag = CONV_CASES[case]
    r = rng(400 + case)
    w, wq = _filter(r, (cout, kh, kw, x_shape[-1]), 0, mode)
    bias = r.standard_normal(cout).astype(np.float32)
    mb = _conv_model(x_shape, w, wq, bias, padding, strides, dils, act)
    _check(mb, _inputs(r, x_shape, mag, offset))


def test_hybrid_conv_2d_random_bit_exact():
    r = rng(23)
    for trial in range(25):
        n, h, wd, cin, cout = (int(v) for v in r.integers(1, 9, 5))
        kh, kw = (int(v) for v in r.integers(1, 4, 2))
        strides = tuple(int(v) for v in r.integers(1, 3, 2))
        dils = tuple(int(v) for v in r.integers(1, 3, 2))
        padding = [SAME, VALID][int(r.integers(0, 2))]
        if padding == VALID and (h < (kh - 1) * dils[0] + 1 or wd < (kw - 1) * dils[1] + 1):
            padding = SAME
        mode = ["tensor", "equal", "channel"][int(r.integers(0, 3))]
        w, wq = _filter(r, (cout, kh, kw, cin), 0, mode)
        bias = r.standard_normal(cout).astype(np.float32)
        mb = _conv_model((n, h, wd, cin), w, wq, bias, padding, strides, dils, int(r.integers(0, 4)))
        x = (r.standard_normal((n, h, wd, cin)) * 10.0 ** r.uniform(-3, 3)).astype(np.float32)
        x += np.float32(r.uniform(-2, 2)) * np.abs(x).max()
        (expected,) = run_litert_builtin(mb, [x])
        (got,) = run_onert(mb, [x])
        np.testing.assert_array_equal(got, expected, err_msg=f"trial {trial}")


def test_hybrid_conv_2d_refusals():
    r = rng(9)
    w, wq = _filter(r, (4, 3, 3, 2), 0, "tensor")
    bias = np.zeros(4, np.float32)
    # grouped (input channels 4 = 2 groups of the filter's 2)
    mb = _conv_model((1, 5, 5, 4), w, wq, bias, SAME, (1, 1), (1, 1), 0)
    with pytest.raises(PrepareError, match="grouped hybrid convolution is not supported"):
        onert_py.infer.session(mb.to_bytes("tflite"))
    # no bias: LiteRT's conv requires one
    mb = _conv_model((1, 5, 5, 2), w, wq, None, SAME, (1, 1), (1, 1), 0)
    with pytest.raises(PrepareError, match="needs a bias"):
        onert_py.infer.session(mb.to_bytes("tflite"))
    # per-channel scales along the wrong dimension
    w3, _ = _filter(r, (4, 3, 3, 3), 0, "tensor")
    mb = _conv_model((1, 5, 5, 3), w3, (np.array([0.1, 0.2, 0.3], np.float32), np.zeros(3, np.int64), 3),
                     bias, SAME, (1, 1), (1, 1), 0)
    with pytest.raises(PrepareError, match="one per output channel along dimension 0"):
        onert_py.infer.session(mb.to_bytes("tflite"))
    # an int8 filter without quantization is not hybrid: a type mismatch
    mb = _conv_model((1, 5, 5, 2), w, None, bias, SAME, (1, 1), (1, 1), 0)
    with pytest.raises(PrepareError, match=r"input 1 \('const1'\) has type int8"):
        onert_py.infer.session(mb.to_bytes("tflite"))


# --------------------------------------------------------------------- hybrid DEPTHWISE_CONV_2D
# LiteRT's EvalHybridPerChannel: every image quantized asymmetrically, exact integer sums, then
# (acc * channel scale) * image scale on the channels of its 4-wide SIMD loop, (acc * image scale) *
# channel scale on the rest, + bias, clamped: reproduced, so compared for equality.

DW_CASES = [  # (x shape, (kh, kw), multiplier, padding, strides, dilations, act, magnitude)
    ((1, 6, 6, 3), (3, 3), 1, SAME, (1, 1), (1, 1), 0, 1.0),       # 3 channels: all scalar tail
    ((2, 7, 9, 4), (3, 2), 2, VALID, (2, 1), (1, 1), 1, 10.0),      # 8: all SIMD
    ((2, 5, 5, 5), (1, 1), 1, SAME, (1, 1), (1, 1), 3, 0.01),
    ((1, 9, 8, 3), (3, 3), 3, SAME, (2, 2), (2, 2), 2, 100.0),      # 9: SIMD + tail, dilated
    ((3, 4, 6, 7), (2, 3), 1, SAME, (1, 2), (1, 1), 0, 1e-3),
    ((1, 30, 30, 6), (7, 7), 1, SAME, (1, 1), (1, 1), 0, 1.0),
]


@pytest.mark.parametrize("offset", [0.0, 0.8], ids=["centred", "offset"])
@pytest.mark.parametrize("case", range(len(DW_CASES)))
def test_hybrid_depthwise_conv_2d_bit_exact(case, offset):
    x_shape, (kh, kw), mult, padding, strides, dils, act, mag = DW_CASES[case]
    r = rng(500 + case)
    cout = x_shape[-1] * mult
    w, wq = _filter(r, (1, kh, kw, cout), 3, "channel")
    bias = r.standard_normal(cout).astype(np.float32)
    mb = _conv_model(x_shape, w, wq, bias, padding, strides, dils, act, op="DEPTHWISE_CONV_2D",
                     depth_multiplier=mult)
    _check(mb, _inputs(r, x_shape, mag, offset))


def test_hybrid_depthwise_conv_2d_random_bit_exact():
    r = rng(29)
    for trial in range(25):
        n, h, wd, cin = (int(v) for v in r.integers(1, 9, 4))
        mult = int(r.integers(1, 4))
        kh, kw = (int(v) for v in r.integers(1, 4, 2))
        strides = tuple(int(v) for v in r.integers(1, 3, 2))
        dils = tuple(int(v) for v in r.integers(1, 3, 2))
        padding = [SAME, VALID][int(r.integers(0, 2))]
        if padding == VALID and (h < (kh - 1) * dils[0] + 1 or wd < (kw - 1) * dils[1] + 1):
            padding = SAME
        cout = cin * mult
        w, wq = _filter(r, (1, kh, kw, cout), 3, "channel" if cout > 1 else "tensor")
        bias = r.standard_normal(cout).astype(np.float32)
        mb = _conv_model((n, h, wd, cin), w, wq, bias, padding, strides, dils, int(r.integers(0, 4)),
                         op="DEPTHWISE_CONV_2D", depth_multiplier=mult)
        x = (r.standard_normal((n, h, wd, cin)) * 10.0 ** r.uniform(-3, 3)).astype(np.float32)
        x += np.float32(r.uniform(-2, 2)) * np.abs(x).max()
        (expected,) = run_litert_builtin(mb, [x])
        (got,) = run_onert(mb, [x])
        np.testing.assert_array_equal(got, expected, err_msg=f"trial {trial}")


def test_hybrid_depthwise_conv_2d_refusals():
    r = rng(10)
    bias = np.zeros(4, np.float32)
    w, wq = _filter(r, (1, 3, 3, 4), 3, "channel")
    # one scale for 4 channels: LiteRT reads past it
    mb = _conv_model((1, 5, 5, 4), w, (0.1, 0), bias, SAME, (1, 1), (1, 1), 0, op="DEPTHWISE_CONV_2D",
                     depth_multiplier=1)
    with pytest.raises(PrepareError, match="one per output channel along dimension 3"):
        onert_py.infer.session(mb.to_bytes("tflite"))
    # the depth multiplier option disagreeing with the shapes
    mb = _conv_model((1, 5, 5, 2), w, wq, bias, SAME, (1, 1), (1, 1), 0, op="DEPTHWISE_CONV_2D",
                     depth_multiplier=1)
    with pytest.raises(PrepareError, match="needs depth_multiplier 2"):
        onert_py.infer.session(mb.to_bytes("tflite"))
    # no bias
    mb = _conv_model((1, 5, 5, 4), w, wq, None, SAME, (1, 1), (1, 1), 0, op="DEPTHWISE_CONV_2D",
                     depth_multiplier=1)
    with pytest.raises(PrepareError, match="needs a bias"):
        onert_py.infer.session(mb.to_bytes("tflite"))


# -------------------------------------------------------------------------------- hybrid TRANSPOSE_CONV
#
# LiteRT's EvalHybrid: each batch image quantized asymmetrically to int8, every input value's
# contribution float32((q - offset) * w) * filter scale[o] * image scale added to the output in float32
# in its scatter order, then the bias, clamped. onert-py keeps that order, so outputs are equal.

def _transpose_model(n, out_hw, cin, w, w_q, bias, padding, strides, act, dynamic_shape=False):
    cout, kh, kw, _ = w.shape
    h = conv_output_size(out_hw[0], kh, strides[0], 1, padding)
    wd = conv_output_size(out_hw[1], kw, strides[1], 1, padding)
    shape = np.array([n, out_hw[0], out_hw[1], cout], np.int32)
    inputs = [("s", [4], np.int32) if dynamic_shape else ("const", shape), ("const", w, w_q),
              ("x", [n, h, wd, cin], np.float32)] + ([("const", bias)] if bias is not None else [])
    mb = single_op_model("TRANSPOSE_CONV", inputs, [("o", [n, out_hw[0], out_hw[1], cout], np.float32)],
                         padding=padding, stride_h=strides[0], stride_w=strides[1], fused_activation_function=act)
    return mb, (n, h, wd, cin), shape


TRANSPOSE_CASES = [  # (n, output H x W, cin, cout, (kh, kw), padding, strides, act, magnitude)
    (2, (7, 6), 5, 8, (3, 3), SAME, (2, 2), 0, 1.0),
    (1, (9, 9), 3, 4, (3, 3), VALID, (2, 2), 1, 10.0),
    (3, (5, 8), 7, 3, (2, 4), SAME, (1, 2), 3, 0.01),
    (1, (12, 10), 17, 11, (4, 3), VALID, (3, 2), 2, 100.0),
    (2, (6, 6), 4, 6, (1, 1), SAME, (1, 1), 0, 1e-3),
    (1, (20, 20), 32, 16, (3, 3), SAME, (2, 2), 0, 1.0),        # 32 channels summed per tap
]


@pytest.mark.parametrize("offset", [0.0, 0.8], ids=["centred", "offset"])
@pytest.mark.parametrize("mode", ["tensor", "channel"])
@pytest.mark.parametrize("case", range(len(TRANSPOSE_CASES)))
def test_hybrid_transpose_conv_bit_exact(case, mode, offset):
    n, out_hw, cin, cout, (kh, kw), padding, strides, act, mag = TRANSPOSE_CASES[case]
    r = rng(700 + case)
    w, wq = _filter(r, (cout, kh, kw, cin), 0, mode)
    bias = None if case == 2 else (r.standard_normal(cout) * mag).astype(np.float32)
    mb, x_shape, _ = _transpose_model(n, out_hw, cin, w, wq, bias, padding, strides, act)
    _check(mb, _inputs(r, x_shape, mag, offset))


def test_hybrid_transpose_conv_equal_channel_scales_and_dynamic_output_shape():
    r = rng(750)
    w, wq = _filter(r, (5, 3, 2, 4), 0, "equal")
    mb, x_shape, shape = _transpose_model(2, (8, 7), 4, w, wq, r.standard_normal(5).astype(np.float32), SAME,
                                          (2, 3), 0, dynamic_shape=True)
    for x in _inputs(r, x_shape, 1.0, 0.3):
        expected = run_litert_builtin(mb, [shape, x])
        for fmt in FORMATS:
            np.testing.assert_array_equal(run_onert(mb, [shape, x], fmt)[0], expected[0])


def test_hybrid_transpose_conv_refusals():
    r = rng(760)
    w, wq = _filter(r, (4, 3, 3, 2), 0, "channel")
    x = np.ones((1, 3, 3, 2), np.float32)
    # two scales along the input channels: LiteRT accepts them and reads them per output channel, past
    # the end of the two
    mb, _, _ = _transpose_model(1, (5, 5), 2, w, (wq[0][:2], wq[1][:2], 3), None, SAME, (2, 2), 0)
    with pytest.raises(PrepareError, match="one per output channel"):
        run_onert(mb, [x])
    # an int32 bias: LiteRT wants the input's type
    mb, _, _ = _transpose_model(1, (5, 5), 2, w, wq, np.zeros(4, np.int32), SAME, (2, 2), 0)
    with pytest.raises(RuntimeError):
        run_litert_builtin(mb, [x])
    with pytest.raises(PrepareError, match="must be float32"):
        run_onert(mb, [x])
    # an output_shape the input does not fit: LiteRT refuses it
    mb, _, _ = _transpose_model(1, (5, 5), 2, w, wq, None, SAME, (2, 2), 0)
    mb.subgraphs[0].tensors[0].data = np.array([1, 9, 9, 4], np.int32)
    with pytest.raises(RuntimeError):
        run_litert_builtin(mb, [x])
    with pytest.raises(PrepareError, match="needs an input of spatial size"):
        run_onert(mb, [x])


# ------------------------------------------------------------------------------ hybrid INT4 filters

def _as_int4(mb):
    """The model's filter (tensor 1) folded into [-8, 7] and stored as INT4."""
    t = mb.subgraphs[0].tensors[1]
    w = (np.asarray(t.data, np.int16) % 16 - 8).astype(np.int8)
    w.reshape(-1)[:2] = (-8, 7)
    t.data, t.type_name = w, "INT4"
    return mb


@pytest.mark.parametrize("mode", ["tensor", "equal", "channel"])
@pytest.mark.parametrize("case", [0, 1, 3, 4])
def test_hybrid_conv_2d_int4_filter_bit_exact(case, mode):
    """LiteRT's hybrid CONV_2D unpacks an INT4 filter and runs as with INT8."""
    x_shape, (cout, kh, kw), padding, strides, dils, act, mag = CONV_CASES[case]
    r = rng(800 + case)
    w, wq = _filter(r, (cout, kh, kw, x_shape[-1]), 0, mode)
    mb = _as_int4(_conv_model(x_shape, w, wq, (r.standard_normal(cout) * mag).astype(np.float32), padding,
                              strides, dils, act))
    _check(mb, _inputs(r, x_shape, mag, 0.5))


def test_hybrid_int4_filter_refusals():
    r = rng(810)
    x = r.standard_normal((1, 5, 5, 4)).astype(np.float32)
    # DEPTHWISE_CONV_2D: LiteRT fails at its first run
    w, wq = _filter(r, (1, 3, 3, 4), 3, "channel")
    mb = _as_int4(_conv_model((1, 5, 5, 4), w, wq, np.zeros(4, np.float32), SAME, (1, 1), (1, 1), 0,
                              op="DEPTHWISE_CONV_2D", depth_multiplier=1))
    with pytest.raises(RuntimeError, match="INT4"):
        run_litert_builtin(mb, [x])
    with pytest.raises(PrepareError, match="needs an INT8 filter, not INT4"):
        run_onert(mb, [x])
    # TRANSPOSE_CONV: LiteRT's Prepare wants float32 or int8 weights
    w, wq = _filter(r, (3, 3, 3, 4), 0, "channel")
    mb, x_shape, _ = _transpose_model(1, (9, 9), 4, w, wq, None, SAME, (2, 2), 0)
    x = r.standard_normal(x_shape).astype(np.float32)
    _as_int4(mb)
    with pytest.raises(RuntimeError):
        run_litert_builtin(mb, [x])
    with pytest.raises(PrepareError, match="no INT4 filter"):
        run_onert(mb, [x])
