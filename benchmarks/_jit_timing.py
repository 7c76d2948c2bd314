"""Shared by benchmarks/jit_*.py: one op's run closure timed on the cpu backend and with its jit kernel
forced (its accept rule `_wins` bypassed, so that the rule's numbers can be read), cpu and jit in
alternating blocks of calls (A/B/A/B, ~2 ms each) per round; the median of all per-call times. The
thread count is the session's num_threads (BLAS through threadpoolctl, numba's set_num_threads). The
two backends' outputs are checked to agree (integers bit for bit) before timing.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import onert_py  # noqa: E402
from onert_py.backends import jit  # noqa: E402
from onert_py.exec.threads import thread_limit  # noqa: E402

_RULED_FAMILIES = ("conv", "pool", "matmul")


def _runner(mb, inputs, backends, op_backend, threads):
    """The op's run closure with its inputs set in the executor's slots, the backend it ran on and
    the executor."""
    sess = onert_py.infer.session(mb.to_bytes("tflite"), backends=backends, op_backend=op_backend,
                                  num_threads=threads)
    sess.infer(inputs)                                   # compiles, plans memory
    ex = sess.executors[0]
    for i, x in zip(ex.input_indices, inputs):
        ex.values[i] = x
    return ex.runs[0], ex.backend_names[0], ex


def _per_call(run, threads, reps) -> list[float]:
    """The times of `reps` calls, each timed alone: the median then leaves out the calls that waited for
    the other backend's threads (on 2 cores, a call right after the other backend's can wait a time
    slice)."""
    times = []
    with np.errstate(all="ignore"), thread_limit(threads):
        for _ in range(reps):
            t = time.perf_counter()
            run()
            times.append(time.perf_counter() - t)
    return times


class _rules_off:
    """Every jit family's accept rule (`_wins`) replaced by "accept"."""
    def __enter__(self):
        mods = [importlib.import_module(f"onert_py.backends.jit.{m}") for m in _RULED_FAMILIES
                if importlib.util.find_spec(f"onert_py.backends.jit.{m}")]
        self.saved = [(m, m._wins) for m in mods if hasattr(m, "_wins")]
        for m, _ in self.saved:
            m._wins = lambda *a, **k: True

    def __exit__(self, *exc):
        for m, f in self.saved:
            m._wins = f


def measure(case, threads: int, rounds: int):
    """(label, shape, cpu µs, jit µs, whether the jit rule takes the op) of one case
    (label, shape, ModelBuilder, inputs)."""
    label, shape, mb, inputs = case
    opcode = onert_py.load_model(mb.to_bytes("tflite")).subgraphs[0].operations[0].opcode
    cpu, b_cpu, ex_c = _runner(mb, inputs, "cpu", None, threads)
    accepted = onert_py.infer.session(mb.to_bytes("tflite"), "jit;cpu").executors[0].backend_names[0] == "jit"
    with _rules_off():
        jit_run, b_jit, ex_j = _runner(mb, inputs, "jit;cpu", {opcode: "jit"}, threads)
    assert (b_cpu, b_jit) == ("cpu", "jit"), (b_cpu, b_jit)
    cpu()
    jit_run()
    out = mb.subgraphs[0].outputs[0]
    yc, yj = ex_c.values[out], ex_j.values[out]
    if yc.dtype.kind in "iu":
        assert np.array_equal(yc, yj), f"{label} {shape}: jit and cpu differ"
    else:
        np.testing.assert_allclose(yj, yc, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(yc).max())))
    once = statistics.median(_per_call(cpu, threads, 3))
    reps = max(3, min(500, int(2e-3 / max(once, 1e-7))))    # ~2 ms per block
    for _ in range(2):       # warm-up rounds: both backends' threads started, caches and plans made
        _per_call(cpu, threads, reps)
        _per_call(jit_run, threads, reps)
    a, b = [], []
    for _ in range(rounds):
        a += _per_call(cpu, threads, reps)
        b += _per_call(jit_run, threads, reps)
    return label, shape, statistics.median(a) * 1e6, statistics.median(b) * 1e6, accepted


def main(description: str, groups: dict[str, Callable[[], list]], rounds: int) -> None:
    """Parse --rounds/--threads/--only, print one markdown table per thread count."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--only", choices=tuple(groups))
    args = ap.parse_args()
    if not (jit.installed() and jit.load()):
        sys.exit(f"the jit backend is not available: {jit.why_not()}")
    cases = [c for name, make in groups.items() if args.only in (None, name) for c in make()]
    for threads in (int(t) for t in args.threads.split(",")):
        print(f"\n### {threads} thread{'s' if threads > 1 else ''}\n")
        print("| op | shape | cpu µs | jit µs | cpu/jit | jit accepts |")
        print("|---|---|---:|---:|---:|---|")
        for case in cases:
            label, shape, tc, tj, acc = measure(case, threads, args.rounds)
            print(f"| {label} | {shape} | {tc:.1f} | {tj:.1f} | {tc / tj:.2f} | {'yes' if acc else 'no'} |",
                  flush=True)
