"""Full-integer (8x8_16) UNIDIRECTIONAL_SEQUENCE_LSTM: bit-exact with LiteRT's builtin kernel.

Models are built by hand the way the TFLite converter lays them out: int8 input / output / output state,
int16 cell state with a power-of-two scale, int8 weights, int32 biases, int16 peephole and layer-norm
weights, int8 projection, and the op's five `intermediates` (gate matmul scales for layer norm, the
hidden value's scale and zero point). The state tensors are set to random values in both runtimes
(LiteRT resets an int8 variable to its zero point, onert-py to 0), then two invokes carry it on.
"""
from __future__ import annotations

import numpy as np
import pytest

import onert_py
from onert_py.errors import PrepareError
from onert_py.schema.writer import ModelBuilder
from helpers import FORMATS, LSTM_CONFIGS, check_builtin, rng

I8, I16, I32 = np.int8, np.int16, np.int32

CONFIGS = LSTM_CONFIGS


def _model(cfg: str, *, batch=2, steps=3, n_in=5, n_cell=4, time_major=False, seed=0, x_q=(0.05, 3),
           h_q=(0.02, -5), hidden_q=(0.01, 2), cell_log2=-11, w_scale=0.02, cell_clip=0.0, proj_clip=0.0,
           out_q=None, n_inter=5, ln_inter_scale=2.0 ** -10, x_dtype=I8, opcode="UNIDIRECTIONAL_SEQUENCE_LSTM"):
    cifg, peep, proj, proj_bias, ln = CONFIGS[cfg]
    g = rng(seed)
    n_out = n_cell - 1 if proj else n_cell
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    step_op = opcode == "LSTM"
    lead = [batch] if step_op else [steps, batch] if time_major else [batch, steps]
    x = sg.tensor("x", lead + [n_in], x_dtype, quantization=x_q)

    def w8(name, *shape, scale=w_scale):
        return sg.const(name, g.integers(-127, 128, shape).astype(I8), quantization=(scale, 0))

    def w16(name, n, scale, lo=-20000, hi=20000):
        return sg.const(name, g.integers(lo, hi, n).astype(I16), quantization=(scale, 0))

    def b32(name, n, lim=3000):
        return sg.const(name, g.integers(-lim, lim, n).astype(I32), quantization=(1e-4, 0))

    gs = [w_scale * f for f in (1.0, 0.7, 1.6, 0.45)]   # a different weight scale per gate
    ins = [-1 if cifg else w8("i2i", n_cell, n_in, scale=gs[0]), w8("i2f", n_cell, n_in, scale=gs[1]),
           w8("i2c", n_cell, n_in, scale=gs[2]), w8("i2o", n_cell, n_in, scale=gs[3]),
           -1 if cifg else w8("r2i", n_cell, n_out, scale=gs[1]), w8("r2f", n_cell, n_out, scale=gs[0]),
           w8("r2c", n_cell, n_out, scale=gs[3]), w8("r2o", n_cell, n_out, scale=gs[2])]
    ins += ([-1 if cifg else w16("c2i", n_cell, 3e-4), w16("c2f", n_cell, 2e-4), w16("c2o", n_cell, 5e-4)]
            if peep else [-1] * 3)
    ins += [-1 if cifg else b32("bi", n_cell), b32("bf", n_cell), b32("bc", n_cell), b32("bo", n_cell)]
    ins += [w8("pw", n_out, n_cell, scale=0.03) if proj else -1,
            b32("pb", n_out) if proj and proj_bias else -1]
    h = sg.tensor("h", [batch, n_out], I8, quantization=h_q, is_variable=True)
    c = sg.tensor("c", [batch, n_cell], I16, quantization=(2.0 ** cell_log2, 0), is_variable=True)
    lns = []
    if ln:
        lns = [-1 if cifg else w16("lni", n_cell, 3e-5, 5000, 32767), w16("lnf", n_cell, 4e-5, 5000, 32767),
               w16("lnc", n_cell, 2e-5, 5000, 32767), w16("lno", n_cell, 5e-5, 5000, 32767)]
    out = sg.tensor("out", lead + [n_out], I8, quantization=out_q or h_q)
    inter = [sg.tensor(f"inter{j}", [], I16, quantization=(ln_inter_scale * (1 + 0.3 * j), 0))
             for j in range(4)]
    inter.append(sg.tensor("hidden", [], I8, quantization=hidden_q))
    options = {"fused_activation_function": 4, "cell_clip": cell_clip, "proj_clip": proj_clip,
               **({"kernel_type": 0} if step_op else {"time_major": time_major})}
    op = sg.op(opcode, [x] + ins + [h, c] + lns, [out], **options)
    sg.operations[op].intermediates = tuple(inter[:n_inter])
    sg.inputs, sg.outputs = [x], [out]
    mb.signature("serving_default", sg)
    return mb, lead + [n_in], (h, [batch, n_out]), (c, [batch, n_cell])


def _run(interpreter_cls, data: bytes, feeds, states, **kw):
    it = interpreter_cls(model_content=data, **kw)
    it.allocate_tensors()
    for idx, value in states:
        it.set_tensor(idx, value)
    inp = it.get_input_details()[0]["index"]
    out = it.get_output_details()[0]["index"]
    results = []
    for x in feeds:
        it.set_tensor(inp, x)
        it.invoke()
        results.append(np.array(it.get_tensor(out), copy=True))
    results += [np.array(it.get_tensor(idx), copy=True) for idx, _ in states]
    return results


def _check(mb: ModelBuilder, x_shape, h, c, *, seed=1, x_range=(-128, 128), c_range=(-6000, 6000)):
    """Two invokes from random states: the outputs and the final states equal LiteRT's builtin ones."""
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    g = rng(seed)
    feeds = [g.integers(*x_range, x_shape).astype(I8) for _ in range(2)]
    states = [(h[0], g.integers(-128, 128, h[1]).astype(I8)), (c[0], g.integers(*c_range, c[1]).astype(I16))]
    expected = _run(litert.Interpreter, mb.to_bytes("tflite"), feeds, states,
                    experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    before = [np.array(x, copy=True) for x in feeds]
    for fmt in FORMATS:
        got = _run(onert_py.Interpreter, mb.to_bytes(fmt), feeds, states)
        for k, (a, e) in enumerate(zip(got, expected)):
            assert a.dtype == e.dtype and a.shape == e.shape, f"{fmt} result {k}"
            np.testing.assert_array_equal(a, e, err_msg=f"{fmt} result {k}")
    for x, b in zip(feeds, before):
        np.testing.assert_array_equal(x, b)
    return expected


@pytest.mark.parametrize("cfg", sorted(CONFIGS))
@pytest.mark.parametrize("time_major", [False, True])
def test_integer_lstm_matches_litert(cfg, time_major):
    mb, x_shape, h, c = _model(cfg, time_major=time_major, seed=len(cfg))
    _check(mb, x_shape, h, c)


@pytest.mark.parametrize("cfg", sorted(CONFIGS))
def test_integer_lstm_step_matches_litert(cfg):
    mb, x_shape, h, c = _model(cfg, batch=3, seed=len(cfg) + 1, opcode="LSTM")
    _check(mb, x_shape, h, c, seed=2)


@pytest.mark.parametrize("cfg", ["plain", "cifg_peephole", "projection", "all"])
@pytest.mark.parametrize("time_major", [False, True])
def test_integer_lstm_clips(cfg, time_major):
    # Saturating inputs and weights: the cell clip (0.3 at scale 2**-11 -> 614) and the projection clip
    # (0.5 at output scale 0.02 -> 25) bite.
    mb, x_shape, h, c = _model(cfg, time_major=time_major, seed=5, w_scale=0.08, cell_clip=0.3,
                               proj_clip=0.5, out_q=(0.02, 4), steps=4)
    _check(mb, x_shape, h, c, seed=3)


@pytest.mark.parametrize("cfg", ["plain", "cifg", "layer_norm", "all", "projection"])
@pytest.mark.parametrize("quant", [
    # (input q, output state q, hidden q, weight scale, layer-norm intermediate scale)
    ((0.5, -128), (0.001, 100), (0.05, -100), 0.5, 2.0 ** -16),    # effective multipliers above 1
    ((0.002, 127), (0.05, -120), (0.02, 60), 0.002, 2.0 ** -6),    # far below 1
    ((0.05, 0), (0.02, 0), (2.0 ** -7, 0), 0.02, 2.0 ** -12),      # symmetric
], ids=["above_one", "below_one", "symmetric"])
def test_integer_lstm_zero_points_and_multipliers(cfg, quant):
    x_q, h_q, hidden_q, w_scale, ln_s = quant
    mb, x_shape, h, c = _model(cfg, seed=7, x_q=x_q, h_q=h_q, hidden_q=hidden_q, w_scale=w_scale,
                               ln_inter_scale=ln_s, steps=4)
    _check(mb, x_shape, h, c, seed=4)


@pytest.mark.parametrize("cell_log2", [-15, -13, -9])
@pytest.mark.parametrize("cfg", ["plain", "cifg_peephole", "layer_norm_cifg_peephole_proj"])
def test_integer_lstm_cell_scales(cfg, cell_log2):
    # 15 + cell_log2 integer bits for the cell tanh (0 to 6); 30 + cell_log2 the input*cell gate shift
    mb, x_shape, h, c = _model(cfg, seed=8, cell_log2=cell_log2, w_scale=0.05)
    _check(mb, x_shape, h, c, seed=5, c_range=(-32768, 32768))


@pytest.mark.parametrize("batch,time_major", [(1, False), (3, True), (3, False)])
def test_integer_lstm_keras_sized(batch, time_major):
    mb, x_shape, h, c = _model("plain", batch=batch, steps=10, n_in=8, n_cell=16, time_major=time_major,
                               seed=9, w_scale=0.01)
    _check(mb, x_shape, h, c, seed=6)


@pytest.mark.parametrize("zero_point", [0, -37, 127])
@pytest.mark.parametrize("cfg", ["plain", "layer_norm", "all"])
def test_integer_lstm_from_zero_state(cfg, zero_point):
    # The default state: LiteRT fills an int8 variable with its zero point (real 0), and so does
    # onert-py. check_builtin also covers the shape rule.
    mb, x_shape, _, _ = _model(cfg, h_q=(0.02, zero_point), seed=10)
    check_builtin(mb, [rng(11).integers(-128, 128, x_shape).astype(I8)])


def _prepare_error(mb: ModelBuilder, match: str):
    for fmt in FORMATS:
        with pytest.raises(PrepareError, match=match):
            onert_py.infer.session(mb.to_bytes(fmt))


def test_integer_lstm_needs_five_intermediates():
    mb, *_ = _model("plain", n_inter=4)
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    it = litert.Interpreter(model_content=mb.to_bytes("tflite"),
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    with pytest.raises(RuntimeError):
        it.allocate_tensors()
    _prepare_error(mb, "5 intermediate tensors")


@pytest.mark.parametrize("cell_scale", [2.0 ** -8, 2.0 ** -16, 3e-4])
def test_integer_lstm_refuses_cell_scales_litert_cannot_run(cell_scale):
    # LiteRT does not check its result here: a non power of two leaves the parameters half set, and
    # more than 6 integer bits leave the cell tanh's buffer unwritten. Refused.
    mb, *_ = _model("plain")
    c = mb.subgraphs[0].tensors[[t.name for t in mb.subgraphs[0].tensors].index("c")]
    c.quantization.scale = np.array([cell_scale], np.float32)
    _prepare_error(mb, "cell_state scale")
