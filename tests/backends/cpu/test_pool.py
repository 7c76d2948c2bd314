import numpy as np
import pytest

import onert_py
from helpers import assert_close, assert_matches_litert, rng, run_litert, run_onert, single_op_model
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
    with pytest.raises(onert_py.PrepareError, match="float32"):
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
