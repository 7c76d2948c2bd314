"""numba, as every jit kernel compiles with it: one decorator, so that caching, the error model and
threading are the same everywhere."""
from __future__ import annotations

from typing import Callable

import numba

from onert_py.exec.threads import numba_threads

prange = numba.prange


threads = numba_threads   # numba's thread count, from its threading layer's own getter (exec/threads.py)


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
