import numpy as np
import pytest

import onert_py
from helpers import assert_close, assert_matches_litert, rng, run_litert, run_onert, single_op_model
from onert_py.ir import TYPE_NAME_BY_DTYPE

# Float32 dot products of length <= 300 with N(0,1) data: LiteRT (ruy/XNNPACK) and BLAS sum in a different
# order, so the error is a few ulps of sum |x*w| (~20 for K=300), i.e. ~1e-5 absolute on outputs of size ~10.
ATOL = 2e-5


def _fc_model(x_shape, units, *, bias=True, const_w=True, keep=False, act=0, version=1, w=None):
    g = rng(1)
    depth = x_shape[-1] if keep else (w.shape[1] if w is not None else x_shape[-1])
    w = g.normal(size=(units, depth)).astype(np.float32) if w is None else w
    b = g.normal(size=(units,)).astype(np.float32)
    inputs = [("x", x_shape, np.float32), ("const", w) if const_w else ("w", list(w.shape), np.float32),
              ("const", b) if bias else None]
    n = int(np.prod(x_shape)) // w.shape[1]
    out = list(x_shape[:-1]) + [units] if keep else [n, units]
    mb = single_op_model("FULLY_CONNECTED", inputs, [("o", out, np.float32)],
                         fused_activation_function=act, keep_num_dims=keep)
    mb.subgraphs[0].operations[0].version = version
    return mb, w


@pytest.mark.parametrize("x_shape,units", [([1, 8], 4), ([5, 16], 3), ([2, 3, 10], 7), ([4, 300], 64)])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", [0, 1, 3])
def test_fully_connected(x_shape, units, bias, act):
    mb, _ = _fc_model(x_shape, units, bias=bias, act=act)
    x = rng(2).normal(size=x_shape).astype(np.float32)
    assert_matches_litert(mb, [x], atol=ATOL)


def test_fully_connected_flattens_leading_dims():
    # input [2, 3, 4] with weights [5, 12]: TFLite treats the input as [2, 12]
    w = rng(3).normal(size=(5, 12)).astype(np.float32)
    mb, _ = _fc_model([2, 3, 4], 5, w=w)
    x = rng(4).normal(size=[2, 3, 4]).astype(np.float32)
    assert_matches_litert(mb, [x], atol=ATOL)


@pytest.mark.parametrize("x_shape", [[2, 3, 6], [4, 6], [1, 2, 2, 6]])
def test_fully_connected_keep_num_dims(x_shape):
    mb, _ = _fc_model(x_shape, 5, keep=True, version=5)
    x = rng(5).normal(size=x_shape).astype(np.float32)
    assert_matches_litert(mb, [x], atol=ATOL)


def test_fully_connected_runtime_weights():
    w = rng(6).normal(size=(3, 8)).astype(np.float32)
    mb, _ = _fc_model([4, 8], 3, const_w=False, act=2, w=w)
    x = rng(7).normal(size=[4, 8]).astype(np.float32)
    assert_matches_litert(mb, [x, w], atol=ATOL)


def test_fully_connected_bad_weights_is_prepare_error():
    w = np.zeros((3, 7), np.float32)
    mb = single_op_model("FULLY_CONNECTED", [("x", [2, 8], np.float32), ("const", w), None],
                         [("o", [2, 3], np.float32)])
    with pytest.raises(onert_py.PrepareError, match="not a multiple"):
        run_onert(mb, [np.zeros((2, 8), np.float32)])
    bias = np.zeros(4, np.float32)
    mb = single_op_model("FULLY_CONNECTED", [("x", [2, 8], np.float32), ("const", np.zeros((3, 8), np.float32)),
                                             ("const", bias)], [("o", [2, 3], np.float32)])
    with pytest.raises(onert_py.PrepareError, match="bias"):
        run_onert(mb, [np.zeros((2, 8), np.float32)])


def _bmm_model(ls, rs, adj_x, adj_y, const_rhs=False, rhs=None):
    lm, lk = (ls[-1], ls[-2]) if adj_x else (ls[-2], ls[-1])
    rn = rs[-2] if adj_y else rs[-1]
    batch = list(np.broadcast_shapes(tuple(ls[:-2]), tuple(rs[:-2])))
    rhs_spec = ("const", rhs) if const_rhs else ("y", rs, np.float32)
    return single_op_model("BATCH_MATMUL", [("x", ls, np.float32), rhs_spec], [("o", batch + [lm, rn], np.float32)],
                           adjoint_lhs=adj_x, adjoint_rhs=adj_y)


def _stored_shapes(ls, rs, adj_x: bool, adj_y: bool) -> tuple[list, list]:
    """The operands' shapes as stored: an adjoint operand holds its last two dims swapped."""
    ls, rs = list(ls), list(rs)
    if adj_x:
        ls[-1], ls[-2] = ls[-2], ls[-1]
    if adj_y:
        rs[-1], rs[-2] = rs[-2], rs[-1]
    return ls, rs


@pytest.mark.parametrize("ls,rs", [([3, 4], [4, 5]), ([2, 3, 4], [2, 4, 5]), ([2, 3, 4], [4, 5]),
                                   ([2, 1, 3, 4], [3, 4, 6]), ([1, 3, 4], [5, 4, 2])])
@pytest.mark.parametrize("adj_x", [False, True])
@pytest.mark.parametrize("adj_y", [False, True])
@pytest.mark.parametrize("const_rhs", [False, True])
def test_batch_matmul(ls, rs, adj_x, adj_y, const_rhs):
    ls, rs = _stored_shapes(ls, rs, adj_x, adj_y)
    g = rng(8)
    x = g.normal(size=ls).astype(np.float32)
    y = g.normal(size=rs).astype(np.float32)
    mb = _bmm_model(ls, rs, adj_x, adj_y, const_rhs, y)
    assert_matches_litert(mb, [x] if const_rhs else [x, y], atol=ATOL)


def test_batch_matmul_bad_shapes_is_prepare_error():
    mb = single_op_model("BATCH_MATMUL", [("x", [2, 3], np.float32), ("y", [4, 5], np.float32)],
                         [("o", [2, 5], np.float32)])
    with pytest.raises(onert_py.PrepareError, match="contraction"):
        run_onert(mb, [np.zeros((2, 3), np.float32), np.zeros((4, 5), np.float32)])


@pytest.mark.parametrize("x_shape,keep", [([1, 1, 6], True), ([1, 2, 3], False), ([1, 1, 1, 6], True)])
@pytest.mark.parametrize("act", [0, 1, 2, 3])
def test_fully_connected_single_row(x_shape, keep, act):
    """One input row (the gemv path) with keep_num_dims, flattening and every clamp activation."""
    mb, _ = _fc_model(x_shape, 5, keep=keep, act=act, version=5 if keep else 1,
                      w=rng(9).normal(size=(5, 6)).astype(np.float32))
    x = (rng(10).normal(size=x_shape) * 3).astype(np.float32)
    assert_matches_litert(mb, [x], atol=ATOL)


def test_fully_connected_dynamic_batch_one_session():
    """An input of dynamic shape takes the general path; one session, changing batch sizes."""
    w = rng(11).normal(size=(4, 8)).astype(np.float32)
    b = rng(12).normal(size=(4,)).astype(np.float32)
    mb = single_op_model("FULLY_CONNECTED", [("x", [-1, 8], np.float32), ("const", w), ("const", b)],
                         [("o", [-1, 4], np.float32)], fused_activation_function=1)
    sess = onert_py.infer.session(mb.to_bytes("tflite"))
    for n in (3, 1, 7):
        x = rng(13 + n).normal(size=(n, 8)).astype(np.float32)
        assert_close(sess.infer([x]), run_litert(mb, [x]), atol=ATOL)


# ---- float16 (XNNPACK only in LiteRT) and prepare-time type checks (the dtype audit)

F16 = np.float16


@pytest.mark.parametrize("x_shape,units", [([1, 8], 4), ([5, 16], 3), ([2, 3, 10], 7), ([4, 1000], 32)])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", [0, 1, 3])
def test_fully_connected_float16_xnnpack(x_shape, units, bias, act):
    # XNNPACK computes float16 FULLY_CONNECTED in float32 and rounds once: within one float16 ulp
    # (the summation order of the 1000-long rows differs), where a float16 running sum is many ulps off.
    g = rng(30)
    depth = x_shape[-1]
    w = g.uniform(-1, 1, size=(units, depth)).astype(F16)
    b = g.uniform(-1, 1, size=units).astype(F16)
    x = g.uniform(-1, 1, size=x_shape).astype(F16)
    n = int(np.prod(x_shape)) // depth
    for keep in (False, True):
        out = list(x_shape[:-1]) + [units] if keep else [n, units]
        mb = single_op_model("FULLY_CONNECTED", [("x", x_shape, F16), ("const", w), ("const", b) if bias else None],
                             [("o", out, F16)], fused_activation_function=act, keep_num_dims=keep)
        assert_matches_litert(mb, [x], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("ls,rs", [([3, 40], [40, 5]), ([2, 3, 64], [2, 64, 5]), ([2, 1, 3, 4], [3, 4, 6])])
@pytest.mark.parametrize("adj_x,adj_y", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("const_rhs", [False, True])
def test_batch_matmul_float16_xnnpack(ls, rs, adj_x, adj_y, const_rhs):
    ls, rs = _stored_shapes(ls, rs, adj_x, adj_y)
    g = rng(31)
    x = g.uniform(-1, 1, size=ls).astype(F16)
    y = g.uniform(-1, 1, size=rs).astype(F16)
    mb = _bmm_model(ls, rs, adj_x, adj_y, const_rhs, y)
    for t in mb.subgraphs[0].tensors:
        if t.dtype == np.float32:
            t.dtype, t.type_name = np.dtype(F16), TYPE_NAME_BY_DTYPE[np.dtype(F16)]
    assert_matches_litert(mb, [x] if const_rhs else [x, y], rtol=1e-3, atol=1e-3)


def test_matmul_types_are_prepare_errors():
    cases = [
        ("FULLY_CONNECTED", [("x", [2, 8], F16), ("w", [3, 8], F16), None], F16, "must be constants"),
        ("FULLY_CONNECTED", [("x", [2, 8], np.float32), ("const", np.zeros((3, 8), np.int8)), None], np.float32,
         r"input 1 \('const1'\) has type int8, input 0 has float32"),
        ("FULLY_CONNECTED", [("x", [2, 8], np.int32), ("const", np.zeros((3, 8), np.int32)), None], np.int32,
         "has type int32, not supported"),
        ("BATCH_MATMUL", [("x", [2, 8], np.float32), ("y", [8, 3], F16)], np.float32, r"input 1 \('y'\) has type float16"),
        ("BATCH_MATMUL", [("x", [2, 8], np.int8), ("y", [8, 3], np.int8)], np.int8, "has type int8, not supported"),
    ]
    for op, ins, out, msg in cases:
        mb = single_op_model(op, ins, [("o", [2, 3], out)])
        with pytest.raises(onert_py.PrepareError, match=msg):
            onert_py.infer.session(mb.to_bytes("tflite"))
