"""WHILE: the cases of LiteRT's while_test.cc and onert's While tests (see PEER_SCENARIOS.md).

Expected values are the ones the peer suites state; every model runs twice on one session, in both
encodings, and the tflite encoding is also run on LiteRT.
"""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import onert_py
from builders import (
    F32, I32, accumulate_loop_body, add_ten_body, all_inplace_scenarios, assert_outputs, counter_only,
    deep_body, dynamic_body_with_aliases, dynamic_increasing_size,
    dynamic_op_triggers_allocation_of_unused_input, float_doubling_body, float_less_cond, i32,
    input_is_different_output, input_is_output, large_body, large_pad_body, less_equal_cond,
    less_than_input_cond, output_not_consumed, pad_loop_body, run_twice, string_fill_body,
    string_less_equal_cond, while_model,
)
from helpers import FORMATS, run_litert

fmts = pytest.mark.parametrize("fmt", FORMATS)


@fmts
def test_float_body(fmt):
    mb = while_model([("c", [1], F32), ("v", [1], F32)], partial(float_less_cond, rhs=100.0),
                     float_doubling_body)
    run_twice(mb, fmt, [np.array([1], F32), np.array([1], F32)],
              [np.array([256], F32), np.array([256], F32)])


@fmts
def test_input_is_output(fmt):
    mb = while_model([("c", [1], I32), ("v0", [1], I32), ("io", [1], I32)],
                     partial(less_equal_cond, rhs=3, num_inputs=3), input_is_output)
    sess = run_twice(mb, fmt, [i32(1), i32(1), i32(1)], [i32(4), i32(4), i32(1)])
    # io goes in and comes out unchanged; the caller gets its own array, not the input.
    io = i32(1)
    out = sess.infer([i32(1), i32(1), io])
    out[2][0] = 99
    assert io[0] == 1


@fmts
def test_input_is_different_output(fmt):
    mb = while_model([("c", [1], I32), ("v", [1], I32)], partial(less_equal_cond, rhs=3),
                     input_is_different_output)
    run_twice(mb, fmt, [i32(1), i32(2)], [i32(5), i32(8)])


@fmts
def test_counter_only(fmt):
    mb = while_model([("c", [1], I32)], partial(less_equal_cond, rhs=3, num_inputs=1), counter_only)
    run_twice(mb, fmt, [i32(1)], [i32(4)])


@pytest.mark.parametrize("const_io", [True, False], ids=["io_const", "io_input"])
@fmts
def test_all_inplace_scenarios(fmt, const_io):
    mb = while_model([("c", [1], I32), ("v0", [1], I32), ("v1", [1], I32), ("v2", [1], I32), ("io", [1], I32)],
                     partial(less_equal_cond, rhs=3, num_inputs=5),
                     partial(all_inplace_scenarios, const_io=const_io))
    run_twice(mb, fmt, [i32(2), i32(1), i32(2), i32(2), i32(1)],
              [i32(4), i32(5), i32(*[2] * 6), i32(*[4] * 6), i32(1)])


@fmts
def test_unconsumed_outputs_then_resize(fmt):
    """Only two of three WHILE outputs are model outputs; then input 2 grows from [1] to [2]."""
    mb = while_model([("c", [1], I32), ("v0", [1], I32), ("io", [-1], I32)],
                     partial(less_equal_cond, rhs=3, num_inputs=3), input_is_output, model_outputs=[0, 1])
    sess = run_twice(mb, fmt, [i32(1), i32(2), i32(2)], [i32(4), i32(8)])
    for _ in range(2):
        assert_outputs(sess.infer([i32(1), i32(2), i32(2, 2)]), [i32(4), i32(8, 8)])
    if fmt == "tflite":
        assert_outputs(run_litert(mb, [i32(1), i32(2), i32(2, 2)]), [i32(4), i32(8, 8)])


@fmts
def test_dynamic_op_triggers_allocation_of_unused_input(fmt):
    mb = while_model([("c", [1], I32), ("v0", [1], I32), ("v1", [1], I32)],
                     partial(less_equal_cond, rhs=2, num_inputs=3), dynamic_op_triggers_allocation_of_unused_input)
    run_twice(mb, fmt, [i32(2), i32(1), i32(2)], [i32(3), i32(4, 4), i32(2, 2)])


@pytest.mark.parametrize("i", range(5))
@fmts
def test_static_in_place(fmt, i):
    # PEER_SCENARIOS names AccumulateLoopBody here, but its values {6,10,15,21,28} are those of
    # LiteRT's TestStaticInPlace, which uses DeepBody: (c, v) -> (c+1, (c+1)+v+1) from (0, 1).
    mb = while_model([("c", [1], I32), ("v", [1], I32)], partial(less_equal_cond, rhs=i + 1), deep_body)
    run_twice(mb, fmt, [i32(0), i32(1)], [i32(i + 2), i32([6, 10, 15, 21, 28][i])])


@fmts
def test_static_in_place_large(fmt):
    size = 10000
    mb = while_model([("c", [], I32), ("v", [size], I32)], partial(less_equal_cond, rhs=60000), large_body)
    run_twice(mb, fmt, [np.array(1, I32), np.ones(size, I32)],
              [np.array(10010 * size, I32), np.full(size, 70014, I32)])


@pytest.mark.parametrize("i", range(7))
@fmts
def test_triangular_numbers(fmt, i):
    mb = while_model([("c", [1], I32), ("v", [1], I32)], partial(less_equal_cond, rhs=i), accumulate_loop_body)
    sess = run_twice(mb, fmt, [i32(1), i32(1)], [i32(i + 1), i32([1, 3, 6, 10, 15, 21, 28][i])])
    assert sess.profile.iterations[(0, 0)] == 2 * i   # two runs of i iterations (i = 0: none)


@fmts
def test_triangular_numbers_1m(fmt):
    """The 1M-element variant's values (memory is checked in test_copies.py)."""
    n = 1_000_000
    mb = while_model([("c", [1], I32), ("v", [n], I32)], partial(less_equal_cond, rhs=6), accumulate_loop_body)
    run_twice(mb, fmt, [i32(1), np.ones(n, I32)], [i32(7), np.full(n, 28, I32)])


@fmts
def test_pad_loop(fmt):
    mb = while_model([("c", [1], I32), ("v", [2], I32)], partial(less_equal_cond, rhs=4),
                     partial(pad_loop_body, padding=[1, 2]))
    run_twice(mb, fmt, [i32(1), i32(5, 7)], [i32(5), i32(*[0] * 4, 5, 7, *[0] * 8)])


@fmts
def test_dynamic_body_early_exit(fmt):
    mb = while_model([("c", [1], I32), ("v0", [3], I32), ("v1", [10000], I32), ("v2", [1], I32)],
                     partial(less_equal_cond, rhs=0, num_inputs=4), dynamic_increasing_size)
    v1 = np.arange(10000, dtype=I32)
    run_twice(mb, fmt, [i32(1), i32(1, 2, 3), v1, i32(7)], [i32(1), i32(1, 2, 3), v1, i32(7)])


@fmts
def test_dynamic_body_with_sharing(fmt):
    n = 1_000_000
    mb = while_model([("c", [1], I32), ("v0", [3], I32), ("v1", [n], I32), ("v2", [n], I32)],
                     partial(less_equal_cond, rhs=3, num_inputs=4), dynamic_increasing_size)
    v1, v2 = np.zeros(n, I32), np.arange(n, dtype=I32)
    # 3 iterations; v1, v2 gain 2 per iteration (independent formula) and keep their 1M shape.
    run_twice(mb, fmt, [i32(1), i32(1, 2, 3), v1, v2],
              [i32(4), np.tile(i32(4, 5, 6), 6), v1 + 6, v2 + 6])


@fmts
def test_dynamic_body_with_aliases(fmt):
    mb = while_model([(n, [1], I32) for n in ("c", "a", "b", "d", "e")],
                     partial(less_equal_cond, rhs=0, num_inputs=5), dynamic_body_with_aliases)
    run_twice(mb, fmt, [i32(0), i32(1), i32(2), i32(3), i32(4)], [i32(1), i32(11), i32(12), i32(13), i32(13)])


@fmts
def test_output_not_consumed(fmt):
    mb = while_model([("a", [1], I32), ("b", [1], I32), ("n", [1], I32)],
                     partial(less_equal_cond, rhs=11, num_inputs=3), output_not_consumed, model_outputs=[0])
    run_twice(mb, fmt, [i32(1), i32(2), i32(3)], [i32(18, 18, 18)])


@fmts
def test_pad_loop_with_sharing(fmt):
    mb = while_model([("c", [1], I32), ("v0", [1], I32), ("v1", [2], I32)],
                     partial(less_equal_cond, rhs=3, num_inputs=3), partial(large_pad_body, padding=[1, 2]))
    run_twice(mb, fmt, [i32(1), i32(2), i32(3, 4)],
              [i32(5), i32(4, 9, 10, 4, 4), i32(0, 4, 9, 10, 4, 4, 0, 0)])


@fmts
def test_pad_loop_1m_input(fmt):
    n = 1_000_000
    mb = while_model([("c", [1], I32), ("v", [n], I32)], partial(less_equal_cond, rhs=3),
                     partial(pad_loop_body, padding=[1, 2]))
    v = np.zeros(n, I32)
    v[:2] = (5, 7)
    expected = np.zeros(n + 9, I32)
    expected[3:5] = (5, 7)
    run_twice(mb, fmt, [i32(1), v], [i32(4), expected])


@fmts
def test_string_loop(fmt):
    mb = while_model([("s1", [], object), ("s2", [], object), ("i", [1], I32)],
                     partial(string_less_equal_cond, rhs=3), string_fill_body)
    inputs = [np.array(b"A", dtype=object), np.array(b"A", dtype=object), i32(1)]
    expected = [np.array(b"A", dtype=object), np.array([b"A"] * 4, dtype=object), i32(4)]
    run_twice(mb, fmt, inputs, expected)


# ------------------------------------------------------------------ onert's While tests

@pytest.mark.parametrize("x, expected", [(0, 100), (2, 102), (22, 102), (100, 100)])
@fmts
def test_onert_add_ten_until_100(fmt, x, expected):
    mb = while_model([("x", [1], F32)], lambda sg: float_less_cond(sg, 100.0, num_inputs=1), add_ten_body)
    sess = run_twice(mb, fmt, [np.array([x], F32)], [np.array([expected], F32)])
    assert sess.profile.iterations[(0, 0)] == 2 * len(range(x, 100, 10))


@fmts
def test_onert_four_element_pass_through_incremented(fmt):
    mb = while_model([("x", [1], F32), ("d", [4], F32)], lambda sg: float_less_cond(sg, 100.0),
                     partial(add_ten_body, n_data=1))
    run_twice(mb, fmt, [np.array([0], F32), np.full(4, 9, F32)],
              [np.array([100], F32), np.full(4, 109, F32)])


@pytest.mark.parametrize("x, end, expected", [(0, 20, 20), (5, 30, 35), (20, 10, 20)])
@fmts
def test_onert_only_one_while_output_is_model_output(fmt, x, end, expected):
    mb = while_model([("x", [1], F32), ("end", [1], F32)], less_than_input_cond,
                     partial(add_ten_body, pass_through=[[1]]), model_outputs=[0])
    run_twice(mb, fmt, [np.array([x], F32), np.array([end], F32)], [np.array([expected], F32)])


def test_run_after_dynamic_loop_with_other_shapes():
    """A session that ran a growing loop runs again with a different input length."""
    mb = while_model([("c", [1], I32), ("v", [-1], I32)], partial(less_equal_cond, rhs=2),
                     partial(pad_loop_body, padding=[1, 1]))
    sess = onert_py.infer.session(mb.to_bytes("tflite"))
    for v in (i32(1, 2), i32(3), i32(4, 5, 6)):
        expected = np.pad(v, 2)
        assert_outputs(sess.infer([i32(1), v]), [i32(3), expected])


# ------------------------------------------------------------------ nesting and shared subgraphs

def _nested_model():
    """WHILE (c <= 3) { v = IF(c < 2) { WHILE (k <= c) { v += 10; k += 1 } } else { v * 2 }; c += 1 }.

    Subgraphs: 0 main, 1 outer cond, 2 outer body, 3 then, 4 else, 5 inner cond, 6 inner body.
    """
    from onert_py.schema.writer import ModelBuilder
    mb = ModelBuilder()
    main, ocond, obody, then, else_, icond, ibody = (mb.subgraph(n) for n in (
        "main", "outer_cond", "outer_body", "then", "else", "inner_cond", "inner_body"))

    def t(sg, name, dtype=I32):
        return sg.tensor(name, [1], dtype)

    def k(sg, name, value):
        return sg.const(name, np.array([value], I32))

    c, v, oc, ov = t(main, "c"), t(main, "v"), t(main, "c_out"), t(main, "v_out")
    main.op("WHILE", [c, v], [oc, ov], cond_subgraph_index=1, body_subgraph_index=2)
    main.inputs, main.outputs = [c, v], [oc, ov]

    less_equal_cond(ocond, 3)

    c, v = t(obody, "c"), t(obody, "v")
    small, nv, nc = t(obody, "c_lt_2", np.bool_), t(obody, "v_next"), t(obody, "c_next")
    obody.op("LESS", [c, k(obody, "two", 2)], [small])
    obody.op("IF", [small, c, v], [nv], then_subgraph_index=3, else_subgraph_index=4)
    obody.op("ADD", [c, k(obody, "one", 1)], [nc], fused_activation_function=0)
    obody.inputs, obody.outputs = [c, v], [nc, nv]

    c, v = t(then, "c"), t(then, "v")
    ks, cs, vs = t(then, "k_out"), t(then, "c_out"), t(then, "v_out")
    then.op("WHILE", [k(then, "k0", 0), c, v], [ks, cs, vs], cond_subgraph_index=5, body_subgraph_index=6)
    then.inputs, then.outputs = [c, v], [vs]

    c, v, doubled = t(else_, "c"), t(else_, "v"), t(else_, "doubled")
    else_.op("MUL", [v, k(else_, "two", 2)], [doubled], fused_activation_function=0)
    else_.inputs, else_.outputs = [c, v], [doubled]

    kk, c, v, o = t(icond, "k"), t(icond, "c"), t(icond, "v"), t(icond, "cond", np.bool_)
    icond.op("LESS_EQUAL", [kk, c], [o])
    icond.inputs, icond.outputs = [kk, c, v], [o]

    kk, c, v, nk, nv = t(ibody, "k"), t(ibody, "c"), t(ibody, "v"), t(ibody, "k_next"), t(ibody, "v_next")
    ibody.op("ADD", [kk, k(ibody, "one", 1)], [nk], fused_activation_function=0)
    ibody.op("ADD", [v, k(ibody, "ten", 10)], [nv], fused_activation_function=0)
    ibody.inputs, ibody.outputs = [kk, c, v], [nk, c, nv]
    mb.signature("serving_default", main)
    return mb


def _nested_reference(c: int, v: int) -> tuple[int, int]:
    while c <= 3:
        if c < 2:
            kk = 0
            while kk <= c:
                v += 10
                kk += 1
        else:
            v *= 2
        c += 1
    return c, v


@pytest.mark.parametrize("c, v", [(0, 1), (1, 5), (3, 2), (7, 7)])
@fmts
def test_nested_while_in_if_in_while(fmt, c, v):
    ec, ev = _nested_reference(c, v)
    sess = run_twice(_nested_model(), fmt, [i32(c), i32(v)], [i32(ec), i32(ev)])
    outer_iterations = max(0, 4 - c)
    assert sess.profile.iterations[(0, 0)] == 2 * outer_iterations
    assert sess.profile.total_bytes_copied() == 0


def _shared_subgraphs_model():
    """Two WHILEs and an IF all call the same body (subgraph 2); both WHILEs share cond 1.

    (c, v, flag) -> W1(c, v) = (c1, v1); W2(c, v1) = (c2, v2); IF(flag, c2, v2) with body as both branches.
    """
    from onert_py.schema.writer import ModelBuilder
    mb = ModelBuilder()
    main = mb.subgraph("main")
    less_equal_cond(mb.subgraph("cond"), 3)
    accumulate_loop_body(mb.subgraph("body"))
    c, v, flag = main.tensor("c", [1], I32), main.tensor("v", [2], I32), main.tensor("flag", [1], np.bool_)
    c1, v1, c2, v2, c3, v3 = (main.tensor(n, [-1], I32) for n in ("c1", "v1", "c2", "v2", "c3", "v3"))
    main.op("WHILE", [c, v], [c1, v1], cond_subgraph_index=1, body_subgraph_index=2)
    main.op("WHILE", [c, v1], [c2, v2], cond_subgraph_index=1, body_subgraph_index=2)
    main.op("IF", [flag, c2, v2], [c3, v3], then_subgraph_index=2, else_subgraph_index=2)
    main.inputs, main.outputs = [c, v, flag], [c1, v1, c2, v2, c3, v3]
    mb.signature("serving_default", main)
    return mb


@pytest.mark.parametrize("flag", [True, False])
@fmts
def test_subgraph_used_by_several_ops(fmt, flag):
    def accumulate(c, v, rhs=3):
        while c <= rhs:
            c += 1
            v = v + c
        return c, v
    c, v = 1, i32(5, -5)
    c1, v1 = accumulate(c, v)
    c2, v2 = accumulate(c, v1)
    c3, v3 = c2 + 1, v2 + c2 + 1
    run_twice(_shared_subgraphs_model(), fmt, [i32(c), v, np.array([flag])],
              [i32(c1), v1, i32(c2), v2, i32(c3), v3])


def _add_one_body(sg):
    v, o = sg.tensor("v", [3], I32), sg.tensor("v_out", [3], I32)
    sg.op("ADD", [v, sg.const("one", np.array([1], I32))], [o], fused_activation_function=0)
    sg.inputs, sg.outputs = [v], [o]
    return sg


def _grow_body(sg):
    """v -> pad(v + 1, [0, 1]): one element longer every iteration."""
    v, m, o = sg.tensor("v", [-1], I32), sg.tensor("v1", [-1], I32), sg.tensor("v_out", [-1], I32)
    sg.op("ADD", [v, sg.const("one", np.array([1], I32))], [m], fused_activation_function=0)
    sg.op("PAD", [m, sg.const("p", np.array([[0, 1]], I32))], [o])
    sg.inputs, sg.outputs = [v], [o]
    return sg


@fmts
def test_dynamic_cond_with_several_elements_decides_on_the_first(fmt):
    """Once the loop value grows, the cond output has several elements; LiteRT then reads element 0
    (the mechanism behind the output-not-consumed case): [1] -> [2,0] -> [3,1,0] -> [4,2,1,0]."""
    mb = while_model([("v", [1], I32)], partial(less_equal_cond, rhs=3, num_inputs=1), _grow_body)
    run_twice(mb, fmt, [i32(1)], [i32(4, 2, 1, 0)])


@fmts
def test_static_cond_with_several_elements_is_refused(fmt):
    """A cond output declared (and computed) with 3 elements, all shapes static: LiteRT refuses at
    prepare (while.cc: cond output dims must be [1]); onert-py must raise one of its own errors."""
    def three_element_cond(sg):
        v, o = sg.tensor("v", [3], I32), sg.tensor("cond", [3], np.bool_)
        sg.op("LESS_EQUAL", [v, sg.const("rhs", np.array([3], I32))], [o])
        sg.inputs, sg.outputs = [v], [o]
        return sg
    mb = while_model([("v", [3], I32)], three_element_cond, _add_one_body, output_shapes=[[3]])
    if fmt == "tflite":
        with pytest.raises(RuntimeError, match="WHILE"):
            run_litert(mb, [i32(1, 100, 100)])
    with pytest.raises(onert_py.OnertPyError):
        onert_py.infer.session(mb.to_bytes(fmt)).infer([i32(1, 100, 100)])


@fmts
@pytest.mark.parametrize("limit", [None, 3])
def test_fused_loop_and_per_step_loop_agree(fmt, limit):
    """WHILE runs as one generated loop, or step by step while profiling: same results, same
    iteration counts, same iteration-limit error; (c, v) -> 2(c+v) from (1, 1) while c < 100: 4, 16, 64, 256 (4 iterations)."""
    mb = while_model([("c", [1], F32), ("v", [1], F32)], partial(float_less_cond, rhs=100.0),
                     float_doubling_body)
    results = []
    for profiled in (False, True):
        sess = onert_py.infer.session(mb.to_bytes(fmt), max_while_iterations=limit)
        sess.profile.enabled = profiled
        if limit is not None:
            with pytest.raises(onert_py.ExecutionError, match="max_while_iterations=3"):
                sess.infer([np.array([1], F32), np.array([1], F32)])
            continue
        results.append((sess.infer([np.array([1], F32), np.array([1], F32)]),
                        dict(sess.profile.iterations)))
    if limit is None:
        (fused, fused_iters), (stepped, stepped_iters) = results
        assert_outputs(fused, [np.array([256], F32), np.array([256], F32)])
        assert_outputs(stepped, fused)
        assert list(fused_iters.values()) == [4] and fused_iters == stepped_iters


def _reshaped_bound_loop(bound_changes: bool):
    """The converter's counted loop: loop values [1]-shaped, cond i < reshape(n, []), body
    v = v * 0.5 + 1 (and, when bound_changes, n = n - 1: the bound is not loop-invariant then)."""
    from onert_py.schema.writer import ModelBuilder
    mb = ModelBuilder()
    main, cond, body = mb.subgraph("main"), mb.subgraph("cond"), mb.subgraph("body")
    v, n = main.tensor("v", [1], np.float32), main.tensor("n", [1], np.int32)
    outs = [main.tensor("i_out", [], np.int32), main.tensor("v_out", [1], np.float32), main.tensor("n_out", [1], np.int32)]
    main.op("WHILE", [main.const("i0", np.array(0, np.int32)), v, n], outs, cond_subgraph_index=1, body_subgraph_index=2)
    main.inputs, main.outputs = [v, n], [outs[0], outs[1]]
    ci, cv, cn = cond.tensor("i", [], np.int32), cond.tensor("v", [1], np.float32), cond.tensor("n", [1], np.int32)
    scalar, c = cond.tensor("n_scalar", [], np.int32), cond.tensor("c", [], np.bool_)
    cond.op("RESHAPE", [cn, cond.const("shape", np.array([], np.int32))], [scalar])
    cond.op("LESS", [ci, scalar], [c])
    cond.inputs, cond.outputs = [ci, cv, cn], [c]
    bi, bv, bn = body.tensor("i", [], np.int32), body.tensor("v", [1], np.float32), body.tensor("n", [1], np.int32)
    i1, h, v1 = body.tensor("i1", [], np.int32), body.tensor("h", [1], np.float32), body.tensor("v1", [1], np.float32)
    body.op("ADD", [bi, body.const("one", np.array(1, np.int32))], [i1])
    body.op("MUL", [bv, body.const("half", np.array([0.5], np.float32))], [h], fused_activation_function=0)
    body.op("ADD", [h, body.const("onef", np.array([1.0], np.float32))], [v1], fused_activation_function=0)
    n1 = bn
    if bound_changes:
        n1 = body.tensor("n1", [1], np.int32)
        body.op("SUB", [bn, body.const("onei", np.array([1], np.int32))], [n1])
    body.inputs, body.outputs = [bi, bv, bn], [i1, v1, n1]
    mb.signature("serving_default", main)
    return mb


@pytest.mark.parametrize("bound_changes", [False, True])
@pytest.mark.parametrize("n", [0, 1, 7])
def test_reshaped_bound_loop(bound_changes, n):
    """The cond's RESHAPE of a bound the body passes through runs once before the loop; a bound the
    body changes is read every iteration. Both give the formula's results, twice in a row."""
    s = onert_py.infer.session(_reshaped_bound_loop(bound_changes).to_bytes())
    trips = (n + 1) // 2 if bound_changes else n     # i < n - i stops at the middle
    want = np.array([3.0], np.float32)
    for _ in range(trips):
        want = want * np.float32(0.5) + np.float32(1.0)
    for _ in range(2):
        i, v = s.infer([np.array([3.0], np.float32), np.array([n], np.int32)])
        assert int(i) == trips
        np.testing.assert_array_equal(v, want)
