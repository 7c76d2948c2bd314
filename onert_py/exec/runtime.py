"""State shared by every executor of one session: options, resources, CALL_ONCE flags, profile."""
from __future__ import annotations

import math
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onert_py.errors import RunTimeoutError
from onert_py.exec.threads import thread_limit


@dataclass
class RuntimeOptions:
    max_while_iterations: int | None = None   # None: unbounded
    controlflow_copy: str = "reference"       # "reference" (copy only where needed) or "all" (seed policy)
    preserve_all_tensors: bool = False        # keep every intermediate after a run (for inspection)
    num_threads: int | None = None            # BLAS and jit threads while running (None: libraries' own)
    timeout: float | None = None              # wall-clock seconds per run, checked in WHILE loops (None: none)
    # Bytes any one allocation onert-py sizes beforehand may take (exec/budget.py); sessions resolve
    # it (default 4 x model file + 1 GiB), a bare RuntimeOptions has none (math.inf).
    max_memory: int | float = math.inf
    # Share memory between planned tensors (exec/memory_plan.py); ONERT_PY_ARENA=0 turns it off to
    # compare or to rule it out when chasing a wrong result.
    arena: bool = field(default_factory=lambda: os.environ.get("ONERT_PY_ARENA", "1") != "0")
    # Fuse elementwise ops into the kernels of the ops they follow (compiler: fuse_epilogues, which also
    # leaves them apart under preserve_all_tensors); off for the dataflow executor, for tools that read
    # every op's outputs, and with ONERT_PY_FUSE=0 (to compare).
    fuse_ops: bool = field(default_factory=lambda: os.environ.get("ONERT_PY_FUSE", "1") != "0")


@dataclass
class Profile:
    """Counters filled while `enabled`; control-flow byte counts are always kept."""
    enabled: bool = False
    op_time: dict[tuple[int, int], float] = field(default_factory=lambda: defaultdict(float))
    op_calls: dict[tuple[int, int], int] = field(default_factory=lambda: defaultdict(int))
    bytes_copied: dict[tuple[int, int], int] = field(default_factory=lambda: defaultdict(int))
    iterations: dict[tuple[int, int], int] = field(default_factory=lambda: defaultdict(int))
    # bytes pushed on accumulators (the per-iteration values a WHILE's gradient keeps), per pushing op
    accumulator_bytes: dict[tuple[int, int], int] = field(default_factory=lambda: defaultdict(int))
    trace: list[tuple[str, int, int, float, float]] | None = None  # (name, subgraph, op, start, dur)

    def reset(self) -> None:
        self.op_time.clear()
        self.op_calls.clear()
        self.bytes_copied.clear()
        self.iterations.clear()
        self.accumulator_bytes.clear()
        if self.trace is not None:
            self.trace.clear()

    def total_bytes_copied(self) -> int:
        return sum(self.bytes_copied.values())

    def total_accumulator_bytes(self) -> int:
        return sum(self.accumulator_bytes.values())


class RuntimeState:
    def __init__(self, options: RuntimeOptions | None = None):
        self.options = options or RuntimeOptions()
        self.profile = Profile()
        self.call_once_done: set[int] = set()       # init subgraphs already run
        self.resources: dict[Any, Any] = {}          # variables and hash tables by handle key
        self.clock = time.perf_counter
        self.backends: tuple[str, ...] = ("cpu",)    # the compute backends ops were given to, in order
        self.op_backend: dict[str, str] = {}        # backends forced per op type or "SUBGRAPH:INDEX"
        self.compiled_loops: set[tuple[int, int]] = set()   # (subgraph, op) of loops run compiled
        # some op runs on a backend with a thread pool of its own (Backend.own_threads): BLAS then
        # stays on one thread while a run uses several (threads.thread_limit)
        self.own_thread_pool = False
        self.deadline = math.inf    # clock() value the current run must end by (start_run sets it)
        self._run_threads: thread_limit | None = None

    def run_threads(self) -> thread_limit:
        """The thread limit a run enters (threads.thread_limit) for the current options: one instance
        kept while they hold, as it looks the libraries' getters and setters up once (0.7 of the 3.4 us
        it cost a small model's run). Runs of one session never overlap (RunLock)."""
        tl = self._run_threads
        if tl is None or tl.n != self.options.num_threads or tl.own_pool != self.own_thread_pool:
            tl = self._run_threads = thread_limit(self.options.num_threads, self.own_thread_pool)
        return tl

    def start_run(self) -> None:
        """Called by the session and the Interpreter as a run starts: the deadline of its timeout."""
        t = self.options.timeout
        self.deadline = math.inf if t is None else self.clock() + t

    def ticker(self, what: str) -> "Ticker | None":
        """A WHILE run's deadline check (see Ticker), or None when the run has no deadline."""
        if self.deadline == math.inf:
            return None
        return Ticker(self, what)

    def held_arrays(self) -> list:
        """Arrays the runtime keeps across runs (variable values): outputs sharing them are copied."""
        return [x for x in self.resources.values() if isinstance(x, np.ndarray)]

    def reset_variables(self) -> None:
        """Forget variable and table contents (not their handles) so CALL_ONCE initialisers run again."""
        ids = self.resources.get("__ids__")
        self.resources.clear()
        if ids is not None:
            self.resources["__ids__"] = ids
        self.call_once_done.clear()


def check_timeout(timeout: float | None) -> float | None:
    """None (no limit) or a positive number of seconds."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds (or None), got {timeout!r}")
    return float(timeout)


class Ticker:
    """The deadline check of one WHILE run. Loops call it at iteration counts it chooses:
    `tick(count, bound)` raises RunTimeoutError once the run's deadline has passed, else returns the
    next count to call it at (never past `bound`, the iteration limit, when that is >= 0). The gap
    starts at one iteration, doubles while checks come less than a millisecond apart and halves when
    they come more than 4 ms apart (a body that slows down, a tensor growing per iteration), so a heavy
    body is checked every iteration and a scalar one every few thousand: the clock is read about once
    a millisecond, and a loop overshoots its deadline by about that much (or by one iteration)."""
    MAX_GAP = 1 << 24
    __slots__ = ("runtime", "what", "gap", "last")

    def __init__(self, runtime: RuntimeState, what: str):
        self.runtime, self.what = runtime, what
        self.gap = 1
        self.last = runtime.clock()

    def __call__(self, count: int, bound: int = -1) -> int:
        now = self.runtime.clock()
        if now > self.runtime.deadline:
            raise RunTimeoutError(f"{self.what} stopped after {count} iterations: the run took longer than "
                                  f"timeout={self.runtime.options.timeout:g} s")
        elapsed = now - self.last
        if elapsed < 1e-3:
            if self.gap < self.MAX_GAP:
                self.gap *= 2
        elif elapsed > 4e-3 and self.gap > 1:
            self.gap //= 2
        self.last = now
        nxt = count + self.gap
        return bound if 0 <= bound < nxt else nxt
