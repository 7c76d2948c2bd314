import numpy as np
import pytest

import onert_py
from helpers import assert_close, assert_matches_litert, rng, run_litert, run_onert, single_op_model
from onert_py.ir import TYPE_NAME_BY_DTYPE
from onert_py.backends.cpu.conv import conv_output_size

SAME, VALID = 0, 1
# Float32 dot products over up to KH*KW*C = 3*3*16 terms of N(0,1) data: LiteRT and BLAS sum in different
# orders, so outputs (magnitude ~10-20) differ by a few ulps of the sum of |terms|.
ATOL = 3e-5


def _conv_model(x_shape, w, bias, padding, strides, dils, act, version=1):
    n, h, wd, _ = x_shape
    oh = conv_output_size(h, w.shape[1], strides[0], dils[0], padding)
    ow = conv_output_size(wd, w.shape[2], strides[1], dils[1], padding)
    # LiteRT's CONV_2D wants the bias omitted (2 inputs), not marked optional (-1).
    inputs = [("x", x_shape, np.float32), ("const", w)] + ([("const", bias)] if bias is not None else [])
    mb = single_op_model("CONV_2D", inputs,
                         [("o", [n, oh, ow, w.shape[0]], np.float32)], padding=padding, stride_h=strides[0],
                         stride_w=strides[1], dilation_h_factor=dils[0], dilation_w_factor=dils[1],
                         fused_activation_function=act)
    mb.subgraphs[0].operations[0].version = version
    return mb


@pytest.mark.parametrize("x_shape,k", [([1, 5, 5, 3], 3), ([2, 8, 7, 4], 3), ([1, 6, 6, 8], 1), ([1, 9, 10, 2], (2, 4))])
@pytest.mark.parametrize("padding", [SAME, VALID])
@pytest.mark.parametrize("strides", [(1, 1), (2, 2), (3, 1)])
@pytest.mark.parametrize("dils", [(1, 1), (2, 1)])
def test_conv2d(x_shape, k, padding, strides, dils):
    kh, kw = (k, k) if isinstance(k, int) else k
    g = rng(1)
    w = g.normal(size=(5, kh, kw, x_shape[-1])).astype(np.float32)
    b = g.normal(size=5).astype(np.float32)
    x = g.normal(size=x_shape).astype(np.float32)
    mb = _conv_model(x_shape, w, b, padding, strides, dils, act=0)
    assert_matches_litert(mb, [x], atol=ATOL, fmts=("tflite",))


@pytest.mark.parametrize("act", [1, 2, 3])
def test_conv2d_activation_no_bias(act):
    g = rng(2)
    w = g.normal(size=(4, 3, 3, 3)).astype(np.float32)
    x = g.normal(size=[1, 6, 6, 3]).astype(np.float32)
    assert_matches_litert(_conv_model([1, 6, 6, 3], w, np.ones(4, np.float32), SAME, (1, 1), (1, 1), act), [x],
                          atol=ATOL)
    # LiteRT insists on a bias for float CONV_2D (conv.cc: has_bias); onert-py also runs without one,
    # which must equal LiteRT with a zero bias.
    expected = run_litert(_conv_model([1, 6, 6, 3], w, np.zeros(4, np.float32), SAME, (1, 1), (1, 1), act), [x])
    assert_close(run_onert(_conv_model([1, 6, 6, 3], w, None, SAME, (1, 1), (1, 1), act), [x]), expected, atol=ATOL)


@pytest.mark.parametrize("groups,cout", [(2, 4), (4, 8), (3, 6)])
def test_conv2d_grouped(groups, cout):
    g = rng(3)
    cg = 2
    w = g.normal(size=(cout, 3, 3, cg)).astype(np.float32)
    b = g.normal(size=cout).astype(np.float32)
    x = g.normal(size=[1, 7, 6, cg * groups]).astype(np.float32)
    mb = _conv_model([1, 7, 6, cg * groups], w, b, SAME, (2, 1), (1, 1), 0, version=6)
    assert_matches_litert(mb, [x], atol=ATOL)


def test_conv2d_bad_channels_is_prepare_error():
    w = np.zeros((4, 3, 3, 3), np.float32)
    mb = _conv_model([1, 5, 5, 4], w, None, SAME, (1, 1), (1, 1), 0)
    with pytest.raises(onert_py.PrepareError, match="channels"):
        run_onert(mb, [np.zeros((1, 5, 5, 4), np.float32)])


def _dw_model(x_shape, w, bias, padding, strides, dils, act, mult):
    n, h, wd, _ = x_shape
    oh = conv_output_size(h, w.shape[1], strides[0], dils[0], padding)
    ow = conv_output_size(wd, w.shape[2], strides[1], dils[1], padding)
    return single_op_model("DEPTHWISE_CONV_2D",
                           [("x", x_shape, np.float32), ("const", w)] + ([("const", bias)] if bias is not None else []),
                           [("o", [n, oh, ow, w.shape[-1]], np.float32)], padding=padding, stride_h=strides[0],
                           stride_w=strides[1], dilation_h_factor=dils[0], dilation_w_factor=dils[1],
                           fused_activation_function=act, depth_multiplier=mult)


@pytest.mark.parametrize("x_shape,k", [([1, 6, 6, 3], 3), ([2, 7, 9, 4], (3, 2)), ([1, 5, 5, 8], 1)])
@pytest.mark.parametrize("mult", [1, 2])
@pytest.mark.parametrize("padding", [SAME, VALID])
@pytest.mark.parametrize("strides,dils", [((1, 1), (1, 1)), ((2, 2), (1, 1)), ((1, 2), (2, 2))])
def test_depthwise(x_shape, k, mult, padding, strides, dils):
    kh, kw = (k, k) if isinstance(k, int) else k
    g = rng(4)
    c = x_shape[-1] * mult
    w = g.normal(size=(1, kh, kw, c)).astype(np.float32)
    b = g.normal(size=c).astype(np.float32)
    x = g.normal(size=x_shape).astype(np.float32)
    mb = _dw_model(x_shape, w, b, padding, strides, dils, 0, mult)
    assert_matches_litert(mb, [x], atol=ATOL, fmts=("tflite",))


@pytest.mark.parametrize("act", [1, 3])
def test_depthwise_activation(act):
    g = rng(5)
    w = g.normal(size=(1, 3, 3, 4)).astype(np.float32)
    x = g.normal(size=[1, 5, 5, 4]).astype(np.float32)
    b = g.normal(size=4).astype(np.float32)
    assert_matches_litert(_dw_model([1, 5, 5, 4], w, b, SAME, (1, 1), (1, 1), act, 1), [x], atol=ATOL)
    # LiteRT (this build) crashes on a 2-input DEPTHWISE_CONV_2D; onert-py without a bias must equal
    # LiteRT with a zero bias.
    expected = run_litert(_dw_model([1, 5, 5, 4], w, np.zeros(4, np.float32), SAME, (1, 1), (1, 1), act, 1), [x])
    assert_close(run_onert(_dw_model([1, 5, 5, 4], w, None, SAME, (1, 1), (1, 1), act, 1), [x]), expected, atol=ATOL)


def _tconv_model(out_shape, w, x_shape, bias, padding, strides, act=0, version=1):
    inputs = [("const", np.array(out_shape, np.int32)), ("const", w), ("x", x_shape, np.float32)]
    if bias is not None:
        inputs.append(("const", bias))
    mb = single_op_model("TRANSPOSE_CONV", inputs, [("o", out_shape, np.float32)], padding=padding,
                         stride_h=strides[0], stride_w=strides[1], fused_activation_function=act)
    mb.subgraphs[0].operations[0].version = version
    return mb


@pytest.mark.parametrize("x_hw,k,strides,padding", [
    ((4, 4), 3, (2, 2), SAME), ((4, 4), 3, (2, 2), VALID), ((3, 5), (2, 3), (1, 2), SAME),
    ((5, 5), 3, (1, 1), VALID), ((4, 3), 4, (2, 2), SAME), ((3, 3), 1, (3, 3), VALID)])
@pytest.mark.parametrize("bias", [False, True])
def test_transpose_conv(x_hw, k, strides, padding, bias):
    kh, kw = (k, k) if isinstance(k, int) else k
    g = rng(6)
    cin, cout = 3, 4
    h, wd = x_hw
    if padding == SAME:
        oh, ow = h * strides[0], wd * strides[1]
    else:
        oh, ow = (h - 1) * strides[0] + kh, (wd - 1) * strides[1] + kw
    w = g.normal(size=(cout, kh, kw, cin)).astype(np.float32)
    b = g.normal(size=cout).astype(np.float32) if bias else None
    x = g.normal(size=[2, h, wd, cin]).astype(np.float32)
    mb = _tconv_model([2, oh, ow, cout], w, [2, h, wd, cin], b, padding, strides, version=3 if bias else 1)
    assert_matches_litert(mb, [x], atol=ATOL)


def test_transpose_conv_activation():
    g = rng(7)
    w = g.normal(size=(2, 3, 3, 2)).astype(np.float32)
    b = g.normal(size=2).astype(np.float32)
    x = g.normal(size=[1, 3, 3, 2]).astype(np.float32)
    mb = _tconv_model([1, 6, 6, 2], w, [1, 3, 3, 2], b, SAME, (2, 2), act=1, version=4)
    assert_matches_litert(mb, [x], atol=ATOL)


@pytest.mark.parametrize("padding", [SAME, VALID])
@pytest.mark.parametrize("strides,dils", [((1, 1, 1), (1, 1, 1)), ((2, 1, 2), (1, 1, 1)), ((1, 1, 1), (2, 1, 1))])
def test_conv3d(padding, strides, dils):
    g = rng(8)
    x_shape = [1, 5, 6, 4, 3]
    w = g.normal(size=(2, 3, 2, 3, 4)).astype(np.float32)
    b = g.normal(size=4).astype(np.float32)
    x = g.normal(size=x_shape).astype(np.float32)
    out = [1] + [conv_output_size(i, f, s, d, padding) for i, f, s, d in zip(x_shape[1:4], w.shape[:3], strides, dils)] + [4]
    mb = single_op_model("CONV_3D", [("x", x_shape, np.float32), ("const", w), ("const", b)], [("o", out, np.float32)],
                         padding=padding, stride_d=strides[0], stride_h=strides[1], stride_w=strides[2],
                         dilation_d_factor=dils[0], dilation_h_factor=dils[1], dilation_w_factor=dils[2],
                         fused_activation_function=0)
    assert_matches_litert(mb, [x], atol=ATOL)


def test_conv2d_and_depthwise_dynamic_input_shape():
    # Input declared [1, -1, -1, 3]: the padding plan is made per run-time shape.
    g = rng(9)
    w = g.normal(size=(4, 3, 3, 3)).astype(np.float32)
    b = g.normal(size=4).astype(np.float32)
    for hw in [(5, 7), (8, 4)]:
        x = g.normal(size=(1, *hw, 3)).astype(np.float32)
        mb = single_op_model("CONV_2D", [("x", [1, -1, -1, 3], np.float32), ("const", w), ("const", b)],
                             [("o", [1, -1, -1, 4], np.float32)], padding=SAME, stride_h=2, stride_w=2,
                             dilation_h_factor=1, dilation_w_factor=1, fused_activation_function=0)
        assert_matches_litert(mb, [x], atol=ATOL)
        wd = g.normal(size=(1, 3, 3, 3)).astype(np.float32)
        mb = single_op_model("DEPTHWISE_CONV_2D", [("x", [1, -1, -1, 3], np.float32), ("const", wd), ("const", b[:3])],
                             [("o", [1, -1, -1, 3], np.float32)], padding=SAME, stride_h=1, stride_w=2,
                             dilation_h_factor=1, dilation_w_factor=1, depth_multiplier=1, fused_activation_function=0)
        assert_matches_litert(mb, [x], atol=ATOL)


def test_transpose_conv_runtime_output_shape():
    g = rng(10)
    w = g.normal(size=(2, 3, 3, 3)).astype(np.float32)
    x = g.normal(size=[1, 4, 4, 3]).astype(np.float32)
    mb = single_op_model("TRANSPOSE_CONV", [("shape", [4], np.int32), ("const", w), ("x", [1, 4, 4, 3], np.float32)],
                         [("o", [1, 8, 8, 2], np.float32)], padding=SAME, stride_h=2, stride_w=2)
    for out_shape in ([1, 8, 8, 2], [1, 7, 8, 2]):
        assert_matches_litert(mb, [np.array(out_shape, np.int32), x], atol=ATOL)


# ---- the layouts of backends/cpu/_conv_plan.py, each against LiteRT ----------------------------------------

DW_LAYOUTS = [
    # (x_shape, k, multiplier, strides, dilations): the DepthwisePlan branch exercised
    ([2, 9, 11, 4], 3, 1, (1, 1), (1, 1)),        # stride_w 1, rows of t*C floats, t = OW (prime OW), batch 2
    ([1, 4, 260, 64], 3, 1, (1, 1), (1, 1)),      # stride_w 1, OW split into rows of 130 pixels (>= 8192 floats)
    ([1, 6, 7, 260], 3, 1, (2, 1), (1, 1)),       # stride_w 1 with stride_h 2, one whole output row
    ([2, 10, 13, 8], 3, 1, (2, 2), (1, 1)),       # stride_w 2, small output, small C: every 2nd column kept
    ([1, 9, 9, 100], 3, 1, (2, 2), (1, 1)),       # stride_w 2, small output, C >= 96: C-long inner loops
    ([2, 34, 66, 16], 3, 1, (2, 2), (1, 1)),      # SAME: column phases (>= 16K outputs), batch 2
    ([1, 60, 64, 24], 5, 1, (2, 2), (1, 1)),      # SAME: column phases, 5x5 (3 + 2 taps per row)
    ([1, 60, 61, 24], (3, 2), 1, (2, 3), (1, 1)), # SAME: stride_w 3 > KW: 2 of the 3 planes used
    ([1, 40, 96, 16], (2, 3), 2, (1, 3), (2, 1)), # SAME: multiplier 2, stride_w 3: 3 planes, dilation_h 2
    ([1, 11, 12, 5], (2, 3), 2, (1, 3), (2, 1)),  # multiplier 2, stride_w 3 (small), dilation_h 2
    ([2, 10, 13, 8], 3, 1, (2, 2), (1, 2)),       # stride_w 2, dilation_w 2, small C: every 2nd column kept
    ([1, 9, 11, 100], 3, 1, (2, 2), (1, 2)),      # stride_w 2, dilation_w 2, C >= 96: C-long inner loops
    ([2, 8, 9, 48], 3, 2, (2, 2), (1, 2)),        # multiplier 2 gives C' = 96: C-long loops, dilation_w 2
    ([1, 12, 12, 3], 5, 3, (1, 1), (2, 2)),       # multiplier 3, dilation 2
    ([1, 7, 9, 8], 1, 1, (1, 1), (1, 1)),         # 1x1: x * w + b on long rows
    ([1, 5, 6, 4], 1, 2, (1, 1), (1, 1)),         # 1x1 with multiplier 2: einsum rows
]


@pytest.mark.parametrize("x_shape,k,mult,strides,dils", DW_LAYOUTS)
@pytest.mark.parametrize("padding", [SAME, VALID])
@pytest.mark.parametrize("act", [0, 3])
def test_depthwise_layouts(x_shape, k, mult, strides, dils, padding, act):
    kh, kw = (k, k) if isinstance(k, int) else k
    g = rng(11)
    c = x_shape[-1] * mult
    w = g.normal(size=(1, kh, kw, c)).astype(np.float32)
    b = g.normal(size=c).astype(np.float32)
    x = g.normal(size=x_shape).astype(np.float32)
    assert_matches_litert(_dw_model(x_shape, w, b, padding, strides, dils, act, mult), [x], atol=ATOL,
                          fmts=("tflite",))


CONV_LAYOUTS = [
    # (x_shape, k, out channels, strides, dilations): the ConvPlan branch exercised
    ([2, 7, 9, 6], 1, 5, (1, 1), (1, 1)),         # pointwise (one sgemm), batch 2, odd M for the bias rows
    ([1, 13, 17, 3], 1, 7, (2, 2), (1, 1)),       # 1x1 with stride 2: im2col
    ([2, 9, 8, 3], 3, 6, (2, 1), (1, 2)),         # im2col (3 channels: transposed) with dilation_w 2, batch 2
    ([1, 13, 15, 3], 3, 8, (2, 2), (1, 1)),       # RGB stem 3x3/2: transposed im2col
    ([1, 12, 12, 3], 5, 4, (2, 2), (1, 1)),       # 5x5 RGB stem: row-major im2col
    ([2, 9, 10, 6], 3, 5, (1, 2), (2, 1)),        # row-major im2col, dilation_h 2, batch 2
    ([1, 40, 40, 8], 3, 1, (1, 1), (1, 1)),       # one output channel, large: depthwise einsum + channel sum
    ([2, 60, 61, 8], 3, 1, (2, 2), (1, 1)),       # the same with stride 2 and batch 2
    ([1, 3, 3, 32], 3, 1, (3, 3), (1, 1)),        # one output channel, small: im2col
]


@pytest.mark.parametrize("x_shape,k,cout,strides,dils", CONV_LAYOUTS)
@pytest.mark.parametrize("padding", [SAME, VALID])
@pytest.mark.parametrize("act", [0, 1, 2])
def test_conv2d_layouts(x_shape, k, cout, strides, dils, padding, act):
    g = rng(12)
    w = g.normal(size=(cout, k, k, x_shape[-1])).astype(np.float32)
    b = g.normal(size=cout).astype(np.float32)
    x = g.normal(size=x_shape).astype(np.float32)
    assert_matches_litert(_conv_model(x_shape, w, b, padding, strides, dils, act), [x], atol=ATOL,
                          fmts=("tflite",))


def _chain_model(x_shape, g):
    """x -> DEPTHWISE 3x3 -> CONV 3x3 -> DEPTHWISE 5x5 stride 2 -> CONV 2x2 -> DEPTHWISE 3x3, all SAME:
    zero-bordered work buffers of several shapes and interiors, used by both op types."""
    from onert_py.schema.writer import ModelBuilder
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    n, h, w, c = x_shape
    cur = sg.tensor("x", x_shape, np.float32)
    sg.inputs = [cur]
    for k, (op, ks, s, cout) in enumerate([("DEPTHWISE_CONV_2D", 3, 1, c), ("CONV_2D", 3, 1, 6),
                                           ("DEPTHWISE_CONV_2D", 5, 2, 6), ("CONV_2D", 2, 1, 4),
                                           ("DEPTHWISE_CONV_2D", 3, 1, 4)]):
        w_shape = [cout, ks, ks, c] if op == "CONV_2D" else [1, ks, ks, cout]
        h, w, c = -(-h // s), -(-w // s), cout
        wt = sg.const(f"w{k}", (g.normal(size=w_shape) * 0.5).astype(np.float32))
        bt = sg.const(f"b{k}", g.normal(size=cout).astype(np.float32))
        out = sg.tensor(f"y{k}", [n, h, w, cout], np.float32)
        opts = dict(padding=SAME, stride_h=s, stride_w=s, dilation_h_factor=1, dilation_w_factor=1,
                    fused_activation_function=1)
        if op != "CONV_2D":
            opts["depth_multiplier"] = 1
        sg.op(op, [cur, wt, bt], [out], **opts)
        cur = out
    sg.outputs = [cur]
    mb.signature("serving_default", sg)
    return mb


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("x_shape", [[1, 11, 13, 3], [2, 16, 16, 4]])
def test_work_buffers_shared_between_ops_and_runs(monkeypatch, shared, x_shape):
    # shared=True puts every zero-bordered buffer in the runtime's one shared buffer (each op then
    # re-zeroes its border per run) and allocates im2col matrices per run; False keeps per-shape buffers.
    from onert_py.backends.cpu import _conv_plan
    monkeypatch.setattr(_conv_plan, "_PHASES_MIN_OUT", 0)   # the strided depthwise on column phases
    if shared:
        monkeypatch.setattr(_conv_plan, "_PRIVATE_PAD_BYTES", 0)
        monkeypatch.setattr(_conv_plan, "_KEEP_COLS_BYTES", 0)
    g = rng(13)
    mb = _chain_model(x_shape, g)
    sess = onert_py.infer.session(mb.to_bytes("tflite"))
    returned, copies = [], []
    for scale in (1.0, 3.0, 0.5, 1.0):            # several runs: no stale data from an earlier run
        x = g.normal(size=x_shape).astype(np.float32) * scale
        got = sess.infer([x])
        assert_close(got, run_litert(mb, [x]), atol=1e-4)
        returned.append(got[0])
        copies.append(got[0].copy())
        for r, c in zip(returned, copies):        # earlier results are untouched by later runs
            np.testing.assert_array_equal(r, c)


def test_outputs_are_not_work_buffers():
    # A returned array must survive the next run unchanged (it is never a view of a reused buffer).
    g = rng(14)
    for mb, shape in [(_dw_model([1, 8, 9, 4], g.normal(size=(1, 3, 3, 4)).astype(np.float32),
                                 np.zeros(4, np.float32), SAME, (2, 2), (1, 1), 0, 1), [1, 8, 9, 4]),
                      (_conv_model([1, 30, 30, 8], g.normal(size=(1, 3, 3, 8)).astype(np.float32),
                                   np.zeros(1, np.float32), SAME, (1, 1), (1, 1), 0), [1, 30, 30, 8]),
                      (_conv_model([1, 6, 6, 3], g.normal(size=(4, 3, 3, 3)).astype(np.float32),
                                   np.zeros(4, np.float32), SAME, (1, 1), (1, 1), 0), [1, 6, 6, 3])]:
        sess = onert_py.infer.session(mb.to_bytes("tflite"))
        a = sess.infer([g.normal(size=shape).astype(np.float32)])[0]
        kept = a.copy()
        sess.infer([g.normal(size=shape).astype(np.float32)])
        np.testing.assert_array_equal(a, kept)


def test_dynamic_shapes_reuse_plans_in_one_session():
    # One session, input sizes growing then shrinking: each shape gets its plan (and larger work buffers).
    g = rng(15)
    w = g.normal(size=(5, 3, 3, 3)).astype(np.float32)
    wd = g.normal(size=(1, 3, 3, 3)).astype(np.float32)
    b = g.normal(size=5).astype(np.float32)
    models = [
        single_op_model("CONV_2D", [("x", [1, -1, -1, 3], np.float32), ("const", w), ("const", b)],
                        [("o", [1, -1, -1, 5], np.float32)], padding=SAME, stride_h=1, stride_w=1,
                        dilation_h_factor=1, dilation_w_factor=1, fused_activation_function=0),
        single_op_model("DEPTHWISE_CONV_2D", [("x", [1, -1, -1, 3], np.float32), ("const", wd),
                                              ("const", b[:3])],
                        [("o", [1, -1, -1, 3], np.float32)], padding=SAME, stride_h=1, stride_w=1,
                        dilation_h_factor=1, dilation_w_factor=1, depth_multiplier=1, fused_activation_function=0),
    ]
    for mb in models:
        sess = onert_py.infer.session(mb.to_bytes("tflite"))
        for hw in [(5, 7), (40, 50), (6, 4), (5, 7)]:
            x = g.normal(size=(1, *hw, 3)).astype(np.float32)
            assert_close(sess.infer([x]), run_litert(mb, [x]), atol=ATOL)


@pytest.mark.parametrize("padding", [SAME, VALID])
def test_conv3d_pointwise_and_batch(padding):
    g = rng(16)
    for x_shape, k in [([2, 3, 4, 5, 6], 1), ([2, 4, 5, 3, 2], 2)]:
        w = g.normal(size=(k, k, k, x_shape[-1], 3)).astype(np.float32)
        b = g.normal(size=3).astype(np.float32)
        x = g.normal(size=x_shape).astype(np.float32)
        out = [x_shape[0]] + [conv_output_size(i, k, 1, 1, padding) for i in x_shape[1:4]] + [3]
        mb = single_op_model("CONV_3D", [("x", x_shape, np.float32), ("const", w), ("const", b)],
                             [("o", out, np.float32)], padding=padding, stride_d=1, stride_h=1, stride_w=1,
                             dilation_d_factor=1, dilation_h_factor=1, dilation_w_factor=1,
                             fused_activation_function=0)
        assert_matches_litert(mb, [x], atol=ATOL)


def test_layout_tables_cover_every_branch():
    # The tables above are meant to reach every branch of the plans; check they still do.
    from onert_py.backends.cpu import _conv_plan
    from onert_py.backends.cpu.conv import _geometry
    dw_kinds = set()
    for x_shape, k, mult, strides, dils in DW_LAYOUTS:
        kh, kw = (k, k) if isinstance(k, int) else k
        for padding in (SAME, VALID):
            out, pads = _geometry(x_shape[1:3], (kh, kw), strides, dils, padding)
            taps = np.zeros((kh, kw, x_shape[-1] * mult), np.float32)
            p = _conv_plan.DepthwisePlan(tuple(x_shape), mult, taps, None, strides, dils, out, pads)
            if p.kind != "rows":
                dw_kinds.add((p.kind, len(p.phase_views) if p.kind == "phases" else 0))
                continue
            rows = p.y_shape[-1] // taps.shape[-1]
            dw_kinds.add(("direct" if p.direct else "padded", "subsample" if p.subsample else
                          "channels" if strides[1] > 1 else "rows" if rows < out[1] else "row"))
    assert dw_kinds >= {("direct", "row"), ("padded", "row"), ("direct", "rows"), ("padded", "rows"),
                        ("direct", "subsample"), ("padded", "subsample"), ("direct", "channels"),
                        ("padded", "channels"), ("scale", 0), ("phases", 2), ("phases", 3)}
    conv_kinds = set()
    for x_shape, k, cout, strides, dils in CONV_LAYOUTS:
        for padding in (SAME, VALID):
            out, pads = _geometry(x_shape[1:3], (k, k), strides, dils, padding)
            w2 = np.zeros((k * k * x_shape[-1], cout), np.float32)
            p = _conv_plan.ConvPlan(tuple(x_shape), w2, (k, k), strides, dils, out, pads, None)
            conv_kinds.add((p.kind, getattr(p, "direct", None), getattr(p, "transposed", None)))
    assert conv_kinds >= {("pointwise", None, None), ("im2col", True, False), ("im2col", False, False),
                          ("im2col", True, True), ("im2col", False, True), ("channel-sum", None, None)}


# ---- float16 (XNNPACK only in LiteRT) and prepare-time type checks (the dtype audit)

F16 = np.float16


def _f16(a):
    return np.asarray(a).astype(F16)


def _retype(mb, dtype):
    """The model with its float32 data tensors (input, output) declared as `dtype`."""
    for t in mb.subgraphs[0].tensors:
        if t.dtype == np.float32:
            t.dtype, t.type_name = np.dtype(dtype), TYPE_NAME_BY_DTYPE[np.dtype(dtype)]
    return mb


@pytest.mark.parametrize("x_shape,k,cout", [([1, 9, 9, 8], 3, 16), ([2, 7, 6, 3], (3, 2), 5), ([1, 6, 6, 16], 1, 8)])
@pytest.mark.parametrize("padding", [SAME, VALID])
@pytest.mark.parametrize("strides,dils", [((1, 1), (1, 1)), ((2, 2), (1, 1)), ((1, 1), (2, 2))])
@pytest.mark.parametrize("act", [0, 1, 3])
def test_conv2d_float16_xnnpack(x_shape, k, cout, padding, strides, dils, act):
    # XNNPACK's float16 CONV_2D equals float32 sums rounded to float16 once: within one float16 ulp
    # (a float16 running sum would be several ulps off).
    kh, kw = (k, k) if isinstance(k, int) else k
    g = rng(20)
    w = _f16(g.uniform(-1, 1, size=(cout, kh, kw, x_shape[-1])))
    b = _f16(g.uniform(-1, 1, size=cout))
    x = _f16(g.uniform(-1, 1, size=x_shape))
    mb = _retype(_conv_model(x_shape, w, b, padding, strides, dils, act), F16)
    assert_matches_litert(mb, [x], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("x_shape,k", [([1, 9, 9, 8], 3), ([2, 7, 9, 4], (3, 2)), ([1, 12, 12, 16], 5),
                                       ([1, 5, 5, 8], 1)])
@pytest.mark.parametrize("mult", [1, 2])
@pytest.mark.parametrize("padding", [SAME, VALID])
@pytest.mark.parametrize("strides,dils", [((1, 1), (1, 1)), ((2, 2), (1, 1)), ((1, 2), (2, 2))])
def test_depthwise_float16_xnnpack(x_shape, k, mult, padding, strides, dils):
    # XNNPACK's float16 depthwise kernels round the running sum to float16 after taps (in a kernel-size
    # dependent order); ours round once: a few float16 ulps of outputs up to ~10 (measured <= 0.005).
    kh, kw = (k, k) if isinstance(k, int) else k
    g = rng(21)
    c = x_shape[-1] * mult
    w = _f16(g.uniform(-1, 1, size=(1, kh, kw, c)))
    b = _f16(g.uniform(-1, 1, size=c))
    x = _f16(g.uniform(-1, 1, size=x_shape))
    for act in (0, 3):
        mb = _retype(_dw_model(x_shape, w, b, padding, strides, dils, act, mult), F16)
        assert_matches_litert(mb, [x], rtol=2e-3, atol=1e-2)


@pytest.mark.parametrize("op,ins,msg", [
    ("CONV_2D", [np.float16, np.float32, np.float32], r"input 1 \('const1'\) has type float32, input 0 has float16"),
    ("CONV_2D", [np.int8, np.int8, np.int32], "has type int8, not supported"),
    ("CONV_2D", [np.float32, np.int8, np.float32], r"input 1 \('const1'\) has type int8"),   # hybrid
    ("DEPTHWISE_CONV_2D", [np.float64, np.float64, np.float64], "has type float64, not supported"),
    ("DEPTHWISE_CONV_2D", [np.float16, np.float16, np.float32], r"input 2 \('const2'\) has type float32"),
])
def test_conv_types_are_prepare_errors(op, ins, msg):
    w = np.zeros((1, 3, 3, 4) if op == "DEPTHWISE_CONV_2D" else (4, 3, 3, 4), ins[1])
    extra = {"depth_multiplier": 1} if op == "DEPTHWISE_CONV_2D" else {}
    mb = single_op_model(op, [("x", [1, 5, 5, 4], ins[0]), ("const", w), ("const", np.zeros(4, ins[2]))],
                         [("o", [1, 5, 5, 4], ins[0])], padding=SAME, stride_h=1, stride_w=1,
                         dilation_h_factor=1, dilation_w_factor=1, fused_activation_function=0, **extra)
    with pytest.raises(onert_py.PrepareError, match=msg):
        onert_py.infer.session(mb.to_bytes("tflite"))


def test_conv_float16_unsupported_forms_are_prepare_errors():
    # LiteRT runs no grouped float16 convolution (XNNPACK leaves it to the builtin kernel, which has no
    # float16), nor float16 TRANSPOSE_CONV / CONV_3D
    w = np.zeros((4, 3, 3, 2), F16)
    mb = _retype(_conv_model([1, 5, 5, 4], w, np.zeros(4, F16), SAME, (1, 1), (1, 1), 0, version=6), F16)
    with pytest.raises(onert_py.PrepareError, match="grouped float16"):
        onert_py.infer.session(mb.to_bytes("tflite"))
    mb = single_op_model("TRANSPOSE_CONV", [("const", np.array([1, 4, 4, 2], np.int32)),
                                            ("const", np.zeros((2, 3, 3, 2), F16)), ("x", [1, 4, 4, 2], F16)],
                         [("o", [1, 4, 4, 2], F16)], padding=SAME, stride_h=1, stride_w=1)
    with pytest.raises(onert_py.PrepareError, match=r"input 2 \('x'\) has type float16, not supported"):
        onert_py.infer.session(mb.to_bytes("tflite"))
