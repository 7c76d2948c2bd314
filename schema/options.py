"""Generic decoding of flatbuffer option tables into plain dicts.

Every options table of both bindings is read the same way: each accessor of the generated reader class
becomes a snake_case key. Vectors become tuples, strings become str, nested tables become dicts.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import flatbuffers.table

_SKIP = {"Init", "GetRootAs"}


def snake_case(name: str) -> str:
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def camel_case(name: str) -> str:
    """snake_case -> lowerCamelCase, the attribute names of the object API classes."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


@lru_cache(maxsize=None)
def _accessors(cls: type) -> tuple[tuple[str, str, str], ...]:
    """(key, accessor, kind) per field, kind in {'scalar', 'numpy', 'vector'}."""
    names = set(vars(cls))
    found = []
    for attr, fn in vars(cls).items():
        if attr.startswith("_") or attr in _SKIP or attr.startswith("GetRootAs") or not callable(fn):
            continue
        if attr.endswith(("AsNumpy", "Length", "IsNone", "BufferHasIdentifier")):
            continue
        argc = getattr(getattr(fn, "__code__", None), "co_argcount", 0)
        if argc == 1:
            found.append((snake_case(attr), attr, "scalar"))
        elif argc == 2 and attr + "Length" in names:
            kind = "numpy" if attr + "AsNumpy" in names else "vector"
            found.append((snake_case(attr), attr, kind))
    return tuple(found)


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, flatbuffers.table.Table):
        return None  # an undecoded union member: not used by any options table we read
    if hasattr(value, "_tab"):
        return decode_table(value)
    return value


def decode_table(table: Any) -> dict[str, Any]:
    """Decode one generated reader object (an options table) into a dict."""
    out: dict[str, Any] = {}
    for key, attr, kind in _accessors(type(table)):
        if kind == "scalar":
            out[key] = _plain(getattr(table, attr)())
        elif kind == "numpy":
            arr = getattr(table, attr + "AsNumpy")()
            out[key] = tuple(arr.tolist()) if hasattr(arr, "tolist") else ()
        else:
            n = getattr(table, attr + "Length")()
            out[key] = tuple(_plain(getattr(table, attr)(j)) for j in range(n))
    return out


# onert-py's own custom ops (the gradient ops, OnertPy*) keep their options as JSON in the operator's
# custom_options, behind this marker, so a written gradient model loads back with the same options.
ONERT_PY_OPTIONS_MARKER = b"ONERTPY1"


def encode_onert_py_options(options: dict) -> bytes:
    import json
    return ONERT_PY_OPTIONS_MARKER + json.dumps(options, default=lambda v: v.item() if hasattr(v, "item")
                                                else list(v)).encode()


def decode_onert_py_options(custom_options: bytes) -> dict | None:
    """The options of an onert-py custom op, or None for any other custom_options."""
    if not custom_options.startswith(ONERT_PY_OPTIONS_MARKER):
        return None
    import json
    try:
        value = json.loads(custom_options[len(ONERT_PY_OPTIONS_MARKER):].decode())
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None
