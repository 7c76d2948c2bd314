"""Static shape inference: every tensor's shape from a subgraph's input shapes, before anything runs.

A shape is a tuple of ints where -1 is a dimension that cannot be known without data, or None when
not even the rank is known. A tensor is *static* when its shape has no -1 (and is not None); an op
output is *dynamic* when its shape depends on the VALUES of a tensor that is not known at prepare
time (LiteRT's rule): RESHAPE with a computed shape tensor, WHERE, UNIQUE, NMS with a computed
max_output_size, RANGE/FILL/TILE/PAD/SLICE/... with computed parameters.

Known values are constants, values handed in by the caller (the compiler's folded constants) and
values computed here by a small numpy evaluation of shape arithmetic on known integer tensors
(SHAPE of a static tensor, then STRIDED_SLICE/PACK/CONCATENATION/GATHER/CAST/ADD/MUL/...), which is
what keeps converter-made graphs (SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE) static after a resize.

This module is the engine only: policies, the walk over a subgraph in execution order, value
evaluation, the cache. The rules are registered in each op's family module beside its kernel
(`registry.shape_rule` / `registry.value_rule`; what a rule sees is `backends.shape_rules.Node`). An op
without a shape rule gets dynamic outputs (never a wrong shape). Control-flow rules live in the
controlflow backend and infer the subgraphs they call through the engine: IF/STABLEHLO_CASE from all
branches, WHILE by iterating the body to a fixpoint where dims that change become -1.

Two policies:
- FULL (default): every value function, compiler-folded values, and WHILE fixpoints; inference goes on
  past dynamic ops with -1 dims, so later shapes stay as precise as the data allows.
- LITERT: what LiteRT 2.x's prepare step computes, so that onert_py.Interpreter reports the same
  shapes after allocate_tensors(): values only for the ops LiteRT evaluates at prepare time (its
  "persistent read-only" tensors), a subgraph stops at its first op with a dynamic output (later
  tensors keep their previous shapes), a called subgraph with any dynamic tensor makes the control
  flow op's outputs dynamic, and WHILE cond inputs nobody reads are left unresized.

Contradictions that no input data could resolve (a RESHAPE to a different element count, shapes
that do not broadcast, CONCATENATION dims that differ, ...) raise ShapeInferenceError (a
PrepareError, so a ValueError) naming the subgraph, op and input shapes.

The memory budget (exec/budget.py): given `max_memory`, every output shape the engine derives is
checked against it (its bytes with the tensor's dtype) as soon as it is derived, and one over it is a
ResourceError naming the op, the tensor and the size. The compiler runs this over the whole model
before any kernel is prepared or folded (`check_derived_shapes`), and wraps each op whose output shapes
stay unknown until run time in a check made from its actual inputs just before it runs
(`output_budget_check`): broadcasting, GATHER, TILE and friends are refused before they allocate.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import math

import numpy as np

from onert_py.backends.registry import SHAPE_RULES, VALUE_RULES, load_builtin_kernels, register_shape_function
from onert_py.backends.shape_rules import Node, Shape, is_static, numel
from onert_py.compiler.compile import execution_order
from onert_py.errors import PrepareError, ShapeInferenceError
from onert_py.exec.budget import itemsize, over_budget
from onert_py.ir import Model, Operation, Subgraph

__all__ = ["Shape", "ShapePolicy", "FULL", "LITERT", "LITERT_VALUE_OPS", "ShapeInferenceError",
           "SubgraphShapes", "ShapeResult", "ShapeCache", "infer_shapes", "is_static",
           "register_shape_function", "iter_dynamic", "check_derived_shapes", "output_budget_check"]


@dataclass(frozen=True)
class ShapePolicy:
    name: str
    litert_values: bool = False                # LiteRT: values only of ops it evaluates at prepare time
    stop_at_dynamic: bool = False              # LiteRT: stop preparing a subgraph at its first dynamic op
    dynamic_subgraph_taints: bool = False      # LiteRT: a callee with a dynamic tensor -> dynamic outputs
    skip_unused_inputs: bool = False           # LiteRT: IF branch / WHILE cond inputs nobody reads keep theirs
    use_known: bool = True                     # take the caller's known (folded) values
    litert_quirks: bool = False                # LiteRT 2.3's own rules for FC, SLICE, UNSORTED_SEGMENT_*, WHILE
    max_value_elements: int = 1 << 16          # larger results are not evaluated (shape params are small)
    lenient: bool = False                      # a rule that fails gives unknown outputs instead of raising


FULL = ShapePolicy("full")
LITERT = ShapePolicy("litert", litert_values=True, stop_at_dynamic=True, dynamic_subgraph_taints=True,
                     skip_unused_inputs=True, use_known=False, litert_quirks=True)
# The compiler's budget check before preparing: FULL, but a contradiction is left to the kernels that
# meet it (they name it at prepare), and inference goes on past it.
BUDGET = ShapePolicy("budget", lenient=True)


def __getattr__(name: str) -> Any:
    if name == "LITERT_VALUE_OPS":
        # The ops LiteRT 2.3 evaluates in Prepare when all their inputs are constant or were themselves
        # evaluated in Prepare (kTfLitePersistentRo outputs), as their value rules declare; verified one
        # by one in tests/compiler.
        load_builtin_kernels()
        return frozenset(name for name, rule in VALUE_RULES.items() if rule.litert)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ----------------------------------------------------------------------------------- results

@dataclass
class SubgraphShapes:
    """Inferred shapes of one subgraph's tensors for one set of input shapes."""
    index: int
    shapes: list                      # per tensor: Shape, or None (unknown rank / not reached)
    values: dict[int, np.ndarray]     # known values (constants, folded, evaluated)
    order: list[int]                  # op indices in the order they were inferred
    first_dynamic: int | None = None  # position in `order` of the first op with a dynamic output
    resolved: dict[int, Shape] = field(default_factory=dict)  # static shapes of inputs and op outputs

    @property
    def has_dynamic(self) -> bool:
        return self.first_dynamic is not None

    def is_static(self, tensor: int) -> bool:
        return is_static(self.shapes[tensor])


@dataclass
class ShapeResult:
    """Shapes of the entry subgraph and of every subgraph its control flow calls (the last call's)."""
    subgraph_index: int
    input_shapes: tuple
    subgraphs: dict[int, SubgraphShapes]
    # subgraphs inferred with more than one set of input shapes (called from two sites, a WHILE body
    # whose loop values change shape): their shapes here are only the last call's
    varied: frozenset = frozenset()

    @property
    def main(self) -> SubgraphShapes:
        return self.subgraphs[self.subgraph_index]

    def __getitem__(self, k: int) -> SubgraphShapes:
        return self.subgraphs[k]

    def output_shapes(self, model: Model) -> list:
        return [self.main.shapes[o] for o in model.subgraphs[self.subgraph_index].outputs]


class _Engine:
    """Infers one model's subgraphs for one policy; rules call back `subgraph` for control flow."""
    def __init__(self, model: Model, policy: ShapePolicy, known: Mapping[int, Mapping[int, Any]] | None,
                 max_memory: int | float = math.inf):
        load_builtin_kernels()   # the rules are registered by the family modules
        self.model = model
        self.policy = policy
        self.max_memory = max_memory
        self.known = known if (known is not None and policy.use_known) else {}
        self.memo: dict[tuple, SubgraphShapes] = {}
        self.visited: dict[int, SubgraphShapes] = {}
        self.called_with: dict[int, set[tuple]] = {}   # subgraph -> the input shapes it was inferred for
        self.active: set[tuple] = set()
        self.current_out: list = []
        self.orders: dict[int, list[Operation]] = {}

    def subgraph(self, k: int, shapes: Sequence[Shape | None]) -> SubgraphShapes:
        key = (k, tuple(shapes))
        self.called_with.setdefault(k, set()).add(key[1])
        result = self.memo.get(key)
        if result is None:
            if key in self.active:
                raise ShapeInferenceError(f"subgraph {k} calls itself")
            self.active.add(key)
            try:
                result = self.memo[key] = self._infer(self.model.subgraphs[k], list(shapes))
            finally:
                self.active.discard(key)
        self.visited[k] = result
        return result

    def _order(self, sg: Subgraph) -> list[Operation]:
        order = self.orders.get(sg.index)
        if order is None:
            order = self.orders[sg.index] = execution_order(sg)
        return order

    def _infer(self, sg: Subgraph, in_shapes: list) -> SubgraphShapes:
        n = len(sg.tensors)
        shapes: list = [None] * n
        values: dict[int, Any] = {}
        produced = {o for op in sg.operations for o in op.outputs}
        inputs = set(sg.inputs)
        for t in sg.tensors:
            if t.data is not None:
                shapes[t.index] = tuple(t.shape)
                values[t.index] = t.data
            elif t.index not in produced and t.index not in inputs:
                # variables, optional state, and zero-size constants (stored without a buffer)
                shapes[t.index] = tuple(t.shape) if t.has_rank else None
                if 0 in t.shape and not t.is_variable:
                    values[t.index] = np.zeros(t.shape, t.dtype)
        for i, s in zip(sg.inputs, in_shapes):
            shapes[i] = None if s is None else tuple(int(d) for d in s)
            values.pop(i, None)
        for i, v in self.known.get(sg.index, {}).items():
            if 0 <= i < n and i not in inputs and v is not None:
                values[i] = v
                shapes[i] = tuple(np.shape(v))
        result = SubgraphShapes(sg.index, shapes, values, [])
        resolved = result.resolved
        for i in sg.inputs:
            if is_static(shapes[i]):
                resolved[i] = shapes[i]
        limit = self.policy.max_value_elements
        for pos, op in enumerate(self._order(sg)):
            result.order.append(op.index)
            node = Node(op, sg, shapes, values, self)
            outs = self._op_shapes(node)
            dynamic = False
            skip = node.unresized
            for o, s in zip(op.outputs, outs):
                if o < 0:
                    continue
                if o in values and sg.tensors[o].data is None and o not in inputs:   # folded by the compiler
                    s = tuple(np.shape(values[o]))
                shapes[o] = s
                if is_static(s):
                    if o not in skip:
                        resolved[o] = s
                    self._check_budget(sg, op, o, s)
                else:
                    dynamic = True
            rule = VALUE_RULES.get(op.kernel_name)
            if not dynamic and rule is not None and (rule.litert or not self.policy.litert_values):
                self._evaluate(node, rule, outs, limit)
            if dynamic and result.first_dynamic is None:
                result.first_dynamic = pos
                if self.policy.stop_at_dynamic:
                    break
        return result

    def _check_budget(self, sg: Subgraph, op: Operation, o: int, shape: Shape) -> None:
        """A derived static shape over the memory budget is a ResourceError naming the op and tensor."""
        if self.max_memory == math.inf:
            return
        t = sg.tensors[o]
        n = math.prod(shape) * itemsize(t.dtype)
        if n > self.max_memory:
            raise over_budget(f"subgraph {sg.index} operator {op.index} ({op.kernel_name}): output {t.name!r}", n,
                              self.max_memory, shape, t.dtype)

    def _op_shapes(self, node: Node) -> list:
        try:
            return self._rule_shapes(node)
        except ShapeInferenceError:
            if self.policy.lenient:
                return [None] * len(node.op.outputs)
            raise

    def _rule_shapes(self, node: Node) -> list:
        op = node.op
        fn = SHAPE_RULES.get(op.kernel_name)
        if fn is None:
            return [None] * len(op.outputs)
        try:
            outs = list(fn(node))
        except ShapeInferenceError:
            raise
        except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError, OverflowError) as e:
            raise node.fail(f"{type(e).__name__}: {e}") from e
        if len(outs) != len(op.outputs):
            raise node.fail(f"shape rule gave {len(outs)} shapes for {len(op.outputs)} outputs")
        return [None if s is None else tuple(int(d) for d in s) for s in outs]

    def _evaluate(self, node: Node, rule, outs: list, limit: int) -> None:
        op, values = node.op, node.values
        if all(o in values for o in op.outputs if o >= 0):
            return
        if rule.reads_values:
            ins = []
            for i in op.inputs:
                if i < 0:
                    ins.append(None)
                    continue
                v = values.get(i)
                if v is None or np.asarray(v).dtype.kind not in "iub" or np.size(v) > limit:
                    return
                ins.append(np.asarray(v))
        else:
            ins = []
        if any(node.sg.tensors[o].dtype.kind not in "iub" for o in op.outputs if o >= 0):
            return
        if sum(numel(s) for s in outs) > limit:
            return
        self.current_out = outs
        try:
            got = rule.fn(node, ins)
        except (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError, ShapeInferenceError):
            return   # not evaluable here: the value stays unknown (the shape is known anyway)
        if got is None:
            return
        for o, s, v in zip(op.outputs, outs, got):
            v = np.asarray(v)
            if o < 0 or v.shape != s:
                continue   # never trust a value that disagrees with the inferred shape
            v = v.astype(node.sg.tensors[o].dtype, copy=False)
            v.setflags(write=False)
            values[o] = v


def _check_inputs(model: Model, k: int, input_shapes: Sequence[Sequence[int] | None] | None) -> tuple:
    if not 0 <= k < len(model.subgraphs):
        raise ValueError(f"subgraph {k} does not exist; the model has {len(model.subgraphs)}")
    sg = model.subgraphs[k]
    if input_shapes is None:
        return tuple(tuple(sg.tensors[i].shape) for i in sg.inputs)
    if len(input_shapes) != len(sg.inputs):
        raise ValueError(f"subgraph {k} has {len(sg.inputs)} inputs, got {len(input_shapes)} shapes")
    return tuple(None if s is None else tuple(int(d) for d in s) for s in input_shapes)


def infer_shapes(model: Model, subgraph_index: int = 0,
                 input_shapes: Sequence[Sequence[int] | None] | None = None, *,
                 policy: ShapePolicy = FULL, known: Mapping[int, Mapping[int, Any]] | None = None,
                 max_memory: int | float = math.inf) -> ShapeResult:
    """Shapes of every tensor of `subgraph_index` (and of the subgraphs it calls) for these input
    shapes (default: the declared ones; -1 dims are allowed and propagate). `known` maps subgraph
    -> tensor -> value for values computed elsewhere (the compiler's folded constants). A derived
    shape over `max_memory` bytes is a ResourceError naming its op."""
    shapes = _check_inputs(model, subgraph_index, input_shapes)
    engine = _Engine(model, policy, known, max_memory)
    engine.subgraph(subgraph_index, shapes)
    varied = frozenset(k for k, calls in engine.called_with.items() if len(calls) > 1)
    return ShapeResult(subgraph_index, shapes, dict(engine.visited), varied)


class ShapeCache:
    """infer_shapes results kept per (subgraph, input shapes): resizing back to a shape seen before
    costs a dict look-up. Oldest entries are dropped past `max_entries`."""

    def __init__(self, model: Model, policy: ShapePolicy = FULL,
                 known: Mapping[int, Mapping[int, Any]] | Callable[[], Mapping] | None = None,
                 max_entries: int = 64, max_memory: int | float = math.inf):
        self.model = model
        self.policy = policy
        self.max_memory = max_memory
        self._known = known
        self.max_entries = max_entries
        self._results: dict[tuple, ShapeResult] = {}
        self.hits = self.misses = 0

    def infer(self, subgraph_index: int = 0,
              input_shapes: Sequence[Sequence[int] | None] | None = None) -> ShapeResult:
        shapes = _check_inputs(self.model, subgraph_index, input_shapes)
        key = (subgraph_index, shapes)
        result = self._results.get(key)
        if result is not None:
            self.hits += 1
            return result
        self.misses += 1
        known = self._known() if callable(self._known) else self._known
        result = infer_shapes(self.model, subgraph_index, shapes, policy=self.policy, known=known,
                              max_memory=self.max_memory)
        if len(self._results) >= self.max_entries:
            self._results.pop(next(iter(self._results)))
        self._results[key] = result
        return result

    def __len__(self) -> int:
        return len(self._results)


def iter_dynamic(result: ShapeResult) -> Iterable[tuple[int, int]]:
    """(subgraph, tensor) of every tensor whose shape is not static."""
    for k, r in result.subgraphs.items():
        for i, s in enumerate(r.shapes):
            if not is_static(s):
                yield k, i


# ----------------------------------------------------------------------------------- the memory budget

def check_derived_shapes(model: Model, max_memory: int | float) -> dict[int, dict[int, Shape]]:
    """Infer every subgraph from its inputs' shape signatures (-1 where any size may come) and the
    subgraphs they call from their callers' shapes, checking each derived shape against `max_memory`:
    a ResourceError names the first op whose output would be over it, before anything is prepared,
    folded or run. A contradiction is not an error here (the kernel meeting it names it).

    Returns, per subgraph, the tensors whose shape is the same static shape in every inference: an op
    writing only those needs no check at run time."""
    engine = _Engine(model, BUDGET, None, max_memory)
    for sg in model.subgraphs:
        if sg.index in engine.visited:
            continue   # inferred already, with its caller's shapes
        shapes = [tuple(t.shape_signature if t.shape_signature is not None else t.shape) if t.has_rank else None
                  for t in (sg.tensors[i] for i in sg.inputs)]
        try:
            engine.subgraph(sg.index, shapes)
        except PrepareError:
            continue   # no order (an op reading what nothing writes): compiling says so
    static: dict[int, dict[int, Shape]] = {}
    for (k, _), result in engine.memo.items():
        seen = {t: s for t, s in enumerate(result.shapes) if is_static(s)}
        if k in static:
            seen = {t: s for t, s in static[k].items() if seen.get(t) == s}
        static[k] = seen
    return static


class _RunTimeEngine:
    """What a shape rule may ask of the engine when it runs on an op's actual inputs (no subgraphs)."""
    policy = FULL
    current_out: list = []

    def __init__(self, model: Model):
        self.model = model

    def subgraph(self, k: int, shapes: Sequence[Shape | None]) -> SubgraphShapes:
        raise ShapeInferenceError("not inferred at run time")


# Integer inputs with at most this many elements are handed to the rule as values at run time (shape
# parameters: a RESHAPE's shape, TILE's multiples, PAD's paddings, FILL's dims, RANGE's bounds).
_RUN_TIME_VALUE_ELEMENTS = 256


def output_budget_check(op: Operation, sg: Subgraph, model: Model,
                        max_memory: int | float) -> Callable[[list], None] | None:
    """check(values) for an op whose output shapes are not known before it runs: its shape rule applied
    to its inputs as they are (their shapes, and the values of small integer ones) gives the shapes it
    is about to allocate, and one over `max_memory` is a ResourceError naming the output and its size.
    A rule that cannot tell (or refuses the inputs) leaves it to the kernel. The inputs last checked are
    remembered (their shapes and small integer values decide the rule's answer), so a run with the same
    shapes as the last one costs a tuple compare. None without a rule or a budget."""
    rule = SHAPE_RULES.get(op.kernel_name)
    if rule is None or max_memory == math.inf:
        return None
    ins = tuple(i for i in op.inputs if i >= 0)
    ints = tuple(i for i in ins if sg.tensors[i].dtype.kind in "iub")
    outs = [(o, sg.tensors[o], itemsize(sg.tensors[o].dtype)) for o in op.outputs if o >= 0]
    engine = _RunTimeEngine(model)
    small = _RUN_TIME_VALUE_ELEMENTS
    prod = math.prod
    passed: list = [None]   # the key of the inputs last found within the budget

    def check(values: list) -> None:
        try:
            key = [values[i].shape for i in ins]
        except AttributeError:   # a value that is not an array (a resource handle), or none yet
            key = [None if values[i] is None else np.shape(values[i]) for i in ins]
        for i in ints:
            v = values[i]
            if getattr(v, "size", small + 1) <= small:
                key.append(v.tobytes())
        if key != passed[0]:
            derive(values, key)

    def derive(values: list, key: list) -> None:
        known = {i: values[i] for i in ints if getattr(values[i], "size", small + 1) <= small}
        try:
            got = rule(Node(op, sg, dict(zip(ins, key)), known, engine))
        except Exception:  # noqa: BLE001 - inputs the rule refuses: the kernel says what is wrong
            return
        for (o, t, size), s in zip(outs, (s for o, s in zip(op.outputs, got) if o >= 0)):
            if s is None or any(d < 0 for d in s):
                continue
            n = prod(s) * size
            if n > max_memory:
                raise over_budget(f"output {t.name!r}", n, max_memory, tuple(s), t.dtype)
        passed[0] = key
    return check
