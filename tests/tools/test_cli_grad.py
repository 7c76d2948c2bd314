"""`onert-py grad`: the gradient model written as .circle/.tflite runs and gives session.gradients'."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import onert_py
from onert_py.tools.cli import main

CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "corpus"


@pytest.mark.parametrize("name,wrt,ext", [("while_nested", [], ".circle"), ("cond_in_while", [], ".tflite"),
                                          ("mlp", ["weights"], ".circle"), ("convnet", ["weights"], ".tflite"),
                                          ("keras_lstm", ["weights"], ".circle")])
def test_grad_writes_a_model_computing_the_gradients(tmp_path, capsys, name, wrt, ext):
    model = CORPUS / f"{name}.tflite"
    out = tmp_path / f"grad{ext}"
    args = ["grad", str(model), "-o", str(out)] + [a for w in wrt for a in ("--wrt", w)]
    assert main(args) == 0
    assert "wrote" in capsys.readouterr().out
    entry = next(e for e in json.loads((CORPUS / "MANIFEST.json").read_text())["models"] if e["name"] == name)
    z = np.load(CORPUS / f"{name}.npz")
    xs = [z[f"in_{k}"] for k in range(len(entry["inputs"]))]
    # run as gradients() runs its backward model (no compiled segments), so the bits are the same
    s = onert_py.infer.session(str(out), segments=False)
    outputs, grads = onert_py.infer.session(str(model)).gradients(xs, wrt=wrt or None)
    cotangents = [np.ones(np.shape(y), y.dtype) for y in outputs if y.dtype.kind == "f"]
    assert len(s.get_inputs_tensorinfo()) == len(xs) + len(cotangents)
    written = s.infer(xs + cotangents)
    assert len(written) == len(outputs) + len(grads)
    for a, b in zip(written, list(outputs) + list(grads.values())):
        np.testing.assert_array_equal(a, b)


def test_grad_errors_are_one_line(tmp_path, capsys):
    assert main(["grad", str(CORPUS / "mlp.tflite"), "-o", str(tmp_path / "g.circle"), "--wrt", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no tensor named 'nope'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "g.circle").exists()


def test_grad_refuses_a_subgraph_that_does_not_exist(tmp_path, capsys):
    assert main(["grad", str(CORPUS / "while_nested.tflite"), "-o", str(tmp_path / "g.circle"), "--subgraph", "9"]) == 2
    assert "--subgraph 9" in capsys.readouterr().err
    assert not (tmp_path / "g.circle").exists()
