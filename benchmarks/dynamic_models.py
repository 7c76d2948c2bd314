"""Converter-made models with dynamic shapes (the corpus's -1 batch / sequence models), onert-py against
LiteRT at the shapes they are run with.

    python benchmarks/dynamic_models.py [--threads N] [--runs R] [--out docs/dynamic_models_benchmark.md]

Each model runs on its stored input sets (tests/conformance/corpus/*.npz: e.g. batch 3, then batch 1),
LiteRT after resize_tensor_input + allocate_tensors, onert-py's session as is (it compiles the model
for the shapes it meets: compiler/specialize.py). Each runtime runs in a process of its own (see
benchmarks/run.py: spinning worker threads of one runtime take the cores of the next); a cell is the
median over ROUNDS rounds of the median of `--runs` runs.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "conformance" / "corpus"
MODELS = ["efficientnet_blocks_dynamic_batch", "mlp_dynamic_batch", "bert_classifier_dynamic_batch",
          "transformer_dynamic_seq"]
RUNTIMES = ["onert-py cpu", "onert-py jit", "LiteRT"]
ROUNDS = 3


def input_sets(name: str) -> list[list[np.ndarray]]:
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import corpus_runs   # the test suite's reader of the stored sets
    return [inputs for inputs, _ in corpus_runs(CORPUS, name)[0]]


def _runner(runtime: str, path: Path, threads: int):
    """A function running one input set; it resizes (LiteRT) or recompiles (onert-py) on a new shape."""
    if runtime.startswith("onert-py"):
        import onert_py
        sess = onert_py.infer.session(str(path), "cpu" if runtime.endswith("cpu") else "jit;cpu",
                                      num_threads=threads)
        return sess.infer
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_path=str(path), num_threads=threads)
    details = it.get_input_details()
    outs = [d["index"] for d in it.get_output_details()]
    shapes: list = [None]

    def run(inputs):
        if shapes[0] != [x.shape for x in inputs]:
            for d, x in zip(details, inputs):
                it.resize_tensor_input(d["index"], list(x.shape))
            it.allocate_tensors()
            shapes[0] = [x.shape for x in inputs]
        for d, x in zip(details, inputs):
            it.set_tensor(d["index"], x)
        it.invoke()
        return [it.get_tensor(o) for o in outs]
    return run


def corpus_cases() -> list[tuple[str, Path, list[list[np.ndarray]]]]:
    """(name, model file, input sets) of each model this benchmark times."""
    return [(name, CORPUS / f"{name}.tflite", input_sets(name)) for name in MODELS]


def worker(runtime: str, threads: int, runs: int, cases: Callable = corpus_cases) -> dict[str, float]:
    """{"model/shape": median ms} for one runtime; each input set warmed up, then timed alone."""
    result = {}
    for name, path, sets in cases():
        fn = _runner(runtime, path, threads)
        for inputs in sets:
            for _ in range(3):
                fn(inputs)
            times = []
            for _ in range(runs):
                t = time.perf_counter()
                fn(inputs)
                times.append(time.perf_counter() - t)
            result[f"{name}/{'x'.join(map(str, inputs[0].shape))}"] = float(np.median(times)) * 1e3
    return result


_TITLE = "Converter-made models with dynamic shapes"
_NOTES = ("the input sets are the corpus's stored ones, in order (LiteRT resizes to each; onert-py compiles "
          "each shape once, not timed)")


def main(argv: list[str] | None = None, cases: Callable = corpus_cases, script: str = __file__,
         title: str = _TITLE, notes: str = _NOTES) -> int:
    """Time `cases` on each runtime (each in a process of its own running `script --worker`), print the
    table and write it to --out."""
    ap = argparse.ArgumentParser(description=title)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=61)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--worker", choices=RUNTIMES, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(args.threads), "OMP_NUM_THREADS": str(args.threads)}
    if args.worker:
        print(json.dumps(worker(args.worker, args.threads, args.runs, cases)))
        return 0
    rounds: dict[str, dict[str, list[float]]] = {}
    for _ in range(ROUNDS):
        for runtime in RUNTIMES:   # each runtime alone in its process, in turn
            out = subprocess.run([sys.executable, script, "--worker", runtime, "--threads", str(args.threads),
                                  "--runs", str(args.runs)], capture_output=True, text=True, check=True, env=env)
            for case, ms in json.loads(out.stdout.strip().splitlines()[-1]).items():
                rounds.setdefault(case, {}).setdefault(runtime, []).append(ms)
    lines = ["| model / input shape | " + " | ".join(f"{r} (ms)" for r in RUNTIMES) + " | cpu / LiteRT | jit / LiteRT |",
             "|---|" + "---:|" * (len(RUNTIMES) + 2)]
    ratios: dict[str, list[float]] = {"cpu": [], "jit": []}
    for case, cells in rounds.items():
        ms = {r: float(np.median(v)) for r, v in cells.items()}
        cpu, jit = ms["onert-py cpu"] / ms["LiteRT"], ms["onert-py jit"] / ms["LiteRT"]
        ratios["cpu"].append(cpu)
        ratios["jit"].append(jit)
        lines.append(f"| {case} | " + " | ".join(f"{ms[r]:.3f}" for r in RUNTIMES) + f" | {cpu:.2f}× | {jit:.2f}× |")
    summary = ", ".join(f"{k} / LiteRT median {np.median(v):.2f}×, worst {max(v):.2f}×" for k, v in ratios.items())
    sys.path.insert(0, str(Path(__file__).parent))
    from run import machine
    doc = "\n".join([
        f"# {title}",
        "",
        f"Generated by `python benchmarks/{Path(script).name} --threads {args.threads} --runs {args.runs}"
        + (f" --out {args.out.relative_to(ROOT) if args.out.is_absolute() else args.out}" if args.out else "")
        + f"` on {datetime.date.today()}.",
        "",
        f"- Machine: {machine()}",
        f"- {args.threads} thread(s) for every runtime (`OPENBLAS_NUM_THREADS`, `OMP_NUM_THREADS`, LiteRT "
        "`num_threads`).",
        f"- Each runtime in a process of its own, the median over {ROUNDS} rounds of the median of "
        f"{args.runs} runs per input set; {notes}.",
        f"- {summary}.",
        "",
        *lines, ""])
    print(doc)
    if args.out:
        args.out.write_text(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
