"""What a shape or value rule sees, and the shape algebra the rules share.

Each op's rules are registered in its family module beside its kernel (`@shape_rule("RESHAPE")`,
`@value_rule("SHAPE")`, see registry.py); the engine that runs them over a model (policies, fixpoint,
cache) is onert_py.compiler.shape_inference.

A shape is a tuple of ints where -1 is a dimension that cannot be known without data, or None when not
even the rank is known. A shape rule returns one shape per output and raises `n.fail(...)` for input
shapes that contradict each other or the op's parameters. A value rule computes an op's integer output
values from known integer inputs (shape arithmetic such as SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE),
which keeps converter-made graphs static after a resize.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from onert_py.errors import ShapeInferenceError

Shape = tuple  # tuple[int, ...]: -1 = unknown dimension; None stands for an unknown rank


class Engine(Protocol):
    """The part of the inference engine a rule may use (control flow infers the subgraphs it calls)."""
    model: Any
    policy: Any              # compiler.shape_inference.ShapePolicy
    current_out: list        # the op's inferred output shapes, while its value rule runs

    def subgraph(self, k: int, shapes: Sequence[Shape | None]) -> Any: ...


class Node:
    """What a shape or value rule sees: the op, its options, its inputs' shapes and known values."""
    __slots__ = ("op", "opts", "sg", "shapes", "values", "engine", "unresized")

    def __init__(self, op, sg, shapes: list, values: dict, engine: Engine):
        self.op = op
        self.opts = op.options
        self.sg = sg
        self.shapes = shapes
        self.values = values
        self.engine = engine
        self.unresized: set[int] = set()   # outputs a rule says LiteRT leaves at their declared shape

    def has(self, i: int) -> bool:
        return i < len(self.op.inputs) and self.op.inputs[i] >= 0

    def shape(self, i: int) -> Shape | None:
        return self.shapes[self.op.inputs[i]] if self.has(i) else None

    def rank(self, i: int) -> int | None:
        s = self.shape(i)
        return None if s is None else len(s)

    def value(self, i: int) -> np.ndarray | None:
        return self.values.get(self.op.inputs[i]) if self.has(i) else None

    def ints(self, i: int) -> tuple[int, ...] | None:
        v = self.value(i)
        if v is None or np.asarray(v).dtype.kind not in "iub":
            return None
        return tuple(int(x) for x in np.ravel(v))

    def scalar(self, i: int) -> int | None:
        v = self.ints(i)
        return v[0] if v is not None and len(v) >= 1 else None

    def in_dtype(self, i: int) -> np.dtype:
        return self.sg.tensors[self.op.inputs[i]].dtype

    def out_dtype(self, j: int = 0) -> np.dtype:
        return self.sg.tensors[self.op.outputs[j]].dtype

    @property
    def n_out(self) -> int:
        return len(self.op.outputs)

    @property
    def litert_quirks(self) -> bool:
        """Whether to follow LiteRT 2.3's own prepare-time rules where they differ from the math."""
        return self.engine.policy.litert_quirks

    def input_shapes(self, start: int = 0) -> list:
        return [self.shape(i) for i in range(start, len(self.op.inputs))]

    def fail(self, msg: str) -> ShapeInferenceError:
        shapes = ", ".join(fmt(self.shapes[i]) if i >= 0 else "-" for i in self.op.inputs)
        return ShapeInferenceError(f"subgraph {self.sg.index} operator {self.op.index} ({self.op.kernel_name}): "
                                   f"{msg} (input shapes {shapes})")


ShapeFn = Callable[[Node], Sequence[Shape | None]]
ValueFn = Callable[[Node, list], Sequence[np.ndarray] | None]


# ----------------------------------------------------------------------------------- shape algebra

def is_static(shape: Shape | None) -> bool:
    return shape is not None and all(d >= 0 for d in shape)


def unknown_like(shape: Shape | None) -> Shape | None:
    return None if shape is None else (-1,) * len(shape)


def merge(a: Shape | None, b: Shape | None) -> Shape | None:
    """The most precise shape covering both: equal dims stay, differing dims become -1."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else -1 for x, y in zip(a, b))


def numel(shape: Shape) -> int:
    return math.prod(shape)


def fmt(shape: Shape | None) -> str:
    return "[?]" if shape is None else "[" + ", ".join("?" if d < 0 else str(d) for d in shape) + "]"


def axis_of(n: Node, axis: int, rank: int, extra: int = 0) -> int:
    """A possibly negative axis of a rank-`rank` tensor (plus `extra` new dims) as a non-negative one."""
    a = axis + rank + extra if axis < 0 else axis
    if not 0 <= a < rank + extra:
        raise n.fail(f"axis {axis} is out of range for rank {rank}")
    return a


def broadcast(n: Node, *shapes: Shape | None) -> Shape | None:
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for dims in zip(*[(1,) * (rank - len(s)) + tuple(s) for s in shapes]):
        fixed = {d for d in dims if d != 1 and d != -1}
        if len(fixed) > 1:
            raise n.fail("shapes " + " and ".join(fmt(s) for s in shapes) + " do not broadcast")
        out.append(fixed.pop() if fixed else (-1 if -1 in dims else 1))
    return tuple(out)


def need_rank(n: Node, i: int, rank: int, what: str = "input") -> Shape | None:
    s = n.shape(i)
    if s is not None and len(s) != rank:
        raise n.fail(f"{what} must have rank {rank}, has shape {fmt(s)}")
    return s


def merge_same(n: Node, shapes: list, skip_axis: int | None = None) -> Shape | None:
    """Dims that must agree across inputs (all but skip_axis); raises when two known dims differ."""
    known = [s for s in shapes if s is not None]
    if not known:
        return None
    rank = len(known[0])
    if any(len(s) != rank for s in known):
        raise n.fail("inputs have different ranks")
    out = []
    for k in range(rank):
        dims = {s[k] for s in known if s[k] >= 0}
        if k != skip_axis and len(dims) > 1:
            raise n.fail(f"inputs differ in dim {k}")
        out.append(dims.pop() if len(dims) == 1 else -1)
    return tuple(out)


def shape_from_value(n: Node, i: int) -> Shape | None:
    """A shape given as input i's value; without the value only the rank (its length) is known."""
    v = n.ints(i)
    if v is not None:
        if any(d < 0 for d in v):
            raise n.fail(f"shape {list(v)} has a negative dimension")
        return v
    s = n.shape(i)
    return (-1,) * (s[0] if s else 1) if s is not None and len(s) <= 1 and (not s or s[0] >= 0) else None


# ----------------------------------------------------------------------------------- shared rules

def same_shape(n: Node):
    """Every output has input 0's shape (elementwise unary ops, activations, in-place updates)."""
    return [n.shape(0)] * n.n_out


def broadcasting(n: Node):
    """One output of the inputs' broadcast shape (binary elementwise ops)."""
    return [broadcast(n, *(n.shape(i) for i in range(len(n.op.inputs)) if n.has(i)))]


def scalar_output(n: Node):
    return [()]
