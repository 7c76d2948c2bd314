import numpy as np
import pytest

import onert_py
from helpers import (FORMATS, assert_close, assert_matches_litert, check_builtin, rng, run_litert, run_onert,
                     single_op_model)
from onert_py.backends.cpu.conv import conv_output_size

SAME, VALID = 0, 1
OPS = ["AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D"]


def _pool_model(op, x_shape, k, s, padding, act=0):
    n, h, w, c = x_shape
    oh, ow = conv_output_size(h, k[0], s[0], 1, padding), conv_output_size(w, k[1], s[1], 1, padding)
    return single_op_model(op, [("x", x_shape, np.float32)], [("o", [n, oh, ow, c], np.float32)],
                           padding=padding, stride_h=s[0], stride_w=s[1], filter_height=k[0], filter_width=k[1],
                           fused_activation_function=act)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("x_shape,k,s", [([1, 6, 6, 3], (2, 2), (2, 2)), ([2, 7, 5, 4], (3, 3), (2, 2)),
                                         ([1, 5, 8, 2], (3, 2), (1, 3)), ([1, 4, 4, 5], (4, 4), (1, 1)),
                                         ([1, 3, 3, 1], (1, 1), (2, 1))])
@pytest.mark.parametrize("padding", [SAME, VALID])
def test_pool(op, x_shape, k, s, padding):
    x = rng(1).normal(size=x_shape).astype(np.float32)
    assert_matches_litert(_pool_model(op, x_shape, k, s, padding), [x], fmts=("tflite",))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("act", [1, 2, 3])
def test_pool_activation(op, act):
    x = (rng(2).normal(size=[1, 6, 6, 2]) * 4).astype(np.float32)
    assert_matches_litert(_pool_model(op, [1, 6, 6, 2], (3, 3), (2, 2), SAME, act), [x])


def test_global_average_pool_large():
    x = rng(3).uniform(0, 1, size=[2, 14, 14, 64]).astype(np.float32)
    assert_matches_litert(_pool_model("AVERAGE_POOL_2D", [2, 14, 14, 64], (14, 14), (1, 1), VALID), [x])


def test_pool_bad_dtype_is_prepare_error():
    mb = single_op_model("MAX_POOL_2D", [("x", [1, 4, 4, 1], np.int32)], [("o", [1, 2, 2, 1], np.int32)],
                         padding=VALID, stride_h=2, stride_w=2, filter_height=2, filter_width=2)
    with pytest.raises(onert_py.PrepareError, match=r"input 0 \('x'\) has type int32, not supported"):
        run_onert(mb, [np.zeros((1, 4, 4, 1), np.int32)])


# Windows that tile the input (stride == filter, no padding) take a reshaped path: tap by tap for
# narrow windows, one ufunc.reduce for wide ones (the global pools); leftover rows/columns of a VALID
# pool are dropped. A single window along an axis tiles it whatever the stride.
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("x_shape,k,s,padding", [([1, 13, 14, 2], (3, 3), (3, 3), VALID),
                                                 ([1, 12, 12, 3], (6, 6), (6, 6), VALID),
                                                 ([2, 32, 32, 4], (32, 32), (32, 32), VALID),
                                                 ([1, 8, 8, 3], (8, 8), (1, 1), VALID),
                                                 ([1, 8, 6, 8], (2, 3), (2, 3), SAME),
                                                 ([1, 16, 16, 8], (2, 2), (2, 2), VALID),
                                                 ([2, 4, 6, 3], (1, 2), (1, 2), VALID),
                                                 ([1, 6, 4, 3], (3, 1), (3, 1), SAME)])
def test_pool_tiled(op, x_shape, k, s, padding):
    x = rng(4).normal(size=x_shape).astype(np.float32)
    assert_matches_litert(_pool_model(op, x_shape, k, s, padding), [x], fmts=("tflite",))


@pytest.mark.parametrize("op", OPS)
def test_pool_dynamic_shapes_one_session(op):
    """One session, inputs of changing shape: plans and scratch are per shape, and an output handed out
    earlier is never written by a later run."""
    mb = single_op_model(op, [("x", [-1, -1, -1, 3], np.float32)], [("o", [-1, -1, -1, 3], np.float32)],
                         padding=SAME, stride_h=2, stride_w=2, filter_height=3, filter_width=2,
                         fused_activation_function=0)
    sess = onert_py.infer.session(mb.to_bytes("tflite"))
    kept = []
    for k, shape in enumerate([(1, 9, 8, 3), (2, 4, 12, 3), (1, 9, 8, 3), (1, 30, 20, 3)]):
        x = rng(5 + k).normal(size=shape).astype(np.float32)
        got = sess.infer([x])
        ref = run_litert(mb, [x])
        assert_close(got, ref)
        kept.append((got[0], ref[0]))
    for got, ref in kept:
        assert_close([got], [ref])


# ---- non-quantized integer pools, float16 average pool (the dtype audit)

INT_CASES = [([1, 4, 4, 3], (2, 2), (2, 2), VALID), ([2, 7, 5, 4], (3, 3), (2, 2), SAME),
             ([1, 5, 8, 2], (3, 2), (1, 3), SAME), ([1, 6, 6, 2], (6, 6), (1, 1), VALID)]


def _typed_pool_model(op, x_shape, k, s, padding, dtype, act=0):
    n, h, w, c = x_shape
    oh, ow = conv_output_size(h, k[0], s[0], 1, padding), conv_output_size(w, k[1], s[1], 1, padding)
    return single_op_model(op, [("x", x_shape, dtype)], [("o", [n, oh, ow, c], dtype)],
                           padding=padding, stride_h=s[0], stride_w=s[1], filter_height=k[0], filter_width=k[1],
                           fused_activation_function=act)


def _int_values(shape, dtype, seed):
    i = np.iinfo(dtype)
    x = rng(seed).integers(i.min, int(i.max) + 1, size=shape).astype(dtype)
    x.reshape(-1)[:2] = [i.min, i.max]
    return x


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("op", ["MAX_POOL_2D", "AVERAGE_POOL_2D"])
@pytest.mark.parametrize("x_shape,k,s,padding", INT_CASES, ids=str)
def test_integer_pool_builtin(op, dtype, x_shape, k, s, padding):
    # LiteRT runs non-quantized int8/uint8/int16 pools with its integer kernels: the plain max, and the
    # average rounded half away from zero; values over the whole type range, padding included.
    x = _int_values(x_shape, dtype, 6)
    check_builtin(_typed_pool_model(op, x_shape, k, s, padding, dtype), [x])


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_integer_average_pool_rounds_half_away_from_zero(dtype):
    # Independent of LiteRT: 2x2 windows whose sums are +-2, +-6, +-1, +-3 (means +-0.5, +-1.5,
    # +-0.25, +-0.75) give +-1, +-2, 0, +-1; the mean of a 3-element padded window divides by 3.
    x = np.array([[1, 1, 3, 3, 1, 0, 3, 0], [0, 0, 0, 0, 0, 0, 0, 0]], dtype)
    x = np.concatenate([x, -x]).reshape(1, 4, 8, 1)
    want = np.array([[1, 2, 0, 1], [-1, -2, 0, -1]], dtype).reshape(1, 2, 4, 1)
    mb = _typed_pool_model("AVERAGE_POOL_2D", [1, 4, 8, 1], (2, 2), (2, 2), VALID, dtype)
    for fmt in FORMATS:
        np.testing.assert_array_equal(run_onert(mb, [x], fmt)[0], want)
    check_builtin(mb, [x])
    x = np.array([5, 0, 0, -5], dtype).reshape(1, 2, 2, 1)   # SAME 3x3/2 on 2x2: one window of 4
    mb = _typed_pool_model("AVERAGE_POOL_2D", [1, 2, 2, 1], (3, 3), (3, 3), SAME, dtype)
    check_builtin(mb, [np.array([5, 1, 0, 0], dtype).reshape(1, 2, 2, 1)])   # 6/4 = 1.5 -> 2
    assert check_builtin(mb, [x])[0].item() == 0


@pytest.mark.parametrize("op", ["MAX_POOL_2D", "AVERAGE_POOL_2D"])
@pytest.mark.parametrize("act", [1, 3])
def test_integer_pool_fused_activation_is_prepare_error(op, act):
    # LiteRT's integer activation range comes from the quantization scale: without one its results are
    # garbage (all zeros or a constant), so a non-quantized integer pool with an activation is refused
    mb = _typed_pool_model(op, [1, 4, 4, 1], (2, 2), (2, 2), VALID, np.int8, act)
    with pytest.raises(onert_py.PrepareError, match="fused activation on a non-quantized int8 pool"):
        onert_py.infer.session(mb.to_bytes("tflite"))


@pytest.mark.parametrize("op,dtype", [("L2_POOL_2D", np.int8), ("MAX_POOL_2D", np.float16),
                                      ("L2_POOL_2D", np.float16), ("AVERAGE_POOL_2D", np.int32)])
def test_pool_unsupported_types(op, dtype):
    mb = _typed_pool_model(op, [1, 4, 4, 1], (2, 2), (2, 2), VALID, dtype)
    with pytest.raises(onert_py.PrepareError, match=f"has type {np.dtype(dtype).name}, not supported"):
        onert_py.infer.session(mb.to_bytes("tflite"))


@pytest.mark.parametrize("act", [0, 1, 3])
@pytest.mark.parametrize("x_shape,k,s,padding", [([1, 4, 4, 3], (2, 2), (2, 2), VALID), ([2, 7, 5, 4], (3, 3), (2, 2), SAME),
                                                 ([1, 5, 8, 2], (3, 2), (1, 2), SAME),
                                                 ([1, 14, 14, 16], (14, 14), (1, 1), VALID)], ids=str)
def test_float16_average_pool_xnnpack(x_shape, k, s, padding, act):
    # Only XNNPACK runs float16 AVERAGE_POOL_2D; it sums in float16 in its own order, we sum in float32
    # and round once: within a float16 rounding of the sums (inputs in [-8, 8], sums up to ~1600).
    # (The delegate leaves a stride larger than the filter to the builtin kernel, which has no float16.)
    x = rng(7).uniform(-8, 8, size=x_shape).astype(np.float16)
    mb = _typed_pool_model("AVERAGE_POOL_2D", x_shape, k, s, padding, np.float16, act)
    check_builtin(mb, [x], rtol=2e-3, atol=2e-2, delegate=True)
