"""`onert-py convert` of mediapipe's sparse models (float16 weights stored sparse, expanded by DENSIFY)
to .circle: the Circle file keeps every tensor's sparsity parameters, loads, and runs to the same
outputs as the original .tflite (the same weights and kernels: equal bit for bit)."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import onert_py
from onert_py.tools.cli import main

SPARSE_MODELS = ["face_detection_full_range_sparse", "pose_detection"]


@pytest.mark.parametrize("name", SPARSE_MODELS)
def test_sparse_model_converted_to_circle_runs_like_tflite(mediapipe_models, tmp_path, capsys, name):
    src = mediapipe_models[name]
    dst = tmp_path / f"{name}.circle"
    assert main(["convert", str(src), str(dst)]) == 0, capsys.readouterr().err
    original, converted = onert_py.load_model(src), onert_py.load_model(dst)
    assert converted.format == "circle"

    sparse = [(t0, t1) for t0, t1 in zip(original.subgraphs[0].tensors, converted.subgraphs[0].tensors)
              if t0.sparsity is not None]
    assert len(sparse) > 30                                  # 38 / 46 sparse weight tensors
    for t0, t1 in sparse:
        assert t1.sparsity is not None, t0.name
        assert list(t1.sparsity["traversal_order"]) == list(t0.sparsity["traversal_order"])
        assert list(t1.sparsity["block_map"]) == list(t0.sparsity["block_map"])
        for a, b in zip(t0.sparsity["dim_metadata"], t1.sparsity["dim_metadata"]):
            assert (a["format"], a["dense_size"]) == (b["format"], b["dense_size"])
            for key in ("array_segments", "array_indices"):
                if a[key] is None:
                    assert b[key] is None
                else:
                    assert a[key].dtype == b[key].dtype
                    np.testing.assert_array_equal(a[key], b[key])
        np.testing.assert_array_equal(np.asarray(t1.data), np.asarray(t0.data))

    rng = np.random.default_rng(zlib.crc32(name.encode()))
    sg = original.subgraphs[0]
    inputs = [rng.random(sg.tensors[i].shape, dtype=np.float32) for i in sg.inputs]
    want = onert_py.infer.session(str(src)).infer([x.copy() for x in inputs])
    got = onert_py.infer.session(str(dst)).infer([x.copy() for x in inputs])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
