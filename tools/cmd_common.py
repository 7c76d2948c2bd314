"""Helpers shared by the `onert-py` subcommands: user errors, model loading, the options `run`,
`compare` and `bench` have in common (--input, --input-shape, --input-range, --seed, --signature,
--max-while-iterations, --custom-ops) and the one implementation behind each, summaries."""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

import onert_py
from onert_py.errors import ExecutionError, InputError, PrepareError, UnsupportedOpError
from onert_py.ir import Model, Subgraph, Tensor
from onert_py.loader import load_model


class CliError(Exception):
    """A mistake the user can fix (bad path, bad argument); printed as one line, exit code 2."""


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


def shape_of(t: Tensor) -> list[int]:
    """The shape a user should see: the signature (with -1 for dynamic dims) when there is one."""
    return list(t.shape_signature) if t.shape_signature is not None else list(t.shape)


def dtype_of(t: Tensor) -> str:
    return "string" if t.type_name == "STRING" else t.type_name.lower()


def _load_array_file(path: str) -> Any:
    """np.load with every failure mode (missing, truncated, pickled, not numpy) as a CliError."""
    if not Path(path).is_file():
        try:
            float(path.split(",")[0])
            hint = " (for a constant value V use --input-range NAME=V,V)"
        except ValueError:
            hint = ""
        raise CliError(f"input file not found: {path}{hint}")
    try:
        # allow_pickle=False: a .npy from an untrusted source must not run code.
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        if "pickle" in str(e):  # numpy's guess for any file without the .npy magic
            raise CliError(f"{path} is not a .npy/.npz file (or holds pickled objects, which are "
                           "not loaded)") from None
        raise CliError(f"cannot read {path} as .npy/.npz: {e}") from None


def _position(key: str, names: Sequence[str], aliases: dict[str, int]) -> int:
    """Input position from a tensor name, a signature input name, or a 0-based index."""
    if key in names:
        return names.index(key)
    if key in aliases:
        return aliases[key]
    if key.isdigit() and int(key) < len(names):
        return int(key)
    extra = [a for a in aliases if a not in names]
    raise CliError(f"unknown input {key!r}; the model's inputs are {list(names)}"
                   + (f", signature names {extra}" if extra else "")
                   + (f" (or an index 0..{len(names) - 1})" if names else " (it has none)"))


def _once(pos: int, seen: dict, option: str, names: Sequence[str]) -> int:
    """A position not given before: a second value for one input is a typo, not an override."""
    if pos in seen:
        raise CliError(f"{option}: input {pos} ({names[pos]!r}) is given twice")
    return pos


def parse_inputs(specs: Sequence[str], names: Sequence[str], aliases: dict[str, int] | None = None,
                 with_paths: bool = False) -> Any:
    """`NAME_OR_INDEX=file.npy` or `file.npz` (one array per input name) -> {position: array}
    (and {position: file} with `with_paths`)."""
    aliases = aliases or {}
    given: dict[int, np.ndarray] = {}
    paths: dict[int, str] = {}
    for spec in specs:
        key, eq, path = spec.partition("=")
        if not eq:
            if not spec.lower().endswith(".npz"):
                raise CliError(f"--input {spec!r}: expected NAME_OR_INDEX=FILE.npy, or an .npz with one "
                               "array per input name")
            data = _load_array_file(spec)
            if not isinstance(data, np.lib.npyio.NpzFile):
                raise CliError(f"--input {spec}: give NAME=file.npy, or an .npz with one array per "
                               "input name")
            with data:
                for name in data.files:
                    pos = _once(_position(name, names, aliases), given, "--input", names)
                    given[pos] = _read_npz_member(data, name, spec)
                    paths[pos] = f"{spec}[{name}]"
            continue
        if not key or not path:
            raise CliError(f"--input {spec!r}: expected NAME_OR_INDEX=file.npy")
        pos = _once(_position(key, names, aliases), given, "--input", names)
        data = _load_array_file(path)
        if isinstance(data, np.lib.npyio.NpzFile):
            with data:
                if len(data.files) != 1:
                    raise CliError(f"--input {spec}: {path} holds {len(data.files)} arrays; give a .npy "
                                   "or an .npz with exactly one")
                data = _read_npz_member(data, data.files[0], path)
        given[pos] = data
        paths[pos] = path
    return (given, paths) if with_paths else given


def _read_npz_member(npz: Any, name: str, label: str) -> np.ndarray:
    try:
        return npz[name]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise CliError(f"cannot read array {name!r} from {label}: {e}") from None


# ---- options shared by run, compare and bench

_CUSTOM_OP_ALIASES = {"mediapipe": "onert_py.contrib.mediapipe_ops"}


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


def load_custom_ops(specs: Sequence[str]) -> None:
    """Import each module (name or .py path) and call its register()."""
    for spec in specs:
        name = _CUSTOM_OP_ALIASES.get(spec, spec)
        try:
            if name.endswith(".py"):
                if not Path(name).is_file():
                    raise CliError(f"--custom-ops {spec}: file not found")
                mod_spec = importlib.util.spec_from_file_location(Path(name).stem, name)
                module = importlib.util.module_from_spec(mod_spec)
                mod_spec.loader.exec_module(module)
            else:
                module = importlib.import_module(name)
        except CliError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure of user code is the user's to fix
            raise CliError(f"--custom-ops {spec}: cannot import it ({type(e).__name__}: {e})") from None
        register = getattr(module, "register", None)
        if not callable(register):
            raise CliError(f"--custom-ops {spec}: module {name} has no register() function")
        try:
            register()
        except Exception as e:  # noqa: BLE001
            raise CliError(f"--custom-ops {spec}: register() failed ({type(e).__name__}: {e})") from None


def custom_ops_hint(model: Model) -> str:
    """A hint when a model's missing kernels are mediapipe's custom ops, which onert-py ships."""
    from onert_py.compiler.compile import unsupported_ops
    try:
        from onert_py.contrib import mediapipe_ops
    except ImportError:
        return ""
    ours = sorted({name for _, _, name in unsupported_ops(model)} & set(mediapipe_ops.OPS))
    return f"; {', '.join(ours)}: mediapipe custom op(s), add --custom-ops mediapipe" if ours else ""


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


# ---- inputs

@dataclass
class Inputs:
    """The inputs of one run, and where each came from (for printing and for error hints)."""
    names: list[str]
    arrays: list[np.ndarray]
    sources: list[str]
    declared: list[list[int]]        # the model's dims (-1 = dynamic)
    random: list[bool] = field(default_factory=list)
    seed: int = 0
    aliases: dict[str, int] = field(default_factory=dict)   # signature input name -> position

    def line(self, k: int) -> str:
        arr = self.arrays[k]
        dtype = "string" if arr.dtype == object else str(arr.dtype)
        shape = list(np.shape(arr))
        model = f" (model: {self.declared[k]})" if shape != self.declared[k] else ""
        return (f"input {k} {self.names[k]!r}{signature_label(self.names[k], k, self.aliases)}: "
                f"shape {shape}{model} dtype {dtype}  {self.sources[k]}")

    def random_names(self) -> list[str]:
        """Inputs with random values, integer ones only when there are any: counts, ids and indices
        are what random values break; random floats rarely make a run fail."""
        rand = [k for k, r in enumerate(self.random) if r]
        ints = [k for k in rand if self.arrays[k].dtype.kind in "biu"]
        return [self.names[k] for k in (ints or rand)]


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


def input_names(sess: Any) -> tuple[list[str], dict[str, int]]:
    """Input tensor names of the session's subgraph, and signature input names -> position."""
    names = [i.name for i in sess.get_inputs_tensorinfo()]
    aliases: dict[str, int] = {}
    sg = sess.model.subgraphs[sess.subgraph_index]
    for s in sess.model.signatures:  # signature input names work too (they are what users see)
        if s.subgraph_index == sess.subgraph_index:
            for alias, t in s.inputs.items():
                if t in sg.inputs:
                    aliases[alias] = list(sg.inputs).index(t)
    return names, aliases


def _split_spec(spec: str, option: str, example: str) -> tuple[str, str]:
    # rpartition: tensor names may hold '=' more plausibly than dims or numbers do
    key, eq, value = spec.rpartition("=")
    if not eq or not key or not value.strip():
        raise CliError(f"{option} {spec!r}: expected {example}")
    return key, value


def parse_shapes(specs: Sequence[str], names: Sequence[str],
                 aliases: dict[str, int] | None = None) -> dict[int, list[int]]:
    """`NAME_OR_INDEX=1,224,224,3` -> {input position: dims}; `x=[]` or `x=scalar` is a scalar."""
    shapes: dict[int, list[int]] = {}
    for spec in specs:
        key, dims = _split_spec(spec, "--input-shape", "NAME_OR_INDEX=D0,D1,... (e.g. x=1,224,224,3)")
        text = dims.strip().strip("[]()").strip()
        try:
            shape = [] if text in ("", "scalar") else [int(d) for d in text.split(",")]
        except ValueError:
            raise CliError(f"--input-shape {spec!r}: dims must be comma-separated integers") from None
        if any(d < 0 for d in shape):
            raise CliError(f"--input-shape {spec!r}: dims must be >= 0")
        shapes[_once(_position(key, names, aliases or {}), shapes, "--input-shape", names)] = shape
    return shapes


def _number(text: str, spec: str) -> float | int:
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise CliError(f"--input-range {spec!r}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise CliError(f"--input-range {spec!r}: bounds must be finite")
    return value


def parse_ranges(specs: Sequence[str], names: Sequence[str],
                 aliases: dict[str, int] | None = None) -> dict[int, tuple[float | int, float | int]]:
    """`NAME_OR_INDEX=LO,HI` -> {input position: (lo, hi)}; lo <= hi, finite."""
    ranges: dict[int, tuple[float | int, float | int]] = {}
    for spec in specs:
        key, value = _split_spec(spec, "--input-range", "NAME_OR_INDEX=LO,HI (e.g. ids=0,99)")
        parts = value.split(",")
        if len(parts) != 2:
            raise CliError(f"--input-range {spec!r}: expected two numbers LO,HI")
        lo, hi = _number(parts[0], spec), _number(parts[1], spec)
        if lo > hi:
            raise CliError(f"--input-range {spec!r}: LO must be <= HI")
        ranges[_once(_position(key, names, aliases or {}), ranges, "--input-range", names)] = (lo, hi)
    return ranges


# Ops whose output holds the same values as one of their inputs (so index-ness carries through).
_VALUE_PRESERVING = {"RESHAPE": (0,), "EXPAND_DIMS": (0,), "SQUEEZE": (0,), "CAST": (0,),
                     "TRANSPOSE": (0,), "SELECT": (1, 2), "SELECT_V2": (1, 2)}


def index_bounds(model: Model, subgraph: int = 0) -> dict[int, tuple[int, str]]:
    """{input position: (N, "GATHER op 6")} for int inputs of `subgraph` that reach the indices of a
    GATHER (or the ids of an EMBEDDING_LOOKUP) over N static rows, directly, through value-preserving
    ops (as in TF's `where(i < 0, i + n, i)` wrap) or as the initial value of a WHILE / IF operand
    (a decoder's start token); random values in [0, N-1] then make a valid run."""
    consumers: dict[int, dict[int, list]] = {}
    for sg in model.subgraphs:
        c = consumers.setdefault(sg.index, {})
        for op in sg.operations:
            for slot, t in enumerate(op.inputs):
                if t >= 0:
                    c.setdefault(t, []).append((op, slot))
    main = model.subgraphs[subgraph]
    out: dict[int, tuple[int, str]] = {}
    for pos, start in enumerate(main.inputs):
        if main.tensors[start].dtype.kind not in "iu":
            continue
        seen, todo, best = {(subgraph, start)}, [(subgraph, start)], None
        while todo:
            s_index, t = todo.pop()
            sg = model.subgraphs[s_index]
            for op, slot in consumers[s_index].get(t, ()):
                n = _rows_indexed(sg, op, slot)
                if n is not None and n > 0 and (best is None or n < best[0]):
                    where = f"{op.kernel_name} op {op.index}" + (
                        f" of subgraph {s_index}" if s_index != subgraph else "")
                    best = (n, where)
                for nxt in _same_values(model, sg, op, slot):
                    if nxt not in seen and model.subgraphs[nxt[0]].tensors[nxt[1]].dtype.kind in "iu":
                        seen.add(nxt)
                        todo.append(nxt)
        if best is not None:
            out[pos] = best
    return out


def _same_values(model: Model, sg: Subgraph, op: Any, slot: int) -> list[tuple[int, int]]:
    """(subgraph, tensor) pairs that hold the values of `op`'s input `slot` (at least at first)."""
    if slot in _VALUE_PRESERVING.get(op.opcode, ()):
        return [(sg.index, o) for o in op.outputs if o >= 0]
    if op.opcode == "WHILE":
        targets, k = (op.options.get("cond_subgraph_index"), op.options.get("body_subgraph_index")), slot
    elif op.opcode == "IF" and slot > 0:
        targets, k = (op.options.get("then_subgraph_index"), op.options.get("else_subgraph_index")), slot - 1
    else:
        return []
    out = []
    for s in targets:
        if isinstance(s, int) and 0 <= s < len(model.subgraphs) and k < len(model.subgraphs[s].inputs):
            out.append((s, model.subgraphs[s].inputs[k]))
    return out


def _rows_indexed(sg: Subgraph, op: Any, slot: int) -> int | None:
    """How many rows `op` indexes with its input `slot`, when it is an index input over a static dim."""
    if op.opcode == "GATHER" and slot == 1:
        params = sg.tensors[op.inputs[0]]
        axis = int(op.options.get("axis", 0))
    elif op.opcode == "EMBEDDING_LOOKUP" and slot == 0:
        params, axis = sg.tensors[op.inputs[1]], 0
    else:
        return None
    dims = shape_of(params)
    if not -len(dims) <= axis < len(dims):
        return None
    n = dims[axis]
    return n if n >= 0 else None


def random_input(dims: Sequence[int], dtype: str, rng: np.random.Generator,
                 value_range: tuple[float | int, float | int] | None = None) -> np.ndarray:
    """A seeded random value for one input: -1 dims become 1. Without a range, floats are standard
    normal and ints stay small ([-5, 5]) so that they are usable as loop counters, indices and axes."""
    shape = tuple(1 if d < 0 else d for d in dims)
    if dtype == "string":
        out = np.empty(shape, dtype=object)
        out.fill("a")
        return out
    dt = np.dtype(dtype)
    if value_range is not None:
        lo, hi = value_range
        if dt.kind in "biu":
            return rng.integers(int(lo), int(hi), size=shape, endpoint=True, dtype=dt)  # dtype: full uint64
        return rng.uniform(lo, hi, size=shape).astype(dt)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind == "i":
        return rng.integers(-5, 6, size=shape).astype(dt)
    if dt.kind == "u":
        return rng.integers(0, 10, size=shape).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    raise CliError(f"cannot make a random value of dtype {dtype}; give this input with --input")


def _check_range(spec_range: tuple[float | int, float | int], dtype: str, name: str) -> None:
    lo, hi = spec_range
    label = f"--input-range {name}={lo},{hi}"
    if dtype == "string" or np.dtype(dtype).kind == "c":
        raise CliError(f"{label}: input {name!r} is {dtype}; ranges apply to int, bool and float inputs")
    dt = np.dtype(dtype)
    if dt.kind in "biu":
        if not (isinstance(lo, int) and isinstance(hi, int)):
            raise CliError(f"{label}: input {name!r} is {dtype}; LO and HI must be integers")
        info = (0, 1) if dt.kind == "b" else (np.iinfo(dt).min, np.iinfo(dt).max)
        if lo < info[0] or hi > info[1]:
            raise CliError(f"{label}: out of the range of {dtype} [{info[0]}, {info[1]}]")
    elif max(abs(lo), abs(hi)) > np.finfo(dt).max:
        raise CliError(f"{label}: out of the range of {dtype}")


def _fmt_bound(x: float | int) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def prepare_inputs(sess: Any, args: argparse.Namespace) -> Inputs:
    """Inputs for the session's subgraph from --input files, --input-shape and --input-range, seeded
    random values otherwise. Each input has its own random stream (seed, position), so giving or
    ranging one input never changes the values drawn for another."""
    names, aliases = input_names(sess)
    declared = [list(i.dims) for i in sess.get_inputs_tensorinfo()]
    given, paths = parse_inputs(args.input, names, aliases, with_paths=True)
    shapes = parse_shapes(getattr(args, "input_shape", []), names, aliases)
    ranges = parse_ranges(getattr(args, "input_range", []), names, aliases)
    for k in ranges.keys() & given.keys():
        raise CliError(f"input {names[k]!r} has both --input and --input-range; give one")
    for k in shapes.keys() & given.keys():
        if list(np.shape(given[k])) != shapes[k]:
            raise CliError(f"--input-shape for {names[k]!r} is {shapes[k]}, but its --input file holds "
                           f"shape {list(np.shape(given[k]))}; give one")
    if shapes:
        infos = sess.get_inputs_tensorinfo()
        for k, dims in shapes.items():
            want = declared[k]
            if len(dims) != len(want) or any(w >= 0 and w != d for w, d in zip(want, dims)):
                raise CliError(f"--input-shape: input {k} ({names[k]!r}) has shape {dims}, the model "
                               f"expects {want}" + (" (-1 = any size)" if -1 in want else ""))
            infos[k].dims, infos[k].rank = dims, len(dims)
        for k, info in enumerate(infos):
            if k in given and k not in shapes:  # a file's shape fixes its input too
                info.dims = list(np.shape(given[k]))
            elif any(d < 0 for d in info.dims):
                # Guessing 1 here would often clash with the given shapes (a shared batch dim).
                raise CliError(f"--input-shape: input {info.name!r} has dims {info.dims} too; give "
                               "--input-shape (or --input) for every input with -1 dims")
        try:
            sess.update_inputs_tensorinfo(infos)
        except (InputError, PrepareError) as e:
            raise CliError(f"--input-shape: {e}") from None
    infos = sess.get_inputs_tensorinfo()
    bounds = index_bounds(sess.model, sess.subgraph_index)
    arrays, sources, random = [], [], []
    for k, info in enumerate(infos):
        if k in given:
            arrays.append(_coerce(given[k], info.dtype, info.name))
            sources.append(f"from {paths[k]}")
            random.append(False)
            continue
        rng = np.random.default_rng([args.seed, k])
        value_range = ranges.get(k)
        if value_range is not None:
            _check_range(value_range, info.dtype, info.name)
            lo, hi = value_range
            how = (f"constant {_fmt_bound(lo)}" if lo == hi else f"random in [{_fmt_bound(lo)}, {_fmt_bound(hi)}"
                   + ("]" if np.dtype(info.dtype).kind in "biu" else ")"))
        elif k in bounds and np.dtype(info.dtype).kind in "iu":
            n, where = bounds[k]
            value_range = (0, n - 1)
            how = f"random in [0, {n - 1}] (indices of {where})"
        elif info.dtype == "string":
            how = 'filled with "a"'
        else:
            kind = np.dtype(info.dtype).kind
            how = {"f": "random normal", "c": "random normal", "b": "random bool", "i": "random in [-5, 5]",
                   "u": "random in [0, 9]"}.get(kind, "random")
        arrays.append(random_input(info.dims, info.dtype, rng, value_range))
        sources.append(f"{how}, seed {args.seed}")
        random.append(True)
    return Inputs(names, arrays, sources, declared, random, args.seed, aliases)


def run_inference(sess: Any, inputs: Inputs) -> list[np.ndarray]:
    """sess.infer, with a hint at --input / --input-range when a run on random values fails (an
    index out of range, a loop that never ends: random values are often not valid data)."""
    try:
        return sess.infer(inputs.arrays)
    except ExecutionError as e:
        rand = inputs.random_names()
        if not rand:
            raise
        which = ", ".join(repr(n) for n in rand[:4]) + (", ..." if len(rand) > 4 else "")
        raise CliError(f"{e} (random input(s) {which}, seed {inputs.seed}: give real values with "
                       "--input NAME=FILE.npy or bound them with --input-range NAME=LO,HI)") from None


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


def _coerce(arr: np.ndarray, dtype: str, name: str) -> np.ndarray:
    """Cast file data of the same kind (float64 -> float32, int64 -> int32); refuse lossy kinds."""
    if dtype == "string":
        return arr
    target = np.dtype(dtype)
    if arr.dtype == target:
        return arr
    if not np.can_cast(arr.dtype, target, casting="same_kind"):
        held = {"U": "str", "S": "bytes", "O": "object"}.get(arr.dtype.kind, str(arr.dtype))
        raise CliError(f"input {name!r}: the file holds {held} values; the model expects {target}")
    if target.kind in "iu" and arr.dtype.kind in "iu" and arr.size:
        info = np.iinfo(target)  # astype would wrap 2**40 around silently
        lo, hi = int(arr.min()), int(arr.max())
        if lo < info.min or hi > info.max:
            raise CliError(f"input {name!r}: the file holds values in [{lo}, {hi}], outside the range of "
                           f"{target} [{info.min}, {info.max}]")
    return arr.astype(target)


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
