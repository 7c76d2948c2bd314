"""The jit backend's quantized int8 FULLY_CONNECTED (backends/jit/matmul.py), bit for bit against
LiteRT's builtin kernels: per-tensor and per-channel weights, zero points at the type's ends (a nonzero
weight zero point too), multipliers above and below 1 and exact powers of two (every rounding tie of
the output stage), saturating outputs, every activation, depths around the vector width, rows of any
rank, and the FCs it leaves to cpu."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

import onert_py  # noqa: E402
from helpers import check_builtin, rng, run_interpreter, run_litert_builtin, run_onert, single_op_model  # noqa: E402
from onert_py.errors import PrepareError  # noqa: E402

NONE, RELU, RELU_N1_TO_1, RELU6, TANH = 0, 1, 2, 3, 4


def _per_channel(scales):
    scales = np.asarray(scales, np.float32)
    return (scales, np.zeros(scales.size, np.int64), 0)


def _model(x_shape, w, q_x, q_w, q_o, bias=None, keep=False, act=NONE, q_b=None, **opts):
    units, depth = w.shape
    out_shape = list(x_shape[:-1]) + [units] if keep else [int(np.prod(x_shape)) // depth, units]
    ins = [("x", list(x_shape), np.int8, q_x), ("const", w, q_w)]
    if bias is not None:
        if q_b is None:     # the converter's bias scale: input scale * weight scale(s)
            sb = (np.float32(q_x[0]) * np.asarray(q_w[0], np.float32)).astype(np.float32)
            q_b = _per_channel(sb) if sb.size > 1 else (float(sb), 0)
        ins.append(("const", bias, q_b))
    return single_op_model("FULLY_CONNECTED", ins, [("y", out_shape, np.int8, q_o)],
                           fused_activation_function=act, keep_num_dims=keep, **opts)


def _backend(mb, **options) -> str:
    return onert_py.infer.session(mb.to_bytes("tflite"), **options).executors[0].backend_names[0]


def _int8(r, shape, low=-128):
    return r.integers(low, 128, shape).astype(np.int8)


def _check(mb, x):
    assert _backend(mb) == "jit"
    check_builtin(mb, [x])


# (q_x, q_w, q_o): powers of two (ties of both roundings), zero points at the ends, multipliers far
# above 1 (the left shift), tiny multipliers, a nonzero weight zero point.
CONFIGS = {
    "pow2_ties": ((0.5, 3), (0.5, 0), (64.0, -5)),
    "pow2_ties_below": ((0.25, -1), (0.5, 0), (1024.0, 0)),
    "zp_ends": ((0.5, -128), (0.25, 0), (4.0, 127)),
    "zp_low_out": ((0.03, 127), (0.02, 0), (0.5, -128)),
    "mult_above_1": ((0.02, 10), (0.01, 0), (0.0001, 0)),
    "mult_far_above_1": ((0.5, 0), (0.25, 0), (0.001, 1)),
    "tiny_mult": ((0.001, 0), (0.0007, 0), (3.0, 0)),
    "asym_weights": ((0.1, -7), (0.05, 13), (2.0, 3)),
    "asym_weights_ends": ((0.2, 127), (0.01, -128), (1.5, -100)),
}


@pytest.mark.parametrize("act", [NONE, RELU, RELU_N1_TO_1, RELU6])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_per_tensor(name, act):
    q_x, q_w, q_o = CONFIGS[name]
    r = rng(len(name) * 7 + act)
    for rows, depth, units in [(1, 13, 9), (5, 70, 17)]:
        x, w = _int8(r, (rows, depth)), _int8(r, (units, depth))
        b = r.integers(-20000, 20000, units).astype(np.int32)
        _check(_model(x.shape, w, q_x, q_w, q_o, b, act=act), x)


# Per-channel scales over five orders of magnitude (powers of two among them: ties).
PC_SCALES = [0.5, 0.25, 1e-4, 3e-3, 2.0, 0.07, 8.0, 1.3e-2, 0.125, 0.004, 0.9]


@pytest.mark.parametrize("act", [NONE, RELU, RELU_N1_TO_1, RELU6])
@pytest.mark.parametrize("q_x,q_o", [((0.5, 3), (64.0, -5)), ((0.02, -128), (0.3, 127)), ((0.01, 40), (0.002, -9))])
def test_per_channel(q_x, q_o, act):
    r = rng(act + 50)
    units = len(PC_SCALES)
    for rows, depth in [(1, 10), (7, 65), (3, 257)]:
        x, w = _int8(r, (rows, depth)), _int8(r, (units, depth), low=-127)
        b = r.integers(-30000, 30000, units).astype(np.int32)
        _check(_model(x.shape, w, q_x, _per_channel(PC_SCALES), q_o, b, act=act), x)


@pytest.mark.parametrize("depth", [1, 15, 16, 31, 32, 33, 63, 64, 65, 127, 129, 1000])
def test_depths(depth):
    """Depths around the vectorised loop's widths (and its remainder)."""
    r = rng(depth)
    x, w = _int8(r, (3, depth)), _int8(r, (6, depth))
    b = r.integers(-5000, 5000, 6).astype(np.int32)
    _check(_model(x.shape, w, (0.05, -2), (0.01, 0), (0.2, 1), b), x)
    _check(_model(x.shape, w, (0.05, 9), (0.01, -4), (0.2, 1), b), x)


def test_extremes():
    """All -128 inputs and weights (the largest products), long rows, a bias near the int32 limit and
    outputs that saturate at both ends."""
    depth, units = 2048, 8
    x = np.full((2, depth), -128, np.int8)
    x[1, ::2] = 127
    w = np.full((units, depth), -128, np.int8)
    w[1::2, 1::2] = 127
    b = np.array([2**31 - 1 - 128 * 128 * depth, -(2**31) + 128 * 128 * depth, 0, 1, -1, 7, 10**6, -(10**6)],
                 np.int32)
    for q_o in [(2.0 ** 20, 0), (1.0, 0), (300.0, -128), (300.0, 127)]:
        _check(_model(x.shape, w, (1.0, 0), (1.0, 0), q_o, b), x)
    _check(_model(x.shape, w, (0.5, -128), (0.25, 0), (2.0 ** 14, 3), b), x)


def test_int32_accumulator_wraps():
    """A bias at the int32 limit plus a positive sum wraps around int32 as LiteRT's accumulator does
    (to a large negative value: -128 after the rescale)."""
    x = np.full((2, 64), 100, np.int8)
    w = np.full((4, 64), 100, np.int8)
    w[3] = -100
    b = np.array([2**31 - 1 - 1000, -(2**31) + 5, 2**31 - 1, -(2**31) + 10], np.int32)
    mb = _model(x.shape, w, (1.0, 0), (1.0, 0), (2.0 ** 24, 0), b)
    _check(mb, x)
    assert run_litert_builtin(mb, [x])[0][0].tolist() == [-128, -128, -128, 127]


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("x_shape", [(1, 6), (6,), (3, 4, 6), (2, 1, 3, 6), (1, 1, 6)])
def test_shapes(x_shape, keep):
    """Inputs of any rank are rows of the weights' depth: one row, rank 1, rank > 2 flattened
    (keep_num_dims false) or kept."""
    r = rng(len(x_shape))
    x, w = _int8(r, x_shape), _int8(r, (5, 6))
    b = r.integers(-3000, 3000, 5).astype(np.int32)
    _check(_model(x.shape, w, (0.25, -1), (0.5, 0), (2.0, 4), b, keep=keep), x)


@pytest.mark.parametrize("q_w", [(0.5, 0), (0.05, 6), _per_channel(PC_SCALES)], ids=["ties", "asym", "channel"])
def test_without_bias(q_w):
    r = rng(3)
    x, w = _int8(r, (8, 12)), _int8(r, (len(PC_SCALES), 12), low=-127)
    _check(_model(x.shape, w, (0.5, 3), q_w, (64.0, -5), None, act=RELU), x)


@pytest.mark.parametrize("q_w", [(0.004, 0), _per_channel(np.linspace(0.001, 0.01, 300))], ids=["tensor", "channel"])
def test_two_threads(q_w):
    """An FC large enough to be split over numba's threads (by output units), two threads: a classifier
    head (one row) and a batch."""
    r = rng(9)
    w = _int8(r, (300, 640), low=-127)
    b = r.integers(-20000, 20000, 300).astype(np.int32)
    for rows in (1, 6):
        x = _int8(r, (rows, 640))
        mb = _model(x.shape, w, (0.05, -3), q_w, (0.3, 5), b, act=RELU6)
        sess = onert_py.infer.session(mb.to_bytes("tflite"), num_threads=2)
        assert sess.executors[0].backend_names == ["jit"]
        np.testing.assert_array_equal(sess.infer([x])[0], run_litert_builtin(mb, [x])[0])


def test_declined_to_cpu():
    """What the jit kernel does not take goes to cpu: run-time weights, uint8 and int16 FCs, a float
    (hybrid) FC with int8 weights, shuffled weights, a tiny float FC; what LiteRT refuses, cpu refuses with its message."""
    r = rng(11)
    w = _int8(r, (3, 6))
    mb = single_op_model("FULLY_CONNECTED", [("x", [4, 6], np.int8, (0.5, -3)), ("w", [3, 6], np.int8, (0.25, 2))],
                         [("y", [4, 3], np.int8, (8.0, 1))])
    assert _backend(mb) == "cpu"
    check_builtin(mb, [_int8(r, (4, 6)), w])
    mb = single_op_model("FULLY_CONNECTED", [("x", [2, 6], np.int16, (0.5, 0)), ("const", w, (0.5, 0))],
                         [("y", [2, 3], np.int16, (1.0, 0))])
    assert _backend(mb) == "cpu"
    mb = single_op_model("FULLY_CONNECTED", [("x", [2, 6], np.uint8, (0.5, 128)),
                                             ("const", w.view(np.uint8), (0.5, 128))],
                         [("y", [2, 3], np.uint8, (1.0, 128))])
    assert _backend(mb) == "cpu"
    mb = single_op_model("FULLY_CONNECTED", [("x", [2, 6], np.float32), ("const", w, (0.5, 0))],
                         [("y", [2, 3], np.float32)])
    assert _backend(mb) == "cpu"
    wf = r.normal(size=(5, 6)).astype(np.float32)
    for rows, backend in ((3, "cpu"), (18, "jit")):   # a float FC of fewer than 512 multiply-adds: cpu
        mb = single_op_model("FULLY_CONNECTED", [("x", [rows, 6], np.float32), ("const", wf)],
                             [("y", [rows, 5], np.float32)])
        assert _backend(mb) == backend, rows
    mb = _model((2, 6), w, (0.5, 0), (0.5, 0), (1.0, 0), np.ones(3, np.int32), act=TANH)
    with pytest.raises(PrepareError, match="fused activation 4"):
        run_onert(mb, [_int8(r, (2, 6))])
    mb = _model((2, 6), w, (0.5, 0), (0.5, 0), (1.0, 0), np.ones(3, np.int32), q_b=(0.5, 0))
    with pytest.raises(PrepareError, match="bias scale"):
        run_onert(mb, [_int8(r, (2, 6))])


# int8 BATCH_MATMUL (a quantized attention block's Q @ K^T and P @ V): one compiled loop, against LiteRT's
# builtin kernel, after a resize too; broadcast batch dims stay on the cpu kernel.
def _bmm(l_shape, r_shape, adj_x=False, adj_y=False, q=((0.05, 3), (0.04, -7), (0.02, 5))):
    m = l_shape[-1] if adj_x else l_shape[-2]
    n = r_shape[-2] if adj_y else r_shape[-1]
    return single_op_model("BATCH_MATMUL", [("a", list(l_shape), np.int8, q[0]), ("b", list(r_shape), np.int8, q[1])],
                           [("y", list(l_shape[:-2]) + [m, n], np.int8, q[2])], adj_x=adj_x, adj_y=adj_y)


@pytest.mark.parametrize("l_shape,r_shape,adj_x,adj_y", [((2, 4, 16, 8), (2, 4, 8, 16), False, False),
                                                         ((2, 4, 16, 16), (2, 4, 16, 8), False, False),
                                                         ((3, 9, 5), (3, 7, 9), True, True),
                                                         ((6, 33), (6, 17), True, False)])
def test_batch_matmul_int8(l_shape, r_shape, adj_x, adj_y):
    mb = _bmm(l_shape, r_shape, adj_x, adj_y)
    assert onert_py.infer.session(mb.to_bytes("tflite")).executors[0].backend_names == ["jit"]
    g = rng(len(l_shape) + r_shape[-1])
    a = g.integers(-128, 128, l_shape).astype(np.int8)
    b = g.integers(-128, 128, r_shape).astype(np.int8)
    a.reshape(-1)[:2], b.reshape(-1)[:2] = (-128, 127), (127, -128)
    before = a.copy(), b.copy()
    check_builtin(mb, [a, b])
    np.testing.assert_array_equal(a, before[0])
    np.testing.assert_array_equal(b, before[1])


def test_batch_matmul_int8_resized_and_broadcast():
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    mb = _bmm((2, 3, 4), (2, 4, 5))
    g = rng(11)
    a, b = g.integers(-128, 128, (2, 6, 4)).astype(np.int8), g.integers(-128, 128, (2, 4, 5)).astype(np.int8)
    got = run_interpreter(onert_py.Interpreter(model_content=mb.to_bytes("tflite")), [a, b])
    litert = Interpreter(model_content=mb.to_bytes("tflite"),
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    want = run_interpreter(litert, [a, b])
    assert got[0].shape == (2, 6, 5)
    np.testing.assert_array_equal(got[0], want[0])
    broadcast = _bmm((2, 3, 4), (4, 5))
    assert onert_py.infer.session(broadcast.to_bytes("tflite")).executors[0].backend_names == ["cpu"]
