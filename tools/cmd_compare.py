"""`onert-py compare`: run a model on onert-py and on a reference (LiteRT or a stored .npz) with the
same inputs, print a per-output error table, and optionally dump every intermediate tensor."""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from onert_py.ir import Model
from onert_py.schema.writer import serialize
from onert_py.tools.errors import CliError
from onert_py.tools.formatting import format_table, save_arrays
from onert_py.tools.inputs import Inputs, prepare_inputs, run_inference
from onert_py.tools.options import (add_input_options, add_model_options, backend_choice, circle_only_ops,
                                    open_session)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare onert-py's outputs with LiteRT's or stored ones",
                       description="Run a model on onert-py and on a reference with the same inputs and "
                                   "print a per-output error table. An output passes when every element "
                                   "has |got - want| <= atol + rtol * |want| (ints, bools and strings: "
                                   "equal). Exit code 0 all pass, 1 a mismatch, 2 an error.")
    add_model_options(p, "compare")
    p.add_argument("--reference", default="litert", metavar="litert|EXPECTED.npz",
                   help="'litert' (default) runs ai-edge-litert; otherwise an .npz keyed by output name "
                        "(as `run --output` writes)")
    p.add_argument("--rtol", type=float, default=1e-5, help="relative tolerance (default 1e-5)")
    p.add_argument("--atol", type=float, default=1e-6, help="absolute tolerance (default 1e-6)")
    add_input_options(p, save=True)
    p.add_argument("--dump-dir", metavar="DIR",
                   help="save every op output as .npy here (with index.json: op, tensor, shape, calls), "
                        "LiteRT's subgraph-0 tensors in DIR/litert, and name the first differing op "
                        "(WHILE loops then run op by op, not as one jit-compiled loop)")
    p.set_defaults(func=compare_cmd)


# ---- comparing arrays

def compare_arrays(got: np.ndarray, want: np.ndarray, rtol: float, atol: float
                   ) -> tuple[float | None, float | None, bool, str]:
    """(max abs err, max rel err, ok, note). Floats use |got-want| <= atol + rtol*|want| with NaN
    equal to NaN; integers, bools and strings must match exactly."""
    max_abs, max_rel, ok, note, _ = compare_detail(got, want, rtol, atol)
    return max_abs, max_rel, ok, note


def compare_detail(got: np.ndarray, want: np.ndarray, rtol: float, atol: float, strict_dtype: bool = True
                   ) -> tuple[float | None, float | None, bool, str, int | None]:
    """compare_arrays plus the number of elements out of tolerance (None when shapes differ). With
    `strict_dtype` False a dtype of the same kind (a float64 .npz made with numpy) is compared by
    value and only noted."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return None, None, False, f"shape {list(got.shape)} vs reference {list(want.shape)}", None
    if got.dtype.kind in "OSU" or want.dtype.kind in "OSU":
        def as_bytes(x):
            return [s.encode() if isinstance(s, str) else bytes(s) for s in x.reshape(-1)]
        bad = sum(a != b for a, b in zip(as_bytes(got), as_bytes(want)))
        return None, None, bad == 0, "", bad
    note = "" if got.dtype == want.dtype else f"dtype {got.dtype} vs reference {want.dtype}"
    lenient = not strict_dtype and got.dtype.kind == want.dtype.kind
    g, w, same = _widened(got, want)   # same: also makes inf == inf an error of 0, not NaN
    diff = np.where(same, 0.0, np.abs(g - w))
    if diff.size == 0:
        return 0.0, 0.0, lenient or not note, note, 0
    scale = np.abs(w)
    rel = np.divide(diff, scale, out=np.zeros_like(diff), where=scale > 0)
    exact = got.dtype.kind in "biu" and want.dtype.kind in "biu"
    # `same` first: NaN vs NaN (and inf vs inf) pass even though |want| = NaN makes the bound NaN.
    good = same if exact else same | (diff <= atol + rtol * scale)
    bad = int(good.size - np.count_nonzero(good))
    return float(np.max(diff)), float(np.max(rel)), bad == 0 and (lenient or not note), note, bad


def _widened(got: np.ndarray, want: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """got and want as float64 (complex128 when either is complex), and where they hold the same value
    (NaN against NaN and inf against inf count as the same)."""
    wide = np.complex128 if "c" in (got.dtype.kind, want.dtype.kind) else np.float64
    g, w = got.astype(wide), want.astype(wide)
    return g, w, (g == w) | (np.isnan(g) & np.isnan(w))


def needed_atol(got: np.ndarray, want: np.ndarray, rtol: float) -> float | None:
    """The smallest atol with which a float output would pass at this rtol; None when no atol can
    help (shapes or dtypes differ, NaN against a number, integer outputs)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype.kind != want.dtype.kind or got.dtype.kind not in "fc":
        return None
    g, w, same = _widened(got, want)
    diff = np.abs(g - w)
    if np.isnan(diff[~same]).any():
        return None
    excess = np.where(same, 0.0, diff - rtol * np.abs(w))
    return float(max(excess.max(initial=0.0), 0.0))


def worst_element(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str | None:
    """Where a numeric output is furthest out of tolerance: "at [0, 3]: 0.51 vs reference 0.62"."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.size == 0 or got.dtype.kind not in "biufc" or \
            want.dtype.kind not in "biufc":
        return None
    g, w, same = _widened(got, want)
    excess = np.where(same, -np.inf, np.abs(g - w) - atol - rtol * np.abs(w))
    excess = np.where(np.isnan(excess), np.inf, excess)   # NaN against a number: the worst
    flat = int(np.argmax(excess))
    if not np.isfinite(excess.reshape(-1)[flat]) and excess.reshape(-1)[flat] < 0:
        return None
    index = [int(i) for i in np.unravel_index(flat, got.shape)]
    return f"at {index}: {_scalar(got.reshape(-1)[flat])} vs reference {_scalar(want.reshape(-1)[flat])}"


def _scalar(x: Any) -> str:
    kind = np.asarray(x).dtype.kind
    if kind == "f":
        return f"{float(x):.9g}"   # enough digits to tell float32 neighbours apart
    if kind == "c":
        return str(complex(x))
    return str(x.item() if hasattr(x, "item") else x)


def _round_up(x: float) -> float:
    """x rounded up to two significant digits, so that the printed tolerance really suffices."""
    if x <= 0:
        return 0.0
    step = 10.0 ** (math.floor(math.log10(x)) - 1)
    return math.ceil(x / step * (1 + 1e-9)) * step


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


# ---- references

def load_litert():
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        raise CliError("--reference litert needs the ai-edge-litert package (pip install ai-edge-litert); "
                       "or give --reference expected.npz") from None
    return Interpreter


def tflite_bytes(model: Model, path: str) -> bytes:
    """The bytes LiteRT should read: the file itself when it is TFLite, else a TFLite re-encoding."""
    p = Path(path)
    if model.format == "tflite" and p.is_file():
        return p.read_bytes()
    circle_only = circle_only_ops(model)
    if circle_only:
        raise CliError(f"LiteRT cannot run Circle-only op(s) {', '.join(circle_only)}; compare with a stored "
                       "reference instead (--reference EXPECTED.npz)")
    try:
        return serialize(model, "tflite")
    except (ValueError, KeyError, TypeError) as e:
        raise CliError(f"cannot re-encode {path} as TFLite for LiteRT: {e}") from None


def run_litert(data: bytes, inputs: Sequence[np.ndarray], preserve: bool,
               signature: tuple[str, list[str], list[str]] | None = None) -> tuple[list[np.ndarray], Any]:
    """LiteRT's outputs for `inputs`; with `signature` = (key, input names, output names), through
    that signature's runner (the names in the subgraph's input/output order)."""
    Interpreter = load_litert()
    from ai_edge_litert.interpreter import OpResolverType
    try:
        with warnings.catch_warnings():  # LiteRT warns that preserving tensors is for debugging: we are
            warnings.simplefilter("ignore")
            # No default delegate: XNNPACK would hide the intermediates of the ops it takes over.
            it = Interpreter(model_content=data, experimental_preserve_all_tensors=preserve,
                             experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        if signature is not None:
            key, in_names, out_names = signature
            runner = it.get_signature_runner(key)
            feed = {}
            for name, x in zip(in_names, inputs):
                x = np.asarray(x)
                dtype = runner.get_input_details()[name]["dtype"]
                feed[name] = x if x.dtype == object else x.astype(dtype, copy=False)
            result = runner(**feed)
            return [np.array(result[name]) for name in out_names], it
        details = it.get_input_details()
        if len(details) != len(inputs):
            raise CliError(f"LiteRT sees {len(details)} inputs, onert-py {len(inputs)}")
        for d, x in zip(details, inputs):
            if tuple(d["shape"]) != np.shape(x):
                it.resize_tensor_input(d["index"], list(np.shape(x)))
        it.allocate_tensors()
        for d, x in zip(details, inputs):
            x = np.asarray(x)
            it.set_tensor(d["index"], x if x.dtype == object else x.astype(d["dtype"], copy=False))
        it.invoke()
        return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()], it
    except (RuntimeError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
        hint = ("; compare with a stored reference instead (--reference EXPECTED.npz)"
                if "unresolved custom op" in first.lower() else "")
        raise CliError(f"LiteRT failed on this model: {first.rstrip('.') if hint else first}{hint}") from None


def load_expected(path: str, names: Sequence[str]) -> list[np.ndarray]:
    """Outputs from an .npz keyed by output name (as `run --output` writes), or output_<k>."""
    if not Path(path).is_file():
        raise CliError(f"reference file not found: {path} (use --reference litert or an .npz)")
    try:
        npz = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise CliError(f"cannot read reference {path}: {e}") from None
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise CliError(f"reference {path} must be an .npz keyed by output name")
    with npz:
        out = []
        for k, name in enumerate(names):
            for key in (name, f"output_{k}", str(k)):
                if key in npz.files:
                    out.append(npz[key])
                    break
            else:
                raise CliError(f"reference {path} has no array for output {k} {name!r} "
                               f"(it holds {npz.files})")
        return out


# ---- dumping intermediates

def _safe(name: str, limit: int = 64) -> str:
    """A file-name-safe form of a tensor name; TF's fused names (hundreds of characters) are cut
    and given a hash of the full name, so they stay unique and under the file-name limit."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "t"
    if len(safe) <= limit:
        return safe
    return f"{safe[:limit - 9]}_{hashlib.sha1(name.encode()).hexdigest()[:8]}"


def _savable(arr: Any) -> np.ndarray:
    arr = np.asarray(arr)
    if arr.dtype == object:  # string tensors as bytes arrays so np.load works without pickle
        return np.array([bytes(x) for x in arr.reshape(-1)], dtype=bytes).reshape(arr.shape)
    return arr


class OpRecorder:
    """Wraps every prepared kernel of every executor so that, after each op runs, copies of its
    outputs are kept (the last call wins inside loops). The executors themselves are untouched;
    only this session's run lists hold the wrappers."""

    def __init__(self, executors: Any):
        self.values: dict[tuple[int, int, int], np.ndarray] = {}
        self.calls: Counter = Counter()
        self.order: list[tuple[int, Any, int]] = []  # (subgraph, op, tensor) in execution order
        for ex in executors:
            for k, (op, run) in enumerate(zip(ex.operations, ex.runs)):
                ex.runs[k] = self._wrap(ex, op, run)
                self.order.extend((ex.index, op, t) for t in op.outputs if t >= 0)
            ex.finalize()  # rebuild the executor's generated fast path over the wrapped runs

    def _wrap(self, ex: Any, op: Any, run: Any):
        values, store, calls, key = ex.values, self.values, self.calls, (ex.index, op.index)

        def recorded() -> None:
            run()
            calls[key] += 1
            for t in op.outputs:
                if t >= 0 and values[t] is not None:
                    # Copy: a kernel may reuse its output buffer on the next call.
                    store[(ex.index, op.index, t)] = np.array(values[t], copy=True)
        return recorded

    @staticmethod
    def filename(sg: int, op: Any, tensor_name: str) -> str:
        return f"sg{sg}_op{op.index:03d}_{op.kernel_name}_{_safe(tensor_name)}.npy"

    def save(self, directory: Path, model: Model) -> int:
        """One .npy per recorded tensor, plus index.json saying which op made it and how many times
        the op ran (inside a loop body the file holds the last iteration's value)."""
        index = []
        for sg, op, t in self.order:
            arr = self.values.get((sg, op.index, t))
            if arr is None:
                continue
            name = self.filename(sg, op, model.subgraphs[sg].tensors[t].name)
            np.save(directory / name, _savable(arr))
            index.append({"file": name, "subgraph": sg, "op": op.index, "opcode": op.kernel_name,
                          "tensor": t, "name": model.subgraphs[sg].tensors[t].name,
                          "shape": list(arr.shape), "dtype": str(arr.dtype),
                          "calls": self.calls[(sg, op.index)]})
        (directory / "index.json").write_text(json.dumps(index, indent=1))
        return len(index)


def dump_litert(directory: Path, recorder: OpRecorder, model: Model, it: Any, rtol: float,
                atol: float, subgraph: int = 0) -> tuple[int, str | None]:
    """Save LiteRT's op outputs of the subgraph that was run (subgraph 0, or the signature's) next to
    onert-py's; return (count, first difference). Subgraphs LiteRT runs inside control flow are not
    kept by it, so they are not compared."""
    out_dir = directory / "litert"
    out_dir.mkdir(exist_ok=True)
    tensors = model.subgraphs[subgraph].tensors
    first = None
    n = 0
    for sg, op, t in recorder.order:
        if sg != subgraph:
            continue
        try:
            ref = np.array(it.get_tensor(t, subgraph))
        except (ValueError, RuntimeError):
            continue  # LiteRT may not keep (or may not expose) some tensors
        np.save(out_dir / OpRecorder.filename(sg, op, tensors[t].name), _savable(ref))
        n += 1
        mine = recorder.values.get((sg, op.index, t))
        if first is None and mine is not None:
            max_abs, _, ok, note = compare_arrays(mine, ref, rtol, atol)
            if not ok:
                first = (f"subgraph {sg} op {op.index} {op.kernel_name} output {tensors[t].name!r}: "
                         + (note or f"max abs err {_fmt(max_abs)}"))
    return n, first


# ---- the command

def _is_quantized(tensor) -> bool:
    q = tensor.quantization
    return tensor.dtype.kind in "iu" and q is not None and np.size(q.scale) > 0


def _check_args(args: argparse.Namespace) -> None:
    for opt in ("rtol", "atol"):
        value = getattr(args, opt)
        if not math.isfinite(value) or value < 0:
            raise CliError(f"--{opt} must be a finite number >= 0, not {value:g}")
    if args.dump_dir and Path(args.dump_dir).exists() and not Path(args.dump_dir).is_dir():
        raise CliError(f"--dump-dir {args.dump_dir} exists and is not a directory")


def litert_signature(model: Model, key: str, subgraph: int) -> tuple[str, list[str], list[str]]:
    """(key, input names, output names) in the subgraph's input/output order, for LiteRT's runner."""
    sig = next(s for s in model.signatures if s.key == key)
    sg = model.subgraphs[subgraph]

    def names(mapping: dict[str, int], tensors: Sequence[int], what: str) -> list[str]:
        by_tensor = {t: n for n, t in mapping.items()}
        missing = [sg.tensors[t].name for t in tensors if t not in by_tensor]
        if missing:
            raise CliError(f"signature {key!r} does not name subgraph {subgraph}'s {what} {missing}; "
                           "LiteRT's signature runner cannot feed or read them")
        return [by_tensor[t] for t in tensors]
    return key, names(sig.inputs, sg.inputs, "inputs"), names(sig.outputs, sg.outputs, "outputs")


def _describe_inputs(inputs: Inputs) -> None:
    for k in range(len(inputs.names)):
        print(inputs.line(k))


def _dump(dump_dir: Path, recorder: OpRecorder, sess: Any, interpreter: Any, args: argparse.Namespace) -> None:
    n = recorder.save(dump_dir, sess.model)
    print(f"dumped {n} onert-py tensor(s) to {dump_dir}")
    if interpreter is not None:
        sg = sess.subgraph_index
        m, first = dump_litert(dump_dir, recorder, sess.model, interpreter, args.rtol, args.atol, sg)
        print(f"dumped {m} LiteRT subgraph-{sg} tensor(s) to {dump_dir / 'litert'}")
        print("first differing op: " + (first or f"none in subgraph {sg}"))


def compare_cmd(args: argparse.Namespace) -> int:
    _check_args(args)
    # A dump records each op's outputs as it runs: a WHILE the jit backend compiles whole runs no op
    # (the controlflow kernel leaves loops uncompiled when every tensor is preserved). Only then: the
    # memory plan, which preserving turns off, stays in the runs a dump is made to debug.
    jit = args.dump_dir and "jit" in backend_choice(args).names
    sess = open_session(args, preserve_all_tensors=True) if jit else open_session(args)
    inputs = prepare_inputs(sess, args)
    names = [i.name for i in sess.get_outputs_tensorinfo()]
    # Everything about the reference is checked before the (possibly long) run.
    if args.reference == "litert":
        load_litert()
        data = tflite_bytes(sess.model, args.model)
        signature = (litert_signature(sess.model, args.signature, sess.subgraph_index)
                     if args.signature else None)
        ref_label = "LiteRT"
    else:
        want = load_expected(args.reference, names)
        ref_label = args.reference
    if args.save_inputs:
        save_arrays(args.save_inputs, inputs.names, inputs.arrays, prefix="input")
    dump_dir = Path(args.dump_dir) if args.dump_dir else None
    if dump_dir is not None:
        try:
            dump_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CliError(f"cannot create --dump-dir {dump_dir}: {e}") from None
    recorder = OpRecorder(sess.executors) if dump_dir is not None else None
    got = run_inference(sess, inputs)

    interpreter = None
    if args.reference == "litert":
        want, interpreter = run_litert(data, inputs.arrays, preserve=dump_dir is not None, signature=signature)
    if len(want) != len(got):
        raise CliError(f"{ref_label} gives {len(want)} outputs, onert-py {len(got)}")

    rows, all_ok, atols, worst = [], True, [], []
    main = sess.model.subgraphs[sess.subgraph_index]
    quantized = [_is_quantized(main.tensors[t]) for t in main.outputs]
    for k, (name, g, w) in enumerate(zip(names, got, want)):
        # LiteRT must give our dtypes; a stored file may hold wider ones of the same kind
        max_abs, max_rel, ok, note, bad = compare_detail(g, w, args.rtol, args.atol,
                                                         strict_dtype=args.reference == "litert")
        all_ok &= ok
        if not ok:  # a dtype LiteRT disagrees on is no rounding matter: no atol suggestion then
            atols.append(None if note and args.reference == "litert" else needed_atol(g, w, args.rtol))
            where = worst_element(g, w, args.rtol, args.atol)
            if where:
                worst.append(f"output {k} {name!r} is furthest off {where}")
        dtype = "string" if g.dtype == object else str(g.dtype)
        # a quantized integer output's error counts steps of its scale: LSBs
        lsb = k < len(quantized) and quantized[k] and max_abs is not None
        abs_text = f"{_fmt(max_abs)} LSB" if lsb else _fmt(max_abs)
        rows.append((str(k), name, str(list(g.shape)), dtype, abs_text, _fmt(max_rel),
                     "-" if bad is None else f"{bad}/{np.size(g)}",
                     ("PASS" if ok else "FAIL") + (f" ({note})" if note else "")))
    print(f"onert-py vs {ref_label} (rtol {args.rtol:g}, atol {args.atol:g})")
    _describe_inputs(inputs)
    print(format_table(("#", "output", "shape", "dtype", "max abs err", "max rel err", "mismatched", "result"),
                       rows))
    for line in worst:
        print(line)

    if recorder is not None:
        try:
            _dump(dump_dir, recorder, sess, interpreter, args)
        except OSError as e:
            raise CliError(f"cannot write to --dump-dir {dump_dir}: {e}") from None
    if args.save_inputs:
        print(f"saved {len(inputs.arrays)} input(s) to {args.save_inputs}")
    if all_ok:
        print("PASS")
        return 0
    if atols and all(a is not None for a in atols):  # float rounding only: say how far off
        print(f"FAIL (every output would pass with --atol {_round_up(max(atols)):.2g} at --rtol {args.rtol:g})")
    else:
        print("FAIL")
    return 1
