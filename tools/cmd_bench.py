"""`onert-py bench`: time a model the way LiteRT's benchmark_model and onert's onert_run do.

Prints which backends run how many ops, the threads and the executor (--executor: linear or dataflow,
docs/dataflow.md), the init (load + compile) time, the first inference, then
count/min/max/avg/std/p5/median/p95 of the timed runs in ms, and the peak RSS. The jit
backend's kernels are compiled by numba (or loaded from its disk cache, as later runs do) while the
session is created, each run once on zeros; a kernel that could not be run so compiles in the first
inference. bench measures both and says so under the line each belongs to.
`--profile` adds per-op tables (by op type, by subgraph, the costliest single ops, with their backends)
with call counts, so ops inside WHILE bodies show how often they ran, and names the ops folded at
prepare (never run, so never timed); `--trace` writes the per-op timeline as a Chrome trace
(chrome://tracing, ui.perfetto.dev). `--report` writes it all as JSON, with a row per op (backend, output
names and shapes, folded, timings when profiled) and the structured memory plan, for `onert-py view`.

On a terminal a progress line (runs, elapsed time, running average) is drawn on stderr during the timed
runs; Ctrl-C then stops them, prints the statistics of the runs completed (and writes --report / --trace)
and exits with 130, the shell's code for a SIGINT.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time
from collections import defaultdict
from typing import Any, Sequence

import numpy as np

from onert_py.compiler.compile import execution_order
from onert_py.compiler.shape_inference import infer_shapes
from onert_py.errors import OnertPyError
from onert_py.exec.threads import thread_limit
from onert_py.tools.errors import CliError
from onert_py.tools.formatting import format_table, shape_of
from onert_py.tools.inputs import prepare_inputs, run_inference
from onert_py.tools.options import (add_executor_options, add_input_options, add_model_options, backend_choice,
                                    check_distinct_files, check_writable, executor_choice, open_session)

_TOP_OPS = 10
INTERRUPTED = 130   # exit code after Ctrl-C stopped the timed runs (128 + SIGINT, as shells report it)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="time a model (latency statistics, peak RSS, per-op profile)",
                       description="Time a model like LiteRT's benchmark_model / onert's onert_run: init "
                                   "(load + compile), first inference, warmup, then latency statistics "
                                   "of the timed runs in ms, peak RSS and the memory plan.")
    add_model_options(p, "time")
    add_executor_options(p)
    add_input_options(p)
    p.add_argument("--num-runs", type=int, default=50, metavar="N",
                   help="timed runs (at least; see --min-secs) (default 50)")
    p.add_argument("--warmup-runs", type=int, default=1, metavar="N",
                   help="untimed runs after the first inference (default 1)")
    p.add_argument("--min-secs", type=float, default=0.0, metavar="S",
                   help="keep running until at least S seconds of timed runs (default 0)")
    # benchmark_model's spellings, unlisted, so that its command lines can be pasted
    for name, kind in (("num_runs", int), ("warmup_runs", int), ("min_secs", float)):
        p.add_argument(f"--{name}", dest=name, type=kind, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    p.add_argument("--profile", action="store_true",
                   help="print per-op time tables: by op type, by subgraph, the 10 costliest ops, and the "
                        "ops folded at prepare (timed runs then include the profiler's overhead)")
    p.add_argument("--profile-all", action="store_true",
                   help="as --profile, listing every op instead of the 10 costliest")
    p.add_argument("--trace", metavar="OUT.json", help="write a Chrome trace (traceEvents) of the timed runs")
    p.add_argument("--report", metavar="OUT.json",
                   help="also write the results as JSON (inputs, init, first inference, warmup, latency "
                        "statistics in ms, peak RSS, backends, threads, the memory plan per subgraph, and "
                        "\"ops\": a row per op with its backend, outputs' names and shapes, whether it was "
                        "folded at prepare, and with --profile its calls and ms per run), for scripts "
                        "comparing runs and for `onert-py view --profile`")
    p.epilog = ("On a terminal, a progress line is drawn on stderr during the timed runs (none when stderr "
                "is piped). Ctrl-C stops the timed runs: the statistics of the runs completed are printed "
                f"(and --report/--trace written) and bench exits with {INTERRUPTED}. benchmark_model's "
                "spellings --num_runs, --warmup_runs, --min_secs and --num_threads work too.")
    p.set_defaults(func=run)


def latency_stats(times_s: Sequence[float]) -> dict[str, float]:
    """count/min/max/avg/std/p5/median/p95, in ms."""
    ms = np.asarray(times_s, dtype=np.float64) * 1e3
    return {"count": float(ms.size), "min": float(ms.min()), "max": float(ms.max()),
            "avg": float(ms.mean()), "std": float(ms.std()), "p5": float(np.percentile(ms, 5)),
            "median": float(np.median(ms)), "p95": float(np.percentile(ms, 95))}


def peak_rss_mb() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 1024 / 1024 if sys.platform == "darwin" else rss / 1024  # bytes on macOS, KiB on Linux


class _Progress:
    """A progress line on stderr while the timed runs go on: runs done / asked, elapsed seconds (of
    --min-secs when given), running average. Only on a terminal (a piped stderr gets nothing), and only
    once the runs have lasted `delay` seconds, so that short benchmarks print nothing extra."""
    delay = 1.0      # seconds before the first draw
    interval = 0.1   # seconds between draws

    def __init__(self, total: int, min_secs: float):
        self.on = sys.stderr.isatty()
        self.total, self.min_secs = total, min_secs
        self.start = self.last = time.perf_counter()
        self.width = 0   # of the line drawn, to blank it

    def update(self, done: int, busy_s: float) -> None:
        """`done` runs finished, which took `busy_s` seconds in all."""
        if not self.on:
            return
        now = time.perf_counter()
        if now - self.start < self.delay or now - self.last < self.interval:
            return
        self.last = now
        elapsed = now - self.start
        frac = min(1.0, max(done / max(self.total, 1), elapsed / self.min_secs if self.min_secs > 0 else 0.0))
        bar = "#" * int(frac * 20)
        secs = f"{elapsed:.1f}/{self.min_secs:g} s" if self.min_secs > 0 else f"{elapsed:.1f} s"
        line = f"[{bar:<20}] {done}/{self.total} runs  {secs}  avg {busy_s / max(done, 1) * 1e3:.3f} ms"
        sys.stdout.flush()   # what bench printed so far comes first when both go to the terminal
        sys.stderr.write("\r" + line.ljust(self.width))
        sys.stderr.flush()
        self.width = len(line)

    def close(self) -> None:
        if self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()
            self.width = 0


class _RunProfile:
    """Per-op time of each timed run, from the profile's counters (which only add up): each op's
    min and max time in one run, and a snapshot of the counters at the end of the last completed run,
    to go back to when Ctrl-C stops a run halfway."""

    def __init__(self, prof: Any):
        self.prof = prof
        self.runs = 0
        self.time: dict[tuple[int, int], float] = {}
        self.calls: dict[tuple[int, int], int] = {}
        self.min: dict[tuple[int, int], float] = {}
        self.max: dict[tuple[int, int], float] = {}
        self.trace_len = 0

    def run_done(self) -> None:
        prof = self.prof
        for key, total in prof.op_time.items():
            t = total - self.time.get(key, 0.0)
            if key not in self.min:   # first called in this run: 0 in the runs before
                self.min[key] = t if self.runs == 0 else 0.0
                self.max[key] = t
            else:
                self.min[key] = min(self.min[key], t)
                self.max[key] = max(self.max[key], t)
        self.time, self.calls = dict(prof.op_time), dict(prof.op_calls)
        self.trace_len = len(prof.trace) if prof.trace is not None else 0
        self.runs += 1

    def restore(self) -> None:
        """The counters as the last completed run left them."""
        prof = self.prof
        prof.op_time.clear()
        prof.op_time.update(self.time)
        prof.op_calls.clear()
        prof.op_calls.update(self.calls)
        if prof.trace is not None:
            del prof.trace[self.trace_len:]


def memory_plan_summary(sess) -> str:
    """One line on the executors' arenas (onert_py/exec/memory_plan.py)."""
    plans = [ex.arena_plan for ex in sess.executors]
    n = sum(len(p.offsets) for p in plans)
    mb = 1 << 20
    return (f"memory plan: {n} tensor(s) in arenas of {sum(p.size for p in plans) / mb:.1f} MB "
            f"({sum(p.unshared for p in plans) / mb:.1f} MB unshared)")


def memory_plan(sess) -> dict[str, Any]:
    """The executors' arena plans (onert_py/exec/memory_plan.py) as data: per subgraph the arena's bytes,
    the tensors planned in it (index, name, shape, bytes, offset, and the ops writing and last reading
    it), what they would take each in its own buffer (unshared_bytes, 64-byte aligned) and the ratio of
    the two; then the totals. `enabled` is false with ONERT_PY_ARENA=0 or preserve_all_tensors."""
    opts = sess.runtime.options
    subgraphs = []
    for ex in sess.executors:
        plan, sg = ex.arena_plan, ex.subgraph
        tensors = []
        for t, offset in sorted(plan.offsets.items(), key=lambda kv: (kv[1], kv[0])):
            shape = plan.shapes[t]
            first, last = plan.intervals[t]
            tensors.append({"index": t, "name": sg.tensors[t].name, "shape": list(shape),
                            "bytes": int(np.prod(shape, dtype=np.int64)) * sg.tensors[t].dtype.itemsize,
                            "offset": offset, "written_by": ex.operations[first].index,
                            "last_read_by": ex.operations[last].index})
        subgraphs.append({"subgraph": ex.index, **_plan_totals(plan.size, len(plan.offsets), plan.unshared),
                          "tensors": tensors})
    totals = _plan_totals(sum(p["arena_bytes"] for p in subgraphs), sum(p["planned_tensors"] for p in subgraphs),
                          sum(p["unshared_bytes"] for p in subgraphs))
    return {"enabled": bool(opts.arena and not opts.preserve_all_tensors), **totals, "subgraphs": subgraphs}


def _plan_totals(arena: int, planned: int, unshared: int) -> dict[str, Any]:
    return {"arena_bytes": arena, "planned_tensors": planned, "unshared_bytes": unshared,
            "saved_bytes": unshared - arena, "reuse_ratio": unshared / arena if arena else None}


def folded_ops(sess) -> list[tuple[int, int, str]]:
    """(subgraph, op, type) of the ops computed once at prepare (the compiler folds ops whose inputs
    are all constants, e.g. DEQUANTIZE of weights, and initial values of variables): they are not in
    the executors' op lists, so they never run and the profile has no time for them."""
    out = []
    for ex in sess.executors:
        ran = {op.index for op in ex.operations} | set(fused_into(ex))
        out += [(ex.index, op.index, op.kernel_name) for op in ex.subgraph.operations if op.index not in ran]
    return out


def fused_into(ex) -> dict[int, int]:
    """op index -> the index of the op whose kernel computes it (elementwise ops the compiler fused
    into the op before them, paddings folded into the op reading them: they have no run, and no time,
    of their own)."""
    return {f: op.index for op in ex.operations for f in (*op.prologue, *op.fused)}


def fused_line(sess) -> str | None:
    """"43 ops fused into the kernels of the ops beside them (timed with them): PRELU×23, ADD×20", and
    a line for the ops run inside compiled segments."""
    names = {(sg.index, op.index): op.kernel_name for sg in sess.model.subgraphs for op in sg.operations}
    fused = [names[ex.index, f] for ex in sess.executors for op in ex.operations if not op.segment
             for f in (*op.prologue, *op.fused)]
    segments = [op for ex in sess.executors for op in ex.operations if op.segment]
    inside = [names[ex.index, i] for ex in sess.executors for op in ex.operations if op.segment
              for i in (op.index, *op.fused)]
    lines = [_ops_line(fused, "fused into the kernels of the ops beside them (timed with them)"),
             _ops_line(inside, f"run inside {len(segments)} compiled segment(s) of the jit backend, timed as "
                               f"{SEGMENT} rows (ONERT_PY_JIT_SEGMENTS=0 times them op by op)")]
    return "\n".join(line for line in lines if line) or None


def folded_line(folded: Sequence[tuple[int, int, str]]) -> str | None:
    """"74 ops folded at prepare (not timed): DEQUANTIZE×74", or None when there are none."""
    return _ops_line([name for _, _, name in folded], "folded at prepare (not timed)")


def _ops_line(names: Sequence[str], what: str) -> str | None:
    """"N ops <what>: TYPE×n, ..." (most frequent first), or None for no ops."""
    if not names:
        return None
    by_type: dict[str, int] = defaultdict(int)
    for name in names:
        by_type[name] += 1
    kinds = ", ".join(f"{name}×{n}" for name, n in sorted(by_type.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{len(names)} op{'' if len(names) == 1 else 's'} {what}: {kinds}"


def _tensor_shapes(sess, input_shapes: Sequence[Sequence[int]]) -> dict[int, list]:
    """Per subgraph, the shape of each tensor for these inputs, from shape inference (-1 where a dim
    depends on values); the model's declared shapes where inference did not reach or failed."""
    try:
        result = infer_shapes(sess.model, sess.subgraph_index, [list(s) for s in input_shapes])
        inferred = {k: sub.shapes for k, sub in result.subgraphs.items()}
    except (OnertPyError, ValueError):
        inferred = {}
    out = {}
    for sg in sess.model.subgraphs:
        shapes = inferred.get(sg.index)
        out[sg.index] = [list(shapes[t.index]) if shapes is not None and shapes[t.index] is not None
                         else shape_of(t) for t in sg.tensors]
    return out


def op_rows(sess, input_shapes: Sequence[Sequence[int]], timing: _RunProfile | None) -> list[dict[str, Any]]:
    """The report's "ops": a row per op of every subgraph in execution order, with its backend (None
    when folded), outputs' names and shapes, and with `timing` (a profiled bench) its calls over the
    timed runs and its time per run in ms: average, min and max over the runs, and the total. Timings
    are None when not profiled and for folded ops; count is 0 then."""
    shapes = _tensor_shapes(sess, input_shapes)
    rows = []
    for ex in sess.executors:
        sg = ex.subgraph
        ran = {op.index: name for op, name in zip(ex.operations, ex.backend_names)}
        into = fused_into(ex)
        for op in execution_order(sg):
            key = (ex.index, op.index)
            host = into.get(op.index)
            folded = op.index not in ran and host is None
            row: dict[str, Any] = {
                "subgraph": ex.index, "index": op.index, "op": op.kernel_name,
                "backend": ran.get(op.index if host is None else host),
                "outputs": [{"name": sg.tensors[o].name, "shape": shapes[ex.index][o]} for o in op.outputs if o >= 0],
                "folded": folded, "fused_into": host,
                "count": 0, "avg_ms": None, "min_ms": None, "max_ms": None, "total_ms": None}
            if timing is not None and timing.runs and not folded and host is None:
                total = timing.time.get(key, 0.0)
                row.update(count=timing.calls.get(key, 0), avg_ms=total / timing.runs * 1e3,
                           min_ms=timing.min.get(key, 0.0) * 1e3, max_ms=timing.max.get(key, 0.0) * 1e3,
                           total_ms=total * 1e3)
            rows.append(row)
    return rows


# the op type the profile gives a compiled segment (a run of ops the jit backend computes at once)
SEGMENT = "(segment)"


def _op_names(sess) -> dict[tuple[int, int], str]:
    return {(ex.index, op.index): SEGMENT if op.segment else op.kernel_name
            for ex in sess.executors for op in ex.operations}


def _op_backends(sess) -> dict[tuple[int, int], str]:
    """(subgraph, op) -> the backend that runs it (ops folded at compile time are not run)."""
    return {(ex.index, op.index): name for ex in sess.executors
            for op, name in zip(ex.operations, ex.backend_names)}


def backend_counts(sess, order: Sequence[str] = ()) -> dict[str, int]:
    """Ops per backend over every executor: the backends of `order` first (0 when one took nothing:
    worth seeing for jit), then the others (controlflow, custom) that ran some."""
    counts = dict.fromkeys(order, 0)
    for name in _op_backends(sess).values():
        counts[name] = counts.get(name, 0) + 1
    return counts


def backends_line(counts: dict[str, int]) -> str:
    """"backends: jit 23 ops, cpu 41 ops, controlflow 1 op"."""
    return "backends: " + (", ".join(f"{name} {n} op{'' if n == 1 else 's'}" for name, n in counts.items())
                           or "no ops")


def thread_counts(num_threads: int | None, jit: bool) -> dict[str, int | None]:
    """The threads BLAS and numba (jit kernels) run with under `num_threads`, read back from the
    libraries (None: not known, e.g. no threadpoolctl to ask BLAS)."""
    counts: dict[str, int | None] = {"blas": None}
    with thread_limit(num_threads, own_pool=jit):
        try:
            from threadpoolctl import threadpool_info
        except ImportError:
            pass
        else:
            counts["blas"] = max((int(i["num_threads"]) for i in threadpool_info() if i.get("user_api") == "blas"),
                                 default=None)
        numba = sys.modules.get("numba")
        if jit and numba is not None:
            counts["jit"] = int(numba.get_num_threads())
    return counts


def threads_line(num_threads: int | None, counts: dict[str, int | None]) -> str:
    """"num_threads: 2 (BLAS 2, jit 2)" / "num_threads: -1 (libraries' default: BLAS 8, jit 8)"."""
    parts = ", ".join(f"{'BLAS' if k == 'blas' else k} {'?' if v is None else v}" for k, v in counts.items())
    if num_threads is None:
        return f"num_threads: -1 (libraries' default: {parts})"
    note = "; BLAS keeps its own count: threadpoolctl is not installed" if counts.get("blas") is None else ""
    return f"num_threads: {num_threads} ({parts}{note})"


class JitWatch:
    """What numba did during a block: functions compiled (numba's "numba:compile" events, nested
    callees included), compiled functions loaded from its disk cache (the jit modules' dispatchers'
    cache hits), and the time spent holding numba's compiler lock, which covers both. Inactive (all
    zero) when numba is not imported, i.e. when no jit backend was asked for."""

    def __init__(self) -> None:
        self.compiled = self.cached = self.loaded = 0   # cached: compiled ones numba saved to disk
        self.seconds = 0.0
        self._numba = "numba" in sys.modules

    def __enter__(self) -> "JitWatch":
        if self._numba:
            from numba.core import event
            self._event = event
            self._timer, self._compiles = event.TimingListener(), event.RecordingListener()
            self._hits = _cache_hits()
            event.register("numba:compiler_lock", self._timer)
            event.register("numba:compile", self._compiles)
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self._numba:
            return
        self._event.unregister("numba:compiler_lock", self._timer)
        self._event.unregister("numba:compile", self._compiles)
        self.seconds = self._timer.duration if self._timer.done else 0.0
        compiled = [e.data["dispatcher"] for _, e in self._compiles.buffer
                    if e.is_start and isinstance(e.data, dict) and "dispatcher" in e.data]
        self.compiled = len(compiled)
        self.cached = sum(type(getattr(d, "_cache", None)).__name__ not in ("NullCache", "NoneType")
                          for d in compiled)
        self.loaded = max(_cache_hits() - self._hits, 0)

    def note(self, phase: str) -> str | None:
        """A line for under the timing it is part of, or None when numba did nothing."""
        if not (self.compiled or self.loaded):
            return None
        ms = f"{self.seconds * 1e3:.1f} ms"
        if self.compiled:
            what = f"compiling {self.compiled} function(s)"
            if self.loaded:
                what += f" and loading {self.loaded} from numba's disk cache"
            if self.cached == self.compiled:
                what += " (cached on disk: later runs load them)"
            elif self.cached:
                what += f" ({self.cached} cached on disk for later runs)"
            return f"  jit: {ms} of the {phase} went to {what}"
        return f"  jit: {ms} of the {phase} went to loading {self.loaded} compiled function(s) from numba's disk cache"

    def as_dict(self) -> dict[str, Any]:
        return {"compiled": self.compiled, "cached_on_disk": self.cached, "loaded_from_cache": self.loaded,
                "ms": self.seconds * 1e3}


def _cache_hits() -> int:
    """Disk-cache loads so far of the numba dispatchers in onert-py's modules: the jit backend's, and
    the modules it generates (onert_py_jit_<hash>, jit/codegen.py)."""
    from numba.core.dispatcher import Dispatcher
    hits = 0
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith("onert_py"):
            continue
        for obj in list(vars(module).values()):
            if isinstance(obj, Dispatcher):
                hits += sum(obj._cache_hits.values())
    return hits


def _short(name: str, width: int = 48) -> str:
    """A tensor name cut to `width` characters, keeping its end (TF names end with what tells ops apart)."""
    return name if len(name) <= width else "…" + name[-(width - 1):]


def _first_output(sess) -> dict[tuple[int, int], str]:
    out = {}
    for ex in sess.executors:
        sg = ex.subgraph
        for op in sg.operations:
            outs = [o for o in op.outputs if o >= 0]
            out[(ex.index, op.index)] = _short(sg.tensors[outs[0]].name) if outs and sg.tensors[outs[0]].name else "-"
    return out


def profile_tables(sess, runs: int, every_op: bool = False) -> str:
    """Per-op-type, per-subgraph and top single-op tables from the session's profile counters (every op
    with `every_op`), and a line naming the ops folded at prepare, which the profile never sees."""
    prof = sess.profile
    names = _op_names(sess)
    backends = _op_backends(sess)
    total = sum(prof.op_time.values())
    folded = folded_line(folded_ops(sess))
    fused = fused_line(sess)
    if total <= 0:
        return "\n".join(["profile: no operators ran", *([folded] if folded else [])])
    n = max(runs, 1)

    def pct(t: float) -> str:
        return f"{100 * t / total:.1f}"

    by_type: dict[str, list] = defaultdict(lambda: [0.0, 0, 0])  # time, calls, distinct ops
    by_sg: dict[int, list] = defaultdict(lambda: [0.0, 0, 0])
    type_backends: dict[str, dict[str, None]] = defaultdict(dict)  # an ordered set per op type
    for key, t in prof.op_time.items():
        calls = prof.op_calls[key]
        type_backends[names.get(key, "?")][backends.get(key, "?")] = None
        for acc in (by_type[names.get(key, "?")], by_sg[key[0]]):
            acc[0] += t
            acc[1] += calls
            acc[2] += 1
    # Control-flow ops' time includes the subgraphs they ran; the tables say so instead of
    # subtracting, so that "by subgraph" still adds up for straight-line models.
    out = [f"per-op profile over {runs} run(s); times are per run; total op time {total / n * 1e3:.3f} ms "
           "(WHILE/IF/CALL rows include the ops of the subgraphs they run)", ""]
    # the backend column last: the numeric columns keep their places for scripts reading them
    rows = [[name, f"{t / n * 1e3:.3f}", pct(t), f"{calls / n:g}", str(ops), f"{t / calls * 1e6:.1f}",
             ",".join(sorted(type_backends[name]))]
            for name, (t, calls, ops) in sorted(by_type.items(), key=lambda kv: -kv[1][0])]
    out.append("by op type")
    out.append(format_table(["op type", "ms", "%", "calls/run", "ops", "µs/call", "backend"], rows))
    rows = [[str(sg), f"{t / n * 1e3:.3f}", pct(t), f"{calls / n:g}", str(ops)]
            for sg, (t, calls, ops) in sorted(by_sg.items())]
    out += ["", "by subgraph"]
    out.append(format_table(["subgraph", "ms", "%", "calls/run", "ops"], rows))
    top = sorted(prof.op_time.items(), key=lambda kv: -kv[1])
    if not every_op:
        top = top[:_TOP_OPS]
    rows = [[str(sg), str(op), names.get((sg, op), "?"), f"{t / n * 1e3:.3f}", pct(t),
             f"{prof.op_calls[(sg, op)] / n:g}", backends.get((sg, op), "?")] for (sg, op), t in top]
    header = ["subgraph", "op", "type", "ms", "%", "calls/run", "backend"]
    if every_op:   # the whole list needs names to be read; the top table keeps backend last for scripts
        first_output = _first_output(sess)
        for row, ((sg, op), _) in zip(rows, top):
            row.append(first_output.get((sg, op), "-"))
        header.append("output")
    out += ["", f"all {len(rows)} operators run" if every_op else f"top {len(rows)} operators"]
    out.append(format_table(header, rows))
    if fused:
        out += ["", fused]
    if folded:
        out += ["", folded]
    loops = sess.runtime.compiled_loops
    if loops:   # the controlflow kernel times each step, so a loop the jit backend compiled whole runs op by op
        out += ["", f"{len(loops)} WHILE loop(s) the jit backend compiles whole ran op by op while profiled: their "
                "times are the per-op path's, not the compiled loop's"]
    copied = prof.total_bytes_copied()
    if copied:
        out += ["", f"control flow copied {copied / n:,.0f} bytes per run"]
    kept = prof.total_accumulator_bytes()
    if kept:
        out += ["", f"gradient accumulators kept {kept / n:,.0f} bytes per run"]
    return "\n".join(out)


def chrome_trace(events: Sequence[tuple], runs: Sequence[tuple[float, float]], t0: float) -> dict[str, Any]:
    """Chrome trace format: complete ("X") events, ts/dur in µs from the first timed run."""
    pid, tid = os.getpid(), 1
    trace = [{"name": "process_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": "onert-py"}}]
    for k, (start, dur) in enumerate(runs):
        trace.append({"name": f"run {k}", "cat": "run", "ph": "X", "ts": (start - t0) * 1e6,
                      "dur": dur * 1e6, "pid": pid, "tid": tid, "args": {"run": k}})
    for name, sg, op, start, dur in events:
        trace.append({"name": name, "cat": "op", "ph": "X", "ts": (start - t0) * 1e6, "dur": dur * 1e6,
                      "pid": pid, "tid": tid, "args": {"subgraph": sg, "op": op}})
    return {"traceEvents": trace, "displayTimeUnit": "ms"}


def _check_args(args: argparse.Namespace) -> None:
    if args.num_runs < 1:
        raise CliError("--num-runs must be >= 1")
    if args.warmup_runs < 0:
        raise CliError("--warmup-runs must be >= 0")
    if not math.isfinite(args.min_secs) or args.min_secs < 0:
        raise CliError(f"--min-secs must be a finite number >= 0, not {args.min_secs:g}")
    check_writable(args.trace, "--trace")  # before a long run, not after
    check_writable(args.report, "--report")
    check_distinct_files(trace=args.trace, report=args.report)


def _write_json(path: str, data: Any, **kwargs: Any) -> None:
    try:
        with open(path, "w") as f:
            json.dump(data, f, **kwargs)
    except OSError as e:
        raise CliError(f"cannot write {path}: {e}") from None


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    profile = args.profile or args.profile_all
    choice = backend_choice(args)   # first: it imports numba when jit is asked for, so JitWatch sees it
    executor = executor_choice(args)
    t_init = time.perf_counter()
    with JitWatch() as jit_init:
        sess = open_session(args)
    init_s = time.perf_counter() - t_init
    inputs = prepare_inputs(sess, args)

    print(f"model: {args.model}")
    for k in range(len(inputs.names)):
        print(inputs.line(k))
    counts = backend_counts(sess, choice.names)
    threads = thread_counts(choice.num_threads, counts.get("jit", 0) > 0)
    print(backends_line(counts))
    print(threads_line(choice.num_threads, threads))
    print(executor.describe())
    print(f"init: {init_s * 1e3:.3f} ms")
    note = jit_init.note("init")
    if note:
        print(note)
    report: dict[str, Any] = {
        "model": args.model, "signature": args.signature, "seed": args.seed,
        "inputs": [{"name": n, "shape": list(np.shape(a)), "dtype": str(np.asarray(a).dtype), "source": src}
                   for n, a, src in zip(inputs.names, inputs.arrays, inputs.sources)],
        "backend_order": list(choice.names), "op_backend": choice.forced, "backends": counts,
        "num_threads": -1 if choice.num_threads is None else choice.num_threads, "threads": threads,
        "executor": executor.session_options(),
        "init_ms": init_s * 1e3}
    t = time.perf_counter()
    with JitWatch() as jit_first:
        run_inference(sess, inputs)  # the only run that can fail on random values: it gives the hint
    inputs = inputs.arrays
    report["first_inference_ms"] = (time.perf_counter() - t) * 1e3
    report["jit_compile"] = {"init": jit_init.as_dict(), "first_inference": jit_first.as_dict()}
    print(f"first inference: {report['first_inference_ms']:.3f} ms")
    note = jit_first.note("first inference")
    if note:
        print(note)
    report["warmup_runs"], report["warmup_avg_ms"] = args.warmup_runs, None
    if args.warmup_runs:
        t = time.perf_counter()
        for _ in range(args.warmup_runs):
            sess.infer(inputs)
        report["warmup_avg_ms"] = (time.perf_counter() - t) / args.warmup_runs * 1e3
        print(f"warmup: {args.warmup_runs} run(s), avg {report['warmup_avg_ms']:.3f} ms")

    prof = sess.profile
    profiled = bool(profile or args.trace)
    timing = _RunProfile(prof) if profiled else None
    if profiled:
        prof.reset()
        prof.trace = [] if args.trace else None
        prof.enabled = True
    clock = time.perf_counter
    spans: list[tuple[float, float]] = []   # (start, duration) of each completed timed run
    busy = 0.0
    bar = _Progress(args.num_runs, args.min_secs)
    interrupted = False
    began = clock()
    try:
        while len(spans) < args.num_runs or clock() - began < args.min_secs:
            start = clock()
            sess.infer(inputs)
            dur = clock() - start
            spans.append((start, dur))
            if timing is not None:
                timing.run_done()
            busy += dur
            bar.update(len(spans), busy)
    except KeyboardInterrupt:   # Ctrl-C: what the completed runs measured is still worth printing
        interrupted = True
    finally:
        bar.close()
        prof.enabled = False
    if timing is not None:
        timing.restore()   # drop what a run stopped halfway added to the counters
        del spans[timing.runs:]
    times = [dur for _, dur in spans]

    note = " (with per-op profiling)" if profiled else ""
    if interrupted:
        print(f"interrupted (Ctrl-C) after {len(times)} of {args.num_runs} timed run(s)"
              + (": statistics of those" if times else ": no statistics"))
    s = latency_stats(times) if times else None
    if s is not None:
        print(f"inference{note}: count={len(times)} min={s['min']:.3f} max={s['max']:.3f} avg={s['avg']:.3f} "
              f"std={s['std']:.3f} p5={s['p5']:.3f} median={s['median']:.3f} p95={s['p95']:.3f} (ms)")
    rss = peak_rss_mb()
    print(f"peak RSS: {rss:.1f} MB")
    print(memory_plan_summary(sess))
    if args.report:
        report.update(profiled=profiled, interrupted=interrupted,
                      latency_ms=None if s is None else {**s, "count": len(times)}, peak_rss_mb=rss,
                      memory_plan=memory_plan(sess),
                      ops=op_rows(sess, [np.shape(a) for a in inputs], timing),
                      ops_units="count: calls over the timed runs; avg_ms, min_ms, max_ms: the op's time in one "
                                "run (all its calls), averaged, least and most over the runs; total_ms: over "
                                "all the runs; null when not profiled, for ops folded at prepare and for ops "
                                "fused into another's kernel (fused_into: that op's index, timed with it)",
                      profile_runs=len(times) if profiled else 0)
        _write_json(args.report, report, indent=1)
    if profile:
        print()
        print(profile_tables(sess, len(times), every_op=args.profile_all))
    if args.trace and spans:
        data = chrome_trace(prof.trace or [], spans, spans[0][0])
        _write_json(args.trace, data)
        print(f"trace: {len(data['traceEvents']) - 1} events written to {args.trace}")
    elif args.trace:
        print(f"trace: no timed run completed; {args.trace} not written")
    prof.trace = None
    if args.report:
        print(f"report written to {args.report}")
    return INTERRUPTED if interrupted else 0
