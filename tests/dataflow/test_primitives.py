"""The dataflow executor's rules: deadness through a branch not taken, Merge of dead and live, zero-
iteration loops, nested frames, a cond inside a loop, independent iterations overlapping, and
parallel_iterations=1 following the linear executor's order; the lowering's shape and printout."""
from __future__ import annotations

import numpy as np
import pytest

import onert_py
from dataflow_models import (chain_if_model, cond_both_sides_model, counting_loop_model, independent_iterations_model,
                    nested_loop_model, nested_reference, two_chain_loop_model)
from onert_py.compiler.lowering import format_lowered, lower
from onert_py.ir.lowered import PRIMITIVES

I32, F32 = np.int32, np.float32


def _sessions(mb, **options):
    """(linear, dataflow) sessions of mb. The linear one op by op as the dataflow executor runs (no
    fusion: a compiled segment of the jit would compute a body's ops at once, in other last bits)."""
    data = mb.to_bytes("tflite")
    return (onert_py.infer.session(data, fuse_ops=False),
            onert_py.infer.session(data, executor="dataflow", **options))


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def _computed(sess) -> list[tuple[int, int]]:
    """(subgraph, op) of the ops the last dataflow run computed, in order."""
    ex = sess._executor()
    return [(ex.nodes[nid].sg, ex.nodes[nid].op) for _, nid in ex.trace]


@pytest.mark.parametrize("flag", [True, False])
def test_dead_branch_propagates_through_several_ops_and_merge_takes_the_live_side(flag):
    lin, df = _sessions(chain_if_model(), inter_op_threads=1)
    x = np.array([1, -2, 0.5, 3], F32)
    df._executor().trace = []
    out = df.infer([np.array([flag]), x])
    expected = ((x + 1) * 2 - 3) if flag else x * 10
    np.testing.assert_array_equal(out[0], expected.astype(F32))
    np.testing.assert_array_equal(out[1], (expected + x).astype(F32))
    _same(out, lin.infer([np.array([flag]), x]))
    ran = _computed(df)
    # then = subgraph 1 (3 ops), else = subgraph 2 (1 op): the dead side computes nothing
    assert sorted(s for s, _ in ran) == ([0] + [1] * 3 if flag else [0, 2])


@pytest.mark.parametrize("i, n, expected", [(0, 0, (0, 0)), (5, 3, (5, 0)), (0, 4, (4, 10))])
def test_zero_and_some_iterations(i, n, expected):
    lin, df = _sessions(counting_loop_model(), inter_op_threads=1)
    df._executor().trace = []
    args = [np.array([i], I32), np.array([n], I32), np.array([0], I32)]
    out = df.infer(args)
    assert [int(o[0]) for o in out] == list(expected)
    _same(out, lin.infer(args))
    body_ops = [k for s, k in _computed(df) if s == 2]
    assert len(body_ops) == 2 * max(0, n - i)       # a zero-iteration loop never runs its body
    assert df.profile.iterations[(0, 0)] == max(0, n - i)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("i, n", [(0, 0), (0, 1), (0, 5), (2, 6)])
def test_nested_frames_and_a_cond_inside_a_loop(threads, i, n):
    mb = nested_loop_model()
    lin, df = _sessions(mb, inter_op_threads=threads)
    args = [np.array([i], I32), np.array([n], I32), np.array([1], I32)]
    for _ in range(2):
        out = df.infer(args)
        assert (int(out[0][0]), int(out[1][0])) == nested_reference(i, n, 1)
        _same(out, lin.infer(args))
    g = lower(df.model)
    assert len(g.frames) == 2
    inner = [f for f in g.frames.values() if f.parent is not None]
    assert len(inner) == 1 and inner[0].parent in g.frames and inner[0].name.startswith(inner[0].parent + "/")


def test_lowering_uses_the_five_primitives_and_prints():
    g = lower(onert_py.load_model(nested_loop_model().to_bytes("tflite")))
    counts = g.counts()
    assert all(counts.get(k, 0) > 0 for k in PRIMITIVES)
    assert "IF" not in {n.label for n in g.nodes if n.kind == "Op"}
    assert "WHILE" not in {n.label for n in g.nodes if n.kind == "Op"}
    # n is the outer loop's invariant: one constant Enter
    assert any(n.kind == "Enter" and n.is_constant and n.label == "n" for n in g.nodes)
    text = format_lowered(g)
    assert "Enter('while_0_0', constant) 'n'" in text and "NextIteration" in text and "frame 'while_0_0/" in text


def test_independent_iterations_overlap():
    mb = independent_iterations_model(size=16, depth=2)
    args = [np.array([0], I32), np.array([8], I32), np.random.default_rng(0).standard_normal((16, 16)).astype(F32),
            np.array([0], F32)]
    lin = onert_py.infer.session(mb.to_bytes("tflite"), fuse_ops=False)   # op by op (see _sessions)
    expected = lin.infer(args)
    for threads, p in ((2, 4), (1, 4), (2, 1)):
        df = onert_py.infer.session(mb.to_bytes("tflite"), executor="dataflow", inter_op_threads=threads,
                                    parallel_iterations=p)
        _same(df.infer(args), expected)
        peak = df._executor().last_peak_live_iterations
        assert peak <= p
        if p > 1:
            assert peak > 1, "iterations never overlapped"
        else:
            assert peak == 1


def _linear_order(sess, args) -> list[tuple[int, int]]:
    from onert_py.backends.registry import LOWERING_RULES
    prof = sess.profile
    prof.enabled, prof.trace = True, []
    sess.infer(args)
    prof.enabled = False
    return [(s, k) for name, s, k, _, _ in prof.trace if name not in LOWERING_RULES]


@pytest.mark.parametrize("build, args", [
    (nested_loop_model, [np.array([0], I32), np.array([5], I32), np.array([1], I32)]),
    (chain_if_model, [np.array([True]), np.array([1, 2, 3, 4], F32)]),
    (lambda: two_chain_loop_model(8, 2, 3), [np.array([0], I32), np.ones((8, 8), F32), np.ones((8, 8), F32)]),
])
def test_parallel_iterations_1_follows_the_linear_order(build, args):
    mb = build()
    lin, df = _sessions(mb, parallel_iterations=1)
    assert df._executor().sequential
    df._executor().trace = []
    _same(df.infer(args), lin.infer(args))
    assert _computed(df) == _linear_order(lin, args)


def test_profile_records_ops_under_dataflow():
    lin, df = _sessions(two_chain_loop_model(8, 2, 3), inter_op_threads=2)
    args = [np.array([0], I32), np.ones((8, 8), F32), np.ones((8, 8), F32)]
    df.profile.enabled = True
    _same(df.infer(args), lin.infer(args))
    assert df.profile.op_calls[(2, 1)] == 3         # the first BATCH_MATMUL of the body, 3 iterations
    assert df.profile.iterations[(0, 0)] == 3


def test_cond_both_sides_and_errors_name_the_op():
    lin, df = _sessions(cond_both_sides_model(8, 2))
    x = np.random.default_rng(3).standard_normal((8, 8)).astype(F32)
    for flag in (True, False):
        _same(df.infer([np.array([flag]), x]), lin.infer([np.array([flag]), x]))


def test_options_are_checked():
    data = counting_loop_model().to_bytes("tflite")
    with pytest.raises(ValueError):
        onert_py.infer.session(data, executor="graph")
    with pytest.raises(ValueError):
        onert_py.infer.session(data, executor="dataflow", parallel_iterations=0)
    with pytest.raises(ValueError):
        onert_py.infer.session(data, executor="dataflow", inter_op_threads=0)


def test_max_while_iterations_under_dataflow():
    sess = onert_py.infer.session(counting_loop_model().to_bytes("tflite"), executor="dataflow",
                                  max_while_iterations=3)
    with pytest.raises(onert_py.ExecutionError, match="max_while_iterations"):
        sess.infer([np.array([0], I32), np.array([10], I32), np.array([0], I32)])
    out = sess.infer([np.array([0], I32), np.array([3], I32), np.array([0], I32)])   # still usable
    assert int(out[0][0]) == 3
