"""onert_py.interpreter.Interpreter: behaviour beyond the parity script (custom ops, messages,
resizing past the shape signature, preserved intermediates, view safety)."""
from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest

import onert_py
from onert_py.interpreter import Interpreter, InterpreterWithCustomOps, OpResolverType
from onert_py.schema.writer import ModelBuilder

F32 = np.float32


def _add_mul(shape=(2, 3)) -> bytes:
    """out = a + b * 2, with `t` (b * 2) an intermediate."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    a, b = sg.tensor("a", shape, F32), sg.tensor("b", shape, F32)
    two = sg.const("two", np.float32(2))
    t, o = sg.tensor("t", shape, F32), sg.tensor("out", shape, F32)
    sg.op("MUL", [b, two], [t])
    sg.op("ADD", [a, t], [o])
    sg.inputs, sg.outputs = [a, b], [o]
    mb.signature("serving_default", sg)
    return mb.to_bytes()


def _custom(op_name: str) -> bytes:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x, y = sg.tensor("x", [3], F32), sg.tensor("y", [3], F32)
    sg.op("CUSTOM", [x], [y], custom_code=op_name)
    sg.inputs, sg.outputs = [x], [y]
    return mb.to_bytes()


def _ready(data: bytes, **kw) -> Interpreter:
    it = Interpreter(model_content=data, **kw)
    it.allocate_tensors()
    return it


def test_basic_run_and_copy_semantics() -> None:
    it = _ready(_add_mul())
    a, b = np.ones((2, 3), F32), np.arange(6, dtype=F32).reshape(2, 3)
    it.set_tensor(0, a)
    it.set_tensor(1, b)
    a[...] = 100  # set_tensor copied
    it.invoke()
    out = it.get_tensor(4)
    np.testing.assert_array_equal(out, 1 + 2 * np.arange(6, dtype=F32).reshape(2, 3))
    out[...] = -1  # get_tensor returned a copy
    assert it.get_tensor(4)[0, 0] == 1


def test_model_path(tmp_path) -> None:
    path = tmp_path / "m.tflite"
    path.write_bytes(_add_mul())
    it = Interpreter(model_path=str(path))
    assert [d["name"] for d in it.get_input_details()] == ["a", "b"]


def test_tensor_view_is_zero_copy_and_guards_invoke() -> None:
    it = _ready(_add_mul())
    inp = it.tensor(0)
    inp().fill(3)
    it.tensor(1)().fill(1)
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(4), np.full((2, 3), 5, F32))
    held = it.tensor(4)()
    with pytest.raises(RuntimeError, match="reference to internal data"):
        it.invoke()
    part = held[1:]
    del held
    with pytest.raises(RuntimeError):
        it.allocate_tensors()
    del part
    gc.collect()
    it.invoke()


def test_error_messages_name_tensor_and_both_sides() -> None:
    it = _ready(_add_mul())
    with pytest.raises(ValueError, match=r"INT32.*FLOAT32.*name: a"):
        it.set_tensor(0, np.zeros((2, 3), np.int32))
    with pytest.raises(ValueError, match=r"'b'.*\[3, 2\].*\[2, 3\]"):
        it.set_tensor(1, np.zeros((3, 2), F32))
    with pytest.raises(ValueError, match="exceeds max tensor index 5"):
        it.get_tensor(5)
    with pytest.raises(RuntimeError, match="'a'.*only allows mutating unknown dimensions"):
        it.resize_tensor_input(0, [4, 3], strict=True)


def test_resize_beyond_signature_recompiles() -> None:
    it = Interpreter(model_content=_add_mul())
    it.resize_tensor_input(0, [5, 3])
    it.resize_tensor_input(1, [5, 3])
    it.allocate_tensors()
    assert it.get_input_details()[0]["shape"].tolist() == [5, 3]
    assert it.get_input_details()[0]["shape_signature"].tolist() == [5, 3]  # LiteRT: no file signature
    assert it.get_output_details()[0]["shape"].tolist() == [5, 3]  # propagated by allocate_tensors
    it.set_tensor(0, np.ones((5, 3), F32))
    it.set_tensor(1, np.ones((5, 3), F32))
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(4), np.full((5, 3), 3, F32))
    assert it.get_output_details()[0]["shape"].tolist() == [5, 3]


def test_bad_resize_fails_at_allocate_with_runtime_error() -> None:
    """As LiteRT: the shapes no longer broadcast, so preparing (allocate_tensors) fails, naming the op."""
    it = Interpreter(model_content=_add_mul())
    it.resize_tensor_input(0, [4, 3])
    with pytest.raises(RuntimeError, match=r"operator \d+ \((ADD|MUL)\).*\[4, 3\].*\[2, 3\]"):
        it.allocate_tensors()
    with pytest.raises(RuntimeError):
        it.invoke()


def test_preserve_all_tensors_exposes_intermediates() -> None:
    with pytest.warns(UserWarning):
        it = _ready(_add_mul(), experimental_preserve_all_tensors=True)
    it.set_tensor(0, np.zeros((2, 3), F32))
    it.set_tensor(1, np.ones((2, 3), F32))
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(3), np.full((2, 3), 2, F32))
    np.testing.assert_array_equal(it.get_tensor(2), np.float32(2))  # constant


def test_custom_op_registerer_with_hook() -> None:
    def registerer(register) -> None:
        register("ApiTimesThree", lambda x, custom_options: x * 3)

    for _ in range(2):  # the hook replaces, so repeated interpreters are fine
        it = _ready(_custom("ApiTimesThree"), custom_op_registerers=[registerer])
        it.set_tensor(0, np.array([1, 2, 3], F32))
        it.invoke()
        np.testing.assert_array_equal(it.get_tensor(1), np.array([3, 6, 9], F32))


def test_custom_op_registerer_without_arguments() -> None:
    def registerer() -> None:
        onert_py.register_custom_op("ApiPlusOne", lambda x, custom_options: x + 1, replace=True)

    it = InterpreterWithCustomOps(custom_op_registerers=[registerer], model_content=_custom("ApiPlusOne"))
    it.allocate_tensors()
    it.set_tensor(0, np.zeros(3, F32))
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(1), np.ones(3, F32))


def test_unresolved_custom_op_fails_at_allocate() -> None:
    it = Interpreter(model_content=_custom("ApiNoSuchOp"))
    with pytest.raises(RuntimeError, match="ApiNoSuchOp"):
        it.allocate_tensors()


def test_delegates_warn_and_are_ignored() -> None:
    with pytest.warns(UserWarning, match="delegates"):
        it = Interpreter(model_content=_add_mul(), experimental_delegates=[object()])
    it.allocate_tensors()


def test_constructor_options_accepted() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Interpreter(model_content=_add_mul(), num_threads=4,
                    experimental_op_resolver_type=OpResolverType.BUILTIN_REF)


def test_signature_runner_resizes_and_returns_by_name() -> None:
    it = Interpreter(model_content=_add_mul())
    runner = it.get_signature_runner()
    out = runner(a=np.ones((4, 3), F32), b=np.ones((4, 3), F32))
    assert list(out) == ["out"]
    np.testing.assert_array_equal(out["out"], np.full((4, 3), 3, F32))
    assert runner.get_input_details()["a"]["shape"].tolist() == [4, 3]
    it.invoke()  # our runner does not pin the interpreter


def test_reset_all_variables_and_ops_details() -> None:
    it = _ready(_add_mul())
    it.reset_all_variables()
    ops = it._get_ops_details()
    assert [o["op_name"] for o in ops] == ["MUL", "ADD"]
    assert ops[0]["inputs"].dtype == np.int32 and ops[0]["operand_types"] == [np.float32, np.float32]
