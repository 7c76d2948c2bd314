"""IF, WHILE, CALL_ONCE and Circle's CALL.

Copy policy. Kernels never write into arrays they did not allocate, so a value can be handed to a
subgraph and back by reference: branch inputs, cond inputs, loop-invariant values and body outputs
all move without copying, and a body's outputs become the next iteration's inputs as they are. The
seed policy ("all": copy every subgraph input on call and every output on return) is kept as a
session option, so the two can be compared; both count the bytes they copy per op in the profile.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from onert_py.backends.registry import CONTROLFLOW, KernelContext, Run
from onert_py.errors import ExecutionError
from onert_py.exec.executor import fuse_if, fuse_while


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


def _reads(ex) -> list[bool]:
    """Per subgraph input: whether any op (or an output) of the subgraph reads it."""
    used = {t for op in ex.subgraph.operations for t in op.inputs}
    used.update(ex.subgraph.outputs)
    return [i in used for i in ex.subgraph.inputs]


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


@CONTROLFLOW.register("IF")
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
    masks = {id(ex): _reads(ex) for ex in (then_ex, else_ex)}

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


def _if_truth(cond) -> bool:
    if cond.size != 1:
        raise ExecutionError(f"IF condition must have one element, got shape {list(cond.shape)}")
    return bool(cond.reshape(-1)[0])


@CONTROLFLOW.register("WHILE", "STABLEHLO_WHILE")  # same options: cond/body subgraph indices
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
    cond_reads = _reads(cond_ex)
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


@CONTROLFLOW.register("CALL_ONCE")
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


@CONTROLFLOW.register("CALL")
def call(ctx: KernelContext) -> Run:
    return call_subgraph(ctx, "subgraph", "called")
