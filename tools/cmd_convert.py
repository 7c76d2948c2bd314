"""`onert-py convert`: re-serialize a model as TFLite or Circle, then reload it to verify."""
from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np

from onert_py.ir import Model
from onert_py.loader import load_model
from onert_py.schema.writer import serialize
from onert_py.tools.errors import CliError
from onert_py.tools.options import circle_only_ops, read_model

_EXTENSIONS = {".circle": "circle", ".tflite": "tflite"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("convert", help="re-serialize a model as .tflite or .circle",
                       description="Re-serialize a model (.tflite, .circle or nnpackage) as TFLite or "
                                   "Circle. The new file is reloaded and checked against the original "
                                   "before it replaces OUT, so a failed conversion leaves no file behind.")
    p.add_argument("input", help="model to read (.tflite / .circle file or nnpackage directory)")
    p.add_argument("output", metavar="OUT", help="file to write (.tflite or .circle; not the input)")
    p.add_argument("--format", choices=("circle", "tflite"),
                   help="output format (default: from OUT's extension)")
    p.set_defaults(func=convert_cmd)


def _same_data(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if a.dtype == object or b.dtype == object:
        return np.array_equal(a, b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()  # NaN-safe


def _differences(a: Model, b: Model) -> list[str]:
    """Structural differences that a faithful round trip must not have."""
    if len(a.subgraphs) != len(b.subgraphs):
        return [f"{len(a.subgraphs)} subgraphs became {len(b.subgraphs)}"]
    out = []
    for sa, sb in zip(a.subgraphs, b.subgraphs):
        where = f"subgraph {sa.index}"
        if (sa.inputs, sa.outputs) != (sb.inputs, sb.outputs):
            out.append(f"{where}: inputs/outputs changed")
        if [(o.kernel_name, o.inputs, o.outputs) for o in sa.operations] != \
                [(o.kernel_name, o.inputs, o.outputs) for o in sb.operations]:
            out.append(f"{where}: operators changed")
        if len(sa.tensors) != len(sb.tensors):
            out.append(f"{where}: {len(sa.tensors)} tensors became {len(sb.tensors)}")
            continue
        for ta, tb in zip(sa.tensors, sb.tensors):
            if (ta.shape, ta.type_name) != (tb.shape, tb.type_name) or not _same_data(ta.data, tb.data):
                out.append(f"{where} tensor {ta.index} ({ta.name!r}) changed")
    if [s.key for s in a.signatures] != [s.key for s in b.signatures]:
        out.append("signatures changed")
    return out


def _write_atomically(path: Path, data: bytes) -> None:
    """Write to a temporary file next to `path`, then rename: readers never see half a model."""
    tmp = None
    try:
        with tempfile.NamedTemporaryFile(dir=path.resolve().parent, prefix=f".{path.name}.",
                                         delete=False) as f:
            tmp = f.name
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # a temp file is private (0600); the model should not be
        os.replace(tmp, path)
    except OSError as e:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
        raise CliError(f"cannot write {path}: {e}") from None


def convert_cmd(args: argparse.Namespace) -> int:
    fmt = args.format or _EXTENSIONS.get(Path(args.output).suffix.lower())
    if fmt is None:
        raise CliError(f"cannot tell the format of {args.output} from its extension; use --format "
                       "circle|tflite")
    ext_fmt = _EXTENSIONS.get(Path(args.output).suffix.lower())
    if args.format and ext_fmt and ext_fmt != args.format:
        raise CliError(f"--format {args.format} contradicts the extension of {args.output}; name it "
                       f"*.{args.format}")
    out = Path(args.output)
    if out.is_dir():
        raise CliError(f"{args.output} is a directory; give a file name")
    src = Path(args.input)
    # The input may be memory-mapped while we write, and the user's files are not ours to change.
    if out.exists() and src.exists() and os.path.samefile(out, src):
        raise CliError(f"{args.output} is the input file; write the converted model to another path")
    if src.is_dir() and out.resolve().is_relative_to(src.resolve()):
        raise CliError(f"{args.output} is inside the input nnpackage {args.input}; write the converted "
                       "model to another path")
    if not out.resolve().parent.is_dir():
        raise CliError(f"cannot write {args.output}: directory {out.parent} does not exist")
    model = read_model(args.input)
    if fmt == "tflite":
        circle_only = circle_only_ops(model)
        if circle_only:
            raise CliError(f"Circle-only op(s) {', '.join(circle_only)} cannot be written as TFLite")
    try:
        data = serialize(model, fmt)
    except (ValueError, KeyError, TypeError) as e:
        raise CliError(f"cannot write the model as {fmt}: {e}") from None
    reloaded = load_model(data)  # verify before writing: a bad conversion must not leave a file
    problems = _differences(model, reloaded) + (
        [f"reloaded as {reloaded.format}, expected {fmt}"] if reloaded.format != fmt else [])
    if problems:
        raise CliError("verification of the converted model failed (nothing written): "
                       + "; ".join(problems[:5]))
    _write_atomically(out, data)
    n_ops = sum(len(sg.operations) for sg in model.subgraphs)
    n_tensors = sum(len(sg.tensors) for sg in model.subgraphs)
    print(f"wrote {args.output} ({fmt}, {len(data)} bytes); verified by reloading: "
          f"{len(model.subgraphs)} subgraph(s), {n_ops} op(s), {n_tensors} tensor(s)")
    return 0
