"""Recurrent ops (RNN/LSTM families, SVDF) against LiteRT, invoked several times to check that the state
carried in variable tensors matches across invocations."""
import numpy as np
import pytest

import onert_py
from helpers import FORMATS, LSTM_CONFIGS, litert_interpreter, rng
from onert_py.schema.writer import ModelBuilder

F32 = np.float32
RTOL, ATOL = 1e-5, 1e-5


def _litert_runs(data: bytes, feeds: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    it = litert_interpreter(data)
    it.allocate_tensors()
    results = []
    for feed in feeds:
        for d, x in zip(it.get_input_details(), feed):
            it.set_tensor(d["index"], x)
        it.invoke()
        results.append([it.get_tensor(d["index"]) for d in it.get_output_details()])
    return results


def _check(mb: ModelBuilder, feeds: list[list[np.ndarray]], rtol: float = RTOL, atol: float = ATOL) -> None:
    """One LiteRT interpreter and one onert-py session per format, invoked once per feed, agree."""
    expected = _litert_runs(mb.to_bytes("tflite"), feeds)
    for fmt in FORMATS:
        sess = onert_py.infer.session(mb.to_bytes(fmt))
        for k, (feed, exp) in enumerate(zip(feeds, expected)):
            got = sess.infer([np.array(x, copy=True) for x in feed])
            assert len(got) == len(exp)
            for j, (a, e) in enumerate(zip(got, exp)):
                assert a.shape == e.shape and a.dtype == e.dtype, (fmt, k, j, a.shape, e.shape)
                np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=f"{fmt} invoke {k} output {j}")


def _feeds(g, shapes: list, n: int = 3, scale: float = 1.0) -> list[list[np.ndarray]]:
    return [[(scale * g.normal(size=s)).astype(F32) for s in shapes] for _ in range(n)]


def _w(g, *shape, scale=0.5):
    return (scale * g.normal(size=shape)).astype(F32)


# ------------------------------------------------------------------------------------------------- LSTM

def _lstm_inputs(sg, g, prefix, n_in, n_cell, *, cifg, peephole, proj, proj_bias, ln, n_aux=0, diagonal=False):
    """Constant LSTM parameters in the 1..17 (+20..23 layer norm) order; returns (indices, ln, n_out, aux)."""
    n_out = (n_cell - 1 if proj else n_cell)
    c = lambda name, *shape: sg.const(f"{prefix}{name}", _w(g, *shape))  # noqa: E731
    r_shape = (n_cell,) if diagonal else (n_cell, n_out)
    ins = [-1 if cifg else c("i2i", n_cell, n_in), c("i2f", n_cell, n_in), c("i2c", n_cell, n_in),
           c("i2o", n_cell, n_in),
           -1 if cifg else c("r2i", *r_shape), c("r2f", *r_shape), c("r2c", *r_shape), c("r2o", *r_shape)]
    ins += ([-1 if cifg else c("c2i", n_cell), c("c2f", n_cell), c("c2o", n_cell)] if peephole else [-1] * 3)
    ins += [-1 if cifg else c("bi", n_cell), c("bf", n_cell), c("bc", n_cell), c("bo", n_cell)]
    ins += [c("pw", n_out, n_cell) if proj else -1, c("pb", n_out) if proj and proj_bias else -1]
    lns = [-1 if cifg else c("lni", n_cell), c("lnf", n_cell), c("lnc", n_cell), c("lno", n_cell)] if ln else []
    aux = []
    if n_aux:
        aux = [-1 if cifg else c("ai", n_cell, n_aux), c("af", n_cell, n_aux), c("ac", n_cell, n_aux),
               c("ao", n_cell, n_aux)]
    return ins, lns, n_out, aux




def _uni_lstm_model(cfg, *, batch, steps, time_major, n_in=5, n_cell=6, act=4, cell_clip=0.0, proj_clip=0.0,
                    diagonal=False, seed=0):
    cifg, peephole, proj, proj_bias, ln = LSTM_CONFIGS[cfg]
    g = rng(seed)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    lead = [steps, batch] if time_major else [batch, steps]
    x = sg.tensor("x", lead + [n_in], F32)
    ins, lns, n_out, _ = _lstm_inputs(sg, g, "", n_in, n_cell, cifg=cifg, peephole=peephole, proj=proj,
                                      proj_bias=proj_bias, ln=ln, diagonal=diagonal)
    h = sg.tensor("h", [batch, n_out], F32, is_variable=True)
    c = sg.tensor("c", [batch, n_cell], F32, is_variable=True)
    out = sg.tensor("out", lead + [n_out], F32)
    options = dict(fused_activation_function=act, cell_clip=cell_clip, proj_clip=proj_clip,
                   time_major=time_major)
    if diagonal:
        options["diagonal_recurrent_tensors"] = True
    sg.op("UNIDIRECTIONAL_SEQUENCE_LSTM", [x] + ins + [h, c] + lns, [out], **options)
    sg.inputs, sg.outputs = [x], [out]
    mb.signature("serving_default", sg)
    return mb, lead + [n_in]


@pytest.mark.parametrize("cfg", sorted(LSTM_CONFIGS))
@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("batch", [1, 3])
def test_unidirectional_sequence_lstm(cfg, time_major, batch):
    mb, x_shape = _uni_lstm_model(cfg, batch=batch, steps=4, time_major=time_major)
    _check(mb, _feeds(rng(10), [x_shape]))


@pytest.mark.parametrize("cfg", ["plain", "all", "cifg_peephole"])
@pytest.mark.parametrize("act", [0, 1, 3])
def test_unidirectional_sequence_lstm_clips_and_activations(cfg, act):
    # Large inputs so that cell_clip / proj_clip bite.
    mb, x_shape = _uni_lstm_model(cfg, batch=2, steps=5, time_major=False, act=act, cell_clip=0.7,
                                  proj_clip=0.4, seed=3)
    _check(mb, _feeds(rng(11), [x_shape], scale=3.0))


def test_unidirectional_sequence_lstm_keras_sized():
    # The converter's typical shape: batch-major, no peephole/projection, tanh; longer sequence.
    mb, x_shape = _uni_lstm_model("plain", batch=2, steps=20, time_major=False, n_in=16, n_cell=32)
    _check(mb, _feeds(rng(12), [x_shape]), atol=2e-5)  # K=48 dot products re-summed each of 20 steps


def test_unidirectional_sequence_lstm_diagonal_recurrent():
    mb, x_shape = _uni_lstm_model("peephole", batch=3, steps=4, time_major=True, diagonal=True)
    _check(mb, _feeds(rng(13), [x_shape]))


def _lstm_step_model(cfg, *, batch, n_in=4, n_cell=5, act=4, cell_clip=0.0, proj_clip=0.0, seed=0):
    cifg, peephole, proj, proj_bias, ln = LSTM_CONFIGS[cfg]
    g = rng(seed)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [batch, n_in], F32)
    ins, lns, n_out, _ = _lstm_inputs(sg, g, "", n_in, n_cell, cifg=cifg, peephole=peephole, proj=proj,
                                      proj_bias=proj_bias, ln=ln)
    h = sg.tensor("h", [batch, n_out], F32, is_variable=True)
    c = sg.tensor("c", [batch, n_cell], F32, is_variable=True)
    out = sg.tensor("out", [batch, n_out], F32)
    sg.op("LSTM", [x] + ins + [h, c] + lns, [out], fused_activation_function=act, cell_clip=cell_clip,
          proj_clip=proj_clip, kernel_type=0, version=3 if ln else 1)
    sg.inputs, sg.outputs = [x], [out]
    mb.signature("serving_default", sg)
    return mb, [batch, n_in]


@pytest.mark.parametrize("cfg", sorted(LSTM_CONFIGS))
@pytest.mark.parametrize("batch", [1, 3])
def test_lstm(cfg, batch):
    mb, x_shape = _lstm_step_model(cfg, batch=batch)
    _check(mb, _feeds(rng(14), [x_shape], n=4))


def test_lstm_clips():
    mb, x_shape = _lstm_step_model("all", batch=2, cell_clip=0.5, proj_clip=0.3, act=3)
    _check(mb, _feeds(rng(15), [x_shape], n=4, scale=3.0))


def _bidi_lstm_model(cfg, *, batch, steps, time_major, merge, aux=None, n_in=4, n_cell=5, act=4,
                     cell_clip=0.0, proj_clip=0.0, seed=0):
    """aux: None, 'cross' (aux input + aux weights) or 'bw_input' (aux input is the backward input)."""
    cifg, peephole, proj, proj_bias, _ = LSTM_CONFIGS[cfg]
    g = rng(seed)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    lead = [steps, batch] if time_major else [batch, steps]
    n_aux = n_in if aux == "bw_input" else 3   # LiteRT checks the bw weights against the input's size
    x = sg.tensor("x", lead + [n_in], F32)
    kw = dict(cifg=cifg, peephole=peephole, proj=proj, proj_bias=proj_bias, ln=False)
    fw, _, nf, fw_aux = _lstm_inputs(sg, g, "fw_", n_in, n_cell, n_aux=n_aux if aux == "cross" else 0, **kw)
    bw_in = n_aux if aux == "bw_input" else n_in
    bw, _, nb, bw_aux = _lstm_inputs(sg, g, "bw_", bw_in, n_cell, n_aux=n_aux if aux == "cross" else 0, **kw)
    states = [sg.tensor("fh", [batch, nf], F32, is_variable=True), sg.tensor("fc", [batch, n_cell], F32,
                                                                             is_variable=True),
              sg.tensor("bh", [batch, nb], F32, is_variable=True), sg.tensor("bc", [batch, n_cell], F32,
                                                                             is_variable=True)]
    graph_inputs, shapes = [x], [lead + [n_in]]
    aux_ins = [-1] * 9
    if aux:
        a = sg.tensor("aux", lead + [n_aux], F32)
        graph_inputs.append(a)
        shapes.append(lead + [n_aux])
        aux_ins = [a] + (fw_aux + bw_aux if aux == "cross" else [-1] * 8)
    if merge:
        outs = [sg.tensor("out", lead + [nf + nb], F32)]
    else:
        outs = [sg.tensor("fw_out", lead + [nf], F32), sg.tensor("bw_out", lead + [nb], F32)]
    sg.op("BIDIRECTIONAL_SEQUENCE_LSTM", [x] + fw + bw + states + aux_ins, outs, fused_activation_function=act,
          cell_clip=cell_clip, proj_clip=proj_clip, merge_outputs=merge, time_major=time_major,
          version=3 if not time_major else 1)
    sg.inputs, sg.outputs = graph_inputs, outs
    mb.signature("serving_default", sg)
    return mb, shapes


# Batch-major with batch > 1 is left out: LiteRT 2.3's bidirectional LSTM gives wrong results for batch
# rows >= 2 there (its rows disagree with the same rows run alone, and with its own time-major result).
@pytest.mark.parametrize("cfg", ["plain", "cifg_peephole", "projection", "all"])
@pytest.mark.parametrize("time_major,batch", [(True, 1), (True, 3), (False, 1)])
@pytest.mark.parametrize("merge", [False, True])
def test_bidirectional_sequence_lstm(cfg, time_major, batch, merge):
    mb, shapes = _bidi_lstm_model(cfg, batch=batch, steps=4, time_major=time_major, merge=merge)
    _check(mb, _feeds(rng(16), shapes))


@pytest.mark.parametrize("aux", ["cross", "bw_input"])
@pytest.mark.parametrize("cfg", ["plain", "cifg_peephole"])
def test_bidirectional_sequence_lstm_aux_input(aux, cfg):
    mb, shapes = _bidi_lstm_model(cfg, batch=2, steps=3, time_major=True, merge=False, aux=aux,
                                  cell_clip=0.8, act=4)
    _check(mb, _feeds(rng(17), shapes))


# -------------------------------------------------------------------------------------------------- RNN

def _rnn_model(op, *, batch, steps=None, time_major=False, n_in=4, units=6, act=1, seed=0):
    g = rng(seed)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    lead = [batch] if steps is None else ([steps, batch] if time_major else [batch, steps])
    x = sg.tensor("x", lead + [n_in], F32)
    w, r, b = sg.const("w", _w(g, units, n_in)), sg.const("r", _w(g, units, units)), sg.const("b", _w(g, units))
    h = sg.tensor("h", [batch, units], F32, is_variable=True)
    out = sg.tensor("out", lead + [units], F32)
    options = dict(fused_activation_function=act)
    if steps is not None:
        options["time_major"] = time_major
    sg.op(op, [x, w, r, b, h], [out], **options)
    sg.inputs, sg.outputs = [x], [out]
    mb.signature("serving_default", sg)
    return mb, lead + [n_in]


@pytest.mark.parametrize("act", [0, 1, 4])
@pytest.mark.parametrize("batch", [1, 3])
def test_rnn(act, batch):
    mb, x_shape = _rnn_model("RNN", batch=batch, act=act)
    _check(mb, _feeds(rng(20), [x_shape], n=4))


@pytest.mark.parametrize("act", [0, 1, 4, 3])
@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("batch", [1, 3])
def test_unidirectional_sequence_rnn(act, time_major, batch):
    mb, x_shape = _rnn_model("UNIDIRECTIONAL_SEQUENCE_RNN", batch=batch, steps=5, time_major=time_major, act=act)
    _check(mb, _feeds(rng(21), [x_shape]))


def _bidi_rnn_model(*, batch, steps, time_major, merge, aux=None, n_in=4, fw_units=5, bw_units=3, act=4,
                    seed=0):
    g = rng(seed)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    lead = [steps, batch] if time_major else [batch, steps]
    n_aux = n_in if aux == "bw_input" else 2   # LiteRT checks the bw weights against the input's size
    x = sg.tensor("x", lead + [n_in], F32)
    bw_in = n_aux if aux == "bw_input" else n_in
    ins = [x, sg.const("fw", _w(g, fw_units, n_in)), sg.const("fr", _w(g, fw_units, fw_units)),
           sg.const("fb", _w(g, fw_units)), sg.tensor("fh", [batch, fw_units], F32, is_variable=True),
           sg.const("bw", _w(g, bw_units, bw_in)), sg.const("br", _w(g, bw_units, bw_units)),
           sg.const("bb", _w(g, bw_units)), sg.tensor("bh", [batch, bw_units], F32, is_variable=True)]
    graph_inputs, shapes = [x], [lead + [n_in]]
    if aux:
        a = sg.tensor("aux", lead + [n_aux], F32)
        graph_inputs.append(a)
        shapes.append(lead + [n_aux])
        if aux == "cross":
            ins += [a, sg.const("fa", _w(g, fw_units, n_aux)), sg.const("ba", _w(g, bw_units, n_aux))]
        else:
            ins += [a, -1, -1]
    else:
        ins += [-1, -1, -1]  # LiteRT wants all 12 inputs
    if merge:
        outs = [sg.tensor("out", lead + [fw_units + bw_units], F32)]
    else:
        outs = [sg.tensor("fw_out", lead + [fw_units], F32), sg.tensor("bw_out", lead + [bw_units], F32)]
    sg.op("BIDIRECTIONAL_SEQUENCE_RNN", ins, outs, fused_activation_function=act, merge_outputs=merge,
          time_major=time_major, version=3 if aux else 1)
    sg.inputs, sg.outputs = graph_inputs, outs
    mb.signature("serving_default", sg)
    return mb, shapes


@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("merge", [False, True])
@pytest.mark.parametrize("batch", [1, 3])
def test_bidirectional_sequence_rnn(time_major, merge, batch):
    mb, shapes = _bidi_rnn_model(batch=batch, steps=4, time_major=time_major, merge=merge)
    _check(mb, _feeds(rng(22), shapes))


@pytest.mark.parametrize("aux", ["cross", "bw_input"])
@pytest.mark.parametrize("merge", [False, True])
def test_bidirectional_sequence_rnn_aux_input(aux, merge):
    # "bw_input" is checked time-major only: LiteRT 2.3's batch-major path feeds `input` (not the aux
    # input) to the backward cell, unlike its own time-major path; onert-py follows the time-major one.
    mb, shapes = _bidi_rnn_model(batch=2, steps=3, time_major=aux == "bw_input", merge=merge, aux=aux, act=1)
    _check(mb, _feeds(rng(23), shapes))


# ------------------------------------------------------------------------------------------------- SVDF

def _svdf_model(*, batch, n_in=3, units=4, rank=2, memory=5, bias=True, act=0, seed=0):
    g = rng(seed)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    filters = units * rank
    x = sg.tensor("x", [batch, n_in], F32)
    ins = [x, sg.const("wf", _w(g, filters, n_in)), sg.const("wt", _w(g, filters, memory)),
           sg.const("b", _w(g, units)) if bias else -1,
           sg.tensor("state", [batch, filters * memory], F32, is_variable=True)]
    out = sg.tensor("out", [batch, units], F32)
    sg.op("SVDF", ins, [out], rank=rank, fused_activation_function=act)
    sg.inputs, sg.outputs = [x], [out]
    mb.signature("serving_default", sg)
    return mb, [batch, n_in]


@pytest.mark.parametrize("rank", [1, 2])
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("bias,act", [(True, 0), (False, 1), (True, 3)])
def test_svdf(rank, batch, bias, act):
    mb, x_shape = _svdf_model(batch=batch, rank=rank, bias=bias, act=act)
    # More invokes than memory_size, so the state window wraps fully.
    _check(mb, _feeds(rng(30), [x_shape], n=8))


def test_lstm_runtime_weights_is_prepare_error():
    mb, _ = _uni_lstm_model("plain", batch=1, steps=2, time_major=False)
    sg = mb.subgraphs[0]
    w = sg.tensors[sg.operations[0].inputs[2]]
    w.data = None  # input_to_forget_weights becomes a graph input
    sg.inputs.append(w.index)
    with pytest.raises(onert_py.errors.OnertPyError, match="must be a constant"):
        onert_py.infer.session(mb.to_bytes("tflite"))
