"""FULLY_CONNECTED and BATCH_MATMUL: one BLAS matmul each, constant weights laid out at prepare time.

float16 (which LiteRT runs through XNNPACK only) is computed in float32 and rounded once, as XNNPACK's
results show (bit for bit on the cases tested, up to the summation order of long rows)."""
from __future__ import annotations

import math

import numpy as np

from onert_py.backends.cpu._common import activation_of
from onert_py.backends.cpu._quant import (is_hybrid, activation_range, hybrid_quantize_rows,
                                          multiply_by_quantized_multiplier, multiply_by_quantized_multiplier_half_up,
                                          multiply_by_quantized_multiplier_int64,
                                          multiply_by_quantized_multiplier_wrapping, qparams, quantize_multiplier,
                                          quantize_multipliers, wrap_int32)
from onert_py.backends.cpu.shape import check_same_types
from onert_py.backends import gradients as gr
from onert_py.backends.registry import CPU, KernelContext, Run, grad_rule, shape_rule
from onert_py.backends.shape_rules import Node, broadcast, fmt, is_static, numel

_F32 = np.dtype(np.float32)


def batch_matmul_adjoints(options: dict) -> tuple[bool, bool]:
    """BATCH_MATMUL's (adj_x, adj_y): TFLite's schema names them adj_x / adj_y, Circle's adjoint_lhs /
    adjoint_rhs."""
    return (bool(options.get("adj_x", options.get("adjoint_lhs", False))),
            bool(options.get("adj_y", options.get("adjoint_rhs", False))))


def _check_fc_input(ctx: KernelContext, x_t, w_t, keep: bool) -> None:
    """At prepare, for static shapes: the input fits the [units, depth] weights (rows of depth elements,
    or a last dimension of depth with keep_num_dims)."""
    if x_t.is_dynamic or w_t.is_dynamic:
        return
    depth = w_t.shape[1]
    x_shape = tuple(x_t.shape)
    size = int(np.prod(x_shape, dtype=np.int64))
    if depth == 0 or size % depth:
        raise ctx.fail(f"input shape {list(x_shape)} has {size} elements, not a multiple of the "
                       f"weights' input size {depth} (weights shape {list(w_t.shape)})")
    if keep and x_shape[-1] != depth:
        raise ctx.fail(f"keep_num_dims needs the input's last dimension ({x_shape[-1]}) to equal the "
                       f"weights' input size {depth}")


def _fc_output_shape(x_shape: tuple[int, ...], depth: int, units: int, keep: bool) -> tuple[int, ...]:
    """FULLY_CONNECTED's output shape for an input of shape x_shape: its leading dims and `units` with
    keep_num_dims, else rows of `depth` elements; a ValueError for an input that does not fit the weights."""
    if keep:
        if x_shape[-1] != depth:
            raise ValueError(f"input's last dimension {x_shape[-1]} != weights' input size {depth}")
        return tuple(x_shape[:-1]) + (units,)
    size = math.prod(x_shape)
    if size % depth:
        raise ValueError(f"input of {size} elements is not a multiple of the input size {depth}")
    return (size // depth, units)


@CPU.register("FULLY_CONNECTED", dtypes=("float32", "float16"))
def fully_connected(ctx: KernelContext) -> Run:
    """out = act(reshape(x, [-1, in]) @ W.T + b); keep_num_dims keeps x's leading dims."""
    ctx.expect_inputs(2, 3)
    if is_hybrid(ctx):
        return _fully_connected_hybrid(ctx)
    dt = check_same_types(ctx, 0, 1, 2, optional=(2,))
    if ctx.options.get("weights_format", 0) != 0:
        raise ctx.fail("only the DEFAULT weights format is supported (shuffled formats are for uint8)")
    x_t, w_t = ctx.input_tensor(0), ctx.input_tensor(1)
    if len(w_t.shape) != 2:
        raise ctx.fail(f"weights must be 2-D [units, inputs], have shape {list(w_t.shape)}")
    units, depth = w_t.shape
    keep = bool(ctx.options.get("keep_num_dims", False))
    _check_fc_input(ctx, x_t, w_t, keep)
    x_shape = tuple(x_t.shape)
    b_t = ctx.input_tensor(2)
    if b_t is not None and int(np.prod(b_t.shape)) != units:
        raise ctx.fail(f"bias has shape {list(b_t.shape)}, expected [{units}]")

    act = activation_of(ctx, tanh_sign_bit="refuse")
    v = ctx.values
    x_i, w_i = ctx.inputs[0], ctx.inputs[1]
    b_i = ctx.inputs[2] if ctx.has_input(2) else -1
    (o,) = ctx.outputs
    w_const = ctx.const(1)
    b_const = ctx.const(2)
    if dt != _F32:
        if w_const is None or (b_i >= 0 and b_const is None):
            raise ctx.fail(f"{dt.name} weights and bias must be constants (LiteRT runs no other)")
        return _fully_connected_widened(ctx, w_const, b_const, keep, act)
    b_const = np.ascontiguousarray(b_const.reshape(-1)) if b_const is not None else None
    static = w_const is not None and not x_t.is_dynamic and (b_i < 0 or b_const is not None)
    m = int(np.prod(x_shape, dtype=np.int64)) // depth if static else -1
    if w_const is None:
        wt_const = None
    elif m == 1:
        # A single row is a BLAS gemv on W's own [units, depth] rows (no transposed copy kept).
        w_rows = np.ascontiguousarray(w_const)
        wt_const = w_rows.T
    else:
        # Constant weights: stored transposed and contiguous once, so every run is one sgemm.
        wt_const = np.ascontiguousarray(w_const.T)

    def run() -> None:
        x = v[x_i]
        wt = wt_const if wt_const is not None else v[w_i].T
        d = wt.shape[0]
        out_shape = _fc_output_shape(x.shape, d, wt.shape[1], keep)
        y = np.matmul(np.reshape(x, (-1, d)), wt)
        if b_i >= 0:
            y += b_const if b_const is not None else np.reshape(v[b_i], -1)
        if act is not None:
            act(y)
        v[o] = y.reshape(out_shape)

    if not static:
        return run
    # Static input shape, constant weights and bias: the flat shape, output shape and the product's
    # form are fixed here; a run whose input has another shape (a dynamic loop value) takes `run`.
    out_shape = x_shape[:-1] + (units,) if keep else (m, units)
    flat = (m, depth)
    if m == 1:
        vec = (depth,)

        alloc = ctx.output_buffer(0)        # both paths write a fresh array (never a view of x)
        flat_out = (units,)

        def run_gemv() -> None:
            x = v[x_i]
            if x.shape != x_shape:
                return run()
            y = alloc(out_shape)
            np.dot(w_rows, x.reshape(vec), out=y.reshape(flat_out))
            if b_const is not None:
                np.add(y, b_const, out=y)
            if act is not None:
                act(y)
            v[o] = y.reshape(out_shape)
        return run_gemv

    same = out_shape == (m, units)
    reshape_in = x_shape != flat
    alloc = ctx.output_buffer(0)            # both paths write a fresh array (never a view of x)
    flat_out = (m, units)

    def run_static() -> None:
        x = v[x_i]
        if x.shape != x_shape:
            return run()
        y = alloc(out_shape)
        y2 = y if same else y.reshape(flat_out)
        np.matmul(x.reshape(flat) if reshape_in else x, wt_const, out=y2)
        if b_const is not None:
            np.add(y2, b_const, out=y2)
        if act is not None:
            act(y2)
        v[o] = y
    return run_static


@shape_rule("FULLY_CONNECTED")
def fully_connected_shape(n: Node):
    shapes = _fully_connected_shapes(n)
    if n.n_out == 2 and (n.opts.get("weights_format", 0) or 0) == _SHUFFLED4X16INT8 and n.op.outputs[1] >= 0:
        # the shuffled kernel's workspace output keeps its declared shape (LiteRT does not resize it)
        ws = n.sg.tensors[n.op.outputs[1]]
        shapes = [shapes[0], None if ws.is_dynamic else tuple(int(d) for d in ws.shape)]
    return shapes


def _fully_connected_shapes(n: Node):
    x, w = n.shape(0), n.shape(1)
    if w is not None and len(w) != 2:
        raise n.fail(f"weights must have rank 2, have shape {fmt(w)}")
    units = w[0] if w is not None else -1
    depth = w[1] if w is not None else -1
    if bool(n.opts.get("keep_num_dims", False)):
        if x is None:
            return [None] * n.n_out
        if x and x[-1] >= 0 and depth >= 0 and x[-1] != depth:
            raise n.fail(f"the input's last dim {x[-1]} differs from the weights' depth {depth}")
        return [x[:-1] + (units,)] * n.n_out
    if is_static(x) and depth > 0:
        size = numel(x)
        if n.litert_quirks:    # LiteRT floors the row count (and reads a partial row)
            return [(size // depth, units)] * n.n_out
        if size % depth:
            raise n.fail(f"{size} input elements do not split into rows of the weights' depth {depth}")
        return [(size // depth, units)] * n.n_out
    return [(-1, units)] * n.n_out


def _fully_connected_widened(ctx: KernelContext, w: np.ndarray, b: np.ndarray | None, keep: bool, act) -> Run:
    """float16 FULLY_CONNECTED: float32 matmul, bias and activation, rounded to float16 once."""
    units, depth = w.shape
    wt = np.ascontiguousarray(w.T, dtype=np.float32)
    b32 = None if b is None else b.reshape(-1).astype(np.float32)
    out_dt = ctx.output_dtype()
    x_i, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values

    def run() -> None:
        x = v[x_i]
        out_shape = _fc_output_shape(x.shape, depth, units, keep)
        y = np.matmul(x.reshape(-1, depth).astype(np.float32), wt)
        if b32 is not None:
            y += b32
        if act is not None:
            act(y)
        v[o] = y.astype(out_dt).reshape(out_shape)
    return run


# ---------------------------------------------------------------- hybrid (dynamic-range) FULLY_CONNECTED


def _fully_connected_hybrid(ctx: KernelContext) -> Run:
    """FULLY_CONNECTED with float32 input and output and int8 weights (per tensor or per output unit), as
    LiteRT's hybrid kernel: each input row is quantized to int8 (hybrid_quantize_rows, symmetric unless
    asymmetric_quantize_inputs), acc = q @ W.T exactly (minus zero point * the weight row's sum when
    asymmetric), then y = bias + float32(acc) * scale in float32, scale = float32(row scale * weight
    scale), and the fused activation in float. The weights' zero point is not read (LiteRT ignores it:
    dynamic-range weights are symmetric)."""
    if ctx.options.get("weights_format", 0) != 0:
        raise ctx.fail("only the DEFAULT weights format is supported (shuffled formats are for uint8)")
    x_t, w_t, b_t, out = ctx.input_tensor(0), ctx.input_tensor(1), ctx.input_tensor(2), ctx.output_tensor(0)
    if out.dtype != _F32:
        raise ctx.fail(f"a hybrid FULLY_CONNECTED (float32 input, int8 weights) has a float32 output, not "
                       f"{out.type_name}")
    if b_t is not None and b_t.dtype != _F32:
        raise ctx.fail(f"the bias of a hybrid FULLY_CONNECTED must be float32, not {b_t.type_name}")
    if len(w_t.shape) != 2:
        raise ctx.fail(f"weights must be 2-D [units, inputs], have shape {list(w_t.shape)}")
    units, depth = w_t.shape
    qw = qparams(w_t)
    if qw.per_channel and (qw.axis != 0 or qw.scale.size != units):
        raise ctx.fail(f"per-channel hybrid weights need one scale per output unit along dimension 0: have "
                       f"{qw.scale.size} scales along dimension {qw.axis} of shape {list(w_t.shape)}")
    keep = bool(ctx.options.get("keep_num_dims", False))
    _check_fc_input(ctx, x_t, w_t, keep)
    if b_t is not None and int(np.prod(b_t.shape)) != units:
        raise ctx.fail(f"bias has shape {list(b_t.shape)}, expected [{units}]")
    asymmetric = bool(ctx.options.get("asymmetric_quantize_inputs", False))
    act = activation_of(ctx, tanh_sign_bit="refuse")
    w_scale = qw.scale.astype(np.float32)          # float32 as LiteRT stores it
    per_channel = w_scale.size > 1

    v = ctx.values
    x_i, w_i = ctx.inputs[0], ctx.inputs[1]
    b_i = ctx.inputs[2] if ctx.has_input(2) else -1
    (o,) = ctx.outputs
    w_const, b_const = ctx.const(1), ctx.const(2)

    def weights(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w64 = w.astype(np.float64)
        return np.ascontiguousarray(w64.T), w.astype(np.int64).sum(axis=1)
    fixed = None if w_const is None else weights(w_const)
    b_fixed = None if b_const is None else b_const.reshape(-1).astype(np.float32)

    def run() -> None:
        x = v[x_i]
        out_shape = _fc_output_shape(x.shape, depth, units, keep)
        wt, row_sums = fixed if fixed is not None else weights(v[w_i])
        q, sf, offset = hybrid_quantize_rows(x.reshape(-1, depth), asymmetric)
        acc = np.matmul(q.astype(np.float64), wt).astype(np.int64)      # exact: far below 2**53
        if asymmetric:
            acc -= offset[:, None] * row_sums[None, :]
        acc = wrap_int32(acc).astype(np.float32)
        if per_channel:
            scale = (w_scale[None, :] * sf[:, None]).astype(np.float32)
        else:
            scale = (sf * w_scale[0]).astype(np.float32)[:, None]
        y = (acc * scale).astype(np.float32)
        if b_i >= 0:
            y = (b_fixed if b_fixed is not None else v[b_i].reshape(-1)) + y
        if act is not None:
            act(y)
        v[o] = y.reshape(out_shape)
    return run


# ------------------------------------------------------------------------- quantized FULLY_CONNECTED

_INT32_MIN = -(1 << 31)
_TENSOR_TYPE = {0: "FLOAT32", 2: "INT32", 4: "INT64"}   # FullyConnectedOptions.quantized_bias_type


def _float_rescale(acc: np.ndarray, scale) -> np.ndarray:
    """LiteRT's reference 16x8 FULLY_CONNECTED requantization (int64 bias): static_cast<int32_t>(
    round(double(acc) * scale)), std::round (halves away from zero); a value outside int32 becomes
    INT32_MIN, as x86's conversion gives it."""
    r = acc.astype(np.float64) * scale
    t = np.trunc(r)
    frac = r - t
    t = t + (frac >= 0.5) - (frac <= -0.5)
    out = np.where((t >= -2.0**31) & (t < 2.0**31), t, float(_INT32_MIN))
    return out.astype(np.int64)


def _product_multiplier(s1: float, s2: float, s_out: float) -> float:
    """GetQuantizedConvolutionMultipler: float(s1 * s2) (a float32 product) / s_out, in double."""
    return float(np.float32(s1) * np.float32(s2)) / float(np.float32(s_out))


@CPU.register_quantized("FULLY_CONNECTED", dtypes=("int8", "uint8", "int16"))
def fully_connected_quantized(ctx: KernelContext) -> Run:
    """Quantized FULLY_CONNECTED as LiteRT's builtin kernels: acc = (x - zx) @ (W - zw).T + bias exactly,
    then rescaled by input_scale * weight_scale / output_scale (per output unit for per-channel weights),
    plus the output zero point, clamped to the fused activation's range.

    int8 x int8 and uint8 x uint8 (and 16x8 with an int32 bias) run LiteRT's optimized GEMM, whose
    rescale is ruy's (_quant.multiply_by_quantized_multiplier_half_up); 16x8 with an int64 bias runs its
    reference kernel, which rescales in double (_float_rescale).

    The SHUFFLED4x16INT8 weights format (uint8 x uint8 -> int16 only) is `_fully_connected_shuffled`."""
    ctx.expect_inputs(2, 3)
    weights_format = ctx.options.get("weights_format", 0) or 0
    if weights_format == _SHUFFLED4X16INT8:
        return _fully_connected_shuffled(ctx)
    if weights_format != 0:
        raise ctx.fail(f"unknown weights format {weights_format} (LiteRT has DEFAULT and SHUFFLED4x16INT8)")
    x_t, w_t, b_t, out = ctx.input_tensor(0), ctx.input_tensor(1), ctx.input_tensor(2), ctx.output_tensor(0)
    kinds = {("INT8", "INT8"): "INT8", ("UINT8", "UINT8"): "UINT8", ("INT16", "INT8"): "INT16",
             ("INT8", "INT4"): "INT8"}
    pair = (x_t.type_name, w_t.type_name)
    if kinds.get(pair) != out.type_name:
        raise ctx.fail(f"quantized FULLY_CONNECTED runs int8 x int8 -> int8, int8 x int4 -> int8, "
                       f"uint8 x uint8 -> uint8 and int16 x int8 -> int16, not {pair[0]} x {pair[1]} -> "
                       f"{out.type_name}")
    # INT4 weights (two per byte, low nibble first) arrive unpacked to one int8 value each from the
    # loader, and LiteRT unpacks them likewise before its int8 GEMM: the same kernel from here on.
    if w_t.type_name == "INT4":
        if ctx.const(1) is None:
            raise ctx.fail("INT4 weights of a FULLY_CONNECTED must be a constant tensor")
        q4 = qparams(w_t)
        if q4 is not None and np.any(q4.zero_point != 0):
            raise ctx.fail("INT4 weights must be symmetric (zero point 0): LiteRT refuses the filter's "
                           "zero point")
    code = ctx.options.get("fused_activation_function", 0) or 0
    if code not in (0, 1, 2, 3):
        raise ctx.fail(f"fused activation {code} is not supported on quantized tensors (LiteRT runs NONE, "
                       "RELU, RELU_N1_TO_1 and RELU6)")
    qx, qw, qo = qparams(x_t), qparams(w_t), qparams(out)
    if qx is None or qw is None or qo is None:
        raise ctx.fail("the input, weights and output of a quantized FULLY_CONNECTED need quantization "
                       "parameters")
    if qx.per_channel or qo.per_channel:
        raise ctx.fail("the input and output must be quantized per tensor")
    if len(w_t.shape) != 2:
        raise ctx.fail(f"weights must be 2-D [units, inputs], have shape {list(w_t.shape)}")
    units, depth = w_t.shape
    keep = bool(ctx.options.get("keep_num_dims", False))
    _check_fc_input(ctx, x_t, w_t, keep)
    wide = x_t.type_name == "INT16"
    if b_t is not None:
        if int(np.prod(b_t.shape)) != units:
            raise ctx.fail(f"bias has shape {list(b_t.shape)}, expected [{units}]")
        if b_t.type_name not in (("INT32", "INT64") if wide else ("INT32",)):
            raise ctx.fail(f"the bias of a quantized {x_t.type_name} FULLY_CONNECTED must be INT32"
                           f"{' or INT64' if wide else ''}, not {b_t.type_name}")
    zx, zo = int(qx.zero_point[0]), int(qo.zero_point[0])
    sx, so = float(qx.scale[0]), float(qo.scale[0])
    float_path = False
    if wide:
        if zx != 0 or zo != 0:
            raise ctx.fail(f"int16 FULLY_CONNECTED needs zero points 0 (input {zx}, output {zo})")
        if np.any(qw.zero_point != 0):
            raise ctx.fail("int16 x int8 FULLY_CONNECTED with asymmetric weights (a nonzero weight zero "
                           "point) is not supported")
        bias_type = ctx.options.get("quantized_bias_type", 0) or 0
        if bias_type != 0:
            if bias_type not in (2, 4):
                raise ctx.fail(f"quantized_bias_type must be INT32 or INT64, not "
                               f"{_TENSOR_TYPE.get(bias_type, bias_type)}")
            if b_t is not None and b_t.type_name != _TENSOR_TYPE[bias_type]:
                raise ctx.fail(f"the bias is {b_t.type_name} but quantized_bias_type says "
                               f"{_TENSOR_TYPE[bias_type]}")
        float_path = bias_type == 4 or (b_t is not None and b_t.type_name == "INT64")
    if qw.per_channel:
        if x_t.type_name == "UINT8":
            raise ctx.fail("per-channel weights need an int8 or int16 input (LiteRT runs no uint8 one)")
        if qw.axis != 0 or qw.scale.size != units:
            raise ctx.fail(f"per-channel weights need one scale per output unit along dimension 0: have "
                           f"{qw.scale.size} scales along dimension {qw.axis} of shape {list(w_t.shape)}")
        if np.any(qw.zero_point != 0):
            raise ctx.fail("per-channel weights must be symmetric (zero points 0)")
        zw = 0
        real = sx * qw.scale.astype(np.float32).astype(np.float64) / so
    else:
        zw = int(qw.zero_point[0])
        sw = float(qw.scale[0])
        if b_t is not None:    # GetQuantizedConvolutionMultipler's check of the bias scale
            qb = qparams(b_t)
            sb = float(qb.scale[0]) if qb is not None else 0.0
            if abs(sx * sw - sb) / so > 0.02:
                raise ctx.fail(f"the bias scale {sb:g} differs from input scale * weight scale "
                               f"{sx * sw:g} by more than 2% of the output scale {so:g}")
        real = np.array([_product_multiplier(sx, sw, so)])
    if float_path:
        scale = sx * qw.scale / so if qw.per_channel else np.array([sx * float(qw.scale[0]) / so])
    else:
        mult, shift = quantize_multipliers(real)
    lo, hi = activation_range(code, so, zo, qo.qmin, qo.qmax)

    v = ctx.values
    x_i, w_i = ctx.inputs[0], ctx.inputs[1]
    b_i = ctx.inputs[2] if ctx.has_input(2) else -1
    (o,) = ctx.outputs
    out_dt = out.dtype
    w_const, b_const = ctx.const(1), ctx.const(2)
    wt_const = None if w_const is None else np.ascontiguousarray((w_const.astype(np.float64) - zw).T)
    b_fixed = None if b_const is None else b_const.reshape(-1).astype(np.int64)

    def run() -> None:
        x = v[x_i]
        out_shape = _fc_output_shape(x.shape, depth, units, keep)
        wt = wt_const if wt_const is not None else (v[w_i].astype(np.float64) - zw).T
        xs = x.reshape(-1, depth).astype(np.float64)
        if zx:
            xs -= zx
        acc = np.matmul(xs, wt).astype(np.int64)       # exact: far below 2**53
        if b_i >= 0:
            acc += b_fixed if b_fixed is not None else v[b_i].reshape(-1).astype(np.int64)
        if float_path:
            y = _float_rescale(acc, scale)
        else:
            y = multiply_by_quantized_multiplier_half_up(wrap_int32(acc), mult, shift)
        y += zo
        v[o] = np.clip(y, lo, hi).astype(out_dt).reshape(out_shape)
    return run


# FullyConnectedOptions.weights_format SHUFFLED4x16INT8: uint8 weights stored in blocks of 4 output rows
# by 16 depth columns (for each 4 rows, for each 16 columns: row-major 4x16), each byte with its sign bit
# flipped (xor 0x80), so that read as int8 it is the weight minus its zero point 128.
_SHUFFLED4X16INT8 = 1


def _unshuffle_4x16(w: np.ndarray) -> np.ndarray:
    """SHUFFLED4x16INT8 weight bytes [units, depth] (uint8) -> the weights minus 128 in the plain
    [units, depth] layout (int64)."""
    units, depth = w.shape
    signed = np.ascontiguousarray(w).view(np.int8).astype(np.int64)
    return signed.reshape(units // 4, depth // 16, 4, 16).transpose(0, 2, 1, 3).reshape(units, depth)


def _fully_connected_shuffled(ctx: KernelContext) -> Run:
    """FULLY_CONNECTED with SHUFFLED4x16INT8 weights, as LiteRT's ShuffledFullyConnected (its x86 build
    runs the portable C++ loop): uint8 input and weights whose zero points are taken as 128 (the sign
    bit flip), an int32 bias, the int32 accumulator rescaled by TFLite's MultiplyByQuantizedMultiplier
    (the reference double rounding, the left shift wrapping around int32) and saturated to int16, no
    output zero point. It has two outputs: the int16 result and a uint8 workspace into which LiteRT
    writes the input with its sign bits flipped (for 4 rows, interleaved in blocks of 16 per row).

    LiteRT runs it for 1 or 4 input rows only (other row counts leave the output unwritten), depth a
    multiple of 16 and units a multiple of 4 (it only debug-checks these), and ignores the tensors' zero
    points and the fused activation: onert-py refuses what the kernel would not compute as declared."""
    what = "FULLY_CONNECTED with SHUFFLED4x16INT8 weights"
    x_t, w_t, b_t, out = ctx.input_tensor(0), ctx.input_tensor(1), ctx.input_tensor(2), ctx.output_tensor(0)
    types = (x_t.type_name, w_t.type_name, out.type_name)
    if types != ("UINT8", "UINT8", "INT16"):
        raise ctx.fail(f"{what} runs uint8 x uint8 -> int16 only (LiteRT's check), not "
                       f"{types[0]} x {types[1]} -> {types[2]}")
    if len(ctx.outputs) != 2 or ctx.outputs[1] < 0:
        raise ctx.fail(f"{what} needs 2 outputs (the result and a uint8 workspace), has {len(ctx.outputs)}")
    ws_t = ctx.output_tensor(1)
    if ws_t.type_name != "UINT8":
        raise ctx.fail(f"the workspace output of a {what} must be UINT8, not {ws_t.type_name}")
    if b_t is None or b_t.type_name != "INT32":
        raise ctx.fail(f"{what} needs an INT32 bias (LiteRT's kernel reads one unconditionally), has "
                       f"{'none' if b_t is None else b_t.type_name}")
    if len(w_t.shape) != 2:
        raise ctx.fail(f"weights must be 2-D [units, inputs], have shape {list(w_t.shape)}")
    units, depth = (int(d) for d in w_t.shape)
    if units % 4 or depth % 16 or depth == 0:
        raise ctx.fail(f"{what} needs units a multiple of 4 and depth a multiple of 16, has weights "
                       f"shape {[units, depth]}")
    if int(np.prod(b_t.shape)) != units:
        raise ctx.fail(f"bias has shape {list(b_t.shape)}, expected [{units}]")
    qx, qw, qo = qparams(x_t), qparams(w_t), qparams(out)
    if qx is None or qw is None or qo is None:
        raise ctx.fail(f"the input, weights and output of a {what} need quantization parameters")
    if qx.per_channel or qw.per_channel or qo.per_channel:
        raise ctx.fail(f"{what} takes per-tensor quantization only")
    zx, zw, zo = int(qx.zero_point[0]), int(qw.zero_point[0]), int(qo.zero_point[0])
    if (zx, zw, zo) != (128, 128, 0):
        raise ctx.fail(f"{what} needs zero points 128 (input), 128 (weights) and 0 (output), has {zx}, "
                       f"{zw} and {zo}: LiteRT's kernel assumes these and ignores the declared ones")
    sx, sw, so = float(qx.scale[0]), float(qw.scale[0]), float(qo.scale[0])
    qb = qparams(b_t)
    sb = float(qb.scale[0]) if qb is not None else 0.0
    if abs(sx * sw - sb) / so > 0.02:    # GetQuantizedConvolutionMultipler's check of the bias scale
        raise ctx.fail(f"the bias scale {sb:g} differs from input scale * weight scale {sx * sw:g} by "
                       f"more than 2% of the output scale {so:g}")
    code = ctx.options.get("fused_activation_function", 0) or 0
    try:
        lo, hi = activation_range(code, so, zo, qo.qmin, qo.qmax)
    except ValueError as e:
        raise ctx.fail(str(e)) from None
    if (lo, hi) != (-32768, 32767):
        raise ctx.fail(f"{what} with a fused activation (code {code}) that clamps the int16 output: LiteRT's "
                       "kernel ignores it")
    keep = bool(ctx.options.get("keep_num_dims", False))
    _check_fc_input(ctx, x_t, w_t, keep)

    def check_rows(rows: int) -> None:
        if rows not in (1, 4):
            raise ctx.fail(f"{what} runs 1 or 4 input rows (LiteRT's kernel), not {rows}")

    if not x_t.is_dynamic:
        rows = int(np.prod(x_t.shape, dtype=np.int64)) // depth
        check_rows(rows)
        if not ws_t.is_dynamic and int(np.prod(ws_t.shape, dtype=np.int64)) != rows * depth:
            raise ctx.fail(f"the workspace output has shape {list(ws_t.shape)}, it must hold the "
                           f"{rows * depth} input bytes")
    mult, shift = quantize_multiplier(_product_multiplier(sx, sw, so))
    w_const, b_const = ctx.const(1), ctx.const(2)
    wt_const = None if w_const is None else np.ascontiguousarray(_unshuffle_4x16(w_const).T)
    b_fixed = None if b_const is None else b_const.reshape(-1).astype(np.int64)
    v = ctx.values
    x_i, w_i, b_i = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    o, o_ws = ctx.outputs
    ws_shape = None if ws_t.is_dynamic else tuple(int(d) for d in ws_t.shape)

    def run() -> None:
        x = np.asarray(v[x_i])
        out_shape = _fc_output_shape(x.shape, depth, units, keep)
        rows = x.size // depth
        if rows not in (1, 4):
            raise ValueError(f"{what} runs 1 or 4 input rows (LiteRT's kernel), not {rows}")
        flipped = x.reshape(rows, depth) ^ np.uint8(0x80)
        wt = wt_const if wt_const is not None else _unshuffle_4x16(np.asarray(v[w_i])).T
        acc = np.matmul(flipped.view(np.int8).astype(np.int64), wt)       # exact int64
        acc += b_fixed if b_fixed is not None else np.asarray(v[b_i]).reshape(-1).astype(np.int64)
        y = multiply_by_quantized_multiplier_wrapping(wrap_int32(acc), mult, shift)
        v[o] = np.clip(y, -32768, 32767).astype(np.int16).reshape(out_shape)
        ws = flipped.reshape(rows, depth // 16, 16).transpose(1, 0, 2)          # 16-byte blocks, row-interleaved
        if ws_shape is not None and int(np.prod(ws_shape)) != rows * depth:
            raise ValueError(f"the workspace output of shape {list(ws_shape)} cannot hold the {rows * depth} "
                             "input bytes")
        v[o_ws] = ws.reshape(ws_shape if ws_shape is not None else (rows, depth))
    return run


def _check_batch_matmul_shapes(ctx: KernelContext, lt, rt, adj_x: bool, adj_y: bool) -> None:
    """BATCH_MATMUL's operands: rank 2 to 5, equal contraction dims, broadcasting batch dims."""
    for name, t in (("lhs", lt), ("rhs", rt)):
        if not 2 <= len(t.shape) <= 5:
            raise ctx.fail(f"{name} must have rank 2 to 5, has shape {list(t.shape)}")
    if not lt.is_dynamic and not rt.is_dynamic:
        k_l = lt.shape[-2] if adj_x else lt.shape[-1]
        k_r = rt.shape[-1] if adj_y else rt.shape[-2]
        if k_l != k_r:
            raise ctx.fail(f"contraction dims differ: lhs {list(lt.shape)} (adj_x={adj_x}) and rhs "
                           f"{list(rt.shape)} (adj_y={adj_y})")
        try:
            np.broadcast_shapes(lt.shape[:-2], rt.shape[:-2])
        except ValueError:
            raise ctx.fail(f"batch dims of lhs {list(lt.shape)} and rhs {list(rt.shape)} do not broadcast") \
                from None


@CPU.register("BATCH_MATMUL", dtypes=("float32", "float16"))
def batch_matmul(ctx: KernelContext) -> Run:
    """out[..., m, n] = sum_k lhs[..., m, k] * rhs[..., k, n], batch dims broadcast; adj_* transpose
    the last two dims of that side first."""
    ctx.expect_inputs(2)
    if is_hybrid(ctx):
        return _batch_matmul_hybrid(ctx)
    dt = check_same_types(ctx, 0, 1)
    adj_x, adj_y = batch_matmul_adjoints(ctx.options)
    lt, rt = ctx.input_tensor(0), ctx.input_tensor(1)
    _check_batch_matmul_shapes(ctx, lt, rt, adj_x, adj_y)
    v = ctx.values
    l_i, r_i = ctx.inputs
    (o,) = ctx.outputs
    if dt != _F32:
        def run_widened() -> None:   # float16: float32 products and sums, rounded once
            a, b = v[l_i].astype(np.float32), v[r_i].astype(np.float32)
            if adj_x:
                a = np.swapaxes(a, -1, -2)
            if adj_y:
                b = np.swapaxes(b, -1, -2)
            v[o] = np.matmul(a, b).astype(dt)
        return run_widened
    r_const = ctx.const(1)
    if r_const is not None:
        rhs = np.ascontiguousarray(np.swapaxes(r_const, -1, -2)) if adj_y else r_const

        if adj_x:
            def run() -> None:
                v[o] = np.matmul(np.swapaxes(v[l_i], -1, -2), rhs)
        else:
            def run() -> None:
                v[o] = np.matmul(v[l_i], rhs)
        return run

    def run_dynamic() -> None:
        a, b = v[l_i], v[r_i]
        if adj_x:
            a = np.swapaxes(a, -1, -2)
        if adj_y:
            b = np.swapaxes(b, -1, -2)
        v[o] = np.matmul(a, b)
    return run_dynamic


def _hybrid_batch_dims(lhs: tuple, rhs: tuple, adj_x: bool) -> tuple[list[int], list[int]]:
    """The three batch dims of each operand as LiteRT's Eval sees them: rhs [..., 1, X, Y] with lhs of
    rank > 2 (and no adj_x) folds lhs [..., Q, R, S] into [..., Q * R, S], then both extend to rank 5."""
    if not adj_x and len(rhs) > 2 and len(lhs) > 2 and rhs[-3] == 1:
        lb, rb = list(lhs[:-3]), list(rhs[:-3])
    else:
        lb, rb = list(lhs[:-2]), list(rhs[:-2])
    return [1] * (3 - len(lb)) + lb, [1] * (3 - len(rb)) + rb


def _hybrid_batch_problem(lhs: tuple, rhs: tuple, adj_x: bool, asymmetric: bool) -> str | None:
    """LiteRT's hybrid BatchMatMul steps its per-row scales (and offsets) by rows * b_i for each batch
    index separately, not by the flat batch index, and its weight row sums likewise (computing none for
    the outermost of three batch dims): correct only with at most one lhs batch dim above 1 (and, when
    the row sums are read, one rhs batch dim, not the first of three). Other shapes are refused."""
    lb, rb = _hybrid_batch_dims(lhs, rhs, adj_x)
    if sum(d > 1 for d in lb) > 1:
        return (f"LiteRT's hybrid BATCH_MATMUL indexes the lhs rows' scales wrongly when more than one lhs "
                f"batch dim exceeds 1 (lhs {list(lhs)}, rhs {list(rhs)})")
    if asymmetric and (sum(d > 1 for d in rb) > 1 or rb[0] > 1):
        return (f"LiteRT's asymmetric hybrid BATCH_MATMUL reads wrong weight row sums when more than one "
                f"rhs batch dim exceeds 1, or the first of three does (lhs {list(lhs)}, rhs {list(rhs)})")
    return None


def _batch_matmul_hybrid(ctx: KernelContext) -> Run:
    """BATCH_MATMUL with a float32 lhs and a constant int8 rhs (per tensor, or per output column), as
    LiteRT's reference hybrid kernel: each lhs row (over the contraction dim) is quantized to int8
    (hybrid_quantize_rows, symmetric unless asymmetric_quantize_inputs), acc = q @ W exactly (int32);
    asymmetric inputs subtract float32(row offset * the weight column's sum) from float32(acc) in float32;
    y = float32(row scale * weight scale) * that, in float32 (then + 0.0f: LiteRT accumulates into a zeroed
    output). The rhs zero point is not read (LiteRT ignores it)."""
    opts = ctx.options
    adj_x, adj_y = batch_matmul_adjoints(opts)
    asymmetric = bool(opts.get("asymmetric_quantize_inputs", False))
    lt, rt, out = ctx.input_tensor(0), ctx.input_tensor(1), ctx.output_tensor(0)
    if out.dtype != _F32:
        raise ctx.fail(f"a hybrid BATCH_MATMUL (float32 lhs, int8 rhs) has a float32 output, not "
                       f"{out.type_name}")
    _check_batch_matmul_shapes(ctx, lt, rt, adj_x, adj_y)
    w = ctx.const(1)
    if w is None:
        raise ctx.fail("a hybrid BATCH_MATMUL needs a constant int8 rhs (LiteRT computes its sums once)")
    rank = w.ndim
    wk = np.swapaxes(w, -1, -2) if adj_y else w            # [..., K, N]
    units = wk.shape[-1]
    qw = qparams(rt)
    n_axis = rank - 2 if adj_y else rank - 1
    if qw.per_channel and (qw.axis != n_axis or qw.scale.size != units):
        raise ctx.fail(f"per-channel hybrid rhs needs one scale per output column along dimension {n_axis}: "
                       f"have {qw.scale.size} scales along dimension {qw.axis} of shape {list(w.shape)}")
    if not lt.is_dynamic:
        problem = _hybrid_batch_problem(tuple(lt.shape), tuple(w.shape), adj_x, asymmetric)
        if problem:
            raise ctx.fail(problem)
    w_scale = qw.scale.astype(np.float32)
    per_channel = w_scale.size > 1
    w64 = np.ascontiguousarray(wk.astype(np.float64))
    row_sums = wk.astype(np.int64).sum(axis=-2).astype(np.float32)[..., None, :]     # [..., 1, N]
    v = ctx.values
    l_i = ctx.inputs[0]
    (o,) = ctx.outputs

    def run() -> None:
        x = v[l_i]
        if lt.is_dynamic:
            problem = _hybrid_batch_problem(x.shape, w.shape, adj_x, asymmetric)
            if problem:
                raise ValueError(problem)
        if adj_x:
            x = np.swapaxes(x, -1, -2)
        x = np.ascontiguousarray(x)
        depth = x.shape[-1]
        q, sf, offset = hybrid_quantize_rows(x.reshape(-1, depth), asymmetric)
        lead = x.shape[:-1]
        acc = np.matmul(q.reshape(x.shape).astype(np.float64), w64).astype(np.int64)   # exact
        f = wrap_int32(acc).astype(np.float32)
        if asymmetric:
            f = (f - (row_sums * offset.reshape(lead).astype(np.float32)[..., None]).astype(np.float32))
        sf = sf.reshape(lead)[..., None]
        scale = (sf * w_scale).astype(np.float32) if per_channel else (sf * w_scale[0]).astype(np.float32)
        y = (scale * f).astype(np.float32)
        v[o] = y + np.float32(0)
    return run


@CPU.register_quantized("BATCH_MATMUL", dtypes=("int8", "int16"))
def batch_matmul_quantized(ctx: KernelContext) -> Run:
    """Quantized BATCH_MATMUL as LiteRT's reference kernel: acc = (lhs - zl) @ (rhs - zr) exactly, then
    rescaled by lhs_scale * rhs_scale / out_scale (MultiplyByQuantizedMultiplier: int32 for int8, int64
    for int16 and int16 x int8), plus the output zero point, clamped to the output type. An int8 x int8
    -> int32 op gives the raw products' sums (LiteRT applies no zero point there)."""
    ctx.expect_inputs(2)
    adj_x, adj_y = batch_matmul_adjoints(ctx.options)
    lt, rt, out = ctx.input_tensor(0), ctx.input_tensor(1), ctx.output_tensor(0)
    kinds = {("INT8", "INT8"): ("INT8", "INT32"), ("INT16", "INT16"): ("INT16",), ("INT16", "INT8"): ("INT16",)}
    pair = (lt.type_name, rt.type_name)
    if out.type_name not in kinds.get(pair, ()):
        raise ctx.fail(f"quantized BATCH_MATMUL runs int8 x int8 -> int8 or int32, int16 x int16 -> int16 "
                       f"and int16 x int8 -> int16, not {pair[0]} x {pair[1]} -> {out.type_name}")
    _check_batch_matmul_shapes(ctx, lt, rt, adj_x, adj_y)
    v = ctx.values
    l_i, r_i = ctx.inputs
    (o,) = ctx.outputs
    out_dt = out.dtype

    def operands(zl: int, zr: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = v[l_i].astype(np.float64), v[r_i].astype(np.float64)
        if zl:
            a -= zl
        if zr:
            b -= zr
        if adj_x:
            a = np.swapaxes(a, -1, -2)
        if adj_y:
            b = np.swapaxes(b, -1, -2)
        return a, b

    if out.type_name == "INT32":
        def run_raw() -> None:
            v[o] = wrap_int32(np.matmul(*operands(0, 0)).astype(np.int64)).astype(out_dt)
        return run_raw

    ql, qr, qo = qparams(lt), qparams(rt), qparams(out)
    if ql is None or qr is None or qo is None:
        raise ctx.fail("the operands and output of a quantized BATCH_MATMUL need quantization parameters")
    if ql.per_channel or qr.per_channel or qo.per_channel:
        raise ctx.fail("quantized BATCH_MATMUL needs per-tensor quantization (LiteRT reads one scale)")
    zl, zr, zo = int(ql.zero_point[0]), int(qr.zero_point[0]), int(qo.zero_point[0])
    wide = lt.type_name == "INT16"
    if wide and (zl or zr or zo):
        raise ctx.fail(f"int16 BATCH_MATMUL needs zero points 0 (lhs {zl}, rhs {zr}, output {zo})")
    mult, shift = quantize_multiplier(_product_multiplier(float(ql.scale[0]), float(qr.scale[0]),
                                                          float(qo.scale[0])))
    lo, hi = qo.qmin, qo.qmax

    def run() -> None:
        acc = np.matmul(*operands(zl, zr)).astype(np.int64)      # exact: far below 2**53
        if wide:
            y = wrap_int32(multiply_by_quantized_multiplier_int64(acc, mult, shift))
        else:
            y = multiply_by_quantized_multiplier(wrap_int32(acc), mult, shift)
        y += zo
        v[o] = np.clip(y, lo, hi).astype(out_dt)
    return run


@shape_rule("BATCH_MATMUL")
def batch_matmul_shape(n: Node):
    a, b = n.shape(0), n.shape(1)
    if a is None or b is None:
        return [None]
    if len(a) < 2 or len(b) < 2:
        raise n.fail("both operands need rank >= 2")
    adj_x, adj_y = batch_matmul_adjoints(n.opts)
    m, ka = (a[-1], a[-2]) if adj_x else (a[-2], a[-1])
    kb, cols = (b[-1], b[-2]) if adj_y else (b[-2], b[-1])
    if ka >= 0 and kb >= 0 and ka != kb:
        raise n.fail(f"contraction dims differ: {ka} vs {kb}")
    return [broadcast(n, a[:-2], b[:-2]) + (m, cols)]


# ----------------------------------------------------------------------------------- gradients

@grad_rule("FULLY_CONNECTED", params=(1, 2))
def fully_connected_grad(g: gr.GradNode):
    """y = x2 @ W.T + b over the rows x2 of x ([M, K], W [N, K]): dx = dy2 @ W, dW = dy2.T @ x2,
    db = the sum of dy2's rows (dy2: dy as [M, N])."""
    if g.opts.get("weights_format", 0):
        raise g.fail("shuffled weights have no gradient")
    w = g.x(1)
    units = g.emit("SLICE", g.emit("SHAPE", w, dtype=np.int32), g.const([0], np.int32),
                   g.const([1], np.int32), dtype=np.int32)
    depth = g.emit("SLICE", g.emit("SHAPE", w, dtype=np.int32), g.const([1], np.int32),
                   g.const([1], np.int32), dtype=np.int32)
    minus_one = g.const([-1], np.int32)
    dy2 = g.emit("RESHAPE", g.dy(), g.emit("CONCATENATION", minus_one, units, dtype=np.int32, axis=0))
    out = [None, None, None]
    if g.differentiable(0):
        dx2 = g.emit("BATCH_MATMUL", dy2, w, adj_x=False, adj_y=False)
        out[0] = gr.reshape_like(g, dx2, g.x(0))
    if g.differentiable(1):
        x2 = g.emit("RESHAPE", g.x(0), g.emit("CONCATENATION", minus_one, depth, dtype=np.int32, axis=0))
        out[1] = g.emit("BATCH_MATMUL", dy2, x2, adj_x=True, adj_y=False)
    if g.has(2) and g.differentiable(2):
        out[2] = g.emit("SUM", dy2, g.const([0], np.int32), keep_dims=False)
    return out


@grad_rule("BATCH_MATMUL")
def batch_matmul_grad(g: gr.GradNode):
    """z = op(a) @ op(b), op the transpose of the last two dims where adj_x / adj_y is set (TensorFlow's
    BatchMatMulV2 gradient): with no adjoints da = dz @ b^T, db = a^T @ dz; adj_y: da = dz @ b,
    db = dz^T @ a; adj_x: da = b @ dz^T, db = a @ dz; both: da = b^T @ dz^T, db = dz^T @ a^T. Each is
    summed over the batch dims its operand was broadcast along."""
    adj_x, adj_y = batch_matmul_adjoints(g.opts)
    for i in (0, 1):
        if g.differentiable(1 - i) and not g.differentiable(i) and g.in_dtype(i).kind in "iu":
            raise g.fail("a hybrid BATCH_MATMUL (quantized operand) has no gradient")
    a, b, d = g.x(0), g.x(1), g.dy()

    def mm(p, q, ap, aq):
        return g.emit("BATCH_MATMUL", p, q, adj_x=ap, adj_y=aq)
    # per (adj_x, adj_y): the operands and adjoints of da's and db's products
    da_args = {(False, False): (d, b, False, True), (False, True): (d, b, False, False),
               (True, False): (b, d, False, True), (True, True): (b, d, True, True)}[adj_x, adj_y]
    db_args = {(False, False): (a, d, True, False), (False, True): (d, a, True, False),
               (True, False): (a, d, False, False), (True, True): (d, a, True, True)}[adj_x, adj_y]
    da = mm(*da_args) if g.differentiable(0) else None
    db = mm(*db_args) if g.differentiable(1) else None
    out = []
    for i, grad in ((0, da), (1, db)):
        si, so = g.shape(i), g.shape(g.op.outputs[0], tensor=True)
        same = (si is not None and so is not None and len(si) == len(so) and si[:-2] == so[:-2]
                and all(k >= 0 for k in si[:-2]))
        out.append(grad if grad is None or same else gr.sum_to(g, grad, g.x(i)))
    return out
