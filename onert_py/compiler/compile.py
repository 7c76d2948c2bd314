"""Compile an ir.Model into an ExecutorMap: order ops, pick a backend per op, prepare kernels."""
from __future__ import annotations

import dataclasses
import math
import os
from collections import defaultdict
from typing import Callable, Mapping

import numpy as np

from onert_py.backends import jit
from onert_py.backends.registry import (CONTROLFLOW, CPU, CUSTOM, JIT, Backend, KernelContext, custom_kernel,
                                        load_builtin_kernels)
from onert_py.errors import PrepareError, UnsupportedOpError
from onert_py.exec.budget import check_declared
from onert_py.exec.executor import Executor, ExecutorMap, wrapped_error
from onert_py.exec.runtime import RuntimeState
from onert_py.ir import Model, Operation, Subgraph

# Compute backends by name, in no order: a session's `backends` ("jit;cpu") gives the order.
_BACKENDS = {"cpu": CPU, "jit": JIT}


def quantized_type(op: Operation, sg: Subgraph) -> str | None:
    """The type a compute op runs quantized in ("int8", "uint8", "int16", ...): that of its input 0, or
    else of its output 0, when that is an integer tensor with quantization parameters; None for an op
    that is not quantized (a float op with int8 weights, a hybrid, is not). Control flow and custom
    ops run the same kernel either way."""
    load_builtin_kernels()
    if op.is_custom or CONTROLFLOW.supports(op.opcode):
        return None
    for t in (op.inputs[:1], op.outputs[:1]):
        if t and t[0] >= 0:
            tensor = sg.tensors[t[0]]
            q = tensor.quantization
            if tensor.dtype.kind in "iu" and q is not None and np.size(q.scale) > 0:
                return "int4" if tensor.type_name == "INT4" else tensor.dtype.name
    return None


def assign_backend(op: Operation, backends: tuple[str, ...] = ("cpu",), qtype: str | None = None,
                   sg: Subgraph | None = None, op_backend: Mapping[str, str] | None = None) -> Backend | None:
    """Controlflow ops go to the controlflow backend, custom ops to the custom registry (or to a
    compute backend with a kernel of that name: onert-py's own custom ops, e.g. the gradient ops), the
    rest to the first compute backend in `backends` that takes the op and its types (for a quantized
    op, a quantized kernel running its type `qtype`), as onert's BACKENDS list. `op_backend` forces a
    backend by "SUBGRAPH:INDEX" or by op type (onert's OP_BACKEND_MAP / OP_BACKEND_<op>); a forced
    backend that cannot run the op is an error."""
    load_builtin_kernels()
    if op.is_custom and custom_kernel(op.custom_name) is not None:
        return CUSTOM
    if not op.is_custom and CONTROLFLOW.supports(op.opcode):
        return CONTROLFLOW
    forced = _forced_backend(op, sg, op_backend)
    if forced is not None:
        backend = _BACKENDS[forced]
        if not backend.takes(op, sg, qtype):
            where = f"subgraph {sg.index} operator {op.index}" if sg is not None else f"operator {op.index}"
            kind = f"quantized {qtype} " if qtype else ""
            raise PrepareError(f"op_backend puts {where} ({op.kernel_name}) on backend {forced!r}, which has "
                               f"no {kind}kernel for it (or not for its types)")
        return backend
    return next((_BACKENDS[name] for name in backends if _BACKENDS[name].takes(op, sg, qtype)), None)


def _forced_backend(op: Operation, sg: Subgraph | None, op_backend: Mapping[str, str] | None) -> str | None:
    if not op_backend:
        return None
    if sg is not None:
        name = op_backend.get(f"{sg.index}:{op.index}")
        if name is not None:
            return name
    return op_backend.get(op.kernel_name)


def unsupported_ops(model: Model, backends: tuple[str, ...] = ("cpu",),
                    op_backend: Mapping[str, str] | None = None) -> list[tuple[int, int, str]]:
    """(subgraph, op index, op name) for every op without a kernel (for a quantized op: without a
    quantized kernel for its type, named e.g. "CONV_2D (quantized int16)")."""
    missing = []
    for sg in model.subgraphs:
        for op in sg.operations:
            qtype = quantized_type(op, sg)
            if assign_backend(op, backends, qtype, sg, op_backend) is None:
                missing.append((sg.index, op.index, op.kernel_name + (f" (quantized {qtype})" if qtype else "")))
    return missing


def default_backends() -> str:
    """ONERT_PY_BACKENDS when set (as onert's BACKENDS), else "jit;cpu" when numba imports, else "cpu"."""
    env = os.environ.get("ONERT_PY_BACKENDS", "").strip()
    if env:
        return env
    return "jit;cpu" if jit.installed() else "cpu"


def backend_names(backends: str | tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The compute backends to try, in order. A listed backend that cannot load here (jit without
    numba) is passed over while another is left, as onert skips a backend it cannot load; alone, it is
    an error saying what to install."""
    if backends is None:
        backends = default_backends()
    names = tuple(b.strip() for b in (backends.split(";") if isinstance(backends, str) else backends)
                  if b.strip())
    for name in names:
        if name not in _BACKENDS:
            raise ValueError(f"unknown backend {name!r}; available: {', '.join(sorted(_BACKENDS))}")
    if "jit" in names and not jit.load():
        kept = tuple(n for n in names if n != "jit")
        if not kept:
            raise ValueError(f"the jit backend needs numba ({jit.why_not()}); "
                             "install it with: pip install \"onert-py[jit]\"")
        names = kept
    return names or ("cpu",)


def parse_op_backend(spec: str | Mapping[str, str] | None) -> dict[str, str]:
    """op_backend as a dict {"CONV_2D": "cpu", "0:12": "jit"}, from a dict or onert's string form
    "CONV_2D=cpu;0:12=jit"; ONERT_PY_OP_BACKEND_MAP (same form) fills in keys the option does not
    give. Keys are op types (custom ops by their custom name) or SUBGRAPH:INDEX."""
    merged = _parse_map(os.environ.get("ONERT_PY_OP_BACKEND_MAP", ""), "ONERT_PY_OP_BACKEND_MAP")
    merged.update(_parse_map(spec, "op_backend") if spec else {})
    for key, name in merged.items():
        if name not in _BACKENDS:
            raise ValueError(f"op_backend {key}={name}: unknown backend {name!r}; available: "
                             f"{', '.join(sorted(_BACKENDS))}")
        if name == "jit" and not jit.load():
            raise ValueError(f"op_backend {key}=jit: the jit backend needs numba ({jit.why_not()}); "
                             "install it with: pip install \"onert-py[jit]\"")
    return merged


def _parse_map(spec: str | Mapping[str, str], what: str) -> dict[str, str]:
    if isinstance(spec, Mapping):
        items = [(str(k), str(v)) for k, v in spec.items()]
    else:
        items = []
        for part in str(spec).split(";"):
            if not part.strip():
                continue
            key, eq, value = part.partition("=")
            if not eq or not key.strip() or not value.strip():
                raise ValueError(f"{what}: {part.strip()!r} is not KEY=BACKEND (KEY an op type such as "
                                 "CONV_2D, or SUBGRAPH:INDEX)")
            items.append((key, value))
    out = {}
    for key, value in items:
        key, value = key.strip(), value.strip()
        if ":" in key:
            s, _, i = key.partition(":")
            if not (s.strip().isdigit() and i.strip().isdigit()):
                raise ValueError(f"{what}: key {key!r} is not SUBGRAPH:INDEX (two numbers)")
            key = f"{int(s)}:{int(i)}"
        out[key] = value
    return out


def execution_order(sg: Subgraph) -> list[Operation]:
    """Ops in an order where every input is ready before use (file order when it already is)."""
    ready = {t.index for t in sg.tensors if t.data is not None or t.is_variable}
    ready.update(sg.inputs)
    producers = {}
    for op in sg.operations:
        for o in op.outputs:
            producers[o] = op
    for op in sg.operations:
        for t in op.inputs:
            if t >= 0 and t not in ready and t not in producers:
                tensor = sg.tensors[t]
                raise PrepareError(f"subgraph {sg.index} operator {op.index} ({op.kernel_name}) reads tensor "
                                   f"{t} ({tensor.name!r}), which is not an input, a constant, a variable, "
                                   "or the output of any operator")
    order: list[Operation] = []
    pending = list(sg.operations)
    while pending:
        progressed = []
        for op in pending:
            if all(t < 0 or t in ready for t in op.inputs):
                order.append(op)
                ready.update(op.outputs)
            else:
                progressed.append(op)
        if len(progressed) == len(pending):
            stuck = progressed[0]
            missing = [t for t in stuck.inputs if t >= 0 and t not in ready]
            raise PrepareError(f"subgraph {sg.index} operator {stuck.index} ({stuck.kernel_name}): inputs "
                               f"{missing} are never computed (the operators form a cycle)")
        pending = progressed
    return order


def compile_model(model: Model, runtime: RuntimeState | None = None,
                  backends: str | tuple[str, ...] | None = None,
                  op_backend: str | Mapping[str, str] | None = None, segments: bool = True) -> ExecutorMap:
    """Prepare one executor per subgraph, each op on the first backend of `backends` that takes it
    (default: default_backends()) unless `op_backend` forces one. Raises UnsupportedOpError naming
    every op without a kernel."""
    names = backend_names(backends)
    forced = parse_op_backend(op_backend)
    runtime = runtime or RuntimeState()
    runtime.backends, runtime.op_backend = names, forced
    runtime.own_thread_pool = False
    missing = unsupported_ops(model, names, forced)
    if missing:
        listed = "; ".join(f"{name} (subgraph {s} operator {i})" for s, i, name in missing[:20])
        more = f" and {len(missing) - 20} more" if len(missing) > 20 else ""
        raise UnsupportedOpError(f"no kernel for {len(missing)} operator(s): {listed}{more}")
    limit = runtime.options.max_memory
    check_declared(model, limit)   # before any executor allocates a tensor
    # Every shape inference derives (broadcasts, gathers, tiles, folded constants) within the budget
    # before any kernel is prepared or folded; ops whose output shapes stay unknown until they run get
    # the same check on their actual inputs right before each run (_budget_checked).
    static = None
    if limit != math.inf:
        from onert_py.compiler.shape_inference import check_derived_shapes, output_budget_check
        static = check_derived_shapes(model, limit)
    executors = ExecutorMap([Executor(sg, runtime) for sg in model.subgraphs])
    backend_of, attrs, quantized = {}, {}, set()
    for sg in model.subgraphs:
        for op in sg.operations:
            qtype = quantized_type(op, sg)
            if qtype is not None:
                quantized.add(id(op))
            backend = backend_of[id(op)] = assign_backend(op, names, qtype, sg, forced)
            attrs[id(op)] = backend.attributes(op.kernel_name)
    # Ops that may keep a value beyond their run: kernels that keep their inputs, and, when some op of
    # the model keeps values, ops that hand values to other subgraphs.
    calls_may_keep = any(a.keeps_inputs for a in attrs.values())
    keeping = {key for key, a in attrs.items() if a.keeps_inputs or (calls_may_keep and a.calls_subgraphs)}

    def may_keep(op: Operation) -> bool:
        return id(op) in keeping

    fuse = runtime.options.fuse_ops and not runtime.options.preserve_all_tensors   # fused ops keep no intermediates
    # `segments`: backends may compile runs of ops as one kernel (off for a session's recompiles for
    # new input shapes: see Specializations)
    segmenting = [_BACKENDS[name] for name in names if segments and _BACKENDS[name].compile_segments is not None]
    entries = {0, *(s.subgraph_index for s in model.signatures)}
    for sg, ex in zip(model.subgraphs, executors):
        folded: dict[int, object] = {}
        shape_folded: set[int] = set()
        warm_ups = []
        order, chains, prologues = execution_order(sg), {}, {}
        if fuse:
            order, prologues = fold_prologues(sg, order, attrs)
            order, chains = fuse_epilogues(sg, order, backend_of, attrs)
        for op in order:
            key = id(op)
            backend = backend_of[key]
            members = (op, *chains.get(key, ()))   # with the elementwise ops fused after it, if any
            if attrs[key].foldable and all(_proven(m, sg) for m in members):   # a specialized compile's
                for o in (o for m in members for o in m.outputs if o >= 0):    # shape arithmetic
                    ex.values[o] = folded[o] = sg.shape_values[o]
                    shape_folded.add(o)
                continue
            q = key in quantized
            ctx = KernelContext(op, sg, model, ex.values, runtime, executors, folded, ex.planned, ex.fresh, q)
            producer = prologues.get(key)
            if producer is not None:   # the kernel reads the producer's input and does its work too
                ctx.prologue = producer
                ctx.inputs = (producer.inputs[0], *op.inputs[1:])
                op = dataclasses.replace(op, inputs=ctx.inputs, prologue=(producer.index,))
            chain = chains.get(key)
            if chain:   # the kernel computes op and its fused elementwise ops, writing the last one's output
                ctx.epilogue, ctx.outputs = chain, chain[-1].outputs
                op = fused_operation(op, chain)
            try:
                run = backend.kernel(op.kernel_name, q)(ctx)
            except PrepareError:
                raise
            except (ValueError, TypeError, KeyError, IndexError, NotImplementedError, AttributeError,
                    ArithmeticError, RuntimeError) as e:   # a hostile op (an omitted input, a zero-size dim,
                # more dimensions than numpy's broadcasting takes)
                raise PrepareError(f"{ctx.where}: {type(e).__name__}: {e}") from e
            except MemoryError as e:   # over the budget (ResourceError) or numpy out of memory
                raise wrapped_error(ctx.where, e) from e
            if static is not None and not attrs[key].calls_subgraphs:   # callees check their own ops
                known = static.get(sg.index, {})
                if any(o >= 0 and o not in known for o in op.outputs):
                    check = output_budget_check(op, sg, model, limit)
                    if check is not None:
                        run = _budget_checked(run, check, ex.values)
            if attrs[key].foldable and _foldable(op, sg, folded):
                folded.update(_evaluate(ctx, run, folded))
                if shape_folded.intersection(op.inputs):
                    shape_folded.update(op.outputs)
                continue
            if attrs[key].foldable and _initializes_variables(op, sg, folded):
                # Constant inputs written into a variable (a converter's DEQUANTIZE of an LSTM's zero
                # state): LiteRT computes it once, then the variable carries its state from there.
                ex.initial_values.update(_evaluate(ctx, run, folded))
                continue
            if backend.compiles_lazily:
                warm_ups.append((ctx, op, run))
            ex.operations.append(op)
            ex.runs.append(run)
            ex.backend_names.append(backend.name)
            runtime.own_thread_pool |= backend.own_threads
        if fuse:   # runs of small ops a backend compiles as one kernel (Backend.compile_segments)
            entry = sg.index in entries   # other subgraphs' segments compile on first run
            for backend in segmenting:
                backend.compile_segments(ex, forced, entry)
        # kernels of backends that compile on first call compile now, except those of ops a segment
        # runs (they are its fallback, compiled should it ever need them)
        kept = {id(run) for run in ex.runs}
        for ctx, op, run in warm_ups:
            if id(run) in kept:
                _warm_up(ctx, op, run)
        ex.shape_folded = frozenset(shape_folded)
        ex.reset_variables()
        ex.finalize(folded, may_keep)
    # the arenas of all subgraphs and the constants held, together within the budget (each arena was
    # checked alone when planned; none has been written yet)
    executors.check_total(model)
    for ex in executors:   # kernels finishing what needs every subgraph prepared (registry: after_compile)
        for run in ex.runs:
            after = getattr(run, "after_compile", None)
            if after is not None:
                after()
    return executors


def fuse_epilogues(sg: Subgraph, order: list[Operation], backend_of: Mapping[int, Backend],
                   attrs: Mapping[int, object]) -> tuple[list[Operation], dict[int, tuple[Operation, ...]]]:
    """Chains of elementwise ops to fuse into the kernels of the ops they follow: op P whose kernel
    declares an `epilogue` takes a reader C of its output when C runs on the same backend, declares
    itself `fusable` and P's epilogue(P, chain, sg) agrees; then a reader of C's output, and so on
    (_epilogue_chain). Returns the execution order with each chain's producer moved to where the
    chain's last op was (every input the chain reads is computed by then) and the chains' ops left
    out, and the chains by id(producer)."""
    readers: dict[int, list[Operation]] = defaultdict(list)
    for op in sg.operations:
        for t in op.inputs:
            if t >= 0:
                readers[t].append(op)
    kept = set(sg.outputs) | {t.index for t in sg.tensors if t.is_variable}
    chains: dict[int, tuple[Operation, ...]] = {}
    fused: set[int] = set()
    for op in order:
        accepts = attrs[id(op)].epilogue
        if accepts is None or id(op) in fused:
            continue
        chain = _epilogue_chain(op, sg, readers, kept, fused, backend_of, attrs)
        if chain:
            chains[id(op)] = chain
            fused.update(id(c) for c in chain)
    if not chains:
        return order, {}
    producer_at = {id(chains[id(p)][-1]): p for p in order if id(p) in chains}
    new_order = []
    for op in order:
        if id(op) in chains:
            continue
        if id(op) in fused:
            if id(op) in producer_at:
                new_order.append(producer_at[id(op)])
            continue
        new_order.append(op)
    return new_order, chains


def _epilogue_chain(op: Operation, sg: Subgraph, readers: Mapping[int, list[Operation]], kept: set[int],
                    fused: set[int], backend_of: Mapping[int, Backend], attrs: Mapping[int, object]
                    ) -> tuple[Operation, ...]:
    """The longest chain fuse_epilogues may fuse after `op`: each next op is the first reader (in model
    order) of the value carried so far and may also read values the chain computed before it (the
    gate of x * sigmoid(x): the producer's output, read again after LOGISTIC). A chain ends only where
    every reader of the values it computes, but its last, is in it, and none of them is returned or a
    variable."""
    accepts = attrs[id(op)].epilogue
    chain: list[Operation] = []
    members: set[int] = set()
    values = [op.outputs[0]] if len(op.outputs) == 1 else []
    best: tuple[Operation, ...] = ()
    while values and values[-1] not in kept:
        nxt = next((r for r in readers[values[-1]] if id(r) not in members), None)
        if (nxt is None or backend_of[id(nxt)] is not backend_of[id(op)] or not attrs[id(nxt)].fusable
                or id(nxt) in fused or len(nxt.outputs) != 1 or not accepts(op, (*chain, nxt), sg)):
            break
        chain.append(nxt)
        members.add(id(nxt))
        values.append(nxt.outputs[0])
        if all(id(r) in members for t in values[:-1] for r in readers[t]):
            best = tuple(chain)
    return best


def fold_prologues(sg: Subgraph, order: list[Operation], attrs: Mapping[int, object]
                   ) -> tuple[list[Operation], dict[int, Operation]]:
    """Producers to fold into the kernels that read them: op C whose kernel declares a `prologue` takes
    the op P writing its input 0 when that output is read by C alone (once), is not returned or a
    variable, and C's prologue(C, P, sg) agrees. Returns the execution order without the folded
    producers (C already runs after P's inputs exist) and the producers by id(C)."""
    writer: dict[int, Operation] = {}
    reads: dict[int, int] = defaultdict(int)
    for op in sg.operations:
        for t in op.outputs:
            writer[t] = op
        for t in op.inputs:
            if t >= 0:
                reads[t] += 1
    kept = set(sg.outputs) | {t.index for t in sg.tensors if t.is_variable}
    folded: dict[int, Operation] = {}
    taken: set[int] = set()
    for op in order:
        accepts = attrs[id(op)].prologue
        if accepts is None or not op.inputs or op.inputs[0] < 0:
            continue
        t = op.inputs[0]
        producer = writer.get(t)
        if (producer is None or len(producer.outputs) != 1 or not producer.inputs or t in kept
                or reads[t] != 1 or id(producer) in taken or id(producer) in folded
                or attrs[id(producer)].epilogue is not None or not accepts(op, producer, sg)):
            continue
        folded[id(op)] = producer
        taken.add(id(producer))
    if not folded:
        return order, {}
    return [op for op in order if id(op) not in taken], folded


def fused_operation(op: Operation, chain: tuple[Operation, ...]) -> Operation:
    """The op an executor runs for `op` with `chain` fused into it: it reads op's inputs and the chain's
    other inputs and writes the chain's last output (what the memory plan and the profile see)."""
    internal = {op.outputs[0], *(c.outputs[0] for c in chain)}
    extra = [t for c in chain for t in c.inputs if t >= 0 and t not in internal]
    return dataclasses.replace(op, inputs=(*op.inputs, *extra), outputs=chain[-1].outputs,
                               fused=tuple(c.index for c in chain))


def _budget_checked(run: Callable[[], None], check: Callable[[list], None], values: list) -> Callable[[], None]:
    """`run` preceded by the budget check of the shapes it is about to allocate (from its inputs now)."""
    def checked_run() -> None:
        check(values)
        run()
    checked_run.__dict__.update(getattr(run, "__dict__", {}))   # attributes such as after_compile
    return checked_run


def _warm_up(ctx: KernelContext, op: Operation, run) -> None:
    """Run a kernel of a backend that compiles on first call once on zeros of its inputs' static shapes
    (compiling it now); the slots are put back as they were. Ops with dynamic shapes compile when
    they first run. `op` is the op the executor runs (with a fused chain's inputs)."""
    values, sg = ctx.values, ctx.subgraph
    slots = [t for t in (*op.inputs, *op.outputs) if t >= 0]
    saved = {t: values[t] for t in slots}
    try:
        for t in op.inputs:
            if t < 0 or values[t] is not None:
                continue
            tensor = sg.tensors[t]
            if tensor.is_dynamic or tensor.dtype == np.dtype(object):
                return
            values[t] = np.zeros(tensor.shape, tensor.dtype)
        run()
    except Exception:  # noqa: BLE001 - zeros a kernel refuses: it compiles on its first real run
        pass
    finally:
        for t, value in saved.items():
            values[t] = value


def _constant_inputs(op: Operation, sg: Subgraph, folded: dict) -> bool:
    """All inputs known at compile time (constants or folded results)."""
    return bool(op.inputs and op.outputs) and \
        all(t < 0 or sg.tensors[t].data is not None or t in folded for t in op.inputs)


def _foldable(op: Operation, sg: Subgraph, folded: dict) -> bool:
    """Constant inputs, outputs not variables."""
    return _constant_inputs(op, sg, folded) and not any(sg.tensors[t].is_variable for t in op.outputs)


def _proven(op: Operation, sg: Subgraph) -> bool:
    """Every output's value proven by the specialization (Subgraph.shape_values)."""
    return bool(sg.shape_values) and bool(op.outputs) and all(o < 0 or o in sg.shape_values for o in op.outputs)


def _initializes_variables(op: Operation, sg: Subgraph, folded: dict) -> bool:
    """Constant inputs, every output a variable."""
    return _constant_inputs(op, sg, folded) and all(sg.tensors[t].is_variable for t in op.outputs)


def _evaluate(ctx: KernelContext, run, folded: dict) -> dict:
    """Constant folding: run the prepared kernel once now; its outputs become compile-time values
    (e.g. DEQUANTIZE/DENSIFY of weights, so CONV_2D sees a constant filter), never recomputed."""
    values = ctx.values
    for t, value in folded.items():
        values[t] = value
    try:
        run()
    except MemoryError as e:   # over the budget (ResourceError) or numpy out of memory
        raise wrapped_error(ctx.where, e) from e
    except Exception as e:  # noqa: BLE001 - a constant expression that cannot be evaluated
        raise PrepareError(f"{ctx.where}: evaluating constant inputs failed: {type(e).__name__}: {e}") from e
    out = {}
    for o in ctx.outputs:
        value = values[o]
        if isinstance(value, np.ndarray) and value.flags.writeable:
            value.setflags(write=False)
        out[o] = value
    return out
