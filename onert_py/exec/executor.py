"""One Executor per subgraph: a flat list of prepared kernel closures over a list of value slots.

Rank-0 values are held as numpy scalars (np.generic), not 0-d arrays: arithmetic on them is an order
of magnitude cheaper, which is what loop counters and scalar conds spend their time on.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from onert_py.errors import ExecutionError, OnertPyError, ResourceError
from onert_py.exec.budget import check_total, held_constant_bytes, itemsize, over_budget
from onert_py.exec.memory_plan import ArenaPlan, never_keeps, plan_arena

_SMALL_BYTES = 1 << 16
_PLANS_KEPT = 4


def scalar_or_array(x):
    """Numeric 0-d arrays become numpy scalars (the executor's representation of rank-0 values)."""
    if type(x) is np.ndarray and x.ndim == 0 and x.dtype.kind != "O":
        return x[()]
    return x


def _large_or_dynamic(t) -> bool:
    if t.is_dynamic or t.dtype == np.dtype(object):
        return True
    return int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize >= _SMALL_BYTES


class Executor:
    """Runs one subgraph. `execute(inputs)` is the single entry for the session and control flow."""

    def __init__(self, subgraph, runtime):
        self.subgraph = subgraph
        self.index = subgraph.index
        self.runtime = runtime
        self.values: list = [None] * len(subgraph.tensors)
        for t in subgraph.tensors:
            if t.data is not None:
                self.values[t.index] = scalar_or_array(t.data)
        self._variables = tuple(t for t in subgraph.tensors if t.is_variable)
        # a variable's initial value computed at compile time from constants (compiler: initializers)
        self.initial_values: dict[int, np.ndarray] = {}
        self.reset_variables()
        self.input_indices: tuple[int, ...] = subgraph.inputs
        self.output_indices: tuple[int, ...] = subgraph.outputs
        self.operations: list = []   # ir.Operation in execution order, parallel to runs
        self.runs: list = []
        self.backend_names: list[str] = []   # the backend running each op, parallel to runs
        self._temporaries: tuple[int, ...] = ()
        self._release_after: dict[int, tuple[int, ...]] = {}
        self._folded: frozenset[int] = frozenset()  # slots holding values computed at compile time
        # those of them that follow from the input shapes compiled for (Subgraph.shape_values and what
        # was folded from them): not constants of the model
        self.shape_folded: frozenset[int] = frozenset()
        self._fast = None
        self.planned: list = [None] * len(subgraph.tensors)   # arena slot per tensor (memory plan)
        self.fresh: set[int] = set()    # outputs whose kernels write into planned slots (never aliases)
        self.arena_plan = ArenaPlan()
        self.arena = np.empty(0, np.uint8)
        self.may_keep: Callable = never_keeps   # may_keep(op): op may keep an input beyond its run
        self._plans: dict = {}   # shapes key -> (plan, arena, views), see plan_memory

    def reset_variables(self) -> None:
        """Stateful tensors (is_variable: RNN/LSTM state) back to their initial value: their data, the
        value an initializer computed, else zeros (an int8 tensor's zero point, real 0, as LiteRT's
        ResetVariableTensor)."""
        for t in self._variables:
            if t.data is not None:
                self.values[t.index] = t.data
            elif t.index in self.initial_values:
                self.values[t.index] = np.array(self.initial_values[t.index])
            elif t.type_name == "INT8" and t.quantization is not None and t.quantization.zero_point.size:
                self.values[t.index] = np.full(t.shape, t.quantization.zero_point.reshape(-1)[0], np.int8)
            else:
                self.values[t.index] = np.zeros(t.shape, t.dtype)

    def finalize(self, folded: dict | None = None, may_keep: Callable | None = None) -> None:
        """Called once all kernels are prepared: plan memory and build the fast path.

        Memory plan, two parts. Outputs written into planned slots (`ctx.output_buffer`) get an offset
        in one arena per executor (memory_plan.py): tensors whose lifetimes do not overlap share bytes,
        and a static-shape run allocates nothing for them. Every other large or dynamic intermediate is
        released right after the last step that reads it, so the allocator reuses its block for later
        tensors. Small static ones are left in place, as clearing them would cost more than they hold.
        Subgraph outputs, variables and values folded at compile time stay. With preserve_all_tensors
        nothing is shared or released.
        """
        if folded is not None:
            self._folded = frozenset(folded)
        if may_keep is not None:
            self.may_keep = may_keep
        preserve = self.runtime.options.preserve_all_tensors
        self._plans.clear()
        self.plan_memory()
        keep = set(self.subgraph.outputs) | self._folded | set(self.arena_plan.offsets)
        self._temporaries = () if preserve else tuple(
            t.index for t in self.subgraph.tensors
            if t.data is None and not t.is_variable and t.index not in keep and _large_or_dynamic(t))
        self._release_after = self._lifetimes(set(self._temporaries))
        self._fast = self._generate()

    def plan_memory(self, shapes: dict[int, tuple[int, ...]] | None = None) -> ArenaPlan:
        """(Re)plan the arena for the given run-time shapes (by tensor; default: the declared static
        shapes) and point the planned slots at it. Kernels read the slots at run time, so a new plan
        takes effect on the next run; an output whose shape differs from its slot's gets a new array.
        The last few plans are kept with their arenas: going back to a shape seen before costs a look-up.
        Nothing is planned with preserve_all_tensors or the arena turned off."""
        return self.use_plan(*self.propose_plan(shapes))

    def propose_plan(self, shapes: dict[int, tuple[int, ...]] | None = None) -> tuple:
        """(key, plan) for these shapes without allocating anything: a kept plan with its arena, or a new
        ArenaPlan (its arena checked alone against the budget); use_plan makes it current."""
        opts = self.runtime.options
        key = None if shapes is None else tuple(sorted(shapes.items()))
        if not opts.arena or opts.preserve_all_tensors:
            key = "off"
        cached = self._plans.get(key)
        if cached is not None:
            return key, cached
        plan = ArenaPlan() if key == "off" else plan_arena(
            self.subgraph, self.operations, self.fresh, shapes=shapes, excluded=self._folded,
            may_keep=self.may_keep)
        if plan.size > opts.max_memory:   # checked before the arena is allocated
            tensors = self.subgraph.tensors
            t = max(plan.offsets, key=lambda t: math.prod(plan.shapes[t]) * tensors[t].dtype.itemsize)
            raise over_budget(f"subgraph {self.index}: the arena for {len(plan.offsets)} tensors (the largest "
                              f"{self.subgraph.tensors[t].name!r} of shape {list(plan.shapes[t])})", plan.size,
                              opts.max_memory)
        return key, plan

    def use_plan(self, key, entry) -> ArenaPlan:
        """Make a plan propose_plan gave current, allocating its arena when it is a new one."""
        if isinstance(entry, ArenaPlan):
            entry = (entry, *entry.views({t: self.subgraph.tensors[t].dtype for t in entry.offsets}))
            if len(self._plans) >= _PLANS_KEPT:
                self._plans.pop(next(iter(self._plans)))
        else:
            self._plans.pop(key, None)
        self._plans[key] = entry   # most recently used last
        self.arena_plan, self.arena, views = entry
        planned = self.planned
        for t in range(len(planned)):
            planned[t] = views.get(t)
        return self.arena_plan

    @property
    def folded_values(self) -> list:
        """The values computed at compile time (constant folding) this executor holds."""
        return [self.values[t] for t in self._folded]

    def name_tensor(self, t: int) -> str:
        """Tensor t for messages: the op writing it and its name, or the subgraph's input."""
        tensor = self.subgraph.tensors[t]
        for op in self.subgraph.operations:
            if t in op.outputs:
                return f"subgraph {self.index} operator {op.index} ({op.kernel_name}): output {tensor.name!r}"
        return f"subgraph {self.index} tensor {t} ({tensor.name!r})"

    def _lifetimes(self, releasable: set[int]) -> dict[int, tuple[int, ...]]:
        """step -> slots whose last reader (or, if never read, whose producer) is that step."""
        last: dict[int, int] = {}
        for step, op in enumerate(self.operations):
            for t in (*op.outputs, *op.inputs):
                if t in releasable:
                    last[t] = step
        by_step: dict[int, list[int]] = {}
        for t, step in last.items():
            by_step.setdefault(step, []).append(t)
        return {step: tuple(sorted(ts)) for step, ts in by_step.items()}

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        if self.runtime.profile.enabled or self._fast is None:
            return self._execute_loop(inputs)
        return self._fast(inputs)

    def _generate(self):
        """Straight-line Python for this subgraph: inputs bound, each step on its own line, outputs
        gathered. A failing step is found from the traceback's line number."""
        lines = ["def execute(inputs):"]
        n_in = len(self.input_indices)
        if n_in:
            targets = ", ".join(f"v[{i}]" for i in self.input_indices)
            lines.append(f"    {targets}{',' if n_in == 1 else ''} = inputs")
        lines.append("    try:")
        self._step_line: dict[int, int] = {}
        for k in range(len(self.runs)):
            lines.append(f"        r{k}()")
            self._step_line[len(lines)] = k
            if k in self._release_after:
                lines.append("        " + "; ".join(f"v[{t}] = None" for t in self._release_after[k]))
        if not self.runs:
            lines.append("        pass")
        lines.append("    except Exception as e:")
        lines.append("        raise error_at(e) from e")
        outs = ", ".join(f"v[{o}]" for o in self.output_indices)
        if self._temporaries:
            lines.append(f"    result = [{outs}]")
            for t in self._temporaries:
                lines.append(f"    v[{t}] = None")
            lines.append("    return result")
        else:
            lines.append(f"    return [{outs}]")
        namespace = {f"r{k}": run for k, run in enumerate(self.runs)}
        namespace.update(v=self.values, error_at=self._error_from_traceback)
        exec(compile("\n".join(lines), f"<executor of subgraph {self.index}>", "exec"), namespace)
        return namespace["execute"]

    def _error_from_traceback(self, e: Exception) -> OnertPyError:
        tb = e.__traceback__
        step = -1
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == f"<executor of subgraph {self.index}>":
                step = self._step_line.get(tb.tb_lineno, -1)
                break
            tb = tb.tb_next
        return self._error(step, e)

    def _execute_loop(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        v = self.values
        for i, arr in zip(self.input_indices, inputs):
            v[i] = arr
        if self.runtime.profile.enabled:
            self._run_profiled()
        else:
            step = -1
            try:
                for step, run in enumerate(self.runs):
                    run()
            except Exception as e:  # noqa: BLE001 - re-raised with the op named
                raise self._error(step, e) from e
        outs = [v[o] for o in self.output_indices]
        for t in self._temporaries:
            v[t] = None
        return outs

    def _run_profiled(self) -> None:
        prof, clock, sg = self.runtime.profile, self.runtime.clock, self.index
        for step, run in enumerate(self.runs):
            start = clock()
            try:
                run()
            except Exception as e:  # noqa: BLE001
                raise self._error(step, e) from e
            dur = clock() - start
            key = (sg, self.operations[step].index)
            prof.op_time[key] += dur
            prof.op_calls[key] += 1
            if prof.trace is not None:
                prof.trace.append((self.operations[step].kernel_name, sg, key[1], start, dur))

    def _error(self, step: int, e: Exception) -> OnertPyError:
        if getattr(e, "located", False):   # names its op already (an op of a compiled segment)
            return type(e)(str(e))
        if not 0 <= step < len(self.operations):
            return wrapped_error(f"subgraph {self.index}", e)
        op = self.operations[step]
        return wrapped_error(f"subgraph {self.index} operator {op.index} ({op.kernel_name})", e)


def wrapped_error(where: str, e: Exception) -> OnertPyError:
    """`e` raised at `where` as an OnertPyError naming it: ours keep their type, numpy's MemoryError
    becomes a ResourceError (an allocation nothing sized beforehand), anything else an ExecutionError."""
    if isinstance(e, OnertPyError):
        return type(e)(f"{where} -> {e}")
    if isinstance(e, MemoryError):
        return ResourceError(f"{where}: out of memory: {e}")
    return ExecutionError(f"{where}: {type(e).__name__}: {e}")


class InlinedCode:
    """Generated code that inlines subgraphs' steps: their inputs are bound straight to the callee's
    slots and its step closures called in place, with no `execute` call and no argument or result
    lists (the controlflow backend builds its fused IF and WHILE with it). The caller writes the
    surrounding lines; a failing step is found from the traceback's line number, as in `_generate`."""

    def __init__(self, title: str):
        self.filename = f"<{title}>"
        self.lines: list[str] = []
        self.where: dict[int, tuple[Executor, int]] = {}    # generated line -> (executor, step)
        self.namespace: dict = {"bool_": np.bool_, "error_at": self.error_at}
        self.callees: list[Executor] = []

    def inline(self, ex: Executor, args: Sequence[str | None], indent: str, steps: Sequence[int] | None = None,
               keep: frozenset[int] = frozenset()) -> list[str]:
        """Lines binding `args` (expressions, None = not passed) to ex's inputs and running its steps
        (`steps` of them, all by default); returns expressions for its outputs, valid until the next
        inline of the same executor. Tensors in `keep` are never released (values computed once, before
        a loop, by an earlier inline of some steps)."""
        if ex not in self.callees:
            self.callees.append(ex)
            k = self.callees.index(ex)
            self.namespace[f"s{k}"], self.namespace[f"r{k}"] = ex.values, ex.runs
        k = self.callees.index(ex)
        slots, runs = f"s{k}", f"r{k}"
        self.lines.extend(f"{indent}{slots}[{i}] = {a}" for i, a in zip(ex.input_indices, args) if a is not None)
        for step in (range(len(ex.runs)) if steps is None else steps):
            self.lines.append(f"{indent}{runs}[{step}]()")
            self.where[len(self.lines)] = (ex, step)
            released = [t for t in ex._release_after.get(step, ()) if t not in keep]
            if released:
                self.lines.append(indent + "; ".join(f"{slots}[{t}] = None" for t in released))
        return [f"{slots}[{o}]" for o in ex.output_indices]

    def release_temporaries(self, indent: str) -> None:
        for k, ex in enumerate(self.callees):
            self.lines.extend(f"{indent}s{k}[{t}] = None" for t in ex._temporaries)
        self.lines.append(f"{indent}pass")

    def error_at(self, e: Exception) -> OnertPyError:
        tb = e.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == self.filename and tb.tb_lineno in self.where:
                ex, step = self.where[tb.tb_lineno]
                return ex._error(step, e)
            tb = tb.tb_next
        if isinstance(e, MemoryError) and not isinstance(e, OnertPyError):
            return wrapped_error(self.filename, e)
        return e if isinstance(e, OnertPyError) else ExecutionError(f"{type(e).__name__}: {e}")

    def build(self, name: str, **names) -> Callable:
        self.namespace.update(names)
        exec(compile("\n".join(self.lines), self.filename, "exec"), self.namespace)
        return self.namespace[name]


class ExecutorMap:
    """All executors of a model, by subgraph index."""

    def __init__(self, executors: list[Executor]):
        self._executors = executors
        self.constant_bytes = 0   # constants held (the model's and folded ones): check_total counts them

    def __getitem__(self, index: int) -> Executor:
        return self._executors[index]

    def __len__(self) -> int:
        return len(self._executors)

    def __iter__(self):
        return iter(self._executors)

    def plan_memory(self, result) -> None:
        """Re-plan the arenas of the subgraphs in a shape-inference result (compiler.shape_inference
        ShapeResult) for its static shapes: called when inputs are resized. Every new static size and
        the new arenas with the others' and the constants are checked before any arena is allocated."""
        limit = self._executors[0].runtime.options.max_memory if self._executors else math.inf
        proposals = {}
        for k, sub in result.subgraphs.items():   # every tensor's new static size, before planning
            ex = self._executors[k]
            tensors = ex.subgraph.tensors
            for t, s in enumerate(sub.shapes):
                if s is not None and all(d >= 0 for d in s):
                    n = math.prod(s) * itemsize(tensors[t].dtype)
                    if n > limit:
                        raise over_budget(ex.name_tensor(t), n, limit, s, tensors[t].dtype)
            proposals[k] = ex.propose_plan(
                {t: tuple(s) for t, s in enumerate(sub.shapes) if s is not None and all(d >= 0 for d in s)})
        arenas = {ex.index: ex.arena_plan.size for ex in self._executors}
        for k, (_, entry) in proposals.items():
            arenas[k] = (entry if isinstance(entry, ArenaPlan) else entry[0]).size
        check_total(arenas, self.constant_bytes, limit)
        for k, (key, entry) in proposals.items():
            self._executors[k].use_plan(key, entry)

    def check_total(self, model=None) -> None:
        """The arenas of all subgraphs and the constants held (the model's and those folded at compile
        time) together within max_memory: a ResourceError naming the total and the largest arenas.
        Given the model (at compile time), the constants are counted and kept for later re-plans."""
        if model is not None:
            folded = [v for ex in self._executors for v in ex.folded_values]
            self.constant_bytes = held_constant_bytes(model, folded)
        if self._executors:
            check_total({ex.index: ex.arena_plan.size for ex in self._executors}, self.constant_bytes,
                        self._executors[0].runtime.options.max_memory)
