"""The dataflow executor gives the linear executor's outputs: every control-flow test of
tests/controlflow (LiteRT's and onert's peer scenarios) run with ONERT_PY_EXECUTOR=dataflow, and the
conformance corpus's control-flow models compared bit for bit under both executors, sequential and with
a thread pool."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import onert_py
from onert_py.backends.registry import LOWERING_RULES, load_builtin_kernels

TESTS = Path(__file__).resolve().parent.parent
CORPUS = TESTS / "conformance" / "corpus"

# What the dataflow executor does not do on purpose: the seed copy policy (controlflow_copy="all"
# copies values the IF/WHILE kernels hand to subgraphs; lowered control flow hands nothing over, so it
# copies and counts nothing).
NOT_APPLICABLE = "not copy_all and not if_branch_inputs_copy and not copy_modes_agree"


def test_controlflow_suite_under_dataflow():
    env = dict(os.environ, ONERT_PY_EXECUTOR="dataflow")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                        str(TESTS / "controlflow"), "-k", NOT_APPLICABLE],
                       cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def _control_flow_models() -> list[str]:
    load_builtin_kernels()
    names = []
    for p in sorted(CORPUS.glob("*.tflite")):
        try:
            m = onert_py.load_model(str(p))
        except Exception:  # noqa: BLE001 - the corpus tests report those
            continue
        if any(op.opcode in LOWERING_RULES for sg in m.subgraphs for op in sg.operations):
            names.append(p.stem)
    return names


def _inputs(name: str) -> list[np.ndarray]:
    with np.load(CORPUS / f"{name}.npz", allow_pickle=False) as z:
        return [z[f"in_{k}"] for k in range(sum(f.startswith("in_") for f in z.files))]


@pytest.mark.parametrize("name", _control_flow_models())
def test_corpus_control_flow_model_same_under_both_executors(name):
    data = (CORPUS / f"{name}.tflite").read_bytes()
    inputs = _inputs(name)
    linear = onert_py.infer.session(data, executor="linear")
    expected = linear.infer(inputs)
    # a WHILE the linear executor ran as one compiled loop (jit), or a compiled segment (which the
    # dataflow executor, running op by op, does not use), computes a FULLY_CONNECTED / SOFTMAX / TANH
    # its own way (docs/jit.md, Whole-loop compilation, Compiled segments): the last bits may differ
    segments = any(op.segment for ex in linear.executors for op in ex.operations)
    exact = not linear.runtime.compiled_loops and not segments
    for threads in (1, 2):
        sess = onert_py.infer.session(data, executor="dataflow", inter_op_threads=threads)
        for run in range(2):
            got = sess.infer(inputs)
            assert len(got) == len(expected)
            for k, (g, e) in enumerate(zip(got, expected)):
                assert g.dtype == e.dtype and g.shape == e.shape, (name, threads, run, k)
                if exact or g.dtype.kind != "f":
                    np.testing.assert_array_equal(g, e, err_msg=f"{name} threads={threads} run {run} output {k}")
                else:
                    np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6,
                                               err_msg=f"{name} threads={threads} run {run}")
