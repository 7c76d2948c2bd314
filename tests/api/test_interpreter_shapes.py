"""Propagated shapes before the first invoke: after allocate_tensors() (and after resize_tensor_input +
allocate_tensors), onert_py.Interpreter reports the shapes LiteRT reports, for every tensor of every
subgraph, over the conformance corpus and mediapipe's models. Every reference comes from LiteRT."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from helpers import kernel_params
from models.conftest import mediapipe_models  # noqa: F401 - the fixture, shared with tests/models
from onert_py.interpreter import Interpreter as OnertInterpreter
from onert_py.loader import load_model

litert = pytest.importorskip("ai_edge_litert.interpreter")

CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "corpus"
CORPUS_MODELS = sorted(p.stem for p in CORPUS.glob("*.tflite"))
MEDIAPIPE_MODELS = [  # the 14 models of the pinned mediapipe wheel (tests/models/conftest.py)
    "face_detection_full_range_sparse", "face_detection_short_range", "face_landmark",
    "face_landmark_with_attention", "hand_landmark_full", "hand_landmark_lite", "hand_recrop",
    "iris_landmark", "palm_detection_full", "palm_detection_lite", "pose_detection", "pose_landmark_full",
    "selfie_segmentation", "selfie_segmentation_landscape",
]
# Models whose mediapipe custom ops LiteRT's pip wheel cannot resolve: no LiteRT reference.
CUSTOM_OP_MODELS = {"face_landmark_with_attention", "selfie_segmentation", "selfie_segmentation_landscape"}


def make(cls: type, path: Path, **kw: Any) -> Any:
    if cls is litert.Interpreter:   # the builtin kernels only: XNNPACK replaces nodes with delegates
        kw["experimental_op_resolver_type"] = litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    elif kw.get("experimental_preserve_all_tensors"):   # the same resolver name: no debugging warning
        kw["experimental_op_resolver_type"] = litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    return cls(model_path=str(path), **kw)


# Resizes applied to every model input: the name, and the new shape from (declared shape, signature).
RESIZES: dict[str, Callable[[list[int], list[int]], list[int] | None]] = {
    "declared": lambda shape, sig: None,
    "signature_3": lambda shape, sig: [3 if s == -1 else d for d, s in zip(shape, sig)] if -1 in sig else None,
    "batch_2": lambda shape, sig: [2] + shape[1:] if shape else None,
    "double": lambda shape, sig: [d * 2 if d > 1 else d for d in shape],
}


def observe(cls: type, path: Path, resize: str) -> dict[str, Any] | type:
    """Shapes after allocate_tensors() with the named resize, or the exception type raised."""
    it = make(cls, path)
    n_tensors = [len(sg.tensors) for sg in load_model(str(path)).subgraphs]
    try:
        for d in it.get_input_details():
            new = RESIZES[resize](d["shape"].tolist(), d["shape_signature"].tolist())
            if new is not None:
                it.resize_tensor_input(d["index"], new)
        it.allocate_tensors()
    except (RuntimeError, ValueError) as e:
        return RuntimeError if isinstance(e, RuntimeError) else ValueError
    return shapes_of(it, n_tensors)


def shapes_of(it: Any, n_tensors: list[int]) -> dict[str, Any]:
    # LiteRT appends its kernels' temporaries to a subgraph's tensors after allocate: model tensors only.
    return {
        "inputs": [d["shape"].tolist() for d in it.get_input_details()],
        "outputs": [d["shape"].tolist() for d in it.get_output_details()],
        "tensors": [{d["index"]: d["shape"].tolist() for d in it.get_tensor_details(k) if d["index"] < n}
                    for k, n in enumerate(n_tensors)],
    }


def assert_same_shapes(ours: Any, ref: Any, where: str) -> None:
    if not isinstance(ref, dict) or not isinstance(ours, dict):
        assert ours == ref, f"{where}: onert-py {ours} vs LiteRT {ref}"
        return
    assert ours["inputs"] == ref["inputs"], f"{where}: inputs {ours['inputs']} vs LiteRT {ref['inputs']}"
    assert ours["outputs"] == ref["outputs"], f"{where}: outputs {ours['outputs']} vs LiteRT {ref['outputs']}"
    for k, (a, b) in enumerate(zip(ours["tensors"], ref["tensors"])):
        diff = {i: (a.get(i), b.get(i)) for i in set(a) | set(b) if a.get(i) != b.get(i)}
        assert not diff, f"{where}: subgraph {k} tensor: (onert-py, LiteRT) {dict(sorted(diff.items())[:8])}"


@pytest.mark.parametrize("resize", sorted(RESIZES))
@pytest.mark.parametrize("name", kernel_params(CORPUS_MODELS, CORPUS, strict=False))
def test_corpus_shapes_after_allocate(name: str, resize: str) -> None:
    path = CORPUS / f"{name}.tflite"
    assert_same_shapes(observe(OnertInterpreter, path, resize), observe(litert.Interpreter, path, resize),
                       f"{name}/{resize}")


@pytest.mark.parametrize("resize", ["declared", "batch_2", "double"])
@pytest.mark.parametrize("name", MEDIAPIPE_MODELS)
def test_mediapipe_shapes_after_allocate(mediapipe_models, name: str, resize: str) -> None:  # noqa: F811
    path = mediapipe_models[name]
    if name in CUSTOM_OP_MODELS:
        # No LiteRT reference; with the declared shapes every output keeps its declared (static) shape.
        if resize != "declared":
            pytest.skip("LiteRT cannot prepare mediapipe's custom ops (no reference for a resize)")
        from onert_py.contrib import mediapipe_ops
        mediapipe_ops.register()
        model = load_model(str(path))
        got = observe(OnertInterpreter, path, resize)
        assert got["outputs"] == [list(model.main.tensors[o].shape) for o in model.main.outputs]
        return
    assert_same_shapes(observe(OnertInterpreter, path, resize), observe(litert.Interpreter, path, resize),
                       f"{name}/{resize}")


# ---------------------------------------------------------------- sequences with invoke and resize back

def _stored_inputs(path: Path) -> list[np.ndarray]:
    ref = np.load(path.with_suffix(".npz"))
    return [ref[k] for k in sorted((k for k in ref.files if k.startswith("in_")), key=lambda k: int(k[3:]))]


def _feed(it: Any, inputs: list[np.ndarray]) -> None:
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)


def _resize_all(it: Any, shapes: list) -> None:
    for d, shape in zip(it.get_input_details(), shapes):
        it.resize_tensor_input(d["index"], list(shape))


SEQUENCE_MODELS = ["mlp_dynamic_batch", "while_dynamic_input", "while_concat_grow", "while_pad_grow",
                   "op_reshape_dynamic", "greedy_decode_grow", "cond_dynamic_shape", "op_unique_int32",
                   "op_where_indices", "op_shape_dynamic", "keras_lstm", "tensorarray_fixed"]


def sequence(cls: type, path: Path) -> list:
    """allocate -> resize to the stored inputs -> allocate -> invoke -> allocate (no resize: a no-op)
    -> resize to other shapes -> allocate -> resize back -> allocate -> invoke; shapes at every step.

    With experimental_preserve_all_tensors: without it onert-py's memory plan releases dynamic
    intermediates after their last use, so their shapes after an invoke are not known (LiteRT keeps
    every tensor's last shape)."""
    n_tensors = [len(sg.tensors) for sg in load_model(str(path)).subgraphs]
    inputs = _stored_inputs(path)
    it = make(cls, path, experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    seen = [shapes_of(it, n_tensors)]
    _resize_all(it, [x.shape for x in inputs])
    it.allocate_tensors()
    seen.append(shapes_of(it, n_tensors))
    _feed(it, inputs)
    it.invoke()
    seen.append(shapes_of(it, n_tensors))
    it.allocate_tensors()
    seen.append(shapes_of(it, n_tensors))
    other = [[3 if s == -1 else x for x, s in zip(d["shape"].tolist(), d["shape_signature"].tolist())]
             for d in it.get_input_details()]
    if other != [list(x.shape) for x in inputs]:
        _resize_all(it, other)
        it.allocate_tensors()
        seen.append(shapes_of(it, n_tensors))
        _resize_all(it, [x.shape for x in inputs])
        it.allocate_tensors()
        seen.append(shapes_of(it, n_tensors))
        _feed(it, inputs)
        it.invoke()
        seen.append(shapes_of(it, n_tensors))
    return seen


@pytest.mark.parametrize("name", SEQUENCE_MODELS)
def test_shapes_through_invoke_and_resizes(name: str) -> None:
    path = CORPUS / f"{name}.tflite"
    ours, ref = sequence(OnertInterpreter, path), sequence(litert.Interpreter, path)
    assert len(ours) == len(ref)
    for step, (a, b) in enumerate(zip(ours, ref)):
        assert_same_shapes(a, b, f"{name} step {step}")


def test_resizing_back_hits_the_shape_cache() -> None:
    it = OnertInterpreter(model_path=str(CORPUS / "mlp_dynamic_batch.tflite"))
    it.allocate_tensors()
    first = it.get_output_details()[0]["shape"].tolist()
    for batch in (5, 1, 5, 1):
        it.resize_tensor_input(0, [batch, 6])
        it.allocate_tensors()
        assert it.get_output_details()[0]["shape"].tolist() == [batch, 3]
    assert first == [1, 3]
    cache = it._shape_cache
    assert (cache.misses, cache.hits) == (2, 3)   # [1, 6] and [5, 6] inferred once each


def test_bad_resize_fails_in_allocate_like_litert() -> None:
    """A constant-shape RESHAPE cannot take a resized input: both fail in allocate_tensors with a
    RuntimeError, ours naming the op and the shapes."""
    from onert_py.schema.writer import ModelBuilder
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x, y = sg.tensor("x", [-1, 6], np.float32), sg.tensor("y", [2, 3, 2], np.float32)
    sg.op("RESHAPE", [x, sg.const("s", np.array([2, 3, 2], np.int32))], [y])
    sg.inputs, sg.outputs = [x], [y]
    data = mb.to_bytes()
    for cls in (litert.Interpreter, OnertInterpreter):
        kw = {"experimental_op_resolver_type": litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES} \
            if cls is litert.Interpreter else {}
        it = cls(model_content=data, **kw)
        it.resize_tensor_input(0, [3, 6])
        match = r"operator 0 \(RESHAPE\): cannot reshape 18 elements into shape \[2, 3, 2\]" \
            if cls is OnertInterpreter else None
        with pytest.raises(RuntimeError, match=match):
            it.allocate_tensors()
        with pytest.raises(RuntimeError):
            it.invoke()
        it.resize_tensor_input(0, [2, 6])   # a good shape again: allocate and invoke work
        it.allocate_tensors()
        it.set_tensor(0, np.arange(12, dtype=np.float32).reshape(2, 6))
        it.invoke()
        np.testing.assert_array_equal(it.get_tensor(1), np.arange(12, dtype=np.float32).reshape(2, 3, 2))
