"""One script, run on LiteRT's Interpreter and on onert_py's: details, outputs, signature runners and
the exception types of misuse must be identical. Every reference value comes from LiteRT."""
from __future__ import annotations

import ctypes.util
import enum
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from helpers import accumulator_model, kernel_params
from onert_py.interpreter import Interpreter as OnertInterpreter
from onert_py.loader import load_model
from onert_py.interpreter import InterpreterWithCustomOps as OnertInterpreterWithCustomOps
from onert_py.interpreter import SignatureRunner as OnertSignatureRunner
from onert_py.schema.writer import ModelBuilder

litert = pytest.importorskip("ai_edge_litert.interpreter")
F32, I32 = np.float32, np.int32


# ---------------------------------------------------------------- models
def _binary(opcode: str, dtype: Any = F32, out_dtype: Any = None, shape=(2, 3), **options: Any) -> bytes:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    a, b = sg.tensor("a", shape, dtype), sg.tensor("b", shape, dtype)
    c = sg.const("k", np.full(shape[-1:], 2, dtype))
    t = sg.tensor("t", shape, dtype)
    o = sg.tensor("out", shape, out_dtype or dtype)
    sg.op("MUL", [b, c], [t])
    sg.op(opcode, [a, t], [o], **options)
    sg.inputs, sg.outputs = [a, b], [o]
    mb.signature("serving_default", sg)
    return mb.to_bytes()


def _while() -> bytes:
    """i, x = 0, x; while i < 5: i, x = i + 1, x * 2."""
    mb = ModelBuilder()
    main, cond, body = mb.subgraph("main"), mb.subgraph("cond"), mb.subgraph("body")
    i0, x0 = main.tensor("i0", [], I32), main.tensor("x0", [2], F32)
    i1, x1 = main.tensor("i_out", [], I32), main.tensor("x_out", [2], F32)
    main.op("WHILE", [i0, x0], [i1, x1], cond_subgraph_index=1, body_subgraph_index=2)
    main.inputs, main.outputs = [i0, x0], [i1, x1]
    ci, cx = cond.tensor("ci", [], I32), cond.tensor("cx", [2], F32)
    lim, r = cond.const("limit", np.int32(5)), cond.tensor("r", [], np.bool_)
    cond.op("LESS", [ci, lim], [r])
    cond.inputs, cond.outputs = [ci, cx], [r]
    bi, bx = body.tensor("bi", [], I32), body.tensor("bx", [2], F32)
    one, two = body.const("one", np.int32(1)), body.const("two", np.float32(2))
    ni, nx = body.tensor("ni", [], I32), body.tensor("nx", [2], F32)
    body.op("ADD", [bi, one], [ni])
    body.op("MUL", [bx, two], [nx])
    body.inputs, body.outputs = [bi, bx], [ni, nx]
    return mb.to_bytes()


def _if() -> bytes:
    mb = ModelBuilder()
    main, then, other = mb.subgraph("main"), mb.subgraph("then"), mb.subgraph("else")
    c, a, b = main.tensor("cond", [1], np.bool_), main.tensor("a", [3], F32), main.tensor("b", [3], F32)
    o = main.tensor("out", [3], F32)
    main.op("IF", [c, a, b], [o], then_subgraph_index=1, else_subgraph_index=2)
    main.inputs, main.outputs = [c, a, b], [o]
    for sg, opcode in ((then, "ADD"), (other, "SUB")):
        x, y, z = sg.tensor("x", [3], F32), sg.tensor("y", [3], F32), sg.tensor("z", [3], F32)
        sg.op(opcode, [x, y], [z])
        sg.inputs, sg.outputs = [x, y], [z]
    return mb.to_bytes()


def _signatures() -> bytes:
    """Two signatures on two subgraphs; keys and input names out of alphabetical order."""
    mb = ModelBuilder()
    for key, opcode in (("sub_fn", "SUB"), ("add_fn", "ADD")):
        sg = mb.subgraph(key)
        y, x, o = sg.tensor(f"{key}_y", [2], F32), sg.tensor(f"{key}_x", [2], F32), sg.tensor(f"{key}_o", [2], F32)
        sg.op(opcode, [x, y], [o])
        sg.inputs, sg.outputs = [y, x], [o]
        mb.signature(key, sg, inputs={"y": y, "x": x}, outputs={"result": o})
    return mb.to_bytes()


def _dynamic() -> bytes:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    a, b = sg.tensor("a", [-1, 3], F32), sg.tensor("b", [1, 3], F32)
    o = sg.tensor("out", [-1, 3], F32)
    sg.op("ADD", [a, b], [o], fused_activation_function=1)  # RELU
    sg.inputs, sg.outputs = [a, b], [o]
    mb.signature("serving_default", sg)
    return mb.to_bytes()


def _quantized_io() -> bytes:
    """int8 tensors with per-tensor and per-channel quantization parameters (details only)."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    a = sg.tensor("a", [2, 3], np.int32)
    b = sg.tensor("b", [2, 3], np.int32)
    o = sg.tensor("out", [2, 3], np.int32)
    sg.tensor("q_tensor", [2, 3], np.int8, quantization=([0.5], [3]))
    sg.tensor("q_channel", [2, 3], np.int8, quantization=([0.5, 0.25], [0, 0], 0))
    sg.op("MAXIMUM", [a, b], [o])
    sg.inputs, sg.outputs = [a, b], [o]
    return mb.to_bytes()


def _rng_inputs(details: list[dict], seed: int = 0, shapes: dict[int, tuple] | None = None) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for d in details:
        shape = (shapes or {}).get(d["index"], tuple(d["shape"]))
        if d["dtype"] is np.bool_:
            out.append(rng.random(shape) > 0.5)
        elif np.issubdtype(d["dtype"], np.integer):
            out.append(rng.integers(-5, 5, shape).astype(d["dtype"]))
        else:
            out.append(rng.standard_normal(shape).astype(d["dtype"]))
    return out


MODELS: dict[str, Callable[[], bytes]] = {
    "add": lambda: _binary("ADD"),
    "sub_relu6": lambda: _binary("SUB", fused_activation_function=3),
    "mul_i32": lambda: _binary("MUL", I32),
    "less": lambda: _binary("LESS", out_dtype=np.bool_),
    "maximum_rank1": lambda: _binary("MAXIMUM", shape=(5,)),
    "while": _while,
    "if": _if,
    "signatures": _signatures,
    "dynamic": _dynamic,
    "quantized_io": _quantized_io,
}
_CACHE: dict[str, bytes] = {}


def model(name: str) -> bytes:
    if name not in _CACHE:
        _CACHE[name] = MODELS[name]()
    return _CACHE[name]


def make(cls: type, data: bytes, **kw: Any):
    if cls is litert.Interpreter:  # without XNNPACK: its DELEGATE nodes are not part of the model
        kw.setdefault("experimental_op_resolver_type", litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    return cls(model_content=data, **kw)


# ---------------------------------------------------------------- comparison
def assert_same(ours: Any, ref: Any, where: str = "", tol: float = 1e-6) -> None:
    """Same structure, same types (incl. numpy dtypes) and same values (floats within `tol`)."""
    assert type(ours) is type(ref), f"{where}: type {type(ours)} vs LiteRT {type(ref)}"
    if isinstance(ref, dict):
        assert list(ours) == list(ref), f"{where}: keys {list(ours)} vs LiteRT {list(ref)}"
        for k in ref:
            assert_same(ours[k], ref[k], f"{where}.{k}", tol)
    elif isinstance(ref, (list, tuple)):
        assert len(ours) == len(ref), f"{where}: length {len(ours)} vs LiteRT {len(ref)}"
        for k, (a, b) in enumerate(zip(ours, ref)):
            assert_same(a, b, f"{where}[{k}]", tol)
    elif isinstance(ref, (np.ndarray, np.generic)):   # get_tensor gives numpy scalars for rank 0
        assert ours.dtype == ref.dtype and ours.shape == ref.shape, \
            f"{where}: {ours.dtype}{ours.shape} vs LiteRT {ref.dtype}{ref.shape}"
        if ref.dtype.kind in "fc":
            np.testing.assert_allclose(ours, ref, rtol=tol, atol=tol, equal_nan=True, err_msg=where)
        else:
            np.testing.assert_array_equal(ours, ref, err_msg=where)
    else:
        assert ours == ref, f"{where}: {ours!r} vs LiteRT {ref!r}"


def model_details(it) -> dict[str, Any]:
    """What an interpreter says about its model before any run, as plain data."""
    return {
        "num_subgraphs": it.num_subgraphs(),
        "input_details": it.get_input_details(),
        "output_details": it.get_output_details(),
        "tensor_details": [it.get_tensor_details(k) for k in range(it.num_subgraphs())],
        "signature_list": it.get_signature_list(),
        "ops": it._get_ops_details(),
    }


def script(cls: type, name: str) -> dict[str, Any]:
    """Everything a user script would observe, as plain data."""
    it = make(cls, model(name))
    seen = model_details(it)
    shapes = {}
    if name == "dynamic":
        it.resize_tensor_input(0, [4, 3], strict=True)
        shapes = {0: (4, 3)}
    it.allocate_tensors()
    seen["input_details_allocated"] = it.get_input_details()
    inputs = _rng_inputs(it.get_input_details(), shapes=shapes)
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    seen["outputs"] = [it.get_tensor(d["index"]) for d in it.get_output_details()]
    seen["output_details_invoked"] = it.get_output_details()
    view = it.tensor(it.get_output_details()[0]["index"])
    seen["view"] = np.array(view(), copy=True)
    inp = it.tensor(it.get_input_details()[-1]["index"])
    inp()[...] = inputs[-1][...] if inputs[-1].dtype == np.bool_ else inputs[-1] + 1
    it.invoke()
    seen["outputs_after_view_write"] = [it.get_tensor(d["index"]) for d in it.get_output_details()]
    runs = {}
    for key, sig in it.get_signature_list().items():
        runner = it.get_signature_runner(key)
        details = runner.get_input_details()
        feed = _rng_inputs(list(details.values()), seed=1)
        runs[key] = {"result": runner(**dict(zip(details, feed))),
                     "input_details": runner.get_input_details(),
                     "output_details": runner.get_output_details()}
        del runner   # LiteRT's runner pins its interpreter (invoke would refuse while it lives)
    seen["signature_runs"] = runs
    return seen


@pytest.mark.parametrize("name", sorted(MODELS))
def test_same_observations(name: str) -> None:
    ref = script(litert.Interpreter, name)
    ours = script(OnertInterpreter, name)
    assert_same(ours, ref, name)


def test_dynamic_resize_shapes_after_invoke() -> None:
    """After a resize, shapes of outputs match LiteRT once the model has run."""
    def run(cls: type) -> list:
        it = make(cls, model("dynamic"))
        it.resize_tensor_input(0, [7, 3])
        it.allocate_tensors()
        x, b = _rng_inputs(it.get_input_details())
        it.set_tensor(0, x)
        it.set_tensor(1, b)
        it.invoke()
        return [it.get_input_details(), it.get_output_details(), it.get_tensor(2)]
    assert_same(run(OnertInterpreter), run(litert.Interpreter))


# ---------------------------------------------------------------- misuse: identical exception types
def _allocated(cls: type, name: str = "add"):
    it = make(cls, model(name))
    it.allocate_tensors()
    return it


MISUSE: dict[str, Callable[[type], Any]] = {
    "invoke_before_allocate": lambda cls: make(cls, model("add")).invoke(),
    "get_before_allocate": lambda cls: make(cls, model("add")).get_tensor(0),
    "set_before_allocate": lambda cls: make(cls, model("add")).set_tensor(0, np.zeros((2, 3), F32)),
    "view_before_allocate": lambda cls: make(cls, model("add")).tensor(0)(),
    "wrong_dtype": lambda cls: _allocated(cls).set_tensor(0, np.zeros((2, 3), np.int32)),
    "float64_value": lambda cls: _allocated(cls).set_tensor(0, np.zeros((2, 3))),
    "python_list": lambda cls: _allocated(cls).set_tensor(0, [[1, 2, 3], [4, 5, 6]]),
    "wrong_shape": lambda cls: _allocated(cls).set_tensor(0, np.zeros((3, 2), F32)),
    "wrong_rank": lambda cls: _allocated(cls).set_tensor(0, np.zeros(6, F32)),
    "scalar_value": lambda cls: _allocated(cls).set_tensor(0, F32(1)),
    "bad_index_set": lambda cls: _allocated(cls).set_tensor(99, np.zeros((2, 3), F32)),
    "negative_index_get": lambda cls: _allocated(cls).get_tensor(-1),
    "bad_index_get": lambda cls: _allocated(cls).get_tensor(99),
    "bad_subgraph_get": lambda cls: _allocated(cls).get_tensor(0, 5),
    "bad_index_view": lambda cls: _allocated(cls).tensor(99)(),
    "bad_subgraph_details": lambda cls: _allocated(cls).get_tensor_details(3),
    "str_index": lambda cls: _allocated(cls).get_tensor("a"),
    "resize_bad_index": lambda cls: _allocated(cls).resize_tensor_input(99, [1, 3]),
    "resize_strict_static": lambda cls: _allocated(cls).resize_tensor_input(0, [4, 3], strict=True),
    "resize_strict_dynamic_ok": lambda cls: _allocated(cls, "dynamic").resize_tensor_input(0, [4, 3], strict=True),
    "resize_strict_fixed_dim": lambda cls: _allocated(cls, "dynamic").resize_tensor_input(0, [4, 2], strict=True),
    "resize_negative": lambda cls: _allocated(cls).resize_tensor_input(0, [-1, 3]),
    "invoke_after_resize": lambda cls: _resize_then(cls, lambda it: it.invoke()),
    "get_after_resize": lambda cls: _resize_then(cls, lambda it: it.get_tensor(0)),
    "invoke_holding_view": lambda cls: _holding_view(cls, lambda it: it.invoke()),
    "allocate_holding_view": lambda cls: _holding_view(cls, lambda it: it.allocate_tensors()),
    "resize_holding_view": lambda cls: _holding_view(cls, lambda it: it.resize_tensor_input(0, [2, 3])),
    "invoke_holding_slice": lambda cls: _holding_view(cls, lambda it: it.invoke(), slice_only=True),
    "set_holding_view": lambda cls: _holding_view(cls, lambda it: it.set_tensor(0, np.ones((2, 3), F32))),
    "runner_no_signatures": lambda cls: make(cls, model("while")).get_signature_runner(),
    "runner_ambiguous": lambda cls: make(cls, model("signatures")).get_signature_runner(),
    "runner_bad_key": lambda cls: make(cls, model("add")).get_signature_runner("nope"),
    "runner_missing_input": lambda cls: make(cls, model("add")).get_signature_runner()(a=np.ones((2, 3), F32)),
    "runner_bad_name": lambda cls: make(cls, model("add")).get_signature_runner()(
        a=np.ones((2, 3), F32), q=np.ones((2, 3), F32)),
    "runner_wrong_dtype": lambda cls: make(cls, model("add")).get_signature_runner()(
        a=np.ones((2, 3), F32), b=np.ones((2, 3), I32)),
    "runner_positional": lambda cls: make(cls, model("add")).get_signature_runner()(np.ones((2, 3), F32)),
    "no_model": lambda cls: cls(),
    "both_models": lambda cls: cls(model_path="x.tflite", model_content=model("add")),
    "garbage_model": lambda cls: cls(model_content=b"not a flatbuffer model at all"),
    "missing_file": lambda cls: cls(model_path="/nonexistent/model.tflite"),
    "zero_threads": lambda cls: cls(model_content=model("add"), num_threads=0),
    "float_threads": lambda cls: cls(model_content=model("add"), num_threads=1.5),
    "bad_resolver": lambda cls: cls(model_content=model("add"), experimental_op_resolver_type=3),
    "unresolved_custom_op": lambda cls: _custom_model(cls).allocate_tensors(),
}


def _resize_then(cls: type, action: Callable) -> Any:
    it = _allocated(cls)
    it.resize_tensor_input(0, [1, 3])
    return action(it)


def _holding_view(cls: type, action: Callable, slice_only: bool = False) -> Any:
    it = _allocated(cls)
    view = it.tensor(2)()
    part = view[0]
    if slice_only:
        del view
    try:
        return action(it)
    finally:
        del part


def _custom_model(cls: type):
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x, y = sg.tensor("x", [2], F32), sg.tensor("y", [2], F32)
    sg.op("CUSTOM", [x], [y], custom_code="NoSuchParityOp")
    sg.inputs, sg.outputs = [x], [y]
    return make(cls, mb.to_bytes())


def _outcome(fn: Callable[[type], Any], cls: type) -> type | None:
    try:
        fn(cls)
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        for base in (TypeError, AttributeError, ValueError, RuntimeError):
            if isinstance(e, base):
                return base
        return type(e)
    return None


@pytest.mark.parametrize("case", sorted(MISUSE))
def test_same_exception_type(case: str) -> None:
    expected = _outcome(MISUSE[case], litert.Interpreter)
    got = _outcome(MISUSE[case], OnertInterpreter)
    assert got is expected, f"{case}: onert-py -> {got}, LiteRT -> {expected}"


# ---------------------------------------------------------------- the conformance corpus
# TF-converter models: signatures, dynamic batch/sequence dims, IF/WHILE, rank-0 and int64/bool I/O.
CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "corpus"
# Kernels that differ from LiteRT on purpose (LiteRT fails these inputs; see tests/conformance).
KERNEL_DIFFERENCES = {"greedy_decode_grow_empty", "op_reverse_2axes", "op_segment_sum"}
CORPUS_MODELS = sorted(p.stem for p in CORPUS.glob("*.tflite") if p.stem not in KERNEL_DIFFERENCES)

CORPUS_TOL = 1e-5   # the corpus's own tolerance (MANIFEST.json default_rtol/default_atol)


def corpus_inputs(name: str) -> list[list[np.ndarray]]:
    """The stored input sets of a corpus model: in_<k>, then run<n>_in_<k>."""
    ref = np.load(CORPUS / f"{name}.npz")
    prefixes = ["in_"] + sorted({k.split("_in_")[0] + "_in_" for k in ref.files if k.startswith("run") and "_in_" in k})
    sets = []
    for prefix in prefixes:
        keys = sorted((k for k in ref.files if k.startswith(prefix)), key=lambda k: int(k[len(prefix):]))
        sets.append([ref[k] for k in keys])
    return sets


def corpus_script(cls: type, name: str) -> dict[str, Any]:
    """Details, every stored input set through resize/allocate/set_tensor/invoke (the second one
    written through tensor() views), and each signature runner on the same inputs."""
    it = cls(model_path=str(CORPUS / f"{name}.tflite"),
             **({"experimental_op_resolver_type": litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}
                if cls is litert.Interpreter else {}))
    seen = model_details(it)
    seen["full_signature_list"] = it._get_full_signature_list()
    sets = corpus_inputs(name)
    for r, inputs in enumerate(sets):
        details = it.get_input_details()
        for d, x in zip(details, inputs):
            if tuple(d["shape"]) != x.shape:
                it.resize_tensor_input(d["index"], x.shape)
        it.allocate_tensors()
        seen[f"run{r}_details_allocated"] = [it.get_input_details(), it.get_output_details()]
        for d, x in zip(details, inputs):
            if r % 2 and x.ndim:   # zero-copy writes through views (rank 0 views differ, see below)
                it.tensor(d["index"])()[...] = x
            else:
                it.set_tensor(d["index"], x)
        it.invoke()
        seen[f"run{r}_outputs"] = [it.get_tensor(d["index"]) for d in it.get_output_details()]
        seen[f"run{r}_views"] = [np.array(it.tensor(d["index"])(), copy=True)
                                 for d in it.get_output_details() if len(d["shape"])]
        seen[f"run{r}_details_invoked"] = [it.get_input_details(), it.get_output_details()]
    index_of = [d["index"] for d in it.get_input_details()]
    for key in it.get_signature_list():
        runner = it.get_signature_runner(key)
        if runner._subgraph_index != 0:   # corpus inputs are for subgraph 0's inputs
            continue
        for r, inputs in enumerate(sets):
            feed = {n: inputs[index_of.index(d["index"])] for n, d in runner.get_input_details().items()}
            seen[f"signature_{key}_{r}"] = [runner(**feed), runner.get_input_details(),
                                            runner.get_output_details()]
        del runner   # LiteRT's runner pins its interpreter
    seen["details_after_runners"] = [it.get_input_details(), it.get_output_details()]
    return seen


@pytest.mark.parametrize("name", kernel_params(CORPUS_MODELS, CORPUS))
def test_corpus_same_observations(name: str) -> None:
    ref = corpus_script(litert.Interpreter, name)
    ours = corpus_script(OnertInterpreter, name)
    assert_same(ours, ref, name, tol=CORPUS_TOL)


def corpus(cls: type, name: str, allocate: bool = True, **kw: Any):
    if cls is litert.Interpreter:
        kw.setdefault("experimental_op_resolver_type", litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it = cls(model_path=str(CORPUS / f"{name}.tflite"), **kw)
    if allocate:
        it.allocate_tensors()
    return it


def _resized(cls: type, shape: list[int], name: str = "mlp_dynamic_batch"):
    it = corpus(cls, name)
    it.resize_tensor_input(0, shape)
    return it


def _runner(cls: type, name: str = "mlp", key: str | None = None):
    return corpus(cls, name, allocate=False).get_signature_runner(key)


def _view_then(cls: type, action: Callable, name: str = "bert_classifier_dynamic_batch") -> Any:
    it = corpus(cls, name)
    view = it.tensor(it.get_input_details()[0]["index"])()
    try:
        return action(it)
    finally:
        del view


_F8 = np.ones((2, 8), F32)
_IDS = np.ones((2, 12), I32)
CORPUS_MISUSE: dict[str, Callable[[type], Any]] = {
    # resize_tensor_input: the size must be a 1-D list of non-negative ints
    "resize_size_2d": lambda cls: _resized(cls, [[5, 6]]),
    "resize_size_scalar": lambda cls: _resized(cls, 5),
    "resize_size_str": lambda cls: _resized(cls, ["a", 6]),
    "resize_size_float": lambda cls: _resized(cls, [2.7, 6]).get_input_details()[0]["shape"],
    "resize_size_tuple_np": lambda cls: _resized(cls, np.array([5, 6], np.int64)).get_input_details(),
    "resize_size_negative": lambda cls: _resized(cls, [-1, 6]),
    "resize_size_zero_batch_runs": lambda cls: _run_after_resize(cls, [0, 6]),
    "resize_rank_change_allocate": lambda cls: _resized(cls, [2, 3, 6]).allocate_tensors(),
    "resize_rank0_allocate": lambda cls: _resized(cls, []).allocate_tensors(),
    "resize_static_dim_allocate": lambda cls: _resized(cls, [5, 7]).allocate_tensors(),
    "resize_static_model_batch": lambda cls: _run_after_resize(cls, [3, 8], "mlp"),
    "resize_strict_static_dim": lambda cls: corpus(cls, "mlp_dynamic_batch").resize_tensor_input(0, [5, 7], strict=True),
    "resize_strict_rank": lambda cls: corpus(cls, "mlp_dynamic_batch").resize_tensor_input(0, [5, 6, 1], strict=True),
    "resize_strict_unknown_dims": lambda cls: _strict_both_dims(cls),
    "resize_negative_index": lambda cls: corpus(cls, "mlp").resize_tensor_input(-1, [2, 8]),
    "resize_non_input_tensor": lambda cls: corpus(cls, "mlp_dynamic_batch").resize_tensor_input(3, [2, 3]),
    "resize_details_before_allocate": lambda cls: [_resized(cls, [5, 6]).get_input_details(),
                                                   _resized(cls, [5, 6]).get_output_details()],
    # use before allocate_tensors after a resize
    "invoke_after_resize": lambda cls: _resized(cls, [3, 6]).invoke(),
    "set_after_resize": lambda cls: _resized(cls, [3, 6]).set_tensor(0, np.ones((3, 6), F32)),
    "get_after_resize": lambda cls: _resized(cls, [3, 6]).get_tensor(0),
    "view_after_resize": lambda cls: _resized(cls, [3, 6]).tensor(0)(),
    "resize_same_shape_invoke": lambda cls: _resized(cls, [1, 6]).invoke(),
    # set_tensor: dtype, rank, shape
    "set_wrong_rank_corpus": lambda cls: corpus(cls, "bert_classifier_dynamic_batch").set_tensor(0, np.ones(12, I32)),
    "set_wrong_dim_corpus": lambda cls: corpus(cls, "bert_classifier_dynamic_batch").set_tensor(0, _IDS),
    "set_int64_ids": lambda cls: corpus(cls, "bert_classifier_dynamic_batch").set_tensor(0, np.ones((1, 12), np.int64)),
    "set_rank0_python_int": lambda cls: corpus(cls, "while_counter").set_tensor(0, 3),
    "set_rank0_int64": lambda cls: corpus(cls, "while_counter").set_tensor(0, np.int64(3)),
    "set_rank0_shape1": lambda cls: corpus(cls, "while_counter").set_tensor(0, np.array([3], I32)),
    "set_rank0_numpy_scalar": lambda cls: corpus(cls, "op_range_int32").set_tensor(0, I32(3)),
    "set_bool_from_int": lambda cls: corpus(cls, "cond_dynamic_shape").set_tensor(1, np.array(1)),
    "set_bool_python": lambda cls: corpus(cls, "cond_dynamic_shape").set_tensor(1, True),
    "set_int_list_int64": lambda cls: _set_get(cls, "op_add_int64_bcast", 0, [[1], [2], [3]]),
    "set_fortran_order": lambda cls: _set_get(cls, "mlp", 0, np.asfortranarray(np.arange(16, dtype=F32).reshape(2, 8))),
    "set_strided": lambda cls: _set_get(cls, "mlp", 0, np.arange(32, dtype=F32).reshape(2, 16)[:, ::2]),
    "set_output_tensor": lambda cls: _set_get(cls, "mlp", 5, np.ones((2, 4), F32)),
    "set_negative_index": lambda cls: corpus(cls, "mlp").set_tensor(-1, _F8),
    # indices
    "get_negative_subgraph": lambda cls: corpus(cls, "while_counter").get_tensor(0, -1),
    "get_subgraph_out_of_range": lambda cls: corpus(cls, "while_counter").get_tensor(0, 3),
    "get_tensor_out_of_range_in_subgraph": lambda cls: corpus(cls, "while_counter").get_tensor(99, 1),
    "get_constant_before_allocate": lambda cls: corpus(cls, "mlp", allocate=False).get_tensor(1),
    "get_output_before_allocate": lambda cls: corpus(cls, "mlp", allocate=False).get_tensor(5),
    "get_float_index": lambda cls: corpus(cls, "mlp").get_tensor(1.0),
    "get_numpy_index": lambda cls: corpus(cls, "mlp").get_tensor(np.int64(0)).shape,
    "details_negative_subgraph": lambda cls: corpus(cls, "while_nested").get_tensor_details(-1),
    "details_subgraph_out_of_range": lambda cls: corpus(cls, "while_nested").get_tensor_details(5),
    "details_str_subgraph": lambda cls: corpus(cls, "while_nested").get_tensor_details("0"),
    "details_private_bad_tensor": lambda cls: corpus(cls, "while_nested")._get_tensor_details(99, 2),
    "details_private_other_subgraph": lambda cls: corpus(cls, "while_nested")._get_tensor_details(1, 2),
    "op_details_out_of_range": lambda cls: corpus(cls, "mlp")._get_op_details(99),
    "op_details_negative": lambda cls: corpus(cls, "mlp")._get_op_details(-1),
    "view_negative_index": lambda cls: corpus(cls, "mlp").tensor(-1)(),
    # tensor() views held across calls that may reallocate
    "view_held_invoke": lambda cls: _view_then(cls, lambda it: it.invoke()),
    "view_held_allocate": lambda cls: _view_then(cls, lambda it: it.allocate_tensors()),
    "view_held_resize": lambda cls: _view_then(cls, lambda it: it.resize_tensor_input(0, [2, 12])),
    "view_held_get_tensor": lambda cls: _view_then(cls, lambda it: it.get_tensor(0).shape),  # values unset
    "view_held_set_tensor": lambda cls: _view_then(cls, lambda it: it.set_tensor(0, np.ones((1, 12), I32))),
    "view_held_details": lambda cls: _view_then(cls, lambda it: it.get_input_details()),
    "view_held_reset_variables": lambda cls: _view_then(cls, lambda it: it.reset_all_variables()),
    "view_held_runner_call": lambda cls: _view_then(cls, lambda it: it.get_signature_runner()(
        attention_mask=_IDS, input_ids=_IDS, token_type_ids=_IDS)),
    "view_held_while_model": lambda cls: _view_then(cls, lambda it: it.invoke(), "while_dynamic_input"),
    "output_view_held_invoke": lambda cls: _holding_output_view(cls),
    # signature runners
    "runner_missing_input": lambda cls: _runner(cls, "bert_classifier_dynamic_batch")(attention_mask=_IDS, input_ids=_IDS),
    "runner_extra_input": lambda cls: _runner(cls)(x=_F8, y=_F8),
    "runner_misspelt_input": lambda cls: _runner(cls)(X=_F8),
    "runner_tensor_name_not_signature_name": lambda cls: _runner(cls)(**{"serving_default_x:0": _F8}),
    "runner_float64": lambda cls: _runner(cls)(x=np.ones((2, 8))),
    "runner_int_ids_as_int64": lambda cls: _runner(cls, "bert_classifier_dynamic_batch")(
        attention_mask=_IDS, input_ids=_IDS.astype(np.int64), token_type_ids=_IDS),
    "runner_python_list": lambda cls: _runner(cls)(x=_F8.tolist()),
    "runner_wrong_rank": lambda cls: _runner(cls)(x=np.ones((2, 8, 1), F32)),
    "runner_batch_resize": lambda cls: _runner(cls, "mlp_dynamic_batch")(x=np.ones((7, 6), F32)),
    "runner_key_zero": lambda cls: corpus(cls, "mlp").get_signature_runner(0),
    "runner_empty_key": lambda cls: corpus(cls, "mlp").get_signature_runner(""),
    "runner_unknown_key": lambda cls: corpus(cls, "mlp").get_signature_runner("serving"),
    "runner_no_signature": lambda cls: corpus(cls, "while_counter").get_signature_runner(),
    "runner_direct_construction": lambda cls: _runner_class(cls)(interpreter=corpus(cls, "mlp"), signature_key="x"),
    "runner_no_interpreter": lambda cls: _runner_class(cls)(signature_key="serving_default"),
    # construction
    "model_path_pathlib": lambda cls: cls(model_path=CORPUS / "mlp.tflite").get_input_details(),
    "model_empty_bytes": lambda cls: cls(model_content=b""),
    "threads_numpy_int": lambda cls: cls(model_path=str(CORPUS / "mlp.tflite"), num_threads=np.int64(2)),
    "threads_negative": lambda cls: cls(model_path=str(CORPUS / "mlp.tflite"), num_threads=-1),
    "resolver_by_name": lambda cls: cls(model_path=str(CORPUS / "mlp.tflite"), experimental_op_resolver_type="AUTO"),
    "reset_before_allocate": lambda cls: corpus(cls, "keras_lstm", allocate=False).reset_all_variables(),
    # (not while_counter: LiteRT leaves inputs uninitialised, so its loop count would be garbage)
    "invoke_twice_without_set": lambda cls: [corpus(cls, "mlp").invoke() for _ in range(2)],
    "allocate_returns": lambda cls: corpus(cls, "mlp", allocate=False).allocate_tensors(),
    "registerer_unknown_name": lambda cls: _with_registerers(cls, ["NoSuchRegisterer"]),
    "registerer_unknown_module": lambda cls: _with_registerers(cls, ["no_such_module.fn"]),
    "registerer_not_callable": lambda cls: _with_registerers(cls, [42]),
    # nothing the caller passes in is kept; nothing returned is shared
    "set_tensor_copies_the_value": lambda cls: _mutate_after(cls, "set"),
    "get_tensor_returns_a_copy": lambda cls: _mutate_after(cls, "get"),
    "runner_outputs_are_the_callers": lambda cls: _mutate_after(cls, "runner"),
    "runner_inputs_not_modified": lambda cls: _mutate_after(cls, "runner_inputs"),
    # string tensors
    "string_set_bytes": lambda cls: _string_run(cls, np.array([b"a", b"bc", b"def"])),
    "string_set_unicode": lambda cls: _string_run(cls, np.array(["a", "bc", "d\u00e9f"])),
    "string_set_object": lambda cls: _string_run(cls, np.array([b"a", "bc", b""], dtype=object)),
    "string_set_numbers": lambda cls: _string_run(cls, np.array([1, 2, 3])),
    "string_set_wrong_shape": lambda cls: _string_run(cls, np.array([b"a", b"bc"])),
    # several signatures on one interpreter, resized through their runners in turn
    "signatures_interleaved": lambda cls: _signatures_interleaved(cls),
}


def _mutate_after(cls: type, what: str) -> Any:
    it = corpus(cls, "mlp")
    x = np.linspace(-1, 1, 16, dtype=F32).reshape(2, 8)
    if what == "set":
        it.set_tensor(0, x)
        x[...] = 5
        return it.get_tensor(0)
    if what == "get":
        it.set_tensor(0, x)
        it.get_tensor(0)[...] = 9
        return it.get_tensor(0)
    runner = it.get_signature_runner()
    first = runner(x=x)
    if what == "runner_inputs":
        return x
    first["output_0"][...] = 1
    return [first, runner(x=x)]


def _string_model() -> bytes:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x, i, o = sg.tensor("x", [3], object), sg.tensor("i", [2], I32), sg.tensor("o", [2], object)
    sg.op("GATHER", [x, i], [o], axis=0, batch_dims=0)
    sg.inputs, sg.outputs = [x, i], [o]
    return mb.to_bytes()


def _string_run(cls: type, value: Any) -> list:
    it = make(cls, _string_model())
    it.allocate_tensors()
    it.set_tensor(0, value)
    it.set_tensor(1, np.array([2, 0], I32))
    it.invoke()
    return [it.get_tensor(2), it.get_tensor(0), it.get_input_details(), it.get_output_details()]


def _signatures_interleaved(cls: type) -> list:
    it = make(cls, model("signatures"))
    add, sub = it.get_signature_runner("add_fn"), it.get_signature_runner("sub_fn")
    seen = [add(x=np.ones(4, F32), y=np.arange(4, dtype=F32)), sub(x=np.ones(2, F32), y=np.ones(2, F32) * 3),
            add.get_input_details(), sub.get_output_details(), add(x=np.ones(1, F32), y=np.ones(1, F32)),
            add.get_output_details(), sub.get_input_details()]
    del add, sub
    it.allocate_tensors()
    seen += [it.get_input_details(), it.get_output_details(), it.get_tensor_details(1)]
    return seen


def _with_registerers(cls: type, registerers: list) -> Any:
    custom = litert.InterpreterWithCustomOps if cls is litert.Interpreter else OnertInterpreterWithCustomOps
    return custom(custom_op_registerers=registerers, model_path=str(CORPUS / "mlp.tflite")).get_input_details()


def _runner_class(cls: type) -> type:
    return litert.SignatureRunner if cls is litert.Interpreter else OnertSignatureRunner


def _run_after_resize(cls: type, shape: list[int], name: str = "mlp_dynamic_batch") -> list:
    it = _resized(cls, shape, name)
    it.allocate_tensors()
    it.set_tensor(0, np.linspace(-1, 1, int(np.prod(shape)), dtype=F32).reshape(shape))
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()] + [it.get_output_details()]


def _strict_both_dims(cls: type) -> list:
    it = corpus(cls, "transformer_dynamic_seq")
    it.resize_tensor_input(0, [3, 5], strict=True)
    it.allocate_tensors()
    return [it.get_input_details(), it.get_output_details()]


def _set_get(cls: type, name: str, index: int, value: Any) -> Any:
    it = corpus(cls, name)
    it.set_tensor(index, value)
    return it.get_tensor(index)


def _holding_output_view(cls: type) -> Any:
    it = corpus(cls, "mlp")
    out = it.tensor(it.get_output_details()[0]["index"])()
    try:
        it.invoke()
    finally:
        del out


def _outcome_value(fn: Callable[[type], Any], cls: type) -> tuple[type | None, Any]:
    """(exception type or None, the value returned)."""
    try:
        return None, fn(cls)
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return _outcome(lambda c: (_ for _ in ()).throw(e), cls), None


@pytest.mark.parametrize("case", sorted(CORPUS_MISUSE))
def test_corpus_misuse_same_outcome(case: str) -> None:
    """Same exception type; when both succeed, the same returned values and details."""
    expected, ref = _outcome_value(CORPUS_MISUSE[case], litert.Interpreter)
    got, ours = _outcome_value(CORPUS_MISUSE[case], OnertInterpreter)
    assert got is expected, f"{case}: onert-py -> {got}, LiteRT -> {expected}"
    if expected is None and not isinstance(ref, (litert.Interpreter, litert.SignatureRunner)):
        assert_same(ours, ref, case, tol=CORPUS_TOL)


# ---------------------------------------------------------------- dynamic shapes in sequence
DYNAMIC_SEQUENCES: dict[str, list[list[list[int]]]] = {   # model -> per step, the shape of each input
    "mlp_dynamic_batch": [[[1, 6]], [[4, 6]], [[0, 6]], [[4, 6]], [[2, 6]]],
    "bert_classifier_dynamic_batch": [[[1, 12]] * 3, [[3, 12]] * 3, [[1, 12]] * 3],
    "transformer_dynamic_seq": [[[1, 4]], [[2, 9]], [[2, 1]], [[1, 4]]],
    "op_add_float32_dynamic": [[[3, 5], [3, 5]], [[1, 5], [1, 5]], [[6, 5], [6, 5]]],
    "while_dynamic_input": [[[3, 2]], [[1, 2]], [[5, 2]]],
    "op_shape_dynamic": [[[2, 3, 4]], [[5, 3, 1]]],
}


def dynamic_script(cls: type, name: str, steps: list[list[list[int]]], runner: bool) -> list:
    """Resize to each step's shapes, allocate, set, invoke (or the same through the signature runner,
    which resizes by itself); record details and outputs after each step."""
    it = corpus(cls, name, allocate=False)
    seen = []
    rng = np.random.default_rng(7)
    for shapes in steps:
        details = it.get_input_details()
        inputs = []
        for d, shape in zip(details, shapes):
            if np.issubdtype(d["dtype"], np.integer):
                inputs.append(rng.integers(0, 2, shape).astype(d["dtype"]))   # ids, masks, token types
            else:
                inputs.append(rng.standard_normal(shape).astype(d["dtype"]))
        if runner:
            run = it.get_signature_runner()
            names = {d["index"]: n for n, d in run.get_input_details().items()}
            seen.append(run(**{names[d["index"]]: x for d, x in zip(details, inputs)}))
            seen.append([run.get_input_details(), run.get_output_details()])
            del run
        else:
            for d, shape in zip(details, shapes):
                it.resize_tensor_input(d["index"], shape, strict=True)
            seen.append(it.get_input_details())
            it.allocate_tensors()
            for d, x in zip(details, inputs):
                it.set_tensor(d["index"], x)
            it.invoke()
            seen.append([it.get_tensor(d["index"]) for d in it.get_output_details()])
        seen.append([it.get_input_details(), it.get_output_details()])
    return seen


@pytest.mark.parametrize("name,runner", [(n, False) for n in sorted(DYNAMIC_SEQUENCES)] + [
    (n, True) for n in ("bert_classifier_dynamic_batch", "mlp_dynamic_batch", "transformer_dynamic_seq")])
def test_dynamic_shapes_in_sequence(name: str, runner: bool) -> None:
    steps = DYNAMIC_SEQUENCES[name]
    ref = dynamic_script(litert.Interpreter, name, steps, runner)
    ours = dynamic_script(OnertInterpreter, name, steps, runner)
    assert_same(ours, ref, name, tol=CORPUS_TOL)


# ---------------------------------------------------------------- experimental_preserve_all_tensors
# Models with intermediates worth reading (single-op models have none).
MULTI_OP_MODELS = [n for n in CORPUS_MODELS if not n.startswith("op_")]


def intermediates_script(cls: type, name: str) -> dict[int, Any]:
    """Every model tensor of subgraph 0 after invoke (None where get_tensor raises ValueError)."""
    it = corpus(cls, name, allocate=False, experimental_preserve_all_tensors=True,
                **({} if cls is litert.Interpreter else {
                    "experimental_op_resolver_type": litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}))
    inputs = corpus_inputs(name)[0]
    for d, x in zip(it.get_input_details(), inputs):
        if tuple(d["shape"]) != x.shape:
            it.resize_tensor_input(d["index"], x.shape)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    seen: dict[int, Any] = {}
    for i in range(len(load_model(str(CORPUS / f"{name}.tflite")).subgraphs[0].tensors)):
        try:   # LiteRT adds kernel temporaries after the model's tensors: those are not compared
            seen[i] = it.get_tensor(i)
        except ValueError:
            seen[i] = None
    return seen


@pytest.mark.parametrize("name", kernel_params(MULTI_OP_MODELS, CORPUS))
def test_preserved_intermediates(name: str) -> None:
    """With experimental_preserve_all_tensors every intermediate of the main subgraph holds LiteRT's
    value after invoke. LiteRT leaves WHILE outputs nothing reads unallocated (get_tensor raises);
    we hold their values, so those are not compared."""
    ref = intermediates_script(litert.Interpreter, name)
    ours = intermediates_script(OnertInterpreter, name)
    model = load_model(str(CORPUS / f"{name}.tflite")).subgraphs[0]
    read = {i for op in model.operations for i in op.inputs} | set(model.outputs)
    for i, r in ref.items():
        t = model.tensors[i]
        if r is None:
            assert i not in read and any(i in op.outputs and op.kernel_name == "WHILE" for op in model.operations), \
                f"{name}: LiteRT has no value for tensor {i} ({t.name!r})"
            continue
        # deep intermediates carry more float32 rounding than the corpus's outputs are checked with
        assert_same(ours[i], r, f"{name} tensor {i} ({t.name!r})", tol=1e-4)


# ---------------------------------------------------------------- state: variable tensors, resources
def _variable_model() -> bytes:
    """out = x + v with v a variable tensor (the state RNN/LSTM kernels keep between invokes)."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x, v, o = sg.tensor("x", [3], F32), sg.tensor("v", [3], F32, is_variable=True), sg.tensor("out", [3], F32)
    sg.op("ADD", [x, v], [o], fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [o]
    return mb.to_bytes()


def _state_script(cls: type, steps: list[str], data: bytes) -> list:
    it = make(cls, data)
    it.allocate_tensors()
    seen: list = []
    x = np.array([1.0, 2.0, 3.0][:it.get_input_details()[0]["shape"][0]], F32)
    for step in steps:
        if step == "invoke":
            it.set_tensor(0, x)
            it.invoke()
            seen.append(it.get_tensor(it.get_output_details()[0]["index"]))
        elif step == "reset":
            it.reset_all_variables()
        elif step == "set_variable":
            it.set_tensor(1, np.array([10.0, 20.0, 30.0], F32))
        elif step == "read_variable":
            seen.append(it.get_tensor(1))
        elif step == "write_variable_view":
            it.tensor(1)()[1] = -5.0
        elif step == "reset_holding_view":
            view = it.tensor(1)()
            it.reset_all_variables()
            seen.append(np.array(view, copy=True))   # LiteRT resets in place: the view sees zeros
            del view
        elif step == "allocate":
            it.allocate_tensors()
    return seen


STATE_SCRIPTS: dict[str, tuple[Callable[[], bytes], list[str]]] = {
    "variable_set_feeds_invoke": (_variable_model, ["invoke", "read_variable", "set_variable", "invoke",
                                                    "read_variable", "invoke"]),
    "variable_reset": (_variable_model, ["set_variable", "invoke", "reset", "read_variable", "invoke"]),
    "variable_view_write": (_variable_model, ["write_variable_view", "invoke", "read_variable"]),
    "variable_reset_in_place": (_variable_model, ["set_variable", "reset_holding_view", "invoke"]),
    "variable_survives_allocate": (_variable_model, ["set_variable", "allocate", "invoke", "read_variable"]),
    # reset_all_variables resets variable tensors only: resource variables keep accumulating and
    # CALL_ONCE does not run again.
    "resource_variable_not_reset": (lambda: accumulator_model().to_bytes(), ["invoke", "invoke", "reset", "invoke"]),
}


@pytest.mark.parametrize("case", sorted(STATE_SCRIPTS))
def test_state_same_observations(case: str) -> None:
    build, steps = STATE_SCRIPTS[case]
    data = build()
    assert_same(_state_script(OnertInterpreter, steps, data), _state_script(litert.Interpreter, steps, data), case)


# ---------------------------------------------------------------- deliberate differences
# LiteRT behaviour we do not copy; each case must still differ (strict xfail), so a change on either
# side is noticed.
def _bigendian_set(cls: type) -> Any:
    it = corpus(cls, "mlp")
    value = np.arange(16, dtype=">f4").reshape(2, 8)
    it.set_tensor(0, value)
    return it.get_tensor(0)


def _rank0_view(cls: type) -> Any:
    it = corpus(cls, "while_counter")
    return type(it.tensor(0)())


def _runner_alive_invoke(cls: type) -> Any:
    it = corpus(cls, "mlp")
    runner = it.get_signature_runner()
    it.invoke()
    return runner is not None


DELIBERATE: dict[str, tuple[Callable[[type], Any], str]] = {
    "set_tensor_byte_swapped": (_bigendian_set, "LiteRT copies the raw bytes of a '>f4' array into a float32 "
                                "tensor (garbage values); we convert it to the tensor's byte order"),
    "rank0_view_is_a_copy": (_rank0_view, "LiteRT's tensor(i)() of a rank-0 tensor is a numpy scalar copy, "
                             "so writes through it are lost; ours is a writeable 0-d view like other ranks"),
    "runner_pins_interpreter": (_runner_alive_invoke, "LiteRT's SignatureRunner holds a reference that makes "
                                "invoke()/allocate_tensors() refuse to run while the runner exists"),
    "set_tensor_string_list": (lambda cls: _string_list_set(cls), "LiteRT refuses Python lists for string tensors (but accepts them for numbers); "
                               "we accept both"),
    "model_content_bytearray": (lambda cls: cls(model_content=bytearray((CORPUS / "mlp.tflite").read_bytes()))
                                .get_input_details(), "LiteRT's model_content takes bytes only (TypeError for "
                                "bytearray/memoryview); we take any buffer"),
    "tensor_details_kernel_temporaries": (lambda cls: len(corpus(cls, "cond_chain").get_tensor_details()),
                                          "after allocate_tensors LiteRT's get_tensor_details also lists the "
                                          "unnamed scratch tensors its kernels add; we list the model's tensors"),
    "fully_connected_input_not_a_multiple": (lambda cls: _runner(cls)(x=np.ones((2, 9), F32)),
                                             "LiteRT runs FULLY_CONNECTED on an input resized to 18 elements with "
                                             "input size 8 (silently ignoring 2 of them); we raise RuntimeError"),
}


def _string_list_set(cls: type) -> Any:
    return _string_run(cls, [b"a", b"bc", b"def"])[0]


@pytest.mark.parametrize("case", [pytest.param(k, marks=pytest.mark.xfail(strict=True, reason=why))
                                  for k, (_, why) in sorted(DELIBERATE.items())])
def test_deliberate_difference(case: str) -> None:
    fn = DELIBERATE[case][0]
    expected, ref = _outcome_value(fn, litert.Interpreter)
    got, ours = _outcome_value(fn, OnertInterpreter)
    assert got is expected, f"{case}: onert-py -> {got}, LiteRT -> {expected}"
    assert_same(ours, ref, case)


def test_deliberate_differences_do_the_right_thing() -> None:
    """What we do instead, checked against the values themselves."""
    np.testing.assert_array_equal(_bigendian_set(OnertInterpreter), np.arange(16, dtype=F32).reshape(2, 8))
    it = corpus(OnertInterpreter, "while_counter")   # the input written through its 0-d view
    it.tensor(0)()[...] = 4
    it.invoke()
    assert it.get_tensor(it.get_output_details()[0]["index"]) == _while_counter_litert(4)
    assert _runner_alive_invoke(OnertInterpreter)
    np.testing.assert_array_equal(_string_list_set(OnertInterpreter), np.array([b"def", b"a"], dtype=object))
    with pytest.raises(RuntimeError, match="FULLY_CONNECTED"):
        _runner(OnertInterpreter)(x=np.ones((2, 9), F32))


def _while_counter_litert(x: int) -> Any:
    it = corpus(litert.Interpreter, "while_counter")
    it.set_tensor(0, np.array(x, I32))
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


# ---------------------------------------------------------------- where LiteRT crashes (segfault)
def test_set_tensor_on_a_constant_is_refused() -> None:
    """LiteRT writes into the model's (memory-mapped, read-only) buffer and crashes; we raise, and a
    tensor() view of a constant is read-only."""
    it = corpus(OnertInterpreter, "mlp")
    weights = it.get_tensor(1)
    with pytest.raises(ValueError, match="constant"):
        it.set_tensor(1, np.zeros_like(weights))
    view = it.tensor(1)()
    assert not view.flags.writeable
    with pytest.raises(ValueError):
        view[...] = 0
    del view
    np.testing.assert_array_equal(it.get_tensor(1), weights)


def test_private_details_bad_subgraph_is_a_value_error() -> None:
    """LiteRT's _get_tensor_details(i, bad subgraph) crashes; ours raises ValueError like the others."""
    with pytest.raises(ValueError, match="subgraph"):
        corpus(OnertInterpreter, "while_nested")._get_tensor_details(1, 9)


# ---------------------------------------------------------------- the API's shape
# LiteRT's methods a script may call (public ones, and the private ones tools use).
API_METHODS = {
    "Interpreter": ["__init__", "allocate_tensors", "invoke", "set_tensor", "get_tensor", "tensor",
                    "resize_tensor_input", "get_input_details", "get_output_details", "get_tensor_details",
                    "get_signature_list", "get_signature_runner", "reset_all_variables", "num_subgraphs",
                    "_get_ops_details", "_get_op_details", "_get_tensor_details", "_get_full_signature_list"],
    "InterpreterWithCustomOps": ["__init__"],
    "SignatureRunner": ["__init__", "__call__", "get_input_details", "get_output_details"],
}


@pytest.mark.parametrize("cls_name,method", [(c, m) for c, ms in API_METHODS.items() for m in ms])
def test_same_parameters(cls_name: str, method: str) -> None:
    """Same parameter names, kinds and defaults, in the same order (ours may add parameters after)."""
    import inspect

    import onert_py.interpreter as ours_module

    def params(cls: type) -> list[tuple]:
        return [(p.name, p.kind, p.default if not isinstance(p.default, enum.Enum) else p.default.name)
                for p in inspect.signature(getattr(cls, method)).parameters.values()]
    ref = params(getattr(litert, cls_name))
    ours = params(getattr(ours_module, cls_name))
    assert ours[:len(ref)] == ref
    assert all(p[2] is not inspect.Parameter.empty or p[1] is inspect.Parameter.VAR_KEYWORD for p in ours[len(ref):])


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")   # LiteRT's half-made Delegate
def test_module_level_names() -> None:
    """Everything `from ai_edge_litert.interpreter import ...` offers but Delegate (a ctypes wrapper of a
    delegate library, which onert-py cannot use). load_delegate: OSError for a missing library as in
    LiteRT; ValueError for any other, as LiteRT's for a delegate it cannot create."""
    import onert_py.interpreter as ours_module
    for name in ("Interpreter", "InterpreterWithCustomOps", "SignatureRunner", "OpResolverType", "load_delegate"):
        assert hasattr(ours_module, name), name
    assert [m.name for m in ours_module.OpResolverType] == [m.name for m in litert.OpResolverType]
    assert [m.value for m in ours_module.OpResolverType] == [m.value for m in litert.OpResolverType]
    for load in (litert.load_delegate, ours_module.load_delegate):
        with pytest.raises(OSError):
            load("/nonexistent/libdelegate.so")
    with pytest.raises(ValueError, match="Failed to load delegate"):
        ours_module.load_delegate(ctypes.util.find_library("c") or "libc.so.6")   # loadable, not a delegate
