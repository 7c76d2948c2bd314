"""Activation kernels against LiteRT."""
import numpy as np
import pytest

import onert_py
from helpers import check_builtin, rng, run_litert_builtin, single_op_model

SHAPES = [(), (7,), (2, 3, 4), (1, 2, 1, 3, 2)]
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 3.0, -3.0, 6.0, -6.0, 2.9999998, 6.0000005, 1e-30, -1e-30,
         20.0, -20.0, 88.0, -88.0, 1e30, -1e30, np.nan, np.inf, -np.inf]


check = check_builtin


def _fill(shape, dtype, edges=EDGES, scale=8.0, seed=0):
    n = int(np.prod(shape))
    flat = rng(seed).uniform(-scale, scale, n).astype(dtype)
    if np.dtype(dtype) == np.float16:
        edges = [e for e in edges if np.isfinite(e) and abs(e) < 6e4]   # see run_litert_builtin
    e = np.asarray(edges, dtype=np.float32)[:n].astype(dtype)
    flat[:len(e)] = e
    return flat.reshape(shape)


def _case(op, shape, dtype, x, rtol=1e-5, atol=1e-6, **opts):
    mb = single_op_model(op, [("x", list(shape), dtype)], [("y", list(shape), dtype)], **opts)
    if np.dtype(dtype) == np.float16:
        # float16: one fp16 ulp is ~1e-3 relative, and XNNPACK computes differently from numpy's
        # float32-then-round, so the last bit may differ.
        check(mb, [x], rtol=2e-3, atol=2e-3, delegate=True)
    else:
        check(mb, [x], rtol=rtol, atol=atol)


F16_OPS = ["RELU", "RELU6", "RELU_N1_TO_1", "TANH", "LOGISTIC", "HARD_SWISH", "ELU"]
SIMPLE = {"RELU": {}, "RELU6": {}, "RELU_N1_TO_1": {}, "RELU_0_TO_1": {}, "TANH": {}, "LOGISTIC": {},
          "HARD_SWISH": {}, "ELU": {}}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("op", sorted(SIMPLE))
def test_simple_activation(op, shape):
    for dtype in [np.float32] + ([np.float16] if op in F16_OPS else []):
        _case(op, shape, dtype, _fill(shape, dtype))


@pytest.mark.parametrize("op", ["RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1"])
def test_relu_family_nan_inf_signed_zero_exact(op):
    # LiteRT's clamps replace only values outside the range (x < lo ? lo : x): NaN stays NaN, -0 stays
    # -0. Bit for bit, sign of zero included, on lengths that exercise vector bodies and tails.
    from helpers import FORMATS, run_litert_builtin, run_onert
    for n in (1, 7, 37, 1000):
        x = rng(n).choice(np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 0.5, -0.5, 1.0, -1.0, 6.0, 7.0, -7.0],
                                   np.float32), n).astype(np.float32)
        mb = single_op_model(op, [("x", [n], np.float32)], [("y", [n], np.float32)])
        want = run_litert_builtin(mb, [x])[0]
        for fmt in FORMATS:
            got = run_onert(mb, [x], fmt)[0]
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg="sign of zero")


@pytest.mark.parametrize("alpha", [0.2, -0.5, 0.0, 1.5])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_leaky_relu(shape, alpha):
    # LiteRT runs float16 LEAKY_RELU only on XNNPACK, which does not take alpha == 0.
    for dtype in (np.float32, np.float16) if alpha != 0 else (np.float32,):
        _case("LEAKY_RELU", shape, dtype, _fill(shape, dtype), alpha=alpha)


@pytest.mark.parametrize("approximate", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_gelu(shape, approximate):
    edges = EDGES + [-4.0, -5.0, -7.0, -9.0, -12.0, 0.01, -0.01, 2.0, -2.0]
    for dtype in (np.float32, np.float16):
        x = _fill(shape, dtype, edges, scale=6.0)
        if dtype == np.float16 and approximate:
            # XNNPACK's float16 tanh-GELU evaluates 1 + tanh(...) in float16, which cancels badly
            # for x < -3 (gives -3e-3 at x = -6, where GELU is ~-1e-8); we round once from float32.
            x = np.clip(x, np.float16(-3), np.float16(3))
        _case("GELU", shape, dtype, x, approximate=approximate)


def test_gelu_dense_range():
    # Every region of the erfc fit, 2000 points.
    x = np.linspace(-10, 10, 2000, dtype=np.float32)
    for approximate in (False, True):
        _case("GELU", x.shape, np.float32, x, approximate=approximate)


@pytest.mark.parametrize("xs,ss", [((2, 3), (2, 3)), ((2, 3, 4), (4,)), ((1, 2, 2, 3), (1, 1, 3)),
                                   ((4,), ()), ((2, 3, 4), (3, 1)), ((2, 2, 2, 3), (2, 1, 1))], ids=str)
def test_prelu(xs, ss):
    x = _fill(xs, np.float32, seed=1)
    alpha = _fill(ss, np.float32, [0.25, -1.5, 0.0, 2.0, np.nan], seed=2)
    out = xs   # LiteRT requires alpha to broadcast into x's shape
    # alpha as a model input and as a constant (the usual form)
    mb = single_op_model("PRELU", [("x", list(xs), np.float32), ("alpha", list(ss), np.float32)],
                         [("y", list(out), np.float32)])
    check(mb, [x, alpha])
    mb = single_op_model("PRELU", [("x", list(xs), np.float32), ("const", alpha)],
                         [("y", list(out), np.float32)])
    check(mb, [x])


@pytest.mark.parametrize("lo,hi", [(0.05, 1.0), (1.0, 3.0), (-2.0, 2.5), (-3.0, -0.1)], ids=str)
@pytest.mark.parametrize("xs", [(1, 5, 7, 3), (2, 4, 16), (3, 1), (1, 64, 64, 4)], ids=str)
def test_prelu_constant_channel_alpha(xs, lo, hi):
    # A constant per-channel alpha without 0 or NaN takes the tiled max / min / sign-flipped max forms;
    # bit for bit like LiteRT's reference, signed zeros and +-inf/NaN included.
    from helpers import FORMATS, run_litert_builtin, run_onert
    c = xs[-1]
    x = _fill(xs, np.float32, seed=3)
    alpha = rng(4).uniform(lo, hi, c).astype(np.float32)
    alpha[0] = hi if c > 1 else alpha[0]
    for ss in ([c], [1] * (len(xs) - 1) + [c]):
        mb = single_op_model("PRELU", [("x", list(xs), np.float32), ("const", alpha.reshape(ss))],
                             [("y", list(xs), np.float32)])
        want = run_litert_builtin(mb, [x])[0]
        for fmt in FORMATS:
            got = run_onert(mb, [x], fmt)[0]
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg="sign of zero")


SOFTMAX_SHAPES = [(1,), (7,), (3, 5), (2, 3, 4), (2, 1, 3, 5), (1, 2, 1, 3, 4)]


@pytest.mark.parametrize("beta", [1.0, 0.5, 2.0, 0.0])
@pytest.mark.parametrize("shape", SOFTMAX_SHAPES, ids=str)
def test_softmax(shape, beta):
    edges = [0.0, 100.0, -100.0, 1e-30, 30.0, -30.0, 88.0, 1e4]
    for dtype in (np.float32, np.float16):
        x = _fill(shape, dtype, edges, scale=10.0)
        _case("SOFTMAX", shape, dtype, x, beta=beta)


def test_softmax_special_values():
    x = np.array([[0.0, np.nan, 1.0], [np.inf, 1.0, 2.0], [-np.inf, 1.0, 2.0], [-np.inf, -np.inf, 0.0]],
                 np.float32)
    _case("SOFTMAX", x.shape, np.float32, x, beta=1.0)


@pytest.mark.parametrize("shape", SOFTMAX_SHAPES, ids=str)
def test_log_softmax(shape):
    x = _fill(shape, np.float32, [0.0, 100.0, -100.0, 1e-30, 30.0, -30.0, 88.0, 1e4], scale=10.0)
    _case("LOG_SOFTMAX", shape, np.float32, x)


def test_log_softmax_special_values():
    x = np.array([[0.0, np.nan, 1.0], [-np.inf, 1.0, 2.0], [-np.inf, -np.inf, 0.0], [1e30, -1e30, 0.0]],
                 np.float32)
    _case("LOG_SOFTMAX", x.shape, np.float32, x)


# ---- unsupported types are prepare-time errors

@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.float64])
@pytest.mark.parametrize("op", sorted(SIMPLE) + ["LEAKY_RELU", "GELU", "SOFTMAX", "LOG_SOFTMAX", "PRELU"])
def test_unsupported_type_is_prepare_error(op, dtype):
    # LiteRT runs int8/uint8/int16 activations only as quantized kernels (without quantization
    # parameters it refuses them or returns zeros); numpy would fail mid-run (RELU's clip of int8 by a
    # float32 bound) or compute something else. The session refuses them, naming the tensor.
    import onert_py
    ins = [("x", [4], dtype)] + ([("alpha", [4], dtype)] if op == "PRELU" else [])
    mb = single_op_model(op, ins, [("y", [4], dtype)])
    with pytest.raises(onert_py.PrepareError, match=rf"input 0 \('x'\) has type {np.dtype(dtype).name}, not supported"):
        onert_py.infer.session(mb.to_bytes("tflite"))


def test_prelu_alpha_of_another_type_is_prepare_error():
    import onert_py
    mb = single_op_model("PRELU", [("x", [4], np.float32), ("alpha", [4], np.int32)], [("y", [4], np.float32)])
    with pytest.raises(onert_py.PrepareError, match=r"input 1 \('alpha'\) has type int32"):
        onert_py.infer.session(mb.to_bytes("tflite"))


@pytest.mark.parametrize("n", [1, 7, 33, 4096])
def test_elu_as_max_of_expm1_and_x(n):
    """ELU as max(expm1(min(x, 0)), x): the bits of the plain x < 0 ? expm1(x) : x (numpy's expm1f),
    the sign of zero and NaN included, at lengths numpy runs with and without SIMD; LiteRT's builtin
    kernel (libm's expm1f, which differs from numpy's in the last bit) within an ulp."""
    g = rng(n)
    x = (g.standard_normal(n) * 4).astype(np.float32)
    spots = g.integers(0, n, max(1, n // 4))
    x[spots] = g.choice(np.array([-0.0, 0.0, np.nan, -np.inf, np.inf, -1e-30, -1e-45, -88.0], np.float32), spots.size)
    mb = single_op_model("ELU", [("x", [n], np.float32)], [("y", [n], np.float32)])
    got = onert_py.infer.session(mb.to_bytes("tflite"), "cpu").infer([x])[0]
    plain = np.where(x < 0, np.expm1(np.minimum(x, np.float32(0))), x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(plain))
    np.testing.assert_array_equal(got[~np.isnan(got)].view(np.int32), plain[~np.isnan(plain)].view(np.int32))
    want = run_litert_builtin(mb, [x])[0]
    np.testing.assert_array_equal(np.signbit(got[got == 0]), np.signbit(want[got == 0]))
    np.testing.assert_allclose(got, want, rtol=2e-7, atol=0)
