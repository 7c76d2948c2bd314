"""Quantized CONV_2D and DEPTHWISE_CONV_2D, bit-exact with LiteRT's builtin kernels.

LiteRT's builtin resolver runs its optimized kernels, whose output stages round negative ties upward
where the reference rounds them away from zero (ruy's GEMM for ungrouped CONV_2D; the SIMD blocks of 8
channels of the int8 depthwise kernel); grouped convolutions and the 16x8 kernels run the reference.
Random sums land on those ties often enough that every case below would catch the wrong rounding."""
from __future__ import annotations

import numpy as np
import pytest

from onert_py.backends.cpu.conv import conv_output_size
from onert_py.errors import PrepareError
from helpers import check_builtin, rng, run_litert_builtin, run_onert, single_op_model

_DT = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16}
NONE, RELU, RELU_N1_TO_1, RELU6 = 0, 1, 2, 3
SAME, VALID = 0, 1


def _random_zp(g, kind):
    return 0 if kind == "int16" else int(g.integers(-20, 20)) + (128 if kind == "uint8" else 0)


def _model(op, kind, *, seed=0, x_shape=(2, 9, 8, 6), k=(3, 3), cout=None, groups=1, mult=2,
           stride=(1, 1), dil=(1, 1), pad=SAME, act=NONE, q_in=None, q_out=None, w_scales=None,
           w_zp=0, bias="auto", bias_scale=None, x=None, **extra):
    """A one-op quantized convolution with random data: returns (model, input)."""
    g = rng(seed)
    dt = _DT[kind]
    info = np.iinfo(dt)
    n, h, wd, c = x_shape
    if q_in is None:
        q_in = (float(g.uniform(0.01, 0.1)), _random_zp(g, kind))
    if q_out is None:
        q_out = (float(g.uniform(0.05, 0.5)) * (64 if kind == "int16" else 1), _random_zp(g, kind))
    if op == "CONV_2D":
        cout = cout or 4 * groups
        w_shape, axis = (cout, k[0], k[1], c // groups), 0
    else:
        cout = c * mult
        w_shape, axis = (1, k[0], k[1], cout), 3
    if kind == "uint8":
        w = g.integers(0, 256, w_shape).astype(np.uint8)
        scale = float(w_scales if w_scales is not None else g.uniform(0.005, 0.05))
        w_q = (scale, w_zp)
        b_scale = float(np.float32(q_in[0]) * np.float32(scale)) if bias_scale is None else bias_scale
        b_q = (b_scale, 0)
    else:
        w = g.integers(-127, 128, w_shape).astype(np.int8)
        scales = (np.asarray(w_scales, np.float32) if w_scales is not None
                  else (10 ** g.uniform(-3, -1, cout)).astype(np.float32))
        w_q = (scales, np.full(scales.size, w_zp, np.int64), axis)
        b_q = ((scales * np.float32(q_in[0])).astype(np.float32), np.zeros(scales.size, np.int64), 0)
    inputs = [("x", list(x_shape), dt, q_in), ("const", w, w_q)]
    if bias is not None:
        b_dt = (np.int64 if kind == "int16" else np.int32) if bias in ("auto", "zeros") else bias
        b = g.integers(-30000, 30000, cout).astype(b_dt)
        inputs.append(("const", np.zeros_like(b) if bias == "zeros" else b, b_q))
    opts = {"padding": pad, "stride_h": stride[0], "stride_w": stride[1], "dilation_h_factor": dil[0],
            "dilation_w_factor": dil[1], "fused_activation_function": act}
    if op == "DEPTHWISE_CONV_2D":
        opts["depth_multiplier"] = mult
    opts.update(extra)
    oh = conv_output_size(h, k[0], stride[0], dil[0], pad)
    ow = conv_output_size(wd, k[1], stride[1], dil[1], pad)
    mb = single_op_model(op, inputs, [("y", [n, oh, ow, cout], dt, q_out)], **opts)
    if x is None:
        x = g.integers(int(info.min), int(info.max) + 1, x_shape).astype(dt)
    return mb, x


def _check(op, kind, **kw):
    mb, x = _model(op, kind, **kw)
    return check_builtin(mb, [x])[0]


# (padding, stride, dilation) combinations: SAME with odd-pixel padding, VALID, strided, dilated.
_GEOMETRY = [(SAME, (1, 1), (1, 1)), (VALID, (1, 1), (1, 1)), (SAME, (2, 2), (1, 1)),
             (VALID, (2, 3), (1, 1)), (SAME, (1, 1), (2, 2)), (VALID, (1, 2), (2, 1))]
_ACTS = [NONE, RELU, RELU_N1_TO_1, RELU6]


# ------------------------------------------------------------------------------------------- CONV_2D

@pytest.mark.parametrize("geometry", _GEOMETRY)
@pytest.mark.parametrize("act", _ACTS)
def test_conv2d_int8_per_channel(geometry, act):
    pad, stride, dil = geometry
    _check("CONV_2D", "int8", seed=act * 10 + _GEOMETRY.index(geometry), pad=pad, stride=stride, dil=dil,
           act=act, q_out=(0.05, -3))


@pytest.mark.parametrize("geometry", _GEOMETRY)
@pytest.mark.parametrize("act", _ACTS)
def test_conv2d_uint8_per_tensor(geometry, act):
    pad, stride, dil = geometry
    _check("CONV_2D", "uint8", seed=act * 10 + _GEOMETRY.index(geometry), pad=pad, stride=stride, dil=dil,
           act=act, w_zp=[0, 131, 255][_GEOMETRY.index(geometry) % 3], q_out=(0.3, 120))


@pytest.mark.parametrize("geometry", _GEOMETRY)
@pytest.mark.parametrize("act", _ACTS)
def test_conv2d_int16x8(geometry, act):
    pad, stride, dil = geometry
    _check("CONV_2D", "int16", seed=act * 10 + _GEOMETRY.index(geometry), pad=pad, stride=stride, dil=dil,
           act=act, q_out=(2.0 ** -6, 0))


@pytest.mark.parametrize("kind,zp_in,zp_out", [("int8", -128, 127), ("int8", 127, -128),
                                               ("uint8", 0, 255), ("uint8", 255, 0)])
@pytest.mark.parametrize("out_scale", [0.002, 0.04, 3.0])    # multipliers far above 1, around, below
def test_conv2d_zero_points_at_the_ends_and_saturation(kind, zp_in, zp_out, out_scale):
    out = _check("CONV_2D", kind, seed=zp_in & 7, q_in=(0.05, zp_in), q_out=(out_scale, zp_out),
                 w_scales=[0.3, 0.002, 0.05, 0.0004] if kind == "int8" else 0.02, w_zp=0 if kind == "int8" else 77)
    if out_scale == 0.002:
        info = np.iinfo(_DT[kind])
        assert np.any(out == info.min) or np.any(out == info.max)   # saturated


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D"])
def test_int8_per_tensor_filter(op):
    _check(op, "int8", seed=4, w_scales=[0.004], q_out=(0.02, 11), mult=2, act=RELU6)


def test_conv2d_int8_scales_across_orders_of_magnitude():
    scales = np.array([1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 3e-3, 0.7], np.float32)
    _check("CONV_2D", "int8", seed=3, cout=8, w_scales=scales, q_in=(0.02, 5), q_out=(0.1, -10),
           x_shape=(1, 6, 7, 5), k=(2, 3))


@pytest.mark.parametrize("kind", ["int8", "uint8", "int16"])
@pytest.mark.parametrize("shape,k,cout", [((1, 5, 7, 3), (1, 1), 5),       # pointwise
                                          ((3, 1, 11, 2), (1, 4), 3),      # one row
                                          ((1, 4, 4, 1), (4, 4), 1),       # the whole input
                                          ((2, 3, 5, 7), (5, 2), 9)])      # filter taller than the input
def test_conv2d_odd_shapes(kind, shape, k, cout):
    _check("CONV_2D", kind, seed=sum(shape), x_shape=shape, k=k, cout=cout, stride=(1, 2))


@pytest.mark.parametrize("kind", ["int8", "uint8", "int16"])
@pytest.mark.parametrize("groups", [2, 3])
def test_conv2d_grouped(kind, groups):
    """Grouped convolutions run LiteRT's reference kernel (rounding ties away from zero)."""
    _check("CONV_2D", kind, seed=groups, x_shape=(2, 7, 6, 6), groups=groups, stride=(2, 1), act=RELU)


def test_conv2d_int16_with_int32_bias():
    """quantized_bias_type INT32: LiteRT's optimized 16x8 kernel (int32 sums, ruy's rescale)."""
    for seed in range(4):
        _check("CONV_2D", "int16", seed=seed, bias=np.int32, quantized_bias_type=2, q_out=(2.0 ** -5, 0),
               act=_ACTS[seed])


def test_conv2d_batch_of_many_pixels():
    _check("CONV_2D", "int8", seed=11, x_shape=(2, 33, 31, 16), cout=24, k=(3, 3), stride=(2, 2))


# ---------------------------------------------------------------------------------- DEPTHWISE_CONV_2D

@pytest.mark.parametrize("geometry", _GEOMETRY)
@pytest.mark.parametrize("act", _ACTS)
def test_depthwise_int8_per_channel(geometry, act):
    pad, stride, dil = geometry
    _check("DEPTHWISE_CONV_2D", "int8", seed=act * 10 + _GEOMETRY.index(geometry), pad=pad, stride=stride,
           dil=dil, act=act, mult=2, q_out=(0.05, 4))


@pytest.mark.parametrize("cin,mult", [(1, 1), (6, 1), (8, 1), (5, 2), (3, 3), (4, 4), (1, 10), (13, 1)])
def test_depthwise_int8_channel_counts(cin, mult):
    """The optimized kernel rescales channels in blocks of 8 with SIMD rounding and the rest one by one:
    channel counts below, at and past multiples of 8."""
    _check("DEPTHWISE_CONV_2D", "int8", seed=cin * 7 + mult, x_shape=(2, 8, 9, cin), mult=mult,
           q_out=(0.03, -7), stride=(1, 2))


@pytest.mark.parametrize("geometry", _GEOMETRY)
@pytest.mark.parametrize("act", _ACTS)
def test_depthwise_uint8_per_tensor(geometry, act):
    pad, stride, dil = geometry
    _check("DEPTHWISE_CONV_2D", "uint8", seed=act * 10 + _GEOMETRY.index(geometry), pad=pad, stride=stride,
           dil=dil, act=act, mult=[1, 2, 3][_GEOMETRY.index(geometry) % 3],
           w_zp=[0, 131, 255][act % 3], q_out=(0.2, 130))


@pytest.mark.parametrize("geometry", _GEOMETRY)
@pytest.mark.parametrize("act", _ACTS)
def test_depthwise_int16x8(geometry, act):
    pad, stride, dil = geometry
    _check("DEPTHWISE_CONV_2D", "int16", seed=act * 10 + _GEOMETRY.index(geometry), pad=pad, stride=stride,
           dil=dil, act=act, mult=[1, 2, 3][_GEOMETRY.index(geometry) % 3], q_out=(2.0 ** -7, 0))


@pytest.mark.parametrize("kind,zp_in,zp_out", [("int8", -128, 127), ("int8", 127, -128),
                                               ("uint8", 0, 255), ("uint8", 255, 0)])
@pytest.mark.parametrize("out_scale", [0.001, 0.03, 2.0])
def test_depthwise_zero_points_at_the_ends_and_saturation(kind, zp_in, zp_out, out_scale):
    scales = [0.3, 0.002, 0.05, 0.0004, 1e-5, 0.9] * 2 if kind == "int8" else 0.02
    out = _check("DEPTHWISE_CONV_2D", kind, seed=zp_in & 7, q_in=(0.05, zp_in), q_out=(out_scale, zp_out),
                 w_scales=scales, w_zp=0 if kind == "int8" else 200, mult=2)
    if out_scale == 0.001:
        info = np.iinfo(_DT[kind])
        assert np.any(out == info.min) or np.any(out == info.max)


def test_depthwise_int16_without_bias():
    _check("DEPTHWISE_CONV_2D", "int16", seed=5, bias=None, mult=1, x_shape=(1, 5, 6, 9))


@pytest.mark.parametrize("kind", ["int8", "uint8"])
def test_depthwise_8bit_without_bias_is_a_zero_bias(kind):
    """LiteRT's optimized 8-bit kernels crash without a bias (they copy it into their accumulators):
    onert-py gives what LiteRT gives with a zero bias."""
    mb, x = _model("DEPTHWISE_CONV_2D", kind, seed=5, bias=None, mult=2, x_shape=(1, 5, 6, 9))
    zero_bias, _ = _model("DEPTHWISE_CONV_2D", kind, seed=5, bias="zeros", mult=2, x_shape=(1, 5, 6, 9))
    expected = run_litert_builtin(zero_bias, [x])
    for fmt in ("tflite", "circle"):
        np.testing.assert_array_equal(run_onert(mb, [x], fmt)[0], expected[0])


def test_depthwise_int8_ignores_filter_zero_point_as_litert():
    """LiteRT's int8 depthwise kernels take the filter zero point as 0 whatever it says."""
    _check("DEPTHWISE_CONV_2D", "int8", seed=9, w_zp=3, mult=1)


# -------------------------------------------------------------------------------------- refusals

def _refused(mb, x, match, litert_refuses=True):
    with pytest.raises(PrepareError, match=match):
        run_onert(mb, [x])
    if litert_refuses:
        with pytest.raises(RuntimeError):      # LiteRT's Prepare fails too
            run_litert_builtin(mb, [x])


def test_conv2d_refuses_what_litert_refuses():
    _refused(*_model("CONV_2D", "int8", bias=None), "needs a bias")
    _refused(*_model("CONV_2D", "int8", w_zp=2), "zero points 0")
    _refused(*_model("CONV_2D", "int16", q_in=(0.01, 3)), "symmetric")
    _refused(*_model("CONV_2D", "int16", q_out=(0.5, -1)), "symmetric")
    _refused(*_model("CONV_2D", "int8", bias=np.int64), "INT32 bias")
    _refused(*_model("CONV_2D", "uint8", bias_scale=0.5), "bias scale")
    # an int32 bias needs quantized_bias_type INT32 (LiteRT would read it as int64)
    _refused(*_model("CONV_2D", "int16", bias=np.int32), "INT64 bias", litert_refuses=False)
    _refused(*_model("CONV_2D", "int16", bias=np.int64, quantized_bias_type=2), "INT32 bias")


def test_conv2d_uint8_per_channel_is_refused():
    mb, x = _model("CONV_2D", "uint8")
    g = rng(0)
    w = g.integers(0, 256, (4, 3, 3, 6)).astype(np.uint8)
    mb = single_op_model("CONV_2D", [("x", [2, 9, 8, 6], np.uint8, (0.05, 128)),
                                     ("const", w, (np.array([0.01, 0.02, 0.03, 0.04], np.float32),
                                                   np.full(4, 128), 0)),
                                     ("const", np.zeros(4, np.int32), (0.0005, 0))],
                         [("y", [2, 9, 8, 4], np.uint8, (0.1, 128))], padding=SAME, stride_h=1, stride_w=1,
                         dilation_h_factor=1, dilation_w_factor=1, fused_activation_function=NONE)
    _refused(mb, x, "per-channel")


def test_depthwise_refuses_what_litert_refuses():
    _refused(*_model("DEPTHWISE_CONV_2D", "int16", q_in=(0.01, 3)), "symmetric")
    _refused(*_model("DEPTHWISE_CONV_2D", "int16", bias=np.int32), "INT64 bias")
    _refused(*_model("DEPTHWISE_CONV_2D", "int8", bias=np.int64), "INT32 bias")
    # LiteRT's 16x8 kernel reads the multiplier from the option: a wrong one gives garbage there
    _refused(*_model("DEPTHWISE_CONV_2D", "int16", mult=2, depth_multiplier=1), "depth_multiplier 2",
             litert_refuses=False)


# ------------------------------------------------------------------------------------ INT4 filters
#
# LiteRT 2.3 unpacks an INT4 filter (two values per byte, low nibble first) and runs its int8 kernels on
# the values: CONV_2D with an int8 or int16 input, DEPTHWISE_CONV_2D with an int8 input, per channel or
# per tensor. Its other INT4 combinations run but compute something else, and onert-py refuses them.

def _int4_model(op, kind, **kw):
    """_model with its filter stored as INT4: the random values folded into [-8, 7], both ends present."""
    mb, x = _model(op, kind, **kw)
    t = mb.subgraphs[0].tensors[1]
    w = (np.asarray(t.data, np.int16) % 16 - 8).astype(np.int8)
    flat = w.reshape(-1)
    flat[0], flat[-1] = -8, 7
    t.data, t.dtype, t.type_name = w, np.dtype(np.int8), "INT4"
    return mb, x


def _check_int4(op, kind, **kw):
    mb, x = _int4_model(op, kind, **kw)
    return check_builtin(mb, [x])[0]


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D"])
@pytest.mark.parametrize("geometry", _GEOMETRY)
@pytest.mark.parametrize("act", _ACTS)
def test_int4_filter_int8(op, geometry, act):
    pad, stride, dil = geometry
    _check_int4(op, "int8", seed=act * 10 + _GEOMETRY.index(geometry), pad=pad, stride=stride, dil=dil,
                act=act, q_out=(0.02, -3), mult=2)


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D"])
@pytest.mark.parametrize("zp_in,zp_out", [(-128, 127), (127, -128), (0, 0)])
@pytest.mark.parametrize("out_scale", [0.0005, 0.01, 2.0])    # multipliers far above 1, around, below
@pytest.mark.parametrize("per_tensor", [False, True])
def test_int4_filter_int8_zero_points_scales_and_saturation(op, zp_in, zp_out, out_scale, per_tensor):
    scales = [0.04] if per_tensor else [0.3, 0.002, 0.05, 0.0004, 1e-5, 0.9] * 2
    out = _check_int4(op, "int8", seed=zp_in & 7, q_in=(0.05, zp_in), q_out=(out_scale, zp_out),
                      w_scales=scales[:1] if per_tensor else scales[:12 if op != "CONV_2D" else 4],
                      cout=4, mult=2)
    if out_scale == 0.0005:
        assert np.any(out == -128) or np.any(out == 127)     # saturated


@pytest.mark.parametrize("cin,mult", [(1, 1), (7, 1), (8, 1), (5, 2), (3, 3), (13, 1)])
def test_int4_filter_depthwise_channel_counts(cin, mult):
    """Blocks of 8 channels (SIMD rounding) and the rest (reference rounding), as for int8 filters."""
    _check_int4("DEPTHWISE_CONV_2D", "int8", seed=cin * 7 + mult, x_shape=(2, 8, 9, cin), mult=mult,
                q_out=(0.01, -7), stride=(1, 2))


@pytest.mark.parametrize("shape,k,cout,groups", [((1, 5, 7, 3), (1, 1), 5, 1), ((3, 1, 11, 2), (1, 4), 3, 1),
                                                 ((2, 3, 5, 7), (5, 2), 9, 1), ((2, 7, 6, 6), (3, 3), 6, 3)])
def test_int4_filter_conv2d_odd_shapes_and_groups(shape, k, cout, groups):
    """Odd element counts (the last byte half used), a filter taller than the input, grouped (LiteRT's
    reference kernel)."""
    _check_int4("CONV_2D", "int8", seed=sum(shape), x_shape=shape, k=k, cout=cout, groups=groups,
                stride=(1, 2), q_out=(0.01, 2))


@pytest.mark.parametrize("geometry", _GEOMETRY[:3])
@pytest.mark.parametrize("act", _ACTS)
@pytest.mark.parametrize("bias", [np.int64, np.int32])
def test_int4_filter_conv2d_int16x8(geometry, act, bias):
    """16x8 CONV_2D with an INT4 filter: the int64-bias reference kernel and the int32-bias optimized one."""
    pad, stride, dil = geometry
    extra = {"quantized_bias_type": 2} if bias == np.int32 else {}
    _check_int4("CONV_2D", "int16", seed=act * 10 + _GEOMETRY.index(geometry), pad=pad, stride=stride,
                dil=dil, act=act, q_out=(2.0 ** -8, 0), bias=bias, **extra)


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D"])
def test_int4_filter_computes_what_int8_storage_computes(op):
    mb4, x = _int4_model(op, "int8", seed=21, q_out=(0.02, 5))
    mb8, _ = _model(op, "int8", seed=21, q_out=(0.02, 5))
    mb8.subgraphs[0].tensors[1].data = np.array(mb4.subgraphs[0].tensors[1].data, np.int8)
    np.testing.assert_array_equal(run_onert(mb4, [x])[0], run_onert(mb8, [x])[0])


def test_int4_filter_refusals():
    # CONV_2D's int8 filter zero points must be 0: LiteRT fails at prepare
    _refused(*_int4_model("CONV_2D", "int8", w_zp=1), "zero points 0")
    # LiteRT runs these, but its uint8 CONV_2D reads the unpacked values as uint8 bytes, and its uint8
    # and 16x8 DEPTHWISE_CONV_2D read the packed bytes: not the int4 values' convolution
    _refused(*_int4_model("CONV_2D", "uint8", w_scales=0.01), "INT8 or INT16 input", litert_refuses=False)
    _refused(*_int4_model("DEPTHWISE_CONV_2D", "uint8", w_scales=0.01), "needs an INT8 input",
             litert_refuses=False)
    _refused(*_int4_model("DEPTHWISE_CONV_2D", "int16", mult=1), "needs an INT8 input", litert_refuses=False)


def test_int4_depthwise_ignores_filter_zero_point_as_litert():
    _check_int4("DEPTHWISE_CONV_2D", "int8", seed=9, w_zp=3, mult=1)


# ------------------------------------------------------------------------------------------- CONV_3D

@pytest.mark.parametrize("kind", [np.int8, np.int16])
def test_quantized_conv3d_is_refused_as_litert(kind):
    """LiteRT 2.3's CONV_3D runs float32 only (conv3d.cc: the input must be FLOAT32): onert-py has no
    quantized CONV_3D kernel and says so at prepare."""
    from onert_py.errors import UnsupportedOpError
    g = rng(3)
    w = g.integers(-127, 128, (2, 2, 2, 2, 3)).astype(np.int8)
    b = np.zeros(3, np.int32 if kind == np.int8 else np.int64)
    mb = single_op_model("CONV_3D", [("x", [1, 4, 4, 4, 2], kind, (0.1, 0)), ("const", w, (0.02, 0)),
                                     ("const", b, (0.002, 0))],
                         [("y", [1, 3, 3, 3, 3], kind, (0.2, 0))], padding=VALID)
    x = g.integers(-100, 100, (1, 4, 4, 4, 2)).astype(kind)
    with pytest.raises(RuntimeError, match="FLOAT32"):
        run_litert_builtin(mb, [x])
    with pytest.raises(UnsupportedOpError, match=r"CONV_3D \(quantized int(8|16)\)"):
        run_onert(mb, [x])
