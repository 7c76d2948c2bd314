"""Quantized RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR and L2_NORMALIZATION against LiteRT's builtin
kernels, bit for bit."""
import numpy as np
import pytest

import onert_py
from helpers import check_builtin, fit_quantization, int32_const, rng, run_onert, single_op_model

R = rng(23)
TYPES = [np.int8, np.uint8, np.int16]
RESIZE_OPTS = {"plain": dict(align_corners=False, half_pixel_centers=False),
               "align": dict(align_corners=True, half_pixel_centers=False),
               "half": dict(align_corners=False, half_pixel_centers=True)}
# (input shape, output size): up- and downscaling, odd sizes, one-pixel axes, many channels
SHAPES = [([1, 3, 4, 2], (7, 5)), ([2, 5, 3, 3], (2, 8)), ([1, 1, 6, 1], (3, 4)), ([1, 4, 4, 17], (9, 3))]


def _x(shape, dtype):
    info = np.iinfo(dtype)
    return R.integers(info.min, int(info.max) + 1, size=shape).astype(dtype)


@pytest.mark.parametrize("shape,size", SHAPES, ids=[f"{s[1]}x{s[2]}to{o[0]}x{o[1]}" for s, o in SHAPES])
@pytest.mark.parametrize("opts", list(RESIZE_OPTS.values()), ids=list(RESIZE_OPTS))
@pytest.mark.parametrize("dtype", TYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])
def test_resize_quantized_matches_litert(op, dtype, opts, shape, size):
    q = fit_quantization((0.05, 3), dtype)
    out = [shape[0], size[0], size[1], shape[3]]
    mb = single_op_model(op, [("x", shape, dtype, q), int32_const(list(size))], [("y", out, dtype, q)], **opts)
    check_builtin(mb, [_x(shape, dtype)])


@pytest.mark.parametrize("dtype", TYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])
def test_resize_with_other_output_parameters_moves_integers_as_litert(op, dtype):
    """LiteRT's resize kernels never read the quantization: other output parameters do not rescale."""
    qi, qo = fit_quantization((0.05, 3), dtype), fit_quantization((0.3, -7), dtype)
    mb = single_op_model(op, [("x", [1, 3, 5, 2], dtype, qi), int32_const([5, 4])], [("y", [1, 5, 4, 2], dtype, qo)],
                         **RESIZE_OPTS["half"])
    x = _x([1, 3, 5, 2], dtype)
    (y,) = check_builtin(mb, [x])
    if op == "RESIZE_NEAREST_NEIGHBOR":
        assert set(np.unique(y)) <= set(np.unique(x))


@pytest.mark.parametrize("op", ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])
def test_resize_quantized_runtime_size(op):
    q = (0.05, -128)
    mb = single_op_model(op, [("x", [1, 3, 4, 3], np.int8, q), ("size", [2], np.int32)],
                         [("y", [1, -1, -1, 3], np.int8, q)], **RESIZE_OPTS["align"])
    check_builtin(mb, [_x([1, 3, 4, 3], np.int8), np.array([5, 7], np.int32)])


def _l2_out_q(dtype):
    return (1 / 128, 0 if dtype == np.int8 else 128)


L2_CASES = [  # (shape, input scale, input zero point as for int8)
    ([2, 5], 0.05, 3), ([3, 1], 0.1, -128), ([1, 2, 3, 7], 0.02, 127), ([4, 64], 1.7, -20), ([2, 300], 0.004, 0),
    ([5], 0.5, 10), ([3, 2000], 0.05, -1),     # sums of squares past 2**29 (the normalisation's /4 steps)
]


@pytest.mark.parametrize("shape,scale,zp", L2_CASES, ids=[str(c[0]) for c in L2_CASES])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=lambda d: np.dtype(d).name)
def test_l2_normalization_quantized_matches_litert(dtype, shape, scale, zp):
    qi = fit_quantization((scale, zp), dtype)
    mb = single_op_model("L2_NORMALIZATION", [("x", shape, dtype, qi)], [("y", shape, dtype, _l2_out_q(dtype))],
                         fused_activation_function=0)
    x = _x(shape, dtype)
    flat = x.reshape(-1, shape[-1])
    flat[0] = qi[1]                                        # an all-zero row: norm 0
    if flat.shape[0] > 1:
        flat[1] = qi[1]
        flat[1, 0] = qi[1] + (1 if qi[1] < np.iinfo(dtype).max else -1)   # norm 1
    if flat.shape[0] > 2:
        flat[2] = np.iinfo(dtype).min if qi[1] > 0 else np.iinfo(dtype).max   # the largest norm
    check_builtin(mb, [x])


def test_l2_normalization_quantized_small_sums_exhaustive():
    """Every one-hot and two-hot row of small values: the normalisation of sums from 2 up."""
    vals = np.arange(-128, 128)
    x = np.zeros((vals.size * 4, 3), np.int8)
    x[:vals.size, 0] = vals
    x[vals.size:2 * vals.size, :2] = vals[:, None]
    x[2 * vals.size:3 * vals.size, 0] = vals
    x[2 * vals.size:3 * vals.size, 2] = 1
    x[3 * vals.size:, :] = R.integers(-5, 6, size=(vals.size, 3))
    mb = single_op_model("L2_NORMALIZATION", [("x", list(x.shape), np.int8, (0.1, 0))],
                         [("y", list(x.shape), np.int8, (1 / 128, 0))], fused_activation_function=0)
    check_builtin(mb, [x])


@pytest.mark.parametrize("dtype,out_q,act,match", [
    (np.int8, (1 / 64, 0), 0, "scale 1/128, zero point 0"),
    (np.int8, (1 / 128, 5), 0, "scale 1/128, zero point 0"),
    (np.uint8, (1 / 128, 0), 0, "scale 1/128, zero point 128"),
    (np.int8, (1 / 128, 0), 1, "fused activation"),
], ids=["scale", "int8-zero-point", "uint8-zero-point", "relu"])
def test_l2_normalization_quantized_refuses_what_litert_refuses(dtype, out_q, act, match):
    qi = fit_quantization((0.05, 3), dtype)
    mb = single_op_model("L2_NORMALIZATION", [("x", [2, 4], dtype, qi)], [("y", [2, 4], dtype, out_q)],
                         fused_activation_function=act)
    x = _x([2, 4], dtype)
    with pytest.raises(onert_py.PrepareError, match=match):
        run_onert(mb, [x])
    with pytest.raises(RuntimeError, match="failed to prepare"):
        check_builtin(mb, [x])


def test_l2_normalization_int16_is_refused_as_litert():
    mb = single_op_model("L2_NORMALIZATION", [("x", [2, 4], np.int16, (0.05, 0))],
                         [("y", [2, 4], np.int16, (1 / 128, 0))], fused_activation_function=0)
    with pytest.raises(onert_py.UnsupportedOpError, match=r"L2_NORMALIZATION \(quantized int16\)"):
        run_onert(mb, [_x([2, 4], np.int16)])
    with pytest.raises(RuntimeError, match="failed to prepare"):
        check_builtin(mb, [_x([2, 4], np.int16)])


def test_local_response_normalization_quantized_is_refused_as_litert():
    """LiteRT runs LOCAL_RESPONSE_NORMALIZATION on float32 only."""
    q = (0.05, 3)
    mb = single_op_model("LOCAL_RESPONSE_NORMALIZATION", [("x", [1, 2, 2, 5], np.int8, q)],
                         [("y", [1, 2, 2, 5], np.int8, q)], radius=2, bias=1.0, alpha=1.0, beta=0.5)
    with pytest.raises(onert_py.UnsupportedOpError, match=r"LOCAL_RESPONSE_NORMALIZATION \(quantized int8\)"):
        run_onert(mb, [_x([1, 2, 2, 5], np.int8)])
    with pytest.raises(RuntimeError, match="failed to prepare"):
        check_builtin(mb, [_x([1, 2, 2, 5], np.int8)])
