"""Circle-only ops (negative op codes): INSTANCE_NORM, RMS_NORM, ROPE, GRU, BCQ_FULLY_CONNECTED, BCQ_GATHER.

LiteRT cannot run these; the semantics follow Samsung ONE's kernels (onert's cker, onert-micro's PAL,
luci-interpreter). No public ONE kernel runs the two BCQ ops: they follow ONE's BCQ packer (luci's
FuseBCQPass) and onert's shape inference. docs/circle_ops.md describes each op and its source.
"""
from __future__ import annotations

import numpy as np

from onert_py.backends.cpu._common import activation_of
from onert_py.backends.cpu.indexing import _check_indices
from onert_py.backends import gradients as gr
from onert_py.backends.registry import CPU, KernelContext, Run, grad_rule, shape_rule
from onert_py.backends.shape_rules import Node, Shape, same_shape


def _float_out(ctx: KernelContext) -> np.dtype:
    dtype = ctx.output_dtype()
    if dtype.kind != "f":
        raise ctx.fail(f"{ctx.op.opcode} supports float tensors, the output is {ctx.output_tensor(0).type_name}")
    return dtype


@CPU.register("INSTANCE_NORM", dtypes=("float32",))
def instance_norm(ctx: KernelContext) -> Run:
    """Per batch and channel (last axis): normalise over the spatial axes, then gamma/beta, activation."""
    ctx.expect_inputs(3)
    x_i, g_i, b_i = ctx.inputs
    (o,) = ctx.outputs
    dtype = _float_out(ctx)
    rank = len(ctx.input_tensor(0).shape)
    if rank < 3:
        raise ctx.fail(f"INSTANCE_NORM needs an input of rank >= 3 (N, spatial..., C), got rank {rank}")
    axes = tuple(range(1, rank - 1))
    eps = dtype.type(ctx.options.get("epsilon", 0.0))
    act = activation_of(ctx)
    v = ctx.values

    def run() -> None:
        x = v[x_i]
        mean = x.mean(axis=axes, keepdims=True, dtype=dtype)
        centered = x - mean
        var = np.mean(centered * centered, axis=axes, keepdims=True, dtype=dtype)
        scale = np.reshape(v[g_i], (-1,)) / np.sqrt(var + eps)     # gamma/beta: [C] or [1]
        out = centered * scale + np.reshape(v[b_i], (-1,))
        out = out.astype(dtype, copy=False)
        v[o] = act(out) if act is not None else out
    return run


@CPU.register("RMS_NORM", dtypes=("float32",))
def rms_norm(ctx: KernelContext) -> Run:
    """x / sqrt(mean(x^2 over the last axis) + epsilon) * gamma (gamma of shape [C] or [1])."""
    ctx.expect_inputs(2)
    x_i, g_i = ctx.inputs
    (o,) = ctx.outputs
    dtype = _float_out(ctx)
    eps = dtype.type(ctx.options.get("epsilon", 0.0))
    channels = ctx.input_tensor(0).shape[-1] if ctx.input_tensor(0).shape else 1
    g_shape = ctx.input_tensor(1).shape
    if len(g_shape) != 1 or g_shape[0] not in (1, channels):
        raise ctx.fail(f"gamma must have shape [1] or [{channels}], has {list(g_shape)}")
    v = ctx.values

    def run() -> None:
        x = v[x_i]
        ms = np.mean(x * x, axis=-1, keepdims=True, dtype=dtype)
        out = x / np.sqrt(ms + eps) * v[g_i]
        v[o] = out.astype(dtype, copy=False)
    return run


# RoPEMode of the Circle schema.
GPT_NEOX, GPT_J = 0, 1


@CPU.register("ROPE", dtypes=("float32",))
def rope(ctx: KernelContext) -> Run:
    """Rotary position embedding with precomputed sin/cos tables over the last axis (size D, even).

    GPT_NEOX rotates the two halves: out[i] = x[i]*cos[i] - x[i+D/2]*sin[i] and
    out[i+D/2] = x[i]*sin[i+D/2] + x[i+D/2]*cos[i+D/2] (onert's cker RoPE). GPT_J rotates adjacent pairs
    (2i, 2i+1) with the same table convention. The tables broadcast against the input.
    """
    ctx.expect_inputs(3)
    x_i, sin_i, cos_i = ctx.inputs
    (o,) = ctx.outputs
    dtype = _float_out(ctx)
    mode = ctx.options.get("mode", GPT_NEOX)
    if mode not in (GPT_NEOX, GPT_J):
        raise ctx.fail(f"unknown RoPE mode {mode}")
    d = ctx.input_tensor(0).shape[-1]
    if d % 2:
        raise ctx.fail(f"the last dimension ({d}) must be even")
    for k in (1, 2):
        if ctx.input_tensor(k).shape[-1:] != (d,):
            raise ctx.fail(f"input {k} (sin/cos table) must end in dimension {d}, has "
                           f"{list(ctx.input_tensor(k).shape)}")
    half = d // 2
    v = ctx.values

    if mode == GPT_NEOX:
        def run() -> None:
            x, s, c = v[x_i], v[sin_i], v[cos_i]
            x0, x1 = x[..., :half], x[..., half:]
            out = np.concatenate((x0 * c[..., :half] - x1 * s[..., :half],
                                  x0 * s[..., half:] + x1 * c[..., half:]), axis=-1)
            v[o] = out.astype(dtype, copy=False)
    else:
        def run() -> None:
            x, s, c = v[x_i], v[sin_i], v[cos_i]
            x0, x1 = x[..., 0::2], x[..., 1::2]
            shape = np.broadcast_shapes(x.shape, s.shape, c.shape)
            out = np.empty(shape, dtype=dtype)
            out[..., 0::2] = x0 * c[..., 0::2] - x1 * s[..., 0::2]
            out[..., 1::2] = x0 * s[..., 1::2] + x1 * c[..., 1::2]
            v[o] = out
    return run


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


@CPU.register("GRU", dtypes=("float32",))
def gru(ctx: KernelContext) -> Run:
    """Circle GRU (onert-micro / luci-interpreter): inputs (input [T, B, I], hidden_hidden [3H, I],
    hidden_hidden_bias [3H], hidden_input [3H, H], hidden_input_bias [3H], state [B, H]).

    Despite their names, hidden_hidden projects the input x_t and hidden_input projects the state h.
    With a = h W_hi^T + b_hi and b = x_t W_hh^T + b_hh split in three H-wide parts (z, r, n):
    z = sigmoid(a_z + b_z), r = sigmoid(a_r + b_r), n = tanh(r * a_n + b_n), h = z*h + (1-z)*n.
    Axis 0 is time (as in ONE's kernels, whatever time_major says). The output is the last state
    (reshaped to the output tensor's shape), or every state with return_sequences.
    """
    ctx.expect_inputs(6)
    x_i, w_x_i, b_x_i, w_h_i, b_h_i, s_i = ctx.inputs
    (o,) = ctx.outputs
    dtype = _float_out(ctx)
    x_shape = ctx.input_tensor(0).shape
    if len(x_shape) != 3:
        raise ctx.fail(f"GRU input must be [time, batch, features], has shape {list(x_shape)}")
    hidden = ctx.input_tensor(3).shape[1] if len(ctx.input_tensor(3).shape) == 2 else None
    if hidden is None or ctx.input_tensor(1).shape != (3 * hidden, x_shape[2]):
        raise ctx.fail(f"GRU weights: hidden_hidden {list(ctx.input_tensor(1).shape)} and hidden_input "
                       f"{list(ctx.input_tensor(3).shape)} do not match input features {x_shape[2]}")
    sequences = bool(ctx.options.get("return_sequences", False))
    # fused_activation_function and time_major are read by ONE's kernels but not applied: same here.
    out_shape = ctx.output_tensor(0).shape
    v = ctx.values

    def run() -> None:
        x, w_x, b_x, w_h, b_h = v[x_i], v[w_x_i], v[b_x_i], v[w_h_i], v[b_h_i]
        h = np.broadcast_to(v[s_i], (x.shape[1], hidden)).astype(dtype)
        w_x_t, w_h_t = w_x.T, w_h.T
        states = []
        for t in range(x.shape[0]):
            a = h @ w_h_t + b_h
            b = x[t] @ w_x_t + b_x
            z = _sigmoid(a[:, :hidden] + b[:, :hidden])
            r = _sigmoid(a[:, hidden:2 * hidden] + b[:, hidden:2 * hidden])
            n = np.tanh(r * a[:, 2 * hidden:] + b[:, 2 * hidden:])
            h = (z * h + (1 - z) * n).astype(dtype, copy=False)
            if sequences:
                states.append(h)
        if sequences:
            out = np.stack(states) if states else np.zeros((0,) + h.shape, dtype)
        else:
            out = h
        v[o] = np.array(out, dtype=dtype).reshape(out_shape)
    return run


@shape_rule("GRU")
def gru_shape(n: Node) -> list[Shape | None]:
    """The kernel reshapes its result (the last state [B, H], or every state [T, B, H]) to the declared
    output shape (docs/circle_ops.md), so a run gives exactly that shape."""
    return [tuple(n.sg.tensors[o].shape) for o in n.op.outputs]


# ---------------------------------------------------------------- BCQ (binary-coding quantization)
#
# A BCQ weight matrix W [rows, hidden] is stored as bit planes: W[r, h] = sum over the planes k of row r
# of scale_k * (+1 if bit h of plane k is set, else -1). The clusters tensor [n, 2] lists (qbits, size) per
# cluster: the next `size` rows each have `qbits` planes. Scales [sum qbits*size] and the packed planes
# [sum qbits*size, ceil(hidden/32)] int32 hold, cluster after cluster and row after row, that row's
# planes. Bit h of a plane is bit h % 32 (least significant first) of word h // 32; the padding bits of
# the last word are ignored. docs/circle_ops.md gives the sources, and which part is inferred.


_DECODE_BLOCK = 1 << 22          # elements of a decode temporary (16 MB of float32)


def _bcq_rows(clusters: np.ndarray | None) -> int:
    """Rows of the dense BCQ matrix: the sum of the clusters' sizes (-1 unless an int [n, 2] tensor)."""
    if clusters is None:
        return -1
    c = np.asarray(clusters)
    if c.dtype.kind not in "iu" or c.ndim != 2 or c.shape[1] != 2:
        return -1
    return int(c[:, 1].astype(np.int64).sum())


class _BcqCodes:
    """Statically checked BCQ operands of one op: plane layout, and the dense matrix when constant."""

    def __init__(self, ctx: KernelContext, s_k: int, b_k: int, c_k: int, prefix: str, hidden_key: str):
        hidden = ctx.options.get(hidden_key, 0)
        if not isinstance(hidden, int) or hidden <= 0:
            raise ctx.fail(f"{hidden_key} must be a positive number of columns, is {hidden!r}")
        clusters = ctx.const(c_k)
        if clusters is None:
            raise ctx.fail(f"{prefix}_clusters (input {c_k}) must be a constant tensor: it fixes the output "
                           f"size")
        if clusters.dtype.kind not in "iu" or clusters.ndim != 2 or clusters.shape[1] != 2 \
                or not len(clusters):
            raise ctx.fail(f"{prefix}_clusters must be an int32 [n, 2] tensor of (qbits, size) rows, n > 0; "
                           f"has type {clusters.dtype.name} and shape {list(clusters.shape)}")
        qbits, sizes = clusters[:, 0].astype(np.int64), clusters[:, 1].astype(np.int64)
        for c, (q, n) in enumerate(zip(qbits.tolist(), sizes.tolist())):
            if q < 1 or n < 0:
                raise ctx.fail(f"{prefix}_clusters row {c} is (qbits={q}, size={n}): qbits must be >= 1 and "
                               f"size >= 0")
        rows = _bcq_rows(clusters)
        if rows == 0:
            raise ctx.fail(f"{prefix}_clusters {clusters.tolist()} give no rows (the sizes sum to 0)")
        planes = int((qbits * sizes).sum())
        words = -(-hidden // 32)
        s_t, b_t = ctx.input_tensor(s_k), ctx.input_tensor(b_k)
        if s_t is None or b_t is None:
            raise ctx.fail(f"{prefix}_scales (input {s_k}) and {prefix}_binary (input {b_k}) are required")
        if s_t.dtype != np.float32:
            raise ctx.fail(f"{prefix}_scales must be float32, is {s_t.type_name}")
        if b_t.dtype != np.int32:
            raise ctx.fail(f"{prefix}_binary must be int32 (32 packed bits a word), is {b_t.type_name}")
        need = f"the clusters {clusters.tolist()} need sum(qbits * size) = {planes}"
        if not s_t.is_dynamic and tuple(s_t.shape) != (planes,):
            raise ctx.fail(f"{prefix}_scales has shape {list(s_t.shape)}; {need} scales, shape [{planes}]")
        if not b_t.is_dynamic and tuple(b_t.shape) != (planes, words):
            raise ctx.fail(f"{prefix}_binary has shape {list(b_t.shape)}; {need} bit planes of "
                           f"ceil({hidden_key}={hidden} / 32) = {words} words, shape [{planes}, {words}]")
        self.hidden, self.rows, self.planes = hidden, rows, planes
        self.scales, self.binary = ctx.inputs[s_k], ctx.inputs[b_k]
        # (qbits, first row, first plane, size) per non-empty cluster.
        first_rows = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        first_planes = np.concatenate(([0], np.cumsum(qbits * sizes)[:-1]))
        self.clusters = [(int(q), int(r), int(p), int(n))
                         for q, r, p, n in zip(qbits, first_rows, first_planes, sizes) if n]
        s_const, b_const = ctx.const(s_k), ctx.const(b_k)
        # Constant codes (the usual case) are dequantized once, so each run is one matmul or take.
        self.dense = self.decode(s_const, b_const) if s_const is not None and b_const is not None else None
        if self.dense is not None:
            self.dense.setflags(write=False)

    def decode(self, scales: np.ndarray, binary: np.ndarray) -> np.ndarray:
        """Dense float32 [rows, hidden] weights. Vectorised over rows and columns; Python loops only over
        clusters, blocks of rows (bounding the temporaries) and the qbits planes of a row."""
        hidden, words = self.hidden, -(-self.hidden // 32)
        if np.shape(scales) != (self.planes,) or np.shape(binary) != (self.planes, words):
            raise ValueError(f"scales {list(np.shape(scales))} / binary {list(np.shape(binary))} do not hold "
                             f"{self.planes} bit planes of {words} words")
        # Little-endian words unpacked least significant bit first: column 32*w + j is bit j of word w.
        raw = np.ascontiguousarray(binary, dtype="<i4").view(np.uint8)
        scales = np.asarray(scales, dtype=np.float32)
        out = np.empty((self.rows, hidden), np.float32)
        block = max(1, _DECODE_BLOCK // hidden)
        multi = [n for q, _, _, n in self.clusters if q > 1]
        scratch = np.empty((min(block, max(multi)), hidden), np.float32) if multi else None
        for q, row0, plane0, n in self.clusters:
            for r in range(0, n, block):
                m = min(block, n - r)
                p = plane0 + r * q
                bits = np.unpackbits(raw[p:p + m * q], axis=1, bitorder="little")[:, :hidden]
                bits = bits.reshape(m, q, hidden)
                s = scales[p:p + m * q].reshape(m, q)
                # sum_k s_k * (+1 if bit else -1) = sum_k 2 s_k bit_k - sum_k s_k (float32 rounding aside).
                acc = out[row0 + r:row0 + r + m]
                np.multiply(bits[:, 0], 2 * s[:, :1], out=acc)
                tmp = scratch[:m] if q > 1 else None
                for k in range(1, q):
                    np.multiply(bits[:, k], 2 * s[:, k:k + 1], out=tmp)
                    acc += tmp
                acc -= s.sum(axis=1, dtype=np.float32)[:, None]
        return out

    def weights(self, v: list) -> np.ndarray:
        return self.dense if self.dense is not None else self.decode(v[self.scales], v[self.binary])


@CPU.register("BCQ_FULLY_CONNECTED", dtypes=("float32",))
def bcq_fully_connected(ctx: KernelContext) -> Run:
    """out [rows, batch] = act(W @ input + bias[:, None]) with input [weights_hidden_size, batch] and W the
    dequantized BCQ weights. Inputs: input, weights_scales, weights_binary, bias (optional),
    weights_clusters. Input and output are transposed compared with FULLY_CONNECTED (onert's shape
    inference gives [rows, input.shape[1]]; ONE's FuseBCQPass puts a TRANSPOSE before and after the op)."""
    ctx.expect_inputs(5)
    _float_out(ctx)
    codes = _BcqCodes(ctx, 1, 2, 4, "weights", "weights_hidden_size")
    x_t = ctx.input_tensor(0)
    if x_t.dtype != np.float32:
        raise ctx.fail(f"input must be float32, is {x_t.type_name}")
    if len(x_t.shape) != 2:
        raise ctx.fail(f"input must be 2-D [weights_hidden_size, batch], has shape {list(x_t.shape)}")
    if not x_t.is_dynamic and x_t.shape[0] != codes.hidden:
        raise ctx.fail(f"input has shape {list(x_t.shape)}: its first dimension must be weights_hidden_size "
                       f"({codes.hidden})")
    b_t = ctx.input_tensor(3)
    if b_t is not None and int(np.prod(b_t.shape)) != codes.rows:
        raise ctx.fail(f"bias has shape {list(b_t.shape)}, expected [{codes.rows}] (the clusters' rows)")
    b_const = ctx.const(3)
    b_const = b_const.reshape(-1, 1) if b_const is not None else None
    act = activation_of(ctx)
    v = ctx.values
    x_i, (o,) = ctx.inputs[0], ctx.outputs
    b_i = ctx.inputs[3] if ctx.has_input(3) else -1
    hidden = codes.hidden

    def run() -> None:
        x = v[x_i]
        if x.ndim != 2 or x.shape[0] != hidden:
            raise ValueError(f"input has shape {list(x.shape)}, expected [{hidden}, batch]")
        y = np.matmul(codes.weights(v), x)
        if b_i >= 0:
            y += b_const if b_const is not None else np.reshape(v[b_i], (-1, 1))
        if act is not None:
            act(y)
        v[o] = y
    return run


@shape_rule("BCQ_FULLY_CONNECTED")
def bcq_fully_connected_shape(n: Node) -> list[Shape | None]:
    """[rows, batch]: the clusters' rows by the input's columns."""
    x = n.shape(0)
    batch = x[1] if x is not None and len(x) == 2 else -1
    return [(_bcq_rows(n.value(4)), batch)]


@CPU.register("BCQ_GATHER", dtypes=("float32",))
def bcq_gather(ctx: KernelContext) -> Run:
    """GATHER from the dequantized BCQ matrix [rows, input_hidden_size] along `axis` (0: rows, 1: columns).
    Inputs: input_scales, input_binary, indices, input_clusters."""
    ctx.expect_inputs(4)
    _float_out(ctx)
    codes = _BcqCodes(ctx, 0, 1, 3, "input", "input_hidden_size")
    idx_t = ctx.input_tensor(2)
    if idx_t.dtype.kind not in "iu":
        raise ctx.fail(f"indices must be integers, are {idx_t.type_name}")
    axis = ctx.options.get("axis", 0)
    if axis not in (0, 1, -1, -2):
        raise ctx.fail(f"axis {axis} is out of range for the 2-D BCQ matrix (0 gathers rows, 1 columns)")
    axis %= 2
    limit = codes.rows if axis == 0 else codes.hidden
    v = ctx.values
    i_i, (o,) = ctx.inputs[2], ctx.outputs

    def run() -> None:
        idx = np.asarray(v[i_i])
        _check_indices(idx, limit, "BCQ_GATHER index")
        v[o] = np.take(codes.weights(v), idx, axis=axis)
    return run


@shape_rule("BCQ_GATHER")
def bcq_gather_shape(n: Node) -> list[Shape | None]:
    """np.take from the [rows, input_hidden_size] matrix: the indices' shape replaces the gathered axis."""
    idx, axis = n.shape(2), n.opts.get("axis", 0)
    if idx is None or axis not in (0, 1, -1, -2):
        return [None]
    hidden = n.opts.get("input_hidden_size", 0)
    hidden = hidden if isinstance(hidden, int) and hidden > 0 else -1
    return [idx + (hidden,) if axis % 2 == 0 else (_bcq_rows(n.value(3)),) + idx]


# Shape rules: every output has input 0's shape.
shape_rule("INSTANCE_NORM", "RMS_NORM", "ROPE")(same_shape)


# ----------------------------------------------------------------------------------- gradients

@grad_rule("INSTANCE_NORM", params=(1, 2))
def instance_norm_grad(g: gr.GradNode):
    """y = xhat * gamma + beta, xhat = (x - mean) / sqrt(var + epsilon) over the spatial axes:
    dx = (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) / sqrt(var + epsilon) with dxhat = dy * gamma;
    gamma gets sum(dy * xhat) and beta sum(dy) over all but the channel axis."""
    s = g.shape(0)
    if s is None:
        raise g.fail("the gradient of INSTANCE_NORM needs the input's rank")
    rank = len(s)
    spatial = g.const(list(range(1, rank - 1)), np.int32)
    x, d = g.x(0), g.dy()
    eps = gr.scalar(g, float(np.float32(g.opts.get("epsilon", 0.0))), x)
    centered = gr.sub(g, x, g.emit("MEAN", x, spatial, keep_dims=True))
    rstd = g.emit("RSQRT", gr.add(g, g.emit("MEAN", gr.square(g, centered), spatial, keep_dims=True), eps))
    xhat = gr.mul(g, centered, rstd)
    flat = g.const([-1], np.int32)

    def per_channel(t: int, i: int) -> int:
        """t summed to parameter i's shape ([C] or one value, any shape as the kernel flattens it)."""
        t = g.emit("SUM", t, g.const(list(range(rank - 1)), np.int32), keep_dims=False)
        ps = g.shape(i)
        if ps is None or any(k < 0 for k in ps):
            raise g.fail(f"the gradient of INSTANCE_NORM needs the shape of input {i}")
        if int(np.prod(ps)) == 1 and s[-1] != 1:
            t = g.emit("SUM", t, g.const([0], np.int32), keep_dims=False)
        return g.emit("RESHAPE", t, g.const(list(ps), np.int32))

    dx = None
    if g.differentiable(0):
        dxhat = gr.mul(g, d, g.emit("RESHAPE", g.x(1), flat))
        m1 = g.emit("MEAN", dxhat, spatial, keep_dims=True)
        m2 = g.emit("MEAN", gr.mul(g, dxhat, xhat), spatial, keep_dims=True)
        dx = gr.mul(g, gr.sub(g, gr.sub(g, dxhat, m1), gr.mul(g, xhat, m2)), rstd)
    dgamma = per_channel(gr.mul(g, d, xhat), 1) if g.differentiable(1) else None
    dbeta = per_channel(d, 2) if g.differentiable(2) else None
    return [dx, dgamma, dbeta]


@grad_rule("RMS_NORM", params=(1,))
def rms_norm_grad(g: gr.GradNode):
    """y = x * r * gamma, r = 1 / sqrt(mean(x^2) + epsilon) over the last axis: dx = r u - x r^3
    mean(u x) with u = dy * gamma; gamma gets dy * x * r summed to its shape."""
    x, d = g.x(0), g.dy()
    last = g.const([-1], np.int32)
    eps = gr.scalar(g, float(np.float32(g.opts.get("epsilon", 0.0))), x)
    r = g.emit("RSQRT", gr.add(g, g.emit("MEAN", gr.square(g, x), last, keep_dims=True), eps))
    dx = None
    if g.differentiable(0):
        u = gr.mul(g, d, g.x(1))
        m = g.emit("MEAN", gr.mul(g, u, x), last, keep_dims=True)
        dx = gr.sub(g, gr.mul(g, u, r), gr.mul(g, gr.mul(g, x, m), gr.mul(g, r, gr.square(g, r))))
    dgamma = gr.sum_to(g, gr.mul(g, d, gr.mul(g, x, r)), g.x(1)) if g.differentiable(1) else None
    return [dx, dgamma]


@grad_rule("ROPE")
def rope_grad(g: gr.GradNode):
    """y = x * cos + R(x) * sin with R the rotation of the pairs (the halves for GPT_NEOX, adjacent
    elements for GPT_J: R(x) = (-x1, x0)), itself a ROPE with sin 1 and cos 0. R's transpose is -R:
    dx = dy * cos - R(dy * sin), dsin = dy * R(x), dcos = dy * x (each summed to its input's shape)."""
    s = g.shape(0)
    if s is None or not s or s[-1] < 0:
        raise g.fail("the gradient of ROPE needs the input's last dimension")
    depth, mode = s[-1], g.opts.get("mode", GPT_NEOX)
    ones, zeros = g.const(np.ones(depth)), g.const(np.zeros(depth))

    def rotate(t: int) -> int:
        return g.emit("ROPE", t, ones, zeros, mode=mode)

    x, sin, cos, d = g.x(0), g.x(1), g.x(2), g.dy()
    dx = gr.sub(g, gr.mul(g, d, cos), rotate(gr.mul(g, d, sin))) if g.differentiable(0) else None
    dsin = gr.mul(g, d, rotate(x)) if g.differentiable(1) else None
    dcos = gr.mul(g, d, x) if g.differentiable(2) else None
    return [gr.sum_to_input(g, 0, dx), gr.sum_to_input(g, 1, dsin), gr.sum_to_input(g, 2, dcos)]
