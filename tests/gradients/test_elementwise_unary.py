"""Gradients of the elementwise, unary and activation families (backends/cpu/elementwise.py, unary.py,
activations.py), against central finite differences; ties and edges against TensorFlow's conventions."""
import numpy as np
import pytest

import onert_py
from helpers import check_gradients, rng, single_op_model
from onert_py.backends.registry import GRAD_RULES, load_builtin_kernels
from onert_py.schema.writer import ModelBuilder

F32 = np.float32


def away_from(values, points, gap=0.1):
    """values nudged so that none lies within `gap` of a point of `points` (kinks, jumps, ties)."""
    v = np.array(values, F32)
    for p in points:
        near = np.abs(v - p) < gap
        v[near] = p + np.where(v[near] >= p, gap, -gap) * 1.5
    return v


def unary(opcode, shape, dtype=F32, out_dtype=None, **options):
    return single_op_model(opcode, [("x", list(shape), dtype)], [("y", list(shape), out_dtype or dtype)],
                           **options)


def binary(opcode, sa, sb, so, **options):
    return single_op_model(opcode, [("a", list(sa), F32), ("b", list(sb), F32)], [("y", list(so), F32)],
                           **options)


def grads(mb, inputs, cotangents=None, wrt=None):
    _, g = onert_py.infer.session(mb.to_bytes("tflite")).gradients(inputs, cotangents, wrt)
    return g


# ----------------------------------------------------------------------------------- unary

SMOOTH = {
    "EXP": lambda r, s: r.uniform(-2, 2, s),
    "LOG": lambda r, s: r.uniform(0.5, 3, s),
    "SQRT": lambda r, s: r.uniform(0.5, 3, s),
    "RSQRT": lambda r, s: r.uniform(0.5, 3, s),
    "SQUARE": lambda r, s: r.uniform(-2, 2, s),
    "ABS": lambda r, s: away_from(r.uniform(-2, 2, s), [0]),
    "NEG": lambda r, s: r.uniform(-2, 2, s),
    "SIN": lambda r, s: r.uniform(-3, 3, s),
    "COS": lambda r, s: r.uniform(-3, 3, s),
}


@pytest.mark.parametrize("opcode", sorted(SMOOTH))
@pytest.mark.parametrize("shape", [(2, 3), ()])
def test_unary(opcode, shape):
    x = SMOOTH[opcode](rng(len(shape)), shape).astype(F32)
    check_gradients(unary(opcode, shape), [x])


@pytest.mark.parametrize("opcode", ["SIGN", "FLOOR", "CEIL", "ROUND"])
def test_piecewise_constant_gives_zeros(opcode):
    x = away_from(rng(1).uniform(-3, 3, (2, 3)), np.arange(-3.5, 4, 0.5), gap=0.05)
    g = check_gradients(unary(opcode, (2, 3)), [x])
    np.testing.assert_array_equal(g["x"], np.zeros((2, 3), F32))


def test_edges_follow_tensorflow():
    # ABS at 0 gives 0; SQRT, RSQRT and LOG at 0 give TF's inf, which the gradient's arithmetic (ADD,
    # MUL, DIV with LiteRT's activation range) clamps to +-FLT_MAX
    x = np.array([0.0, 1.0, -2.0], F32)
    ones = [np.ones(3, F32)]
    np.testing.assert_array_equal(grads(unary("ABS", (3,)), [x], ones)["x"], [0, 1, -1])
    for opcode, sign in (("SQRT", 1), ("LOG", 1), ("RSQRT", -1)):
        g = grads(unary(opcode, (3,)), [np.array([0.0, 1.0, 4.0], F32)], ones)["x"]
        assert sign * g[0] >= np.finfo(F32).max, (opcode, g)


def test_cast_float_to_float_passes_the_gradient():
    # f32 -> f16 -> f32: the gradient goes back through both casts
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [2, 3], F32)
    h = sg.tensor("h", [2, 3], np.float16)
    y = sg.tensor("y", [2, 3], F32)
    sg.op("CAST", [x], [h])
    sg.op("CAST", [h], [y])
    sg.inputs, sg.outputs = [x], [y]
    mb.signature("serving_default", sg)
    xv = rng(2).uniform(-1, 1, (2, 3)).astype(F32)
    g = grads(mb, [xv], [np.full((2, 3), 3.0, F32)])
    np.testing.assert_array_equal(g["x"], np.full((2, 3), 3.0, F32))
    assert g["x"].dtype == F32


def test_cast_through_an_integer_gives_none():
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [4], F32)
    i = sg.tensor("i", [4], np.int32)
    y = sg.tensor("y", [4], F32)
    sg.op("CAST", [x], [i])
    sg.op("CAST", [i], [y])
    sg.inputs, sg.outputs = [x], [y]
    mb.signature("serving_default", sg)
    g = check_gradients(mb, [np.array([0.5, 1.5, -2.5, 3.5], F32)])
    np.testing.assert_array_equal(g["x"], np.zeros(4, F32))


def test_add_n():
    r = rng(3)
    mb = single_op_model("ADD_N", [("a", [2, 3], F32), ("b", [2, 3], F32), ("c", [2, 3], F32)],
                         [("y", [2, 3], F32)])
    check_gradients(mb, [r.normal(size=(2, 3)).astype(F32) for _ in range(3)])


@pytest.mark.parametrize("sa,sb,so", [((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), (2, 3)), ((2, 1), (1, 3), (2, 3))])
def test_atan2(sa, sb, so):
    r = rng(4)
    check_gradients(binary("ATAN2", sa, sb, so),
                    [r.uniform(0.5, 2, sa).astype(F32) * r.choice([-1, 1], sa).astype(F32),
                     r.uniform(0.5, 2, sb).astype(F32) * r.choice([-1, 1], sb).astype(F32)])


# ----------------------------------------------------------------------------------- SELECT

@pytest.mark.parametrize("cshape", [(3, 2), (3,), ()])
def test_select(cshape):
    r = rng(5)
    mb = single_op_model("SELECT", [("c", list(cshape), np.bool_), ("a", [3, 2], F32), ("b", [3, 2], F32)],
                         [("y", [3, 2], F32)])
    c = r.integers(0, 2, cshape).astype(np.bool_) if cshape else np.array(False)
    a, b = r.normal(size=(3, 2)).astype(F32), r.normal(size=(3, 2)).astype(F32)
    g = check_gradients(mb, [c, a, b])
    assert list(g) == ["a", "b"]   # the bool condition takes none


@pytest.mark.parametrize("cs,xs,ys,os", [((2, 3), (2, 3), (2, 3), (2, 3)), ((2, 3), (3,), (2, 1), (2, 3)),
                                         ((1, 3), (2, 1), (), (2, 3))])
def test_select_v2(cs, xs, ys, os):
    r = rng(6)
    mb = single_op_model("SELECT_V2", [("c", list(cs), np.bool_), ("a", list(xs), F32), ("b", list(ys), F32)],
                         [("y", list(os), F32)])
    check_gradients(mb, [r.integers(0, 2, cs).astype(np.bool_), r.normal(size=xs).astype(F32),
                         r.normal(size=ys).astype(F32)])


def test_comparison_condition_stops_the_gradient():
    # y = x > 0 ? x : 2 x: the condition depends on x but takes no gradient
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [2, 3], F32)
    zero = sg.const("zero", np.array(0.0, F32))
    two = sg.const("two", np.array(2.0, F32))
    c = sg.tensor("c", [2, 3], np.bool_)
    x2 = sg.tensor("x2", [2, 3], F32)
    y = sg.tensor("y", [2, 3], F32)
    sg.op("GREATER", [x, zero], [c])
    sg.op("MUL", [x, two], [x2], fused_activation_function=0)
    sg.op("SELECT_V2", [c, x, x2], [y])
    sg.inputs, sg.outputs = [x], [y]
    mb.signature("serving_default", sg)
    check_gradients(mb, [away_from(rng(7).uniform(-2, 2, (2, 3)), [0])])


def test_no_gradient_ops_are_registered():
    load_builtin_kernels()
    for name in ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "LOGICAL_AND",
                 "LOGICAL_OR", "LOGICAL_NOT", "FLOOR_DIV", "FLOOR", "CEIL", "ROUND", "ZEROS_LIKE", "BITCAST",
                 "BITWISE_XOR", "RIGHT_SHIFT"):
        assert not GRAD_RULES[name].differentiable, name


# ----------------------------------------------------------------------------------- binary

BROADCASTS = [((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), (2, 3)), ((2, 1), (1, 3), (2, 3)), ((), (2, 3), (2, 3))]


@pytest.mark.parametrize("sa,sb,so", BROADCASTS)
def test_pow(sa, sb, so):
    r = rng(8)
    check_gradients(binary("POW", sa, sb, so),
                    [r.uniform(0.5, 2, sa).astype(F32), r.uniform(-2, 2, sb).astype(F32)])


def test_pow_negative_base_integral_exponent():
    # x < 0 with a constant exponent: the exponent's gradient would be NaN, and is masked (log x -> 0)
    x = np.array([[-1.5, -0.7, 1.2], [2.0, -2.0, 0.6]], F32)
    mb = single_op_model("POW", [("x", [2, 3], F32), ("const", np.array([2.0, 3.0, -1.0], F32))],
                         [("y", [2, 3], F32)])
    check_gradients(mb, [x])
    mb = single_op_model("POW", [("x", [2, 3], F32), ("e", [3], F32)], [("y", [2, 3], F32)])
    g = grads(mb, [x, np.array([2.0, 3.0, -1.0], F32)], [np.ones((2, 3), F32)])
    # d/de sums z * log(x) over rows where x > 0 only
    z = x.astype(np.float64) ** np.array([2.0, 3.0, -1.0])
    expect = np.sum(np.where(x > 0, z * np.log(np.where(x > 0, x, 1)), 0), axis=0)
    np.testing.assert_allclose(g["e"], expect, rtol=1e-5)


@pytest.mark.parametrize("opcode", ["MAXIMUM", "MINIMUM"])
@pytest.mark.parametrize("sa,sb,so", BROADCASTS)
def test_maximum_minimum(opcode, sa, sb, so):
    r = rng(9)
    # integers against half-integers: no ties within the finite-difference step
    a = r.integers(-2, 3, sa).astype(F32)
    b = (r.integers(-2, 2, sb) + 0.5).astype(F32)
    check_gradients(binary(opcode, sa, sb, so), [a, b])


def test_maximum_minimum_ties_go_to_x():
    # TF: MAXIMUM gives x the gradient where x >= y, MINIMUM where x <= y
    a = np.array([1.0, 2.0, 3.0], F32)
    b = np.array([1.0, 1.0, 4.0], F32)
    ones = [np.ones(3, F32)]
    g = grads(binary("MAXIMUM", (3,), (3,), (3,)), [a, b], ones)
    np.testing.assert_array_equal(g["a"], [1, 1, 0])
    np.testing.assert_array_equal(g["b"], [0, 0, 1])
    g = grads(binary("MINIMUM", (3,), (3,), (3,)), [a, b], ones)
    np.testing.assert_array_equal(g["a"], [1, 0, 1])
    np.testing.assert_array_equal(g["b"], [0, 1, 0])


@pytest.mark.parametrize("sa,sb,so", BROADCASTS)
def test_squared_difference(sa, sb, so):
    r = rng(10)
    check_gradients(binary("SQUARED_DIFFERENCE", sa, sb, so),
                    [r.normal(size=sa).astype(F32), r.normal(size=sb).astype(F32)])


@pytest.mark.parametrize("sa,sb,so", BROADCASTS[:3])
def test_floor_mod(sa, sb, so):
    r = rng(11)
    if sa == so:
        b = (r.uniform(0.7, 1.5, sb) * r.choice([-1, 1], sb)).astype(F32)
        # a / b away from the integers, where floor_mod jumps
        a = ((r.integers(-3, 3, sa) + r.uniform(0.2, 0.8, sa)) * b).astype(F32)
    else:
        a = np.array([[0.45], [-2.4]], F32)
        b = np.array([[0.9, 1.3, -1.1]], F32)
    q = np.broadcast_to(a, so) / np.broadcast_to(b, so)
    assert np.min(np.abs(q - np.rint(q))) > 0.1
    check_gradients(binary("FLOOR_MOD", sa, sb, so), [a, b])


def test_floor_div_gives_zeros():
    a = np.array([[1.3, -2.6, 3.2]], F32)
    b = np.array([0.7, 1.1, -1.4], F32)
    g = check_gradients(binary("FLOOR_DIV", (1, 3), (3,), (1, 3)), [a, b])
    assert not g["a"].any() and not g["b"].any()


# ----------------------------------------------------------------------------------- activations

@pytest.mark.parametrize("alpha", [0.2, -0.5, 1.5])
def test_leaky_relu(alpha):
    x = away_from(rng(12).uniform(-2, 2, (2, 4)), [0])
    check_gradients(unary("LEAKY_RELU", (2, 4), alpha=alpha), [x])


def test_leaky_relu_at_zero_gives_alpha():
    g = grads(unary("LEAKY_RELU", (3,), alpha=0.25), [np.array([0.0, 1.0, -1.0], F32)], [np.ones(3, F32)])
    np.testing.assert_array_equal(g["x"], [0.25, 1, 0.25])


def test_elu():
    x = away_from(rng(13).uniform(-3, 2, (2, 4)), [0])
    check_gradients(unary("ELU", (2, 4)), [x])


def test_hard_swish():
    x = away_from(rng(14).uniform(-5, 5, (3, 4)), [-3, 3])
    check_gradients(unary("HARD_SWISH", (3, 4)), [x])
    # the kinks: 0 at -3, 1 at 3
    g = grads(unary("HARD_SWISH", (2,)), [np.array([-3.0, 3.0], F32)], [np.ones(2, F32)])
    np.testing.assert_array_equal(g["x"], [0, 1])


@pytest.mark.parametrize("approximate", [False, True])
def test_gelu(approximate):
    x = rng(15).uniform(-4, 4, (3, 4)).astype(F32)
    check_gradients(unary("GELU", (3, 4), approximate=approximate), [x])


def test_erfc_custom_op():
    mb = single_op_model("CUSTOM", [("x", [2, 3], F32)], [("y", [2, 3], F32)], custom_code="OnertPyErfc")
    x = rng(16).uniform(-2, 2, (2, 3)).astype(F32)
    from math import erfc
    y = onert_py.infer.session(mb.to_bytes("tflite")).infer([x])[0]
    np.testing.assert_allclose(y, np.vectorize(erfc)(x.astype(np.float64)), rtol=1e-6, atol=1e-7)
    check_gradients(mb, [x])


@pytest.mark.parametrize("xs,als", [((2, 2, 3), (3,)), ((2, 2, 3), (1, 1, 3)), ((2, 3), (2, 3)), ((2, 3), ())])
def test_prelu(xs, als):
    r = rng(17)
    x = away_from(r.uniform(-2, 2, xs), [0])
    alpha = r.uniform(-0.5, 1.5, als).astype(F32)
    # alpha as an input
    mb = single_op_model("PRELU", [("x", list(xs), F32), ("alpha", list(als), F32)], [("y", list(xs), F32)])
    check_gradients(mb, [x, alpha])
    # alpha as a constant: a trainable parameter
    mb = single_op_model("PRELU", [("x", list(xs), F32), ("const", alpha)], [("y", list(xs), F32)])
    g = check_gradients(mb, [x], wrt="weights")
    assert len(g) == 1 and next(iter(g.values())).shape == alpha.shape


# ----------------------------------------------------------------------------------- dynamic shapes

# A -1 batch stays dynamic in the gradient model: the cotangent takes any batch and a rule cannot tell
# from the forward shapes whether the input was broadcast, so the sum back happens at run time.


@pytest.mark.parametrize("opcode", ["MAXIMUM", "POW", "SQUARED_DIFFERENCE"])
def test_broadcast_of_a_dynamic_batch(opcode):
    # the forward shapes do not show whether the [-1, 3] input was broadcast: summed back at run time
    r = rng(18)
    a = r.uniform(0.5, 2, (4, 3)).astype(F32)
    b = (r.integers(0, 2, (1, 3)) + 0.25).astype(F32)
    check_gradients(binary(opcode, (-1, 3), (1, 3), (-1, 3)), [a, b])
    check_gradients(binary(opcode, (-1, 3), (-1, 3), (-1, 3)), [a, np.broadcast_to(b, (4, 3)).copy()])


def test_prelu_dynamic_batch():
    r = rng(19)
    x = away_from(r.uniform(-2, 2, (3, 2, 4)), [0])
    alpha = r.uniform(0, 0.5, (1, 1, 4)).astype(F32)
    mb = single_op_model("PRELU", [("x", [-1, 2, 4], F32), ("const", alpha)], [("y", [-1, 2, 4], F32)])
    check_gradients(mb, [x], wrt="weights")
