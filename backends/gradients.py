"""What a gradient rule sees, and the gradient algebra the rules share.

Reverse-mode differentiation builds the backward pass as IR: ordinary ops appended to a subgraph (or
to new subgraphs, for control flow), compiled and run like any model. Each op's rule is registered in
its family module beside its kernel (`@grad_rule("MUL")`, registry.py): it receives a GradNode for one
forward op and returns, per op input, the tensor holding the gradient with respect to that input (None
where there is none: integer inputs, inputs off the path). It reads the forward values it needs with
`g.x(i)` / `g.y(j)` and the cotangents of the op's outputs with `g.dy(j)`, and emits ops with
`g.emit`. The engine that walks a model (path, accumulation, shapes, control flow) is
onert_py.compiler.gradients; the gradients of IF and WHILE are rules of the controlflow backend that
call back the engine (`g.engine`) to differentiate the subgraphs they run.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

import numpy as np

from onert_py.errors import GradientError

_F32 = np.dtype(np.float32)


class Builder(Protocol):
    """Where a rule's ops go: the subgraph the gradient is built in (implemented by the engine)."""
    def new_tensor(self, dtype: np.dtype, name: str) -> int: ...
    def constant(self, value: np.ndarray, name: str) -> int: ...
    def add_op(self, opcode: str, inputs: Sequence[int], outputs: Sequence[int], custom_name: str | None,
               options: dict) -> None: ...
    def forward(self, t: int) -> int: ...          # a forward tensor's value, where the gradient is built
    def dtype(self, t: int) -> np.dtype: ...       # the type of a tensor of the gradient's subgraph


class GradNode:
    """One forward op as its gradient rule sees it."""
    __slots__ = ("op", "opts", "sg", "b", "cotangents", "shapes", "engine", "needed")

    def __init__(self, op, sg, builder: Builder, cotangents: dict[int, int], shapes: Sequence | None,
                 engine: Any, needed: set[int] | None = None):
        self.op = op
        self.opts = op.options
        self.sg = sg                    # the forward subgraph (tensor names, dtypes, constants)
        self.b = builder
        self.cotangents = cotangents    # forward tensor -> its cotangent where the gradient is built
        self.shapes = shapes            # forward shapes (per tensor; -1 dims, None unknown) or None
        self.engine = engine
        self.needed = needed            # the tensors on the gradient's path (None: all)

    # ---- the forward op
    def has(self, i: int) -> bool:
        return i < len(self.op.inputs) and self.op.inputs[i] >= 0

    def x(self, i: int) -> int:
        """Forward input i's value, where the gradient is built."""
        return self.b.forward(self.op.inputs[i])

    def y(self, j: int = 0) -> int:
        """Forward output j's value, where the gradient is built."""
        return self.b.forward(self.op.outputs[j])

    def dy(self, j: int = 0) -> int | None:
        """The cotangent of output j, None when nothing downstream depends on it (a zero)."""
        return self.cotangents.get(self.op.outputs[j])

    def const_input(self, i: int) -> np.ndarray | None:
        """Input i's constant contents, or None."""
        return self.sg.tensors[self.op.inputs[i]].data if self.has(i) else None

    def in_dtype(self, i: int) -> np.dtype:
        return self.sg.tensors[self.op.inputs[i]].dtype

    def out_dtype(self, j: int = 0) -> np.dtype:
        return self.sg.tensors[self.op.outputs[j]].dtype

    def shape(self, t_or_input: int, *, tensor: bool = False) -> tuple | None:
        """The forward shape of input i (or of tensor t with tensor=True): -1 dims unknown, None when
        not even the rank is known."""
        t = t_or_input if tensor else self.op.inputs[t_or_input]
        if self.shapes is None or t < 0:
            return None
        s = self.shapes[t]
        return None if s is None else tuple(s)

    def differentiable(self, i: int) -> bool:
        """Input i takes a gradient: a float tensor (or a gradient model's accumulator, whose cotangent
        is a stack of cotangents) on the gradient's path. Integer and bool inputs take none, and neither
        do constants nobody asked about: rules skip their work, and their captures."""
        return self.has(i) and self.in_dtype(i).kind in "fO" and (
            self.needed is None or self.op.inputs[i] in self.needed)

    # ---- building
    def emit(self, opcode: str, *inputs: int, dtype: Any = None, n_out: int = 1, custom: str | None = None,
             **options: Any) -> int | tuple[int, ...]:
        """Append op `opcode` (or CUSTOM op `custom`) reading `inputs`; returns its output tensor (a tuple
        for n_out > 1). dtype: the outputs' type, by default the first input's."""
        if dtype is None:
            dtype = self.b_dtype(inputs[0]) if inputs else _F32
        outs = [self.b.new_tensor(np.dtype(dtype), f"{(custom or opcode).lower()}") for _ in range(n_out)]
        self.b.add_op("CUSTOM" if custom else opcode, list(inputs), outs, custom, options)
        return outs[0] if n_out == 1 else tuple(outs)

    def const(self, value: Any, dtype: Any = np.float32) -> int:
        return self.b.constant(np.asarray(value, dtype=dtype), "grad_const")

    def b_dtype(self, t: int) -> np.dtype:
        return self.b.dtype(t)

    def fail(self, msg: str) -> GradientError:
        return GradientError(f"subgraph {self.sg.index} operator {self.op.index} ({self.op.kernel_name}): {msg}")


GradFn = Callable[[GradNode], Sequence[int | None]]


def emitter(g: GradNode, builder: Builder) -> GradNode:
    """A node emitting through another builder: the forward subgraph a control-flow rule rewrites, or
    a gradient subgraph it builds."""
    return GradNode(g.op, g.sg, builder, {}, g.shapes, g.engine)


# ----------------------------------------------------------------------------------- gradient algebra

def add(g: GradNode, a: int, b: int) -> int:
    return g.emit("ADD", a, b, fused_activation_function=0)


def sub(g: GradNode, a: int, b: int) -> int:
    return g.emit("SUB", a, b, fused_activation_function=0)


def mul(g: GradNode, a: int, b: int) -> int:
    return g.emit("MUL", a, b, fused_activation_function=0)


def div(g: GradNode, a: int, b: int) -> int:
    return g.emit("DIV", a, b, fused_activation_function=0)


def neg(g: GradNode, a: int) -> int:
    return g.emit("NEG", a)


def square(g: GradNode, a: int) -> int:
    return mul(g, a, a)


def scalar(g: GradNode, value: float, like: int | None = None) -> int:
    """A 0-d constant of `like`'s type (float32 by default)."""
    return g.const(value, g.b_dtype(like) if like is not None else np.float32)


def zeros_like(g: GradNode, t: int) -> int:
    """Zeros shaped like t; for an accumulator (a stack), the empty stack: the zero of stacks."""
    if g.b_dtype(t) == np.dtype(object):
        return empty_stack(g)
    return g.emit("ZEROS_LIKE", t)


def empty_stack(g: GradNode) -> int:
    t = g.emit("OnertPyStackNew", dtype=object, custom="OnertPyStackNew")
    g.b.sg.tensors[t].type_name = "VARIANT"
    return t


def sum_to(g: GradNode, d: int, like: int) -> int:
    """d summed over the axes that broadcasting added or stretched, to the shape of tensor `like` (the
    gradient of a broadcast). When the forward shapes show no broadcast, d itself."""
    return g.emit("OnertPySumTo", d, like, custom="OnertPySumTo")


def where(g: GradNode, condition: int, a: int, b: int) -> int:
    """a where the bool `condition` holds, b elsewhere (broadcasting), in a's type."""
    return g.emit("SELECT_V2", condition, a, b, dtype=g.b_dtype(a))


def sum_to_input(g: GradNode, i: int, d: int | None) -> int | None:
    """d (shaped like the op's output) summed back to input i's shape where broadcasting stretched it
    (kept as it is where the forward shapes show no broadcast); None for an input that takes no
    gradient."""
    if d is None or not g.differentiable(i):
        return None
    si, so = g.shape(i), g.shape(g.op.outputs[0], tensor=True)
    same = si is not None and so is not None and si == so and all(k >= 0 for k in si)
    return d if same else sum_to(g, d, g.x(i))


def mask(g: GradNode, condition: int, d: int) -> int:
    """d where the bool `condition` holds, 0 elsewhere."""
    return where(g, condition, d, scalar(g, 0.0, d))


def reshape_like(g: GradNode, d: int, like: int) -> int:
    """d reshaped to the shape of tensor `like` (read at run time)."""
    return g.emit("RESHAPE", d, shape_of(g, like))


def shape_of(g: GradNode, t: int) -> int:
    """The int32 shape of tensor t, read at run time."""
    return g.emit("SHAPE", t, dtype=np.int32, out_type=2)    # 2: TensorType INT32


# fused_activation_function codes -> the op that applies them on their own (the engine splits fused
# activations off the ops on the gradient's path, so each op's rule sees its own output)
FUSED_ACTIVATION_OPS = {1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
