"""Gradients of the peer control-flow scenarios (/work/shared/PEER_SCENARIOS.md: LiteRT's while_test /
if_test and onert's While_* / If_* recipes), rebuilt in float32 where a float value makes sense, against
central finite differences (helpers.check_gradients, both encodings).

Counters stay int32 (they stop the gradient); the float builders below follow tests/controlflow/
builders.py's style and vocabulary. Inputs are chosen away from the points where a loop's trip count or
an IF's branch changes (finite differences are only valid there). Every scenario is also
differentiated twice in a row on one session, which must give the same results bit for bit.
"""
from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest

_CONTROLFLOW = str(Path(__file__).resolve().parents[1] / "controlflow")
if _CONTROLFLOW not in sys.path:
    sys.path.insert(0, _CONTROLFLOW)

from builders import (
    DYN,
    F32,
    I32,
    ONE,
    _t,
    add,
    binary_subgraph,
    float_doubling_body,
    float_less_cond,
    if_model,
    mul,
    pad,
    tile,
    while_model,
)
from helpers import check_gradients, rng

import onert_py
from onert_py.schema.writer import ModelBuilder, SubgraphBuilder

T, F = np.array([True]), np.array([False])


def f32(*values) -> np.ndarray:
    return np.array(values, F32)


def i32(*values) -> np.ndarray:
    return np.array(values, I32)


def check(mb: ModelBuilder, inputs, wrt=None, **kw) -> dict:
    """check_gradients, then the same gradients twice in a row on one session: equal bit for bit."""
    grads = check_gradients(mb, inputs, wrt, **kw)
    sess = onert_py.infer.session(mb.to_bytes("tflite"))
    outs = sess.infer([np.asarray(x) for x in inputs])
    r = rng(1)
    cts = [r.normal(size=np.shape(o)).astype(F32) if np.asarray(o).dtype.kind == "f" else None for o in outs]
    o1, g1 = sess.gradients(inputs, cts, wrt)
    o1 = [np.array(o, copy=True) for o in o1]
    g1 = {k: np.array(v, copy=True) for k, v in g1.items()}
    o2, g2 = sess.gradients(inputs, cts, wrt)
    for a, b in zip(o1, o2):
        np.testing.assert_array_equal(a, b)
    assert list(g1) == list(g2)
    for name in g1:
        np.testing.assert_array_equal(g1[name], g2[name], err_msg=f"second run: d/d{name}")
    return grads


# ---------------------------------------------------------------- float builders

def float_less_equal_cond(sg: SubgraphBuilder, rhs: float, dtypes, shapes=None) -> SubgraphBuilder:
    """float in0 <= rhs; the other inputs are unused (LiteRT's LessEqualCond over a float value)."""
    shapes = list(shapes) if shapes is not None else [DYN] * len(dtypes)
    ins = [_t(sg, f"in{k}", shapes[k], dt) for k, dt in enumerate(dtypes)]
    rhs_t = sg.const("rhs", np.array([rhs], F32))
    o = _t(sg, "cond", DYN, np.bool_)
    sg.op("LESS_EQUAL", [ins[0], rhs_t], [o])
    sg.inputs, sg.outputs = ins, [o]
    return sg


def counter_cond(sg: SubgraphBuilder, rhs: int, dtypes) -> SubgraphBuilder:
    """int32 in0 <= rhs; the other inputs (any dtype) are unused."""
    ins = [_t(sg, f"in{k}", ONE if k == 0 else DYN, dt) for k, dt in enumerate(dtypes)]
    rhs_t = sg.const("rhs", np.array([rhs], I32))
    o = _t(sg, "cond", ONE, np.bool_)
    sg.op("LESS_EQUAL", [ins[0], rhs_t], [o])
    sg.inputs, sg.outputs = ins, [o]
    return sg


def _count(sg: SubgraphBuilder, c: int, name: str = "c_out") -> int:
    """c + 1, int32."""
    return add(sg, c, sg.const("one_i", np.array([1], I32)), _t(sg, name, ONE))


def float_pad_loop_body(sg: SubgraphBuilder, padding, scale: float | None = None) -> SubgraphBuilder:
    """(c, v) -> (c+1, pad(v, padding)), v float and growing; with `scale`, pad(v * w) (w a constant)."""
    c, v = _t(sg, "c", ONE), _t(sg, "v", DYN, F32)
    oc = _count(sg, c)
    p = sg.const("paddings", np.array([list(padding)], I32))
    x = v
    if scale is not None:
        x = mul(sg, v, sg.const("w", np.array([scale], F32)), _t(sg, "v_scaled", DYN, F32))
    ov = pad(sg, x, p, _t(sg, "v_out", DYN, F32))
    sg.inputs, sg.outputs = [c, v], [oc, ov]
    return sg


def float_input_is_output(sg: SubgraphBuilder) -> SubgraphBuilder:
    """(c, v0, io) -> (c+1, v0+io, io): io (float) is the same tensor in and out."""
    c, v0, io = _t(sg, "c", ONE), _t(sg, "v0", DYN, F32), _t(sg, "io", DYN, F32)
    oc = _count(sg, c)
    ov0 = add(sg, v0, io, _t(sg, "v0_out", DYN, F32))
    sg.inputs, sg.outputs = [c, v0, io], [oc, ov0, io]
    return sg


def float_input_is_different_output(sg: SubgraphBuilder) -> SubgraphBuilder:
    """(c, v) -> (v, c+v), float: input 1 is returned as output 0."""
    c, v = _t(sg, "c", ONE, F32), _t(sg, "v", ONE, F32)
    ov = add(sg, c, v, _t(sg, "v_out", ONE, F32))
    sg.inputs, sg.outputs = [c, v], [v, ov]
    return sg


def float_all_inplace_scenarios(sg: SubgraphBuilder, const_io: bool) -> SubgraphBuilder:
    """(c, v0, v1, v2, io) -> (c+1, v0+io+io, tile(v1, c), tile(v2, c)+io, io): c the int32 counter,
    the rest float; io a float constant "io" of the body that is also its input and output (LiteRT's
    layout), or with const_io=False a plain loop value."""
    c, v0, v1, v2 = _t(sg, "c", ONE), _t(sg, "v0", ONE, F32), _t(sg, "v1", DYN, F32), _t(sg, "v2", DYN, F32)
    io = sg.const("io", np.array([1.5], F32)) if const_io else _t(sg, "io", ONE, F32)
    oc = _count(sg, c)
    mid0 = add(sg, v0, io, _t(sg, "v0_mid", ONE, F32))
    ov0 = add(sg, mid0, io, _t(sg, "v0_out", ONE, F32))
    ov1 = tile(sg, v1, c, _t(sg, "v1_out", DYN, F32))
    mid2 = tile(sg, v2, c, _t(sg, "v2_mid", DYN, F32))
    ov2 = add(sg, mid2, io, _t(sg, "v2_out", DYN, F32))
    sg.inputs, sg.outputs = [c, v0, v1, v2, io], [oc, ov0, ov1, ov2, io]
    return sg


def float_dynamic_increasing_size(sg: SubgraphBuilder) -> SubgraphBuilder:
    """(c, v0, v1, v2) -> (c+1, tile(v0, c)*w+1, v1+2, v2+2) with float constants "one" and "w"."""
    c, v0, v1, v2 = _t(sg, "c", ONE), _t(sg, "v0", DYN, F32), _t(sg, "v1", DYN, F32), _t(sg, "v2", DYN, F32)
    one, w = sg.const("one", np.array([1], F32)), sg.const("w", np.array([0.75], F32))
    oc = _count(sg, c)
    t0 = tile(sg, v0, c, _t(sg, "tiled", DYN, F32))
    s0 = mul(sg, t0, w, _t(sg, "scaled", DYN, F32))
    t1 = add(sg, v1, one, _t(sg, "v1_mid", DYN, F32))
    t2 = add(sg, v2, one, _t(sg, "v2_mid", DYN, F32))
    ov0 = add(sg, s0, one, _t(sg, "v0_out", DYN, F32))
    ov1 = add(sg, t1, one, _t(sg, "v1_out", DYN, F32))
    ov2 = add(sg, t2, one, _t(sg, "v2_out", DYN, F32))
    sg.inputs, sg.outputs = [c, v0, v1, v2], [oc, ov0, ov1, ov2]
    return sg


def float_dynamic_body_with_aliases(sg: SubgraphBuilder) -> SubgraphBuilder:
    """(c, a, b, d, e) -> (c+1, s+k1, s+k2, s+k3, s+k3), s = a+b+d+e; float constants k1..k3 (0.5, 1.5,
    2.5): s+k3 is the same tensor returned in two outputs."""
    c = _t(sg, "c", ONE)
    a, b, d, e = (_t(sg, n, DYN, F32) for n in "abde")
    k1, k2, k3 = (sg.const(f"k{k}", np.array([k - 0.5], F32)) for k in (1, 2, 3))
    oc = _count(sg, c)
    ab = add(sg, a, b, _t(sg, "ab", DYN, F32))
    de = add(sg, d, e, _t(sg, "de", DYN, F32))
    s = add(sg, ab, de, _t(sg, "s", DYN, F32))
    o1 = add(sg, s, k1, _t(sg, "out1", DYN, F32))
    o2 = add(sg, s, k2, _t(sg, "out2", DYN, F32))
    o3 = add(sg, s, k3, _t(sg, "out3", DYN, F32))
    sg.inputs, sg.outputs = [c, a, b, d, e], [oc, o1, o2, o3, o3]
    return sg


def float_output_not_consumed(sg: SubgraphBuilder) -> SubgraphBuilder:
    """(a, b, n) -> (a+b, tile(a, n), const 1): a, b float 1-D, n the int32 multiple."""
    a, b, n = _t(sg, "a", DYN, F32), _t(sg, "b", DYN, F32), _t(sg, "n", ONE)
    one = sg.const("one", np.array([1], I32))
    o0 = add(sg, a, b, _t(sg, "sum", DYN, F32))
    o1 = tile(sg, a, n, _t(sg, "tiled", DYN, F32))
    sg.inputs, sg.outputs = [a, b, n], [o0, o1, one]
    return sg


def float_pad_subgraph(sg: SubgraphBuilder) -> SubgraphBuilder:
    """(a, b, paddings) -> pad(a, paddings); b unused (the float IF's dynamic branch)."""
    a, b, p = _t(sg, "a", DYN, F32), _t(sg, "b", DYN, F32), _t(sg, "paddings", (1, 2))
    o = pad(sg, a, p, _t(sg, "out", DYN, F32))
    sg.inputs, sg.outputs = [a, b, p], [o]
    return sg


def float_add3_subgraph(sg: SubgraphBuilder) -> SubgraphBuilder:
    """(a, b, paddings) -> a + b; paddings unused."""
    a, b, p = _t(sg, "a", DYN, F32), _t(sg, "b", DYN, F32), _t(sg, "paddings", (1, 2))
    o = add(sg, a, b, _t(sg, "out", DYN, F32))
    sg.inputs, sg.outputs = [a, b, p], [o]
    return sg


def float_const_subgraph(sg: SubgraphBuilder, value: float) -> SubgraphBuilder:
    """No inputs; returns the float constant "value"."""
    c = sg.const("value", np.array([value], F32))
    sg.inputs, sg.outputs = [], [c]
    return sg


def subset_then(sg: SubgraphBuilder) -> SubgraphBuilder:
    """(a, b, c) -> a * b; c unused."""
    a, b, c = (_t(sg, n, DYN, F32) for n in "abc")
    o = mul(sg, a, b, _t(sg, "out", DYN, F32))
    sg.inputs, sg.outputs = [a, b, c], [o]
    return sg


def subset_else(sg: SubgraphBuilder) -> SubgraphBuilder:
    """(a, b, c) -> c * c + b; a unused."""
    a, b, c = (_t(sg, n, DYN, F32) for n in "abc")
    cc = mul(sg, c, c, _t(sg, "cc", DYN, F32))
    o = add(sg, cc, b, _t(sg, "out", DYN, F32))
    sg.inputs, sg.outputs = [a, b, c], [o]
    return sg


def float_accumulate_loop_body(sg: SubgraphBuilder, scale: float | None = None) -> SubgraphBuilder:
    """(c, v) -> (c+1, float(c+1) + v), v float; with `scale`, (c+1, float(c+1) + v * w), w a float
    constant "w" of the body."""
    c, v = _t(sg, "c", ONE), _t(sg, "v", DYN, F32)
    oc = _count(sg, c)
    fc, ov = _t(sg, "c_float", ONE, F32), _t(sg, "v_out", DYN, F32)
    sg.op("CAST", [oc], [fc])
    x = v
    if scale is not None:
        x = mul(sg, v, sg.const("w", np.array([scale], F32)), _t(sg, "v_scaled", DYN, F32))
    add(sg, fc, x, ov)
    sg.inputs, sg.outputs = [c, v], [oc, ov]
    return sg


# ---------------------------------------------------------------- WHILE

@pytest.mark.parametrize("c0, v0, trips", [(1.1, 0.7, 4), (3.0, -1.2, 4), (30.0, 5.0, 2)])
def test_float_body(c0, v0, trips):
    """Doubling until >= 100: (c, v) -> (2(c+v), 2(c+v)); inputs away from the trip-count changes."""
    mb = while_model([("c", [1], F32), ("v", [1], F32)], partial(float_less_cond, rhs=100.0),
                     float_doubling_body)
    x = [f32(c0), f32(v0)]
    g = check(mb, x)
    outs = onert_py.infer.session(mb.to_bytes()).infer(x)
    expect = 2 * 4 ** (trips - 1) * (c0 + v0)
    np.testing.assert_allclose(outs[0], [expect], rtol=1e-5)
    assert set(g) == {"c", "v"}


def test_float_body_zero_iterations():
    mb = while_model([("c", [1], F32), ("v", [1], F32)], partial(float_less_cond, rhs=100.0),
                     float_doubling_body)
    x = [f32(150.0), f32(-3.0)]
    g = check(mb, x)
    _, ones = onert_py.infer.session(mb.to_bytes()).gradients(x)
    np.testing.assert_array_equal(ones["c"], [1])
    np.testing.assert_array_equal(ones["v"], [1])
    assert set(g) == {"c", "v"}


@pytest.mark.parametrize("rhs", [-1, 0, 2, 4])   # rhs -1: zero iterations (c0 = 0)
@pytest.mark.parametrize("scale", [None, 0.8])
def test_accumulate_loop_body(rhs, scale):
    mb = while_model([("c", [1], I32), ("v", [3], F32)], partial(counter_cond, rhs=rhs, dtypes=[I32, F32]),
                     partial(float_accumulate_loop_body, scale=scale))
    x = [i32(0), f32(1.0, -0.5, 2.0)]
    g = check(mb, x)
    assert list(g) == ["v"]
    if scale is not None:
        gw = check(mb, x, wrt=["body:w", "v"])
        if rhs < 0:
            np.testing.assert_array_equal(gw["body:w"], [0])


@pytest.mark.parametrize("scale", [None, 1.3])
@pytest.mark.parametrize("rhs", [0, 3])
def test_pad_loop_body(rhs, scale):
    """v grows every iteration through PAD: [2] -> [2 + 3(rhs + 1)]."""
    mb = while_model([("c", [1], I32), ("v", [2], F32)], partial(counter_cond, rhs=rhs, dtypes=[I32, F32]),
                     partial(float_pad_loop_body, padding=[1, 2], scale=scale))
    x = [i32(0), f32(0.5, -1.5)]
    g = check(mb, x)
    outs = onert_py.infer.session(mb.to_bytes()).infer(x)
    assert outs[1].shape == (2 + 3 * (rhs + 1),)
    assert g["v"].shape == (2,)
    if scale is not None:
        check(mb, x, wrt=["body:w"])


@pytest.mark.parametrize("rhs", [-1, 3])
def test_input_is_output(rhs):
    """io is a pass-through loop value the body reads every iteration: d io = trips * d v0 + d io_out."""
    mb = while_model([("c", [1], I32), ("v0", [2], F32), ("io", [2], F32)],
                     partial(counter_cond, rhs=rhs, dtypes=[I32, F32, F32]), float_input_is_output)
    x = [i32(1), f32(1.0, -2.0), f32(0.25, 0.5)]
    g = check(mb, x)
    _, ones = onert_py.infer.session(mb.to_bytes()).gradients(x, [None, np.ones(2, F32), np.ones(2, F32)])
    trips = max(0, rhs)
    np.testing.assert_allclose(ones["io"], [1 + trips] * 2)
    assert set(g) == {"v0", "io"}


@pytest.mark.parametrize("c0, v0", [(1.2, 2.1), (0.3, 0.4), (5.0, 1.0)])   # 2, 5 and 0 iterations
def test_input_is_different_output(c0, v0):
    """(c, v) -> (v, c+v) while c <= 3: loop values swap roles (Fibonacci)."""
    mb = while_model([("c", [1], F32), ("v", [1], F32)],
                     partial(float_less_equal_cond, rhs=3.0, dtypes=[F32, F32], shapes=[ONE, ONE]),
                     float_input_is_different_output)
    check(mb, [f32(c0), f32(v0)])


@pytest.mark.parametrize("const_io", [False, True])
def test_all_inplace_scenarios(const_io):
    """TILE by the counter: (2, v0, [a], [b, b'], io), rhs 3: v1 and v2 grow 2 then 3 times."""
    specs = [("c", [1], I32), ("v0", [1], F32), ("v1", [1], F32), ("v2", [2], F32), ("io", [1], F32)]
    mb = while_model(specs, partial(counter_cond, rhs=3, dtypes=[I32, F32, F32, F32, F32]),
                     partial(float_all_inplace_scenarios, const_io=const_io))
    x = [i32(2), f32(1.0), f32(2.0), f32(-1.0, 0.5), f32(1.5)]
    g = check(mb, x)
    outs = onert_py.infer.session(mb.to_bytes()).infer(x)
    assert outs[2].shape == (6,) and outs[3].shape == (12,)
    assert set(g) == {"v0", "v1", "v2", "io"}


def test_all_inplace_scenarios_const_io_is_not_read():
    """The body's io is a constant that is also the body's input: the loop value replaces it, so the
    outputs do not depend on the constant's data (finite differences: zero)."""
    specs = [("c", [1], I32), ("v0", [1], F32), ("v1", [1], F32), ("v2", [2], F32), ("io", [1], F32)]
    mb = while_model(specs, partial(counter_cond, rhs=3, dtypes=[I32, F32, F32, F32, F32]),
                     partial(float_all_inplace_scenarios, const_io=True))
    x = [i32(2), f32(1.0), f32(2.0), f32(-1.0, 0.5), f32(1.5)]
    g = check(mb, x, wrt=["body:io", "v2"])
    np.testing.assert_array_equal(g["body:io"], [0])


def test_dynamic_increasing_size():
    mb = while_model([("c", [1], I32), ("v0", [2], F32), ("v1", [1], F32), ("v2", [2], F32)],
                     partial(counter_cond, rhs=3, dtypes=[I32, F32, F32, F32]), float_dynamic_increasing_size)
    x = [i32(1), f32(0.5, -1.0), f32(2.0), f32(-0.5, 3.0)]
    check(mb, x)
    check(mb, x, wrt=["body:one", "body:w", "v0"])


@pytest.mark.parametrize("rhs", [0, 1])   # one and two iterations
def test_dynamic_body_with_aliases(rhs):
    specs = [("c", [1], I32)] + [(n, [2], F32) for n in "abde"]
    mb = while_model(specs, partial(counter_cond, rhs=rhs, dtypes=[I32] + [F32] * 4),
                     float_dynamic_body_with_aliases)
    x = [i32(0), f32(0.1, 0.2), f32(-1.0, 1.0), f32(0.3, -0.7), f32(2.0, 0.0)]
    check(mb, x)
    check(mb, x, wrt=["body:k1", "body:k2", "body:k3"])


@pytest.mark.parametrize("outputs", [[0], [1], [0, 1]])
def test_output_not_consumed(outputs):
    """(a, b, n) -> (a+b, tile(a, n), 1) while a <= 11.5: only some WHILE outputs are model outputs."""
    mb = while_model([("a", [1], F32), ("b", [1], F32), ("n", [1], I32)],
                     partial(float_less_equal_cond, rhs=11.5, dtypes=[F32, F32, I32]), float_output_not_consumed,
                     model_outputs=outputs)
    x = [f32(1.1), f32(2.3), i32(3)]
    g = check(mb, x)
    outs = onert_py.infer.session(mb.to_bytes()).infer(x)
    if outputs == [0]:
        np.testing.assert_allclose(outs[0], [12.4] * 3, rtol=1e-5)
    assert set(g) == {"a", "b"}


def test_onert_add_ten_loop_with_pass_through_data():
    """onert's `while (x < end) x += 10` with a data tensor incremented alongside and one passed through."""
    from builders import add_ten_body, less_than_input_cond

    def cond(sg):
        x, d = _t(sg, "x", ONE, F32), _t(sg, "d", DYN, F32)
        end, p = _t(sg, "end", ONE, F32), _t(sg, "p", DYN, F32)
        o = _t(sg, "cond", ONE, np.bool_)
        sg.op("LESS", [x, end], [o])
        sg.inputs, sg.outputs = [x, d, end, p], [o]
        return sg

    assert less_than_input_cond   # the builders' two-input cond, widened above for the data values
    # add_ten_body: (x, d, end, p) -> (x+10, d+10, end, p)
    mb = while_model([("x", [1], F32), ("d", [4], F32), ("end", [1], F32), ("p", [3], F32)], cond,
                     partial(add_ten_body, dtype=F32, n_data=1, pass_through=[ONE, DYN]))
    for x0, end in ((2.0, 35.0), (5.0, 30.0), (20.0, 10.0)):   # 4, 3 and 0 iterations (x never ties end)
        x = [f32(x0), f32(9, 8, 7, 6), f32(end), f32(1, 2, 3)]
        check(mb, x)
        check(mb, x, wrt=["body:ten"])


# ---------------------------------------------------------------- IF

@pytest.mark.parametrize("cond", [True, False])
def test_if_add_or_mul_broadcasting(cond):
    mb = if_model([("a", [2], F32), ("b", [1, 2], F32)], partial(binary_subgraph, opcode="ADD", dtype=F32),
                  partial(binary_subgraph, opcode="MUL", dtype=F32), [("out", [-1, -1], F32)])
    x = [np.array([cond]), f32(5, 7), np.array([[1, 2]], F32)]
    g = check(mb, x)
    assert g["a"].shape == (2,) and g["b"].shape == (1, 2)


@pytest.mark.parametrize("cond", [True, False])
@pytest.mark.parametrize("b_shape", [[2], [1, 2]])   # [1, 2]: the branches' outputs differ in rank
def test_if_add_or_pad_dynamic_branch(cond, b_shape):
    """then = a + b, else = pad(a, paddings) (b unused): the IF's output is dynamic either way."""
    mb = if_model([("a", [2], F32), ("b", b_shape, F32), ("paddings", [1, 2], I32)], float_add3_subgraph,
                  float_pad_subgraph, [("out", [-1, -1] if len(b_shape) == 2 else [-1], F32)])
    x = [np.array([cond]), f32(5, 7), np.full(b_shape, 1.5, F32), np.array([[1, 2]], I32)]
    g = check(mb, x)
    if not cond:
        np.testing.assert_array_equal(g["b"], np.zeros(b_shape, F32))


def _constant_branches_model() -> ModelBuilder:
    """out = IF(x < 0) { -100 } else { 100 }, float x and constants; the branches take no inputs."""
    mb = ModelBuilder()
    main = mb.subgraph("main")
    x = main.tensor("x", [1], F32)
    cond = main.tensor("x_lt_0", [1], np.bool_)
    out = main.tensor("out", [1], F32)
    main.op("LESS", [x, main.const("zero", np.array([0], F32))], [cond])
    main.op("IF", [cond], [out], then_subgraph_index=1, else_subgraph_index=2)
    main.inputs, main.outputs = [x], [out]
    float_const_subgraph(mb.subgraph("then"), -100.0)
    float_const_subgraph(mb.subgraph("else"), 100.0)
    mb.signature("serving_default", main)
    return mb


@pytest.mark.parametrize("x", [-1.0, 1.0])
def test_if_constant_branches(x):
    mb = _constant_branches_model()
    g = check(mb, [f32(x)])
    np.testing.assert_array_equal(g["x"], [0])
    ct = f32(0.7)
    _, g = onert_py.infer.session(mb.to_bytes()).gradients([f32(x)], [ct], wrt=["x", "then:value", "else:value"])
    np.testing.assert_array_equal(g["x"], [0])
    np.testing.assert_array_equal(g["then:value"], ct if x < 0 else [0])
    np.testing.assert_array_equal(g["else:value"], [0] if x < 0 else ct)
    check(mb, [f32(x)], wrt=["then:value", "else:value"])


@pytest.mark.parametrize("cond", [True, False])
def test_if_three_inputs_each_branch_a_subset(cond):
    mb = if_model([("a", [3], F32), ("b", [3], F32), ("c", [3], F32)], subset_then, subset_else,
                  [("out", [-1], F32)])
    x = [np.array([cond]), f32(1, 2, 3), f32(0.5, -1, 2), f32(4, -5, 0.25)]
    g = check(mb, x)
    unused = "c" if cond else "a"
    np.testing.assert_array_equal(g[unused], np.zeros(3, F32))


# ---------------------------------------------------------------- nesting

def _loop_cond(sg: SubgraphBuilder, trips: int) -> SubgraphBuilder:
    i, x = _t(sg, "i", ONE), _t(sg, "x", DYN, F32)
    o = _t(sg, "cond", ONE, np.bool_)
    sg.op("LESS", [i, sg.const("n", np.array([trips], I32))], [o])
    sg.inputs, sg.outputs = [i, x], [o]
    return sg


def _scale_body(sg: SubgraphBuilder) -> SubgraphBuilder:
    """(i, x) -> (i+1, tanh(x * w)), w a float constant."""
    i, x = _t(sg, "i", ONE), _t(sg, "x", DYN, F32)
    oi = _count(sg, i, "i_out")
    xw = mul(sg, x, sg.const("w", np.array([1.2, -0.8], F32)), _t(sg, "xw", DYN, F32))
    ox = _t(sg, "x_out", DYN, F32)
    sg.op("TANH", [xw], [ox])
    sg.inputs, sg.outputs = [i, x], [oi, ox]
    return sg


def _while_branch(sg: SubgraphBuilder, trips: int, cond_index: int, body_index: int) -> SubgraphBuilder:
    """x -> WHILE(i < trips: (i+1, tanh(x * w)))[1]."""
    x = _t(sg, "x", DYN, F32)
    i0 = sg.const("i0", np.array([0], I32))
    oi, ox = _t(sg, "i_out", ONE), _t(sg, "x_out", DYN, F32)
    sg.op("WHILE", [i0, x], [oi, ox], cond_subgraph_index=cond_index, body_subgraph_index=body_index)
    sg.inputs, sg.outputs = [x], [ox]
    return sg


def _square_branch(sg: SubgraphBuilder) -> SubgraphBuilder:
    x = _t(sg, "x", DYN, F32)
    o = mul(sg, x, x, _t(sg, "out", DYN, F32))
    sg.inputs, sg.outputs = [x], [o]
    return sg


def _while_in_if_model(trips: int) -> ModelBuilder:
    mb = ModelBuilder()
    main = mb.subgraph("main")
    c, x = main.tensor("cond", [1], np.bool_), main.tensor("x", [2], F32)
    out = main.tensor("out", [-1], F32)
    main.op("IF", [c, x], [out], then_subgraph_index=1, else_subgraph_index=2)
    main.inputs, main.outputs = [c, x], [out]
    _while_branch(mb.subgraph("then"), trips, 3, 4)
    _square_branch(mb.subgraph("else"))
    _loop_cond(mb.subgraph("loop_cond"), trips)
    _scale_body(mb.subgraph("loop_body"))
    mb.signature("serving_default", main)
    return mb


@pytest.mark.parametrize("trips", [0, 3])
@pytest.mark.parametrize("cond", [True, False])
def test_while_inside_if(cond, trips):
    mb = _while_in_if_model(trips)
    x = [np.array([cond]), f32(0.6, -0.9)]
    check(mb, x)
    g = check(mb, x, wrt=["x", "loop_body:w"])
    if not cond or trips == 0:
        np.testing.assert_array_equal(g["loop_body:w"], np.zeros(2, F32))


def _if_in_while_model(trips: int, switch: int) -> ModelBuilder:
    """WHILE(i < trips): (i+1, IF(i < switch) { x * w } else { tanh(x) + v }), v a pass-through value."""
    mb = ModelBuilder()
    main = mb.subgraph("main")
    x, v = main.tensor("x", [2], F32), main.tensor("v", [2], F32)
    i0 = main.const("i0", np.array([0], I32))
    outs = [main.tensor("i_out", [1], I32), main.tensor("y", [-1], F32), main.tensor("v_out", [-1], F32)]
    main.op("WHILE", [i0, x, v], outs, cond_subgraph_index=1, body_subgraph_index=2)
    main.inputs, main.outputs = [x, v], [outs[1]]

    cond = mb.subgraph("cond")
    ci, cx, cv = _t(cond, "i", ONE), _t(cond, "x", DYN, F32), _t(cond, "v", DYN, F32)
    co = _t(cond, "cond", ONE, np.bool_)
    cond.op("LESS", [ci, cond.const("n", np.array([trips], I32))], [co])
    cond.inputs, cond.outputs = [ci, cx, cv], [co]

    body = mb.subgraph("body")
    bi, bx, bv = _t(body, "i", ONE), _t(body, "x", DYN, F32), _t(body, "v", DYN, F32)
    p = _t(body, "p", ONE, np.bool_)
    body.op("LESS", [bi, body.const("switch", np.array([switch], I32))], [p])
    y = _t(body, "y", DYN, F32)
    body.op("IF", [p, bx, bv], [y], then_subgraph_index=3, else_subgraph_index=4)
    oi = _count(body, bi, "i_out")
    body.inputs, body.outputs = [bi, bx, bv], [oi, y, bv]

    then = mb.subgraph("then")
    tx, tv = _t(then, "x", DYN, F32), _t(then, "v", DYN, F32)
    to = mul(then, tx, then.const("w", np.array([1.1, -0.7], F32)), _t(then, "out", DYN, F32))
    then.inputs, then.outputs = [tx, tv], [to]

    else_ = mb.subgraph("else")
    ex, ev = _t(else_, "x", DYN, F32), _t(else_, "v", DYN, F32)
    th = _t(else_, "th", DYN, F32)
    else_.op("TANH", [ex], [th])
    eo = add(else_, th, ev, _t(else_, "out", DYN, F32))
    else_.inputs, else_.outputs = [ex, ev], [eo]
    mb.signature("serving_default", main)
    return mb


@pytest.mark.parametrize("trips, switch", [(0, 1), (1, 1), (3, 1), (4, 2), (3, 5)])
def test_if_inside_while(trips, switch):
    mb = _if_in_while_model(trips, switch)
    x = [f32(0.6, -0.9), f32(0.3, 0.2)]
    check(mb, x)
    g = check(mb, x, wrt=["x", "v", "then:w"])
    if trips == 0:
        np.testing.assert_array_equal(g["then:w"], np.zeros(2, F32))
