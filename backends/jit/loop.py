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
from onert_py.backends.jit.codegen import NOT_TAKEN, SPANNING, Code, compile_source, statement_of
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

    def __init__(self, code: Code, ex, prefix: str, loop_names: Sequence[str], parent: "_Namer | None" = None,
                 executors: Callable | None = None, exported: dict[int, str] | None = None):
        self.code, self.ex, self.prefix = code, ex, prefix
        self.sg = ex.subgraph
        self.names = {t: n for t, n in zip(ex.input_indices, loop_names)}
        # tensors written into arrays the caller passes (a segment's outputs: jit/segment.py), by name
        self.exported = exported or {}
        # shared with the subgraphs called inside (their arrays are allocated once, at the start)
        self.allocs: list[str] = parent.allocs if parent is not None else []
        self.executors = parent.executors if parent is not None else executors
        self.depth = parent.depth + 1 if parent is not None else 0
        self.root = parent.root if parent is not None else self
        self.nested = False   # a WHILE runs inside (see compile_while's deadline)

    def inner(self, ex, prefix: str, loop_names: Sequence[str]) -> "_Namer":
        """The namer of subgraph executor ex called inside this one."""
        return _Namer(self.code, ex, self.prefix + prefix, loop_names, self)

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
        if t in self.exported:
            name = self.names[t] = self.exported[t]
            return name
        tensor = self.sg.tensors[t]
        name = self.names[t] = f"{self.prefix}t{t}"
        self.allocs.append(f"    {name} = np.empty({_size(tensor)}, np.{tensor.dtype.name})")
        return name


def _ops_code(ex, namer: _Namer, indent: str, op_backend: dict) -> list[str] | None:
    """The lines computing ex's ops in order, or None when an op has no expression (or is forced onto
    another backend)."""
    return ops_lines(_model_operations(ex), namer, indent, op_backend)


def ops_lines(ops: list, namer: _Namer, indent: str, op_backend: dict, segment: bool = False) -> list[str] | None:
    """The lines computing model ops `ops` (of namer's subgraph) in order, or None when an op has no
    expression or statement (or is forced onto another backend). `segment`: for a compiled segment
    (jit/segment.py), which takes statements' packed forms (Statement.packed)."""
    code, sg = namer.code, namer.sg
    before = len(code.lines)
    spanning = _spanning_statements(ops, sg)
    absorbed = {i for stmt in spanning.values() for i in stmt.absorbs}
    for op in ops:
        forced = op_backend.get(f"{sg.index}:{op.index}") or op_backend.get(op.kernel_name)
        if forced is not None and forced != "jit":
            return None
        if op.index in absorbed:
            continue
        expr, stmt = None, spanning.get(op.index)
        sources = stmt.tensors if stmt is not None else op.inputs   # the tensors `reads` index
        if any(not _static(sg.tensors[t]) for t in (*sources, *op.outputs) if t >= 0):
            return None
        if op.kernel_name in _CALLS:
            if _CALLS[op.kernel_name](op, namer, indent, op_backend) is None:
                return None
            continue
        if stmt is None:
            expr = expression_of(op, sg)
            stmt = statement_of(op, sg) if expr is None else None
            if stmt is not None and segment and stmt.packed is not None:
                stmt = stmt.packed
            if stmt is not None and stmt.segment_only and not segment:
                stmt = None
        if expr is None and stmt is None:
            return None
        reads = expr.inputs if expr is not None else stmt.inputs
        inputs = []
        for i in reads:
            t = sources[i] if i < len(sources) else -1
            name = namer(t) if t >= 0 else None
            if name is None:
                return None
            inputs.append((name, tuple(sg.tensors[t].shape)))
        out_t = op.outputs[0]
        out_shape = tuple(sg.tensors[out_t].shape)
        if stmt is not None:
            for out_t, part in zip(op.outputs, stmt.parts):
                out = namer.output(out_t)
                lines = part.emit(out, [n for n, _ in inputs],
                                  lambda suffix, value, o=out_t: code.arg(f"{namer.prefix}x{o}_{suffix}", value),
                                  lambda local, o=out_t: f"{namer.prefix}v{o}_{local}")
                code.lines += [indent + line for line in lines]
            continue
        if not _reaches(expr, [s for _, s in inputs], out_shape):
            return None
        out = namer.output(out_t)
        code.element_loop(indent, out, expr, inputs, out_shape, lambda j, o=out_t: f"{namer.prefix}i{o}_{j}")
    return code.lines[before:]


def _spanning_statements(ops: list, sg) -> dict:
    """{op index: statement} for the ops with inputs of run-time shapes whose statement absorbs the ops
    making them (Statement.absorbs), when nothing else reads what those make."""
    found = {}
    for op in ops:
        if op.is_custom or op.kernel_name not in SPANNING or all(_static(sg.tensors[t]) for t in op.inputs if t >= 0):
            continue
        stmt = statement_of(op, sg)
        if stmt is None or not stmt.absorbs:
            continue
        made = {t for o in ops if o.index in stmt.absorbs for t in o.outputs}
        readers = [o for o in ops if o.index not in stmt.absorbs and o is not op and made & set(o.inputs)]
        if not readers and not made & set(sg.outputs):
            found[op.index] = stmt
    return found


def _model_operations(ex) -> list:
    """ex's operations as the model has them: an op with ops fused into its kernel (op.fused, one
    executor operation writing the chain's last output; op.prologue, ops it does before its own) is
    each of its prologue's, then its own model op, then each of the chain's, so that the loop computes
    every one of them."""
    return [m for op in ex.operations for m in model_operations(op, ex.subgraph)]


def model_operations(op, sg) -> tuple:
    """The model ops one executor operation computes, in order: its prologue's, its own, its fused
    chain's (a compiled segment, jit/segment.py, is its first op with the others as its chain)."""
    if not (op.fused or op.prologue):
        return (op,)
    ops = sg.operations
    return (*(ops[i] for i in op.prologue), ops[op.index], *(ops[i] for i in op.fused))


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


# Subgraphs called inside a compiled loop are compiled inline, to this depth (a model calling itself
# recursively is refused by the compiler; this bounds the generated source).
_MAX_DEPTH = 8


def _called(namer: _Namer, op, *keys: str) -> list | None:
    """The executors of the subgraphs op calls (its options `keys`), or None."""
    if namer.executors is None or namer.depth >= _MAX_DEPTH:
        return None
    try:
        return [namer.executors(int(op.options[k])) for k in keys]
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def _copy(indent: str, dst: str, src: str, size: int) -> list[str]:
    return [f"{indent}for k in range({size}):", f"{indent}    {dst}[k] = {src}[k]"]


def _while_code(op, namer: _Namer, indent: str, op_backend: dict) -> list[str] | None:
    """A WHILE inside the loop as a loop of its own: its values in arrays of its own (the op's inputs
    copied in), its cond and body inline; the op's outputs are those arrays. `cap` bounds its iterations
    as max_while_iterations bounds every WHILE."""
    called = _called(namer, op, "cond_subgraph_index", "body_subgraph_index")
    if called is None or not _loop_signature(*called) or len(op.inputs) != len(called[1].input_indices) \
            or len(op.outputs) != len(op.inputs):
        return None
    cond, body = called
    sg, code = namer.sg, namer.code
    p = f"w{op.index}_"
    tensors = [body.subgraph.tensors[t] for t in body.input_indices]
    if any(min(op.inputs) < 0 or sg.tensors[o].dtype != t.dtype or _size(sg.tensors[o]) != _size(t)
           for o, t in zip(op.outputs, tensors)):
        return None
    values = [f"{namer.prefix}{p}L{k}" for k in range(len(tensors))]
    sources = [namer(t) for t in op.inputs]
    if any(x is None for x in sources):
        return None
    before = len(code.lines)
    namer.allocs += [f"    {v} = np.empty({_size(t)}, np.{t.dtype.name})" for v, t in zip(values, tensors)]
    count = f"{namer.prefix}{p}count"
    for v, x, t in zip(values, sources, tensors):
        code.lines += _copy(indent, v, x, _size(t))
    code.lines += [f"{indent}{count} = 0", f"{indent}while True:"]
    inner = indent + "    "
    cnamer, bnamer = namer.inner(cond, p + "c", values), namer.inner(body, p + "b", values)
    if _ops_code(cond, cnamer, inner, op_backend) is None:
        return None
    verdict = cnamer(cond.output_indices[0])
    if verdict is None:
        return None
    code.lines += [f"{inner}if not {verdict}[0]:", f"{inner}    break",
                   f"{inner}if {count} == cap:", f"{inner}    return -1"]
    if _ops_code(body, bnamer, inner, op_backend) is None:
        return None
    results = [bnamer(t) for t in body.output_indices]
    if any(r is None for r in results):
        return None
    code.lines += _carry(inner, values, results, tensors, namer.allocs, f"{namer.prefix}{p}S")
    code.lines += [f"{inner}{count} += 1"]
    for o, v in zip(op.outputs, values):
        namer.names[o] = v
    namer.root.nested = True
    return code.lines[before:]


def _carry(indent: str, values: list[str], results: list, tensors: list, allocs: list[str], stage: str) -> list[str]:
    """Lines copying a body's results into the loop values, through a staging copy where a result is
    another loop value (a body that swaps two values)."""
    lines = []
    staged = [k for k, r in enumerate(results) if r in values and r != values[k]]
    allocs += [f"    {stage}{k} = np.empty({_size(tensors[k])}, np.{tensors[k].dtype.name})" for k in staged]
    for k in staged:
        lines += _copy(indent, f"{stage}{k}", results[k], _size(tensors[k]))
    for k, r in enumerate(results):
        if r != values[k]:
            lines += _copy(indent, values[k], f"{stage}{k}" if k in staged else r, _size(tensors[k]))
    return lines


def _if_code(op, namer: _Namer, indent: str, op_backend: dict) -> list[str] | None:
    """An IF inside the loop: both branches inline under `if`, each copying its results into the op's
    outputs."""
    called = _called(namer, op, "then_subgraph_index", "else_subgraph_index")
    if called is None or not op.inputs or min(op.inputs) < 0:
        return None
    sg, code = namer.sg, namer.code
    pred_t = sg.tensors[op.inputs[0]]
    if pred_t.dtype != np.bool_ or _size(pred_t) != 1:
        return None
    args = [namer(t) for t in op.inputs]
    if any(a is None for a in args):
        return None
    outs = [sg.tensors[o] for o in op.outputs]
    for branch in called:
        ins = [branch.subgraph.tensors[t] for t in branch.input_indices]
        res = [branch.subgraph.tensors[t] for t in branch.output_indices]
        if len(ins) != len(args) - 1 or len(res) != len(outs) or any(
                not _static(a) or a.dtype != b.dtype or _size(a) != _size(b)
                for a, b in [*zip(ins, [sg.tensors[t] for t in op.inputs[1:]]), *zip(res, outs)]):
            return None
    before = len(code.lines)
    names = [namer.output(o) for o in op.outputs]
    code.lines += [f"{indent}if {args[0]}[0]:"]
    for which, branch in zip("te", called):
        bnamer = namer.inner(branch, f"i{op.index}{which}_", args[1:])
        if _ops_code(branch, bnamer, indent + "    ", op_backend) is None:
            return None
        results = [bnamer(t) for t in branch.output_indices]
        if any(r is None for r in results):
            return None
        for name, r, t in zip(names, results, outs):
            code.lines += _copy(indent + "    ", name, r, _size(t))
        if which == "t":
            code.lines += [f"{indent}else:"]
    return code.lines[before:]


_CALLS = {"WHILE": _while_code, "IF": _if_code}


def _loop_signature(cond, body) -> bool:
    """cond and body take and give loop values of one set of static shapes and types, and cond gives one
    bool."""
    n = len(body.input_indices)
    loop_tensors = [body.subgraph.tensors[t] for t in body.input_indices]
    cond_tensors = [cond.subgraph.tensors[t] for t in cond.input_indices]
    if (len(cond.input_indices) != n or len(body.output_indices) != n
            or not all(_static(t) for t in loop_tensors + cond_tensors)):
        return False
    for k, (t, ct) in enumerate(zip(loop_tensors, cond_tensors)):
        out = body.subgraph.tensors[body.output_indices[k]]
        if ct.dtype != t.dtype or tuple(ct.shape) != tuple(t.shape) or not _static(out) \
                or out.dtype != t.dtype or _size(out) != _size(t):
            return False
    verdict_t = cond.subgraph.tensors[cond.output_indices[0]] if len(cond.output_indices) == 1 else None
    return verdict_t is not None and verdict_t.dtype == np.bool_ and _static(verdict_t) and _size(verdict_t) == 1


def compile_while(cond, body, op_backend: dict, executors: Callable | None = None) -> Callable | None:
    """loop(values, bound) -> (iterations, values) running the WHILE of executors cond and body as one
    compiled function, or None when it cannot be compiled (then nothing has been compiled). Iterations
    are -1 when `bound` (>= 0) ran out with the cond still true, as controlflow's fused loop. The loop
    returns None (values untouched: it works on copies) when an op met a value it does not take (an
    index out of range): the executors then run the loop from the start and raise the op's error.
    `executors(index)`: the executor of a subgraph that an IF or a WHILE inside calls (compiled inline);
    without it such loops are not compiled."""
    if not _loop_signature(cond, body):
        return None
    n = len(body.input_indices)
    loop_tensors = [body.subgraph.tensors[t] for t in body.input_indices]

    code = Code()
    loops = [f"L{k}" for k in range(n)]
    cnamer = _Namer(code, cond, "c", loops, executors=executors)
    bnamer = _Namer(code, body, "b", loops, cnamer)
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

    lines = [f"@kernel\ndef loop(bound, cap, {', '.join(loops + code.args)}):"]
    carry = _carry(" " * 8, loops, results, loop_tensors, cnamer.allocs, "S")
    lines += cnamer.allocs
    lines += ["    count = 0", "    while True:"]
    lines += cond_lines
    lines += [f"        if not {verdict}[0]:", "            break",
              "        if count == bound:", "            return -1"]
    lines += body_lines + carry
    lines += ["        count += 1", "    return count"]
    fn = compile_source("\n".join(lines) + "\n", "loop")
    consts = list(code.values)
    dtypes = [t.dtype for t in loop_tensors]
    compile_now(fn, -1, -1, *[np.empty(1, dt) for dt in dtypes], *consts)
    nested = cnamer.nested
    shapes = [tuple(t.shape) for t in loop_tensors]

    def run(values: list, bound: int, tick: Callable | None = None) -> tuple[int, list] | None:
        ls = [np.array(x, dtype=dt).reshape(-1) for x, dt in zip(values, dtypes)]   # copies: ours to write
        if tick is None:
            count = fn(bound, bound, *ls, *consts)
            if count == NOT_TAKEN:
                return None
        elif nested:
            return None   # a deadline and loops inside: the executors check it in every loop
        else:
            # A deadline: numba cannot read a clock, so the loop runs in chunks of the iterations tick
            # allows; a chunk that runs out (-1) leaves the loop values after its last body, and the
            # next chunk goes on from there (its first cond is evaluated again: ops are pure).
            count = 0
            while True:
                check = tick(count, bound)
                got = fn(check - count, bound, *ls, *consts)
                if got == NOT_TAKEN:
                    return None
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
