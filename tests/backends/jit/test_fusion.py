"""Elementwise ops fused into the kernel of the op they follow (compiler.fuse_epilogues, the jit
backend's epilogues): what is fused, what is not, and that a fused run gives the unfused run's bits
(the jit backend's with fuse_ops=False; the cpu backend's sgemm sums in another order than the jit's
packed GEMM, jit/_gemm.py, so cpu agrees within the float tolerance)."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("numba")

import onert_py  # noqa: E402
from helpers import (assert_close, cli, litert_interpreter, rng, run_interpreter, run_litert,  # noqa: E402
                     run_litert_builtin)
from onert_py.schema.writer import ModelBuilder  # noqa: E402

NONE, RELU = 0, 1
SHAPE = [1, 6, 7, 16]


def _block(*, out_conv: bool = False, second_reader: bool = False, add_self: bool = False,
           residual_shape=None, act: int = NONE, alpha_shape=(1, 1, 16)) -> ModelBuilder:
    """x -> CONV_2D 1x1 (+bias, act) -> ADD(conv, residual) -> PRELU(alpha) -> y: a MobileNet-style
    block's tail, as the mediapipe models have it; the flags make the variants that must not fuse."""
    g = rng(3)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", SHAPE, np.float32)
    r = sg.tensor("r", residual_shape or SHAPE, np.float32)
    w = sg.const("w", g.normal(size=(16, 1, 1, 16)).astype(np.float32))
    b = sg.const("b", g.normal(size=16).astype(np.float32))
    alpha = sg.const("alpha", g.uniform(0.1, 0.3, size=alpha_shape).astype(np.float32))
    c = sg.tensor("conv", SHAPE, np.float32)
    a = sg.tensor("add", SHAPE, np.float32)
    y = sg.tensor("y", SHAPE, np.float32)
    sg.inputs = [x, r]
    sg.op("CONV_2D", [x, w, b], [c], padding=0, stride_h=1, stride_w=1, dilation_h_factor=1,
          dilation_w_factor=1, fused_activation_function=act)
    sg.op("ADD", [c, c if add_self else r], [a], fused_activation_function=NONE)
    sg.op("PRELU", [a, alpha], [y])
    sg.outputs = [y]
    if out_conv:
        sg.outputs.append(c)
    if second_reader:
        z = sg.tensor("z", SHAPE, np.float32)
        sg.op("RELU", [c], [z])
        sg.outputs.append(z)
    return mb


def _inputs(mb: ModelBuilder, seed: int = 4) -> list[np.ndarray]:
    g = rng(seed)
    sess = onert_py.infer.session(mb.to_bytes("tflite"), "cpu")
    return [g.normal(size=i.dims).astype(np.float32) * 3 for i in sess.get_inputs_tensorinfo()]


def _fused(sess) -> list[tuple[str, tuple[int, ...]]]:
    return [(op.kernel_name, op.fused) for ex in sess.executors for op in ex.operations if op.fused]


def _close_to_cpu(got: np.ndarray, data: bytes, ins: list[np.ndarray]) -> None:
    assert_close([got], [onert_py.infer.session(data, "cpu").infer(ins)[0]], rtol=1e-5, atol=3e-5)


def _unfused_bits(got: np.ndarray, data: bytes, ins: list[np.ndarray]) -> None:
    np.testing.assert_array_equal(got, onert_py.infer.session(data, "jit;cpu", fuse_ops=False).infer(ins)[0])
    _close_to_cpu(got, data, ins)


def test_conv_add_prelu_fuse_and_give_the_unfused_bits():
    mb = _block(act=RELU)
    data, ins = mb.to_bytes("tflite"), _inputs(mb)
    fused = onert_py.infer.session(data, "jit;cpu")
    assert _fused(fused) == [("CONV_2D", (1, 2))]
    assert len(fused.executors[0].operations) == 1
    out = fused.infer(ins)
    unfused = onert_py.infer.session(data, "jit;cpu", fuse_ops=False)
    assert not _fused(unfused)
    np.testing.assert_array_equal(out[0], unfused.infer(ins)[0])
    _close_to_cpu(out[0], data, ins)
    assert_close(out, run_litert(mb, ins), rtol=1e-5, atol=3e-5)
    # a second run, other inputs: the arena's slots are reused, the residual is read, not overwritten
    ins2 = _inputs(mb, seed=9)
    kept = [a.copy() for a in ins2]
    np.testing.assert_array_equal(fused.infer(ins2)[0], unfused.infer(ins2)[0])
    for a, k in zip(ins2, kept):
        np.testing.assert_array_equal(a, k)


def _conv_block(shape: list[int], filt: int, stride: int, cout: int) -> ModelBuilder:
    """x -> CONV_2D filt x filt / stride, SAME (+bias) -> ADD(r, conv) -> PRELU(alpha per channel)."""
    g = rng(11)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    out = [shape[0], -(-shape[1] // stride), -(-shape[2] // stride), cout]
    x = sg.tensor("x", shape, np.float32)
    r = sg.tensor("r", out, np.float32)
    w = sg.const("w", g.normal(size=(cout, filt, filt, shape[3])).astype(np.float32) / filt)
    b = sg.const("b", g.normal(size=cout).astype(np.float32))
    alpha = sg.const("alpha", g.uniform(-0.5, 1.5, size=(1, 1, cout)).astype(np.float32))
    c, a, y = (sg.tensor(n, out, np.float32) for n in ("conv", "add", "y"))
    sg.inputs = [x, r]
    sg.op("CONV_2D", [x, w, b], [c], padding=0, stride_h=stride, stride_w=stride,
          dilation_h_factor=1, dilation_w_factor=1, fused_activation_function=NONE)
    sg.op("ADD", [r, c], [a], fused_activation_function=NONE)
    sg.op("PRELU", [a, alpha], [y])
    sg.outputs = [y]
    return mb


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape, filt, stride, cout", [
    ([1, 37, 41, 24], 1, 1, 40),     # pointwise: the GEMM on the input's rows, 1517 rows in blocks of 96
    ([2, 29, 33, 16], 3, 2, 48),     # windows read in place, two images, odd sizes
    ([1, 30, 30, 32], 1, 2, 24),     # a strided 1x1: windows, a last half panel of 8 columns
], ids=["pointwise", "windows_3x3_s2", "windows_1x1_s2"])
def test_chain_runs_in_the_gemm_blocks(shape, filt, stride, cout, threads):
    """Large enough for several blocks per thread (jit/_gemm.py, BLOCK) and, at 2 threads, a split of
    the rows: the fused ADD and PRELU give the unfused run's bits and LiteRT's values; inputs resized
    (both, as the model needs) take a new plan with the same chain."""
    mb = _conv_block(shape, filt, stride, cout)
    data, ins = mb.to_bytes("tflite"), _inputs(mb)
    sess = onert_py.infer.session(data, "jit;cpu", num_threads=threads)
    assert _fused(sess) == [("CONV_2D", (1, 2))]
    got = sess.infer(ins)[0]
    np.testing.assert_array_equal(
        got, onert_py.infer.session(data, "jit;cpu", num_threads=threads, fuse_ops=False).infer(ins)[0])
    assert_close([got], run_litert(mb, ins), rtol=1e-5, atol=1e-4)
    g = rng(12)
    small = [g.normal(size=[shape[0], 12, 10, shape[3]]).astype(np.float32),
             g.normal(size=[shape[0], -(-12 // stride), -(-10 // stride), cout]).astype(np.float32)]
    jit, cpu = (run_interpreter(onert_py.Interpreter(model_content=data, backends=b), small)[0]
                for b in ("jit;cpu", "cpu"))
    assert jit.shape == cpu.shape == tuple(small[1].shape)
    assert_close([jit], [cpu], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("variant", [
    {"out_conv": True},                    # the conv's output is a model output: it must be computed
    {"second_reader": True},               # read by two ops
    {"add_self": True},                    # ADD(conv, conv): the carried value read twice by one op
])
def test_chains_that_must_not_fuse(variant):
    """The conv keeps its output; the ADD, a per-op kernel, then starts a chain of its own (PRELU)."""
    mb = _block(**variant)
    data, ins = mb.to_bytes("tflite"), _inputs(mb)
    sess = onert_py.infer.session(data, "jit;cpu")
    assert _fused(sess) == [("ADD", (2,))]
    got = sess.infer(ins)
    assert_close(got, onert_py.infer.session(data, "cpu").infer(ins), rtol=1e-6, atol=1e-5)
    unfused = onert_py.infer.session(data, "jit;cpu", fuse_ops=False).infer(ins)
    for a, b in zip(got, unfused):
        np.testing.assert_array_equal(a, b)


def test_a_broadcast_that_is_not_per_channel_ends_the_chain():
    # ADD's residual [1, 6, 1, 16] broadcasts along W: not an operand an epilogue reads, so the conv's
    # chain stops; the ADD (its per-op kernel reads the residual through an index array) takes PRELU
    mb = _block(residual_shape=[1, 6, 1, 16])
    data, ins = mb.to_bytes("tflite"), _inputs(mb)
    sess = onert_py.infer.session(data, "jit;cpu")
    assert _fused(sess) == [("ADD", (2,))]
    _unfused_bits(sess.infer(ins)[0], data, ins)


def test_per_channel_and_scalar_operands_fuse():
    mb = _block(residual_shape=[16], alpha_shape=(1,))
    data, ins = mb.to_bytes("tflite"), _inputs(mb)
    sess = onert_py.infer.session(data, "jit;cpu")
    assert _fused(sess) == [("CONV_2D", (1, 2))]
    _unfused_bits(sess.infer(ins)[0], data, ins)
    assert_close(sess.infer(ins), run_litert(mb, ins), rtol=1e-5, atol=3e-5)


def test_an_op_forced_onto_cpu_is_not_fused(monkeypatch):
    mb = _block()
    data = mb.to_bytes("tflite")
    assert _fused(onert_py.infer.session(data, "jit;cpu", op_backend={"PRELU": "cpu"})) == [("CONV_2D", (1,))]
    assert _fused(onert_py.infer.session(data, "jit;cpu", op_backend={"ADD": "cpu"})) == []
    monkeypatch.setenv("ONERT_PY_FUSE", "0")
    assert _fused(onert_py.infer.session(data, "jit;cpu")) == []


def test_preserved_tensors_turn_fusion_off():
    # every intermediate is kept: the conv's and the ADD's outputs must exist
    mb = _block()
    data, ins = mb.to_bytes("tflite"), _inputs(mb)
    with pytest.warns(UserWarning, match="preserve_all_tensors"):
        it = onert_py.Interpreter(model_content=data, experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), ins):
        it.set_tensor(d["index"], x)
    it.invoke()
    names = {d["name"]: d["index"] for d in it.get_tensor_details()}
    conv = it.get_tensor(names["conv"])
    ref = onert_py.infer.session(data, "cpu", preserve_all_tensors=True)
    ref.infer(ins)
    np.testing.assert_array_equal(conv, ref.executors[0].values[names["conv"]])
    assert _fused(onert_py.infer.session(data, "jit;cpu", preserve_all_tensors=True)) == []
    assert _fused(onert_py.infer.session(data, "jit;cpu", executor="dataflow")) == []


def _fc_model(units: int = 16, depth: int = 32, rows: int = 4) -> ModelBuilder:
    """x -> FULLY_CONNECTED (RELU) -> ADD(fc, y) -> MUL(., 0.5): a converter's dense layer, a residual,
    a scale."""
    g = rng(5)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [rows, depth], np.float32)
    y = sg.tensor("y", [rows, units], np.float32)
    w = sg.const("w", g.normal(size=(units, depth)).astype(np.float32))
    b = sg.const("b", g.normal(size=units).astype(np.float32))
    half = sg.const("half", np.array([0.5], np.float32))
    f, a, o = (sg.tensor(n, [rows, units], np.float32) for n in ("fc", "add", "out"))
    sg.inputs = [x, y]
    sg.op("FULLY_CONNECTED", [x, w, b], [f], fused_activation_function=RELU)
    sg.op("ADD", [y, f], [a], fused_activation_function=NONE)       # the carried value second
    sg.op("MUL", [a, half], [o], fused_activation_function=NONE)
    sg.outputs = [o]
    return mb


@pytest.mark.parametrize("rows, units", [(1, 16), (4, 16), (64, 1)])
def test_fully_connected_epilogue(rows, units):
    """The bias, RELU, residual and scale in the FC's pass; one output unit makes it one flat loop with
    channel 0 (codegen.channel_loop)."""
    mb = _fc_model(rows=rows, units=units)
    data, ins = mb.to_bytes("tflite"), _inputs(mb)
    sess = onert_py.infer.session(data, "jit;cpu")
    assert _fused(sess) == [("FULLY_CONNECTED", (1, 2))]
    out = sess.infer(ins)
    _unfused_bits(out[0], data, ins)
    assert_close(out, run_litert(mb, ins), rtol=1e-5, atol=3e-5)


def test_fully_connected_epilogue_on_another_input_shape():
    # the inputs resized (4 rows -> 6), as LiteRT's Interpreter allows: the fused kernel takes the cpu
    # kernel, then the epilogue as a pass of its own
    mb = _fc_model(rows=4)
    data = mb.to_bytes("tflite")
    g = rng(6)
    ins = [g.normal(size=(6, 32)).astype(np.float32), g.normal(size=(6, 16)).astype(np.float32)]
    jit, cpu = (run_interpreter(onert_py.Interpreter(model_content=data, backends=b), ins)[0]
                for b in ("jit;cpu", "cpu"))
    assert jit.shape == (6, 16)
    assert_close([jit], [cpu], rtol=1e-5, atol=3e-5)     # the jit GEMM's order of sums, not BLAS's
    assert_close([jit], [run_interpreter(litert_interpreter(data), ins)[0]], rtol=1e-5, atol=3e-5)


def test_bench_profile_names_the_fused_ops(tmp_path, capsys):
    path = tmp_path / "block.tflite"
    path.write_bytes(_block().to_bytes("tflite"))
    code, out, _ = cli(capsys, "bench", str(path), "--backends", "jit;cpu", "--num-runs", "3", "--profile",
                       "--report", str(tmp_path / "r.json"))
    assert code == 0
    assert "2 ops fused into the kernels of the ops beside them (timed with them): ADD×1, PRELU×1" in out
    rows = {r["index"]: r for r in json.loads((tmp_path / "r.json").read_text())["ops"]}
    assert rows[1]["fused_into"] == 0 and rows[2]["fused_into"] == 0 and rows[0]["fused_into"] is None
    assert not rows[1]["folded"] and rows[1]["backend"] == "jit" and rows[1]["count"] == 0
    assert rows[0]["count"] == 3


# ------------------------------------------------------------------------------------------ int8
# An int8 CONV_2D's residual ADD (MobileNet v2's blocks: the projection, then x + block(x)) runs as a
# gather from the ADD's table of pairs after the conv's output stage.

Q_X, Q_CONV, Q_R, Q_Y = (0.05, -3), (0.08, 5), (0.06, -10), (0.1, 2)


def _int8_block(*, residual_first: bool = False, out_conv: bool = False, residual_shape=None,
                then_mul: bool = False, mul_reads_conv: bool = False, shape=SHAPE) -> ModelBuilder:
    """x -> CONV_2D 1x1 int8 (per-channel filter, bias) -> ADD(conv, r) [-> MUL(add, r or conv)] -> y."""
    g = rng(5)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", shape, np.int8, quantization=Q_X)
    r = sg.tensor("r", residual_shape or shape, np.int8, quantization=Q_R)
    scales = g.uniform(0.002, 0.01, 16).astype(np.float32)
    w = sg.const("w", g.integers(-127, 128, (16, 1, 1, 16)).astype(np.int8),
                 quantization=(scales, np.zeros(16, np.int64), 0))
    b = sg.const("b", g.integers(-2000, 2000, 16).astype(np.int32),
                 quantization=(scales * np.float32(Q_X[0]), np.zeros(16, np.int64), 0))
    c = sg.tensor("conv", shape, np.int8, quantization=Q_CONV)
    y = sg.tensor("y", shape, np.int8, quantization=Q_Y)
    sg.inputs = [x, r]
    sg.op("CONV_2D", [x, w, b], [c], padding=0, stride_h=1, stride_w=1, dilation_h_factor=1,
          dilation_w_factor=1, fused_activation_function=NONE)
    if then_mul:
        a = sg.tensor("add", shape, np.int8, quantization=Q_Y)
        sg.op("ADD", [r, c] if residual_first else [c, r], [a], fused_activation_function=NONE)
        sg.op("MUL", [a, c if mul_reads_conv else r], [y], fused_activation_function=NONE)
    else:
        sg.op("ADD", [r, c] if residual_first else [c, r], [y], fused_activation_function=RELU)
    sg.outputs = [y] + ([c] if out_conv else [])
    return mb


def _int8_inputs(mb: ModelBuilder, seed: int = 4) -> list[np.ndarray]:
    sess = onert_py.infer.session(mb.to_bytes("tflite"), "cpu")
    return [rng(seed + k).integers(-128, 128, i.dims).astype(np.int8)
            for k, i in enumerate(sess.get_inputs_tensorinfo())]


@pytest.mark.parametrize("variant", [{}, {"residual_first": True}, {"then_mul": True}],
                         ids=["conv_first", "residual_first", "add_then_mul"])
def test_int8_conv_takes_its_residual_add(variant):
    mb = _int8_block(**variant)
    data, ins = mb.to_bytes("tflite"), _int8_inputs(mb)
    fused = onert_py.infer.session(data, "jit;cpu")
    assert _fused(fused) == [("CONV_2D", (1, 2) if variant.get("then_mul") else (1,))]
    out = fused.infer(ins)[0]
    np.testing.assert_array_equal(out, run_litert_builtin(mb, ins)[0])
    for other in (onert_py.infer.session(data, "jit;cpu", fuse_ops=False), onert_py.infer.session(data, "cpu")):
        assert not _fused(other)
        np.testing.assert_array_equal(out, other.infer(ins)[0])


@pytest.mark.parametrize("variant", [{"out_conv": True}, {"residual_shape": [1, 1, 1, 16]}],
                         ids=["conv_is_an_output", "residual_broadcasts"])
def test_int8_residual_add_left_apart(variant):
    mb = _int8_block(**variant)
    data, ins = mb.to_bytes("tflite"), _int8_inputs(mb)
    sess = onert_py.infer.session(data, "jit;cpu")
    assert not _fused(sess)
    for got, want in zip(sess.infer(ins), run_litert_builtin(mb, ins)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("first_shape", [SHAPE, [1, 6, 1, 16], [16]], ids=["same", "broadcast_w", "channel"])
def test_elementwise_ops_fuse_into_one_pass(first_shape):
    """x * s -> + b -> RELU6 -> * y -> NEG: the first op's per-op kernel (whatever its broadcast) takes
    the others into its pass, with the unfused run's bits, the cpu backend's and LiteRT's values."""
    g = rng(21)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x, y = sg.tensor("x", SHAPE, np.float32), sg.tensor("y", SHAPE, np.float32)
    s = sg.const("s", g.normal(size=first_shape).astype(np.float32))
    b = sg.const("b", g.normal(size=[16]).astype(np.float32))
    t = [sg.tensor(f"t{k}", SHAPE, np.float32) for k in range(5)]
    sg.inputs = [x, y]
    sg.op("MUL", [x, s], [t[0]], fused_activation_function=NONE)
    sg.op("ADD", [t[0], b], [t[1]], fused_activation_function=NONE)
    sg.op("RELU6", [t[1]], [t[2]])
    sg.op("MUL", [y, t[2]], [t[3]], fused_activation_function=NONE)
    sg.op("NEG", [t[3]], [t[4]])
    sg.outputs = [t[4]]
    data = mb.to_bytes("tflite")
    ins = [(g.normal(size=SHAPE) * 4).astype(np.float32) for _ in range(2)]
    ins[0].reshape(-1)[:4] = [np.nan, np.inf, -np.inf, -0.0]
    sess = onert_py.infer.session(data, "jit;cpu")
    assert _fused(sess) == [("MUL", (1, 2, 3, 4))]
    got = sess.infer(ins)[0]
    _unfused_bits(got, data, ins)
    assert_close([got], run_litert_builtin(mb, ins), rtol=1e-5, atol=1e-6)


def test_int8_chain_reading_the_conv_again_is_left_apart():
    """ADD(conv, r) then MUL(add, conv): the table gathers carry one value, so the conv keeps its output
    (and the MUL reads it) rather than fusing the two. Large enough that the jit kernel takes the conv
    without a residual to fuse."""
    mb = _int8_block(then_mul=True, mul_reads_conv=True, shape=[1, 48, 48, 16])
    data, ins = mb.to_bytes("tflite"), _int8_inputs(mb)
    sess = onert_py.infer.session(data, "jit;cpu")
    assert sess.executors[0].backend_names[0] == "jit"
    assert all(name != "CONV_2D" for name, _ in _fused(sess))
    np.testing.assert_array_equal(sess.infer(ins)[0], run_litert_builtin(mb, ins)[0])


# ------------------------------------------------------------ gated chains: x * sigmoid(x)

def _gated(producer: str, *, producer_out: bool = False, third_reader: bool = False,
           gate_first: bool = False) -> ModelBuilder:
    """x -> PRODUCER -> LOGISTIC -> MUL(producer's output, gate) -> ADD(., r): the swish / SiLU after
    EfficientNet's and YOLO's convolutions as the converter writes it. PRODUCER: a 3x3 CONV_2D, a
    FULLY_CONNECTED or an elementwise ADD (a per-op kernel). The flags make the variants whose
    producer must keep its output: it is returned, or read by a third op."""
    g = rng(31)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    if producer == "CONV_2D":
        in_shape, shape = [1, 10, 12, 16], [1, 10, 12, 24]
    elif producer == "FULLY_CONNECTED":
        in_shape, shape = [4, 32], [4, 24]
    else:
        in_shape = shape = [1, 10, 12, 24]
    x, r = sg.tensor("x", in_shape, np.float32), sg.tensor("r", shape, np.float32)
    p, gate, gated, y = (sg.tensor(n, shape, np.float32) for n in ("p", "gate", "gated", "y"))
    sg.inputs = [x, r]
    if producer == "CONV_2D":
        w = sg.const("w", (g.normal(size=(24, 3, 3, 16)) / 6).astype(np.float32))
        b = sg.const("b", g.normal(size=24).astype(np.float32))
        sg.op("CONV_2D", [x, w, b], [p], padding=0, stride_h=1, stride_w=1, dilation_h_factor=1,
              dilation_w_factor=1, fused_activation_function=NONE)
    elif producer == "FULLY_CONNECTED":
        w = sg.const("w", (g.normal(size=(24, 32)) / 4).astype(np.float32))
        b = sg.const("b", g.normal(size=24).astype(np.float32))
        sg.op("FULLY_CONNECTED", [x, w, b], [p], fused_activation_function=NONE)
    else:
        b = sg.const("b", g.normal(size=24).astype(np.float32))
        sg.op("ADD", [x, b], [p], fused_activation_function=NONE)
    sg.op("LOGISTIC", [p], [gate])
    sg.op("MUL", [gate, p] if gate_first else [p, gate], [gated], fused_activation_function=NONE)
    sg.op("ADD", [gated, r], [y], fused_activation_function=NONE)
    sg.outputs = [y]
    if producer_out:
        sg.outputs.append(p)
    if third_reader:
        z = sg.tensor("z", shape, np.float32)
        sg.op("RELU", [p], [z])
        sg.outputs.append(z)
    return mb


@pytest.mark.parametrize("gate_first", [False, True], ids=["x_times_gate", "gate_times_x"])
@pytest.mark.parametrize("producer", ["CONV_2D", "FULLY_CONNECTED", "ADD"])
def test_gated_chain_fuses_into_its_producer(producer, gate_first):
    """The producer's kernel keeps its value while LOGISTIC runs, then multiplies by it: one pass, with
    the unfused run's bits and LiteRT's values (special values through the elementwise producer)."""
    mb = _gated(producer, gate_first=gate_first)
    data, ins = mb.to_bytes("tflite"), _inputs(mb)
    if producer == "ADD":
        ins[0].reshape(-1)[:6] = [np.nan, np.inf, -np.inf, -0.0, 100.0, -100.0]
    sess = onert_py.infer.session(data, "jit;cpu")
    assert _fused(sess) == [(producer, (1, 2, 3))]
    assert len(sess.executors[0].operations) == 1
    got = sess.infer(ins)[0]
    np.testing.assert_array_equal(got, onert_py.infer.session(data, "jit;cpu", fuse_ops=False).infer(ins)[0])
    assert_close([got], onert_py.infer.session(data, "cpu").infer(ins), rtol=1e-5, atol=3e-5)
    assert_close([got], run_litert_builtin(mb, ins), rtol=1e-5, atol=3e-5)


@pytest.mark.parametrize("variant", [{"producer_out": True}, {"third_reader": True}], ids=["returned", "read_again"])
@pytest.mark.parametrize("producer", ["CONV_2D", "ADD"])
def test_gated_chain_whose_value_is_needed_elsewhere(producer, variant):
    """The producer's output is returned or read by a RELU outside the chain: it is written, and
    LOGISTIC (a per-op kernel) takes the MUL and ADD, reading it back."""
    mb = _gated(producer, **variant)
    data, ins = mb.to_bytes("tflite"), _inputs(mb)
    sess = onert_py.infer.session(data, "jit;cpu")
    assert _fused(sess) == [("LOGISTIC", (2, 3))]
    got = sess.infer(ins)
    unfused = onert_py.infer.session(data, "jit;cpu", fuse_ops=False).infer(ins)
    for a, b in zip(got, unfused):
        np.testing.assert_array_equal(a, b)
    assert_close(got, run_litert_builtin(mb, ins), rtol=1e-5, atol=3e-5)


# ------------------------------------------------------------ a model's input scaling (3 channels)

@pytest.mark.parametrize("per_channel", [False, True], ids=["rescaling", "normalization"])
def test_input_scaling_chain_on_three_channels(per_channel):
    """x * 1/127.5 - 1 (Keras' Rescaling) or (x - mean) * 1/std per channel (Normalization) on an RGB
    input, then a strided 3x3 stem: the scaling is one pass (a flat loop when no operand is per
    channel, codegen.channel_loop), with the unfused run's bits and LiteRT's values."""
    g = rng(41)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [1, 30, 40, 3], np.float32)
    shape = [1] * 3 + [3] if per_channel else [1]
    first = sg.const("first", (g.uniform(0.3, 0.6, 3) if per_channel else np.array([1 / 127.5])).astype(np.float32).reshape(shape))
    second = sg.const("second", (g.uniform(0.5, 2.0, 3) if per_channel else np.array([1.0])).astype(np.float32).reshape(shape))
    a, s = sg.tensor("a", [1, 30, 40, 3], np.float32), sg.tensor("s", [1, 30, 40, 3], np.float32)
    w = sg.const("w", (g.normal(size=(16, 3, 3, 3)) / 5).astype(np.float32))
    y = sg.tensor("y", [1, 15, 20, 16], np.float32)
    sg.inputs = [x]
    if per_channel:
        sg.op("SUB", [x, first], [a], fused_activation_function=NONE)
        sg.op("MUL", [a, second], [s], fused_activation_function=NONE)
    else:
        sg.op("MUL", [x, first], [a], fused_activation_function=NONE)
        sg.op("SUB", [a, second], [s], fused_activation_function=NONE)
    bias = sg.const("bias", g.normal(size=16).astype(np.float32))
    sg.op("CONV_2D", [s, w, bias], [y], padding=0, stride_h=2, stride_w=2, dilation_h_factor=1,
          dilation_w_factor=1, fused_activation_function=RELU)
    sg.outputs = [y]
    data = mb.to_bytes("tflite")
    ins = [g.uniform(0, 255, (1, 30, 40, 3)).astype(np.float32)]
    sess = onert_py.infer.session(data, "jit;cpu")
    assert (("SUB" if per_channel else "MUL"), (1,)) in _fused(sess)
    got = sess.infer(ins)[0]
    np.testing.assert_array_equal(got, onert_py.infer.session(data, "jit;cpu", fuse_ops=False).infer(ins)[0])
    assert_close([got], run_litert(mb, ins), rtol=1e-5, atol=1e-4)


def test_channel_loop_is_flat_unless_a_line_reads_the_channel():
    from onert_py.backends.jit.codegen import channel_loop
    flat = channel_loop("    ", "n", "channels", ["v = a[k] * e0[0]", "out[k] = v"])
    assert sum(line.lstrip().startswith("for ") for line in flat) == 1
    nested = channel_loop("    ", "n", "channels", ["v = a[k] * e0[ch]", "out[k] = v"])
    assert sum(line.lstrip().startswith("for ") for line in nested) == 2
    # a name that merely contains "ch" is no channel read
    assert sum(line.lstrip().startswith("for ") for line in
               channel_loop("    ", "n", "channels", ["v = each[k]", "out[k] = v"])) == 1
