"""Kernel registries: one per backend, plus user-registered custom ops.

A kernel is a *prepare* function: it receives a KernelContext (the op, its decoded options, static
tensor info, the executor's value slots) once, checks what it needs, and returns a zero-argument `run`
closure that only moves arrays. Run closures read `values[i]` and assign `values[o]`; they never write
into an array they did not allocate themselves (inputs, constants and views are shared).

Planned outputs: a kernel that asks `ctx.output_buffer(i)` at prepare time gets an allocator for output
i and promises that output i never aliases one of its inputs (it is written into the array the allocator
gives, or into any other array the kernel made itself). The executor's memory plan then gives that
output a slot of its arena, shared with tensors whose lifetimes do not overlap, so a static-shape run
allocates nothing.

A run closure may carry an `after_compile()` attribute: the compiler calls it once every subgraph is
prepared and planned (a WHILE builds its fused or compiled loop from its callees' executors then, so
that compiling happens while the session is created, not in its first run).

Everything else the compiler and executors need to know of an op is declared here, where the op's
family module registers it, never as a list of names in a lower layer:
- kernel attributes (`Backend.register(..., keeps_inputs=, calls_subgraphs=, foldable=)`);
- its shape rule and value rule (`shape_rule`, `value_rule`; what they see is in shape_rules.py);
- its gradient rule (`grad_rule`, with the inputs that are trainable parameters; what it sees is in
  gradients.py).
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from onert_py.backends.gradients import GradFn
from onert_py.backends.shape_rules import ShapeFn, ValueFn
from onert_py.errors import PrepareError
from onert_py.exec import budget

Run = Callable[[], None]


class KernelContext:
    """What a kernel sees at prepare time."""

    def __init__(self, op, subgraph, model, values: list, runtime, executors=None,
                 folded: dict | None = None, planned: list | None = None, fresh: set | None = None,
                 quantized: bool = False):
        self.op = op
        self.quantized = quantized          # the quantized kernel was chosen (its types apply)
        self.options: dict[str, Any] = op.options
        self.subgraph = subgraph
        self.model = model
        self.values = values
        self.runtime = runtime
        self.executors = executors          # the ExecutorMap (used by the controlflow backend)
        self.inputs: tuple[int, ...] = op.inputs
        self.outputs: tuple[int, ...] = op.outputs
        self.folded = folded if folded is not None else {}  # tensor index -> value computed at compile time
        self._planned = planned if planned is not None else [None] * len(subgraph.tensors)
        self._fresh = fresh if fresh is not None else set()   # outputs whose kernel asked output_buffer
        # Elementwise ops the compiler fused into this one (KernelAttrs.epilogue): each reads the previous
        # one's output (this op's first); `outputs` are then the last one's, and this op's own output is
        # never materialised.
        self.epilogue: tuple = ()
        # The op the compiler folded into this one's input 0 (KernelAttrs.prologue): `inputs[0]` is then
        # that op's input 0, and its output is never materialised.
        self.prologue = None

    @property
    def where(self) -> str:
        return f"subgraph {self.subgraph.index} operator {self.op.index} ({self.op.kernel_name})"

    def fail(self, msg: str) -> PrepareError:
        return PrepareError(f"{self.where}: {msg}")

    def input_tensor(self, i: int):
        """ir.Tensor of input i (None for an omitted optional input)."""
        t = self.inputs[i] if i < len(self.inputs) else -1
        return self.subgraph.tensors[t] if t >= 0 else None

    def output_tensor(self, i: int):
        return self.subgraph.tensors[self.outputs[i]]

    def const(self, i: int) -> np.ndarray | None:
        """Constant value of input i, or None when it is computed at run time or omitted."""
        t = self.input_tensor(i)
        if t is None:
            return None
        return t.data if t.data is not None else self.folded.get(t.index)

    def has_input(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] >= 0

    def output_dtype(self, i: int = 0) -> np.dtype:
        return self.output_tensor(i).dtype

    def output_buffer(self, i: int = 0) -> Callable[[tuple[int, ...]], np.ndarray]:
        """An allocator for output i: `alloc(shape)` (shape a tuple) returns the arena slot the memory
        plan gave this output when the shape is the planned one, else a new uninitialised array of the
        output's dtype. Asking for it promises that output i never aliases an input (see the module
        docstring); the slot is overwritten on the next run, which the plan makes safe."""
        o = self.outputs[i]
        self._fresh.add(o)
        planned, dtype = self._planned, self.output_dtype(i)
        empty = np.empty
        check = self.alloc_check(i)

        def alloc(shape: tuple[int, ...]) -> np.ndarray:
            b = planned[o]
            if b is not None and b.shape == shape:
                return b
            check(shape)
            return empty(shape, dtype)
        return alloc

    def alloc_check(self, i: int = 0) -> Callable[[Sequence[int]], None]:
        """check(shape): raises ResourceError, naming output i and the size, when an output of that shape
        would be over the session's memory budget (max_memory). Kernels call it before allocating an
        output whose size comes from input values (FILL's dims, TILE's multiples, a growing
        CONCATENATION); it costs a product and a compare."""
        t = self.output_tensor(i)
        limit, size, prod = self.runtime.options.max_memory, budget.itemsize(t.dtype), math.prod

        def check(shape: Sequence[int]) -> None:
            if prod(shape) * size > limit:
                raise budget.over_budget(f"output {t.name!r}", prod(shape) * size, limit, shape, t.dtype)
        return check

    def output_slot(self, i: int = 0) -> tuple[list, int]:
        """(the plan's buffer list, output i's index into it), for a hot path that reads its planned
        slot without output_buffer's allocator call; the slot is None when the plan gave output i none
        and otherwise has the output's declared shape. Same promise as output_buffer."""
        o = self.outputs[i]
        self._fresh.add(o)
        return self._planned, o

    def expect_inputs(self, *counts: int) -> None:
        if len(self.inputs) not in counts:
            want = " or ".join(map(str, counts))
            raise self.fail(f"expects {want} inputs, has {len(self.inputs)}")


Prepare = Callable[[KernelContext], Run]


@dataclass(frozen=True)
class KernelAttrs:
    """What lower layers need to know of a kernel, declared where it is registered."""
    keeps_inputs: bool = False      # may keep a reference to an input after its run (the value escapes)
    calls_subgraphs: bool = False   # hands its inputs to other subgraphs (which may keep them)
    foldable: bool = True           # runs at compile time when every input is constant (no state, no
                                    # randomness)
    # epilogue(op, chain, subgraph) -> bool: the kernel can apply `chain`, elementwise ops each reading
    # the previous one's output (op's output first), to its output in its own pass (ctx.epilogue), so
    # the compiler may fuse them into it; None: it takes none
    epilogue: Callable[[Any, tuple, Any], bool] | None = None
    fusable: bool = False           # an elementwise op an epilogue may take (see epilogue)
    # prologue(op, producer, subgraph) -> bool: the kernel can do `producer`'s work (a zero padding of
    # op's input 0) in its own reads of that input, so the compiler may fold producer into it
    # (ctx.prologue, ctx.inputs[0] = producer's input 0); None: it takes none
    prologue: Callable[[Any, Any, Any], bool] | None = None


# accepts(op, subgraph) -> bool: a backend's own test of one op (its types, options, static shapes)
# before the op is given to it; backends="jit;cpu" passes over a backend that declines.
Accepts = Callable[[Any, Any], bool]


class Backend:
    def __init__(self, name: str, compiles_lazily: bool = False, own_threads: bool = False):
        self.name = name
        # its kernels split their work over a thread pool of their own (numba's OpenMP workers), which
        # waits for work by spinning a short while: a run using it keeps BLAS on one thread (threads.py)
        self.own_threads = own_threads
        # its kernels compile on their first call (numba): the compiler runs each once on zeros while
        # the session is created, so that compiling is paid there and not in the first inference
        self.compiles_lazily = compiles_lazily
        # compile_segments(executor, op_backend, now): replaces runs of an executor's prepared operations
        # by kernels of this backend computing each run at once (the jit backend's compiled segments);
        # `now`: compile them at once, else on first run
        self.compile_segments: Callable | None = None
        self.kernels: dict[str, Prepare] = {}
        self.dtypes: dict[str, tuple[str, ...]] = {}
        self.attrs: dict[str, KernelAttrs] = {}
        self.accepts: dict[tuple[str, bool], Accepts] = {}
        # Quantized kernels: chosen for an op whose input 0 or output 0 is a quantized integer tensor
        # (compiler.quantized_type), with the integer types each runs.
        self.quantized: dict[str, Prepare] = {}
        self.qdtypes: dict[str, tuple[str, ...]] = {}

    def register(self, *names: str, dtypes: Sequence[str] = (), keeps_inputs: bool = False,
                 calls_subgraphs: bool = False, foldable: bool = True,
                 accepts: Accepts | None = None, epilogue: Callable | None = None,
                 fusable: bool = False, prologue: Callable | None = None) -> Callable[[Prepare], Prepare]:
        """Decorator: register a prepare function under one or more op names, with the types it runs,
        its attributes (KernelAttrs) and, for a backend that takes only some ops of a kind (the jit
        backend), `accepts(op, subgraph)` saying which."""
        attrs = KernelAttrs(keeps_inputs, calls_subgraphs, foldable, epilogue, fusable, prologue)

        def deco(fn: Prepare) -> Prepare:
            for n in names:
                if n in self.kernels:
                    raise RuntimeError(f"{self.name}: kernel {n} registered twice")
                self.kernels[n] = fn
                self.dtypes[n] = tuple(dtypes)
                self.attrs[n] = attrs
                if accepts is not None:
                    self.accepts[n, False] = accepts
            return fn
        return deco

    def register_quantized(self, *names: str, dtypes: Sequence[str],
                           accepts: Accepts | None = None) -> Callable[[Prepare], Prepare]:
        """Decorator: the quantized kernel of ops `names` (in their family module, beside the float one),
        running the integer types `dtypes`. An op that only moves values (RESHAPE, GATHER, ...) registers
        its plain kernel here too: LiteRT requires its output's parameters to equal its input's."""
        def deco(fn: Prepare) -> Prepare:
            for n in names:
                if n in self.quantized:
                    raise RuntimeError(f"{self.name}: quantized kernel {n} registered twice")
                self.quantized[n] = fn
                self.qdtypes[n] = tuple(dtypes)
                if accepts is not None:
                    self.accepts[n, True] = accepts
            return fn
        return deco

    def supports(self, op_name: str, quantized: bool = False) -> bool:
        return op_name in (self.quantized if quantized else self.kernels)

    def takes(self, op, subgraph=None, qtype: str | None = None) -> bool:
        """This backend has a kernel for `op` and its types: for a quantized op (qtype: the integer type
        it runs, compiler.quantized_type) a quantized kernel of that type, and its `accepts` agrees
        (asked only with the op's subgraph: without tensors, the name and the type decide)."""
        name, quantized = op.kernel_name, qtype is not None
        if not self.supports(name, quantized) or (quantized and qtype not in self.types(name, True)):
            return False
        accepts = self.accepts.get((name, quantized))
        if accepts is None or subgraph is None:
            return True
        try:
            return bool(accepts(op, subgraph))
        except (ValueError, TypeError, IndexError, KeyError, AttributeError, ArithmeticError):
            # a hostile op (an omitted input, a zero scale) this backend cannot judge: declined, so the
            # next backend's kernel meets it and names what is wrong
            return False

    def kernel(self, op_name: str, quantized: bool = False) -> Prepare:
        return (self.quantized if quantized else self.kernels)[op_name]

    def types(self, op_name: str, quantized: bool = False) -> tuple[str, ...]:
        """The tensor types the op's (quantized) kernel runs, as docs/ops.md lists them."""
        return (self.qdtypes if quantized else self.dtypes).get(op_name, ())

    def attributes(self, op_name: str) -> KernelAttrs:
        attrs = self.attrs.get(op_name)
        if attrs is not None:
            return attrs
        # A custom kernel says it keeps its inputs with a `keeps_inputs` attribute of its prepare
        # function (read now: it may be set after registering); custom ops are never folded.
        kernel = self.kernels.get(op_name)
        return KernelAttrs(keeps_inputs=kernel is None or bool(getattr(kernel, "keeps_inputs", False)),
                           foldable=False)


# ----------------------------------------------------------------------------------- shape and value rules

@dataclass(frozen=True)
class ValueRule:
    fn: ValueFn
    litert: bool = False          # LiteRT 2.3 evaluates the op at prepare time too (its persistent
                                  # read-only tensors), so its Interpreter reports the shapes that follow
    reads_values: bool = True     # needs its inputs' values (False: only their shapes, e.g. SHAPE)


SHAPE_RULES: dict[str, ShapeFn] = {}
VALUE_RULES: dict[str, ValueRule] = {}


def shape_rule(*names: str) -> Callable[[ShapeFn], ShapeFn]:
    """Decorator: the shape rule of ops `names`, fn(node) -> one shape per output (shape_rules.py)."""
    def deco(fn: ShapeFn) -> ShapeFn:
        for n in names:
            if n in SHAPE_RULES:
                raise RuntimeError(f"shape rule {n} registered twice")
            SHAPE_RULES[n] = fn
        return fn
    return deco


def value_rule(*names: str, litert: bool = False, reads_values: bool = True) -> Callable[[ValueFn], ValueFn]:
    """Decorator: the value rule of ops `names`, fn(node, input values) -> output values, or None when
    it cannot tell. Only integer values of small size are evaluated (shape arithmetic)."""
    def deco(fn: ValueFn) -> ValueFn:
        for n in names:
            if n in VALUE_RULES:
                raise RuntimeError(f"value rule {n} registered twice")
            VALUE_RULES[n] = ValueRule(fn, litert, reads_values)
        return fn
    return deco


@dataclass(frozen=True)
class GradRule:
    fn: GradFn
    params: tuple[int, ...] = ()   # inputs that are trainable parameters (weights, biases): `wrt="weights"`
    differentiable: bool = True    # False: no input gets a gradient (integer/bool results, random ops)
    # the op's fused_activation_function applies to its output (the engine splits it off into an op of
    # its own first); False where it is internal (a recurrent cell's activation)
    output_activation: bool = True


GRAD_RULES: dict[str, GradRule] = {}


def grad_rule(*names: str, params: Sequence[int] = (), output_activation: bool = True
              ) -> Callable[[GradFn], GradFn]:
    """Decorator: the gradient rule of ops `names`, fn(node) -> one gradient tensor (or None) per input,
    built as IR through the node (gradients.py)."""
    def deco(fn: GradFn) -> GradFn:
        for n in names:
            if n in GRAD_RULES:
                raise RuntimeError(f"gradient rule {n} registered twice")
            GRAD_RULES[n] = GradRule(fn, tuple(params), output_activation=output_activation)
        return fn
    return deco


def no_gradient(*names: str) -> None:
    """Ops whose outputs carry no gradient to their inputs (comparisons, integer arithmetic, SHAPE,
    random numbers): the gradient stops there, as in TensorFlow."""
    for n in names:
        if n in GRAD_RULES:
            raise RuntimeError(f"gradient rule {n} registered twice")
        GRAD_RULES[n] = GradRule(lambda node: [None] * len(node.op.inputs), (), False)


@dataclass(frozen=True)
class Lowering:
    """How an op that calls subgraphs unfolds into dataflow primitives (compiler/lowering.py):
    kind "cond": input `first_data - 1` is a one-element predicate choosing subgraphs[1] when true and
    subgraphs[0] when false for inputs first_data..; "loop": subgraphs = (cond, body) over all
    inputs, as WHILE; "call": subgraphs = (callee,) run once on all inputs."""
    kind: str
    subgraphs: tuple[int, ...]
    first_data: int = 0


# fn(op) -> Lowering, or None when this op is better left whole (it then runs as an ordinary op)
LOWERING_RULES: dict[str, Callable[[Any], "Lowering | None"]] = {}


def lowering_rule(*names: str) -> Callable:
    """Decorator: the lowering rule of ops `names` (control flow, in its family module)."""
    def deco(fn):
        for n in names:
            if n in LOWERING_RULES:
                raise RuntimeError(f"lowering rule {n} registered twice")
            LOWERING_RULES[n] = fn
        return fn
    return deco


def register_shape_function(name: str, fn: ShapeFn, *, replace: bool = False) -> None:
    """Shape rule for an op (e.g. a custom op's name): fn(node) returns one shape per output."""
    if name in SHAPE_RULES and not replace:
        raise ValueError(f"a shape function for {name!r} is already registered")
    SHAPE_RULES[name] = fn


CPU = Backend("cpu")
JIT = Backend("jit", compiles_lazily=True, own_threads=True)   # numba-compiled kernels (backends/jit), registered only when numba imports
CONTROLFLOW = Backend("controlflow")
CUSTOM = Backend("custom")


def register_custom_op(name: str, fn: Callable[..., Any], *, replace: bool = False) -> None:
    """Register a Python function as the kernel of CUSTOM op `name`.

    `fn(*inputs, custom_options=bytes)` gets the op's input arrays (None for omitted optional inputs) and
    returns one array or a tuple of arrays, one per output; each is cast to the output tensor's dtype.
    For a two-phase kernel, register a prepare function with `register_custom_kernel` instead.
    """
    def prepare(ctx: KernelContext) -> Run:
        ins, outs, v = ctx.inputs, ctx.outputs, ctx.values
        dtypes = [ctx.output_dtype(i) for i in range(len(outs))]
        opts = ctx.op.custom_options

        def run() -> None:
            result = fn(*[v[i] if i >= 0 else None for i in ins], custom_options=opts)
            if not isinstance(result, (tuple, list)):
                result = (result,)
            if len(result) != len(outs):
                raise ValueError(f"custom op {name} returned {len(result)} outputs, expected {len(outs)}")
            for o, r, dt in zip(outs, result, dtypes):
                v[o] = np.asarray(r, dtype=dt)
        return run

    prepare.keeps_inputs = True   # a plain function may keep what it is given: the memory plan must know
    register_custom_kernel(name, prepare, replace=replace)


def register_custom_kernel(name: str, prepare: Prepare, *, replace: bool = False) -> None:
    """Register a two-phase (prepare -> run) kernel for CUSTOM op `name`. It follows the builtin kernels'
    contract (module docstring): it writes only into arrays it allocated or got from `ctx.output_buffer`,
    and keeps no reference to an input after its run unless `prepare.keeps_inputs` is set to True."""
    if name in CUSTOM.kernels and not replace and name not in _DEFAULTS_IN_USE:
        raise ValueError(f"custom op {name!r} is already registered (pass replace=True to override)")
    CUSTOM.kernels[name] = prepare
    _DEFAULTS_IN_USE.discard(name)   # the user's kernel wins over a default one


# Custom ops that run without being registered, because LiteRT's default path runs them (its XNNPACK
# delegate has its own kernel for mediapipe's Convolution2DTransposeBias): op name -> "module:attribute"
# naming the prepare function. The package's top layer fills it (onert_py/custom_ops.py); the module is
# imported only when a model needs the op, so this layer never imports a plug-in.
DEFAULT_CUSTOM_KERNELS: dict[str, str] = {}
_DEFAULTS_IN_USE: set[str] = set()   # names whose registered kernel is the default one


def custom_kernel(name: str) -> Prepare | None:
    """The kernel of CUSTOM op `name`: the registered one, else its default kernel (registered now, and
    still replaceable without replace=True), else None."""
    prepare = CUSTOM.kernels.get(name)
    if prepare is None and name in DEFAULT_CUSTOM_KERNELS:
        module, _, attr = DEFAULT_CUSTOM_KERNELS[name].partition(":")
        prepare = CUSTOM.kernels[name] = getattr(importlib.import_module(module), attr)
        _DEFAULTS_IN_USE.add(name)
    return prepare


def load_builtin_kernels() -> None:
    """Import the kernel family modules so their decorators register them."""
    from onert_py.backends import controlflow, cpu  # noqa: F401
    # jit kernels register when a session asks for the jit backend (jit.load), not here: importing
    # numba costs half a second
