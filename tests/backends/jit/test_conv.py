"""The jit backend's convolutions (backends/jit/conv.py): float32 DEPTHWISE_CONV_2D against LiteRT,
int8 DEPTHWISE_CONV_2D and CONV_2D bit for bit against LiteRT's builtin kernels, over every layout the
kernels distinguish (stride_w 1 lane blocks with one or two output rows, border rows and columns, the
per-pixel path of other strides, multipliers, dilations, windows wider than the input, channel counts
around the vector widths and LiteRT's 8-channel rounding blocks, both output stages), and the ops they
leave to cpu. run_onert (inside assert_matches_litert / check_builtin) also checks that the cpu backend
agrees with the jit result."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

import onert_py  # noqa: E402
from helpers import (assert_close, assert_matches_litert, check_builtin, declared_backends, rng,  # noqa: E402
                     run_interpreter, run_litert, run_litert_builtin, run_onert, single_op_model)
from onert_py.backends.cpu.conv import conv_output_size  # noqa: E402
from onert_py.backends.jit import _qgemm  # noqa: E402
from onert_py.backends.jit._gemm import gemm_wins  # noqa: E402
from onert_py.backends.jit.conv import _windows_win  # noqa: E402

SAME, VALID = 0, 1
NONE, RELU, RELU_N1_TO_1, RELU6, TANH, SIGN_BIT = 0, 1, 2, 3, 4, 5
ATOL = 3e-5


def _backend(mb, **options) -> str:
    return onert_py.infer.session(mb.to_bytes("tflite"), **options).executors[0].backend_names[0]


def _dw(x_shape, k, mult=1, stride=(1, 1), dil=(1, 1), pad=SAME, act=NONE, bias=True, seed=0,
        dtype=np.float32):
    """A float DEPTHWISE_CONV_2D model and an input."""
    g = rng(seed)
    n, h, wd, c = x_shape
    kh, kw = k
    cout = c * mult
    w = g.normal(size=(1, kh, kw, cout)).astype(dtype)
    ins = [("x", list(x_shape), dtype), ("const", w)]
    if isinstance(bias, np.ndarray):
        ins.append(("const", bias.astype(dtype)))
    elif bias:
        ins.append(("const", g.normal(size=cout).astype(dtype)))
    oh = conv_output_size(h, kh, stride[0], dil[0], pad)
    ow = conv_output_size(wd, kw, stride[1], dil[1], pad)
    mb = single_op_model("DEPTHWISE_CONV_2D", ins, [("o", [n, oh, ow, cout], dtype)], padding=pad,
                         stride_h=stride[0], stride_w=stride[1], dilation_h_factor=dil[0],
                         dilation_w_factor=dil[1], fused_activation_function=act, depth_multiplier=mult)
    return mb, g.normal(size=x_shape).astype(dtype)


# ----------------------------------------------------------------------------- float depthwise

# (input shape, filter, multiplier, stride, dilation): the layouts of _dw_rows
DW_FLOAT = [
    ([1, 9, 11, 8], (3, 3), 1, (1, 1), (1, 1)),      # stride_w 1: pairs of rows, 3x3 constants
    ([2, 10, 7, 5], (3, 3), 1, (1, 1), (1, 1)),      # odd C, batch 2, odd OH (a single last row)
    ([1, 12, 40, 33], (3, 3), 1, (2, 1), (1, 1)),    # stride_h 2 != dilation_h (vectors: 33 channels)
    ([1, 8, 9, 17], (5, 5), 1, (1, 1), (1, 1)),      # 5x5 constants (vectors)
    ([1, 20, 70, 3], (5, 5), 1, (1, 1), (2, 1)),     # 5x5 of 3 channels, dilation_h 2: tap by tap
    ([1, 7, 8, 4], (3, 3), 1, (1, 1), (1, 2)),       # dilation_w 2
    ([1, 9, 9, 6], (2, 3), 1, (1, 1), (1, 1)),       # other sizes: tap by tap
    ([1, 10, 6, 16], (7, 1), 1, (1, 1), (1, 1)),
    ([1, 5, 5, 4], (1, 1), 2, (1, 1), (1, 1)),       # 1x1 with a multiplier
    ([2, 13, 15, 24], (3, 3), 1, (2, 2), (1, 1)),    # stride_w 2: by pixels, 3x3 constants
    ([1, 16, 17, 20], (5, 5), 1, (2, 2), (1, 1)),    # 5x5 strided (vectors)
    ([1, 11, 12, 7], (3, 2), 1, (1, 3), (2, 1)),     # by pixels, other sizes, dilation
    ([1, 9, 10, 3], (3, 3), 2, (1, 1), (1, 1)),      # multiplier 2: input expanded
    ([1, 8, 7, 2], (5, 3), 3, (2, 2), (1, 2)),       # multiplier 3, strided, dilated
    ([1, 3, 4, 8], (5, 5), 1, (1, 1), (1, 1)),       # window wider than the input (SAME)
    ([1, 1, 9, 4], (3, 3), 1, (1, 1), (1, 1)),       # one input row
    ([1, 30, 33, 64], (3, 3), 1, (1, 1), (1, 1)),    # enough work for numba's threads
]
# C >= 16 (at least the vector width, 16 or 8 floats): channel vectors (_vector_row), the last one
# overlapping when the width does not divide C; rows of eight-pixel blocks, the last block moved back,
# spans under eight pixels (several cases above have C >= 16 too)
DW_VECTOR = [
    ([1, 4, 27, 16], (3, 3), 1, (1, 1), (1, 1)),     # 25 interior columns: 3 blocks and a moved one
    ([1, 6, 19, 40], (3, 3), 1, (3, 3), (1, 1)),     # stride 3: the general specialisation
    ([1, 7, 8, 20], (3, 3), 1, (1, 1), (1, 2)),      # dilation_w 2
    ([1, 11, 12, 18], (3, 2), 1, (1, 3), (2, 1)),    # other sizes, dilation_h 2
    ([1, 14, 13, 16], (5, 5), 1, (2, 2), (2, 1)),    # 5x5 stride 2 with dilation_h 2 (border rows)
    ([1, 9, 10, 8], (3, 3), 2, (2, 2), (1, 1)),      # multiplier 2: 16 channels expanded
    ([1, 3, 4, 16], (5, 5), 1, (1, 1), (1, 1)),      # window wider than the input (SAME)
    ([1, 1, 9, 32], (3, 3), 1, (1, 1), (1, 1)),      # one input row
    ([2, 5, 6, 17], (1, 1), 1, (2, 2), (1, 1)),      # 1x1 strided, odd C, batch 2
    # stride_w 1, C below the vector width and dividing it: a row's interior floats in vectors of whole
    # pixels (_flat_vector_row), eight-vector blocks, the last vector or block moved back
    ([1, 6, 40, 8], (3, 3), 1, (1, 1), (1, 1)),      # 38 columns: blocks and a moved one
    ([2, 7, 37, 4], (5, 5), 1, (2, 1), (1, 1)),      # 5x5, stride_h 2, batch 2
    ([1, 8, 30, 2], (3, 2), 1, (1, 1), (1, 2)),      # other sizes, dilation_w 2
    ([1, 5, 21, 1], (3, 3), 1, (1, 1), (2, 1)),      # one channel, dilation_h 2
    ([1, 6, 12, 4], (3, 3), 2, (1, 1), (1, 1)),      # multiplier 2: 8 channels expanded
]


def _with_paddings(cases):
    """Each case with SAME, and with VALID where the dilated window fits the input (else VALID has no
    output)."""
    out = []
    for x_shape, k, mult, stride, dil in cases:
        fits = all((k[i] - 1) * dil[i] + 1 <= x_shape[1 + i] for i in (0, 1))
        out += [(x_shape, k, mult, stride, dil, pad) for pad in ((SAME, VALID) if fits else (SAME,))]
    return out


@pytest.mark.parametrize("x_shape,k,mult,stride,dil,pad", _with_paddings(DW_FLOAT + DW_VECTOR))
def test_depthwise_float_layouts(x_shape, k, mult, stride, dil, pad):
    mb, x = _dw(x_shape, k, mult, stride, dil, pad, act=RELU6 if sum(x_shape) % 2 else NONE,
                seed=sum(x_shape))
    assert _backend(mb) == "jit"
    assert_matches_litert(mb, [x], atol=ATOL, fmts=("tflite",))


@pytest.mark.parametrize("act", [NONE, RELU, RELU_N1_TO_1, RELU6])
@pytest.mark.parametrize("stride", [(1, 1), (2, 2)])
def test_depthwise_float_activations(act, stride):
    mb, x = _dw([1, 9, 10, 12], (3, 3), stride=stride, act=act, seed=act)
    assert_matches_litert(mb, [x * 3], atol=ATOL)


@pytest.mark.parametrize("act", [TANH, SIGN_BIT])
def test_depthwise_float_tanh_and_sign_bit_apply_nothing(act):
    # LiteRT's convolutions apply no activation for TANH and SIGN_BIT (their activation range is the whole
    # float range): both backends do the same.
    for stride in ((1, 1), (2, 2)):
        mb, x = _dw([1, 7, 9, 5], (3, 3), stride=stride, act=act, seed=act)
        expected = run_litert_builtin(mb, [x * 3])
        assert np.abs(expected[0]).max() > 1.5          # values tanh or a sign bit would have changed
        assert _backend(mb) == "jit"
        assert_close(run_onert(mb, [x * 3]), expected, atol=ATOL)


def test_depthwise_float_without_bias():
    # LiteRT (this build) crashes on a 2-input DEPTHWISE_CONV_2D: without a bias the op equals LiteRT's
    # with a zero bias
    mb, x = _dw([1, 8, 8, 6], (3, 3), bias=False)
    zero, _ = _dw([1, 8, 8, 6], (3, 3), bias=np.zeros(6))
    assert _backend(mb) == "jit"
    assert_close(run_onert(mb, [x]), run_litert(zero, [x]), atol=ATOL)


@pytest.mark.parametrize("threads", [1, 2])
def test_depthwise_float_threads_and_repeated_runs(threads):
    mb, _ = _dw([2, 48, 56, 32], (5, 5), act=RELU6)         # above _PARALLEL_MIN: split over the threads
    sess = onert_py.infer.session(mb.to_bytes("tflite"), num_threads=threads)
    assert sess.executors[0].backend_names == ["jit"]
    kept = []
    for seed in range(3):                     # runs write the planned output slot: earlier results stay
        x = rng(seed).normal(size=(2, 48, 56, 32)).astype(np.float32)
        got = sess.infer([x])
        assert_close(got, run_litert(mb, [x]), atol=ATOL)
        kept.append((got[0], got[0].copy()))
    for a, b in kept:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("layout", [0, 1, 2, 9, 12, 13])
def test_depthwise_split_over_threads(monkeypatch, layout):
    """Every op split over numba's threads (the row pairs of each part, odd counts, batches)."""
    from onert_py.backends.jit import conv
    monkeypatch.setattr(conv, "_PARALLEL_MIN", 0)
    x_shape, k, mult, stride, dil = DW_FLOAT[layout]
    mb, x = _dw(x_shape, k, mult, stride, dil, seed=layout)
    got = onert_py.infer.session(mb.to_bytes("tflite"), num_threads=2).infer([x])
    assert_close(got, run_litert(mb, [x]), atol=ATOL)
    mb, x = _q("DEPTHWISE_CONV_2D", x_shape, k, mult=mult, stride=stride, dil=dil, seed=layout)
    got = onert_py.infer.session(mb.to_bytes("tflite"), num_threads=2).infer([x])
    assert_close(got, run_litert_builtin(mb, [x]))


def test_depthwise_float_declines():
    # cpu keeps: float16, the 1x1 stride-1 scale (its x * w + b is faster), dynamic shapes (as declared;
    # a session compiles them again for the shapes they run with)
    assert _backend(_dw([1, 6, 6, 4], (3, 3), dtype=np.float16)[0]) == "cpu"
    assert _backend(_dw([1, 8, 8, 16], (1, 1))[0]) == "cpu"
    g = rng(1)
    w = g.normal(size=(1, 3, 3, 3)).astype(np.float32)
    dyn = single_op_model("DEPTHWISE_CONV_2D", [("x", [1, -1, -1, 3], np.float32), ("const", w),
                                                ("const", np.zeros(3, np.float32))],
                          [("o", [1, -1, -1, 3], np.float32)], padding=SAME, stride_h=1, stride_w=1,
                          dilation_h_factor=1, dilation_w_factor=1, depth_multiplier=1,
                          fused_activation_function=0)
    assert declared_backends(dyn) == ["cpu"]
    # the jit kernel can be asked for (op_backend) and agrees with LiteRT there too
    mb, x = _dw([1, 8, 8, 16], (1, 1), stride=(2, 2))
    assert _backend(mb) == "jit"
    assert_matches_litert(mb, [x], atol=ATOL, fmts=("tflite",))


@pytest.mark.parametrize("c,stride", [(16, (1, 1)), (24, (2, 2)), (8, (1, 1))])
def test_depthwise_resized_input_is_compiled_for_its_shapes(c, stride):
    # resizing an Interpreter's input compiles the model again for the new shapes (as LiteRT prepares its
    # ops again), so the jit kernel keeps the op, with LiteRT's values; back to a shape seen before, the
    # executors compiled for it serve again (the vector layouts' other shapes are DW_VECTOR's models)
    mb, x = _dw([1, 6, 9, c], (3, 3), stride=stride, act=RELU6, seed=c)
    it = onert_py.Interpreter(model_content=mb.to_bytes("tflite"), backends="jit;cpu")
    assert_close(run_interpreter(it, [x * 3]), run_litert(mb, [x * 3]), atol=ATOL)
    assert it._executors[0].backend_names == ["jit"]
    compiled = {}
    for shape in ((1, 11, 37, c), (2, 4, 5, c), (1, 11, 37, c)):
        x = rng(sum(shape)).normal(size=shape).astype(np.float32) * 3
        assert_close(run_interpreter(it, [x]), run_litert(mb, [x]), atol=ATOL)
        assert it._executors[0].backend_names == ["jit"]
        assert compiled.setdefault(shape, it._executors) is it._executors


def test_hybrid_depthwise_stays_on_cpu():
    g = rng(2)
    w = g.integers(-127, 128, (1, 3, 3, 4)).astype(np.int8)
    mb = single_op_model("DEPTHWISE_CONV_2D", [("x", [1, 6, 6, 4], np.float32),
                                               ("const", w, (np.full(4, 0.01, np.float32), np.zeros(4, np.int64), 3)),
                                               ("const", np.zeros(4, np.float32))],
                         [("o", [1, 6, 6, 4], np.float32)], padding=SAME, stride_h=1, stride_w=1,
                         dilation_h_factor=1, dilation_w_factor=1, depth_multiplier=1, fused_activation_function=0)
    assert _backend(mb) == "cpu"


# ------------------------------------------------------------------------------------ int8

def _q(op, x_shape, k, *, cout=None, mult=1, stride=(1, 1), dil=(1, 1), pad=SAME, act=NONE, q_in=None,
       q_out=(0.05, 4), w_scales=None, bias=True, seed=0, groups=1):
    """An int8 (DEPTHWISE_)CONV_2D with an int8 filter per channel (or per tensor) and an input."""
    g = rng(seed)
    n, h, wd, c = x_shape
    q_in = q_in or (float(g.uniform(0.01, 0.1)), int(g.integers(-20, 20)))
    if op == "CONV_2D":
        cout = cout or 4
        w_shape, axis = (cout, k[0], k[1], c // groups), 0
    else:
        cout = c * mult
        w_shape, axis = (1, k[0], k[1], cout), 3
    w = g.integers(-127, 128, w_shape).astype(np.int8)
    scales = (np.asarray(w_scales, np.float32) if w_scales is not None
              else (10 ** g.uniform(-3, -1, cout)).astype(np.float32))
    ins = [("x", list(x_shape), np.int8, q_in), ("const", w, (scales, np.zeros(scales.size, np.int64), axis))]
    if bias:
        b_q = ((scales * np.float32(q_in[0])).astype(np.float32), np.zeros(scales.size, np.int64), 0)
        b = g.integers(-30000, 30000, cout).astype(np.int32)
        ins.append(("const", np.zeros_like(b) if bias == "zeros" else b, b_q))
    opts = {"padding": pad, "stride_h": stride[0], "stride_w": stride[1], "dilation_h_factor": dil[0],
            "dilation_w_factor": dil[1], "fused_activation_function": act}
    if op == "DEPTHWISE_CONV_2D":
        opts["depth_multiplier"] = mult
    oh = conv_output_size(h, k[0], stride[0], dil[0], pad)
    ow = conv_output_size(wd, k[1], stride[1], dil[1], pad)
    mb = single_op_model(op, ins, [("y", [n, oh, ow, cout], np.int8, q_out)], **opts)
    x = g.integers(-128, 128, x_shape).astype(np.int8)
    x.reshape(-1)[:2] = -128, 127
    return mb, x


@pytest.mark.parametrize("x_shape,k,mult,stride,dil,pad", _with_paddings(DW_FLOAT[:-1]))
def test_depthwise_int8_layouts(x_shape, k, mult, stride, dil, pad):
    mb, x = _q("DEPTHWISE_CONV_2D", x_shape, k, mult=mult, stride=stride, dil=dil, pad=pad,
               act=[NONE, RELU, RELU_N1_TO_1, RELU6][sum(x_shape) % 4], seed=sum(x_shape))
    assert _backend(mb) == "jit"
    check_builtin(mb, [x])


@pytest.mark.parametrize("cin,mult", [(1, 1), (7, 1), (8, 1), (9, 1), (5, 2), (3, 3), (13, 1), (24, 1), (40, 1)])
def test_depthwise_int8_channels_around_the_rounding_blocks(cin, mult):
    """LiteRT's optimized kernel rounds blocks of 8 channels halves-up, the rest as the reference."""
    for stride in ((1, 1), (1, 2)):
        mb, x = _q("DEPTHWISE_CONV_2D", (2, 8, 9, cin), (3, 3), mult=mult, stride=stride, q_out=(0.03, -7),
                   seed=cin * 7 + mult)
        check_builtin(mb, [x])


@pytest.mark.parametrize("zp_in,zp_out", [(-128, 127), (127, -128), (0, 0)])
@pytest.mark.parametrize("out_scale", [0.0005, 0.03, 2.0])    # multipliers above 1 (left shifts), around, below
def test_depthwise_int8_zero_points_scales_and_saturation(zp_in, zp_out, out_scale):
    scales = [0.3, 0.002, 0.05, 0.0004, 1e-5, 0.9, 0.01, 0.2, 0.07, 0.6]
    mb, x = _q("DEPTHWISE_CONV_2D", (1, 7, 8, 5), (3, 3), mult=2, q_in=(0.05, zp_in), q_out=(out_scale, zp_out),
               w_scales=scales, seed=zp_in & 7)
    check_builtin(mb, [x])


def test_depthwise_int8_per_tensor_no_bias_and_threads():
    mb, x = _q("DEPTHWISE_CONV_2D", (1, 9, 9, 6), (3, 3), w_scales=[0.004], act=RELU6, seed=3)
    check_builtin(mb, [x])
    # (LiteRT crashes on a 2-input DEPTHWISE_CONV_2D: without a bias the op equals LiteRT's with zeros)
    mb, x = _q("DEPTHWISE_CONV_2D", (1, 9, 9, 6), (5, 5), bias=False, seed=4)
    zeros, _ = _q("DEPTHWISE_CONV_2D", (1, 9, 9, 6), (5, 5), bias="zeros", seed=4)
    assert _backend(mb) == "jit"
    assert_close(run_onert(mb, [x]), run_litert_builtin(zeros, [x]))
    mb, x = _q("DEPTHWISE_CONV_2D", (2, 64, 64, 64), (3, 3), seed=5)     # above _PARALLEL_MIN
    expected = check_builtin(mb, [x])
    got = onert_py.infer.session(mb.to_bytes("tflite"), num_threads=2).infer([x])
    assert_close(got, expected)


def test_depthwise_int8_output_stage_general_path():
    # a multiplier far above 1 (left shift 13) with large sums: values leave int32 after the shift (C's
    # wrap-around, ruy's overflow rule), so the kernel takes OutputStage's general form, not one shift
    from types import SimpleNamespace
    from onert_py.backends.cpu._quant import quantize_multipliers
    from onert_py.backends.jit.conv import _output_stage
    mult, shift = quantize_multipliers(np.array([0.5 * 0.9 / 1e-4]))
    q = SimpleNamespace(bias=np.array([30000]), shift=shift, mult=mult, half_up=0, bound=25 * 228 * 127 + 30000)
    assert not _output_stage(q, 1)[3]
    mb, x = _q("DEPTHWISE_CONV_2D", (1, 6, 7, 9), (5, 5), q_in=(0.5, -100), q_out=(1e-4, 3),
               w_scales=[0.9] * 9, seed=6)
    assert _backend(mb) == "jit"
    check_builtin(mb, [x])
    x[:] = np.clip(x, -101, -99)              # sums near zero: values that do not all saturate
    check_builtin(mb, [x])


# CONV_2D: (input shape, filter, out channels, stride, dilation)
CONV_INT8 = [
    ([1, 34, 35, 3], (3, 3), 16, (2, 2), (1, 1)),    # an RGB stem
    ([2, 20, 21, 8], (1, 1), 24, (1, 1), (1, 1)),    # pointwise, batch 2 (zero point folded into the bias)
    ([1, 17, 19, 16], (3, 3), 12, (1, 1), (1, 1)),   # 3x3 with padding (input shifted by its zero point)
    ([1, 31, 27, 5], (2, 3), 9, (1, 2), (2, 1)),     # odd sizes, dilation, strides
    ([1, 40, 40, 32], (1, 1), 64, (1, 1), (1, 1)),   # enough outputs for numba's threads
    ([1, 13, 11, 6], (3, 2), 37, (1, 1), (1, 3)),    # dilation_w > 1 (numpy's window copy), 37 = 32 + 5 columns
    ([1, 9, 7, 7], (1, 1), 3, (1, 1), (1, 1)),       # pointwise over 7 channels (rows copied), M % 6 != 0
    ([1, 5, 5, 12], (1, 1), 48, (2, 2), (1, 1)),     # strided pointwise (windows), a half last panel
]


@pytest.fixture(params=["byte_dot", "float_sums"])
def int8_conv_path(request, monkeypatch):
    """Both int8 CONV_2D paths of the jit: the byte dot-product GEMM (where the machine has VNNI) and
    the exact float32 sums (other machines; forced here by hiding VNNI)."""
    if request.param == "byte_dot":
        if not _qgemm.available():
            pytest.skip("no AVX-512 VNNI on this machine: the byte dot-product path is not compiled")
    else:
        monkeypatch.setattr(_qgemm, "available", lambda: False)
    return request.param


@pytest.mark.parametrize("x_shape,k,cout,stride,dil", CONV_INT8)
@pytest.mark.parametrize("pad", [SAME, VALID])
@pytest.mark.parametrize("act", [NONE, RELU6])
def test_conv2d_int8(x_shape, k, cout, stride, dil, pad, act, int8_conv_path):
    mb, x = _q("CONV_2D", x_shape, k, cout=cout, stride=stride, dil=dil, pad=pad, act=act, q_out=(0.3, -3),
               seed=sum(x_shape) + act)
    outputs = x_shape[0] * cout * (conv_output_size(x_shape[1], k[0], stride[0], dil[0], pad)
                                   * conv_output_size(x_shape[2], k[1], stride[1], dil[1], pad))
    if int8_conv_path == "byte_dot" or outputs >= 2048:   # the float path leaves small ones to cpu
        assert _backend(mb) == "jit"
    before = x.copy()
    check_builtin(mb, [x])
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("zp_in,zp_out", [(-128, 127), (127, -128)])
@pytest.mark.parametrize("out_scale", [0.002, 0.04, 3.0])
def test_conv2d_int8_zero_points_and_saturation(zp_in, zp_out, out_scale, int8_conv_path):
    mb, x = _q("CONV_2D", (1, 12, 13, 6), (3, 3), cout=20, q_in=(0.05, zp_in), q_out=(out_scale, zp_out),
               w_scales=[0.3, 0.002, 0.05, 0.0004] * 5, seed=zp_in & 7)
    assert _backend(mb) == "jit"
    check_builtin(mb, [x])
    mb, x = _q("CONV_2D", (1, 12, 13, 6), (1, 1), cout=24, q_in=(0.05, zp_in), q_out=(out_scale, zp_out),
               w_scales=[0.01], seed=zp_in & 3)    # per tensor
    check_builtin(mb, [x])


def test_conv2d_int8_threads(int8_conv_path):
    mb, x = _q("CONV_2D", (2, 32, 30, 16), (3, 3), cout=32, stride=(1, 1), seed=8)
    expected = check_builtin(mb, [x])
    assert_close(onert_py.infer.session(mb.to_bytes("tflite"), num_threads=2).infer([x]), expected)


def test_int8_declines():
    # grouped CONV_2D (LiteRT's reference kernel) and other integer types stay on cpu; without VNNI, small
    # outputs and sums beyond float32's exact integers (the cpu kernel's float64 path) too, while the
    # byte dot product takes them (its int32 sums are exact at any size)
    assert _backend(_q("CONV_2D", (1, 7, 6, 6), (3, 3), cout=6, groups=2)[0]) == "cpu"
    small, x_small = _q("CONV_2D", (1, 4, 4, 3), (3, 3), cout=4)
    wide, x_wide = _q("CONV_2D", (1, 20, 20, 256), (3, 3), cout=16, q_in=(0.05, -100))
    expected = "jit" if _qgemm.available() else "cpu"
    assert _backend(small) == expected and _backend(wide) == expected
    check_builtin(small, [x_small])
    check_builtin(wide, [x_wide])
    g = rng(9)
    mb = single_op_model("DEPTHWISE_CONV_2D",
                         [("x", [1, 6, 6, 4], np.uint8, (0.05, 128)),
                          ("const", g.integers(0, 256, (1, 3, 3, 4)).astype(np.uint8), (0.01, 120)),
                          ("const", np.zeros(4, np.int32), (0.0005, 0))],
                         [("o", [1, 6, 6, 4], np.uint8, (0.1, 128))], padding=SAME, stride_h=1, stride_w=1,
                         dilation_h_factor=1, dilation_w_factor=1, depth_multiplier=1, fused_activation_function=0)
    assert _backend(mb) == "cpu"


@pytest.mark.skipif(not _qgemm.available(), reason="no AVX-512 VNNI on this machine")
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (5, 3, 17), (6, 4, 32), (13, 27, 33), (40, 96, 64), (7, 13, 48),
                                   (12, _qgemm.MAX_K, 20)])
def test_byte_dot_gemm_against_the_output_stage_formula(m, k, n):
    # the kernel alone: int32 sums of (x + 128) * w, the folded offset, then OutputStage's fast path
    # written out in int64 numpy (an independent formula), every partial panel and leftover row
    g = rng(m * 7 + k + n)
    x = g.integers(-128, 128, (m, k)).astype(np.int8)
    w = g.integers(-128, 128, (k, n)).astype(np.int8)
    x[0, :2] = [-128, 127][:k] if k >= 2 else [-128]
    bias = g.integers(-5000, 5000, n)
    right = g.integers(0, 12, n)
    mult = g.integers(1 << 30, (1 << 31) - 1, n)
    left = (right == 0).astype(np.int64)                        # a left shift where there is no right one
    offset = (1 << 30) + np.where(right > 0, np.int64(1) << (30 + right), 0)
    fix = np.where(g.random(n) < 0.5, np.int64(1) << 31, 0) * (right > 0)
    table = _qgemm.stage_table(bias - _qgemm.column_sums(w), mult, left, fix, offset, 31 + right)
    k4 = _qgemm.quads(k) // 4
    rows = np.zeros((m, k4 * 4), np.int8)
    rows[:, :k] = x
    rows[:, k:] = 99                                             # the quad padding meets zero filter rows
    y = np.full(m * n + 1, 55, np.int8)                          # a sentinel past the end
    _qgemm.quad_rows(rows.reshape(-1).view(np.int32), _qgemm.pack_quads(w), table, y, 0, m, k4, n,
                     np.int64(-7), np.int64(-100), np.int64(120))
    s = x.astype(np.int64) @ w.astype(np.int64) + bias
    v = (s << left) * mult
    v = np.where(v < -(1 << 30), v - fix, v)
    expected = np.clip(((v + offset) >> (31 + right)) - 7, -100, 120)
    np.testing.assert_array_equal(y[:-1].reshape(m, n), expected)
    assert y[-1] == 55


# (input shape, filter [O, KH, KW, C], stride, dilation, padding, activation, bias): the ConvPlan kinds
CONV_FLOAT = [
    ([1, 12, 12, 16], (24, 1, 1, 16), (1, 1), (1, 1), SAME, NONE, True),      # pointwise
    ([2, 7, 9, 5], (3, 1, 1, 5), (1, 1), (1, 1), VALID, RELU, False),        # pointwise, no bias, batch 2
    ([1, 16, 16, 3], (16, 3, 3, 3), (2, 2), (1, 1), SAME, RELU6, True),      # an RGB stem (transposed im2col)
    ([1, 11, 13, 8], (5, 3, 3, 8), (1, 1), (2, 2), SAME, RELU_N1_TO_1, True),  # dilated
    ([1, 10, 10, 6], (4, 5, 5, 6), (2, 1), (1, 1), VALID, NONE, True),       # 5x5 VALID, mixed strides
    # 8 output channels: the windows read in place (half the GEMM's lanes padding, no im2col copy)
    ([1, 32, 32, 3], (8, 3, 3, 3), (2, 2), (1, 1), SAME, NONE, True),        # hand_recrop's RGB stem
    ([1, 16, 16, 8], (8, 2, 2, 8), (2, 2), (1, 1), SAME, RELU, True),        # its 2x2 / 2 downsampling
    ([1, 9, 9, 4], (20, 3, 3, 4), (1, 1), (1, 2), SAME, NONE, True),         # dilated width: the sgemm
]


@pytest.mark.parametrize("x_shape,w_shape,stride,dil,pad,act,bias", CONV_FLOAT)
def test_float_conv2d_against_cpu_and_litert(x_shape, w_shape, stride, dil, pad, act, bias):
    # Convolutions the packed GEMM takes (gemm_wins: 16, 24 output channels; from 8 when it reads the
    # windows in place, _windows_win) sum in its own order (in order over k, with FMAs) and agree with
    # the cpu kernel within the tolerance; the others run the cpu kernel's sgemm and then bias and clamp
    # in one pass, the same float32 operations as cpu: the same bits. Both keep inf and NaN where cpu
    # has them.
    g = rng(10)
    cout, kh, kw, _ = w_shape
    ins = [("x", x_shape, np.float32), ("const", g.normal(size=w_shape).astype(np.float32))]
    b = g.normal(size=cout).astype(np.float32) if bias else np.zeros(cout, np.float32)
    oh = conv_output_size(x_shape[1], kh, stride[0], dil[0], pad)
    ow = conv_output_size(x_shape[2], kw, stride[1], dil[1], pad)

    def model(inputs):
        return single_op_model("CONV_2D", inputs, [("o", [x_shape[0], oh, ow, cout], np.float32)],
                               padding=pad, stride_h=stride[0], stride_w=stride[1], dilation_h_factor=dil[0],
                               dilation_w_factor=dil[1], fused_activation_function=act)
    mb = model(ins + [("const", b)] if bias else ins)
    assert _backend(mb) == "jit"
    data = mb.to_bytes("tflite")
    finite = g.normal(size=x_shape).astype(np.float32)
    jit = onert_py.infer.session(data, "jit;cpu").infer([finite])[0]
    cpu = onert_py.infer.session(data, "cpu").infer([finite])[0]
    if gemm_wins(cout) or _windows_win(cout, (kh, kw), stride, dil):
        assert_close(jit, cpu, rtol=1e-5, atol=ATOL)
    else:
        np.testing.assert_array_equal(jit, cpu)
    x = finite * 2
    x[0, 0, 0, 0], x[0, -1, 0, 0], x[-1, -1, -1, -1] = np.inf, -np.inf, np.nan     # three corners
    jit = onert_py.infer.session(data, "jit;cpu").infer([x])[0]
    cpu = onert_py.infer.session(data, "cpu").infer([x])[0]
    np.testing.assert_array_equal(np.isnan(jit), np.isnan(cpu))
    np.testing.assert_array_equal(jit[np.isinf(cpu)], cpu[np.isinf(cpu)])
    assert np.isfinite(cpu).any() and (~np.isfinite(cpu)).any()
    expected = run_litert(model(ins + [("const", b)]), [finite])    # LiteRT's float CONV_2D needs a bias
    assert_close(run_onert(mb, [finite]), expected, rtol=1e-5, atol=ATOL)


def test_float_conv2d_tanh_and_single_channel_stay_on_cpu():
    # TANH is not a clamp the epilogue applies; one output channel is the cpu kernel's channel sum
    g = rng(11)
    for cout, act in ((8, TANH), (1, NONE)):
        mb = single_op_model("CONV_2D", [("x", [1, 8, 8, 3], np.float32),
                                         ("const", g.normal(size=(cout, 3, 3, 3)).astype(np.float32))],
                             [("o", [1, 8, 8, cout], np.float32)], padding=SAME, stride_h=1, stride_w=1,
                             dilation_h_factor=1, dilation_w_factor=1, fused_activation_function=act)
        assert _backend(mb) == "cpu"


def test_conv2d_int8_wrong_channels_is_a_clear_error(int8_conv_path):
    # an input resized to another channel count: the error names the op and both counts, on either path
    mb, x = _q("CONV_2D", (1, 9, 9, 8), (3, 3), cout=16)
    bad = np.zeros((1, 9, 9, 5), np.int8)
    it = onert_py.Interpreter(model_content=mb.to_bytes("tflite"))
    it.resize_tensor_input(it.get_input_details()[0]["index"], list(bad.shape))
    with pytest.raises(onert_py.OnertPyError, match=r"CONV_2D.*input depth 5 .*filter depth 8"):
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], bad)
        it.invoke()
    np.testing.assert_array_equal(bad, 0)
