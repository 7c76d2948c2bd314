"""jit kernels of the activations family (cpu/activations.py): the 8-bit-input SOFTMAX of a quantized
classifier's head, where numpy's dozen passes over a row of ten values cost ~25 us and a compiled loop
~1 us. The table, parameters and checks are the cpu kernel's (Softmax8); the loop does its arithmetic
value by value, in the same float32 steps. The float32 SOFTMAX of a float classifier's head (numpy's
five passes over [1, 1000]: 5 us alone, 10-45 us inside a model, where they start with cold caches)
is one compiled loop too."""
from __future__ import annotations

import math

import numpy as np

from onert_py.backends.cpu._quant import qparams
from onert_py.backends.cpu.activations import Softmax8
from onert_py.backends.jit._numba import compile_now, kernel
from onert_py.backends.jit._vmath import exp32
from onert_py.backends.jit.codegen import Statement, declared_shape_run, statement
from onert_py.backends.registry import CPU, JIT, KernelContext, Run

_F32 = np.float32


@kernel
def _to_int32_x86(v):
    """_quant.to_int32_x86 of one float: truncation, INT32_MIN outside the int32 range or for NaN."""
    d = np.float64(v)
    if d >= -2147483648.0 and d < 2147483648.0:
        return np.int64(math.trunc(d))
    return np.int64(-2147483648)


@kernel
def _round_half_away(v):
    """_quant.round_half_away32 of one float32 (exact in float64: |v| + 0.5 never rounds there, and
    float32 values from 2**23 on are integers already)."""
    d = np.float64(v)
    return math.copysign(math.floor(abs(d) + 0.5), d)


@kernel
def _softmax_rows(x, table, s_out, z_out, lo, hi, trunc_half, y):
    """Softmax8's arithmetic over rows of x [rows, n] (8-bit) into y [rows, n]: exp by table of
    max - x, the row's float32 sum in order, p = e * (1 / (sum * s_out)), rounded to the output."""
    for r in range(x.shape[0]):
        row = x[r]
        top = np.int64(row[0])
        for i in range(1, row.size):
            if np.int64(row[i]) > top:
                top = np.int64(row[i])
        total = _F32(0.0)
        for i in range(row.size):
            total += table[top - np.int64(row[i])]
        inv = _F32(1.0) / _F32(total * s_out)
        for i in range(row.size):
            p = _F32(table[top - np.int64(row[i])] * inv)
            if trunc_half:
                q = _to_int32_x86(_F32(p + _F32(0.5)))
            else:
                q = _to_int32_x86(_round_half_away(p)) + z_out
            y[r, i] = min(max(q, lo), hi)


def _accepts_softmax(op, sg) -> bool:
    """Static shapes, an 8-bit input with per-tensor parameters (int16 inputs: the cpu kernel)."""
    if len(op.inputs) != 1 or op.inputs[0] < 0 or len(op.outputs) != 1:
        return False
    x, y = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
    return (x.type_name in ("INT8", "UINT8") and not x.is_dynamic and not y.is_dynamic and len(x.shape) > 0
            and qparams(x) is not None)


@JIT.register_quantized("SOFTMAX", dtypes=("int8", "uint8"), accepts=_accepts_softmax)
def softmax_quantized(ctx: KernelContext) -> Run:
    """8-bit-input SOFTMAX: the cpu kernel's checks and table (Softmax8), one compiled loop per run."""
    cpu = CPU.kernel("SOFTMAX", True)(ctx)
    if not isinstance(cpu, Softmax8):
        return cpu
    shape = tuple(ctx.input_tensor(0).shape)
    n = shape[-1]
    lo, hi = cpu.lo, cpu.hi
    table, s_out, z_out, trunc = cpu.table, _F32(cpu.s_out), int(cpu.z_out), bool(cpu.trunc_half)
    compile_now(_softmax_rows, np.zeros((1, 1), ctx.input_tensor(0).dtype), table, s_out, z_out, lo, hi, trunc,
                np.zeros((1, 1), cpu.out_dtype))
    return declared_shape_run(ctx, cpu, lambda x, y: _softmax_rows(
        np.ascontiguousarray(x).reshape(-1, n), table, s_out, z_out, lo, hi, trunc, y.reshape(-1, n)))


@kernel
def _row_sum(row):
    """The sum of a float32 row as numpy adds a block of up to 128 values: eight partial sums over
    strides of eight, combined pairwise, then the rest in order; longer rows block by block."""
    n = row.size
    total = _F32(0.0)
    for b in range(0, n, 128):
        m = min(128, n - b)
        if m < 8:
            part = _F32(0.0)
            for i in range(b, b + m):
                part += row[i]
        else:
            r0, r1, r2, r3 = row[b], row[b + 1], row[b + 2], row[b + 3]
            r4, r5, r6, r7 = row[b + 4], row[b + 5], row[b + 6], row[b + 7]
            i = b + 8
            while i + 8 <= b + m:
                r0 += row[i]
                r1 += row[i + 1]
                r2 += row[i + 2]
                r3 += row[i + 3]
                r4 += row[i + 4]
                r5 += row[i + 5]
                r6 += row[i + 6]
                r7 += row[i + 7]
                i += 8
            part = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
            while i < b + m:
                part += row[i]
                i += 1
        total += part
    return total


@kernel
def _softmax_float_rows(x, beta, y):
    """The cpu kernel's float32 SOFTMAX over rows of x [rows, n] into y: the max, exp((x - max) * beta)
    (exp32 for numpy's exp: within an ulp), the row's sum (_row_sum), each value divided by it. A NaN
    makes its row NaN, as numpy's NaN max does."""
    n = x.shape[1]
    for r in range(x.shape[0]):
        top = x[r, 0]
        for j in range(1, n):
            if x[r, j] > top or x[r, j] != x[r, j]:
                top = x[r, j]
        for j in range(n):
            y[r, j] = exp32((x[r, j] - top) * beta)
        total = _row_sum(y[r])
        for j in range(n):
            y[r, j] = y[r, j] / total


def _accepts_float_softmax(op, sg) -> bool:
    """float32 in and out of one static shape (rank 1 or more, rows of at least one value)."""
    if len(op.inputs) != 1 or op.inputs[0] < 0 or len(op.outputs) != 1:
        return False
    x, y = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
    return (x.dtype == _F32 and y.dtype == _F32 and not x.is_dynamic and len(x.shape) > 0
            and tuple(x.shape) == tuple(y.shape) and x.shape[-1] > 0
            and qparams(x) is None and qparams(y) is None)


@JIT.register("SOFTMAX", dtypes=("float32",), accepts=_accepts_float_softmax)
def softmax(ctx: KernelContext) -> Run:
    """float32 SOFTMAX over the last axis, one compiled loop (other run-time shapes: the cpu kernel)."""
    cpu = CPU.kernel("SOFTMAX")(ctx)
    shape = tuple(ctx.input_tensor(0).shape)
    n = shape[-1]
    beta = _F32(ctx.options.get("beta", 1.0))
    compile_now(_softmax_float_rows, np.zeros((1, 1), _F32), beta, np.zeros((1, 1), _F32))
    return declared_shape_run(ctx, cpu, lambda x, y: _softmax_float_rows(
        np.ascontiguousarray(x, _F32).reshape(-1, n), beta, y.reshape(-1, n)))


# ------------------------------------------------------------ inside compiled loops and segments

@statement("SOFTMAX")
def _softmax_in_loop(op, sg) -> Statement | None:
    """float32 SOFTMAX over the last axis in the cpu kernel's steps, row by row: the max, (x - max) *
    beta, exp (exp32 for numpy's exp), the sum (in order: numpy's is pairwise past 8 values, a last-bit
    difference), each value divided by it. A NaN in a row makes its sum NaN, so the whole row NaN, as
    numpy's NaN max does."""
    if len(op.inputs) != 1 or op.inputs[0] < 0 or len(op.outputs) != 1:
        return None
    x, y = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
    if (x.dtype != _F32 or y.dtype != _F32 or not x.shape or tuple(x.shape) != tuple(y.shape)
            or qparams(x) is not None or qparams(y) is not None or x.shape[-1] == 0):
        return None
    c = int(x.shape[-1])
    rows = int(np.prod(x.shape, dtype=np.int64)) // c
    beta = _F32(op.options.get("beta", 1.0))
    scaled = "" if beta == 1 else f" * np.float32({float(beta)!r})"

    def emit(out, ins, arg, tmp):
        r, j, top, v, e, total = (tmp(n) for n in ("r", "j", "top", "v", "e", "total"))
        at = f"{r} * {c} + {j}"
        return [f"for {r} in range({rows}):",
                f"    {top} = {ins[0]}[{r} * {c}]",
                f"    for {j} in range(1, {c}):",
                f"        {v} = {ins[0]}[{at}]",
                f"        if {v} > {top}:",
                f"            {top} = {v}",
                f"    {total} = np.float32(0.0)",
                f"    for {j} in range({c}):",
                f"        {e} = exp32(({ins[0]}[{at}] - {top}){scaled})",
                f"        {out}[{at}] = {e}",
                f"        {total} += {e}",
                f"    for {j} in range({c}):",
                f"        {out}[{at}] = {out}[{at}] / {total}"]
    return Statement((0,), emit)
