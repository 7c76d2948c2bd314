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
