"""Resource variables and hash tables, with CALL_ONCE initialisation, against LiteRT."""
import numpy as np
import pytest

import onert_py
from helpers import FIXED_DTYPES, FORMATS, accumulator_model, check_builtin, dtype_values, litert_interpreter
from onert_py.backends.registry import CPU, load_builtin_kernels
from onert_py.schema.writer import ModelBuilder

load_builtin_kernels()   # the dtype audits read CPU.dtypes (what docs/ops.md lists)


def _litert_runs(data: bytes, inputs: list) -> list:
    it = litert_interpreter(data)
    it.allocate_tensors()
    outs = []
    for x in inputs:
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]))
    return outs


@pytest.mark.parametrize("fmt", FORMATS)
def test_variable_accumulates_across_invokes(fmt):
    mb = accumulator_model()
    xs = [np.array([1.0, 2.0], np.float32), np.array([0.5, -3.0], np.float32), np.array([1.0, 1.0], np.float32)]
    expected = _litert_runs(mb.to_bytes("tflite"), xs)
    np.testing.assert_array_equal(expected[-1], np.array([12.5, -1.0], np.float32))  # 10+1+.5+1, -1+2-3+1
    sess = onert_py.infer.session(mb.to_bytes(fmt))
    for x, e in zip(xs, expected):
        np.testing.assert_array_equal(sess.infer([x])[0], e)
    sess.reset_variables()  # the initialiser runs again
    np.testing.assert_array_equal(sess.infer([xs[0]])[0], expected[0])


def test_read_before_assign_is_a_clear_error():
    mb = ModelBuilder()
    main = mb.subgraph("main")
    x = main.tensor("x", [1], np.float32)
    h = main.tensor("h", [], np.int32, type_name="RESOURCE")
    cur, out = main.tensor("cur", [1], np.float32), main.tensor("out", [1], np.float32)
    main.op("VAR_HANDLE", [], [h], container="", shared_name="nope")
    main.op("READ_VARIABLE", [h], [cur])
    main.op("ADD", [cur, x], [out], fused_activation_function=0)
    main.inputs, main.outputs = [x], [out]
    sess = onert_py.infer.session(mb.to_bytes())
    with pytest.raises(onert_py.ExecutionError, match="READ_VARIABLE"):
        sess.infer([np.zeros(1, np.float32)])


def _hashtable_model() -> ModelBuilder:
    mb = ModelBuilder()
    main, init = mb.subgraph("main"), mb.subgraph("init")
    keys = main.tensor("keys", [4], np.int64)
    h = main.tensor("h", [], np.int32, type_name="RESOURCE")
    dflt = main.const("default", np.array(b"?", dtype=object).reshape(()))
    found = main.tensor("found", [4], object)
    size = main.tensor("size", [], np.int64)
    main.op("CALL_ONCE", [], [], init_subgraph_index=1)
    main.op("HASHTABLE", [], [h], table_id=7, key_dtype=4, value_dtype=5)  # INT64 -> STRING
    main.op("HASHTABLE_FIND", [h, keys, dflt], [found])
    main.op("HASHTABLE_SIZE", [h], [size])
    main.inputs, main.outputs = [keys], [found, size]
    ih = init.tensor("h", [], np.int32, type_name="RESOURCE")
    ks = init.const("k", np.array([1, 5, 9], np.int64))
    vs = init.const("v", np.array([b"one", b"five", b"nine"], dtype=object))
    init.op("HASHTABLE", [], [ih], table_id=7, key_dtype=4, value_dtype=5)
    init.op("HASHTABLE_IMPORT", [ih, ks, vs], [])
    return mb


@pytest.mark.parametrize("fmt", FORMATS)
def test_hashtable_find_and_size(fmt):
    mb = _hashtable_model()
    keys = np.array([5, 2, 1, 9], np.int64)
    it = litert_interpreter(mb.to_bytes("tflite"))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], keys)
    it.invoke()
    ref = [it.get_tensor(d["index"]) for d in it.get_output_details()]
    found, size = onert_py.infer.session(mb.to_bytes(fmt)).infer([keys])
    assert [bytes(s) for s in found.reshape(-1)] == [bytes(s) for s in np.asarray(ref[0]).reshape(-1)]
    assert int(size) == int(np.asarray(ref[1]).reshape(-1)[0]) == 3


@pytest.mark.parametrize("dtype", FIXED_DTYPES + ("complex128",))
def test_variable_dtypes(dtype):
    # LiteRT 2.3 keeps variables of every fixed-size type: assign the input, read it back
    mb = ModelBuilder()
    main = mb.subgraph("main")
    x = main.tensor("x", [3], dtype)
    h = main.tensor("h", [], np.int32, type_name="RESOURCE")
    cur = main.tensor("cur", [3], dtype)
    main.op("VAR_HANDLE", [], [h], container="", shared_name="v")
    main.op("ASSIGN_VARIABLE", [h, x], [])
    main.op("READ_VARIABLE", [h], [cur])
    main.inputs, main.outputs = [x], [cur]
    mb.signature("serving_default", main)
    x_value = dtype_values([3], dtype, seed=1)
    got = check_builtin(mb, [x_value])[0]
    np.testing.assert_array_equal(got, x_value)
    assert dtype in CPU.dtypes["ASSIGN_VARIABLE"] and dtype in CPU.dtypes["READ_VARIABLE"]


def test_variable_of_unsupported_type_is_prepare_error():
    mb = ModelBuilder()
    main = mb.subgraph("main")
    x = main.tensor("x", [2], object)
    h = main.tensor("h", [], np.int32, type_name="RESOURCE")
    main.op("VAR_HANDLE", [], [h], container="", shared_name="v")
    main.op("ASSIGN_VARIABLE", [h, x], [])
    main.inputs, main.outputs = [x], [x]
    with pytest.raises(onert_py.PrepareError, match="has type string, not supported"):
        onert_py.infer.session(mb.to_bytes("tflite"))
