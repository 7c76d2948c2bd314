"""The converter-made Keras models of benchmarks/models/keras/ (benchmarks/make_keras_models.py) match
LiteRT on both backends; on the jit, the transformer's ~90 small ops and the MLP run as compiled
segments (backends/jit/segment.py)."""
from pathlib import Path

import numpy as np
import pytest

import onert_py
from helpers import assert_close, run_litert

MODELS = Path(__file__).resolve().parents[2] / "benchmarks" / "models" / "keras"


def _inputs(name: str, seed: int) -> list[np.ndarray]:
    r = np.random.default_rng(seed)
    if name == "transformer":
        return [r.integers(0, 200, (1, 16)).astype(np.int32)]
    shape = {"mlp": (1, 64), "small_cnn": (1, 32, 32, 3)}[name]
    return [r.normal(size=shape).astype(np.float32)]


@pytest.mark.parametrize("name", ["transformer", "mlp", "small_cnn"])
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
