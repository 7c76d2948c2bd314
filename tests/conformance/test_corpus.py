"""Conformance corpus: models made by the real TensorFlow Lite converter, with stored references.

Each ``corpus/<name>.tflite`` has a ``corpus/<name>.npz`` holding its inputs (``in_k``, in the order
of the main subgraph's inputs), the reference outputs (``out_k``) and their ``source`` ("litert" or,
where LiteRT cannot run the model, "tensorflow"; "litert-builtin" for the post-training-quantized
models: LiteRT's builtin kernels without the XNNPACK delegate, which integer outputs must equal, and
dynamic-range models' float outputs within the manifest's tolerances).
``corpus/MANIFEST.json`` describes every model and may widen the tolerances of one (with a reason). Regenerate with ``tools/conformance/generate.py``
(needs TensorFlow, the ``dev`` extra); running these tests needs neither TensorFlow nor LiteRT.

Every model runs as the converter wrote it and as a Circle re-encoding made by onert_py's own writer,
and every session is invoked on each stored input set and then on the first again (state must not
leak between runs); models with IF/WHILE also run with ``controlflow_copy="all"``. Models stored with
several input sets (dynamic batch or sequence length: ``run<n>_in_k``/``run<n>_out_k``) also run
through the LiteRT-compatible ``Interpreter`` with ``resize_tensor_input`` between the sets. A model for which some op
has no kernel yet is an expected failure (strict: it must be un-marked automatically once all its
kernels exist, which happens because the mark is computed from ``unsupported_ops``).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import onert_py
from helpers import corpus_model_bytes, corpus_runs
from onert_py.compiler import unsupported_ops
from onert_py.compiler.specialize import relaxed_model

CORPUS = Path(__file__).parent / "corpus"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())
ENTRIES = {e["name"]: e for e in MANIFEST["models"]}
MODELS = sorted(p.stem for p in CORPUS.glob("*.tflite"))
DEFAULT_RTOL = MANIFEST.get("default_rtol", 1e-5)
DEFAULT_ATOL = MANIFEST.get("default_atol", 1e-5)
# Post-training quantization variants (tools/conformance/generate.py QUANTIZED_VARIANTS), and those whose
# reference is LiteRT's builtin kernels (BUILTIN_REFERENCE_VARIANTS: also dynamic range, whose hybrid
# float outputs are compared with the manifest's tolerances, atol scaled to the output magnitude).
QUANTIZED_VARIANTS = ("int8", "int8_uint8io", "int16x8")
BUILTIN_REFERENCE_VARIANTS = QUANTIZED_VARIANTS + ("dynamic_range",)


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
KNOWN_MISMATCHES: dict[tuple[str, str | None], str] = {
}


def known_mismatch(name: str, fmt: str) -> str | None:
    return KNOWN_MISMATCHES.get((name, fmt.split("-")[0])) or KNOWN_MISMATCHES.get((name, None))


def _params():
    for name in MODELS:
        missing = _missing_kernels(name)
        marks = [pytest.mark.xfail(strict=True, reason=f"missing kernel: {', '.join(missing)}")] if missing else []
        # "tflite-cpu": the numpy cpu backend alone; the others run on the default backends ("jit;cpu"
        # when numba is installed, as in CI): the corpus is checked under both compute backends
        for fmt in ("tflite", "tflite-cpu", "circle") + (("tflite-copyall",) if _has_control_flow(name) else ()):
            known = None if missing else known_mismatch(name, fmt)
            fmt_marks = marks + ([pytest.mark.xfail(strict=True, reason=known)] if known else [])
            yield pytest.param(name, fmt, id=f"{name}-{fmt}", marks=fmt_marks)


def _has_variable_tensors(name: str) -> bool:
    model = onert_py.load_model(str(CORPUS / f"{name}.tflite"))
    return any(t.is_variable for sg in model.subgraphs for t in sg.tensors)


def _has_control_flow(name: str) -> bool:
    return any(op in ("IF", "WHILE") for ops in ENTRIES.get(name, {}).get("ops", []) for op in ops)


def _load(name: str):
    """(inputs, outputs, source) of the stored run."""
    runs, source = _load_runs(name)
    return runs[0][0], runs[0][1], source


def _load_runs(name: str):
    """([(inputs, outputs) per stored input set], source) (helpers.corpus_runs)."""
    return corpus_runs(CORPUS, name)


def _model_bytes(name: str, fmt: str) -> bytes:
    return corpus_model_bytes(CORPUS, name, fmt)


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
        runs, source = _load_runs(name)
        entry = ENTRIES[name]
        assert source == entry["source"] in ("litert", "tensorflow", "litert-builtin")
        # quantized models' references are LiteRT's builtin kernels without a delegate (bit-exact target
        # for the integer ones)
        assert (source == "litert-builtin") == (entry.get("converter", "") in BUILTIN_REFERENCE_VARIANTS), name
        assert entry["description"]
        # the manifest describes every stored input set
        extra = entry.get("extra_runs", [])
        assert len(runs) == 1 + len(extra), name
        assert [list(x.shape) for x in runs[0][0]] == [i["shape"] for i in entry["inputs"]], name
        for (ins, outs), e in zip(runs[1:], extra):
            assert [list(x.shape) for x in ins] == e["inputs"], name
            assert [list(y.shape) for y in outs] == e["outputs"], name
        if (entry.get("rtol", DEFAULT_RTOL), entry.get("atol", DEFAULT_ATOL)) != (DEFAULT_RTOL, DEFAULT_ATOL):
            assert entry.get("tolerance_reason"), f"{name}: widened tolerance without a reason"


@pytest.mark.parametrize("name, fmt", list(_params()))
def test_corpus_model(name, fmt):
    entry = ENTRIES[name]
    rtol, atol = entry.get("rtol", DEFAULT_RTOL), entry.get("atol", DEFAULT_ATOL)
    runs, _ = _load_runs(name)
    before = [[x.copy() for x in ins] for ins, _ in runs]
    # "tflite-copyall": the control-flow ops copy every subgraph input/output (the seed behaviour)
    copy = "all" if fmt.endswith("-copyall") else "reference"
    backends = "cpu" if fmt.endswith("-cpu") else None
    data = _model_bytes(name, fmt.split("-")[0])
    sess = onert_py.infer.session(data, backends, controlflow_copy=copy)
    # every stored input set in turn, then the first again (on copies): state and shapes from one
    # run must not leak into the next, including a change of batch size / sequence length and back
    for n, r in enumerate(list(range(len(runs))) + [0]):
        inputs, expected = runs[r]
        again = n == len(runs)
        if again and _has_variable_tensors(name):
            # variable tensors (a fused LSTM's state) keep their values across invokes, in LiteRT too:
            # the stored outputs are those of a first invoke
            sess = onert_py.infer.session(data, backends, controlflow_copy=copy)
        got = sess.infer([x.copy() for x in inputs] if again else inputs)
        _compare(got, expected, rtol, atol, f"{name} ({fmt}) input set {r}" + (" again" if again else ""))
    for (ins, _), bs in zip(runs, before):
        for x, b in zip(ins, bs):
            np.testing.assert_array_equal(x, b, err_msg="an input was modified")


MULTI_RUN = [name for name in MODELS if ENTRIES.get(name, {}).get("extra_runs")]


@pytest.mark.parametrize("name", MULTI_RUN)
def test_corpus_model_resized_interpreter(name):
    """Models stored with several input shapes, through the LiteRT-compatible Interpreter: resize
    every input to the stored shape, allocate, set, invoke and read, once per input set, on one
    Interpreter (as a LiteRT user switching batch size or sequence length would)."""
    entry = ENTRIES[name]
    rtol, atol = entry.get("rtol", DEFAULT_RTOL), entry.get("atol", DEFAULT_ATOL)
    runs, _ = _load_runs(name)
    it = onert_py.Interpreter(model_path=str(CORPUS / f"{name}.tflite"))
    for r, (inputs, expected) in enumerate(runs + runs[:1]):
        details = it.get_input_details()
        for d, x in zip(details, inputs):
            # dynamic dims are -1 in the shape signature; the stored shape must fit it
            sig = d["shape_signature"]
            assert len(sig) == x.ndim and all(s in (-1, n) for s, n in zip(sig, x.shape)), (sig, x.shape)
            it.resize_tensor_input(d["index"], list(x.shape), strict=True)
        it.allocate_tensors()
        for d, x in zip(it.get_input_details(), inputs):
            it.set_tensor(d["index"], x)
        it.invoke()
        got = [it.get_tensor(d["index"]) for d in it.get_output_details()]
        _compare(got, expected, rtol, atol, f"{name} (Interpreter) input set {r % len(runs)}")


@pytest.mark.parametrize("name", [n for n in MODELS if not _missing_kernels(n)])
def test_corpus_model_with_every_shape_dynamic(name):
    """Every model with all its activations (inputs too) declared dynamic, as a converter that knows no
    shape would write it: the session compiles it for the shapes it runs with (compiler/specialize.py),
    trusting shape inference where the declared shapes said nothing. The stored references must hold
    for every input set."""
    entry = ENTRIES[name]
    rtol, atol = entry.get("rtol", DEFAULT_RTOL), entry.get("atol", DEFAULT_ATOL)
    runs, _ = _load_runs(name)
    model = relaxed_model(onert_py.load_model(str(CORPUS / f"{name}.tflite")))
    sess = onert_py.infer.session(model)
    for r, (inputs, expected) in enumerate(runs):
        if r and _has_variable_tensors(name):
            break   # their state carries over from the first set (see test_corpus_model)
        _compare(sess.infer(inputs), expected, rtol, atol, f"{name} (every shape dynamic) input set {r}")
