"""Whole-loop compilation (backends/jit/loop.py): WHILE loops whose cond and body are elementwise and
shape ops on static shapes run as one compiled function. References: LiteRT, and the cpu backend's
executor loop, which must agree bit for bit (each op rounds once, in float32, on both)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import onert_py
from helpers import assert_close, run_litert, run_litert_builtin
from onert_py.errors import ExecutionError
from onert_py.schema.writer import ModelBuilder

pytest.importorskip("numba")

F32, I32 = np.float32, np.int32
MODELS = Path(__file__).resolve().parents[3] / "benchmarks" / "models"


def _session(data: bytes, backends: str = "jit;cpu", **kw):
    return onert_py.infer.session(data, backends=backends, **kw)


def _both(data: bytes, inputs, **kw):
    """(jit outputs, cpu outputs, whether the jit session compiled the loop)."""
    jit = _session(data, **kw)
    out = jit.infer(inputs)
    cpu = _session(data, "cpu", **kw).infer(inputs)
    return out, cpu, bool(jit.runtime.compiled_loops)


def _same(a, b) -> None:
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


def _loop(body_fill, cond_fill, specs, out_shapes=None) -> bytes:
    """Subgraph 0: WHILE over `specs` [(name, shape, dtype)]; 1 = cond, 2 = body."""
    mb = ModelBuilder()
    main = mb.subgraph("main")
    ins = [main.tensor(n, s, d) for n, s, d in specs]
    outs = [main.tensor(f"{n}_out", s, d) for n, s, d in specs]
    cond, body = mb.subgraph("cond"), mb.subgraph("body")
    cond_fill(cond, [cond.tensor(n, s, d) for n, s, d in specs])
    body_fill(body, [body.tensor(n, s, d) for n, s, d in specs])
    main.op("WHILE", ins, outs, cond_subgraph_index=1, body_subgraph_index=2)
    main.inputs, main.outputs = ins, outs
    mb.signature("serving_default", main)
    return mb.to_bytes("tflite")


def _count_below(limit: int):
    def fill(sg, ts):
        lim = sg.const("limit", np.array([limit], I32))
        o = sg.tensor("go", [1], np.bool_)
        sg.op("LESS", [ts[0], lim], [o])
        sg.inputs, sg.outputs = ts, [o]
    return fill


def _step(sg, i):
    one = sg.const("one", np.array([1], I32))
    ni = sg.tensor("i_next", [1], I32)
    sg.op("ADD", [i, one], [ni], fused_activation_function=0)
    return ni


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_converter_scalar_loop(n):
    """The converter's tf.while_loop: [1] values, a rank-0 counter, i < reshape(n, [])."""
    data = (MODELS / "scalar_loop.tflite").read_bytes()
    inputs = [np.array([1.5], F32), np.array([n], I32)]
    out, cpu, compiled = _both(data, inputs)
    assert compiled
    _same(out, cpu)
    assert_close(out, run_litert(data, inputs), rtol=1e-6, atol=0)


def test_converter_matmul_loop_falls_back():
    """FULLY_CONNECTED has no jit expression: the loop runs on the executors, with the same results."""
    data = (MODELS / "matmul_loop.tflite").read_bytes()
    x = np.random.default_rng(0).normal(size=(512, 64)).astype(F32) * 0.1
    inputs = [x, np.array([3], I32)]
    out, cpu, compiled = _both(data, inputs)
    assert not compiled
    assert_close(out, cpu, rtol=1e-5, atol=1e-6)
    assert_close(out, run_litert(data, inputs), rtol=1e-4, atol=1e-5)


def _affine_body(act: int):
    """v = act(v * scale + bias) with bias broadcast along the last axis, i += 1."""
    def fill(sg, ts):
        i, v = ts
        scale = sg.const("scale", np.array([1.5], F32))
        bias = sg.const("bias", np.array([0.5, -1.0, 2.0], F32))
        m, nv = sg.tensor("m", [4, 3], F32), sg.tensor("nv", [4, 3], F32)
        sg.op("MUL", [v, scale], [m], fused_activation_function=0)
        sg.op("ADD", [m, bias], [nv], fused_activation_function=act)
        sg.inputs, sg.outputs = ts, [_step(sg, i), nv]
    return fill


@pytest.mark.parametrize("act", [0, 1, 3])   # NONE, RELU, RELU6
@pytest.mark.parametrize("n", [0, 3, 200])   # 200: overflows float32 with NONE, clamped to FLT_MAX
def test_broadcast_body_matches_litert(act, n):
    data = _loop(_affine_body(act), _count_below(n), [("i", [1], I32), ("v", [4, 3], F32)])
    v = np.random.default_rng(1).normal(size=(4, 3)).astype(F32)
    inputs = [np.array([0], I32), v]
    out, cpu, compiled = _both(data, inputs)
    assert compiled
    _same(out, cpu)
    assert_close(out, run_litert(data, inputs), rtol=1e-6, atol=0)
    np.testing.assert_array_equal(inputs[1], v)   # the caller's array is untouched


def _swap_body(sg, ts):
    """(i, a, b) -> (i + 1, b, a - b): one result is another loop value."""
    i, a, b = ts
    d = sg.tensor("d", [2], F32)
    sg.op("SUB", [a, b], [d], fused_activation_function=0)
    sg.inputs, sg.outputs = ts, [_step(sg, i), b, d]


@pytest.mark.parametrize("n", [1, 2, 5])
def test_results_that_are_other_loop_values(n):
    data = _loop(_swap_body, _count_below(n), [("i", [1], I32), ("a", [2], F32), ("b", [2], F32)])
    inputs = [np.array([0], I32), np.array([1.0, 2.0], F32), np.array([0.25, -3.0], F32)]
    out, cpu, compiled = _both(data, inputs)
    assert compiled
    _same(out, cpu)
    a, b = inputs[1].copy(), inputs[2].copy()
    for _ in range(n):
        a, b = b, (a - b).astype(F32)
    np.testing.assert_array_equal(out[1], a)
    np.testing.assert_array_equal(out[2], b)


def test_max_while_iterations_in_compiled_loop():
    data = _loop(_affine_body(0), _count_below(100), [("i", [1], I32), ("v", [4, 3], F32)])
    inputs = [np.array([0], I32), np.zeros((4, 3), F32)]
    sess = _session(data, max_while_iterations=10)
    with pytest.raises(ExecutionError, match="max_while_iterations=10"):
        sess.infer(inputs)
    assert sess.runtime.compiled_loops
    ok = _session(data, max_while_iterations=100).infer(inputs)
    _same(ok, _session(data, "cpu").infer(inputs))


def test_op_backend_keeps_a_loop_on_the_executors():
    """An op of the body forced onto cpu: the loop is not compiled (the user asked for cpu there)."""
    data = _loop(_affine_body(0), _count_below(5), [("i", [1], I32), ("v", [4, 3], F32)])
    sess = _session(data, op_backend="MUL=cpu")
    out = sess.infer([np.array([0], I32), np.ones((4, 3), F32)])
    assert not sess.runtime.compiled_loops
    _same(out, _session(data, "cpu").infer([np.array([0], I32), np.ones((4, 3), F32)]))


def test_cpu_backend_never_compiles():
    data = (MODELS / "scalar_loop.tflite").read_bytes()
    sess = _session(data, "cpu")
    sess.infer([np.array([1.5], F32), np.array([10], I32)])
    assert not sess.runtime.compiled_loops


def _select_cond(sg, ts):
    """i < 10 and v < 100 (LOGICAL_AND of two comparisons, a float one against a constant)."""
    i, v = ts
    a, b, o = sg.tensor("a", [1], np.bool_), sg.tensor("b", [1], np.bool_), sg.tensor("go", [1], np.bool_)
    sg.op("LESS", [i, sg.const("ten", np.array([10], I32))], [a])
    sg.op("LESS", [v, sg.const("hundred", np.array([100.0], F32))], [b])
    sg.op("LOGICAL_AND", [a, b], [o])
    sg.inputs, sg.outputs = ts, [o]


def _grow_body(sg, ts):
    i, v = ts
    two = sg.const("two", np.array([2.0], F32))
    m, r = sg.tensor("m", [1], F32), sg.tensor("r", [1, 1], F32)
    nv = sg.tensor("nv", [1], F32)
    sg.op("MUL", [v, two], [m], fused_activation_function=0)
    sg.op("RESHAPE", [m, sg.const("shape", np.array([1, 1], I32))], [r])
    sg.op("RESHAPE", [r, sg.const("back", np.array([1], I32))], [nv])
    sg.inputs, sg.outputs = ts, [_step(sg, i), nv]


@pytest.mark.parametrize("v0", [0.5, 3.0, 200.0])
def test_logical_cond_and_reshapes(v0):
    data = _loop(_grow_body, _select_cond, [("i", [1], I32), ("v", [1], F32)])
    inputs = [np.array([0], I32), np.array([v0], F32)]
    out, cpu, compiled = _both(data, inputs)
    assert compiled
    _same(out, cpu)
    assert_close(out, run_litert(data, inputs), rtol=0, atol=0)


def test_unwritable_cache_dir_falls_back_to_tmp(tmp_path, monkeypatch):
    """A cache directory that cannot be made (here: under a file) costs the disk cache's place, not
    the session: generated code goes to the temporary directory."""
    from onert_py.backends.jit import codegen
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("ONERT_PY_JIT_CACHE", str(blocker / "jit"))
    monkeypatch.setattr(codegen, "_modules", {})
    data = (MODELS / "scalar_loop.tflite").read_bytes()
    inputs = [np.array([1.5], F32), np.array([20], I32)]
    sess = _session(data)
    assert sess.runtime.compiled_loops
    _same(sess.infer(inputs), _session(data, "cpu").infer(inputs))


def test_generated_modules_name_their_helpers_version(tmp_path, monkeypatch):
    """numba's disk cache checks only a generated file's own date: the file's name must change with the
    helpers its code inlines or calls (_numba, _simd, _vmath, _gemm), or a new version would run the old
    machine code."""
    import hashlib

    from onert_py.backends.jit import codegen
    here = Path(codegen.__file__).resolve().parent
    digest = hashlib.sha1(b"".join((here / n).read_bytes() for n in ("_numba.py", "_simd.py", "_vmath.py",
                                                                       "_gemm.py")))
    assert digest.hexdigest()[:16] in codegen._PRELUDE
    monkeypatch.setenv("ONERT_PY_JIT_CACHE", str(tmp_path))
    monkeypatch.setattr(codegen, "_modules", {})
    fn = codegen.compile_source("@kernel\ndef twice(x):\n    return x * 2\n", "twice")
    assert fn(np.float32(1.5)) == 3.0
    (written,) = tmp_path.glob("*.py")
    assert digest.hexdigest()[:16] in written.read_text()
    monkeypatch.setattr(codegen, "_PRELUDE", codegen._PRELUDE.replace(digest.hexdigest()[:16], "0" * 16))
    codegen.compile_source("@kernel\ndef twice(x):\n    return x * 2\n", "twice")
    assert len(list(tmp_path.glob("*.py"))) == 2     # another helpers' version: another module


def _activation_body(sg, ts):
    """v = prelu(hard_swish(v) - 1, alpha per column), i += 1: the activations' expressions compiled."""
    i, v = ts
    hs, m, nv = (sg.tensor(n, [4, 3], F32) for n in ("hs", "m", "nv"))
    sg.op("HARD_SWISH", [v], [hs])
    sg.op("SUB", [hs, sg.const("one_f", np.array([1.0], F32))], [m], fused_activation_function=0)
    sg.op("PRELU", [m, sg.const("alpha", np.array([0.5, -1.5, 2.0], F32))], [nv])
    sg.inputs, sg.outputs = ts, [_step(sg, i), nv]


@pytest.mark.parametrize("n", [0, 1, 6])
def test_activations_in_compiled_loop(n):
    data = _loop(_activation_body, _count_below(n), [("i", [1], I32), ("v", [4, 3], F32)])
    v = (np.random.default_rng(2).normal(size=(4, 3)) * 4).astype(F32)
    v[0] = [-0.0, 1e30, np.nan]   # (inf: the SUB clamps it to FLT_MAX as LiteRT's builtin kernel, XNNPACK does not)
    inputs = [np.array([0], I32), v]
    out, cpu, compiled = _both(data, inputs)
    assert compiled
    _same(out, cpu)
    np.testing.assert_array_equal(np.signbit(out[1]), np.signbit(cpu[1]))
    assert_close(out, run_litert(data, inputs), rtol=1e-6, atol=1e-7)


def _transcendental_body(sg, ts):
    """v = sigmoid(v) * 2 - exp(-v) * 0.1 + sin(v) * cos(v), i += 1 (every op has a jit expression)."""
    i, v = ts
    shape = [8, 4]
    two, tenth = sg.const("two", np.array([2.0], F32)), sg.const("tenth", np.array([0.1], F32))
    names = ("sg", "sg2", "nv", "ex", "ex1", "sn", "cs", "sc", "d", "nv2")
    t = {n: sg.tensor(n, shape, F32) for n in names}
    sg.op("LOGISTIC", [v], [t["sg"]])
    sg.op("MUL", [t["sg"], two], [t["sg2"]], fused_activation_function=0)
    sg.op("NEG", [v], [t["nv"]])
    sg.op("EXP", [t["nv"]], [t["ex"]])
    sg.op("MUL", [t["ex"], tenth], [t["ex1"]], fused_activation_function=0)
    sg.op("SIN", [v], [t["sn"]])
    sg.op("COS", [v], [t["cs"]])
    sg.op("MUL", [t["sn"], t["cs"]], [t["sc"]], fused_activation_function=0)
    sg.op("SUB", [t["sg2"], t["ex1"]], [t["d"]], fused_activation_function=0)
    sg.op("ADD", [t["d"], t["sc"]], [t["nv2"]], fused_activation_function=0)
    sg.inputs, sg.outputs = ts, [_step(sg, i), t["nv2"]]


@pytest.mark.parametrize("n", [1, 40])
def test_transcendental_body_compiles(n):
    """SIN, COS, EXP and LOGISTIC compile into the loop with jit/_vmath's functions: within the float
    tolerance of the cpu backend's numpy loop and of LiteRT's builtin kernels."""
    data = _loop(_transcendental_body, _count_below(n), [("i", [1], I32), ("v", [8, 4], F32)])
    v = (np.random.default_rng(n).normal(size=(8, 4)) * 3).astype(F32)
    v.reshape(-1)[:3] = [np.nan, 3e5, -0.0]      # NaN, a value past sin's NEAR_LIMIT, a signed zero
    inputs = [np.array([0], I32), v]
    out, cpu, compiled = _both(data, inputs)
    assert compiled
    assert_close(out, cpu, rtol=1e-5, atol=1e-6)
    # the builtin kernels: LiteRT's default XNNPACK sine gives NaN for 3e5 (jit/_vmath.py)
    assert_close(out, run_litert_builtin(data, inputs), rtol=1e-5, atol=1e-6)


def _statements_body(sg, ts):
    """v [2, 3] -> PACK of two rows made by TRANSPOSE / SLICE / SUM, REDUCE_MIN, SELECT_V2, CAST, GATHER
    (constant positions) and RESHAPE: the statements (codegen.Statement) the idioms do not use."""
    i, v = ts
    f = lambda name, shape: sg.tensor(name, shape, F32)   # noqa: E731
    t, s, r, m = f("t", [3, 2]), f("s", [2, 2]), f("r", [2]), f("m", [3])
    sg.op("TRANSPOSE", [v, sg.const("perm", np.array([1, 0], I32))], [t])
    sg.op("SLICE", [t, sg.const("begin", np.array([1, 0], I32)), sg.const("size", np.array([2, 2], I32))], [s])
    sg.op("SUM", [s, sg.const("ax1", np.array([1], I32))], [r], keep_dims=False)
    sg.op("REDUCE_MIN", [v, sg.const("ax0", np.array([0], I32))], [m], keep_dims=False)
    big, scaled, shifted = sg.tensor("big", [3], np.bool_), f("scaled", [3]), f("shifted", [3])
    sg.op("GREATER", [m, sg.const("third", np.array([0.3], F32))], [big])
    sg.op("MUL", [m, sg.const("k09", np.array([0.9], F32))], [scaled], fused_activation_function=0)
    sg.op("ADD", [m, sg.const("k01", np.array([0.1], F32))], [shifted], fused_activation_function=0)
    row0, c, row1 = f("row0", [3]), f("c", [1]), f("row1", [3])
    sg.op("SELECT_V2", [big, scaled, shifted], [row0])
    sg.op("CAST", [i], [c])
    sg.op("ADD", [shifted, c], [row1], fused_activation_function=0)
    packed, r2, rr, g = f("packed", [2, 3]), f("r2", [2, 1]), f("rr", [2, 3]), f("g", [2, 3])
    sg.op("PACK", [row0, row1], [packed], values_count=2, axis=0)
    sg.op("RESHAPE", [r, sg.const("shape21", np.array([2, 1], I32))], [r2])
    sg.op("MUL", [r2, sg.const("k001", np.full((2, 3), 0.01, F32))], [rr], fused_activation_function=0)
    sg.op("GATHER", [v, sg.const("pos", np.array([2, 0, 1], I32))], [g], axis=1)
    mixed, nv = f("mixed", [2, 3]), f("v_next", [2, 3])
    sg.op("ADD", [packed, rr], [mixed], fused_activation_function=0)
    sg.op("SUB", [mixed, g], [nv], fused_activation_function=0)
    sg.inputs, sg.outputs = ts, [_step(sg, i), nv]


@pytest.mark.parametrize("n", [0, 1, 6])
def test_statements_compile_and_match_litert(n):
    """Gathers, a pack, reductions, a select and a cast inside one compiled loop: the cpu executor loop
    and LiteRT give the same values (float sums in the same order here: rtol 1e-6)."""
    data = _loop(_statements_body, _count_below(n), [("i", [1], I32), ("v", [2, 3], F32)])
    v = np.array([[0.2, 0.5, 0.9], [0.4, 0.1, 0.7]], F32)
    got, cpu, compiled = _both(data, [np.zeros(1, I32), v])
    assert compiled
    want = run_litert(data, [np.zeros(1, I32), v])
    for g, c, w in zip(got, cpu, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(g, c, rtol=1e-6, atol=1e-7)


def _splits_body(sg, ts, sizes=(1, 2)):
    """v [4, 3] -> SPLIT along axis 0 into two [2, 3], SPLIT_V of v's columns into `sizes`, UNPACK of
    the first half's rows; recombined (CONCATENATION) into the next v, so every output is read."""
    i, v = ts
    f = lambda name, shape: sg.tensor(name, shape, F32)   # noqa: E731
    top, bottom = f("top", [2, 3]), f("bottom", [2, 3])
    sg.op("SPLIT", [sg.const("axis0", np.array(0, I32)), v], [top, bottom], num_splits=2)
    left, right = f("left", [4, 1]), f("right", [4, 2])
    sg.op("SPLIT_V", [v, sg.const("sizes", np.array(sizes, I32)), sg.const("axis1", np.array([-1], I32))],
          [left, right], num_splits=2)
    r0, r1 = f("r0", [3]), f("r1", [3])
    sg.op("UNPACK", [top], [r0, r1], num=2, axis=0)
    swapped, rows, shifted = f("swapped", [4, 3]), f("rows", [2, 3]), f("shifted", [4, 3])
    sg.op("PACK", [r1, r0], [rows], values_count=2, axis=0)
    sg.op("CONCATENATION", [bottom, rows], [swapped], axis=0, fused_activation_function=0)
    sg.op("CONCATENATION", [right, left], [shifted], axis=1, fused_activation_function=0)
    lowered, nv = f("lowered", [4, 3]), f("v_next", [4, 3])
    sg.op("SUB", [swapped, sg.const("k05", np.array([0.5], F32))], [lowered], fused_activation_function=0)
    sg.op("ADD", [lowered, shifted], [nv], fused_activation_function=0)
    sg.inputs, sg.outputs = ts, [_step(sg, i), nv]


@pytest.mark.parametrize("n", [0, 1, 5])
def test_split_statements_compile_and_match_litert(n):
    """SPLIT, SPLIT_V (a negative axis) and UNPACK inside a compiled loop (the gates of the converter's
    LSTM / GRU cells are a SPLIT): each output a gather of its part, against LiteRT and the cpu loop,
    exactly (copies, one ADD and one SUB per element)."""
    data = _loop(_splits_body, _count_below(n), [("i", [1], I32), ("v", [4, 3], F32)])
    v = np.arange(12, dtype=F32).reshape(4, 3) / 7
    got, cpu, compiled = _both(data, [np.zeros(1, I32), v])
    assert compiled
    _same(got, cpu)
    _same(got, run_litert(data, [np.zeros(1, I32), v]))


def test_split_v_with_a_remainder_size_runs_on_the_executors():
    """SPLIT_V with a -1 size is left to the cpu kernel (it resolves the size): the loop is not compiled,
    and the values are the same."""
    data = _loop(lambda sg, ts: _splits_body(sg, ts, sizes=(1, -1)), _count_below(3),
                 [("i", [1], I32), ("v", [4, 3], F32)])
    v = np.arange(12, dtype=F32).reshape(4, 3) / 7
    got, cpu, compiled = _both(data, [np.zeros(1, I32), v])
    assert not compiled
    _same(got, cpu)
    _same(got, run_litert(data, [np.zeros(1, I32), v]))


def _set_item_body(sg, ts):
    """The converter's TensorListSetItem of step i: L [4, 3] with row i replaced by v' = v * 0.5 + 1, as
    SLICE(L, [0, 0], [i, -1]), the item, SLICE(L, [i + 1, 0], [-1, -1]) joined by CONCATENATION (the
    slices of run-time shapes [-1, -1] / [-1, 3])."""
    i, lst, v = ts
    h, nv, item = sg.tensor("h", [3], F32), sg.tensor("v_next", [3], F32), sg.tensor("item", [1, 3], F32)
    sg.op("MUL", [v, sg.const("half", np.array([0.5], F32))], [h], fused_activation_function=0)
    sg.op("ADD", [h, sg.const("one_f", np.array([1.0], F32))], [nv], fused_activation_function=0)
    sg.op("RESHAPE", [nv, sg.const("row_shape", np.array([1, 3], I32))], [item])
    ni = _step(sg, i)
    size_a, begin_b = sg.tensor("size_a", [2], I32), sg.tensor("begin_b", [2], I32)
    sg.op("CONCATENATION", [i, sg.const("minus1", np.array([-1], I32))], [size_a], axis=0, fused_activation_function=0)
    sg.op("CONCATENATION", [ni, sg.const("zero", np.array([0], I32))], [begin_b], axis=0, fused_activation_function=0)
    head, tail, new = sg.tensor("head", [-1, -1], F32), sg.tensor("tail", [-1, 3], F32), sg.tensor("new", [4, 3], F32)
    sg.op("SLICE", [lst, sg.const("begin_a", np.array([0, 0], I32)), size_a], [head])
    sg.op("SLICE", [lst, begin_b, sg.const("to_end", np.array([-1, -1], I32))], [tail])
    sg.op("CONCATENATION", [head, item, tail], [new], axis=0, fused_activation_function=0)
    sg.inputs, sg.outputs = ts, [ni, new, nv]


@pytest.mark.parametrize("n", [0, 1, 4])
def test_set_item_compiles_and_matches_litert(n):
    """A list written row by row (Keras's return_sequences, a TensorArray) compiles as one statement:
    the values of LiteRT and of the cpu loop, exactly (copies and one MUL, one ADD per element)."""
    data = _loop(_set_item_body, _count_below(n), [("i", [1], I32), ("list", [4, 3], F32), ("v", [3], F32)])
    inputs = [np.zeros(1, I32), np.full((4, 3), -7.0, F32), np.array([0.1, 0.2, 0.3], F32)]
    given = [x.copy() for x in inputs]
    got, cpu, compiled = _both(data, inputs)
    assert compiled
    _same(got, cpu)
    _same(got, run_litert(data, inputs))
    for x, y in zip(inputs, given):
        np.testing.assert_array_equal(x, y)


def test_set_item_past_the_end_gives_the_slice_error():
    """A fifth row for a list of 4: the compiled loop gives up and the executors raise SLICE's error on
    both backends, as LiteRT fails (its SLICE: "Invalid begin")."""
    data = _loop(_set_item_body, _count_below(5), [("i", [1], I32), ("list", [4, 3], F32), ("v", [3], F32)])
    inputs = [np.zeros(1, I32), np.zeros((4, 3), F32), np.ones(3, F32)]
    for backends in ("jit;cpu", "cpu"):
        with pytest.raises(onert_py.ExecutionError, match="SLICE.*out of range"):
            _session(data, backends).infer(inputs)
    with pytest.raises(RuntimeError, match="SLICE"):
        run_litert(data, inputs)


@pytest.mark.parametrize("approximate", [False, True], ids=["erfc", "tanh"])
def test_gelu_in_a_compiled_loop(approximate):
    """GELU's expression (erfc32, or libm's tanhf for the tanh form) inside a compiled loop: within the
    float tolerance of the cpu loop and of LiteRT (the tanh form cancels in 1 + tanh for x << 0)."""
    def body(sg, ts):
        i, v = ts
        g, nv = sg.tensor("g", [4, 8], F32), sg.tensor("v_next", [4, 8], F32)
        sg.op("GELU", [v], [g], approximate=approximate)
        sg.op("MUL", [g, sg.const("k", np.array([1.5], F32))], [nv], fused_activation_function=0)
        sg.inputs, sg.outputs = ts, [_step(sg, i), nv]
    data = _loop(body, _count_below(3), [("i", [1], I32), ("v", [4, 8], F32)])
    inputs = [np.zeros(1, I32), np.linspace(-6, 4, 32, dtype=F32).reshape(4, 8)]
    out, cpu, compiled = _both(data, inputs)
    assert compiled
    assert_close(out, cpu, rtol=1e-5, atol=1e-6)
    assert_close(out, run_litert_builtin(data, inputs), rtol=1e-5, atol=1e-6)


def test_a_reduction_of_a_run_time_shape_leaves_the_loop_to_the_executors():
    """SUM over SLICE(v, [0], [i]) (a shape known only at run time) has no statement: the loop runs on
    the executors (no crash while looking for one), with the values of the cpu loop and LiteRT."""
    def body(sg, ts):
        i, v = ts
        head, total, nv = sg.tensor("head", [-1], F32), sg.tensor("total", [], F32), sg.tensor("v_next", [6], F32)
        sg.op("SLICE", [v, sg.const("b0", np.array([0], I32)), i], [head])
        sg.op("SUM", [head, sg.const("ax", np.array([0], I32))], [total], keep_dims=False)
        sg.op("ADD", [v, total], [nv], fused_activation_function=0)
        sg.inputs, sg.outputs = ts, [_step(sg, i), nv]
    data = _loop(body, _count_below(4), [("i", [1], I32), ("v", [6], F32)])
    inputs = [np.zeros(1, I32), np.linspace(0.1, 0.6, 6, dtype=F32)]
    out, cpu, compiled = _both(data, inputs)
    assert not compiled
    _same(out, cpu)
    assert_close(out, run_litert(data, inputs), rtol=1e-6, atol=0)
