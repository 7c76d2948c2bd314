"""The jit backend: kernels compiled with numba, chosen per op as onert chooses its backends.

Optional (`pip install "onert-py[jit]"`). Nothing here imports numba until a session asks for the
backend (`load()`); without numba, `installed()` is False, the default backends are "cpu" and nothing is
said. The kernels sit in family modules beside the cpu ones (jit/conv.py beside cpu/conv.py) and share
the cpu modules' helpers for op logic (geometry, options, quantization parameters); each registers on
`JIT` with `accepts(op, subgraph)` saying which ops of its kind it takes (types, options, static shapes),
so that "jit;cpu" leaves the others to cpu.

Compiled functions are cached on disk by numba (`cache=True`: beside the modules, or in numba's user
cache directory when that is read-only, or NUMBA_CACHE_DIR) and are generic over shapes: a new model
compiles nothing new unless it brings new types or array ranks.
"""
from __future__ import annotations

import importlib
import importlib.util
import os

_FAMILIES = ("elementwise", "shape", "array", "conv", "pool", "matmul", "image", "activations", "reduce",
             "indexing")
_state: dict[str, object] = {}


def installed() -> bool:
    """numba is installed (looked up, not imported: cheap)."""
    return importlib.util.find_spec("numba") is not None


def load() -> bool:
    """Import numba and register the jit kernels (once). False when numba cannot be imported."""
    if "loaded" in _state:
        return bool(_state["loaded"])
    # numba's OpenMP workers wait for the next parallel loop by spinning, then sleep. GNU OpenMP's
    # default spin (300,000 rounds, ~8 ms here) holds a core long after a run has ended; sleeping at once
    # (PASSIVE alone) makes every parallel loop pay ~60 us to wake them, more than a mediapipe-sized op
    # gains from a second thread. 10,000 rounds (~0.3 ms measured on the 2-core VM) keeps them awake
    # from one op of a run to the next and lets them sleep soon after it. BLAS keeps one thread
    # while they run (exec/threads.py). Read when numba starts its threads.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("GOMP_SPINCOUNT", "10000")
    try:
        import numba  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any failure to import means no jit backend
        _state["loaded"], _state["why"] = False, f"{type(e).__name__}: {e}"
        return False
    for family in _FAMILIES:
        if importlib.util.find_spec(f"{__name__}.{family}") is not None:
            importlib.import_module(f"{__name__}.{family}")
    from onert_py.backends.jit.segment import compile_segments
    from onert_py.backends.registry import JIT
    JIT.compile_segments = compile_segments
    _state["loaded"] = True
    return True


def why_not() -> str:
    """Why load() failed (the import error), for messages."""
    return str(_state.get("why", "numba is not installed"))
