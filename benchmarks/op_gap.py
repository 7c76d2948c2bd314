"""Where the time goes against LiteRT, op by op: every operator of a model is cut out into a one-op model
(its constant inputs kept, its other inputs taken from a LiteRT run of the whole model on seeded inputs)
and timed on LiteRT (1 thread, `invoke` only) and on onert-py (the op's prepared run closure only),
interleaved, best of `--rounds`. Ops whose inputs are all constant (DEQUANTIZE, DENSIFY of weights) are
folded into constants, as both runtimes do. Writes docs/op_gap.md.

    python benchmarks/op_gap.py [--rounds 11] [MODEL.tflite ...]

Caveats: LiteRT's time includes its invoke overhead (about a microsecond), onert-py's excludes the
executor's per-step cost; ops inside a model also see warmer or colder caches than alone. The sums are
therefore close to, not equal to, whole-model times.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Iterator

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import onert_py  # noqa: E402
from onert_py.exec.threads import thread_limit  # noqa: E402
from onert_py.ir import Model  # noqa: E402
from onert_py.loader.flatbuffer import load_model  # noqa: E402
from onert_py.schema.writer import ModelBuilder  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from run import ROOT, mediapipe_models, register_mediapipe_ops  # noqa: E402


BUILTIN = [False]   # --builtin: LiteRT's builtin kernels, no XNNPACK (what quantized.py compares against)


def _interpreter(**kw):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    if BUILTIN[0]:
        kw["experimental_op_resolver_type"] = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Interpreter(num_threads=1, **kw)


def _quantization(tensor) -> tuple | None:
    """A tensor's quantization as ModelBuilder takes it (scales, zero points, axis), or None."""
    q = tensor.quantization
    if q is None or np.size(q.scale) == 0:
        return None
    return np.asarray(q.scale), np.asarray(q.zero_point), int(q.quantized_dimension)


def _random(shape, dtype, rng: np.random.Generator) -> np.ndarray:
    """Seeded inputs: [0, 1) for floats, the whole range for integers (a quantized model's input)."""
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(int(info.min), int(info.max), shape, endpoint=True).astype(dt)
    return rng.random(shape, dtype=np.float32).astype(dt)


def cut_out(path: Path, model: Model | None = None) -> Iterator[tuple[object, bytes, list[np.ndarray], np.ndarray]]:
    """Per operator of the main subgraph (custom and folded ones left out): the op, a one-op model of
    it, its non-constant inputs and its first output, as a LiteRT run of the whole model computed them.
    `model` is the loaded `path`, when the caller has it."""
    sg = (model or load_model(str(path))).main
    whole = _interpreter(model_path=str(path), experimental_preserve_all_tensors=True)
    whole.allocate_tensors()
    rng = np.random.default_rng(0)
    for d in whole.get_input_details():
        whole.set_tensor(d["index"], _random(d["shape"], d["dtype"], rng))
    whole.invoke()
    # Values folded at prepare time (DEQUANTIZE, DENSIFY of weights): LiteRT does not keep them among
    # its preserved tensors (it reads back zeros), so they come from onert-py's own folding.
    ours = onert_py.infer.session(str(path)).executors[0]
    folded = {t: ours.values[t] for t in ours._folded}
    constant = {t.index for t in sg.tensors if t.data is not None}
    for op in sg.operations:
        ins = [t for t in op.inputs if t >= 0]
        if op.opcode != "CUSTOM" and ins and all(t in constant for t in ins):
            constant.update(op.outputs)      # folded: a constant for the ops that read it
            continue
        if op.opcode == "CUSTOM":
            continue
        mb = ModelBuilder()
        one = mb.subgraph("main")
        args, feeds = [], []
        for k, t in enumerate(op.inputs):
            if t < 0:
                args.append(-1)
                continue
            tensor = sg.tensors[t]
            if t in constant:
                value = (tensor.data if tensor.data is not None else np.asarray(folded[t]) if t in folded
                         else np.array(whole.get_tensor(t)))
                args.append(one.const(f"c{k}", value, quantization=_quantization(tensor)))
            else:   # the shapes the whole model ran with (a converter may declare [1] for a dynamic one)
                value = np.array(whole.get_tensor(t))
                idx = one.tensor(f"in{k}", list(value.shape), tensor.dtype, quantization=_quantization(tensor))
                one.inputs.append(idx)
                args.append(idx)
                feeds.append(value)
        outs = [one.tensor(f"out{k}", list(whole.get_tensor(t).shape), sg.tensors[t].dtype,
                           quantization=_quantization(sg.tensors[t])) for k, t in enumerate(op.outputs)]
        one.outputs = outs
        one.op(op.opcode, args, outs, **op.options)
        yield op, mb.to_bytes("tflite"), feeds, np.array(whole.get_tensor(op.outputs[0]))


def op_times(path: Path, rounds: int) -> list[dict]:
    """One row per timed operator: index, opcode, input shape, onert-py and LiteRT microseconds."""
    model = load_model(str(path))
    sg = model.main
    rows = []
    for op, data, feeds, _ in cut_out(path, model):
        lit = _interpreter(model_content=data)
        try:
            lit.allocate_tensors()
        except RuntimeError as e:   # a one-op model LiteRT will not prepare (XNNPACK's reshape of a
            print(f"{path.stem}: op {op.index} {op.opcode} left out: {str(e)[:120]}", file=sys.stderr)
            continue                # cut-out FULLY_CONNECTED): the others are still timed
        for d, x in zip(lit.get_input_details(), feeds):
            lit.set_tensor(d["index"], x)
        sess = onert_py.infer.session(data)
        sess.infer(feeds)
        ex = sess.executors[0]
        if len(ex.runs) != 1:
            continue
        for i, x in zip(ex.input_indices, feeds):
            ex.values[i] = x
        best = {"onert-py": float("inf"), "LiteRT": float("inf")}
        # the run closure is called outside a session run, so set one thread for BLAS and the jit
        # kernels here, as a session run with num_threads=1 does (numba's default is every core)
        with thread_limit(1):
            for _ in range(rounds):
                for name, fn in (("LiteRT", lit.invoke), ("onert-py", ex.runs[0])):
                    t0 = time.perf_counter()
                    fn()
                    best[name] = min(best[name], time.perf_counter() - t0)
        first = next((t for t in op.inputs if t >= 0), None)
        rows.append({"op": op.index, "type": op.opcode,
                     "shape": list(sg.tensors[first].shape) if first is not None else [],
                     "ours": best["onert-py"] * 1e6, "litert": best["LiteRT"] * 1e6})
    return rows


def by_type(rows: list[dict]) -> dict[str, list[float]]:
    agg: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for r in rows:
        a = agg[r["type"]]
        a[0] += 1
        a[1] += r["ours"]
        a[2] += r["litert"]
    return agg


def type_table(agg: dict[str, list[float]]) -> list[str]:
    gap_total = sum(a[1] - a[2] for a in agg.values()) or 1.0
    lines = ["| op type | ops | onert-py (µs) | LiteRT (µs) | gap (µs) | share of gap | onert-py / LiteRT |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, (n, ours, lit) in sorted(agg.items(), key=lambda kv: -(kv[1][1] - kv[1][2])):
        lines.append(f"| {name} | {n} | {ours:.0f} | {lit:.0f} | {ours - lit:.0f} | "
                     f"{(ours - lit) / gap_total:.0%} | {ours / lit:.1f}× |" if lit > 0 else
                     f"| {name} | {n} | {ours:.0f} | {lit:.0f} | {ours - lit:.0f} | – | – |")
    n = sum(a[0] for a in agg.values())
    ours, lit = sum(a[1] for a in agg.values()), sum(a[2] for a in agg.values())
    ratio = f"{ours / lit:.1f}×" if lit > 0 else "–"     # (no op timed: every model failed)
    lines.append(f"| **all** | {n} | {ours:.0f} | {lit:.0f} | {ours - lit:.0f} | 100% | {ratio} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", help="models (default: the mediapipe 0.10.14 set)")
    ap.add_argument("--rounds", type=int, default=11, help="interleaved timing rounds per op (best of)")
    ap.add_argument("--top", type=int, default=5, help="largest per-op gaps listed per model")
    ap.add_argument("--builtin", action="store_true",
                    help="time LiteRT's builtin kernels (no XNNPACK), as benchmarks/quantized.py compares")
    ap.add_argument("--out", default=str(ROOT / "docs" / "op_gap.md"))
    args = ap.parse_args(argv)
    BUILTIN[0] = args.builtin
    register_mediapipe_ops()   # selfie_segmentation's Convolution2DTransposeBias (not timed: custom)
    models = [Path(m) for m in args.models] or mediapipe_models()
    total: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    sections = []
    for path in models:
        try:
            rows = op_times(path, args.rounds)
        except Exception as e:  # noqa: BLE001 - a model LiteRT cannot run is reported, not fatal
            sections.append(f"### {path.stem}\n\nnot measured: {type(e).__name__}: {str(e)[:200]}\n")
            print(f"{path.stem}: {e}", file=sys.stderr)
            continue
        agg = by_type(rows)
        for k, (n, a, b) in agg.items():
            t = total[k]
            t[0] += n
            t[1] += a
            t[2] += b
        top = sorted(rows, key=lambda r: -(r["ours"] - r["litert"]))[:args.top]
        sections.append("\n".join([f"### {path.stem}", "", *type_table(agg), "",
                                   "Largest gaps: " + "; ".join(
                                       f"op {r['op']} {r['type']} {r['shape']} {r['ours']:.0f} vs "
                                       f"{r['litert']:.0f} µs" for r in top), ""]))
        print(f"{path.stem}: {sum(r['ours'] for r in rows) / 1e3:.2f} ms vs "
              f"{sum(r['litert'] for r in rows) / 1e3:.2f} ms", file=sys.stderr)
    what, caveats = __doc__.split("\n\n    python")[0], __doc__.split("Caveats: ", 1)[1].strip()
    doc = "\n".join([
        "# onert-py against LiteRT, op by op", "",
        f"Generated by `python benchmarks/op_gap.py {' '.join(argv if argv is not None else sys.argv[1:])}` "
        f"on {time.strftime('%Y-%m-%d')}" + (" against LiteRT's builtin kernels (no XNNPACK)." if args.builtin
                                             else "."), "",
        what.replace("Writes docs/op_gap.md.", "").strip(), "",
        f"Caveats: {caveats} Sparse weights (DENSIFY) are densified in the one-op models, so LiteRT runs "
        "those convolutions dense here, not with its sparse kernels.", "",
        "## All models, by op type", "", *type_table(total), "", "## Per model", "", *sections])
    Path(args.out).write_text(doc)
    print(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
