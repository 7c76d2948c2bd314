"""session.get_outputs_tensorinfo() after update_inputs_tensorinfo(): the output dims that shape
inference propagates from the fixed input dims. References: the LiteRT outputs stored with the
conformance corpus (.npz) for the same input shapes."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import onert_py
from helpers import kernel_params
from onert_py.compiler.shape_inference import ShapeInferenceError, infer_shapes
from onert_py.schema.writer import ModelBuilder

CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "corpus"


def _stored(path: Path, prefix: str) -> list[np.ndarray]:
    ref = np.load(path.with_suffix(".npz"))
    keys = sorted((k for k in ref.files if k.startswith(prefix)), key=lambda k: int(k[len(prefix):]))
    return [ref[k] for k in keys]


@pytest.mark.parametrize("name", kernel_params(sorted(p.stem for p in CORPUS.glob("*.tflite")), CORPUS))
def test_output_dims_agree_with_litert_outputs(name: str) -> None:
    """Every dim reported as known equals the dim of LiteRT's output for inputs of those shapes."""
    path = CORPUS / f"{name}.tflite"
    sess = onert_py.infer.session(str(path))
    infos = sess.get_inputs_tensorinfo()
    for info, x in zip(infos, _stored(path, "in_")):
        info.dims = list(x.shape)
    sess.update_inputs_tensorinfo(infos)
    inferred = infer_shapes(sess.model, 0, [i.dims for i in infos]).output_shapes(sess.model)
    for k, (info, ref) in enumerate(zip(sess.get_outputs_tensorinfo(), _stored(path, "out_"))):
        if inferred[k] is None:   # rank unknown before running: the model's own declaration is reported
            continue
        assert info.rank == ref.ndim and len(info.dims) == ref.ndim, f"output {k}: {info.dims} vs {ref.shape}"
        assert all(d < 0 or d == r for d, r in zip(info.dims, ref.shape)), \
            f"output {k}: inferred {info.dims}, LiteRT's output has shape {list(ref.shape)}"


def test_dynamic_batch_becomes_known_and_is_cached() -> None:
    sess = onert_py.infer.session(str(CORPUS / "mlp_dynamic_batch.tflite"))
    assert sess.get_outputs_tensorinfo()[0].dims == [-1, 3]       # the model's signature
    for batch in (5, 2, 5):
        infos = sess.get_inputs_tensorinfo()
        infos[0].dims = [batch, 6]
        sess.update_inputs_tensorinfo(infos)
        assert sess.get_outputs_tensorinfo()[0].dims == [batch, 3]
    assert sess._shapes.misses == 2


def test_while_output_follows_a_resized_loop_input() -> None:
    """while_dynamic_input keeps its loop value's shape: the output is [7, 2] for a [7, 2] input."""
    sess = onert_py.infer.session(str(CORPUS / "while_dynamic_input.tflite"))
    infos = sess.get_inputs_tensorinfo()
    infos[0].dims = [7, 2]
    sess.update_inputs_tensorinfo(infos)
    assert sess.get_outputs_tensorinfo()[0].dims == [7, 2]
    x = np.random.default_rng(0).standard_normal((7, 2)).astype(np.float32)
    assert sess.infer([x])[0].shape == (7, 2)


def test_bad_update_fails_naming_the_op_and_keeps_the_previous_dims() -> None:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x, y = sg.tensor("x", [-1, 6], np.float32), sg.tensor("y", [2, 3, 2], np.float32)
    sg.op("RESHAPE", [x, sg.const("s", np.array([2, 3, 2], np.int32))], [y])
    sg.inputs, sg.outputs = [x], [y]
    sess = onert_py.infer.session(mb.to_bytes())
    infos = sess.get_inputs_tensorinfo()
    infos[0].dims = [2, 6]
    sess.update_inputs_tensorinfo(infos)
    infos[0].dims = [3, 6]
    with pytest.raises(ShapeInferenceError, match=r"operator 0 \(RESHAPE\): cannot reshape 18 elements"):
        sess.update_inputs_tensorinfo(infos)
    assert isinstance(ShapeInferenceError("x"), ValueError)
    assert sess.get_inputs_tensorinfo()[0].dims == [2, 6]
