"""Binary elementwise kernels against LiteRT's builtin kernels: overflow, division by zero, NaN, +-inf,
signed zeros, fused activations, integer wrap-around."""
import numpy as np
import pytest

import onert_py
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


# ---- float16, uint32, int16 (the dtype audit)

F16 = np.float16
F16_MAX = np.finfo(F16).max
# float16 pairs that overflow (ADD, MUL), carry NaN / inf / -0, tie, and ordinary values
A16 = np.array([6e4, -6e4, 300.0, np.nan, np.inf, -0.0, 0.0, 0.1, 3.3, -7.1, 2.0, -np.inf, 1.5, 1.5], F16)
B16 = np.array([6e4, 6e4, 300.0, 1.0, 1.0, 0.0, -0.0, 0.2, 0.7, 2.3, np.nan, 1.0, 1.5, -1.5], F16)
COMPARISONS = ["EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"]


@pytest.mark.parametrize("act", range(6), ids=["NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH", "SIGN_BIT"])
@pytest.mark.parametrize("op", ["ADD", "MUL"])
def test_float16_add_mul_builtin(op, act):
    # LiteRT's builtin float16 ADD/MUL clamp to the activation range like float32: with no activation
    # to [-65504, 65504], so an overflow gives +-65504, not inf (NaN stays NaN).
    n = len(A16)
    mb = single_op_model(op, [("a", [n], F16), ("b", [n], F16)], [("y", [n], F16)], fused_activation_function=act)
    want = check_exact(mb, [A16, B16])
    if act in (0, 4, 5):
        assert np.nanmax(np.abs(want[0])) == F16_MAX     # the reference really clamps
    r = np.random.default_rng(act)
    a, b = r.uniform(-50, 50, (3, 40)).astype(F16), r.uniform(-50, 50, 40).astype(F16)
    mb = single_op_model(op, [("a", [3, 40], F16), ("b", [40], F16)], [("y", [3, 40], F16)],
                         fused_activation_function=act)
    check_exact(mb, [a, b])
    mb = single_op_model(op, [("a", [], F16), ("b", [], F16)], [("y", [], F16)], fused_activation_function=act)
    check_exact(mb, [np.array(6e4, F16), np.array(6e4, F16)])


@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM"] + COMPARISONS)
def test_float16_max_min_comparisons_builtin(op):
    n = len(A16)
    out = F16 if op in ("MAXIMUM", "MINIMUM") else np.bool_
    mb = single_op_model(op, [("a", [n], F16), ("b", [n], F16)], [("y", [n], out)])
    check_exact(mb, [A16, B16])
    mb = single_op_model(op, [("a", [2, n], F16), ("b", [], F16)], [("y", [2, n], out)])
    check_exact(mb, [np.stack([A16, B16]), np.array(1.5, F16)])


@pytest.mark.parametrize("op", ["SUB", "DIV", "SQUARED_DIFFERENCE"])
def test_float16_sub_div_squared_difference_xnnpack(op):
    # Only XNNPACK runs these in float16. On finite values without overflow it rounds to float16 after
    # every step (SQUARED_DIFFERENCE's difference too, measured: rounding once from float32 differs in
    # a third of the elements), as numpy's float16 arithmetic does: bit-exact.
    r = np.random.default_rng(1)
    a = r.uniform(-100, 100, 4000).astype(F16)
    b = r.uniform(-100, 100, 4000).astype(F16)
    b[b == 0] = 1
    opts = {} if op == "SQUARED_DIFFERENCE" else {"fused_activation_function": 0}
    mb = single_op_model(op, [("a", [4000], F16), ("b", [4000], F16)], [("y", [4000], F16)], **opts)
    check_builtin(mb, [a, b], rtol=0, atol=0, delegate=True)
    if op != "SQUARED_DIFFERENCE":
        mb = single_op_model(op, [("a", [4000], F16), ("b", [4000], F16)], [("y", [4000], F16)],
                             fused_activation_function=3)   # RELU6
        check_builtin(mb, [a, b], rtol=0, atol=0, delegate=True)


def test_float16_sub_div_clamp_like_add():
    # Overflow and division by zero follow the builtin ADD/MUL float16 rule (clamp to +-65504, NaN
    # stays NaN), not XNNPACK's inf; checked against the numbers themselves.
    cases = {"SUB": [(6e4, -6e4, F16_MAX), (-6e4, 6e4, -F16_MAX), (np.nan, 1.0, np.nan), (1.5, 0.25, 1.25)],
             "DIV": [(1.0, 0.0, F16_MAX), (-1.0, 0.0, -F16_MAX), (6e4, 0.5, F16_MAX), (3.0, 4.0, 0.75)]}
    for op, rows in cases.items():
        a, b, want = (np.array(c, F16) for c in zip(*rows))
        mb = single_op_model(op, [("a", [4], F16), ("b", [4], F16)], [("y", [4], F16)], fused_activation_function=0)
        for fmt in FORMATS:
            got = run_onert(mb, [a, b], fmt)[0]
            assert got.dtype == F16
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("act", range(6), ids=["NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH", "SIGN_BIT"])
def test_mul_uint32_builtin(act):
    # wraps modulo 2^32; RELU_N1_TO_1's -1 wraps to 2^32-1, so LiteRT's min(max(x, lo), 1) is 1 everywhere
    U = np.uint32
    a = np.array([4000000000, 3, 7, 0, 65536, 123456, 2**32 - 1], U)
    b = np.array([2, 5, 1, 9, 65536, 1000, 2**32 - 1], U)
    mb = single_op_model("MUL", [("a", [7], U), ("b", [7], U)], [("y", [7], U)], fused_activation_function=act)
    want = check_builtin(mb, [a, b])
    if act == 0:
        np.testing.assert_array_equal(want[0], (a.astype(object) * b.astype(object)) % 2**32)
    mb = single_op_model("MUL", [("a", [2, 7], U), ("b", [], U)], [("y", [2, 7], U)], fused_activation_function=act)
    check_builtin(mb, [np.stack([a, b]), np.array(3, U)])


@pytest.mark.parametrize("op", COMPARISONS)
def test_int16_comparisons(op):
    I16 = np.int16
    r = np.random.default_rng(2)
    a = r.integers(-5, 5, 40).astype(I16)
    a[:4] = [-32768, 32767, 0, -1]
    b = r.integers(-5, 5, 40).astype(I16)
    b[:4] = [32767, 32767, 0, 1]
    for sb, bb in [([40], b), ([], np.array(0, I16))]:
        mb = single_op_model(op, [("a", [40], I16), ("b", sb, I16)], [("y", [40], np.bool_)])
        if op == "NOT_EQUAL":
            # LiteRT 2.3 leaves NOT_EQUAL's int16 output uninitialised (a LiteRT bug): numpy is the reference
            for fmt in FORMATS:
                np.testing.assert_array_equal(run_onert(mb, [a, bb], fmt)[0], a != bb)
        else:
            check_builtin(mb, [a, bb])


def test_floor_div_int64():
    # Registered although LiteRT 2.3 rejects int64 FLOOR_DIV: TensorFlow's floor division, checked
    # against Python's integer floor division (rounds toward -inf), including the int64 extremes.
    I64 = np.int64
    big = np.iinfo(I64)
    a = np.array([7, -7, 7, -7, 0, big.max, big.min, big.min + 1, 1 << 40, -(1 << 40) - 1], I64)
    b = np.array([2, 2, -2, -2, 5, 3, 7, -1, -(1 << 20), 3], I64)
    want = np.array([x // y for x, y in zip(a.tolist(), b.tolist())], I64)
    mb = single_op_model("FLOOR_DIV", [("a", [10], I64), ("b", [10], I64)], [("y", [10], I64)])
    for fmt in FORMATS:
        np.testing.assert_array_equal(run_onert(mb, [a, b], fmt)[0], want)


@pytest.mark.parametrize("act", [0, 1, 3])
def test_sub_int16(act):
    # Registered although LiteRT aborts on non-quantized int16 SUB: two's-complement wrap-around (as
    # int16 ADD/MUL do in LiteRT), then the activation's clamp, checked against Python integers.
    I16 = np.int16
    a = np.array([-32768, 32767, 100, -5, 0, 7, 32767], I16)
    b = np.array([1, -1, 300, 9, -32768, 7, 32767], I16)
    wrapped = [((x - y + 32768) % 65536) - 32768 for x, y in zip(a.tolist(), b.tolist())]
    lo, hi = {0: (-32768, 32767), 1: (0, 32767), 3: (0, 6)}[act]
    want = np.array([min(max(w, lo), hi) for w in wrapped], I16)
    mb = single_op_model("SUB", [("a", [7], I16), ("b", [7], I16)], [("y", [7], I16)], fused_activation_function=act)
    for fmt in FORMATS:
        np.testing.assert_array_equal(run_onert(mb, [a, b], fmt)[0], want)


@pytest.mark.parametrize("op,ins,out,msg", [
    ("ADD", [np.int8, np.int8], np.int8, r"input 0 \('a'\) has type int8, not supported"),   # quantized only
    ("MUL", [np.uint16, np.uint16], np.uint16, "has type uint16, not supported"),
    ("ADD", [np.float32, np.int32], np.float32, r"input 1 \('b'\) has type int32, input 0 has float32"),
    ("SUB", [np.float32, np.float32], np.float16, "output type float16 differs"),
    ("MAXIMUM", [np.float64, np.float64], np.float64, "has type float64, not supported"),
    ("LESS", [np.int32, np.int32], np.int32, "expected bool"),
    ("EQUAL", [np.int32, np.int64], np.bool_, r"input 1 \('b'\) has type int64"),
    ("LOGICAL_AND", [np.int32, np.int32], np.int32, "has type int32, not supported"),
    ("FLOOR_MOD", [np.uint8, np.uint8], np.uint8, "has type uint8, not supported"),
])
def test_unsupported_types_are_prepare_errors(op, ins, out, msg):
    import onert_py
    mb = single_op_model(op, [("a", [3], ins[0]), ("b", [3], ins[1])], [("y", [3], out)])
    with pytest.raises(onert_py.PrepareError, match=msg):
        onert_py.infer.session(mb.to_bytes("tflite"))


@pytest.mark.parametrize("opcode", ["LOGICAL_AND", "LOGICAL_OR"])
@pytest.mark.parametrize("shapes", [([], []), ([6], [6]), ([2, 3], [3]), ([6], []), ([1], [])], ids=str)
def test_logical_binary(opcode, shapes):
    """LOGICAL_AND / LOGICAL_OR (bitwise & and | on bools: a loop cond's two verdicts) over every pair of
    truth values, broadcast and rank-0, against LiteRT."""
    out = list(np.broadcast_shapes(*map(tuple, shapes)))
    mb = single_op_model(opcode, [("a", shapes[0], np.bool_), ("b", shapes[1], np.bool_)], [("y", out, np.bool_)])
    g = np.random.default_rng(3)
    for _ in range(6):
        check_builtin(mb, [g.integers(0, 2, s).astype(np.bool_) for s in shapes])
    for a, b in [(False, False), (False, True), (True, False), (True, True)]:
        check_builtin(mb, [np.full(shapes[0], a), np.full(shapes[1], b)])


@pytest.mark.parametrize("opcode", ["ADD", "MUL", "SUB", "DIV"])
@pytest.mark.parametrize("values", [(3e38, 3e38), (-3e38, 3e38), (1.5, 2.0), (np.inf, 1.0), (np.nan, 1.0)])
def test_one_element_arithmetic_clamps_like_litert(opcode, values):
    # [1]-shaped values (what converters emit for loop scalars) take a fast path that only looks for
    # +-inf; the result must stay LiteRT's builtin kernels': overflow clamped to +-FLT_MAX, NaN kept
    # (XNNPACK, LiteRT's default, does not clamp)
    a, b = values
    if opcode == "SUB":
        b = -b
    mb = single_op_model(opcode, [("a", [1], np.float32), ("b", [1], np.float32)], [("y", [1], np.float32)],
                         fused_activation_function=0)
    with np.errstate(all="ignore"):
        check_builtin(mb, [np.array([a], np.float32), np.array([b], np.float32)])


@pytest.mark.parametrize("opcode", ["ADD", "SUB", "MUL", "DIV"])
@pytest.mark.parametrize("act", [0, 1, 2, 3])
@pytest.mark.parametrize("shapes", [([1], [1]), ([1], []), ([], [1]), ([1, 1], []), ([1], "const"), ([4], "const"),
                                    ("const", [1])], ids=str)
def test_one_element_values_match_litert_bit_for_bit(opcode, act, shapes):
    """[1]-shaped operands (the loop values converters emit) take a fast path (run_one; before this
    test, RELU_N1_TO_1 slipped through it unclamped, its range being symmetric like NONE's):
    random pairs over many magnitudes, overflow to +-inf (clamped to +-FLT_MAX), NaN, signed zeros,
    subnormals and 0 divisors must give LiteRT's float32 results exactly (its builtin kernels, which
    clamp an overflow to +-FLT_MAX; XNNPACK leaves it inf)."""
    g = np.random.default_rng(7)
    big = np.finfo(np.float32).max
    pairs = [(big, big), (-big, big), (np.inf, 1.0), (np.nan, 2.0), (-0.0, 0.0), (1e-45, 3.0),
             (1.0, 0.0), (-1.0, 0.0), (0.0, 0.0), (3e38, -0.5)]
    pairs += [tuple((g.normal(size=2) * 10.0 ** g.integers(-30, 30, size=2)).astype(np.float32)) for _ in range(30)]
    # Operands of shape [1] or rank 0 (a numpy scalar: read with float()), a [1, 1] value, and a rank-0
    # constant beside [1] or [4] (the [4] path reads it as a rank-0 array): one model for the
    # variable forms, one per pair for the constant ones.
    out = list(np.broadcast_shapes(*(() if s == "const" else tuple(s) for s in shapes)))

    def model(a, b):
        specs = [("const", np.array(x, np.float32)) if s == "const" else (name, s, np.float32)
                 for name, s, x in (("a", shapes[0], a), ("b", shapes[1], b))]
        return single_op_model(opcode, specs, [("o", out, np.float32)], fused_activation_function=act)

    def fed(a, b):
        return [np.full(s, x, np.float32) for s, x in zip(shapes, (a, b)) if s != "const"]

    sess = None if "const" in shapes else onert_py.infer.session(model(0, 0).to_bytes("tflite"), backends="cpu")
    for a, b in pairs if sess is not None else pairs[:16]:
        mb = model(a, b)
        inputs = fed(a, b)
        got = (sess or onert_py.infer.session(mb.to_bytes("tflite"), backends="cpu")).infer(inputs)[0]
        want = run_litert_builtin(mb, inputs)[0]
        np.testing.assert_array_equal(got, want, err_msg=f"{opcode} act={act} of {a!r}, {b!r}")
