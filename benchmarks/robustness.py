"""Regenerate docs/robustness.md: byte-level and structure-aware mutation runs, the same on the jit
backend (plus a deterministic sweep of hostile option, quantization and dim values), peak memory against
the budget, the thread check and the coverage-guided run's findings.

    python benchmarks/robustness.py [--byte-cases 300] [--structured-cases 1500] [--jit-cases 1500]
                                    [--jit-sweep-seeds 3] [--out docs/robustness.md]

Every case runs in a worker process (tests/fuzz/fuzzrun.py) under a 4 GiB RLIMIT_AS with a per-case
time limit, with max_while_iterations=16: on the cpu backend, and for the jit runs on "jit;cpu" (numba
must be installed; --jit-cases 0 --jit-sweep-seeds 0 leaves them out). The coverage-guided figures are
read from the JSON benchmarks/fuzz_atheris.py writes (run it first for fresh ones). A few minutes on two
cores; smaller counts for a quick look.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))

from fuzzrun import GIB, Result, WorkerPool, byte_mutations, tally  # noqa: E402
from hostile import JIT_BASES, RandomDraw, hostile_model, sweep_cases  # noqa: E402

MEDIAPIPE = Path.home() / ".cache/onert-py/mediapipe-0.10.14/mediapipe/modules"
CORPUS = ROOT / "tests" / "conformance" / "corpus"
BYTE_MODELS = [ROOT / "examples/while_if.tflite", CORPUS / "cond_in_while.tflite",
               MEDIAPIPE / "face_detection/face_detection_short_range.tflite",
               MEDIAPIPE / "hand_landmark/hand_landmark_lite.tflite",
               CORPUS / "lstm_int8.tflite", CORPUS / "keras_lstm.tflite", CORPUS / "mlp_int8.tflite"]
TIMEOUT = 30.0
RUN_OPTIONS = {"max_while_iterations": 16}


def _note(results: list[tuple[str, Result]], outcome: str, limit: int = 8) -> list[str]:
    """Distinct details of one outcome (numbers folded so that one kind of finding is one line)."""
    import re
    seen: dict[str, str] = {}
    for desc, r in results:
        if r.outcome == outcome:
            seen.setdefault(re.sub(r"\d+", "N", r.detail)[:120], f"{desc}: {r.detail}"[:300])
    return list(seen.values())[:limit]


def byte_level(n: int) -> tuple[dict, list, dict, int]:
    per_model, results, peak = {}, [], 0
    with WorkerPool(memory_limit=4 * GIB, timeout=TIMEOUT, **RUN_OPTIONS) as pool:
        for k, path in enumerate(p for p in BYTE_MODELS if p.exists()):
            data = path.read_bytes()
            mine = []
            for kind, mutated in byte_mutations(data, n, seed=k):
                r = pool.run(mutated)
                mine.append((f"{path.name} {kind}", r))
            per_model[path.name] = (len(data), tally(r for _, r in mine))
            results += mine
            print(f"  {path.name}: {per_model[path.name][1]}", flush=True)
        peak = pool.peak_rss_kb
    return per_model, results, tally(r for _, r in results), peak


def structured(n: int, backends: str = "cpu", bases: tuple[str, ...] | None = None) -> tuple[dict, list, dict, int]:
    results, by_base = [], collections.defaultdict(list)
    with WorkerPool(memory_limit=4 * GIB, timeout=TIMEOUT, backends=backends, **RUN_OPTIONS) as pool:
        for seed in range(n):
            d = RandomDraw(seed)
            desc, data = hostile_model(d, base=d.choice(bases) if bases else None)
            r = pool.run(data)
            results.append((desc, r))
            by_base[desc.split(" | ")[0]].append(r)
        peak = pool.peak_rss_kb
    return {b: tally(rs) for b, rs in sorted(by_base.items())}, results, tally(r for _, r in results), peak


def jit_sweep(seeds: int) -> tuple[dict, list, dict, int]:
    """sweep_cases on the jit bases, on "jit;cpu": rows by base."""
    results, by_base = [], collections.defaultdict(list)
    with WorkerPool(memory_limit=4 * GIB, timeout=TIMEOUT, backends="jit;cpu", **RUN_OPTIONS) as pool:
        for desc, data in sweep_cases(JIT_BASES, seeds=range(seeds)):
            r = pool.run(data)
            results.append((desc, r))
            by_base[desc.split(" ")[0]].append(r)
        peak = pool.peak_rss_kb
    return {b: tally(rs) for b, rs in sorted(by_base.items())}, results, tally(r for _, r in results), peak


def threads_check(n_threads: int = 8, runs: int = 200) -> dict:
    """n_threads sessions of one model, each `runs` runs on its own inputs, against one-thread results."""
    import onert_py
    data = (ROOT / "examples/while_if.tflite").read_bytes()
    rng = np.random.default_rng(0)
    inputs = [[rng.standard_normal(4).astype(np.float32), np.array(k % 6, np.int32)] for k in range(runs)]
    ref_sess = onert_py.infer.session(data)
    expected = [[o.copy() for o in ref_sess.infer(x)] for x in inputs]
    mismatches, errors = [0] * n_threads, []

    def worker(t: int) -> None:
        try:
            sess = onert_py.infer.session(data)
            for k in range(runs):
                j = (k + t * 37) % runs        # threads walk the inputs in different orders
                got = sess.infer(inputs[j])
                if any(not np.array_equal(g, e) for g, e in zip(got, expected[j])):
                    mismatches[t] += 1
        except Exception as e:   # noqa: BLE001 - reported in the table
            errors.append(f"thread {t}: {type(e).__name__}: {e}")
    t0 = time.perf_counter()
    ts = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return {"threads": n_threads, "runs": runs, "total": n_threads * runs, "mismatches": sum(mismatches),
            "errors": errors, "seconds": time.perf_counter() - t0, "backends": ref_sess.runtime.backends}


def replay_findings(atheris: dict) -> None:
    """Run each input the coverage-guided run flagged again (when its work directory is still there)
    under the same limits, so the page says whether it is fixed."""
    with WorkerPool(memory_limit=4 * GIB, timeout=TIMEOUT, **RUN_OPTIONS) as pool:
        for f in atheris["findings"]:
            path = Path(atheris["work"]) / f["file"]
            if path.exists():
                r = pool.run(path.read_bytes())
                f["now"] = f"{r.outcome} in {r.seconds:.1f} s" + (f" ({r.detail[:100]})" if r.detail else "")


def _budget(size: int) -> int:
    from onert_py.exec.budget import default_max_memory
    return default_max_memory(size)


def _row(name: str, c: dict) -> str:
    return f"| {name} | {c['tried']} | {c['ran'] + c['prepared']} | {c['clean']} | {c['other']} | {c['hang']} |"


def render(byte: tuple, struct_: tuple, jit: tuple | None, sweep: tuple | None, threads: dict,
           atheris: dict | None, seconds: float, command: str) -> str:
    per_model, b_results, b_total, b_peak = byte
    per_base, s_results, s_total, s_peak = struct_
    head = "| | tried | ran | clean errors | anything else | hangs |\n|---|---|---|---|---|---|"
    lines = ["# Robustness", "",
             f"Regenerated by `{command}` (this run: "
             f"{time.strftime('%Y-%m-%d')}, {seconds / 60:.1f} min). Every case is loaded, prepared and run "
             "(cpu backend unless said otherwise, `max_while_iterations=16`, generated small inputs) in a "
             "worker process under a "
             f"4 GiB `RLIMIT_AS` with a {TIMEOUT:g} s limit per case. *ran* counts cases that ran (or "
             "prepared, when their declared inputs were too big to make); *clean errors* are `OnertPyError`s; "
             "*anything else* is any other exception or a dead worker, and *hangs* are cases over the time "
             "limit: both must be 0.", "",
             "## Byte-level mutations", "",
             "Bit flips (1-4 bits), truncations and extreme int32 splices (0, -1, 2**31-1, -2**31, 65536...) "
             "at 4-byte-aligned offsets, as in the issue.", "", head]
    for name, (size, c) in per_model.items():
        lines.append(_row(f"`{name}` ({size / 1024:.0f} KiB)", c))
    lines.append(_row("**total**", b_total))
    lines += ["", "## Structure-aware mutations", "",
              "Valid flatbuffers with hostile values, written by `tests/fuzz/hostile.py` through the model "
              "writer and the flatbuffers object API: huge, negative and int64-overflowing dims, buffers "
              "shorter or longer than their shape, out-of-range and recursive subgraph indices in "
              "IF/WHILE/CALL_ONCE/CALL, conds that never end, call chains 3000 deep, zero-size tensors, string "
              "buffers with bad counts/offsets, bad sparsity indices, quantization lengths that disagree with "
              "the quantized dimension, options tables of the wrong type or unknown codes, hostile option and "
              "constant values, broken op/graph/signature indices. Rows by base model (each case: one base "
              "plus 0-2 hostile edits).", "", head]
    for name, c in per_base.items():
        lines.append(_row(name, c))
    lines.append(_row("**total**", s_total))
    peaks = [("byte-level", b_peak), ("structure-aware", s_peak)]
    if jit is not None or sweep is not None:
        lines += ["", "## On the jit backend", "",
                  "The same runs with `backends=\"jit;cpu\"`: numba kernels that index without bounds checks "
                  "(depthwise and int8 convolutions, float and int8 pools, int8 fully connected, elementwise "
                  "per-op kernels, WHILE loops compiled whole), so every hostile value they could read has to "
                  "be refused or declined at prepare."]
    if jit is not None:
        j_base, _, j_total, j_peak = jit
        peaks.append(("jit structure-aware", j_peak))
        lines += ["", f"Structure-aware mutations of the bases with ops the jit backend takes ({j_total['tried']} "
                  "cases, one base plus 0-2 hostile edits each):", "", head]
        lines += [_row(name, c) for name, c in j_base.items()]
        lines.append(_row("**total**", j_total))
    if sweep is not None:
        w_base, _, w_total, w_peak = sweep
        peaks.append(("jit sweep", w_peak))
        lines += ["", "A deterministic sweep (`tests/fuzz/hostile.py` `sweep_cases`): each integer option of each "
                  "op (strides, dilations, paddings, filter sizes, depth multipliers, activations...), each "
                  "tensor's zero point and scale (out of range, 2**40, NaN, inf, 0, denormal) and each dim "
                  "(0, 1, 2, 65536, 2**31-1) set to a hostile value, one at a time:", "", head]
        lines += [_row(name, c) for name, c in w_base.items()]
        lines.append(_row("**total**", w_total))
    largest = max(size for size, _ in per_model.values())
    budget = _budget(largest)
    worst = max(p for _, p in peaks)
    lines += ["", "## Memory", "",
              "Peak resident memory of a worker over all cases (`ru_maxrss`, the worst case included): "
              + ", ".join(f"{name} {p / 1024:.0f} MiB" for name, p in peaks) + ", against the "
              f"4 GiB address-space limit and the default `max_memory` budget ({budget / GIB:.2f} GiB for the "
              f"largest model, {largest / 2**20:.1f} MiB: 4 x file + 1 GiB). "
              + ("Within the budget." if worst * 1024 <= budget else "**Over the budget.**"), "",
              "The budget is checked before allocating: constants and declared shapes at load, every shape "
              "shape inference derives (broadcasts, gathers, tiles, transposed convolutions' output_shape, "
              "values folded at prepare) before any kernel is prepared, the output shapes of ops whose "
              "shapes are only known at run time right before each runs (from their actual inputs), and "
              "the arenas of all subgraphs plus the constants together (`tests/exec/test_memory_budget.py`, "
              "`tests/exec/test_budget_derived_shapes.py`).", ""]
    lines += ["## Threads", "",
              f"{threads['threads']} threads, each with its own session of `examples/while_if.tflite` "
              f"(backends {', '.join(threads['backends'])}), {threads['runs']} runs each = {threads['total']} "
              f"runs, compared bit for bit with one-thread results: {threads['mismatches']} mismatches, "
              f"{len(threads['errors'])} errors ({threads['seconds']:.1f} s)."]
    lines += [f"- {e}" for e in threads["errors"][:5]]
    lines += ["", "## Coverage-guided run (atheris)", ""]
    if atheris is None:
        lines.append("Not run yet: `python benchmarks/fuzz_atheris.py --minutes 10` writes "
                     "`benchmarks/atheris_findings.json`.")
    else:
        lines.append(f"`python benchmarks/fuzz_atheris.py --minutes {atheris['minutes']:g}` "
                     f"({atheris['date']}): {atheris['executions']} executions from {atheris['seeds']} seeds "
                     f"(the examples and the small conformance models) to a corpus of {atheris['corpus']}, "
                     f"coverage {atheris['coverage']} edges / {atheris['features']} features, "
                     f"{len(atheris['findings'])} findings in that run:")
        for f in atheris["findings"]:
            cause = f" Cause: {f['cause']}" if f.get("cause") else ""
            lines.append(f"- {f['kind']}: {f['detail']} (`{f['file']}`); replayed now: "
                         f"{f.get('now', 'not replayed')}.{cause}")
        if not atheris["findings"]:
            lines.append("- none")
    lines += ["", "## Findings", ""]
    runs = [b_results, s_results] + [x[1] for x in (jit, sweep) if x is not None]
    other = [n for rs in runs for n in _note(rs, "other")]
    hangs = [n for rs in runs for n in _note(rs, "hang")]
    lines += [f"- anything else: {x}" for x in other] or ["- no case escaped as anything but an OnertPyError"]
    lines += [f"- hang: {x}" for x in hangs] or ["- no case hung"]
    lines += ["", "## How to run", "",
              "```sh",
              "python -m pytest tests/fuzz                         # the bounded, derandomized run (CI)",
              "python benchmarks/robustness.py                      # this page (a few minutes)",
              "pip install atheris                                  # or: pip install -e \".[dev]\"",
              "python benchmarks/fuzz_atheris.py --minutes 10       # coverage-guided; writes benchmarks/atheris_findings.json",
              "python benchmarks/fuzz_atheris.py --replay FILE      # one flagged input again",
              "```", "",
              "The structure-aware generator draws from `random.Random(seed)` here and from hypothesis' "
              "`st.data()` in the test, so a failing CI case shrinks to a small model and its description "
              "names the base and the edits."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--byte-cases", type=int, default=300, help="mutations per model")
    ap.add_argument("--structured-cases", type=int, default=1500)
    ap.add_argument("--jit-cases", type=int, default=1500, help="structure-aware cases on jit;cpu (0: none)")
    ap.add_argument("--jit-sweep-seeds", type=int, default=3, help="base models per jit base in the sweep (0: none)")
    ap.add_argument("--atheris-json", type=Path, default=ROOT / "benchmarks" / "atheris_findings.json")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "robustness.md")
    a = ap.parse_args()
    t0 = time.perf_counter()
    print("byte-level mutations", flush=True)
    byte = byte_level(a.byte_cases)
    print(f"  total {byte[2]}\nstructure-aware mutations", flush=True)
    struct_ = structured(a.structured_cases)
    print(f"  total {struct_[2]}", flush=True)
    from onert_py.backends import jit as jit_backend
    jit = sweep = None
    if jit_backend.installed() and a.jit_cases:
        print("structure-aware mutations on jit;cpu", flush=True)
        jit = structured(a.jit_cases, backends="jit;cpu", bases=JIT_BASES)
        print(f"  total {jit[2]}", flush=True)
    if jit_backend.installed() and a.jit_sweep_seeds:
        print("sweep of hostile values on jit;cpu", flush=True)
        sweep = jit_sweep(a.jit_sweep_seeds)
        print(f"  total {sweep[2]}", flush=True)
    print("threads", flush=True)
    threads = threads_check()
    print(f"  {threads['mismatches']} mismatches, {len(threads['errors'])} errors", flush=True)
    atheris = json.loads(a.atheris_json.read_text()) if a.atheris_json.exists() else None
    if atheris is not None:
        replay_findings(atheris)
    command = "python benchmarks/robustness.py" + "".join(
        f" --{k.replace('_', '-')} {v}" for k, v in vars(a).items()
        if k not in ("out", "atheris_json") and v != ap.get_default(k))
    a.out.write_text(render(byte, struct_, jit, sweep, threads, atheris, time.perf_counter() - t0, command))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
