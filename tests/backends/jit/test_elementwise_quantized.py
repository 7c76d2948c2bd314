"""The jit backend's 8-bit ADD, SUB and MUL (backends/jit/elementwise.py: the cpu kernel's table of every
pair of values, gathered in one compiled loop): taken for inputs of one static shape, bit for bit
LiteRT's builtin kernels (every pair of values; lengths with and without a reference tail after the
vector blocks), and the shapes left to the cpu kernel."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

import onert_py  # noqa: E402
from helpers import fit_quantization, rng, run_litert_builtin, single_op_model  # noqa: E402

PARAMS = {"ADD": ((0.02, -128), (0.07, 127), (0.1, 5)), "SUB": ((0.03, 7), (0.05, -100), (0.06, 3)),
          "MUL": ((0.02, -5), (0.03, 9), (0.0015, -100))}


def _model(op, dt, s1, s2, act=0):
    q1, q2, qo = (fit_quantization(q, dt) for q in PARAMS[op])
    out = list(np.broadcast_shapes(tuple(s1), tuple(s2)))
    return single_op_model(op, [("a", list(s1), dt, q1), ("b", list(s2), dt, q2)], [("y", out, dt, qo)],
                           fused_activation_function=act)


def _run(mb, inputs, backends):
    sess = onert_py.infer.session(mb.to_bytes("tflite"), backends=backends)
    return sess.executors[0].backend_names, sess.infer(inputs)[0]


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("dt", [np.int8, np.uint8])
def test_every_pair_of_values(op, dt):
    levels = np.arange(256, dtype=np.uint8).view(dt)
    xs = [np.repeat(levels, 256).reshape(256, 256), np.tile(levels, 256).reshape(256, 256)]
    mb = _model(op, dt, [256, 256], [256, 256])
    backends, got = _run(mb, xs, "jit;cpu")
    assert backends == ["jit"]
    np.testing.assert_array_equal(got, run_litert_builtin(mb, xs)[0])


@pytest.mark.parametrize("op", ["ADD", "MUL"])
@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("shapes", [([4099], [4099]), ([1, 3, 5, 7], [3, 5, 7]), ([7], [7]), ([16], [16])],
                         ids=str)
@pytest.mark.parametrize("act", [0, 1, 3])
def test_blocks_and_tails(op, dt, shapes, act):
    """The vector body on whole blocks of 16 (int8) / 8 (uint8), LiteRT's reference formula on the rest:
    lengths below, at and past a block, and shapes that differ by a leading 1."""
    mb = _model(op, dt, *shapes, act=act)
    info = np.iinfo(dt)
    xs = [rng(k).integers(int(info.min), int(info.max), s, endpoint=True).astype(dt)
          for k, s in enumerate(shapes)]
    backends, got = _run(mb, xs, "jit;cpu")
    assert backends == ["jit"]
    np.testing.assert_array_equal(got, run_litert_builtin(mb, xs)[0])


def test_broadcasts_and_int16_stay_on_cpu():
    assert _run(_model("ADD", np.int8, [4, 1, 8], [1, 3, 8]),
                [np.zeros((4, 1, 8), np.int8), np.ones((1, 3, 8), np.int8)], "jit;cpu")[0] == ["cpu"]
    q = (0.5, 0)
    mb = single_op_model("ADD", [("a", [8], np.int16, q), ("b", [8], np.int16, q)], [("y", [8], np.int16, q)])
    assert _run(mb, [np.arange(8, dtype=np.int16)] * 2, "jit;cpu")[0] == ["cpu"]


def test_resized_inputs():
    """Inputs resized (4 rows -> 5), as LiteRT's Interpreter allows: still LiteRT's result."""
    mb = _model("ADD", np.int8, [4, 4], [4, 4])
    it = onert_py.Interpreter(model_content=mb.to_bytes("tflite"))
    it.resize_tensor_input(0, [5, 4])
    it.resize_tensor_input(1, [5, 4])
    it.allocate_tensors()
    xs = [rng(3).integers(-128, 128, (5, 4)).astype(np.int8), rng(4).integers(-128, 128, (5, 4)).astype(np.int8)]
    for d, x in zip(it.get_input_details(), xs):
        it.set_tensor(d["index"], x)
    it.invoke()
    got = it.get_tensor(it.get_output_details()[0]["index"])
    mb_static = _model("ADD", np.int8, [5, 4], [5, 4])
    np.testing.assert_array_equal(got, run_litert_builtin(mb_static, xs)[0])
