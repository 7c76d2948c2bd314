"""Resource variables and hash tables, kept in the session's runtime state so every subgraph
(and every CALL_ONCE initialiser) sees the same ones."""
from __future__ import annotations

import numpy as np

from onert_py.backends.cpu.shape import FIXED_TYPES, check_dtype, type_name
from onert_py.backends import gradients as gr
from onert_py.backends.registry import CPU, KernelContext, Run, grad_rule, no_gradient, shape_rule
from onert_py.backends.shape_rules import Node, Shape
from onert_py.errors import ExecutionError


def _resource_id(ctx: KernelContext, key: tuple) -> np.int32:
    """A stable int32 handle for a named resource, shared by all subgraphs of the session."""
    ids = ctx.runtime.resources.setdefault("__ids__", {})
    return np.int32(ids.setdefault(key, len(ids)))


def _handle_key(handle) -> int:
    return int(np.asarray(handle).reshape(-1)[0])


def _declared_shape(tensor) -> tuple[int, ...]:
    """The shape a handle or table size is written in: the output tensor's declared one."""
    return tuple(tensor.shape or ())


def declared_output_shape(n: Node) -> list[Shape | None]:
    """Shape rule of ops whose kernel writes a handle or a size in the output's declared shape (LiteRT
    resizes HASHTABLE's and HASHTABLE_SIZE's to [1], a difference tests/compiler/test_shape_rules.py
    records)."""
    return [_declared_shape(n.sg.tensors[o]) for o in n.op.outputs]


@CPU.register("VAR_HANDLE", dtypes=("resource",), foldable=False)
def var_handle(ctx: KernelContext) -> Run:
    key = ("var", ctx.options.get("container") or "", ctx.options.get("shared_name") or "")
    handle = np.array(_resource_id(ctx, key)).reshape(_declared_shape(ctx.output_tensor(0)))
    v, (o,) = ctx.values, ctx.outputs

    def run() -> None:
        v[o] = handle
    return run


shape_rule("VAR_HANDLE")(declared_output_shape)


@CPU.register("ASSIGN_VARIABLE", dtypes=FIXED_TYPES + ("complex128",), keeps_inputs=True, foldable=False)
def assign_variable(ctx: KernelContext) -> Run:
    ctx.expect_inputs(2)
    check_dtype(ctx, 1, same_output=False)
    h, x = ctx.inputs
    v, variables = ctx.values, ctx.runtime.resources

    def run() -> None:
        variables[("var", _handle_key(v[h]))] = v[x]  # by reference: values are never written in place
    return run


@shape_rule("ASSIGN_VARIABLE")
def no_outputs_shape(n: Node) -> list[Shape | None]:
    """The op only updates session state: no outputs (none is dynamic)."""
    return [None] * n.n_out


@CPU.register("READ_VARIABLE", dtypes=FIXED_TYPES + ("complex128",), foldable=False)
def read_variable(ctx: KernelContext) -> Run:
    (h,), (o,) = ctx.inputs, ctx.outputs
    v, variables = ctx.values, ctx.runtime.resources
    dtype = ctx.output_dtype()
    if type_name(dtype) not in CPU.dtypes["READ_VARIABLE"]:
        raise ctx.fail(f"output type {type_name(dtype)} is not supported "
                       f"(supported: {', '.join(CPU.dtypes['READ_VARIABLE'])})")

    def run() -> None:
        key = ("var", _handle_key(v[h]))
        if key not in variables:
            raise ExecutionError(f"READ_VARIABLE of resource {key[1]} before any ASSIGN_VARIABLE")
        value = variables[key]
        if value.dtype != dtype:
            raise ExecutionError(f"variable {key[1]} holds {value.dtype}, READ_VARIABLE expects {dtype}")
        v[o] = value
    return run


# No shape rule: the value's shape is the variable's, session state that shape inference cannot see.


@CPU.register("HASHTABLE", dtypes=("resource",), foldable=False)
def hashtable(ctx: KernelContext) -> Run:
    key = ("table", int(ctx.options.get("table_id", 0)))
    handle = np.array(_resource_id(ctx, key)).reshape(_declared_shape(ctx.output_tensor(0)))
    tables = ctx.runtime.resources
    v, (o,) = ctx.values, ctx.outputs

    def run() -> None:
        tables.setdefault(("table", _handle_key(handle)), {})
        v[o] = handle
    return run


shape_rule("HASHTABLE")(declared_output_shape)


def _table(tables: dict, handle) -> dict:
    key = ("table", _handle_key(handle))
    if key not in tables:
        raise ExecutionError(f"hash table {key[1]} is used before HASHTABLE created it")
    return tables[key]


def _key(k):
    return k if isinstance(k, bytes) else k.item()


@CPU.register("HASHTABLE_IMPORT", dtypes=("int64", "string"), foldable=False)
def hashtable_import(ctx: KernelContext) -> Run:
    h, keys, values = ctx.inputs
    v, tables = ctx.values, ctx.runtime.resources

    def run() -> None:
        table = _table(tables, v[h])
        ks, vs = np.asarray(v[keys]).reshape(-1), np.asarray(v[values]).reshape(-1)
        if ks.size != vs.size:
            raise ExecutionError(f"HASHTABLE_IMPORT: {ks.size} keys but {vs.size} values")
        for k, val in zip(ks, vs):
            table.setdefault(_key(k), val)  # like TF's lookup table import: the first value wins
    return run


shape_rule("HASHTABLE_IMPORT")(no_outputs_shape)


@CPU.register("HASHTABLE_FIND", dtypes=("int64", "string"), foldable=False)
def hashtable_find(ctx: KernelContext) -> Run:
    h, keys, default = ctx.inputs
    (o,) = ctx.outputs
    v, tables = ctx.values, ctx.runtime.resources
    dtype = ctx.output_dtype()

    def run() -> None:
        table = _table(tables, v[h])
        ks = np.asarray(v[keys])
        dflt = np.asarray(v[default]).reshape(-1)[0]
        out = np.empty(ks.shape, dtype=dtype)
        flat = out.reshape(-1)
        for n, k in enumerate(ks.reshape(-1)):
            flat[n] = table.get(_key(k), dflt)
        v[o] = out
    return run


@shape_rule("HASHTABLE_FIND")
def hashtable_find_shape(n: Node) -> list[Shape | None]:
    """One value per key, in the keys' shape (whatever the table holds)."""
    return [n.shape(1)]


@CPU.register("HASHTABLE_SIZE", dtypes=("resource",), foldable=False)
def hashtable_size(ctx: KernelContext) -> Run:
    (h,), (o,) = ctx.inputs, ctx.outputs
    v, tables = ctx.values, ctx.runtime.resources
    shape, dtype = _declared_shape(ctx.output_tensor(0)), ctx.output_dtype()

    def run() -> None:
        v[o] = np.full(shape, len(_table(tables, v[h])), dtype=dtype)
    return run


# Like HASHTABLE's handle, the size is written in the output's declared shape (LiteRT resizes it to [1]).
shape_rule("HASHTABLE_SIZE")(declared_output_shape)


# ------------------------------------------------------------------------------------ stacks
# onert-py's accumulators for gradients through WHILE (compiler/gradients.py, controlflow's WHILE rule):
# a stack is a persistent linked list held in a 0-d object (VARIANT) tensor, so a push makes a new stack
# in O(1) and shares the old one: no value is ever copied or written in place, and the bytes a loop keeps
# grow linearly with its iterations.

def _stack(value) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = value
    return out


@CPU.register("OnertPyStackNew", dtypes=("variant",), foldable=False)
def stack_new(ctx: KernelContext) -> Run:
    """An empty stack."""
    (o,), v = ctx.outputs, ctx.values

    def run() -> None:
        v[o] = _stack(None)
    return run


@CPU.register("OnertPyStackPush", dtypes=("variant",), keeps_inputs=True)   # the value escapes into the stack
def stack_push(ctx: KernelContext) -> Run:
    """(stack, value) -> the stack with value on top."""
    ctx.expect_inputs(2)
    (s_i, x_i), (o,), v = ctx.inputs, ctx.outputs, ctx.values
    pushed = ctx.runtime.profile.accumulator_bytes
    key = (ctx.subgraph.index, ctx.op.index)

    def run() -> None:
        x = v[x_i]
        pushed[key] += np.asarray(x).nbytes       # always counted, as control flow's copied bytes
        v[o] = _stack((x, np.asarray(v[s_i]).reshape(())[()]))
    return run


@CPU.register("OnertPyStackPop", dtypes=("variant",))
def stack_pop(ctx: KernelContext) -> Run:
    """stack -> (its top value, the stack below it)."""
    ctx.expect_inputs(1)
    (s_i,), (o, rest), v = ctx.inputs, ctx.outputs, ctx.values
    where = ctx.where

    def run() -> None:
        cell = np.asarray(v[s_i]).reshape(())[()]
        if cell is None:
            raise ExecutionError(f"{where}: pop from an empty stack")
        v[o], below = cell
        v[rest] = _stack(below)
    return run


@CPU.register("OnertPyStackPopOrZeros", dtypes=("variant",))
def stack_pop_or_zeros(ctx: KernelContext) -> Run:
    """(stack, like) -> (its top value, or zeros shaped like `like` when it is empty; the stack below):
    a stack of cotangents pops zeros for the values nothing downstream depended on."""
    ctx.expect_inputs(2)
    (s_i, like_i), (o, rest), v = ctx.inputs, ctx.outputs, ctx.values

    def run() -> None:
        cell = np.asarray(v[s_i]).reshape(())[()]
        if cell is None:
            like = np.asarray(v[like_i])
            v[o], v[rest] = np.zeros(like.shape, like.dtype), _stack(None)
            return
        v[o], below = cell
        v[rest] = _stack(below)
    return run


@shape_rule("OnertPyStackNew", "OnertPyStackPush")
def stack_shape(n: Node) -> list[Shape | None]:
    return [()]


@shape_rule("OnertPyStackPopOrZeros")
def stack_pop_or_zeros_shape(n: Node) -> list[Shape | None]:
    return [n.shape(1), ()]


# A stack's cotangent is a stack of the cotangents of its values, in the same order: a push's gradient
# pops the value's cotangent off its output's cotangent stack, a pop's pushes it back (second
# derivatives through a loop's accumulators).

@grad_rule("OnertPyStackPush")
def stack_push_grad(g: gr.GradNode):
    d = g.dy()
    below = g.b.new_tensor(np.dtype(object), "cotangent_stack", (), "VARIANT")
    value = g.b.new_tensor(g.in_dtype(1), "cotangent", None)
    g.b.add_op("CUSTOM", [d, g.x(1)], [value, below], "OnertPyStackPopOrZeros", {})
    return [below, value]


@grad_rule("OnertPyStackPop", "OnertPyStackPopOrZeros")
def stack_pop_grad(g: gr.GradNode):
    dx, d_rest = g.dy(0), g.dy(1)
    if d_rest is None:
        d_rest = gr.empty_stack(g)
    if dx is None:   # a zero keeps the stack's order; a value that takes no gradient gets a 0-d one
        dx = gr.zeros_like(g, g.y(0)) if g.out_dtype(0).kind in "fO" else g.const(0.0)
    pushed = g.emit("OnertPyStackPush", d_rest, dx, dtype=object, custom="OnertPyStackPush")
    g.b.sg.tensors[pushed].type_name = "VARIANT"
    return [pushed] + [None] * (len(g.op.inputs) - 1)


grad_rule("OnertPyStackNew")(lambda g: [])


@shape_rule("OnertPyStackPop")
def stack_pop_shape(n: Node) -> list[Shape | None]:
    # a popped value has the shape its pusher declared for it, kept on the output tensor
    t = n.sg.tensors[n.op.outputs[0]]
    shape = None if not t.has_rank else tuple(t.shape_signature if t.shape_signature is not None else t.shape)
    return [shape, ()]


# handles, tables and the loop accumulators carry no gradient of their own
no_gradient("VAR_HANDLE", "HASHTABLE", "HASHTABLE_FIND", "HASHTABLE_IMPORT", "HASHTABLE_SIZE")
