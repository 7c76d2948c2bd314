import numpy as np
import pytest

import onert_py
from helpers import assert_close, assert_matches_litert, rng, run_litert, run_onert, single_op_model

RESIZE_OPTS = [dict(align_corners=False, half_pixel_centers=False), dict(align_corners=True, half_pixel_centers=False),
               dict(align_corners=False, half_pixel_centers=True)]


def _resize_model(op, x_shape, size, dtype, opts, runtime_size=False, version=None):
    size_spec = ("size", [2], np.int32) if runtime_size else ("const", np.array(size, np.int32))
    mb = single_op_model(op, [("x", x_shape, dtype), size_spec],
                         [("o", [x_shape[0], size[0], size[1], x_shape[3]], dtype)], **opts)
    # half_pixel_centers needs op version 3 (bilinear) / 3 (nearest) in LiteRT's op resolver.
    mb.subgraphs[0].operations[0].version = version or (3 if opts["half_pixel_centers"] else 1)
    return mb


@pytest.mark.parametrize("x_shape,size", [([1, 4, 4, 3], (8, 8)), ([2, 5, 3, 2], (3, 7)), ([1, 6, 6, 1], (4, 4)),
                                          ([1, 3, 4, 2], (1, 1)), ([1, 2, 2, 1], (5, 3))])
@pytest.mark.parametrize("opts", RESIZE_OPTS, ids=["plain", "align", "half"])
def test_resize_bilinear(x_shape, size, opts):
    x = rng(1).normal(size=x_shape).astype(np.float32)
    assert_matches_litert(_resize_model("RESIZE_BILINEAR", x_shape, size, np.float32, opts), [x], fmts=("tflite",))


@pytest.mark.parametrize("x_shape,size", [([1, 4, 4, 3], (8, 8)), ([2, 5, 3, 2], (3, 7)), ([1, 6, 6, 1], (4, 4)),
                                          ([1, 3, 4, 2], (1, 1)), ([1, 3, 3, 1], (7, 5))])
@pytest.mark.parametrize("opts", RESIZE_OPTS, ids=["plain", "align", "half"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_resize_nearest(x_shape, size, opts, dtype):
    x = (rng(2).normal(size=x_shape) * 100).astype(dtype)
    mb = _resize_model("RESIZE_NEAREST_NEIGHBOR", x_shape, size, dtype, opts,
                       version=4 if dtype == np.int32 else None)
    assert_matches_litert(mb, [x], fmts=("tflite",))


@pytest.mark.parametrize("op", ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])
def test_resize_runtime_size(op):
    x = rng(3).normal(size=[1, 3, 4, 2]).astype(np.float32)
    mb = _resize_model(op, [1, 3, 4, 2], (6, 5), np.float32, RESIZE_OPTS[0], runtime_size=True)
    assert_matches_litert(mb, [x, np.array([6, 5], np.int32)])


def test_resize_bad_size_is_prepare_error():
    mb = single_op_model("RESIZE_BILINEAR", [("x", [1, 2, 2, 1], np.float32), ("const", np.array([2, 2, 2], np.int32))],
                         [("o", [1, 2, 2, 1], np.float32)])
    with pytest.raises(onert_py.PrepareError, match="2 values"):
        run_onert(mb, [np.zeros((1, 2, 2, 1), np.float32)])


@pytest.mark.parametrize("shape", [[6], [3, 5], [2, 3, 4], [1, 2, 2, 8]])
def test_l2_normalization(shape):
    x = rng(4).normal(size=shape).astype(np.float32)
    x.reshape(-1, shape[-1])[0] = 0  # a zero vector: divided by epsilon, stays 0
    mb = single_op_model("L2_NORMALIZATION", [("x", shape, np.float32)], [("o", shape, np.float32)],
                         fused_activation_function=0)
    assert_matches_litert(mb, [x])


@pytest.mark.parametrize("radius,bias,alpha,beta", [(2, 1.0, 1e-4, 0.75), (5, 2.0, 0.5, 0.5), (0, 1.0, 1.0, 1.0),
                                                   (1, 0.5, 0.1, 0.3)])
def test_local_response_normalization(radius, bias, alpha, beta):
    x = rng(5).normal(size=[1, 3, 4, 7]).astype(np.float32)
    mb = single_op_model("LOCAL_RESPONSE_NORMALIZATION", [("x", [1, 3, 4, 7], np.float32)],
                         [("o", [1, 3, 4, 7], np.float32)], radius=radius, bias=bias, alpha=alpha, beta=beta)
    assert_matches_litert(mb, [x])


# Bilinear resize runs a W pass then an H pass from precomputed tables; nearest gathers rows then
# columns. Up, down and mixed scales, wide and narrow C, batch > 1 and the 2x half-pixel upscale of the
# mediapipe models.
@pytest.mark.parametrize("x_shape,size", [([1, 16, 16, 8], (32, 32)),     # 2x up, C = 8 (pose_landmark)
                                          ([1, 3, 3, 64], (6, 6)),        # 2x up, wide C
                                          ([1, 9, 7, 3], (4, 3)),         # down: H pass first
                                          ([1, 4, 12, 3], (9, 5)),        # H up, W down
                                          ([1, 12, 4, 2], (5, 9)),        # H down, W up
                                          ([3, 4, 5, 2], (7, 3)),         # batch 3
                                          ([1, 5, 6, 4], (5, 6)),         # same size
                                          # non-integer shrink factors: sample positions computed as
                                          # i * scale + offset (LiteRT), not (i + 0.5) * scale - 0.5
                                          ([1, 32, 32, 4], (10, 15)), ([2, 20, 12, 3], (7, 5))])
@pytest.mark.parametrize("opts", RESIZE_OPTS, ids=["plain", "align", "half"])
@pytest.mark.parametrize("op", ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])
def test_resize_pass_orders(op, x_shape, size, opts):
    x = rng(6).normal(size=x_shape).astype(np.float32)
    assert_matches_litert(_resize_model(op, x_shape, size, np.float32, opts), [x], fmts=("tflite",))


def _dynamic_resize_model(op, c, size, opts, runtime_size=False):
    size_spec = ("size", [2], np.int32) if runtime_size else ("const", np.array(size, np.int32))
    mb = single_op_model(op, [("x", [-1, -1, -1, c], np.float32), size_spec], [("o", [-1, -1, -1, c], np.float32)],
                         **opts)
    mb.subgraphs[0].operations[0].version = 3 if opts["half_pixel_centers"] else 1
    return mb


@pytest.mark.parametrize("op", ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])
@pytest.mark.parametrize("runtime_size", [False, True])
def test_resize_dynamic_shapes_one_session(op, runtime_size):
    """One session, inputs of changing shape (and sizes): index tables and scratch are per shape, and an
    output handed out earlier is never written by a later run."""
    opts = RESIZE_OPTS[2]
    mb = _dynamic_resize_model(op, 3, (6, 4), opts, runtime_size)
    sess = onert_py.infer.session(mb.to_bytes("tflite"))
    g = rng(7)
    cases = [((1, 3, 2, 3), (6, 4)), ((2, 8, 8, 3), (5, 12)), ((1, 3, 2, 3), (6, 4)), ((1, 20, 16, 3), (40, 32))]
    kept = []
    for x_shape, size in cases:
        x = g.normal(size=x_shape).astype(np.float32)
        inputs = [x, np.array(size, np.int32)] if runtime_size else [x]
        if not runtime_size:
            size = (6, 4)
        got = sess.infer(inputs)
        ref = run_litert(_dynamic_resize_model(op, 3, size, opts, runtime_size), inputs)
        assert_close(got, ref)
        kept.append((got[0], ref[0]))
    for got, ref in kept:
        assert_close([got], [ref])
