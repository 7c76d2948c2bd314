"""Resource variables and hash tables, kept in the session's runtime state so every subgraph
(and every CALL_ONCE initialiser) sees the same ones."""
from __future__ import annotations

import numpy as np

from onert_py.backends.cpu.shape import FIXED_TYPES, check_dtype, type_name
from onert_py.backends.registry import CPU, KernelContext, Run
from onert_py.errors import ExecutionError


def _resource_id(ctx: KernelContext, key: tuple) -> np.int32:
    """A stable int32 handle for a named resource, shared by all subgraphs of the session."""
    ids = ctx.runtime.resources.setdefault("__ids__", {})
    return np.int32(ids.setdefault(key, len(ids)))


def _handle_key(handle) -> int:
    return int(np.asarray(handle).reshape(-1)[0])


@CPU.register("VAR_HANDLE", dtypes=("resource",))
def var_handle(ctx: KernelContext) -> Run:
    key = ("var", ctx.options.get("container") or "", ctx.options.get("shared_name") or "")
    handle = np.array(_resource_id(ctx, key)).reshape(ctx.output_tensor(0).shape or ())
    v, (o,) = ctx.values, ctx.outputs

    def run() -> None:
        v[o] = handle
    return run


@CPU.register("ASSIGN_VARIABLE", dtypes=FIXED_TYPES + ("complex128",))
def assign_variable(ctx: KernelContext) -> Run:
    ctx.expect_inputs(2)
    check_dtype(ctx, 1, same_output=False)
    h, x = ctx.inputs
    v, variables = ctx.values, ctx.runtime.resources

    def run() -> None:
        variables[("var", _handle_key(v[h]))] = v[x]  # by reference: values are never written in place
    return run


@CPU.register("READ_VARIABLE", dtypes=FIXED_TYPES + ("complex128",))
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


@CPU.register("HASHTABLE", dtypes=("resource",))
def hashtable(ctx: KernelContext) -> Run:
    key = ("table", int(ctx.options.get("table_id", 0)))
    handle = np.array(_resource_id(ctx, key)).reshape(ctx.output_tensor(0).shape or ())
    tables = ctx.runtime.resources
    v, (o,) = ctx.values, ctx.outputs

    def run() -> None:
        tables.setdefault(("table", _handle_key(handle)), {})
        v[o] = handle
    return run


def _table(tables: dict, handle) -> dict:
    key = ("table", _handle_key(handle))
    if key not in tables:
        raise ExecutionError(f"hash table {key[1]} is used before HASHTABLE created it")
    return tables[key]


def _key(k):
    return k if isinstance(k, bytes) else k.item()


@CPU.register("HASHTABLE_IMPORT", dtypes=("int64", "string"))
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


@CPU.register("HASHTABLE_FIND", dtypes=("int64", "string"))
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


@CPU.register("HASHTABLE_SIZE", dtypes=("resource",))
def hashtable_size(ctx: KernelContext) -> Run:
    (h,), (o,) = ctx.inputs, ctx.outputs
    v, tables = ctx.values, ctx.runtime.resources
    shape, dtype = ctx.output_tensor(0).shape, ctx.output_dtype()

    def run() -> None:
        v[o] = np.full(shape, len(_table(tables, v[h])), dtype=dtype)
    return run
