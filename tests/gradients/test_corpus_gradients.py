"""onert-py's gradients of converter-made control-flow programs against TensorFlow's GradientTape.

``tests/conformance/corpus/gradients/`` holds, for corpus programs (tf.cond with either branch taken,
tf.while_loop with fixed, input-given and data-dependent trip counts, nested loops, conds inside loops
and loops inside conds, TensorArray loops, growing loops, captured weights, Keras SimpleRNN/GRU/LSTM),
TensorFlow's gradients of ``sum_k sum(output_k * cot_k)`` (random cotangents) with respect to the float
inputs and to the weight constants, loop-body weights included. Made by
``tools/conformance/generate_gradients.py`` (TensorFlow, the ``dev`` extra) from the corpus's existing
``.tflite`` files; running these tests needs neither TensorFlow nor LiteRT.

Each program is differentiated as the converter wrote it and as onert-py's Circle re-encoding of it.
A gradient entry lists the onert-py ``wrt`` names whose gradients sum to TensorFlow's (several when the
converter copied one weight into several subgraphs). Tolerance per gradient:
``|onert - tf| <= rtol * |tf| + atol_scaled * max|tf|`` with the manifest's values and reasons (float32
on both sides, summed in different orders).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import onert_py
from helpers import corpus_model_bytes

CORPUS = Path(__file__).parents[1] / "conformance" / "corpus"
GRADIENTS = CORPUS / "gradients"
MANIFEST = json.loads((GRADIENTS / "GRADIENTS.json").read_text())
ENTRIES = {e["program"]: e for e in MANIFEST["programs"]}

def _wrt(entry) -> list[str]:
    return [n for g in entry["gradients"] for n in g["wrt"]]


def test_manifest():
    assert ENTRIES, "no gradient references"
    for name, e in ENTRIES.items():
        assert (CORPUS / f"{name}.tflite").exists(), name
        assert (GRADIENTS / f"{name}.npz").exists(), name
        assert e["tolerance_reason"], name
        assert e["gradients"] and all(g["wrt"] for g in e["gradients"]), name
    for e in MANIFEST["skipped"]:
        assert e["skipped"], e["program"]
        assert not (GRADIENTS / f"{e['program']}.npz").exists()
    # no stray reference files
    assert sorted(p.stem for p in GRADIENTS.glob("*.npz")) == sorted(ENTRIES)


def _model_bytes(name: str, fmt: str) -> bytes:
    return corpus_model_bytes(CORPUS, name, fmt)


@pytest.mark.parametrize("fmt", ["tflite", "circle"])
@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_corpus_gradients(name, fmt):
    entry = ENTRIES[name]
    with np.load(GRADIENTS / f"{name}.npz", allow_pickle=False) as z:
        inputs = [z[f"in_{k}"] for k in range(len(entry["inputs"]))]
        expected = [z[f"grad_{j}"] for j in range(len(entry["gradients"]))]
        cots = {k: z[f"cot_{k}"] for k in entry["cotangents"]}
    with np.load(CORPUS / f"{name}.npz", allow_pickle=False) as z:
        n_out = sum(f.startswith("out_") for f in z.files)
        stored_out = [z[f"out_{k}"] for k in range(n_out)]
    sess = onert_py.infer.session(_model_bytes(name, fmt))
    cotangents = [cots.get(k) for k in range(n_out)]
    outs, grads = sess.gradients(inputs, cotangents, _wrt(entry))
    # the forward pass of the gradient model is the model's
    for k, (a, y) in enumerate(zip(outs, stored_out)):
        if y.dtype.kind == "f":
            np.testing.assert_allclose(a, y, rtol=1e-5, atol=1e-5, err_msg=f"{name} ({fmt}): output {k}")
        else:
            np.testing.assert_array_equal(a, y, err_msg=f"{name} ({fmt}): output {k}")
    rtol, atol_scaled = entry["rtol"], entry["atol_scaled"]
    for g, e in zip(entry["gradients"], expected):
        got = sum(np.asarray(grads[n], np.float64) for n in g["wrt"])
        assert got.shape == e.shape, (g["wrt"], got.shape, e.shape)
        atol = atol_scaled * max(float(np.max(np.abs(e), initial=0.0)), 1e-6)
        np.testing.assert_allclose(got, e, rtol=rtol, atol=atol,
                                   err_msg=f"{name} ({fmt}): d/d{' + '.join(g['wrt'])} ({g['source']})")
