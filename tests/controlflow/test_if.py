"""IF: the cases of LiteRT's if_test.cc (see PEER_SCENARIOS.md), in both encodings, run twice."""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import onert_py
from builders import (
    F32, I32, accumulate_loop_body, add_subgraph, all_inplace_scenarios, assert_outputs, const_subgraph,
    counter_only, deep_body, dynamic_body_with_aliases, dynamic_increasing_size,
    dynamic_op_triggers_allocation_of_unused_input, float_doubling_body, i32, if_model,
    input_is_different_output, input_is_output, large_body, large_pad_body, mul_subgraph,
    output_not_consumed, pad_loop_body, pad_subgraph, run_twice, string_fill_body,
)
from helpers import FORMATS, run_litert
from onert_py.schema.writer import ModelBuilder

fmts = pytest.mark.parametrize("fmt", FORMATS)
T, F = np.array([True]), np.array([False])


@pytest.mark.parametrize("cond, expected", [(True, [[6, 9]]), (False, [[5, 14]])])
@fmts
def test_add_or_mul(fmt, cond, expected):
    mb = if_model([("a", [2], I32), ("b", [1, 2], I32)], add_subgraph, mul_subgraph, [("out", [-1, -1], I32)])
    run_twice(mb, fmt, [np.array([cond]), i32(5, 7), np.array([[1, 2]], I32)], [np.array(expected, I32)])


@pytest.mark.parametrize("cond, b_values, expected", [(True, (9, 19), (10, 20)), (False, (0, 7), (0, 7))])
@fmts
def test_large_inputs_twice(fmt, cond, b_values, expected):
    n = 100_000
    mb = if_model([("a", [n], I32), ("b", [1], I32)], add_subgraph, mul_subgraph, [("out", [-1], I32)])
    a = np.ones(n, I32)
    for b, e in zip(b_values, expected):   # a new b on each pair of runs; results stay stable
        run_twice(mb, fmt, [np.array([cond]), a, i32(b)], [np.full(n, e, I32)])


@pytest.mark.parametrize("cond, expected", [(True, np.array([[6, 9]], I32)), (False, i32(0, 5, 7, 0, 0))])
@fmts
def test_dynamic_branch(fmt, cond, expected):
    """then = Add (static), else = Pad (dynamic): the IF output is dynamic whichever branch runs."""
    mb = if_model([("a", [2], I32), ("b", [1, 2], I32)], add_subgraph, pad_subgraph, [("out", [-1, -1], I32)])
    run_twice(mb, fmt, [np.array([cond]), i32(5, 7), np.array([[1, 2]], I32)], [expected])


@fmts
def test_dynamic_branch_alternating(fmt):
    """One session alternates branches: the output shape follows the branch taken each time."""
    mb = if_model([("a", [2], I32), ("b", [1, 2], I32)], add_subgraph, pad_subgraph, [("out", [-1, -1], I32)])
    sess = onert_py.infer.session(mb.to_bytes(fmt))
    for cond in (True, False, True, False):
        out = sess.infer([np.array([cond]), i32(5, 7), np.array([[1, 2]], I32)])
        assert_outputs(out, [np.array([[6, 9]], I32) if cond else i32(0, 5, 7, 0, 0)])


# ------------------------------------------------------------ each WHILE body as both branches
# One iteration of each body, by an independent numpy formula.

def _tile(x, c):
    return np.tile(x, int(np.asarray(c).reshape(-1)[0]))


BODIES = {
    "accumulate": (accumulate_loop_body, [i32(1), i32(1)], lambda c, v: [c + 1, c + 1 + v]),
    "deep": (deep_body, [i32(0), i32(1)], lambda c, v: [c + 1, c + 1 + v + 1]),
    "large": (large_body, [np.array(1, I32), np.ones(10000, I32)],
              lambda c, v: [np.array(v.sum(), I32), c + v + 4]),
    "input_is_output": (input_is_output, [i32(1), i32(1), i32(1)], lambda c, v0, io: [c + 1, v0 + io, io]),
    "input_is_different_output": (input_is_different_output, [i32(1), i32(2)], lambda c, v: [v, c + v]),
    "counter_only": (counter_only, [i32(1)], lambda c: [c + 1]),
    "all_inplace": (all_inplace_scenarios, [i32(2), i32(1), i32(2), i32(2), i32(1)],
                    lambda c, v0, v1, v2, io: [c + 1, v0 + 2, _tile(v1, c), _tile(v2, c) + 1, i32(1)]),
    "dynamic_op_unused_input": (dynamic_op_triggers_allocation_of_unused_input, [i32(2), i32(1), i32(2)],
                                lambda c, v0, v1: [c + 1, v0 + 1 + _tile(v1, c), _tile(v1, c)]),
    "dynamic_increasing": (dynamic_increasing_size, [i32(3), i32(1, 2, 3), np.arange(5, dtype=I32), i32(7)],
                           lambda c, v0, v1, v2: [c + 1, _tile(v0, c) + 1, v1 + 2, v2 + 2]),
    "aliases": (dynamic_body_with_aliases, [i32(0), i32(1), i32(2), i32(3), i32(4)],
                lambda c, a, b, d, e: [c + 1] + [a + b + d + e + k for k in (1, 2, 3, 3)]),
    "output_not_consumed": (output_not_consumed, [i32(1, 2), i32(2), i32(3)],
                            lambda a, b, n: [a + b, _tile(a, n), i32(1)]),
    "pad_loop": (partial(pad_loop_body, padding=[1, 2]), [i32(1), i32(5, 7)],
                 lambda c, v: [c + 1, np.pad(v, (1, 2))]),
    "large_pad": (partial(large_pad_body, padding=[1, 2]), [i32(1), i32(2), i32(3, 4)],
                  lambda c, v0, v1: [c + 2, c + v1 + 1, np.pad(c + v1 + 1, (1, 2))]),
    "float_doubling": (float_doubling_body, [np.array([1], F32), np.array([1], F32)],
                       lambda c, v: [(c + v) * 2, (c + v) * 2]),
    "string_fill": (string_fill_body, [np.array(b"A", object), np.array([b"B"], object), i32(2)],
                    lambda s1, s2, i: [s1, np.array([b"A"] * 3, object), i + 1]),
}


@pytest.mark.parametrize("name", sorted(BODIES))
@pytest.mark.parametrize("cond", [True, False])
@fmts
def test_while_body_as_both_branches(fmt, name, cond):
    body, inputs, step = BODIES[name]
    expected = [np.asarray(e) for e in step(*inputs)]
    specs = [(f"in{k}", list(np.shape(x)), np.asarray(x).dtype) for k, x in enumerate(inputs)]
    outs = [(f"out{k}", [-1] * e.ndim, e.dtype) for k, e in enumerate(expected)]
    mb = if_model(specs, body, body, outs)
    run_twice(mb, fmt, [np.array([cond]), *inputs], expected)


# ------------------------------------------------------------ branches without inputs

def _constant_branches_model() -> ModelBuilder:
    """out = IF(x < 0) { -100 } else { 100 }; the branches take no inputs."""
    mb = ModelBuilder()
    main = mb.subgraph("main")
    x = main.tensor("x", [1], I32)
    zero = main.const("zero", np.array([0], I32))
    cond = main.tensor("x_lt_0", [1], np.bool_)
    out = main.tensor("out", [1], I32)
    main.op("LESS", [x, zero], [cond])
    main.op("IF", [cond], [out], then_subgraph_index=1, else_subgraph_index=2)
    main.inputs, main.outputs = [x], [out]
    const_subgraph(mb.subgraph("then"), -100)
    const_subgraph(mb.subgraph("else"), 100)
    mb.signature("serving_default", main)
    return mb


@pytest.mark.parametrize("x, expected", [(-1, -100), (1, 100)])
@fmts
def test_branches_without_inputs(fmt, x, expected):
    run_twice(_constant_branches_model(), fmt, [i32(x)], [i32(expected)])


# ------------------------------------------------------------ branches reading different inputs

def _subset_then(sg):
    """(a, b, c) -> a + b; c unused."""
    a, b, c = (sg.tensor(n, [-1], I32) for n in "abc")
    o = sg.tensor("out", [-1], I32)
    sg.op("ADD", [a, b], [o], fused_activation_function=0)
    sg.inputs, sg.outputs = [a, b, c], [o]
    return sg


def _subset_else(sg):
    """(a, b, c) -> c * c; a and b unused."""
    a, b, c = (sg.tensor(n, [-1], I32) for n in "abc")
    o = sg.tensor("out", [-1], I32)
    sg.op("MUL", [c, c], [o], fused_activation_function=0)
    sg.inputs, sg.outputs = [a, b, c], [o]
    return sg


@pytest.mark.parametrize("cond", [True, False])
@fmts
def test_three_inputs_each_branch_uses_a_subset(fmt, cond):
    a, b, c = i32(1, 2, 3), i32(10, 20, 30), i32(4, 5, 6)
    mb = if_model([("a", [3], I32), ("b", [3], I32), ("c", [3], I32)], _subset_then, _subset_else,
                  [("out", [-1], I32)])
    run_twice(mb, fmt, [np.array([cond]), a, b, c], [a + b if cond else c * c])


# ------------------------------------------------------------ condition shapes

@pytest.mark.parametrize("cond_shape", [[], [1], [1, 1]])
@pytest.mark.parametrize("cond", [True, False])
@fmts
def test_condition_of_any_one_element_shape(fmt, cond_shape, cond):
    mb = ModelBuilder()
    main = mb.subgraph("main")
    c = main.tensor("cond", cond_shape, np.bool_)
    a, b = main.tensor("a", [2], I32), main.tensor("b", [2], I32)
    out = main.tensor("out", [2], I32)
    main.op("IF", [c, a, b], [out], then_subgraph_index=1, else_subgraph_index=2)
    main.inputs, main.outputs = [c, a, b], [out]
    add_subgraph(mb.subgraph("then"))
    mul_subgraph(mb.subgraph("else"))
    mb.signature("serving_default", main)
    a_v, b_v = i32(3, 4), i32(5, 6)
    run_twice(mb, fmt, [np.full(cond_shape, cond), a_v, b_v], [a_v + b_v if cond else a_v * b_v])


def test_litert_agrees_on_the_add_or_mul_case():
    """A sanity check of the reference itself: LiteRT gives the peer values for both branches."""
    mb = if_model([("a", [2], I32), ("b", [1, 2], I32)], add_subgraph, mul_subgraph, [("out", [-1, -1], I32)])
    assert_outputs(run_litert(mb, [T, i32(5, 7), np.array([[1, 2]], I32)]), [np.array([[6, 9]], I32)])
    assert_outputs(run_litert(mb, [F, i32(5, 7), np.array([[1, 2]], I32)]), [np.array([[5, 14]], I32)])


def _dividing_branch(sg):
    """(a, b) -> a / b, int32: divides by zero when b is 0."""
    a, b, out = sg.tensor("a", [2], I32), sg.tensor("b", [1, 2], I32), sg.tensor("q", [1, 2], I32)
    sg.op("DIV", [a, b], [out], fused_activation_function=0)
    sg.inputs, sg.outputs = [a, b], [out]
    return sg


@pytest.mark.parametrize("profiled", [False, True], ids=["fused", "per_step"])
@fmts
def test_branch_error_names_the_branch_op_and_session_recovers(fmt, profiled):
    """IF runs its branch inlined in one generated closure (or step by step while profiling): an
    error inside the branch names the branch's subgraph and op either way."""
    mb = if_model([("a", [2], I32), ("b", [1, 2], I32)], _dividing_branch, add_subgraph,
                  [("out", [1, 2], I32)])
    sess = onert_py.infer.session(mb.to_bytes(fmt))
    sess.profile.enabled = profiled
    with pytest.raises(onert_py.ExecutionError) as e:
        sess.infer([T, i32(6, 8), np.array([[0, 2]], I32)])
    assert "subgraph 1" in str(e.value) and "DIV" in str(e.value) and "IF" in str(e.value)
    assert_outputs(sess.infer([T, i32(6, 8), np.array([[3, 2]], I32)]), [np.array([[2, 4]], I32)])
    assert_outputs(sess.infer([F, i32(6, 8), np.array([[3, 2]], I32)]), [np.array([[9, 10]], I32)])
