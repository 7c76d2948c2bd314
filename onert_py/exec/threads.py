"""num_threads: how many threads BLAS (numpy's matrix products) and the jit backend's compiled kernels
use while a session runs, as LiteRT's `num_threads` and benchmark_model's `--num_threads`.

Without num_threads, BLAS keeps its own count and the jit kernels run on one thread: numba's default
(every core) lets one straggling worker hold up each parallel loop for a whole scheduler time slice on a
machine where other work runs (measured: 2 ms runs spiking to 240 ms), and LiteRT's own default is
one thread too. Set per run, put back after it, so that two sessions with different counts, or the caller's own numpy
code, are not affected. BLAS's count is process-wide: runs of sessions with different counts in
several threads at once share one count (the latest run's to start), and the count from before the
first of them is put back when the last ends (one lock and a counter; see thread_limit). BLAS is reached through threadpoolctl (the jit extra installs it); numba's
count is its thread-local `set_num_threads`. Without threadpoolctl, BLAS keeps its own count (its
OPENBLAS_NUM_THREADS / OMP_NUM_THREADS) and `blas_controlled` says so.

A run with ops on a backend that has a thread pool of its own (the jit backend: numba's OpenMP
workers) gives that pool the threads and BLAS one. Both pools wait for work by spinning, and two pools
spinning on the same cores starve each other: with 2 threads on 2 cores, face_detection_full_range_sparse
(jit kernels plus a few sgemm-path convolutions) went from 3.6 to 16-38 ms per run when BLAS kept 2.
"""
from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Iterator

from onert_py.errors import ExecutionError

_controllers: list = []
# BLAS limits are process-wide: runs holding one, and the counts from before the first of them
_blas_lock = threading.Lock()
_blas_holders = 0
_blas_before: list[int] = []


class RunLock:
    """Serialises the runs of one session or Interpreter: a second thread waits for the first's run
    to end. A run re-entering its own session from the same thread (a custom op calling it) would
    overwrite the values it is computing with, so it raises instead of deadlocking."""
    __slots__ = ("_lock", "_owner")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None

    def __enter__(self) -> None:
        if not self._lock.acquire(False):
            if self._owner == threading.get_ident():
                raise ExecutionError("a session (or Interpreter) was called again from inside its own run "
                                     "(e.g. by a custom op); use another session for the inner call")
            self._lock.acquire()
        self._owner = threading.get_ident()

    def __exit__(self, *exc) -> None:
        self._owner = None
        self._lock.release()


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
def thread_limit(n: int | None, own_pool: bool = False) -> Iterator[None]:
    """Run the body with BLAS and numba limited to `n` threads (None: BLAS as it is, numba on one);
    own_pool: the run uses the jit backend's pool, and BLAS gets one thread (see above)."""
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
    global _blas_holders
    libs = _blas_libraries()
    numba = sys.modules.get("numba")
    numba_before = None
    if numba is not None:   # numba's count is per thread: no lock needed
        numba_before = numba.get_num_threads()
        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    if libs:
        with _blas_lock:
            if _blas_holders == 0:
                _blas_before[:] = [lib.num_threads for lib in libs]
            _blas_holders += 1
            for lib in libs:
                lib.set_num_threads(1 if own_pool else n)
    try:
        yield
    finally:
        if libs:
            with _blas_lock:
                _blas_holders -= 1
                if _blas_holders == 0:
                    for lib, k in zip(libs, _blas_before):
                        lib.set_num_threads(k)
        if numba_before is not None:
            numba.set_num_threads(numba_before)
