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

The rules are table-driven: `SHAPE_FUNCTIONS[op name](node) -> [output shapes]`, one small function
per op or per family of ops sharing a rule, and `VALUE_FUNCTIONS` for the evaluated ops. An op
without a shape function gets dynamic outputs (never a wrong shape). Control flow is inferred
through the called subgraphs: IF/STABLEHLO_CASE from all branches, WHILE by iterating the body to a
fixpoint where dims that change become -1, CALL/CALL_ONCE/STABLEHLO_COMPOSITE from the callee.

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
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from onert_py.compiler.compile import execution_order
from onert_py.errors import PrepareError
from onert_py.ir import Model, Operation, Subgraph

Shape = tuple  # tuple[int, ...]: -1 = unknown dimension; None stands for an unknown rank

__all__ = ["Shape", "ShapePolicy", "FULL", "LITERT", "LITERT_VALUE_OPS", "ShapeInferenceError",
           "SubgraphShapes", "ShapeResult", "ShapeCache", "infer_shapes", "is_static",
           "register_shape_function", "SHAPE_FUNCTIONS", "VALUE_FUNCTIONS"]


class ShapeInferenceError(PrepareError):
    """An op's input shapes contradict each other or its parameters (a bad resize, a broken model)."""


@dataclass(frozen=True)
class ShapePolicy:
    name: str
    value_ops: frozenset[str] | None = None   # ops whose values are evaluated; None = every one we can
    stop_at_dynamic: bool = False              # LiteRT: stop preparing a subgraph at its first dynamic op
    dynamic_subgraph_taints: bool = False      # LiteRT: a callee with a dynamic tensor -> dynamic outputs
    skip_unused_inputs: bool = False           # LiteRT: IF branch / WHILE cond inputs nobody reads keep theirs
    use_known: bool = True                     # take the caller's known (folded) values
    litert_quirks: bool = False                # LiteRT 2.3's own rules for FC, SLICE, UNSORTED_SEGMENT_*
    max_value_elements: int = 1 << 16          # larger results are not evaluated (shape params are small)


# The ops LiteRT 2.3 evaluates in Prepare when all their inputs are constant or were themselves
# evaluated in Prepare (kTfLitePersistentRo outputs); verified one by one in tests/compiler.
LITERT_VALUE_OPS = frozenset({"SHAPE", "RANK", "RESHAPE", "GATHER", "MUL", "CONCATENATION",
                              "STRIDED_SLICE", "REDUCE_PROD", "TILE", "RANGE"})

FULL = ShapePolicy("full")
LITERT = ShapePolicy("litert", value_ops=LITERT_VALUE_OPS, stop_at_dynamic=True,
                     dynamic_subgraph_taints=True, skip_unused_inputs=True, use_known=False,
                     litert_quirks=True)


# ----------------------------------------------------------------------------------- shape helpers

def is_static(shape: Shape | None) -> bool:
    return shape is not None and all(d >= 0 for d in shape)


def _unknown_like(shape: Shape | None) -> Shape | None:
    return None if shape is None else (-1,) * len(shape)


def _merge(a: Shape | None, b: Shape | None) -> Shape | None:
    """The most precise shape covering both: equal dims stay, differing dims become -1."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else -1 for x, y in zip(a, b))


def _numel(shape: Shape) -> int:
    return math.prod(shape)


def _fmt(shape: Shape | None) -> str:
    return "[?]" if shape is None else "[" + ", ".join("?" if d < 0 else str(d) for d in shape) + "]"


# ----------------------------------------------------------------------------------- op view

class Node:
    """What a shape or value function sees: the op, its options, its inputs' shapes and known values."""
    __slots__ = ("op", "opts", "sg", "shapes", "values", "engine")

    def __init__(self, op: Operation, sg: Subgraph, shapes: list, values: dict, engine: "_Engine"):
        self.op = op
        self.opts = op.options
        self.sg = sg
        self.shapes = shapes
        self.values = values
        self.engine = engine

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

    def fail(self, msg: str) -> ShapeInferenceError:
        shapes = ", ".join(_fmt(self.shapes[i]) if i >= 0 else "-" for i in self.op.inputs)
        return ShapeInferenceError(f"subgraph {self.sg.index} operator {self.op.index} ({self.op.kernel_name}): "
                                   f"{msg} (input shapes {shapes})")


ShapeFn = Callable[[Node], Sequence[Shape | None]]
ValueFn = Callable[[Node, list], Sequence[np.ndarray]]
SHAPE_FUNCTIONS: dict[str, ShapeFn] = {}
VALUE_FUNCTIONS: dict[str, ValueFn] = {}


def register_shape_function(name: str, fn: ShapeFn, *, replace: bool = False) -> None:
    """Shape rule for an op (e.g. a custom op's name): fn(node) returns one shape per output."""
    if name in SHAPE_FUNCTIONS and not replace:
        raise ValueError(f"a shape function for {name!r} is already registered")
    SHAPE_FUNCTIONS[name] = fn


def _rule(*names: str) -> Callable[[ShapeFn], ShapeFn]:
    def deco(fn: ShapeFn) -> ShapeFn:
        for n in names:
            SHAPE_FUNCTIONS[n] = fn
        return fn
    return deco


def _values(*names: str) -> Callable[[ValueFn], ValueFn]:
    def deco(fn: ValueFn) -> ValueFn:
        for n in names:
            VALUE_FUNCTIONS[n] = fn
        return fn
    return deco


def _axis(n: Node, axis: int, rank: int, extra: int = 0) -> int:
    a = axis + rank + extra if axis < 0 else axis
    if not 0 <= a < rank + extra:
        raise n.fail(f"axis {axis} is out of range for rank {rank}")
    return a


def _broadcast(n: Node, *shapes: Shape | None) -> Shape | None:
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for dims in zip(*[(1,) * (rank - len(s)) + tuple(s) for s in shapes]):
        fixed = {d for d in dims if d != 1 and d != -1}
        if len(fixed) > 1:
            raise n.fail("shapes " + " and ".join(_fmt(s) for s in shapes) + " do not broadcast")
        out.append(fixed.pop() if fixed else (-1 if -1 in dims else 1))
    return tuple(out)


# ----------------------------------------------------------------------------------- elementwise

_SAME_SHAPE = (
    "ABS", "NEG", "EXP", "LOG", "SQRT", "RSQRT", "SQUARE", "SIN", "COS", "FLOOR", "CEIL", "ROUND", "SIGN",
    "LOGICAL_NOT", "ZEROS_LIKE", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LEAKY_RELU", "ELU", "TANH",
    "LOGISTIC", "HARD_SWISH", "GELU", "SOFTMAX", "LOG_SOFTMAX", "CAST", "DEQUANTIZE", "QUANTIZE",
    "FAKE_QUANT", "L2_NORMALIZATION", "LOCAL_RESPONSE_NORMALIZATION", "CUMSUM", "REVERSE_V2",
    "REVERSE_SEQUENCE", "MATRIX_SET_DIAG", "BUCKETIZE", "INSTANCE_NORM", "RMS_NORM", "ROPE", "DENSIFY",
    "REAL", "IMAG", "COMPLEX_ABS", "ADD_N", "DYNAMIC_UPDATE_SLICE", "STABLEHLO_SCATTER",
)


@_rule(*_SAME_SHAPE)
def _same_shape(n: Node):
    return [n.shape(0)] * n.n_out


_BINARY = (
    "ADD", "SUB", "MUL", "DIV", "FLOOR_DIV", "FLOOR_MOD", "POW", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE",
    "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "LOGICAL_AND", "LOGICAL_OR",
    "BITWISE_XOR", "RIGHT_SHIFT", "ATAN2", "PRELU", "SELECT_V2", "STABLEHLO_ADD", "STABLEHLO_MULTIPLY",
    "STABLEHLO_MAXIMUM", "STABLEHLO_MINIMUM", "STABLEHLO_AND", "STABLEHLO_SHIFT_LEFT",
)


@_rule(*_BINARY)
def _broadcasting(n: Node):
    return [_broadcast(n, *(n.shape(i) for i in range(len(n.op.inputs)) if n.has(i)))]


@_rule("SELECT")
def _select(n: Node):
    # SELECT (v1): the condition may be a scalar or a vector over the first dim; x and y agree.
    return [n.shape(1)]


@_rule("BITCAST")
def _bitcast(n: Node):
    s = n.shape(0)
    a, b = n.in_dtype(0).itemsize, n.out_dtype().itemsize
    if s is None or a == b:
        return [s]
    if a > b:
        return [s + (a // b,)]
    if s and s[-1] >= 0 and s[-1] != b // a:
        raise n.fail(f"the last dim must be {b // a} to bitcast {n.in_dtype(0)} to {n.out_dtype()}")
    return [s[:-1]]


@_rule("MATRIX_DIAG")
def _matrix_diag(n: Node):
    s = n.shape(0)
    return [None if s is None or not s else s + (s[-1],)]


# ----------------------------------------------------------------------------------- reductions

@_rule("SUM", "MEAN", "REDUCE_PROD", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_ANY", "REDUCE_ALL")
def _reduce(n: Node):
    s, axes = n.shape(0), n.ints(1)
    keep = bool(n.opts.get("keep_dims", False))
    if s is None:
        return [None]
    if axes is None:
        return [_unknown_like(s) if keep else None]
    picked = {_axis(n, a, len(s)) for a in axes} if s else set()
    if keep:
        return [tuple(1 if k in picked else d for k, d in enumerate(s))]
    return [tuple(d for k, d in enumerate(s) if k not in picked)]


@_rule("ARG_MAX", "ARG_MIN")
def _arg(n: Node):
    s, axis = n.shape(0), n.scalar(1)
    if s is None:
        return [None]
    if axis is None:
        return [(-1,) * max(len(s) - 1, 0)]
    a = _axis(n, axis, len(s))
    return [s[:a] + s[a + 1:]]


@_rule("TOPK_V2")
def _topk(n: Node):
    s, k = n.shape(0), n.scalar(1)
    if s is None or not s:
        return [None, None]
    if k is not None and s[-1] >= 0 and k > s[-1]:
        raise n.fail(f"k={k} is larger than the last dim")
    out = s[:-1] + (k if k is not None else -1,)
    return [out, out]


# ----------------------------------------------------------------------------------- conv / pool / matmul

def _window(size: int, k: int, stride: int, dilation: int, padding: int) -> int:
    if size < 0 or k < 0:
        return -1
    if padding == 0:                      # SAME
        return (size + stride - 1) // stride
    eff = (k - 1) * dilation + 1          # VALID
    return max((size - eff + stride) // stride, 0)


def _need_rank(n: Node, i: int, rank: int, what: str = "input") -> Shape | None:
    s = n.shape(i)
    if s is not None and len(s) != rank:
        raise n.fail(f"{what} must have rank {rank}, has shape {_fmt(s)}")
    return s


@_rule("CONV_2D", "DEPTHWISE_CONV_2D")
def _conv2d(n: Node):
    x, f = _need_rank(n, 0, 4), _need_rank(n, 1, 4, "filter")
    if x is None or f is None:
        return [None if x is None else (x[0], -1, -1, f[3] if f else -1)]
    o = n.opts
    if n.op.opcode == "CONV_2D" and x[3] > 0 and f[3] > 0 and x[3] % f[3]:
        raise n.fail(f"input depth {x[3]} is not a multiple of the filter depth {f[3]}")
    if n.op.opcode == "DEPTHWISE_CONV_2D" and x[3] > 0 and f[3] >= 0 and f[3] % x[3]:
        raise n.fail(f"filter channels {f[3]} are not a multiple of the input depth {x[3]}")
    p = int(o.get("padding", 0))
    oh = _window(x[1], f[1], int(o.get("stride_h", 1)), int(o.get("dilation_h_factor", 1)), p)
    ow = _window(x[2], f[2], int(o.get("stride_w", 1)), int(o.get("dilation_w_factor", 1)), p)
    return [(x[0], oh, ow, f[0] if n.op.opcode == "CONV_2D" else f[3])]


@_rule("CONV_3D")
def _conv3d(n: Node):
    x, f = _need_rank(n, 0, 5), _need_rank(n, 1, 5, "filter")
    if x is None or f is None:
        return [None if x is None else (x[0], -1, -1, -1, f[4] if f else -1)]
    if x[4] >= 0 and f[3] >= 0 and x[4] != f[3]:
        raise n.fail(f"input depth {x[4]} differs from the filter's input depth {f[3]}")
    o, p = n.opts, int(n.opts.get("padding", 0))
    dims = tuple(_window(x[1 + k], f[k], int(o.get(f"stride_{a}", 1)), int(o.get(f"dilation_{a}_factor", 1)), p)
                 for k, a in enumerate("dhw"))
    return [(x[0],) + dims + (f[4],)]


@_rule("AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D")
def _pool(n: Node):
    x = _need_rank(n, 0, 4)
    if x is None:
        return [None]
    o, p = n.opts, int(n.opts.get("padding", 0))
    oh = _window(x[1], int(o.get("filter_height", 1)), int(o.get("stride_h", 1)), 1, p)
    ow = _window(x[2], int(o.get("filter_width", 1)), int(o.get("stride_w", 1)), 1, p)
    return [(x[0], oh, ow, x[3])]


@_rule("TRANSPOSE_CONV", "CONV_3D_TRANSPOSE")
def _transpose_conv(n: Node):
    # The output shape is input 0's value; without it only its rank (input 0's length) is known.
    shape = n.ints(0)
    x, w = n.shape(2), n.shape(1)
    if x and w and x[-1] >= 0 and w[-1 if n.op.opcode == "TRANSPOSE_CONV" else -2] >= 0 \
            and x[-1] != w[-1 if n.op.opcode == "TRANSPOSE_CONV" else -2]:
        raise n.fail(f"input depth {x[-1]} differs from the filter's input depth")
    if shape is not None:
        return [shape]
    s = n.shape(0)
    return [None if s is None or len(s) != 1 or s[0] < 0 else (-1,) * s[0]]


@_rule("FULLY_CONNECTED")
def _fully_connected(n: Node):
    x, w = n.shape(0), n.shape(1)
    if w is not None and len(w) != 2:
        raise n.fail(f"weights must have rank 2, have shape {_fmt(w)}")
    units = w[0] if w is not None else -1
    depth = w[1] if w is not None else -1
    if bool(n.opts.get("keep_num_dims", False)):
        if x is None:
            return [None] * n.n_out
        if x and x[-1] >= 0 and depth >= 0 and x[-1] != depth:
            raise n.fail(f"the input's last dim {x[-1]} differs from the weights' depth {depth}")
        return [x[:-1] + (units,)] * n.n_out
    if is_static(x) and depth > 0:
        size = _numel(x)
        if n.engine.policy.litert_quirks:    # LiteRT floors the row count (and reads a partial row)
            return [(size // depth, units)] * n.n_out
        if size % depth:
            raise n.fail(f"{size} input elements do not split into rows of the weights' depth {depth}")
        return [(size // depth, units)] * n.n_out
    return [(-1, units)] * n.n_out


@_rule("BATCH_MATMUL")
def _batch_matmul(n: Node):
    a, b = n.shape(0), n.shape(1)
    if a is None or b is None:
        return [None]
    if len(a) < 2 or len(b) < 2:
        raise n.fail("both operands need rank >= 2")
    o = n.opts
    adj_x = bool(o.get("adj_x", o.get("adjoint_lhs", False)))
    adj_y = bool(o.get("adj_y", o.get("adjoint_rhs", False)))
    m, ka = (a[-1], a[-2]) if adj_x else (a[-2], a[-1])
    kb, cols = (b[-1], b[-2]) if adj_y else (b[-2], b[-1])
    if ka >= 0 and kb >= 0 and ka != kb:
        raise n.fail(f"contraction dims differ: {ka} vs {kb}")
    return [_broadcast(n, a[:-2], b[:-2]) + (m, cols)]


# ----------------------------------------------------------------------------------- joining / splitting

def _merge_same(n: Node, shapes: list, skip_axis: int | None = None) -> Shape | None:
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


@_rule("CONCATENATION")
def _concatenation(n: Node):
    shapes = [n.shape(i) for i in range(len(n.op.inputs))]
    if any(s is None for s in shapes):
        return [None]
    rank = len(shapes[0])
    if rank == 0:              # LiteRT stacks scalars
        return [(len(shapes),)]
    axis = _axis(n, int(n.opts.get("axis", 0)), rank)
    out = list(_merge_same(n, shapes, skip_axis=axis))
    sizes = [s[axis] for s in shapes]
    out[axis] = sum(sizes) if all(d >= 0 for d in sizes) else -1
    return [tuple(out)]


@_rule("PACK")
def _pack(n: Node):
    s = _merge_same(n, [n.shape(i) for i in range(len(n.op.inputs))])
    if s is None:
        return [None]
    axis = _axis(n, int(n.opts.get("axis", 0)), len(s), extra=1)
    return [s[:axis] + (len(n.op.inputs),) + s[axis:]]


@_rule("UNPACK")
def _unpack(n: Node):
    s = n.shape(0)
    if s is None:
        return [None] * n.n_out
    axis = _axis(n, int(n.opts.get("axis", 0)), len(s))
    if s[axis] >= 0 and s[axis] != n.n_out:
        raise n.fail(f"cannot unpack dim {s[axis]} into {n.n_out} outputs")
    return [s[:axis] + s[axis + 1:]] * n.n_out


def _split_shapes(n: Node, s: Shape | None, axis: int | None, sizes: Sequence[int] | None):
    if s is None:
        return [None] * n.n_out
    if axis is None:
        return [(-1,) * len(s)] * n.n_out
    a = _axis(n, axis, len(s))
    if sizes is None:
        return [s[:a] + (-1,) + s[a + 1:]] * n.n_out
    return [s[:a] + (d,) + s[a + 1:] for d in sizes]


@_rule("SPLIT")
def _split(n: Node):
    s, axis, k = n.shape(1), n.scalar(0), n.n_out
    sizes = None
    if s is not None and axis is not None:
        d = s[_axis(n, axis, len(s))]
        if d >= 0:
            if d % k:
                raise n.fail(f"dim {d} does not split into {k} equal parts")
            sizes = [d // k] * k
    return _split_shapes(n, s, axis, sizes)


@_rule("SPLIT_V")
def _split_v(n: Node):
    s, given, axis = n.shape(0), n.ints(1), n.scalar(2)
    sizes = None
    if s is not None and axis is not None and given is not None:
        if len(given) != n.n_out:
            raise n.fail(f"{len(given)} split sizes for {n.n_out} outputs")
        d = s[_axis(n, axis, len(s))]
        sizes = list(given)
        if -1 in sizes:
            rest = sum(x for x in sizes if x != -1)
            sizes[sizes.index(-1)] = d - rest if d >= 0 else -1
        if d >= 0 and all(x >= 0 for x in sizes) and sum(sizes) != d:
            raise n.fail(f"split sizes {list(given)} do not add up to dim {d}")
    return _split_shapes(n, s, axis, sizes)


# ----------------------------------------------------------------------------------- reshaping

def _resolve_reshape(n: Node, target: Sequence[int], src: Shape | None) -> Shape:
    """TFLite's reshape rule: one -1 takes the remaining size (zero dims ignored for it)."""
    target = list(target)
    if target.count(-1) > 1:
        raise n.fail(f"new shape {target} has more than one -1")
    if any(d < -1 for d in target):
        raise n.fail(f"new shape {target} has a negative dimension")
    if not is_static(src):
        return tuple(target)
    size = _numel(src)
    known = math.prod(d for d in target if d != -1)
    if -1 in target:
        k = target.index(-1)
        nonzero_in = math.prod(d or 1 for d in src)
        nonzero_known = math.prod((d or 1) for d in target if d != -1)
        target[k] = 0 if size == 0 and known != 0 else nonzero_in // nonzero_known
        known *= target[k]
    if known != size:
        raise n.fail(f"cannot reshape {size} elements into shape {target}")
    return tuple(target)


@_rule("RESHAPE")
def _reshape(n: Node):
    src = n.shape(0)
    st = n.shape(1) if len(n.op.inputs) == 2 else None
    # As LiteRT: the shape tensor counts when it is int32 and vector-like, else the new_shape option.
    if n.has(1) and n.in_dtype(1) == np.int32 and st is not None and all(d == 1 for d in st[:-1]) \
            and (not st or st[-1] >= 0):
        target = n.ints(1)
        if target is None:
            return [(-1,) * (st[-1] if st else 1)]
    elif n.has(1) and n.in_dtype(1) == np.int32 and st is None:
        return [None]
    else:
        target = tuple(int(d) for d in (n.opts.get("new_shape") or ()))
        if target == (0,):
            target = ()
    return [_resolve_reshape(n, target, src)]


@_rule("SQUEEZE")
def _squeeze(n: Node):
    s = n.shape(0)
    if s is None:
        return [None]
    dims = [int(d) for d in (n.opts.get("squeeze_dims") or ())]
    if not dims:
        return [tuple(d for d in s if d != 1)] if is_static(s) else [None]
    picked = {_axis(n, d, len(s)) for d in dims}
    for k in picked:
        if s[k] >= 0 and s[k] != 1:
            raise n.fail(f"cannot squeeze dim {k} of size {s[k]}")
    return [tuple(d for k, d in enumerate(s) if k not in picked)]


@_rule("EXPAND_DIMS")
def _expand_dims(n: Node):
    s, axis = n.shape(0), n.scalar(1)
    if s is None:
        return [None]
    if axis is None:
        return [(-1,) * (len(s) + 1)]
    a = _axis(n, axis, len(s), extra=1)
    return [s[:a] + (1,) + s[a:]]


@_rule("SHAPE")
def _shape(n: Node):
    s = n.shape(0)
    return [None if s is None else (len(s),)]


@_rule("RANK", "VAR_HANDLE")
def _scalar_out(n: Node):
    return [()]


def _shape_from_value(n: Node, i: int) -> Shape | None:
    """A shape given as input i's value; without the value only the rank (its length) is known."""
    v = n.ints(i)
    if v is not None:
        if any(d < 0 for d in v):
            raise n.fail(f"shape {list(v)} has a negative dimension")
        return v
    s = n.shape(i)
    return (-1,) * (s[0] if s else 1) if s is not None and len(s) <= 1 and (not s or s[0] >= 0) else None


@_rule("FILL", "RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL")
def _fill(n: Node):
    return [_shape_from_value(n, 0)]


@_rule("SCATTER_ND")
def _scatter_nd(n: Node):
    idx, upd, out = n.shape(0), n.shape(1), _shape_from_value(n, 2)
    if idx and is_static(out) and idx[-1] > len(out):
        raise n.fail(f"index depth {idx[-1]} exceeds the output rank {len(out)}")
    if idx and upd is not None and is_static(out) and idx[-1] >= 0:
        outer = len(idx) - 1
        want = idx[:-1] + out[idx[-1]:]
        if len(upd) != len(want) or any(a >= 0 and b >= 0 and a != b for a, b in zip(upd, want)):
            raise n.fail(f"updates {_fmt(upd)} do not match indices {_fmt(idx)} into shape {list(out)} "
                         f"(expected {_fmt(want)}; {outer} index dims)")
    return [out]


@_rule("SPARSE_TO_DENSE")
def _sparse_to_dense(n: Node):
    idx, out = n.shape(0), _shape_from_value(n, 1)
    if idx is not None and len(idx) == 2 and idx[1] >= 0 and out is not None and idx[1] != len(out):
        raise n.fail(f"indices of depth {idx[1]} do not index a rank-{len(out)} output")
    return [out]


@_rule("BROADCAST_TO")
def _broadcast_to(n: Node):
    target = _shape_from_value(n, 1)
    if is_static(target) and n.shape(0) is not None:
        if len(n.shape(0)) > len(target) or _broadcast(n, n.shape(0), target) != target:
            raise n.fail(f"cannot broadcast to {list(target)}")
    return [target]


@_rule("BROADCAST_ARGS")
def _broadcast_args(n: Node):
    a, b = n.shape(0), n.shape(1)
    if a is None or b is None or len(a) != 1 or len(b) != 1 or a[0] < 0 or b[0] < 0:
        return [(-1,)]
    return [(max(a[0], b[0]),)]


@_rule("RANGE")
def _range(n: Node):
    vals = [n.value(i) for i in range(3)]
    if any(v is None for v in vals):
        return [(-1,)]
    start, limit, delta = (np.ravel(v)[0].item() for v in vals)
    if delta == 0 or (limit - start) * delta < 0:
        raise n.fail(f"range({start}, {limit}, {delta}) is empty or endless")
    if all(isinstance(x, int) for x in (start, limit, delta)):
        return [((abs(limit - start) + abs(delta) - 1) // abs(delta),)]
    return [(int(math.ceil(abs((limit - start) / delta))),)]


@_rule("TILE")
def _tile(n: Node):
    s, mult = n.shape(0), n.ints(1)
    if s is None:
        return [None]
    if mult is None:
        return [(-1,) * len(s)]
    if len(mult) != len(s):
        raise n.fail(f"{len(mult)} multiples for rank {len(s)}")
    return [tuple(d * m if d >= 0 else -1 for d, m in zip(s, mult))]


@_rule("TRANSPOSE")
def _transpose(n: Node):
    s, perm = n.shape(0), n.ints(1)
    if s is None:
        return [None]
    if perm is None:
        return [(-1,) * len(s)]
    if sorted(p + len(s) if p < 0 else p for p in perm) != list(range(len(s))):
        raise n.fail(f"perm {list(perm)} is not a permutation of rank {len(s)}")
    return [tuple(s[p] for p in perm)]


# ----------------------------------------------------------------------------------- indexing

@_rule("GATHER")
def _gather(n: Node):
    x, idx = n.shape(0), n.shape(1)
    if x is None or idx is None:
        return [None]
    axis = _axis(n, int(n.opts.get("axis", 0)), len(x))
    bd = int(n.opts.get("batch_dims", 0))
    if bd < 0:
        bd += len(idx)
    return [x[:axis] + idx[bd:] + x[axis + 1:]]


@_rule("GATHER_ND")
def _gather_nd(n: Node):
    p, idx = n.shape(0), n.shape(1)
    if p is None or idx is None or not idx or idx[-1] < 0:
        return [None]
    if idx[-1] > len(p):
        raise n.fail(f"index depth {idx[-1]} exceeds the params rank {len(p)}")
    return [idx[:-1] + p[idx[-1]:]]


@_rule("EMBEDDING_LOOKUP")
def _embedding_lookup(n: Node):
    ids, table = n.shape(0), n.shape(1)
    return [None if ids is None or table is None else ids[:1] + table[1:]]


@_rule("SLICE")
def _slice(n: Node):
    s, begin, size = n.shape(0), n.ints(1), n.ints(2)
    if s is None:
        return [None]
    declared = n.sg.tensors[n.op.outputs[0]]
    if n.engine.policy.litert_quirks and declared.shape and not declared.is_dynamic:
        # LiteRT keeps a declared static output as it is and only checks it when it can.
        if begin is not None and size is not None and is_static(s):
            got = _slice_shape(n, s, begin, size)
            if got != tuple(declared.shape):
                raise n.fail(f"slice of shape {list(got)} does not match the declared output "
                             f"{list(declared.shape)}")
        return [tuple(declared.shape)]
    if begin is None or size is None:
        return [(-1,) * len(s)]
    return [_slice_shape(n, s, begin, size)]


def _slice_shape(n: Node, s: Shape, begin: Sequence[int], size: Sequence[int]) -> Shape:
    if len(begin) != len(s) or len(size) != len(s):
        raise n.fail(f"begin {list(begin)} / size {list(size)} do not match rank {len(s)}")
    out = []
    for b, z, d in zip(begin, size, s):
        e = (d if d >= 0 else -1) if z == -1 else b + z
        if b < 0 or z < -1 or (d >= 0 and (e > d or b > d)):
            raise n.fail(f"slice begin {list(begin)} size {list(size)} is out of range")
        out.append(e - b if e >= 0 else -1)
    return tuple(out)


def _strided_index(n: Node, shape: Shape, begin, end, strides) -> list:
    """TF strided-slice semantics as a list of (input dim, item): item is a slice, an int (shrink),
    None (new axis); input dims covered by an ellipsis get full slices."""
    o = n.opts
    bm, em = int(o.get("begin_mask", 0)), int(o.get("end_mask", 0))
    elm, nam = int(o.get("ellipsis_mask", 0)), int(o.get("new_axis_mask", 0))
    sam, offset = int(o.get("shrink_axis_mask", 0)), bool(o.get("offset", False))
    if not len(begin) == len(end) == len(strides):
        raise n.fail(f"begin {list(begin)}, end {list(end)}, strides {list(strides)} differ in length")
    items, dim, ell_seen = [], 0, False
    for i, (b, e, st) in enumerate(zip(begin, end, strides)):
        if elm >> i & 1 and not ell_seen:
            ell_seen = True
            later = sum(1 for j in range(i + 1, len(begin)) if not (nam >> j & 1 and not elm >> j & 1))
            for _ in range(max(0, len(shape) - dim - later)):
                items.append((dim, slice(None)))
                dim += 1
            continue
        if elm >> i & 1:
            items.append((dim, slice(None)))
            dim += 1
            continue
        if nam >> i & 1:
            items.append((None, None))
            continue
        if st == 0:
            raise n.fail("strided slice: stride must be non-zero")
        if dim >= len(shape):
            raise n.fail(f"strided slice spec {list(begin)} is too long for rank {len(shape)}")
        d = shape[dim]
        if sam >> i & 1:
            items.append((dim, b))
        else:
            start = None if bm >> i & 1 else b
            if em >> i & 1:
                stop = None
            elif offset:
                stop = None if d < 0 and b < 0 else (b + d if b < 0 else b) + e
            else:
                stop = e
            items.append((dim, slice(start, stop, st)))
        dim += 1
    while dim < len(shape):
        items.append((dim, slice(None)))
        dim += 1
    return items


@_rule("STRIDED_SLICE")
def _strided_slice(n: Node):
    s = n.shape(0)
    b, e, st = n.ints(1), n.ints(2), n.ints(3)
    if s is None:
        return [None]
    if b is None or e is None or st is None:
        masks = sum(int(n.opts.get(k, 0)) for k in ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask"))
        return [(-1,) * len(s) if masks == 0 else None]   # without masks the rank is kept
    out = []
    for dim, item in _strided_index(n, s, b, e, st):
        if dim is None:
            out.append(1)
        elif isinstance(item, slice):
            d = s[dim]
            if d < 0:
                out.append(-1)
            else:
                out.append(len(range(*item.indices(d))))
        elif s[dim] >= 0 and not -s[dim] <= item < s[dim]:
            raise n.fail(f"strided slice index {item} is out of range for dim {s[dim]}")
    return [tuple(out)]


@_rule("PAD", "PADV2", "MIRROR_PAD")
def _pad(n: Node):
    s, pads = n.shape(0), n.ints(1)
    if s is None:
        return [None]
    if pads is None:
        return [(-1,) * len(s)]
    if len(pads) != 2 * len(s):
        raise n.fail(f"paddings must have shape [{len(s)}, 2], hold {len(pads)} values")
    if any(p < 0 for p in pads):
        raise n.fail(f"negative padding {list(pads)}")
    if n.op.opcode == "MIRROR_PAD":     # REFLECT (mode 0) excludes the edge, SYMMETRIC repeats it
        limit_off = 1 if int(n.opts.get("mode", 0)) == 0 else 0
        for k, d in enumerate(s):
            if d >= 0 and max(pads[2 * k], pads[2 * k + 1]) > d - limit_off:
                raise n.fail(f"padding {pads[2 * k]}, {pads[2 * k + 1]} of dim {k} exceeds size {d} "
                             f"minus {limit_off}")
    return [tuple(d + pads[2 * k] + pads[2 * k + 1] if d >= 0 else -1 for k, d in enumerate(s))]


@_rule("STABLEHLO_PAD")
def _stablehlo_pad(n: Node):
    s = n.shape(0)
    if s is None:
        return [None]
    r = len(s)

    def opt(key: str) -> tuple[int, ...]:
        v = n.opts.get(key)
        return tuple(int(x) for x in v) if v is not None and len(v) else (0,) * r
    lo, hi, it = opt("edge_padding_low"), opt("edge_padding_high"), opt("interior_padding")
    return [tuple(-1 if d < 0 else lo[k] + hi[k] + d + max(d - 1, 0) * it[k] for k, d in enumerate(s))]


@_rule("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")
def _resize(n: Node):
    x, size = _need_rank(n, 0, 4), n.ints(1)
    if x is None:
        return [None]
    if size is not None and len(size) != 2:
        raise n.fail(f"size must hold 2 values, holds {list(size)}")
    h, w = size if size is not None else (-1, -1)
    return [(x[0], h, w, x[3])]


@_rule("SPACE_TO_DEPTH", "DEPTH_TO_SPACE")
def _space_depth(n: Node):
    x = _need_rank(n, 0, 4)
    bs = int(n.opts.get("block_size", 0))
    if x is None or bs < 1:
        return [None]
    nb, h, w, c = x
    if n.op.opcode == "SPACE_TO_DEPTH":
        if (h > 0 and h % bs) or (w > 0 and w % bs):
            raise n.fail(f"height {h} and width {w} must be multiples of block size {bs}")
        return [(nb, h // bs if h >= 0 else -1, w // bs if w >= 0 else -1, c * bs * bs if c >= 0 else -1)]
    if c > 0 and c % (bs * bs):
        raise n.fail(f"depth {c} must be a multiple of block size squared {bs * bs}")
    return [(nb, h * bs if h >= 0 else -1, w * bs if w >= 0 else -1, c // (bs * bs) if c >= 0 else -1)]


@_rule("SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND")
def _space_batch(n: Node):
    x, block, pads = n.shape(0), n.ints(1), n.ints(2)
    if x is None:
        return [None]
    if block is None or pads is None or len(pads) != 2 * len(block) or not 1 <= len(block) < len(x) \
            or any(b < 1 for b in block):
        return [(-1,) * len(x)]
    prod = math.prod(block)
    out = list(x)
    to_batch = n.op.opcode == "SPACE_TO_BATCH_ND"
    if not to_batch and x[0] >= 0 and x[0] % prod:
        raise n.fail(f"batch {x[0]} is not a multiple of the block size product {prod}")
    out[0] = -1 if x[0] < 0 else (x[0] * prod if to_batch else x[0] // prod)
    for k, b in enumerate(block):
        d, lo, hi = x[1 + k], pads[2 * k], pads[2 * k + 1]
        if d < 0:
            out[1 + k] = -1
        elif to_batch:
            if (d + lo + hi) % b:
                raise n.fail(f"padded dim {d + lo + hi} is not a multiple of block size {b}")
            out[1 + k] = (d + lo + hi) // b
        else:
            out[1 + k] = d * b - lo - hi
            if out[1 + k] < 0:
                raise n.fail(f"crops {lo}, {hi} exceed dim {d * b}")
    return [tuple(out)]


@_rule("ONE_HOT")
def _one_hot(n: Node):
    s, depth = n.shape(0), n.scalar(1)
    if s is None:
        return [None]
    axis = int(n.opts.get("axis", -1))
    a = len(s) if axis == -1 else _axis(n, axis, len(s), extra=1)
    return [s[:a] + (depth if depth is not None else -1,) + s[a:]]


@_rule("WHERE")
def _where(n: Node):
    s, v = n.shape(0), n.value(0)
    if s is None:
        return [None]
    return [(int(np.count_nonzero(v)) if v is not None else -1, len(s))]


@_rule("UNIQUE")
def _unique(n: Node):
    s, v = n.shape(0), n.value(0)
    count = len(np.unique(v)) if v is not None else -1
    return [(count,), s]


@_rule("NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5")
def _nms(n: Node):
    mos = n.scalar(2)
    sel = (mos,) if mos is not None and mos >= 0 else (-1,)
    return [sel] * (n.n_out - 1) + [()]


@_rule("SEGMENT_SUM")
def _segment_sum(n: Node):
    s, ids = n.shape(0), n.ints(1)
    if s is None or not s:
        return [None]
    return [((max(ids) + 1 if ids else 0) if ids is not None else -1,) + s[1:]]


@_rule("UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_MIN", "UNSORTED_SEGMENT_PROD")
def _unsorted_segment(n: Node):
    s, ids, num = n.shape(0), n.shape(1), n.scalar(2)
    if s is None or ids is None:
        return [None]
    if n.engine.policy.litert_quirks and n.value(1) is None:
        num = None                      # LiteRT sizes the output at run time unless the ids are known
    return [(num if num is not None else -1,) + s[len(ids):]]


@_rule("MULTINOMIAL")
def _multinomial(n: Node):
    s, k = n.shape(0), n.scalar(1)
    return [None if s is None or len(s) != 2 else (s[0], k if k is not None else -1)]


@_rule("RFFT2D")
def _rfft2d(n: Node):
    s, fl = n.shape(0), n.ints(1)
    if s is None or len(s) < 2:
        return [None]
    if fl is None or len(fl) != 2:
        return [s[:-2] + (-1, -1)]
    return [s[:-2] + (fl[0], fl[1] // 2 + 1)]


# ----------------------------------------------------------------------------------- control flow

def _called(n: Node, key: str) -> Subgraph:
    k = n.opts.get(key)
    if not isinstance(k, int) or not 0 <= k < len(n.engine.model.subgraphs):
        raise n.fail(f"{key} {k} is not a subgraph of this model")
    return n.engine.model.subgraphs[k]


def _outputs_of(n: Node, callee: Subgraph, result: "SubgraphShapes", count: int) -> list:
    if len(callee.outputs) != count:
        raise n.fail(f"subgraph {callee.index} returns {len(callee.outputs)} values, the op has {count} outputs")
    outs = [result.shapes[o] for o in callee.outputs]
    if n.engine.policy.dynamic_subgraph_taints and result.has_dynamic:
        return [_unknown_like(s) for s in outs]
    return outs


def _call(n: Node, callee: Subgraph, shapes: list, skip_unused: bool = False) -> "SubgraphShapes":
    if len(callee.inputs) != len(shapes):
        raise n.fail(f"subgraph {callee.index} takes {len(callee.inputs)} inputs, the op passes {len(shapes)}")
    if skip_unused and n.engine.policy.skip_unused_inputs:
        # LiteRT removes the inputs a branch or cond never reads (nor returns), so they keep their shape.
        reads = {t for op in callee.operations for t in op.inputs} | set(callee.outputs)
        shapes = [s if t in reads else tuple(callee.tensors[t].shape) for s, t in zip(shapes, callee.inputs)]
    return n.engine.subgraph(callee.index, shapes)


def _branches(n: Node, callees: list[Subgraph], shapes: list) -> list:
    outs = None
    for callee in callees:
        got = _outputs_of(n, callee, _call(n, callee, shapes, skip_unused=True), n.n_out)
        if outs is None:
            outs = got
        elif n.engine.policy.dynamic_subgraph_taints:
            outs = [a if a == b else _unknown_like(_merge(a, b) or a) for a, b in zip(outs, got)]
        else:
            outs = [_merge(a, b) for a, b in zip(outs, got)]
    return outs or []


@_rule("IF")
def _if(n: Node):
    c = n.shape(0)
    if is_static(c) and _numel(c) != 1:
        raise n.fail(f"the condition must have one element, has shape {_fmt(c)}")
    shapes = [n.shape(i) for i in range(1, len(n.op.inputs))]
    return _branches(n, [_called(n, "then_subgraph_index"), _called(n, "else_subgraph_index")], shapes)


@_rule("STABLEHLO_CASE")
def _case(n: Node):
    indices = n.opts.get("branch_subgraph_indices") or ()
    callees = []
    for k in indices:
        if not 0 <= int(k) < len(n.engine.model.subgraphs):
            raise n.fail(f"branch subgraph {k} is not a subgraph of this model")
        callees.append(n.engine.model.subgraphs[int(k)])
    return _branches(n, callees, [n.shape(i) for i in range(1, len(n.op.inputs))])


@_rule("CALL", "STABLEHLO_COMPOSITE")
def _call_op(n: Node):
    callee = _called(n, "subgraph" if n.op.opcode == "CALL" else "decomposition_subgraph_index")
    shapes = [n.shape(i) for i in range(len(n.op.inputs))]
    return _outputs_of(n, callee, _call(n, callee, shapes), n.n_out)


@_rule("CALL_ONCE")
def _call_once(n: Node):
    callee = _called(n, "init_subgraph_index")
    _call(n, callee, [])
    return [None] * n.n_out


@_rule("WHILE", "STABLEHLO_WHILE")
def _while(n: Node):
    cond, body = _called(n, "cond_subgraph_index"), _called(n, "body_subgraph_index")
    engine = n.engine
    shapes = [n.shape(i) for i in range(len(n.op.inputs))]
    if len(n.op.outputs) != len(shapes):
        raise n.fail(f"{len(shapes)} inputs but {n.n_out} outputs")
    if len(cond.outputs) != 1:
        raise n.fail(f"cond subgraph {cond.index} must return one value")

    def check_cond(cur: list) -> None:
        r = _call(n, cond, cur, skip_unused=True)
        c = r.shapes[cond.outputs[0]]
        if is_static(c) and _numel(c) != 1:
            raise n.fail(f"cond subgraph {cond.index} returns shape {_fmt(c)}; a condition has one element")

    if engine.policy.dynamic_subgraph_taints:
        # LiteRT: one prepare of the body with the loop inputs; outputs static only if they keep the shapes.
        check_cond(shapes)
        outs = _outputs_of(n, body, _call(n, body, shapes), n.n_out)
        if all(is_static(o) for o in outs) and outs == shapes:
            return outs
        return [_unknown_like(_merge(a, b) or a or b) for a, b in zip(shapes, outs)]
    cur = shapes
    for _ in range(sum(len(s) for s in shapes if s is not None) + len(shapes) + 2):
        check_cond(cur)
        outs = _outputs_of(n, body, _call(n, body, cur), n.n_out)
        nxt = [_merge(a, b) for a, b in zip(cur, outs)]
        if nxt == cur:
            return cur
        cur = nxt
    return [None] * n.n_out


# ----------------------------------------------------------------------------------- values

_ACT = {1: (0, None), 2: (-1, 1), 3: (0, 6)}


def _act(n: Node, v: np.ndarray) -> np.ndarray:
    lo_hi = _ACT.get(int(n.opts.get("fused_activation_function", 0) or 0))
    return v if lo_hi is None else np.clip(v, lo_hi[0], lo_hi[1])


_BINARY_VALUES = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "FLOOR_DIV": np.floor_divide,
                  "FLOOR_MOD": np.mod, "MAXIMUM": np.maximum, "MINIMUM": np.minimum}


@_values(*_BINARY_VALUES)
def _v_binary(n: Node, v: list):
    if n.op.opcode in ("FLOOR_DIV", "FLOOR_MOD") and not np.all(v[1]):
        return None
    return [_act(n, _BINARY_VALUES[n.op.opcode](v[0], v[1]))]


@_values("NEG", "ABS", "ZEROS_LIKE", "CAST")
def _v_unary(n: Node, v: list):
    fn = {"NEG": np.negative, "ABS": np.abs, "ZEROS_LIKE": np.zeros_like, "CAST": np.asarray}[n.op.opcode]
    return [fn(v[0])]


@_values("SHAPE")
def _v_shape(n: Node, v: list):
    if not is_static(n.shape(0)):
        return None
    return [np.array(n.shape(0), dtype=n.out_dtype())]


@_values("RANK")
def _v_rank(n: Node, v: list):
    if n.shape(0) is None:
        return None
    return [np.array(len(n.shape(0)), dtype=n.out_dtype())]


@_values("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def _v_reshape(n: Node, v: list):
    return [np.reshape(v[0], n.engine.current_out[0])]


@_values("PACK")
def _v_pack(n: Node, v: list):
    return [np.stack(v, axis=_axis(n, int(n.opts.get("axis", 0)), np.ndim(v[0]), extra=1))]


@_values("CONCATENATION")
def _v_concat(n: Node, v: list):
    if np.ndim(v[0]) == 0:
        return [np.stack(v)]
    return [_act(n, np.concatenate(v, axis=_axis(n, int(n.opts.get("axis", 0)), np.ndim(v[0]))))]


@_values("STRIDED_SLICE")
def _v_strided_slice(n: Node, v: list):
    items = _strided_index(n, np.shape(v[0]), *(tuple(int(x) for x in np.ravel(a)) for a in v[1:4]))
    index = tuple(np.newaxis if d is None else it for d, it in items)
    return [np.asarray(v[0][index])]


@_values("SLICE")
def _v_slice(n: Node, v: list):
    return [v[0][tuple(slice(b, b + z) for b, z in zip(np.ravel(v[1]), n.engine.current_out[0]))]]


@_values("GATHER")
def _v_gather(n: Node, v: list):
    if int(n.opts.get("batch_dims", 0)):
        return None
    return [np.take(v[0], v[1], axis=int(n.opts.get("axis", 0)))]


@_values("GATHER_ND")
def _v_gather_nd(n: Node, v: list):
    idx = np.asarray(v[1])
    return [np.asarray(v[0][tuple(np.moveaxis(idx, -1, 0))])]


_REDUCERS = {"REDUCE_PROD": np.prod, "SUM": np.sum, "REDUCE_MAX": np.max, "REDUCE_MIN": np.min}


@_values(*_REDUCERS)
def _v_reduce(n: Node, v: list):
    x = np.asarray(v[0])
    axes = tuple(int(a) % x.ndim for a in np.ravel(v[1])) if x.ndim else ()
    if x.size == 0 and n.op.opcode in ("REDUCE_MAX", "REDUCE_MIN"):
        return None
    return [_REDUCERS[n.op.opcode](x, axis=tuple(sorted(set(axes))),
                                   keepdims=bool(n.opts.get("keep_dims", False))).astype(x.dtype)]


@_values("FILL")
def _v_fill(n: Node, v: list):
    return [np.full(n.engine.current_out[0], np.ravel(v[1])[0])]


@_values("RANGE")
def _v_range(n: Node, v: list):
    return [np.arange(np.ravel(v[0])[0], np.ravel(v[1])[0], np.ravel(v[2])[0])]


@_values("TILE")
def _v_tile(n: Node, v: list):
    return [np.tile(v[0], tuple(int(m) for m in np.ravel(v[1])))]


@_values("TRANSPOSE")
def _v_transpose(n: Node, v: list):
    return [np.transpose(v[0], tuple(int(p) for p in np.ravel(v[1])))]


@_values("BROADCAST_ARGS")
def _v_broadcast_args(n: Node, v: list):
    return [np.array(np.broadcast_shapes(tuple(np.ravel(v[0])), tuple(np.ravel(v[1]))))]


@_values("SELECT_V2")
def _v_select(n: Node, v: list):
    return [np.where(v[0], v[1], v[2])]


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

    @property
    def main(self) -> SubgraphShapes:
        return self.subgraphs[self.subgraph_index]

    def __getitem__(self, k: int) -> SubgraphShapes:
        return self.subgraphs[k]

    def output_shapes(self, model: Model) -> list:
        return [self.main.shapes[o] for o in model.subgraphs[self.subgraph_index].outputs]


class _Engine:
    def __init__(self, model: Model, policy: ShapePolicy, known: Mapping[int, Mapping[int, Any]] | None):
        self.model = model
        self.policy = policy
        self.known = known if (known is not None and policy.use_known) else {}
        self.memo: dict[tuple, SubgraphShapes] = {}
        self.visited: dict[int, SubgraphShapes] = {}
        self.active: set[tuple] = set()
        self.current_out: list = []
        self.orders: dict[int, list[Operation]] = {}

    def subgraph(self, k: int, shapes: Sequence[Shape | None]) -> SubgraphShapes:
        key = (k, tuple(shapes))
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
        value_ops = self.policy.value_ops
        consumed: set | None = None
        for pos, op in enumerate(self._order(sg)):
            result.order.append(op.index)
            node = Node(op, sg, shapes, values, self)
            outs = self._op_shapes(node)
            dynamic = False
            skip: set = set()
            if self.policy.litert_quirks and op.opcode in ("WHILE", "STABLEHLO_WHILE"):
                # LiteRT leaves WHILE outputs that nothing reads unresized.
                if consumed is None:
                    consumed = {i for o2 in sg.operations for i in o2.inputs} | set(sg.outputs)
                skip = {o for o in op.outputs if o not in consumed}
            for o, s in zip(op.outputs, outs):
                if o < 0:
                    continue
                if o in values and sg.tensors[o].data is None and o not in inputs:   # folded by the compiler
                    s = tuple(np.shape(values[o]))
                shapes[o] = s
                if is_static(s):
                    if o not in skip:
                        resolved[o] = s
                else:
                    dynamic = True
            if not dynamic and (value_ops is None or op.kernel_name in value_ops) \
                    and op.kernel_name in VALUE_FUNCTIONS:
                self._evaluate(node, outs, limit)
            if dynamic and result.first_dynamic is None:
                result.first_dynamic = pos
                if self.policy.stop_at_dynamic:
                    break
        return result

    def _op_shapes(self, node: Node) -> list:
        op = node.op
        fn = SHAPE_FUNCTIONS.get(op.kernel_name)
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

    def _evaluate(self, node: Node, outs: list, limit: int) -> None:
        op, values = node.op, node.values
        if all(o in values for o in op.outputs if o >= 0):
            return
        if op.opcode not in ("SHAPE", "RANK"):
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
        if sum(_numel(s) for s in outs) > limit:
            return
        self.current_out = outs
        try:
            got = VALUE_FUNCTIONS[op.kernel_name](node, ins)
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
                 policy: ShapePolicy = FULL, known: Mapping[int, Mapping[int, Any]] | None = None) -> ShapeResult:
    """Shapes of every tensor of `subgraph_index` (and of the subgraphs it calls) for these input
    shapes (default: the declared ones; -1 dims are allowed and propagate). `known` maps subgraph
    -> tensor -> value for values computed elsewhere (the compiler's folded constants)."""
    shapes = _check_inputs(model, subgraph_index, input_shapes)
    engine = _Engine(model, policy, known)
    engine.subgraph(subgraph_index, shapes)
    return ShapeResult(subgraph_index, shapes, dict(engine.visited))


class ShapeCache:
    """infer_shapes results kept per (subgraph, input shapes): resizing back to a shape seen before
    costs a dict look-up. Oldest entries are dropped past `max_entries`."""

    def __init__(self, model: Model, policy: ShapePolicy = FULL,
                 known: Mapping[int, Mapping[int, Any]] | Callable[[], Mapping] | None = None,
                 max_entries: int = 64):
        self.model = model
        self.policy = policy
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
        result = infer_shapes(self.model, subgraph_index, shapes, policy=self.policy, known=known)
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
