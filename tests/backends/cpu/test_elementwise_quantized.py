"""Quantized binary elementwise ops (ADD, SUB, MUL, SQUARED_DIFFERENCE, MAXIMUM, MINIMUM, comparisons),
bit-exact with LiteRT's builtin kernels."""
from __future__ import annotations

import numpy as np
import pytest

import onert_py

from helpers import (fit_quantization, check_builtin, rng, run_interpreter, run_litert_builtin, run_onert,
                     single_op_model)
from onert_py.errors import ExecutionError, PrepareError, UnsupportedOpError

NONE, RELU, RELU_N1_TO_1, RELU6 = 0, 1, 2, 3
ACTIVATIONS = (NONE, RELU, RELU_N1_TO_1, RELU6)


def _values(dt, shape, seed):
    """Random values over the whole range of `dt`, with the type's ends present."""
    info = np.iinfo(dt)
    x = rng(seed).integers(int(info.min), int(info.max), shape, endpoint=True)
    flat = x.reshape(-1)
    if flat.size >= 2:
        flat[0], flat[-1] = info.min, info.max
    return x.astype(dt)




def _binary(op, dt, shapes, qs, out_dtype=None, out_shape=None, seed=0, **options):
    """A one-op model of `op` on two quantized inputs of `shapes`, its inputs, and check_builtin's result."""
    (s1, s2), (q1, q2, qo) = shapes, qs
    out_shape = out_shape or list(np.broadcast_shapes(tuple(s1), tuple(s2)))
    out = ("y", out_shape, out_dtype or dt) + ((qo,) if qo is not None else ())
    mb = single_op_model(op, [("a", list(s1), dt, q1), ("b", list(s2), dt, q2)], [out], **options)
    xs = [_values(dt, s1, seed), _values(dt, s2, seed + 1)]
    return mb, xs


def _check(op, dt, shapes, qs, **kw):
    mb, xs = _binary(op, dt, shapes, qs, **kw)
    return check_builtin(mb, xs)


# Input 1, input 2 and output parameters: equal scales, the output scale below and above the inputs'
# (output multipliers above and below the inputs'), inputs two orders of magnitude apart, zero points at
# the type's ends (int8 -128/127, uint8 0/255 after _fit's shift).
_ADD_PARAMS = [
    ((0.05, 0), (0.05, 0), (0.05, 0)),
    ((0.02, -128), (0.07, 127), (0.1, 5)),
    ((0.1, 127), (0.001, -128), (0.02, -128)),
    ((0.003, 10), (0.5, -20), (0.9, 127)),
    ((0.25, -7), (0.125, 3), (0.004, 0)),       # output scale small: saturates
]
_SHAPES = [([3, 5, 7], [3, 5, 7]), ([2, 1, 4, 3], [5, 1, 3]), ([1], [4, 9]), ([], [3, 2])]


def _cases(ops, dts):
    """(op, dt) pairs without 8-bit ADD and MUL, tested with their own shapes and parameters below
    (test_add_8bit, test_mul_8bit, test_add_mul_8bit_broadcast)."""
    return [(op, dt) for op in ops for dt in dts if not (op in ("ADD", "MUL") and dt != np.int16)]


@pytest.mark.parametrize("op,dt", _cases(["ADD", "SUB"], [np.int8, np.uint8, np.int16]))
@pytest.mark.parametrize("k", range(len(_ADD_PARAMS)))
def test_add_sub(op, dt, k):
    qs = [fit_quantization(q, dt) for q in _ADD_PARAMS[k]]
    extra = {"pot_scale_int16": False} if dt == np.int16 else {}
    for j, shapes in enumerate(_SHAPES):
        _check(op, dt, shapes, qs, seed=10 * k + j, fused_activation_function=NONE, **extra)


@pytest.mark.parametrize("op,dt", _cases(["ADD", "SUB"], [np.int8, np.uint8, np.int16]))
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_add_sub_activations(op, dt, act):
    qs = [fit_quantization(q, dt) for q in ((0.02, -5), (0.03, 9), (0.015, -100))]
    _check(op, dt, ([4, 33], [4, 33]), qs, seed=act, fused_activation_function=act)
    _check(op, dt, ([4, 1, 3], [7, 3]), qs, seed=act + 5, fused_activation_function=act)


@pytest.mark.parametrize("op", ["ADD", "SUB"])
@pytest.mark.parametrize("scales", [(2 ** -10, 2 ** -10, 2 ** -10), (2 ** -12, 2 ** -9, 2 ** -9),
                                    (2 ** -7, 2 ** -15, 2 ** -7), (0.0625, 0.0625, 0.0625)])
@pytest.mark.parametrize("act", [NONE, RELU, RELU6, RELU_N1_TO_1])
def test_int16_power_of_two_scales(op, scales, act):
    """int16 with power-of-two scales and pot_scale_int16 (the default): LiteRT's LSTM path."""
    qs = [(s, 0) for s in scales]
    _check(op, np.int16, ([3, 41], [3, 41]), qs, seed=act, fused_activation_function=act)
    # the option off: the general path on the same scales
    _check(op, np.int16, ([3, 41], [3, 41]), qs, seed=act, fused_activation_function=act,
           pot_scale_int16=False)


def test_sub_int16_power_of_two_broadcasts():
    qs = [(2 ** -12, 0), (2 ** -9, 0), (2 ** -9, 0)]
    _check("SUB", np.int16, ([2, 1, 5], [3, 5]), qs)


def test_add_sub_refusals():
    # int16 needs zero points 0 (LiteRT refuses at prepare)
    mb, xs = _binary("ADD", np.int16, ([4], [4]), [(0.01, 3), (0.01, 0), (0.01, 0)])
    with pytest.raises(RuntimeError):
        run_litert_builtin(mb, xs)
    with pytest.raises(PrepareError, match="zero points 0"):
        run_onert(mb, xs)
    # power-of-two scales where the output's matches neither input's: LiteRT refuses at prepare
    mb, xs = _binary("SUB", np.int16, ([4], [4]), [(2 ** -8, 0), (2 ** -9, 0), (2 ** -10, 0)])
    with pytest.raises(RuntimeError):
        run_litert_builtin(mb, xs)
    with pytest.raises(PrepareError, match="power-of-two"):
        run_onert(mb, xs)
    # an output scale so small the output multiplier exceeds 1 (LiteRT aborts the process on ADD)
    mb, xs = _binary("ADD", np.int16, ([4], [4]), [(1.0, 0), (0.7, 0), (1e-7, 0)])
    with pytest.raises(PrepareError, match="too small"):
        run_onert(mb, xs)
    # int16 power-of-two ADD does not broadcast in LiteRT
    mb, xs = _binary("ADD", np.int16, ([2, 4], [4]), [(2 ** -8, 0), (2 ** -8, 0), (2 ** -8, 0)])
    with pytest.raises(PrepareError, match="does not broadcast"):
        run_onert(mb, xs)
    # a fused activation quantized kernels do not have
    mb, xs = _binary("SUB", np.int8, ([4], [4]), [(0.1, 0)] * 3, fused_activation_function=4)
    with pytest.raises(PrepareError, match="fused activation"):
        run_onert(mb, xs)


_MUL_PARAMS = [
    ((0.05, 0), (0.05, 0), (0.05, 0)),
    ((0.02, -128), (0.07, 127), (0.001, 5)),          # multiplier > 1: saturates
    ((0.1, 127), (0.001, -128), (0.3, -128)),         # multiplier << 1
    ((0.5, 3), (0.4, -9), (0.02, 127)),               # multiplier 10
    ((0.003, 10), (0.0002, -20), (0.0001, 0)),
]


@pytest.mark.parametrize("dt", [np.int16])
@pytest.mark.parametrize("k", range(len(_MUL_PARAMS)))
def test_mul(dt, k):
    qs = [fit_quantization(q, dt) for q in _MUL_PARAMS[k]]
    for j, shapes in enumerate(_SHAPES):
        _check("MUL", dt, shapes, qs, seed=10 * k + j, fused_activation_function=NONE)


@pytest.mark.parametrize("dt", [np.int16])
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_mul_activations(dt, act):
    qs = [fit_quantization(q, dt) for q in ((0.02, -5), (0.03, 9), (0.0015, -100))]
    _check("MUL", dt, ([5, 31], [5, 31]), qs, seed=act, fused_activation_function=act)
    _check("MUL", dt, ([5, 1, 3], [2, 3]), qs, seed=act + 3, fused_activation_function=act)


def test_mul_int16_large_multiplier():
    """int16 products near 2**30 shifted left by a multiplier above 2: C's int32 shift wraps."""
    qs = [(0.5, 0), (0.5, 0), (0.01, 0)]
    _check("MUL", np.int16, ([64], [64]), qs)


def test_mul_refusals():
    mb, xs = _binary("MUL", np.int16, ([4], [4]), [(0.01, 1), (0.01, 0), (0.01, 0)])
    with pytest.raises(RuntimeError):
        run_litert_builtin(mb, xs)   # LiteRT refuses at invoke
    with pytest.raises(PrepareError, match="zero points 0"):
        run_onert(mb, xs)
    mb, xs = _binary("MUL", np.int16, ([4], [4]), [(0.01, 0), (0.01, 0), (0.01, 0)], out_dtype=np.int8)
    with pytest.raises(PrepareError, match="not supported"):
        run_onert(mb, xs)


_SQD_PARAMS = [
    ((0.05, 0), (0.05, 0), (0.05, 0)),
    ((0.02, -128), (0.07, 127), (0.3, -128)),
    ((0.1, 127), (0.001, -128), (0.01, 127)),
    ((0.003, 10), (0.005, -20), (0.0001, -128)),
]


@pytest.mark.parametrize("k", range(len(_SQD_PARAMS)))
def test_squared_difference_int8(k):
    for j, shapes in enumerate(_SHAPES):
        _check("SQUARED_DIFFERENCE", np.int8, shapes, _SQD_PARAMS[k], seed=10 * k + j)


def test_squared_difference_refusals():
    mb, xs = _binary("SQUARED_DIFFERENCE", np.uint8, ([4], [4]), [(0.1, 128)] * 3)
    with pytest.raises((UnsupportedOpError, PrepareError), match="quantized uint8|supported: int8"):
        run_onert(mb, xs)
    mb, xs = _binary("SQUARED_DIFFERENCE", np.int8, ([4], [4]), [(1.0, 0), (1.0, 0), (1e-6, 0)])
    with pytest.raises(PrepareError, match="too small"):
        run_onert(mb, xs)


@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM"])
@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16])
def test_maximum_minimum(op, dt):
    """LiteRT compares the stored integers, whatever the parameters (here all different)."""
    qs = [fit_quantization(q, dt) for q in ((0.02, -128), (0.5, 127), (0.1, 3))]
    for j, shapes in enumerate(_SHAPES):
        _check(op, dt, shapes, qs, seed=j)


_COMPARE_PARAMS = [
    ((0.05, 0), (0.05, 0)),
    ((0.05, 3), (0.1, -2)),            # b's values are a's at half the resolution: many equal
    ((0.02, -128), (0.0101, 127)),
    ((0.9, 127), (0.001, -128)),
    ((0.25, 0), (0.5, 1)),
]


@pytest.mark.parametrize("op", ["EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"])
@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("k", range(len(_COMPARE_PARAMS)))
def test_comparisons(op, dt, k):
    q1, q2 = (fit_quantization(q, dt) for q in _COMPARE_PARAMS[k])
    for j, shapes in enumerate(_SHAPES[:3]):
        mb, xs = _binary(op, dt, shapes, (q1, q2, None), out_dtype=np.bool_, seed=10 * k + j)
        if k == 1 and dt != np.int16:
            # values that are equal in real terms: a = 2 * (b - zb) + za
            info = np.iinfo(dt)
            b = xs[1].astype(np.int64)
            a = np.clip(2 * (b - q2[1]) + q1[1], info.min, info.max)
            xs[0] = np.broadcast_to(a, np.broadcast_shapes(np.shape(a), tuple(shapes[0])))
            xs[0] = np.resize(xs[0], shapes[0]).astype(dt)
        check_builtin(mb, xs)


def test_comparison_refusals():
    mb, xs = _binary("LESS", np.int8, ([4], [4]), [(1.5, 0), (0.1, 0), None], out_dtype=np.bool_)
    with pytest.raises(PrepareError, match="scale >= 1"):
        run_onert(mb, xs)


# 8-bit ADD and MUL: LiteRT's optimized kernels, a vector body over blocks of 16 (int8) or 8 (uint8)
# elements with its own rounding and int16 narrowing, the reference formula on the remaining tail.
# Sizes below, at and around the block lengths, and large ones; shapes that differ only by leading 1s.
_ELEMENTWISE_SHAPES = [([5], [5]), ([8], [8]), ([16], [16]), ([3, 7], [3, 7]), ([2, 5, 17], [2, 5, 17]),
                       ([1, 4, 9, 33], [4, 9, 33]), ([4099], [4099])]
_ADD8_PARAMS = _ADD_PARAMS + [
    ((0.1, 3), (0.0999, -2), (0.0001, 0)),      # output scale tiny: the int16 narrowing wraps
    ((0.5, 127), (0.5, -128), (0.003, 127)),
    ((1e-4, 0), (0.3, 0), (0.25, -128)),        # one input's multiplier far below the other's
]


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("k", range(len(_ADD8_PARAMS)))
def test_add_8bit(dt, k):
    qs = [fit_quantization(q, dt) for q in _ADD8_PARAMS[k]]
    for j, shapes in enumerate(_ELEMENTWISE_SHAPES):
        _check("ADD", dt, shapes, qs, seed=100 + 10 * k + j, fused_activation_function=NONE)


_MUL8_PARAMS = _MUL_PARAMS + [
    ((0.02, -128), (0.02, -128), (0.0001, 0)),        # products saturate int16 in the vector body
    ((0.9, 127), (0.8, -128), (0.002, -128)),          # multiplier 360
]


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("k", range(len(_MUL8_PARAMS)))
def test_mul_8bit(dt, k):
    qs = [fit_quantization(q, dt) for q in _MUL8_PARAMS[k]]
    for j, shapes in enumerate(_ELEMENTWISE_SHAPES):
        _check("MUL", dt, shapes, qs, seed=200 + 10 * k + j, fused_activation_function=NONE)


@pytest.mark.parametrize("op", ["ADD", "MUL"])
@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_add_mul_8bit_activations(op, dt, act):
    ps = ((0.02, -5), (0.03, 9), (0.015, -100)) if op == "ADD" else ((0.02, -5), (0.03, 9), (0.0015, -100))
    qs = [fit_quantization(q, dt) for q in ps]
    for j, shapes in enumerate([([4, 33], [4, 33]), ([1, 2, 3, 43], [2, 3, 43])]):
        _check(op, dt, shapes, qs, seed=300 + 10 * act + j, fused_activation_function=act)


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
def test_add_8bit_block_and_tail_round_differently(dt):
    """The vector body and the reference tail differ on some inputs: the same pairs of values give
    different outputs depending on their position (so both forms are exercised above)."""
    qs = [fit_quantization(q, dt) for q in ((0.02, -128), (0.07, 127), (0.1, 5))]
    mb, xs = _binary("ADD", dt, ([4096], [4096]), qs, seed=7, fused_activation_function=NONE)
    expected = check_builtin(mb, xs)[0]
    # the same values in the tail of a 15-element tensor (int8) / 7-element (uint8): reference formula
    n = 15 if dt == np.int8 else 7
    tails = []
    for i in range(0, 4096 - n, n):
        mb_t, _ = _binary("ADD", dt, ([n], [n]), qs, fused_activation_function=NONE)
        tails.append((mb_t, [xs[0][i:i + n], xs[1][i:i + n]], expected[i:i + n]))
    differ = sum(int(np.sum(run_onert(m, x)[0] != e)) for m, x, e in tails[:40])
    assert differ > 0


# The 8-bit ADD, SUB and MUL kernels are tables of every pair of input values, one per code (the
# reference formula, the elementwise and the scalar-broadcast vector bodies): every pair, in each code,
# against LiteRT. [65536] runs the elementwise body on all pairs, [256, 1] + [1, 256] the
# scalar-broadcast body along rows, [256, 1, 2] + [1, 256, 1] LiteRT's generic broadcast (the reference
# formula).
_EVERY_PAIR_LAYOUTS = [
    lambda x, y: ([np.repeat(x, 256), np.tile(y, 256)]),
    lambda x, y: ([x.reshape(256, 1), y.reshape(1, 256)]),
    lambda x, y: ([np.repeat(x.reshape(256, 1, 1), 2, axis=2), y.reshape(1, 256, 1)]),
]


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("dt", [np.int8, np.uint8])
def test_8bit_every_pair_of_values(op, dt):
    params = {"ADD": ((0.02, -128), (0.07, 127), (0.1, 5)), "SUB": ((0.03, 7), (0.05, -100), (0.06, 3)),
              "MUL": ((0.02, -5), (0.03, 9), (0.0015, -100))}[op]
    qs = [fit_quantization(q, dt) for q in params]
    levels = np.arange(256, dtype=np.uint8).view(dt)
    for layout in _EVERY_PAIR_LAYOUTS:
        xs = layout(levels, levels)
        mb, _ = _binary(op, dt, (list(xs[0].shape), list(xs[1].shape)), qs, fused_activation_function=NONE)
        check_builtin(mb, xs)


# Broadcasting 8-bit ADD / MUL: LiteRT's fivefold loops run the vector bodies along inner runs (the
# common innermost dims, or the run one element is broadcast over), the reference formula on each run's
# tail, and the generic broadcast entirely in the reference formula. Runs below, at and above the block
# lengths (8 and 16), either input broadcasting, scalars and 1-element tensors, leading 1s.
_BROADCAST_SHAPES = [
    ([], [3, 2]), ([1], [4, 9]), ([37], [1]), ([1, 1, 1], [2, 5, 33]),          # scalar broadcast
    ([2, 4], [4]), ([2, 16, 32], [1, 16, 32]), ([1, 16, 32], [2, 16, 32]),
    ([1, 1, 1, 40], [2, 3, 5, 40]), ([2, 3, 5, 24], [1, 1, 1, 24]), ([1, 1, 1, 7], [2, 3, 5, 7]),
    ([2, 1, 6, 17], [2, 5, 1, 17]), ([3, 1, 4, 16], [3, 5, 1, 16]),             # [N,1,W,C] + [N,H,1,C]
    ([3, 1], [1, 5]), ([3, 1], [3, 19]), ([4, 20, 1], [4, 1, 1]), ([2, 1, 3, 1], [2, 21, 3, 1]),
    ([5, 1, 16, 1], [5, 2, 16, 9]), ([1, 3, 1, 5], [2, 3, 4, 5]),
    ([2, 1, 3, 1, 4], [1, 2, 3, 2, 4]), ([2, 1, 2, 1, 2, 9], [1, 2, 1, 2, 1, 9]),  # generic broadcast
    ([3, 1, 2], [3, 40, 1]), ([1, 1, 130], [4, 2, 130]),
]


@pytest.mark.parametrize("op", ["ADD", "MUL"])
@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("k", range(5))
def test_add_mul_8bit_broadcast(op, dt, k):
    params = (_ADD8_PARAMS if op == "ADD" else _MUL8_PARAMS)
    qs = [fit_quantization(q, dt) for q in params[(3 * k) % len(params)]]
    for j, shapes in enumerate(_BROADCAST_SHAPES):
        _check(op, dt, shapes, qs, seed=400 + 50 * k + j, fused_activation_function=NONE)


@pytest.mark.parametrize("op", ["ADD", "MUL"])
@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("k", range(len(_ADD8_PARAMS)))
def test_add_mul_8bit_broadcast_params(op, dt, k):
    """Every parameter set on the scalar-broadcast and inner-run forms."""
    params = (_ADD8_PARAMS if op == "ADD" else _MUL8_PARAMS)
    qs = [fit_quantization(q, dt) for q in params[k % len(params)]]
    for j, shapes in enumerate([([1], [3, 67]), ([4, 67], [1, 1]), ([2, 1, 48], [2, 5, 48]),
                                ([6, 1], [6, 41])]):
        _check(op, dt, shapes, qs, seed=700 + 10 * k + j, fused_activation_function=NONE)


@pytest.mark.parametrize("op", ["ADD", "MUL"])
@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_add_mul_8bit_broadcast_activations(op, dt, act):
    ps = ((0.02, -5), (0.03, 9), (0.015, -100)) if op == "ADD" else ((0.02, -5), (0.03, 9), (0.0015, -100))
    qs = [fit_quantization(q, dt) for q in ps]
    for j, shapes in enumerate([([2, 16, 32], [1, 16, 32]), ([1], [5, 35]), ([3, 1, 2], [3, 40, 1])]):
        _check(op, dt, shapes, qs, seed=900 + 10 * act + j, fused_activation_function=act)


@pytest.mark.parametrize("op", ["ADD", "MUL"])
@pytest.mark.parametrize("dt", [np.int8, np.uint8])
def test_add_mul_8bit_broadcast_resized(op, dt):
    """Inputs resized at run time: the positions of the vector bodies follow the new shapes."""
    qs = [fit_quantization(q, dt) for q in ((0.02, -128), (0.07, 127), (0.01, 5))]
    for j, (s1, s2) in enumerate([([1, 16, 32], [2, 16, 32]), ([3, 1], [3, 21]), ([1], [50])]):
        mb, _ = _binary(op, dt, ([s1[0]] + [1] * (len(s1) - 1), [s2[0]] + [1] * (len(s2) - 1)), qs,
                        fused_activation_function=NONE)
        xs = [_values(dt, s1, 1000 + j), _values(dt, s2, 1001 + j)]
        litert = pytest.importorskip("ai_edge_litert.interpreter")
        data = mb.to_bytes("tflite")
        results = []
        for it in (litert.Interpreter(model_content=data, experimental_op_resolver_type=(
                       litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)),
                   onert_py.Interpreter(model_content=data)):
            results.append(run_interpreter(it, xs))
        for e, g in zip(*results):
            np.testing.assert_array_equal(g, e)


# ------------------------------------------------------------------------------------------------- DIV
# Dividend, divisor and output parameters: rescale multipliers s1 / (s2 * so) above and below 1, zero
# points at the type's ends, an output scale small enough to saturate.
_DIV_PARAMS = [
    ((0.05, 3), (0.02, 2), (0.1, 1)),
    ((0.5, -128), (0.01, 127), (0.02, -128)),
    ((0.003, 10), (0.5, -20), (0.0009, 127)),
    ((0.1, 0), (0.1, 0), (0.004, 0)),
    ((0.02, 127), (0.3, -128), (4.0, -3)),
]
_DIV_SHAPES = [([3, 5, 7], [3, 5, 7]), ([2, 1, 4, 3], [5, 1, 3]), ([4, 9], [1]), ([1], [4, 9]),
               ([2, 3, 1, 5], [3, 4, 1]), ([], [3, 2])]


def _div_check(dt, shapes, qs, seed, **options):
    """check_builtin of a DIV whose divisor never equals its zero point (LiteRT fails the invoke then)."""
    mb, (a, b) = _binary("DIV", dt, shapes, qs, seed=seed, **options)
    zb = qs[1][1]
    b = np.where(b == zb, zb + 1 if zb < np.iinfo(dt).max else zb - 1, b).astype(dt)
    return check_builtin(mb, [a, b])


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("k", range(len(_DIV_PARAMS)))
def test_div(dt, k):
    qs = [fit_quantization(q, dt) for q in _DIV_PARAMS[k]]
    for j, shapes in enumerate(_DIV_SHAPES):
        _div_check(dt, shapes, qs, seed=10 * k + j, fused_activation_function=NONE)


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_div_activations(dt, act):
    qs = [fit_quantization(q, dt) for q in ((0.02, -5), (0.03, 9), (0.015, -100))]
    _div_check(dt, ([4, 33], [4, 33]), qs, seed=act, fused_activation_function=act)
    _div_check(dt, ([4, 1, 3], [7, 3]), qs, seed=act + 5, fused_activation_function=act)


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
def test_div_every_pair(dt):
    """Every dividend against every divisor: the small dividends (0, +-1) whose final shift reaches 32
    bits, where LiteRT's x86 build rounds as the undefined shift happens to compute."""
    info = np.iinfo(dt)
    for k, q in enumerate([((0.05, 3), (0.02, 2), (0.1, 1)), ((0.5, -128), (0.01, 127), (0.02, -128))]):
        q1, q2, qo = [fit_quantization(p, dt) for p in q]
        values = np.arange(int(info.min), int(info.max) + 1)
        a = np.repeat(values, values.size - 1).astype(dt)
        b = np.tile(values[values != q2[1]], values.size).astype(dt)
        n = a.size
        mb = single_op_model("DIV", [("a", [n], dt, q1), ("b", [n], dt, q2)], [("y", [n], dt, qo)])
        check_builtin(mb, [a, b])


def test_div_zero_divisor():
    q = (0.1, 4)
    mb = single_op_model("DIV", [("a", [3], np.int8, q), ("b", [3], np.int8, q)], [("y", [3], np.int8, q)])
    xs = [np.array([1, 2, 3], np.int8), np.array([5, 4, 6], np.int8)]
    with pytest.raises(RuntimeError):
        run_litert_builtin(mb, xs)   # a divisor equal to its zero point: LiteRT fails the invoke
    with pytest.raises(ExecutionError, match="ZeroDivisionError.*zero point"):
        run_onert(mb, xs)


def test_div_refusals():
    mb, xs = _binary("DIV", np.int8, ([3], [3]), [(1.0, 0), (1e-5, 0), (1e-4, 0)])
    with pytest.raises(PrepareError, match="too large"):
        run_onert(mb, xs)
    mb, xs = _binary("DIV", np.int16, ([3], [3]), [(1.0, 0), (0.01, 0), (0.005, 0)])   # 2**14.3
    with pytest.raises(PrepareError, match="too large"):
        run_onert(mb, xs)


# int16 DIV: LiteRT 2.3 runs it through the same fixed-point kernel as 8-bit (for broadcasts and
# elementwise alike). Rescale multipliers from 2**-10 to just under 2**14 (the largest whose final shift
# stays defined), zero points 0 and (LiteRT does not require symmetric int16 here) off zero.
_DIV16_PARAMS = [
    ((0.01, 0), (0.02, 0), (0.005, 0)),
    ((1.0, 0), (0.01, 0), (0.01, 0)),            # multiplier 10000: shift 14
    ((0.001, 0), (0.3, 0), (1e-5, 0)),
    ((0.0001, 0), (0.5, 0), (0.2, 0)),           # multiplier 1e-3
    ((0.013, 5), (0.021, -7), (0.0031, 3)),
    ((0.5, -32768), (0.25, 32767), (0.002, -32768)),
]


@pytest.mark.parametrize("k", range(len(_DIV16_PARAMS)))
def test_div_int16(k):
    qs = _DIV16_PARAMS[k]
    for j, shapes in enumerate(_DIV_SHAPES + [([2, 700], [2, 700])]):
        _div_check(np.int16, shapes, qs, seed=100 + 10 * k + j, fused_activation_function=NONE)


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_div_int16_activations(act):
    qs = ((0.0004, 0), (0.0003, 0), (0.0002, 0))
    _div_check(np.int16, ([4, 33], [4, 33]), qs, seed=act, fused_activation_function=act)
    _div_check(np.int16, ([4, 1, 3], [7, 3]), qs, seed=act + 5, fused_activation_function=act)


def test_div_int16_every_dividend():
    """Every int16 dividend against small, middle and extreme divisors: the small dividends whose final
    shift reaches 32 bits round as LiteRT's x86 build computes the undefined shift."""
    for q in _DIV16_PARAMS[:3] + _DIV16_PARAMS[4:]:
        zb = q[1][1]
        divisors = np.array([1, -1, 2, -2, 3, 7, -100, 1000, -12345, 32767, -32768]) + zb
        divisors = np.unique(np.clip(divisors, -32768, 32767))
        divisors = divisors[divisors != zb]
        values = np.arange(-32768, 32768)
        a = np.tile(values, divisors.size).astype(np.int16)
        b = np.repeat(divisors, values.size).astype(np.int16)
        n = a.size
        mb = single_op_model("DIV", [("a", [n], np.int16, q[0]), ("b", [n], np.int16, q[1])],
                             [("y", [n], np.int16, q[2])])
        check_builtin(mb, [a, b])
