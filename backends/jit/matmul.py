"""FULLY_CONNECTED and BATCH_MATMUL on the jit backend. Quantized int8: the integer dot products and
LiteRT's output stage in one pass (BATCH_MATMUL: one compiled loop over its small matrices). float32
FULLY_CONNECTED (at the end of this module): the packed GEMM (jit/_gemm.py) with bias, clamp and the
elementwise ops fused after it in its kernel, or, for few units, the cpu kernel's sgemm and then
those in one compiled pass (jit/elementwise.py, epilogue_pass).

The cpu kernel (backends/cpu/matmul.py) computes the exact sums with a float64 BLAS product (int8
weights widened 8x at prepare) and then rescales them in several numpy passes. Here each output is an
int32 dot product of int8 rows (LLVM turns the loop into vpmaddwd: 32 products per instruction), the
zero points folded into a per-unit constant and a per-row sum, then rescaled at once as ruy does
(cpu/_quant.py multiply_by_quantized_multiplier_half_up: the int32 shift, the high multiply rounded half
up, the rounding right shift), offset by the output zero point and clamped to the activation's range.
int32 arithmetic wraps where LiteRT's accumulators wrap: the sum modulo 2**32 is the same in any order.

Taken: int8 input, constant int8 weights [units, depth] (per tensor, or per output unit with zero
points 0), an optional constant int32 bias, NONE / RELU / RELU_N1_TO_1 / RELU6, keep_num_dims, static
shapes. Everything else (shuffled weights, int4, int16, uint8, hybrid, sparse weights, run-time weights
or bias, and the shapes where BLAS wins) stays on the cpu kernel, which also gives the prepare errors.
"""
from __future__ import annotations

import numpy as np

from onert_py.backends.cpu._quant import activation_range, qparams, quantize_multipliers
from onert_py.backends.cpu.conv import _CLAMPS
from onert_py.backends.cpu.matmul import _check_fc_input, _fc_output_shape, _product_multiplier, batch_matmul_adjoints
from onert_py.backends.jit._gemm import PANEL, PackedProduct, gemm_wins, pack_panels, pad_bias
from onert_py.backends.jit.conv import _PARALLEL_MIN as _PARALLEL_MIN_FLOAT
from onert_py.backends.jit.conv import _compile_time, _requantize, _static
from onert_py.backends.jit.elementwise import epilogue_fits, epilogue_pass, fused_chain, other_shapes, unfused
from onert_py.backends.jit._numba import kernel, prange, threads
from onert_py.backends.jit.codegen import Statement, broadcast_index, clamp, statement
from onert_py.backends.registry import CPU, JIT, KernelContext, Run

_INT32_MAX = (1 << 31) - 1
# At or above this many multiply-adds an FC is split over numba's threads (by output units).
_PARALLEL_MIN = 1 << 17


def gemm_rows_call(a: str, sm: int, sk: int, panels: str, bias: str, lo: str, hi: str, c: str, m: int, k: int,
                   n: int) -> str:
    """Generated code calling the packed GEMM's rows 0..m of c = a @ B. The sizes go as int64 values, not
    literals: numba compiles a called function once per literal value of an argument, and each
    specialization of the GEMM (its inlined SIMD blocks) is a compile of seconds to tens of seconds."""
    sizes = ", ".join(f"np.int64({v})" for v in (sm, sk))
    rows = ", ".join(f"np.int64({v})" for v in (0, m, k, n))
    return f"gemm_rows({a}, {sizes}, {panels}, {bias}, {lo}, {hi}, {c}, {rows})"


@kernel
def _fc_units(x, w, bias, xsum, zw, mult, left, right, zo, lo, hi, y, j0, j1):
    """y[:, j0:j1] of an int8 FULLY_CONNECTED: x [M, D] int8, w [U, D] int8, bias [U] int64 (the bias
    with the input zero point folded in), xsum [M] (the rows' sums, used when zw != 0)."""
    m_rows, depth = x.shape
    for j in range(j0, j1):
        wr = w[j]
        b, m, sl, sr = bias[j], mult[j], left[j], right[j]
        nudge = (np.int64(1) << (sr - 1)) if sr > 0 else np.int64(0)
        for i in range(m_rows):
            xr = x[i]
            acc = np.int32(0)
            for k in range(depth):      # int32, truncated each step: LLVM's vpmaddwd reduction
                acc = np.int32(acc + np.int32(xr[k]) * np.int32(wr[k]))
            a = np.int64(np.int32(np.int64(acc) + b - zw * xsum[i]))     # wraps as int32 (C)
            a = np.int64(np.int32(a << sl))
            total = ((a * m + (np.int64(1) << 30)) >> 31) + nudge
            q = (np.int64(1) << (31 - sr)) if total > _INT32_MAX else total >> sr
            y[i, j] = min(max(q + zo, lo), hi)


@kernel(parallel=True)
def _fc(x, w, bias, zw, mult, left, right, zo, lo, hi, y, chunks):
    """Every output of the FC, the units in `chunks` parts on numba's threads when chunks > 1."""
    m_rows = x.shape[0]
    xsum = np.zeros(m_rows, np.int64)
    if zw != 0:
        for i in range(m_rows):
            s = 0
            xr = x[i]
            for k in range(xr.size):
                s += xr[k]
            xsum[i] = s
    units = w.shape[0]
    if chunks > 1:
        for t in prange(chunks):
            _fc_units(x, w, bias, xsum, zw, mult, left, right, zo, lo, hi, y,
                      t * units // chunks, (t + 1) * units // chunks)
    else:
        _fc_units(x, w, bias, xsum, zw, mult, left, right, zo, lo, hi, y, 0, units)


def _wins(rows: int, depth: int, units: int) -> bool:
    """Where the jit kernel beats the cpu kernel (benchmarks/jit_pool_matmul.py, 1 thread, median µs
    cpu/jit): everywhere measured, most on single rows, where the cpu kernel's BLAS call and numpy
    output passes are fixed costs: classifier heads 1x1280 -> 1000 192/47.5, 1x1024 -> 1001 178/40,
    small 1x64 -> 16 27/3.0 and 1x512 -> 10 29/3.1, 1x2048 -> 2048 1185/168; batches 1.65x-4x (4x1280 ->
    1000 657/163, 32x1024 -> 1024 2512/1291, 128x384 -> 1536 4587/2666, 256x256 -> 256 1027/621).
    The cpu kernel multiplies in float64 (8 bytes a weight); the jit kernel's int32 dot products
    (vpmaddwd) read the int8 weights themselves."""
    return True


def _accepts(op, sg) -> bool:
    """int8 x int8 -> int8 with constant weights (and bias) the cpu kernel would run (else it refuses
    with its own message), in the shapes where the jit kernel wins."""
    o = op.options
    if len(op.inputs) not in (2, 3) or len(op.outputs) != 1 or min(op.inputs[:2]) < 0:
        return False
    if (o.get("weights_format", 0) or 0) != 0:
        return False
    if (o.get("fused_activation_function", 0) or 0) not in (0, 1, 2, 3):
        return False
    x_t, w_t, y_t = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]], sg.tensors[op.outputs[0]]
    b_t = sg.tensors[op.inputs[2]] if len(op.inputs) == 3 and op.inputs[2] >= 0 else None
    if (x_t.type_name, w_t.type_name, y_t.type_name) != ("INT8", "INT8", "INT8"):
        return False
    if w_t.data is None or w_t.sparsity is not None or len(w_t.shape) != 2 or x_t.is_dynamic:
        return False
    qx, qw, qy = qparams(x_t), qparams(w_t), qparams(y_t)
    if qx is None or qw is None or qy is None or qx.per_channel or qy.per_channel:
        return False
    units, depth = w_t.shape
    if b_t is not None and (b_t.type_name != "INT32" or b_t.data is None or b_t.data.size != units):
        return False
    if qw.per_channel:
        if qw.axis != 0 or qw.scale.size != units or np.any(qw.zero_point != 0):
            return False
    elif b_t is not None:     # the cpu kernel's (GetQuantizedConvolutionMultipler's) bias scale check
        qb = qparams(b_t)
        sb = float(qb.scale[0]) if qb is not None else 0.0
        sx, sw, so = float(qx.scale[0]), float(qw.scale[0]), float(qy.scale[0])
        if not so > 0 or abs(sx * sw - sb) / so > 0.02:   # a zero or NaN output scale: cpu refuses it
            return False
    size = int(np.prod(x_t.shape, dtype=np.int64))
    keep = bool(o.get("keep_num_dims", False))
    if depth == 0 or size % depth or (keep and tuple(x_t.shape)[-1:] != (depth,)):
        return False
    return _wins(size // depth, depth, units)


@JIT.register_quantized("FULLY_CONNECTED", dtypes=("int8",), accepts=_accepts)
def fully_connected_quantized(ctx: KernelContext) -> Run:
    x_t, w_t, out = ctx.input_tensor(0), ctx.input_tensor(1), ctx.output_tensor(0)
    keep = bool(ctx.options.get("keep_num_dims", False))
    _check_fc_input(ctx, x_t, w_t, keep)
    qx, qw, qo = qparams(x_t), qparams(w_t), qparams(out)
    units, depth = w_t.shape
    zx, zo = int(qx.zero_point[0]), int(qo.zero_point[0])
    sx, so = float(qx.scale[0]), float(qo.scale[0])
    # the multipliers as the cpu kernel derives them (per unit: float32 weight scales, in double)
    if qw.per_channel:
        zw = 0
        real = sx * qw.scale.astype(np.float32).astype(np.float64) / so
    else:
        zw = int(qw.zero_point[0])
        real = np.full(units, _product_multiplier(sx, float(qw.scale[0]), so))
    mult, shift = quantize_multipliers(real)
    code = ctx.options.get("fused_activation_function", 0) or 0
    lo, hi = activation_range(code, so, zo, qo.qmin, qo.qmax)

    w = np.ascontiguousarray(ctx.const(1), dtype=np.int8)
    b = ctx.const(2) if ctx.has_input(2) else None
    # sum (x - zx)(w - zw) = x.w - zw * sum(x) - zx * sum(w) + depth * zx * zw: the terms without x
    # join the bias (exact in int64; the int32 wrap is applied to the total)
    bias = np.zeros(units, np.int64) if b is None else b.reshape(-1).astype(np.int64)
    bias += depth * zx * zw - zx * w.sum(axis=1, dtype=np.int64)
    args = (bias, np.int64(zw), mult.astype(np.int64), np.maximum(shift, 0).astype(np.int64),
            np.maximum(-shift, 0).astype(np.int64), np.int64(zo), np.int64(lo), np.int64(hi))

    x_i, (o_i,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    alloc = ctx.output_buffer(0)
    shapes: dict = {}

    def run() -> None:
        x = v[x_i]
        s = shapes.get(x.shape)
        if s is None:
            out_shape = _fc_output_shape(x.shape, depth, units, keep)
            rows = x.size // depth
            if len(shapes) > 8:
                shapes.clear()
            s = shapes[x.shape] = (out_shape, rows, rows * depth * units >= _PARALLEL_MIN)
        y = alloc(s[0])
        if y.size:
            chunks = min(threads(), units) if s[2] else 1
            _fc(np.ascontiguousarray(x).reshape(s[1], depth), w, *args, y.reshape(s[1], units), chunks)
        v[o_i] = y
    return run


# ------------------------------------------------------------------------------- int8 BATCH_MATMUL

@kernel
def _q_batch_matmul(a, b, zl, zr, mult, left, right, zo, lo, hi, y):
    """y[g] = the output stage of (a[g] - zl) @ (b[g] - zr) for a [G, M, K] and b [G, K, N] int8 (any
    strides), y [G, M, N] int8: LiteRT's reference BatchMatMul, int32 sums (wrapped as C's) rescaled
    by MultiplyByQuantizedMultiplier (jit/conv.py's _requantize, reference rounding), plus zo, clamped."""
    for g in range(a.shape[0]):
        for i in range(a.shape[1]):
            for j in range(b.shape[2]):
                total = np.int64(0)
                for k in range(a.shape[2]):
                    total += (np.int64(a[g, i, k]) - zl) * (np.int64(b[g, k, j]) - zr)
                y[g, i, j] = _requantize(total, mult, left, right, False, zo, lo, hi)


def _accepts_batch_matmul(op, sg) -> bool:
    """int8 x int8 -> int8, per-tensor parameters, static shapes with the same batch dims: the small
    matrices of a quantized attention block (the cpu kernel's float64 product and numpy output passes
    cost ~43 us on [2, 4, 16, 8] x [2, 4, 8, 16])."""
    if len(op.inputs) != 2 or min(op.inputs) < 0 or len(op.outputs) != 1:
        return False
    lt, rt, out = (sg.tensors[t] for t in (*op.inputs, op.outputs[0]))
    if (lt.type_name, rt.type_name, out.type_name) != ("INT8", "INT8", "INT8") or lt.is_dynamic or rt.is_dynamic:
        return False
    qs = [qparams(t) for t in (lt, rt, out)]
    if any(q is None or q.per_channel for q in qs):
        return False
    return len(lt.shape) >= 2 and tuple(lt.shape[:-2]) == tuple(rt.shape[:-2])


@JIT.register_quantized("BATCH_MATMUL", dtypes=("int8",), accepts=_accepts_batch_matmul)
def batch_matmul_quantized(ctx: KernelContext) -> Run:
    """int8 BATCH_MATMUL as one compiled loop (the cpu kernel's checks and multiplier; other run-time
    shapes take the cpu kernel)."""
    cpu = CPU.kernel("BATCH_MATMUL", True)(ctx)
    adj_x, adj_y = batch_matmul_adjoints(ctx.options)
    lt, rt, out = ctx.input_tensor(0), ctx.input_tensor(1), ctx.output_tensor(0)
    ql, qr, qo = qparams(lt), qparams(rt), qparams(out)
    mult, shift = quantize_multipliers(np.array([_product_multiplier(float(ql.scale[0]), float(qr.scale[0]),
                                                                     float(qo.scale[0]))]))
    args = (np.int64(ql.zero_point[0]), np.int64(qr.zero_point[0]), np.int64(mult[0]),
            np.int64(max(shift[0], 0)), np.int64(max(-shift[0], 0)), np.int64(qo.zero_point[0]),
            np.int64(qo.qmin), np.int64(qo.qmax))
    shapes = (tuple(lt.shape), tuple(rt.shape))
    out_shape = tuple(out.shape)
    l_i, r_i = ctx.inputs
    (o_i,) = ctx.outputs
    v, alloc = ctx.values, ctx.output_buffer(0)

    def matrices(x: np.ndarray, adjoint: bool) -> np.ndarray:
        x = x.reshape((-1,) + x.shape[-2:])
        return np.swapaxes(x, 1, 2) if adjoint else x

    def run() -> None:
        a, b = v[l_i], v[r_i]
        if (a.shape, b.shape) != shapes or a.size == 0 or b.size == 0:
            return cpu()
        y = alloc(out_shape)
        _q_batch_matmul(matrices(a, adj_x), matrices(b, adj_y), *args, y.reshape((-1,) + out_shape[-2:]))
        v[o_i] = y
    return run


# ----------------------------------------------------------------------------- float32 FULLY_CONNECTED

def _accepts_float_shapes(op, sg) -> bool:
    """float32 input, weights known at compile time, a constant (or no) bias, a clamp (or no)
    activation, static shapes: sgemm, then the epilogue."""
    ins = op.inputs
    if len(ins) not in (2, 3) or len(op.outputs) != 1 or ins[0] < 0 or ins[1] < 0:
        return False
    x, w, y = sg.tensors[ins[0]], sg.tensors[ins[1]], sg.tensors[op.outputs[0]]
    if any(t.type_name != "FLOAT32" for t in (x, w, y)) or len(w.shape) != 2 or not x.shape:
        return False
    if len(ins) > 2 and ins[2] >= 0 and (sg.tensors[ins[2]].type_name != "FLOAT32"
                                         or not _compile_time(sg, ins[2])):
        return False
    code = op.options.get("fused_activation_function") or 0
    if (op.options.get("weights_format", 0) != 0 or (code and code not in _CLAMPS) or not _static(x)
            or not _static(y) or not _compile_time(sg, ins[1])):
        return False
    units, depth = w.shape
    try:
        shape = _fc_output_shape(tuple(x.shape), depth, units, bool(op.options.get("keep_num_dims", False)))
    except ValueError:
        return False
    return shape == tuple(y.shape) and 0 not in shape


def _accepts_float(op, sg) -> bool:
    """_accepts_float_shapes, and enough multiply-adds to beat the cpu kernel's sgemm."""
    if not _accepts_float_shapes(op, sg):
        return False
    x, (units, depth) = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]].shape
    return depth > 0 and int(np.prod(x.shape, dtype=np.int64)) // depth * depth * units >= _MIN_FLOAT_MACS


# Below this many multiply-adds the numba call costs more than the product saves: a [3, 6] x [6, 5]
# layer (mlp_dynamic_batch) took 1.2 us more per op than the cpu kernel's sgemm; [1, 32] x [32, 32]
# (1024) was already faster on the jit.
_MIN_FLOAT_MACS = 512


@JIT.register("FULLY_CONNECTED", dtypes=("float32",), accepts=_accepts_float, epilogue=epilogue_fits)
def fully_connected(ctx: KernelContext) -> Run:
    """The packed GEMM (jit/_gemm.py: bias and clamp in its registers, the elementwise ops fused after
    it (ctx.epilogue) on each block of the output in the same kernel) where it wins, else the cpu
    kernel's product (one sgemm on the weights stored transposed, or a gemv for one row), then bias,
    activation and the fused ops in one compiled pass. An input of another shape than declared takes
    the cpu kernel (and the epilogue as a pass of its own)."""
    w, b = ctx.const(1), ctx.const(2)
    if w is None or (ctx.has_input(2) and b is None):
        return unfused(ctx, CPU.kernel("FULLY_CONNECTED"))      # not folded after all
    fallback = other_shapes(ctx)
    units, depth = w.shape
    x_shape = tuple(ctx.input_tensor(0).shape)
    out_shape = tuple(ctx.output_tensor(0).shape)
    m = int(np.prod(x_shape, dtype=np.int64)) // depth
    bias = None if b is None else np.array(b, np.float32).reshape(-1)
    bounds = _CLAMPS.get(ctx.options.get("fused_activation_function") or 0)
    rows = np.ascontiguousarray(w, dtype=np.float32)
    x_i, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    alloc = ctx.output_buffer(0)
    flat_in, flat_out = (m, depth), (m, units)
    if gemm_wins(units):     # the packed GEMM with bias and clamp in registers; the epilogue: fused ops
        matrix = PackedProduct(rows.T, bias, bounds, _PARALLEL_MIN_FLOAT, fused_chain(ctx), ("matrix",)).matrix
        finish = None

        def product(x: np.ndarray, y: np.ndarray) -> None:
            matrix(x.reshape(flat_in), y)
    else:
        finish = epilogue_pass(ctx, bias, bounds)
        wt = rows.T if m == 1 else np.ascontiguousarray(rows.T)

        def product(x: np.ndarray, y: np.ndarray) -> None:
            if m == 1:
                np.dot(rows, x.reshape(depth), out=y.reshape(units))
            else:
                np.matmul(x.reshape(flat_in), wt, out=y.reshape(flat_out))

    def run() -> None:
        x = v[x_i]
        if x.shape != x_shape or x.dtype != np.float32:
            return fallback()
        y = alloc(out_shape)
        product(x, y)
        v[o] = finish(y) if finish is not None else y
    return run


# ------------------------------------------------------------ inside compiled loops (jit/loop.py)

# Up to _LOOP_MAX_MACS multiply-adds a compiled loop computes a float32 FULLY_CONNECTED itself (a
# recurrent cell's [1, 64] x [64, 64]); a larger one keeps the loop on the executors, where the packed
# GEMM runs it. A compiled segment uses the packed GEMM's rows (Statement.packed) up to
# _LOOP_GEMM_MAX_MACS (a transformer's [16, 64] x [64, 128]; on one thread: larger products keep their
# per-op kernel, which splits them over threads).
_LOOP_MAX_MACS = 1 << 16
_LOOP_GEMM_MAX_MACS = 1 << 18


@statement("FULLY_CONNECTED")
def _fully_connected_in_loop(op, sg) -> Statement | None:
    """float32 FULLY_CONNECTED with constant weights and bias: each row's units accumulated over the
    depth in order (the inner loop runs over units on the weights stored transposed, so it vectorises
    without reordering any sum), then the bias and the clamp. For segments, where the GEMM pads little
    (gemm_wins), its `packed` form: the packed GEMM's rows (jit/_gemm.py: each output summed in order
    with fused multiply-adds, as the per-op kernel)."""
    if not _accepts_float_shapes(op, sg):
        return None
    x, w = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]]
    b = sg.tensors[op.inputs[2]] if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
    if w.data is None or (b is not None and b.data is None):
        return None
    units, depth = w.shape
    rows = int(np.prod(x.shape, dtype=np.int64)) // depth if depth else 0
    macs = rows * depth * units
    in_loops = 0 < macs <= _LOOP_MAX_MACS
    packed = gemm_wins(units) and 0 < macs <= _LOOP_GEMM_MAX_MACS
    if not (in_loops or packed):
        return None
    lo, hi = _CLAMPS.get(op.options.get("fused_activation_function") or 0, (None, None))
    hi = None if hi == np.inf else hi
    wt = np.ascontiguousarray(np.asarray(w.data, np.float32).T)
    bias = np.zeros(units, np.float32) if b is None else np.asarray(b.data, np.float32).reshape(-1)
    gemm = None
    if packed:
        panels, padded = pack_panels(wt), pad_bias(bias, units)
        bounds = ["np.float32(-np.inf)" if lo is None else f"np.float32({float(lo)!r})",
                  "np.float32(np.inf)" if hi is None else f"np.float32({float(hi)!r})"]

        def emit_gemm(out, ins, arg, tmp):
            return [gemm_rows_call(ins[0], depth, 1, arg('p', panels), arg('b', padded), *bounds, out, rows, depth,
                                   units)]
        gemm = Statement((0,), emit_gemm, segment_only=True)
        if not in_loops:
            return gemm
    wt = wt.reshape(-1)

    def emit(out, ins, arg, tmp):
        wn, bn, r, i, u, xv = arg("w", wt), arg("b", bias), tmp("r"), tmp("i"), tmp("u"), tmp("xv")
        at = f"{out}[{r} * {units} + {u}]"
        return [f"for {r} in range({rows}):",
                f"    for {u} in range({units}):", f"        {at} = np.float32(0.0)",
                f"    for {i} in range({depth}):", f"        {xv} = {ins[0]}[{r} * {depth} + {i}]",
                f"        for {u} in range({units}):", f"            {at} += {xv} * {wn}[{i} * {units} + {u}]",
                f"    for {u} in range({units}):",
                f"        {at} = {clamp(f'({at} + {bn}[{u}])', lo, hi, np.dtype(np.float32))}"]
    return Statement((0,), emit, packed=gemm)


@statement("BATCH_MATMUL")
def _batch_matmul_in_loop(op, sg) -> Statement | None:
    """float32 BATCH_MATMUL (adj_x / adj_y, batch dims broadcast) up to _LOOP_GEMM_MAX_MACS
    multiply-adds: per batch, the right-hand side packed into the GEMM's panels (zero padded), then
    the packed GEMM's rows (each output summed over the contraction in order, with fused
    multiply-adds). A loop of its own ran 7x slower: rows of 16 columns are too short for LLVM to
    vectorise."""
    if len(op.inputs) != 2 or min(op.inputs) < 0 or len(op.outputs) != 1:
        return None
    lt, rt, out = (sg.tensors[t] for t in (*op.inputs, op.outputs[0]))
    if any(t.type_name != "FLOAT32" or qparams(t) is not None for t in (lt, rt, out)) \
            or not (2 <= len(lt.shape) <= 5 and 2 <= len(rt.shape) <= 5):
        return None
    adj_x, adj_y = batch_matmul_adjoints(op.options)
    m, k = (lt.shape[-1], lt.shape[-2]) if adj_x else (lt.shape[-2], lt.shape[-1])
    k_r, n = (rt.shape[-1], rt.shape[-2]) if adj_y else (rt.shape[-2], rt.shape[-1])
    try:
        batch = np.broadcast_shapes(tuple(lt.shape[:-2]), tuple(rt.shape[:-2]))
    except ValueError:
        return None
    if k != k_r or tuple(out.shape) != (*batch, m, n):
        return None
    count = int(np.prod(batch, dtype=np.int64))
    if not 0 < count * m * n * k <= _LOOP_GEMM_MAX_MACS:
        return None
    # where each output batch's lhs and rhs matrices start (their batch dims broadcast)
    l_at = broadcast_index(tuple(lt.shape[:-2]), batch) * (m * k)
    r_at = broadcast_index(tuple(rt.shape[:-2]), batch) * (k * n)
    sm, sk = (1, m) if adj_x else (k, 1)       # strides of lhs[i, c]
    rk, rn = (1, k) if adj_y else (n, 1)       # strides of rhs[c, j]
    panels = -(-n // PANEL)

    def emit(out_name, ins, arg, tmp):
        la, ra, zero = arg("l", l_at), arg("r", r_at), arg("z", np.zeros(panels * PANEL, np.float32))
        b, c, j, at, pk = (tmp(s) for s in ("b", "c", "j", "at", "pk"))
        return [f"{pk} = np.zeros({panels * k * PANEL}, np.float32)",
                f"for {b} in range({count}):",
                f"    {at} = {ra}[{b}]",
                f"    for {c} in range({k}):",
                f"        for {j} in range({n}):",
                f"            {pk}[({j} // {PANEL}) * {k * PANEL} + {c} * {PANEL} + {j} % {PANEL}] = "
                f"{ins[1]}[{at} + {c} * {rk} + {j} * {rn}]",
                f"    {at} = {la}[{b}]",
                "    " + gemm_rows_call(f"{ins[0]}[{at}:{at} + {m * k}]", sm, sk, pk, zero, "np.float32(-np.inf)",
                                       "np.float32(np.inf)", f"{out_name}[{b} * {m * n}:({b} + 1) * {m * n}]", m, k, n)]
    return Statement((0, 1), emit, segment_only=True)
