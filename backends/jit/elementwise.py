"""jit kernels of the elementwise families (cpu/elementwise.py, cpu/unary.py, cpu/activations.py):
each op's *expression* (codegen.Expr), used by whole-loop compilation (jit/loop.py) for ops of any
size, and, for large static float32 tensors, a per-op kernel generated from the same expression with
the fused activation in the same pass (numpy needs a second pass over the output to clamp it).

Semantics are the cpu kernels': float32 arithmetic rounds once per op; LiteRT's activation range
clamps ADD/SUB/MUL/DIV (with no activation to ±FLT_MAX, NaN kept); int32 arithmetic wraps.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from onert_py.backends.cpu._common import NONE
from onert_py.backends.cpu._quant import qparams
from onert_py.backends.cpu.activations import GELU_C, GELU_K, GELU_MINUS_SQRT_HALF
from onert_py.backends.cpu.elementwise import PairLookup, _activation_range, _broadcasts
from onert_py.backends.jit._numba import compile_now, kernel
from onert_py.backends.jit.codegen import Code, Expr, channel_loop, clamp, compile_source
from onert_py.backends.registry import CPU, JIT, KernelContext, Run

ExprFn = Callable[[object, object], "Expr | None"]
EXPRESSIONS: dict[str, ExprFn] = {}

# Below this many output elements a per-op kernel loses to the cpu backend's one-element fast paths
# (the call into numba and its argument checks cost ~1.5 µs); from 16 elements on it wins whatever the
# op (measured one-op run closures, 16 to 4096 floats: PRELU 5.7 -> 2.2 µs, HARD_SWISH 3.9 -> 2.0,
# ADD with a bias and RELU 3.3 -> 2.2, ADD of two inputs 2.6 -> 2.4); inside a compiled loop every
# size is taken.
PER_OP_MIN_SIZE = 16
# LiteRT's elementwise kernels broadcast up to 6 dimensions; higher ranks stay with cpu (and its errors)
_MAX_RANK = 6


def expression(*names: str) -> Callable[[ExprFn], ExprFn]:
    """Decorator: fn(op, subgraph) -> Expr, or None when the op's types or options are not covered."""
    def deco(fn: ExprFn) -> ExprFn:
        for n in names:
            if n in EXPRESSIONS:
                raise RuntimeError(f"jit expression {n} registered twice")
            EXPRESSIONS[n] = fn
        return fn
    return deco


def expression_of(op, sg) -> Expr | None:
    """The op's expression when it has one for these types and options (static shapes required)."""
    fn = EXPRESSIONS.get(op.kernel_name) if not op.is_custom else None
    if fn is None:
        return None
    tensors = [sg.tensors[t] for t in (*op.inputs, *op.outputs) if t >= 0]
    if any(t.is_dynamic or t.data is None and t.shape_signature is not None and -1 in t.shape_signature
           for t in tensors):
        return None
    return fn(op, sg)


def _dtypes(op, sg) -> tuple[list[np.dtype], np.dtype]:
    return [sg.tensors[t].dtype for t in op.inputs if t >= 0], sg.tensors[op.outputs[0]].dtype


def _quantized(op, sg) -> bool:
    for t in (*op.inputs, *op.outputs):
        q = sg.tensors[t].quantization if t >= 0 else None
        if q is not None and np.size(q.scale) > 0 and sg.tensors[t].dtype.kind in "iu":
            return True
    return False


_F32, _I32, _BOOL = np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.bool_)


_ARITHMETIC = {"ADD": "({0} + {1})", "SUB": "({0} - {1})", "MUL": "({0} * {1})", "DIV": "({0} / {1})"}


@expression("ADD", "SUB", "MUL", "DIV")
def _arithmetic(op, sg) -> Expr | None:
    ins, out = _dtypes(op, sg)
    if len(ins) != 2 or _quantized(op, sg) or any(d != out for d in ins):
        return None
    if out not in (_F32, _I32) or (out == _I32 and op.opcode == "DIV"):
        return None   # int DIV: C++ division by zero and truncation, left to cpu
    try:   # the cpu kernels' activation range (TANH and SIGN_BIT act as NONE); None: nothing clamped
        bounds = _activation_range(op.options.get("fused_activation_function", NONE), out) or (None, None)
    except ValueError:
        return None
    body = _ARITHMETIC[op.opcode]
    if out == _I32:
        body = f"np.int32({body})"   # int32 wraps, as LiteRT's
    return Expr(clamp(body, *bounds, out))


@expression("MAXIMUM", "MINIMUM")
def _extremum(op, sg) -> Expr | None:
    ins, out = _dtypes(op, sg)
    if len(ins) != 2 or _quantized(op, sg) or any(d != out for d in ins) or out not in (_F32, _I32):
        return None
    # LiteRT's (and cpu's) a > b ? a : b and a < b ? a : b: a NaN in a gives b, and of two equal zeros
    # b (np.maximum would propagate the NaN)
    return Expr(f"({{0}} if {{0}} {'>' if op.opcode == 'MAXIMUM' else '<'} {{1}} else {{1}})")


@expression("SQUARED_DIFFERENCE")
def _squared_difference(op, sg) -> Expr | None:
    ins, out = _dtypes(op, sg)
    if len(ins) != 2 or _quantized(op, sg) or any(d != _F32 for d in ins) or out != _F32:
        return None
    return Expr("(({0} - {1}) * ({0} - {1}))")


_COMPARISONS = {"LESS": "<", "LESS_EQUAL": "<=", "GREATER": ">", "GREATER_EQUAL": ">=", "EQUAL": "==",
                "NOT_EQUAL": "!="}


@expression(*_COMPARISONS)
def _comparison(op, sg) -> Expr | None:
    ins, out = _dtypes(op, sg)
    if (len(ins) != 2 or _quantized(op, sg) or ins[0] != ins[1] or out != _BOOL
            or ins[0] not in (_F32, _I32, np.dtype(np.int64))):
        return None
    return Expr(f"({{0}} {_COMPARISONS[op.opcode]} {{1}})")


@expression("LOGICAL_AND", "LOGICAL_OR")
def _logical(op, sg) -> Expr | None:
    ins, out = _dtypes(op, sg)
    if len(ins) != 2 or any(d != _BOOL for d in ins) or out != _BOOL:
        return None
    return Expr(f"({{0}} {'and' if op.opcode == 'LOGICAL_AND' else 'or'} {{1}})")


@expression("LOGICAL_NOT")
def _logical_not(op, sg) -> Expr | None:
    ins, out = _dtypes(op, sg)
    return Expr("(not {0})", (0,)) if ins == [_BOOL] and out == _BOOL else None


_UNARY_F32 = {"NEG": "(-{0})", "ABS": "abs({0})", "SQUARE": "({0} * {0})", "SIN": "sin32({0})",
              "COS": "cos32({0})", "EXP": "exp32({0})", "LOGISTIC": "logistic32({0})", "TANH": "tanh32({0})",
              "SQRT": "np.sqrt({0})",
              "RSQRT": "(np.float32(1.0) / np.sqrt({0}))",
              "RELU": clamp("{0}", 0.0, None, _F32), "RELU6": clamp("{0}", 0.0, 6.0, _F32),
              "RELU_N1_TO_1": clamp("{0}", -1.0, 1.0, _F32)}


@expression(*_UNARY_F32)
def _unary(op, sg) -> Expr | None:
    ins, out = _dtypes(op, sg)
    if ins != [_F32] or out != _F32 or _quantized(op, sg):
        return None
    return Expr(_UNARY_F32[op.opcode], (0,))


@expression("PRELU")
def _prelu(op, sg) -> Expr | None:
    # LiteRT's reference formula, as cpu's: x >= 0 ? x : x * alpha (NaN takes the alpha side: NaN;
    # -0.0 >= 0 keeps -0.0); one compare and one multiply, so bit for bit the cpu kernel's result
    ins, out = _dtypes(op, sg)
    if ins != [_F32, _F32] or out != _F32 or _quantized(op, sg):
        return None
    return Expr("({0} if {0} >= np.float32(0.0) else {0} * {1})")


@expression("LEAKY_RELU")
def _leaky_relu(op, sg) -> Expr | None:
    # the cpu kernel's x > 0 ? x : x * alpha (NaN and -0.0 take the alpha side), one multiply: its bits
    ins, out = _dtypes(op, sg)
    if ins != [_F32] or out != _F32 or _quantized(op, sg):
        return None
    alpha = float(np.float32(op.options.get("alpha", 0.0)))
    return Expr(f"({{0}} if {{0}} > np.float32(0.0) else {{0}} * np.float32({alpha!r}))", (0,))


@expression("ELU")
def _elu(op, sg) -> Expr | None:
    # the cpu kernel's x < 0 ? expm1(x) : x (NaN and -0.0 keep x); expm1_32 for numpy's expm1f
    ins, out = _dtypes(op, sg)
    if ins != [_F32] or out != _F32 or _quantized(op, sg):
        return None
    return Expr("(expm1_32({0}) if {0} < np.float32(0.0) else {0})", (0,))


@expression("HARD_SWISH")
def _hard_swish(op, sg) -> Expr | None:
    # cpu's order of operations: x * clip(x + 3, 0, 6) / 6, each step rounded to float32
    ins, out = _dtypes(op, sg)
    if ins != [_F32] or out != _F32 or _quantized(op, sg):
        return None
    relu6 = clamp("({0} + np.float32(3.0))", 0.0, 6.0, _F32)
    return Expr(f"(({{0}} * {relu6}) / np.float32(6.0))", (0,))


_GELU_K, _GELU_C, _MINUS_SQRT_HALF = (repr(float(v)) for v in (GELU_K, GELU_C, GELU_MINUS_SQRT_HALF))


@expression("GELU")
def _gelu(op, sg) -> Expr | None:
    # cpu's formulas and order: 0.5 x erfc(-x / sqrt 2) (erfc32: cpu's approximation), or with
    # `approximate` 0.5 x (1 + tanh(k (x + c x^3))) (tanh32 for numpy's tanh: within 3 ulp)
    ins, out = _dtypes(op, sg)
    if ins != [_F32] or out != _F32 or _quantized(op, sg):
        return None
    if op.options.get("approximate", False):
        inner = f"np.float32({_GELU_K}) * ({{0}} + ((np.float32({_GELU_C}) * {{0}}) * {{0}}) * {{0}})"
        return Expr(f"((np.float32(0.5) * {{0}}) * (np.float32(1.0) + tanh32({inner})))", (0,))
    return Expr(f"((np.float32(0.5) * {{0}}) * erfc32({{0}} * np.float32({_MINUS_SQRT_HALF})))", (0,))


# Expressions used only inside compiled loops (no per-op kernel is registered for them):

@expression("SELECT", "SELECT_V2")
def _select(op, sg) -> Expr | None:
    ins, out = _dtypes(op, sg)
    if len(ins) != 3 or ins[0] != _BOOL or ins[1] != out or ins[2] != out or out not in (_F32, _I32):
        return None
    shapes = [tuple(sg.tensors[t].shape) for t in op.inputs]
    if op.opcode == "SELECT" and len({shapes[0], shapes[1], shapes[2]}) > 1 and len(shapes[0]) != 0:
        return None   # SELECT (v1) picking rows by a rank-1 condition: not numpy's broadcast
    return Expr("({1} if {0} else {2})", (0, 1, 2))


# CAST between these types: int -> float rounds to nearest, int -> int wraps, to bool is != 0 (the cpu
# kernel's _cast_fn); float -> int saturates there, and stays with it
_CASTS = {np.dtype(t) for t in (np.float32, np.int32, np.int64, np.bool_)}


@expression("CAST")
def _cast(op, sg) -> Expr | None:
    ins, out = _dtypes(op, sg)
    if len(ins) != 1 or ins[0] not in _CASTS or out not in _CASTS or _quantized(op, sg) \
            or (ins[0].kind == "f" and out.kind in "iu"):
        return None
    if out == _BOOL:
        return Expr("({0} != 0)", (0,))
    return Expr(f"np.{out.name}({{0}})", (0,))


# ----------------------------------------------------------------------------------- per-op kernels

def _per_op_accepts(op, sg) -> bool:
    """Static float32 elementwise ops of PER_OP_MIN_SIZE elements or more, whose expression is covered."""
    out = sg.tensors[op.outputs[0]] if op.outputs else None
    expr = expression_of(op, sg) if out is not None else None
    if expr is None or out.dtype != _F32 or not out.shape or len(expr.inputs) > 2:   # _per_op's forms
        return False
    try:   # the kernel writes the declared output: it must be what the inputs broadcast to
        ins = [tuple(sg.tensors[op.inputs[i]].shape) for i in expr.inputs]
        if len(out.shape) > _MAX_RANK or np.broadcast_shapes(*ins) != tuple(out.shape):
            return False
    except (ValueError, IndexError, RuntimeError):   # RuntimeError: numpy's own rank limit (32)
        return False
    return int(np.prod(out.shape, dtype=np.int64)) >= PER_OP_MIN_SIZE


def _per_op(ctx: KernelContext) -> Run:
    op, sg = ctx.op, ctx.subgraph
    expr = expression_of(op, sg)
    out_t = ctx.output_tensor(0)
    out_shape = tuple(out_t.shape)
    size = int(np.prod(out_shape, dtype=np.int64))
    code = Code()
    names = [f"a{j}" for j in range(len(expr.inputs))]
    shapes = [tuple(ctx.input_tensor(i).shape) for i in expr.inputs]
    chain, operands = _chain_code(ctx) if ctx.epilogue else ([], [])
    code.element_loop("    ", "out", expr, list(zip(names, shapes)), out_shape, lambda j: f"i{j}",
                      bound="out.shape[0]", channels="channels", then=chain)
    index_args = code.args   # broadcast index arrays, made now
    index_values = [*code.values, out_shape[-1]]
    chain_names = [f"e{j}" for j in range(len(operands))]
    source = (f"@kernel\ndef elementwise(out, {', '.join(names + chain_names + index_args)}, channels):\n"
              + "\n".join(code.lines) + "\n")
    fn = compile_source(source, "elementwise")
    example = np.empty(1, _F32)
    compile_now(fn, example, *[example for _ in names + chain_names], *index_values)
    slots = [ctx.inputs[i] for i in expr.inputs]
    v, (o,) = ctx.values, ctx.outputs
    alloc = ctx.output_buffer(0)
    ascontig = np.ascontiguousarray
    fallback = other_shapes(ctx)     # inputs not of the declared shapes: numpy's way
    if chain:
        args = _chain_arguments(ctx, operands)
        fixed = [ctx.const(i) for i in expr.inputs]

        def run_fused() -> None:
            xs = [v[s] if c is None else c for s, c in zip(slots, fixed)]
            if any(x.shape != d for x, d in zip(xs, shapes)):
                return fallback()
            r = alloc(out_shape)
            fn(r.reshape(size), *[ascontig(x, _F32).reshape(-1) for x in xs], *args(out_shape), *index_values)
            v[o] = r
        return run_fused

    # One closure per form, without lists (~1.5 µs a call less than a general one): one input
    # (HARD_SWISH), two (a residual ADD), or an input with a constant second operand (a bias, a scale,
    # PRELU's alpha) flattened once here.
    s0, d0 = slots[0], shapes[0]
    second = ctx.const(expr.inputs[1]) if len(slots) == 2 else None
    if len(slots) == 2 and second is None:
        s1, d1 = slots[1], shapes[1]

        def run_two() -> None:
            x, y = v[s0], v[s1]
            if x.shape != d0 or y.shape != d1:
                return fallback()
            r = alloc(out_shape)
            fn(r.reshape(size), ascontig(x, _F32).reshape(-1), ascontig(y, _F32).reshape(-1), *index_values)
            v[o] = r
        return run_two
    rest = [ascontig(second, _F32).reshape(-1)] if second is not None else []
    rest += index_values

    def run_one_varying() -> None:
        x = v[s0]
        if x.shape != d0:
            return fallback()
        r = alloc(out_shape)
        fn(r.reshape(size), ascontig(x, _F32).reshape(-1), *rest)
        v[o] = r
    return run_one_varying



# ------------------------------------------------------------------------ 8-bit ADD, SUB, MUL
#
# The cpu kernels are tables of every pair of 8-bit values (PairLookup); here the same gather runs as
# one compiled loop over inputs of one shape, without numpy's index arrays.

@kernel
def _gather_pairs(x, y, table, cut, code, out):
    """out[i] = table[code + x[i] * 256 + y[i]] for i < cut, table[x[i] * 256 + y[i]] from there (the
    vector body's whole blocks, then the reference tail), over flat uint8 views."""
    for i in range(cut):
        out[i] = table[code + ((np.int64(x[i]) << 8) | y[i])]
    for i in range(cut, x.size):
        out[i] = table[(np.int64(x[i]) << 8) | y[i]]


def _pairs_accepts(op, sg) -> bool:
    """Two inputs of one static shape (leading 1s aside), per-tensor 8-bit parameters."""
    if len(op.inputs) != 2 or len(op.outputs) != 1 or min(op.inputs) < 0:
        return False
    ts = [sg.tensors[i] for i in (*op.inputs, op.outputs[0])]
    if any(t.is_dynamic or (q := qparams(t)) is None or q.per_channel for t in ts):
        return False
    return not _broadcasts(tuple(ts[0].shape), tuple(ts[1].shape))


def _blocks(lookup: PairLookup, d0: tuple, d1: tuple) -> tuple[int, int] | None:
    """(cut, code) for _gather_pairs: inputs of shapes d0, d1 (one shape, leading 1s aside) take the
    table of `code` below element `cut` and the reference formula's from there; None if the codes by
    position are not of that form."""
    size = int(np.prod(d0, dtype=np.int64))
    offsets = np.broadcast_to(np.asarray(lookup.code_offset(d0, d1)).reshape(-1), (size,))
    cut = int(np.count_nonzero(offsets))
    code = int(offsets[0]) if cut else 0
    return None if (offsets[:cut] != code).any() else (cut, code)


def _table_and_blocks(ctx: KernelContext) -> tuple[Run, tuple[int, int] | None]:
    """The cpu kernel of ctx's 8-bit ADD / SUB / MUL and, when it is a PairLookup whose codes by position
    are whole blocks then a tail, their (cut, code) (_blocks); else None."""
    lookup = CPU.kernel(ctx.op.opcode, True)(ctx)
    d0, d1 = (tuple(ctx.input_tensor(i).shape) for i in (0, 1))
    return lookup, (_blocks(lookup, d0, d1) if isinstance(lookup, PairLookup) else None)


def _op_context(ctx: KernelContext, op) -> KernelContext:
    """ctx as the kernel of `op` (a fused chain's op) alone would see it."""
    c = copy.copy(ctx)
    c.op, c.options, c.inputs, c.outputs, c.epilogue = op, op.options, op.inputs, op.outputs, ()
    c.prologue = None
    return c


@JIT.register_quantized("ADD", "SUB", "MUL", dtypes=("int8", "uint8"), accepts=_pairs_accepts)
def pairs_quantized(ctx: KernelContext) -> Run:
    """8-bit ADD / SUB / MUL of one shape: the cpu kernel's table, gathered in one compiled loop."""
    lookup, blocks = _table_and_blocks(ctx)
    if blocks is None:                     # not whole blocks and then a tail: the cpu kernel's way
        return lookup
    cut, code = blocks
    d0, d1 = (tuple(ctx.input_tensor(i).shape) for i in (0, 1))
    compile_now(_gather_pairs, *(np.empty(1, np.uint8),) * 2, lookup.table, cut, code, lookup.table[:1])
    (a, b), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values
    out_shape = tuple(ctx.output_tensor(0).shape)
    alloc = ctx.output_buffer(0)
    table = lookup.table

    def run() -> None:
        x, y = v[a], v[b]
        if x.shape != d0 or y.shape != d1:
            return lookup()
        r = alloc(out_shape)
        _gather_pairs(_bits(x), _bits(y), table, cut, code, r.reshape(-1))
        v[o] = r
    return run


def _bits(x: np.ndarray) -> np.ndarray:
    """An 8-bit array as flat uint8 (its bit patterns, _gather_pairs' index)."""
    return np.ascontiguousarray(x).reshape(-1).view(np.uint8)


def pairs_epilogue_fits(producer, chain, sg) -> bool:
    """`chain` can follow `producer` (an 8-bit output of static shape) as table gathers (pairs_pass):
    each op a jit 8-bit ADD / SUB / MUL of the output's shape and type that reads the carried value at
    exactly one input."""
    out_t = sg.tensors[producer.outputs[0]]
    if out_t.type_name not in ("INT8", "UINT8") or out_t.is_dynamic:
        return False
    carried = producer.outputs[0]
    internal = {carried, *(c.outputs[0] for c in chain)}    # the values the chain computes
    for op in chain:
        if op.opcode not in ("ADD", "SUB", "MUL") or not _pairs_accepts(op, sg) or list(op.inputs).count(carried) != 1:
            return False
        if any(t in internal for t in op.inputs if t != carried):
            return False     # one of them read again: the gathers carry one value
        y = sg.tensors[op.outputs[0]]
        if y.type_name != out_t.type_name or tuple(y.shape) != tuple(out_t.shape):
            return False
        carried = op.outputs[0]
    return True


def pairs_pass(ctx: KernelContext) -> Callable[[np.ndarray], np.ndarray] | None:
    """finish(y): ctx.epilogue's 8-bit ops (pairs_epilogue_fits) applied in place to y (the producer's
    output, a fresh C-contiguous array of the output's shape), each one gather from its cpu kernel's
    table; returns y. None when nothing is fused."""
    shape = tuple(ctx.output_tensor(0).shape)
    steps = []
    carried = ctx.op.outputs[0]
    for op in ctx.epilogue:
        lookup, blocks = _table_and_blocks(_op_context(ctx, op))
        if blocks is None:
            raise ctx.fail(f"the fused {op.opcode} (operator {op.index}) has no table of pairs")
        first = op.inputs[0] == carried
        steps.append((lookup.table, *blocks, first, op.inputs[1] if first else op.inputs[0]))
        carried = op.outputs[0]
    if not steps:
        return None
    v, tensors = ctx.values, ctx.subgraph.tensors

    def finish(y: np.ndarray) -> np.ndarray:
        flat = y.reshape(-1).view(np.uint8)
        for table, cut, code, first, t in steps:
            other = v[t]
            if other.shape != shape:
                raise ValueError(f"tensor {tensors[t].name!r} has shape {list(other.shape)}; the fused "
                                 f"{ctx.epilogue[0].kernel_name} needs {list(shape)}, the output's")
            r = _bits(other)
            _gather_pairs(flat, r, table, cut, code, flat) if first else _gather_pairs(r, flat, table, cut, code, flat)
        return y
    return finish


# ------------------------------------------------------------------------------ fused epilogues
#
# A kernel that computes a float32 output in one pass of its own (a convolution's or matmul's bias
# pass) can apply the elementwise ops that follow it there (registry: KernelAttrs.epilogue; compiler:
# fuse_epilogues): y[k] = chain(act(y[k] + bias[c])), every op's expression as its per-op kernel
# computes it, each step rounded to float32, so the result is bit for bit the unfused ops'. The
# residual ADD and the PRELU after a MobileNet-style block's pointwise convolution then cost no pass
# of their own.

def epilogue_fits(producer, chain, sg) -> bool:
    """`chain` can run in an epilogue over the output of `producer` (float32, static; the `epilogue`
    rule of the kernels that end with epilogue_pass): each op has an expression, reads the carried
    value at exactly one of its inputs, writes a float32 output of the same shape, and reads nothing
    else but values the chain computed before (the producer's output in x * sigmoid(x)) and float32
    tensors of that shape, of one element, or of one value per channel (the last axis)."""
    producer_out = producer.outputs[0]
    out_t = sg.tensors[producer_out]
    shape = tuple(out_t.shape)
    if out_t.dtype != _F32 or out_t.is_dynamic or not shape or len(shape) > _MAX_RANK:
        return False
    channels = shape[-1]
    carried = producer_out
    for op in chain:
        expr = expression_of(op, sg)
        if expr is None or expr.flat or len(op.outputs) != 1 or _quantized(op, sg):
            return False
        y = sg.tensors[op.outputs[0]]
        if y.dtype != _F32 or tuple(y.shape) != shape:
            return False
        reads = [op.inputs[i] if i < len(op.inputs) else -1 for i in expr.inputs]
        if reads.count(carried) != 1 or any(t < 0 for t in reads):
            return False
        for t in reads:   # (a value the chain computed before has the output's shape: "same")
            if t != carried and _operand_mode(sg.tensors[t], shape, channels) is None:
                return False
        carried = op.outputs[0]
    return True


def _operand_mode(t, shape: tuple, channels: int) -> str | None:
    """How an epilogue reads another operand: "same" (the output's shape), "one" (one element),
    "channel" (one value per channel), or None (not taken)."""
    if t.dtype != _F32 or t.is_dynamic:
        return None
    n = int(np.prod(t.shape, dtype=np.int64))
    if tuple(t.shape) == shape:
        return "same"
    if n == 1 and len(t.shape) <= len(shape):
        return "one"
    if n == channels and len(t.shape) <= len(shape) and t.shape and t.shape[-1] == channels:
        return "channel"
    return None


def _channels_source(channels: int) -> str:
    """The channel count as the generated loops take it: the literal for one channel (a flat loop,
    codegen.channel_loop), else the kernel's `channels` argument (one compiled kernel for every count)."""
    return "1" if channels == 1 else "channels"


def _chain_code(ctx: KernelContext) -> tuple[list[str], list[tuple[int, str, np.ndarray | None]]]:
    """Source lines applying ctx.epilogue's ops, in turn, to the carried value `v` at flat index `k`,
    channel `ch` (unindented; each op's expression as its per-op kernel computes it), and the operands
    they read besides v: (tensor, mode (_operand_mode), its constant value or None), named e0, e1, ..."""
    chain, sg = ctx.epilogue, ctx.subgraph
    shape = tuple(ctx.output_tensor(0).shape)
    lines: list[str] = []
    operands: list[tuple[int, str, np.ndarray | None]] = []
    carried = ctx.op.outputs[0]
    # values the chain computes that a later op reads again (x in x * sigmoid(x)): kept in locals
    computed, reread = {carried}, set()
    for op in chain:
        reread.update(t for t in op.inputs if t in computed and t != carried)
        carried = op.outputs[0]
        computed.add(carried)
    kept = {t: f"kept{j}" for j, t in enumerate(sorted(reread))}
    carried = ctx.op.outputs[0]
    if carried in kept:
        lines.append(f"{kept[carried]} = v")
    for op in chain:
        expr = expression_of(op, sg)
        refs = []
        for i in expr.inputs:
            t = op.inputs[i]
            if t == carried:
                refs.append("v")
                continue
            if t in kept:
                refs.append(kept[t])
                continue
            mode = _operand_mode(sg.tensors[t], shape, shape[-1])
            name = f"e{len(operands)}"
            refs.append({"same": f"{name}[k]", "one": f"{name}[0]", "channel": f"{name}[ch]"}[mode])
            value = sg.tensors[t].data if sg.tensors[t].data is not None else ctx.folded.get(t)
            operands.append((t, mode, None if value is None else np.array(value, _F32).reshape(-1)))
        lines.append("v = " + expr.template.format(*refs))
        carried = op.outputs[0]
        if carried in kept:
            lines.append(f"{kept[carried]} = v")
    return lines, operands


def _chain_arguments(ctx: KernelContext, operands: list[tuple[int, str, np.ndarray | None]]
                     ) -> Callable[[tuple], Sequence[np.ndarray]]:
    """args(shape): the flat arrays of _chain_code's operands for a run whose output has `shape` (the
    constants as prepared, the others read now; an operand of the output's shape that is not raises)."""
    consts = [value for _, _, value in operands]
    varying = [(j, t, mode) for j, (t, mode, value) in enumerate(operands) if value is None]
    v, tensors, first = ctx.values, ctx.subgraph.tensors, ctx.epilogue[:1]

    if not varying:                 # (per-op overhead counts: a model runs 50-100 of these)
        fixed = tuple(consts)
        return lambda shape: fixed

    def args(shape: tuple) -> list[np.ndarray]:
        out = list(consts)
        for j, t, mode in varying:
            a = v[t]
            if mode == "same" and a.shape != shape:
                raise ValueError(f"tensor {tensors[t].name!r} has shape {list(a.shape)}; the fused "
                                 f"{first[0].kernel_name} needs {list(shape)}, the output's")
            # ravel: a view of a C-contiguous array (the usual case), else a copy
            out[j] = a.ravel() if a.dtype == _F32 else np.ascontiguousarray(a, _F32).ravel()
        return out
    return args


@dataclass(frozen=True)
class Chain:
    """ctx.epilogue's ops as another kernel applies them in its own loops (jit/_gemm.py: per block of
    the product's output, while it is in cache): `lines` update the value `v` at flat index `k`,
    channel `ch` (unindented), reading arrays named e0, e1, ... as `modes` says (_operand_mode: "same"
    at k, "channel" at ch, "one" at 0); args(shape) gives those arrays for a run whose output has
    `shape`."""
    lines: tuple[str, ...]
    modes: tuple[str, ...]
    args: Callable[[tuple], Sequence[np.ndarray]]


def fused_chain(ctx: KernelContext) -> Chain | None:
    """ctx.epilogue as a Chain, None when no op was fused after this one."""
    if not ctx.epilogue:
        return None
    lines, operands = _chain_code(ctx)
    return Chain(tuple(lines), tuple(mode for _, mode, _ in operands), _chain_arguments(ctx, operands))


def epilogue_pass(ctx: KernelContext, bias: np.ndarray | None, bounds: tuple[float, float] | None = None
                  ) -> Callable[[np.ndarray], np.ndarray] | None:
    """finish(y): bias (one per channel), the producer's fused activation as its cpu kernel clamps
    (`bounds` (lo, hi), NaN kept; None: no activation) and ctx.epilogue's ops, applied in place to y (a
    fresh C-contiguous float32 array of the output's shape) in one compiled pass; returns y. None when
    there is nothing to do."""
    if bias is None and bounds is None and not ctx.epilogue:
        return None
    head = ["v = out[k]" + (" + b[ch]" if bias is not None else "")]
    if bounds is not None:
        lo, hi = (None if not np.isfinite(x) else x for x in bounds)
        head.append("v = " + clamp("v", lo, hi, _F32))
    chain, operands = _chain_code(ctx)
    names = "".join(f"e{j}, " for j in range(len(operands)))
    channels = int(ctx.output_tensor(0).shape[-1])
    source = (f"@kernel\ndef epilogue(out, b, {names}channels):\n"
              + "\n".join(channel_loop("    ", "out.size", _channels_source(channels),
                                        [*head, *chain, "out[k] = v"])) + "\n")
    fn = compile_source(source, "epilogue")
    b = np.zeros(1, _F32) if bias is None else np.array(bias, _F32).reshape(-1)
    compile_now(fn, b, b, *[b for _ in operands], channels)
    args = _chain_arguments(ctx, operands)

    def finish(y: np.ndarray) -> np.ndarray:
        fn(y.reshape(-1), b, *args(y.shape), y.shape[-1])
        return y
    return finish


# --------------------------------------------------------------------- SIN, COS, EXP, LOGISTIC
#
# numba's math.sin / math.exp are one libm call per element, slower than numpy's SIMD loops; _vmath's
# functions are straight-line float32 code that LLVM vectorises (32768 floats: sin 12 µs against
# numpy's 17, exp 12 against 16, logistic 15 against cpu's 26). The kernel evaluates one over the
# whole input with the epilogue's ops (a scale, a gate's MUL, a residual ADD) in the same pass; sin
# and cos then redo the elements past NEAR_LIMIT, if any, with libm's values.

# op -> (the vectorised function, the one for elements past NEAR_LIMIT or None: every value taken)
_VECTOR_MATH = {"SIN": ("sin_near", "sin32"), "COS": ("cos_near", "cos32"), "EXP": ("exp32", None),
                "LOGISTIC": ("logistic32", None)}


def _vector_math_accepts(op, sg) -> bool:
    """float32 of one static shape in and out, of PER_OP_MIN_SIZE elements or more."""
    if len(op.inputs) != 1 or len(op.outputs) != 1 or op.inputs[0] < 0 or _quantized(op, sg):
        return False
    x, y = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
    return (x.dtype == _F32 and y.dtype == _F32 and not x.is_dynamic and tuple(x.shape) == tuple(y.shape)
            and 0 < len(y.shape) <= _MAX_RANK and int(np.prod(y.shape, dtype=np.int64)) >= PER_OP_MIN_SIZE)


def vector_math(ctx: KernelContext) -> Run:
    """SIN / COS / EXP / LOGISTIC of a static float32 tensor, and the ops fused after it, in one
    vectorised pass."""
    near, far = _VECTOR_MATH[ctx.op.opcode]
    chain, operands = _chain_code(ctx)
    names = "".join(f"e{j}, " for j in range(len(operands)))
    shape = tuple(ctx.output_tensor(0).shape)
    channels = shape[-1]
    lines = ["a = x[k]", *(["far |= abs(a) > NEAR_LIMIT"] if far else []), f"v = {near}(a)", *chain, "out[k] = v"]
    source = (f"@kernel\ndef {near}_pass(x, out, {names}channels):\n" + ("    far = False\n" if far else "")
              + "\n".join(channel_loop("    ", "out.size", _channels_source(channels), lines)) + "\n")
    if far:
        redo = ["a = x[k]", "if abs(a) > NEAR_LIMIT:", *("    " + line for line in (f"v = {far}(a)", *chain, "out[k] = v"))]
        source += "    if far:\n" + "\n".join(channel_loop("        ", "out.size", _channels_source(channels), redo)) + "\n"
    fn = compile_source(source, f"{near}_pass")
    example = np.zeros(1, _F32)
    compile_now(fn, example, example, *[example for _ in operands], channels)
    args = _chain_arguments(ctx, operands)
    fallback = other_shapes(ctx)
    (i,), (o,), v = ctx.inputs, ctx.outputs, ctx.values
    alloc = ctx.output_buffer(0)

    def run() -> None:
        x = v[i]
        if x.shape != shape:     # not the declared shape: numpy's way, then the chain as a pass
            return fallback()
        r = alloc(shape)
        fn(np.ascontiguousarray(x, _F32).reshape(-1), r.reshape(-1), *args(shape), channels)
        v[o] = r
    return run


# EXP and LOGISTIC also join the chain of an op before them (their expressions vectorise there too);
# SIN and COS do not: in a chain their expression's libm branch would keep the pass scalar
JIT.register("SIN", "COS", dtypes=("float32",), accepts=_vector_math_accepts, epilogue=epilogue_fits)(vector_math)
JIT.register("EXP", "LOGISTIC", dtypes=("float32",), accepts=_vector_math_accepts, epilogue=epilogue_fits,
             fusable=True)(vector_math)
# the per-op kernels (above) join a chain, or start one: a run of elementwise ops is one pass
for _name in ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "PRELU", "LEAKY_RELU", "ELU", "HARD_SWISH",
              "RELU", "RELU6", "RELU_N1_TO_1", "NEG", "ABS", "SQUARE", "SQRT", "RSQRT", "TANH"):
    JIT.register(_name, dtypes=("float32",), accepts=_per_op_accepts, fusable=True, epilogue=epilogue_fits)(_per_op)
# GELU: erfc32 and tanh32 vectorise ([1, 64, 512] erfc form 180 -> 51 µs; libm's tanhf, one call per
# element, had kept the tanh form on cpu: 55 -> 493 µs)
JIT.register("GELU", dtypes=("float32",), fusable=True, epilogue=epilogue_fits, accepts=_per_op_accepts)(_per_op)


def other_shapes(ctx: KernelContext) -> Run:
    """The run for inputs of other shapes than declared (a kernel compiled for the declared ones meets
    them after a resize): the cpu kernel, then ctx.epilogue as a pass of its own (unfused). Prepared at
    its first call: most sessions never take it, and its epilogue pass would cost each fused producer
    another compiled function at session creation."""
    made: list[Run] = []

    def run() -> None:
        if not made:
            made.append(unfused(ctx, CPU.kernel(ctx.op.kernel_name)))
        return made[0]()
    return run


def unfused(ctx: KernelContext, prepare: Callable[[KernelContext], Run]) -> Run:
    """`prepare`, a kernel of ctx.op alone, then ctx.epilogue as a pass of its own: for a producer that
    meets at prepare time a case its fused kernel does not take (a filter not folded after all)."""
    alone = _op_context(ctx, ctx.op)
    run = prepare(alone)
    if not ctx.epilogue:
        return run
    dtype = ctx.output_dtype()
    finish = epilogue_pass(ctx, None) if dtype == _F32 else pairs_pass(ctx)
    v, own, (o,) = ctx.values, ctx.op.outputs[0], ctx.outputs

    def run_then_epilogue() -> None:
        run()
        y = np.array(v[own], dtype, order="C")   # a copy: the producer may return a view or a shared slot
        v[own] = None
        v[o] = finish(y)
    return run_then_epilogue
