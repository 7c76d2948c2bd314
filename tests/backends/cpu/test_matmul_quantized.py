"""Quantized FULLY_CONNECTED and BATCH_MATMUL: bit-exact with LiteRT's builtin kernels.

FULLY_CONNECTED's int8/uint8 (and 16x8 with an int32 bias) cases run LiteRT's optimized GEMM (ruy), whose
rescale rounds halves up; 16x8 with an int64 bias runs its reference kernel, which rescales in double;
BATCH_MATMUL runs the reference kernel (MultiplyByQuantizedMultiplier). Every case here has ties and
near-ties of the rescale (multipliers that are powers of two), saturated outputs or zero points at the
type's ends."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import check_builtin, rng, run_onert, single_op_model
from onert_py.errors import PrepareError

NONE, RELU, RELU_N1_TO_1, RELU6, TANH = 0, 1, 2, 3, 4


def _values(r, dtype, shape):
    info = np.iinfo(dtype)
    return r.integers(int(info.min), int(info.max) + 1, shape).astype(dtype)


def _per_channel(scales):
    scales = np.asarray(scales, np.float32)
    return (scales, np.zeros(scales.size, np.int64), 0)


def _fc_model(x_dt, x_shape, w, q_x, q_w, q_o, bias=None, q_b=None, keep=False, act=NONE, **opts):
    units, depth = w.shape
    out_shape = list(x_shape[:-1]) + [units] if keep else [int(np.prod(x_shape)) // depth, units]
    ins = [("x", list(x_shape), x_dt, q_x), ("const", w, q_w)]
    if bias is not None:
        if q_b is None:    # the bias scale a converter gives: input scale * weight scale(s)
            sw = np.asarray(q_w[0], np.float64)
            sb = (q_x[0] * sw).astype(np.float32)
            q_b = _per_channel(sb) if sw.size > 1 else (float(sb), 0)
        ins.append(("const", bias, q_b))
    return single_op_model("FULLY_CONNECTED", ins, [("y", out_shape, x_dt, q_o)],
                           fused_activation_function=act, keep_num_dims=keep, **opts)


# (x dtype, w dtype, q_x, q_w, q_o): multipliers below and above 1, exact powers of two (every rounding
# tie shows), zero points at the types' ends, outputs that saturate.
FC_CONFIGS = {
    "int8_pow2_ties": (np.int8, np.int8, (0.5, 3), (0.5, 0), (64.0, -5)),
    "int8_zp_ends": (np.int8, np.int8, (0.5, -128), (0.25, 0), (4.0, 127)),
    "int8_zp_low_out": (np.int8, np.int8, (0.03, 127), (0.02, 0), (0.5, -128)),
    "int8_mult_above_1": (np.int8, np.int8, (0.02, 10), (0.01, 0), (0.0001, 0)),
    "int8_mult_far_above_1": (np.int8, np.int8, (0.5, 0), (0.25, 0), (0.001, 1)),
    "int8_asym_weights": (np.int8, np.int8, (0.1, -7), (0.05, 13), (2.0, 3)),
    "int8_tiny_mult": (np.int8, np.int8, (0.001, 0), (0.0007, 0), (3.0, 0)),
    "uint8_ties": (np.uint8, np.uint8, (0.5, 0), (0.5, 255), (64.0, 128)),
    "uint8_zp_ends": (np.uint8, np.uint8, (0.5, 255), (0.5, 7), (16.0, 0)),
    "uint8_zp_out_high": (np.uint8, np.uint8, (0.07, 128), (0.013, 130), (0.9, 255)),
    "uint8_mult_above_1": (np.uint8, np.uint8, (0.04, 100), (0.02, 120), (0.0003, 128)),
    "int16_ties": (np.int16, np.int8, (0.5, 0), (0.5, 0), (256.0, 0)),
    "int16_mult_above_1": (np.int16, np.int8, (0.001, 0), (0.01, 0), (0.000005, 0)),
    "int16_small_mult": (np.int16, np.int8, (0.0003, 0), (0.02, 0), (0.1, 0)),
}


@pytest.mark.parametrize("act", [NONE, RELU, RELU_N1_TO_1, RELU6])
@pytest.mark.parametrize("name", sorted(FC_CONFIGS))
def test_fully_connected_per_tensor(name, act):
    x_dt, w_dt, q_x, q_w, q_o = FC_CONFIGS[name]
    r = rng(len(name) * 7 + act)
    depth, units = 13, 9
    x = _values(r, x_dt, (11, depth))
    w = _values(r, w_dt, (units, depth))
    b = r.integers(-20000, 20000, units).astype(np.int32)
    check_builtin(_fc_model(x_dt, x.shape, w, q_x, q_w, q_o, b, act=act), [x])


# Per-channel scales spanning five orders of magnitude (powers of two among them: ties).
PC_SCALES = [0.5, 0.25, 1e-4, 3e-3, 2.0, 0.07, 8.0, 1.3e-2, 0.125]


@pytest.mark.parametrize("act", [NONE, RELU, RELU_N1_TO_1, RELU6])
@pytest.mark.parametrize("x_dt,q_x,q_o", [(np.int8, (0.5, 3), (64.0, -5)), (np.int8, (0.02, -128), (0.3, 127)),
                                          (np.int16, (0.5, 0), (256.0, 0)), (np.int16, (0.002, 0), (0.01, 0))])
def test_fully_connected_per_channel(x_dt, q_x, q_o, act):
    r = rng(act + 50)
    depth, units = 10, len(PC_SCALES)
    x = _values(r, x_dt, (7, depth))
    w = _values(r, np.int8, (units, depth))
    b = r.integers(-30000, 30000, units).astype(np.int32)
    check_builtin(_fc_model(x_dt, x.shape, w, q_x, _per_channel(PC_SCALES), q_o, b, act=act), [x])


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("x_shape", [(1, 6), (6,), (3, 4, 6), (2, 1, 3, 6), (1, 1, 6)])
@pytest.mark.parametrize("x_dt,w_dt,q_x,q_w,q_o", [
    (np.int8, np.int8, (0.25, -1), (0.5, 0), (2.0, 4)),
    (np.uint8, np.uint8, (0.25, 129), (0.5, 127), (2.0, 120)),
    (np.int16, np.int8, (0.25, 0), (0.5, 0), (16.0, 0)),
])
def test_fully_connected_shapes(x_dt, w_dt, q_x, q_w, q_o, x_shape, keep):
    """Inputs of any rank are rows of the weights' depth: one row (the GEMV case), rank 1, rank > 2
    flattened (keep_num_dims false) or kept."""
    r = rng(len(x_shape))
    x = _values(r, x_dt, x_shape)
    w = _values(r, w_dt, (5, 6))
    b = r.integers(-3000, 3000, 5).astype(np.int32)
    check_builtin(_fc_model(x_dt, x.shape, w, q_x, q_w, q_o, b, keep=keep), [x])


@pytest.mark.parametrize("x_dt,w_dt,q_x,q_w,q_o", [
    (np.int8, np.int8, (0.5, 3), (0.5, 0), (64.0, -5)),
    (np.uint8, np.uint8, (0.5, 0), (0.5, 255), (64.0, 128)),
    (np.int16, np.int8, (0.5, 0), (0.5, 0), (256.0, 0)),
    (np.int8, np.int8, (0.5, 3), _per_channel(PC_SCALES), (64.0, -5)),
    (np.int16, np.int8, (0.5, 0), _per_channel(PC_SCALES), (256.0, 0)),
])
def test_fully_connected_without_bias(x_dt, w_dt, q_x, q_w, q_o):
    r = rng(3)
    x = _values(r, x_dt, (8, 12))
    w = _values(r, w_dt, (len(PC_SCALES), 12))
    check_builtin(_fc_model(x_dt, x.shape, w, q_x, q_w, q_o, None, act=RELU), [x])


@pytest.mark.parametrize("act", [NONE, RELU, RELU_N1_TO_1, RELU6])
@pytest.mark.parametrize("q_w", [(0.5, 0), (0.01, 0), _per_channel(PC_SCALES)], ids=["ties", "tensor", "channel"])
@pytest.mark.parametrize("q_o", [(256.0, 0), (0.0005, 0)], ids=["mult_below_1", "saturating"])
@pytest.mark.parametrize("bias_type", ["int64", "int64_option", "int32_option", "none_int64_option"])
def test_fully_connected_16x8_bias_types(bias_type, q_o, q_w, act):
    """16x8 with an int64 bias (or quantized_bias_type INT64) runs LiteRT's reference kernel, which
    rescales in double; an int32 bias runs the optimized GEMM."""
    r = rng(act + 7 * len(bias_type))
    depth, units = 9, len(PC_SCALES)
    x = _values(r, np.int16, (6, depth))
    w = _values(r, np.int8, (units, depth))
    opts = {}
    if bias_type.endswith("option"):
        opts["quantized_bias_type"] = 2 if bias_type.startswith("int32") else 4
    if bias_type.startswith("none"):
        b = None
    else:
        b = r.integers(-(1 << 20), 1 << 20, units).astype(np.int32 if bias_type.startswith("int32") else np.int64)
    check_builtin(_fc_model(np.int16, x.shape, w, (0.5, 0), q_w, q_o, b, act=act, **opts), [x])


def test_fully_connected_dynamic_weights():
    """Weights (and bias) given at run time."""
    r = rng(11)
    x = _values(r, np.int8, (4, 6))
    w = _values(r, np.int8, (3, 6))
    b = r.integers(-500, 500, 3).astype(np.int32)
    mb = single_op_model("FULLY_CONNECTED", [("x", [4, 6], np.int8, (0.5, -3)), ("w", [3, 6], np.int8, (0.25, 2)),
                                             ("b", [3], np.int32, (0.125, 0))],
                         [("y", [4, 3], np.int8, (8.0, 1))], fused_activation_function=RELU6)
    check_builtin(mb, [x, w, b])


def _refused_by_litert(mb, inputs):
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    it = litert.Interpreter(model_content=mb.to_bytes("tflite"),
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    with pytest.raises(RuntimeError):
        it.allocate_tensors()


def _fc_refusals():
    w8 = np.ones((4, 6), np.int8)
    b32 = np.ones(4, np.int32)
    return {
        "tanh": (_fc_model(np.int8, (2, 6), w8, (0.5, 0), (0.5, 0), (1.0, 0), b32, act=TANH), "fused activation 4"),
        "bias_scale": (_fc_model(np.int8, (2, 6), w8, (0.5, 0), (0.5, 0), (1.0, 0), b32, q_b=(0.5, 0)),
                       "bias scale"),
        "int16_zero_point": (_fc_model(np.int16, (2, 6), w8, (0.5, 3), (0.5, 0), (1.0, 0), b32),
                             "zero points 0"),
        "int16_out_zero_point": (_fc_model(np.int16, (2, 6), w8, (0.5, 0), (0.5, 0), (1.0, -2), b32),
                                 "zero points 0"),
        "uint8_per_channel": (_fc_model(np.uint8, (2, 6), np.ones((4, 6), np.uint8), (0.5, 0),
                                        _per_channel([0.5, 0.25, 1.0, 2.0]), (1.0, 0), b32),
                              "per-channel weights need an int8 or int16 input"),
        "bias_type_option": (_fc_model(np.int16, (2, 6), w8, (0.5, 0), (0.5, 0), (1.0, 0), b32,
                                       quantized_bias_type=4), "quantized_bias_type says INT64"),
    }


@pytest.mark.parametrize("name", sorted(_fc_refusals()))
def test_fully_connected_refusals(name):
    """What LiteRT refuses at prepare, onert-py refuses too, saying why."""
    mb, msg = _fc_refusals()[name]
    x = np.ones((2, 6), np.int16 if "int16" in name or "option" in name else
                np.uint8 if "uint8" in name else np.int8)
    _refused_by_litert(mb, [x])
    with pytest.raises(PrepareError, match=msg):
        run_onert(mb, [x])


def test_fully_connected_unsupported_types():
    """int16 x int16 weights (which LiteRT runs) are not implemented: a clear refusal, not a wrong answer."""
    mb = _fc_model(np.int16, (2, 6), np.ones((4, 6), np.int16), (0.5, 0), (0.5, 0), (1.0, 0))
    with pytest.raises(PrepareError, match="int16 x int8 -> int16, not INT16 x INT16"):
        run_onert(mb, [np.ones((2, 6), np.int16)])


# ----------------------------------------------------------------------------------------- BATCH_MATMUL

def _bmm_model(l_shape, r_shape, l_dt, r_dt, q_l, q_r, out_dt, q_o, adj_x=False, adj_y=False):
    m = l_shape[-1] if adj_x else l_shape[-2]
    n = r_shape[-2] if adj_y else r_shape[-1]
    batch = list(np.broadcast_shapes(tuple(l_shape[:-2]), tuple(r_shape[:-2])))
    out = ("y", batch + [m, n], out_dt) + ((q_o,) if q_o is not None else ())
    return single_op_model("BATCH_MATMUL", [("a", list(l_shape), l_dt, q_l), ("b", list(r_shape), r_dt, q_r)],
                           [out], adj_x=adj_x, adj_y=adj_y)


BMM_SHAPES = [((5, 7), (7, 3)), ((2, 5, 7), (2, 7, 3)), ((2, 5, 7), (7, 3)), ((3, 1, 4, 6), (1, 2, 6, 5)),
              ((1, 4, 6), (2, 3, 1, 6, 5))]

BMM_CONFIGS = {
    "int8_ties": (np.int8, np.int8, (0.5, 3), (0.5, -7), np.int8, (64.0, -5)),
    "int8_zp_ends": (np.int8, np.int8, (0.5, -128), (0.25, 127), np.int8, (4.0, 127)),
    "int8_mult_above_1": (np.int8, np.int8, (0.02, 10), (0.01, 0), np.int8, (0.0001, -128)),
    "int16": (np.int16, np.int16, (0.5, 0), (0.5, 0), np.int16, (4096.0, 0)),
    "int16_saturating": (np.int16, np.int16, (0.01, 0), (0.003, 0), np.int16, (0.05, 0)),
    "int16x8": (np.int16, np.int8, (0.5, 0), (0.25, 0), np.int16, (64.0, 0)),
    "int16x8_small": (np.int16, np.int8, (0.0001, 0), (0.02, 0), np.int16, (0.003, 0)),
}


@pytest.mark.parametrize("adj", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("shapes", BMM_SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(BMM_CONFIGS))
def test_batch_matmul(name, shapes, adj):
    l_dt, r_dt, q_l, q_r, out_dt, q_o = BMM_CONFIGS[name]
    adj_x, adj_y = adj
    l_shape, r_shape = list(shapes[0]), list(shapes[1])
    if adj_x:
        l_shape[-1], l_shape[-2] = l_shape[-2], l_shape[-1]
    if adj_y:
        r_shape[-1], r_shape[-2] = r_shape[-2], r_shape[-1]
    r = rng(len(name) + 3 * adj_x + adj_y)
    a, b = _values(r, l_dt, l_shape), _values(r, r_dt, r_shape)
    check_builtin(_bmm_model(l_shape, r_shape, l_dt, r_dt, q_l, q_r, out_dt, q_o, adj_x, adj_y), [a, b])


@pytest.mark.parametrize("adj", [(False, False), (True, True)])
def test_batch_matmul_int8_to_int32(adj):
    """int8 x int8 -> int32: LiteRT's raw sums of products (no zero point applied)."""
    r = rng(5)
    l_shape, r_shape = [2, 4, 6], [6, 3]
    if adj[0]:
        l_shape = [2, 6, 4]
    if adj[1]:
        r_shape = [3, 6]
    a, b = _values(r, np.int8, l_shape), _values(r, np.int8, r_shape)
    mb = _bmm_model(l_shape, r_shape, np.int8, np.int8, (0.5, 3), (0.25, -2), np.int32, None, *adj)
    check_builtin(mb, [a, b])


def test_batch_matmul_int16_zero_point_refused():
    mb = _bmm_model([2, 3], [3, 2], np.int16, np.int16, (0.5, 1), (0.5, 0), np.int16, (1.0, 0))
    x = [np.ones((2, 3), np.int16), np.ones((3, 2), np.int16)]
    _refused_by_litert(mb, x)
    with pytest.raises(PrepareError, match="zero points 0"):
        run_onert(mb, x)


# ------------------------------------------------------------------ FULLY_CONNECTED, SHUFFLED4x16INT8

SHUFFLED4X16INT8 = 1


def _shuffle_4x16(w):
    """LiteRT's SHUFFLED4x16INT8 layout of uint8 weights [units, depth], written from its description:
    for each group of 4 output rows, for each group of 16 depth columns, the 4x16 block row by row;
    every byte with its sign bit flipped (so that as int8 it is the weight minus 128)."""
    units, depth = w.shape
    stream = []
    for c in range(0, units, 4):
        for d in range(0, depth, 16):
            for i in range(4):
                stream.extend(int(b) ^ 0x80 for b in w[c + i, d:d + 16])
    return np.array(stream, np.uint8).reshape(units, depth)


def _shuffled_model(x_shape, w, bias, q_x, q_w, q_o, ws_shape=None, keep=False, act=NONE, x_dt=np.uint8,
                    w_dt=np.uint8, out_dt=np.int16, q_b=None):
    units, depth = w.shape
    rows = int(np.prod(x_shape)) // depth
    out_shape = list(x_shape[:-1]) + [units] if keep else [rows, units]
    ins = [("x", list(x_shape), x_dt, q_x), ("const", w.astype(w_dt), q_w)]
    if bias is not None:
        ins.append(("const", bias, q_b or (float(np.float32(q_x[0]) * np.float32(q_w[0])), 0)))
    outs = [("y", out_shape, out_dt, q_o), ("workspace", list(ws_shape or [rows, depth]), np.uint8)]
    return single_op_model("FULLY_CONNECTED", ins, outs, fused_activation_function=act, keep_num_dims=keep,
                           weights_format=SHUFFLED4X16INT8)


# (input scale, weight scale, output scale): multipliers of powers of two (ties of every rounding step,
# above and below 1), one far above 1 (the left shift wraps around int32 before the high multiply),
# arbitrary ones, an int16 "3 integer bits" output (2**-12) as LSTM converters make.
_SHUFFLED_SCALES = [(0.5, 0.25, 4.0), (0.5, 0.25, 1 / 64), (0.5, 0.5, 2 ** -14), (0.03, 0.07, 0.5),
                    (0.02, 0.015, 2 ** -12), (0.004, 0.003, 0.9), (0.01, 0.01, 2 ** -16)]


@pytest.mark.parametrize("rows", [1, 4])
@pytest.mark.parametrize("units, depth", [(4, 16), (16, 64), (12, 48), (8, 256)])
@pytest.mark.parametrize("k", range(len(_SHUFFLED_SCALES)))
def test_fully_connected_shuffled(rows, units, depth, k):
    r = rng(100 * k + units + rows)
    w = r.integers(0, 256, (units, depth)).astype(np.uint8)
    x = r.integers(0, 256, (rows, depth)).astype(np.uint8)
    w[0, :5], x[0, :5] = [0, 255, 128, 0, 255], [255, 0, 128, 0, 255]
    bias = r.integers(-60000, 60000, units).astype(np.int32)
    bias[-1] = 2 ** 31 - 1 - 256 * 128 * 128   # large, without overflowing the int32 accumulator
    sx, sw, so = _SHUFFLED_SCALES[k]
    mb = _shuffled_model([rows, depth], _shuffle_4x16(w), bias, (sx, 128), (sw, 128), (so, 0))
    check_builtin(mb, [x])


@pytest.mark.parametrize("x_shape, keep", [([2, 2, 32], True), ([1, 1, 32], True), ([2, 64], False),
                                           ([4, 8, 4], False), ([128], False)])
def test_fully_connected_shuffled_input_shapes(x_shape, keep):
    """keep_num_dims and inputs flattened into 1 or 4 rows of the depth."""
    r = rng(len(x_shape))
    w = r.integers(0, 256, (8, 32)).astype(np.uint8)
    x = r.integers(0, 256, x_shape).astype(np.uint8)
    bias = r.integers(-3000, 3000, 8).astype(np.int32)
    mb = _shuffled_model(x_shape, _shuffle_4x16(w), bias, (0.05, 128), (0.02, 128), (2 ** -10, 0), keep=keep)
    check_builtin(mb, [x])


def test_fully_connected_shuffled_left_shift_wraps():
    """A multiplier of 2**13: the shifted accumulator 2**20 wraps to 0 in int32 (LiteRT gives 0, not the
    saturated 32767), 2**20 + 5 to 5 * 2**13; a workspace declared [1, 64] flat as [64]."""
    x = np.zeros((1, 64), np.uint8)
    w = np.zeros((4, 64), np.uint8)
    w[1, :32], w[2, :] = 255, 64
    bias = np.array([0, 0, 0, 5], np.int32)
    mb = _shuffled_model([1, 64], _shuffle_4x16(w), bias, (0.5, 128), (0.5, 128), (2 ** -14, 0), ws_shape=[64])
    y, _ = check_builtin(mb, [x])
    np.testing.assert_array_equal(y, [[0, 32767, 0, 20480]])


def _shuffled_refusal(mb, x, match, litert_refuses):
    if litert_refuses:
        _refused_by_litert(mb, [x])
    with pytest.raises(PrepareError, match=match):
        run_onert(mb, [x])


_W16 = _shuffle_4x16(np.arange(4 * 16, dtype=np.int64).reshape(4, 16).astype(np.uint8))
_B4 = np.zeros(4, np.int32)


@pytest.mark.parametrize("case", ["int8 input", "uint8 output", "rows 2", "rows 3", "zero points",
                                  "output zero point", "relu", "units", "depth", "no bias", "int64 bias",
                                  "workspace size"])
def test_fully_connected_shuffled_refusals(case):
    """LiteRT refuses other types at prepare; it runs 1 or 4 rows only (other counts leave the output
    unwritten), assumes zero points 128/128/0 and no activation (ignoring the declared ones) and needs
    units % 4 == 0, depth % 16 == 0 and a bias (debug checks, or a crash): refused by onert-py."""
    q = dict(q_x=(0.1, 128), q_w=(0.1, 128), q_o=(2 ** -10, 0))
    x = np.zeros((1, 16), np.uint8)
    litert_refuses = False
    if case == "int8 input":
        mb = _shuffled_model([1, 16], _W16.view(np.int8), _B4, (0.1, 0), (0.1, 0), (2 ** -10, 0), x_dt=np.int8,
                             w_dt=np.int8)
        x, match, litert_refuses = x.view(np.int8), "uint8 x uint8 -> int16", True
    elif case == "uint8 output":
        mb = _shuffled_model([1, 16], _W16, _B4, q["q_x"], q["q_w"], (0.5, 128), out_dt=np.uint8)
        match, litert_refuses = "uint8 x uint8 -> int16", True
    elif case in ("rows 2", "rows 3"):
        n = int(case[-1])
        x = np.zeros((n, 16), np.uint8)
        mb = _shuffled_model([n, 16], _W16, _B4, **q)
        match = f"1 or 4 input rows.*not {n}"
    elif case == "zero points":
        mb = _shuffled_model([1, 16], _W16, _B4, (0.1, 120), (0.1, 128), (2 ** -10, 0))
        match = "zero points 128"
    elif case == "output zero point":
        mb = _shuffled_model([1, 16], _W16, _B4, (0.1, 128), (0.1, 128), (2 ** -10, 7))
        match = "zero points 128"
    elif case == "relu":
        mb = _shuffled_model([1, 16], _W16, _B4, act=RELU, **q)
        match = "fused activation"
    elif case == "units":
        mb = _shuffled_model([1, 16], np.zeros((6, 16), np.uint8), np.zeros(6, np.int32), **q)
        match = "multiple of 4"
    elif case == "depth":
        x = np.zeros((1, 24), np.uint8)
        mb = _shuffled_model([1, 24], np.zeros((4, 24), np.uint8), _B4, **q)
        match = "multiple of 16"
    elif case == "no bias":
        mb = _shuffled_model([1, 16], _W16, None, **q)
        match = "INT32 bias"
    elif case == "int64 bias":
        mb = _shuffled_model([1, 16], _W16, _B4.astype(np.int64), **q)
        match = "INT32 bias"
    else:
        mb = _shuffled_model([1, 16], _W16, _B4, ws_shape=[1, 8], **q)
        match = "workspace"
    _shuffled_refusal(mb, x, match, litert_refuses)


@pytest.mark.parametrize("rows", [1, 4])
def test_fully_connected_shuffled_weights_as_input(rows):
    """Shuffled weights and the bias fed at run time (un-shuffled on every run)."""
    r = rng(rows + 40)
    w = r.integers(0, 256, (8, 32)).astype(np.uint8)
    x = r.integers(0, 256, (rows, 32)).astype(np.uint8)
    bias = r.integers(-9000, 9000, 8).astype(np.int32)
    sx, sw = 0.03, 0.02
    mb = single_op_model("FULLY_CONNECTED", [("x", [rows, 32], np.uint8, (sx, 128)),
                                             ("w", [8, 32], np.uint8, (sw, 128)),
                                             ("b", [8], np.int32, (float(np.float32(sx) * np.float32(sw)), 0))],
                         [("y", [rows, 8], np.int16, (2 ** -11, 0)), ("workspace", [rows, 32], np.uint8)],
                         weights_format=SHUFFLED4X16INT8)
    check_builtin(mb, [x, _shuffle_4x16(w), bias])
