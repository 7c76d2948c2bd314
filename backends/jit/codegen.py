"""Generated kernels: elementwise expressions (one op's, a loop's) written as Python source, compiled
by numba and cached on disk.

An elementwise op declares its *expression* (`expression("ADD", ...)` in jit/elementwise.py): a
template over its inputs' values at one element ("({0} + {1})"), with how its inputs are indexed. Code
made of expressions is a loop over the output's elements per op, each tensor a flat array:
- an input of the output's size is read at the same flat index (same shape, or a reshape);
- a one-element input at 0;
- any other broadcast input through an index array made at prepare time (numpy's broadcasting of
  the flat indices), passed as one more argument.
Each op writes its own output array, so float results round per op exactly as the cpu backend's.

The source of a generated function goes to a file named by its hash in the cache directory
(ONERT_PY_JIT_CACHE, else ~/.cache/onert-py/jit) and is imported from there, so numba's disk cache
(`cache=True`) holds its compiled code for the next process.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

# numba-side names a template may use (imported by every generated module)
_HELPERS = ("_numba.py", "_simd.py", "_vmath.py", "_gemm.py")
_PRELUDE = """import math
import numpy as np
from onert_py.backends.jit._numba import clamp, clamp_hi, clamp_lo, kernel
from onert_py.backends.jit._gemm import _rows_of as gemm_rows
from onert_py.backends.jit._vmath import (NEAR_LIMIT, cos32, cos_near, erfc32, exp32, expm1_32, logistic32, sin32,
                                          sin_near, tanh32)
"""


def _helpers_digest() -> str:
    """A hash of the helpers' sources: numba's disk cache checks only the generated file's own date, so
    a generated module names the helpers' version it was compiled against (a new version of them then
    makes new modules instead of reusing machine code that inlined the old ones)."""
    here = Path(__file__).resolve().parent
    return hashlib.sha1(b"".join((here / name).read_bytes() for name in _HELPERS)).hexdigest()[:16]


_PRELUDE += f"# helpers {_helpers_digest()}\n"


@dataclass(frozen=True)
class Expr:
    """One op as an elementwise expression: `template.format(*inputs)` is its value at one element.
    `flat`: inputs are read at the output's flat index whatever their shapes (a reshape); else they
    broadcast to the output's shape. `inputs`: which of the op's inputs the template reads (others, e.g.
    RESHAPE's shape, are not read)."""
    template: str
    inputs: tuple[int, ...] = (0, 1)
    flat: bool = False


def cache_dir() -> Path:
    env = os.environ.get("ONERT_PY_JIT_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "onert-py" / "jit"


_modules: dict[str, Any] = {}


def compile_source(source: str, name: str) -> Callable:
    """The function `name` defined by `source` (after the prelude), compiled by numba on first call and
    cached on disk; the same source gives the same module in every process."""
    text = _PRELUDE + source
    digest = hashlib.sha1(text.encode()).hexdigest()[:16]
    module_name = f"onert_py_jit_{digest}"
    module = _modules.get(module_name)
    if module is None:
        path = _write(module_name, text)
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        _modules[module_name] = module
    return getattr(module, name)


def _write(module_name: str, text: str) -> Path:
    """The source file of a generated module, written unless it is there: in cache_dir(), or in the
    temporary directory when that cannot be written (a read-only home)."""
    last: OSError | None = None
    for folder in (cache_dir(), Path(tempfile.gettempdir()) / f"onert-py-jit-{os.getuid()}"):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{module_name}.py"
            if not path.exists() or path.read_text() != text:
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(text)
                os.replace(tmp, path)   # atomic: another process may be importing the same file
            return path
        except OSError as e:
            last = e
    raise OSError(f"cannot write the jit backend's generated code: {last}")


def broadcast_index(in_shape: Sequence[int], out_shape: Sequence[int]) -> np.ndarray:
    """For each flat index of `out_shape`, the flat index of the broadcast input element (int64)."""
    size = int(np.prod(in_shape, dtype=np.int64))
    idx = np.arange(size, dtype=np.int64).reshape(tuple(in_shape))
    return np.ascontiguousarray(np.broadcast_to(idx, tuple(out_shape))).reshape(-1)


class Code:
    """Source lines of one generated function, with the arrays it takes as arguments."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.args: list[str] = []          # argument names, in order
        self.values: list[Any] = []        # what each argument is bound to (a slot key or an array)

    def arg(self, name: str, value: Any) -> str:
        if name not in self.args:
            self.args.append(name)
            self.values.append(value)
        return name

    def element_loop(self, indent: str, out: str, expr: Expr, inputs: Sequence[tuple[str, tuple]],
                     out_shape: tuple, index_name: Callable[[int], str], bound: str | None = None,
                     channels: str | None = None, then: Sequence[str] = ()) -> None:
        """`out[k] = expr` over the output's elements, each input (name, shape) indexed as the module
        docstring says; an input that varies only along the last axis (a bias, a per-channel scale)
        is read at k % C in a row/channel double loop, which vectorizes where a gathered index does
        not; one that varies only along the others (shape [..., 1]: a row's mean or norm) is read at
        the row there. Index arrays are registered as arguments named by index_name(j). `bound` /
        `channels`: the size and last dim as source expressions (for code generic over shapes), else
        literals.
        `then`: lines applied to the value `v` (at element k, channel ch) before it is stored (ops
        fused after this one). channel_loop makes the loop: flat, or row/channel where a line reads
        the channel or the row."""
        size = int(np.prod(out_shape, dtype=np.int64))
        c = int(out_shape[-1]) if out_shape else 1
        modes = []
        for name, shape in inputs:
            n = int(np.prod(shape, dtype=np.int64))
            if n == size and (expr.flat or tuple(shape) == tuple(out_shape) or size == 1):
                modes.append("same")
            elif n == 1:
                modes.append("one")
            elif not expr.flat and n == c and len(shape) >= 1 and shape[-1] == c:
                modes.append("channel")
            elif (not expr.flat and c > 1 and len(shape) >= 1 and shape[-1] == 1 and n == size // c
                  and tuple(shape[:-1]) == tuple(out_shape[len(out_shape) - len(shape):-1])):
                modes.append("row")      # one value per row: x / mean(x, axis=-1, keepdims=True)
            else:
                modes.append("index")
        bound = bound if bound is not None else str(size)
        refs = []
        for j, ((name, shape), mode) in enumerate(zip(inputs, modes)):
            if mode == "same":
                refs.append(f"{name}[k]")
            elif mode == "one":
                refs.append(f"{name}[0]")
            elif mode == "channel":
                refs.append(f"{name}[ch]")
            elif mode == "row":
                refs.append(f"{name}[row]")
            else:
                ix = self.arg(index_name(j), broadcast_index(shape, out_shape))
                refs.append(f"{name}[{ix}[k]]")
        value = expr.template.format(*refs)
        body = [f"v = {value}", *then, f"{out}[k] = v"] if then else [f"{out}[k] = {value}"]
        self.lines += channel_loop(indent, bound, channels if channels is not None else str(c), body)


_READS_ROWS = re.compile(r"\b(ch|row)\b")


def channel_loop(indent: str, bound: str, channels: str, body: Sequence[str]) -> list[str]:
    """Lines running `body` at each flat index k < `bound` of an output of `channels` channels, with its
    channel ch: a row/channel double loop (source expressions for both), which vectorises where
    k % channels does not. channels "1" (one channel, known when the source is made) gives one flat loop
    with ch = 0 instead: an inner loop of one element does not vectorise (a [1, 144, 256, 1] LOGISTIC
    took 320 us, not 20). A body that reads neither `ch` nor `row` (operands of the output's shape or
    of one element) gets the flat loop too: over 3 channels the double loop ran 4x slower (mnv3's
    [1, 224, 224, 3] input scaling, 279 us)."""
    if channels == "1" or not any(_READS_ROWS.search(line) for line in body):
        return [f"{indent}for k in range({bound}):", f"{indent}    ch = 0", *(f"{indent}    {line}" for line in body)]
    return [f"{indent}for row in range(({bound}) // ({channels})):",
            f"{indent}    for ch in range({channels}):",
            f"{indent}        k = row * ({channels}) + ch",
            *(f"{indent}        {line}" for line in body)]


def clamp(template: str, lo: float | None, hi: float | None, dtype: np.dtype) -> str:
    """`template` clamped to [lo, hi] (None: unbounded that side), NaN kept as np.clip keeps it."""
    if lo is None and hi is None:
        return template
    lit = (lambda x: f"np.float32({float(x)!r})") if dtype == np.float32 else (lambda x: f"{int(x)}")
    if lo is None:
        return f"clamp_hi({template}, {lit(hi)})"
    if hi is None:
        return f"clamp_lo({template}, {lit(lo)})"
    return f"clamp({template}, {lit(lo)}, {lit(hi)})"


# ------------------------------------------------------------------ statements (compiled loops only)

@dataclass(frozen=True)
class Statement:
    """An op inside a compiled loop (jit/loop.py) that is not one value per output element: a gather
    (STRIDED_SLICE, GATHER, TRANSPOSE), a concatenation, a reduction, a small matmul. `emit(out, ins,
    arg, tmp)` gives its lines (unindented): `out` and `ins` (the op inputs `inputs` names, in order)
    are flat arrays; `arg(suffix, array)` registers a constant array the lines read and returns its
    name; `tmp(name)` a local name of this op's own (numba types each name once per function).
    `fails`: the lines may GIVE_UP (return NOT_TAKEN), for a value the loop cannot take (an index out of range): the
    caller then runs the loop on the executors, whose kernels raise the op's own error."""
    inputs: tuple[int, ...]
    emit: Callable[[str, list[str], Callable[[str, np.ndarray], str], Callable[[str], str]], list[str]]
    fails: bool = False
    # An op of several outputs (SPLIT, UNPACK): one statement per output, in order, each reading the
    # same `inputs` (this statement's own emit is then unused).
    outputs: tuple["Statement", ...] = ()
    # A statement that stands for several ops: `tensors` (subgraph tensor indices) are what `ins` names
    # instead of the op's inputs, and `absorbs` the ops (indices) it computes itself, whose outputs
    # (of shapes known only at run time) nothing else reads: the loop does not compute them.
    tensors: tuple[int, ...] = ()
    absorbs: tuple[int, ...] = ()
    # The op through the packed GEMM (jit/_gemm.py: sums with fused multiply-adds, so other last bits
    # than the executors' BLAS kernels), which compiled segments use in place of this statement; whole
    # loops keep this one, whose results tests compare bit for bit with the executors'. `segment_only`:
    # this statement is such a one itself (no form for loops).
    packed: "Statement | None" = None
    segment_only: bool = False

    @property
    def parts(self) -> tuple["Statement", ...]:
        return self.outputs or (self,)


# What a compiled loop returns when a statement meets a value it does not take (Statement.fails).
NOT_TAKEN = -2
GIVE_UP = f"return {NOT_TAKEN}"


def flat_positions(shape: Sequence[int]) -> np.ndarray:
    """The flat position of every element of an array of `shape` (int64, in that shape): a statement's
    gather or scatter positions are the op applied to it."""
    shape = tuple(int(d) for d in shape)
    return np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)


StatementFn = Callable[[object, object], "Statement | None"]
STATEMENTS: dict[str, StatementFn] = {}
# ops whose statement function also takes inputs of run-time shapes (to absorb the ops making them)
SPANNING: set[str] = set()


def statement(*names: str, spans: bool = False) -> Callable[[StatementFn], StatementFn]:
    """Decorator: fn(op, subgraph) -> Statement, or None when the op's types, options or shapes are not
    covered. Called for ops whose tensors have static shapes; with `spans`, also for ops with inputs of
    run-time shapes, which it takes only by absorbing the ops making them (Statement.absorbs)."""
    def deco(fn: StatementFn) -> StatementFn:
        for n in names:
            if n in STATEMENTS:
                raise RuntimeError(f"jit loop statement {n} registered twice")
            STATEMENTS[n] = fn
            if spans:
                SPANNING.add(n)
        return fn
    return deco


def statement_of(op, sg) -> Statement | None:
    fn = STATEMENTS.get(op.kernel_name) if not op.is_custom else None
    stmt = None if fn is None else fn(op, sg)
    return stmt if stmt is not None and len(stmt.parts) == len(op.outputs) else None


def split_statement(parts: Sequence[np.ndarray], inputs: tuple[int, ...] = (0,)) -> Statement:
    """An op whose output j is the elements of its input inputs[0] at positions parts[j] (SPLIT,
    SPLIT_V, UNPACK)."""
    gathers = tuple(gather_statement(p, inputs=inputs) for p in parts)
    return Statement(inputs, gathers[0].emit, outputs=gathers)


def gather_statement(index: np.ndarray, offset: Callable[[list[str], Callable[[str], str]], list[str]] | None = None,
                     inputs: tuple[int, ...] = (0,)) -> Statement:
    """out[k] = x[index[k]] (x: the op's input inputs[0], flat; index: int64 per output element, made when
    the loop is compiled). `offset(ins, tmp)`: lines computing a run-time shift `tmp("off")` of every
    index (may GIVE_UP), for indices read at run time."""
    def emit(out, ins, arg, tmp):
        ix = arg("ix", np.ascontiguousarray(index, np.int64).reshape(-1))
        if offset is None:
            return [f"for k in range({index.size}):", f"    {out}[k] = {ins[0]}[{ix}[k]]"]
        off = tmp("off")
        return [*offset(ins, tmp), f"for k in range({index.size}):", f"    {out}[k] = {ins[0]}[{ix}[k] + {off}]"]
    return Statement(inputs, emit, fails=offset is not None)


def reduction_statement(index: np.ndarray, init: str, step: str, finish: str = "{acc}") -> Statement:
    """out[k] = finish(fold of step over x[index[k, j]] for j in order, from init): index [N, M] int64
    (the reduced slices, each in row-major order); step and finish are templates over {acc} and {x}."""
    n, m = index.shape

    def emit(out, ins, arg, tmp):
        ix, acc, x = arg("ix", np.ascontiguousarray(index, np.int64).reshape(-1)), tmp("acc"), tmp("x")
        return [f"for k in range({n}):", f"    {acc} = {init}",
                f"    for j in range({m}):", f"        {x} = {ins[0]}[{ix}[k * {m} + j]]",
                f"        {acc} = {step.format(acc=acc, x=x)}",
                f"    {out}[k] = {finish.format(acc=acc)}"]
    return Statement((0,), emit)


def declared_shape_run(ctx, fallback: Callable[[], None], compute: Callable[[np.ndarray, np.ndarray], None],
                       out_shape: tuple | None = None) -> Callable[[], None]:
    """The run of a kernel compiled for input 0's declared shape: compute(x, y) with x the input and y
    the planned output (of out_shape, else the input's shape); an input of another shape (a resize), or
    an empty one, takes `fallback` (the cpu kernel)."""
    shape = tuple(ctx.input_tensor(0).shape)
    out_shape = shape if out_shape is None else tuple(out_shape)
    a, o = ctx.inputs[0], ctx.outputs[0]
    v, alloc = ctx.values, ctx.output_buffer(0)

    def run() -> None:
        x = v[a]
        if x.shape != shape or x.size == 0:
            return fallback()
        y = alloc(out_shape)
        compute(x, y)
        v[o] = y
    return run
