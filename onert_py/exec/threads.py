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
from typing import Callable

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


_blas_calls_cache: list = []


def _blas_calls() -> list[tuple[Callable[[], int], Callable[[int], object]]]:
    """(get, set) of each BLAS library's thread count. For OpenBLAS on its own threads (numpy's wheels)
    its C functions straight through ctypes: 0.1 us a call, where threadpoolctl's property and setter
    (its checks of which Python thread controls the library) cost 0.4 and 0.6 us, twice per run; runs
    of our sessions share the count under _blas_lock instead."""
    if not _blas_calls_cache:
        calls = []
        for lib in _blas_libraries():
            get = set_ = None
            if type(lib).__name__ == "OpenBLASController" and getattr(lib, "threading_layer", None) == "pthreads":
                symbol = getattr(lib, "_get_symbol", None)
                if callable(symbol):
                    get, set_ = symbol("openblas_get_num_threads"), symbol("openblas_set_num_threads")
            if get is None or set_ is None:
                get, set_ = (lambda lib=lib: lib.num_threads), lib.set_num_threads
            calls.append((get, set_))
        _blas_calls_cache.append(calls)
    return _blas_calls_cache[0]


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


_numba_layer: list[tuple[Callable[[], int], Callable[[int], None]]] = []


def _numba_get_set() -> tuple[Callable[[], int], Callable[[int], None]]:
    """numba's thread-count getter and setter for the calling thread, straight from its threading
    layer: get_num_threads / set_num_threads take locks and check their argument on every call (0.8 and
    ~2 us; the 90 ops of iris_landmark paid 70 us per run for the getter), the layer's own functions
    cost 0.17 us. Looked up on the first call (which starts the layer, as the first parallel kernel
    would); numba's public functions stay the fallback should a release move them. numba must be
    imported."""
    if not _numba_layer:
        numba = sys.modules["numba"]
        count = numba.get_num_threads()
        from numba.np.ufunc import parallel
        getter, setter = getattr(parallel, "_get_num_threads", None), getattr(parallel, "_set_num_threads", None)
        ok = callable(getter) and callable(setter) and getter() == count
        _numba_layer.append((getter, setter) if ok else (numba.get_num_threads, numba.set_num_threads))
    return _numba_layer[0]


def numba_threads() -> int:
    """numba's thread count for the calling thread (numba.get_num_threads, faster)."""
    return _numba_get_set()[0]()


class thread_limit:
    """`with thread_limit(n, own_pool):` runs the body with BLAS and numba limited to `n` threads (None:
    BLAS as it is, numba on one); own_pool: the run uses the jit backend's pool, and BLAS gets one
    thread (see above). A class, not a generator: it is entered around every run, and a small model's
    whole run is ~10 us (the generator form with its BLAS calls cost 6 us of it at num_threads=1).
    An instance may be entered again once exited (not while entered): sessions keep one, and what it
    looks up (numba's and BLAS's getters and setters, the counts wanted) is looked up once."""
    __slots__ = ("n", "own_pool", "numba", "numba_before", "libs", "blas_want")

    def __init__(self, n: int | None, own_pool: bool = False):
        self.n, self.own_pool = n, own_pool
        self.numba: tuple | None = None     # (get, set, count wanted), once numba is imported
        self.numba_before: int | None = None
        self.libs = _blas_calls() if n is not None else ()
        self.blas_want = 1 if own_pool else n

    def _numba_plan(self) -> tuple | None:
        numba = sys.modules.get("numba")
        if numba is None:
            return None
        get, set_ = _numba_get_set()
        self.numba = (get, set_, 1 if self.n is None else min(self.n, numba.config.NUMBA_NUM_THREADS))
        return self.numba

    def __enter__(self) -> None:
        global _blas_holders
        # numba's count is per thread (no lock needed); set (and put back) through its threading layer,
        # and only when it changes
        plan = self.numba or self._numba_plan()
        self.numba_before = None
        if plan is not None:
            before = plan[0]()
            if before != plan[2]:
                plan[1](plan[2])
                self.numba_before = before
        libs = self.libs
        if libs:
            want = self.blas_want
            with _blas_lock:
                current = [get() for get, _ in libs]
                if _blas_holders == 0:
                    _blas_before[:] = current
                _blas_holders += 1
                for (_, set_), k in zip(libs, current):
                    if k != want:
                        set_(want)

    def __exit__(self, *exc) -> None:
        global _blas_holders
        libs = self.libs
        if libs:
            with _blas_lock:
                _blas_holders -= 1
                if _blas_holders == 0:
                    for (get, set_), k in zip(libs, _blas_before):
                        if get() != k:
                            set_(k)
        if self.numba_before is not None:
            self.numba[1](self.numba_before)
