"""Reverse-mode differentiation of a model, built as IR.

`gradient_model(model, wrt)` returns a new model whose entry subgraph takes the forward inputs plus
one cotangent per float output and returns the forward outputs plus the gradient of
sum(output * cotangent) with respect to each `wrt` tensor. The backward ops are ordinary ops appended
after the forward ones (and new subgraphs for control flow), so the same compiler and executors run
them, with memory planning, and the model can be written out like any other.

The engine knows no op: each op's gradient rule (registry.grad_rule, in its family module) emits the
ops of its own gradient through a GradNode (backends/gradients.py). The engine
- copies the model, splitting fused activations off the ops on the gradient's path (so each rule sees
  its op's own output);
- finds the path: tensors that depend on a `wrt` tensor and that an output depends on;
- walks the ops backwards from the outputs' cotangents, calling each rule, summing the contributions
  to a tensor that several ops read as they are produced;
- fills the new tensors' shapes by shape inference.
Control flow (IF, WHILE) is differentiated by rules of the controlflow backend, which call back
`SubgraphGradient` through the GradNode to differentiate the subgraphs they run.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from onert_py.backends.gradients import FUSED_ACTIVATION_OPS, GradNode, add, zeros_like
from onert_py.backends.registry import GRAD_RULES, load_builtin_kernels
from onert_py.compiler.compile import execution_order
from onert_py.errors import GradientError
from onert_py.ir import Model, Operation, Subgraph, Tensor, TYPE_NAME_BY_DTYPE
from onert_py.schema.options import encode_onert_py_options

WEIGHTS = "weights"


@dataclass
class GradientModel:
    """A model computing forward outputs and gradients, and how its inputs and outputs line up."""
    model: Model
    subgraph_index: int
    n_inputs: int                       # forward inputs come first
    cotangent_of: list[int]             # per cotangent input (after the forward inputs): its output's index
    n_outputs: int                      # forward outputs come first, then one gradient per wrt name
    wrt: list[str]


# ----------------------------------------------------------------------------------- building IR

class SubgraphBuilder:
    """Appends tensors and ops to one subgraph (the Builder protocol of backends/gradients.py).
    `capture(t)` gives a forward tensor's value where this subgraph is (itself for the forward
    subgraph; an input made on demand for a gradient subgraph of a branch or loop body)."""

    def __init__(self, sg: Subgraph, capture: Callable[[int], int] | None = None):
        self.sg = sg
        self.capture = capture

    def new_tensor(self, dtype: np.dtype, name: str, shape: tuple | None = None,
                   type_name: str | None = None) -> int:
        """A new tensor; its shape comes from shape inference unless given (-1 dims are dynamic)."""
        dtype = np.dtype(dtype)
        k = len(self.sg.tensors)
        tensor = Tensor(k, f"{name}_{k}", (), dtype, type_name or TYPE_NAME_BY_DTYPE[dtype], has_rank=False)
        self.sg.tensors.append(tensor)
        if shape is not None:
            set_shape(tensor, shape)
        return k

    def constant(self, value: np.ndarray, name: str) -> int:
        value = np.array(value)
        value.setflags(write=False)
        k = len(self.sg.tensors)
        self.sg.tensors.append(Tensor(k, f"{name}_{k}", value.shape, value.dtype,
                                      TYPE_NAME_BY_DTYPE[value.dtype], data=value))
        return k

    def add_input(self, dtype: np.dtype, name: str, shape: tuple | None = None,
                  type_name: str | None = None) -> int:
        t = self.new_tensor(dtype, name, shape, type_name)
        self.sg.inputs = tuple(self.sg.inputs) + (t,)
        return t

    def add_op(self, opcode: str, inputs: Sequence[int], outputs: Sequence[int], custom_name: str | None,
               options: dict) -> None:
        self.sg.operations.append(Operation(len(self.sg.operations), opcode, tuple(inputs), tuple(outputs),
                                            dict(options), custom_name=custom_name,
                                            custom_options=encode_onert_py_options(options)
                                            if custom_name and options else b""))

    def forward(self, t: int) -> int:
        return t if self.capture is None else self.capture(t)

    def dtype(self, t: int) -> np.dtype:
        return self.sg.tensors[t].dtype


def set_shape(tensor: Tensor, shape: Sequence[int] | None, placeholder: Sequence[int] | None = None) -> None:
    """A tensor's shape from an inferred one: -1 dims become dynamic (shape_signature) with the dims of
    `placeholder` (a declared shape of the same rank) or 1 as their current value; None: unknown rank."""
    if shape is None:
        tensor.has_rank = False
        return
    if placeholder is None or len(placeholder) != len(shape):
        placeholder = (1,) * len(shape)
    tensor.shape = tuple(d if d >= 0 else max(int(p), 1) for d, p in zip(shape, placeholder))
    tensor.shape_signature = tuple(shape) if any(d < 0 for d in shape) else None
    tensor.has_rank = True


def copy_model(model: Model) -> Model:
    """A copy whose subgraphs, tensors and ops can be changed (constant data is shared, read-only)."""
    subgraphs = [Subgraph(sg.index, sg.name, [dataclasses.replace(t) for t in sg.tensors], tuple(sg.inputs),
                          tuple(sg.outputs), [dataclasses.replace(op, options=dict(op.options))
                                              for op in sg.operations])
                 for sg in model.subgraphs]
    return dataclasses.replace(model, subgraphs=subgraphs, signatures=[])


def split_fused_activations(sg: Subgraph) -> None:
    """Ops with a fused activation on their output write a new pre-activation tensor, and a separate
    activation op writes their output, so that each gradient rule sees its own op's output."""
    load_builtin_kernels()
    b = SubgraphBuilder(sg)
    for op in list(sg.operations):
        code = op.options.get("fused_activation_function", 0)
        if not code or len(op.outputs) != 1:
            continue
        rule = GRAD_RULES.get(op.kernel_name)
        if rule is None or not rule.output_activation:
            continue        # no rule (refused later, if on the path) or an internal activation
        name = FUSED_ACTIVATION_OPS.get(int(code))
        if name is None:
            raise GradientError(f"subgraph {sg.index} operator {op.index} ({op.kernel_name}): fused "
                                f"activation {code} has no gradient")
        y = op.outputs[0]
        out = sg.tensors[y]
        pre = b.new_tensor(out.dtype, out.name + "/pre_activation")
        op.outputs = (pre,)
        op.options["fused_activation_function"] = 0
        b.add_op(name, [pre], [y], None, {})
    # keep execution order valid: execution_order() sorts by dependencies


# ----------------------------------------------------------------------------------- the walk

def _called(op: Operation) -> list[int]:
    """The subgraphs an op runs: the values of its options naming subgraphs (IF's then/else, WHILE's
    cond/body, CALL's `subgraph`, STABLEHLO_CASE's branch list, ...)."""
    out = []
    for key, value in op.options.items():
        if "subgraph" in key:
            out += [v for v in (value if isinstance(value, (list, tuple)) else [value]) if isinstance(v, int)]
    return out


class GradientContext:
    """One gradient model being built: the model (its forward subgraphs are rewritten where control
    flow must keep values for the backward pass), the forward shapes, and the tensors of any subgraph
    the caller wants gradients for. Control-flow rules reach it as `g.engine.context`."""

    def __init__(self, model: Model, forward_shapes: dict[int, Sequence], wanted: Sequence[tuple[int, int]],
                 recompute: bool = False):
        self.model = model
        self.forward_shapes = forward_shapes      # subgraph -> shapes per tensor (those inference reached)
        self.wanted = list(wanted)
        # checkpointing: loops keep only their loop values per iteration and recompute the rest
        self.recompute = recompute
        self._reaches: dict[int, bool] = {}       # subgraph -> it (or what it calls) holds a wanted tensor

    def reaches_wanted(self, op: Operation) -> bool:
        """op runs (directly or through nested calls) a subgraph holding a tensor the caller wants a
        gradient for: it is on the path whatever its inputs."""
        return any(self._subgraph_reaches_wanted(si) for si in _called(op))

    def _subgraph_reaches_wanted(self, si: int, seen: frozenset = frozenset()) -> bool:
        if si in self._reaches:
            return self._reaches[si]
        if si in seen or not 0 <= si < len(self.model.subgraphs):
            return False
        found = any(s == si for s, _ in self.wanted) or any(
            self._subgraph_reaches_wanted(inner, seen | {si})
            for op in self.model.subgraphs[si].operations for inner in _called(op))
        self._reaches[si] = found
        return found

    def wanted_in(self, si: int) -> list[int]:
        """Tensors of a called subgraph si whose gradients were asked for, but not its inputs: a constant
        listed as an input holds the value passed in, so as a constant it has no gradient (zeros)."""
        inputs = set(self.model.subgraphs[si].inputs)
        return [t for s, t in self.wanted if s == si and t not in inputs]

    def new_subgraph(self, name: str) -> SubgraphBuilder:
        sg = Subgraph(len(self.model.subgraphs), name, [], (), (), [])
        self.model.subgraphs.append(sg)
        return SubgraphBuilder(sg)

    def builder_for(self, si: int, capture: Callable[[int], int] | None = None) -> SubgraphBuilder:
        """A builder appending to subgraph si (a forward subgraph a control-flow rule rewrites, or a
        gradient subgraph whose forward values come through `capture`)."""
        return SubgraphBuilder(self.model.subgraphs[si], capture)

    def gradient_of(self, si: int, builder: SubgraphBuilder) -> "SubgraphGradient":
        """The walker for subgraph si's gradient, emitting through `builder`. A subgraph made while the
        gradient is built (a rule's decomposition of its op) gets its forward shapes inferred now, from
        its inputs' shapes."""
        if si not in self.forward_shapes:
            from onert_py.compiler.shape_inference import infer_shapes
            sg = self.model.subgraphs[si]
            self.forward_shapes[si] = infer_shapes(self.model, si, _signature_shapes(sg)).main.shapes
        return SubgraphGradient(self, self.model.subgraphs[si], builder, self.forward_shapes.get(si))


class SubgraphGradient:
    """The gradient of one subgraph: given cotangents of (some of) its tensors, emits through `builder`
    the ops computing the cotangents of `wanted` tensors. Rules of control flow ops that run other
    subgraphs report the gradients of those subgraphs' wanted tensors (weights inside a loop body) in
    `elsewhere`, as tensors of this builder's subgraph."""

    def __init__(self, context: GradientContext, sg: Subgraph, builder: SubgraphBuilder,
                 shapes: Sequence | None = None):
        self.context = context
        self.sg = sg
        self.b = builder
        self.shapes = shapes
        self.elsewhere: dict[tuple[int, int], int] = {}

    def on_path(self, sources: set[int], sinks: set[int]) -> tuple[list[Operation], set[int]]:
        """The ops between `sources` (tensors the gradient is wanted for) and `sinks` (tensors that have
        cotangents), in execution order, and the float tensors on that path. Ops that run subgraphs
        holding wanted tensors depend on them whatever their inputs."""
        order = execution_order(self.sg)
        depends = set(sources)
        for op in order:
            if any(t in depends for t in op.inputs if t >= 0) or self.context.reaches_wanted(op):
                # float values carry gradients; variant ones (a gradient model's loop accumulators) are
                # followed too, so that an op holding them without a rule is refused, not skipped
                depends.update(t for t in op.outputs if self.sg.tensors[t].dtype.kind in "fO")
        needed = set(sinks) & depends
        path = []
        for op in reversed(order):
            if any(t in needed for t in op.outputs):
                path.append(op)
                needed.update(t for t in op.inputs if t >= 0 and t in depends)
        path.reverse()
        return path, needed

    def run(self, cotangents: dict[int, int], wanted: Sequence[int]) -> dict[int, int | None]:
        """Cotangents of `wanted` tensors (None when structurally zero), from `cotangents`: forward
        tensor -> its cotangent where the gradient is built."""
        load_builtin_kernels()
        ct = dict(cotangents)
        path, needed = self.on_path(set(wanted), set(ct))
        missing = sorted({f"subgraph {self.sg.index} operator {op.index} ({op.kernel_name})"
                          for op in path if op.kernel_name not in GRAD_RULES})
        if missing:
            raise GradientError("no gradient rule for " + ", ".join(missing))
        for op in reversed(path):
            if not any(t in ct for t in op.outputs):
                continue
            g = GradNode(op, self.sg, self.b, ct, self.shapes, self, needed)
            grads = list(GRAD_RULES[op.kernel_name].fn(g))
            # read the inputs after the rule: a rule may rewrite its op (a fused op into a CALL)
            grads += [None] * (len(op.inputs) - len(grads))
            for t, d in zip(op.inputs, grads):
                if d is not None and t >= 0 and t in needed:
                    self.accumulate(ct, t, d)
        return {t: ct.get(t) for t in wanted}

    def accumulate(self, ct: dict, key, d: int) -> None:
        """Adds contribution d to a cotangent (summed as produced, never kept apart)."""
        ct[key] = d if key not in ct else add(self.node(), ct[key], d)

    def report(self, si: int, t: int, d: int) -> None:
        """A control-flow rule's gradient for tensor t of subgraph si, as a tensor of this builder."""
        self.accumulate(self.elsewhere, (si, t), d)

    def node(self) -> GradNode:
        """A GradNode for emitting ops outside any forward op's rule."""
        return GradNode(Operation(-1, "", (), ()), self.sg, self.b, {}, self.shapes, self)


# ----------------------------------------------------------------------------------- the model

def _resolve_wrt(model: Model, k: int, wrt: Sequence[str] | str | None) -> tuple[list[str], list[tuple[int, int]]]:
    """The names asked for and, per name, (subgraph, tensor)."""
    main = model.subgraphs[k]
    if wrt is None:
        floats = [i for i in main.inputs if main.tensors[i].dtype.kind == "f"]
        return [main.tensors[i].name for i in floats], [(k, i) for i in floats]
    if isinstance(wrt, str):
        wrt = [wrt]
    names, found = [], []
    for name in wrt:
        if name == WEIGHTS:
            for si, t in _weights(model):
                names.append(_qualified(model, k, si, t))
                found.append((si, t))
            continue
        names.append(name)
        found.append(_find_tensor(model, k, name))
    return names, found


def _qualified(model: Model, k: int, si: int, t: int) -> str:
    name = model.subgraphs[si].tensors[t].name
    return name if si == k else f"{model.subgraphs[si].name or si}:{name}"


def _find_tensor(model: Model, k: int, name: str) -> tuple[int, int]:
    """(subgraph, tensor) of a name: NAME in subgraph k, or SUBGRAPH:NAME (a subgraph's name or index)."""
    candidates = [(k, t.index) for t in model.subgraphs[k].tensors if t.name == name]
    if not candidates and ":" in name:
        sg_name, _, t_name = name.partition(":")
        candidates = [(sg.index, t.index) for sg in model.subgraphs if sg_name in (sg.name, str(sg.index))
                      for t in sg.tensors if t.name == t_name]
    if not candidates:
        raise GradientError(f"wrt: no tensor named {name!r} in subgraph {k} (names as `onert-py inspect` "
                            "prints them; 'SUBGRAPH:NAME' for a tensor of another subgraph)")
    if len(candidates) > 1:
        raise GradientError(f"wrt: {len(candidates)} tensors are named {name!r}")
    si, t = candidates[0]
    tensor = model.subgraphs[si].tensors[t]
    if tensor.dtype.kind != "f":
        raise GradientError(f"wrt: tensor {name!r} has type {tensor.type_name}; only float tensors have "
                            "gradients")
    return si, t


def _weights(model: Model) -> list[tuple[int, int]]:
    """Every float constant read as a parameter (registry.grad_rule params) by an op of any subgraph."""
    load_builtin_kernels()
    out = []
    for sg in model.subgraphs:
        for op in sg.operations:
            rule = GRAD_RULES.get(op.kernel_name)
            for i in (rule.params if rule else ()):
                if i < len(op.inputs) and op.inputs[i] >= 0:
                    t = sg.tensors[op.inputs[i]]
                    if t.data is not None and t.dtype.kind == "f" and (sg.index, t.index) not in out:
                        out.append((sg.index, t.index))
    return out


def gradient_model(model: Model, wrt: Sequence[str] | str | None = None, subgraph_index: int = 0,
                   recompute: bool = False) -> GradientModel:
    """The model computing subgraph `subgraph_index`'s outputs and the gradients of the sum of its float
    outputs times their cotangents with respect to `wrt` (default: its float inputs). recompute: WHILE
    loops keep only their loop values per iteration and recompute the body's other values in the
    backward pass (less memory, more time)."""
    from onert_py.compiler.shape_inference import infer_shapes
    k = subgraph_index
    names, targets = _resolve_wrt(model, k, wrt)
    inferred = infer_shapes(model, k, _signature_shapes(model.subgraphs[k]))
    gm = copy_model(model)
    for sg in gm.subgraphs:
        split_fused_activations(sg)
    context = GradientContext(gm, {si: r.shapes for si, r in inferred.subgraphs.items()}, targets, recompute)
    main = gm.subgraphs[k]
    b = SubgraphBuilder(main)
    engine = SubgraphGradient(context, main, b, inferred.main.shapes)
    n_inputs, forward_outputs = len(main.inputs), list(main.outputs)
    # one cotangent input per float output
    cotangents: dict[int, int] = {}
    cotangent_of = []
    for j, o in enumerate(forward_outputs):
        t = main.tensors[o]
        if t.dtype.kind != "f":
            continue
        c = b.add_input(t.dtype, f"cotangent/{t.name}", inferred.main.shapes[o])
        set_shape(main.tensors[c], inferred.main.shapes[o], t.shape)   # declared dims as placeholders
        cotangent_of.append(j)
        engine.accumulate(cotangents, o, c)   # an output returned twice: its cotangents add up
    in_main = [t for si, t in targets if si == k]
    grads = engine.run(cotangents, in_main)
    outputs = list(forward_outputs)
    for si, t in targets:
        d = grads.get(t) if si == k else engine.elsewhere.get((si, t))
        if d is None:   # structurally zero
            d = zeros_like(engine.node(), t) if si == k else \
                b.constant(np.zeros_like(gm.subgraphs[si].tensors[t].data), "zero_gradient")
        outputs.append(d)
    main.outputs = tuple(outputs)
    _fill_shapes(gm, k)
    return GradientModel(gm, k, n_inputs, cotangent_of, len(forward_outputs), names)


def _signature_shapes(sg: Subgraph) -> list[tuple[int, ...]]:
    """The subgraph's input shapes with their dynamic dims as -1, so that the gradient model keeps them
    dynamic (a batch of any size) and rules see which dims may broadcast at run time."""
    return [None if not t.has_rank else tuple(t.shape_signature if t.shape_signature is not None else t.shape)
            for t in (sg.tensors[i] for i in sg.inputs)]


def _fill_shapes(gm: Model, k: int) -> None:
    """The shapes of the tensors the gradient made, by shape inference over the whole model (the
    declared input shapes); a dim known only at run time becomes dynamic (-1 in shape_signature)."""
    from onert_py.compiler.shape_inference import infer_shapes
    result = infer_shapes(gm, k, _signature_shapes(gm.subgraphs[k]))
    for si, inferred in result.subgraphs.items():
        sg = gm.subgraphs[si]
        for t, tensor in enumerate(sg.tensors):
            if not tensor.has_rank and tensor.data is None and t < len(inferred.shapes):
                set_shape(tensor, inferred.shapes[t])
