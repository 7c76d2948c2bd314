"""What the `onert-py` subcommands print and save: tensor shapes and dtypes as users see them, signature
labels, value summaries, tables, and .npz files keyed by tensor name."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from onert_py.ir import Tensor
from onert_py.tools.errors import CliError


def shape_of(t: Tensor) -> list[int]:
    """The shape a user should see: the signature (with -1 for dynamic dims) when there is one."""
    return list(t.shape_signature) if t.shape_signature is not None else list(t.shape)


def dtype_of(t: Tensor) -> str:
    return "string" if t.type_name == "STRING" else t.type_name.lower()


def signature_label(name: str, k: int, aliases: dict[str, int]) -> str:
    """` (signature 'x')` when position k has a signature name other than its tensor name."""
    other = [a for a, pos in aliases.items() if pos == k and a != name]
    return f" (signature {other[0]!r})" if other else ""


def output_aliases(sess: Any) -> dict[str, int]:
    """Signature output names -> output position, for the session's subgraph."""
    sg = sess.model.subgraphs[sess.subgraph_index]
    out: dict[str, int] = {}
    for s in sess.model.signatures:
        if s.subgraph_index == sess.subgraph_index:
            for alias, t in s.outputs.items():
                if t in sg.outputs:
                    out[alias] = list(sg.outputs).index(t)
    return out


def save_arrays(path: str, names: Sequence[str], arrays: Sequence[np.ndarray], prefix: str = "output") -> None:
    """An .npz keyed by tensor name (<prefix>_<k> for empty or repeated names); strings as bytes."""
    used: set[str] = set()
    out = {}
    for k, (name, arr) in enumerate(zip(names, arrays)):
        arr = np.asarray(arr)
        if arr.dtype == object:  # string tensors: bytes arrays load back without pickle
            arr = np.array([bytes(x) if isinstance(x, bytes) else str(x).encode() for x in arr.reshape(-1)],
                           dtype=bytes).reshape(arr.shape)
        out[output_key(name, k, used, prefix)] = arr
    try:
        with open(path, "wb") as f:  # a file object keeps np.savez from appending ".npz"
            np.savez(f, **out)
    except OSError as e:
        raise CliError(f"cannot write {path}: {e}") from None


def summarize(arr: np.ndarray, tiny: int = 8) -> str:
    """The values of a tiny array, or min/max/mean of a numeric one."""
    arr = np.asarray(arr)
    if arr.size <= tiny or arr.dtype.kind not in "biufc":
        return "values " + np.array2string(arr.reshape(-1), threshold=tiny, separator=", ",
                                           max_line_width=10**6)
    if arr.dtype.kind == "c":
        arr = np.abs(arr)
    x = arr.astype(np.float64)
    nan = int(np.isnan(x).sum())
    if nan == x.size:
        return "all NaN"
    text = f"min {np.nanmin(x):.6g}  max {np.nanmax(x):.6g}  mean {np.nanmean(x):.6g}"
    return text + (f"  ({nan} NaN)" if nan else "")


def output_key(name: str, k: int, used: set[str], prefix: str = "output") -> str:
    """An npz key per tensor: its name, or <prefix>_<k> when empty or taken."""
    key = name if name and name not in used else f"{prefix}_{k}"
    used.add(key)
    return key


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
