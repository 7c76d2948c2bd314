"""One script, run on onert's own Python binding (`onert.infer.session`, the peer this API copies) and
on `onert_py.infer.session`: tensorinfo fields, outputs, metrics keys, the native-style low-level calls
and the exception types of misuse must agree. Every reference value comes from onert (or, where onert
0.1.0 is buggy, from LiteRT or the values themselves)."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import onert_py

onert = pytest.importorskip("onert")
litert = pytest.importorskip("ai_edge_litert.interpreter")

CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "corpus"
F32, I32 = np.float32, np.int32
# Corpus models onert 0.1.0 loads and runs to LiteRT's results (others use ops or ranks it lacks,
# and a few crash it): plain graphs, IF/WHILE, dynamic batch, and int64/bool/uint8 I/O.
MODELS = [
    "cond_chain", "convnet", "efficientnet_blocks", "greedy_decode_grow", "keras_gru", "mlp",
    "mlp_dynamic_batch", "mobilenet_v2", "tensorarray_fixed", "while_data_dependent", "while_dynamic_input",
    "op_add_float32_dynamic", "op_add_int64_bcast", "op_arg_max_int32", "op_cast_bool_to_float32",
    "op_cast_float32_to_bool", "op_cast_float32_to_uint8", "op_cast_int32_to_int64", "op_exp_dynamic",
    "op_fully_connected_dynamic", "op_gather_axis1_int64", "op_logical_and", "op_reduce_any",
    "op_reduce_sum_float32_ax0_1_2", "op_select_v2_bcast", "op_shape_dynamic", "op_shape_int64",
    "op_strided_slice_shrink", "op_zeros_like_dynamic",
]
TOL = 1e-4   # two different kernel libraries


def corpus_inputs(name: str) -> list[np.ndarray]:
    ref = np.load(CORPUS / f"{name}.npz")
    keys = sorted((k for k in ref.files if k.startswith("in_")), key=lambda k: int(k[3:]))
    return [ref[k] for k in keys]


def open_session(mod: Any, name: str) -> Any:
    return mod.infer.session(str(CORPUS / f"{name}.tflite"), "cpu")


def info(i: Any) -> tuple:
    """What onert's tensorinfo holds (ours also has a name)."""
    return (i.dtype, i.rank, list(i.dims))


def session_script(mod: Any, name: str) -> dict[str, Any]:
    s = open_session(mod, name)
    inputs = corpus_inputs(name)
    seen: dict[str, Any] = {
        "sizes": (s.input_size(), s.output_size()),
        "inputs_tensorinfo": [info(i) for i in s.get_inputs_tensorinfo()],
        "outputs_tensorinfo": [info(i) for i in s.get_outputs_tensorinfo()],
        "input_tensorinfo": [info(s.input_tensorinfo(k)) for k in range(s.input_size())],
        "output_tensorinfo": [info(s.output_tensorinfo(k)) for k in range(s.output_size())],
    }
    outputs, metrics = s.infer(inputs, measure=True)
    seen["outputs"] = [np.array(o) for o in outputs]
    seen["metrics_first"] = sorted(metrics)
    seen["metric_types"] = sorted({type(v).__name__ for v in metrics.values()})
    seen["inputs_tensorinfo_after"] = [info(i) for i in s.get_inputs_tensorinfo()]
    # dtype and rank here; dims are checked against the outputs (onert 0.1.0 reports stale dims for
    # outputs whose shape depends on values, e.g. a WHILE growing a tensor)
    seen["outputs_tensorinfo_after"] = [info(i)[:2] for i in s.get_outputs_tensorinfo()]
    seen["outputs_dims_after"] = [list(i.dims) for i in s.get_outputs_tensorinfo()]
    seen["inputs_attr"] = [np.array(a) for a in s.inputs]
    seen["outputs_attr"] = [np.array(a) for a in s.outputs]
    outputs, metrics = s.infer(inputs, measure=True)
    seen["outputs_again"] = [np.array(o) for o in outputs]
    seen["metrics_again"] = sorted(metrics)
    seen["plain_infer_type"] = type(s.infer(inputs)).__name__
    for k, x in enumerate(inputs):   # onert's native calls, behind its infer()
        s.set_input(k, x)
    s.run()
    seen["get_output"] = [s.get_output(k) for k in range(s.output_size())]
    return seen


def assert_agree(ours: Any, ref: Any, where: str = "") -> None:
    if isinstance(ref, dict):
        assert list(ours) == list(ref), where
        for k in ref:
            assert_agree(ours[k], ref[k], f"{where}.{k}")
    elif isinstance(ref, (list, tuple)):
        assert type(ours) is type(ref) and len(ours) == len(ref), f"{where}: {ours!r} vs onert {ref!r}"
        for k, (a, b) in enumerate(zip(ours, ref)):
            assert_agree(a, b, f"{where}[{k}]")
    elif isinstance(ref, np.ndarray):
        assert isinstance(ours, np.ndarray), where
        assert ours.dtype == ref.dtype and ours.shape == ref.shape, \
            f"{where}: {ours.dtype}{ours.shape} vs onert {ref.dtype}{ref.shape}"
        np.testing.assert_allclose(ours, ref, rtol=TOL, atol=TOL, err_msg=where)
    else:
        assert type(ours) is type(ref) and ours == ref, f"{where}: {ours!r} vs onert {ref!r}"


@pytest.mark.parametrize("name", MODELS)
def test_same_observations_as_onert(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # onert warns about shapes it fixes on the first infer
        ref = session_script(onert, name)
    ours = session_script(onert_py, name)
    assert ours.pop("outputs_dims_after") == [list(o.shape) for o in ref["outputs"]]
    ref.pop("outputs_dims_after")
    assert_agree(ours, ref, name)


def test_tensorinfo_behaves_like_onerts() -> None:
    """Default construction and the rank/dims coupling of onert's native tensorinfo."""
    def script(make: Callable[[], Any]) -> list:
        t = make()
        seen = [(t.dtype, t.rank, list(t.dims))]
        t.dims = [2, 3]
        seen.append((t.rank, list(t.dims)))
        t.rank = 4
        seen.append((t.rank, list(t.dims)))
        t.rank = 1
        seen.append((t.rank, list(t.dims)))
        return seen
    from onert.native.libnnfw_api_pybind import tensorinfo as native
    assert script(onert_py.tensorinfo) == script(native)
    assert onert_py.infer.tensorinfo is onert_py.tensorinfo


def test_update_inputs_tensorinfo_then_infer() -> None:
    """Fixing -1 dims before the first infer: input dims as given, the run's outputs as onert's."""
    def run(mod: Any) -> list:
        s = open_session(mod, "mlp_dynamic_batch")
        infos = s.get_inputs_tensorinfo()
        infos[0].dims = [5, 6]
        update = getattr(s, "update_inputs_tensorinfo", None) or s._update_inputs_tensorinfo
        update(infos)
        seen = [[info(i) for i in s.get_inputs_tensorinfo()]]
        seen.append(s.infer([np.linspace(-1, 1, 30, dtype=F32).reshape(5, 6)]))
        seen.append([info(i) for i in s.get_outputs_tensorinfo()])
        return seen
    assert_agree(run(onert_py), run(onert))
    # Before the first infer we already know the output dims from shape inference (onert says -1).
    s = open_session(onert_py, "mlp_dynamic_batch")
    s._update_inputs_tensorinfo([onert_py.tensorinfo("x", "float32", dims=[5, 6])])
    assert s.get_outputs_tensorinfo()[0].dims == [5, 3]


def test_inputs_of_another_numeric_dtype_are_converted() -> None:
    """onert converts inputs with np.array(x, dtype=model dtype); so do we where no value changes."""
    x = np.linspace(-2, 2, 18).reshape(3, 6)   # float64, and ints below
    for value in (x, x.tolist(), np.arange(18, dtype=np.int64).reshape(3, 6)):
        ref = open_session(onert, "mlp_dynamic_batch").infer([np.array(value) if isinstance(value, list) else value])
        assert_agree(open_session(onert_py, "mlp_dynamic_batch").infer([value]), ref)
    s = open_session(onert_py, "op_add_int32_bcast")   # where onert would truncate or wrap, we refuse
    shapes = [tuple(i.dims) for i in s.get_inputs_tensorinfo()]
    with pytest.raises(onert_py.InputError, match="float64"):
        s.infer([np.full(shapes[0], 1.5), np.ones(shapes[1], I32)])
    with pytest.raises(onert_py.InputError, match="do not fit"):
        s.infer([np.full(shapes[0], 2**40, np.int64), np.ones(shapes[1], I32)])


def test_shapes_change_between_infers() -> None:
    """A dynamic batch, different on every call: outputs as onert's; the tensorinfo then reports the
    last run's shapes (onert 0.1.0 keeps reporting the first run's output shape: a bug we fix)."""
    x = corpus_inputs("mlp_dynamic_batch")[0]
    batches = [x, np.concatenate([x, x, x]), x[:1]]
    ref_s, ours_s = open_session(onert, "mlp_dynamic_batch"), open_session(onert_py, "mlp_dynamic_batch")
    for b in batches:
        ref = ref_s.infer([b])
        ours = ours_s.infer([b])
        assert_agree(ours, ref)
        assert [i.dims for i in ours_s.get_inputs_tensorinfo()] == [list(b.shape)]
        assert [i.dims for i in ours_s.get_outputs_tensorinfo()] == [list(ref[0].shape)]


def test_rank0_inputs_work() -> None:
    """onert 0.1.0 cannot prepare rank-0 inputs ("unsupported rank: 0", then a NameError in its own
    error path); we run them. Reference: LiteRT."""
    for name in ("while_counter", "cond_in_while", "op_range_float32"):
        inputs = corpus_inputs(name)
        it = litert.Interpreter(model_path=str(CORPUS / f"{name}.tflite"))
        it.allocate_tensors()
        for d, x in zip(it.get_input_details(), inputs):
            it.set_tensor(d["index"], x)
        it.invoke()
        ref = [np.asarray(it.get_tensor(d["index"])) for d in it.get_output_details()]
        s = onert_py.infer.session(str(CORPUS / f"{name}.tflite"))
        out = s.infer(inputs)
        for o, r in zip(out, ref):
            assert o.dtype == r.dtype and o.shape == r.shape
            np.testing.assert_allclose(o, r, rtol=1e-6)
        assert [i.rank for i in s.get_inputs_tensorinfo()] == [x.ndim for x in inputs]


def test_outputs_are_writable_and_the_callers() -> None:
    """onert 0.1.0 returns read-only arrays; ours are the caller's own, and writing them changes
    nothing the session computes next."""
    s = open_session(onert_py, "mlp")
    x = corpus_inputs("mlp")[0]
    first = s.infer([x])
    keep = first[0].copy()
    first[0][...] = 7
    np.testing.assert_array_equal(s.infer([x])[0], keep)
    got = s.get_output(0)
    got[...] = 0
    np.testing.assert_array_equal(s.get_output(0), keep)


def test_nnpackage_directory(tmp_path: Path) -> None:
    """An nnpackage (metadata/MANIFEST naming the model) loads like the file, as in onert."""
    pkg = tmp_path / "mlp_pkg"
    (pkg / "metadata").mkdir(parents=True)
    (pkg / "mlp_dynamic_batch.tflite").write_bytes((CORPUS / "mlp_dynamic_batch.tflite").read_bytes())
    (pkg / "metadata" / "MANIFEST").write_text(
        '{"major-version": "1", "minor-version": "2", "patch-version": "0", "configs": [], '
        '"models": ["mlp_dynamic_batch.tflite"], "model-types": ["tflite"]}')
    x = corpus_inputs("mlp_dynamic_batch")
    ref = onert.infer.session(str(pkg), "cpu")
    ours = onert_py.infer.session(str(pkg), "cpu")
    assert [info(i) for i in ours.get_inputs_tensorinfo()] == [info(i) for i in ref.get_inputs_tensorinfo()]
    assert_agree(ours.infer(x), ref.infer(x))


# ---------------------------------------------------------------- misuse: same exception types
def _update(s: Any, infos: list) -> None:
    (getattr(s, "update_inputs_tensorinfo", None) or s._update_inputs_tensorinfo)(infos)


def _with_dims(s: Any, dims: list[int]) -> list:
    infos = s.get_inputs_tensorinfo()
    infos[0].dims = dims
    return infos


_X = np.ones((3, 6), F32)
MISUSE: dict[str, Callable[[Any], Any]] = {
    "too_many_inputs": lambda m: open_session(m, "mlp_dynamic_batch").infer([_X, _X]),
    "too_few_inputs": lambda m: open_session(m, "op_add_int64_bcast").infer([np.ones((3, 1), np.int64)]),
    "array_instead_of_list": lambda m: open_session(m, "mlp_dynamic_batch").infer(_X),
    "update_wrong_count": lambda m: _update(open_session(m, "mlp_dynamic_batch"), []),
    "update_negative_dims": lambda m: (lambda s: _update(s, _with_dims(s, [-1, 6])))(open_session(m, "mlp_dynamic_batch")),
    "update_ok": lambda m: (lambda s: _update(s, _with_dims(s, [4, 6])))(open_session(m, "mlp_dynamic_batch")),
    "measure_positional": lambda m: open_session(m, "mlp").infer(corpus_inputs("mlp"), True),
    "inputs_array_keyword": lambda m: len(open_session(m, "mlp").infer(inputs_array=corpus_inputs("mlp"))),
    "session_keyword_args": lambda m: m.infer.session(path=str(CORPUS / "mlp.tflite"), backends="cpu").input_size(),
    "tensorinfo_bad_index_type": lambda m: open_session(m, "mlp").input_tensorinfo("0"),
}


def _outcome(fn: Callable[[Any], Any], mod: Any) -> tuple[type | None, Any]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return None, fn(mod)
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        for base in (TypeError, ValueError, RuntimeError):
            if isinstance(e, base):
                return base, None
        return type(e), None


@pytest.mark.parametrize("case", sorted(MISUSE))
def test_misuse_same_exception_type(case: str) -> None:
    expected, ref = _outcome(MISUSE[case], onert)
    got, ours = _outcome(MISUSE[case], onert_py)
    assert got is expected, f"{case}: onert-py -> {got}, onert -> {expected}"
    if expected is None:
        assert_agree(ours, ref, case)


def test_signatures_select_the_subgraph() -> None:
    """onert 0.1.0 has no signature API; ours runs a signature's subgraph with its inputs in subgraph
    order, as LiteRT's signature runner computes it."""
    from onert_py.schema.writer import ModelBuilder
    mb = ModelBuilder()
    for key, opcode in (("sub_fn", "SUB"), ("add_fn", "ADD")):
        sg = mb.subgraph(key)
        y, x, o = sg.tensor(f"{key}_y", [-1, 2], F32), sg.tensor(f"{key}_x", [1, 2], F32), sg.tensor(f"{key}_o", [-1, 2], F32)
        sg.op(opcode, [x, y], [o])
        sg.inputs, sg.outputs = [y, x], [o]
        mb.signature(key, sg, inputs={"y": y, "x": x}, outputs={"result": o})
    data = mb.to_bytes()
    x, y = np.array([[1.0, 2.0]], F32), np.arange(6, dtype=F32).reshape(3, 2)
    s = onert_py.infer.session(data)
    assert s.get_signature_list() == ["sub_fn", "add_fn"]
    for key in ("add_fn", "sub_fn"):
        ref = litert.Interpreter(model_content=data).get_signature_runner(key)(x=x, y=y)["result"]
        s.select_signature(key)
        assert [i.name for i in s.get_inputs_tensorinfo()] == [f"{key}_y", f"{key}_x"]
        np.testing.assert_array_equal(s.infer([y, x])[0], ref)
        assert s.get_outputs_tensorinfo()[0].dims == [3, 2]
    with pytest.raises(onert_py.InputError, match="nope"):
        s.select_signature("nope")


def test_backend_lists_skip_backends_we_lack() -> None:
    """onert runs "cpu;acl_cl" on cpu where ACL is not installed; so do we. A list with none of ours
    fails (onert: when preparing, "No loaded backends available")."""
    x = corpus_inputs("mlp")
    for backends in ("cpu;acl_cl", "acl_cl;cpu", "acl_neon;cpu"):
        ref = onert.infer.session(str(CORPUS / "mlp.tflite"), backends).infer(x)
        assert_agree(onert_py.infer.session(str(CORPUS / "mlp.tflite"), backends).infer(x), ref)
    with pytest.raises(ValueError, match="available"):
        onert_py.infer.session(str(CORPUS / "mlp.tflite"), "acl_cl;ruy")
    with pytest.raises(ValueError, match="unknown backend 'CPU'"):
        onert_py.infer.session(str(CORPUS / "mlp.tflite"), "CPU")
