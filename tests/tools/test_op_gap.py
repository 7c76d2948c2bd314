"""benchmarks/op_gap.py cuts every operator out of a model: each one-op model must compute what the
operator computed inside the whole model (LiteRT's intermediate), with weights that were folded at
prepare time (float16 DEQUANTIZE) restored to their values, not to the zeros LiteRT's preserved tensors
hold for them."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import run_litert, run_onert
from onert_py.schema.writer import ModelBuilder

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
op_gap = pytest.importorskip("op_gap")


def _model(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [1, 6, 6, 4], np.float32)
    w16 = sg.const("w16", rng.standard_normal((8, 1, 1, 4)).astype(np.float16))
    w = sg.tensor("w", [8, 1, 1, 4], np.float32)
    sg.op("DEQUANTIZE", [w16], [w])
    c = sg.tensor("c", [1, 6, 6, 8], np.float32)
    sg.op("CONV_2D", [x, w, sg.const("b", rng.standard_normal(8).astype(np.float32))], [c],
          padding=0, stride_h=1, stride_w=1, fused_activation_function=0)
    alpha = sg.const("alpha", rng.uniform(0.1, 0.5, (1, 1, 8)).astype(np.float32))
    p = sg.tensor("p", [1, 6, 6, 8], np.float32)
    sg.op("PRELU", [c, alpha], [p])
    out = sg.tensor("out", [1, 6, 6, 8], np.float32)
    sg.op("ADD", [p, c], [out], fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [out]
    path = tmp_path / "m.tflite"
    path.write_bytes(mb.to_bytes("tflite"))
    return path


def test_cut_out_ops_compute_what_they_computed_in_the_model(tmp_path):
    pytest.importorskip("ai_edge_litert")
    cut = list(op_gap.cut_out(_model(tmp_path)))
    assert [op.opcode for op, *_ in cut] == ["CONV_2D", "PRELU", "ADD"]   # DEQUANTIZE folded
    for op, data, feeds, want in cut:
        np.testing.assert_allclose(run_litert(data, feeds)[0], want, rtol=1e-6, atol=1e-6, err_msg=op.opcode)
        np.testing.assert_allclose(run_onert(data, feeds)[0], want, rtol=1e-5, atol=1e-5, err_msg=op.opcode)


def test_op_times_rows_and_tables(tmp_path):
    pytest.importorskip("ai_edge_litert")
    rows = op_gap.op_times(_model(tmp_path), rounds=2)
    assert [r["type"] for r in rows] == ["CONV_2D", "PRELU", "ADD"]
    assert all(r["ours"] > 0 and r["litert"] > 0 for r in rows)
    table = op_gap.type_table(op_gap.by_type(rows))
    assert table[-1].startswith("| **all** | 3 |")
