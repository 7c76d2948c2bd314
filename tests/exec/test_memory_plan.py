"""Memory plan: large intermediates are released after their last reader, so peak memory follows the
largest set of simultaneously live tensors, not the number of ops."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import onert_py
from onert_py.schema.writer import ModelBuilder

N = 1 << 20            # 4 MiB per float32 tensor
MIB = 1 << 20


def chain(length: int, skip: bool = False) -> bytes:
    """x -> t1 = x + 1 -> t2 = t1 + 1 ... -> out. With `skip`, t1 is read again by the last op, so it
    lives across the whole chain."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [N], np.float32)
    one = sg.const("one", np.ones(1, np.float32))
    prev, first = x, None
    for k in range(length):
        t = sg.tensor(f"t{k}", [N], np.float32)
        sg.op("ADD", [prev, one], [t], fused_activation_function=0)
        first = t if first is None else first
        prev = t
    out = sg.tensor("out", [N], np.float32)
    sg.op("ADD", [prev, first if skip else one], [out], fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [out]
    return mb.to_bytes("tflite")


def peak_mib(sess, x) -> tuple[float, np.ndarray]:
    tracemalloc.start()
    try:
        out = sess.infer([x])
        return tracemalloc.get_traced_memory()[1] / MIB, out[0]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("skip", [False, True], ids=["chain", "long_lived_first"])
def test_peak_memory_does_not_grow_with_chain_length(skip):
    x = np.zeros(N, np.float32)
    sess = onert_py.infer.session(chain(12, skip))
    sess.infer([x])
    peak, out = peak_mib(sess, x)
    # t_k = k + 1, so out = t11 + 1 = 13, or t11 + t0 = 12 + 1 = 13
    np.testing.assert_array_equal(out, np.full(N, 13, np.float32))
    # 13 tensors of 4 MiB are produced; at most the op's input, its output and (with skip) t0 are live
    # at once, plus the returned output. Without the plan this is ~52 MiB.
    # (measured: 8 MiB for the chain, 12 MiB with the long-lived t0)
    assert peak < 4 * 4 + 2, f"peak {peak:.1f} MiB"


def test_preserve_all_tensors_keeps_every_intermediate():
    x = np.zeros(N, np.float32)
    with pytest.warns(UserWarning, match="preserve_all_tensors"):
        it = onert_py.Interpreter(model_content=chain(3), experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    values = {d["name"]: it.get_tensor(d["index"]) for d in it.get_tensor_details()}
    for k in range(3):
        np.testing.assert_array_equal(values[f"t{k}"], np.full(N, k + 1, np.float32))
