"""Converter-made Keras models (benchmarks/models/keras/: a small transformer, an MLP, a small CNN, a
causal decoder block with a dynamic batch;
benchmarks/make_keras_models.py), onert-py against LiteRT.

    python benchmarks/keras_models.py [--threads N] [--runs R] [--out docs/keras_models_1thread.md]

Run as benchmarks/dynamic_models.py runs its models: each runtime in a process of its own, a cell the
median over its rounds of the median of `--runs` runs, on two seeded input sets per model.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dynamic_models import main  # noqa: E402

MODELS = Path(__file__).resolve().parent / "models" / "keras"
SHAPES = {"transformer": (1, 16), "mlp": (1, 64), "small_cnn": (1, 32, 32, 3), "causal_lm": (1, 16)}
TOKENS = ("transformer", "causal_lm")


def keras_cases() -> list[tuple[str, Path, list[list[np.ndarray]]]]:
    cases = []
    for name, shape in SHAPES.items():
        r = np.random.default_rng(0)
        x = r.integers(0, 200, shape).astype(np.int32) if name in TOKENS else r.normal(size=shape).astype(np.float32)
        cases.append((name, MODELS / f"{name}.tflite", [[x]]))
    return cases


if __name__ == "__main__":
    sys.exit(main(cases=keras_cases, script=__file__, title="Converter-made Keras models",
                  notes="one seeded input per model (token ids in [0, 200) for the transformer and causal_lm, "
                        "normal values for the others); causal_lm declares a dynamic batch and runs at batch 1"))
