"""Whole-loop compilation: a WHILE whose cond and body hold only ops with a jit expression
(jit/elementwise.py, jit/shape.py), on static shapes, runs as one numba function: the iterations,
the verdict and every op inside, with no Python per iteration. The controlflow backend's WHILE kernel
asks for it (compile_while) and falls back to its executor loop when this returns None.

Inside the function every tensor is a flat array: loop values (copies of the WHILE's inputs, updated in
place), constants and compile-time values (arguments), intermediates (allocated once per run). Each op
writes its own array, so results round exactly as the per-op kernels'. The body's results are copied
into the loop values at the end of an iteration (through a staging copy where a result is another loop
value, e.g. a body that swaps two values).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from onert_py.backends.jit._numba import compile_now
from onert_py.backends.jit.codegen import Code, compile_source
from onert_py.backends.jit.elementwise import expression_of

_TYPES = {np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.bool_, np.int8, np.uint8,
                                np.int16)}


def _static(t) -> bool:
    return (not t.is_dynamic and t.dtype in _TYPES and not t.is_variable
            and (t.shape_signature is None or -1 not in tuple(t.shape_signature)))


def _size(t) -> int:
    return int(np.prod(t.shape, dtype=np.int64))


class _Namer:
    """Names of one subgraph's tensors in the generated source."""

    def __init__(self, code: Code, ex, prefix: str, loop_names: Sequence[str]):
        self.code, self.ex, self.prefix = code, ex, prefix
        self.sg = ex.subgraph
        self.names = {t: n for t, n in zip(ex.input_indices, loop_names)}
        self.allocs: list[str] = []

    def __call__(self, t: int) -> str | None:
        if t in self.names:
            return self.names[t]
        value = self.ex.values[t]
        if value is None:
            return None   # read before any op writes it: not a constant (a variable, a state)
        if np.size(value) != _size(self.sg.tensors[t]):
            return None   # a folded value of another size than declared: the loop would read past its end
        name = self.code.arg(f"{self.prefix}k{t}", np.ascontiguousarray(value, self.sg.tensors[t].dtype).reshape(-1))
        self.names[t] = name
        return name

    def output(self, t: int) -> str:
        tensor = self.sg.tensors[t]
        name = self.names[t] = f"{self.prefix}t{t}"
        self.allocs.append(f"    {name} = np.empty({_size(tensor)}, np.{tensor.dtype.name})")
        return name


def _ops_code(ex, namer: _Namer, indent: str, op_backend: dict) -> list[str] | None:
    """The lines computing ex's ops in order, or None when an op has no expression (or is forced onto
    another backend)."""
    code, sg = namer.code, ex.subgraph
    before = len(code.lines)
    for op in _model_operations(ex):
        forced = op_backend.get(f"{sg.index}:{op.index}") or op_backend.get(op.kernel_name)
        expr = expression_of(op, sg)
        if expr is None or (forced is not None and forced != "jit"):
            return None
        if any(not _static(sg.tensors[t]) for t in (*op.inputs, *op.outputs) if t >= 0):
            return None
        inputs = []
        for i in expr.inputs:
            t = op.inputs[i]
            name = namer(t) if t >= 0 else None
            if name is None:
                return None
            inputs.append((name, tuple(sg.tensors[t].shape)))
        out_t = op.outputs[0]
        out_shape = tuple(sg.tensors[out_t].shape)
        if not _reaches(expr, [s for _, s in inputs], out_shape):
            return None
        out = namer.output(out_t)
        code.element_loop(indent, out, expr, inputs, out_shape, lambda j, o=out_t: f"{namer.prefix}i{o}_{j}")
    return code.lines[before:]


def _model_operations(ex) -> list:
    """ex's operations as the model has them: an op with ops fused into its kernel (op.fused, one
    executor operation writing the chain's last output; op.prologue, ops it does before its own) is
    each of its prologue's, then its own model op, then each of the chain's, so that the loop computes
    every one of them."""
    ops = ex.subgraph.operations
    return [m for op in ex.operations
            for m in ((*(ops[i] for i in op.prologue), ops[op.index], *(ops[i] for i in op.fused))
                      if op.fused or op.prologue else (op,))]


def _reaches(expr, shapes: list[tuple], out_shape: tuple) -> bool:
    """The declared input shapes give the declared output's (a file can declare them apart): as many
    elements for a flat copy, else a broadcast to exactly the output's shape. Otherwise the generated
    loop, which indexes without bounds checks, is not built (the per-op kernels run the loop)."""
    if expr.flat:
        return all(int(np.prod(s, dtype=np.int64)) == int(np.prod(out_shape, dtype=np.int64)) for s in shapes)
    try:
        return np.broadcast_shapes(*shapes) == out_shape
    except ValueError:
        return False


def compile_while(cond, body, op_backend: dict) -> Callable | None:
    """loop(values, bound) -> (iterations, values) running the WHILE of executors cond and body as one
    compiled function, or None when it cannot be compiled (then nothing has been compiled). Iterations
    are -1 when `bound` (>= 0) ran out with the cond still true, as controlflow's fused loop."""
    n = len(body.input_indices)
    loop_tensors = [body.subgraph.tensors[t] for t in body.input_indices]
    cond_tensors = [cond.subgraph.tensors[t] for t in cond.input_indices]
    if (len(cond.input_indices) != n or len(body.output_indices) != n
            or not all(_static(t) for t in loop_tensors + cond_tensors)):
        return None
    for k, (t, ct) in enumerate(zip(loop_tensors, cond_tensors)):
        out = body.subgraph.tensors[body.output_indices[k]]
        if ct.dtype != t.dtype or tuple(ct.shape) != tuple(t.shape) or not _static(out) \
                or out.dtype != t.dtype or _size(out) != _size(t):
            return None
    verdict_t = cond.subgraph.tensors[cond.output_indices[0]] if len(cond.output_indices) == 1 else None
    if verdict_t is None or verdict_t.dtype != np.bool_ or not _static(verdict_t) or _size(verdict_t) != 1:
        return None

    code = Code()
    loops = [f"L{k}" for k in range(n)]
    cnamer = _Namer(code, cond, "c", loops)
    bnamer = _Namer(code, body, "b", loops)
    cond_lines = _ops_code(cond, cnamer, " " * 8, op_backend)
    if cond_lines is None:
        return None
    del code.lines[:]
    body_lines = _ops_code(body, bnamer, " " * 8, op_backend)
    if body_lines is None:
        return None
    verdict = cnamer(cond.output_indices[0])
    results = [bnamer(t) for t in body.output_indices]
    if verdict is None or any(r is None for r in results):
        return None

    lines = [f"@kernel\ndef loop(bound, {', '.join(loops + code.args)}):"]
    lines += cnamer.allocs + bnamer.allocs
    staged = [k for k, r in enumerate(results) if r in loops and r != loops[k]]
    lines += [f"    S{k} = np.empty({_size(loop_tensors[k])}, L{k}.dtype)" for k in staged]
    lines += ["    count = 0", "    while True:"]
    lines += cond_lines
    lines += [f"        if not {verdict}[0]:", "            break",
              "        if count == bound:", "            return -1"]
    lines += body_lines
    for k in staged:
        lines += [f"        for k in range({_size(loop_tensors[k])}):", f"            S{k}[k] = {results[k]}[k]"]
    for k, r in enumerate(results):
        if r == loops[k]:
            continue
        src = f"S{k}" if k in staged else r
        lines += [f"        for k in range({_size(loop_tensors[k])}):", f"            L{k}[k] = {src}[k]"]
    lines += ["        count += 1", "    return count"]
    fn = compile_source("\n".join(lines) + "\n", "loop")
    consts = list(code.values)
    dtypes = [t.dtype for t in loop_tensors]
    compile_now(fn, -1, *[np.empty(1, dt) for dt in dtypes], *consts)
    shapes = [tuple(t.shape) for t in loop_tensors]

    def run(values: list, bound: int, tick: Callable | None = None) -> tuple[int, list]:
        ls = [np.array(x, dtype=dt).reshape(-1) for x, dt in zip(values, dtypes)]   # copies: ours to write
        if tick is None:
            count = fn(bound, *ls, *consts)
        else:
            # A deadline: numba cannot read a clock, so the loop runs in chunks of the iterations tick
            # allows; a chunk that runs out (-1) leaves the loop values after its last body, and the
            # next chunk goes on from there (its first cond is evaluated again: ops are pure).
            count = 0
            while True:
                check = tick(count, bound)
                got = fn(check - count, *ls, *consts)
                if got >= 0:
                    count += got
                    break
                count = check
                if count == bound:
                    count = -1
                    break
        return count, [x.reshape(s) if s else x[0] for x, s in zip(ls, shapes)]

    run.accepts = lambda values: all(np.shape(x) == s for x, s in zip(values, shapes))
    return run
