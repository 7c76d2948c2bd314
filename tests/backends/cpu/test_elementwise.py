"""Binary elementwise kernels against LiteRT's builtin kernels: overflow, division by zero, NaN, +-inf,
signed zeros, fused activations, integer wrap-around."""
import numpy as np
import pytest

from helpers import FORMATS, check_builtin, run_litert_builtin, run_onert, single_op_model

F32 = np.float32
FLT_MAX = np.finfo(F32).max
# pairs (a, b) that overflow float32 in ADD/SUB/MUL/DIV, divide by zero, or carry NaN / inf / -0
A = np.array([1.0, -1.0, 0.0, -0.0, 3e38, -3e38, 1e30, -1e30, np.inf, -np.inf, np.nan, 2.0, -0.0, 0.5, 1e-30, 7.0],
             F32)
B = np.array([0.0, 0.0, 0.0, 0.0, 3e38, 3e38, 1e30, 1e30, 1.0, 1.0, 1.0, np.inf, -1.0, -np.inf, 1e30, -3.0],
             F32)


def assert_same(got, want):
    """Equal values (NaN where LiteRT has NaN) and the same sign of zero."""
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_array_equal(g, w)          # NaN == NaN for assert_array_equal
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w), err_msg="sign of zero")


def check_exact(mb, inputs):
    want = run_litert_builtin(mb, inputs)
    for fmt in FORMATS:
        assert_same(run_onert(mb, inputs, fmt), want)
    return want


@pytest.mark.parametrize("act", range(6), ids=["NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH", "SIGN_BIT"])
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "DIV"])
def test_float_arithmetic_clamps_to_activation_range(op, act):
    # LiteRT always clamps to the activation range; with no activation (and with TANH / SIGN_BIT, which
    # have no range and are ignored) that is [-FLT_MAX, FLT_MAX]: 1/0 -> FLT_MAX, overflow -> +-FLT_MAX.
    mb = single_op_model(op, [("a", [16], F32), ("b", [16], F32)], [("y", [16], F32)], fused_activation_function=act)
    want = check_exact(mb, [A, B])
    if act in (0, 4, 5):
        assert np.nanmax(np.abs(want[0])) == FLT_MAX       # the reference really clamps: not a vacuous test
    # broadcast and rank-0 forms take other code paths in both runtimes
    mb = single_op_model(op, [("a", [4, 16], F32), ("b", [16], F32)], [("y", [4, 16], F32)],
                         fused_activation_function=act)
    check_exact(mb, [np.stack([A, -A, A[::-1], B]), B])
    for a, b in [(1.0, 0.0), (3e38, 3e38), (-3e38, 3e38), (np.nan, 1.0), (np.inf, 1.0), (-0.0, 1.0)]:
        mb = single_op_model(op, [("a", [], F32), ("b", [], F32)], [("y", [], F32)], fused_activation_function=act)
        check_exact(mb, [np.array(a, F32), np.array(b, F32)])


@pytest.mark.parametrize("act", [0, 3])
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "DIV"])
@pytest.mark.parametrize("shapes", [([1, 64, 64, 16], [1, 1, 1, 16]), ([1, 1, 16], [2, 48, 32, 16]),
                                    ([48, 48, 24], [24])], ids=str)
def test_float_per_channel_operand_on_long_rows(op, act, shapes):
    # A large tensor against a per-channel one (squeeze-excite scales) takes the tiled-rows path, the
    # per-channel operand on either side; the special values run through it too.
    sa, sb = shapes
    out = list(np.broadcast_shapes(tuple(sa), tuple(sb)))
    g = np.random.default_rng(5)
    a = g.normal(size=sa).astype(F32)
    b = g.normal(size=sb).astype(F32)
    a.reshape(-1)[:16] = A
    b.reshape(-1)[:16] = B
    mb = single_op_model(op, [("a", sa, F32), ("b", sb, F32)], [("y", out, F32)], fused_activation_function=act)
    check_exact(mb, [a, b])


def test_overflow_clamp_numbers():
    # The values themselves (independent of LiteRT): 1/0 = FLT_MAX, 1e30*1e30 = FLT_MAX, NaN stays NaN.
    cases = {"DIV": [(1.0, 0.0, FLT_MAX), (-1.0, 0.0, -FLT_MAX), (np.nan, 0.0, np.nan)],
             "MUL": [(1e30, 1e30, FLT_MAX), (-1e30, 1e30, -FLT_MAX)],
             "ADD": [(3e38, 3e38, FLT_MAX), (np.inf, -1.0, FLT_MAX)], "SUB": [(-3e38, 3e38, -FLT_MAX)]}
    for op, rows in cases.items():
        mb = single_op_model(op, [("a", [len(rows)], F32), ("b", [len(rows)], F32)], [("y", [len(rows)], F32)],
                             fused_activation_function=0)
        a, b, want = (np.array(c, F32) for c in zip(*rows))
        for fmt in FORMATS:
            np.testing.assert_array_equal(run_onert(mb, [a, b], fmt)[0], want)


@pytest.mark.parametrize("op", ["SQUARED_DIFFERENCE", "POW", "MAXIMUM", "MINIMUM", "FLOOR_MOD"])
def test_float_ops_without_clamp(op):
    # These have no activation range in LiteRT: overflow gives +-inf (checked against LiteRT, which
    # returns inf for 3e38^2, (3e38 - -3e38)^2, 3e38 ** 2).
    a = np.concatenate([A, np.array([3e38, -3e38, 1e20, 2.0], F32)])
    b = np.concatenate([B, np.array([-3e38, 3e38, 3.0, 200.0], F32)])
    mb = single_op_model(op, [("a", [20], F32), ("b", [20], F32)], [("y", [20], F32)])
    want = check_exact(mb, [a, b])
    if op in ("SQUARED_DIFFERENCE", "POW"):
        assert np.isinf(want[0]).any()


def test_float_floor_div():
    a = np.array([7.0, -7.0, 3e38, -3e38, np.inf, np.nan, -0.0, 1e-30, 5.0], F32)
    b = np.array([2.0, 2.0, 1e-10, 1e-10, 2.0, 1.0, 3.0, 1e30, -np.inf], F32)
    mb = single_op_model("FLOOR_DIV", [("a", [9], F32), ("b", [9], F32)], [("y", [9], F32)])
    want = check_exact(mb, [a, b])
    assert np.isinf(want[0]).any()      # floor(3e38 / 1e-10) overflows to inf: no clamp in FLOOR_DIV


def test_float_floor_div_by_zero_is_refused():
    # LiteRT refuses a zero divisor in FLOOR_DIV for floats as for integers ("Division by 0").
    import onert_py
    mb = single_op_model("FLOOR_DIV", [("a", [3], F32), ("b", [3], F32)], [("y", [3], F32)])
    a, b = np.array([1.0, 2.0, 3.0], F32), np.array([1.0, -0.0, 2.0], F32)
    with pytest.raises(RuntimeError):
        run_litert_builtin(mb, [a, b])
    for fmt in FORMATS:
        with pytest.raises(onert_py.ExecutionError, match="division by zero"):
            run_onert(mb, [a, b], fmt)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
def test_integer_overflow_wraps(op, dtype):
    # LiteRT does not saturate integer ADD/SUB/MUL with no activation: results wrap (two's complement).
    i = np.iinfo(dtype)
    a = np.array([i.max, i.min, i.max, i.min, 1000, -5], dtype)
    b = np.array([1, -1, 2, 2, 1000, 3], dtype) if op != "SUB" else np.array([-1, 1, -2, 2, 1000, 3], dtype)
    mb = single_op_model(op, [("a", [6], dtype), ("b", [6], dtype)], [("y", [6], dtype)], fused_activation_function=0)
    want = check_builtin(mb, [a, b])
    with np.errstate(over="ignore"):
        assert want[0][0] == {"ADD": i.min, "SUB": i.min, "MUL": i.max}[op]   # wrapped (MUL: max * 1)


@pytest.mark.parametrize("act", range(6), ids=["NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH", "SIGN_BIT"])
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "DIV"])
def test_integer_fused_activation(op, act):
    # RELU / RELU_N1_TO_1 / RELU6 clamp integer results too; TANH and SIGN_BIT are ignored (LiteRT).
    a = np.array([5, -7, 3, 100, -100, 0], np.int32)
    b = np.array([2, 3, -1, 7, 9, 4], np.int32)
    mb = single_op_model(op, [("a", [6], np.int32), ("b", [6], np.int32)], [("y", [6], np.int32)],
                         fused_activation_function=act)
    check_builtin(mb, [a, b])


@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM"])
@pytest.mark.parametrize("b_shape", [[37], [1], []], ids=["same", "bcast", "scalar"])
def test_maximum_minimum_nan_and_signed_zero(op, b_shape):
    # LiteRT computes a > b ? a : b (MINIMUM: a < b ? a : b), so a NaN in a gives b, a NaN in b gives
    # NaN, and -0 vs 0 gives b. Checked bit for bit, sign of zero included.
    vals = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.5, 7.0], F32)
    r = np.random.default_rng(3)
    a = r.choice(vals, 37).astype(F32)
    for b_val in (np.nan, 0.0, -0.0, 1.5, -np.inf):
        b = r.choice(vals, 37).astype(F32) if b_shape == [37] else np.full(b_shape, b_val, F32)
        mb = single_op_model(op, [("a", [37], F32), ("b", b_shape, F32)], [("y", [37], F32)])
        check_exact(mb, [a, b])
