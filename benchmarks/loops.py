"""Converter-made WHILE loops: microseconds per iteration, onert-py beside LiteRT in the same run.

    python benchmarks/loops.py [--threads 1 2] [--out docs/loops_benchmark.md]

benchmarks/models/*_loop.tflite (made by benchmarks/make_loop_models.py with the TFLite converter:
a scalar loop, and seven bodies on a [512, 64] value around a 64x64 matmul): per-iteration cost = (best time at n2 - best time at n1) / (n2 - n1), the runtimes run
in turn (A/B per repeat), so fixed per-call costs cancel. onert-py runs twice: on the numpy `cpu`
backend alone and with the `jit` backend ("jit;cpu", whole-loop compilation where it applies); each
with `num_threads` equal to LiteRT's. With more than one thread each runtime runs in a process of its own
(three rounds, processes in turn, best of all): every runtime's workers spin a while after each run
(numba's OpenMP, XNNPACK's pthreadpool, OpenBLAS), and in one process that spinning takes the cores the
next runtime's threads need, which measures the interference rather than the runtime.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODELS = {"scalar_loop": ((1,), 200, 20200), "matmul_loop": ((512, 64), 10, 110),
          **{name: ((512, 64), 10, 110) for name in ("tanh_cos_loop", "sigmoid_gate_loop", "exp_decay_loop",
                                                     "sin_square_loop", "elu_residual_loop", "row_norm_loop")}}


RUNTIMES = ("cpu", "jit", "LiteRT")


def _runners(data: bytes, v: np.ndarray, threads: int, only: tuple[str, ...] = RUNTIMES):
    """The runtimes in `only`, each a function of the iteration count, and "compiled": whether the jit
    session runs the loop as one compiled function (None when jit is not among them)."""
    import onert_py
    runners, jit_session = {}, None
    for name in only:
        if name == "LiteRT":
            from ai_edge_litert import interpreter as lite
            it = lite.Interpreter(model_content=data, num_threads=threads)
            it.allocate_tensors()
            ins = it.get_input_details()

            def litert(n, it=it, ins=ins):
                for d in ins:
                    it.set_tensor(d["index"], v if d["dtype"] == np.float32 else n)
                it.invoke()
            runners[name] = litert
        else:
            sess = onert_py.infer.session(data, backends="cpu" if name == "cpu" else "jit;cpu",
                                          num_threads=threads)
            runners[name] = lambda n, sess=sess: sess.infer([v, n])
            if name == "jit":
                jit_session = sess
    for fn in runners.values():   # first runs: compilation, allocation
        fn(np.array([2], np.int32))
    runners["compiled"] = None if jit_session is None else bool(jit_session.runtime.compiled_loops)
    return runners


def _best_times(name: str, threads: int, repeats: int, only: tuple[str, ...]) -> dict:
    """{runtime: [best time at n1, best at n2]} and "compiled", the runtimes in turn per repeat."""
    shape, n1, n2 = MODELS[name]
    v = np.random.default_rng(0).normal(size=shape).astype(np.float32) * 0.1
    runners = _runners((ROOT / "benchmarks" / "models" / f"{name}.tflite").read_bytes(), v, threads, only)
    compiled = runners.pop("compiled")
    best = {k: [float("inf"), float("inf")] for k in runners}
    for _ in range(repeats):
        for k, fn in runners.items():
            for j, n in enumerate((n1, n2)):
                t = time.perf_counter()
                fn(np.array([n], np.int32))
                best[k][j] = min(best[k][j], time.perf_counter() - t)
    return {**best, "compiled": compiled}


def per_iteration(name: str, threads: int = 1, repeats: int = 7, isolate: bool | None = None) -> dict[str, float]:
    """µs per iteration per runtime, and "compiled". isolate (default: threads > 1): each runtime in a
    process of its own, three rounds of them in turn, best of all."""
    if isolate is None:
        isolate = threads > 1
    if not isolate:
        best = _best_times(name, threads, repeats, RUNTIMES)
    else:
        best = {**{k: [float("inf"), float("inf")] for k in RUNTIMES}, "compiled": None}
        for _ in range(3):
            for k in RUNTIMES:
                out = subprocess.run([sys.executable, __file__, "--worker", name, k, str(threads), str(repeats)],
                                     capture_output=True, text=True, check=True).stdout
                got = json.loads(out.strip().splitlines()[-1])
                best[k] = [min(a, b) for a, b in zip(best[k], got[k])]
                if got["compiled"] is not None:
                    best["compiled"] = got["compiled"]
    _, n1, n2 = MODELS[name]
    return {**{k: (best[k][1] - best[k][0]) / (n2 - n1) * 1e6 for k in RUNTIMES}, "compiled": best["compiled"]}


# ------------------------------------------------------------------- loop idioms (models/idioms)

# the idioms' inputs: (shape of the float input, loop count n or None where the model has none)
IDIOMS = {"maxiter_loop": ((1,), 1000), "range_loop": ((), 1000), "two_values_loop": ((4,), 1000),
          "shift_loop": ((8,), 1000), "rnn_loop": ((1, 64), 100), "sequence_loop": ((10, 8), 10),
          "gather_loop": ((10, 8), 10), "select_loop": ((8,), 1000), "tolerance_loop": ((8,), None),
          "nested_loop": ((16,), 300), "newton_loop": ((), None), "lstm_layer": ((1, 24, 8), None),
          "gru_layer": ((1, 24, 8), None), "lstm_sequence": ((1, 24, 8), None), "tensor_array_loop": ((8,), 6),
          "sqrt_loop": ((1,), 1000), "unit_matrix_loop": ((1, 1), 1000)}
# idioms whose n can be anything: also timed at n // 10, for a cost per iteration without the fixed costs
PER_ITERATION_FROM = 100


def idiom_times(repeats: int = 21) -> list[tuple[str, dict]]:
    """µs per run of each idiom on cpu, jit and LiteRT (1 thread, runtimes in turn per repeat, best), and
    for loops of n >= PER_ITERATION_FROM, µs per iteration: (best at n - best at n // 10) / (n - n // 10)."""
    import onert_py
    from ai_edge_litert import interpreter as lite
    rows = []
    for name, (shape, n) in IDIOMS.items():
        data = (ROOT / "benchmarks" / "models" / "idioms" / f"{name}.tflite").read_bytes()
        x = np.random.default_rng(0).uniform(0.2, 1.5, shape).astype(np.float32)
        if name == "newton_loop":
            x = np.array(12345.0, np.float32)
        counts = [n] if n is None or n < PER_ITERATION_FROM else [n, n // 10]
        feeds = [[x] if k is None else [x, np.array(k, np.int32)] for k in counts]
        it = lite.Interpreter(model_content=data, num_threads=1)
        it.allocate_tensors()

        def litert(inputs, it=it, details=it.get_input_details()):
            for d, a in zip(details, inputs):
                it.set_tensor(d["index"], a)
            it.invoke()
        sessions = {b: onert_py.infer.session(data, backends=b, num_threads=1) for b in ("cpu", "jit;cpu")}
        runners = {"cpu": sessions["cpu"].infer, "jit": sessions["jit;cpu"].infer, "LiteRT": litert}
        best = {k: [float("inf")] * len(feeds) for k in runners}
        for fn in runners.values():
            fn(feeds[0])
        for _ in range(repeats):
            for k, fn in runners.items():
                for j, inputs in enumerate(feeds):
                    t = time.perf_counter()
                    fn(inputs)
                    best[k][j] = min(best[k][j], (time.perf_counter() - t) * 1e6)
        row = {k: b[0] for k, b in best.items()}
        if len(counts) == 2:
            row["per_iteration"] = {k: (b[0] - b[1]) / (counts[0] - counts[1]) for k, b in best.items()}
        rows.append((name, {**row, "n": n, "compiled": bool(sessions["jit;cpu"].runtime.compiled_loops)}))
    return rows


def idioms_table(rows: list[tuple[str, dict]]) -> str:
    lines = ["| model | n | cpu (µs) | jit (µs) | LiteRT (µs) | cpu / LiteRT | jit / LiteRT | "
             "per iteration: cpu / jit / LiteRT (µs) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in rows:
        how = " (compiled)" if r["compiled"] else ""
        it = r.get("per_iteration")
        each = "–" if it is None else f"{it['cpu']:.2f} / {it['jit']:.3f} / {it['LiteRT']:.3f}"
        lines.append(f"| {name} | {r['n'] if r['n'] is not None else '–'} | {r['cpu']:.1f} | {r['jit']:.1f}{how} | "
                     f"{r['LiteRT']:.1f} | {r['cpu'] / r['LiteRT']:.2f}x | {r['jit'] / r['LiteRT']:.2f}x | {each} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["--worker"]:   # one runtime of an isolated measurement
        name, runtime, threads, repeats = sys.argv[2:6]
        print(json.dumps(_best_times(name, int(threads), int(repeats), (runtime,))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--out", help="default: docs/loops_benchmark.md, or docs/loop_idioms.md with --idioms")
    ap.add_argument("--idioms", action="store_true",
                    help="time models/idioms/ instead (µs per run, 1 thread), written to docs/loop_idioms.md")
    args = ap.parse_args(argv)
    if args.idioms:
        cmd = f"python benchmarks/loops.py {' '.join(sys.argv[1:] if argv is None else argv)}"
        doc = ("# Loop idioms\n\nGenerated by `" + cmd + "`: converter-made loops written the ways people "
               "write them (benchmarks/make_loop_models.py, IDIOMS), µs per run at loop count n (whole runs: "
               "the session's and LiteRT's fixed per-run costs included), best of 21, runtimes in turn, one "
               "thread. cpu = the numpy backend alone; jit = backends \"jit;cpu\" (\"compiled\": the "
               "whole WHILE ran as one compiled function). Per iteration: for loops of n >= 100, (best at n "
               "- best at n // 10) / (n - n // 10), the fixed costs cancelled.\n\n" + idioms_table(idiom_times()))
        out = Path(args.out or ROOT / "docs" / "loop_idioms.md")
        out.write_text(doc)
        print(doc)
        return 0
    lines = ["# Converter-made loops", "",
             f"Generated by `python benchmarks/loops.py {' '.join(sys.argv[1:] if argv is None else argv)}` "
             "(µs per iteration, best of 7, runtimes in turn, in one process at 1 thread and each in its own "
             "process, three rounds, at more; `threads` = onert-py's num_threads and "
             "LiteRT's). cpu = the numpy backend alone; jit = backends \"jit;cpu\" (\"compiled\": the "
             "whole WHILE ran as one compiled function).", "",
             "| model | threads | cpu | jit | LiteRT | cpu / LiteRT | jit / LiteRT |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for threads in args.threads:
        for name in MODELS:
            r = per_iteration(name, threads)
            how = " (compiled)" if r["compiled"] else ""
            lines.append(f"| {name} | {threads} | {r['cpu']:.3f} | {r['jit']:.3f}{how} | {r['LiteRT']:.3f} | "
                         f"{r['cpu'] / r['LiteRT']:.1f}x | {r['jit'] / r['LiteRT']:.2f}x |")
    doc = "\n".join(lines) + "\n"
    Path(args.out or ROOT / "docs" / "loops_benchmark.md").write_text(doc)
    print(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
