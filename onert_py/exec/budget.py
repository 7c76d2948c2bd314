"""The session's memory budget (`max_memory`): what it is by default, how it is given, and the check made
before allocating something whose size a model file or an input's values decide.

The budget bounds each allocation onert-py can size before making it (a constant, a declared tensor, a
subgraph's arena, every shape shape inference derives at prepare, an output whose shape comes from input
values, checked right before the op runs), and what a session holds for its whole life: the arenas of
all its subgraphs plus its constants (check_total). It is not the process's total (temporaries inside a
kernel are not counted): a hostile file or input gets a ResourceError naming the op, the tensor and its
size instead of exhausting memory.
"""
from __future__ import annotations

import math
import os
import re
from typing import Any, Mapping, Sequence

import numpy as np

from onert_py.errors import ResourceError

GIB = 1 << 30
UNLIMITED = math.inf
ENV = "ONERT_PY_MAX_MEMORY"
# An element of a string (object) tensor: the pointer plus a small bytes object.
OBJECT_ITEMSIZE = 48

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_max_memory(value: Any, what: str = "max_memory") -> int | float | None:
    """None (use the default), a number of bytes > 0, or math.inf (no limit). Accepts an int, a float
    that is a whole number or inf, and strings: "1073741824", "512M", "2G", "1.5GiB" (K/M/G/T are
    powers of 1024), "inf" / "unlimited". Anything else (0, negatives, NaN, bools) is a ValueError."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("inf", "unlimited"):
            return UNLIMITED
        m = _SIZE.match(text)
        if m is None:
            raise ValueError(f"{what}={value!r} is not a size in bytes (e.g. 1073741824, 512M, 2G, or inf)")
        value = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{what} must be a number of bytes (or inf for no limit), not {type(value).__name__}")
    if value == math.inf:
        return UNLIMITED
    if not value > 0 or value != value:
        raise ValueError(f"{what} must be > 0 bytes (inf for no limit), got {value!r}")
    return int(value)


def default_max_memory(model_bytes: int) -> int:
    """4 times the model file plus 1 GiB: room for weights expanded (int8 -> float32, densified) and
    for activations, far below what a hostile size asks for."""
    return 4 * int(model_bytes) + GIB


def requested_max_memory(value: Any) -> int | float | None:
    """The budget asked for: the option, else ONERT_PY_MAX_MEMORY, else None (the default applies)."""
    got = parse_max_memory(value)
    if got is None:
        env = os.environ.get(ENV, "").strip()
        got = parse_max_memory(env, ENV) if env else None
    return got


def resolve_max_memory(requested: int | float | None, model: Any) -> int | float:
    """The budget a session uses: the one asked for, else the default for `model`'s file size."""
    return default_max_memory(model_bytes(model)) if requested is None else requested


def fmt_bytes(n: int | float, exact: bool = True) -> str:
    """"2.0 MiB (2097152 bytes)"; without `exact`, "2.0 MiB"."""
    if n == UNLIMITED:
        return "unlimited"
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}" + (f" ({n} bytes)" if exact else "")
    return f"{n} bytes"


def itemsize(dtype: Any) -> int:
    dt = np.dtype(dtype)
    return OBJECT_ITEMSIZE if dt.kind == "O" else dt.itemsize


def over_budget(what: str, nbytes: int, limit: int | float, shape: Sequence[int] | None = None,
                dtype: Any = None) -> ResourceError:
    """The error for `what` needing `nbytes` (of `shape` and `dtype`, when it has them) over `limit`."""
    of = ""
    if shape is not None:
        of = f" of shape {list(shape)}" + (f" ({np.dtype(dtype).name})" if dtype is not None else "")
    return ResourceError(f"{what}{of} needs {fmt_bytes(nbytes)}, more than the memory budget "
                         f"max_memory={fmt_bytes(limit)}; pass a larger max_memory (or set {ENV}) "
                         "if the model really needs it")


def check_alloc(shape: Sequence[int], dtype: Any, what: str, limit: int | float) -> None:
    """Raise ResourceError when an array of `shape` and `dtype` would be over `limit` bytes. A shape with
    a negative dimension is left to the caller (numpy refuses it)."""
    n = math.prod(shape) * itemsize(dtype)
    if n > limit:
        raise over_budget(what, n, limit, shape, dtype)


def model_bytes(model: Any) -> int:
    """The size of the file a model was loaded from; for a model built in memory, its constants'."""
    size = getattr(model, "file_size", 0)
    if size:
        return int(size)
    seen, total = set(), 0
    for sg in model.subgraphs:
        for t in sg.tensors:
            d = t.data
            if isinstance(d, np.ndarray) and id(d) not in seen:
                seen.add(id(d))
                total += d.size * itemsize(d.dtype)
    return total


def check_declared(model: Any, limit: int | float) -> None:
    """Every tensor's declared size (static shape x item size: constants, a sparse constant's dense
    shape, variables, intermediates) within `limit`, before anything is allocated for it."""
    if limit == UNLIMITED:
        return
    for sg in model.subgraphs:
        for t in sg.tensors:
            if not t.has_rank or any(d < 0 for d in t.shape):
                continue
            n = math.prod(t.shape) * itemsize(t.dtype)
            if n > limit:
                kind = "constant" if t.data is not None else "variable" if t.is_variable else "tensor"
                raise over_budget(f"subgraph {sg.index} {kind} {t.index} ({t.name!r})", n, limit, t.shape,
                                  t.dtype)


def held_constant_bytes(model: Any, extra: Sequence[Any] = ()) -> int:
    """Bytes of the arrays a session holds for its whole life: the model's constants and `extra` (values
    folded at compile time). Views count once, with the array they view."""
    seen, total = set(), 0
    arrays = [t.data for sg in model.subgraphs for t in sg.tensors]
    for a in [*arrays, *extra]:
        if not isinstance(a, np.ndarray):
            continue   # None, and numpy scalars (rank-0 values: a few bytes)
        while isinstance(a.base, np.ndarray):
            a = a.base
        if id(a) not in seen:
            seen.add(id(a))
            total += a.size * itemsize(a.dtype)
    return total


def check_total(arenas: Mapping[int, int], constant_bytes: int, limit: int | float) -> None:
    """The arenas of all subgraphs (subgraph -> bytes) and the constants held, together within `limit`:
    a ResourceError naming the total, the largest arenas and the constants."""
    total = sum(arenas.values()) + constant_bytes
    if total <= limit:
        return
    largest = sorted((item for item in arenas.items() if item[1]), key=lambda kv: -kv[1])[:3]
    listed = ", ".join(f"subgraph {k}: {fmt_bytes(n, False)}" for k, n in largest) or "none"
    raise over_budget(f"the session's memory, the arenas of its {len(arenas)} subgraph(s) (largest: {listed}; "
                      f"{fmt_bytes(sum(arenas.values()), False)} together) plus {fmt_bytes(constant_bytes, False)} "
                      "of constants,", total, limit)
