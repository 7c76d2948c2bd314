"""Full-integer SVDF (int8 input / output, int8 weights_feature, int16 weights_time, int32 bias, int16
activation state) against LiteRT's builtin EvalIntegerSVDF, over several invokes carrying the state:
bit-exact.

LiteRT's kernel accepts only the RELU fused activation (it refuses NONE and the others when invoked) and
then applies none: the output is only clamped to int8. onert-py refuses the others at prepare.
"""
from __future__ import annotations

import numpy as np
import pytest

import onert_py
from helpers import FORMATS, rng, run_litert_builtin_invokes, run_onert
from onert_py.schema.writer import ModelBuilder


def _svdf_model(*, batch, n_in, units, rank, memory, m1, m2, wt_max, in_zp=0, out_zp=0, bias=True,
                act=1, seed=0, in_scale=0.02, wf_q=None, state_type=np.int16):
    """An integer SVDF whose effective multipliers are m1 (input * weights_feature / state scale) and m2
    (state * weights_time / output scale)."""
    r = rng(seed)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    filters = units * rank
    wf_scale = 0.01
    state_scale = in_scale * wf_scale / m1
    wt_scale = 2.0 ** -12
    out_scale = state_scale * wt_scale / m2
    x = sg.tensor("x", [batch, n_in], np.int8, quantization=(in_scale, in_zp))
    wf = sg.const("wf", r.integers(-127, 128, (filters, n_in)).astype(np.int8),
                  quantization=wf_q or (wf_scale, 0))
    wt = sg.const("wt", r.integers(-wt_max, wt_max + 1, (filters, memory)).astype(np.int16),
                  quantization=(wt_scale, 0))
    b = -1
    if bias:
        reach = int(40 / m2)                # a bias worth up to ~40 output steps
        b = sg.const("b", r.integers(-reach, reach + 1, units).astype(np.int32),
                     quantization=(state_scale * wt_scale, 0))
    state = sg.tensor("state", [batch, filters * memory], state_type, quantization=(state_scale, 0),
                      is_variable=True)
    out = sg.tensor("out", [batch, units], np.int8, quantization=(out_scale, out_zp))
    sg.op("SVDF", [x, wf, wt, b, state], [out], rank=rank, fused_activation_function=act)
    sg.inputs, sg.outputs = [x], [out]
    mb.signature("serving_default", sg)
    return mb, [batch, n_in]


def _feeds(r, shape, n):
    feeds = []
    for k in range(n):
        x = r.integers(-128, 128, shape).astype(np.int8)
        if k == 1:
            x[:] = 0
        elif k == 2:
            x[...] = 127                    # extreme inputs
        feeds.append([x])
    return feeds


def _check_invokes(mb, feeds):
    """One LiteRT (builtin kernels) interpreter and one onert-py session per format, invoked once per feed
    so the state carries over; every output equal. Returns LiteRT's outputs."""
    expected = run_litert_builtin_invokes(mb, feeds)
    for fmt in FORMATS:
        sess = onert_py.infer.session(mb.to_bytes(fmt))
        for k, (feed, exp) in enumerate(zip(feeds, expected)):
            before = [np.array(x, copy=True) for x in feed]
            got = sess.infer(feed)
            for x, b in zip(feed, before):
                np.testing.assert_array_equal(x, b)
            assert len(got) == len(exp)
            for a, e in zip(got, exp):
                assert a.shape == e.shape and a.dtype == e.dtype
                np.testing.assert_array_equal(a, e, err_msg=f"{fmt} invoke {k}")
    return [e[0] for e in expected]


SVDF_CASES = [  # (batch, n_in, units, rank, memory, m1, m2, wt_max, in_zp, out_zp)
    (1, 5, 4, 1, 3, 0.05, 3e-4, 1000, 0, 0),
    (2, 13, 3, 2, 4, 0.3, 3e-6, 3000, -128, 5),         # m1 < 1 with int16 saturation of the state
    (2, 7, 5, 2, 6, 1e-3, 1.7, 3, 127, -128),           # m2 > 1
    (1, 9, 3, 3, 2, 2.5, 5e-7, 500, 3, 100),            # m1 > 1: the state saturates
    (2, 33, 3, 1, 5, 0.01, 5e-6, 2 ** 15 - 1, -7, 0),   # full-range time weights
]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("case", SVDF_CASES, ids=str)
def test_integer_svdf_bit_exact(case, bias):
    batch, n_in, units, rank, memory, m1, m2, wt_max, in_zp, out_zp = case
    mb, shape = _svdf_model(batch=batch, n_in=n_in, units=units, rank=rank, memory=memory, m1=m1, m2=m2,
                            wt_max=wt_max, in_zp=in_zp, out_zp=out_zp, bias=bias, seed=n_in)
    # more invokes than memory: the state window wraps
    outs = _check_invokes(mb, _feeds(rng(memory), shape, memory + 3))
    assert len(np.unique(np.concatenate([o.ravel() for o in outs]))) > 3      # not a degenerate case


def test_integer_svdf_output_saturates():
    mb, shape = _svdf_model(batch=2, n_in=6, units=4, rank=2, memory=3, m1=0.2, m2=1e-3, wt_max=2000,
                            seed=11)
    outs = np.concatenate([o.ravel() for o in _check_invokes(mb, _feeds(rng(1), shape, 5))])
    assert (outs == -128).any() and (outs == 127).any()


def _refused(mb, shape, match):
    with pytest.raises(onert_py.PrepareError, match=match):
        run_onert(mb, [np.zeros(shape, np.int8)])


@pytest.mark.parametrize("act", [0, 2, 3], ids=["NONE", "RELU_N1_TO_1", "RELU6"])
def test_integer_svdf_activation_other_than_relu_refused_as_litert(act):
    mb, shape = _svdf_model(batch=1, n_in=3, units=2, rank=1, memory=2, m1=0.1, m2=1e-3, wt_max=100,
                            act=act)
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    it = litert.Interpreter(model_content=mb.to_bytes("tflite"),
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    with pytest.raises(RuntimeError):
        it.invoke()
    _refused(mb, shape, "supports only the RELU fused activation")


def test_integer_svdf_per_channel_weights_refused():
    wf_q = (np.array([0.01, 0.02], np.float32), np.zeros(2, np.int64), 0)
    mb, shape = _svdf_model(batch=1, n_in=3, units=2, rank=1, memory=2, m1=0.1, m2=1e-3, wt_max=100,
                            wf_q=wf_q)
    _refused(mb, shape, "per-channel quantization is not supported by an integer SVDF")
