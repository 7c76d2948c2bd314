"""The converter-made loop models of benchmarks/models/ run and match LiteRT on both backends (the loop
benchmark's subjects: shape-[1] loop values and a RESHAPE of the bound, as the TFLite converter emits
them; bodies with sin, cos, tanh, sigmoid, exp, elu and a row's mean around a matmul)."""
from pathlib import Path

import numpy as np
import pytest

import onert_py
from helpers import litert_interpreter, run_litert, run_litert_builtin

MODELS = Path(__file__).resolve().parents[2] / "benchmarks" / "models"


@pytest.mark.parametrize("name,shape", [("scalar_loop", (1,)), ("matmul_loop", (512, 64)),
                                        ("tanh_cos_loop", (512, 64)), ("sigmoid_gate_loop", (512, 64)),
                                        ("exp_decay_loop", (512, 64)), ("sin_square_loop", (512, 64)),
                                        ("elu_residual_loop", (512, 64)), ("row_norm_loop", (512, 64))])
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


# ---------------------------------------------------------------------------------- loop idioms
# benchmarks/models/idioms/: small converter-made loops written the ways people write them. Each runs
# against LiteRT on both backends, and on the jit as one compiled loop (runtime.compiled_loops), with the
# inner loop of nested_loop and the IF in newton_loop's cond compiled inline. lstm_layer / gru_layer:
# Keras's LSTM and GRU as from_keras_model converts them (a WHILE over the steps; the gates SPLIT);
# lstm_sequence / tensor_array_loop write a list per step (TensorListSetItem: SLICE, SLICE, CONCATENATION).

def _idiom_inputs(name: str, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(n)
    shapes = {"maxiter_loop": (1,), "range_loop": (), "two_values_loop": (4,), "shift_loop": (8,),
              "rnn_loop": (1, 64), "sequence_loop": (10, 8), "gather_loop": (10, 8), "select_loop": (8,),
              "tolerance_loop": (8,), "nested_loop": (16,), "newton_loop": (), "lstm_layer": (1, 24, 8),
              "gru_layer": (1, 24, 8), "lstm_sequence": (1, 24, 8), "tensor_array_loop": (8,), "sqrt_loop": (1,),
              "unit_matrix_loop": (1, 1)}
    v = rng.uniform(0.2, 1.5, shapes[name]).astype(np.float32)
    if name == "newton_loop":
        return [np.array(2.0 + 50 * n, np.float32)]
    if name in ("lstm_layer", "gru_layer", "lstm_sequence"):   # Keras layers: a fixed step count; n seeds the steps
        return [rng.normal(size=shapes[name]).astype(np.float32)]
    if name == "tensor_array_loop":   # a TensorArray of 6 steps: n up to 6
        n = min(n, 6)
    return [v] if name == "tolerance_loop" else [v, np.array(n, np.int32)]


IDIOMS = ("maxiter_loop", "range_loop", "two_values_loop", "shift_loop", "rnn_loop", "sequence_loop",
          "gather_loop", "select_loop", "tolerance_loop", "nested_loop", "newton_loop", "lstm_layer", "gru_layer",
          "lstm_sequence", "tensor_array_loop", "sqrt_loop", "unit_matrix_loop")
# Not compiled: the converter declares tensor_array_loop's list [-1, 8] (its SetItem's CONCATENATION
# too), so the loop values have run-time shapes (lstm_sequence's list is declared [24, 1, 16]).
ON_EXECUTORS = {"tensor_array_loop"}


@pytest.mark.parametrize("name", IDIOMS)
@pytest.mark.parametrize("n", [0, 3, 10])
@pytest.mark.parametrize("backends", ["cpu", "jit;cpu"])
def test_loop_idiom_matches_litert(name, n, backends):
    if backends != "cpu":
        pytest.importorskip("numba")
    data = (MODELS / "idioms" / f"{name}.tflite").read_bytes()
    inputs = _idiom_inputs(name, n)
    given = [x.copy() for x in inputs]
    sess = onert_py.infer.session(data, backends=backends)
    got = sess.infer(inputs)
    want = run_litert(data, inputs)
    for g, w in zip(got, want):
        # float32 ops one by one as LiteRT's: tanh from libm on the jit, numpy's on cpu, and a small
        # FULLY_CONNECTED summed in order (the last bits differ): 1e-5 relative
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    for x, y in zip(inputs, given):
        np.testing.assert_array_equal(x, y)
    ran_compiled = bool(sess.runtime.compiled_loops)
    assert ran_compiled == (backends != "cpu" and name not in ON_EXECUTORS)


@pytest.mark.parametrize("name", ["maxiter_loop", "range_loop", "sqrt_loop", "unit_matrix_loop", "select_loop"])
def test_exact_idioms_match_litert_bit_for_bit_on_cpu(name):
    """Loops of correctly rounded float32 operations (ADD, MUL, SUB, SQRT, comparisons, SELECT) on
    rank-0, [1], [1, 1] and [8] values: the cpu kernels' one-value paths (Python floats, numpy scalars)
    must give the float32 results of LiteRT's builtin kernels exactly, iteration after iteration (its
    default XNNPACK path differs in the last bit of sqrt_loop's first steps)."""
    data = (MODELS / "idioms" / f"{name}.tflite").read_bytes()
    sess = onert_py.infer.session(data, backends="cpu")
    for n in (1, 7, 1000):
        inputs = _idiom_inputs(name, n)
        for g, w in zip(sess.infer(inputs), run_litert_builtin(data, inputs)):
            np.testing.assert_array_equal(g, w, err_msg=f"{name}, n={n}")


@pytest.mark.parametrize("name", ["sequence_loop", "gather_loop"])
@pytest.mark.parametrize("backends", ["cpu", "jit;cpu"])
def test_loop_idiom_index_out_of_range(name, backends):
    """xs[t] / tf.gather(xs, t) past xs's 10 rows: the op's error, named, on both backends (the compiled
    loop leaves such a run to the executors), the inputs as given, and the session still runs."""
    if backends != "cpu":
        pytest.importorskip("numba")
    sess = onert_py.infer.session((MODELS / "idioms" / f"{name}.tflite").read_bytes(), backends=backends)
    xs = np.random.default_rng(0).normal(size=(10, 8)).astype(np.float32)
    given = xs.copy()
    op = "STRIDED_SLICE" if name == "sequence_loop" else "GATHER"
    with pytest.raises(onert_py.ExecutionError, match=f"{op}.*out of range"):
        sess.infer([xs, np.array(11, np.int32)])
    np.testing.assert_array_equal(xs, given)
    (got,) = sess.infer([xs, np.array(4, np.int32)])
    np.testing.assert_allclose(got, run_litert((MODELS / "idioms" / f"{name}.tflite").read_bytes(),
                                               [xs, np.array(4, np.int32)])[0], rtol=1e-5, atol=1e-6)
    assert bool(sess.runtime.compiled_loops) == (backends != "cpu")


def test_nested_loop_iteration_cap_and_deadline():
    """max_while_iterations bounds the inline inner loop as it bounds every WHILE; with a timeout the
    loop with a loop inside runs on the executors (which check the clock in every loop), same values."""
    pytest.importorskip("numba")
    data = (MODELS / "idioms" / "nested_loop.tflite").read_bytes()
    v = np.linspace(0, 1, 16, dtype=np.float32)
    want = run_litert(data, [v, np.array(5, np.int32)])[0]
    capped = onert_py.infer.session(data, backends="jit;cpu", max_while_iterations=4)
    np.testing.assert_allclose(capped.infer([v, np.array(4, np.int32)])[0],
                               run_litert(data, [v, np.array(4, np.int32)])[0], rtol=1e-6)
    with pytest.raises(onert_py.ExecutionError, match="max_while_iterations=4"):
        capped.infer([v, np.array(5, np.int32)])
    timed = onert_py.infer.session(data, backends="jit;cpu", timeout=30)
    np.testing.assert_allclose(timed.infer([v, np.array(5, np.int32)])[0], want, rtol=1e-6)
