"""Compiled segments: a run of consecutive small ops of an executor, each with a jit expression or loop
statement (the ones whole-loop compilation uses, jit/loop.py), compiled as one numba function.

A converter-made transformer or MLP is ~90 ops of a few thousand elements each: every op's kernel is
a Python call, its argument checks and one or more numpy calls, 2-15 µs, while its arithmetic takes
well under a microsecond. A segment pays one call for the run. Inside it every tensor is a flat
array and each op writes its own, so results round exactly as the loop's statements do (the same
code as in a compiled loop); the segment's inputs are read from the executor's slots, and the tensors
read after it (or returned) are written into arrays it is given.

The compiler (compile_model) asks for segments once an executor's kernels are prepared, with op fusion
on (fuse_ops; not with preserve_all_tensors); ops forced onto another backend (op_backend) are left
out. A run whose inputs arrive with other shapes or types than the compiled ones (resized inputs), or a
statement meeting a value it does not take (an index out of range), runs the ops' own kernels instead,
which raise the op's own error.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Callable

import numpy as np

from onert_py.backends.jit._numba import compile_now
from onert_py.backends.jit.codegen import NOT_TAKEN, Code, compile_source
from onert_py.backends.jit.elementwise import expression_of
from onert_py.backends.jit.loop import _Namer, _size, model_operations, ops_lines
from onert_py.errors import OnertPyError
from onert_py.exec.executor import wrapped_error

# Largest tensor (elements) an op of a segment may write. Larger ops are worth their own kernels: the
# per-op kernels copy blocks (numpy) or split work over threads where a segment gathers element by
# element on one thread; below this a call's fixed cost is what the op costs.
MAX_SIZE = 1 << 14
# Ops per generated function: a segment of more is several functions called in turn by one. In one
# function of ~90 ops LLVM's inliner left exp32 / erfc32 as calls (one per element: their loops did
# not vectorise; the transformer's segment took 160 us, ~100 with them inlined).
PART_OPS = 12
# Fewest ops worth a segment, reshapes not counted: each segment is a numba compile of ~0.1-0.2 s per
# op on a session's first creation (then numba's disk cache), which a run of two or three ops saving
# 2-5 us a call does not repay.
MIN_OPS = 6


def compile_segments(ex, op_backend: dict, warm: bool = True) -> int:
    """Replace each run of MIN_OPS or more consecutive operations of executor `ex` that compile into one
    segment; returns how many segments were made. `warm`: compile them now (else on first run: the
    executor of a loop body that runs compiled whole never needs its own)."""
    if os.environ.get("ONERT_PY_JIT_SEGMENTS", "1") == "0":
        return 0
    sg = ex.subgraph
    runtime_values = set(sg.inputs) | {t for op in ex.operations for t in op.outputs}
    fits = [_fits(op, ex, runtime_values, op_backend) for op in ex.operations]
    operations, runs, names = [], [], []
    made, i, n = 0, 0, len(fits)
    while i < n:
        j = i
        while j < n and fits[j]:
            j += 1
        work = sum(not _moves_only(m, sg) for op in ex.operations[i:j] for m in model_operations(op, sg))
        segment = _segment(ex, i, j, runtime_values, op_backend, warm) if work >= MIN_OPS else None
        if segment is not None:
            operations.append(segment[0])
            runs.append(segment[1])
            names.append("jit")
            made += 1
        else:
            stop = max(j, i + 1)
            operations += ex.operations[i:stop]
            runs += ex.runs[i:stop]
            names += ex.backend_names[i:stop]
            j = stop
        i = j
    if made:
        ex.operations[:], ex.runs[:], ex.backend_names[:] = operations, runs, names
    return made


def _moves_only(op, sg) -> bool:
    """The model op only reshapes (a view for its own kernel; a copy in a segment): not counted
    towards MIN_OPS."""
    expr = expression_of(op, sg)
    return expr is not None and expr.flat


def _fits(op, ex, runtime_values: set, op_backend: dict) -> bool:
    """The executor operation op can go into a segment: every model op it computes writes at most
    MAX_SIZE elements and has an expression or statement on these types and static shapes (tried by
    writing its code alone)."""
    sg = ex.subgraph
    members = model_operations(op, sg)
    if any(o < 0 or _size(sg.tensors[o]) > MAX_SIZE for m in members for o in m.outputs):
        return False
    namer = _Namer(Code(), ex, "", ())
    for t in op.inputs:
        if t >= 0 and t in runtime_values:
            namer.names[t] = f"a{t}"
    try:
        return ops_lines(list(members), namer, "", op_backend, segment=True) is not None
    except (ValueError, TypeError, IndexError, KeyError, ArithmeticError):   # an op a statement cannot judge
        return False


def _segment(ex, start: int, stop: int, runtime_values: set, op_backend: dict, warm: bool
             ) -> tuple[object, Callable] | None:
    """(the executor operation, its run) computing ex.operations[start:stop] as one function, or None."""
    sg = ex.subgraph
    units, unit_runs = ex.operations[start:stop], ex.runs[start:stop]
    members = [m for op in units for m in model_operations(op, sg)]
    written = {t for op in units for t in op.outputs}
    inputs = list(dict.fromkeys(t for op in units for t in op.inputs
                                if t >= 0 and t in runtime_values and t not in written))
    read_after = {t for op in ex.operations[stop:] for t in op.inputs} | set(sg.outputs)
    exports = [t for op in units for t in op.outputs if t in read_after]
    if not exports:
        return None
    code = Code()
    namer = _Namer(code, ex, "", (), exported={t: f"o{t}" for t in exports})
    for t in inputs:
        namer.names[t] = f"a{t}"
    parts = []
    for k in range(0, len(members), PART_OPS):
        lines = ops_lines(members[k:k + PART_OPS], namer, "    ", op_backend, segment=True)
        if lines is None:
            return None
        parts.append(lines)
    if any(namer.names.get(t) != f"o{t}" for t in exports):
        return None
    params = [f"a{t}" for t in inputs] + [f"o{t}" for t in exports] + code.args
    source = _source(params, namer.allocs, parts)
    fn = compile_source(source, "segment")
    consts = list(code.values)
    if warm:
        compile_now(fn, *[np.empty(1, sg.tensors[t].dtype) for t in (*inputs, *exports)], *consts)
    first = members[0]
    op = dataclasses.replace(first, inputs=tuple(inputs), outputs=tuple(exports), prologue=(),
                             fused=tuple(m.index for m in members[1:]), segment=True)
    return op, _run(ex, fn, inputs, exports, consts, units, unit_runs)


def _source(params: list[str], allocs: list[str], parts: list[list[str]]) -> str:
    """The module defining segment(*params): each part (the lines of up to PART_OPS ops) a function of
    its own taking the arrays it uses, and segment allocating the intermediates two parts share and
    calling the parts in order (a part giving up returns NOT_TAKEN)."""
    allocated = {line.split("=")[0].strip(): line for line in allocs}
    arrays = [*params, *allocated]   # in the order a part takes them
    used = []
    for lines in parts:
        names = set(re.findall(r"[A-Za-z_]\w*", "\n".join(lines)))
        used.append([n for n in arrays if n in names])
    shared = {name for name in allocated if sum(name in u for u in used) > 1}
    out, calls = [], []
    for k, (lines, names) in enumerate(zip(parts, used)):
        args = [n for n in names if n in params or n in shared]
        out += [f"@kernel\ndef part{k}({', '.join(args)}):",
                *(allocated[n] for n in names if n in allocated and n not in shared), *lines, "    return 0", ""]
        calls += [f"    r = part{k}({', '.join(args)})", "    if r != 0:", "        return r"]
    out += [f"@kernel\ndef segment({', '.join(params)}):", *(allocated[n] for n in allocated if n in shared),
            *calls, "    return 0"]
    return "\n".join(out) + "\n"


def _run(ex, fn: Callable, inputs: list[int], exports: list[int], consts: list, units: list, unit_runs: list
         ) -> Callable[[], None]:
    """The segment's run closure, generated as straight-line Python: read and check the inputs, take
    the outputs' arrays (the memory plan's slots where it gave some), call fn, store the outputs. Inputs
    of other shapes or types than compiled, or fn giving up, run the ops' own kernels instead."""
    sg = ex.subgraph
    tensors = sg.tensors
    lines = ["def run():"]
    args = []
    for k, t in enumerate(inputs):
        shape, dtype = tuple(tensors[t].shape), tensors[t].dtype
        lines += [f"    x{k} = v[{t}]",
                  f"    if x{k}.__class__ is not {'ndarray' if shape else 'scalar_' + str(k)} "
                  f"or x{k}.shape != {shape!r}:",
                  "        return fallback()"]
        if shape:
            lines += [f"    if x{k}.dtype != d{k}:", "        return fallback()"]
            args.append(f"x{k}.reshape(-1)")
        else:
            args.append(f"one_{k}(x{k})")
    for k, t in enumerate(exports):
        shape = tuple(tensors[t].shape)
        lines += [f"    y{k} = planned[{t}]",
                  f"    if y{k} is None or y{k}.shape != {shape!r}:",
                  f"        y{k} = empty({shape!r}, e{k})"]
        args.append(f"y{k}.reshape(-1)")
    lines += [f"    if fn({', '.join(args)}, *consts) == {NOT_TAKEN}:", "        return fallback()"]
    for k, t in enumerate(exports):
        lines.append(f"    v[{t}] = y{k}" if tensors[t].shape else f"    v[{t}] = y{k}[()]")
    namespace = {"v": ex.values, "planned": ex.planned, "ndarray": np.ndarray, "empty": np.empty, "fn": fn,
                 "consts": consts, "fallback": _fallback(ex, units, unit_runs)}
    for k, t in enumerate(inputs):
        dtype = tensors[t].dtype
        namespace[f"d{k}"] = dtype
        namespace[f"scalar_{k}"] = dtype.type
        namespace[f"one_{k}"] = lambda x, dt=dtype: np.full(1, x, dt)
    for k, t in enumerate(exports):
        namespace[f"e{k}"] = tensors[t].dtype
    exec(compile("\n".join(lines), f"<jit segment of subgraph {sg.index}>", "exec"), namespace)
    return namespace["run"]


def _fallback(ex, units: list, unit_runs: list) -> Callable[[], None]:
    """Runs the segment's ops with their own kernels; an error names the op that raised it."""
    index = ex.index

    def fallback() -> None:
        for op, run in zip(units, unit_runs):
            try:
                run()
            except Exception as e:  # noqa: BLE001 - re-raised naming the op, as the executor does
                raise located_error(f"subgraph {index} operator {op.index} ({op.kernel_name})", e) from e
    return fallback


def located_error(where: str, e: Exception) -> OnertPyError:
    err = wrapped_error(where, e)
    err.located = True   # the executor running the segment does not name its own op in front
    return err
