"""The schema's `has_rank` is false by default, so every tensor written by an older converter (the
mediapipe models) says false: it only tells a rank-0 shape [] from an unknown rank, and a tensor with
dims, or a constant, has a known rank whatever the flag says."""
from __future__ import annotations

import numpy as np
import pytest

import onert_py
from helpers import single_op_model
from onert_py.compiler.shape_inference import check_derived_shapes
from onert_py.errors import ResourceError
from onert_py.schema.writer import serialize


def _older_converter(mb, scalar_input: bool = False) -> bytes:
    """The model as an older converter writes it: has_rank false on every tensor."""
    model = onert_py.load_model(mb.to_bytes("tflite"))
    for t in model.subgraphs[0].tensors:
        t.has_rank = False
    return serialize(model)


def test_dims_or_data_mean_a_known_rank():
    mb = single_op_model("ADD", [("x", [2, 3], np.float32), ("const", np.ones(3, np.float32))],
                         [("o", [2, 3], np.float32)], fused_activation_function=0)
    model = onert_py.load_model(_older_converter(mb))
    assert all(t.has_rank for t in model.subgraphs[0].tensors)
    # so shape inference knows every shape statically (no run-time checks are needed)
    static = check_derived_shapes(model, 1 << 30)[0]
    assert static[model.subgraphs[0].outputs[0]] == (2, 3)


def test_rank0_without_data_stays_unknown():
    mb = single_op_model("ADD", [("x", [], np.float32), ("y", [], np.float32)], [("o", [], np.float32)],
                         fused_activation_function=0)
    model = onert_py.load_model(_older_converter(mb))
    assert not any(t.has_rank for t in model.subgraphs[0].tensors)
    out = onert_py.infer.session(_older_converter(mb)).infer([np.float32(2), np.float32(3)])[0]
    assert float(out) == 5.0


def test_declared_sizes_of_older_files_are_budgeted():
    # a 16 GiB declared activation in a file with has_rank false everywhere: refused before allocating
    mb = single_op_model("ADD", [("x", [65536, 65536], np.float32), ("y", [65536, 65536], np.float32)],
                         [("o", [65536, 65536], np.float32)], fused_activation_function=0)
    with pytest.raises(ResourceError, match="16.0 GiB"):
        onert_py.infer.session(_older_converter(mb), max_memory="64M")
