"""`Interpreter(executor="dataflow")`: invoke() and signature runners run the entry subgraph's dataflow
executor and give LiteRT's outputs (and the default interpreter's, bit for bit); the options are checked
as infer.session checks them."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dataflow_models import chain_if_model, counting_loop_model, nested_loop_model, nested_reference
from helpers import litert_interpreter
from onert_py import Interpreter
from onert_py.exec.dataflow import DataflowExecutor

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "while_if.tflite"
I32, F32 = np.int32, np.float32


def _invoke(it, inputs: list[np.ndarray], resize: bool = False, dataflow: bool = False) -> list[np.ndarray]:
    """set_tensor / invoke / get_tensor; with `dataflow`, check that the interpreter's dataflow executor
    is the one that computed (its trace records the ops it ran)."""
    details = it.get_input_details()
    if resize:
        for d, x in zip(details, inputs):
            if tuple(d["shape"]) != np.shape(x):
                it.resize_tensor_input(d["index"], list(np.shape(x)))
    it.allocate_tensors()
    for d, x in zip(details, inputs):
        it.set_tensor(d["index"], x)
    if dataflow:
        ex = it._executor(0)
        assert isinstance(ex, DataflowExecutor)
        ex.trace = []
    it.invoke()
    if dataflow:
        assert ex.trace, "the dataflow executor computed nothing"
        ex.trace = None
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


CASES = {
    "while_if": (lambda: EXAMPLE.read_bytes(),
                 [[np.array([1, 2, 3, 4], F32), np.array(n, I32)] for n in (0, 1, 3, 6)]),
    "counting_loop": (lambda: counting_loop_model().to_bytes("tflite"),
                      [[np.array([i], I32), np.array([n], I32), np.array([0], I32)] for i, n in ((0, 0), (0, 5), (2, 7))]),
    "nested_loop": (lambda: nested_loop_model().to_bytes("tflite"),
                    [[np.array([i], I32), np.array([n], I32), np.array([1], I32)] for i, n in ((0, 0), (0, 4), (2, 6))]),
    "chain_if": (lambda: chain_if_model().to_bytes("tflite"),
                 [[np.array([flag]), np.array([1, -2, 0.5, 3], F32)] for flag in (True, False)]),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", sorted(CASES))
def test_dataflow_interpreter_gives_litert_and_default_outputs(name, threads):
    build, feeds = CASES[name]
    data = build()
    df = Interpreter(model_content=data, executor="dataflow", inter_op_threads=threads)
    default = Interpreter(model_content=data)
    litert = litert_interpreter(data)
    for inputs in feeds:
        want = _invoke(litert, inputs)
        got = _invoke(df, inputs, dataflow=True)
        _same(got, want)
        _same(_invoke(default, inputs), got)
        if name == "nested_loop":   # and the formula the model was built from
            assert (int(got[0][0]), int(got[1][0])) == nested_reference(int(inputs[0][0]), int(inputs[1][0]), 1)
    assert not default._dataflow_executors


def test_signature_runner_runs_the_dataflow_executor():
    data = EXAMPLE.read_bytes()
    it = Interpreter(model_content=data, executor="dataflow", inter_op_threads=1)
    runner = it.get_signature_runner("serving_default")
    want = litert_interpreter(data).get_signature_runner("serving_default")
    k = it._signatures["serving_default"].subgraph_index
    for n in (0, 2, 5):
        kwargs = {"x": np.array([0.5, -1, 2, 3], F32), "n": np.array(n, I32)}
        if n:   # built by the first call; from then on, record what it computes
            it._dataflow_executors[k].trace = []
        got = runner(**kwargs)
        assert isinstance(it._dataflow_executors.get(k), DataflowExecutor)
        assert n == 0 or it._dataflow_executors[k].trace
        expected = want(**kwargs)
        assert sorted(got) == sorted(expected)
        for key in expected:
            _same([got[key]], [expected[key]])


def test_resized_input_recompiles_the_dataflow_executor():
    """A resize past the shape signature recompiles the executors (relaxed shapes); the dataflow executor
    is rebuilt over the new ones, and still gives LiteRT's outputs."""
    data = chain_if_model().to_bytes("tflite")
    it = Interpreter(model_content=data, executor="dataflow", inter_op_threads=1)
    first = _invoke(it, [np.array([True]), np.array([1, 2, 3, 4], F32)], dataflow=True)
    old = it._dataflow_executors[0]
    inputs = [np.array([False]), np.arange(7, dtype=F32)]
    litert = litert_interpreter(data)
    _same(_invoke(it, inputs, resize=True, dataflow=True), _invoke(litert, inputs, resize=True))
    assert it._dataflow_executors[0] is not old and it._relaxed
    _same(first, [np.array([1, 3, 5, 7], F32), np.array([2, 5, 8, 11], F32)])   # y = (x + 1) * 2 - 3; y + x


def test_environment_sets_the_default_executor(monkeypatch):
    monkeypatch.setenv("ONERT_PY_EXECUTOR", "dataflow")
    it = Interpreter(model_path=str(EXAMPLE), inter_op_threads=1)
    _invoke(it, [np.array([1, 2, 3, 4], F32), np.array(3, I32)])
    assert isinstance(it._dataflow_executors.get(0), DataflowExecutor)
    it = Interpreter(model_path=str(EXAMPLE), executor="linear")   # the argument wins
    _invoke(it, [np.array([1, 2, 3, 4], F32), np.array(3, I32)])
    assert not it._dataflow_executors


@pytest.mark.parametrize("options, message", [
    ({"executor": "graph"}, "executor must be 'linear' or 'dataflow'"),
    ({"executor": "dataflow", "parallel_iterations": 0}, "parallel_iterations must be an int >= 1"),
    ({"executor": "dataflow", "parallel_iterations": True}, "parallel_iterations must be an int >= 1"),
    ({"executor": "dataflow", "inter_op_threads": 0}, "inter_op_threads must be an int >= 1"),
    ({"executor": "dataflow", "inter_op_threads": 1.5}, "inter_op_threads must be an int >= 1"),
    ({"parallel_iterations": -1}, "parallel_iterations must be an int >= 1"),   # checked under linear too
    ({"executor": "dataflow", "experimental_preserve_all_tensors": True}, "executor='linear'"),
])
def test_bad_options_raise_value_error(options, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        Interpreter(model_path=str(EXAMPLE), **options)


def test_bad_environment_value_raises_value_error(monkeypatch):
    monkeypatch.setenv("ONERT_PY_EXECUTOR", "graph")
    with pytest.raises(ValueError, match="executor must be 'linear' or 'dataflow', not 'graph'"):
        Interpreter(model_path=str(EXAMPLE))
