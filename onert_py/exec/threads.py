"""num_threads: how many threads BLAS (numpy's matrix products) and the jit backend's compiled kernels
use while a session runs, as LiteRT's `num_threads` and benchmark_model's `--num_threads`.

Without num_threads, BLAS keeps its own count and the jit kernels run on one thread: numba's default
(every core) lets one straggling worker hold up each parallel loop for a whole scheduler time slice on a
machine where other work runs (measured: 2 ms runs spiking to 240 ms), and LiteRT's own default is
one thread too. Set per run, put back after it, so that two sessions with different counts, or the caller's own numpy
code, are not affected. BLAS is reached through threadpoolctl (the jit extra installs it); numba's
count is its thread-local `set_num_threads`. Without threadpoolctl, BLAS keeps its own count (its
OPENBLAS_NUM_THREADS / OMP_NUM_THREADS) and `blas_controlled` says so.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

_controllers: list = []


def _blas_libraries() -> list:
    """threadpoolctl's controllers of the BLAS libraries loaded now (looked up once)."""
    if not _controllers:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _controllers.append(())
        else:
            _controllers.append(tuple(ThreadpoolController().select(user_api="blas").lib_controllers))
    return list(_controllers[0])


def blas_controlled() -> bool:
    """num_threads reaches BLAS (threadpoolctl is installed and found a BLAS library)."""
    return bool(_blas_libraries())


def check_num_threads(n: int | None) -> int | None:
    """None (leave every library's own count) or a positive int; -1 means None, as in LiteRT."""
    if n is None or n == -1:
        return None
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"num_threads must be an int, got {type(n).__name__}")
    if n < 1:
        raise ValueError(f"num_threads must be >= 1 (or -1 for the libraries' default), got {n}")
    return n


@contextmanager
def thread_limit(n: int | None) -> Iterator[None]:
    """Run the body with BLAS and numba limited to `n` threads (None: BLAS as it is, numba on one)."""
    if n is None:
        numba = sys.modules.get("numba")
        if numba is None:
            yield
            return
        before = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            yield
        finally:
            numba.set_num_threads(before)
        return
    libs = _blas_libraries()
    before = [lib.num_threads for lib in libs]
    numba = sys.modules.get("numba")
    numba_before = None
    if numba is not None:
        numba_before = numba.get_num_threads()
        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    for lib in libs:
        lib.set_num_threads(n)
    try:
        yield
    finally:
        for lib, k in zip(libs, before):
            lib.set_num_threads(k)
        if numba_before is not None:
            numba.set_num_threads(numba_before)
