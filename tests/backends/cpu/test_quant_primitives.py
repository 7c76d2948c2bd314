"""The fixed-point primitives of _quant.py against gemmlowp's and ruy's definitions written out with
Python integers (C's truncating division, explicit nudges), including ties, saturation and the int32
ends. The kernels' bit-exactness with LiteRT rests on these."""
from __future__ import annotations

import numpy as np
import pytest

from onert_py.backends.cpu._quant import (INT32_MAX, INT32_MIN, OutputStage, multiply_by_quantized_multiplier,
                                          quantize_multipliers, rounding_divide_by_pot,
                                          saturating_rounding_doubling_high_mul)
from helpers import rng


def _c_div(a: int, b: int) -> int:
    """C's integer division: truncation toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _srdhm(a: int, b: int) -> int:
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return _c_div(ab + nudge, 1 << 31)


def _rdbpot(x: int, e: int) -> int:
    mask = (1 << e) - 1
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if (x & mask) > threshold else 0)


def _int32(x: int) -> int:
    return (x + (1 << 31)) % (1 << 32) - (1 << 31)


def _half_up(x: int, m: int, shift: int) -> int:
    """ruy's output stage: x shifted left in int32, (x*m + 2**30) >> 31, then a right shift rounding
    halves up; a sum overflowing int32 with the nudge gives 2**(31 - e)."""
    left, right = max(shift, 0), max(-shift, 0)
    high = (_int32(x << left) * m + (1 << 30)) >> 31
    total = high + ((1 << (right - 1)) if right else 0)
    return (1 << (31 - right)) if total > INT32_MAX else total >> right


def _values(r: np.random.Generator, n: int) -> np.ndarray:
    ties = (r.integers(-5000, 5000, n) << r.integers(0, 18, n)) + (1 << r.integers(0, 18, n))
    return np.concatenate([r.integers(INT32_MIN, INT32_MAX + 1, n), np.arange(-300, 300), ties,
                           [INT32_MIN, INT32_MIN + 1, INT32_MAX, -1, 0, 1]]).astype(np.int64)


def test_saturating_rounding_doubling_high_mul():
    r = rng(1)
    a = _values(r, 3000)
    for b in (r.integers(INT32_MIN, INT32_MAX + 1, a.size), np.full(a.size, INT32_MIN), np.full(a.size, 1 << 30)):
        got = saturating_rounding_doubling_high_mul(a, b)
        assert got.tolist() == [_srdhm(int(x), int(y)) for x, y in zip(a, b)]
    assert saturating_rounding_doubling_high_mul(INT32_MIN, INT32_MIN) == INT32_MAX


@pytest.mark.parametrize("per_element", [False, True])
def test_rounding_divide_by_pot(per_element):
    r = rng(2)
    x = _values(r, 2000)
    exps = r.integers(0, 32, x.size) if per_element else None
    for e in ([None] if per_element else range(0, 32, 3)):
        ee = exps if per_element else e
        got = rounding_divide_by_pot(x, ee)
        want = [_rdbpot(int(v), int(ee[k] if per_element else ee)) for k, v in enumerate(x)]
        assert got.tolist() == want


@pytest.mark.parametrize("per_element", [False, True])
def test_multiply_by_quantized_multiplier(per_element):
    # TFLite's MultiplyByQuantizedMultiplier: x << left (left = max(shift, 0)), the high multiply, a
    # rounding right shift by max(-shift, 0); one shift for the whole array (per tensor) or one each
    r = rng(3)
    x = np.concatenate([_values(r, 500) >> 8, np.arange(-64, 64)])      # room for a left shift
    mults = r.integers(1 << 30, INT32_MAX + 1, x.size)
    shifts = r.integers(-31, 8, x.size)
    for shift in ([shifts] if per_element else [-31, -12, -1, 0, 1, 7]):
        got = multiply_by_quantized_multiplier(x, mults, shift)
        sh = np.broadcast_to(shift, x.shape)
        want = [_rdbpot(_srdhm(int(v) << max(int(k), 0), int(m)), max(-int(k), 0)) for v, m, k in zip(x, mults, sh)]
        assert got.tolist() == want
    assert int(multiply_by_quantized_multiplier(np.int64(-5), 1 << 30, 0)) == _rdbpot(_srdhm(-5, 1 << 30), 0)


@pytest.mark.parametrize("half_up", [0, 3, 8])
@pytest.mark.parametrize("bound", [300, 10**5, 10**8])
def test_output_stage_fast_path_is_the_composition(half_up, bound):
    """With a bound, OutputStage collapses the high multiply and the right shift into one shift; it
    must equal the two roundings done one after the other (half up for the first `half_up` channels,
    the reference form for the rest)."""
    r = rng(3 + bound % 7 + half_up)
    channels = 8
    reals = np.exp(r.uniform(np.log(1e-7), np.log(3.0), channels))
    mult, shift = quantize_multipliers(reals)
    acc = r.integers(-bound, bound + 1, (400, channels))
    acc[:100] = (acc[:100] >> 5) << 5                       # many ties
    zero_point = 1000 - bound % 7 * 300     # joins the fast path's offset unless a shift is too long
    stage = OutputStage(mult, shift, zero_point, INT32_MIN, INT32_MAX, np.int64, half_up=half_up, bound=bound)
    assert stage.fast
    got = stage(acc.astype(np.float64)) - zero_point
    for c in range(channels):
        m, s = int(mult[c]), int(shift[c])
        if c < half_up:
            want = [_half_up(int(v), m, s) for v in acc[:, c]]
        else:
            want = [_rdbpot(_srdhm(int(v) << max(s, 0), m), max(-s, 0)) for v in acc[:, c]]
        assert got[:, c].tolist() == want, c
    # the general path (no bound) agrees, and the reference function too
    general = OutputStage(mult, shift, zero_point, INT32_MIN, INT32_MAX, np.int64, half_up=half_up)
    assert not general.fast
    assert np.array_equal(general(acc) - zero_point, got)
    assert np.array_equal(multiply_by_quantized_multiplier(acc[:, half_up:], mult[half_up:], shift[half_up:]),
                          got[:, half_up:])


@pytest.mark.parametrize("dtype,zero_point,lo,hi", [(np.int8, -5, -128, 127), (np.int8, -128, -128, -128 + 51),
                                                     (np.uint8, 10, 10, 255), (np.int16, 0, -32768, 32767)])
@pytest.mark.parametrize("rows", [1, 7, 48, 97])
def test_output_stage_float64_path_is_the_half_up_stage(dtype, zero_point, lo, hi, rows):
    """With per-channel bounds small enough, OutputStage rescales in float64 (float_ok), tiling its
    constants along rows. Every element must equal ruy's half-up stage, computed here one integer at a
    time, plus the zero point, clamped: for multipliers above 1 (left shifts) and below, ties, a bias
    given per call, and row counts that tile or not."""
    r = rng(11 + rows)
    channels = 12
    # int16's clamp is 2**16 wide: (zp - lo) * 2**(31 + r) stays exact for multipliers from 2**-5
    smallest = 0.05 if dtype == np.int16 else 1e-4
    reals = np.exp(r.uniform(np.log(smallest), np.log(6.0), channels))
    reals[:2] = [3.5, 1.0]                                          # left shifts
    mult, shift = quantize_multipliers(reals)
    bounds = r.integers(1 << 10, 1 << 19, channels)
    bias = r.integers(-(1 << 9), 1 << 9, channels)
    acc = np.stack([r.integers(-(b - (1 << 9)), b - (1 << 9), rows) for b in bounds], axis=1)
    acc[: rows // 2] = (acc[: rows // 2] >> 4) << 4                 # ties
    stage = OutputStage(mult, shift, zero_point, lo, hi, dtype, half_up=channels, bound=bounds)
    assert stage.float_ok
    before = acc.astype(np.float32)
    got = stage(before, bias)
    assert got.dtype == dtype and got.shape == acc.shape
    assert np.array_equal(before, acc.astype(np.float32))
    for c in range(channels):
        want = [min(max(_half_up(int(v) + int(bias[c]), int(mult[c]), int(shift[c])) + zero_point, lo), hi)
                for v in acc[:, c]]
        assert got[:, c].tolist() == want, c
    # without the bias argument the same stage gives the sums that already hold it
    assert np.array_equal(stage((acc + bias).astype(np.float32)), got)


def test_output_stage_keeps_int64_where_float64_would_round():
    """A bound whose scaled product passes 2**53 is refused by the float64 path (and still exact)."""
    mult, shift = quantize_multipliers(np.array([0.9, 0.9]))
    stage = OutputStage(mult, shift, 0, -128, 127, np.int8, half_up=2, bound=np.array([1 << 10, 1 << 23]))
    assert stage.fast and not stage.float_ok
    acc = np.array([[1000, (1 << 23) - 1], [-1000, 141]])
    want = [[min(max(_half_up(int(v), int(mult[c]), int(shift[c])), -128), 127) for c, v in enumerate(row)]
            for row in acc]
    assert stage(acc).tolist() == want


def test_output_stage_clamps_adds_zero_point_and_bias_without_touching_its_input():
    mult, shift = quantize_multipliers(np.array([0.5, 0.25]))
    stage = OutputStage(mult, shift, 3, -128, 127, np.int8, half_up=2, bound=10**4)
    assert stage.zero_point_in_offset
    acc = np.array([[10.0, 10.0], [1000.0, -1000.0], [-3.0, -2.0]])
    before = acc.copy()
    y = stage(acc, np.array([2, -2]))
    assert y.dtype == np.int8
    # 12 * 0.5 = 6; 8 * 0.25 = 2; 1002 * .5 saturates; -1002 * .25 = -250.5 -> clamp; -1 * .5 = -0.5 -> 0
    assert y.tolist() == [[9, 5], [127, -128], [3, 2]]
    assert np.array_equal(acc, before)
