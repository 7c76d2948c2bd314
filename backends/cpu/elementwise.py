"""Binary elementwise arithmetic, comparisons and logical ops, with numpy broadcasting.

Python operators are used where they mean the same as the ufunc: on arrays they dispatch to the same
ufunc, and on numpy scalars (rank-0 values) they are ten times cheaper than calling the ufunc.

ADD, SUB, MUL and DIV follow LiteRT's fused activation: the result is clamped to an activation range,
which for float32 is [-FLT_MAX, FLT_MAX] when there is no activation, so 1/0 gives 3.4028235e38 and
an overflow gives +-FLT_MAX (NaN stays NaN). TANH and SIGN_BIT have no range and act as NONE there.
"""
from __future__ import annotations

import operator
from math import isinf


import numpy as np

from onert_py.backends.cpu._common import (NONE, RELU, RELU6, RELU_N1_TO_1, SIGN_BIT, TANH, activated,
                                           clip_ufunc as _clip)
from onert_py.backends.cpu._conv_plan import ROW, chunk
from onert_py.backends.cpu._quant import (activation_range, multiply_by_quantized_multiplier,
                                          multiply_by_quantized_multiplier_wrapping, qparams, quantize_multiplier,
                                          round_half_away32, rounding_divide_by_pot,
                                          saturating_rounding_doubling_high_mul, wrap_int16, wrap_int32)
from onert_py.backends.cpu.shape import check_same_types, type_name
from onert_py.backends import gradients as gr
from onert_py.backends.registry import CPU, KernelContext, Run, grad_rule, no_gradient, shape_rule, value_rule
from onert_py.backends.shape_rules import Node, broadcasting
from onert_py.errors import article


def _check_operands(ctx: KernelContext, same_output: bool = True) -> np.dtype:
    """Both inputs of one registered type (and the output's, unless a comparison)."""
    ctx.expect_inputs(2)
    return check_same_types(ctx, 0, 1, same_output=same_output)


def _binary(ctx: KernelContext, fn, same_output: bool = True) -> Run:
    """Run closure for out = fn(a, b) (an op without fused activation)."""
    _check_operands(ctx, same_output)
    a, b = ctx.inputs
    (o,) = ctx.outputs
    v = ctx.values

    def run() -> None:
        v[o] = fn(v[a], v[b])
    return run


def _activation_range(code: int, dt: np.dtype) -> tuple | None:
    """(lo, hi) of LiteRT's CalculateActivationRange for `dt`, or None when nothing is clamped."""
    if code == RELU6:
        return dt.type(0), dt.type(6)
    if code == RELU_N1_TO_1:
        # unsigned: LiteRT's -1 wraps to the type's max, and min(max(x, lo), hi) then gives 1 everywhere
        return np.array(-1).astype(dt)[()], dt.type(1)
    if code not in (NONE, RELU, TANH, SIGN_BIT):
        raise ValueError(f"unknown fused activation function {code}")
    if dt.kind == "f":
        hi = dt.type(np.finfo(dt).max)
        return (dt.type(0) if code == RELU else -hi), hi
    if dt.kind in "iu" and code == RELU:
        return dt.type(0), dt.type(np.iinfo(dt).max)
    return None  # integers wrap, as LiteRT's do; complex has no activation


def _arithmetic(ctx: KernelContext, fn) -> Run:
    """Run closure for out = clamp(fn(a, b)) with LiteRT's activation range; `fn` returns a fresh
    array (clamped in place, one pass) or a numpy scalar."""
    _check_operands(ctx)
    a, b = ctx.inputs
    (o,) = ctx.outputs
    v = ctx.values
    code = ctx.options.get("fused_activation_function", NONE)
    try:
        rng = _activation_range(code, ctx.output_dtype())
    except ValueError as e:
        raise ctx.fail(str(e)) from None
    if rng is None:
        def run() -> None:
            v[o] = fn(v[a], v[b])
        return run
    lo, hi = rng
    lo_a, hi_a = np.asarray(lo), np.asarray(hi)   # clip converts numpy scalar bounds on every call
    fast = _float_into_buffer(ctx, fn, lo_a, hi_a)
    if fast is not None:
        return fast

    scalar_type = ctx.output_dtype().type
    if code == NONE and scalar_type is np.float32:
        # Rank-0 values (loop counters, scalar states) take the first branch: with no activation only
        # +-inf lies outside [-FLT_MAX, FLT_MAX], and math.isinf is the cheapest test of a numpy scalar.
        def run_unbounded() -> None:
            r = fn(v[a], v[b])
            if r.__class__ is scalar_type:
                if isinf(r):
                    r = hi if r > 0 else lo
            else:
                _clip(r, lo_a, hi_a, out=r)
            v[o] = r
        return run_unbounded

    def run_clamped() -> None:
        r = fn(v[a], v[b])
        if type(r) is np.ndarray:
            _clip(r, lo_a, hi_a, out=r)
        elif not lo <= r <= hi:  # rank-0: two comparisons are cheaper than a ufunc call
            r = _clip(r, lo, hi)
        v[o] = r
    return run_clamped


_UFUNCS = {operator.add: np.add, operator.sub: np.subtract, operator.mul: np.multiply,
           operator.truediv: np.divide}


def _float_into_buffer(ctx: KernelContext, fn, lo: np.ndarray, hi: np.ndarray) -> Run | None:
    """ADD/SUB/MUL/DIV of float32 tensors with static shapes (rank >= 1): the ufunc writes into the
    planned output buffer and the activation clamps it in place to [lo, hi] (rank-0 arrays). An operand that varies only along the
    last axis while the other is the full output (a squeeze-excite scale) is tiled at run time to long
    rows. None when the shapes are not static."""
    ufunc = _UFUNCS.get(fn)
    ts = [ctx.input_tensor(0), ctx.input_tensor(1)]
    out_t = ctx.output_tensor(0)
    if (ufunc is None or out_t.dtype != np.float32 or any(t.dtype != np.float32 for t in ts)
            or any(t.is_dynamic for t in ts + [out_t]) or len(out_t.shape) == 0):
        return None
    shapes = [tuple(t.shape) for t in ts]
    out_shape = tuple(out_t.shape)
    try:
        if np.broadcast_shapes(*shapes) != out_shape:
            return None
    except ValueError:
        return None
    a, b = ctx.inputs
    (o,) = ctx.outputs
    v = ctx.values
    alloc = ctx.output_buffer(0)
    clip = _clip
    # a rank-0 constant operand as a rank-0 array, read from a list of its own instead of the values: a
    # ufunc converts a numpy-scalar operand on every call (~0.2 us, half a small step)
    va, ia, vb, ib = v, a, v, b
    if ctx.const(0) is not None and not shapes[0]:
        va, ia = [np.asarray(ctx.const(0))], 0
    if ctx.const(1) is not None and not shapes[1]:
        vb, ib = [np.asarray(ctx.const(1))], 0
    c = out_shape[-1]
    size = int(np.prod(out_shape))
    rows = None
    for k in (0, 1):
        full, chan = shapes[k], shapes[1 - k]
        if (full == out_shape and c > 1 and size >= 4 * ROW and len(chan) >= 1 and chan[-1] == c
                and int(np.prod(chan)) == c):
            m = size // c
            t = chunk(m, c, ROW)
            rows, tile_k, reps = (m // t, t * c), 1 - k, t
            break

    s0, s1 = shapes

    def run_any() -> None:   # values whose shapes differ from the declared ones: fresh arrays
        r = fn(v[a], v[b])
        clip(r, lo, hi, out=r)
        v[o] = r

    if size == 1 and fn is not operator.truediv:
        # One value (the [1]-shaped loop values converters emit): computed on Python floats, which is
        # exact, as one IEEE operation on float32 operands done in float64 and rounded once to float32
        # gives the float32 result (53 >= 2 * 24 + 2 bits). Clamping before the rounding gives the same
        # value, lo and hi being float32 numbers. NaN passes both comparisons, as np.clip keeps it.
        # Division stays on numpy: Python raises on x / 0.
        return _float_one(ctx, fn, lo, hi, shapes, out_shape, run_any)

    if rows is not None:
        def run_rows() -> None:
            x, y = v[a], v[b]
            if x.shape != s0 or y.shape != s1:
                return run_any()
            r = alloc(out_shape)
            if tile_k == 1:
                ufunc(x.reshape(rows), np.tile(y.reshape(c), reps), out=r.reshape(rows))
            else:
                ufunc(np.tile(x.reshape(c), reps), y.reshape(rows), out=r.reshape(rows))
            clip(r, lo, hi, out=r)
            v[o] = r
        return run_rows

    def run() -> None:
        x, y = va[ia], vb[ib]
        if x.shape != s0 or y.shape != s1:
            return run_any()
        r = alloc(out_shape)
        ufunc(x, y, out=r)
        clip(r, lo, hi, out=r)
        v[o] = r
    return run


def _float_one(ctx: KernelContext, fn, lo, hi, shapes: list, out_shape: tuple, run_any: Run) -> Run:
    """ADD/SUB/MUL of one float32 value (see _float_into_buffer). A rank-0 operand (a numpy scalar) is
    read with float(), as .item() on a numpy scalar costs ten times more (~0.27 us: a third of the
    step), and the planned slot is read directly rather than through output_buffer's allocator."""
    py, lo_f, hi_f = fn, float(lo), float(hi)   # Python floats compare faster than numpy scalars
    planned, slot = ctx.output_slot(0)
    empty, dtype = np.empty, ctx.output_dtype()
    v, (a, b), (o,) = ctx.values, ctx.inputs, ctx.outputs
    s0, s1 = shapes
    get0, get1 = (float if s == () else np.ndarray.item for s in shapes)

    def run_one() -> None:
        x, y = v[a], v[b]
        if x.shape != s0 or y.shape != s1:
            return run_any()
        p = py(get0(x), get1(y))
        if p > hi_f:
            p = hi_f
        elif p < lo_f:
            p = lo_f
        r = planned[slot]
        if r is None:
            r = empty(out_shape, dtype)
        r[0] = p
        v[o] = r
    return run_one


def _check_divisor(b) -> None:
    if np.any(b == 0):
        raise ZeroDivisionError("division by zero")


# --------------------------------------------------------------------------------------- quantized
# LiteRT's quantized binary kernels (add.cc, sub.cc, mul.cc, squared_difference.cc, comparisons.cc):
# int32 fixed-point arithmetic on the offset values, computed here on int64 arrays (nothing wraps where
# C does not). Every tensor has per-tensor parameters. Multipliers are derived from the scales with
# the same float/double arithmetic as LiteRT's Prepare (float32 where C++ multiplies floats).

_I64 = np.int64
_F32 = np.float32


def _q_tensor(ctx: KernelContext, t, what: str) -> tuple[float, int, int, int]:
    """(scale, zero point, qmin, qmax) of a quantized per-tensor operand, or a PrepareError."""
    q = qparams(t) if t is not None and t.dtype.kind in "iu" else None
    if q is None:
        raise ctx.fail(f"{what} ({t.name!r}) of a quantized {ctx.op.opcode} has no quantization parameters")
    if q.per_channel:
        raise ctx.fail(f"{what} ({t.name!r}) of a quantized {ctx.op.opcode} has per-channel parameters; "
                       "LiteRT's kernel takes one scale per tensor")
    scale = float(q.scale[0])
    if not scale > 0 or not np.isfinite(scale):
        raise ctx.fail(f"{what} ({t.name!r}) has a non-positive or non-finite scale {scale}")
    return scale, int(q.zero_point[0]), q.qmin, q.qmax


def _q_operands(ctx: KernelContext, output: bool = True) -> list[tuple[float, int, int, int]]:
    """_q_tensor of inputs 0 and 1 (and of output 0 when `output`)."""
    ts = [(ctx.input_tensor(0), "input 0"), (ctx.input_tensor(1), "input 1")]
    if output:
        ts.append((ctx.output_tensor(0), "output"))
    return [_q_tensor(ctx, t, what) for t, what in ts]




def q_activation_range(ctx: KernelContext, scale: float, zero_point: int, qmin: int, qmax: int,
                       code: int | None = None) -> tuple[int, int]:
    """The op's fused activation range in the output's integer domain (_quant.activation_range)."""
    if code is None:
        code = ctx.options.get("fused_activation_function", NONE) or NONE
    try:
        return activation_range(code, scale, zero_point, qmin, qmax)
    except ValueError as e:
        raise ctx.fail(str(e)) from None


def _checked_log2(scale: float) -> int | None:
    """LiteRT's CheckedLog2: round(log2(scale)) when the scale is a power of two (within 1e-3 of the
    exponent, in float32 as LiteRT computes it), else None."""
    x = _F32(np.log(_F32(scale))) * (_F32(1.0) / _F32(np.log(_F32(2.0))))
    r = _F32(round_half_away32(_F32(x)))
    return int(r) if abs(_F32(x) - r) < _F32(1e-3) else None


def _q_add_sub(ctx: KernelContext, subtract: bool) -> Run:
    """Quantized ADD / SUB (int8, uint8, int16). Both inputs are rescaled to twice the larger input
    scale after a left shift of 20 bits (15 for int16): (x - zp) << left_shift times a multiplier
    below one, summed (or subtracted), rescaled to the output by a third multiplier, offset by the
    output's zero point and clamped to the fused activation's range. int16 with zero points 0 and
    power-of-two scales (and pot_scale_int16, the default) takes LiteRT's LSTM path: one input
    rounding-shifted right onto the other's scale, which must be the output's."""
    dt = _check_operands(ctx)
    name = ctx.op.opcode
    (s1, z1, _, _), (s2, z2, _, _), (so, zo, qmin, qmax) = _q_operands(ctx)
    lo, hi = q_activation_range(ctx, so, zo, qmin, qmax)
    a, b = ctx.inputs
    (o,) = ctx.outputs
    v = ctx.values
    if dt == np.int16:
        if z1 or z2 or zo:
            raise ctx.fail(f"int16 {name} needs zero points 0 (symmetric quantization), has "
                           f"{z1}, {z2} and {zo}")
        logs = [_checked_log2(s) for s in (s1, s2, so)]
        if ctx.options.get("pot_scale_int16", True) and None not in logs:
            return _q_pot16(ctx, subtract, logs, lo, hi)
    left = 15 if dt == np.int16 else 20
    twice_max = 2.0 * max(s1, s2)        # 2 * float: exact
    m1, sh1 = quantize_multiplier(s1 / twice_max)
    m2, sh2 = quantize_multiplier(s2 / twice_max)
    real_out = twice_max / float(_F32(1 << left) * _F32(so))
    if real_out >= 1.0:
        # ADD: LiteRT aborts (QuantizeMultiplierSmallerThanOneExp); SUB: its kernel then shifts right by
        # a negative amount (undefined)
        raise ctx.fail(f"quantized {name}: output scale {so} is too small for the input scales "
                       f"{s1} and {s2} (rescale multiplier {real_out:.4g} >= 1), not supported")
    mo, sho = quantize_multiplier(real_out)
    combine = np.subtract if subtract else np.add
    mbqm = multiply_by_quantized_multiplier
    if not subtract and dt != np.int16:
        return _q_add8(ctx, dt, (z1, m1, sh1), (z2, m2, sh2), (zo, mo, sho), lo, hi)

    def compute(x, y, code: int = 0):
        x = mbqm((x.astype(_I64) - z1) << left, m1, sh1)
        y = mbqm((y.astype(_I64) - z2) << left, m2, sh2)
        return np.clip(mbqm(combine(x, y), mo, sho) + zo, lo, hi).astype(dt)
    if dt != np.int16:
        return PairLookup(ctx, dt, compute, None)

    def run() -> None:
        v[o] = compute(v[a], v[b])
    return run


# LiteRT's builtin 8-bit ADD and MUL run their optimized kernels (optimized_integer_ops for int8,
# optimized_ops for uint8): a vector body over blocks of 16 (int8) or 8 (uint8) elements, NEON emulated
# on x86 through NEON_2_SSE, and the reference arithmetic on the elements after the last full block.
# The vector body rescales with vqrdmulh (halves rounded up) and gemmlowp's RoundingDivideByPOT (halves
# away from zero: the SSE build takes gemmlowp's generic form), narrows int32 to int16 (ADD: vmovn,
# wrapping; MUL: vqmovn, saturating), adds the output zero point in int16 (wrapping) and saturates to
# the 8-bit type. Shapes that broadcast run the same bodies along the inner runs of LiteRT's fivefold
# loops (BinaryBroadcastFiveFold), or the reference formula throughout (generic broadcast): the forms are
# computed for every element and selected by position (_q_body_modes).

def _broadcasts(s1: tuple, s2: tuple) -> bool:
    """Whether two shapes really broadcast: equal element counts that differ only by leading 1s
    ([1, 4] and [4]) run elementwise in LiteRT too."""
    rank = max(len(s1), len(s2))
    return (1,) * (rank - len(s1)) + tuple(s1) != (1,) * (rank - len(s2)) + tuple(s2)


def _fivefold(s1: tuple, s2: tuple):
    """LiteRT's ProcessBroadcastShapes on two broadcasting shapes: None for its generic category (no
    fivefold split), else [y0, y1, y2, y3, y4]; the output is y0 * y1 * y2 * y3 * y4 elements in that
    order, y4 the common innermost run and y3 the run a single element of one input is broadcast over."""
    rank = max(len(s1), len(s2))
    e1 = (1,) * (rank - len(s1)) + tuple(s1)
    e2 = (1,) * (rank - len(s2)) + tuple(s2)
    for i in range(rank - 1, -1, -1):
        if e1[i] == e2[i]:
            continue
        if e1[i] == 1:
            a, b = e1, e2
        elif e2[i] == 1:
            a, b = e2, e1
        else:
            return None
        break
    y = [1] * 5
    i = rank - 1
    for k, test in ((4, lambda i: a[i] == b[i]), (3, lambda i: a[i] == 1), (2, lambda i: a[i] == b[i]),
                    (1, lambda i: b[i] == 1), (0, lambda i: a[i] == b[i])):
        while i >= 0 and test(i):
            y[k] *= b[i] if k in (4, 3, 0) else a[i]
            i -= 1
    return None if i >= 0 else y


def _q_body_modes(s1: tuple, s2: tuple, block: int, scalar_block: int) -> np.ndarray:
    """Which code computes each output element (row-major, output shape) in LiteRT's optimized 8-bit
    ADD / MUL: 1 the elementwise vector body (blocks of `block` counted along each call's run: the whole
    tensor when the shapes do not broadcast, the inner run y4 of the fivefold loops when y4 > 1), 2 the
    scalar-broadcast vector body (blocks of `scalar_block` along the run y3 when y4 == 1), 0 the
    reference formula (tails of those runs, and every element of the generic broadcast)."""
    out = np.broadcast_shapes(tuple(s1), tuple(s2))
    n = int(np.prod(out, dtype=_I64))
    if not _broadcasts(s1, s2):
        run, body, mode = n, block, 1
    else:
        y = _fivefold(s1, s2)
        if y is None:
            return np.zeros(out, np.uint8)
        run, body, mode = (y[4], block, 1) if y[4] > 1 else (y[3], scalar_block, 2)
    j = np.arange(n) % max(run, 1)
    return np.where(j < run - run % body, mode, 0).astype(np.uint8).reshape(out)


class _Modes:
    """_q_body_modes cached by input shapes (static shapes compute it once)."""

    def __init__(self, block: int, scalar_block: int):
        self.block, self.scalar_block, self.cache = block, scalar_block, {}

    def __call__(self, s1: tuple, s2: tuple) -> tuple[np.ndarray, int | None]:
        """(the modes, their one value when every element has the same, else None)."""
        key = (tuple(s1), tuple(s2))
        m = self.cache.get(key)
        if m is None:
            if len(self.cache) > 16:
                self.cache.clear()
            modes = _q_body_modes(*key, self.block, self.scalar_block)
            first = int(modes.flat[0]) if modes.size else 0
            m = self.cache[key] = (modes, first if (modes == first).all() else None)
        return m


class PairLookup:
    """An 8-bit binary op as one table lookup: the run of the cpu kernel, and what a compiled kernel
    needs to do the same gather (`table`, `modes`). `compute(x, y, code)` gives the op's results (of
    type `dt`) for inputs x, y under one code of _q_body_modes (0 the reference formula, 1 and 2 the
    vector bodies); it runs once, at prepare time, on all 65,536 pairs of 8-bit values for each code,
    so the table holds exactly what the formulas give. A run then computes, per element, the index
    code * 65536 + x_bits * 256 + y_bits and gathers: a few passes over small integers instead of some
    twenty over int64 (a residual ADD of MobileNet: 73 -> ~14 us)."""

    def __init__(self, ctx: KernelContext, dt, compute, modes: _Modes | None):
        levels = np.arange(256, dtype=np.uint8).view(dt)
        grid_x, grid_y = np.repeat(levels, 256), np.tile(levels, 256)
        codes = range(3 if modes else 1)
        self.table = np.concatenate([compute(grid_x, grid_y, code) for code in codes]).astype(dt)
        self.modes = modes
        self._offsets: dict = {}
        (self._a, self._b), (self._o,) = ctx.inputs, ctx.outputs
        self._values = ctx.values

    def code_offset(self, s1: tuple, s2: tuple):
        """code << 16 for each element of the output (one int when every element has the same code)."""
        if self.modes is None:
            return 0
        key = (s1, s2)
        off = self._offsets.get(key)
        if off is None:
            if len(self._offsets) > 16:
                self._offsets.clear()
            mode, uniform = self.modes(s1, s2)
            off = self._offsets[key] = uniform << 16 if uniform is not None else mode.astype(np.intp) << 16
        return off

    def __call__(self) -> None:
        v = self._values
        x, y = np.asarray(v[self._a]), np.asarray(v[self._b])
        index = x.view(np.uint8).astype(np.intp) << 8
        index = index | y.view(np.uint8)
        off = self.code_offset(x.shape, y.shape)
        if not isinstance(off, int) or off:
            index = index + off
        v[self._o] = self.table.take(index)


def _vqrdmulh(x, multiplier: int):
    """NEON's vqrdmulh by a positive multiplier: round(x * m / 2**31), halves up."""
    return (x * _I64(multiplier) + (1 << 30)) >> 31


def _q_add8(ctx: KernelContext, dt, in1, in2, out, lo: int, hi: int) -> Run:
    """int8 / uint8 ADD as LiteRT's optimized kernels (BroadcastAddDispatch when the shapes broadcast),
    each element computed by the code _q_body_modes assigns it. The elementwise body shifts each offset
    input left (int8: by 20 plus its multiplier's non-positive exponent, then vqrdmulh; uint8: by 20,
    vqrdmulh, then an arithmetic right shift by the exponent, truncating toward minus infinity), sums,
    rescales with vqrdmulh and a rounding divide, wraps to int16, adds the output zero point in int16
    (wrapping), and saturates to the type; the scalar-broadcast body (AddScalarBroadcast, 8 elements
    for both types) is the same with the uint8 input scaling; the rest is the reference formula."""
    (z1, m1, sh1), (z2, m2, sh2), (zo, mo, sho) = in1, in2, out
    modes = _Modes(16 if dt == np.int8 else 8, 8)
    info = np.iinfo(dt)
    mbqm = multiply_by_quantized_multiplier
    left = 20

    def scaled(x, m, sh, shift_first: bool):
        if shift_first:
            s = left + sh
            return _vqrdmulh(wrap_int32(x << s) if s >= 0 else x >> -s, m)
        return _vqrdmulh(x << left, m) >> -sh

    def body(x, y, shift_first: bool):
        s = scaled(x, m1, sh1, shift_first) + scaled(y, m2, sh2, shift_first)
        s = rounding_divide_by_pot(_vqrdmulh(wrap_int32(s), mo), -sho)
        return np.clip(wrap_int16(wrap_int16(s) + zo), info.min, info.max)

    def reference(x, y):
        return mbqm(mbqm(x << left, m1, sh1) + mbqm(y << left, m2, sh2), mo, sho) + zo

    def compute(x, y, code: int):
        x = x.astype(_I64) - z1
        y = y.astype(_I64) - z2
        r = reference(x, y) if code == 0 else body(x, y, code == 1 and dt != np.uint8)
        return np.clip(r, lo, hi).astype(dt)
    return PairLookup(ctx, dt, compute, modes)


def _q_pot16(ctx: KernelContext, subtract: bool, logs: list[int], lo: int, hi: int) -> Run:
    """int16 ADD / SUB with power-of-two scales: each input's shift is its exponent minus the output's;
    one must be 0, neither positive (LiteRT refuses otherwise)."""
    name = ctx.op.opcode
    sh1, sh2 = logs[0] - logs[2], logs[1] - logs[2]
    if not (sh1 == 0 or sh2 == 0) or sh1 > 0 or sh2 > 0:
        raise ctx.fail(f"int16 {name} with power-of-two scales 2^{logs[0]}, 2^{logs[1]} and output 2^{logs[2]}: "
                       "one input's scale must equal the output's and the other's be no larger")
    t1, t2 = ctx.input_tensor(0), ctx.input_tensor(1)
    if not subtract and (t1.is_dynamic or t2.is_dynamic or tuple(t1.shape) != tuple(t2.shape)):
        # LiteRT's power-of-two int16 ADD runs its elementwise kernel on broadcast shapes too
        raise ctx.fail(f"int16 {name} with power-of-two scales does not broadcast (input shapes "
                       f"{list(t1.shape)} and {list(t2.shape)})")
    a, b = ctx.inputs
    (o,) = ctx.outputs
    v = ctx.values
    combine = np.subtract if subtract else np.add

    def run() -> None:
        x = rounding_divide_by_pot(v[a].astype(_I64), -sh1)
        y = rounding_divide_by_pot(v[b].astype(_I64), -sh2)
        v[o] = np.clip(combine(x, y), lo, hi).astype(np.int16)
    return run


@CPU.register("ADD", dtypes=("float32", "float16", "int32", "int64", "int16"))
def add(ctx: KernelContext) -> Run:
    return _arithmetic(ctx, operator.add)


# int8 / uint8: LiteRT's optimized kernels, elementwise and broadcasting (_q_add8).
@CPU.register_quantized("ADD", dtypes=("int8", "uint8", "int16"))
def add_quantized(ctx: KernelContext) -> Run:
    return _q_add_sub(ctx, subtract=False)


_BINARY_VALUES = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "FLOOR_DIV": np.floor_divide,
                  "FLOOR_MOD": np.mod, "MAXIMUM": np.maximum, "MINIMUM": np.minimum}


@value_rule("MUL", litert=True)
@value_rule("ADD", "SUB", "FLOOR_DIV", "FLOOR_MOD", "MAXIMUM", "MINIMUM")
def binary_value(n: Node, v: list):
    if n.op.opcode in ("FLOOR_DIV", "FLOOR_MOD") and not np.all(v[1]):
        return None
    return [activated(n.opts, _BINARY_VALUES[n.op.opcode](v[0], v[1]))]


@CPU.register("SUB", dtypes=("float32", "float16", "int32", "int64", "int16"))
def sub(ctx: KernelContext) -> Run:
    return _arithmetic(ctx, operator.sub)


@CPU.register_quantized("SUB", dtypes=("int8", "uint8", "int16"))
def sub_quantized(ctx: KernelContext) -> Run:
    return _q_add_sub(ctx, subtract=True)


@CPU.register("MUL", dtypes=("float32", "float16", "int32", "uint32", "int64", "int16", "complex64"))
def mul(ctx: KernelContext) -> Run:
    return _arithmetic(ctx, operator.mul)


# int8 / uint8: LiteRT's optimized kernels, elementwise and broadcasting, as ADD (_q_mul8). int16 is
# always LiteRT's reference kernel.
@CPU.register_quantized("MUL", dtypes=("int8", "uint8", "int16"))
def mul_quantized(ctx: KernelContext) -> Run:
    """Quantized MUL: (a - za) * (b - zb) rescaled by scale_a * scale_b / scale_out (computed in float32,
    as LiteRT's Prepare multiplies floats), plus the output's zero point, clamped to the activation's
    range. int16 needs zero points 0; int16 inputs with an 8-bit output (LiteRT's scale-free fixed-point
    path) are not supported."""
    ctx.expect_inputs(2)
    dt = check_same_types(ctx, 0, 1, same_output=False)
    if ctx.output_dtype() != dt:
        raise ctx.fail(f"quantized MUL of {type_name(dt)} inputs into {article(type_name(ctx.output_dtype()))} "
                       "output is not supported")
    (s1, z1, _, _), (s2, z2, _, _), (so, zo, qmin, qmax) = _q_operands(ctx)
    if dt == np.int16 and (z1 or z2 or zo):
        raise ctx.fail(f"int16 MUL needs zero points 0 (symmetric quantization), has {z1}, {z2} and {zo}")
    lo, hi = q_activation_range(ctx, so, zo, qmin, qmax)
    m, sh = quantize_multiplier(float(_F32(s1) * _F32(s2) / _F32(so)))
    a, b = ctx.inputs
    (o,) = ctx.outputs
    v = ctx.values
    if dt != np.int16:
        return _q_mul8(ctx, dt, z1, z2, zo, m, sh, lo, hi)

    def run() -> None:
        prod = (v[a].astype(_I64) - z1) * (v[b].astype(_I64) - z2)
        r = multiply_by_quantized_multiplier_wrapping(prod, m, sh) + zo
        v[o] = np.clip(r, lo, hi).astype(dt)
    return run


def _q_mul8(ctx: KernelContext, dt, z1: int, z2: int, zo: int, m: int, sh: int, lo: int, hi: int) -> Run:
    """int8 / uint8 MUL as LiteRT's optimized kernels (BroadcastMulDispatch when the shapes broadcast),
    each element computed by the code _q_body_modes assigns it (blocks of 16 for int8, 8 for uint8, in
    both bodies). The vector body shifts the product of the offset inputs left (wrapping int32) by the
    exponent's positive part, rescales it by vqrdmulh and a rounding divide by the negative part,
    narrows it to int16 (saturating, but wrapping in uint8's MulSimpleBroadcast), adds the output zero
    point in int16 (wrapping) and saturates to the type; the rest is the reference formula."""
    block = 16 if dt == np.int8 else 8
    info = np.iinfo(dt)
    left, right = max(sh, 0), max(-sh, 0)

    def compute(x, y, code: int):
        prod = (x.astype(_I64) - z1) * (y.astype(_I64) - z2)
        if code == 0:
            r = multiply_by_quantized_multiplier_wrapping(prod, m, sh) + zo
        else:
            p = rounding_divide_by_pot(_vqrdmulh(wrap_int32(prod << left), m), right)
            sat = p if dt == np.uint8 and code == 2 else np.clip(p, -(1 << 15), (1 << 15) - 1)   # vmovn wraps
            r = np.clip(wrap_int16(wrap_int16(sat) + zo), info.min, info.max)
        return np.clip(r, lo, hi).astype(dt)
    return PairLookup(ctx, dt, compute, _Modes(block, block))


@CPU.register("DIV", dtypes=("float32", "float16", "int32"))
def div(ctx: KernelContext) -> Run:
    if ctx.output_dtype().kind in "iu":
        def int_div(a, b):
            # C++ integer division truncates toward zero.
            _check_divisor(b)
            q = np.abs(a) // np.abs(b)
            return np.where((a < 0) != (b < 0), -q, q).astype(a.dtype)
        return _arithmetic(ctx, int_div)
    return _arithmetic(ctx, operator.truediv)


# LiteRT's quantized DIV (div.cc, reference/div.h; the optimized kernels use the same formula): the
# offset divisor's reciprocal as a Q0.31 fixed-point value from gemmlowp's Newton-Raphson
# (GetReciprocal), the offset dividend shifted left by its headroom times that reciprocal, then one
# rescale by the output multiplier.
_Q29_ONE = 1 << 29


def _saturating_shl(x, exponent: int):
    """gemmlowp's SaturatingRoundingMultiplyByPOT for a positive exponent (int32 saturation)."""
    threshold = (1 << (31 - exponent)) - 1
    return np.where(x > threshold, _I64(2**31 - 1),
                    np.where(x < -threshold, _I64(-2**31), x << exponent))


def _count_leading_zeros32(x):
    """CLZ of non-negative int32 values held as int64 (32 for 0)."""
    x = np.asarray(x, _I64)
    bits = np.zeros(x.shape, _I64)
    y = x.copy()
    for k in (16, 8, 4, 2, 1):
        big = y >= (_I64(1) << k)
        bits += np.where(big, k, 0)
        y = np.where(big, y >> k, y)
    return np.where(x == 0, 32, 31 - bits)


def _reciprocal_q31(d):
    """TFLite's GetReciprocal(d, 31): (Q0.31 value of 1 / (d * 2**-k), k) for positive int32 d, with
    2**(k-1) <= d < 2**k; gemmlowp's one_over_one_plus_x_for_x_in_0_1 on the mantissa."""
    srdhm = saturating_rounding_doubling_high_mul
    clz = _count_leading_zeros32(d)
    k = 31 - clz
    m = wrap_int32((d << clz) - (1 << 31))                          # x in [0, 1), Q0.31
    s = m + (2**31 - 1)                                              # RoundingHalfSum(x, One)
    half = _rounding_half_sum(s)
    x = wrap_int32(1515870810 + srdhm(half, _I64(-1010580540)))      # 48/17 - 32/17 * half, Q2.29
    for _ in range(3):
        e = wrap_int32(_Q29_ONE - srdhm(half, x))
        x = wrap_int32(x + _saturating_shl(srdhm(x, e), 2))
    return _saturating_shl(x, 1), k


def _rounding_half_sum(s):
    """(s + sign(s)) / 2 truncated toward zero, the halving of gemmlowp's RoundingHalfSum."""
    t = s + np.where(s >= 0, 1, -1)
    return np.where(t >= 0, t >> 1, -((-t) >> 1))


def _count_leading_sign_bits(x):
    """__builtin_clrsb of int32 values (31 for 0 and -1)."""
    return _count_leading_zeros32(np.where(x < 0, ~x, x)) - 1


def _rounding_divide_by_pot_x86(x, exponent):
    """RoundingDivideByPOT as LiteRT's x86 build computes it when the exponent reaches 32 (undefined in
    C++): the mask (1ll << exponent) - 1 truncates to int32 -1, so the rounding adds 1 to every
    non-negative x, and the arithmetic right shift takes its count modulo 32 (sar)."""
    exponent = np.asarray(exponent, _I64)
    wide = exponent >= 32
    small = rounding_divide_by_pot(x, np.where(wide, 0, exponent))
    return np.where(wide, (x >> (exponent & 31)) + (x >= 0), small)


@CPU.register_quantized("DIV", dtypes=("int8", "uint8", "int16"))
def div_quantized(ctx: KernelContext) -> Run:
    """Quantized DIV: (a - za) / (b - zb) as a Q0.31 reciprocal of the divisor times the dividend shifted
    left by its headroom, rescaled by scale_a / (scale_b * scale_out) (float32, as LiteRT's Prepare),
    plus the output's zero point, clamped to the activation's range. Signs are moved to the dividend.
    Elementwise and broadcasting compute the same formula, for int16 too (LiteRT 2.3 runs int16 through
    this fixed-point kernel; later LiteRT versions divide non-broadcast int16 in float instead).
    A divisor element equal to its zero point raises ZeroDivisionError (LiteRT fails the invoke)."""
    ctx.expect_inputs(2)
    dt = check_same_types(ctx, 0, 1, same_output=True)
    (s1, z1, _, _), (s2, z2, _, _), (so, zo, qmin, qmax) = _q_operands(ctx)
    lo, hi = q_activation_range(ctx, so, zo, qmin, qmax)
    m, sh = quantize_multiplier(float(_F32(s1) / (_F32(s2) * _F32(so))))
    # The smallest headroom of a dividend (|a - za| < 2**bits) bounds the final shift; beyond it
    # LiteRT would shift right by a negative amount (undefined; multipliers of 2**22 and more for
    # 8-bit, 2**14 and more for int16).
    min_headroom = 31 - (np.iinfo(dt).bits + 1)
    if sh > min_headroom:
        raise ctx.fail(f"quantized DIV: rescale multiplier {s1 / (s2 * so):.4g} is too large "
                       f"(scales {s1}, {s2}, output {so})")
    a, b = ctx.inputs
    (o,) = ctx.outputs
    v = ctx.values
    srdhm = saturating_rounding_doubling_high_mul

    def run() -> None:
        x = np.asarray(v[a]).astype(_I64) - z1
        d = np.asarray(v[b]).astype(_I64) - z2
        if np.any(d == 0):
            raise ZeroDivisionError("quantized division by zero (a divisor equal to its zero point)")
        neg = d < 0
        x, d = np.where(neg, -x, x), np.where(neg, -d, d)
        x, d = np.broadcast_arrays(x, d)
        inv, k = _reciprocal_q31(d)
        head = _count_leading_sign_bits(x)
        quot = srdhm(x << head, inv)
        r = _rounding_divide_by_pot_x86(srdhm(quot, _I64(m)), head + k - sh) + zo
        v[o] = np.clip(r, lo, hi).astype(dt)
    return run


@CPU.register("FLOOR_DIV", dtypes=("float32", "int32", "int64", "int16", "int8"))
def floor_div(ctx: KernelContext) -> Run:
    if ctx.output_dtype().kind in "iu":
        def int_floor_div(a, b):
            _check_divisor(b)
            return np.floor_divide(a, b)
        return _binary(ctx, int_floor_div)

    def float_floor_div(a, b):
        # LiteRT refuses a zero divisor for float FLOOR_DIV too (where DIV and FLOOR_MOD give inf/NaN)
        _check_divisor(b)
        return np.floor(np.divide(a, b))
    return _binary(ctx, float_floor_div)


@CPU.register("FLOOR_MOD", dtypes=("float32", "int32", "int64", "int16", "int8"))
def floor_mod(ctx: KernelContext) -> Run:
    if ctx.output_dtype().kind in "iu":
        def int_floor_mod(a, b):
            _check_divisor(b)
            return np.mod(a, b)
        return _binary(ctx, int_floor_mod)

    def float_floor_mod(a, b):
        r = np.fmod(a, b)
        return np.where((r != 0) & ((b < 0) != (r < 0)), r + b, r).astype(r.dtype)
    return _binary(ctx, float_floor_mod)


@CPU.register("POW", dtypes=("float32", "int32"))
def pow_(ctx: KernelContext) -> Run:
    if ctx.output_dtype().kind in "iu":
        def int_pow(a, b):
            if np.any(b < 0):
                raise ValueError("POW: negative exponent for an integer tensor")
            return np.power(a, b)
        return _binary(ctx, int_pow)
    return _binary(ctx, np.power)


@CPU.register("MAXIMUM", dtypes=("float32", "float16", "int32", "int64", "int16", "int8", "uint8"))
def maximum(ctx: KernelContext) -> Run:
    # TFLite computes `a > b ? a : b`, so a NaN in `a` yields `b` (np.maximum would propagate it).
    return _binary(ctx, lambda a, b: np.where(a > b, a, b))


@CPU.register("MINIMUM", dtypes=("float32", "float16", "int32", "int64", "int16", "int8", "uint8"))
def minimum(ctx: KernelContext) -> Run:
    return _binary(ctx, lambda a, b: np.where(a < b, a, b))


# Quantized MAXIMUM / MINIMUM compare the stored integers whatever the tensors' parameters: LiteRT
# neither checks nor uses them.
CPU.register_quantized("MAXIMUM", dtypes=("int8", "uint8", "int16"))(maximum)
CPU.register_quantized("MINIMUM", dtypes=("int8", "uint8", "int16"))(minimum)


@CPU.register("SQUARED_DIFFERENCE", dtypes=("float32", "float16", "int32"))
def squared_difference(ctx: KernelContext) -> Run:
    def sq_diff(a, b):
        d = np.subtract(a, b)
        return np.multiply(d, d)
    return _binary(ctx, sq_diff)


@CPU.register_quantized("SQUARED_DIFFERENCE", dtypes=("int8",))
def squared_difference_quantized(ctx: KernelContext) -> Run:
    """int8 SQUARED_DIFFERENCE: both inputs rescaled as ADD's (left shift 7, twice the larger scale),
    their difference squared and rescaled by (2 * max scale)**2 / (2**14 * output scale), clamped to
    int8 (no activation); computed once for every pair of values (PairLookup)."""
    dt = _check_operands(ctx)
    (s1, z1, _, _), (s2, z2, _, _), (so, zo, qmin, qmax) = _q_operands(ctx)
    twice_max = 2.0 * max(s1, s2)
    m1, sh1 = quantize_multiplier(s1 / twice_max)
    m2, sh2 = quantize_multiplier(s2 / twice_max)
    real_out = twice_max * twice_max / float(_F32(1 << 14) * _F32(so))
    if real_out >= 1.0:
        raise ctx.fail(f"quantized SQUARED_DIFFERENCE: output scale {so} is too small for the input "
                       f"scales {s1} and {s2} (rescale multiplier {real_out:.4g} >= 1; LiteRT aborts)")
    mo, sho = quantize_multiplier(real_out)
    mbqm = multiply_by_quantized_multiplier

    def compute(x, y, code: int):
        x = mbqm((x.astype(_I64) - z1) << 7, m1, sh1)
        y = mbqm((y.astype(_I64) - z2) << 7, m2, sh2)
        d = x - y
        return np.clip(mbqm(d * d, mo, sho) + zo, qmin, qmax).astype(dt)
    # a table of every pair (the formula's int64 passes cost 47 us a call on a layer norm's [2, 16, 32])
    return PairLookup(ctx, dt, compute, None)


_COMPARISONS = {
    "EQUAL": operator.eq, "NOT_EQUAL": operator.ne, "LESS": operator.lt, "LESS_EQUAL": operator.le,
    "GREATER": operator.gt, "GREATER_EQUAL": operator.ge,
}


def _register_comparison(name: str, ufunc) -> None:
    @CPU.register(name, dtypes=("float32", "float16", "int32", "int64", "int16", "bool", "string"))
    def compare(ctx: KernelContext) -> Run:
        if ctx.output_dtype() != np.bool_:
            raise ctx.fail(f"output type {type_name(ctx.output_dtype())}, expected bool")
        return _binary(ctx, ufunc, same_output=False)
    compare.__name__ = name.lower()


for _name, _ufunc in _COMPARISONS.items():
    _register_comparison(_name, _ufunc)


def _register_quantized_comparison(name: str, ufunc) -> None:
    """Quantized comparisons (comparisons.cc): int8/uint8 operands, and int16 ones of EQUAL and
    NOT_EQUAL, are brought to a common real scale, (x - zp) << 8 times a multiplier made of the
    input's own scale; int16 LESS/LESS_EQUAL/GREATER/GREATER_EQUAL compare the stored integers."""
    @CPU.register_quantized(name, dtypes=("int8", "uint8", "int16"))
    def compare(ctx: KernelContext) -> Run:
        if ctx.output_dtype() != np.bool_:
            raise ctx.fail(f"output type {type_name(ctx.output_dtype())}, expected bool")
        dt = _check_operands(ctx, same_output=False)
        if dt == np.int16 and name not in ("EQUAL", "NOT_EQUAL"):
            return _binary(ctx, ufunc, same_output=False)
        (s1, z1, _, _), (s2, z2, _, _) = _q_operands(ctx, output=False)
        if s1 >= 1.0 or s2 >= 1.0:
            # LiteRT's kernel applies a multiplier >= 1 as a right shift by a negative amount
            raise ctx.fail(f"quantized {name} with an input scale >= 1 ({s1}, {s2}) is not supported")
        m1, sh1 = quantize_multiplier(s1)
        m2, sh2 = quantize_multiplier(s2)
        mbqm = multiply_by_quantized_multiplier
        a, b = ctx.inputs
        (o,) = ctx.outputs
        v = ctx.values

        def run() -> None:
            x = mbqm((v[a].astype(_I64) - z1) << 8, m1, sh1)
            y = mbqm((v[b].astype(_I64) - z2) << 8, m2, sh2)
            v[o] = ufunc(x, y)
        return run
    compare.__name__ = name.lower() + "_quantized"


for _name, _ufunc in _COMPARISONS.items():
    _register_quantized_comparison(_name, _ufunc)


@CPU.register("LOGICAL_AND", dtypes=("bool",))
def logical_and(ctx: KernelContext) -> Run:
    # on bools, & (bitwise_and) is logical_and, and 40x cheaper on numpy bool scalars (a loop's cond)
    return _binary(ctx, operator.and_)


@CPU.register("LOGICAL_OR", dtypes=("bool",))
def logical_or(ctx: KernelContext) -> Run:
    return _binary(ctx, operator.or_)


# Shape rules: the inputs' broadcast shape.
shape_rule("ADD", "SUB", "MUL", "DIV", "FLOOR_DIV", "FLOOR_MOD", "POW", "MAXIMUM", "MINIMUM",
           "SQUARED_DIFFERENCE", "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL",
           "LOGICAL_AND", "LOGICAL_OR")(broadcasting)


# ----------------------------------------------------------------------------------- gradients

def sum_to_shape(d: np.ndarray, shape: tuple) -> np.ndarray:
    """d summed over the axes broadcasting added (leading) or stretched (size 1 in `shape`): the
    gradient of broadcasting a `shape` array to d's shape."""
    lead = d.ndim - len(shape)
    if lead < 0:
        raise ValueError(f"cannot sum shape {list(d.shape)} to the larger rank of {list(shape)}")
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and d.shape[lead + i] != 1)
    out = np.sum(d, axis=axes, keepdims=True) if axes else d
    return out.reshape(shape)


@CPU.register("OnertPySumTo", dtypes=("float32", "float16", "float64"))
def sum_to(ctx: KernelContext) -> Run:
    """onert-py's gradient op: input 0 summed to the shape of input 1 (backends/gradients.sum_to)."""
    ctx.expect_inputs(2)
    (d_i, like_i), (o,) = ctx.inputs, ctx.outputs
    v = ctx.values

    def run() -> None:
        d = v[d_i]
        target = np.shape(v[like_i])
        v[o] = d if np.shape(d) == target else np.asarray(sum_to_shape(d, target), dtype=np.asarray(d).dtype)
    return run


@shape_rule("OnertPySumTo")
def sum_to_shape_rule(n: Node):
    return [n.shape(1)]


@grad_rule("OnertPySumTo")
def sum_to_grad(g: gr.GradNode):
    # the gradient of a sum over broadcast axes is the broadcast back
    return [g.emit("BROADCAST_TO", g.dy(), gr.shape_of(g, g.x(0))), None]


def _broadcast_grads(g: gr.GradNode, da: int | None, db: int | None) -> list:
    """The input gradients of a broadcasting binary op, each summed back to its input's shape."""
    return [gr.sum_to_input(g, 0, da), gr.sum_to_input(g, 1, db)]


@grad_rule("ADD")
def add_grad(g: gr.GradNode):
    d = g.dy()
    return _broadcast_grads(g, d, d)


@grad_rule("SUB")
def sub_grad(g: gr.GradNode):
    d = g.dy()
    return _broadcast_grads(g, d, gr.neg(g, d) if g.differentiable(1) else None)


@grad_rule("MUL")
def mul_grad(g: gr.GradNode):
    d = g.dy()
    return _broadcast_grads(g, gr.mul(g, d, g.x(1)) if g.differentiable(0) else None,
                            gr.mul(g, d, g.x(0)) if g.differentiable(1) else None)


@grad_rule("DIV")
def div_grad(g: gr.GradNode):
    # y = a / b: da = d / b, db = -d * y / b
    d = g.dy()
    da = gr.div(g, d, g.x(1)) if g.differentiable(0) else None
    db = gr.neg(g, gr.div(g, gr.mul(g, d, g.y()), g.x(1))) if g.differentiable(1) else None
    return _broadcast_grads(g, da, db)


@grad_rule("POW")
def pow_grad(g: gr.GradNode):
    # z = x^y: dx = d * y * x^(y - 1); dy = d * z * log(x) where x > 0, 0 elsewhere (TF's _PowGrad)
    d = g.dy()
    x, y = g.x(0), g.x(1)
    dx = dy = None
    if g.differentiable(0):
        dx = gr.mul(g, gr.mul(g, d, y), g.emit("POW", x, gr.sub(g, y, gr.scalar(g, 1.0, y))))
    if g.differentiable(1):
        zero = gr.scalar(g, 0.0, x)
        log_x = gr.where(g, g.emit("GREATER", x, zero, dtype=np.bool_), g.emit("LOG", x), zero)
        dy = gr.mul(g, gr.mul(g, d, g.y()), log_x)
    return _broadcast_grads(g, dx, dy)


def _max_min_grads(g: gr.GradNode, selector: str) -> list:
    # x takes the cotangent where selector(x, y) holds (ties included), y elsewhere (TF's
    # _MaximumMinimumGrad: GREATER_EQUAL for MAXIMUM, LESS_EQUAL for MINIMUM)
    d = g.dy()
    xmask = g.emit(selector, g.x(0), g.x(1), dtype=np.bool_)
    zero = gr.scalar(g, 0.0, d)
    dx = gr.where(g, xmask, d, zero) if g.differentiable(0) else None
    dy = gr.where(g, xmask, zero, d) if g.differentiable(1) else None
    return _broadcast_grads(g, dx, dy)


@grad_rule("MAXIMUM")
def maximum_grad(g: gr.GradNode):
    return _max_min_grads(g, "GREATER_EQUAL")


@grad_rule("MINIMUM")
def minimum_grad(g: gr.GradNode):
    return _max_min_grads(g, "LESS_EQUAL")


@grad_rule("SQUARED_DIFFERENCE")
def squared_difference_grad(g: gr.GradNode):
    # (x - y)^2: dx = 2 d (x - y), dy = -dx
    d = g.dy()
    x_grad = gr.mul(g, gr.mul(g, d, gr.scalar(g, 2.0, d)), gr.sub(g, g.x(0), g.x(1)))
    return _broadcast_grads(g, x_grad, gr.neg(g, x_grad) if g.differentiable(1) else None)


@grad_rule("FLOOR_MOD")
def floor_mod_grad(g: gr.GradNode):
    # x - floor(x / y) * y: dx = d, dy = -d * floor(x / y) (TF's _FloorModGrad; floor(x / y) rather
    # than FLOOR_DIV, which refuses a zero divisor)
    d = g.dy()
    dy = None
    if g.differentiable(1):
        dy = gr.neg(g, gr.mul(g, d, g.emit("FLOOR", gr.div(g, g.x(0), g.x(1)))))
    return _broadcast_grads(g, d, dy)


# TF: FloorDiv returns no gradient; comparisons and logical ops are not differentiable.
no_gradient("FLOOR_DIV", "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL",
            "LOGICAL_AND", "LOGICAL_OR")
