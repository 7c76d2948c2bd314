import numpy as np
import pytest

import onert_py
from helpers import (FORMATS, assert_close, assert_matches_litert, check_builtin, dtype_values, rng, run_litert,
                     run_litert_builtin, run_onert, single_op_model)

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


# ---- integer bilinear, more nearest-neighbour types (the dtype audit)

TYPED_CASES = [([1, 4, 4, 3], (8, 8)), ([2, 5, 3, 2], (3, 7)), ([1, 6, 6, 1], (4, 4)), ([1, 3, 4, 2], (1, 1)),
               ([1, 2, 2, 1], (5, 3)), ([1, 7, 9, 2], (13, 4)),
               ([1, 3, 3, 8], (24, 24))]   # x8, C % 8 == 0: LiteRT's uint8 fixed-point special case (half)


def _full_range(shape, dtype, seed):
    i = np.iinfo(dtype)
    x = rng(seed).integers(i.min, int(i.max) + 1, size=shape).astype(dtype)
    x.reshape(-1)[:2] = [i.min, i.max]
    return x


@pytest.mark.parametrize("x_shape,size", TYPED_CASES, ids=str)
@pytest.mark.parametrize("opts", RESIZE_OPTS, ids=["plain", "align", "half"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
def test_resize_bilinear_integer_builtin(x_shape, size, opts, dtype):
    # int8/int16: LiteRT's fixed-point kernel (1/1024 positions, rounding half away from zero);
    # uint8: its float kernel plus 0.5, truncated. Bit-exact over the whole value range.
    x = _full_range(x_shape, dtype, 8)
    check_builtin(_resize_model("RESIZE_BILINEAR", x_shape, size, dtype, opts, version=4), [x])


def test_resize_bilinear_int8_rounding_numbers():
    # Independent of LiteRT: a 1x2 row [a, b] resized to width 4 samples at positions 0, 0.5, 1, 1.5
    # (scale 512/1024): the midpoint (a + b) / 2 rounds half away from zero, the last columns are b.
    x = np.array([[-3, 0], [3, 0], [-128, 127], [5, 6]], np.int8).reshape(4, 1, 2, 1)
    want = np.array([[-3, -2, 0, 0], [3, 2, 0, 0], [-128, -1, 127, 127], [5, 6, 6, 6]], np.int8).reshape(4, 1, 4, 1)
    mb = _resize_model("RESIZE_BILINEAR", [4, 1, 2, 1], (1, 4), np.int8, RESIZE_OPTS[0], version=4)
    for fmt in FORMATS:
        np.testing.assert_array_equal(run_onert(mb, [x], fmt)[0], want)
    check_builtin(mb, [x])


def test_resize_bilinear_integer_overshooting_scale_clamps():
    # 3 rows to 130: the scale rounds up to 24/1024 and the last two output rows sit at 3072/1024 and
    # 3096/1024, past the last input row (LiteRT reads outside the tensor there); ours repeat the last row.
    x = _full_range([1, 3, 2, 1], np.int16, 9)
    mb = _resize_model("RESIZE_BILINEAR", [1, 3, 2, 1], (130, 2), np.int16, RESIZE_OPTS[0], version=4)
    for fmt in FORMATS:
        got = run_onert(mb, [x], fmt)[0]
        np.testing.assert_array_equal(got[0, 128:], x[0, [2, 2]])


@pytest.mark.parametrize("dtype", [np.float16, np.uint16, np.uint32, np.bool_, np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("opts", RESIZE_OPTS, ids=["plain", "align", "half"])
def test_resize_nearest_types_builtin(dtype, opts):
    for k, (x_shape, size) in enumerate(TYPED_CASES[:6]):
        x = dtype_values(x_shape, dtype, seed=k)
        check_builtin(_resize_model("RESIZE_NEAREST_NEIGHBOR", x_shape, size, dtype, opts, version=4), [x])


@pytest.mark.parametrize("opts", RESIZE_OPTS, ids=["plain", "align", "half"])
def test_resize_nearest_int64(opts):
    # Registered although LiteRT 2.3 rejects int64: the elements LiteRT's int32 kernel picks for the
    # positions 0..n-1, taken from int64 values beyond the int32 range.
    for x_shape, size in TYPED_CASES[:6]:
        n = int(np.prod(x_shape))
        positions = np.arange(n, dtype=np.int32).reshape(x_shape)
        picked = run_litert_builtin(_resize_model("RESIZE_NEAREST_NEIGHBOR", x_shape, size, np.int32, opts, version=4),
                                    [positions])[0]
        x = (np.arange(n, dtype=np.int64) * -(3 << 40) + 7).reshape(x_shape)
        mb = _resize_model("RESIZE_NEAREST_NEIGHBOR", x_shape, size, np.int64, opts, version=4)
        for fmt in FORMATS:
            np.testing.assert_array_equal(run_onert(mb, [x], fmt)[0], x.reshape(-1)[picked])


@pytest.mark.parametrize("op,dtype", [("RESIZE_BILINEAR", np.float16), ("RESIZE_BILINEAR", np.int32),
                                      ("RESIZE_BILINEAR", np.uint16), ("RESIZE_NEAREST_NEIGHBOR", np.float64),
                                      ("RESIZE_NEAREST_NEIGHBOR", np.complex64), ("L2_NORMALIZATION", np.float16),
                                      ("LOCAL_RESPONSE_NORMALIZATION", np.int8)])
def test_image_unsupported_types(op, dtype):
    if op.startswith("RESIZE"):
        mb = _resize_model(op, [1, 2, 2, 1], (4, 4), dtype, RESIZE_OPTS[0], version=4)
    else:
        mb = single_op_model(op, [("x", [1, 2, 2, 1], dtype)], [("o", [1, 2, 2, 1], dtype)])
    with pytest.raises(onert_py.PrepareError, match="not supported"):
        onert_py.infer.session(mb.to_bytes("tflite"))
