"""StableHLO ops that call subgraphs: STABLEHLO_CASE, STABLEHLO_COMPOSITE, STABLEHLO_WHILE.

CASE follows LiteRT's stablehlo_case.cc: input 0 is an int32 index with one element, the other inputs
go to the chosen branch; an index out of [0, N) selects the last branch. COMPOSITE runs its
decomposition subgraph on its inputs (LiteRT does the same). WHILE has the semantics of TFLite's WHILE
(stablehlo.while: cond and body over the same loop-carried values); LiteRT has no kernel for it.
"""
from __future__ import annotations

import numpy as np

from onert_py.backends import gradients as gr
from onert_py.backends.controlflow.kernels import (_check_signature, _Copier, branches_gradient, branches_shape,
                                                  call_shape, call_subgraph)
from onert_py.backends.registry import CONTROLFLOW, KernelContext, Run, grad_rule, shape_rule
from onert_py.backends.shape_rules import Node
from onert_py.errors import ExecutionError


@CONTROLFLOW.register("STABLEHLO_CASE", calls_subgraphs=True, foldable=False)
def stablehlo_case(ctx: KernelContext) -> Run:
    indices = ctx.options.get("branch_subgraph_indices") or ()
    if not indices:
        raise ctx.fail("STABLEHLO_CASE needs at least one branch")
    branches = []
    for k in indices:
        if not 0 <= k < len(ctx.executors):
            raise ctx.fail(f"branch subgraph {k} is not a subgraph of this model")
        branches.append(ctx.executors[k])
    if not ctx.inputs:
        raise ctx.fail("STABLEHLO_CASE needs an index input")
    index_t = ctx.input_tensor(0)
    if index_t.dtype != np.int32:
        raise ctx.fail(f"the branch index must be int32, not {index_t.type_name}")
    data_tensors = [ctx.input_tensor(i) for i in range(1, len(ctx.inputs))]
    out_tensors = [ctx.output_tensor(i) for i in range(len(ctx.outputs))]
    for k, ex in enumerate(branches):
        _check_signature(ctx, ex, f"branch {k}", data_tensors, out_tensors)
    v, index_i, data, outs = ctx.values, ctx.inputs[0], ctx.inputs[1:], ctx.outputs
    copier = _Copier(ctx)
    masks = [ex.subgraph.inputs_read() for ex in branches]
    last = len(branches) - 1

    def run() -> None:
        index = v[index_i]
        if np.size(index) != 1:
            raise ExecutionError(f"STABLEHLO_CASE index must have one element, got shape {list(np.shape(index))}")
        k = int(np.reshape(index, -1)[0])
        if not 0 <= k <= last:
            k = last
        args = copier([v[i] if m else None for i, m in zip(data, masks[k])])
        results = copier(branches[k].execute(args))
        for o, r in zip(outs, results):
            v[o] = r
    return run


@shape_rule("STABLEHLO_CASE")
def case_shape(n: Node):
    indices = n.opts.get("branch_subgraph_indices") or ()
    callees = []
    for k in indices:
        if not 0 <= int(k) < len(n.engine.model.subgraphs):
            raise n.fail(f"branch subgraph {k} is not a subgraph of this model")
        callees.append(n.engine.model.subgraphs[int(k)])
    return branches_shape(n, callees, n.input_shapes(1))


@CONTROLFLOW.register("STABLEHLO_COMPOSITE", calls_subgraphs=True, foldable=False)
def stablehlo_composite(ctx: KernelContext) -> Run:
    """A composite runs its decomposition subgraph."""
    return call_subgraph(ctx, "decomposition_subgraph_index", "decomposition")


@shape_rule("STABLEHLO_COMPOSITE")
def composite_shape(n: Node):
    return call_shape(n, "decomposition_subgraph_index")


@grad_rule("STABLEHLO_CASE")
def stablehlo_case_grad(g: gr.GradNode):
    """CASE(i, branches)'s gradient is CASE(i, the branches' gradients) (branches_gradient)."""
    return branches_gradient(
        g, list(g.opts["branch_subgraph_indices"]), 1,
        lambda grads, inputs, n_out, dt: g.emit("STABLEHLO_CASE", g.x(0), *inputs, n_out=n_out, dtype=dt,
                                                branch_subgraph_indices=list(grads)))


@grad_rule("STABLEHLO_COMPOSITE")
def stablehlo_composite_grad(g: gr.GradNode):
    """A composite's gradient is its decomposition's, called as CALL does (branches_gradient)."""
    return branches_gradient(
        g, [g.opts["decomposition_subgraph_index"]], 0,
        lambda grads, inputs, n_out, dt: g.emit("CALL", *inputs, n_out=n_out, dtype=dt, subgraph=grads[0]))
