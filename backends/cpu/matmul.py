"""FULLY_CONNECTED and BATCH_MATMUL: one BLAS matmul each, constant weights laid out at prepare time.

float16 (which LiteRT runs through XNNPACK only) is computed in float32 and rounded once, as XNNPACK's
results show (bit for bit on the cases tested, up to the summation order of long rows)."""
from __future__ import annotations

import numpy as np

from onert_py.backends.cpu._common import activation_of
from onert_py.backends.cpu.shape import check_same_types
from onert_py.backends.registry import CPU, KernelContext, Run, shape_rule
from onert_py.backends.shape_rules import Node, broadcast, fmt, is_static, numel

_F32 = np.dtype(np.float32)


@CPU.register("FULLY_CONNECTED", dtypes=("float32", "float16"))
def fully_connected(ctx: KernelContext) -> Run:
    """out = act(reshape(x, [-1, in]) @ W.T + b); keep_num_dims keeps x's leading dims."""
    ctx.expect_inputs(2, 3)
    dt = check_same_types(ctx, 0, 1, 2, optional=(2,))
    if ctx.options.get("weights_format", 0) != 0:
        raise ctx.fail("only the DEFAULT weights format is supported (shuffled formats are for uint8)")
    x_t, w_t = ctx.input_tensor(0), ctx.input_tensor(1)
    if len(w_t.shape) != 2:
        raise ctx.fail(f"weights must be 2-D [units, inputs], have shape {list(w_t.shape)}")
    units, depth = w_t.shape
    keep = bool(ctx.options.get("keep_num_dims", False))
    x_shape = tuple(x_t.shape)
    if not x_t.is_dynamic and not w_t.is_dynamic:
        size = int(np.prod(x_shape, dtype=np.int64))
        if depth == 0 or size % depth:
            raise ctx.fail(f"input shape {list(x_shape)} has {size} elements, not a multiple of the "
                           f"weights' input size {depth} (weights shape {list(w_t.shape)})")
        if keep and x_shape[-1] != depth:
            raise ctx.fail(f"keep_num_dims needs the input's last dimension ({x_shape[-1]}) to equal the "
                           f"weights' input size {depth}")
    b_t = ctx.input_tensor(2)
    if b_t is not None and int(np.prod(b_t.shape)) != units:
        raise ctx.fail(f"bias has shape {list(b_t.shape)}, expected [{units}]")

    act = activation_of(ctx)
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
        if keep:
            if x.shape[-1] != d:
                raise ValueError(f"input's last dimension {x.shape[-1]} != weights' input size {d}")
            out_shape = x.shape[:-1] + (wt.shape[1],)
        else:
            if x.size % d:
                raise ValueError(f"input of {x.size} elements is not a multiple of the input size {d}")
            out_shape = (x.size // d, wt.shape[1])
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
        if keep:
            if x.shape[-1] != depth:
                raise ValueError(f"input's last dimension {x.shape[-1]} != weights' input size {depth}")
            out_shape = x.shape[:-1] + (units,)
        else:
            if x.size % depth:
                raise ValueError(f"input of {x.size} elements is not a multiple of the input size {depth}")
            out_shape = (x.size // depth, units)
        y = np.matmul(x.reshape(-1, depth).astype(np.float32), wt)
        if b32 is not None:
            y += b32
        if act is not None:
            act(y)
        v[o] = y.astype(out_dt).reshape(out_shape)
    return run


@CPU.register("BATCH_MATMUL", dtypes=("float32", "float16"))
def batch_matmul(ctx: KernelContext) -> Run:
    """out[..., m, n] = sum_k lhs[..., m, k] * rhs[..., k, n], batch dims broadcast; adj_* transpose
    the last two dims of that side first."""
    ctx.expect_inputs(2)
    dt = check_same_types(ctx, 0, 1)
    # TFLite's schema names the options adj_x/adj_y, Circle's adjoint_lhs/adjoint_rhs.
    opts = ctx.options
    adj_x = bool(opts.get("adj_x", opts.get("adjoint_lhs", False)))
    adj_y = bool(opts.get("adj_y", opts.get("adjoint_rhs", False)))
    lt, rt = ctx.input_tensor(0), ctx.input_tensor(1)
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


@shape_rule("BATCH_MATMUL")
def batch_matmul_shape(n: Node):
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
    return [broadcast(n, a[:-2], b[:-2]) + (m, cols)]
