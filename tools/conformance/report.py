"""Write docs/conformance.md: every conformance-corpus model (and the mediapipe models, when cached)
run on onert-py as TFLite and as Circle, compared with LiteRT.

Per model and format the status is one of

- ``match`` (with the max abs error against the reference, within the model's tolerance),
- ``mismatch`` (max abs error, or the shape/dtype difference),
- ``unsupported op`` (the ops without a kernel),
- ``error`` (onert-py raised: the exception's first line).

Corpus references are the stored LiteRT outputs (``corpus/<name>.npz``, see generate.py), compared
with the tolerances of ``corpus/MANIFEST.json``. The mediapipe 0.10.14 models (tests/models) are
included when their download cache exists (never downloaded here): seeded uniform [0, 1) inputs,
LiteRT run live with its reference kernels, tolerance ``1e-4 * range(reference) + 1e-5`` per output
as in tests/models/test_mediapipe.py; models with mediapipe custom ops are split at those ops exactly
as that test does (LiteRT has no such ops). Usage::

    python tools/conformance/report.py [--out docs/conformance.md] [--only NAME ...] [--no-mediapipe]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "conformance" / "corpus"
DEFAULT_OUT = REPO / "docs" / "conformance.md"
FORMATS = ("tflite", "circle")


@dataclass
class Result:
    status: str          # match | mismatch | unsupported op | error
    detail: str          # max abs error, or what is unsupported / went wrong
    max_err: float | None = None


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:160] if text else ''}".replace("|", "\\|")


def _check(got, want, rtol: float, atol: float, span_tol: bool = False,
           span_rel: list[float] | None = None) -> Result:
    """Compare output lists. span_tol: tolerance span_rel[k] (default 1e-4) * range(reference) + atol
    (1e-5 by default), the mediapipe tests' rule."""
    from onert_py.tools.cmd_compare import compare_arrays
    if len(got) != len(want):
        return Result("mismatch", f"{len(got)} outputs, reference {len(want)}")
    worst = 0.0
    bad = []
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if span_tol and w.dtype.kind == "f":
            fin = np.isfinite(w)
            span = float(w[fin].max() - w[fin].min()) if fin.any() else 0.0
            r_atol, r_rtol = (span_rel[k] if span_rel else 1e-4) * span + (atol or 1e-5), 0.0
        else:
            r_atol, r_rtol = atol, rtol
        err, _, ok, note = compare_arrays(g, w, r_rtol, r_atol)
        if err is not None:
            worst = max(worst, err)
        if not ok:
            bad.append(f"output {k}: " + (note or f"max abs err {err:.3g}"))
    if bad:
        return Result("mismatch", "; ".join(bad), worst)
    return Result("match", f"{worst:.3g}", worst)


# ---- corpus

def corpus_results(only: list[str] | None = None) -> list[tuple[str, str, dict[str, Result]]]:
    import onert_py
    from onert_py.compiler import unsupported_ops
    from onert_py.schema.writer import serialize
    manifest = json.loads((CORPUS / "MANIFEST.json").read_text())
    rows = []
    for entry in manifest["models"]:
        name = entry["name"]
        if only and name not in only:
            continue
        rtol = entry.get("rtol", manifest.get("default_rtol", 1e-5))
        atol = entry.get("atol", manifest.get("default_atol", 1e-5))
        runs = _stored_runs(name)
        data = (CORPUS / f"{name}.tflite").read_bytes()
        per_fmt: dict[str, Result] = {}
        for fmt in FORMATS:
            try:
                model = onert_py.load_model(data)
                missing = sorted({op for _, _, op in unsupported_ops(model)})
                if missing:
                    per_fmt[fmt] = Result("unsupported op", ", ".join(missing))
                    continue
                blob = data if fmt == "tflite" else serialize(model, "circle")
                sess = onert_py.infer.session(blob)
                # every stored input set on one session (dynamic batch / sequence length)
                per_fmt[fmt] = _worst([_check(sess.infer([x.copy() for x in ins]), outs, rtol, atol)
                                       for ins, outs in runs])
            except Exception as e:  # noqa: BLE001 - a report records every failure
                per_fmt[fmt] = Result("error", _first_line(e))
        ops = ", ".join(sorted({op for sg_ops in entry.get("ops", []) for op in sg_ops}))
        if len(runs) > 1:
            ops += f" ({len(runs)} input sets: " + ", ".join(
                "x".join(map(str, ins[0].shape)) for ins, _ in runs) + ")"
        rows.append((name, ops, per_fmt))
    return rows


def _stored_runs(name: str) -> list[tuple[list[np.ndarray], list[np.ndarray]]]:
    """(inputs, outputs) per stored input set: in_k/out_k, then run<n>_in_k/run<n>_out_k."""
    with np.load(CORPUS / f"{name}.npz", allow_pickle=False) as z:
        def arrays(prefix):
            return [z[f"{prefix}{k}"] for k in range(sum(f.startswith(prefix) for f in z.files))]
        runs = [(arrays("in_"), arrays("out_"))]
        while f"run{len(runs)}_in_0" in z.files:
            runs.append((arrays(f"run{len(runs)}_in_"), arrays(f"run{len(runs)}_out_")))
    return runs


def _worst(results: list[Result]) -> Result:
    """One result for several input sets: the first that is not a match, else the largest error."""
    for r in results:
        if r.status != "match":
            return r
    return max(results, key=lambda r: r.max_err or 0.0)


# ---- mediapipe

def _mediapipe_paths() -> list[Path]:
    """The cached mediapipe models, or [] when the cache is absent (never downloads)."""
    conftest = _load_module("mp_conftest", REPO / "tests" / "models" / "conftest.py")
    dest = conftest.model_cache_dir() / f"mediapipe-{conftest.MEDIAPIPE_VERSION}"
    done = dest / "COMPLETE"
    if not done.exists():
        return []
    paths = [dest / line for line in done.read_text().split()]
    return paths if all(p.exists() for p in paths) else []


def _load_module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def mediapipe_results(paths: list[Path]) -> list[tuple[str, str, dict[str, Result]]]:
    import onert_py
    from onert_py.compiler import unsupported_ops
    from onert_py.contrib import mediapipe_ops
    from onert_py.schema.writer import serialize
    mp_test = _load_module("mp_test", REPO / "tests" / "models" / "test_mediapipe.py")
    mediapipe_ops.register()
    rows = []
    for path in paths:
        name = path.stem
        data = path.read_bytes()
        model = onert_py.load_model(data)
        sg = model.subgraphs[0]
        customs = sorted({op.custom_name for op in sg.operations if op.opcode == "CUSTOM"})
        note = ("split at custom ops " + ", ".join(customs) + "; ") if customs else ""
        per_fmt: dict[str, Result] = {}
        missing = sorted({op for _, _, op in unsupported_ops(model)})
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        inputs = [rng.random(sg.tensors[i].shape, dtype=np.float32) for i in sg.inputs]
        for fmt in FORMATS:
            if missing:
                per_fmt[fmt] = Result("unsupported op", ", ".join(missing))
                continue
            try:
                if customs:
                    probe, lite_bytes, c_out, _ = mp_test._split_at_custom_ops(model)
                    blob = probe if fmt == "tflite" else serialize(probe, "circle")
                    got = onert_py.infer.session(blob).infer([x.copy() for x in inputs])
                    by_tensor = dict(zip(probe.subgraphs[0].outputs, got))
                    feeds = dict(zip(sg.inputs, inputs))
                    feeds.update({t: by_tensor[t] for t in c_out})
                    ref = mp_test._litert(lite_bytes, feeds)
                    tensors = list(ref)
                    got_list = [by_tensor[t] for t in tensors]
                    ref_list = [ref[t] for t in tensors]
                    out_names = [probe.subgraphs[0].tensors[t].name for t in tensors]
                else:
                    blob = data if fmt == "tflite" else serialize(model, "circle")
                    got_list = onert_py.infer.session(blob).infer([x.copy() for x in inputs])
                    ref = mp_test._litert(data, dict(zip(sg.inputs, inputs)))
                    ref_list = [ref[t] for t in sg.outputs]
                    out_names = [sg.tensors[t].name for t in sg.outputs]
                # the tests' tolerances, with their per-output exceptions (tests/models/test_mediapipe.py)
                rel = [mp_test.NOISY_OUTPUTS.get((name, n), mp_test.REL_TOL) for n in out_names]
                per_fmt[fmt] = _check(got_list, ref_list, 0.0, mp_test.ABS_TOL, span_tol=True, span_rel=rel)
            except Exception as e:  # noqa: BLE001
                per_fmt[fmt] = Result("error", _first_line(e))
        ops = sorted({op.opcode if op.opcode != "CUSTOM" else f"CUSTOM:{op.custom_name}" for op in sg.operations})
        rows.append((name, note + f"{len(sg.operations)} ops, {len(ops)} kinds", per_fmt))
    return rows


# ---- markdown

def _cell(r: Result) -> str:
    if r.status == "match":
        return f"match ({r.detail})"
    return f"**{r.status}** ({r.detail})"


def _table(rows, second_col: str) -> list[str]:
    lines = [f"| model | {second_col} | tflite | circle |", "|---|---|---|---|"]
    for name, info, per_fmt in rows:
        lines.append(f"| {name} | {info} | " + " | ".join(_cell(per_fmt[f]) for f in FORMATS) + " |")
    return lines


def render(corpus_rows, mp_rows, mp_state: str) -> str:
    counts = Counter(r.status for _, _, pf in corpus_rows + mp_rows for r in pf.values())
    lines = [
        "# Conformance against LiteRT",
        "",
        "Generated by `python tools/conformance/report.py`; do not edit by hand. Every model runs on "
        "onert-py as the TFLite file and as a Circle re-encoding made by onert-py's writer.",
        "",
        "- **Corpus** (`tests/conformance/corpus`, made by `tools/conformance/generate.py` with the "
        "TensorFlow Lite converter): compared with the stored LiteRT outputs, within the tolerances "
        "of `MANIFEST.json` (default rtol 1e-5, atol 1e-5; integer and bool outputs exactly).",
        "- **mediapipe 0.10.14** models: LiteRT run live (reference kernels) on seeded uniform [0, 1) "
        "inputs, tolerance 1e-4 x range(reference) + 1e-5 per output; graphs with mediapipe custom ops "
        "are split at them as in tests/models/test_mediapipe.py.",
        "",
        "Cells: `match (max abs error)`, `mismatch (what)`, `unsupported op (which)`, `error (exception)`.",
        "",
        "## Summary",
        "",
        f"- corpus models: {len(corpus_rows)}; mediapipe models: {len(mp_rows)} ({mp_state})",
        "- model x format results: " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())),
        "",
        "## Corpus",
        "",
        *_table(corpus_rows, "ops"),
        "",
        "## mediapipe models",
        "",
    ]
    if mp_rows:
        lines += _table(mp_rows, "notes")
    else:
        lines.append(f"Not included: {mp_state}.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--only", nargs="*", help="only these corpus models (and no mediapipe models)")
    p.add_argument("--no-mediapipe", action="store_true", help="leave the mediapipe models out")
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    corpus_rows = corpus_results(args.only)
    if args.no_mediapipe or args.only:
        mp_rows, mp_state = [], "left out on request"
    else:
        paths = _mediapipe_paths()
        mp_state = "cached, LiteRT compared live" if paths else "download cache absent"
        mp_rows = mediapipe_results(paths) if paths else []
    text = render(corpus_rows, mp_rows, mp_state)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    bad = sum(r.status in ("mismatch", "error") for _, _, pf in corpus_rows + mp_rows for r in pf.values())
    print(f"wrote {args.out}: {len(corpus_rows)} corpus + {len(mp_rows)} mediapipe models, "
          f"{bad} mismatch/error cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())
