"""CONV_2D (incl. grouped), DEPTHWISE_CONV_2D, TRANSPOSE_CONV and CONV_3D, float32, NHWC / NDHWC;
float16 CONV_2D and DEPTHWISE_CONV_2D (which LiteRT runs through XNNPACK only) on a simple path.

Non-grouped convolutions and depthwise convolution run per-shape plans (_conv_plan.py): a pointwise
convolution is one sgemm, others one im2col copy plus one sgemm, a depthwise convolution one einsum
over a strided view of the input. Plans are cached per input shape and made at prepare time for static
shapes, so a static model computes them once and a resized input costs one extra plan. Grouped
convolution is im2col over a strided window view plus a batched matmul; transposed convolution is one
matmul plus a scatter-add per tap.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from onert_py.backends.cpu._common import RELU, RELU6, RELU_N1_TO_1, activation_of, clip_ufunc as _clip
from onert_py.backends.cpu._conv_plan import ConvPlan, DepthwisePlan
from onert_py.backends.cpu._quant import (OutputStage, is_hybrid, activation_range, hybrid_quantize_rows,
                                          multiply_by_quantized_multiplier_int64, qparams, quantize_multiplier,
                                          quantize_multipliers, wrap_int32)
from onert_py.backends.cpu.shape import check_same_types
from onert_py.backends import gradients as gr
from onert_py.backends.registry import CPU, KernelContext, Run, grad_rule, shape_rule
from onert_py.backends.shape_rules import Node, need_rank
from onert_py.errors import article
from onert_py.exec.budget import check_alloc

_F32 = np.dtype(np.float32)
SAME, VALID = 0, 1


def conv_output_size(in_size: int, filt: int, stride: int, dilation: int, padding: int) -> int:
    """Output length of a window sliding over `in_size` (TFLite's ComputeOutSize); -1 when the input
    or filter length is unknown (-1, shape inference)."""
    if in_size < 0 or filt < 0:
        return -1
    eff = (filt - 1) * dilation + 1
    if padding == SAME:
        return (in_size + stride - 1) // stride
    return max((in_size - eff + stride) // stride, 0)


def conv_padding(in_size: int, filt: int, stride: int, dilation: int, padding: int,
                 out_size: int | None = None) -> tuple[int, int]:
    """(before, after) padding as TFLite's ComputePaddingWithOffset: the odd pixel goes after."""
    if out_size is None:
        out_size = conv_output_size(in_size, filt, stride, dilation, padding)
    if padding != SAME:
        return 0, 0
    eff = (filt - 1) * dilation + 1
    total = max((out_size - 1) * stride + eff - in_size, 0)
    return total // 2, total - total // 2


def padding_code(ctx: KernelContext) -> int:
    p = ctx.options.get("padding", SAME)
    if p not in (SAME, VALID):
        raise ctx.fail(f"unknown padding {p}")
    return p


def pad_spatial(x: np.ndarray, pads: Sequence[tuple[int, int]], value=0) -> np.ndarray:
    """x [N, *spatial, C] with spatial padding; returns x itself when there is none."""
    if not any(a or b for a, b in pads):
        return x
    shape = (x.shape[0],) + tuple(s + a + b for s, (a, b) in zip(x.shape[1:-1], pads)) + (x.shape[-1],)
    xp = np.full(shape, value, x.dtype) if value != 0 else np.zeros(shape, x.dtype)
    xp[(slice(None),) + tuple(slice(a, a + s) for s, (a, _) in zip(x.shape[1:-1], pads))] = x
    return xp


def window_view(xp: np.ndarray, filt: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
                out: Sequence[int]) -> np.ndarray:
    """Read-only view [N, *out, *filt, C] of the (already padded) input: patches without copying."""
    nd = len(filt)
    eff = tuple((f - 1) * d + 1 for f, d in zip(filt, dilations))
    win = sliding_window_view(xp, eff, axis=tuple(range(1, nd + 1)))          # [N, *S', C, *eff]
    sl = ((slice(None),) + tuple(slice(None, (o - 1) * s + 1, s) for o, s in zip(out, strides))
          + (slice(None),) + tuple(slice(None, None, d) for d in dilations))
    win = win[sl]                                                            # [N, *out, C, *filt]
    return win.transpose((0, *range(1, nd + 1), *range(nd + 2, 2 * nd + 2), nd + 1))


_CLAMPS = {RELU: (0.0, np.inf), RELU_N1_TO_1: (-1.0, 1.0), RELU6: (0.0, 6.0)}


def _activation(ctx: KernelContext) -> Callable[[np.ndarray], np.ndarray] | None:
    """The fused activation, applied in place to a fresh float32 array; returns the result.

    The clamps are one clip (RELU = clip to [0, inf]: np.maximum is ~3x slower than clip on float32)."""
    code = ctx.options.get("fused_activation_function", 0)
    if code in _CLAMPS:
        lo, hi = (np.float32(b) for b in _CLAMPS[code])
        return lambda y: _clip(y, lo, hi, out=y)
    return activation_of(ctx, tanh_sign_bit="ignore")


def _const_filter(ctx: KernelContext, i: int, rank: int) -> np.ndarray:
    w = ctx.const(i)
    t = ctx.input_tensor(i)
    if len(t.shape) != rank:
        raise ctx.fail(f"filter must have rank {rank}, has shape {list(t.shape)}")
    if w is None:
        raise ctx.fail("a filter computed at run time is not supported; the filter must be a constant")
    return w


def _bias(ctx: KernelContext, i: int, channels: int) -> np.ndarray | None:
    if not ctx.has_input(i):
        return None
    b = ctx.const(i)
    t = ctx.input_tensor(i)
    if int(np.prod(t.shape)) != channels:
        raise ctx.fail(f"bias has shape {list(t.shape)}, expected [{channels}]")
    if b is None:
        raise ctx.fail("a bias computed at run time is not supported; the bias must be a constant")
    return b.reshape(-1)


def _cached(plan: Callable[[tuple[int, ...]], object]) -> Callable[[tuple[int, ...]], object]:
    cache: dict = {}

    def get(shape):
        p = cache.get(shape)
        if p is None:
            p = cache[shape] = plan(shape)
        return p
    return get


def _geometry(sp, filt, strides, dils, padding):
    """Output sizes and (before, after) paddings per spatial dimension."""
    out = tuple(conv_output_size(i, f, s, d, padding) for i, f, s, d in zip(sp, filt, strides, dils))
    pads = tuple(conv_padding(i, f, s, d, padding, o) for i, f, s, d, o in zip(sp, filt, strides, dils, out))
    return out, pads


def _checked_geometry(sp, channels: int, cin: int, filt, strides, dils, padding):
    """_geometry for an input with `channels` channels where the filter expects `cin`."""
    if channels != cin:
        raise ValueError(f"input has {channels} channels, the filter expects {cin}")
    return _geometry(sp, filt, strides, dils, padding)


def _plan_static(ctx: KernelContext, plan: Callable) -> None:
    """Make the plan of a static input shape now, so that every op has reserved its work buffers before
    the first run (they are then allocated once, at their largest size)."""
    t = ctx.input_tensor(0)
    if not t.is_dynamic and all(d > 0 for d in t.shape):
        try:
            plan(tuple(t.shape))
        except ValueError as e:
            raise ctx.fail(str(e)) from None


def _planned_run(ctx: KernelContext, make_plan: Callable, act) -> Run:
    """Run closure of a per-shape plan (ConvPlan, DepthwisePlan) made by make_plan(input shape), cached
    per shape (the static one now): the plan writes conv + bias into the output's planned slot, then
    the fused activation applies in place."""
    plan = _cached(make_plan)
    _plan_static(ctx, plan)
    alloc = ctx.output_buffer(0)            # plans write a fresh array (never a view of x)
    x_i, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values

    def run() -> None:
        x = v[x_i]
        p = plan(x.shape)
        y = p.run(x, alloc(p.out_shape))
        if act is not None:
            y = act(y)
        v[o] = y
    return run


def conv_plan_run(ctx: KernelContext, w2: np.ndarray, filt: tuple[int, ...], strides: tuple[int, ...],
                  dils: tuple[int, ...], bias: np.ndarray | None, finish, product=None,
                  windows_product=None) -> Run:
    """A float32 convolution of one group (w2 [prod(filt) * Cin, Cout]): the per-shape ConvPlan writes
    conv + bias into the output's slot, then finish(y) (the fused activation, or the jit backend's
    epilogue) runs in place. `product` and `windows_product` replace the plan's sgemm (ConvPlan)."""
    padding = padding_code(ctx)
    cin = w2.shape[0] // int(np.prod(filt))
    owner = ctx.runtime                     # work buffers are shared per runtime

    def make_plan(shape):
        out, pads = _checked_geometry(shape[1:-1], shape[-1], cin, filt, strides, dils, padding)
        return ConvPlan(shape, w2, filt, strides, dils, out, pads, bias, owner, product, windows_product)
    return _planned_run(ctx, make_plan, finish)


def _conv_nd(ctx: KernelContext, nd: int, w_mat: np.ndarray, filt: tuple[int, ...], groups: int,
             strides: tuple[int, ...], dils: tuple[int, ...], bias: np.ndarray | None) -> Run:
    """Shared N-d convolution run: w_mat is [G, prod(filt) * Cin/G, Cout/G] in (taps, channel) order."""
    padding = padding_code(ctx)
    act = _activation(ctx)
    cin_w = w_mat.shape[1] // int(np.prod(filt))
    cout = w_mat.shape[0] * w_mat.shape[2]
    x_t = ctx.input_tensor(0)
    if len(x_t.shape) != nd + 2:
        raise ctx.fail(f"input must have rank {nd + 2}, has shape {list(x_t.shape)}")
    if x_t.shape[-1] != cin_w * groups:
        raise ctx.fail(f"input has {x_t.shape[-1]} channels; the filter expects {cin_w}"
                       + (f" x {groups} groups" if groups > 1 else ""))
    bias = None if bias is None else np.asarray(bias, dtype=np.float32)
    x_i = ctx.inputs[0]
    (o,) = ctx.outputs
    v = ctx.values
    if x_t.dtype != _F32:
        return _conv_widened(ctx, w_mat[0], filt, strides, dils, padding, bias, act)
    if groups == 1:
        return conv_plan_run(ctx, w_mat[0], filt, strides, dils, bias, act)

    def grouped_plan(shape):
        return _checked_geometry(shape[1:-1], shape[-1], cin_w * groups, filt, strides, dils, padding)

    get_plan = _cached(grouped_plan)

    def run_grouped() -> None:
        x = v[x_i]
        out, pads = get_plan(x.shape)
        n = x.shape[0]
        m = n * int(np.prod(out))
        win = window_view(pad_spatial(x, pads), filt, strides, dils, out)   # [N, *out, *filt, C]
        g_win = win.reshape(win.shape[:-1] + (groups, cin_w))
        g_win = np.moveaxis(g_win, -2, 0).reshape(groups, m, -1)
        y = np.matmul(g_win, w_mat).transpose(1, 0, 2).reshape(m, cout)
        if bias is not None:
            y += bias
        if act is not None:
            y = act(y)
        v[o] = y.reshape((n,) + out + (cout,))
    return run_grouped


def _widened_run(ctx: KernelContext, filt: tuple[int, ...], cin: int, strides: tuple[int, ...],
                 dils: tuple[int, ...], padding: int, bias: np.ndarray | None, act,
                 compute: Callable[[np.ndarray], np.ndarray]) -> Run:
    """float16 convolutions as XNNPACK computes them: float32 products and sums, rounded to float16
    once. compute(window view [N, *out, *filt, C] of the float32 input) gives [N, *out, O]."""
    out_dt = ctx.output_dtype()
    x_i, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    get_geometry = _cached(lambda shape: _checked_geometry(shape[1:-1], shape[-1], cin, filt, strides,
                                                           dils, padding))

    def run() -> None:
        x = v[x_i].astype(np.float32)
        out, pads = get_geometry(x.shape)
        y = compute(window_view(pad_spatial(x, pads), filt, strides, dils, out))
        if bias is not None:
            y += bias
        if act is not None:
            y = act(y)
        v[o] = y.astype(out_dt)
    return run


def _conv_widened(ctx: KernelContext, w_mat: np.ndarray, filt: tuple[int, ...], strides: tuple[int, ...],
                  dils: tuple[int, ...], padding: int, bias: np.ndarray | None, act) -> Run:
    """float16 convolution (one group): plain im2col over the window view and one matmul (XNNPACK's
    CONV_2D output matches this bit for bit on the cases tested); w_mat is [prod(filt) * C, O]."""
    k, cout = w_mat.shape

    def im2col_matmul(win: np.ndarray) -> np.ndarray:
        return np.matmul(win.reshape(-1, k), w_mat).reshape(win.shape[:1 + len(filt)] + (cout,))
    return _widened_run(ctx, filt, k // int(np.prod(filt)), strides, dils, padding, bias, act, im2col_matmul)


def _conv_filter_groups(ctx: KernelContext) -> tuple[np.ndarray, int]:
    """CONV_2D's constant filter [O, KH, KW, C/groups] and its group count (the input's channels over
    the filter's)."""
    w = _const_filter(ctx, 1, 4)
    cin_f = w.shape[-1]
    cin = ctx.input_tensor(0).shape[-1]
    if cin_f == 0 or cin % cin_f:
        raise ctx.fail(f"input channels {cin} are not a multiple of the filter's input channels {cin_f}")
    if 0 in w.shape or cin == 0:   # no taps or no groups: the output-size and group formulas divide by them
        raise ctx.fail(f"zero-size filter {list(w.shape)} or input channels {cin}")
    return w, cin // cin_f


@CPU.register("CONV_2D", dtypes=("float32", "float16"))
def conv_2d(ctx: KernelContext) -> Run:
    """input [N, H, W, C], filter [O, KH, KW, C/groups], bias [O]."""
    ctx.expect_inputs(2, 3)
    if is_hybrid(ctx) or _int4_hybrid(ctx):
        return _conv_2d_hybrid(ctx)
    dt = check_same_types(ctx, 0, 1, 2, optional=(2,))
    w, groups = _conv_filter_groups(ctx)
    cout, kh, kw, cin_f = w.shape
    if groups > 1 and dt != _F32:
        raise ctx.fail(f"a grouped {dt.name} convolution is not supported (LiteRT runs none)")
    if cout % groups:
        raise ctx.fail(f"output channels {cout} are not a multiple of the {groups} groups")
    o = ctx.options
    strides = (o.get("stride_h", 1), o.get("stride_w", 1))
    dils = (o.get("dilation_h_factor", 1), o.get("dilation_w_factor", 1))
    if min(strides + dils) < 1:
        raise ctx.fail(f"strides {strides} and dilations {dils} must be >= 1")
    return _conv_nd(ctx, 2, conv_2d_matrix(w, groups), (kh, kw), groups, strides, dils, _bias(ctx, 2, cout))


def conv_2d_matrix(w: np.ndarray, groups: int) -> np.ndarray:
    """CONV_2D's filter [O, KH, KW, C/G] as [G, KH*KW*C/G, O/G], contiguous per group: the layout BLAS
    wants for patches @ w."""
    cout, kh, kw, cin_f = w.shape
    return np.ascontiguousarray(
        w.reshape(groups, cout // groups, kh * kw * cin_f).transpose(0, 2, 1), dtype=np.float32)


# --------------------------------------------------------------------- hybrid (dynamic-range) CONV_2D

_HYBRID_CLAMPS = {0: (-np.inf, np.inf), RELU: (0.0, np.inf), RELU_N1_TO_1: (-1.0, 1.0), RELU6: (0.0, 6.0)}


def _int4_hybrid(ctx: KernelContext) -> bool:
    """A float32 input with a quantized INT4 filter: LiteRT's hybrid CONV_2D unpacks it (onert-py's loader
    already has) and runs as with an INT8 one; its hybrid DEPTHWISE_CONV_2D refuses it."""
    x_t, w_t = ctx.input_tensor(0), ctx.input_tensor(1)
    return (x_t is not None and w_t is not None and x_t.dtype == _F32 and w_t.type_name == "INT4"
            and qparams(w_t) is not None)


def _window_geometry(ctx: KernelContext, filt, cin: int, strides, dils) -> Callable:
    """The cached per-input-shape geometry of a 2-D (quantized or hybrid) convolution over a rank-4
    input, planned now for a static shape."""
    padding = padding_code(ctx)
    x_t = ctx.input_tensor(0)
    if len(x_t.shape) != 4:
        raise ctx.fail(f"input must have rank 4, has shape {list(x_t.shape)}")
    get_geometry = _cached(lambda shape: _checked_geometry(shape[1:-1], shape[-1], cin, filt, strides,
                                                           dils, padding))
    _plan_static(ctx, get_geometry)
    return get_geometry


def _hybrid_common(ctx: KernelContext, cout: int):
    """The checks of a hybrid convolution's prepare: float32 output, a constant float32 bias of cout values
    (LiteRT requires one: its kernels read it unconditionally), a fused clamp; returns (bias, (lo, hi),
    the filter's scales as float32)."""
    op = ctx.op.opcode
    out, w_t = ctx.output_tensor(0), ctx.input_tensor(1)
    if out.dtype != _F32:
        raise ctx.fail(f"a hybrid {op} (float32 input, int8 filter) has a float32 output, not {out.type_name}")
    if not ctx.has_input(2):
        raise ctx.fail(f"a hybrid {op} needs a bias (LiteRT requires one)")
    b_t = ctx.input_tensor(2)
    if b_t.dtype != _F32:
        raise ctx.fail(f"the bias of a hybrid {op} must be float32, not {b_t.type_name}")
    bias = _bias(ctx, 2, cout).astype(np.float32)
    code = ctx.options.get("fused_activation_function", 0)
    if code not in _HYBRID_CLAMPS:
        raise ctx.fail(f"a hybrid {op} supports the fused activations NONE, RELU, RELU_N1_TO_1 and RELU6, "
                       f"not {code}")
    lo, hi = (np.float32(b) for b in _HYBRID_CLAMPS[code])
    return bias, (lo, hi), qparams(w_t).scale.astype(np.float32)


def _hybrid_channel_scales(ctx: KernelContext, scales: np.ndarray, cout: int, axis: int) -> None:
    qw = qparams(ctx.input_tensor(1))
    if qw.axis != axis or scales.size != cout:
        raise ctx.fail(f"per-channel hybrid filter scales must be one per output channel along dimension "
                       f"{axis}: have {scales.size} along dimension {qw.axis}")


def _hybrid_window_run(ctx: KernelContext, filt: tuple[int, int], cin: int, cout: int, strides, dils,
                       asymmetric: bool, scales: np.ndarray, bias: np.ndarray, clamp,
                       compute: Callable[[np.ndarray, int], np.ndarray], split: int | None = None) -> Run:
    """Run closure of a hybrid convolution as LiteRT's optimized hybrid kernels: each batch image quantized
    whole (hybrid_quantize_rows), compute(window view [N, OH, OW, KH, KW, C] of q - zero point,
    zero-padded (LiteRT pads with the zero point and subtracts zero point * filter sum, or skips the
    padding: the same sums), M) the exact sums [M, O], then in float32 y = float32(acc) * float32(image
    scale * filter scale) + bias (split None: CONV_2D), or for DEPTHWISE_CONV_2D (float32(acc) * filter
    scale) * image scale on the first `split` channels (its 4-wide SIMD loop) and (float32(acc) * image
    scale) * filter scale on the rest; clamped."""
    get_geometry = _window_geometry(ctx, filt, cin, strides, dils)
    x_i, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    lo, hi = clamp

    def run() -> None:
        x = v[x_i]
        out, pads = get_geometry(x.shape)
        n = x.shape[0]
        shape = (n,) + out + (cout,)
        m = n * out[0] * out[1]
        if m == 0:
            v[o] = np.zeros(shape, np.float32)
            return
        q, sf, offset = hybrid_quantize_rows(x.reshape(n, -1), asymmetric)
        shifted = (q - offset[:, None]).astype(np.float64).reshape(x.shape)
        win = window_view(pad_spatial(shifted, pads), filt, strides, dils, out)
        acc = wrap_int32(compute(win, m).astype(np.int64)).astype(np.float32).reshape(n, -1, cout)
        s = sf[:, None, None]                                              # float32 [N, 1, 1]
        if split is None:
            y = acc * (s * scales) + bias
        else:
            y = np.empty_like(acc)
            y[..., :split] = acc[..., :split] * scales[:split] * s
            y[..., split:] = acc[..., split:] * s * scales[split:]
            y += bias
        np.minimum(y, hi, out=y)
        np.maximum(y, lo, out=y)
        v[o] = y.reshape(shape)
    return run


def _conv_2d_hybrid(ctx: KernelContext) -> Run:
    """CONV_2D with float32 input and output, an int8 filter (per tensor or per output channel) and a float32
    bias, as LiteRT's hybrid kernels (HybridConv, HybridConvPerChannel; _hybrid_window_run). The filter's
    zero point is not read; filters with differing per-channel scales quantize the input asymmetrically,
    the others symmetrically (Conv2DOptions has no asymmetric_quantize_inputs). Grouped ones are refused."""
    w = _const_filter(ctx, 1, 4)
    cout, kh, kw, cin_f = w.shape
    cin = ctx.input_tensor(0).shape[-1]
    if cin_f == 0 or cin != cin_f:
        raise ctx.fail(f"a hybrid CONV_2D needs the filter's input channels ({cin_f}) to equal the input's "
                       f"({cin}): grouped hybrid convolution is not supported")
    strides, dils = _strides_dilations(ctx)
    bias, clamp, scales = _hybrid_common(ctx, cout)
    # LiteRT runs per channel when the filter's scales differ (asymmetric input), else per tensor with
    # the first scale (symmetric input)
    per_channel = bool(scales.size > 1 and np.any(scales != scales[0]))
    if per_channel:
        _hybrid_channel_scales(ctx, scales, cout, 0)
    else:
        scales = scales[:1]
    k = kh * kw * cin_f
    w_mat = np.ascontiguousarray(w.reshape(cout, k).T, dtype=np.float64)

    def im2col(win: np.ndarray, m: int) -> np.ndarray:
        return np.matmul(win.reshape(m, k), w_mat)
    return _hybrid_window_run(ctx, (kh, kw), cin, cout, strides, dils, per_channel, scales, bias, clamp,
                              im2col)


# ------------------------------------------------------------------------------ quantized convolutions
#
# LiteRT's integer convolutions (conv.cc, depthwise_conv.cc): acc = sum (x - zp_in) * (w - zp_w) over
# the window (padding contributes nothing: it is zero in the shifted domain) plus the int32/int64 bias,
# rescaled per output channel by input_scale * filter_scale[c] / output_scale in fixed point, plus the
# output zero point, clamped to the fused activation's range. The sums are computed here in floating
# point on the window view of the shifted input: float32 when every partial sum is an integer below
# 2**24 (then exact in any summation order), float64 otherwise (exact far beyond any layer's depth).

_EXACT_F32 = 1 << 24
_TYPE_INT32, _TYPE_INT64 = 2, 4                   # schema TensorType codes (Conv2DOptions.quantized_bias_type)


class _QuantConv:
    """What a quantized convolution needs at run time, checked at prepare time as LiteRT's Prepare does:
    the input zero point, the filter as exact integers (its zero point subtracted), the bias as int64,
    the per-channel multipliers and shifts, the output's zero point and clamp, and the float type in
    which the sums are exact."""

    def __init__(self, ctx: KernelContext, w: np.ndarray, cout: int, axis: int, taps: int,
                 bias_required: bool, x_index: int = 0, b_index: int = 2):
        op = ctx.op.opcode
        x_t, w_t, out_t = ctx.input_tensor(x_index), ctx.input_tensor(1), ctx.output_tensor(0)
        self.b_index = b_index
        kind = x_t.type_name
        if kind not in ("INT8", "UINT8", "INT16"):
            raise ctx.fail(f"quantized {op} supports INT8, UINT8 and INT16 inputs, not {kind}")
        if out_t.type_name != kind:
            raise ctx.fail(f"output type {out_t.type_name} differs from the input type {kind}")
        qi, qw, qo = qparams(x_t), qparams(w_t), qparams(out_t)
        if qi is None or qo is None:
            raise ctx.fail("the input and the output need quantization parameters")
        if qi.per_channel or qo.per_channel:
            raise ctx.fail("the input and the output need per-tensor quantization")
        want_w = "UINT8" if kind == "UINT8" else "INT8"
        # CONV_2D and DEPTHWISE_CONV_2D run INT4 filters as INT8 (_check_int4_filter); TRANSPOSE_CONV not
        int4_as_int8 = w_t.type_name == "INT4" and op != "TRANSPOSE_CONV"
        w_type = "INT8" if int4_as_int8 else w_t.type_name
        if w_type != want_w:
            raise ctx.fail(f"{article(kind)} {op} needs {article(want_w)} filter, not {w_t.type_name}")
        if qw is None:
            raise ctx.fail("the filter needs quantization parameters")
        if qw.per_channel:
            if kind == "UINT8":
                raise ctx.fail("per-channel filter quantization needs an INT8 or INT16 input (LiteRT)")
            if qw.scale.size != cout or qw.axis != axis:
                raise ctx.fail(f"the filter has {qw.scale.size} scales along dimension {qw.axis}; "
                               f"per-channel quantization needs {cout} along dimension {axis}")
        self.zp_in, zp_out = int(qi.zero_point[0]), int(qo.zero_point[0])
        if kind == "INT16" and (self.zp_in or zp_out):
            raise ctx.fail("INT16 quantization must be symmetric: input and output zero points must be 0")
        if kind == "UINT8":
            w_zp = int(qw.zero_point[0])
        else:
            # CONV_2D refuses a non-zero int8 filter zero point; DEPTHWISE_CONV_2D ignores it (as LiteRT).
            if axis == 0 and np.any(qw.zero_point != 0):
                raise ctx.fail("an INT8 filter must have zero points 0")
            w_zp = 0
        self.w = np.asarray(w, np.int64) - w_zp
        self.bias = self._bias(ctx, kind, op, cout, qi, qw, qo, bias_required)
        s_in, s_out = float(qi.scale[0]), float(qo.scale[0])
        if kind == "UINT8":
            # GetQuantizedConvolutionMultipler: the scales' product in float32, then double.
            real = float(np.float32(qi.scale[0]) * np.float32(qw.scale[0])) / s_out
            m, s = quantize_multiplier(real)
            self.mult, self.shift = np.full(cout, m, np.int64), np.full(cout, s, np.int64)
        else:
            self.mult, self.shift = quantize_multipliers(s_in * np.broadcast_to(qw.scale, (cout,)) / s_out)
        code = ctx.options.get("fused_activation_function", 0)
        if code not in (0, RELU, RELU6, RELU_N1_TO_1):
            raise ctx.fail(f"fused activation {code} is not supported on a quantized {op}")
        self.lo, self.hi = activation_range(code, s_out, zp_out, qo.qmin, qo.qmax)
        self.zp_out, self.dtype, self.wide = zp_out, out_t.dtype, kind == "INT16"
        # The first `half_up` output channels are rescaled rounding halves up, as LiteRT's optimized kernels
        # do (_quant.multiply_by_quantized_multiplier_half_up); the kernel sets it.
        self.half_up = 0
        if kind == "INT16" and self.bias_type == np.int32:
            self.wide = False                      # the int32-bias 16x8 kernel rescales int32 sums
        x_abs = max(self.zp_in - qi.qmin, qi.qmax - self.zp_in)
        w_abs = int(np.abs(self.w).max()) if self.w.size else 0
        self.float = np.float32 if taps * x_abs * w_abs < _EXACT_F32 else np.float64
        self.x_abs_raw, self.taps_w_abs = max(-qi.qmin, qi.qmax), taps * w_abs
        # the largest |sum + bias|: lets the output stage skip int32 wrapping it can never need
        self.bound = taps * x_abs * w_abs + (int(np.abs(self.bias).max()) if self.bias is not None and self.bias.size else 0)
        # the same per output channel, from the filter's own sum of |w|: a tighter bound for the output stage
        w_sum = np.abs(np.moveaxis(self.w, axis, 0)).reshape(cout, -1).sum(axis=1) if self.w.size else np.zeros(cout, np.int64)
        self.channel_bound = x_abs * w_sum + (np.abs(self.bias) if self.bias is not None else 0)
        self._stage: OutputStage | None = None

    def _bias(self, ctx, kind, op, cout, qi, qw, qo, required) -> np.ndarray | None:
        self.bias_type = None
        bi = self.b_index
        if not ctx.has_input(bi):
            if required:
                raise ctx.fail(f"a quantized {op} needs a bias (LiteRT requires one)")
            return None
        b_t = ctx.input_tensor(bi)
        # CONV_2D and TRANSPOSE_CONV read quantized_bias_type (int32 or int64 16x8 biases)
        bias_typed = ctx.op.opcode in ("CONV_2D", "TRANSPOSE_CONV")
        if kind == "INT16":
            allowed = ("INT32", "INT64") if bias_typed else ("INT64",)
        else:
            allowed = ("INT32",)
        if b_t.type_name not in allowed:
            raise ctx.fail(f"{article(kind)} {op} needs {article(' or '.join(allowed))} bias, not {b_t.type_name}")
        qb = qparams(b_t)
        if qb is not None and int(qb.zero_point[0]) != 0:
            raise ctx.fail("the bias zero point must be 0")
        if kind == "INT16" and bias_typed:
            declared = ctx.options.get("quantized_bias_type", 0)
            if declared not in (0, _TYPE_INT32, _TYPE_INT64):
                raise ctx.fail(f"quantized_bias_type {declared} must be INT32 or INT64")
            want = "INT32" if declared == _TYPE_INT32 else "INT64"
            if b_t.type_name != want:
                # LiteRT reads the bias as int64 unless quantized_bias_type says INT32.
                raise ctx.fail(f"an INT16 {op} with quantized_bias_type "
                               f"{'INT32' if declared == _TYPE_INT32 else 'unset' if declared == 0 else 'INT64'}"
                               f" needs an {want} bias, not {b_t.type_name}")
        if kind == "UINT8":
            # GetQuantizedConvolutionMultipler: the bias scale must be close to input * filter scales.
            b_scale = float(qb.scale[0]) if qb is not None else 0.0
            diff = abs(float(qi.scale[0]) * float(qw.scale[0]) - b_scale)
            if not diff / float(qo.scale[0]) <= 0.02:
                raise ctx.fail(f"the bias scale {b_scale} differs from input scale * filter scale "
                               f"{float(qi.scale[0]) * float(qw.scale[0])} (LiteRT requires them close)")
        self.bias_type = np.int32 if b_t.type_name == "INT32" else np.int64
        b = _bias(ctx, bi, cout)
        return np.asarray(b, np.int64)

    def shifted(self, x: np.ndarray) -> np.ndarray:
        """x - zp_in, exact, in the float type of the sums."""
        xs = x.astype(self.float)
        if self.zp_in:
            xs -= self.zp_in
        return xs

    def output(self, acc: np.ndarray, bias_added: bool = False) -> np.ndarray:
        """The integer sums acc [..., O] (exact floats) plus the bias, rescaled, clamped, in the output
        type."""
        if self.wide:
            a = acc.astype(np.int64)
            if self.bias is not None and not bias_added:
                a += self.bias
            r = wrap_int32(multiply_by_quantized_multiplier_int64(a, self.mult, self.shift))  # C's cast
            np.clip(r + self.zp_out, self.lo, self.hi, out=r)
            return r.astype(self.dtype)
        if self._stage is None:
            self._stage = OutputStage(self.mult, self.shift, self.zp_out, self.lo, self.hi, self.dtype,
                                      half_up=self.half_up, bound=self.channel_bound)
        return self._stage(acc, None if bias_added else self.bias)


def _strides_dilations(ctx: KernelContext) -> tuple[tuple[int, int], tuple[int, int]]:
    o = ctx.options
    strides = (o.get("stride_h", 1), o.get("stride_w", 1))
    dils = (o.get("dilation_h_factor", 1), o.get("dilation_w_factor", 1))
    if min(strides + dils) < 1:
        raise ctx.fail(f"strides {strides} and dilations {dils} must be >= 1")
    return strides, dils


def _quantized_window_run(ctx: KernelContext, q: _QuantConv, filt: tuple[int, int], cin: int, cout: int,
                          strides, dils, compute: Callable[[np.ndarray, int], np.ndarray],
                          float_plan: Callable | None = None, w_sums: np.ndarray | None = None) -> Run:
    """Run closure of a quantized convolution: compute(window view [N, OH, OW, KH, KW, C] of x - zp_in
    (zero-padded), M = N*OH*OW) gives the exact sums [M, O]; q.output rescales them.

    When every partial sum is an exact float32 integer (q.float), float_plan(input shape, output
    sizes, pads, float bias or None) instead gives the float kernel's plan (ConvPlan, DepthwisePlan),
    run on x - zp_in: the same exact sums, in whatever order, at the float kernel's speed. w_sums: the
    filter's integer sum per output channel, which lets an unpadded convolution skip the subtraction."""
    get_geometry = _window_geometry(ctx, filt, cin, strides, dils)
    x_i, (o,) = ctx.inputs[0], ctx.outputs
    v = ctx.values
    if float_plan is not None and q.float == np.float32:
        # the bias joins the float sums when they stay exact with it
        bias = q.bias.astype(np.float32) if q.bias is not None and q.bound < _EXACT_F32 else None
        shift_input = True
        if q.zp_in and w_sums is not None and (filt == (1, 1) or padding_code(ctx) == VALID):
            # Never padded: sum (x - zp) * w is sum x * w - zp * sum w, so the zero point joins the bias
            # and x is only converted.
            folded = w_sums * -q.zp_in + (0 if q.bias is None else q.bias)
            if q.x_abs_raw * q.taps_w_abs + int(np.abs(folded).max(initial=0)) < _EXACT_F32:
                bias, shift_input = folded.astype(np.float32), False
        plan = _cached(lambda shape: float_plan(shape, *get_geometry(shape), bias))
        _plan_static(ctx, plan)

        def run_planned() -> None:
            x = v[x_i]
            xs = q.shifted(x) if shift_input else x.astype(np.float32)
            v[o] = q.output(plan(x.shape).run(xs), bias_added=bias is not None)
        return run_planned

    def run() -> None:
        x = v[x_i]
        out, pads = get_geometry(x.shape)
        shape = (x.shape[0],) + out + (cout,)
        m = x.shape[0] * out[0] * out[1]
        if m == 0:
            v[o] = np.zeros(shape, q.dtype)
            return
        win = window_view(pad_spatial(q.shifted(x), pads), filt, strides, dils, out)
        v[o] = q.output(compute(win, m)).reshape(shape)
    return run


def _check_int4_filter(ctx: KernelContext) -> None:
    """An INT4 filter (unpacked by the loader) is read as INT8 by _QuantConv where LiteRT 2.3 runs its
    int8 kernels on the unpacked values: CONV_2D with an INT8 or INT16 input (per channel
    or per tensor, zero points 0), DEPTHWISE_CONV_2D with an INT8 input. LiteRT's other INT4
    combinations compute something else: its uint8 CONV_2D reads the unpacked values as uint8 bytes
    (-1 as 255), its uint8 and 16x8 DEPTHWISE_CONV_2D read the packed bytes; onert-py refuses them."""
    if ctx.input_tensor(1).type_name != "INT4":
        return
    op, kind = ctx.op.opcode, ctx.input_tensor(0).type_name
    allowed = ("INT8", "INT16") if op == "CONV_2D" else ("INT8",)
    if kind not in allowed:
        raise ctx.fail(f"an INT4 filter needs an {' or '.join(allowed)} input for a quantized {op}, not "
                       f"{kind} (LiteRT's {kind} kernel does not compute with the int4 values)")


@CPU.register_quantized("CONV_2D", dtypes=("int8", "uint8", "int16"))
def conv_2d_quantized(ctx: KernelContext) -> Run:
    """Quantized CONV_2D as LiteRT's integer kernels: int8 input with an int8 filter quantized per
    output channel (or per tensor), uint8 with a uint8 filter (per tensor, any zero point), int16 with
    an int8 filter (16x8, int64 bias, or int32 with quantized_bias_type INT32); grouped too. One im2col
    matmul (per group) of exact integer sums, then the fixed-point rescale (_QuantConv)."""
    ctx.expect_inputs(2, 3)
    w, groups = _conv_filter_groups(ctx)
    cout, kh, kw, cin_f = w.shape
    if cout % groups:
        raise ctx.fail(f"output channels {cout} are not a multiple of the {groups} groups")
    strides, dils = _strides_dilations(ctx)
    k = kh * kw * cin_f
    _check_int4_filter(ctx)
    q = _QuantConv(ctx, w, cout, 0, k, bias_required=True)
    # LiteRT's optimized kernel (one GEMM on ruy) runs ungrouped convolutions; grouped ones and int64
    # biases run on the reference kernel.
    if groups == 1 and not q.wide:
        q.half_up = cout
    # [G, KH*KW*Cg, O/G] exact integers in the sums' float type
    w_mat = np.ascontiguousarray(q.w.reshape(groups, cout // groups, k).transpose(0, 2, 1), dtype=q.float)

    def im2col(win: np.ndarray, m: int) -> np.ndarray:
        if groups == 1:
            return np.matmul(win.reshape(m, k), w_mat[0])
        g_win = np.moveaxis(win.reshape(win.shape[:-1] + (groups, cin_f)), -2, 0).reshape(groups, m, k)
        return np.matmul(g_win, w_mat).transpose(1, 0, 2).reshape(m, cout)

    def float_plan(shape, out, pads, bias):
        return ConvPlan(shape, w_mat[0], (kh, kw), strides, dils, out, pads, bias, ctx.runtime)
    return _quantized_window_run(ctx, q, (kh, kw), groups * cin_f, cout, strides, dils, im2col,
                                 float_plan if groups == 1 else None, q.w.reshape(cout, -1).sum(axis=1))


@shape_rule("CONV_2D", "DEPTHWISE_CONV_2D")
def conv2d_shape(n: Node):
    x, f = need_rank(n, 0, 4), need_rank(n, 1, 4, "filter")
    if x is None or f is None:
        return [None if x is None else (x[0], -1, -1, f[3] if f else -1)]
    o = n.opts
    if n.op.opcode == "CONV_2D" and x[3] > 0 and f[3] > 0 and x[3] % f[3]:
        raise n.fail(f"input depth {x[3]} is not a multiple of the filter depth {f[3]}")
    if n.op.opcode == "DEPTHWISE_CONV_2D" and x[3] > 0 and f[3] >= 0 and f[3] % x[3]:
        raise n.fail(f"filter channels {f[3]} are not a multiple of the input depth {x[3]}")
    p = int(o.get("padding", 0))
    oh = conv_output_size(x[1], f[1], int(o.get("stride_h", 1)), int(o.get("dilation_h_factor", 1)), p)
    ow = conv_output_size(x[2], f[2], int(o.get("stride_w", 1)), int(o.get("dilation_w_factor", 1)), p)
    return [(x[0], oh, ow, f[0] if n.op.opcode == "CONV_2D" else f[3])]


@CPU.register("CONV_3D", dtypes=("float32",))
def conv_3d(ctx: KernelContext) -> Run:
    """input [N, D, H, W, C], filter [KD, KH, KW, C, O], bias [O]."""
    ctx.expect_inputs(2, 3)
    check_same_types(ctx, 0, 1, 2, optional=(2,))
    w = _const_filter(ctx, 1, 5)
    kd, kh, kw, cin_f, cout = w.shape
    o = ctx.options
    strides = (o.get("stride_d", 1), o.get("stride_h", 1), o.get("stride_w", 1))
    dils = (o.get("dilation_d_factor", 1), o.get("dilation_h_factor", 1), o.get("dilation_w_factor", 1))
    if min(strides + dils) < 1:
        raise ctx.fail(f"strides {strides} and dilations {dils} must be >= 1")
    w_mat = np.ascontiguousarray(w.reshape(1, kd * kh * kw * cin_f, cout), dtype=np.float32)
    return _conv_nd(ctx, 3, w_mat, (kd, kh, kw), 1, strides, dils, _bias(ctx, 2, cout))


@shape_rule("CONV_3D")
def conv3d_shape(n: Node):
    x, f = need_rank(n, 0, 5), need_rank(n, 1, 5, "filter")
    if x is None or f is None:
        return [None if x is None else (x[0], -1, -1, -1, f[4] if f else -1)]
    if x[4] >= 0 and f[3] >= 0 and x[4] != f[3]:
        raise n.fail(f"input depth {x[4]} differs from the filter's input depth {f[3]}")
    o, p = n.opts, int(n.opts.get("padding", 0))
    dims = tuple(conv_output_size(x[1 + k], f[k], int(o.get(f"stride_{a}", 1)),
                                  int(o.get(f"dilation_{a}_factor", 1)), p) for k, a in enumerate("dhw"))
    return [(x[0],) + dims + (f[4],)]


@CPU.register("DEPTHWISE_CONV_2D", dtypes=("float32", "float16"))
def depthwise_conv_2d(ctx: KernelContext) -> Run:
    """input [N, H, W, C], filter [1, KH, KW, C*M], bias [C*M]; output channel c*M + m reads channel c.

    The whole op is one `np.einsum` over a strided view of the input (in a zero-bordered scratch buffer
    when there is padding) that puts every tap's window at a fixed offset: einsum's multiply-accumulate
    loop sums the taps without temporaries (see _conv_plan.DepthwisePlan).
    """
    ctx.expect_inputs(2, 3)
    if is_hybrid(ctx):
        return _depthwise_conv_2d_hybrid(ctx)
    if _int4_hybrid(ctx):
        raise ctx.fail("a hybrid DEPTHWISE_CONV_2D (float32 input) needs an INT8 filter, not INT4 (LiteRT "
                       "runs none with an INT4 filter)")
    dt = check_same_types(ctx, 0, 1, 2, optional=(2,))
    w = _const_filter(ctx, 1, 4)
    one, kh, kw, cout = w.shape
    if one != 1:
        raise ctx.fail(f"filter must have shape [1, KH, KW, C*M], has {list(w.shape)}")
    cin = ctx.input_tensor(0).shape[-1]
    if len(ctx.input_tensor(0).shape) != 4:
        raise ctx.fail(f"input must have rank 4, has shape {list(ctx.input_tensor(0).shape)}")
    if cin == 0 or cout % cin:
        raise ctx.fail(f"filter channels {cout} are not a multiple of the input channels {cin}")
    mult = cout // cin  # as LiteRT: derived from the shapes (the depth_multiplier option is advisory)
    o = ctx.options
    sh, sw = o.get("stride_h", 1), o.get("stride_w", 1)
    dh, dw = o.get("dilation_h_factor", 1), o.get("dilation_w_factor", 1)
    if min(sh, sw, dh, dw) < 1:
        raise ctx.fail("strides and dilations must be >= 1")
    padding = padding_code(ctx)
    act = _activation(ctx)
    bias = _bias(ctx, 2, cout)
    taps = np.asarray(w, dtype=np.float32).reshape(kh, kw, cout)
    bias = None if bias is None else np.asarray(bias, dtype=np.float32)
    if dt != _F32:
        return _depthwise_widened(ctx, taps, mult, (sh, sw), (dh, dw), padding, bias, act)
    owner = ctx.runtime                         # work buffers are shared per runtime

    def make_plan(shape):
        out, pads = _checked_geometry(shape[1:3], shape[-1], cin, (kh, kw), (sh, sw), (dh, dw), padding)
        return DepthwisePlan(shape, mult, taps, bias, (sh, sw), (dh, dw), out, pads, owner)
    return _planned_run(ctx, make_plan, act)


def _depthwise_widened(ctx: KernelContext, taps: np.ndarray, mult: int, strides: tuple[int, int],
                       dils: tuple[int, int], padding: int, bias: np.ndarray | None, act) -> Run:
    """float16 depthwise convolution: one einsum over the window view. (XNNPACK's float16 kernels differ
    by an ulp or so: some round the sum after every tap, in an order that depends on the kernel size.)
    taps is [KH, KW, C*M] in float32."""
    kh, kw, cout = taps.shape

    def taps_einsum(win: np.ndarray) -> np.ndarray:   # win [N, OH, OW, KH, KW, C]
        if mult > 1:
            win = np.repeat(win, mult, axis=-1)     # output channel c*M + m reads input channel c
        return np.einsum("nhwijc,ijc->nhwc", win, taps)
    return _widened_run(ctx, (kh, kw), cout // mult, strides, dils, padding, bias, act, taps_einsum)


def _depthwise_conv_2d_hybrid(ctx: KernelContext) -> Run:
    """DEPTHWISE_CONV_2D with float32 input and output, an int8 filter quantized per output channel and a
    float32 bias, as LiteRT's optimized EvalHybridPerChannel: each batch image quantized asymmetrically
    (_hybrid_window_run). LiteRT reads one scale per output channel whatever the quantization (past the
    end of a single per-tensor scale), and the depth multiplier from the option: other forms are refused."""
    w = _const_filter(ctx, 1, 4)
    one, kh, kw, cout = w.shape
    x_t = ctx.input_tensor(0)
    if one != 1:
        raise ctx.fail(f"filter must have shape [1, KH, KW, C*M], has {list(w.shape)}")
    if len(x_t.shape) != 4:
        raise ctx.fail(f"input must have rank 4, has shape {list(x_t.shape)}")
    cin = x_t.shape[-1]
    if cin <= 0 or cout % cin:
        raise ctx.fail(f"filter channels {cout} are not a multiple of the input channels {cin}")
    mult = cout // cin
    if ctx.options.get("depth_multiplier", 0) != mult:
        raise ctx.fail(f"a hybrid DEPTHWISE_CONV_2D needs depth_multiplier {mult} (filter channels / input "
                       f"channels), has {ctx.options.get('depth_multiplier', 0)}")
    strides, dils = _strides_dilations(ctx)
    bias, clamp, scales = _hybrid_common(ctx, cout)
    if cout > 1:
        _hybrid_channel_scales(ctx, scales, cout, 3)
    taps = w.reshape(kh, kw, cin, mult).astype(np.float64)   # output channel c*M + m reads channel c

    def einsum(win: np.ndarray, m: int) -> np.ndarray:
        return np.einsum("nhwijc,ijcm->nhwcm", win, taps).reshape(m, cout)
    return _hybrid_window_run(ctx, (kh, kw), cin, cout, strides, dils, True, scales, bias, clamp, einsum,
                              split=cout // 4 * 4)


@CPU.register_quantized("DEPTHWISE_CONV_2D", dtypes=("int8", "uint8", "int16"))
def depthwise_conv_2d_quantized(ctx: KernelContext) -> Run:
    """Quantized DEPTHWISE_CONV_2D as LiteRT's integer kernels: int8 with an int8 filter per output
    channel (dimension 3) or per tensor, uint8 with a uint8 filter (per tensor), int16 with an int8
    filter (16x8, int64 bias). One einsum over the window view of x - zp_in gives the exact sums, then
    the fixed-point rescale (_QuantConv)."""
    ctx.expect_inputs(2, 3)
    w = _const_filter(ctx, 1, 4)
    one, kh, kw, cout = w.shape
    if one != 1:
        raise ctx.fail(f"filter must have shape [1, KH, KW, C*M], has {list(w.shape)}")
    cin = ctx.input_tensor(0).shape[-1]
    if cin <= 0 or cout % cin:
        raise ctx.fail(f"filter channels {cout} are not a multiple of the input channels {cin}")
    mult = cout // cin
    if ctx.input_tensor(0).type_name == "INT16" and ctx.options.get("depth_multiplier", 0) != mult:
        # LiteRT's 16x8 kernel takes the multiplier from the option, not from the shapes.
        raise ctx.fail(f"an INT16 DEPTHWISE_CONV_2D needs depth_multiplier {mult} (filter channels / "
                       f"input channels), has {ctx.options.get('depth_multiplier', 0)}")
    strides, dils = _strides_dilations(ctx)
    _check_int4_filter(ctx)
    q = _QuantConv(ctx, w, cout, 3, kh * kw, bias_required=False)
    taps = q.w.reshape(kh, kw, cin, mult).astype(q.float)   # output channel c*M + m reads channel c
    if ctx.input_tensor(0).type_name == "INT8":
        # LiteRT's optimized int8 kernel rescales channels in blocks of 8 with SIMD (rounding halves
        # up), the remaining ones one by one (the reference rounding).
        q.half_up = cout // 8 * 8

    def einsum(win: np.ndarray, m: int) -> np.ndarray:
        return np.einsum("nhwijc,ijcm->nhwcm", win, taps).reshape(m, cout)

    def float_plan(shape, out, pads, bias):
        return DepthwisePlan(shape, mult, taps.reshape(kh, kw, cout), bias, strides, dils, out, pads,
                             ctx.runtime)
    return _quantized_window_run(ctx, q, (kh, kw), cin, cout, strides, dils, einsum, float_plan,
                                 q.w.reshape(-1, cout).sum(axis=0))


def _constant_output_shape(ctx: KernelContext, get_plan: Callable) -> tuple[int, ...] | None:
    """TRANSPOSE_CONV's output_shape (input 0) when it is a constant, checked (4 values) and, for a static
    input, planned now; None when it comes at run time."""
    os_const = ctx.const(0)
    if os_const is None:
        return None
    if os_const.size != 4:
        raise ctx.fail(f"output_shape must hold 4 values, has {os_const.size}")
    out_key = tuple(int(d) for d in os_const.reshape(-1))
    x_t = ctx.input_tensor(2)
    if not x_t.is_dynamic:
        try:
            get_plan((tuple(x_t.shape), out_key))
        except ValueError as e:
            raise ctx.fail(str(e)) from None
    return out_key


def _transpose_conv_plan(ctx: KernelContext, w_shape, sh: int, sw: int, padding: int, check_input: bool = False,
                         acc_dtype: Any = np.float32) -> Callable:
    """TRANSPOSE_CONV's geometry: plan((input shape, output shape)) -> (the uncropped accumulator's shape,
    per filter tap (i, j, the accumulator slice its input-pixel contributions land on), the crop to the
    output). check_input: the input's spatial size must be the one a convolution of the output gives
    (LiteRT's check). The accumulator (of acc_dtype) grows with the strides, whatever the output's size:
    it is checked against the session's memory budget before a run allocates it."""
    cout, kh, kw, cin = w_shape
    limit = ctx.runtime.options.max_memory

    def plan(key):
        x_shape, out_shape = key
        n, h, wd, c = x_shape
        on, oh, ow, oc = out_shape
        if c != cin or on != n or oc != cout:
            raise ValueError(f"output_shape {list(out_shape)} and input shape {list(x_shape)} do not fit "
                             f"the filter {list(w_shape)}")
        ih_ = conv_output_size(oh, kh, sh, 1, padding)
        iw_ = conv_output_size(ow, kw, sw, 1, padding)
        if check_input and (ih_, iw_) != (h, wd):
            raise ValueError(f"output_shape {list(out_shape)} needs an input of spatial size {ih_}x{iw_}, "
                             f"not {h}x{wd}")
        pt, _ = conv_padding(oh, kh, sh, 1, padding, ih_)
        pl, _ = conv_padding(ow, kw, sw, 1, padding, iw_)
        full_h = max((h - 1) * sh + kh, pt + oh)
        full_w = max((wd - 1) * sw + kw, pl + ow)
        check_alloc((n, full_h, full_w, cout), acc_dtype, f"{ctx.where}: the accumulator", limit)
        taps = [(i, j, (slice(None), slice(i, i + (h - 1) * sh + 1, sh), slice(j, j + (wd - 1) * sw + 1, sw)))
                for i in range(kh) for j in range(kw)]
        return (n, full_h, full_w, cout), taps, (slice(None), slice(pt, pt + oh), slice(pl, pl + ow))
    return plan


def _transpose_conv_operands(ctx: KernelContext) -> tuple[np.ndarray, int, int, int]:
    """TRANSPOSE_CONV's constant filter [O, KH, KW, C] checked against input 2 [N, H, W, C], its strides
    and padding code."""
    w = _const_filter(ctx, 1, 4)
    cin = w.shape[-1]
    x_t = ctx.input_tensor(2)
    if len(x_t.shape) != 4 or x_t.shape[-1] != cin:
        raise ctx.fail(f"input shape {list(x_t.shape)} does not match the filter {list(w.shape)} "
                       f"(needs [N, H, W, {cin}])")
    sh, sw = ctx.options.get("stride_h", 1), ctx.options.get("stride_w", 1)
    if min(sh, sw) < 1:
        raise ctx.fail("strides must be >= 1")
    return w, sh, sw, padding_code(ctx)


@CPU.register("TRANSPOSE_CONV", dtypes=("float32",))
def transpose_conv(ctx: KernelContext) -> Run:
    """inputs (output_shape, filter [O, KH, KW, C], input [N, H, W, C], optional bias [O]).

    out[n, ih*s + kh - pad_top, iw*s + kw - pad_left, o] += x[n, ih, iw, c] * filter[o, kh, kw, c]
    """
    ctx.expect_inputs(3, 4)
    x_t, w_t = ctx.input_tensor(2), ctx.input_tensor(1)
    if x_t.dtype == _F32 and w_t.type_name == "INT8" and qparams(w_t) is not None:
        return _transpose_conv_hybrid(ctx)
    if w_t.type_name == "INT4":
        raise ctx.fail("TRANSPOSE_CONV takes no INT4 filter (LiteRT's wants FLOAT32 or INT8 weights)")
    check_same_types(ctx, 2, 1, 3, optional=(3,))
    w, sh, sw, padding = _transpose_conv_operands(ctx)
    cout, kh, kw, cin = w.shape
    act = activation_of(ctx, tanh_sign_bit="ignore")
    bias = _bias(ctx, 3, cout)
    # [C, KH*KW*O]: one matmul gives every tap's contribution for every input pixel.
    w_mat = np.ascontiguousarray(w.transpose(3, 1, 2, 0).reshape(cin, kh * kw * cout), dtype=np.float32)
    os_const = ctx.const(0)
    if os_const is not None:
        if os_const.size != 4:
            raise ctx.fail(f"output_shape must hold 4 values, has {os_const.size}")
        if int(os_const.reshape(-1)[3]) != cout:
            raise ctx.fail(f"output_shape {os_const.tolist()} disagrees with the filter's {cout} channels")

    get_plan = _cached(_transpose_conv_plan(ctx, w.shape, sh, sw, padding))
    s_i, x_i = ctx.inputs[0], ctx.inputs[2]
    (o_i,) = ctx.outputs
    v = ctx.values
    out_key = tuple(int(d) for d in os_const.reshape(-1)) if os_const is not None else None

    def run() -> None:
        x = v[x_i]
        ok = out_key if out_key is not None else tuple(int(d) for d in np.ravel(v[s_i]))
        full, taps, crop = get_plan((x.shape, ok))
        n, h, wd, _ = x.shape
        cols = np.matmul(x.reshape(-1, cin), w_mat).reshape(n, h, wd, kh, kw, cout)
        buf = np.zeros(full, np.float32)
        for i, j, sl in taps:
            buf[sl] += cols[:, :, :, i, j, :]
        y = np.ascontiguousarray(buf[crop])   # buf itself when there is nothing to crop
        if bias is not None:
            y += bias
        if act is not None:
            act(y)
        v[o_i] = y
    return run


def _transpose_conv_hybrid(ctx: KernelContext) -> Run:
    """TRANSPOSE_CONV with a float32 input and output, an int8 filter (per tensor or per output channel)
    and an optional float32 bias, as LiteRT's EvalHybrid (reference HybridTransposeConv): each batch
    image quantized asymmetrically (hybrid_quantize_rows), then every input value's contribution
    float32((q - offset) * filter) * filter scale[o] * image scale, in float32, added to the output in
    LiteRT's scatter order (input row, column, channel ascending: filter taps from the last to the first,
    channels ascending), then the bias, clamped. The filter's zero point is not read."""
    w, sh, sw, padding = _transpose_conv_operands(ctx)
    cout, kh, kw, _ = w.shape
    if ctx.output_tensor(0).dtype != _F32:
        raise ctx.fail(f"a hybrid TRANSPOSE_CONV (float32 input, int8 filter) has a float32 output, not "
                       f"{ctx.output_tensor(0).type_name}")
    bias = None
    if ctx.has_input(3):
        b_t = ctx.input_tensor(3)
        if b_t.dtype != _F32:
            raise ctx.fail(f"the bias of a hybrid TRANSPOSE_CONV must be float32, not {b_t.type_name}")
        bias = _bias(ctx, 3, cout).astype(np.float32)
    code = ctx.options.get("fused_activation_function", 0) or 0
    if code not in _HYBRID_CLAMPS:
        raise ctx.fail(f"a hybrid TRANSPOSE_CONV supports the fused activations NONE, RELU, RELU_N1_TO_1 "
                       f"and RELU6, not {code}")
    lo, hi = (np.float32(b) for b in _HYBRID_CLAMPS[code])
    qw = qparams(ctx.input_tensor(1))
    scales = qw.scale.astype(np.float32)
    if scales.size == 1:
        scales = np.full(cout, scales[0], np.float32)
    elif qw.axis != 0 or scales.size != cout:
        raise ctx.fail(f"per-channel hybrid filter scales must be one per output channel along dimension "
                       f"0: have {scales.size} along dimension {qw.axis}")
    # per tap, [C, O] in LiteRT's order: taps from the last to the first
    taps_w = [(i, j, np.ascontiguousarray(w[:, i, j, :].T, dtype=np.float32))
              for i in reversed(range(kh)) for j in reversed(range(kw))]
    get_plan = _cached(_transpose_conv_plan(ctx, w.shape, sh, sw, padding, check_input=True))
    out_key = _constant_output_shape(ctx, get_plan)
    s_i, x_i = ctx.inputs[0], ctx.inputs[2]
    (o_i,) = ctx.outputs
    v = ctx.values

    def run() -> None:
        x = v[x_i]
        ok = out_key if out_key is not None else tuple(int(d) for d in np.ravel(v[s_i]))
        try:
            full, tap_slices, crop = get_plan((x.shape, ok))
        except ValueError as e:
            raise ValueError(f"TRANSPOSE_CONV: {e}") from None
        n = x.shape[0]
        buf = np.zeros(full, np.float32)
        if x.size:
            q, sf, offset = hybrid_quantize_rows(x.reshape(n, -1), True)
            xs = (q - offset[:, None]).astype(np.float32).reshape(x.shape)[..., None]   # [N, H, W, C, 1]
            s = sf[:, None, None, None, None]
            slices = {(i, j): sl for i, j, sl in tap_slices}
            for i, j, wt in taps_w:
                term = xs * wt                      # exact: |(q - offset) * w| < 2**16
                term *= scales
                term *= s
                sl = slices[(i, j)]
                # the output's running sum, then this tap's channels one by one (a sequential float32 sum)
                seq = np.concatenate([buf[sl][:, :, :, None, :], term], axis=3)
                buf[sl] = np.add.accumulate(seq, axis=3)[:, :, :, -1, :]
        y = np.ascontiguousarray(buf[crop])
        if bias is not None:
            y += bias
        np.maximum(y, lo, out=y)
        np.minimum(y, hi, out=y)
        v[o_i] = y
    return run


@CPU.register_quantized("TRANSPOSE_CONV", dtypes=("int8", "int16"))
def transpose_conv_quantized(ctx: KernelContext) -> Run:
    """Quantized TRANSPOSE_CONV as LiteRT's kernels: int8 input, int8 filter per output channel (or per
    tensor), int32 bias; int16 input with an int8 filter (16x8, zero points 0), an int64 bias, or int32
    with quantized_bias_type INT32. acc[n, oh, ow, o] = sum of (x - zp_in) * filter over the taps landing
    there (exact), plus the bias, rescaled per channel (_QuantConv), clamped.

    LiteRT's optimized kernel (int8, and 16x8 with an int32 bias) rescales the first floor(O / 8) * 8
    channels with its vector code (halves up) and the rest with MultiplyByQuantizedMultiplier; the
    int64-bias 16x8 kernel is the reference one (int64 rescale)."""
    ctx.expect_inputs(3, 4)
    w, sh, sw, padding = _transpose_conv_operands(ctx)
    cout, kh, kw, cin = w.shape
    q = _QuantConv(ctx, w, cout, 0, kh * kw * cin, bias_required=False, x_index=2, b_index=3)
    if not q.wide:
        q.half_up = cout // 8 * 8
    w_mat = np.ascontiguousarray(q.w.transpose(3, 1, 2, 0).reshape(cin, kh * kw * cout), dtype=q.float)
    get_plan = _cached(_transpose_conv_plan(ctx, w.shape, sh, sw, padding, check_input=True,
                                                acc_dtype=q.float))
    out_key = _constant_output_shape(ctx, get_plan)
    s_i, x_i = ctx.inputs[0], ctx.inputs[2]
    (o_i,) = ctx.outputs
    v = ctx.values

    def run() -> None:
        x = v[x_i]
        ok = out_key if out_key is not None else tuple(int(d) for d in np.ravel(v[s_i]))
        full, taps, crop = get_plan((x.shape, ok))
        n, h, wd, _ = x.shape
        cols = np.matmul(q.shifted(x).reshape(-1, cin), w_mat).reshape(n, h, wd, kh, kw, cout)
        buf = np.zeros(full, q.float)
        for i, j, sl in taps:
            buf[sl] += cols[:, :, :, i, j, :]
        v[o_i] = q.output(buf[crop])
    return run


@shape_rule("TRANSPOSE_CONV")
def transposed_conv_shape(n: Node):
    """The output shape is input 0's value; without it only its rank (input 0's length) is known. The
    filter's last dim is the input depth (TRANSPOSE_CONV [O, KH, KW, C], CONV_3D_TRANSPOSE
    [KD, KH, KW, O, C])."""
    shape = n.ints(0)
    x, w = n.shape(2), n.shape(1)
    if x and w and x[-1] >= 0 and w[-1] >= 0 and x[-1] != w[-1]:
        raise n.fail(f"input depth {x[-1]} differs from the filter's input depth {w[-1]}")
    if shape is not None:
        return [shape]
    s = n.shape(0)
    return [None if s is None or len(s) != 1 or s[0] < 0 else (-1,) * s[0]]


# ----------------------------------------------------------------------------------- gradients
#
# The convolutions' gradients run two onert-py kernels sharing the forward's geometry (_geometry:
# conv_output_size and conv_padding; window_view over pad_spatial). Every filter layout is first seen as
# a grouped convolution: filter [G, T, Cg, Og] (T taps), input channel g*Cg + c, output channel g*Og + q.
# CONV_2D's [O, *filt, C/G] has G = the input's channels over the filter's, DEPTHWISE_CONV_2D's
# [1, *filt, C*M] is G = C groups of one input channel and M outputs, CONV_3D's [*filt, C, O] is one group,
# and TRANSPOSE_CONV's [O, *filt, C] is the convolution from its O-channel output to its C-channel input.

def window_scatter(cols: np.ndarray, in_shape: Sequence[int], filt: Sequence[int], strides: Sequence[int],
                   dilations: Sequence[int], pads: Sequence[tuple[int, int]]) -> np.ndarray:
    """The adjoint of window_view(pad_spatial(x, pads), filt, strides, dilations, out): cols
    [N, *out, *filt, C], one value per window tap, summed into the input positions those taps read
    ([N, *in, C], float32); taps on the padding are dropped."""
    nd = len(filt)
    out = cols.shape[1:1 + nd]
    sp = tuple(in_shape[1:-1])
    acc = np.zeros((in_shape[0],) + tuple(s + a + b for s, (a, b) in zip(sp, pads)) + (in_shape[-1],), np.float32)
    if cols.size:
        for tap in np.ndindex(*filt):
            sl = (slice(None),) + tuple(slice(t * d, t * d + (o - 1) * s + 1, s)
                                        for t, d, o, s in zip(tap, dilations, out, strides))
            acc[sl] += cols[(slice(None),) * (1 + nd) + tap]
    return np.ascontiguousarray(acc[(slice(None),) + tuple(slice(a, a + s) for s, (a, _) in zip(sp, pads))])


def _filter_taps(layout: str, w_shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(w_shape[:-2]) if layout == "hwio" else tuple(w_shape[1:-1])


def _grouped_dims(layout: str, w_shape: Sequence[int], cin: int) -> tuple[int, int, int, int]:
    """(G, T, Cg, Og) of a filter of `layout` read by an input of `cin` channels."""
    taps = int(np.prod(_filter_taps(layout, w_shape)))
    if layout == "ohwi":                            # CONV_2D
        cout, cg = w_shape[0], w_shape[-1]
        if cg <= 0 or cin % cg or cout % (cin // cg):
            raise ValueError(f"filter {list(w_shape)} does not fit an input of {cin} channels")
        groups = cin // cg
        return groups, taps, cg, cout // groups
    if layout == "hwio":                            # CONV_3D
        return 1, taps, w_shape[-2], w_shape[-1]
    if layout == "depthwise":
        if cin <= 0 or w_shape[-1] % cin:
            raise ValueError(f"filter {list(w_shape)} does not fit an input of {cin} channels")
        return cin, taps, 1, w_shape[-1] // cin
    if layout == "transpose":                       # TRANSPOSE_CONV: from its O-channel output to its input
        return 1, taps, w_shape[0], w_shape[-1]
    raise ValueError(f"unknown filter layout {layout!r}")


def _to_grouped(w: np.ndarray, layout: str, dims) -> np.ndarray:
    g, t, cg, og = dims
    if layout == "ohwi":
        return w.reshape(g, og, t, cg).transpose(0, 2, 3, 1)
    if layout == "hwio":
        return w.reshape(1, t, cg, og)
    if layout == "depthwise":
        return w.reshape(t, g, og).transpose(1, 0, 2)[:, :, None, :]
    return w.reshape(cg, t, og).transpose(1, 0, 2)[None]          # transpose


def _from_grouped(d: np.ndarray, layout: str, w_shape: Sequence[int]) -> np.ndarray:
    if layout == "ohwi":
        return d.transpose(0, 3, 1, 2).reshape(w_shape)
    if layout == "hwio":
        return d.reshape(w_shape)
    if layout == "depthwise":
        return d[:, :, 0, :].transpose(1, 0, 2).reshape(w_shape)
    return d[0].transpose(1, 0, 2).reshape(w_shape)               # transpose


def _conv_grad_options(ctx: KernelContext):
    o = ctx.options
    layout, strides, dils = o["layout"], tuple(o["strides"]), tuple(o["dilations"])
    if layout not in ("ohwi", "hwio", "depthwise", "transpose"):
        raise ctx.fail(f"unknown filter layout {layout!r}")
    return layout, strides, dils, int(o.get("padding", SAME))


def _grad_geometry(x_shape, dy_shape, filt, strides, dils, padding):
    """The forward's (out, pads) for input shape x_shape, checked against the output gradient's shape."""
    out, pads = _geometry(tuple(x_shape[1:-1]), filt, strides, dils, padding)
    if tuple(out) != tuple(dy_shape[1:-1]) or x_shape[0] != dy_shape[0]:
        raise ValueError(f"output gradient {list(dy_shape)} does not fit the convolution of an input "
                         f"{list(x_shape)} (output spatial size {list(out)})")
    return out, pads


@CPU.register("OnertPyConvInputGrad", dtypes=("float32", "float16"))
def conv_input_grad(ctx: KernelContext) -> Run:
    """onert-py's gradient op: inputs (dy, filter, x) -> the gradient of a convolution with respect to
    its input x (x gives the shape). Options: layout ("ohwi", "hwio", "depthwise"), strides, dilations,
    padding. Every window tap's share dy @ filter, scattered back where the tap read (window_scatter)."""
    ctx.expect_inputs(3)
    layout, strides, dils, padding = _conv_grad_options(ctx)
    (dy_i, w_i, x_i), (o_i,) = ctx.inputs, ctx.outputs
    out_dt = ctx.output_dtype()
    v = ctx.values

    def run() -> None:
        dy, w, x_shape = v[dy_i], v[w_i], np.shape(v[x_i])
        filt = _filter_taps(layout, w.shape)
        _, pads = _grad_geometry(x_shape, dy.shape, filt, strides, dils, padding)
        dims = g, _, cg, og = _grouped_dims(layout, w.shape, x_shape[-1])
        wg = _to_grouped(np.asarray(w, np.float32), layout, dims)
        cols = np.einsum("mgq,gtcq->mtgc", np.asarray(dy, np.float32).reshape(-1, g, og), wg, optimize=True)
        cols = cols.reshape(dy.shape[:-1] + filt + (g * cg,))
        v[o_i] = window_scatter(cols, x_shape, filt, strides, dils, pads).astype(out_dt, copy=False)
    return run


@CPU.register("OnertPyConvFilterGrad", dtypes=("float32", "float16"))
def conv_filter_grad(ctx: KernelContext) -> Run:
    """onert-py's gradient op: inputs (x, dy, filter) -> the gradient of a convolution with respect to its
    filter (the filter gives the shape): per tap, the windows of x (window_view) against dy, summed over
    the batch and output positions. Options as OnertPyConvInputGrad's."""
    ctx.expect_inputs(3)
    layout, strides, dils, padding = _conv_grad_options(ctx)
    (x_i, dy_i, w_i), (o_i,) = ctx.inputs, ctx.outputs
    out_dt = ctx.output_dtype()
    v = ctx.values

    def run() -> None:
        x, dy, w_shape = np.asarray(v[x_i], np.float32), v[dy_i], np.shape(v[w_i])
        filt = _filter_taps(layout, w_shape)
        out, pads = _grad_geometry(x.shape, dy.shape, filt, strides, dils, padding)
        g, t, cg, og = _grouped_dims(layout, w_shape, x.shape[-1])
        win = window_view(pad_spatial(x, pads), filt, strides, dils, out).reshape(-1, t, g, cg)
        d = np.asarray(dy, np.float32).reshape(-1, g, og)
        v[o_i] = _from_grouped(np.einsum("mtgc,mgq->gtcq", win, d, optimize=True), layout,
                               w_shape).astype(out_dt)
    return run


@shape_rule("OnertPyConvInputGrad", "OnertPyConvFilterGrad")
def conv_grad_shape(n: Node):
    return [n.shape(2)]


def _float_filter(g: gr.GradNode, i: int) -> None:
    if g.in_dtype(i).kind != "f":
        raise g.fail(f"a convolution with {article(g.in_dtype(i).name)} (quantized) filter has no gradient")


def _channel_sum(g: gr.GradNode, d: int, rank: int, b: int) -> int:
    """The gradient of a bias of input `b` added along the last axis: d summed over the other axes."""
    s = g.emit("SUM", d, g.const(list(range(rank - 1)), np.int32), keep_dims=False)
    shape = g.shape(b)
    return s if shape is not None and len(shape) == 1 else gr.reshape_like(g, s, g.x(b))


def _conv_grads(g: gr.GradNode, layout: str, strides: tuple, dils: tuple, rank: int) -> list:
    """[dx, dfilter, dbias] of a convolution y = conv(x (input 0), filter (input 1)) + bias (input 2)."""
    _float_filter(g, 1)
    d = g.dy()
    opts = {"layout": layout, "strides": strides, "dilations": dils, "padding": int(g.opts.get("padding", SAME))}
    out = [None] * len(g.op.inputs)
    if g.differentiable(0):
        out[0] = g.emit("OnertPyConvInputGrad", d, g.x(1), g.x(0), custom="OnertPyConvInputGrad", **opts)
    if g.differentiable(1):
        out[1] = g.emit("OnertPyConvFilterGrad", g.x(0), d, g.x(1), custom="OnertPyConvFilterGrad", **opts)
    if g.differentiable(2):
        out[2] = _channel_sum(g, d, rank, 2)
    return out


def _options_2d(o: dict) -> tuple[tuple[int, int], tuple[int, int]]:
    return ((int(o.get("stride_h", 1)), int(o.get("stride_w", 1))),
            (int(o.get("dilation_h_factor", 1)), int(o.get("dilation_w_factor", 1))))


@grad_rule("CONV_2D", params=(1, 2))
def conv_2d_grad(g: gr.GradNode):
    return _conv_grads(g, "ohwi", *_options_2d(g.opts), 4)


@grad_rule("DEPTHWISE_CONV_2D", params=(1, 2))
def depthwise_conv_2d_grad(g: gr.GradNode):
    # the multiplier comes from the shapes, as the kernel's (the depth_multiplier option is advisory)
    return _conv_grads(g, "depthwise", *_options_2d(g.opts), 4)


@grad_rule("CONV_3D", params=(1, 2))
def conv_3d_grad(g: gr.GradNode):
    o = g.opts
    strides = tuple(int(o.get(f"stride_{a}", 1)) for a in "dhw")
    dils = tuple(int(o.get(f"dilation_{a}_factor", 1)) for a in "dhw")
    return _conv_grads(g, "hwio", strides, dils, 5)


@grad_rule("TRANSPOSE_CONV", params=(1, 3))
def transpose_conv_grad(g: gr.GradNode):
    """y = the adjoint of the convolution of a y-shaped tensor by the filter [O, KH, KW, C] (to x's C
    channels): dx = that convolution of dy (CONV_2D with the filter as [C, KH, KW, O]), dfilter = its
    filter gradient with dy as the input and x as the output gradient, dbias = dy summed per channel."""
    _float_filter(g, 1)
    d, x = g.dy(), g.x(2)
    strides = (int(g.opts.get("stride_h", 1)), int(g.opts.get("stride_w", 1)))
    padding = int(g.opts.get("padding", SAME))
    xs, ys, ws = g.shape(2), g.shape(g.op.outputs[0], tensor=True), g.shape(1)
    if xs and ys and ws and all(k >= 0 for k in xs[1:3] + ys[1:3] + ws[1:3]):
        want = [conv_output_size(ys[1 + k], ws[1 + k], strides[k], 1, padding) for k in (0, 1)]
        if want != list(xs[1:3]):
            raise g.fail(f"an input of spatial size {list(xs[1:3])} where the output's convolution gives {want} "
                         "has no gradient")
    out = [None] * len(g.op.inputs)
    if g.differentiable(2):
        # the kernel's filter must be a constant: TRANSPOSE_CONV's is, and its transpose is folded
        w_t = g.emit("TRANSPOSE", g.x(1), g.const([3, 1, 2, 0], np.int32))
        out[2] = g.emit("CONV_2D", d, w_t, padding=padding, stride_h=strides[0], stride_w=strides[1],
                        dilation_h_factor=1, dilation_w_factor=1, fused_activation_function=0)
    if g.differentiable(1):
        out[1] = g.emit("OnertPyConvFilterGrad", d, x, g.x(1), custom="OnertPyConvFilterGrad",
                        layout="transpose", strides=strides, dilations=(1, 1), padding=padding)
    if g.differentiable(3):
        out[3] = _channel_sum(g, d, 4, 3)
    return out
