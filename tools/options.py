"""Options and model loading shared by the `onert-py` subcommands: the argparse option adders (the model,
--signature, --max-while-iterations, --custom-ops and the input options of `run`, `compare` and
`bench`), checks on option values, reading a model (and listing its Circle-only ops) and opening a
session from the parsed args."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import onert_py
from onert_py.errors import UnsupportedOpError
from onert_py.ir import Model
from onert_py.loader import load_model
from onert_py.tools.custom_ops import custom_ops_hint, load_custom_ops
from onert_py.tools.errors import CliError


def read_model(path: str) -> Model:
    """Load a model, turning a missing path into a CliError before the loader sees it."""
    p = Path(path)
    if not p.exists():
        raise CliError(f"model file not found: {path}")
    return load_model(p)


def circle_only_ops(model: Model) -> list[str]:
    """Ops with Circle's negative op codes, which no TFLite reader (LiteRT included) accepts."""
    from onert_py.schema.opcodes import op_code
    return sorted({op.opcode for sg in model.subgraphs for op in sg.operations
                   if op.opcode != "CUSTOM" and op_code(op.opcode) < 0})


# ---- options shared by run, compare and bench

def add_model_options(p: argparse.ArgumentParser, verb: str = "run") -> None:
    """The model argument and how to open it (--signature, --max-while-iterations, --custom-ops)."""
    p.add_argument("model", help=".tflite / .circle file or nnpackage directory")
    p.add_argument("--signature", metavar="KEY",
                   help=f"{verb} this signature's subgraph (default: subgraph 0); see `onert-py inspect`")
    p.add_argument("--max-while-iterations", type=int, default=None, metavar="N",
                   help="fail a WHILE loop that runs more than N iterations")
    add_custom_ops_option(p)


def add_custom_ops_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--custom-ops", action="append", default=[], metavar="MODULE",
                   help="import MODULE (a module name or a .py file) and call its register() to add "
                        "custom-op kernels (repeatable); 'mediapipe' loads mediapipe's custom ops")


def add_input_options(p: argparse.ArgumentParser, save: bool = False) -> None:
    """How inputs are chosen; `run`, `compare` and `bench` pick them the same way."""
    p.add_argument("--input", action="append", default=[], metavar="NAME_OR_INDEX=FILE.npy",
                   help="an input from a .npy file (repeatable), or an .npz with one array per input "
                        "name; inputs not given are seeded random values")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME_OR_INDEX=D0,D1,...",
                   help="fix the shape of an input with -1 (dynamic) dims (repeatable), e.g. "
                        "input=1,224,224,3; without it random inputs use 1 for every -1")
    p.add_argument("--input-range", action="append", default=[], metavar="NAME_OR_INDEX=LO,HI",
                   help="draw a random input uniformly from LO..HI (repeatable): integers in [LO, HI] "
                        "(both inclusive, as benchmark_model's --input_layer_value_range), floats in "
                        "[LO, HI). Default: floats standard normal; ints in [-5, 5], or [0, N-1] for "
                        "an input used as indices of a GATHER/EMBEDDING_LOOKUP over N rows")
    p.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")
    if save:
        p.add_argument("--save-inputs", metavar="IN.npz",
                       help="save the inputs used, keyed by input name (reuse them with --input IN.npz)")


def check_writable(path: str | None, option: str) -> None:
    """Fail before a long run, not after it, when an output file cannot be written."""
    if not path:
        return
    p = Path(path)
    if p.is_dir():
        raise CliError(f"{option} {path} is a directory; give a file name")
    if not p.resolve().parent.is_dir():
        raise CliError(f"cannot write {path}: directory {p.parent} does not exist")


def check_distinct_files(**paths: str | None) -> None:
    """Output files given to two options (keyword = option name with _ for -) must differ: one would
    overwrite the other."""
    given = [(f"--{k.replace('_', '-')}", Path(v).resolve()) for k, v in paths.items() if v]
    for i, (a, pa) in enumerate(given):
        for b, pb in given[i + 1:]:
            if pa == pb:
                raise CliError(f"{a} and {b} name the same file; give two")


def check_session_args(args: argparse.Namespace) -> None:
    if args.max_while_iterations is not None and args.max_while_iterations < 0:
        raise CliError("--max-while-iterations must be >= 0")
    if getattr(args, "seed", 0) < 0:
        raise CliError("--seed must be >= 0")
    check_writable(getattr(args, "save_inputs", None), "--save-inputs")


def open_session(args: argparse.Namespace) -> Any:
    """Load custom ops, the model and compile a session, all failures as one-line errors."""
    check_session_args(args)
    load_custom_ops(args.custom_ops)
    model = read_model(args.model)
    try:
        return onert_py.infer.session(model, max_while_iterations=args.max_while_iterations,
                                      signature=args.signature)
    except UnsupportedOpError as e:
        raise CliError(f"{e}{custom_ops_hint(model)}") from None
