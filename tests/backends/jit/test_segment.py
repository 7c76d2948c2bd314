"""Compiled segments (backends/jit/segment.py): runs of small ops with jit expressions or loop
statements computed by one numba function. References: LiteRT, and the cpu backend op by op."""
from __future__ import annotations

import numpy as np
import pytest

import onert_py
from helpers import assert_close, rng, run_litert
from onert_py.errors import ExecutionError
from onert_py.schema.writer import ModelBuilder

pytest.importorskip("numba")

F32, I32 = np.float32, np.int32


def _segments(sess) -> list:
    """The model ops of each compiled segment of subgraph 0, by type name."""
    ex = sess.executors[0]
    ops = ex.subgraph.operations
    return [[ops[i].kernel_name for i in (op.index, *op.fused)] for op in ex.operations if op.segment]


def _fc(sg, x, units: int, depth: int, name: str, seed: int):
    r = rng(seed)
    w = sg.const(f"{name}_w", (r.normal(0, 0.3, (units, depth))).astype(F32))
    b = sg.const(f"{name}_b", (r.normal(0, 0.1, units)).astype(F32))
    y = sg.tensor(name, [1, 8, units], F32)
    sg.op("FULLY_CONNECTED", [x, w, b], [y], fused_activation_function=0, keep_num_dims=True)
    return y


def _attention_model(beta: float = 1.0) -> bytes:
    """A converter's attention block and LayerNorm, by hand: x [1, 8, 16] -> q, k by FULLY_CONNECTED ->
    RESHAPE / TRANSPOSE to [1, 2, 8, 8] heads -> BATCH_MATMUL(q, k, adj_y) -> MUL by a scale -> SOFTMAX
    -> BATCH_MATMUL with k -> TRANSPOSE / RESHAPE back -> ADD x -> LayerNorm (MEAN, SQUARED_DIFFERENCE,
    MEAN, ADD eps, RSQRT, SUB, MUL). Outputs: the normalised values and the attention weights (an
    intermediate the segment must write out too)."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [1, 8, 16], F32)
    heads = []
    for k, name in enumerate(("q", "k")):
        y = _fc(sg, x, 16, 16, name, k)
        split = sg.tensor(f"{name}_split", [1, 8, 2, 8], F32)
        sg.op("RESHAPE", [y, sg.const(f"{name}_shape", np.array([1, 8, 2, 8], I32))], [split])
        h = sg.tensor(f"{name}_heads", [1, 2, 8, 8], F32)
        sg.op("TRANSPOSE", [split, sg.const(f"{name}_perm", np.array([0, 2, 1, 3], I32))], [h])
        heads.append(h)
    scores, scaled, probs = (sg.tensor(n, [1, 2, 8, 8], F32) for n in ("scores", "scaled", "probs"))
    sg.op("BATCH_MATMUL", heads, [scores], adj_x=False, adj_y=True)
    sg.op("MUL", [scores, sg.const("scale", np.array([0.35], F32))], [scaled], fused_activation_function=0)
    sg.op("SOFTMAX", [scaled], [probs], beta=beta)
    mixed, back = sg.tensor("mixed", [1, 2, 8, 8], F32), sg.tensor("back", [1, 8, 2, 8], F32)
    sg.op("BATCH_MATMUL", [probs, heads[1]], [mixed], adj_x=False, adj_y=False)
    sg.op("TRANSPOSE", [mixed, sg.const("perm_back", np.array([0, 2, 1, 3], I32))], [back])
    joined, res = sg.tensor("joined", [1, 8, 16], F32), sg.tensor("res", [1, 8, 16], F32)
    sg.op("RESHAPE", [back, sg.const("joined_shape", np.array([1, 8, 16], I32))], [joined])
    sg.op("ADD", [joined, x], [res], fused_activation_function=0)
    axis = sg.const("axis", np.array([-1], I32))
    mean, var = sg.tensor("mean", [1, 8, 1], F32), sg.tensor("var", [1, 8, 1], F32)
    sq, centred = sg.tensor("sq", [1, 8, 16], F32), sg.tensor("centred", [1, 8, 16], F32)
    sg.op("MEAN", [res, axis], [mean], keep_dims=True)
    sg.op("SQUARED_DIFFERENCE", [res, mean], [sq])
    sg.op("MEAN", [sq, axis], [var], keep_dims=True)
    eps, inv = sg.tensor("var_eps", [1, 8, 1], F32), sg.tensor("inv", [1, 8, 1], F32)
    sg.op("ADD", [var, sg.const("eps", np.array([1e-3], F32))], [eps], fused_activation_function=0)
    sg.op("RSQRT", [eps], [inv])
    sg.op("SUB", [res, mean], [centred], fused_activation_function=0)
    out = sg.tensor("out", [1, 8, 16], F32)
    sg.op("MUL", [centred, inv], [out], fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [out, probs]
    mb.signature("serving_default", sg)
    return mb.to_bytes("tflite")


def _x(seed: int = 3) -> np.ndarray:
    return rng(seed).normal(0, 1, (1, 8, 16)).astype(F32)


@pytest.mark.parametrize("beta", [1.0, 0.6])
def test_attention_block_is_one_segment_and_matches_litert(beta):
    data = _attention_model(beta)
    sess = onert_py.infer.session(data, backends="jit;cpu")
    segments = _segments(sess)
    assert len(segments) == 1 and len(sess.executors[0].operations) == 1
    assert {"FULLY_CONNECTED", "BATCH_MATMUL", "SOFTMAX", "MEAN", "RSQRT", "TRANSPOSE"} <= set(segments[0])
    x = _x()
    kept = x.copy()
    got = sess.infer([x])
    np.testing.assert_array_equal(x, kept)   # inputs are not written
    # float32 sums in other orders (the GEMM's FMAs, numpy's pairwise sums, BLAS): a few ulp apart
    assert_close(got, run_litert(data, [x]), rtol=1e-5, atol=2e-6)
    assert_close(got, onert_py.infer.session(data, backends="cpu").infer([x]), rtol=1e-5, atol=2e-6)
    # the outputs are the caller's: a second run does not write into the first's
    first = [g.copy() for g in got]
    sess.infer([_x(4)])
    for a, b in zip(got, first):
        np.testing.assert_array_equal(a, b)


def test_segments_off():
    """No segments with fuse_ops off, with ONERT_PY_JIT_SEGMENTS=0, or with the cpu backend only; the
    values are the same."""
    data, x = _attention_model(), _x()
    want = onert_py.infer.session(data, backends="jit;cpu").infer([x])
    for sess in (onert_py.infer.session(data, backends="jit;cpu", fuse_ops=False),
                 onert_py.infer.session(data, backends="cpu")):
        assert _segments(sess) == []
        assert_close(sess.infer([x]), want, rtol=1e-5, atol=2e-6)


def test_segments_off_by_environment(monkeypatch):
    monkeypatch.setenv("ONERT_PY_JIT_SEGMENTS", "0")
    sess = onert_py.infer.session(_attention_model(), backends="jit;cpu")
    assert _segments(sess) == [] and len(sess.executors[0].operations) > 10


def test_preserved_tensors_have_no_segments():
    """The Interpreter keeping every tensor (experimental_preserve_all_tensors) reads intermediates:
    none is computed inside a segment."""
    it = onert_py.Interpreter(model_content=_attention_model(), experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], _x())
    it.invoke()
    assert not any(op.segment for ex in it._executors for op in ex.operations)
    names = {d["name"]: d["index"] for d in it.get_tensor_details()}
    assert np.all(np.isfinite(it.get_tensor(names["scores"])))


def test_op_forced_onto_cpu_is_left_out():
    """op_backend SOFTMAX=cpu: SOFTMAX runs its cpu kernel between two segments."""
    data = _attention_model()
    sess = onert_py.infer.session(data, backends="jit;cpu", op_backend="SOFTMAX=cpu")
    ex = sess.executors[0]
    assert all("SOFTMAX" not in s for s in _segments(sess)) and len(_segments(sess)) == 2
    assert [name for op, name in zip(ex.operations, ex.backend_names) if op.kernel_name == "SOFTMAX"] == ["cpu"]
    x = _x()
    assert_close(sess.infer([x]), run_litert(data, [x]), rtol=1e-5, atol=2e-6)


def _elementwise_tail(sg, y, shape):
    """(y * 2 + 1 - 0.5) max 0: three ops more, so that a segment has the ops it needs (MIN_OPS)."""
    for k, (op, c) in enumerate((("MUL", 2.0), ("ADD", 1.0), ("SUB", 0.5))):
        nxt = sg.tensor(f"tail{k}", shape, F32)
        sg.op(op, [y, sg.const(f"tail_c{k}", np.array([c], F32))], [nxt], fused_activation_function=0)
        y = nxt
    z = sg.tensor("tail", shape, F32)
    sg.op("MAXIMUM", [y, sg.const("zero", np.array([0.0], F32))], [z])
    return z


def _tail(y):
    return np.maximum(y * F32(2) + F32(1) - F32(0.5), F32(0))


def _gather_model() -> bytes:
    """MUL, GATHER of run-time indices, ADD and a tail: one segment whose GATHER (not its first op) gives
    up on an index out of range."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x, idx = sg.tensor("x", [4, 3], F32), sg.tensor("idx", [2], I32)
    m, g, y = sg.tensor("m", [4, 3], F32), sg.tensor("g", [2, 3], F32), sg.tensor("y", [2, 3], F32)
    sg.op("MUL", [x, sg.const("two", np.array([2.0], F32))], [m], fused_activation_function=0)
    sg.op("GATHER", [m, idx], [g], axis=0)
    sg.op("ADD", [g, sg.const("one", np.array([1.0], F32))], [y], fused_activation_function=0)
    z = _elementwise_tail(sg, y, [2, 3])
    sg.inputs, sg.outputs = [x, idx], [y, z]
    mb.signature("serving_default", sg)
    return mb.to_bytes("tflite")


def test_index_out_of_range_gives_the_ops_own_error():
    data = _gather_model()
    sess = onert_py.infer.session(data, backends="jit;cpu")
    assert _segments(sess) == [["MUL", "GATHER", "ADD", "MUL", "ADD", "SUB", "MAXIMUM"]]
    x = np.arange(12, dtype=F32).reshape(4, 3)
    good = [x, np.array([3, 1], I32)]
    assert_close(sess.infer(good), run_litert(data, good), rtol=0, atol=0)
    with pytest.raises(ExecutionError, match=r"index") as caught:
        sess.infer([x, np.array([1, 7], I32)])
    # named once, as the GATHER's own kernel names it outside a segment
    assert str(caught.value).startswith("subgraph 0 operator 1 (GATHER)")
    assert str(caught.value).count("subgraph 0 operator") == 1
    # the session goes on after the error
    assert_close(sess.infer(good), run_litert(data, good), rtol=0, atol=0)


def test_inputs_of_other_shapes_run_the_ops_own_kernels():
    """A segment meeting an input of another shape than it was compiled for (a producer whose file
    declares another shape) runs its ops' own kernels: white-box, the slot set by hand."""
    data = _gather_model()
    sess = onert_py.infer.session(data, backends="jit;cpu")
    ex = sess.executors[0]
    (op,), (run,) = ex.operations, ex.runs
    x = np.arange(18, dtype=F32).reshape(6, 3)
    ex.values[op.inputs[0]], ex.values[op.inputs[1]] = x, np.array([5, 0, 2], I32)
    run()
    y = x[[5, 0, 2]] * 2 + 1
    np.testing.assert_array_equal(ex.values[op.outputs[0]], y)
    np.testing.assert_array_equal(ex.values[op.outputs[1]], _tail(y))


def _matmul_model(lhs, rhs, out, adj_x, adj_y) -> bytes:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    a, b = sg.tensor("a", lhs, F32), sg.tensor("b", rhs, F32)
    p, y = sg.tensor("p", out, F32), sg.tensor("y", out, F32)
    sg.op("BATCH_MATMUL", [a, b], [p], adj_x=adj_x, adj_y=adj_y)
    sg.op("SOFTMAX", [p], [y], beta=1.0)
    sg.inputs, sg.outputs = [a, b], [y, p, _elementwise_tail(sg, y, out)]
    mb.signature("serving_default", sg)
    return mb.to_bytes("tflite")


@pytest.mark.parametrize("lhs, rhs, out, adj_x, adj_y", [
    ([2, 5, 7], [2, 7, 40], [2, 5, 40], False, False),            # more columns than a panel
    ([3, 1, 7, 5], [1, 4, 6, 7], [3, 4, 5, 6], True, True),       # batch dims broadcast, both adjoint
    ([4, 3], [1, 2, 3, 9], [1, 2, 4, 9], False, False),           # lhs of rank 2 against a batch
])
def test_batch_matmul_and_softmax_statements(lhs, rhs, out, adj_x, adj_y):
    data = _matmul_model(lhs, rhs, out, adj_x, adj_y)
    sess = onert_py.infer.session(data, backends="jit;cpu")
    assert _segments(sess) == [["BATCH_MATMUL", "SOFTMAX", "MUL", "ADD", "SUB", "MAXIMUM"]]
    a, b = rng(1).normal(0, 1, lhs).astype(F32), rng(2).normal(0, 1, rhs).astype(F32)
    got = sess.infer([a, b])
    assert_close(got, run_litert(data, [a, b]), rtol=1e-5, atol=1e-6)
    want = np.matmul(np.swapaxes(a, -1, -2) if adj_x else a, np.swapaxes(b, -1, -2) if adj_y else b)
    np.testing.assert_allclose(got[1], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[2], _tail(got[0]), rtol=1e-6, atol=1e-7)


def test_softmax_special_values():
    """SOFTMAX in a segment: a row with a NaN anywhere is NaN (as numpy's max makes it on cpu), -inf
    gives 0, +inf NaN (inf - inf), as the cpu kernel."""
    data = _matmul_model([1, 3, 1], [1, 1, 4], [1, 3, 4], False, False)
    a = np.array([[[1.0], [np.nan], [1.0]]], F32)
    b = np.array([[[0.5, -np.inf, np.nan, np.inf]]], F32)
    b2 = np.array([[[0.5, -np.inf, 2.0, 1.0]]], F32)
    jit = onert_py.infer.session(data, backends="jit;cpu")
    cpu = onert_py.infer.session(data, backends="cpu")
    for inputs in ([a, b], [a, b2]):
        got, want = jit.infer(inputs), cpu.infer(inputs)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=0, equal_nan=True)
    got = jit.infer([a, b2])[0]
    assert np.isnan(got[0, 1]).all() and got[0, 0, 1] == 0 and np.isfinite(got[0, 2]).all()
    assert np.isnan(jit.infer([a, b])[0]).all()


def test_profile_names_segments():
    from onert_py.tools.cmd_bench import fused_line, profile_tables
    sess = onert_py.infer.session(_attention_model(), backends="jit;cpu")
    sess.profile.enabled = True
    sess.infer([_x()])
    line = fused_line(sess)
    assert "run inside 1 compiled segment(s)" in line and "BATCH_MATMUL×2" in line
    assert "(segment)" in profile_tables(sess, 1)


def _dense_block(width: int) -> bytes:
    """x [1, 4, width] -> FULLY_CONNECTED -> MUL -> TANH -> ADD -> FULLY_CONNECTED -> ADD x: a segment
    whose matrix products go through the packed GEMM."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    r = rng(width)
    x = sg.tensor("x", [1, 4, width], F32)
    h = sg.tensor("h", [1, 4, 2 * width], F32)
    sg.op("FULLY_CONNECTED", [x, sg.const("w1", r.normal(0, 0.3, (2 * width, width)).astype(F32)),
                              sg.const("b1", r.normal(0, 0.1, 2 * width).astype(F32))], [h],
          fused_activation_function=0, keep_num_dims=True)
    prev = h
    for k, (op, c) in enumerate((("MUL", 0.5), ("TANH", None), ("ADD", 0.25))):
        y = sg.tensor(f"y{k}", [1, 4, 2 * width], F32)
        if c is None:
            sg.op(op, [prev], [y])
        else:
            sg.op(op, [prev, sg.const(f"c{k}", np.array([c], F32))], [y], fused_activation_function=0)
        prev = y
    z, out = sg.tensor("z", [1, 4, width], F32), sg.tensor("out", [1, 4, width], F32)
    sg.op("FULLY_CONNECTED", [prev, sg.const("w2", r.normal(0, 0.3, (width, 2 * width)).astype(F32)),
                              sg.const("b2", r.normal(0, 0.1, width).astype(F32))], [z],
          fused_activation_function=0, keep_num_dims=True)
    sg.op("ADD", [z, x], [out], fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [out]
    mb.signature("serving_default", sg)
    return mb.to_bytes("tflite")


def test_segments_call_one_compiled_gemm(tmp_path, monkeypatch):
    """The generated code passes the GEMM's sizes as int64 values: numba compiles a called function once
    per literal value of its arguments, and each specialization of the GEMM (its inlined SIMD blocks)
    cost 10-30 s, so a converter's attention layer took 120 s to open the first time. Two segments of
    other sizes, compiled afresh (their modules in a new cache folder), must not add literal ones."""
    from numba.core import types

    from onert_py.backends.jit import _gemm
    monkeypatch.setenv("ONERT_PY_JIT_CACHE", str(tmp_path))
    for width in (24, 40):
        model = _dense_block(width)
        sess = onert_py.infer.session(model, "jit;cpu")
        assert _segments(sess) == [["FULLY_CONNECTED", "MUL", "TANH", "ADD", "FULLY_CONNECTED", "ADD"]]
        x = rng(width + 1).normal(0, 1, (1, 4, width)).astype(F32)
        assert_close(sess.infer([x])[0], run_litert(model, [x])[0], rtol=1e-5, atol=1e-5)
    signatures = list(_gemm._rows_of.overloads)
    assert signatures
    literal = [sig for sig in signatures if any(isinstance(t, types.Literal) for t in sig)]
    assert not literal, literal


def test_ops_inside_segments_are_not_warmed_up(monkeypatch):
    """Kernels that compile on first call are compiled at session creation, except those of the ops a
    segment runs: those are its fallback only (they doubled a first session's compile time)."""
    import onert_py.compiler.compile as compile_module
    warmed = []
    real = compile_module._warm_up
    monkeypatch.setattr(compile_module, "_warm_up", lambda ctx, op, run: (warmed.append(op.index), real(ctx, op, run)))
    model = _dense_block(16)
    sess = onert_py.infer.session(model, "jit;cpu")
    assert _segments(sess) and warmed == []
    warmed.clear()
    unfused = onert_py.infer.session(model, "jit;cpu", fuse_ops=False)
    assert not _segments(unfused) and warmed
