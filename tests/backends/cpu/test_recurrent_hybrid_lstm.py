"""Hybrid (dynamic-range) LSTM: float32 input, states, biases and layer norm coefficients with int8 gate,
recurrent, peephole and projection weights (one scale each), as the TFLite converter emits for a Keras
LSTM with Optimize.DEFAULT and no representative data set; against LiteRT's builtin kernels (lstm_eval
EvalHybrid), invoked several times so that the states carry over.
"""
from __future__ import annotations

import numpy as np
import pytest

import onert_py
from helpers import FORMATS, LSTM_CONFIGS, rng, run_litert_builtin, run_litert_builtin_invokes, run_onert
from onert_py.schema.writer import ModelBuilder

F32 = np.float32



def _lstm_params(sg, g, n_in, n_cell, cfg, wq=None):
    """The op's inputs 1..17 and 20..23 (layer norm): int8 weights with one random scale each."""
    cifg, peephole, proj, proj_bias, ln = LSTM_CONFIGS[cfg]
    n_out = n_cell - 1 if proj else n_cell

    def q8(name, *shape):
        w = g.integers(-127, 128, shape).astype(np.int8)
        q = wq if wq is not None and name == "i2f" else (float(10.0 ** g.uniform(-3, -1.8)), 0)
        return sg.const(name, w, quantization=q)

    def f(name, *shape, scale=0.5):
        return sg.const(name, (scale * g.standard_normal(shape)).astype(F32))

    ins = [-1 if cifg else q8("i2i", n_cell, n_in), q8("i2f", n_cell, n_in), q8("i2c", n_cell, n_in),
           q8("i2o", n_cell, n_in),
           -1 if cifg else q8("r2i", n_cell, n_out), q8("r2f", n_cell, n_out), q8("r2c", n_cell, n_out),
           q8("r2o", n_cell, n_out)]
    ins += ([-1 if cifg else q8("c2i", n_cell), q8("c2f", n_cell), q8("c2o", n_cell)] if peephole else [-1] * 3)
    ins += [-1 if cifg else f("bi", n_cell), f("bf", n_cell), f("bc", n_cell), f("bo", n_cell)]
    ins += [q8("pw", n_out, n_cell) if proj else -1, f("pb", n_out) if proj and proj_bias else -1]
    lns = ([-1 if cifg else f("lni", n_cell, scale=1.0), f("lnf", n_cell, scale=1.0),
            f("lnc", n_cell, scale=1.0), f("lno", n_cell, scale=1.0)] if ln else [])
    return ins, lns, n_out


def _model(op, cfg, *, batch, steps=None, time_major=False, n_in=5, n_cell=6, act=4, cell_clip=0.0,
           proj_clip=0.0, asym=False, seed=0, wq=None):
    g = rng(seed)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    lead = [batch] if steps is None else ([steps, batch] if time_major else [batch, steps])
    x = sg.tensor("x", lead + [n_in], F32)
    ins, lns, n_out = _lstm_params(sg, g, n_in, n_cell, cfg, wq)
    h = sg.tensor("h", [batch, n_out], F32, is_variable=True)
    c = sg.tensor("c", [batch, n_cell], F32, is_variable=True)
    out = sg.tensor("out", lead + [n_out], F32)
    options = dict(fused_activation_function=act, cell_clip=cell_clip, proj_clip=proj_clip,
                   asymmetric_quantize_inputs=asym)
    if steps is not None:
        options["time_major"] = time_major
    sg.op(op, [x] + ins + [h, c] + lns, [out], **options)
    sg.inputs, sg.outputs = [x], [out]
    mb.signature("serving_default", sg)
    return mb, lead + [n_in]


def _feeds(g, shape, n=3, magnitude=1.0, zero=True, time_major=False, steps=True):
    """n inputs; with `zero` the second is all zeros (LiteRT skips its products) and the third has one
    zero batch row (for a batch-major sequence its own steps, skipped on their own)."""
    feeds = []
    for k in range(n):
        x = (magnitude * g.standard_normal(shape)).astype(F32)
        if zero and k == 1:
            x[...] = 0
        elif zero and k == 2:
            if steps and time_major:
                x[:, 0] = 0
            else:
                x[0] = 0
        feeds.append([x])
    return feeds


def _ulps(a, e):
    a, e = a.view(np.int32).astype(np.int64), e.view(np.int32).astype(np.int64)
    a = np.where(a < 0, -(a & 0x7FFFFFFF), a)
    e = np.where(e < 0, -(e & 0x7FFFFFFF), e)
    return np.abs(a - e)


def _check_invokes(mb, feeds, rtol=0.0, atol=0.0):
    """One LiteRT (builtin kernels) interpreter and one onert-py session per format, invoked once per
    feed; bit-exact when rtol and atol are 0."""
    expected = run_litert_builtin_invokes(mb, feeds)
    worst = 0
    for fmt in FORMATS:
        sess = onert_py.infer.session(mb.to_bytes(fmt))
        for k, (feed, exp) in enumerate(zip(feeds, expected)):
            before = [np.array(x, copy=True) for x in feed]
            got = sess.infer(feed)
            for x, b in zip(feed, before):
                np.testing.assert_array_equal(x, b)
            for a, e in zip(got, exp):
                assert a.shape == e.shape and a.dtype == e.dtype
                worst = max(worst, int(_ulps(a, e).max()))
                if rtol == 0 and atol == 0:
                    np.testing.assert_array_equal(a.view(np.uint32), e.view(np.uint32), err_msg=f"{fmt} {k}")
                else:
                    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=f"{fmt} invoke {k}")
    return worst


# ----------------------------------------------------------------------------- UNIDIRECTIONAL_SEQUENCE_LSTM
# Bit-exact: LiteRT's x86 build runs Eigen's sigmoid and tanh (reproduced in float32, and its scalar path
# for the elements outside 16-byte aligned packets of 4), the hybrid products and float32 sums in order.

SIZES = [  # (batch, n_in, n_cell)
    (1, 5, 5),
    (3, 13, 6),     # 8 vector + 5 scalar columns in the row quantization
    (2, 4, 8),
]


@pytest.mark.parametrize("asym", [False, True], ids=["symmetric", "asymmetric"])
@pytest.mark.parametrize("time_major", [False, True], ids=["batch_major", "time_major"])
@pytest.mark.parametrize("size", SIZES, ids=str)
@pytest.mark.parametrize("cfg", sorted(LSTM_CONFIGS))
def test_hybrid_sequence_lstm_bit_exact(cfg, size, time_major, asym):
    batch, n_in, n_cell = size
    mb, shape = _model("UNIDIRECTIONAL_SEQUENCE_LSTM", cfg, batch=batch, steps=4, time_major=time_major,
                       n_in=n_in, n_cell=n_cell, asym=asym, seed=n_in + n_cell)
    tol = ONE_ULP_CASES.get((cfg, size, time_major, asym), 0.0)
    _check_invokes(mb, _feeds(rng(batch), shape, n=4, time_major=time_major), rtol=tol, atol=tol)


# One element one float32 ulp off (1046036062 vs 1046036063): not understood yet; the likeliest cause is
# a sigmoid element on Eigen's scalar path, where glibc's expf (not always correctly rounded) is
# reproduced by a correctly rounded exp.
ONE_ULP_CASES = {("layer_norm", (3, 13, 6), False, True): 1e-6}


@pytest.mark.parametrize("act", [0, 1, 2, 3], ids=["NONE", "RELU", "RELU_N1_TO_1", "RELU6"])
@pytest.mark.parametrize("cfg", ["plain", "all", "cifg_peephole"])
def test_hybrid_sequence_lstm_activations_and_clips(cfg, act):
    # large inputs so that cell_clip and proj_clip bite
    mb, shape = _model("UNIDIRECTIONAL_SEQUENCE_LSTM", cfg, batch=2, steps=5, n_in=7, n_cell=6, act=act,
                       cell_clip=0.7, proj_clip=0.4, seed=act)
    _check_invokes(mb, _feeds(rng(act), shape, magnitude=3.0))


def test_hybrid_sequence_lstm_keras_sized():
    # the converter's typical form: batch-major, no peephole / projection, tanh; a longer sequence
    mb, shape = _model("UNIDIRECTIONAL_SEQUENCE_LSTM", "plain", batch=2, steps=20, n_in=16, n_cell=32, seed=5)
    _check_invokes(mb, _feeds(rng(5), shape, n=2, zero=False))


@pytest.mark.parametrize("magnitude", [1e-3, 30.0], ids=["small", "large"])
def test_hybrid_sequence_lstm_input_magnitudes(magnitude):
    mb, shape = _model("UNIDIRECTIONAL_SEQUENCE_LSTM", "all", batch=3, steps=3, time_major=True, n_in=9,
                       n_cell=7, asym=True, seed=9)
    _check_invokes(mb, _feeds(rng(9), shape, magnitude=magnitude, time_major=True))


# ----------------------------------------------------------------------------- LSTM (one step)

@pytest.mark.parametrize("asym", [False, True], ids=["symmetric", "asymmetric"])
@pytest.mark.parametrize("size", SIZES, ids=str)
@pytest.mark.parametrize("cfg", sorted(LSTM_CONFIGS))
def test_hybrid_lstm_bit_exact(cfg, size, asym):
    batch, n_in, n_cell = size
    mb, shape = _model("LSTM", cfg, batch=batch, n_in=n_in, n_cell=n_cell, asym=asym, seed=n_in + n_cell,
                       cell_clip=2.0, proj_clip=0.8)
    _check_invokes(mb, _feeds(rng(batch), shape, n=4, steps=False))


# ----------------------------------------------------------------------------- refusals

def test_hybrid_lstm_per_channel_weights_refused():
    # LiteRT reads the weights' legacy single scale: onert-py refuses per-channel weights
    q = (np.array([0.01] * 6, np.float32), np.zeros(6, np.int64), 0)
    mb, shape = _model("UNIDIRECTIONAL_SEQUENCE_LSTM", "plain", batch=2, steps=2, wq=q)
    with pytest.raises(onert_py.PrepareError, match="per-channel weights are not supported by a hybrid"):
        run_onert(mb, [np.ones(shape, F32)])


def test_hybrid_lstm_float_recurrent_weights_refused_as_litert():
    g = rng(40)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [2, 3, 4], F32)
    q8 = lambda name, *s: sg.const(name, g.integers(-127, 128, s).astype(np.int8), quantization=(0.01, 0))  # noqa: E731
    fl = lambda name, *s: sg.const(name, g.standard_normal(s).astype(F32))  # noqa: E731
    ins = [q8("i2i", 5, 4), q8("i2f", 5, 4), q8("i2c", 5, 4), q8("i2o", 5, 4),
           fl("r2i", 5, 5), fl("r2f", 5, 5), fl("r2c", 5, 5), fl("r2o", 5, 5), -1, -1, -1,
           fl("bi", 5), fl("bf", 5), fl("bc", 5), fl("bo", 5), -1, -1,
           sg.tensor("h", [2, 5], F32, is_variable=True), sg.tensor("c", [2, 5], F32, is_variable=True)]
    out = sg.tensor("out", [2, 3, 5], F32)
    sg.op("UNIDIRECTIONAL_SEQUENCE_LSTM", [x] + ins, [out], fused_activation_function=4, time_major=False)
    sg.inputs, sg.outputs = [x], [out]
    mb.signature("serving_default", sg)
    xs = [np.ones((2, 3, 4), F32)]
    with pytest.raises(onert_py.PrepareError, match="recurrent_to_input_weights.*must be int8 with quantization"):
        run_onert(mb, xs)
    with pytest.raises(RuntimeError, match="failed to prepare"):
        run_litert_builtin(mb, xs)


# ----------------------------------------------------------------------------- BIDIRECTIONAL_SEQUENCE_LSTM
# Each direction is LiteRT's EvalHybrid (the same step as above), the backward one over the reversed
# sequence; without aux weights an aux input is the backward direction's input. Bit-exact, except that
# LiteRT is wrong for a batch-major sequence with merge_outputs and batch > 1: lstm_eval's batch-major
# loop offsets row b's output state by b * (the output's last dim), which merged is n_fw + n_bw, not the
# state's n_output (rows read each other's state, the last ones past the end of the buffer; its float
# EvalFloat has the same line). onert-py computes the rows as the split outputs do (checked against
# those below); against LiteRT merged batch-major runs with batch 1.

BIDI_CONFIGS = sorted(c for c in LSTM_CONFIGS if not LSTM_CONFIGS[c][4])     # no layer norm in this op


def _bidi_model(cfg, *, batch, steps, time_major, merge, n_in=5, n_cell=6, bw_cfg=None, bw_cell=None,
                act=4, cell_clip=0.0, proj_clip=0.0, asym=False, aux_input=False, aux_weights=False,
                seed=0):
    g = rng(seed)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    lead = [steps, batch] if time_major else [batch, steps]
    x = sg.tensor("x", lead + [n_in], F32)
    fw, _, nf = _lstm_params(sg, g, n_in, n_cell, cfg)
    bw, _, nb = _lstm_params(sg, g, n_in, bw_cell or n_cell, bw_cfg or cfg)
    states = [sg.tensor("hf", [batch, nf], F32, is_variable=True),
              sg.tensor("cf", [batch, n_cell], F32, is_variable=True),
              sg.tensor("hb", [batch, nb], F32, is_variable=True),
              sg.tensor("cb", [batch, bw_cell or n_cell], F32, is_variable=True)]
    aux = sg.tensor("aux", lead + [n_in], F32) if aux_input else -1
    outs = ([sg.tensor("out", lead + [nf + nb], F32)] if merge else
            [sg.tensor("out_fw", lead + [nf], F32), sg.tensor("out_bw", lead + [nb], F32)])
    aux_w = ([sg.const(f"aux_w{k}", g.integers(-127, 128, (n_cell, n_in)).astype(np.int8),
                       quantization=(0.01, 0)) for k in range(8)] if aux_weights else [-1] * 8)
    sg.op("BIDIRECTIONAL_SEQUENCE_LSTM", [x] + fw + bw + states + [aux] + aux_w, outs,
          fused_activation_function=act, cell_clip=cell_clip, proj_clip=proj_clip, merge_outputs=merge,
          time_major=time_major, asymmetric_quantize_inputs=asym)
    sg.inputs, sg.outputs = [x] + ([aux] if aux_input else []), outs
    mb.signature("serving_default", sg)
    return mb, lead + [n_in]


@pytest.mark.parametrize("asym", [False, True], ids=["symmetric", "asymmetric"])
@pytest.mark.parametrize("merge", [False, True], ids=["split", "merged"])
@pytest.mark.parametrize("time_major", [False, True], ids=["batch_major", "time_major"])
@pytest.mark.parametrize("cfg", BIDI_CONFIGS)
def test_hybrid_bidirectional_lstm_bit_exact(cfg, time_major, merge, asym):
    batch = 1 if merge and not time_major else 3        # see above: LiteRT's merged batch-major rows
    mb, shape = _bidi_model(cfg, batch=batch, steps=4, time_major=time_major, merge=merge, n_in=13,
                            n_cell=6, asym=asym, seed=len(cfg))
    tol = BIDI_ULP_CASES.get((cfg, time_major, merge, asym), 0.0)
    _check_invokes(mb, _feeds(rng(3), shape, n=4, time_major=time_major), rtol=tol, atol=tol)


# A few elements 1-2 float32 ulps off: sigmoid elements on Eigen's scalar path, where LiteRT calls glibc's
# expf (not correctly rounded) and _eigen_logistic a correctly rounded exp. Checked: with glibc's expf
# (through ctypes) on those elements this case, and ONE_ULP_CASES above, are bit-exact.
BIDI_ULP_CASES = {("peephole", False, False, False): 1e-6}


@pytest.mark.parametrize("cfg", ["cifg_peephole", "projection"])
def test_hybrid_bidirectional_lstm_merged_batch_major_is_split_concatenated(cfg):
    # LiteRT's merged batch-major rows past the first are wrong (above): onert-py's merged output is its
    # split outputs side by side, each equal to LiteRT's (split) over the invokes
    kw = dict(batch=3, steps=4, time_major=False, n_in=6, n_cell=5, asym=True, seed=2)
    mb_split, shape = _bidi_model(cfg, merge=False, **kw)
    mb_merged, _ = _bidi_model(cfg, merge=True, **kw)
    feeds = _feeds(rng(4), shape, n=3)
    _check_invokes(mb_split, feeds)
    for fmt in FORMATS:
        split = onert_py.infer.session(mb_split.to_bytes(fmt))
        merged = onert_py.infer.session(mb_merged.to_bytes(fmt))
        for feed in feeds:
            fw, bw = split.infer(feed)
            np.testing.assert_array_equal(merged.infer(feed)[0], np.concatenate([fw, bw], axis=-1))


@pytest.mark.parametrize("act", [0, 1, 3], ids=["NONE", "RELU", "RELU6"])
@pytest.mark.parametrize("fw_cfg,bw_cfg", [("cifg_peephole", "plain"), ("projection", "projection_nobias")])
def test_hybrid_bidirectional_lstm_mixed_directions_and_clips(fw_cfg, bw_cfg, act):
    # the directions differ (LiteRT requires the same n_cell and n_output in both)
    mb, shape = _bidi_model(fw_cfg, bw_cfg=bw_cfg, batch=2, steps=5, time_major=True, merge=True, n_in=7,
                            n_cell=6, act=act, cell_clip=0.7, proj_clip=0.4, seed=act)
    _check_invokes(mb, _feeds(rng(act), shape, magnitude=3.0))


@pytest.mark.parametrize("time_major", [False, True], ids=["batch_major", "time_major"])
def test_hybrid_bidirectional_lstm_aux_input_is_backward_input(time_major):
    mb, shape = _bidi_model("plain", batch=2, steps=3, time_major=time_major, merge=False, n_in=4, n_cell=5,
                            aux_input=True, seed=7)
    g = rng(7)
    feeds = [[(g.standard_normal(shape)).astype(F32), (2 * g.standard_normal(shape)).astype(F32)]
             for _ in range(3)]
    feeds[1][1][...] = 0
    _check_invokes(mb, feeds)



def test_hybrid_bidirectional_lstm_aux_weights_refused():
    # stacking with cross links (aux input weights) is not implemented for the hybrid form
    mb, shape = _bidi_model("plain", batch=2, steps=3, time_major=True, merge=False, n_in=4, n_cell=5,
                            aux_input=True, aux_weights=True, seed=8)
    with pytest.raises(onert_py.PrepareError, match="aux input weights are not supported by a hybrid"):
        run_onert(mb, [np.ones(shape, F32), np.ones(shape, F32)])
