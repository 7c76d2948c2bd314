"""Compiling models with dynamic shapes for the shapes they run with (compiler/specialize.py): what is
made static and what stays dynamic, the executors kept per input shapes, and converter-made models
with a dynamic batch placed on the jit backend, against LiteRT and the stored references."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import onert_py
from helpers import JIT_AVAILABLE, cli, corpus_runs, litert_interpreter
from onert_py.compiler.shape_inference import infer_shapes
from onert_py.compiler.specialize import Specializations, relaxed_model, specialize, specialize_declared
from onert_py.schema.writer import ModelBuilder

F32 = np.float32
CORPUS = Path(__file__).parents[1] / "conformance" / "corpus"


def _tensor(model, k: int, name: str):
    return next(t for t in model.subgraphs[k].tensors if t.name == name)


def _two_loops(limit: int = 3) -> bytes:
    """a -> WHILE(x = x + x, `limit` times) and b -> the same WHILE (one cond and body subgraph for
    both), a and b of shapes [-1]."""
    mb = ModelBuilder()
    m, cond, body = mb.subgraph("main"), mb.subgraph("cond"), mb.subgraph("body")
    outs = []
    for name in ("a", "b"):
        x = m.tensor(name, [-1], F32)
        i, y = m.tensor(f"{name}_i", [], np.int32), m.tensor(f"{name}_out", [-1], F32)
        m.op("WHILE", [m.const(f"{name}_i0", np.array(0, np.int32)), x], [i, y], cond_subgraph_index=1,
             body_subgraph_index=2)
        outs.append(y)
    m.inputs, m.outputs = [0, 4], outs
    ci, cx, cb = cond.tensor("ci", [], np.int32), cond.tensor("cx", [-1], F32), cond.tensor("cb", [], np.bool_)
    cond.op("LESS", [ci, cond.const("limit", np.array(limit, np.int32))], [cb])
    cond.inputs, cond.outputs = [ci, cx], [cb]
    bi, bx = body.tensor("bi", [], np.int32), body.tensor("bx", [-1], F32)
    bio, bxo = body.tensor("bi_next", [], np.int32), body.tensor("bx_next", [-1], F32)
    body.op("ADD", [bi, body.const("inc", np.array(1, np.int32))], [bio], fused_activation_function=0)
    body.op("ADD", [bx, bx], [bxo], fused_activation_function=0)
    body.inputs, body.outputs = [bi, bx], [bio, bxo]
    return mb.to_bytes("tflite")


def test_a_subgraph_called_with_two_shapes_stays_dynamic():
    model = onert_py.load_model(_two_loops())
    assert [model.subgraphs[0].tensors[i].name for i in model.subgraphs[0].inputs] == ["a", "b"]
    same = specialize(model, [infer_shapes(model, 0, [(3,), (3,)])])
    assert _tensor(same, 0, "a_out").shape == (3,) and not _tensor(same, 0, "a_out").is_dynamic
    assert _tensor(same, 2, "bx_next").shape == (3,) and not _tensor(same, 2, "bx_next").is_dynamic
    result = infer_shapes(model, 0, [(3,), (5,)])
    assert 2 in result.varied and 0 not in result.varied
    mixed = specialize(model, [result])
    assert _tensor(mixed, 0, "b_out").shape == (5,) and not _tensor(mixed, 0, "b_out").is_dynamic
    assert _tensor(mixed, 2, "bx_next").is_dynamic   # its shapes are only its last call's
    sess = onert_py.infer.session(_two_loops())
    a, b = np.arange(3, dtype=F32), np.arange(5, dtype=F32) - 2
    for shapes in ((a, b), (a, a), (b, b)):
        got = sess.infer(list(shapes))
        for y, x in zip(got, shapes):
            np.testing.assert_array_equal(y, x * 8)


def test_shapes_from_input_values_stay_dynamic():
    """RESHAPE to a shape given as an input: its output and what follows stay dynamic; what comes
    before is static."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x, s = sg.tensor("x", [-1], F32), sg.tensor("s", [2], np.int32)
    e, r, y = sg.tensor("e", [-1], F32), sg.tensor("r", [-1, -1], F32), sg.tensor("y", [-1, -1], F32)
    sg.op("EXP", [x], [e])
    sg.op("RESHAPE", [e, s], [r])
    sg.op("ABS", [r], [y])
    sg.inputs, sg.outputs = [x, s], [y]
    data = mb.to_bytes("tflite")
    model = onert_py.load_model(data)
    special = specialize(model, [infer_shapes(model, 0, [(6,), (2,)])])
    assert _tensor(special, 0, "e").shape == (6,) and not _tensor(special, 0, "e").is_dynamic
    assert _tensor(special, 0, "r").is_dynamic and _tensor(special, 0, "y").is_dynamic
    sess = onert_py.infer.session(data)
    x = np.linspace(-1, 1, 6, dtype=F32)
    for shape in ((2, 3), (3, 2), (1, 6)):
        np.testing.assert_allclose(sess.infer([x, np.array(shape, np.int32)])[0], np.exp(x).reshape(shape), rtol=1e-6)


def _abs_model() -> bytes:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x, y = sg.tensor("x", [-1, 8], F32), sg.tensor("y", [-1, 8], F32)
    sg.op("ABS", [x], [y])
    sg.inputs, sg.outputs = [x], [y]
    return mb.to_bytes("tflite")


def test_session_keeps_four_shape_sets_then_one_dynamic_compile():
    sess = onert_py.infer.session(_abs_model())   # compiles the declared [1, 8] when created
    seen = {}
    for n in (1, 2, 3, 4, 5, 6, 2, 7, 5):
        x = np.linspace(-2, 2, n * 8, dtype=F32).reshape(n, 8)
        np.testing.assert_array_equal(sess.infer([x])[0], np.abs(x))
        assert seen.setdefault(n, sess.executors) is sess.executors   # the same executors again
        assert sess._variant_is_fallback == (n > 4)
    fallback = seen[5]
    assert seen[6] is fallback and seen[7] is fallback
    assert len({id(e) for e in seen.values()}) == 5


def test_specializations_compile_once_per_key_and_fall_back_on_refusal():
    compiled, with_segments = [], []

    def compile_model(model, segments):
        if model == "refused":
            raise onert_py.errors.PrepareError("no kernel for these shapes")
        compiled.append(model)
        with_segments.append(segments)
        return f"executors of {model}"

    cache = Specializations(compile_model, limit=2)
    assert cache.get("a", lambda: "A", lambda: "any") == ("executors of A", "A")
    assert cache.get("a", lambda: "X", lambda: "any") == ("executors of A", "A")
    assert cache.get("b", lambda: "refused", lambda: "any") == ("executors of any", "any")
    assert cache.get("c", lambda: None, lambda: "any") == ("executors of any", "any")
    assert cache.get("d", lambda: "D", lambda: "any") == ("executors of D", "D")
    assert cache.get("e", lambda: "E", lambda: "any") == ("executors of any", "any")   # past the limit
    assert compiled == ["A", "any", "D"]
    assert with_segments == [True, False, False]   # the first set only compiles segments (jit/segment.py)
    assert cache.fallback_model == "any"


def test_interpreter_resize_resets_variable_tensors_as_litert():
    """out = x + v, v a variable tensor broadcast over a dynamic batch: a resize compiles again, and
    the variable starts afresh where LiteRT's AllocateTensors resets it (not on a resize to the same
    shape)."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [-1, 3], F32)
    v = sg.tensor("v", [1, 3], F32, is_variable=True)
    o = sg.tensor("out", [-1, 3], F32)
    sg.op("ADD", [x, v], [o], fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [o]
    data = mb.to_bytes("tflite")
    runs = []
    for it in (litert_interpreter(data), onert_py.Interpreter(model_content=data)):
        it.allocate_tensors()
        it.set_tensor(1, np.array([[10, 20, 30]], F32))
        seen = []
        for b in (1, 2, 1, 1):
            it.resize_tensor_input(0, [b, 3])
            it.allocate_tensors()
            it.set_tensor(0, np.ones((b, 3), F32))
            it.invoke()
            seen.append(it.get_tensor(2))
            it.set_tensor(1, np.array([[10, 20, 30]], F32))
        runs.append(seen)
    for ours, theirs in zip(runs[1], runs[0]):
        np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(runs[0][3], [[11, 21, 31]])   # the last resize changed nothing


def test_converter_made_dynamic_batch_runs_on_the_jit():
    """efficientnet_blocks_dynamic_batch (from_keras_model: shape signature [-1, 48, 48, 3]) through
    the session and the Interpreter at batch 3 and 1: the stored LiteRT references hold and, with numba,
    the jit takes the convolutions (as declared, every op would be on cpu)."""
    name = "efficientnet_blocks_dynamic_batch"
    data = (CORPUS / f"{name}.tflite").read_bytes()
    sess = onert_py.infer.session(data)
    it = onert_py.Interpreter(model_content=data)
    runs, _ = corpus_runs(CORPUS, name)
    assert [x[0].shape[0] for x, _ in runs] == [3, 1]
    for inputs, expected in runs:
        np.testing.assert_allclose(sess.infer(inputs)[0], expected[0], rtol=1e-5, atol=1e-5)
        it.resize_tensor_input(0, list(inputs[0].shape), strict=True)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], inputs[0])
        it.invoke()
        np.testing.assert_allclose(it.get_tensor(it.get_output_details()[0]["index"]), expected[0],
                                   rtol=1e-5, atol=1e-5)
        if JIT_AVAILABLE:
            for executors in (sess.executors, it._executors):
                names = executors[0].backend_names
                assert names.count("jit") > len(names) // 2, names
    model = onert_py.load_model(data)
    assert all(t.is_dynamic for t in model.subgraphs[0].tensors if t.data is None)
    placed, shapes = specialize_declared(model)
    assert shapes == ((1, 48, 48, 3),)
    assert not any(t.is_dynamic for t in placed.subgraphs[0].tensors)


@pytest.mark.skipif(not JIT_AVAILABLE, reason="the jit backend needs numba")
def test_inspect_places_dynamic_models_as_compiled(capsys):
    path = str(CORPUS / "efficientnet_blocks_dynamic_batch.tflite")
    code, out, _ = cli(capsys, "inspect", path)
    assert code == 0
    assert "dynamic shapes: ops placed as compiled for subgraph 0's declared input shapes [1, 48, 48, 3]" in out
    line = next(s for s in out.splitlines() if s.strip().startswith("backends: jit "))
    assert "cpu" in line   # some ops stay there (the small pooled squeeze-excite convolutions)


def test_relaxed_model_marks_every_activation_dynamic():
    model = onert_py.load_model((CORPUS / "efficientnet_blocks.tflite").read_bytes())
    relaxed = relaxed_model(model)
    for t, r in zip(model.subgraphs[0].tensors, relaxed.subgraphs[0].tensors):
        assert r.is_dynamic == (t.data is None) and r.shape == t.shape


def test_shapes_the_model_cannot_take_fail_clearly_and_leave_it_usable():
    """x [-1, 4] reshaped to a constant [2, 8]: batch 3 cannot be inferred, so the session runs it on the
    dynamic compile, whose kernel names the op; the input is not modified, and batch 4 still runs on
    the compile for its shapes. The Interpreter refuses the resize in allocate_tensors."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x, y = sg.tensor("x", [-1, 4], F32), sg.tensor("y", [2, 8], F32)
    sg.op("RESHAPE", [x, sg.const("shape", np.array([2, 8], np.int32))], [y])
    sg.inputs, sg.outputs = [x], [y]
    data = mb.to_bytes("tflite")
    sess = onert_py.infer.session(data)
    bad = np.ones((3, 4), F32)
    with pytest.raises(onert_py.errors.ExecutionError,
                       match=r"operator 0 \(RESHAPE\).*12 elements into shape \[2, 8\]"):
        sess.infer([bad])
    np.testing.assert_array_equal(bad, np.ones((3, 4), F32))
    good = np.arange(16, dtype=F32).reshape(4, 4)
    np.testing.assert_array_equal(sess.infer([good])[0], good.reshape(2, 8))
    assert not sess._variant_is_fallback
    it = onert_py.Interpreter(model_content=data)
    it.resize_tensor_input(0, [3, 4])
    with pytest.raises(RuntimeError, match=r"allocate_tensors failed: .*RESHAPE.*12 elements into shape \[2, 8\]"):
        it.allocate_tensors()


def test_shape_arithmetic_of_a_dynamic_batch_is_folded():
    """A Keras model with a dynamic batch computes its reshapes' shapes at run time (SHAPE ->
    STRIDED_SLICE / GATHER -> PACK -> RESHAPE; ones_like as SHAPE -> FILL). For the shapes a session
    compiles for, those values are known: specialize records them (Subgraph.shape_values) and the
    compiler folds the ops, at batch 3 and at batch 1. The stored LiteRT references hold through the
    session and the Interpreter."""
    name = "bert_classifier_dynamic_batch"
    data = (CORPUS / f"{name}.tflite").read_bytes()
    model = onert_py.load_model(data)
    main = model.subgraphs[0]
    shape_ops = [op for op in main.operations if op.kernel_name == "SHAPE"]
    assert shape_ops
    special = specialize(model, [infer_shapes(model, 0, [(3, 12)] * 3)])
    for op in shape_ops:
        x_shape = special.subgraphs[0].tensors[op.inputs[0]].shape
        np.testing.assert_array_equal(special.subgraphs[0].shape_values[op.outputs[0]], x_shape)
        assert x_shape[0] == 3
    sess = onert_py.infer.session(data)
    it = onert_py.Interpreter(model_content=data)
    runs, _ = corpus_runs(CORPUS, name)
    assert sorted({x[0].shape[0] for x, _ in runs}) == [1, 3]
    for inputs, expected in runs:
        got = sess.infer(inputs)
        it.resize_tensor_input(0, list(inputs[0].shape), strict=True)
        for k in range(1, len(inputs)):
            it.resize_tensor_input(k, list(inputs[k].shape), strict=True)
        it.allocate_tensors()
        for d, x in zip(it.get_input_details(), inputs):
            it.set_tensor(d["index"], x)
        it.invoke()
        for ours, theirs in ((got[0], expected[0]),
                             (it.get_tensor(it.get_output_details()[0]["index"]), expected[0])):
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
        for executors in (sess.executors, it._executors):
            ran = [op.kernel_name for op in executors[0].operations]
            assert "SHAPE" not in ran and "FILL" not in ran, ran


@pytest.mark.parametrize("backends", ["cpu", "jit;cpu"] if JIT_AVAILABLE else ["cpu"])
def test_folded_shape_values_follow_each_compiled_batch(backends):
    """SHAPE of a dynamic batch, then ADD / MUL / SUB on it (an independent formula gives the values):
    each compile folds the chain for its own batch, returned as an output, and the next batch is not
    given the previous one's values."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [-1, 4], F32)
    s, a, m, n = (sg.tensor(name, [2], np.int32) for name in ("s", "a", "m", "n"))
    sg.op("SHAPE", [x], [s], out_type=2)
    sg.op("ADD", [s, sg.const("one", np.array([1, 0], np.int32))], [a], fused_activation_function=0)
    sg.op("MUL", [a, sg.const("two", np.array([2, 3], np.int32))], [m], fused_activation_function=0)
    sg.op("SUB", [m, sg.const("three", np.array([3, 1], np.int32))], [n], fused_activation_function=0)
    y = sg.tensor("y", [-1, 4], F32)
    sg.op("ABS", [x], [y])
    sg.inputs, sg.outputs = [x], [n, y]
    sess = onert_py.infer.session(mb.to_bytes("tflite"), backends)
    for batch in (1, 3, 2, 3):
        x_value = np.full((batch, 4), -2, F32)
        got, y_value = sess.infer([x_value])
        np.testing.assert_array_equal(got, (np.array([batch, 4]) + [1, 0]) * [2, 3] - [3, 1])
        np.testing.assert_array_equal(y_value, np.abs(x_value))
        assert [op.kernel_name for op in sess.executors[0].operations] == ["ABS"]
