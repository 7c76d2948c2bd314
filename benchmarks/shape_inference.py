"""Shape inference cost: infer_shapes (FULL and LITERT policies) per model, and allocate_tensors() of
onert_py.Interpreter after a resize back to a cached input-shape signature vs. a new one.

    OPENBLAS_NUM_THREADS=1 python benchmarks/shape_inference.py [--repeats 7] [model.tflite ...]

Defaults to the cached mediapipe models (tests/models/conftest.py) plus two corpus models with -1 dims.
Prints best-of-N milliseconds.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from onert_py.compiler.shape_inference import FULL, LITERT, infer_shapes  # noqa: E402
from onert_py.interpreter import Interpreter  # noqa: E402
from onert_py.loader import load_model  # noqa: E402


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def resize_all(it: Interpreter, shapes) -> None:
    for d, s in zip(it.get_input_details(), shapes):
        it.resize_tensor_input(d["index"], s)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    from onert_py.contrib import mediapipe_ops
    mediapipe_ops.register()                         # kernels for mediapipe's custom ops
    paths = [Path(p) for p in args.models]
    if not paths:
        from models.conftest import fetch_mediapipe_models
        paths = fetch_mediapipe_models() + [ROOT / "tests/conformance/corpus/mlp_dynamic_batch.tflite",
                                            ROOT / "tests/conformance/corpus/while_dynamic_input.tflite"]
    print(f"{'model':38s} {'ops':>5s} {'FULL ms':>8s} {'LITERT ms':>9s} {'alloc new ms':>12s} "
          f"{'alloc cached ms':>15s}")
    for p in paths:
        model = load_model(str(p))
        n_ops = sum(len(sg.operations) for sg in model.subgraphs)
        full = best(lambda: infer_shapes(model, policy=FULL), args.repeats)
        lite = best(lambda: infer_shapes(model, policy=LITERT), args.repeats)
        it = Interpreter(model_path=str(p))
        it.allocate_tensors()                        # compiles; shapes for the declared inputs
        declared = [d["shape"].tolist() for d in it.get_input_details()]
        other = [[2] + s[1:] if s else s for s in declared]
        new = []
        for _ in range(args.repeats):               # a fresh cache each time: inference + apply
            it._shape_cache._results.clear()
            resize_all(it, other)
            t0 = time.perf_counter()
            try:
                it.allocate_tensors()
            except RuntimeError:                     # the model cannot take batch 2: time the failure
                pass
            new.append(time.perf_counter() - t0)
            resize_all(it, declared)
            it.allocate_tensors()
        cached = []
        for _ in range(args.repeats):               # back to a signature seen before: a cache hit
            resize_all(it, other)
            try:
                it.allocate_tensors()
            except RuntimeError:
                pass
            resize_all(it, declared)
            t0 = time.perf_counter()
            it.allocate_tensors()
            cached.append(time.perf_counter() - t0)
        print(f"{p.stem[:38]:38s} {n_ops:5d} {full:8.2f} {lite:9.2f} {min(new) * 1e3:12.2f} "
              f"{min(cached) * 1e3:15.3f}")


if __name__ == "__main__":
    main()
