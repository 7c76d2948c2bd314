"""Static shape inference (onert_py.compiler.shape_inference): control flow, value propagation, errors.

References: shapes written out by hand from each op's documented semantics; LiteRT's allocate_tensors()
for the LITERT policy (which ops it evaluates at prepare time); actual run shapes for the "never wrong"
check over the conformance corpus.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers import kernel_params
from controlflow.builders import (
    I32, accumulate_loop_body, add_subgraph, if_model, less_equal_cond, pad_loop_body, pad_subgraph,
    while_model,
)
from onert_py.compiler.shape_inference import (
    FULL, LITERT, LITERT_VALUE_OPS, ShapeCache, ShapeInferenceError, infer_shapes, register_shape_function,
)
from onert_py.errors import PrepareError
from onert_py.schema.writer import ModelBuilder

F32 = np.float32
CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "corpus"


def _outputs(model, result):
    return result.output_shapes(model)


def _index(model, name: str, k: int = 0) -> int:
    return next(t.index for t in model.subgraphs[k].tensors if t.name == name)


# ---------------------------------------------------------------- WHILE

def test_while_keeping_shapes_is_static_under_both_policies() -> None:
    model = while_model([("c", [1], I32), ("v", [-1], I32)], lambda sg: less_equal_cond(sg, 5),
                        accumulate_loop_body).build()
    for policy in (FULL, LITERT):
        r = infer_shapes(model, 0, [(1,), (7,)], policy=policy)
        assert _outputs(model, r) == [(1,), (7,)], policy.name
        assert not r.main.has_dynamic
        body = model.subgraphs[2]
        assert [r[2].shapes[o] for o in body.outputs] == [(1,), (7,)]
        assert r[1].shapes[model.subgraphs[1].outputs[0]] == (1,)   # cond verdict


def test_while_growing_value_is_dynamic() -> None:
    """pad(v, [1, 2]) per iteration: the body's output is static for a given input (10 from 7) but
    differs from its input, so the loop's output is dynamic (LiteRT's while.cc rule)."""
    model = while_model([("c", [1], I32), ("v", [-1], I32)], lambda sg: less_equal_cond(sg, 5),
                        lambda sg: pad_loop_body(sg, [1, 2])).build()
    full = infer_shapes(model, 0, [(1,), (7,)], policy=FULL)
    assert _outputs(model, full) == [(1,), (-1,)]       # fixpoint: the counter keeps its shape
    assert full.main.has_dynamic
    lite = infer_shapes(model, 0, [(1,), (7,)], policy=LITERT)
    assert _outputs(model, lite) == [(-1,), (-1,)]      # LiteRT: every output of a dynamic WHILE
    body = model.subgraphs[2]
    assert lite[2].shapes[body.outputs[1]] == (10,)     # one prepare of the body with the loop inputs


def test_while_fixpoint_reaches_a_partially_known_shape() -> None:
    """A 2-D value padded only along dim 0: dim 1 stays known through the fixpoint."""
    mb = ModelBuilder()
    main, cond, body = mb.subgraph("main"), mb.subgraph("cond"), mb.subgraph("body")
    c0, v0 = main.tensor("c", [1], I32), main.tensor("v", [-1, 3], F32)
    c1, v1 = main.tensor("c_out", [1], I32), main.tensor("v_out", [-1, 3], F32)
    main.op("WHILE", [c0, v0], [c1, v1], cond_subgraph_index=1, body_subgraph_index=2)
    main.inputs, main.outputs = [c0, v0], [c1, v1]
    less_equal_cond(cond, 3, dtypes=[I32, F32])
    bc, bv = body.tensor("c", [1], I32), body.tensor("v", [-1, 3], F32)
    oc, ov = body.tensor("c_out", [1], I32), body.tensor("v_out", [-1, 3], F32)
    body.op("ADD", [bc, body.const("one", np.array([1], I32))], [oc])
    body.op("PAD", [bv, body.const("p", np.array([[0, 1], [0, 0]], I32))], [ov])
    body.inputs, body.outputs = [bc, bv], [oc, ov]
    model = mb.build()
    assert _outputs(model, infer_shapes(model, 0, [(1,), (2, 3)])) == [(1,), (-1, 3)]


# ---------------------------------------------------------------- IF

def test_if_with_equal_branch_shapes_is_static() -> None:
    model = if_model([("a", [-1], I32), ("b", [-1], I32)], add_subgraph, add_subgraph,
                     [("out", [-1], I32)]).build()
    for policy in (FULL, LITERT):
        r = infer_shapes(model, 0, [(1,), (4,), (4,)], policy=policy)
        assert _outputs(model, r) == [(4,)]
        assert r[1].shapes[model.subgraphs[1].outputs[0]] == (4,)
        assert r[2].shapes[model.subgraphs[2].outputs[0]] == (4,)


def test_if_with_different_branch_shapes_is_dynamic() -> None:
    """then: a + b keeps [4]; else: pad(a, [[1, 1]]) gives [6] -> the IF output is dynamic."""
    def padded(sg):
        pad_subgraph(sg)
        return sg
    mb = ModelBuilder()
    main = mb.subgraph("main")
    c = main.tensor("cond", [1], np.bool_)
    a, p = main.tensor("a", [-1], I32), main.const("pads", np.array([[1, 1]], I32))
    o = main.tensor("out", [-1], I32)
    then, other = mb.subgraph("then"), mb.subgraph("else")
    x, y, z = then.tensor("x", [-1], I32), then.tensor("y", [2, 2], I32), then.tensor("z", [-1], I32)
    then.op("ADD", [x, x], [z])
    then.inputs, then.outputs = [x, y], [z]
    padded(other)
    main.op("IF", [c, a, p], [o], then_subgraph_index=1, else_subgraph_index=2)
    main.inputs, main.outputs = [c, a], [o]
    model = mb.build()
    full = infer_shapes(model, 0, [(1,), (4,)], policy=FULL)
    assert _outputs(model, full) == [(-1,)]
    assert full[2].shapes[model.subgraphs[2].outputs[0]] == (-1,)   # pad of a non-constant input
    assert _outputs(model, infer_shapes(model, 0, [(1,), (4,)], policy=LITERT)) == [(-1,)]


def test_if_condition_must_have_one_element() -> None:
    model = if_model([("a", [-1], I32), ("b", [-1], I32)], add_subgraph, add_subgraph,
                     [("out", [-1], I32)]).build()
    with pytest.raises(ShapeInferenceError, match=r"operator 0 \(IF\).*one element"):
        infer_shapes(model, 0, [(2,), (4,), (4,)])


def test_while_in_if_is_inferred_through_both_levels() -> None:
    """The corpus model with a WHILE inside an IF branch: everything static for its declared shapes."""
    from onert_py.loader import load_model
    model = load_model(CORPUS / "while_in_cond.tflite")
    r = infer_shapes(model)
    assert len(r.subgraphs) == len(model.subgraphs)        # every subgraph was reached
    assert all(not s.has_dynamic for s in r.subgraphs.values())
    assert _outputs(model, r) == [tuple(model.main.tensors[o].shape) for o in model.main.outputs]


# ---------------------------------------------------------------- values

def _converter_reshape(pack: bool = True) -> ModelBuilder:
    """x [-1, 6] -> reshape(x, [shape(x)[0], 2, 3]) the way the TF converter writes it:
    SHAPE -> STRIDED_SLICE (shrink) -> PACK with constants -> RESHAPE."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [-1, 6], F32)
    s, b, tgt = sg.tensor("s", [2], I32), sg.tensor("b", [], I32), sg.tensor("tgt", [3], I32)
    y = sg.tensor("y", [-1, 2, 3], F32)
    z = sg.tensor("z", [-1, 2, 3], F32)
    sg.op("SHAPE", [x], [s], out_type=2)
    sg.op("STRIDED_SLICE", [s, sg.const("b0", [0]), sg.const("e0", [1]), sg.const("st", [1])], [b],
          shrink_axis_mask=1)
    sg.op("PACK", [b, sg.const("c2", I32(2)), sg.const("c3", I32(3))], [tgt], values_count=3, axis=0)
    sg.op("RESHAPE", [x, tgt], [y])
    sg.op("RELU", [y], [z])
    sg.inputs, sg.outputs = [x], [z]
    return mb


def test_converter_shape_arithmetic_stays_static() -> None:
    model = _converter_reshape().build()
    r = infer_shapes(model, 0, [(5, 6)])
    assert _outputs(model, r) == [(5, 2, 3)]
    assert not r.main.has_dynamic
    np.testing.assert_array_equal(r.main.values[_index(model, "tgt")], [5, 2, 3])


def test_litert_policy_stops_where_litert_stops() -> None:
    """LiteRT does not evaluate PACK at prepare time: its RESHAPE is dynamic and nothing after it is
    prepared (z keeps its previous shape)."""
    model = _converter_reshape().build()
    r = infer_shapes(model, 0, [(5, 6)], policy=LITERT)
    y, z = _index(model, "y"), _index(model, "z")
    assert r.main.has_dynamic and r.main.shapes[y] == (-1, -1, -1)
    assert r.main.shapes[z] is None and z not in r.main.resolved
    assert r.main.resolved[_index(model, "tgt")] == (3,)   # PACK's output shape is still known
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    it = litert.Interpreter(model_content=_converter_reshape().to_bytes(),
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.resize_tensor_input(0, [5, 6])
    it.allocate_tensors()
    shapes = {d["name"]: d["shape"].tolist() for d in it.get_tensor_details()}
    assert shapes["y"] == [1, 2, 3] and shapes["z"] == [1, 2, 3]    # declared: not propagated


# The chain SHAPE(x) -> op -> RESHAPE(x, result) with x resized to [4, 6]: LiteRT prepares the RESHAPE
# statically exactly when it evaluated `op` at prepare time.
def _c(sg, v):
    return sg.const(f"c{len(sg.tensors)}", np.asarray(v, I32))


_CHAINS = {
    "MUL": lambda sg, s, t: sg.op("MUL", [s, _c(sg, [1, 1])], [t]),
    "ADD": lambda sg, s, t: sg.op("ADD", [s, _c(sg, [0, 0])], [t]),
    "GATHER": lambda sg, s, t: sg.op("GATHER", [s, _c(sg, [0, 1])], [t], axis=0),
    "STRIDED_SLICE": lambda sg, s, t: sg.op("STRIDED_SLICE", [s, _c(sg, [0]), _c(sg, [2]), _c(sg, [1])], [t]),
    "SLICE": lambda sg, s, t: sg.op("SLICE", [s, _c(sg, [0]), _c(sg, [2])], [t]),
    "CONCATENATION": lambda sg, s, t: sg.op("CONCATENATION", [s], [t], axis=0),
    "RESHAPE": lambda sg, s, t: sg.op("RESHAPE", [s, _c(sg, [2])], [t]),
    "TILE": lambda sg, s, t: sg.op("TILE", [s, _c(sg, [1])], [t]),
    "REDUCE_PROD": lambda sg, s, t: sg.op("REDUCE_PROD", [s, _c(sg, [0])], [t], keep_dims=True),
    "TRANSPOSE": lambda sg, s, t: sg.op("TRANSPOSE", [s, _c(sg, [0])], [t]),
    "MAXIMUM": lambda sg, s, t: sg.op("MAXIMUM", [s, _c(sg, [1, 1])], [t]),
    "CAST": lambda sg, s, t: sg.op("CAST", [s], [t]),
    "NEG": lambda sg, s, t: sg.op("NEG", [s], [t]),
}


def _chain(opcode: str) -> bytes:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [-1, 6], F32)
    s, t, y = sg.tensor("s", [2], I32), sg.tensor("t", [-1], I32), sg.tensor("y", [-1, -1], F32)
    sg.op("SHAPE", [x], [s], out_type=2)
    _CHAINS[opcode](sg, s, t)
    if opcode == "NEG":   # NEG(NEG(shape)) keeps the values a valid shape
        t2 = sg.tensor("t2", [-1], I32)
        sg.op("NEG", [t], [t2])
        t = t2
    sg.op("RESHAPE", [x, t], [y])
    sg.inputs, sg.outputs = [x], [y]
    return mb.to_bytes()


@pytest.mark.parametrize("opcode", sorted(_CHAINS))
def test_litert_value_ops_match_litert(opcode: str) -> None:
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    from onert_py.loader import load_model
    data = _chain(opcode)
    it = litert.Interpreter(model_content=data,
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.resize_tensor_input(0, [4, 6])
    it.allocate_tensors()
    litert_static = {d["name"]: d["shape"].tolist() for d in it.get_tensor_details()}["y"] != [1, 1]
    assert litert_static == (opcode in LITERT_VALUE_OPS)
    model = load_model(data)
    y = _index(model, "y")
    lite = infer_shapes(model, 0, [(4, 6)], policy=LITERT).main
    assert (y in lite.resolved) == litert_static
    full = infer_shapes(model, 0, [(4, 6)], policy=FULL).main
    assert full.resolved[y] in ((4, 6), (24,))           # FULL evaluates every one of them


# ---------------------------------------------------------------- errors and unknown ops

def _reshape_const() -> ModelBuilder:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x, y = sg.tensor("x", [-1, 6], F32), sg.tensor("y", [2, 3, 2], F32)
    sg.op("RESHAPE", [x, sg.const("s", np.array([2, 3, 2], I32))], [y])
    sg.inputs, sg.outputs = [x], [y]
    return mb


def test_contradictions_raise_naming_op_and_shapes() -> None:
    model = _reshape_const().build()
    assert _outputs(model, infer_shapes(model, 0, [(2, 6)])) == [(2, 3, 2)]
    with pytest.raises(ShapeInferenceError, match=r"subgraph 0 operator 0 \(RESHAPE\): cannot reshape 18 "
                                                  r"elements into shape \[2, 3, 2\] \(input shapes \[3, 6\], \[3\]\)"):
        infer_shapes(model, 0, [(3, 6)])
    assert issubclass(ShapeInferenceError, PrepareError) and issubclass(ShapeInferenceError, ValueError)


@pytest.mark.parametrize("opcode, shapes, message", [
    ("ADD", [(2, 3), (4, 3)], r"\[2, 3\] and \[4, 3\] do not broadcast"),
    ("CONCATENATION", [(2, 3), (2, 4)], r"inputs differ in dim 1"),
    ("BATCH_MATMUL", [(2, 3), (4, 5)], r"contraction dims differ: 3 vs 4"),
])
def test_binary_contradictions(opcode: str, shapes, message: str) -> None:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    a, b, o = sg.tensor("a", [-1, -1], F32), sg.tensor("b", [-1, -1], F32), sg.tensor("o", [-1, -1], F32)
    sg.op(opcode, [a, b], [o], **({"axis": 0} if opcode == "CONCATENATION" else {}))
    sg.inputs, sg.outputs = [a, b], [o]
    with pytest.raises(ShapeInferenceError, match=message):
        infer_shapes(mb.build(), 0, shapes)


def _custom_then_relu() -> ModelBuilder:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x, y, z = sg.tensor("x", [4], F32), sg.tensor("y", [4], F32), sg.tensor("z", [4], F32)
    sg.op("CUSTOM", [x], [y], custom_code="ShapeInferenceTestOp")
    sg.op("RELU", [y], [z])
    sg.inputs, sg.outputs = [x], [z]
    return mb


def test_unknown_op_gives_dynamic_outputs_never_the_declared_shape() -> None:
    model = _custom_then_relu().build()
    full = infer_shapes(model, 0, [(9,)])
    assert full.main.shapes[1] is None and full.main.shapes[2] is None   # not the declared [4]
    lite = infer_shapes(model, 0, [(9,)], policy=LITERT)
    assert lite.main.order == [0] and lite.main.first_dynamic == 0         # stopped at the custom op


def test_registered_shape_function_for_a_custom_op() -> None:
    register_shape_function("ShapeInferenceTestOp", lambda n: [n.shape(0) + (2,)], replace=True)
    model = _custom_then_relu().build()
    assert _outputs(model, infer_shapes(model, 0, [(9,)])) == [(9, 2)]


def test_cache_returns_the_same_result_per_input_shapes() -> None:
    model = _reshape_const().build()
    cache = ShapeCache(model)
    first = cache.infer(0, [(2, 6)])
    other = cache.infer(0, [(4, 3)])
    assert cache.infer(0, [[2, 6]]) is first and other is not first
    assert (cache.hits, cache.misses) == (1, 2)


# ---------------------------------------------------------------- never wrong: inferred vs actual shapes

def _corpus_models() -> list[Path]:
    return sorted(CORPUS.glob("*.tflite"))


@pytest.mark.parametrize("name", kernel_params([p.stem for p in _corpus_models()], CORPUS))
def test_static_shapes_match_the_run(name: str) -> None:
    """Every shape the FULL policy calls static (and every known dim of a partial one) equals the
    shape the tensor has after running the corpus model on its stored inputs."""
    import onert_py
    path = CORPUS / f"{name}.tflite"
    ref = np.load(path.with_suffix(".npz"))
    inputs = [ref[f"in_{k}"] for k in range(sum(1 for key in ref.files if key.startswith("in_")))]
    sess = onert_py.infer.session(str(path), preserve_all_tensors=True)
    result = infer_shapes(sess.model, 0, [x.shape for x in inputs])
    sess.infer(inputs)
    values = sess.executors[0].values
    checked = 0
    for i, shape in enumerate(result.main.shapes):
        v = values[i]
        if shape is None or v is None or not hasattr(v, "shape"):
            continue
        assert len(shape) == np.ndim(v) and all(d < 0 or d == a for d, a in zip(shape, np.shape(v))), \
            f"tensor {i} ({sess.model.main.tensors[i].name}): inferred {shape}, ran {np.shape(v)}"
        checked += 1
    assert checked >= len(sess.model.main.outputs)
