"""IF, WHILE, CALL_ONCE and Circle's CALL: kernels, the generated fused IF and WHILE runs, and the
shape rules, which infer the called subgraphs through the shape-inference engine.

WHILE semantics as TFLite/onert: cond runs on the loop values, then body, body outputs feed the next
iteration; zero iterations return the inputs. Without profiling, the cond's and body's steps are
inlined into one generated Python loop (fuse_while, built with exec's InlinedCode), and body outputs
alternate between two buffers per loop run when the memory plan allows (loop_carried_buffers).

Copy policy. Kernels never write into arrays they did not allocate, so a value can be handed to a
subgraph and back by reference: branch inputs, cond inputs, loop-invariant values and body outputs
all move without copying, and a body's outputs become the next iteration's inputs as they are. The
seed policy ("all": copy every subgraph input on call and every output on return) is kept as a
session option, so the two can be compared; both count the bytes they copy per op in the profile.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from onert_py.backends.registry import CONTROLFLOW, KernelContext, Run, shape_rule
from onert_py.backends.shape_rules import Node, fmt, is_static, merge, numel, unknown_like
from onert_py.errors import ExecutionError
from onert_py.exec.executor import Executor, InlinedCode
from onert_py.exec.memory_plan import loop_carried_buffers
from onert_py.ir import Subgraph


def _subgraph(ctx: KernelContext, key: str):
    index = ctx.options.get(key)
    if index is None or not 0 <= index < len(ctx.executors):
        raise ctx.fail(f"{key} {index} is not a subgraph of this model")
    return ctx.executors[index]


def _check_signature(ctx: KernelContext, ex, what: str, in_tensors: Sequence, out_tensors: Sequence,
                     check_inputs: bool = True) -> None:
    """The called subgraph takes and returns as many tensors as the op passes, of the same dtypes."""
    sg = ex.subgraph
    if check_inputs and len(sg.inputs) != len(in_tensors):
        raise ctx.fail(f"{what} subgraph {sg.index} takes {len(sg.inputs)} inputs, the op passes "
                       f"{len(in_tensors)}")
    if out_tensors is not None and len(sg.outputs) != len(out_tensors):
        raise ctx.fail(f"{what} subgraph {sg.index} returns {len(sg.outputs)} outputs, the op has "
                       f"{len(out_tensors)}")
    for k, (si, t) in enumerate(zip(sg.inputs, in_tensors)):
        if check_inputs and t is not None and sg.tensors[si].dtype != t.dtype:
            raise ctx.fail(f"{what} subgraph {sg.index} input {k} is {sg.tensors[si].type_name}, the op "
                           f"passes {t.type_name}")
    for k, (so, t) in enumerate(zip(sg.outputs, out_tensors or ())):
        if sg.tensors[so].dtype != t.dtype:
            raise ctx.fail(f"{what} subgraph {sg.index} output {k} is {sg.tensors[so].type_name}, the op's "
                           f"output is {t.type_name}")


class _Copier:
    """Copies values under the seed policy and counts the bytes; passes them through otherwise."""

    def __init__(self, ctx: KernelContext):
        self.copy_all = ctx.runtime.options.controlflow_copy == "all"
        self.counter = ctx.runtime.profile.bytes_copied
        self.key = (ctx.subgraph.index, ctx.op.index)

    def __call__(self, values: list) -> list:
        if not self.copy_all:
            return values
        out = []
        copied = 0
        for x in values:
            if isinstance(x, np.ndarray):
                x = x.copy()
                copied += x.nbytes
            out.append(x)
        self.counter[self.key] += copied
        return out


def _truth(cond, iteration: int) -> bool:
    """A cond subgraph's verdict. LiteRT refuses a multi-element verdict it can see at prepare time
    (shapes propagated from the WHILE's initial inputs, i.e. the first evaluation) and reads element 0
    of one that grew dynamically in a later iteration."""
    if cond.size == 0:
        raise ExecutionError("WHILE cond subgraph returned an empty tensor")
    if cond.size > 1 and iteration == 0:
        raise ExecutionError(f"WHILE cond subgraph returned shape {list(np.shape(cond))}; a WHILE "
                             "condition must have one element")
    return bool(cond.reshape(-1)[0])


# ----------------------------------------------------------------------------- shape rules' helpers
# Control flow infers the subgraphs it calls through the engine (n.engine.subgraph).

def called_subgraph(n: Node, key: str) -> Subgraph:
    """The subgraph option `key` names (a shape rule's view of it)."""
    k = n.opts.get(key)
    if not isinstance(k, int) or not 0 <= k < len(n.engine.model.subgraphs):
        raise n.fail(f"{key} {k} is not a subgraph of this model")
    return n.engine.model.subgraphs[k]


def _outputs_of(n: Node, callee: Subgraph, result, count: int) -> list:
    if len(callee.outputs) != count:
        raise n.fail(f"subgraph {callee.index} returns {len(callee.outputs)} values, the op has {count} outputs")
    outs = [result.shapes[o] for o in callee.outputs]
    if n.engine.policy.dynamic_subgraph_taints and result.has_dynamic:
        return [unknown_like(s) for s in outs]
    return outs


def _infer_call(n: Node, callee: Subgraph, shapes: list, skip_unused: bool = False):
    """The engine's shapes of `callee` run on `shapes` (compiler.shape_inference.SubgraphShapes)."""
    if len(callee.inputs) != len(shapes):
        raise n.fail(f"subgraph {callee.index} takes {len(callee.inputs)} inputs, the op passes {len(shapes)}")
    if skip_unused and n.engine.policy.skip_unused_inputs:
        # LiteRT removes the inputs a branch or cond never reads (nor returns), so they keep their shape.
        reads = callee.read_tensors()
        shapes = [s if t in reads else tuple(callee.tensors[t].shape) for s, t in zip(shapes, callee.inputs)]
    return n.engine.subgraph(callee.index, shapes)


def branches_shape(n: Node, callees: list[Subgraph], shapes: list) -> list:
    """Output shapes of an op that runs one of `callees` on `shapes`: what every branch agrees on."""
    outs = None
    for callee in callees:
        got = _outputs_of(n, callee, _infer_call(n, callee, shapes, skip_unused=True), n.n_out)
        if outs is None:
            outs = got
        elif n.engine.policy.dynamic_subgraph_taints:
            outs = [a if a == b else unknown_like(merge(a, b) or a) for a, b in zip(outs, got)]
        else:
            outs = [merge(a, b) for a, b in zip(outs, got)]
    return outs or []


def call_shape(n: Node, key: str) -> list:
    """Output shapes of an op that runs the subgraph option `key` names on all its inputs."""
    callee = called_subgraph(n, key)
    return _outputs_of(n, callee, _infer_call(n, callee, n.input_shapes()), n.n_out)


@CONTROLFLOW.register("IF", calls_subgraphs=True, foldable=False)
def if_(ctx: KernelContext) -> Run:
    then_ex = _subgraph(ctx, "then_subgraph_index")
    else_ex = _subgraph(ctx, "else_subgraph_index")
    if not ctx.inputs:
        raise ctx.fail("IF needs a condition input")
    data_tensors = [ctx.input_tensor(i) for i in range(1, len(ctx.inputs))]
    out_tensors = [ctx.output_tensor(i) for i in range(len(ctx.outputs))]
    for what, ex in (("then", then_ex), ("else", else_ex)):
        _check_signature(ctx, ex, what, data_tensors, out_tensors)
    v, cond_i, data, outs = ctx.values, ctx.inputs[0], ctx.inputs[1:], ctx.outputs
    copier = _Copier(ctx)
    # Each branch only receives the inputs it reads; the rest are passed as None (never touched).
    masks = {id(ex): ex.subgraph.inputs_read() for ex in (then_ex, else_ex)}

    def run_profiled() -> None:
        ex = then_ex if _if_truth(v[cond_i]) else else_ex
        mask = masks[id(ex)]
        args = copier([v[i] if m else None for i, m in zip(data, mask)])
        results = copier(ex.execute(args))
        for o, r in zip(outs, results):
            v[o] = r

    if copier.copy_all:
        return run_profiled
    profile = ctx.runtime.profile
    fused = []   # built on first run: the branches may be prepared after this op

    def run() -> None:
        if profile.enabled:
            return run_profiled()
        if not fused:
            fused.append(fuse_if(v, cond_i, data, outs, then_ex, else_ex, _if_truth))
        fused[0]()
    return run


@shape_rule("IF")
def if_shape(n: Node):
    c = n.shape(0)
    if is_static(c) and numel(c) != 1:
        raise n.fail(f"the condition must have one element, has shape {fmt(c)}")
    callees = [called_subgraph(n, "then_subgraph_index"), called_subgraph(n, "else_subgraph_index")]
    return branches_shape(n, callees, n.input_shapes(1))


def _if_truth(cond) -> bool:
    if cond.size != 1:
        raise ExecutionError(f"IF condition must have one element, got shape {list(cond.shape)}")
    return bool(cond.reshape(-1)[0])


# STABLEHLO_WHILE has WHILE's options (cond/body subgraph indices) and semantics.
@CONTROLFLOW.register("WHILE", "STABLEHLO_WHILE", calls_subgraphs=True, foldable=False)
def while_(ctx: KernelContext) -> Run:
    cond_ex = _subgraph(ctx, "cond_subgraph_index")
    body_ex = _subgraph(ctx, "body_subgraph_index")
    n = len(ctx.inputs)
    if len(ctx.outputs) != n:
        raise ctx.fail(f"WHILE has {n} inputs but {len(ctx.outputs)} outputs")
    in_tensors = [ctx.input_tensor(i) for i in range(n)]
    out_tensors = [ctx.output_tensor(i) for i in range(n)]
    _check_signature(ctx, cond_ex, "cond", in_tensors, None)
    if len(cond_ex.subgraph.outputs) != 1:
        raise ctx.fail(f"cond subgraph {cond_ex.index} must return one value, returns "
                       f"{len(cond_ex.subgraph.outputs)}")
    cond_out = cond_ex.subgraph.tensors[cond_ex.subgraph.outputs[0]]
    if cond_out.dtype != np.bool_:
        raise ctx.fail(f"cond subgraph {cond_ex.index} returns {cond_out.type_name}, not BOOL")
    if not cond_out.is_dynamic and int(np.prod(cond_out.shape, dtype=np.int64)) != 1:
        # As LiteRT: a statically multi-element verdict is refused; a dynamic one is read at element 0.
        raise ctx.fail(f"cond subgraph {cond_ex.index} returns shape {list(cond_out.shape)}; "
                       "a WHILE condition must have one element")
    _check_signature(ctx, body_ex, "body", in_tensors, out_tensors)
    v, ins, outs = ctx.values, ctx.inputs, ctx.outputs
    limit = ctx.runtime.options.max_while_iterations
    iterations = ctx.runtime.profile.iterations
    key = (ctx.subgraph.index, ctx.op.index)
    copier = _Copier(ctx)
    cond_reads = cond_ex.subgraph.inputs_read()
    cond_execute, body_execute = cond_ex.execute, body_ex.execute

    if copier.copy_all:
        def run() -> None:
            values = [v[i] for i in ins]
            count = 0
            while True:
                if not _truth(cond_execute(copier([x if r else None for x, r in zip(values, cond_reads)]))[0], count):
                    break
                if limit is not None and count >= limit:
                    raise ExecutionError(f"WHILE exceeded max_while_iterations={limit}")
                values = copier(body_execute(copier(values)))
                count += 1
            iterations[key] += count
            for o, x in zip(outs, values):
                v[o] = x
        return run

    # By reference: the loop values list itself goes to cond (when it reads them all) and body.
    cond_reads_all = all(cond_reads)
    bound = limit if limit is not None else -1
    profile = ctx.runtime.profile
    fused = []   # the generated loop, built on first run (the body may not be prepared before us)

    def finish(values: list, count: int) -> None:
        iterations[key] += count
        for o, x in zip(outs, values):
            v[o] = x

    def run_profiled() -> None:
        values = [v[i] for i in ins]
        count = 0
        while True:
            c = cond_execute(values if cond_reads_all
                             else [x if r else None for x, r in zip(values, cond_reads)])[0]
            if not (c if c.size == 1 else _truth(c, count)):
                break
            if count == bound:
                raise ExecutionError(f"WHILE exceeded max_while_iterations={limit}")
            values = body_execute(values)
            count += 1
        finish(values, count)

    if not ins or cond_ex is body_ex:
        return run_profiled

    def run() -> None:
        if profile.enabled:   # per-op times need each step timed: the executors' own loops do that
            return run_profiled()
        if not fused:
            fused.append(fuse_while(cond_ex, body_ex, _truth))
        count, values = fused[0]([v[i] for i in ins], bound)
        if count < 0:
            raise ExecutionError(f"WHILE exceeded max_while_iterations={limit}")
        finish(values, count)
    return run


@shape_rule("WHILE", "STABLEHLO_WHILE")
def while_shape(n: Node):
    cond, body = called_subgraph(n, "cond_subgraph_index"), called_subgraph(n, "body_subgraph_index")
    engine = n.engine
    shapes = n.input_shapes()
    if n.litert_quirks:   # LiteRT leaves WHILE outputs that nothing reads unresized
        read = n.sg.read_tensors()
        n.unresized.update(o for o in n.op.outputs if o not in read)
    if len(n.op.outputs) != len(shapes):
        raise n.fail(f"{len(shapes)} inputs but {n.n_out} outputs")
    if len(cond.outputs) != 1:
        raise n.fail(f"cond subgraph {cond.index} must return one value")

    def check_cond(cur: list) -> None:
        r = _infer_call(n, cond, cur, skip_unused=True)
        c = r.shapes[cond.outputs[0]]
        if is_static(c) and numel(c) != 1:
            raise n.fail(f"cond subgraph {cond.index} returns shape {fmt(c)}; a condition has one element")

    if engine.policy.dynamic_subgraph_taints:
        # LiteRT: one prepare of the body with the loop inputs; outputs static only if they keep the shapes.
        check_cond(shapes)
        outs = _outputs_of(n, body, _infer_call(n, body, shapes), n.n_out)
        if all(is_static(o) for o in outs) and outs == shapes:
            return outs
        return [unknown_like(merge(a, b) or a or b) for a, b in zip(shapes, outs)]
    cur = shapes
    for _ in range(sum(len(s) for s in shapes if s is not None) + len(shapes) + 2):
        check_cond(cur)
        outs = _outputs_of(n, body, _infer_call(n, body, cur), n.n_out)
        nxt = [merge(a, b) for a, b in zip(cur, outs)]
        if nxt == cur:
            return cur
        cur = nxt
    return [None] * n.n_out


def fuse_while(cond: Executor, body: Executor, truth: Callable) -> Callable:
    """One generated function running a whole WHILE: the cond's and the body's steps inlined in one
    Python `while` loop. It replaces two `execute` calls, two list builds and two argument bindings
    per iteration, which is where a scalar loop's time goes.

    Returns loop(values, bound) -> (iterations, final values); iterations is -1 when `bound` (if >= 0)
    iterations ran and the cond still says go on (the caller raises).
    `truth(verdict, iteration)` decides a verdict that is not a numpy bool scalar.
    """
    f = InlinedCode(f"WHILE loop over subgraphs {cond.index} and {body.index}")
    xs = [f"x{k}" for k in range(len(body.input_indices))]
    f.lines += ["def loop(values, bound):",
                f"    {', '.join(xs)}, = values",
                "    count = 0"]
    # Body outputs carried in two buffers per run of the loop, iterations writing them in turn (see
    # loop_carried_buffers): the kernels' planned slots point at this iteration's buffer.
    opts = body.runtime.options
    carried = [] if not opts.arena or opts.preserve_all_tensors else loop_carried_buffers(
        body.subgraph, body.operations, body.fresh, cond_operations=cond.operations, may_keep=body.may_keep)
    tensors = body.subgraph.tensors
    for j in carried:
        t = tensors[body.output_indices[j]]
        make = f"empty({tuple(t.shape)!r}, {t.dtype.str!r})"
        f.lines.append(f"    B{j} = ({make}, {make})")
    f.lines += ["    try:",
                "        while True:"]
    (verdict,) = f.inline(cond, xs, " " * 12)
    f.lines += [f"            c = {verdict}",
                "            if c.__class__ is bool_:",
                "                if not c:",
                "                    break",
                "            elif not truth(c, count):",
                "                break",
                "            if count == bound:",
                "                count = -1",
                "                break"]
    f.lines += [f"            P[{body.output_indices[j]}] = B{j}[count & 1]" for j in carried]
    results = f.inline(body, xs, " " * 12)
    f.lines += [f"            {', '.join(xs)}, = {', '.join(results)},",
                "            count += 1",
                "    except Exception as e:",
                "        raise error_at(e) from e",
                "    finally:"]
    f.lines += [f"        P[{body.output_indices[j]}] = None" for j in carried]
    f.release_temporaries(" " * 8)
    f.lines.append(f"    return count, [{', '.join(xs)}]")
    return f.build("loop", truth=truth, P=body.planned, empty=np.empty)


def fuse_if(v: list, cond_slot: int, data: Sequence[int], outs: Sequence[int], then_ex: Executor,
            else_ex: Executor, truth: Callable) -> Callable:
    """IF as one generated run closure: the verdict read, then the chosen branch's steps inlined with
    its inputs bound from the caller's slots (only those it reads) and its outputs stored back."""
    f = InlinedCode(f"IF over subgraphs {then_ex.index} and {else_ex.index}")
    f.lines += ["def run():",
                f"    c = v[{cond_slot}]",
                "    if c.__class__ is not bool_:",
                "        c = truth(c)",
                "    try:"]
    for keyword, ex in (("if c:", then_ex), ("else:", else_ex)):
        f.lines.append(f"        {keyword}")
        reads = ex.subgraph.inputs_read()
        results = f.inline(ex, [f"v[{i}]" if r else None for i, r in zip(data, reads)], " " * 12)
        f.lines += [f"            v[{o}] = {r}" for o, r in zip(outs, results)]
        f.lines.append("            pass")
    f.lines += ["    except Exception as e:",
                "        raise error_at(e) from e",
                "    finally:"]
    f.release_temporaries(" " * 8)
    return f.build("run", v=v, truth=truth)


@CONTROLFLOW.register("CALL_ONCE", calls_subgraphs=True, foldable=False)
def call_once(ctx: KernelContext) -> Run:
    init_ex = _subgraph(ctx, "init_subgraph_index")
    if init_ex.subgraph.inputs or init_ex.subgraph.outputs:
        raise ctx.fail(f"CALL_ONCE init subgraph {init_ex.index} must have no inputs and no outputs")
    done = ctx.runtime.call_once_done

    def run() -> None:
        if init_ex.index not in done:
            init_ex.execute([])
            done.add(init_ex.index)
    return run


@shape_rule("CALL_ONCE")
def call_once_shape(n: Node):
    _infer_call(n, called_subgraph(n, "init_subgraph_index"), [])
    return [None] * n.n_out


def call_subgraph(ctx: KernelContext, key: str, what: str) -> Run:
    """Run the subgraph named by option `key` on the op's inputs, once per op run."""
    callee = _subgraph(ctx, key)
    in_tensors = [ctx.input_tensor(i) for i in range(len(ctx.inputs))]
    out_tensors = [ctx.output_tensor(i) for i in range(len(ctx.outputs))]
    _check_signature(ctx, callee, what, in_tensors, out_tensors)
    v, ins, outs = ctx.values, ctx.inputs, ctx.outputs
    copier = _Copier(ctx)

    def run() -> None:
        results = copier(callee.execute(copier([v[i] for i in ins])))
        for o, r in zip(outs, results):
            v[o] = r
    return run


@CONTROLFLOW.register("CALL", calls_subgraphs=True, foldable=False)
def call(ctx: KernelContext) -> Run:
    return call_subgraph(ctx, "subgraph", "called")


@shape_rule("CALL")
def call_rule_shape(n: Node):
    return call_shape(n, "subgraph")
