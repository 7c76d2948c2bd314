"""Conformance corpus: models made by the real TensorFlow Lite converter, with stored references.

Each ``corpus/<name>.tflite`` has a ``corpus/<name>.npz`` holding its inputs (``in_k``, in the order
of the main subgraph's inputs), the reference outputs (``out_k``) and their ``source`` ("litert" or,
where LiteRT cannot run the model, "tensorflow"). ``corpus/MANIFEST.json`` describes every model and
may widen the tolerances of one (with a reason). Regenerate with ``tools/conformance/generate.py``
(needs TensorFlow, the ``dev`` extra); running these tests needs neither TensorFlow nor LiteRT.

Every model runs as the converter wrote it and as a Circle re-encoding made by onert_py's own writer,
and every session is invoked twice (state must not leak between runs); models with IF/WHILE also
run with ``controlflow_copy="all"``. A model for which some op
has no kernel yet is an expected failure (strict: it must be un-marked automatically once all its
kernels exist, which happens because the mark is computed from ``unsupported_ops``).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import onert_py
from onert_py.compiler import unsupported_ops
from onert_py.schema.writer import serialize

CORPUS = Path(__file__).parent / "corpus"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())
ENTRIES = {e["name"]: e for e in MANIFEST["models"]}
MODELS = sorted(p.stem for p in CORPUS.glob("*.tflite"))
DEFAULT_RTOL = MANIFEST.get("default_rtol", 1e-5)
DEFAULT_ATOL = MANIFEST.get("default_atol", 1e-5)


def _missing_kernels(name: str) -> list[str]:
    """Names of ops in the model without a kernel (an empty list when the model cannot even be
    loaded: that is a loader bug and must fail, not be excused)."""
    try:
        model = onert_py.load_model(str(CORPUS / f"{name}.tflite"))
    except Exception:
        return []
    return sorted({op for _, _, op in unsupported_ops(model)})


# Known differences from LiteRT in code this suite does not own (kernels, writer): strict xfails, so
# the mark must be removed when the owner fixes it. Key: (model, format); format None = every format.
KNOWN_MISMATCHES: dict[tuple[str, str | None], str] = {}


def known_mismatch(name: str, fmt: str) -> str | None:
    return KNOWN_MISMATCHES.get((name, fmt.split("-")[0])) or KNOWN_MISMATCHES.get((name, None))


def _params():
    for name in MODELS:
        missing = _missing_kernels(name)
        marks = [pytest.mark.xfail(strict=True, reason=f"missing kernel: {', '.join(missing)}")] if missing else []
        for fmt in ("tflite", "circle") + (("tflite-copyall",) if _has_control_flow(name) else ()):
            known = None if missing else known_mismatch(name, fmt)
            fmt_marks = marks + ([pytest.mark.xfail(strict=True, reason=known)] if known else [])
            yield pytest.param(name, fmt, id=f"{name}-{fmt}", marks=fmt_marks)


def _has_control_flow(name: str) -> bool:
    return any(op in ("IF", "WHILE") for ops in ENTRIES.get(name, {}).get("ops", []) for op in ops)


def _load(name: str):
    with np.load(CORPUS / f"{name}.npz", allow_pickle=False) as z:
        ins = [z[f"in_{k}"] for k in range(sum(f.startswith("in_") for f in z.files))]
        outs = [z[f"out_{k}"] for k in range(sum(f.startswith("out_") for f in z.files))]
        source = str(z["source"])
    return ins, outs, source


def _model_bytes(name: str, fmt: str) -> bytes:
    data = (CORPUS / f"{name}.tflite").read_bytes()
    if fmt == "circle":
        data = serialize(onert_py.load_model(data), "circle")
        assert data[4:8] == b"CIR0"
    return data


def _compare(got, expected, rtol, atol, what):
    assert len(got) == len(expected), f"{what}: {len(got)} outputs, expected {len(expected)}"
    for k, (a, e) in enumerate(zip(got, expected)):
        a = np.asarray(a)
        assert a.shape == e.shape, f"{what}: output {k} has shape {a.shape}, expected {e.shape}"
        assert a.dtype == e.dtype, f"{what}: output {k} has dtype {a.dtype}, expected {e.dtype}"
        if e.dtype.kind in "fc":
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=f"{what}: output {k}")
        else:
            np.testing.assert_array_equal(a, e, err_msg=f"{what}: output {k}")


def test_manifest_lists_every_model():
    assert MODELS, "the corpus is empty"
    assert sorted(ENTRIES) == MODELS
    for name in MODELS:
        _, _, source = _load(name)
        assert source == ENTRIES[name]["source"] in ("litert", "tensorflow")
        assert ENTRIES[name]["description"]


@pytest.mark.parametrize("name, fmt", list(_params()))
def test_corpus_model(name, fmt):
    entry = ENTRIES[name]
    rtol, atol = entry.get("rtol", DEFAULT_RTOL), entry.get("atol", DEFAULT_ATOL)
    inputs, expected, _ = _load(name)
    before = [x.copy() for x in inputs]
    # "tflite-copyall": the control-flow ops copy every subgraph input/output (the seed behaviour)
    copy = "all" if fmt.endswith("-copyall") else "reference"
    sess = onert_py.infer.session(_model_bytes(name, fmt.split("-")[0]), controlflow_copy=copy)
    for run in (1, 2):
        got = sess.infer([x.copy() for x in inputs] if run == 2 else inputs)
        _compare(got, expected, rtol, atol, f"{name} ({fmt}) run {run}")
    for x, b in zip(inputs, before):
        np.testing.assert_array_equal(x, b, err_msg="an input was modified")
