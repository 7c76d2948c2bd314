"""The converter-made Keras models of benchmarks/models/keras/ (benchmarks/make_keras_models.py) match
LiteRT on both backends; on the jit, the transformer's ~90 small ops and the MLP run as compiled
segments (backends/jit/segment.py)."""
from pathlib import Path

import numpy as np
import pytest

import onert_py
from helpers import JIT_AVAILABLE, assert_close, run_litert

MODELS = Path(__file__).resolve().parents[2] / "benchmarks" / "models" / "keras"


def _inputs(name: str, seed: int, batch: int = 1) -> list[np.ndarray]:
    r = np.random.default_rng(seed)
    if name in ("transformer", "causal_lm"):
        return [r.integers(0, 200, (batch, 16)).astype(np.int32)]
    shape = {"mlp": (1, 64), "small_cnn": (1, 32, 32, 3)}[name]
    return [r.normal(size=shape).astype(np.float32)]


@pytest.mark.parametrize("name", ["transformer", "mlp", "small_cnn", "causal_lm"])
@pytest.mark.parametrize("backends", ["cpu", "jit;cpu"])
def test_keras_model_matches_litert(name, backends):
    if backends != "cpu":
        pytest.importorskip("numba")
    data = (MODELS / f"{name}.tflite").read_bytes()
    sess = onert_py.infer.session(data, backends=backends)
    for seed in (0, 1):
        inputs = _inputs(name, seed)
        assert_close(sess.infer(inputs), run_litert(data, inputs), rtol=1e-5, atol=1e-6)
    segments = [op for ex in sess.executors for op in ex.operations if op.segment]
    if backends == "cpu":
        assert not segments
    elif name == "transformer":   # every op: one segment
        assert len(sess.executors[0].operations) == 1 and len(segments) == 1
    elif name == "mlp":
        assert len(segments) == 1
    elif name == "causal_lm":   # its run-time shape arithmetic folded for [1, 16]: one segment
        assert len(sess.executors[0].operations) == 1 and len(segments) == 1


def test_dynamic_batch_keras_model_folds_its_shape_arithmetic():
    """causal_lm leaves the batch dynamic, and the converter computes its reshapes' shapes and its mask
    at run time. Each compile for known input shapes folds them (on both backends): at batch 1 and 3
    no SHAPE, PACK or FILL runs, and the outputs match LiteRT resized to the same shapes."""
    data = (MODELS / "causal_lm.tflite").read_bytes()
    model = onert_py.load_model(data)
    assert {"SHAPE", "PACK", "FILL"} <= {op.kernel_name for op in model.subgraphs[0].operations}
    assert model.subgraphs[0].tensors[model.subgraphs[0].inputs[0]].shape_signature[0] == -1
    for backends in ("cpu", "jit;cpu") if JIT_AVAILABLE else ("cpu",):
        sess = onert_py.infer.session(data, backends=backends)
        for batch in (1, 3, 1):
            inputs = _inputs("causal_lm", batch, batch)
            assert_close(sess.infer(inputs), run_litert(data, inputs), rtol=1e-5, atol=1e-5)
            ran = {op.kernel_name for op in sess.executors[0].operations}
            assert not ran & {"SHAPE", "PACK", "FILL"}, ran
