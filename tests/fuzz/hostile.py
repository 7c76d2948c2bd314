"""Structure-aware hostile models: *valid* flatbuffers whose values are hostile.

A case is a small valid model made with the project's ModelBuilder (a random one of a dozen families:
elementwise, fully connected, conv, quantized conv, gather, strings, sparse, WHILE, IF, CALL_ONCE, CALL,
nested calls) followed by zero to two hostile edits. The edits work on the Circle bindings' object API
(ModelT, unpacked from the writer's bytes and packed again with the flatbuffers Builder), which can say
what the writer refuses to: an options table of the wrong type, a buffer shorter than its shape, a
subgraph index past the end, a signature naming a missing tensor. Every edit keeps each field within
its schema type, so the file stays a well-formed flatbuffer and only the values are hostile.

Choices come from a `Draw` (random.Random for long runs, hypothesis' `data` in the CI test), so the
same generator serves both and hypothesis can shrink a failing case.
"""
from __future__ import annotations

import random
import struct
from typing import Any, Callable, Sequence, TypeVar

import flatbuffers
import numpy as np
from circle_schema.v0_10.circle import (
    DimensionMetadata as _DimMeta, Int32Vector as _Int32Vector, Model as _Model, Operator as _Operator,
    OperatorCode as _OperatorCode, QuantizationParameters as _Quant, SparsityParameters as _Sparsity,
)

from onert_py.schema.formats import bindings
from onert_py.schema.opcodes import OPTIONS_TYPES, op_code, op_name
from onert_py.schema.writer import ModelBuilder, SubgraphBuilder, encode_strings

T = TypeVar("T")
I32, F32 = np.int32, np.float32
INT32_MAX, INT32_MIN = 2**31 - 1, -2**31


class Draw:
    """Where a generator's choices come from."""

    def choice(self, options: Sequence[T]) -> T:
        raise NotImplementedError

    def integer(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def coin(self) -> bool:
        return self.integer(0, 1) == 1


class RandomDraw(Draw):
    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def choice(self, options: Sequence[T]) -> T:
        return options[self.rng.randrange(len(options))]

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


class HypothesisDraw(Draw):
    """Draws from hypothesis' `st.data()` object (sampled_from/integers shrink towards the first)."""

    def __init__(self, data: Any):
        from hypothesis import strategies as st
        self.data, self.st = data, st

    def choice(self, options: Sequence[T]) -> T:
        return self.data.draw(self.st.sampled_from(list(options)))

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(self.st.integers(lo, hi))


# ---------------------------------------------------------------------------------------------
# Small valid models.

def _sig(mb: ModelBuilder, sg: SubgraphBuilder) -> ModelBuilder:
    mb.signature("serving_default", sg)
    return mb


def base_add(d: Draw) -> ModelBuilder:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    shape = [d.integer(1, 3), d.integer(1, 4)]
    x = sg.tensor("x", shape)
    c = sg.const("c", np.arange(np.prod(shape), dtype=F32).reshape(shape))
    y, z = sg.tensor("y", shape), sg.tensor("z", shape)
    sg.op(d.choice(["ADD", "MUL", "SUB"]), [x, c], [y], fused_activation_function=0)
    sg.op(d.choice(["RELU", "TANH", "LOGISTIC", "ABS"]), [y], [z])
    sg.inputs, sg.outputs = [x], [z]
    return _sig(mb, sg)


def base_fc(d: Draw) -> ModelBuilder:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    k, n = d.integer(1, 4), d.integer(1, 4)
    x = sg.tensor("x", [1, k])
    w = sg.const("w", np.ones((n, k), F32))
    b = sg.const("b", np.zeros(n, F32))
    y = sg.tensor("y", [1, n])
    sg.op("FULLY_CONNECTED", [x, w, b], [y], fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [y]
    return _sig(mb, sg)


def base_conv(d: Draw) -> ModelBuilder:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    c, o, kh = d.integer(1, 3), d.integer(1, 3), d.integer(1, 2)
    x = sg.tensor("x", [1, 4, 4, c])
    f = sg.const("filter", np.ones((o, kh, kh, c), F32))
    b = sg.const("bias", np.zeros(o, F32))
    y = sg.tensor("y", [1, 4, 4, o])
    sg.op("CONV_2D", [x, f, b], [y], padding=0, stride_w=1, stride_h=1, fused_activation_function=0,
          dilation_w_factor=1, dilation_h_factor=1)
    p = sg.tensor("pooled", [1, 2, 2, o])
    sg.op("MAX_POOL_2D", [y], [p], padding=1, stride_w=2, stride_h=2, filter_width=2, filter_height=2,
          fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [p]
    return _sig(mb, sg)


def base_quant_conv(d: Draw) -> ModelBuilder:
    """int8 conv with per-channel filter scales (quantized dimension 0)."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    o = d.integer(1, 3)
    x = sg.tensor("x", [1, 3, 3, 2], np.int8, quantization=(0.5, 0))
    scales = [0.1 * (k + 1) for k in range(o)]
    f = sg.const("filter", np.ones((o, 1, 1, 2), np.int8), quantization=(scales, [0] * o, 0))
    b = sg.const("bias", np.zeros(o, I32), quantization=([0.5 * s for s in scales], [0] * o, 0))
    y = sg.tensor("y", [1, 3, 3, o], np.int8, quantization=(1.0, 0))
    sg.op("CONV_2D", [x, f, b], [y], padding=0, stride_w=1, stride_h=1, fused_activation_function=0,
          dilation_w_factor=1, dilation_h_factor=1)
    z = sg.tensor("z", [1, 3, 3, o])
    sg.op("DEQUANTIZE", [y], [z])
    sg.inputs, sg.outputs = [x], [z]
    return _sig(mb, sg)


def base_shape_ops(d: Draw) -> ModelBuilder:
    """Ops whose output shape comes from a constant's values (RESHAPE, PAD, TILE, TRANSPOSE, SLICE)."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [2, 3])
    kind = d.choice(["RESHAPE", "PAD", "TILE", "TRANSPOSE", "SLICE", "BROADCAST_TO", "STRIDED_SLICE"])
    if kind == "RESHAPE":
        ins, out = [sg.const("shape", np.array([3, 2], I32))], [3, 2]
    elif kind == "PAD":
        ins, out = [sg.const("paddings", np.array([[1, 0], [0, 2]], I32))], [3, 5]
    elif kind == "TILE":
        ins, out = [sg.const("multiples", np.array([2, 1], I32))], [4, 3]
    elif kind == "TRANSPOSE":
        ins, out = [sg.const("perm", np.array([1, 0], I32))], [3, 2]
    elif kind == "SLICE":
        ins, out = [sg.const("begin", np.array([0, 1], I32)), sg.const("size", np.array([2, 2], I32))], [2, 2]
    elif kind == "BROADCAST_TO":
        ins, out = [sg.const("shape", np.array([2, 2, 3], I32))], [2, 2, 3]
    else:
        ins = [sg.const("begin", np.array([0, 0], I32)), sg.const("end", np.array([2, 3], I32)),
               sg.const("strides", np.array([1, 2], I32))]
        out = [2, 2]
    y = sg.tensor("y", out)
    sg.op(kind, [x] + ins, [y])
    sg.inputs, sg.outputs = [x], [y]
    return _sig(mb, sg)


def base_gather(d: Draw) -> ModelBuilder:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    rows = d.integer(3, 5)
    params = sg.const("params", np.arange(rows * 2, dtype=F32).reshape(rows, 2))
    idx = sg.tensor("indices", [2], I32)
    y = sg.tensor("y", [2, 2])
    sg.op("GATHER", [params, idx], [y], axis=0, batch_dims=0)
    sg.inputs, sg.outputs = [idx], [y]
    return _sig(mb, sg)


def base_strings(d: Draw) -> ModelBuilder:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    words = np.array([b"a", b"bc", b"def", b""][:d.integer(3, 4)], dtype=object)
    params = sg.const("words", words)
    idx = sg.tensor("indices", [2], I32)
    y = sg.tensor("y", [2], object, type_name="STRING")
    sg.op("GATHER", [params, idx], [y], axis=0, batch_dims=0)
    sg.inputs, sg.outputs = [idx], [y]
    return _sig(mb, sg)


def base_sparse(d: Draw) -> ModelBuilder:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    dense = np.zeros((4, 4), F32)
    dense[0, 1], dense[2, 3], dense[3, 0] = 1, 2, 3
    s = sg.sparse_const("sparse", dense, formats=[0, 1] if d.coin() else [1, 1])
    w = sg.tensor("dense", [4, 4])
    sg.op("DENSIFY", [s], [w])
    x, y = sg.tensor("x", [4, 4]), sg.tensor("y", [4, 4])
    sg.op("ADD", [x, w], [y], fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [y]
    return _sig(mb, sg)


def _counter_cond(sg: SubgraphBuilder, limit: int | None) -> SubgraphBuilder:
    """(i, x) -> i < limit; with limit None, i == i: a cond that is always true."""
    i, x = sg.tensor("i", [], I32), sg.tensor("x", [2])
    out = sg.tensor("keep_going", [], np.bool_)
    if limit is None:
        sg.op("EQUAL", [i, i], [out])
    else:
        sg.op("LESS", [i, sg.const("limit", np.array(limit, I32))], [out])
    sg.inputs, sg.outputs = [i, x], [out]
    return sg


def _counter_body(sg: SubgraphBuilder) -> SubgraphBuilder:
    """(i, x) -> (i + 1, 2 x)."""
    i, x = sg.tensor("i", [], I32), sg.tensor("x", [2])
    i2, x2 = sg.tensor("i_next", [], I32), sg.tensor("x_next", [2])
    sg.op("ADD", [i, sg.const("one", np.array(1, I32))], [i2], fused_activation_function=0)
    sg.op("ADD", [x, x], [x2], fused_activation_function=0)
    sg.inputs, sg.outputs = [i, x], [i2, x2]
    return sg


def base_while(d: Draw, forever: bool = False) -> ModelBuilder:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    i, x = sg.tensor("i", [], I32), sg.tensor("x", [2])
    i_out, x_out = sg.tensor("i_out", [], I32), sg.tensor("x_out", [2])
    sg.op("WHILE", [i, x], [i_out, x_out], cond_subgraph_index=1, body_subgraph_index=2)
    sg.inputs, sg.outputs = [i, x], [i_out, x_out]
    _counter_cond(mb.subgraph("cond"), None if forever else d.integer(0, 5))
    _counter_body(mb.subgraph("body"))
    return _sig(mb, sg)


def base_while_forever(d: Draw) -> ModelBuilder:
    """A WHILE whose cond is always true: only max_while_iterations stops it."""
    return base_while(d, forever=True)


def _unary_subgraph(sg: SubgraphBuilder, opcode: str, shape: Sequence[int] = (2,)) -> SubgraphBuilder:
    x, y = sg.tensor("x", shape), sg.tensor("y", shape)
    if opcode in ("ADD", "MUL"):
        sg.op(opcode, [x, x], [y], fused_activation_function=0)
    else:
        sg.op(opcode, [x], [y])
    sg.inputs, sg.outputs = [x], [y]
    return sg


def base_if(d: Draw) -> ModelBuilder:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    c, x, y = sg.tensor("cond", [1], np.bool_), sg.tensor("x", [2]), sg.tensor("y", [2])
    sg.op("IF", [c, x], [y], then_subgraph_index=1, else_subgraph_index=2)
    sg.inputs, sg.outputs = [c, x], [y]
    _unary_subgraph(mb.subgraph("then"), "ADD")
    _unary_subgraph(mb.subgraph("else"), "MUL")
    return _sig(mb, sg)


def base_call_once(d: Draw) -> ModelBuilder:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    sg.op("CALL_ONCE", [], [], init_subgraph_index=1)
    x, y = sg.tensor("x", [2]), sg.tensor("y", [2])
    sg.op("ADD", [x, x], [y], fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [y]
    mb.subgraph("init")
    return _sig(mb, sg)


def base_call_chain(d: Draw) -> ModelBuilder:
    """main -CALL-> 1 -CALL-> 2 ... -> depth: ADD. Depth up to a few thousand (deep nesting)."""
    depth = d.choice([1, 2, 3, 40, 70, 3000])
    mb = ModelBuilder()
    sgs = [mb.subgraph("main" if k == 0 else f"level{k}") for k in range(depth + 1)]
    for k, sg in enumerate(sgs):
        x, y = sg.tensor("x", [2]), sg.tensor("y", [2])
        if k < depth:
            sg.op("CALL", [x], [y], subgraph=k + 1)
        else:
            sg.op("ADD", [x, x], [y], fused_activation_function=0)
        sg.inputs, sg.outputs = [x], [y]
    return _sig(mb, sgs[0])


def _out_size(n: int, k: int, stride: int, dilation: int, padding: int) -> int:
    """TFLite's output length of a window (padding 0 SAME, 1 VALID)."""
    if padding == 0:
        return (n + stride - 1) // stride
    return max((n - (k - 1) * dilation - 1) // stride + 1, 0)


def _window_options(d: Draw) -> dict:
    return {"padding": d.choice([0, 1]), "stride_h": d.integer(1, 2), "stride_w": d.integer(1, 2),
            "dilation_h_factor": d.integer(1, 2), "dilation_w_factor": d.integer(1, 2)}


def base_depthwise(d: Draw) -> ModelBuilder:
    """Float DEPTHWISE_CONV_2D (multiplier 1-2, strides, dilations) then an AVERAGE_POOL_2D: the jit
    backend's direct kernels (the geometry its kernels index without bounds checks)."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    c, m, k = d.integer(1, 3), d.integer(1, 2), d.integer(1, 3)
    opts = _window_options(d)
    h = 7
    oh = _out_size(h, k, opts["stride_h"], opts["dilation_h_factor"], opts["padding"])
    ow = _out_size(h, k, opts["stride_w"], opts["dilation_w_factor"], opts["padding"])
    x = sg.tensor("x", [1, h, h, c])
    f = sg.const("filter", np.linspace(-1, 1, k * k * c * m, dtype=F32).reshape(1, k, k, c * m))
    b = sg.const("bias", np.linspace(0, 1, c * m, dtype=F32))
    y = sg.tensor("y", [1, oh, ow, c * m])
    sg.op("DEPTHWISE_CONV_2D", [x, f, b], [y], depth_multiplier=m, fused_activation_function=d.choice([0, 1, 3]),
          **opts)
    p = sg.tensor("pooled", [1, _out_size(oh, 2, 1, 1, 0), _out_size(ow, 2, 1, 1, 0), c * m])
    sg.op("AVERAGE_POOL_2D", [y], [p], padding=0, stride_w=1, stride_h=1, filter_width=2, filter_height=2,
          fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [p]
    return _sig(mb, sg)


def base_quant_depthwise(d: Draw) -> ModelBuilder:
    """int8 DEPTHWISE_CONV_2D with per-channel filter scales (quantized dimension 3)."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    c, m, k = d.integer(1, 3), d.integer(1, 2), d.integer(1, 3)
    opts = _window_options(d)
    h = 6
    oh = _out_size(h, k, opts["stride_h"], opts["dilation_h_factor"], opts["padding"])
    ow = _out_size(h, k, opts["stride_w"], opts["dilation_w_factor"], opts["padding"])
    cout = c * m
    scales = [0.02 * (j + 1) for j in range(cout)]
    x = sg.tensor("x", [1, h, h, c], np.int8, quantization=(0.5, d.choice([0, -3, 5])))
    f = sg.const("filter", (np.arange(k * k * cout) % 11 - 5).astype(np.int8).reshape(1, k, k, cout),
                 quantization=(scales, [0] * cout, 3))
    b = sg.const("bias", np.arange(cout, dtype=I32) * 7, quantization=([0.5 * s for s in scales], [0] * cout, 0))
    y = sg.tensor("y", [1, oh, ow, cout], np.int8, quantization=(0.25, d.choice([0, 2, -7])))
    sg.op("DEPTHWISE_CONV_2D", [x, f, b], [y], depth_multiplier=m, fused_activation_function=d.choice([0, 1]),
          **opts)
    z = sg.tensor("z", [1, oh, ow, cout])
    sg.op("DEQUANTIZE", [y], [z])
    sg.inputs, sg.outputs = [x], [z]
    return _sig(mb, sg)


def base_quant_conv_wide(d: Draw) -> ModelBuilder:
    """int8 CONV_2D with 2048+ outputs (where the jit backend takes it: its output stage)."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    c, k = d.integer(1, 3), d.integer(1, 3)
    opts = _window_options(d)
    opts.update(stride_h=1, stride_w=1)
    h = 16
    oh = _out_size(h, k, 1, opts["dilation_h_factor"], opts["padding"])
    ow = _out_size(h, k, 1, opts["dilation_w_factor"], opts["padding"])
    o = 8 if oh * ow * 8 >= 2048 else 16
    scales = [0.05 * (j + 1) for j in range(o)]
    x = sg.tensor("x", [1, h, h, c], np.int8, quantization=(0.5, d.choice([0, 3, -128])))
    f = sg.const("filter", (np.arange(o * k * k * c) % 9 - 4).astype(np.int8).reshape(o, k, k, c),
                 quantization=(scales, [0] * o, 0))
    b = sg.const("bias", np.arange(o, dtype=I32) - 3, quantization=([0.5 * s for s in scales], [0] * o, 0))
    y = sg.tensor("y", [1, oh, ow, o], np.int8, quantization=(1.0, d.choice([0, -5])))
    sg.op("CONV_2D", [x, f, b], [y], fused_activation_function=d.choice([0, 1, 3]), **opts)
    z = sg.tensor("z", [1, oh, ow, o])
    sg.op("DEQUANTIZE", [y], [z])
    sg.inputs, sg.outputs = [x], [z]
    return _sig(mb, sg)


def base_quant_fc(d: Draw) -> ModelBuilder:
    """int8 FULLY_CONNECTED (per-tensor or per-channel weights) with an int32 bias."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    batch, depth, units = d.integer(1, 3), d.integer(1, 8), d.integer(1, 6)
    per_channel = d.coin()
    w_scale = [0.1 * (j + 1) for j in range(units)] if per_channel else 0.1
    x = sg.tensor("x", [batch, depth], np.int8, quantization=(0.5, d.choice([0, 4, -9])))
    w = sg.const("w", (np.arange(units * depth) % 13 - 6).astype(np.int8).reshape(units, depth),
                 quantization=(w_scale, [0] * units, 0) if per_channel else (w_scale, 0))
    b = sg.const("b", np.arange(units, dtype=I32) * 3,
                 quantization=([0.5 * s for s in w_scale], [0] * units, 0) if per_channel else (0.05, 0))
    y = sg.tensor("y", [batch, units], np.int8, quantization=(0.5, d.choice([0, 1])))
    sg.op("FULLY_CONNECTED", [x, w, b], [y], fused_activation_function=d.choice([0, 1, 3]))
    z = sg.tensor("z", [batch, units])
    sg.op("DEQUANTIZE", [y], [z])
    sg.inputs, sg.outputs = [x], [z]
    return _sig(mb, sg)


def base_quant_pool(d: Draw) -> ModelBuilder:
    """int8 MAX_POOL_2D / AVERAGE_POOL_2D (the jit backend's integer pools)."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    c, k, s, pad = d.integer(1, 3), d.integer(1, 3), d.integer(1, 2), d.choice([0, 1])
    h = 6
    o = _out_size(h, k, s, 1, pad)
    q = (0.5, d.choice([0, -128, 10]))
    x = sg.tensor("x", [1, h, h, c], np.int8, quantization=q)
    y = sg.tensor("y", [1, o, o, c], np.int8, quantization=q)
    sg.op(d.choice(["MAX_POOL_2D", "AVERAGE_POOL_2D"]), [x], [y], padding=pad, stride_w=s, stride_h=s,
          filter_width=k, filter_height=k, fused_activation_function=d.choice([0, 1]))
    z = sg.tensor("z", [1, o, o, c])
    sg.op("DEQUANTIZE", [y], [z])
    sg.inputs, sg.outputs = [x], [z]
    return _sig(mb, sg)


def base_wide_elementwise(d: Draw) -> ModelBuilder:
    """Float elementwise ops with 4096+ outputs and broadcasting operands (the jit per-op kernels)."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    shape = [d.choice([64, 65]), 64]
    other = d.choice([[1], [64], [shape[0], 1], shape])
    x = sg.tensor("x", shape)
    c = sg.const("c", np.linspace(-2, 2, int(np.prod(other)), dtype=F32).reshape(other))
    y, z = sg.tensor("y", shape), sg.tensor("z", shape)
    kind = d.choice(["ADD", "MUL", "SUB", "DIV", "MAXIMUM", "SQUARED_DIFFERENCE"])
    fused = kind in ("ADD", "MUL", "SUB", "DIV")
    sg.op(kind, [x, c], [y], **({"fused_activation_function": d.choice([0, 1, 3])} if fused else {}))
    sg.op(d.choice(["HARD_SWISH", "RELU6", "ABS"]), [y], [z])
    sg.inputs, sg.outputs = [x], [z]
    return _sig(mb, sg)


BASES: dict[str, Callable[[Draw], ModelBuilder]] = {
    "add": base_add, "fc": base_fc, "conv": base_conv, "quant_conv": base_quant_conv,
    "shape_ops": base_shape_ops, "gather": base_gather, "strings": base_strings, "sparse": base_sparse,
    "while": base_while, "while_forever": base_while_forever, "if": base_if, "call_once": base_call_once,
    "call_chain": base_call_chain, "depthwise": base_depthwise, "quant_depthwise": base_quant_depthwise,
    "quant_conv_wide": base_quant_conv_wide, "quant_fc": base_quant_fc, "quant_pool": base_quant_pool,
    "wide_elementwise": base_wide_elementwise,
}

# The bases with ops the jit backend takes (its conv, pool, fully connected and elementwise kernels, and
# WHILE loops it compiles whole): the jit runs draw from these.
JIT_BASES = ("depthwise", "quant_depthwise", "quant_conv_wide", "quant_fc", "quant_pool", "wide_elementwise",
             "conv", "while")


# ---------------------------------------------------------------------------------------------
# Hostile edits on the object API. Each takes (model, draw), edits in place and returns a short
# description, or None when the model has nothing it applies to.

HOSTILE_DIMS = (INT32_MAX, -5, -1, 0, 65536, 1 << 20, 46341, 3)
# products that overflow: 2**64 (wraps to 0 in int64), ~2**93, 2**62 * 4 - ..., over int32
HOSTILE_SHAPES = ([65536] * 4, [INT32_MAX] * 3, [INT32_MAX, INT32_MAX, 4], [46341, 46341], [0, INT32_MAX],
                  [1 << 20, 1 << 20], [-1, -1], [-5, 2], [], [1] * 9, [2] * 40)
HOSTILE_INTS = (INT32_MAX, INT32_MIN, -1, 0, 1 << 20, 65536, 7, -7, 1 << 30)
HOSTILE_INDICES = (-1, -2, 1 << 20, INT32_MAX, INT32_MIN)


def _list(v: Any) -> list:
    """A vector field as a list (the object API unpacks vectors as numpy arrays, or None)."""
    return [] if v is None else [int(x) if isinstance(x, np.integer) else x for x in v]


def _tensors(m: Any) -> list[tuple[int, int, Any]]:
    return [(si, ti, t) for si, sg in enumerate(m.subgraphs) for ti, t in enumerate(sg.tensors or [])]


def _has_data(m: Any, t: Any) -> bool:
    return 0 < t.buffer < len(m.buffers) and m.buffers[t.buffer].data is not None


def _ops(m: Any) -> list[tuple[int, int, Any]]:
    return [(si, oi, op) for si, sg in enumerate(m.subgraphs) for oi, op in enumerate(sg.operators or [])]


def _op_name(m: Any, op: Any) -> str:
    if not 0 <= op.opcodeIndex < len(m.operatorCodes):
        return "?"
    code = m.operatorCodes[op.opcodeIndex]
    return op_name(max(code.builtinCode, code.deprecatedBuiltinCode))


def _opcode_index(m: Any, name: str) -> int:
    code = op_code(name)
    for k, oc in enumerate(m.operatorCodes):
        if oc.builtinCode == code:
            return k
    oc = _OperatorCode.OperatorCodeT()
    oc.builtinCode, oc.deprecatedBuiltinCode, oc.version = code, min(code, 127), 1
    m.operatorCodes.append(oc)
    return len(m.operatorCodes) - 1


def edit_dims(m: Any, d: Draw) -> str:
    si, ti, t = d.choice(_tensors(m))
    if d.coin():
        t.shape = list(d.choice(HOSTILE_SHAPES))
    else:
        shape = _list(t.shape) or [1]
        shape[d.integer(0, len(shape) - 1)] = d.choice(HOSTILE_DIMS)
        t.shape = shape
    return f"tensor {si}:{ti} shape {t.shape}"


def edit_shape_signature(m: Any, d: Draw) -> str:
    si, ti, t = d.choice(_tensors(m))
    t.shapeSignature = list(d.choice(HOSTILE_SHAPES + ([-1] * len(_list(t.shape)), [-1])))
    return f"tensor {si}:{ti} shape_signature {t.shapeSignature}"


def edit_zero_size(m: Any, d: Draw) -> str:
    si, ti, t = d.choice(_tensors(m))
    shape = _list(t.shape) or [1]
    shape[d.integer(0, len(shape) - 1)] = 0
    t.shape = shape
    if _has_data(m, t) and d.coin():
        m.buffers[t.buffer].data = np.zeros(0, np.uint8)
    return f"tensor {si}:{ti} zero-size shape {shape}"


def edit_buffer_size(m: Any, d: Draw) -> str | None:
    consts = [(si, ti, t) for si, ti, t in _tensors(m) if _has_data(m, t)]
    if not consts:
        return None
    si, ti, t = d.choice(consts)
    buf = m.buffers[t.buffer]
    raw = np.asarray(buf.data, np.uint8)
    how = d.choice(["shorter", "longer", "one byte", "odd"])
    if how == "shorter":
        buf.data = raw[:d.integer(0, max(raw.size - 1, 0))]
    elif how == "longer":
        buf.data = np.concatenate([raw, np.full(d.integer(1, 64), 0x7F, np.uint8)])
    elif how == "one byte":
        buf.data = raw[:1]
    else:
        buf.data = np.concatenate([raw, np.zeros(3, np.uint8)])
    return f"tensor {si}:{ti} buffer {how} ({raw.size} -> {len(buf.data)} bytes)"


def edit_buffer_index(m: Any, d: Draw) -> str:
    si, ti, t = d.choice(_tensors(m))
    t.buffer = d.choice([len(m.buffers), len(m.buffers) + 100, 2**32 - 1, d.integer(0, len(m.buffers) - 1)])
    return f"tensor {si}:{ti} buffer index {t.buffer}"


def _subgraph_fields(opts: Any) -> list[str]:
    return [k for k in vars(opts) if "subgraph" in k.lower()] if opts is not None else []


def edit_subgraph_index(m: Any, d: Draw) -> str | None:
    cands = [(si, oi, op, f) for si, oi, op in _ops(m) for f in _subgraph_fields(op.builtinOptions)]
    if not cands:
        return None
    si, oi, op, field = d.choice(cands)
    n = len(m.subgraphs)
    for value in (d.choice([n, n + 7, -1, INT32_MIN, INT32_MAX, si, 0]), n + 7, n):
        setattr(op.builtinOptions, field, value)
        if _fits(op.builtinOptions):    # CALL's index is unsigned, the others int32
            break
    return f"op {si}:{oi} {field} = {value}"


def edit_recursion(m: Any, d: Draw) -> str:
    """A subgraph that calls itself, or one that calls an ancestor (mutual recursion through main)."""
    n = len(m.subgraphs)
    si = d.integer(0, n - 1)
    target = d.choice([si, 0])
    kind = d.choice(["CALL_ONCE", "WHILE", "IF", "CALL"])
    op = _Operator.OperatorT()
    op.opcodeIndex = _opcode_index(m, kind)
    cls_name = {"CALL_ONCE": "CallOnceOptions", "WHILE": "WhileOptions", "IF": "IfOptions",
                "CALL": "CallOptions"}[kind]
    opts = getattr(bindings("circle", cls_name), cls_name + "T")()
    for f in _subgraph_fields(opts):
        setattr(opts, f, target)
    op.builtinOptionsType, op.builtinOptions = OPTIONS_TYPES[cls_name], opts
    op.inputs, op.outputs = [], []
    sg = m.subgraphs[si]
    sg.operators = (sg.operators or []) + [op]
    return f"subgraph {si} gets {kind} -> {target}"


_OPTION_CLASSES = sorted(k for k in OPTIONS_TYPES if k != "NONE")


def edit_options_type(m: Any, d: Draw) -> str | None:
    ops = _ops(m)
    if not ops:
        return None
    si, oi, op = d.choice(ops)
    how = d.choice(["type code only", "other table", "unknown code", "none"])
    if how == "type code only":       # the bytes of one table read as another's
        op.builtinOptionsType = OPTIONS_TYPES[d.choice(_OPTION_CLASSES)]
        if op.builtinOptions is None:
            op.builtinOptions = getattr(bindings("circle", "AddOptions"), "AddOptionsT")()
    elif how == "other table":       # a consistent union, but another op's options
        cls_name = d.choice(_OPTION_CLASSES)
        try:
            op.builtinOptions = getattr(bindings("circle", cls_name), cls_name + "T")()
        except (ImportError, AttributeError):
            return None
        op.builtinOptionsType = OPTIONS_TYPES[cls_name]
    elif how == "unknown code":
        op.builtinOptionsType = d.choice([200, 255])   # codes no options table has
        if op.builtinOptions is None:
            op.builtinOptions = getattr(bindings("circle", "AddOptions"), "AddOptionsT")()
    else:
        op.builtinOptionsType, op.builtinOptions = 0, None
    return f"op {si}:{oi} ({_op_name(m, op)}) options {how}: type {op.builtinOptionsType}"


def _fits(obj: Any) -> bool:
    try:
        obj.Pack(flatbuffers.Builder(64))
        return True
    except (struct.error, OverflowError, TypeError, ValueError):
        return False


def edit_option_values(m: Any, d: Draw) -> str | None:
    cands = [(si, oi, op) for si, oi, op in _ops(m) if op.builtinOptions is not None
             and any(not k.startswith("_") for k in vars(op.builtinOptions))]
    if not cands:
        return None
    si, oi, op = d.choice(cands)
    opts = op.builtinOptions
    field = d.choice(sorted(vars(opts)))
    old = getattr(opts, field)
    if isinstance(old, float):
        choices: list[Any] = [float("nan"), float("inf"), -1.0, 0.0, 1e38]
    elif isinstance(old, bool):
        choices = [not old]
    elif isinstance(old, (list, np.ndarray)) or old is None:
        choices = [list(s) for s in HOSTILE_SHAPES[:6]] + [[INT32_MAX], [-7]]
    else:
        choices = list(HOSTILE_INTS) + [127, -128, 255, 100]
    for _ in range(8):
        value = d.choice(choices)
        setattr(opts, field, value)
        if _fits(opts):
            return f"op {si}:{oi} ({_op_name(m, op)}) {field} = {value}"
    setattr(opts, field, old)
    return None


def edit_const_values(m: Any, d: Draw) -> str | None:
    """Hostile values in a constant of the right size (shapes, paddings, indices, perms, weights)."""
    consts = [(si, ti, t) for si, ti, t in _tensors(m) if _has_data(m, t) and t.type in (0, 2, 4, 9)]
    if not consts:
        return None
    si, ti, t = d.choice(consts)
    buf = m.buffers[t.buffer]
    dt = {0: np.float32, 2: np.int32, 4: np.int64, 9: np.int8}[t.type]
    raw = np.asarray(buf.data, np.uint8)
    n = raw.size // np.dtype(dt).itemsize
    if n == 0:
        return None
    if dt == np.float32:
        pool = [np.nan, np.inf, -np.inf, 1e38, 0.0]
    elif dt == np.int8:
        pool = [-128, 127, 0, -1]
    else:
        pool = list(HOSTILE_INTS)
    values = np.asarray(raw[:n * np.dtype(dt).itemsize]).view(dt).copy()
    for k in range(min(n, 4)):
        values[d.integer(0, n - 1)] = d.choice(pool)
    buf.data = np.concatenate([values.view(np.uint8), raw[n * np.dtype(dt).itemsize:]])
    return f"tensor {si}:{ti} values {values.tolist()[:8]}"


def edit_quantization(m: Any, d: Draw) -> str:
    si, ti, t = d.choice(_tensors(m))
    q = t.quantization or _Quant.QuantizationParametersT()
    how = d.choice(["scale length", "zero point length", "dimension", "bad scale", "zero point range"])
    rank = len(_list(t.shape))
    if how == "scale length":
        q.scale = [0.5] * d.choice([0, 2, 3, 5, 17])
        q.zeroPoint = [0] * len(q.scale)
    elif how == "zero point length":
        q.scale = list(q.scale if q.scale is not None and len(q.scale) else [0.5])
        q.zeroPoint = [0] * (len(q.scale) + d.choice([1, 3]))
    elif how == "dimension":
        q.scale = list(q.scale if q.scale is not None and len(q.scale) else [0.5, 0.25])
        q.zeroPoint = [0] * len(q.scale)
        q.quantizedDimension = d.choice([rank, rank + 3, -1, INT32_MAX, INT32_MIN])
    elif how == "bad scale":
        q.scale = [d.choice([0.0, -1.0, float("nan"), float("inf"), 1e-45])]
        q.zeroPoint = [0]
    else:
        q.scale = [0.5]
        q.zeroPoint = [d.choice([2**40, -2**40, 300, -300, 2**63 - 1])]
    t.quantization = q
    return f"tensor {si}:{ti} quantization {how}: scale {list(q.scale)[:5]}, zp {list(q.zeroPoint)[:5]}, " \
           f"dim {q.quantizedDimension}"


def _index_vector(values: Sequence[int]) -> Any:
    vec = _Int32Vector.Int32VectorT()
    vec.values = np.asarray(values, np.int32)
    return vec


def edit_sparsity(m: Any, d: Draw) -> str:
    sparse = [(si, ti, t) for si, ti, t in _tensors(m) if t.sparsity is not None]
    si, ti, t = d.choice(sparse or _tensors(m))
    sp = t.sparsity or _Sparsity.SparsityParametersT()
    how = d.choice(["traversal order", "block map", "dense size", "segments", "indices", "levels"])
    levels = list(sp.dimMetadata or [])
    if how == "traversal order":
        sp.traversalOrder = list(d.choice([[0, 0], [5, -1], [1], [INT32_MAX, 0], []]))
    elif how == "block map":
        sp.blockMap = list(d.choice([[7], [-1], [0, 0], [INT32_MAX]]))
    elif how == "levels" or not levels:
        dm = _DimMeta.DimensionMetadataT()
        dm.format, dm.denseSize = d.choice([0, 1]), d.choice([4, 0, INT32_MAX])
        if dm.format == 1:
            dm.arraySegmentsType, dm.arraySegments = 1, _index_vector([0, 1])
            dm.arrayIndicesType, dm.arrayIndices = 1, _index_vector([0])
        sp.dimMetadata = levels + [dm] * d.integer(1, 3)
    else:
        dm = d.choice(levels)
        if how == "dense size":
            dm.denseSize = d.choice([0, -1, INT32_MAX, 1 << 20])
        elif how == "segments":
            dm.format = 1
            dm.arraySegmentsType = 1
            dm.arraySegments = _index_vector(d.choice([[0, 5, 2], [3, 0], [-1, INT32_MAX], [0], [0, 1 << 20]]))
            if dm.arrayIndices is None:
                dm.arrayIndicesType, dm.arrayIndices = 1, _index_vector([0, 1])
        else:
            dm.format = 1
            dm.arrayIndicesType = 1
            dm.arrayIndices = _index_vector(d.choice([[-1], [INT32_MAX], [9, 9, 9], [1 << 20, 0]]))
            if dm.arraySegments is None:
                dm.arraySegmentsType, dm.arraySegments = 1, _index_vector([0, 1])
    t.sparsity = sp
    return f"tensor {si}:{ti} sparsity {how}"


def edit_strings(m: Any, d: Draw) -> str | None:
    strings = [(si, ti, t) for si, ti, t in _tensors(m) if t.type == 5 and _has_data(m, t)]
    if not strings:
        return None
    si, ti, t = d.choice(strings)
    good = bytearray(encode_strings(np.array([b"a", b"bc", b"def"], dtype=object)))
    how = d.choice(["count huge", "count negative", "offset past end", "decreasing", "offset in header",
                    "no count", "offset negative"])
    if how == "count huge":
        good[0:4] = struct.pack("<i", d.choice([INT32_MAX, 1 << 20, 4]))
    elif how == "count negative":
        good[0:4] = struct.pack("<i", -1)
    elif how == "offset past end":
        good[8:12] = struct.pack("<i", len(good) + d.choice([1, 1000, INT32_MAX - len(good)]))
    elif how == "decreasing":
        good[8:12], good[12:16] = good[12:16], good[8:12]
    elif how == "offset in header":
        good[4:8] = struct.pack("<i", 2)
    elif how == "no count":
        good = good[:2]
    else:
        good[12:16] = struct.pack("<i", -3)
    m.buffers[t.buffer].data = np.frombuffer(bytes(good), np.uint8)
    return f"string tensor {si}:{ti}: {how}"


def edit_signature(m: Any, d: Draw) -> str | None:
    if not m.signatureDefs:
        return None
    s = d.choice(m.signatureDefs)
    how = d.choice(["subgraph", "input tensor", "output tensor", "duplicate key", "no outputs"])
    if how == "subgraph":
        s.subgraphIndex = d.choice([len(m.subgraphs), len(m.subgraphs) + 9, 2**32 - 1])
    elif how in ("input tensor", "output tensor"):
        maps = s.inputs if how == "input tensor" else s.outputs
        if not maps:
            return None
        d.choice(maps).tensorIndex = d.choice([1 << 20, 2**32 - 1, len(m.subgraphs[0].tensors or [])])
    elif how == "duplicate key":
        m.signatureDefs = m.signatureDefs + [s]
    else:
        s.outputs = []
    return f"signature {s.signatureKey!r}: {how}"


def edit_op_io(m: Any, d: Draw) -> str | None:
    ops = _ops(m)
    if not ops:
        return None
    si, oi, op = d.choice(ops)
    nt = len(m.subgraphs[si].tensors or [])
    ins, outs = list(op.inputs if op.inputs is not None else []), list(op.outputs if op.outputs is not None else [])
    how = d.choice(["drop input", "extra input", "input index", "output index", "no outputs",
                    "output is input", "reads own output", "same output twice", "optional required"])
    if how == "drop input" and ins:
        ins.pop(d.integer(0, len(ins) - 1))
    elif how == "extra input":
        ins.append(d.integer(0, max(nt - 1, 0)))
    elif how == "input index" and ins:
        ins[d.integer(0, len(ins) - 1)] = d.choice(HOSTILE_INDICES + (nt,))
    elif how == "output index" and outs:
        outs[d.integer(0, len(outs) - 1)] = d.choice(HOSTILE_INDICES + (nt,))
    elif how == "no outputs":
        outs = []
    elif how == "output is input" and ins and outs:
        outs[0] = ins[0] if ins[0] >= 0 else outs[0]
    elif how == "reads own output" and ins and outs:
        ins[0] = outs[0]
    elif how == "same output twice" and outs:
        outs = outs + outs[:1]
    elif how == "optional required" and ins:
        ins[0] = -1
    else:
        return None
    op.inputs, op.outputs = ins, outs
    return f"op {si}:{oi} ({_op_name(m, op)}) {how}: in {ins} out {outs}"


def edit_graph_io(m: Any, d: Draw) -> str:
    si = d.integer(0, len(m.subgraphs) - 1)
    sg = m.subgraphs[si]
    nt = len(sg.tensors or [])
    which = d.choice(["inputs", "outputs"])
    cur = list(getattr(sg, which) if getattr(sg, which) is not None else [])
    how = d.choice(["out of range", "duplicate", "empty", "constant", "extra"])
    if how == "out of range":
        cur = (cur or [0])[:-1] + [d.choice(HOSTILE_INDICES + (nt,))]
    elif how == "duplicate" and cur:
        cur = cur + cur[:1]
    elif how == "empty":
        cur = []
    elif how == "constant":
        consts = [ti for ti, t in enumerate(sg.tensors or []) if _has_data(m, t)]
        cur = cur + consts[:1]
    else:
        cur = cur + [d.integer(0, max(nt - 1, 0))]
    setattr(sg, which, cur)
    return f"subgraph {si} {which} {how}: {cur}"


def edit_opcode(m: Any, d: Draw) -> str | None:
    ops = _ops(m)
    if not ops:
        return None
    si, oi, op = d.choice(ops)
    how = d.choice(["index", "builtin code", "deprecated code", "version", "other op"])
    if not 0 <= op.opcodeIndex < len(m.operatorCodes):
        return None
    oc = m.operatorCodes[op.opcodeIndex]
    if how == "index":
        op.opcodeIndex = d.choice([len(m.operatorCodes), 2**32 - 1])
    elif how == "builtin code":
        oc.builtinCode = d.choice([9999, -9999, INT32_MAX, INT32_MIN, 32])   # 32: CUSTOM without a name
    elif how == "deprecated code":
        oc.deprecatedBuiltinCode = d.choice([127, -128, -1])
    elif how == "version":
        oc.version = d.choice([0, -1, INT32_MAX])
    else:   # another op's code on the same tensors
        name = d.choice(["CONV_2D", "SOFTMAX", "GATHER", "RESHAPE", "WHILE", "IF", "LSTM", "SPLIT",
                         "CONCATENATION", "TOPK_V2", "DENSIFY", "CALL_ONCE", "MEAN", "ARG_MAX"])
        oc.builtinCode, oc.deprecatedBuiltinCode = op_code(name), min(op_code(name), 127)
    return f"op {si}:{oi} opcode {how}"


def edit_tensor_type(m: Any, d: Draw) -> str:
    si, ti, t = d.choice(_tensors(m))
    t.type = d.choice([1, 2, 3, 4, 5, 6, 7, 9, 10, 17, 20, 21, 26, 99, 127])
    return f"tensor {si}:{ti} type {t.type}"


EDITS: dict[str, Callable[[Any, Draw], str | None]] = {
    "dims": edit_dims, "shape_signature": edit_shape_signature, "zero_size": edit_zero_size,
    "buffer_size": edit_buffer_size, "buffer_index": edit_buffer_index,
    "subgraph_index": edit_subgraph_index, "recursion": edit_recursion,
    "options_type": edit_options_type, "option_values": edit_option_values,
    "const_values": edit_const_values, "quantization": edit_quantization, "sparsity": edit_sparsity,
    "strings": edit_strings, "signature": edit_signature, "op_io": edit_op_io, "graph_io": edit_graph_io,
    "opcode": edit_opcode, "tensor_type": edit_tensor_type,
}

# The base each edit is most at home on (used to make sure every edit is tried).
HOME_BASE = {"subgraph_index": "while", "recursion": "if", "quantization": "quant_conv",
             "sparsity": "sparse", "strings": "strings", "const_values": "shape_ops"}


def pack(m: Any, fmt: str = "tflite") -> bytes:
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3" if fmt == "tflite" else b"CIR0")
    return bytes(b.Output())


def hostile_model(d: Draw, base: str | None = None, edits: Sequence[str] | None = None,
                  max_edits: int = 2) -> tuple[str, bytes]:
    """(description, flatbuffer) of one case: a drawn base model and drawn hostile edits."""
    base = base or d.choice(sorted(BASES))
    mb = BASES[base](d)
    m = _Model.ModelT.InitFromPackedBuf(bytearray(mb.to_bytes("tflite")), 0)
    if edits is None:
        edits = [d.choice(sorted(EDITS)) for _ in range(d.integer(0, max_edits))]
    done = [base]
    for name in edits:
        what = EDITS[name](m, d)
        if what is not None:
            done.append(f"{name}: {what}")
    fmt = d.choice(["tflite", "circle"])
    try:
        return " | ".join(done), pack(m, fmt)
    except (struct.error, OverflowError, TypeError) as e:   # an edit outside a field's range: a generator bug
        raise AssertionError(f"{done}: cannot pack ({e})") from None


# ---------------------------------------------------------------------------------------------
# A deterministic sweep: each integer option of each op, each tensor's quantization and each dim of
# the given bases set, one at a time, to hostile values (what the kernels of the jit backend read
# without bounds checks: strides, dilations, paddings, filter sizes, multipliers, zero points,
# scales, zero-size and huge dims).

SWEEP_INTS = HOSTILE_INTS + (127, -128, 255, 100, 3, 2)
SWEEP_QUANT = ((2**40, 0.5), (-2**40, 0.5), (300, 0.5), (-300, 0.5), (127, 0.5), (-128, 0.5), (0, 1e-45),
               (0, 1e30), (0, float("nan")), (0, float("inf")), (0, -1.0), (0, 0.0), (0, 1e-30), (0, 3e9))
SWEEP_DIMS = (0, 1, 2, 65536, INT32_MAX)


def sweep_cases(bases: Sequence[str], seeds: Sequence[int] = (0, 1, 2)):
    """(description, flatbuffer) for every single hostile value on every base model drawn with `seeds`."""
    for base in bases:
        for seed in seeds:
            raw = bytearray(BASES[base](RandomDraw(seed)).to_bytes("tflite"))
            m0 = _Model.ModelT.InitFromPackedBuf(raw, 0)

            def variant(edit: Callable[[Any], None], what: str):
                m = _Model.ModelT.InitFromPackedBuf(raw, 0)
                edit(m)
                try:
                    return f"{base} (seed {seed}) {what}", pack(m)
                except (struct.error, OverflowError, TypeError):
                    return None   # a value outside the field's type: not a valid file
            edits = []
            for si, oi, op in _ops(m0):
                opts = op.builtinOptions
                fields = [] if opts is None else sorted(k for k in vars(opts) if not k.startswith("_"))
                for field in fields:
                    old = getattr(opts, field)
                    if isinstance(old, bool) or not isinstance(old, (int, np.integer)):
                        continue
                    for value in SWEEP_INTS:
                        edits.append((lambda m, si=si, oi=oi, f=field, v=value:
                                      setattr(m.subgraphs[si].operators[oi].builtinOptions, f, v),
                                      f"op {si}:{oi} ({_op_name(m0, op)}) {field} = {value}"))
            for si, ti, t in _tensors(m0):
                for zp, scale in SWEEP_QUANT:
                    def quant(m, si=si, ti=ti, zp=zp, scale=scale):
                        tt = m.subgraphs[si].tensors[ti]
                        q = tt.quantization or _Quant.QuantizationParametersT()
                        n = len(q.scale) if q.scale is not None and len(q.scale) else 1
                        q.scale, q.zeroPoint = [scale] * n, [zp] * n
                        tt.quantization = q
                    edits.append((quant, f"tensor {si}:{ti} ({t.name.decode()}) zero point {zp}, scale {scale}"))
                for k in range(len(_list(t.shape))):
                    for dim in SWEEP_DIMS:
                        def dims(m, si=si, ti=ti, k=k, dim=dim):
                            tt = m.subgraphs[si].tensors[ti]
                            shape = _list(tt.shape)
                            shape[k] = dim
                            tt.shape = shape
                        edits.append((dims, f"tensor {si}:{ti} ({t.name.decode()}) dim {k} = {dim}"))
            for edit, what in edits:
                case = variant(edit, what)
                if case is not None:
                    yield case
