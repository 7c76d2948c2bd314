"""The jit PAD / PADV2 (jit/array.py): which pads it takes, and that it writes LiteRT's values (a copy
and the pad value, so bit for bit) at 1 and 2 threads, the converters' channel padding included."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

import onert_py  # noqa: E402
from helpers import rng, run_interpreter, run_litert  # noqa: E402
from onert_py.schema.writer import ModelBuilder  # noqa: E402


def _pad_model(shape, pads, opcode: str = "PAD", value: float | None = None, **options) -> ModelBuilder:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", list(shape), np.float32)
    y = sg.tensor("y", [d + a + b for d, (a, b) in zip(shape, pads)], np.float32)
    ins = [x, sg.const("paddings", np.array(pads, np.int32))]
    if value is not None:
        ins.append(sg.const("value", np.array([value], np.float32)))
    sg.op(opcode, ins, [y], **options)
    sg.inputs, sg.outputs = [x], [y]
    return mb


def _backend(mb: ModelBuilder) -> str:
    return onert_py.infer.session(mb.to_bytes("tflite"), "jit;cpu").executors[0].backend_names[0]


def _input(shape) -> np.ndarray:
    x = rng(2).normal(size=shape).astype(np.float32)
    x.reshape(-1)[:4] = [np.nan, -0.0, np.inf, -np.inf]        # copied as they are
    return x


CASES = {
    "channel_pad": ((1, 64, 64, 24), [[0, 0], [0, 0], [0, 0], [0, 4]], "PAD", None),   # short_range's
    "every_side": ((2, 13, 11, 5), [[1, 2], [3, 0], [0, 1], [2, 1]], "PADV2", 2.5),
    "spatial_only": ((1, 31, 33, 16), [[0, 0], [0, 1], [0, 1], [0, 0]], "PAD", None),  # before a stride 2
    "rank_2": ((40, 50), [[1, 2], [3, 4]], "PADV2", -1.0),
    "rank_3": ((12, 20, 7), [[0, 0], [2, 2], [1, 0]], "PADV2", -0.0),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_pad_gives_litert_bits(case, threads):
    shape, pads, opcode, value = CASES[case]
    mb = _pad_model(shape, pads, opcode, value)
    assert _backend(mb) == "jit"
    x = _input(shape)
    kept = x.copy()
    sess = onert_py.infer.session(mb.to_bytes("tflite"), "jit;cpu", num_threads=threads)
    got = sess.infer([x])[0]
    want = run_litert(mb, [x])[0]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))   # signed zeros, NaN bits
    np.testing.assert_array_equal(x, kept)
    np.testing.assert_array_equal(sess.infer([x])[0], got)       # the planned slot again


def test_pads_left_to_cpu():
    assert _backend(_pad_model((4, 4, 4, 4), [[0, 0], [1, 1], [1, 1], [0, 0]])) == "cpu"      # small
    assert _backend(_pad_model((2, 8, 8, 8, 4), [[0, 0]] * 4 + [[0, 4]])) == "cpu"           # rank 5
    assert _backend(_pad_model((1, 32, 32, 8), [[0, 0], [1, 1], [1, 1], [0, 0]], "MIRROR_PAD", mode=0)) == "cpu"


def test_resized_input_takes_the_cpu_kernel():
    mb = _pad_model((1, 32, 32, 8), [[0, 0], [1, 1], [0, 2], [0, 3]])
    it = onert_py.Interpreter(model_content=mb.to_bytes("tflite"), backends="jit;cpu")
    it.resize_tensor_input(it.get_input_details()[0]["index"], [1, 20, 24, 8])
    x = _input((1, 20, 24, 8))
    got = run_interpreter(it, [x])[0]
    assert got.shape == (1, 22, 26, 11)
    want = np.pad(x, [[0, 0], [1, 1], [0, 2], [0, 3]])
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
