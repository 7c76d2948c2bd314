"""Inputs of every form: non-contiguous, read-only, byte-swapped, Python lists and scalars, NaN/Inf
are accepted where LiteRT/onert accept them (else a clear error naming the input); inputs are never
modified; outputs never alias buffers a later run overwrites (session.infer, Interpreter.get_tensor,
Interpreter.tensor())."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import onert_py
from onert_py import InputError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_threads import CONV, WHILE_IF  # noqa: E402

X = np.array([1, -2, 0.5, 3], np.float32)


def _readonly(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.setflags(write=False)
    return a


FORMS = {
    "non-contiguous": lambda a: np.repeat(a, 2, axis=-1)[..., ::2],   # a stride-2 view, any rank
    "read-only": _readonly,
    "big-endian": lambda a: a.astype(a.dtype.newbyteorder(">")),
    "fortran": lambda a: np.asfortranarray(a),
    "list": lambda a: a.tolist(),
}


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("backends", ["cpu", None])
def test_session_accepts_every_array_form(form, backends):
    sess = onert_py.infer.session(WHILE_IF, backends=backends)
    want = sess.infer([X, np.array(3, np.int32)])
    x = FORMS[form](X)
    kept = np.array(x, copy=True)
    got = sess.infer([x, 3 if form == "list" else np.array(3, np.int32)])
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(np.asarray(x), kept)


@pytest.mark.parametrize("form", ["non-contiguous", "read-only", "big-endian", "fortran"])
def test_session_conv_takes_strided_and_swapped_inputs(form):
    x = np.random.default_rng(1).standard_normal((1, 16, 16, 8)).astype(np.float32)
    sess = onert_py.infer.session(CONV)
    want = sess.infer([x])
    arg = FORMS[form](x)
    for a, b in zip(sess.infer([arg]), want):
        np.testing.assert_array_equal(a, b)


def test_python_scalars_and_numpy_scalars():
    sess = onert_py.infer.session(WHILE_IF)
    want = sess.infer([X, np.array(2, np.int32)])
    for n in (2, np.int32(2), np.int64(2), [2][0]):
        for a, b in zip(sess.infer([X.tolist(), n]), want):
            np.testing.assert_array_equal(a, b)


def test_nan_and_inf_are_values():
    x = np.array([np.nan, np.inf, -np.inf, 0], np.float32)
    sess = onert_py.infer.session(WHILE_IF)
    i, y = sess.infer([x, np.array(0, np.int32)])       # no iterations: x comes back as it was
    np.testing.assert_array_equal(y, x)
    i, y = sess.infer([x, np.array(2, np.int32)])
    assert np.isnan(y[0]) and y[1] > 0 and y[2] < 0 and y[3] == 0


@pytest.mark.parametrize("value,match", [
    (np.array(["a", "b", "c", "d"]), r"input 0 \('x'\): cannot use <U1 values for an? float32 input"),
    (np.array([1 + 2j] * 4), r"input 0 \('x'\): cannot use complex128"),
    (np.array([1.5, 2, 3, 4], object), r"input 0 \('x'\): cannot use object"),
    ([1.0, [2.0]], r"input 0 \('x'\) cannot be made an array"),
    (np.ones(5, np.float32), r"input 0 \('x'\) has shape \[5\], the model expects \[4\]"),
    (1.0, r"input 0 \('x'\) has shape \[\], the model expects \[4\]"),
])
def test_bad_inputs_name_the_input(value, match):
    sess = onert_py.infer.session(WHILE_IF)
    with pytest.raises(InputError, match=match):
        sess.infer([value, np.array(2, np.int32)])


@pytest.mark.parametrize("value,match", [
    (2.5, r"input 1 \('n'\): cannot use float64 values for an? int32 input"),
    (2**40, r"input 1 \('n'\): int64 values in \[\d+, \d+\] do not fit the int32 input"),
    (np.array([2], np.int32), r"input 1 \('n'\) has shape \[1\], the model expects \[\]"),
])
def test_bad_scalar_inputs_name_the_input(value, match):
    sess = onert_py.infer.session(WHILE_IF)
    with pytest.raises(InputError, match=match):
        sess.infer([X, value])


# ------------------------------------------------------------------------------ no writes, no aliases

def _alias_model(fmt: str = "tflite") -> bytes:
    """x -> ADD(x, x) (into a planned slot) -> RESHAPE (a view) -> out0; x -> RESHAPE -> out1 (a view
    of the input); x -> out2 (the input itself is an output)."""
    from onert_py.schema.writer import ModelBuilder
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [4, 4], np.float32)
    s = sg.tensor("s", [4, 4], np.float32)
    sg.op("ADD", [x, x], [s], fused_activation_function=0)
    r = sg.tensor("r", [16], np.float32)
    sg.op("RESHAPE", [s, sg.const("shape", np.array([16], np.int32))], [r])
    v = sg.tensor("v", [2, 8], np.float32)
    sg.op("RESHAPE", [x, sg.const("shape2", np.array([2, 8], np.int32))], [v])
    sg.inputs, sg.outputs = [x], [r, v, x]
    return mb.to_bytes(fmt)


@pytest.mark.parametrize("model", ["alias", "while_if", "conv"])
def test_session_outputs_are_the_callers_own(model):
    data = {"alias": _alias_model(), "while_if": WHILE_IF, "conv": CONV}[model]
    rng = np.random.default_rng(0)
    sess = onert_py.infer.session(data)
    shapes = [tuple(i.dims) for i in sess.get_inputs_tensorinfo()]

    def inputs(seed: int) -> list:
        rng = np.random.default_rng(seed)
        return [rng.standard_normal(s).astype(np.float32) if k == 0 else np.array(seed + 2, np.int32)
                for k, s in enumerate(shapes)]
    first_in = inputs(1)
    kept_in = [a.copy() for a in first_in]
    first = sess.infer(first_in)
    kept = [o.copy() for o in first]
    second = sess.infer(inputs(2))
    for a, b in zip(first, kept):              # a later run did not overwrite the first's outputs
        np.testing.assert_array_equal(a, b)
    for a, b in zip(first_in, kept_in):        # inputs were not written
        np.testing.assert_array_equal(a, b)
    for o in first + second:
        assert o.flags.writeable
        assert not any(np.may_share_memory(o, a) for a in first_in)
    for o in first:
        assert not any(np.may_share_memory(o, p) for p in second)
    del rng


def test_outputs_own_their_memory_against_each_other_and_variables():
    """One tensor listed twice as an output, and an output a variable keeps (ASSIGN_VARIABLE of it):
    each returned array is the caller's alone, not the other output's nor the variable's memory."""
    from onert_py.schema.writer import ModelBuilder
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [3], np.float32)
    s = sg.tensor("s", [3], np.float32)
    sg.op("ADD", [x, x], [s], fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [s, s]
    for keep in (False, True):
        if keep:
            h = sg.tensor("h", [], np.int32, type_name="RESOURCE")
            sg.op("VAR_HANDLE", [], [h], container="", shared_name="kept")
            sg.op("ASSIGN_VARIABLE", [h, s], [])
        sess = onert_py.infer.session(mb.to_bytes("tflite"))
        a, b = sess.infer([np.array([1.0, 2.0, 3.0], np.float32)])
        np.testing.assert_array_equal(a, [2.0, 4.0, 6.0])
        np.testing.assert_array_equal(b, [2.0, 4.0, 6.0])
        assert not np.may_share_memory(a, b)
        held = sess.runtime.held_arrays()
        assert bool(held) == keep and not any(np.may_share_memory(o, v) for o in (a, b) for v in held)


def test_interpreter_inputs_and_outputs():
    it = onert_py.Interpreter(model_content=_alias_model())
    it.allocate_tensors()
    x_i = it.get_input_details()[0]["index"]
    outs = [d["index"] for d in it.get_output_details()]
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    kept = x.copy()
    it.set_tensor(x_i, x)
    it.invoke()
    first = [it.get_tensor(o) for o in outs]
    it.set_tensor(x_i, -x)
    it.invoke()
    np.testing.assert_array_equal(x, kept)
    np.testing.assert_array_equal(first[0], 2 * kept.reshape(-1))
    np.testing.assert_array_equal(first[1], kept.reshape(2, 8))
    np.testing.assert_array_equal(it.get_tensor(outs[0]), -2 * kept.reshape(-1))
    # tensor(): a view, valid until the next invoke, which refuses to run while it lives (as LiteRT)
    view = it.tensor(outs[0])()
    with pytest.raises(RuntimeError):
        it.invoke()
    del view
    it.invoke()


@pytest.mark.parametrize("form", ["non-contiguous", "read-only", "big-endian", "fortran"])
def test_interpreter_set_tensor_forms(form):
    x = np.random.default_rng(2).standard_normal((1, 16, 16, 8)).astype(np.float32)
    it = onert_py.Interpreter(model_content=CONV)
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    it.set_tensor(i, x)
    it.invoke()
    want = it.get_tensor(o)
    arg = FORMS[form](x)
    it.set_tensor(i, arg)
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(o), want)


@pytest.mark.parametrize("value", [[1.0, 2.0, 3.0, 4.0], 3, np.array([1, 2, 3, 4], np.float64)])
def test_interpreter_refuses_other_dtypes_as_litert(value):
    """LiteRT's set_tensor takes the tensor's exact type: lists and Python scalars (float64/int64)
    are refused with a ValueError naming the tensor."""
    it = onert_py.Interpreter(model_content=WHILE_IF)
    it.allocate_tensors()
    d = {d["name"]: d["index"] for d in it.get_input_details()}
    index = d["n"] if np.ndim(value) == 0 else d["x"]
    with pytest.raises(ValueError, match="Cannot set tensor: Got value of type (FLOAT64|INT64)"):
        it.set_tensor(index, value)


def test_interpreter_nan_inf_without_warnings():
    import warnings
    it = onert_py.Interpreter(model_content=WHILE_IF)
    it.allocate_tensors()
    d = {d["name"]: d["index"] for d in it.get_input_details()}
    it.set_tensor(d["x"], np.array([np.nan, np.inf, -np.inf, 0], np.float32))
    it.set_tensor(d["n"], np.array(3, np.int32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # an overflow is a value, not a numpy warning
        it.invoke()
