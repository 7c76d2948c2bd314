"""State shared by every executor of one session: options, resources, CALL_ONCE flags, profile."""
from __future__ import annotations

import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class RuntimeOptions:
    max_while_iterations: int | None = None   # None: unbounded
    controlflow_copy: str = "reference"       # "reference" (copy only where needed) or "all" (seed policy)
    preserve_all_tensors: bool = False        # keep every intermediate after a run (for inspection)
    num_threads: int | None = None            # BLAS and jit threads while running (None: libraries' own)
    # Share memory between planned tensors (exec/memory_plan.py); ONERT_PY_ARENA=0 turns it off to
    # compare or to rule it out when chasing a wrong result.
    arena: bool = field(default_factory=lambda: os.environ.get("ONERT_PY_ARENA", "1") != "0")


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
