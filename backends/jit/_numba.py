"""numba, as every jit kernel compiles with it: one decorator, so that caching, the error model and
threading are the same everywhere."""
from __future__ import annotations

from typing import Callable

import numba

prange = numba.prange


_thread_count: list[Callable[[], int]] = []


def threads() -> int:
    """numba's thread count for the calling thread (numba.get_num_threads), read straight from its
    threading layer: get_num_threads takes two locks per call (0.8 us; the 90 ops of iris_landmark
    paid 70 us per run for it, 5 % of the run at 2 threads), the layer's own getter costs 0.17 us.
    Looked up on the first call (which starts the layer, as the first parallel kernel would); numba's
    public function stays the fallback should a release move the getter."""
    if not _thread_count:
        count = numba.get_num_threads()
        from numba.np.ufunc import parallel
        getter = getattr(parallel, "_get_num_threads", None)
        _thread_count.append(getter if callable(getter) and getter() == count else numba.get_num_threads)
    return _thread_count[0]()


def kernel(fn: Callable | None = None, *, parallel: bool = False, fastmath: bool | set = False):
    """numba.njit with the backend's settings: cached on disk (`cache=True`; compiled once per type
    signature, shared by every model and session), no GIL (other Python threads go on), numpy's error
    model (x/0 gives inf or NaN, as LiteRT, instead of raising). `parallel=True` lets `prange` loops use
    numba's threads (num_threads). Float results keep IEEE order unless `fastmath` says otherwise."""
    deco = numba.njit(cache=True, nogil=True, error_model="numpy", parallel=parallel, fastmath=fastmath)
    return deco(fn) if fn is not None else deco



def compile_now(fn, *example_args) -> None:
    """Compile `fn` for the types of these arguments now (at prepare time, so that a session's
    creation, not its first run, pays for compiling; from the disk cache when it is there)."""
    fn.compile(tuple(numba.typeof(x) for x in example_args))


# Clamps that keep NaN (as np.clip): templates of generated code call them (codegen.clamp).
@kernel
def clamp(v, lo, hi):
    return lo if v < lo else (hi if v > hi else v)


@kernel
def clamp_lo(v, lo):
    return lo if v < lo else v


@kernel
def clamp_hi(v, hi):
    return hi if v > hi else v
