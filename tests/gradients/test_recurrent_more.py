"""Gradients of the layer-norm LSTMs, of the bidirectional recurrent ops (BIDIRECTIONAL_SEQUENCE_LSTM /
_RNN) and of SVDF, differentiated through their decomposition (backends/cpu/recurrent.py), against
finite differences: inputs and weights, merged and split outputs, both time layouts, the aux input, the
SVDF state."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from helpers import LSTM_CONFIGS, check_gradients, rng

import onert_py
from onert_py.errors import GradientError

TESTS = Path(__file__).resolve().parents[1]
# the forward tests' model builders (loaded by path: "backends" is the kernels' package name too)
_spec = importlib.util.spec_from_file_location("recurrent_models_more",
                                               TESTS / "backends" / "cpu" / "test_recurrent.py")
_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_models)
LN_CONFIGS = sorted(c for c, v in LSTM_CONFIGS.items() if v[4])


def _feeds(shapes, seed, scale=1.0):
    g = rng(seed)
    return [(scale * g.normal(size=s)).astype(np.float32) for s in shapes]


# ------------------------------------------------------------------------------------ layer-norm LSTM

@pytest.mark.parametrize("cfg", LN_CONFIGS)
@pytest.mark.parametrize("time_major", [False, True])
def test_layer_norm_sequence_lstm_gradients(cfg, time_major):
    mb, x_shape = _models._uni_lstm_model(cfg, batch=2, steps=3, time_major=time_major, n_in=3, n_cell=4)
    xs = _feeds([x_shape], 40)
    check_gradients(mb, xs)
    grads = check_gradients(mb, xs, wrt="weights")
    assert sum(name.startswith("ln") for name in grads) == (3 if LSTM_CONFIGS[cfg][0] else 4)


@pytest.mark.parametrize("cfg", LN_CONFIGS)
def test_layer_norm_one_step_lstm_gradients(cfg):
    mb, x_shape = _models._lstm_step_model(cfg, batch=2, n_in=3, n_cell=4)
    xs = _feeds([x_shape], 41)
    check_gradients(mb, xs)
    check_gradients(mb, xs, wrt="weights")


def test_layer_norm_lstm_clips_gradients():
    mb, x_shape = _models._uni_lstm_model("all", batch=2, steps=3, time_major=False, n_in=3, n_cell=4,
                                          cell_clip=0.5, proj_clip=0.3, act=1, seed=2)
    xs = _feeds([x_shape], 42)
    check_gradients(mb, xs, h=1e-3)
    check_gradients(mb, xs, wrt="weights", h=1e-3)


# ------------------------------------------------------------------------------ bidirectional LSTM

@pytest.mark.parametrize("cfg", ["plain", "cifg_peephole", "projection", "projection_nobias"])
@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("merge", [False, True])
def test_bidirectional_lstm_gradients(cfg, time_major, merge):
    mb, shapes = _models._bidi_lstm_model(cfg, batch=1, steps=3, time_major=time_major, merge=merge,
                                          n_in=3, n_cell=4)
    xs = _feeds(shapes, 43)
    check_gradients(mb, xs)
    grads = check_gradients(mb, xs, wrt="weights")
    assert any(n.startswith("fw_") for n in grads) and any(n.startswith("bw_") for n in grads)


@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("merge", [False, True])
def test_bidirectional_lstm_batch_gradients(time_major, merge):
    # batch-major with batch > 1: LiteRT's kernel is wrong there; this checks onert-py's own forward
    mb, shapes = _models._bidi_lstm_model("all", batch=2, steps=3, time_major=time_major, merge=merge,
                                          n_in=3, n_cell=4)
    xs = _feeds(shapes, 44)
    check_gradients(mb, xs)
    check_gradients(mb, xs, wrt="weights")


@pytest.mark.parametrize("aux", ["cross", "bw_input"])
@pytest.mark.parametrize("cfg", ["plain", "cifg_peephole"])
def test_bidirectional_lstm_aux_gradients(aux, cfg):
    mb, shapes = _models._bidi_lstm_model(cfg, batch=2, steps=3, time_major=True, merge=False, aux=aux,
                                          n_in=3, n_cell=4, cell_clip=0.8)
    xs = _feeds(shapes, 45)
    grads = check_gradients(mb, xs)
    assert len(grads) == 2          # the input and the aux input
    check_gradients(mb, xs, wrt="weights")


def test_bidirectional_lstm_clips_gradients():
    mb, shapes = _models._bidi_lstm_model("all", batch=1, steps=3, time_major=False, merge=True, n_in=3,
                                          n_cell=4, cell_clip=0.5, proj_clip=0.3, act=1, seed=3)
    xs = _feeds(shapes, 46, scale=2.0)
    check_gradients(mb, xs, h=1e-3)
    check_gradients(mb, xs, wrt="weights", h=1e-3)


def test_bidirectional_lstm_one_output_gradient():
    """Only the backward output's cotangent: the forward direction's weights get zeros."""
    mb, shapes = _models._bidi_lstm_model("plain", batch=1, steps=3, time_major=True, merge=False, n_in=3,
                                          n_cell=4)
    xs = _feeds(shapes, 47)
    s = onert_py.infer.session(mb.to_bytes())
    outs, grads = s.gradients(xs, output_gradients=[np.zeros((3, 1, 4), np.float32),
                                                    np.ones((3, 1, 4), np.float32)], wrt="weights")
    assert all(not np.any(v) for k, v in grads.items() if k.startswith("fw_"))
    assert any(np.any(v) for k, v in grads.items() if k.startswith("bw_"))
    np.testing.assert_allclose(outs[0], s.infer(xs)[0], rtol=1e-5, atol=1e-6)


def test_bidirectional_lstm_without_activation_is_refused():
    mb, shapes = _models._bidi_lstm_model("plain", batch=1, steps=2, time_major=True, merge=True, act=0)
    s = onert_py.infer.session(mb.to_bytes())
    with pytest.raises(GradientError, match=r"BIDIRECTIONAL_SEQUENCE_LSTM\): an LSTM without a cell activation"):
        s.gradients(_feeds(shapes, 48))


# ------------------------------------------------------------------------------- bidirectional RNN

@pytest.mark.parametrize("act", [1, 4])
@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("merge", [False, True])
def test_bidirectional_rnn_gradients(act, time_major, merge):
    mb, shapes = _models._bidi_rnn_model(batch=1, steps=4, time_major=time_major, merge=merge, act=act)
    xs = _feeds(shapes, 50)
    h = 1e-2 if act == 4 else 1e-3    # RELU: a smaller step stays off its kink
    check_gradients(mb, xs, h=h)
    check_gradients(mb, xs, wrt="weights", h=h)


@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("merge", [False, True])
def test_bidirectional_rnn_batch_gradients(time_major, merge):
    mb, shapes = _models._bidi_rnn_model(batch=3, steps=3, time_major=time_major, merge=merge)
    xs = _feeds(shapes, 51)
    check_gradients(mb, xs)
    check_gradients(mb, xs, wrt="weights")


@pytest.mark.parametrize("aux", ["cross", "bw_input"])
@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("merge", [False, True])
def test_bidirectional_rnn_aux_gradients(aux, time_major, merge):
    mb, shapes = _models._bidi_rnn_model(batch=2, steps=3, time_major=time_major, merge=merge, aux=aux)
    xs = _feeds(shapes, 52)
    grads = check_gradients(mb, xs)
    assert len(grads) == 2
    check_gradients(mb, xs, wrt="weights")


# -------------------------------------------------------------------------------------------- SVDF

def _svdf_state_input_model(*, batch, n_in=3, units=4, rank=2, memory=5, bias=True, act=0, seed=0):
    """SVDF with its state a graph input (not a variable): the gradient reaches the old state too."""
    from onert_py.schema.writer import ModelBuilder
    g = rng(seed)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    filters = units * rank
    def w(*s):
        return (0.5 * g.normal(size=s)).astype(np.float32)
    x = sg.tensor("x", [batch, n_in], np.float32)
    state = sg.tensor("state", [batch, filters * memory], np.float32)
    ins = [x, sg.const("wf", w(filters, n_in)), sg.const("wt", w(filters, memory)),
           sg.const("b", w(units)) if bias else -1, state]
    out = sg.tensor("out", [batch, units], np.float32)
    sg.op("SVDF", ins, [out], rank=rank, fused_activation_function=act)
    sg.inputs, sg.outputs = [x, state], [out]
    mb.signature("serving_default", sg)
    return mb, [[batch, n_in], [batch, filters * memory]]


@pytest.mark.parametrize("rank", [1, 2])
@pytest.mark.parametrize("bias,act", [(True, 0), (False, 1), (True, 3)])
def test_svdf_gradients(rank, bias, act):
    mb, x_shape = _models._svdf_model(batch=2, rank=rank, bias=bias, act=act)
    xs = _feeds([x_shape], 60)
    h = 1e-3 if act == 1 else 1e-2
    check_gradients(mb, xs, h=h)
    grads = check_gradients(mb, xs, wrt="weights", h=h)
    assert len(grads) == (3 if bias else 2)


@pytest.mark.parametrize("rank,memory", [(1, 1), (2, 4), (3, 2)])
def test_svdf_state_gradients(rank, memory):
    mb, shapes = _svdf_state_input_model(batch=2, rank=rank, memory=memory, units=2, act=4)
    xs = _feeds(shapes, 61)
    grads = check_gradients(mb, xs)
    assert len(grads) == 2 and (memory == 1 or np.any(grads["state"]))
    check_gradients(mb, xs, wrt="weights")
