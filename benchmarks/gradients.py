"""Gradients through control flow: what the backward pass costs beside the forward one.

    OPENBLAS_NUM_THREADS=1 python benchmarks/gradients.py [--runs 15] [--out docs/gradients_benchmark.md]

(a) Converter-made models of the conformance corpus (Keras RNN layers, which the converter turns into
WHILE loops, and the other control-flow programs): median time of `session.infer` and of
`session.gradients` (random cotangents, w.r.t. the inputs and w.r.t. "weights"), runs interleaved.
(b) A WHILE whose trip count is an input (an RNN-like body: tanh(x @ W.T + b) * x on a [32, 64]
state): the bytes the gradient's accumulators keep (profile.accumulator_bytes: every value pushed per
iteration) and the gradient's time, against the trip count. Bytes must grow linearly.
(c) The same loop with checkpointing (`recompute=True`): only loop values are kept per iteration and
the body's other values are recomputed backwards; time and kept bytes beside storing them.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "conformance" / "corpus"
MODELS = ("keras_simplernn", "keras_gru", "keras_lstm", "dense_loop", "while_accumulator", "while_nested",
          "cond_in_while", "mlp", "convnet")


def _inputs(name: str) -> list[np.ndarray]:
    entry = next(e for e in json.loads((CORPUS / "MANIFEST.json").read_text())["models"] if e["name"] == name)
    with np.load(CORPUS / f"{name}.npz") as z:
        return [z[f"in_{k}"] for k in range(len(entry["inputs"]))]


def _median_ms(fns: dict, runs: int) -> dict:
    times = {k: [] for k in fns}
    for fn in fns.values():
        fn()
    for _ in range(runs):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def corpus_rows(runs: int) -> list[list[str]]:
    import onert_py
    rows = []
    for name in MODELS:
        xs = _inputs(name)
        s = onert_py.infer.session(str(CORPUS / f"{name}.tflite"))
        outs = s.infer(xs)
        r = np.random.default_rng(0)
        cts = [r.normal(size=np.shape(o)).astype(o.dtype) if np.asarray(o).dtype.kind == "f" else None for o in outs]
        fns = {"forward": lambda: s.infer(xs)}
        try:
            s.gradients(xs, cts)
            fns["inputs"] = lambda: s.gradients(xs, cts)
            s.gradients(xs, cts, "weights")
            fns["weights"] = lambda: s.gradients(xs, cts, "weights")
        except onert_py.OnertPyError as e:
            rows.append([name, "", "", "", "", "", f"not run: {str(e)[:80]}"])
            continue
        t = _median_ms(fns, runs)
        for _, gs in s._gradient_sessions.values():
            gs.profile.reset()
        s.gradients(xs, cts, "weights")
        kept = max(gs.profile.total_accumulator_bytes() for _, gs in s._gradient_sessions.values())
        rows.append([name, f"{t['forward']:.3f}", f"{t['inputs']:.3f}", f"{t['inputs'] / t['forward']:.1f}x",
                     f"{t['weights']:.3f}", f"{t['weights'] / t['forward']:.1f}x", f"{kept:,}"])
    return rows


def counted_loop(units: int = 64, rows: int = 32, seed: int = 0):
    """x [rows, units], n -> WHILE i < n: (i + 1, tanh(x @ W.T + b) * x), W and b constants."""
    from onert_py.schema.writer import ModelBuilder
    r = np.random.default_rng(seed)
    mb = ModelBuilder()
    main, cond, body = mb.subgraph("main"), mb.subgraph("cond"), mb.subgraph("body")
    x, n = main.tensor("x", [rows, units], np.float32), main.tensor("n", [], np.int32)
    i0 = main.const("i0", np.array(0, np.int32))
    outs = [main.tensor("i_out", [], np.int32), main.tensor("n_out", [], np.int32),
            main.tensor("y", [rows, units], np.float32)]
    main.op("WHILE", [i0, n, x], outs, cond_subgraph_index=1, body_subgraph_index=2)
    main.inputs, main.outputs = [x, n], [outs[2]]
    ci, cn, cx, c = (cond.tensor(nm, s, d) for nm, s, d in (("i", [], np.int32), ("n", [], np.int32),
                                                             ("x", [rows, units], np.float32), ("c", [], np.bool_)))
    cond.op("LESS", [ci, cn], [c])
    cond.inputs, cond.outputs = [ci, cn, cx], [c]
    bi, bn, bx = body.tensor("i", [], np.int32), body.tensor("n", [], np.int32), body.tensor("x", [rows, units], np.float32)
    w = body.const("w", (r.normal(size=(units, units)) / np.sqrt(units)).astype(np.float32))
    b = body.const("b", r.normal(0, 0.1, units).astype(np.float32))
    fc, y, i1 = body.tensor("fc", [rows, units], np.float32), body.tensor("y", [rows, units], np.float32), \
        body.tensor("i1", [], np.int32)
    body.op("FULLY_CONNECTED", [bx, w, b], [fc], fused_activation_function=4)
    body.op("MUL", [fc, bx], [y], fused_activation_function=0)
    body.op("ADD", [bi, body.const("one", np.array(1, np.int32))], [i1], fused_activation_function=0)
    body.inputs, body.outputs = [bi, bn, bx], [i1, bn, y]
    mb.signature("serving_default", main)
    return mb.to_bytes("tflite")


def _kept_bytes(s, xs: list, cts: list, recompute: bool) -> int:
    """Accumulator bytes of one gradient run."""
    s.gradients(xs, cts, ["x", "body:w"], recompute=recompute)
    gs = s._gradient_sessions[(0, ("x", "body:w"), recompute)][1]
    gs.profile.reset()
    s.gradients(xs, cts, ["x", "body:w"], recompute=recompute)
    return gs.profile.total_accumulator_bytes()


def trip_rows(runs: int, trips=(25, 50, 100, 200, 400)) -> tuple[list[list[str]], list[list[str]]]:
    import onert_py
    s = onert_py.infer.session(counted_loop())
    x = np.random.default_rng(1).normal(size=(32, 64)).astype(np.float32)
    ct = np.random.default_rng(2).normal(size=(32, 64)).astype(np.float32)
    rows, checkpointed = [], []
    for n in trips:
        xs = [x, np.array(n, np.int32)]
        t = _median_ms({"forward": lambda: s.infer(xs),
                        "stored": lambda: s.gradients(xs, [ct], ["x", "body:w"]),
                        "recomputed": lambda: s.gradients(xs, [ct], ["x", "body:w"], recompute=True)},
                       max(3, runs // 3))
        kept, kept_r = _kept_bytes(s, xs, [ct], False), _kept_bytes(s, xs, [ct], True)
        rows.append([str(n), f"{t['forward']:.2f}", f"{t['stored']:.2f}", f"{t['stored'] / t['forward']:.1f}x",
                     f"{kept:,}", f"{kept / n:,.0f}"])
        checkpointed.append([str(n), f"{t['stored']:.2f}", f"{t['recomputed']:.2f}", f"{kept:,}", f"{kept_r:,}",
                             f"{t['recomputed'] / t['stored']:.2f}x", f"{kept_r / kept:.2f}x"])
    return rows, checkpointed


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--out", default=str(ROOT / "docs" / "gradients_benchmark.md"))
    args = ap.parse_args(argv)
    lines = ["# Gradients: time and memory beside the forward pass", "",
             f"Generated by `python benchmarks/gradients.py {' '.join(sys.argv[1:] if argv is None else argv)}` "
             "(one thread; medians of interleaved runs; ms).", "",
             "## (a) Converter-made models", "",
             "gradient wrt inputs / wrt weights: the time of one `session.gradients` call (forward and backward "
             "together) and its ratio to one forward run; kept: the bytes pushed on the WHILE accumulators in one "
             "gradient run.", ""]
    lines += table(["model", "forward", "gradient wrt inputs", "ratio", "gradient wrt weights", "ratio", "kept bytes"],
                   corpus_rows(args.runs))
    lines += ["", "## (b) Accumulator bytes against the trip count", "",
              "A WHILE whose trip count is an input; body tanh(x @ W.T + b) * x on a [32, 64] state; gradient w.r.t. "
              "x and the body's W. Kept bytes per iteration stay constant: memory grows linearly.", ""]
    rows, checkpointed = trip_rows(args.runs)
    lines += table(["trips", "forward", "gradient", "ratio", "kept bytes", "kept bytes / trip"], rows)
    lines += ["", "## (c) Checkpointing: recompute instead of storing", "",
              "The loop of (b) with `recompute=True`: only the loop value x is kept per iteration; tanh(x @ W.T + b) "
              "is computed again in the backward pass.", ""]
    lines += table(["trips", "stored (ms)", "recomputed (ms)", "stored bytes", "recomputed bytes", "time",
                    "memory"], checkpointed)
    doc = "\n".join(lines) + "\n"
    Path(args.out).write_text(doc)
    print(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
