"""Recurrent ops, float32: RNN, UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN, LSTM,
UNIDIRECTIONAL_SEQUENCE_LSTM, BIDIRECTIONAL_SEQUENCE_LSTM and SVDF, with LiteRT's input layouts.

State (hidden / cell / SVDF activation state) lives in variable tensors that are op inputs; a run reads
them and assigns fresh arrays back to their slots, so state carries over between invocations.

Weights are constants laid out once at prepare time: an LSTM's four (or three, with CIFG) gate weight
matrices are concatenated, transposed, into one [in, gates*cells] matrix (likewise the recurrent ones), the
input projection of a whole sequence is one matmul, and each time step is one matmul on the state plus one
for the projection layer. Gate semantics follow LiteRT's lstm_eval.cc (float path):

    gate = act(W x [+ W_aux aux] + R h [+ p .* c] + b)          (no layer norm)
    gate = act(ln(W x [+ W_aux aux] + R h [+ p .* c]) * w + b)  (layer norm; ln: (x-mean)/sqrt(var+1e-8))
    i, f, o use sigmoid, the cell gate g the fused activation; CIFG: i = 1 - f.
    c' = clip(f .* c + i .* g, cell_clip);  the output gate's peephole reads c'
    h' = o .* act(c');  with projection h' = clip(P h' + b_p, proj_clip)

RNN, UNIDIRECTIONAL_SEQUENCE_RNN and SVDF also run LiteRT's hybrid form (float32 input, int8 weights with
one scale): their float kernels branch to it at prepare (_HybridRnnCell, _svdf_hybrid).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from onert_py.backends.cpu._common import fused_activation
from onert_py.backends.cpu._quant import (
    hybrid_quantize_rows,
    is_hybrid,
    qparams,
    wrap_int32,
)
from onert_py.backends.registry import CPU, KernelContext, Run, shape_rule
from onert_py.backends.shape_rules import Node, Shape

_F32 = np.dtype(np.float32)
_ONE = np.float32(1)
_SIG_LIMIT = np.float32(80)   # exp(80) fits float32: no overflow warning, and sigmoid(-80) is 0 anyway
_LN_EPS = np.float32(1e-8)    # LiteRT's MeanStddevNormalization constant


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) into a fresh array."""
    y = np.negative(x)
    np.minimum(y, _SIG_LIMIT, out=y)
    np.exp(y, out=y)
    y += _ONE
    return np.divide(1, y, out=y)   # 1/y, as exact as np.reciprocal and twice as fast


def _activation(code: int) -> Callable[[np.ndarray], np.ndarray]:
    """The fused activation as a function returning a fresh array (identity for NONE)."""
    act = fused_activation(code)
    if act is None:
        return lambda x: x
    return lambda x: act(np.array(x, dtype=_F32, copy=True))


def _require_float(ctx: KernelContext) -> None:
    for k in range(len(ctx.inputs)):
        t = ctx.input_tensor(k)
        if t is not None and t.dtype != _F32:
            raise ctx.fail(f"input {k} has type {t.dtype.name}; only float32 is supported")
    for k in range(len(ctx.outputs)):
        if ctx.output_dtype(k) != _F32:
            raise ctx.fail(f"output {k} has type {ctx.output_dtype(k).name}; only float32 is supported")


def _weight(ctx: KernelContext, i: int, name: str, shape: Sequence[int] | None = None,
            optional: bool = False) -> np.ndarray | None:
    """Constant float32 input i (None when optional and omitted), checked against `shape`."""
    if not ctx.has_input(i):
        if optional:
            return None
        raise ctx.fail(f"input {i} ({name}) is required")
    w = ctx.const(i)
    if w is None:
        raise ctx.fail(f"input {i} ({name}) must be a constant tensor")
    w = np.asarray(w, dtype=_F32)
    if shape is not None and tuple(w.shape) != tuple(shape):
        raise ctx.fail(f"input {i} ({name}) has shape {list(w.shape)}, expected {list(shape)}")
    return w


def _state_slot(ctx: KernelContext, i: int, name: str, shape: Sequence[int]) -> int:
    if not ctx.has_input(i):
        raise ctx.fail(f"input {i} ({name}) is required")
    t = ctx.input_tensor(i)
    if not t.is_dynamic and int(np.prod(t.shape)) != int(np.prod(shape)):
        raise ctx.fail(f"input {i} ({name}) has shape {list(t.shape)}, expected {list(shape)}")
    return ctx.inputs[i]


def _sequence_output_shape(x_shape: Sequence[int], units: int) -> tuple[int, ...]:
    """A sequence op's output: its input's two leading dims ([T, B] or [B, T]), then `units`."""
    return tuple(x_shape[:2]) + (units,)


def _step_output(n: Node, units: int) -> Shape | None:
    """Shape rule part: [B, units] of a one-step op (input [B, in]); None for an input that is not 2-D."""
    x = n.shape(0)
    if x is None:
        return (-1, units)
    return (x[0], units) if len(x) == 2 else None


def _sequence_output(n: Node, units: int) -> Shape | None:
    """Shape rule part: a sequence op's output for `units` (-1 when unknown); None for a non rank-3 input."""
    x = n.shape(0)
    if x is None:
        return (-1, -1, units)
    return _sequence_output_shape(x, units) if len(x) == 3 else None


def _outputs(n: Node, shapes: list) -> list:
    """`shapes` for the op's outputs; outputs the kernel does not write stay unknown."""
    return (shapes + [None] * n.n_out)[:n.n_out]


def _sequence_dims(ctx: KernelContext, i: int = 0) -> tuple[int, int, int]:
    """(time, batch, features) of a rank-3 sequence input, per the time_major option."""
    shape = tuple(ctx.input_tensor(i).shape)
    if len(shape) != 3:
        raise ctx.fail(f"input {i} must be rank 3, has shape {list(shape)}")
    return (shape[0], shape[1], shape[2]) if ctx.options.get("time_major") else (shape[1], shape[0], shape[2])


# ------------------------------------------------------------------------------------------------- LSTM

def _lstm_n_output(w_forget: Sequence[int] | None, projection: Sequence[int] | None) -> int:
    """An LSTM direction's output size: the projection's rows, else n_cell (input_to_forget_weights'
    rows); -1 when the weights' shapes do not tell."""
    if projection is not None:
        return int(projection[0]) if len(projection) == 2 else -1
    return int(w_forget[0]) if w_forget is not None and len(w_forget) == 2 else -1


class _LstmCell:
    """One direction of an LSTM: `project(x2d, aux2d)` for the input side of a whole sequence, `step`."""

    def __init__(self, ctx: KernelContext, *, w: Sequence[int], r: Sequence[int], peep: Sequence[int],
                 bias: Sequence[int], proj: Sequence[int], ln: Sequence[int] | None, aux_w: Sequence[int] | None,
                 n_input: int, n_aux: int = 0, diagonal: bool = False):
        opts = ctx.options
        self.act = _activation(opts.get("fused_activation_function", 0))
        self.act_none = opts.get("fused_activation_function", 0) == 0
        self.cell_clip = np.float32(opts.get("cell_clip", 0.0) or 0.0)
        self.proj_clip = np.float32(opts.get("proj_clip", 0.0) or 0.0)
        w_f = _weight(ctx, w[1], "input_to_forget_weights")
        if w_f.ndim != 2:
            raise ctx.fail(f"input_to_forget_weights must be 2-D, has shape {list(w_f.shape)}")
        n_cell = w_f.shape[0]
        self.cifg = not ctx.has_input(w[0])
        gates = (1, 2, 3) if self.cifg else (0, 1, 2, 3)
        self.k = k = len(gates)
        names = ("input", "forget", "cell", "output")
        p_w = _weight(ctx, proj[0], "projection_weights", optional=True)
        n_output = _lstm_n_output(w_f.shape, None if p_w is None else p_w.shape)
        if p_w is not None and p_w.shape != (n_output, n_cell):
            raise ctx.fail(f"projection_weights has shape {list(p_w.shape)}, expected [n_output, {n_cell}]")
        self.n_cell, self.n_output = n_cell, n_output

        w_in = [_weight(ctx, w[g], f"input_to_{names[g]}_weights", (n_cell, n_input)) for g in gates]
        self.w = np.ascontiguousarray(np.concatenate(w_in, axis=0).T)                 # [n_input, k*n_cell]
        self.aux = None
        if aux_w is not None and ctx.has_input(aux_w[1]):
            w_aux = [_weight(ctx, aux_w[g], f"aux_input_to_{names[g]}_weights", (n_cell, n_aux)) for g in gates]
            self.aux = np.ascontiguousarray(np.concatenate(w_aux, axis=0).T)           # [n_aux, k*n_cell]
        self.diagonal = diagonal
        r_shape = (n_cell,) if diagonal else (n_cell, n_output)
        r_in = [_weight(ctx, r[g], f"recurrent_to_{names[g]}_weights", r_shape) for g in gates]
        if diagonal:
            if n_output != n_cell:
                raise ctx.fail("diagonal recurrent weights need n_output == n_cell (no projection)")
            self.r = np.concatenate(r_in).reshape(k, n_cell)
        else:
            self.r = np.ascontiguousarray(np.concatenate(r_in, axis=0).T)            # [n_output, k*n_cell]
        b = [_weight(ctx, bias[g], f"{names[g]}_gate_bias", (n_cell,)) for g in gates]
        self.b = np.concatenate(b).reshape(k, n_cell)

        # Peepholes: the input and forget gates read the old cell state, the output gate the new one.
        p_f = _weight(ctx, peep[1], "cell_to_forget_weights", (n_cell,), optional=True)
        self.peep_if = self.peep_o = None
        if p_f is not None:
            p_i = None if self.cifg else _weight(ctx, peep[0], "cell_to_input_weights", (n_cell,))
            self.peep_if = np.stack([p_f] if self.cifg else [p_i, p_f])
            self.peep_o = _weight(ctx, peep[2], "cell_to_output_weights", (n_cell,))

        self.ln = None
        if ln is not None and ctx.has_input(ln[1]):
            self.ln = np.stack([_weight(ctx, ln[g], f"{names[g]}_layer_norm_coefficients", (n_cell,))
                                for g in gates])
        self.proj_w = np.ascontiguousarray(p_w.T) if p_w is not None else None            # [n_cell, n_output]
        p_b = _weight(ctx, proj[1], "projection_bias", (n_output,), optional=True)
        self.proj_b = p_b
        # Without layer norm the bias joins the input projection; with it, it comes after normalisation.
        self.in_bias = None if self.ln is not None else self.b.reshape(-1)

    def project(self, x2d: np.ndarray, aux2d: np.ndarray | None = None) -> np.ndarray:
        """W x (+ W_aux aux) (+ b without layer norm) for all rows at once: [rows, k*n_cell]."""
        y = np.matmul(x2d, self.w)
        if aux2d is not None and self.aux is not None:
            y += np.matmul(aux2d, self.aux)
        if self.in_bias is not None:
            y += self.in_bias
        return y

    @staticmethod
    def _norm(x: np.ndarray) -> np.ndarray:
        mean = np.mean(x, axis=-1, keepdims=True, dtype=_F32)
        d = x - mean
        var = np.mean(d * d, axis=-1, keepdims=True, dtype=_F32)
        d *= _ONE / np.sqrt(var + _LN_EPS)
        return d

    def step(self, xw: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """xw: this step's input projection [batch, k*n_cell]; returns fresh (h', c')."""
        k, n = self.k, self.n_cell
        if self.diagonal:
            z = xw.reshape(-1, k, n) + h[:, None, :] * self.r
        else:
            z = (xw + np.matmul(h, self.r)).reshape(-1, k, n)
        ifc = z[:, :k - 1]
        if self.peep_if is not None:
            ifc[:, :k - 2] += c[:, None, :] * self.peep_if
        if self.ln is not None:
            ifc = self._norm(ifc)
            ifc *= self.ln[:k - 1]
            ifc += self.b[:k - 1]
        sig = _sigmoid(ifc[:, :k - 2])
        g = self.act(ifc[:, k - 2])
        if self.cifg:
            f = sig[:, 0]
            c_new = f * c + (_ONE - f) * g
        else:
            c_new = sig[:, 1] * c + sig[:, 0] * g
        if self.cell_clip > 0:
            np.clip(c_new, -self.cell_clip, self.cell_clip, out=c_new)
        o = z[:, k - 1]
        if self.peep_o is not None:
            o += c_new * self.peep_o
        if self.ln is not None:
            o = self._norm(o)
            o *= self.ln[k - 1]
            o += self.b[k - 1]
        h_new = _sigmoid(o)
        # LiteRT's ApplyActivationToVector leaves its output buffer untouched for NONE, and that buffer
        # holds the cell gate: without an activation the cell output is o .* g, not o .* c'.
        h_new *= g if self.act_none else self.act(c_new)
        if self.proj_w is not None:
            h_new = np.matmul(h_new, self.proj_w)
            if self.proj_b is not None:
                h_new += self.proj_b
            if self.proj_clip > 0:
                np.clip(h_new, -self.proj_clip, self.proj_clip, out=h_new)
        return h_new, c_new


# Input layout shared by LSTM and UNIDIRECTIONAL_SEQUENCE_LSTM (and each direction of the bidirectional op).
_W, _R, _PEEP, _BIAS, _PROJ = (1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11), (12, 13, 14, 15), (16, 17)
_H_STATE, _C_STATE, _LN = 18, 19, (20, 21, 22, 23)


def _lstm_cell(ctx: KernelContext, n_input: int) -> _LstmCell:
    ctx.expect_inputs(20, 24)
    _require_float(ctx)
    return _LstmCell(ctx, w=_W, r=_R, peep=_PEEP, bias=_BIAS, proj=_PROJ,
                     ln=_LN if len(ctx.inputs) == 24 else None, aux_w=None, n_input=n_input,
                     diagonal=bool(ctx.options.get("diagonal_recurrent_tensors", False)))


def _run_sequence(cell, xw: np.ndarray, h, c, out: np.ndarray, time_major: bool, reverse: bool = False,
                  lo: int = 0, hi: int | None = None):
    """Steps `cell` over xw ([T, B, G] or [B, T, G]), writing h into out[..., lo:hi]; returns the state."""
    steps = xw.shape[0] if time_major else xw.shape[1]
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    for t in order:
        if time_major:
            h, c = cell.step(xw[t], h, c)
            out[t, :, lo:hi] = h
        else:
            h, c = cell.step(xw[:, t], h, c)
            out[:, t, lo:hi] = h
    return h, c


@CPU.register("UNIDIRECTIONAL_SEQUENCE_LSTM", dtypes=("float32",))
def unidirectional_sequence_lstm(ctx: KernelContext) -> Run:
    """LSTM over a sequence [T, B, in] (time_major) or [B, T, in]; output h per step; state in 18, 19."""
    steps, batch, n_input = _sequence_dims(ctx)
    cell = _lstm_cell(ctx, n_input)
    time_major = bool(ctx.options.get("time_major", False))
    h_i = _state_slot(ctx, _H_STATE, "output_state", (batch, cell.n_output))
    c_i = _state_slot(ctx, _C_STATE, "cell_state", (batch, cell.n_cell))
    v, x_i, o = ctx.values, ctx.inputs[0], ctx.outputs[0]
    n_out = cell.n_output

    def run() -> None:
        x = v[x_i]
        lead = x.shape[:2]
        b = lead[1] if time_major else lead[0]
        xw = cell.project(x.reshape(-1, x.shape[2])).reshape(lead + (-1,))
        out = np.empty(_sequence_output_shape(x.shape, n_out), _F32)
        h = np.reshape(v[h_i], (b, n_out))
        c = np.reshape(v[c_i], (b, cell.n_cell))
        h, c = _run_sequence(cell, xw, h, c, out, time_major)
        v[h_i], v[c_i] = h, c
        v[o] = out
    return run


@shape_rule("UNIDIRECTIONAL_SEQUENCE_LSTM")
def unidirectional_sequence_lstm_shape(n: Node) -> list[Shape | None]:
    return _outputs(n, [_sequence_output(n, _lstm_n_output(n.shape(_W[1]), n.shape(_PROJ[0])))])


@CPU.register("LSTM", dtypes=("float32",))
def lstm(ctx: KernelContext) -> Run:
    """One LSTM step (kernel_type FULL): input [B, in], output h' [B, n_output]; state in 18, 19."""
    if ctx.options.get("kernel_type", 0) != 0:
        raise ctx.fail("only the FULL LSTM kernel type is supported (BASIC is the quantized 5-input form)")
    shape = tuple(ctx.input_tensor(0).shape)
    if len(shape) != 2:
        raise ctx.fail(f"input must be 2-D [batch, input], has shape {list(shape)}")
    cell = _lstm_cell(ctx, shape[1])
    h_i = _state_slot(ctx, _H_STATE, "output_state", (shape[0], cell.n_output))
    c_i = _state_slot(ctx, _C_STATE, "cell_state", (shape[0], cell.n_cell))
    v, x_i, outs = ctx.values, ctx.inputs[0], ctx.outputs

    def run() -> None:
        x = v[x_i]
        b = x.shape[0]
        h, c = cell.step(cell.project(x), np.reshape(v[h_i], (b, cell.n_output)),
                         np.reshape(v[c_i], (b, cell.n_cell)))
        v[h_i], v[c_i] = h, c
        v[outs[0]] = h
    return run


@shape_rule("LSTM")
def lstm_shape(n: Node) -> list[Shape | None]:
    return _outputs(n, [_step_output(n, _lstm_n_output(n.shape(_W[1]), n.shape(_PROJ[0])))])


@CPU.register("BIDIRECTIONAL_SEQUENCE_LSTM", dtypes=("float32",))
def bidirectional_sequence_lstm(ctx: KernelContext) -> Run:
    """Forward and backward LSTMs over one sequence (inputs 1-17 fw, 18-34 bw, states 35-38, aux 39-47).

    An aux input without aux weights is the backward direction's input (stacking without cross links);
    with aux weights both directions add W_aux aux. merge_outputs concatenates [fw, bw] on the last axis.
    """
    ctx.expect_inputs(48)
    _require_float(ctx)
    steps, batch, n_input = _sequence_dims(ctx)
    time_major = bool(ctx.options.get("time_major", True))
    merge = bool(ctx.options.get("merge_outputs", False))
    has_aux = ctx.has_input(39)
    use_aux_w = has_aux and ctx.has_input(41)
    n_aux = ctx.input_tensor(39).shape[-1] if has_aux else 0
    bw_in = 39 if has_aux and not use_aux_w else 0

    def direction(off: int, aux_w: tuple) -> _LstmCell:
        return _LstmCell(ctx, w=tuple(i + off for i in _W), r=tuple(i + off for i in _R),
                         peep=tuple(i + off for i in _PEEP), bias=tuple(i + off for i in _BIAS),
                         proj=tuple(i + off for i in _PROJ), ln=None, aux_w=aux_w if use_aux_w else None,
                         n_input=n_input if off == 0 or bw_in == 0 else n_aux, n_aux=n_aux)
    fw, bw = direction(0, (40, 41, 42, 43)), direction(17, (44, 45, 46, 47))
    states = [_state_slot(ctx, 35, "fw_output_state", (batch, fw.n_output)),
              _state_slot(ctx, 36, "fw_cell_state", (batch, fw.n_cell)),
              _state_slot(ctx, 37, "bw_output_state", (batch, bw.n_output)),
              _state_slot(ctx, 38, "bw_cell_state", (batch, bw.n_cell))]
    if len(ctx.outputs) != (1 if merge else 2):
        raise ctx.fail(f"has {len(ctx.outputs)} outputs, expected {1 if merge else 2} "
                       f"(merge_outputs={merge})")
    v, ins, outs = ctx.values, ctx.inputs, ctx.outputs
    nf, nb = fw.n_output, bw.n_output

    def run() -> None:
        x = v[ins[0]]
        lead = x.shape[:2]
        b = lead[1] if time_major else lead[0]
        aux = v[ins[39]] if has_aux else None
        aux2d = aux.reshape(-1, aux.shape[2]) if use_aux_w else None
        xb = aux if bw_in else x
        xw_f = fw.project(x.reshape(-1, x.shape[2]), aux2d).reshape(lead + (-1,))
        xw_b = bw.project(xb.reshape(-1, xb.shape[2]), aux2d).reshape(lead + (-1,))
        hf, cf, hb, cb = (v[s] for s in states)
        if merge:
            out_f = out_b = np.empty(_sequence_output_shape(x.shape, nf + nb), _F32)
            lo = nf
        else:
            out_f, out_b = (np.empty(_sequence_output_shape(x.shape, k), _F32) for k in (nf, nb))
            lo = 0
        hf, cf = _run_sequence(fw, xw_f, np.reshape(hf, (b, nf)), np.reshape(cf, (b, fw.n_cell)), out_f,
                               time_major, lo=0, hi=nf)
        hb, cb = _run_sequence(bw, xw_b, np.reshape(hb, (b, nb)), np.reshape(cb, (b, bw.n_cell)), out_b,
                               time_major, reverse=True, lo=lo, hi=lo + nb)
        for s, val in zip(states, (hf, cf, hb, cb)):
            v[s] = val
        v[outs[0]] = out_f
        if not merge:
            v[outs[1]] = out_b
    return run


def _bidirectional_outputs(n: Node, nf: int, nb: int) -> list:
    """Shape rule part: [fw, bw] sequence outputs, or one of nf + nb features with merge_outputs."""
    if bool(n.opts.get("merge_outputs", False)):
        return _outputs(n, [_sequence_output(n, nf + nb if nf >= 0 and nb >= 0 else -1)])
    return _outputs(n, [_sequence_output(n, nf), _sequence_output(n, nb)])


@shape_rule("BIDIRECTIONAL_SEQUENCE_LSTM")
def bidirectional_sequence_lstm_shape(n: Node) -> list[Shape | None]:
    bw = 17     # the backward direction's inputs follow the forward one's 17
    return _bidirectional_outputs(n, _lstm_n_output(n.shape(_W[1]), n.shape(_PROJ[0])),
                                  _lstm_n_output(n.shape(_W[1] + bw), n.shape(_PROJ[0] + bw)))


# -------------------------------------------------------------------------------------------------- RNN

def _rnn_units(w_shape: Sequence[int] | None) -> int:
    """An RNN's units: the rows of its input weights [units, input] (-1 when they do not tell)."""
    return int(w_shape[0]) if w_shape is not None and len(w_shape) == 2 else -1


class _RnnCell:
    """h' = act(W x [+ W_aux aux] + R h + b), W x + b precomputed for the whole sequence."""

    def __init__(self, ctx: KernelContext, w: int, r: int, b: int, aux_w: int | None, n_input: int,
                 n_aux: int = 0):
        wt = _weight(ctx, w, "input_weights")
        if wt.ndim != 2 or wt.shape[1] != n_input:
            raise ctx.fail(f"input weights have shape {list(wt.shape)}, expected [units, {n_input}]")
        units = _rnn_units(wt.shape)
        self.units = units
        self.w = np.ascontiguousarray(wt.T)
        self.r = np.ascontiguousarray(_weight(ctx, r, "recurrent_weights", (units, units)).T)
        self.b = _weight(ctx, b, "bias", (units,))
        self.aux = None
        if aux_w is not None and ctx.has_input(aux_w):
            self.aux = np.ascontiguousarray(_weight(ctx, aux_w, "aux_input_weights", (units, n_aux)).T)
        act = fused_activation(ctx.options.get("fused_activation_function", 0))
        self.act = act if act is not None else (lambda x: x)

    def project(self, x2d: np.ndarray, aux2d: np.ndarray | None = None) -> np.ndarray:
        y = np.matmul(x2d, self.w)
        if aux2d is not None and self.aux is not None:
            y += np.matmul(aux2d, self.aux)
        y += self.b
        return y

    def step(self, xw: np.ndarray, h: np.ndarray, c=None) -> tuple[np.ndarray, None]:
        y = np.matmul(h, self.r)
        y += xw
        return self.act(y), None


def _rnn_common(ctx: KernelContext, n_input: int) -> _RnnCell:
    ctx.expect_inputs(5)
    if is_hybrid(ctx):
        return _HybridRnnCell(ctx, n_input)
    _require_float(ctx)
    return _RnnCell(ctx, 1, 2, 3, None, n_input)


def _hybrid_weight_scale(ctx: KernelContext, i: int, name: str) -> np.float32:
    """The one scale of a hybrid recurrent op's int8 weights (input i). LiteRT reads a single scale and
    silently uses 0 for per-channel weights, so those are refused."""
    q = qparams(ctx.input_tensor(i))
    if q.per_channel:
        raise ctx.fail(f"input {i} ({name}): per-channel weights are not supported by a hybrid "
                       f"{ctx.op.kernel_name} (LiteRT reads one scale)")
    return np.float32(q.scale[0])


class _HybridRnnCell:
    """The hybrid (dynamic-range) RNN step of LiteRT's kernel_utils::RnnBatchStep: float32 input and
    hidden state, int8 weights with one scale each (input 1 and recurrent input 2), float32 bias.

    y = bias; unless the whole input batch is 0: rows quantized to int8 (hybrid_quantize_rows, symmetric
    unless asymmetric_quantize_inputs), acc = q @ W.T exactly (minus the row's offset * the weight row's
    sum), y += float32(acc) * float32(row scale * weight scale); the same for the hidden state with the
    recurrent weights; then the fused activation, which is the new state. Each product and sum in float32
    in LiteRT's order. The weights' zero points are not read (LiteRT does not either)."""

    def __init__(self, ctx: KernelContext, n_input: int):
        _require_float_io(ctx)
        w_t, r_t = ctx.input_tensor(1), ctx.input_tensor(2)
        if r_t is None or r_t.type_name != "INT8" or qparams(r_t) is None:
            raise ctx.fail(f"a hybrid {ctx.op.kernel_name} (int8 input weights) needs int8 recurrent weights "
                           f"with quantization, have {'none' if r_t is None else r_t.type_name}"
                           f"{'' if r_t is None or qparams(r_t) is not None else ' without quantization'}")
        scales = [_hybrid_weight_scale(ctx, i, repr(t.name)) for i, t in ((1, w_t), (2, r_t))]
        w = self._const(ctx, 1, "input_weights")
        if w.ndim != 2 or w.shape[1] != n_input:
            raise ctx.fail(f"input weights have shape {list(w.shape)}, expected [units, {n_input}]")
        units = w.shape[0]
        r = self._const(ctx, 2, "recurrent_weights")
        if r.shape != (units, units):
            raise ctx.fail(f"input 2 (recurrent_weights) has shape {list(r.shape)}, expected [{units}, {units}]")
        b_t = ctx.input_tensor(3)
        if b_t is None or b_t.dtype != _F32:
            raise ctx.fail(f"the bias of a hybrid {ctx.op.kernel_name} must be float32")
        self.b = _weight(ctx, 3, "bias", (units,))
        self.units = units
        self.w_scale, self.r_scale = scales
        self.w = (np.ascontiguousarray(w.T.astype(np.float64)), w.astype(np.int64).sum(axis=1))
        self.r = (np.ascontiguousarray(r.T.astype(np.float64)), r.astype(np.int64).sum(axis=1))
        self.asymmetric = bool(ctx.options.get("asymmetric_quantize_inputs", False))
        act = fused_activation(ctx.options.get("fused_activation_function", 0))
        self.act = act if act is not None else (lambda x: x)
        self.skip_per_row = False       # UNIDIRECTIONAL_SEQUENCE_RNN batch-major steps one row at a time

    @staticmethod
    def _const(ctx: KernelContext, i: int, name: str) -> np.ndarray:
        w = ctx.const(i)
        if w is None:
            raise ctx.fail(f"input {i} ({name}) must be a constant tensor")
        return np.asarray(w, np.int8)

    def _accumulate(self, y: np.ndarray, x: np.ndarray, weights, w_scale: np.float32) -> np.ndarray:
        zero = ~x.any(axis=1)
        if not self.skip_per_row and not zero.all():
            zero[:] = False             # LiteRT skips only a whole batch of zeros
        if zero.all():
            return y
        wt, row_sums = weights
        q, sf, offset = hybrid_quantize_rows(x, self.asymmetric)
        acc = np.matmul(q.astype(np.float64), wt).astype(np.int64)
        if self.asymmetric:
            acc -= offset[:, None] * row_sums[None, :]
        scale = (sf * w_scale).astype(_F32)
        add = (y + (wrap_int32(acc).astype(_F32) * scale[:, None]).astype(_F32)).astype(_F32)
        return np.where(zero[:, None], y, add) if zero.any() else add

    def project(self, x2d: np.ndarray, aux2d: np.ndarray | None = None) -> np.ndarray:
        # LiteRT quantizes a step's input rows: the whole sequence at once gives the same rows, but its
        # zero-batch skip is per step, so the input part is kept for step() (bias + input, then + state)
        return x2d

    def step(self, x: np.ndarray, h: np.ndarray, c=None) -> tuple[np.ndarray, None]:
        y = np.broadcast_to(self.b, (x.shape[0], self.units)).astype(_F32)
        y = self._accumulate(y, np.asarray(x, _F32), self.w, self.w_scale)
        y = self._accumulate(y, np.asarray(h, _F32), self.r, self.r_scale)
        return self.act(y), None


def _require_float_io(ctx: KernelContext) -> None:
    """A hybrid RNN's float32 parts: input 0, hidden state (input 4) and output."""
    for k in (0, 4):
        t = ctx.input_tensor(k)
        if t is not None and t.dtype != _F32:
            raise ctx.fail(f"input {k} has type {t.dtype.name}; only float32 is supported")
    if ctx.output_dtype(0) != _F32:
        raise ctx.fail(f"output 0 has type {ctx.output_dtype(0).name}; only float32 is supported")


@CPU.register("RNN", dtypes=("float32",))
def rnn(ctx: KernelContext) -> Run:
    """One step of a fully connected RNN: input [B, in], hidden state (input 4) [B, units]."""
    shape = tuple(ctx.input_tensor(0).shape)
    if len(shape) != 2:
        raise ctx.fail(f"input must be 2-D [batch, input], has shape {list(shape)}")
    cell = _rnn_common(ctx, shape[1])
    h_i = _state_slot(ctx, 4, "hidden_state", (shape[0], cell.units))
    v, x_i, o = ctx.values, ctx.inputs[0], ctx.outputs[0]

    def run() -> None:
        x = v[x_i]
        h, _ = cell.step(cell.project(x), np.reshape(v[h_i], (x.shape[0], cell.units)))
        v[h_i] = h
        v[o] = h
    return run


@shape_rule("RNN")
def rnn_shape(n: Node) -> list[Shape | None]:
    return _outputs(n, [_step_output(n, _rnn_units(n.shape(1)))])


@CPU.register("UNIDIRECTIONAL_SEQUENCE_RNN", dtypes=("float32",))
def unidirectional_sequence_rnn(ctx: KernelContext) -> Run:
    """RNN over [T, B, in] (time_major) or [B, T, in]; output the hidden state of every step."""
    steps, batch, n_input = _sequence_dims(ctx)
    cell = _rnn_common(ctx, n_input)
    if isinstance(cell, _HybridRnnCell):
        return _sequence_rnn_hybrid(ctx, cell, batch)
    time_major = bool(ctx.options.get("time_major", False))
    h_i = _state_slot(ctx, 4, "hidden_state", (batch, cell.units))
    v, x_i, o = ctx.values, ctx.inputs[0], ctx.outputs[0]
    units = cell.units

    def run() -> None:
        x = v[x_i]
        lead = x.shape[:2]
        b = lead[1] if time_major else lead[0]
        xw = cell.project(x.reshape(-1, x.shape[2])).reshape(lead + (units,))
        out = np.empty(_sequence_output_shape(x.shape, units), _F32)
        h, _ = _run_sequence(cell, xw, np.reshape(v[h_i], (b, units)), None, out, time_major)
        v[h_i] = h
        v[o] = out
    return run


def _sequence_rnn_hybrid(ctx: KernelContext, cell: _HybridRnnCell, batch: int) -> Run:
    """The hybrid UNIDIRECTIONAL_SEQUENCE_RNN: time major, one RnnBatchStep per step on the whole batch;
    batch major, LiteRT steps each batch row on its own (its zero-input skip is then per row)."""
    time_major = bool(ctx.options.get("time_major", False))
    cell.skip_per_row = not time_major
    h_i = _state_slot(ctx, 4, "hidden_state", (batch, cell.units))
    v, x_i, o = ctx.values, ctx.inputs[0], ctx.outputs[0]
    units = cell.units

    def run() -> None:
        x = v[x_i]
        b = x.shape[1] if time_major else x.shape[0]
        out = np.empty(_sequence_output_shape(x.shape, units), _F32)
        h, _ = _run_sequence(cell, x, np.reshape(v[h_i], (b, units)), None, out, time_major)
        v[h_i] = h
        v[o] = out
    return run


@shape_rule("UNIDIRECTIONAL_SEQUENCE_RNN")
def unidirectional_sequence_rnn_shape(n: Node) -> list[Shape | None]:
    return _outputs(n, [_sequence_output(n, _rnn_units(n.shape(1)))])


@CPU.register("BIDIRECTIONAL_SEQUENCE_RNN", dtypes=("float32",))
def bidirectional_sequence_rnn(ctx: KernelContext) -> Run:
    """Forward (inputs 1-4) and backward (5-8) RNNs over one sequence; aux input 9, aux weights 10, 11.

    An aux input without aux weights is the backward direction's input; with them both directions add
    W_aux aux. merge_outputs concatenates [fw, bw] on the last axis.
    """
    ctx.expect_inputs(9, 12)
    _require_float(ctx)
    steps, batch, n_input = _sequence_dims(ctx)
    time_major = bool(ctx.options.get("time_major", False))
    merge = bool(ctx.options.get("merge_outputs", False))
    has_aux = ctx.has_input(9)
    use_aux_w = has_aux and ctx.has_input(10)
    n_aux = ctx.input_tensor(9).shape[-1] if has_aux else 0
    bw_from_aux = has_aux and not use_aux_w
    fw = _RnnCell(ctx, 1, 2, 3, 10 if use_aux_w else None, n_input, n_aux)
    bw = _RnnCell(ctx, 5, 6, 7, 11 if use_aux_w else None, n_aux if bw_from_aux else n_input, n_aux)
    hf_i = _state_slot(ctx, 4, "fw_hidden_state", (batch, fw.units))
    hb_i = _state_slot(ctx, 8, "bw_hidden_state", (batch, bw.units))
    if len(ctx.outputs) != (1 if merge else 2):
        raise ctx.fail(f"has {len(ctx.outputs)} outputs, expected {1 if merge else 2} "
                       f"(merge_outputs={merge})")
    v, ins, outs = ctx.values, ctx.inputs, ctx.outputs
    nf, nb = fw.units, bw.units

    def run() -> None:
        x = v[ins[0]]
        lead = x.shape[:2]
        b = lead[1] if time_major else lead[0]
        aux = v[ins[9]] if has_aux else None
        aux2d = aux.reshape(-1, aux.shape[2]) if use_aux_w else None
        xb = aux if bw_from_aux else x
        xw_f = fw.project(x.reshape(-1, x.shape[2]), aux2d).reshape(lead + (nf,))
        xw_b = bw.project(xb.reshape(-1, xb.shape[2]), aux2d).reshape(lead + (nb,))
        if merge:
            out_f = out_b = np.empty(_sequence_output_shape(x.shape, nf + nb), _F32)
            lo = nf
        else:
            out_f, out_b = (np.empty(_sequence_output_shape(x.shape, k), _F32) for k in (nf, nb))
            lo = 0
        hf, _ = _run_sequence(fw, xw_f, np.reshape(v[hf_i], (b, nf)), None, out_f, time_major, lo=0, hi=nf)
        hb, _ = _run_sequence(bw, xw_b, np.reshape(v[hb_i], (b, nb)), None, out_b, time_major, reverse=True,
                              lo=lo, hi=lo + nb)
        v[hf_i], v[hb_i] = hf, hb
        v[outs[0]] = out_f
        if not merge:
            v[outs[1]] = out_b
    return run


@shape_rule("BIDIRECTIONAL_SEQUENCE_RNN")
def bidirectional_sequence_rnn_shape(n: Node) -> list[Shape | None]:
    return _bidirectional_outputs(n, _rnn_units(n.shape(1)), _rnn_units(n.shape(5)))


# ------------------------------------------------------------------------------------------------- SVDF

def _svdf_units(filters: int, rank: int) -> int:
    """Output units of a rank-`rank` SVDF: filters // rank; -1 unless rank is positive and divides them."""
    return filters // rank if rank > 0 and filters >= 0 and filters % rank == 0 else -1


@CPU.register("SVDF", dtypes=("float32",))
def svdf(ctx: KernelContext) -> Run:
    """Rank-`rank` SVDF: the state [B, filters, memory] shifts left one step and takes W_f x as its newest
    column; out[b, u] = act(bias[u] + sum_{r} sum_m state[b, u*rank + r, m] * W_t[u*rank + r, m])."""
    ctx.expect_inputs(4, 5)
    if is_hybrid(ctx):
        return _svdf_hybrid(ctx)
    _require_float(ctx)
    shape = tuple(ctx.input_tensor(0).shape)
    if len(shape) != 2:
        raise ctx.fail(f"input must be 2-D [batch, input], has shape {list(shape)}")
    batch, n_input = shape
    rank = int(ctx.options.get("rank", 0))
    w_f = _weight(ctx, 1, "weights_feature")
    if w_f.ndim != 2 or w_f.shape[1] != n_input:
        raise ctx.fail(f"weights_feature has shape {list(w_f.shape)}, expected [filters, {n_input}]")
    filters = w_f.shape[0]
    units = _svdf_units(filters, rank)
    if units < 0:
        raise ctx.fail(f"rank {rank} must be positive and divide the number of filters {filters}")
    w_t = _weight(ctx, 2, "weights_time")
    if w_t.ndim != 2 or w_t.shape[0] != filters:
        raise ctx.fail(f"weights_time has shape {list(w_t.shape)}, expected [{filters}, memory_size]")
    memory = w_t.shape[1]
    bias = _weight(ctx, 3, "bias", (units,), optional=True)
    if len(ctx.inputs) != 5:
        raise ctx.fail("input 4 (activation_state) is required")
    s_i = _state_slot(ctx, 4, "activation_state", (batch, filters * memory))
    wf_t = np.ascontiguousarray(w_f.T)                                   # [in, filters]
    act = fused_activation(ctx.options.get("fused_activation_function", 0))
    v, x_i, o = ctx.values, ctx.inputs[0], ctx.outputs[0]
    state_shape = ctx.input_tensor(4).shape

    def run() -> None:
        x = v[x_i]
        b = x.shape[0]
        old = np.reshape(v[s_i], (b, filters, memory))
        state = np.empty((b, filters, memory), _F32)
        state[:, :, :-1] = old[:, :, 1:]
        state[:, :, -1] = np.matmul(x, wf_t)
        per_filter = np.einsum("bfm,fm->bf", state, w_t)
        y = per_filter.reshape(b, units, rank).sum(axis=-1, dtype=_F32)
        if bias is not None:
            y += bias
        if act is not None:
            act(y)
        v[s_i] = state.reshape((b, filters * memory) if b != batch else state_shape)
        v[o] = y
    return run


def _svdf_hybrid(ctx: KernelContext) -> Run:
    """The hybrid SVDF of LiteRT's EvalHybridSVDF: float32 input, state, bias and output; int8
    weights_feature and int8 weights_time, one scale each. The state shifts left one step; its newest
    column is 0 (a whole batch of zero input) or float32(acc) * float32(row scale * feature scale) with the
    input rows quantized as hybrid_quantize_rows; the time weights are dequantized once (float32(int8) *
    scale) and each filter's dot product with its state row is summed in float32 in memory order, then
    the rank's filters in order, + bias, then the activation."""
    shape = tuple(ctx.input_tensor(0).shape)
    if len(shape) != 2:
        raise ctx.fail(f"input must be 2-D [batch, input], has shape {list(shape)}")
    for k in (3, 4):
        t = ctx.input_tensor(k) if ctx.has_input(k) else None
        if t is not None and t.dtype != _F32:
            raise ctx.fail(f"input {k} has type {t.dtype.name}; a hybrid SVDF needs float32")
    if ctx.output_dtype(0) != _F32:
        raise ctx.fail(f"output 0 has type {ctx.output_dtype(0).name}; a hybrid SVDF needs float32")
    batch, n_input = shape
    rank = int(ctx.options.get("rank", 0))
    scales = []
    for i, name in ((1, "weights_feature"), (2, "weights_time")):
        t = ctx.input_tensor(i)
        q = None if t is None else qparams(t)
        if t is None or t.type_name != "INT8" or q is None:
            raise ctx.fail(f"input {i} ({name}) of a hybrid SVDF must be int8 with quantization")
        scales.append(_hybrid_weight_scale(ctx, i, name))
    w_f = _HybridRnnCell._const(ctx, 1, "weights_feature")
    if w_f.ndim != 2 or w_f.shape[1] != n_input:
        raise ctx.fail(f"weights_feature has shape {list(w_f.shape)}, expected [filters, {n_input}]")
    filters = w_f.shape[0]
    units = _svdf_units(filters, rank)
    if units < 0:
        raise ctx.fail(f"rank {rank} must be positive and divide the number of filters {filters}")
    w_t8 = _HybridRnnCell._const(ctx, 2, "weights_time")
    if w_t8.ndim != 2 or w_t8.shape[0] != filters:
        raise ctx.fail(f"weights_time has shape {list(w_t8.shape)}, expected [{filters}, memory_size]")
    memory = w_t8.shape[1]
    w_t = (w_t8.astype(_F32) * scales[1]).astype(_F32)
    bias = _weight(ctx, 3, "bias", (units,), optional=True)
    if len(ctx.inputs) != 5:
        raise ctx.fail("input 4 (activation_state) is required")
    s_i = _state_slot(ctx, 4, "activation_state", (batch, filters * memory))
    wf_t = np.ascontiguousarray(w_f.T.astype(np.float64))
    row_sums = w_f.astype(np.int64).sum(axis=1)
    asymmetric = bool(ctx.options.get("asymmetric_quantize_inputs", False))
    f_scale = scales[0]
    act = fused_activation(ctx.options.get("fused_activation_function", 0))
    v, x_i, o = ctx.values, ctx.inputs[0], ctx.outputs[0]
    state_shape = ctx.input_tensor(4).shape

    def run() -> None:
        x = np.asarray(v[x_i], _F32)
        b = x.shape[0]
        old = np.reshape(v[s_i], (b, filters, memory))
        state = np.empty((b, filters, memory), _F32)
        state[:, :, :-1] = old[:, :, 1:]
        newest = np.zeros((b, filters), _F32)
        if x.any():
            q, sf, offset = hybrid_quantize_rows(x, asymmetric)
            acc = np.matmul(q.astype(np.float64), wf_t).astype(np.int64)
            if asymmetric:
                acc -= offset[:, None] * row_sums[None, :]
            scale = (sf * f_scale).astype(_F32)
            newest = (newest + (wrap_int32(acc).astype(_F32) * scale[:, None]).astype(_F32)).astype(_F32)
        state[:, :, -1] = newest
        per_filter = np.zeros((b, filters), _F32)
        for m in range(memory):                     # float32 sums in LiteRT's order
            per_filter = (per_filter + (state[:, :, m] * w_t[None, :, m]).astype(_F32)).astype(_F32)
        per_filter = per_filter.reshape(b, units, rank)
        y = np.zeros((b, units), _F32)
        for r in range(rank):
            y = (y + per_filter[:, :, r]).astype(_F32)
        if bias is not None:
            y = (y + bias).astype(_F32)
        if act is not None:
            act(y)
        v[s_i] = state.reshape((b, filters * memory) if b != batch else state_shape)
        v[o] = y
    return run


@shape_rule("SVDF")
def svdf_shape(n: Node) -> list[Shape | None]:
    w_f = n.shape(1)
    filters = w_f[0] if w_f is not None and len(w_f) == 2 else -1
    return _outputs(n, [_step_output(n, _svdf_units(filters, int(n.opts.get("rank", 0))))])
