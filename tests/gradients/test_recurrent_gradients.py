"""Gradients of the fused recurrent ops (UNIDIRECTIONAL_SEQUENCE_LSTM / _RNN), differentiated through
their step-by-step decomposition (backends/cpu/recurrent.py), against finite differences: inputs and
weights, every LSTM variant but layer norm, both time layouts, clips; and the converter's tf_keras LSTM."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import importlib.util

import onert_py
from helpers import LSTM_CONFIGS, check_gradients, rng
from onert_py.errors import GradientError

TESTS = Path(__file__).resolve().parents[1]
CORPUS = TESTS / "conformance" / "corpus"
# the forward tests' model builders (loaded by path: "backends" is the kernels' package name too)
_spec = importlib.util.spec_from_file_location("recurrent_models", TESTS / "backends" / "cpu" / "test_recurrent.py")
_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_models)
_rnn_model, _uni_lstm_model = _models._rnn_model, _models._uni_lstm_model
_lstm_step_model = _models._lstm_step_model
CONFIGS = sorted(c for c, (cifg, peep, proj, proj_bias, ln) in LSTM_CONFIGS.items() if not ln)


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("time_major", [False, True])
def test_lstm_gradients(cfg, time_major):
    mb, x_shape = _uni_lstm_model(cfg, batch=2, steps=3, time_major=time_major, n_in=3, n_cell=4)
    x = rng(30).normal(size=x_shape).astype(np.float32)
    check_gradients(mb, [x])
    grads = check_gradients(mb, [x], wrt="weights")
    assert len(grads) >= 8


def test_lstm_clips_gradients():
    mb, x_shape = _uni_lstm_model("plain" if "plain" in LSTM_CONFIGS else CONFIGS[0], batch=2, steps=3,
                                  time_major=False, n_in=3, n_cell=4, cell_clip=0.5)
    check_gradients(mb, [rng(31).normal(0, 2, x_shape).astype(np.float32)], wrt="weights")


@pytest.mark.parametrize("act", [1, 4])
@pytest.mark.parametrize("time_major", [False, True])
def test_rnn_gradients(act, time_major):
    mb, x_shape = _rnn_model("UNIDIRECTIONAL_SEQUENCE_RNN", batch=2, steps=4, time_major=time_major, act=act)
    x = rng(32).normal(size=x_shape).astype(np.float32)
    h = 1e-2 if act == 4 else 1e-3    # RELU: a smaller step stays off its kink
    check_gradients(mb, [x], h=h)
    check_gradients(mb, [x], wrt="weights", h=h)


def test_converter_lstm_gradients():
    """tf_keras' LSTM, fused by the converter into UNIDIRECTIONAL_SEQUENCE_LSTM."""
    entry = next(e for e in json.loads((CORPUS / "MANIFEST.json").read_text())["models"] if e["name"] == "lstm")
    z = np.load(CORPUS / "lstm.npz")
    xs = [z[f"in_{k}"] for k in range(len(entry["inputs"]))]
    data = (CORPUS / "lstm.tflite").read_bytes()
    check_gradients(data, xs)
    check_gradients(data, xs, wrt="weights")


def test_lstm_without_cell_activation_is_refused_by_name():
    # LiteRT computes o * g there (its activation buffer keeps the cell gate): not decomposed
    mb, x_shape = _uni_lstm_model(CONFIGS[0], batch=1, steps=2, time_major=False, act=0)
    s = onert_py.infer.session(mb.to_bytes())
    with pytest.raises(GradientError, match=r"operator 0 \(UNIDIRECTIONAL_SEQUENCE_LSTM\): an LSTM without a cell"):
        s.gradients([np.ones(x_shape, np.float32)])
