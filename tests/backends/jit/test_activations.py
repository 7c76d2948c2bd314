"""The jit backend's PRELU and HARD_SWISH (backends/jit/elementwise.py: per-op kernels generated from the
ops' expressions): taken for large static float32 tensors, bit for bit the cpu backend's (signed zeros,
+-inf and NaN included), PRELU bit for bit LiteRT's builtin kernel too, every way alpha broadcasts, and
the shapes they leave to cpu."""
from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("numba")

import onert_py  # noqa: E402
from helpers import declared_backends, rng, run_interpreter, run_litert, run_litert_builtin, single_op_model  # noqa: E402
from onert_py.errors import PrepareError  # noqa: E402

SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -3.0, 3.0, 6.0, -1e-30, 1e30], np.float32)


def _x(shape, seed):
    x = (rng(seed).standard_normal(shape) * 4).astype(np.float32)
    x.reshape(-1)[:SPECIAL.size] = SPECIAL
    return x


def _run(mb, inputs, backends):
    sess = onert_py.infer.session(mb.to_bytes("tflite"), backends=backends)
    return sess.executors[0].backend_names, sess.infer(inputs)[0]


def _same_bits(got, want):
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg="sign of zero")


@pytest.mark.parametrize("alpha_shape", [(16,), (1, 1, 16), (1,), (24, 1, 16), (1, 24, 1, 1)], ids=str)
@pytest.mark.parametrize("constant", [True, False], ids=["const_alpha", "input_alpha"])
def test_prelu_bit_exact(alpha_shape, constant):
    xs = (1, 24, 20, 16)
    x = _x(xs, 1)
    alpha = rng(2).uniform(-2.0, 2.5, alpha_shape).astype(np.float32)
    alpha.reshape(-1)[0] = 0.0
    alpha_spec = ("const", alpha) if constant else ("alpha", list(alpha_shape), np.float32)
    mb = single_op_model("PRELU", [("x", list(xs), np.float32), alpha_spec], [("y", list(xs), np.float32)])
    inputs = [x] if constant else [x, alpha]
    backends, got = _run(mb, inputs, "jit;cpu")
    assert backends == ["jit"]
    _same_bits(got, run_litert_builtin(mb, inputs)[0])
    _same_bits(got, _run(mb, inputs, "cpu")[1])


@pytest.mark.parametrize("xs", [(1, 64, 64, 3), (2, 33, 17, 8), (5000,)], ids=str)
def test_hard_swish_bit_exact(xs):
    x = _x(xs, 3)
    mb = single_op_model("HARD_SWISH", [("x", list(xs), np.float32)], [("y", list(xs), np.float32)])
    backends, got = _run(mb, [x], "jit;cpu")
    assert backends == ["jit"]
    _same_bits(got, _run(mb, [x], "cpu")[1])
    # LiteRT's optimized float kernel rounds differently (a third of these values differ in the last
    # bit), so against it: within a float32 rounding or two
    want = run_litert_builtin(mb, [x])[0]
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=1e-37, equal_nan=True)
    # an independent formula: x * relu6(x + 3) / 6, each step rounded to float32
    with np.errstate(invalid="ignore"):
        want = (x * np.clip(x + np.float32(3), np.float32(0), np.float32(6))) / np.float32(6)
    _same_bits(got, want)


def test_small_and_dynamic_shapes_stay_on_cpu():
    small = single_op_model("HARD_SWISH", [("x", [3, 5], np.float32)], [("y", [3, 5], np.float32)])
    assert _run(small, [_x((3, 5), 5)], "jit;cpu")[0] == ["cpu"]
    dyn = single_op_model("PRELU", [("x", [-1, 64, 16], np.float32), ("const", np.ones(16, np.float32))],
                          [("y", [-1, 64, 16], np.float32)])
    assert declared_backends(dyn) == ["cpu"]   # as declared: the jit kernel takes static shapes only
    x = _x((8, 64, 16), 6)
    sess = onert_py.infer.session(dyn.to_bytes("tflite"))
    got = sess.infer([x])[0]   # compiled again for the shape it runs with: the jit takes it
    assert sess.executors[0].backend_names == ["jit"]
    _same_bits(got, _run(dyn, [x], "cpu")[1])


# RESIZE_BILINEAR (backends/jit/image.py): the cpu kernel's passes in one numba pass each
@pytest.mark.parametrize("xs,size", [((1, 24, 24, 48), (48, 48)), ((2, 9, 16, 5), (36, 64)),
                                     ((1, 40, 30, 16), (17, 11)), ((1, 1, 7, 64), (5, 14))], ids=str)
@pytest.mark.parametrize("align,half", [(False, False), (True, False), (False, True)],
                         ids=["plain", "align_corners", "half_pixel"])
def test_resize_bilinear_bit_exact(xs, size, align, half):
    x = _x(xs, 7)
    out = [xs[0], *size, xs[3]]
    mb = single_op_model("RESIZE_BILINEAR", [("x", list(xs), np.float32),
                                             ("const", np.array(size, np.int32))],
                         [("y", out, np.float32)], align_corners=align, half_pixel_centers=half)
    backends, got = _run(mb, [x], "jit;cpu")
    assert backends == ["jit"]
    _same_bits(got, _run(mb, [x], "cpu")[1])
    finite = np.isfinite(x).all(axis=(1, 2), keepdims=True)   # channels holding no inf/NaN
    want = run_litert(mb, [x])[0]     # LiteRT's default path, which the cpu kernel matches bit for bit
    _same_bits(np.where(finite, got, 0), np.where(finite, want, 0))


def test_resize_bilinear_other_shapes_stay_on_cpu():
    size = ("const", np.array([4, 4], np.int32))
    small = single_op_model("RESIZE_BILINEAR", [("x", [1, 2, 2, 3], np.float32), size],
                            [("y", [1, 4, 4, 3], np.float32)])
    assert _run(small, [_x((1, 2, 2, 3), 8)], "jit;cpu")[0] == ["cpu"]
    given = single_op_model("RESIZE_BILINEAR", [("x", [1, 32, 32, 8], np.float32), ("size", [2], np.int32)],
                            [("y", [1, -1, -1, 8], np.float32)])
    backends, got = _run(given, [_x((1, 32, 32, 8), 9), np.array([64, 48], np.int32)], "jit;cpu")
    assert backends == ["cpu"] and got.shape == (1, 64, 48, 8)


def test_declared_output_not_the_broadcast_stays_on_cpu():
    # a hostile file: [64, 64] + [64] declared [2, 64, 64]; the jit kernel would fill the declared shape
    mb = single_op_model("ADD", [("x", [64, 64], np.float32), ("const", np.ones(64, np.float32))],
                         [("o", [2, 64, 64], np.float32)], fused_activation_function=0)
    x = _x((64, 64), 10)
    backends, got = _run(mb, [x], "jit;cpu")
    assert backends == ["cpu"]
    np.testing.assert_array_equal(got, _run(mb, [x], "cpu")[1])


def test_rank_beyond_litert_stays_on_cpu():
    # the fuzz case: a 40-dimensional ADD. numpy's broadcast_shapes refuses over 32 dims with a
    # RuntimeError: the jit backend's accepts declines, and the cpu kernel's refusal is a clean
    # PrepareError naming the op
    shape = [1] * 36 + [2, 2, 2, 2]
    for y_shape in (shape, [2, 2]):
        mb = single_op_model("ADD", [("x", shape, np.float32), ("y", y_shape, np.float32)],
                             [("o", shape, np.float32)], fused_activation_function=0)
        with pytest.raises(PrepareError, match=r"operator 0 \(ADD\).*32 dimensions"):
            onert_py.infer.session(mb.to_bytes("tflite"), backends="jit;cpu")
    # 7 dimensions, past LiteRT's 6: left to cpu, which runs it
    shape7 = [2] * 7
    mb = single_op_model("ADD", [("x", shape7, np.float32), ("y", shape7, np.float32)], [("o", shape7, np.float32)],
                         fused_activation_function=0)
    x = _x(tuple(shape7), 11)
    backends, got = _run(mb, [x, x], "jit;cpu")
    assert backends == ["cpu"]
    np.testing.assert_array_equal(got, _run(mb, [x, x], "cpu")[1])


# 8-bit-input SOFTMAX (backends/jit/activations.py): every value and parameter case is in
# tests/backends/cpu/test_activations_quantized.py (run_onert runs both backends there, against LiteRT);
# here, that the compiled loop is the kernel taken, and its cpu fallbacks.
@pytest.mark.parametrize("dt, out, q_out", [(np.int8, np.int8, (1 / 256, -128)), (np.uint8, np.uint8, (0.003, 7)),
                                            (np.int8, np.int16, (1 / 32768, 0))])
def test_softmax_8bit_runs_compiled(dt, out, q_out):
    info = np.iinfo(dt)
    x = rng(8).integers(int(info.min), int(info.max), (3, 1000), endpoint=True).astype(dt)
    mb = single_op_model("SOFTMAX", [("x", [3, 1000], dt, (0.07, 3))], [("y", [3, 1000], out, q_out)], beta=1.3)
    backends, got = _run(mb, [x], "jit;cpu")
    assert backends == ["jit"]
    np.testing.assert_array_equal(got, run_litert_builtin(mb, [x])[0])


def test_softmax_int16_and_dynamic_stay_on_cpu():
    mb = single_op_model("SOFTMAX", [("x", [2, 5], np.int16, (0.01, 0))], [("y", [2, 5], np.int16, (1 / 32768, 0))])
    assert _run(mb, [np.zeros((2, 5), np.int16)], "jit;cpu")[0] == ["cpu"]
    mb = single_op_model("SOFTMAX", [("x", [-1, 5], np.int8, (0.1, 0))], [("y", [-1, 5], np.int8, (1 / 256, -128))])
    assert declared_backends(mb) == ["cpu"]


@pytest.mark.parametrize("op,formula", [("NEG", np.negative), ("ABS", np.abs), ("SQUARE", np.square),
                                        ("SQRT", np.sqrt), ("RSQRT", lambda x: np.reciprocal(np.sqrt(x)))])
def test_plain_unary_bit_exact(op, formula):
    """NEG, ABS, SQUARE, SQRT: one IEEE operation each; RSQRT two (LiteRT's 1 / sqrt(x), rounded
    twice): so the cpu kernel's and numpy's bits."""
    xs = (1, 24, 20, 16)
    x = _x(xs, 6)
    mb = single_op_model(op, [("x", list(xs), np.float32)], [("y", list(xs), np.float32)])
    backends, got = _run(mb, [x], "jit;cpu")
    assert backends == ["jit"]
    _same_bits(got, _run(mb, [x], "cpu")[1])
    with np.errstate(all="ignore"):
        want = formula(x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


@pytest.mark.parametrize("alpha", [0.1, -0.3, 0.0, 1.5])
def test_leaky_relu_bit_exact(alpha):
    """LEAKY_RELU (Keras's LeakyReLU after a convolution): x > 0 ? x : x * alpha, one multiply, so the
    cpu kernel's bits; NaN and -0.0 take the alpha side. Against LiteRT too."""
    xs = (1, 24, 20, 16)
    x = _x(xs, 9)
    x.reshape(-1)[:3] = [-0.0, 0.0, -np.inf]
    mb = single_op_model("LEAKY_RELU", [("x", list(xs), np.float32)], [("y", list(xs), np.float32)], alpha=alpha)
    backends, got = _run(mb, [x], "jit;cpu")
    assert backends == ["jit"]
    _same_bits(got, _run(mb, [x], "cpu")[1])
    with np.errstate(invalid="ignore", over="ignore"):
        want = np.where(x > 0, x, x * np.float32(alpha))
    _same_bits(got, want)
    np.testing.assert_allclose(got, run_litert_builtin(mb, [x])[0], rtol=1e-6, atol=0, equal_nan=True)


@pytest.mark.parametrize("approximate", [False, True], ids=["erfc", "tanh"])
def test_gelu_runs_compiled_and_matches(approximate):
    """GELU (a transformer's FFN activation; 40 µs a call on cpu for [1, 16, 128]): the jit expression
    follows the cpu kernel's float32 steps (erfc32: the same approximation, exp32 for numpy's exp;
    tanh32 for np.tanh), so within a few ulp of it; against LiteRT and float64 erfc / tanh within the
    conformance tolerance."""
    xs = (1, 16, 128)
    x = _x(xs, 7)
    x.reshape(-1)[SPECIAL.size:SPECIAL.size + 8] = [-20.0, -9.0, -5.5, 5.5, 9.0, 1e-6, -1e-6, 0.5]
    mb = single_op_model("GELU", [("x", list(xs), np.float32)], [("y", list(xs), np.float32)],
                         approximate=approximate)
    backends, got = _run(mb, [x], "jit;cpu")
    assert backends == ["jit"]
    # the tanh form cancels in 1 + tanh(..) for x << 0: an ulp of tanh there is |x| * 2**-24 of the result
    tail = 1e-6 if approximate else 1e-37
    np.testing.assert_allclose(got, _run(mb, [x], "cpu")[1], rtol=1e-6, atol=tail, equal_nan=True)
    np.testing.assert_allclose(got, run_litert_builtin(mb, [x])[0], rtol=1e-5, atol=1e-6, equal_nan=True)
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        if approximate:
            want = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
        else:
            want = 0.5 * x64 * np.vectorize(math.erfc)(-x64 / math.sqrt(2))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
    # NaN stays NaN, +inf gives +inf; -inf gives NaN (-inf * 0), as the cpu kernel and LiteRT (checked above)
    assert np.isnan(got.reshape(-1)[4]) and got.reshape(-1)[2] == np.inf and np.isnan(got.reshape(-1)[3])


# float32 SOFTMAX (backends/jit/activations.py): one compiled loop, exp32 for numpy's exp and numpy's
# blocked sum, so within a few ulp of the cpu kernel; LiteRT's builtin kernel is the reference.
@pytest.mark.parametrize("shape, beta", [((1, 1000), 1.0), ((3, 129), 0.7), ((2, 3, 5), 2.0), ((4, 1), 1.0),
                                         ((1, 8), 1.0)], ids=str)
def test_float_softmax_runs_compiled(shape, beta):
    x = (rng(9).standard_normal(shape) * 6).astype(np.float32)
    mb = single_op_model("SOFTMAX", [("x", list(shape), np.float32)], [("y", list(shape), np.float32)], beta=beta)
    backends, got = _run(mb, [x], "jit;cpu")
    assert backends == ["jit"]
    want = run_litert_builtin(mb, [x])[0]
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-9)
    np.testing.assert_allclose(got, _run(mb, [x], "cpu")[1], rtol=2e-6, atol=1e-9)
    np.testing.assert_allclose(got.sum(axis=-1), 1.0, rtol=1e-6)


def test_float_softmax_special_rows_and_resize():
    """A row with NaN or +inf gives NaNs, -inf gives 0, as the cpu kernel (numpy's NaN max) gives them;
    an input resized at run time takes the cpu kernel."""
    x = np.array([[1, np.nan, 2, 0], [np.inf, 1, 2, 0], [-np.inf, 0, 1, 3], [88, -88, 0, 1e30]], np.float32)
    mb = single_op_model("SOFTMAX", [("x", [4, 4], np.float32)], [("y", [4, 4], np.float32)], beta=1.0)
    got = _run(mb, [x], "jit;cpu")[1]
    np.testing.assert_allclose(got, _run(mb, [x], "cpu")[1], rtol=2e-6, atol=0)
    assert np.isnan(got[:2]).all() and got[2, 0] == 0 and got[3, 3] == 1.0
    np.testing.assert_array_equal(np.isnan(got), np.isnan(run_litert_builtin(mb, [x])[0]))
    y = rng(3).standard_normal((2, 6)).astype(np.float32)
    (resized,) = run_interpreter(onert_py.Interpreter(model_content=mb.to_bytes("tflite")), [y])
    e = np.exp(y - y.max(-1, keepdims=True))
    np.testing.assert_allclose(resized, e / e.sum(-1, keepdims=True), rtol=1e-6)


def test_elu_runs_compiled():
    """ELU (Keras' elu, x < 0 ? expm1(x) : x) with expm1_32 for numpy's expm1f: the non-negative side,
    NaN, -0.0 and -inf exactly the cpu kernel's, the negative side within 1.4 ulp of float64 expm1
    (tests/backends/jit/test_vmath.py), so within 3 ulp of LiteRT's builtin kernel (libm's expm1f)."""
    xs = (2, 33, 17, 8)
    x = _x(xs, 5)
    x.reshape(-1)[SPECIAL.size:SPECIAL.size + 4] = [-1e-7, -0.3, -0.4, -20.0]
    mb = single_op_model("ELU", [("x", list(xs), np.float32)], [("y", list(xs), np.float32)])
    backends, got = _run(mb, [x], "jit;cpu")
    assert backends == ["jit"]
    cpu = _run(mb, [x], "cpu")[1]
    exact = ~(x < 0) | np.isinf(x)
    _same_bits(got[exact], cpu[exact])
    np.testing.assert_allclose(got, cpu, rtol=4e-7, atol=0)
    np.testing.assert_allclose(got, run_litert_builtin(mb, [x])[0], rtol=4e-7, atol=0)


@pytest.mark.parametrize("x_shape, y_shape", [((128, 96), (128, 1)), ((2, 6, 5, 8), (6, 5, 1)), ((2, 6, 5, 8), (2, 6, 5, 1)),
                                              ((2, 6, 5, 8), (1, 6, 1, 1)), ((2, 6, 5, 8), (2, 1, 5, 1))], ids=str)
def test_division_by_a_value_per_row(x_shape, y_shape):
    """x / mean(|x|, axis=-1, keepdims=True): a divisor of shape [..., 1] over the leading axes is read
    at the row of the per-op kernel's row/channel loop (others, which do not cover the leading axes,
    through an index array); bit for bit the cpu kernel's and LiteRT's division."""
    g = rng(13)
    x = (g.standard_normal(x_shape) * 3).astype(np.float32)
    y = (g.uniform(0.5, 2.0, y_shape) * g.choice([-1, 1], y_shape)).astype(np.float32)
    y.reshape(-1)[:2] = [0.0, -0.0]
    mb = single_op_model("DIV", [("x", list(x_shape), np.float32), ("y", list(y_shape), np.float32)],
                         [("z", list(x_shape), np.float32)], fused_activation_function=0)
    backends, got = _run(mb, [x, y], "jit;cpu")
    assert backends == ["jit"]
    big = np.finfo(np.float32).max
    with np.errstate(divide="ignore", invalid="ignore"):
        _same_bits(got, np.clip(x / y, -big, big))     # LiteRT clamps to the float range (no activation)
    _same_bits(got, run_litert_builtin(mb, [x, y])[0])


def test_tanh_runs_compiled():
    """TANH (an RNN cell's, a GELU's): tanh32 (-e / (e + 2), e = expm1_32(-2|x|), x's sign copied on),
    within 2.5 ulp of float64 tanh (tests/backends/jit/test_vmath.py); ±0, ±inf and NaN as the cpu
    kernel gives them; LiteRT within the conformance tolerance."""
    xs = (4, 37, 64)
    x = _x(xs, 11)
    x.reshape(-1)[SPECIAL.size:SPECIAL.size + 6] = [1e-7, -1e-7, 0.2, -0.2, 9.5, -9.5]
    mb = single_op_model("TANH", [("x", list(xs), np.float32)], [("y", list(xs), np.float32)])
    backends, got = _run(mb, [x], "jit;cpu")
    assert backends == ["jit"]
    cpu = _run(mb, [x], "cpu")[1]
    np.testing.assert_allclose(got, cpu, rtol=4e-7, atol=0, equal_nan=True)
    special = ~np.isfinite(x) | (x == 0)
    _same_bits(got[special], cpu[special])
    np.testing.assert_allclose(got, run_litert_builtin(mb, [x])[0], rtol=1e-6, atol=1e-7, equal_nan=True)
