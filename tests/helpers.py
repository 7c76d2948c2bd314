"""Shared test helpers: build single-op models, run them on onert-py and on LiteRT, compare."""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import numpy as np
import pytest

import onert_py
from onert_py.compiler import compile_model
from onert_py.compiler.shape_inference import infer_shapes
from onert_py.schema.writer import ModelBuilder

FORMATS = ("tflite", "circle")


def single_op_model(opcode: str, inputs: Sequence[Any], outputs: Sequence[tuple], *,
                    custom_code: str | None = None, **options: Any) -> ModelBuilder:
    """A one-op model.

    inputs: per op input, either ("name", shape, dtype) for a model input, ("const", array) for a
    constant, or None for an omitted optional input. outputs: ("name", shape, dtype) per op output.
    A quantized tensor's spec ends with its quantization (scale, zero_point[, quantized_dimension]):
    ("name", shape, dtype, q), ("const", array, q).
    """
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    op_inputs = []
    for k, spec in enumerate(inputs):
        if spec is None:
            op_inputs.append(-1)
        elif spec[0] == "const":
            op_inputs.append(sg.const(f"const{k}", spec[1], quantization=spec[2] if len(spec) > 2 else None))
        else:
            name, shape, dtype = spec[:3]
            idx = sg.tensor(name, shape, dtype, quantization=spec[3] if len(spec) > 3 else None)
            op_inputs.append(idx)
            sg.inputs.append(idx)
    op_outputs = [sg.tensor(spec[0], spec[1], spec[2], quantization=spec[3] if len(spec) > 3 else None)
                  for spec in outputs]
    sg.outputs = list(op_outputs)
    sg.op(opcode, op_inputs, op_outputs, custom_code=custom_code, **options)
    mb.signature("serving_default", sg)
    return mb


def run_onert(model: bytes | ModelBuilder, inputs: Sequence[np.ndarray], fmt: str = "tflite",
              **session_options: Any) -> list[np.ndarray]:
    """Run on onert-py, and check that shape inference agrees with the shapes the run produced, so
    every op test covers its op's shape rule. Without `backends`, the model runs on both compute
    backends when numba is installed: the jit result is returned (the caller checks it against its
    reference) and the cpu one must agree with it (cross_backend_check)."""
    data = model.to_bytes(fmt) if isinstance(model, ModelBuilder) else model
    outputs = onert_py.infer.session(data, **session_options).infer(list(inputs))
    check_inferred_shapes(data, inputs, outputs)
    if "backends" not in session_options and JIT_AVAILABLE and not _all_cpu(data):
        cpu = onert_py.infer.session(data, backends="cpu", **session_options).infer(list(inputs))
        cross_backend_check(outputs, cpu)
    return outputs


def _jit_available() -> bool:
    from onert_py.backends import jit
    return jit.installed() and jit.load()


JIT_AVAILABLE = _jit_available()


def _all_cpu(data: bytes) -> bool:
    """No op of the model goes to the jit backend (so a second run on cpu would repeat the first)."""
    from onert_py.compiler.compile import assign_backend, backend_names, quantized_type
    from onert_py.compiler.specialize import has_dynamic_shapes
    model = onert_py.load_model(data)
    if has_dynamic_shapes(model):
        return False   # compiled for the shapes it runs with, where the jit may take its ops
    names = backend_names("jit;cpu")
    return all(getattr(assign_backend(op, names, quantized_type(op, sg), sg), "name", None) != "jit"
               for sg in model.subgraphs for op in sg.operations)


def declared_backends(model: bytes | ModelBuilder, backends: str = "jit;cpu") -> list[str]:
    """The backend of each op of subgraph 0 compiled as declared, its dynamic shapes left dynamic
    (sessions and the Interpreter compile such a model again for the shapes it runs with)."""
    data = model.to_bytes("tflite") if isinstance(model, ModelBuilder) else model
    return compile_model(onert_py.load_model(data), backends=backends)[0].backend_names


def cross_backend_check(jit_outputs: Sequence[np.ndarray], cpu_outputs: Sequence[np.ndarray]) -> None:
    """The jit and cpu backends agree: integers bit for bit, floats within a few float32 roundings of
    the output's scale (the backends sum in different orders: BLAS blocks, the jit kernels run taps in
    sequence)."""
    assert len(jit_outputs) == len(cpu_outputs)
    for k, (j, c) in enumerate(zip(jit_outputs, cpu_outputs)):
        j, c = np.asarray(j), np.asarray(c)
        assert j.shape == c.shape and j.dtype == c.dtype, f"output {k}: jit {j.dtype}{j.shape}, cpu {c.dtype}{c.shape}"
        if j.dtype.kind in "fc":
            finite = np.isfinite(c)
            scale = float(np.abs(c[finite]).max()) if finite.any() else 1.0
            np.testing.assert_allclose(j, c, rtol=1e-4, atol=1e-5 * max(scale, 1.0), equal_nan=True,
                                       err_msg=f"output {k}: jit and cpu backends disagree")
        else:
            np.testing.assert_array_equal(j, c, err_msg=f"output {k}: jit and cpu backends disagree")


def check_inferred_shapes(data: bytes, inputs: Sequence[Any], outputs: Sequence[np.ndarray]) -> None:
    """The shape rules' output shapes of subgraph 0 for these input shapes agree with the run's: a
    known rank and every known dim (not -1) must be the run's."""
    model = onert_py.load_model(data)
    result = infer_shapes(model, 0, [np.shape(x) for x in inputs])
    for k, (inferred, got) in enumerate(zip(result.output_shapes(model), outputs)):
        shape = np.shape(got)
        ok = inferred is None or (len(inferred) == len(shape)
                                  and all(d < 0 or d == g for d, g in zip(inferred, shape)))
        assert ok, f"output {k}: shape inference says {list(inferred)}, the run gave {list(shape)}"


def litert_interpreter(data: bytes):
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    return litert.Interpreter(model_content=data)


def run_litert(model: bytes | ModelBuilder, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run on LiteRT's interpreter (the reference); inputs are resized when their shape differs."""
    data = model.to_bytes("tflite") if isinstance(model, ModelBuilder) else model
    return run_interpreter(litert_interpreter(data), inputs)


def run_interpreter(it, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The outputs of an Interpreter (LiteRT's or onert-py's) on these inputs, each input resized first
    when its shape differs from the declared one."""
    details = it.get_input_details()
    for d, x in zip(details, inputs):
        if tuple(d["shape"]) != np.shape(x):
            it.resize_tensor_input(d["index"], list(np.shape(x)))
    it.allocate_tensors()
    for d, x in zip(details, inputs):
        it.set_tensor(d["index"], np.asarray(x, dtype=d["dtype"]))
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def assert_close(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], rtol: float = 1e-5,
                 atol: float = 1e-6) -> None:
    assert len(actual) == len(expected), f"{len(actual)} outputs, expected {len(expected)}"
    for k, (a, e) in enumerate(zip(actual, expected)):
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape, f"output {k}: shape {a.shape}, expected {e.shape}"
        assert a.dtype == e.dtype, f"output {k}: dtype {a.dtype}, expected {e.dtype}"
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"output {k}")
        else:
            np.testing.assert_array_equal(a, e, err_msg=f"output {k}")


def assert_matches_litert(model: ModelBuilder, inputs: Sequence[np.ndarray], rtol: float = 1e-5,
                          atol: float = 1e-6, fmts: Sequence[str] = FORMATS) -> list[np.ndarray]:
    """onert-py on every encoding gives LiteRT's outputs; the caller's inputs are left untouched."""
    expected = run_litert(model, inputs)
    before = [np.array(x, copy=True) for x in inputs]
    for fmt in fmts:
        got = run_onert(model, inputs, fmt)
        assert_close(got, expected, rtol, atol)
    for x, b in zip(inputs, before):
        np.testing.assert_array_equal(x, b)
    return expected


def run_litert_builtin(mb: ModelBuilder | bytes, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """LiteRT's own (builtin) kernels, without the default XNNPACK delegate.

    XNNPACK's float kernels do not follow the builtin ones on special values (its EXP gives 0 for NaN,
    its LOG gives ~88.7 for NaN and +inf), so the builtin kernels are the reference for those; float16,
    which only the delegate runs, is compared with the default interpreter on finite values.
    """
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    data = bytes(mb) if isinstance(mb, (bytes, bytearray)) else mb.to_bytes("tflite")
    it = litert.Interpreter(model_content=data,
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], np.asarray(x, dtype=d["dtype"]))
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def check_builtin(mb: ModelBuilder, inputs: Sequence[np.ndarray], rtol: float = 1e-5, atol: float = 1e-6,
                  delegate: bool = False) -> list[np.ndarray]:
    """onert-py (both encodings) matches LiteRT's builtin kernels (or the default interpreter when
    `delegate`); the inputs are left untouched."""
    if delegate:
        return assert_matches_litert(mb, inputs, rtol=rtol, atol=atol)
    expected = run_litert_builtin(mb, inputs)
    before = [np.array(x, copy=True) for x in inputs]
    for fmt in FORMATS:
        assert_close(run_onert(mb, inputs, fmt), expected, rtol, atol)
    for x, b in zip(inputs, before):
        np.testing.assert_array_equal(x, b)
    return expected


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed + int(os.environ.get("ONERT_PY_TEST_SEED", "0")))


# Every fixed-size tensor type LiteRT has (strings aside): the candidates of the per-op dtype audits.
FIXED_DTYPES = ("float32", "float16", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
                "int64", "uint64", "bool", "complex64")


# The non-quantized types most ops' dtype audits start from (each test module adds the op's extras).
SMALL_TYPES = ("float32", "int8", "uint8", "int16", "int32", "int64")


def int32_const(values: Any) -> tuple:
    """A single_op_model input spec: an int32 constant (axes, shapes, indices, paddings)."""
    return ("const", np.array(values, np.int32))


def audit_dtype(dt: str) -> tuple[Any, Callable[..., np.ndarray]]:
    """For a one-op dtype-audit case of type `dt`: the tensor dtype to declare (object for "string")
    and x(*shape), dtype_values of that shape seeded by its rank."""
    t = object if dt == "string" else dt
    return t, lambda *shape: dtype_values(shape, t, seed=len(shape))


def dtype_values(shape: Sequence[int], dtype: Any, seed: int = 0) -> np.ndarray:
    """Random values of any tensor type, so that a kernel mixing up elements or bytes shows: floats with
    fractions and both signs, signed ints with both signs, both bools, complex numbers with two
    distinct parts, byte strings of varying length (dtype "string")."""
    r = rng(seed)
    n = int(np.prod(shape))
    if dtype == "string" or np.dtype(dtype) == np.dtype(object):
        words = [b"", b"a", b"bc", b"def", b"ghij", b"\xc3\xa9", b"kl"]
        return np.array([words[k] for k in r.integers(0, len(words), n)], object).reshape(shape)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return (r.integers(0, 2, n) == 1).reshape(shape)
    if dt.kind == "f":
        return r.uniform(-8, 8, n).astype(dt).reshape(shape)
    if dt.kind == "c":
        return (r.uniform(-8, 8, n) + 1j * r.uniform(-8, 8, n)).astype(dt).reshape(shape)
    lo = -100 if dt.kind == "i" else 0
    return r.integers(lo, 100, n).astype(dt).reshape(shape)


def accumulator_model() -> ModelBuilder:
    """A resource variable acc set to [10, -1] once by CALL_ONCE; each invoke adds x [2] to it and
    returns it."""
    mb = ModelBuilder()
    main, init = mb.subgraph("main"), mb.subgraph("init")
    x = main.tensor("x", [2], np.float32)
    h = main.tensor("h", [], np.int32, type_name="RESOURCE")
    cur, new = main.tensor("cur", [2], np.float32), main.tensor("new", [2], np.float32)
    main.op("CALL_ONCE", [], [], init_subgraph_index=1)
    main.op("VAR_HANDLE", [], [h], container="", shared_name="acc")
    main.op("READ_VARIABLE", [h], [cur])
    main.op("ADD", [cur, x], [new], fused_activation_function=0)
    main.op("ASSIGN_VARIABLE", [h, new], [])
    main.inputs, main.outputs = [x], [new]
    ih = init.tensor("h", [], np.int32, type_name="RESOURCE")
    init.op("VAR_HANDLE", [], [ih], container="", shared_name="acc")
    init.op("ASSIGN_VARIABLE", [ih, init.const("start", np.array([10.0, -1.0], np.float32))], [])
    return mb


# Corpus models with a known gap that no kernel registry shows: what is missing, for an expected failure.
KNOWN_GAPS: dict[str, str] = {}


def kernel_params(names: Sequence[str], corpus: "os.PathLike | str", strict: bool = True) -> list:
    """pytest params of the models `corpus/<name>.tflite`: a model with an op onert-py has no kernel for
    yet (e.g. a quantized op of a new kind) is an expected failure, whose mark goes away by itself once
    the kernels exist. Not `strict` where the test can pass anyway (both runtimes refuse a resize).
    A model of KNOWN_GAPS is an expected failure too (not strict: some checks pass without the run)."""
    from pathlib import Path
    from onert_py.compiler import unsupported_ops
    params = []
    for name in names:
        model = onert_py.load_model(str(Path(corpus) / f"{name}.tflite"))
        missing = sorted({op for _, _, op in unsupported_ops(model)})
        marks = [pytest.mark.xfail(strict=strict, reason=f"missing kernel: {', '.join(missing)}")] if missing else []
        if name in KNOWN_GAPS and not missing:
            marks = [pytest.mark.xfail(strict=False, reason=KNOWN_GAPS[name])]
        params.append(pytest.param(name, marks=marks, id=name))
    return params


def fit_quantization(q: tuple, dtype: Any) -> tuple:
    """(scale, zero point) made valid for a quantized type: uint8's zero point shifted up by 128 and
    clamped into the type, int16's 0 (LiteRT's int16 quantization is symmetric)."""
    info = np.iinfo(dtype)
    if info.bits == 16:
        return (q[0], 0)
    zp = q[1] + (128 if info.min == 0 else 0)
    return (q[0], int(np.clip(zp, info.min, info.max)))


# ----------------------------------------------------------------------------------- gradients

def finite_difference_gradients(model: Any, inputs: Sequence[np.ndarray], cotangents: Sequence[np.ndarray],
                                wrt: Sequence[tuple[int, int]], h: float = 1e-2) -> list[np.ndarray]:
    """Central differences, in float64 arithmetic over float32 runs of onert-py, of
    sum(output * cotangent) with respect to each (subgraph, tensor) of `wrt`: a model input (perturbed
    in the inputs) or a constant (perturbed in a copy of the model). The step is h * max(1, |value|)."""
    import dataclasses
    from onert_py.compiler.gradients import copy_model
    base = onert_py.load_model(model.to_bytes("tflite")) if isinstance(model, ModelBuilder) else (
        model if isinstance(model, onert_py.ir.Model) else onert_py.load_model(model))
    main = base.subgraphs[0]

    def objective(m, xs) -> float:
        outs = onert_py.infer.session(m).infer([np.asarray(x) for x in xs])
        return float(sum(np.sum(np.asarray(o, np.float64) * c) for o, c in zip(outs, cotangents) if c is not None))

    results = []
    for si, t in wrt:
        if si == 0 and t in main.inputs:
            k = main.inputs.index(t)
            x = np.asarray(inputs[k])
            g = np.zeros(x.shape, np.float64)
            sess = onert_py.infer.session(base)
            for idx in np.ndindex(x.shape):
                step = h * max(1.0, abs(float(x[idx])))
                vals = []
                for sign in (1, -1):
                    xs = [np.array(a, copy=True) for a in inputs]
                    xs[k][idx] += sign * step
                    sess.reset_variables()      # stateful ops (an LSTM's state) start over every run
                    outs = sess.infer(xs)
                    vals.append(sum(np.sum(np.asarray(o, np.float64) * c) for o, c in zip(outs, cotangents)
                                    if c is not None))
                g[idx] = (vals[0] - vals[1]) / (2 * step)
            results.append(g)
            continue
        data = base.subgraphs[si].tensors[t].data
        g = np.zeros(data.shape, np.float64)
        for idx in np.ndindex(data.shape):
            step = h * max(1.0, abs(float(data[idx])))
            vals = []
            for sign in (1, -1):
                m = copy_model(base)
                new = np.array(data, copy=True)
                new[idx] += sign * step
                m.subgraphs[si].tensors[t] = dataclasses.replace(m.subgraphs[si].tensors[t], data=new)
                vals.append(objective(m, inputs))
            g[idx] = (vals[0] - vals[1]) / (2 * step)
        results.append(g)
    return results


def check_gradients(model: Any, inputs: Sequence[np.ndarray], wrt: Sequence[str] | str | None = None,
                    seed: int = 0, rtol: float = 2e-2, atol: float = 2e-3, h: float = 1e-2) -> dict:
    """onert-py's gradients (random cotangents) against central finite differences, on both encodings
    of a ModelBuilder model. Float32 forward runs: the differences carry ~1e-4 relative truncation and
    rounding error at this step, hence rtol 2e-2 / atol 2e-3 by default. Returns the gradients."""
    from onert_py.compiler.gradients import _resolve_wrt
    data = model.to_bytes("tflite") if isinstance(model, ModelBuilder) else model
    m = onert_py.load_model(data)
    sess = onert_py.infer.session(m)
    outs = sess.infer([np.asarray(x) for x in inputs])
    r = rng(seed)
    cotangents = [r.normal(size=np.shape(o)).astype(o.dtype) if np.asarray(o).dtype.kind == "f" else None
                  for o in outs]
    before = [np.array(x, copy=True) for x in inputs]
    fmts = FORMATS if isinstance(model, ModelBuilder) else ("tflite",)
    names, targets = _resolve_wrt(m, 0, wrt)
    expected = finite_difference_gradients(m, inputs, cotangents, targets, h)
    for fmt in fmts:
        s = onert_py.infer.session(model.to_bytes(fmt) if isinstance(model, ModelBuilder) else data)
        got_outs, grads = s.gradients(inputs, cotangents, wrt)
        for a, b in zip(got_outs, outs):   # a fused recurrent op runs decomposed there: float rounding
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        assert list(grads) == names
        for name, e in zip(names, expected):
            assert grads[name].shape == e.shape, (name, grads[name].shape, e.shape)
            np.testing.assert_allclose(grads[name], e, rtol=rtol, atol=atol, err_msg=f"{fmt}: d/d{name}")
    for x, b in zip(inputs, before):
        np.testing.assert_array_equal(x, b)
    return grads


def rand_f32(*shape, seed=0) -> np.ndarray:
    """Standard normal float32 values."""
    return rng(seed).normal(size=shape).astype(np.float32)


def distinct_f32(*shape, seed=0, gap=0.25) -> np.ndarray:
    """float32 values at least `gap` apart (no ties within a finite-difference step)."""
    n = int(np.prod(shape))
    return (rng(seed).permutation(n).astype(np.float32) * gap - n * gap / 2).reshape(shape)


# The LSTM variants the recurrent tests build: name -> (cifg, peephole, projection, projection bias,
# layer norm).
LSTM_CONFIGS = {
    "plain": (False, False, False, False, False),
    "cifg": (True, False, False, False, False),
    "peephole": (False, True, False, False, False),
    "cifg_peephole": (True, True, False, False, False),
    "projection": (False, False, True, True, False),
    "projection_nobias": (False, True, True, False, False),
    "layer_norm": (False, False, False, False, True),
    "layer_norm_cifg_peephole_proj": (True, True, True, True, True),
    "all": (False, True, True, True, True),
}


def run_litert_builtin_invokes(mb: ModelBuilder, feeds: Sequence[Sequence[np.ndarray]]) -> list[list[np.ndarray]]:
    """LiteRT's builtin kernels (no delegate) on one interpreter invoked once per feed, so that a
    stateful op's state carries over: the outputs of each invoke."""
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    data = bytes(mb) if isinstance(mb, (bytes, bytearray)) else mb.to_bytes("tflite")
    it = litert.Interpreter(model_content=data,
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    expected = []
    for feed in feeds:
        for d, x in zip(it.get_input_details(), feed):
            it.set_tensor(d["index"], x)
        it.invoke()
        expected.append([it.get_tensor(d["index"]) for d in it.get_output_details()])
    return expected


def corpus_model_bytes(corpus: "os.PathLike | str", name: str, fmt: str) -> bytes:
    """A corpus model's bytes as stored (tflite) or re-encoded by onert-py's writer (circle)."""
    from pathlib import Path
    from onert_py.schema.writer import serialize
    data = (Path(corpus) / f"{name}.tflite").read_bytes()
    if fmt == "circle":
        data = serialize(onert_py.load_model(data), "circle")
        assert data[4:8] == b"CIR0"
    return data


def corpus_runs(corpus: "os.PathLike | str", name: str) -> tuple[list, str]:
    """([(inputs, outputs) per stored input set], source) of a corpus model: models with a dynamic
    shape signature store further input sets (other batch sizes / sequence lengths) as
    run<n>_in_k / run<n>_out_k."""
    from pathlib import Path
    with np.load(Path(corpus) / f"{name}.npz", allow_pickle=False) as z:
        def arrays(prefix):
            return [z[f"{prefix}{k}"] for k in range(sum(f.startswith(prefix) for f in z.files))]
        runs = [(arrays("in_"), arrays("out_"))]
        while f"run{len(runs)}_in_0" in z.files:
            runs.append((arrays(f"run{len(runs)}_in_"), arrays(f"run{len(runs)}_out_")))
        source = str(z["source"])
    return runs, source


def fill_doubling_loop(cond, body, limit: int, x_shape: Sequence[int]) -> None:
    """The cond (i < limit) and body (i += 1, x = x + x) of a two-value WHILE over (i: int32 [], x:
    float32 x_shape), as the CLI tests use it."""
    ci, cx = cond.tensor("ci", [], np.int32), cond.tensor("cx", list(x_shape), np.float32)
    cb = cond.tensor("cb", [], np.bool_)
    cond.op("LESS", [ci, cond.const("limit", np.array(limit, np.int32))], [cb])
    cond.inputs, cond.outputs = [ci, cx], [cb]
    bi, bx = body.tensor("bi", [], np.int32), body.tensor("bx", list(x_shape), np.float32)
    bio, bxo = body.tensor("bi_next", [], np.int32), body.tensor("bx_next", list(x_shape), np.float32)
    body.op("ADD", [bi, body.const("inc", np.array(1, np.int32))], [bio], fused_activation_function=0)
    body.op("ADD", [bx, bx], [bxo], fused_activation_function=0)
    body.inputs, body.outputs = [bi, bx], [bio, bxo]


def doubling_loop_file(path, limit: int, x_shape: Sequence[int]) -> str:
    """x -> WHILE(i < limit: i += 1, x = x + x) -> x * 2, i a constant 0 and x the only input; written
    to path/loop.tflite (subgraphs 0 main: WHILE, MUL; 1 cond: LESS; 2 body: two ADDs)."""
    mb = ModelBuilder()
    m, cond, body = mb.subgraph("main"), mb.subgraph("cond"), mb.subgraph("body")
    x = m.tensor("x", list(x_shape), np.float32)
    io, xo = m.tensor("i_out", [], np.int32), m.tensor("x_out", list(x_shape), np.float32)
    m.op("WHILE", [m.const("i0", np.array(0, np.int32)), x], [io, xo], cond_subgraph_index=1,
         body_subgraph_index=2)
    y = m.tensor("y", list(x_shape), np.float32)
    m.op("MUL", [xo, m.const("two", np.array([2, 2], np.float32))], [y], fused_activation_function=0)
    m.inputs, m.outputs = [x], [y]
    fill_doubling_loop(cond, body, limit, x_shape)
    p = path / "loop.tflite"
    p.write_bytes(mb.to_bytes("tflite"))
    return str(p)


def cli(capsys, *argv) -> tuple[int, str, str]:
    """Run the `onert-py` command line in-process: (exit code, stdout, stderr)."""
    from onert_py.tools.cli import main
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line_error(capsys, *argv) -> str:
    """The one line a failing command prints (exit code 2, no traceback)."""
    rc, _, err = cli(capsys, *argv)
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("onert-py: error: ") and "Traceback" not in err, err
    return lines[0]


def compare_rows(out: str) -> list[list[str]]:
    """The rows of `onert-py compare`'s per-output table (after its header and dashes lines)."""
    lines = out.splitlines()
    k = next(i for i, line in enumerate(lines) if line.startswith("#  output")) + 2
    rows = []
    while k < len(lines) and lines[k][:1].isdigit():
        rows.append(lines[k].split())
        k += 1
    return rows
