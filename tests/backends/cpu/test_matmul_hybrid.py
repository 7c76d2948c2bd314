"""Hybrid (dynamic-range) kernels: float32 activations with int8 weights, as LiteRT's builtin kernels run
them (each input row quantized to int8 on the fly, an integer matmul, the result scaled back to float).

Tolerance: onert-py reproduces LiteRT's operation order in float32 (the row's scale, the int8 rounding of
its x86 NEON_2_SSE code, the int32 sum, float32(acc) * float32(row scale * weight scale) + bias), so the
outputs agree to float rounding: rtol 1e-6 (a few float32 ulps) with atol 1e-7 * the output's magnitude for
values that cancel to near 0. On the cases here they are in fact equal bit for bit (checked separately
by test_hybrid_fully_connected_bit_exact); the tolerance only keeps the other tests from depending on
summation order of BLAS, which never applies to the exact integer sums but might to fused activations."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import onert_py
from onert_py.errors import PrepareError
from helpers import FORMATS, rng, run_litert_builtin, run_onert, single_op_model

RTOL = 1e-6
DATA = Path(__file__).parent / "data"


def _close(got, expected):
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        atol = 1e-7 * max(1.0, float(np.abs(e).max(initial=0)))
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=atol)


def _fc_model(x_shape, w, w_q, bias, act=0, asym=False, keep=False, units=None):
    units = w.shape[0]
    rows = int(np.prod(x_shape)) // w.shape[1]
    out_shape = list(x_shape[:-1]) + [units] if keep else [rows, units]
    inputs = [("x", list(x_shape), np.float32), ("const", w, w_q), None if bias is None else ("const", bias)]
    return single_op_model("FULLY_CONNECTED", inputs, [("y", out_shape, np.float32)],
                           fused_activation_function=act, asymmetric_quantize_inputs=asym, keep_num_dims=keep)


def _weights(r, units, depth, per_channel):
    w = r.integers(-127, 128, (units, depth)).astype(np.int8)
    if per_channel:
        scales = (10.0 ** r.uniform(-4, 0, units)).astype(np.float32)      # four orders of magnitude
        return w, (scales, np.zeros(units, np.int64), 0)
    return w, (float(10.0 ** r.uniform(-3, 0)), 0)


def _input(r, shape, magnitude):
    return (r.standard_normal(shape) * magnitude).astype(np.float32)


CASES = [  # (x shape, units, act, bias, magnitude)
    ((1, 8), 4, 0, True, 1.0),
    ((3, 16), 5, 1, True, 10.0),
    ((2, 7), 3, 3, False, 0.01),       # depth below one 8-wide vector: std::round only
    ((5, 13), 6, 2, True, 100.0),      # 8 vector columns + 5 scalar
    ((4, 33), 9, 0, True, 1e-3),
    ((2, 3, 24), 7, 0, True, 1.0),     # rank 3, flattened rows
    ((2, 1500), 3, 0, True, 1.0),      # int32 sums beyond 2**24: float32(acc) rounds
    ((6, 64), 17, 1, False, 3.0),
]


@pytest.mark.parametrize("asym", [False, True], ids=["symmetric", "asymmetric"])
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_hybrid_fully_connected_matches_litert(case, per_channel, asym):
    x_shape, units, act, with_bias, mag = CASES[case]
    r = rng(100 + case)
    w, wq = _weights(r, units, x_shape[-1], per_channel)
    bias = r.standard_normal(units).astype(np.float32) if with_bias else None
    mb = _fc_model(x_shape, w, wq, bias, act, asym)
    x = _input(r, x_shape, mag)
    if asym:
        x = x + np.float32(mag * 0.7)     # off-centre rows: a zero point away from 0
    expected = run_litert_builtin(mb, [x])
    before = x.copy()
    for fmt in FORMATS:
        _close(run_onert(mb, [x], fmt), expected)
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("asym", [False, True], ids=["symmetric", "asymmetric"])
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
def test_hybrid_fully_connected_bit_exact(per_channel, asym):
    r = rng(7)
    for trial in range(20):
        m, depth, units = int(r.integers(1, 6)), int(r.integers(1, 80)), int(r.integers(1, 12))
        w, wq = _weights(r, units, depth, per_channel)
        bias = r.standard_normal(units).astype(np.float32)
        mb = _fc_model((m, depth), w, wq, bias, 0, asym)
        x = _input(r, (m, depth), 10.0 ** r.uniform(-3, 3))
        if asym:
            x += np.float32(r.uniform(-2, 2)) * np.abs(x).max()
        (expected,) = run_litert_builtin(mb, [x])
        (got,) = run_onert(mb, [x])
        np.testing.assert_array_equal(got, expected, err_msg=f"trial {trial}: m={m} depth={depth} units={units}")


@pytest.mark.parametrize("asym", [False, True], ids=["symmetric", "asymmetric"])
def test_hybrid_fully_connected_zero_rows_and_one_sided_rows(asym):
    """An all-zero row (scale 1, zeros), rows of one sign (the asymmetric zero point at -128 or 127), and a
    row with a single nonzero value; all-zero input (LiteRT's shortcut: the bias alone)."""
    r = rng(11)
    w, wq = _weights(r, 5, 12, False)
    bias = r.standard_normal(5).astype(np.float32)
    mb = _fc_model((4, 12), w, wq, bias, 0, asym)
    x = _input(r, (4, 12), 2.0)
    x[0] = 0
    x[1] = np.abs(x[1])
    x[2] = -np.abs(x[2])
    x[3] = 0
    x[3, 5] = 1.5
    expected = run_litert_builtin(mb, [x])
    _close(run_onert(mb, [x]), expected)
    z = np.zeros((4, 12), np.float32)
    _close(run_onert(mb, [z]), run_litert_builtin(mb, [z]))


@pytest.mark.parametrize("act", [0, 1, 2, 3], ids=["NONE", "RELU", "RELU_N1_TO_1", "RELU6"])
def test_hybrid_fully_connected_activations_keep_num_dims(act):
    r = rng(20 + act)
    w, wq = _weights(r, 6, 10, True)
    bias = r.standard_normal(6).astype(np.float32)
    mb = _fc_model((2, 3, 10), w, wq, bias, act, keep=True)
    x = _input(r, (2, 3, 10), 1.0)
    _close(run_onert(mb, [x]), run_litert_builtin(mb, [x]))


def test_hybrid_weights_without_quantization_stay_refused():
    # int8 weights with no scale are not dynamic-range weights: still a type mismatch
    mb = _fc_model((2, 8), np.zeros((3, 8), np.int8), None, None)
    with pytest.raises(PrepareError, match=r"input 1 \('const1'\) has type int8, input 0 has float32"):
        onert_py.infer.session(mb.to_bytes("tflite"))


def test_hybrid_refuses_a_non_float_bias_and_bad_channel_axis():
    r = rng(3)
    w, _ = _weights(r, 4, 6, False)
    mb = single_op_model("FULLY_CONNECTED", [("x", [2, 6], np.float32), ("const", w, (0.1, 0)),
                                             ("const", np.zeros(4, np.int32))],
                         [("y", [2, 4], np.float32)], fused_activation_function=0)
    with pytest.raises(PrepareError, match="bias of a hybrid FULLY_CONNECTED must be float32"):
        onert_py.infer.session(mb.to_bytes("tflite"))
    mb = _fc_model((2, 6), w, (np.full(6, 0.1, np.float32), np.zeros(6, np.int64), 1), None)
    with pytest.raises(PrepareError, match="one scale per output unit along dimension 0"):
        onert_py.infer.session(mb.to_bytes("tflite"))


def test_converter_dynamic_range_mlp_matches_litert():
    """data/mlp_dynamic_range.tflite: a Keras MLP (64 -> Dense 48 relu -> Dense 32 tanh -> Dense 10, batch 3)
    converted by TFLiteConverter with optimizations=[Optimize.DEFAULT] and no representative dataset, so
    the two large layers are hybrid FULLY_CONNECTED ops (per-channel int8 weights, asymmetric inputs, as
    the converter sets them) and the small last layer stays float.

    The hybrid layers agree bit for bit with LiteRT (the tests above); the model's TANH and its float
    FULLY_CONNECTED differ from LiteRT's builtin kernels by an ulp or two (tanh's approximation, the
    float sum's order), hence rtol 1e-5 / atol 1e-6 on outputs of magnitude ~1."""
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    data = (DATA / "mlp_dynamic_range.tflite").read_bytes()
    it = litert.Interpreter(model_content=data,
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    hybrid = [op for op in it._get_ops_details() if op["op_name"] == "FULLY_CONNECTED"
              and op["operand_types"][:2] == [np.float32, np.int8]]
    assert len(hybrid) == 2
    it.allocate_tensors()
    session = onert_py.infer.session(data)
    r = rng(42)
    for scale in (0.01, 1.0, 30.0):
        x = (r.standard_normal((3, 64)) * scale).astype(np.float32)
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        expected = it.get_tensor(it.get_output_details()[0]["index"])
        (got,) = session.infer([x])
        assert got.shape == expected.shape and got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------- hybrid BATCH_MATMUL
# LiteRT's reference hybrid BatchMatMul (float32 lhs, constant int8 rhs): each lhs row quantized as for
# FULLY_CONNECTED, exact int32 sums, asymmetric offsets removed in float32. onert-py reproduces that
# arithmetic, so the outputs are compared for equality.

def _bmm_model(l_shape, w, w_q, adj_x=False, adj_y=False, asym=False):
    lhs = list(l_shape)
    m, k = (lhs[-1], lhs[-2]) if adj_x else (lhs[-2], lhs[-1])
    n = w.shape[-2] if adj_y else w.shape[-1]
    batch = np.broadcast_shapes(tuple(lhs[:-2]), w.shape[:-2])
    return single_op_model("BATCH_MATMUL", [("x", lhs, np.float32), ("const", w, w_q)],
                           [("y", list(batch) + [m, n], np.float32)],
                           adj_x=adj_x, adj_y=adj_y, asymmetric_quantize_inputs=asym)


BMM_CASES = [  # (lhs shape, rhs shape, adj_x, adj_y, magnitude)
    ((3, 8), (8, 5), False, False, 1.0),
    ((4, 13), (6, 13), False, True, 10.0),          # adj_y: rhs [N, K]
    ((13, 4), (13, 6), True, False, 0.01),          # adj_x
    ((2, 5, 21), (21, 7), False, False, 100.0),     # rank 3 lhs, rank 2 rhs (broadcast)
    ((2, 5, 21), (2, 21, 7), False, False, 1.0),    # batch on both sides
    ((2, 5, 21), (1, 21, 7), False, False, 1.0),    # rhs [1, K, N]: LiteRT folds the lhs batch in
    ((3, 9, 2), (3, 6, 9), True, True, 1e-3),       # both adjoints
    ((1, 2, 3, 40), (2, 40, 4), False, False, 3.0), # rank 4 lhs with one batch dim above 1
    ((2, 1500), (1500, 3), False, False, 1.0),      # int32 sums beyond 2**24
    ((1, 7), (7, 1), False, False, 1.0),
]


def _bmm_weights(r, w_shape, adj_y, per_channel):
    w = r.integers(-127, 128, w_shape).astype(np.int8)
    if per_channel:
        axis = len(w_shape) - (2 if adj_y else 1)
        n = w_shape[axis]
        return w, ((10.0 ** r.uniform(-4, 0, n)).astype(np.float32), np.zeros(n, np.int64), axis)
    return w, (float(10.0 ** r.uniform(-3, 0)), 0)


@pytest.mark.parametrize("asym", [False, True], ids=["symmetric", "asymmetric"])
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("case", range(len(BMM_CASES)))
def test_hybrid_batch_matmul_bit_exact(case, per_channel, asym):
    l_shape, w_shape, adj_x, adj_y, mag = BMM_CASES[case]
    r = rng(300 + case)
    w, wq = _bmm_weights(r, w_shape, adj_y, per_channel)
    mb = _bmm_model(l_shape, w, wq, adj_x, adj_y, asym)
    for trial in range(3):
        x = _input(r, l_shape, mag * 10.0 ** trial)
        if asym:
            x += np.float32(r.uniform(-2, 2)) * np.abs(x).max()
        if trial == 2:
            x.reshape(-1)[: x.size // 3] = 0          # some all-zero rows
        (expected,) = run_litert_builtin(mb, [x])
        before = x.copy()
        for fmt in FORMATS:
            (got,) = run_onert(mb, [x], fmt)
            assert got.shape == expected.shape and got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected, err_msg=f"trial {trial}")
        np.testing.assert_array_equal(x, before)


def test_hybrid_batch_matmul_random_shapes_bit_exact():
    r = rng(17)
    for trial in range(30):
        m, k, n = (int(v) for v in r.integers(1, 40, 3))
        adj_x, adj_y, asym, pc = (bool(v) for v in r.integers(0, 2, 4))
        l_shape = (int(r.integers(1, 4)),) + ((k, m) if adj_x else (m, k))
        w_shape = (n, k) if adj_y else (k, n)
        w, wq = _bmm_weights(r, w_shape, adj_y, pc)
        mb = _bmm_model(l_shape, w, wq, adj_x, adj_y, asym)
        x = _input(r, l_shape, 10.0 ** r.uniform(-3, 3))
        if asym:
            x += np.float32(r.uniform(-2, 2)) * np.abs(x).max()
        (expected,) = run_litert_builtin(mb, [x])
        (got,) = run_onert(mb, [x])
        np.testing.assert_array_equal(got, expected, err_msg=f"trial {trial}")


def test_hybrid_batch_matmul_refusals():
    r = rng(5)
    w = r.integers(-127, 128, (8, 4)).astype(np.int8)
    # per-channel scales along the contraction dim
    mb = _bmm_model((3, 8), w, (np.full(8, 0.1, np.float32), np.zeros(8, np.int64), 0))
    with pytest.raises(PrepareError, match="one scale per output column along dimension 1"):
        onert_py.infer.session(mb.to_bytes("tflite"))
    # an int8 rhs without quantization is not hybrid: a type mismatch as before
    mb = _bmm_model((3, 8), w, None)
    with pytest.raises(PrepareError, match=r"has type int8"):
        onert_py.infer.session(mb.to_bytes("tflite"))
    # two lhs batch dims above 1: LiteRT's kernel reads the wrong rows' scales there
    mb = _bmm_model((2, 3, 5, 8), w, (0.1, 0))
    with pytest.raises(PrepareError, match="indexes the lhs rows' scales wrongly"):
        onert_py.infer.session(mb.to_bytes("tflite"))
    # a non-constant int8 rhs
    mb = single_op_model("BATCH_MATMUL", [("x", [3, 8], np.float32), ("w", [8, 4], np.int8, (0.1, 0))],
                         [("y", [3, 4], np.float32)], adj_x=False, adj_y=False)
    with pytest.raises(PrepareError, match="needs a constant int8 rhs"):
        onert_py.infer.session(mb.to_bytes("tflite"))
