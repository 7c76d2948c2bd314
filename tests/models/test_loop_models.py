"""The converter-made loop models of benchmarks/models/ run and match LiteRT on both backends (the loop
benchmark's subjects: shape-[1] loop values and a RESHAPE of the bound, as the TFLite converter emits
them; bodies with sin, cos, tanh, sigmoid and exp around a matmul)."""
from pathlib import Path

import numpy as np
import pytest

import onert_py
from helpers import litert_interpreter

MODELS = Path(__file__).resolve().parents[2] / "benchmarks" / "models"


@pytest.mark.parametrize("name,shape", [("scalar_loop", (1,)), ("matmul_loop", (512, 64)),
                                        ("tanh_cos_loop", (512, 64)), ("sigmoid_gate_loop", (512, 64)),
                                        ("exp_decay_loop", (512, 64)), ("sin_square_loop", (512, 64))])
@pytest.mark.parametrize("n", [0, 1, 5])
@pytest.mark.parametrize("backends", ["cpu", "jit;cpu"])
def test_loop_model_matches_litert(name, shape, n, backends):
    if backends != "cpu":
        pytest.importorskip("numba")
    data = (MODELS / f"{name}.tflite").read_bytes()
    v = np.random.default_rng(n).normal(size=shape).astype(np.float32)
    (got,) = onert_py.infer.session(data, backends=backends).infer([v, np.array([n], np.int32)])
    it = litert_interpreter(data)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], v if d["dtype"] == np.float32 else np.array([n], np.int32))
    it.invoke()
    want = it.get_tensor(it.get_output_details()[0]["index"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
