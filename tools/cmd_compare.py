"""`onert-py compare`: run a model on onert-py and on a reference (LiteRT or a stored .npz) with the
same inputs, judge each output, show which op adds the error (per-op errors against LiteRT's
intermediates), dump every intermediate tensor and write a JSON report.

The judgement (`judge`, with `Rule`) is shared with the conformance report
(tools/conformance/report.py), so docs/conformance.md and `compare` call the same outputs a match:

- float outputs, by default: max |got - want| <= tol * scale(want), tol 2e-2 (DEFAULT_TOL), the scale
  being the output's range max(want) - min(want) over its finite values; a constant or one-element
  output has no range and is scaled by max(|want|, 1). NaN must meet NaN and inf the same inf.
- with --rtol/--atol (the strict rule): every element |got - want| <= atol + rtol * |want|.
- integers, bools and strings: equal.

Why 2e-2 of the range: on mediapipe's models with random inputs, LiteRT's own XNNPACK path and its
builtin or reference kernels differ by up to 1.5e-2 of an output's range (pose_landmark_full's
segmentation logits, rarely: 99% of inputs under 5.4e-3; other outputs ~1e-5), while plain kernel bugs
- a tap shifted by one pixel, a channel dropped, an output value off by 5% of the range - move outputs
by 2e-2 to 1 of their range (docs/conformance.md).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from onert_py.ir import Model
from onert_py.schema.writer import serialize
from onert_py.tools.errors import CliError
from onert_py.tools.formatting import format_table, save_arrays
from onert_py.tools.inputs import Inputs, prepare_inputs, run_inference
from onert_py.tools.options import (add_executor_options, add_input_options, add_model_options, backend_choice,
                                    check_distinct_files, check_writable, circle_only_ops, executor_choice,
                                    open_session)

DEFAULT_TOL = 2e-2
# the strict rule's defaults for the option not given (--rtol alone keeps atol 1e-6, and so on)
STRICT_RTOL, STRICT_ATOL = 1e-5, 1e-6
TOP_OPS = 10   # ops listed by added error

# --reference keywords: LiteRT's op resolver for each, and how the output names it.
LITERT_REFERENCES = {
    "litert": ("AUTO", "default resolver (XNNPACK delegate), as LiteRT runs by default"),
    "litert-ref": ("BUILTIN_WITHOUT_DEFAULT_DELEGATES", "builtin kernels without delegates "
                                                        "(BUILTIN_WITHOUT_DEFAULT_DELEGATES)"),
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare", help="compare onert-py's outputs with LiteRT's or stored ones",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a model on onert-py and on a reference with the same inputs and print a per-output "
                    "error table.\n\n"
                    "How outputs are judged (the rule of docs/conformance.md too):\n"
                    f"  float outputs: max|got - want| <= tol x range(want), tol {DEFAULT_TOL:g} (--tol);\n"
                    "    range = max(want) - min(want) over finite values (a constant or one-element output:\n"
                    "    max(|want|, 1)); NaN must meet NaN, inf the same inf.\n"
                    "  with --rtol or --atol (strict): every element |got - want| <= atol + rtol x |want|\n"
                    f"    (the one not given: rtol {STRICT_RTOL:g}, atol {STRICT_ATOL:g}).\n"
                    "  integers, bools and strings: equal.\n"
                    "LiteRT's own XNNPACK and reference kernels differ by up to 1.5e-2 of the range on\n"
                    "mediapipe's models (rarely; mostly < 5e-3); kernel bugs move outputs by 2e-2 to 1 of it.\n\n"
                    "With LiteRT as the reference, --dump-dir and --report also show, per op of the subgraph\n"
                    "run, its output's error relative to the tensor's range and the error it adds beyond\n"
                    "what its inputs carried: the op to look at.\n"
                    "Exit code 0 all pass, 1 a mismatch, 2 an error.")
    add_model_options(p, "compare")
    add_executor_options(p)
    p.add_argument("--reference", default="litert", metavar="litert|litert-ref|EXPECTED.npz",
                   help="'litert' (default): ai-edge-litert with its default op resolver and delegate "
                        "(XNNPACK), what LiteRT users run; 'litert-ref': LiteRT's builtin kernels without "
                        "delegates (quantized models: onert-py's bit-exact target); or an .npz keyed by "
                        "output name (as `run --output` writes)")
    p.add_argument("--tol", type=float, default=None,
                   help=f"float outputs pass when max|got - want| <= TOL x range(want) (default {DEFAULT_TOL:g})")
    p.add_argument("--rtol", type=float, default=None,
                   help="strict elementwise rule instead: |got - want| <= atol + rtol x |want| "
                        f"(default with --atol: {STRICT_RTOL:g})")
    p.add_argument("--atol", type=float, default=None,
                   help=f"strict rule's absolute tolerance (default with --rtol: {STRICT_ATOL:g})")
    add_input_options(p, save=True)
    p.add_argument("--dump-dir", metavar="DIR",
                   help="save every op output as .npy here (with index.json: op, tensor, shape, calls and, "
                        "with LiteRT, the error), LiteRT's tensors of the subgraph run in DIR/litert, and "
                        "print the ops that add the most error (WHILE loops then run op by op, not as one "
                        "jit-compiled loop)")
    p.add_argument("--report", metavar="OUT.json",
                   help="write the outputs' errors as JSON (and, with LiteRT as the reference, every op's: "
                        "`onert-py view --errors` colours the graph with them)")
    p.set_defaults(func=compare_cmd)


# ---- the rule

@dataclass(frozen=True)
class Rule:
    """How a float output is judged: relative to its range (tol), or elementwise (rtol, atol) when
    `strict`. Integers, bools and strings are always compared exactly."""
    tol: float = DEFAULT_TOL
    rtol: float | None = None
    atol: float | None = None

    @property
    def strict(self) -> bool:
        return self.rtol is not None or self.atol is not None

    @property
    def bounds(self) -> tuple[float, float]:
        """(rtol, atol) of the strict rule, the one not given at its default."""
        return (STRICT_RTOL if self.rtol is None else self.rtol, STRICT_ATOL if self.atol is None else self.atol)

    def describe(self) -> str:
        if self.strict:
            rtol, atol = self.bounds
            return (f"strict (--rtol/--atol given): every element |got - want| <= atol + rtol x |want| "
                    f"(rtol {rtol:g}, atol {atol:g}); ints, bools, strings equal")
        return (f"max|got - want| <= {self.tol:g} x range(want) per float output; ints, bools, strings equal")


@dataclass
class Verdict:
    """One output judged. rel_err = max_abs / scale (None for strings and shape mismatches)."""
    ok: bool
    max_abs: float | None
    scale: float | None      # the output's range (or max(|want|, 1) when it has none)
    rel_err: float | None
    max_rel: float | None    # max elementwise |got - want| / |want| (the strict rule's view)
    bad: int | None          # elements outside the bound (None when shapes differ)
    note: str


def value_scale(want: np.ndarray) -> float:
    """What an error is measured against: max(want) - min(want) over the finite values; without a
    range (one value, or all equal) max(|want|, 1), so that a lone value near 0 (a 1e-17 probability)
    is judged in absolute terms rather than against its own tiny size."""
    w = np.asarray(want)
    if w.dtype.kind not in "biufc" or w.size == 0:
        return 1.0
    parts = (w.real, w.imag) if w.dtype.kind == "c" else (w,)
    spans, mags = [], []
    for part in parts:
        x = part.astype(np.float64)
        x = x[np.isfinite(x)]
        if x.size:
            spans.append(float(x.max() - x.min()))
            mags.append(float(np.abs(x).max()))
    span = max(spans, default=0.0)
    return span if span > 0 else max(max(mags, default=0.0), 1.0)


def error_vs_range(got: np.ndarray, want: np.ndarray) -> tuple[float, float, float] | None:
    """(max abs err, scale, max abs err / scale) of two numeric arrays of one shape, over the elements
    both hold as the same non-finite value excluded; a NaN or inf against anything else gives inf.
    None for strings and shape mismatches."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype.kind not in "biufc" or want.dtype.kind not in "biufc":
        return None
    if got.size == 0:
        return 0.0, 1.0, 0.0
    g, w, same = _widened(got, want)
    with np.errstate(invalid="ignore"):   # inf - inf: NaN, counted as an infinite error
        diff = np.where(same, 0.0, np.abs(g - w))
    max_abs = float(np.max(np.where(np.isnan(diff), np.inf, diff)))
    scale = value_scale(want)
    return max_abs, scale, max_abs / scale


def judge(got: np.ndarray, want: np.ndarray, rule: Rule = Rule(), strict_dtype: bool = True) -> Verdict:
    """Judge one output against its reference with `rule` (see the module docstring). With
    `strict_dtype` False a dtype of the same kind (a float64 .npz made with numpy) is compared by
    value and only noted."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return Verdict(False, None, None, None, None, None, f"shape {list(got.shape)} vs reference {list(want.shape)}")
    if got.dtype.kind in "OSU" or want.dtype.kind in "OSU":
        def as_bytes(x):
            return [s.encode() if isinstance(s, str) else bytes(s) for s in x.reshape(-1)]
        bad = sum(a != b for a, b in zip(as_bytes(got), as_bytes(want)))
        return Verdict(bad == 0, None, None, None, None, bad, "")
    note = "" if got.dtype == want.dtype else f"dtype {got.dtype} vs reference {want.dtype}"
    dtype_ok = not note or (not strict_dtype and got.dtype.kind == want.dtype.kind)
    max_abs, scale, rel_err = error_vs_range(got, want)
    if got.size == 0:
        return Verdict(dtype_ok, 0.0, scale, 0.0, 0.0, 0, note)
    g, w, same = _widened(got, want)
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(g - w))
        mag = np.abs(w)
        elem_rel = np.divide(diff, mag, out=np.zeros_like(diff), where=mag > 0)
    max_rel = float(np.max(elem_rel))
    if got.dtype.kind in "biu" and want.dtype.kind in "biu":
        good = same
    elif rule.strict:
        rtol, atol = rule.bounds
        good = same | (diff <= atol + rtol * mag)   # NaN bounds (NaN want) fail unless `same`
    else:
        good = same | (diff <= rule.tol * scale)
    bad = int(good.size - np.count_nonzero(good))
    return Verdict(bad == 0 and dtype_ok, max_abs, scale, rel_err, max_rel, bad, note)


def compare_detail(got: np.ndarray, want: np.ndarray, rtol: float, atol: float, strict_dtype: bool = True
                   ) -> tuple[float | None, float | None, bool, str, int | None]:
    """The strict rule: (max abs err, max rel err, ok, note, elements out of tolerance)."""
    v = judge(got, want, Rule(rtol=rtol, atol=atol), strict_dtype)
    return v.max_abs, v.max_rel, v.ok, v.note, v.bad


def compare_arrays(got: np.ndarray, want: np.ndarray, rtol: float, atol: float
                   ) -> tuple[float | None, float | None, bool, str]:
    """The strict rule: (max abs err, max rel err, ok, note)."""
    return compare_detail(got, want, rtol, atol)[:4]


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


def needed_tol(got: np.ndarray, want: np.ndarray) -> float | None:
    """The smallest --tol with which a float output would pass; None when no tolerance can help."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype.kind != want.dtype.kind or got.dtype.kind not in "fc":
        return None
    err = error_vs_range(got, want)
    return None if err is None or not math.isfinite(err[2]) else err[2]


def worst_element(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str | None:
    """Where a numeric output is furthest out of |got - want| <= atol + rtol * |want|:
    "at [0, 3]: 0.51 vs reference 0.62"."""
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


def _json_float(x: float | None) -> float | None:
    """JSON has no inf or NaN: those become null (the row's note says what happened)."""
    return None if x is None or not math.isfinite(x) else float(x)


# ---- references

def load_litert():
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        raise CliError("--reference litert needs the ai-edge-litert package (pip install ai-edge-litert); "
                       "or give --reference expected.npz") from None
    return Interpreter


def litert_version() -> str:
    try:
        import ai_edge_litert
        version = getattr(ai_edge_litert, "__version__", None)
        if version:
            return str(version)
        from importlib.metadata import version as dist_version
        return dist_version("ai-edge-litert")
    except Exception:  # noqa: BLE001 - only a label
        return "?"


def reference_label(reference: str) -> str:
    """"LiteRT 2.3.0, default resolver (XNNPACK delegate), ..." or the .npz path."""
    if reference in LITERT_REFERENCES:
        return f"LiteRT {litert_version()}, {LITERT_REFERENCES[reference][1]}"
    return reference


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


class LiteRTFailed(Exception):
    """LiteRT could not build or run the model with one resolver (message: LiteRT's first line)."""


def _invoke_litert(data: bytes, inputs: Sequence[np.ndarray], resolver: str, preserve: bool,
                   signature: tuple[str, list[str], list[str]] | None) -> tuple[list[np.ndarray], Any]:
    Interpreter = load_litert()
    from ai_edge_litert.interpreter import OpResolverType
    try:
        with warnings.catch_warnings():  # LiteRT warns that preserving tensors is for debugging: we are
            warnings.simplefilter("ignore")
            it = Interpreter(model_content=data, experimental_preserve_all_tensors=preserve,
                             experimental_op_resolver_type=getattr(OpResolverType, resolver))
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
        raise LiteRTFailed(first.rstrip(".")) from None


def run_litert(data: bytes, inputs: Sequence[np.ndarray], reference: str = "litert", preserve: bool = False,
               signature: tuple[str, list[str], list[str]] | None = None) -> tuple[list[np.ndarray], Any]:
    """LiteRT's outputs for `inputs` with the resolver of `reference` ('litert' or 'litert-ref'); with
    `signature` = (key, input names, output names), through that signature's runner. A failure is a
    CliError naming the resolver and what to try instead."""
    try:
        return _invoke_litert(data, inputs, LITERT_REFERENCES[reference][0], preserve, signature)
    except LiteRTFailed as e:
        raise CliError(litert_failure(reference, str(e))) from None


def litert_failure(reference: str, message: str) -> str:
    """'LiteRT (its default resolver ...) failed on this model: ...; try ...'."""
    custom = "unresolved custom op" in message.lower()
    if reference == "litert":
        what = "its default resolver with XNNPACK"
        # builtin kernels resolve no custom op XNNPACK does not: only a stored reference helps then
        hint = "compare with a stored reference instead (--reference EXPECTED.npz)" if custom else \
            "try --reference litert-ref (builtin kernels, no delegate) or a stored reference (--reference EXPECTED.npz)"
    else:
        what = "its builtin kernels without delegates"
        hint = ("try --reference litert (LiteRT's default resolver: XNNPACK runs some custom ops, e.g. "
                "mediapipe's Convolution2DTransposeBias) or a stored reference (--reference EXPECTED.npz)")
    return f"LiteRT ({what}, --reference {reference}) failed on this model: {message}; {hint}"


def load_expected(path: str, names: Sequence[str]) -> list[np.ndarray]:
    """Outputs from an .npz keyed by output name (as `run --output` writes), or output_<k>."""
    if not Path(path).is_file():
        raise CliError(f"reference file not found: {path} (--reference takes litert, litert-ref or an .npz file)")
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


# ---- recording and dumping intermediates

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

    def ops_of(self, subgraph: int) -> list[Any]:
        """The ops of one subgraph that ran, in execution order."""
        seen, ops = set(), []
        for sg, op, _ in self.order:
            if sg == subgraph and op.index not in seen:
                seen.add(op.index)
                ops.append(op)
        return ops

    @staticmethod
    def filename(sg: int, op: Any, tensor_name: str) -> str:
        return f"sg{sg}_op{op.index:03d}_{op.kernel_name}_{_safe(tensor_name)}.npy"

    def save(self, directory: Path, model: Model, errors: dict[tuple[int, int], dict] | None = None) -> int:
        """One .npy per recorded tensor, plus index.json saying which op made it, how many times the op
        ran (inside a loop body the file holds the last iteration's value) and, given `errors`
        ((subgraph, tensor) -> error row), its error against LiteRT."""
        index = []
        for sg, op, t in self.order:
            arr = self.values.get((sg, op.index, t))
            if arr is None:
                continue
            name = self.filename(sg, op, model.subgraphs[sg].tensors[t].name)
            np.save(directory / name, _savable(arr))
            entry = {"file": name, "subgraph": sg, "op": op.index, "opcode": op.kernel_name,
                     "tensor": t, "name": model.subgraphs[sg].tensors[t].name,
                     "shape": list(arr.shape), "dtype": str(arr.dtype),
                     "calls": self.calls[(sg, op.index)]}
            err = (errors or {}).get((sg, t))
            if err is not None:
                entry.update({k: err[k] for k in ("max_abs_err", "range", "rel_err")})
            index.append(entry)
        (directory / "index.json").write_text(json.dumps(index, indent=1))
        return len(index)


def save_litert_tensors(directory: Path, recorder: OpRecorder, model: Model, tensors: dict[int, np.ndarray],
                        subgraph: int) -> int:
    """LiteRT's op outputs of the subgraph run, named as onert-py's, in DIR/litert."""
    out_dir = directory / "litert"
    out_dir.mkdir(exist_ok=True)
    names = model.subgraphs[subgraph].tensors
    n = 0
    for sg, op, t in recorder.order:
        if sg == subgraph and t in tensors:
            np.save(out_dir / OpRecorder.filename(sg, op, names[t].name), _savable(tensors[t]))
            n += 1
    return n


# ---- per-op errors

@dataclass
class OpErrors:
    """Per-op errors of one subgraph against LiteRT's intermediates."""
    subgraph: int
    source: str              # which LiteRT run the intermediates came from
    rows: list[dict]         # one per op that ran, in execution order (the report's "ops")
    note: str = ""           # why some or all ops could not be compared

    def compared(self) -> list[dict]:
        return [r for r in self.rows if r["rel_err"] is not None]

    def worst(self) -> dict | None:
        rows = [r for r in self.rows if r["added_err"] is not None]
        return max(rows, key=lambda r: r["added_err"]) if rows else None

    def tensor_errors(self) -> dict[tuple[int, int], dict]:
        return {(self.subgraph, o["tensor"]): o for r in self.rows for o in r["outputs"] if "rel_err" in o}


def litert_intermediates(interpreter: Any, tensors: Sequence[int], subgraph: int) -> dict[int, np.ndarray]:
    """The values LiteRT kept for `tensors` (those it does not expose are left out)."""
    out = {}
    for t in tensors:
        try:
            out[t] = np.array(interpreter.get_tensor(t, subgraph))
        except (ValueError, RuntimeError, TypeError):
            continue
    return out


def op_errors(recorder: OpRecorder, model: Model, ref: dict[int, np.ndarray], subgraph: int,
              source: str) -> OpErrors:
    """Per op of `subgraph` in execution order: each output's max abs error, range and error relative to
    the range, the op's error (its worst output) and the error it adds: its error minus the largest
    among its inputs (subgraph inputs and constants carry none), floored at 0. Ops whose inputs are all
    constants are skipped: runtimes fold them (XNNPACK never writes its fp16 weight DEQUANTIZEs)."""
    sg = model.subgraphs[subgraph]
    carried: dict[int, float] = {}     # tensor -> rel error it carries
    rows = []
    for op in recorder.ops_of(subgraph):
        row: dict[str, Any] = {"subgraph": subgraph, "index": op.index, "op": op.kernel_name, "outputs": [],
                               "rel_err": None, "added_err": None}
        consts = [t < 0 or sg.tensors[t].data is not None for t in op.inputs]
        if op.inputs and all(consts):
            row["note"] = "constant inputs (folded)"
        for t in (t for t in op.outputs if t >= 0):
            mine = recorder.values.get((subgraph, op.index, t))
            out: dict[str, Any] = {"tensor": t, "name": sg.tensors[t].name,
                                   "shape": list(np.shape(mine)) if mine is not None else list(sg.tensors[t].shape)}
            if mine is not None and t in ref and "note" not in row:
                err = error_vs_range(mine, ref[t])
                if err is None:
                    out["note"] = (f"shape {list(np.shape(mine))} vs LiteRT {list(np.shape(ref[t]))}"
                                   if np.shape(mine) != np.shape(ref[t]) else "not numeric")
                else:
                    out.update(max_abs_err=err[0], range=err[1], rel_err=err[2])
                    carried[t] = err[2]
            row["outputs"].append(out)
        errs = [o["rel_err"] for o in row["outputs"] if "rel_err" in o]
        if errs:
            row["rel_err"] = max(errs)
            upstream = [carried[t] for t in op.inputs if t in carried]
            row["inputs_err"] = max(upstream, default=0.0)
            row["added_err"] = max(row["rel_err"] - row["inputs_err"], 0.0)
        rows.append(row)
    return OpErrors(subgraph, source, rows)


def compute_op_errors(recorder: OpRecorder, model: Model, data: bytes, inputs: Sequence[np.ndarray],
                      reference: str, subgraph: int,
                      signature: tuple[str, list[str], list[str]] | None) -> tuple[OpErrors, dict[int, np.ndarray]]:
    """Run LiteRT again keeping every tensor (preserve_all_tensors) with the reference's resolver, or,
    when that fails, the other one, and measure every op against it."""
    tensors = [t for sg, _, t in recorder.order if sg == subgraph]
    tried = []
    for ref in (reference, *(r for r in LITERT_REFERENCES if r != reference)):
        resolver = LITERT_REFERENCES[ref][1].split(" (")[0]
        try:
            _, it = _invoke_litert(data, inputs, LITERT_REFERENCES[ref][0], True, signature)
        except LiteRTFailed as e:
            tried.append(f"with its {resolver}: {e}")
            continue
        source = f"LiteRT's {resolver}, run again with preserve_all_tensors"
        if ref != reference:
            source += f" (LiteRT failed to keep the intermediates {tried[0]})"
        values = litert_intermediates(it, tensors, subgraph)
        return op_errors(recorder, model, values, subgraph, source), values
    return OpErrors(subgraph, "", [], "LiteRT failed with preserve_all_tensors (" + "; ".join(tried) + ")"), {}


def print_op_errors(errors: OpErrors, tol: float) -> None:
    if not errors.rows:
        print(f"per-op errors: not available: {errors.note}")
        return
    compared = errors.compared()
    print(f"per-op errors, subgraph {errors.subgraph}: {len(compared)} of {len(errors.rows)} ops compared "
          f"with {errors.source}")
    print("  err/range: the op's output error relative to that tensor's range; added: that minus the largest "
          "err/range among its inputs")
    structural = [(r, o) for r in errors.rows for o in r["outputs"] if o.get("note", "").startswith("shape")]
    for r, o in structural[:1]:
        print(f"first shape difference: op {r['index']} {r['op']} output {o['name']!r}: {o['note']}")
    top = sorted((r for r in compared if r["added_err"] is not None), key=lambda r: -r["added_err"])[:TOP_OPS]
    if not top:
        return
    if all(r["rel_err"] == 0 for r in compared):
        print("every compared op output matches LiteRT exactly")
        return
    table = []
    for r in top:
        worst_out = max((o for o in r["outputs"] if "rel_err" in o), key=lambda o: o["rel_err"])
        table.append((str(r["index"]), r["op"], _short(worst_out["name"]), _fmt(r["rel_err"]),
                      _fmt(r["inputs_err"]), _fmt(r["added_err"])))
    print(format_table(("op", "type", "output", "err/range", "inputs' err", "added"), table))
    worst = top[0]
    if worst["added_err"] > tol:
        print(f"look at op {worst['index']} {worst['op']}: adds {worst['added_err']:.2g} of range")
    else:
        print(f"op {worst['index']} {worst['op']} adds the most, {worst['added_err']:.2g} of range: "
              f"within the tolerance ({tol:g}), rounding")


def _short(name: str, limit: int = 40) -> str:
    return name if len(name) <= limit else name[:limit - 3] + "..."


# ---- the command

def _is_quantized(tensor) -> bool:
    q = tensor.quantization
    return tensor.dtype.kind in "iu" and q is not None and np.size(q.scale) > 0


def rule_from_args(args: argparse.Namespace) -> Rule:
    for opt in ("tol", "rtol", "atol"):
        value = getattr(args, opt)
        if value is not None and (not math.isfinite(value) or value < 0):
            raise CliError(f"--{opt} must be a finite number >= 0, not {value:g}")
    if args.tol is not None and (args.rtol is not None or args.atol is not None):
        raise CliError("--tol (relative to the range) and --rtol/--atol (strict, elementwise) are two rules; "
                       "give one")
    return Rule(tol=DEFAULT_TOL if args.tol is None else args.tol, rtol=args.rtol, atol=args.atol)


def _check_args(args: argparse.Namespace) -> Rule:
    rule = rule_from_args(args)
    if args.reference not in LITERT_REFERENCES and not Path(args.reference).is_file():
        raise CliError(f"reference file not found: {args.reference} (--reference takes litert, litert-ref "
                       "or an .npz file)")
    if args.dump_dir and Path(args.dump_dir).exists() and not Path(args.dump_dir).is_dir():
        raise CliError(f"--dump-dir {args.dump_dir} exists and is not a directory")
    check_writable(args.report, "--report")
    check_distinct_files(save_inputs=args.save_inputs, report=args.report)
    return rule


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


def _output_rows(names: Sequence[str], got: Sequence[np.ndarray], want: Sequence[np.ndarray], rule: Rule,
                 quantized: Sequence[bool], lenient: bool) -> tuple[list[dict], list[str]]:
    """One dict per output (the report's "outputs") and the "furthest off" lines."""
    rows, worst = [], []
    for k, (name, g, w) in enumerate(zip(names, got, want)):
        v = judge(g, w, rule, strict_dtype=not lenient)
        row = {"index": k, "name": name, "shape": list(np.shape(g)),
               "dtype": "string" if np.asarray(g).dtype == object else str(np.asarray(g).dtype),
               "max_abs_err": v.max_abs, "range": v.scale, "rel_err": v.rel_err, "max_rel_err": v.max_rel,
               "mismatched": v.bad, "size": int(np.size(g)), "pass": v.ok, "note": v.note,
               "quantized": bool(k < len(quantized) and quantized[k])}
        if not v.ok:
            rtol, atol = rule.bounds if rule.strict else (0.0, rule.tol * (v.scale or 0.0))
            where = worst_element(g, w, rtol, atol)
            if where:
                worst.append(f"output {k} {name!r} is furthest off {where}")
            row["needed_atol"] = needed_atol(g, w, rtol) if rule.strict else None
            row["needed_tol"] = None if rule.strict else needed_tol(g, w)
        rows.append(row)
    return rows, worst


def _table(rows: list[dict], rule: Rule) -> str:
    lines = []
    for r in rows:
        abs_text = _fmt(r["max_abs_err"]) + (" LSB" if r["quantized"] and r["max_abs_err"] is not None else "")
        mismatched = "-" if r["mismatched"] is None else f"{r['mismatched']}/{r['size']}"
        result = ("PASS" if r["pass"] else "FAIL") + (f" ({r['note']})" if r["note"] else "")
        if rule.strict:
            lines.append((str(r["index"]), r["name"], str(r["shape"]), r["dtype"], abs_text, _fmt(r["max_rel_err"]),
                          mismatched, result))
        else:
            lines.append((str(r["index"]), r["name"], str(r["shape"]), r["dtype"], abs_text, _fmt(r["range"]),
                          _fmt(r["rel_err"]), mismatched, result))
    header = (("#", "output", "shape", "dtype", "max abs err", "max rel err", "mismatched", "result") if rule.strict
              else ("#", "output", "shape", "dtype", "max abs err", "range", "err/range", "mismatched", "result"))
    return format_table(header, lines)


def _write_report(path: str, payload: dict) -> None:
    try:
        Path(path).write_text(json.dumps(payload, indent=1, default=lambda o: o.item()) + "\n")
    except OSError as e:
        raise CliError(f"cannot write --report {path}: {e}") from None


def _clean(value: Any) -> Any:
    """A JSON-safe copy: inf and NaN (a NaN against a number) become null."""
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def compare_cmd(args: argparse.Namespace) -> int:
    rule = _check_args(args)
    litert = args.reference in LITERT_REFERENCES
    # Per-op errors need every op's outputs (onert-py's, recorded as they run) and LiteRT's intermediates.
    per_op = litert and bool(args.dump_dir or args.report)
    record = bool(args.dump_dir) or per_op
    # A dump records each op's outputs as it runs: a WHILE the jit backend compiles whole runs no op
    # (the controlflow kernel leaves loops uncompiled when every tensor is preserved). Only then: the
    # memory plan, which preserving turns off, stays in the runs a dump is made to debug.
    jit = args.dump_dir and "jit" in backend_choice(args).names
    options = {"preserve_all_tensors": True} if jit else {}
    if record:
        options["fuse_ops"] = False   # every op's outputs are recorded: none may be fused into another's kernel
    executor = executor_choice(args)
    if record and executor.executor == "dataflow":
        # The recorder wraps the session's own kernels; the dataflow executor's worker threads run compiled
        # copies of them, so a recording run is a sequential one (same order as linear, same values).
        options["inter_op_threads"] = 1
        print("note: ops are recorded under the dataflow executor: it runs sequentially (inter_op_threads 1), "
              "and the control-flow ops it lowers (IF, WHILE, CALL) run as the ops inside them, so they "
              "have no rows of their own")
    sess = open_session(args, **options)
    inputs = prepare_inputs(sess, args)
    names = [i.name for i in sess.get_outputs_tensorinfo()]
    # Everything about the reference is checked before the (possibly long) run.
    signature = None
    if litert:
        load_litert()
        data = tflite_bytes(sess.model, args.model)
        signature = (litert_signature(sess.model, args.signature, sess.subgraph_index)
                     if args.signature else None)
    else:
        want = load_expected(args.reference, names)
    label = reference_label(args.reference)
    if args.save_inputs:
        save_arrays(args.save_inputs, inputs.names, inputs.arrays, prefix="input")
    dump_dir = Path(args.dump_dir) if args.dump_dir else None
    if dump_dir is not None:
        try:
            dump_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CliError(f"cannot create --dump-dir {dump_dir}: {e}") from None
    recorder = OpRecorder(sess.executors) if record else None
    got = run_inference(sess, inputs)

    if litert:
        want, _ = run_litert(data, inputs.arrays, args.reference, signature=signature)
    if len(want) != len(got):
        raise CliError(f"{label} gives {len(want)} outputs, onert-py {len(got)}")

    main_sg = sess.model.subgraphs[sess.subgraph_index]
    quantized = [_is_quantized(main_sg.tensors[t]) for t in main_sg.outputs]
    rows, worst = _output_rows(names, got, want, rule, quantized, lenient=not litert)
    all_ok = all(r["pass"] for r in rows)
    print(f"onert-py vs {label}")
    print(f"rule: {rule.describe()}")
    _describe_inputs(inputs)
    print(_table(rows, rule))
    for line in worst:
        print(line)
    if litert and args.reference == "litert" and any(r["quantized"] and not r["pass"] for r in rows):
        print("note: LiteRT's XNNPACK computes quantized ops differently from its builtin kernels, which "
              "onert-py follows bit-exactly: try --reference litert-ref")

    errors, litert_values = None, {}
    if per_op:
        errors, litert_values = compute_op_errors(recorder, sess.model, data, inputs.arrays, args.reference,
                                                  sess.subgraph_index, signature)
        print_op_errors(errors, rule.tol)
    if dump_dir is not None:
        try:
            n = recorder.save(dump_dir, sess.model, errors.tensor_errors() if errors else None)
            print(f"dumped {n} onert-py tensor(s) to {dump_dir}")
            if litert:
                m = save_litert_tensors(dump_dir, recorder, sess.model, litert_values, sess.subgraph_index)
                print(f"dumped {m} LiteRT subgraph-{sess.subgraph_index} tensor(s) to {dump_dir / 'litert'}")
        except OSError as e:
            raise CliError(f"cannot write to --dump-dir {dump_dir}: {e}") from None
    if args.report:
        payload = {"model": str(args.model), "reference": args.reference, "reference_label": label,
                   "rule": rule.describe(), "tol": None if rule.strict else rule.tol,
                   "rtol": rule.bounds[0] if rule.strict else None, "atol": rule.bounds[1] if rule.strict else None,
                   "pass": all_ok, "outputs": rows}
        if errors is not None:
            payload["ops_source"] = errors.source or errors.note
            if errors.rows:
                payload["ops"] = [{k: v for k, v in r.items()} for r in errors.rows]
            w = errors.worst()
            payload["worst_op"] = None if w is None else {k: w[k] for k in ("subgraph", "index", "op", "added_err")}
        _write_report(args.report, _clean(payload))
        print(f"wrote {args.report}")
    if args.save_inputs:
        print(f"saved {len(inputs.arrays)} input(s) to {args.save_inputs}")
    if all_ok:
        print("PASS")
        return 0
    failed = [r for r in rows if not r["pass"]]
    if rule.strict:
        atols = [None if r["note"] and litert else r.get("needed_atol") for r in failed]
        if atols and all(a is not None for a in atols):  # float rounding only: say how far off
            rtol = rule.bounds[0]
            print(f"FAIL (every output would pass with --atol {_round_up(max(atols)):.2g} at --rtol {rtol:g})")
            return 1
    else:
        tols = [None if r["note"] else r.get("needed_tol") for r in failed]
        if tols and all(t is not None for t in tols):
            print(f"FAIL (every output would pass with --tol {_round_up(max(tols)):.2g})")
            return 1
    print("FAIL")
    return 1
