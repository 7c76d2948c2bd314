"""Which executor runs a model: the `executor`, `parallel_iterations` and `inter_op_threads` options of
`infer.session` and `Interpreter` (and the CLI's --executor, --parallel-iterations, --inter-op-threads),
checked in one place so that both APIs accept and refuse the same values."""
from __future__ import annotations

import os

import numpy as np

EXECUTORS = ("linear", "dataflow")
EXECUTOR_ENV = "ONERT_PY_EXECUTOR"     # the default executor, set from outside


def default_inter_op_threads() -> int:
    return min(4, os.cpu_count() or 1)


def _positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return int(value)


def dataflow_options(executor: str | None, parallel_iterations: int = 10,
                     inter_op_threads: int | None = None) -> dict[str, int] | None:
    """None for the linear executor, else the dataflow executor's options for build_dataflow
    ({"parallel_iterations", "threads"}). executor None: ONERT_PY_EXECUTOR, else "linear";
    inter_op_threads None: min(4, cores). Bad values raise ValueError, whichever executor is chosen."""
    if executor is None:
        executor = os.environ.get(EXECUTOR_ENV, "").strip() or "linear"
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be 'linear' or 'dataflow', not {executor!r}")
    parallel_iterations = _positive_int(parallel_iterations, "parallel_iterations")
    if inter_op_threads is None:
        inter_op_threads = default_inter_op_threads()
    inter_op_threads = _positive_int(inter_op_threads, "inter_op_threads")
    if executor == "linear":
        return None
    return {"parallel_iterations": parallel_iterations, "threads": inter_op_threads}
