"""CPU array-manipulation kernels against LiteRT."""
import numpy as np
import pytest

import onert_py
from helpers import (FIXED_DTYPES, SMALL_TYPES, assert_close, assert_matches_litert, audit_dtype,
                     check_builtin, dtype_values, int32_const, rng, run_litert, run_onert, single_op_model)
from onert_py.backends.registry import CPU, load_builtin_kernels

load_builtin_kernels()   # the dtype audits read CPU.dtypes (what docs/ops.md lists)

R = rng(7)


def _data(shape, dtype):
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return R.integers(0, 2, size=shape).astype(bool)
    if dt.kind == "f":
        return R.standard_normal(shape).astype(dt)
    return R.integers(-50 if dt.kind == "i" else 0, 50, size=shape).astype(dt)


def _check(op, specs, values, outs, **opts):
    mb = single_op_model(op, specs, outs, **opts)
    return assert_matches_litert(mb, values)


# ----------------------------------------------------------------------------- TILE

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.uint8, np.bool_, np.int16])
@pytest.mark.parametrize("shape,mult", [((3,), (2,)), ((2, 3), (2, 1)), ((1, 2, 3), (2, 3, 1)),
                                        ((2, 3), (1, 1)), ((2, 0), (2, 3))])
def test_tile_const(dtype, shape, mult):
    x = _data(shape, dtype)
    out = tuple(d * m for d, m in zip(shape, mult))
    _check("TILE", [("x", shape, dtype), ("const", np.array(mult, np.int32))], [x], [("o", out, dtype)])


@pytest.mark.parametrize("mdtype", [np.int32, np.int64])
def test_tile_dynamic(mdtype):
    x = _data((2, 3), np.float32)
    mb = single_op_model("TILE", [("x", [-1, -1], np.float32), ("m", [2], mdtype)], [("o", [-1, -1], np.float32)])
    assert_matches_litert(mb, [x, np.array([3, 2], mdtype)])
    assert_matches_litert(mb, [_data((1, 4), np.float32), np.array([1, 5], mdtype)])


def test_tile_string():
    x = np.array([b"a", b"bc", b""], dtype=object)
    mb = single_op_model("TILE", [("x", [3], "O"), ("const", np.array([2], np.int32))], [("o", [6], "O")])
    got = run_onert(mb, [x])[0]
    assert got.tolist() == [b"a", b"bc", b"", b"a", b"bc", b""]


# ----------------------------------------------------------------------------- PAD / PADV2 / MIRROR_PAD

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.uint8])
@pytest.mark.parametrize("shape,pads", [((3,), [[1, 2]]), ((2, 3), [[0, 1], [2, 0]]),
                                        ((1, 2, 2, 1), [[0, 0], [1, 1], [2, 1], [0, 0]]),
                                        ((1, 2, 1, 2, 2), [[0, 1], [1, 0], [0, 0], [1, 1], [0, 2]])])
def test_pad(dtype, shape, pads):
    x = _data(shape, dtype)
    out = tuple(d + a + b for d, (a, b) in zip(shape, pads))
    _check("PAD", [("x", shape, dtype), ("const", np.array(pads, np.int32))], [x], [("o", out, dtype)])


def test_pad_rank0():
    mb = single_op_model("PAD", [("x", [], np.float32), ("const", np.zeros((0, 2), np.int32))],
                         [("o", [], np.float32)])
    assert_matches_litert(mb, [np.array(3.5, np.float32)])


@pytest.mark.parametrize("pdtype", [np.int32, np.int64])
def test_pad_dynamic(pdtype):
    mb = single_op_model("PAD", [("x", [-1, -1], np.float32), ("p", [2, 2], pdtype)],
                         [("o", [-1, -1], np.float32)])
    assert_matches_litert(mb, [_data((2, 3), np.float32), np.array([[1, 0], [2, 3]], pdtype)])
    assert_matches_litert(mb, [_data((4, 1), np.float32), np.array([[0, 0], [0, 1]], pdtype)])


# A constant pad writes the border slabs and the interior once each when only outer axes are padded,
# and fills the whole output first when the last axis is padded: both ways, with 0 and another value.
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
@pytest.mark.parametrize("shape,pads", [((1, 5, 6, 3), [[0, 0], [1, 1], [1, 1], [0, 0]]),     # spatial
                                        ((1, 4, 4, 3), [[0, 0], [0, 0], [0, 0], [0, 5]]),     # channels
                                        ((2, 3, 4, 3), [[1, 0], [2, 1], [0, 3], [1, 1]]),     # every axis
                                        ((2, 3, 4), [[0, 2], [0, 0], [0, 0]])])               # leading only
def test_pad_slabs(dtype, shape, pads):
    x = _data(shape, dtype)
    out = tuple(d + a + b for d, (a, b) in zip(shape, pads))
    _check("PAD", [("x", shape, dtype), ("const", np.array(pads, np.int32))], [x], [("o", out, dtype)])
    if dtype != np.bool_:
        _check("PADV2", [("x", shape, dtype), ("const", np.array(pads, np.int32)), ("const", np.array(5, dtype))],
               [x], [("o", out, dtype)])


def test_pad_runtime_paddings_one_session():
    """Paddings from an input that change between runs of one session (layouts are per shape and
    paddings), outputs handed out earlier stay intact."""
    mb = single_op_model("PAD", [("x", [-1, -1, -1], np.float32), ("p", [3, 2], np.int32)],
                         [("o", [-1, -1, -1], np.float32)])
    sess = onert_py.infer.session(mb.to_bytes("tflite"))
    kept = []
    for shape, pads in [((2, 3, 4), [[1, 0], [0, 2], [0, 0]]), ((2, 3, 4), [[0, 0], [0, 0], [3, 1]]),
                        ((1, 5, 2), [[1, 0], [0, 2], [0, 0]])]:
        inputs = [_data(shape, np.float32), np.array(pads, np.int32)]
        got, ref = sess.infer(inputs), run_litert(mb, inputs)
        assert_close(got, ref)
        kept.append((got[0], ref[0]))
    for got, ref in kept:
        assert_close([got], [ref])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int8, np.int64])
def test_padv2(dtype):
    x = _data((2, 3), dtype)
    pads = np.array([[1, 1], [0, 2]], np.int32)
    _check("PADV2", [("x", [2, 3], dtype), ("const", pads), ("const", np.array(7, dtype))], [x],
           [("o", [4, 5], dtype)])
    _check("PADV2", [("x", [2, 3], dtype), ("const", pads), ("c", [], dtype)], [x, np.array(-3, dtype)],
           [("o", [4, 5], dtype)])


@pytest.mark.parametrize("runtime_value", [False, True], ids=["const", "input"])
def test_padv2_negative_zero_pads_positive_zero(runtime_value):
    """LiteRT fills with zero bytes when the value equals zero: -0.0 pads +0.0 (the interior keeps its
    own signed zeros)."""
    x = np.array([[-0.0, 1.0, -2.0], [0.0, -0.0, 3.0]], np.float32)
    pads = np.array([[1, 1], [0, 2]], np.int32)
    value = ("c", [], np.float32) if runtime_value else ("const", np.array(-0.0, np.float32))
    mb = single_op_model("PADV2", [("x", [2, 3], np.float32), ("const", pads), value], [("o", [4, 5], np.float32)])
    ins = [x, np.array(-0.0, np.float32)] if runtime_value else [x]
    got = onert_py.infer.session(mb.to_bytes("tflite"), "cpu").infer(ins)[0]
    want = run_litert(mb, ins)[0]
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    assert np.signbit(got[1:3, :3]).sum() == 3 and np.signbit(got).sum() == 3    # x's -0.0, -0.0, -2.0


def test_pad_negative_fails():
    mb = single_op_model("PAD", [("x", [2], np.float32), ("p", [1, 2], np.int32)], [("o", [-1], np.float32)])
    with pytest.raises(onert_py.OnertPyError, match="PAD"):
        run_onert(mb, [np.ones(2, np.float32), np.array([[-1, 0]], np.int32)])


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int8])
@pytest.mark.parametrize("shape,pads", [((4,), [[2, 1]]), ((3, 4), [[1, 2], [3, 0]]),
                                        ((1, 3, 3, 2), [[0, 0], [2, 2], [1, 2], [0, 1]])])
def test_mirror_pad(mode, dtype, shape, pads):
    x = _data(shape, dtype)
    out = tuple(d + a + b for d, (a, b) in zip(shape, pads))
    _check("MIRROR_PAD", [("x", shape, dtype), ("const", np.array(pads, np.int32))], [x],
           [("o", out, dtype)], mode=mode)


def test_mirror_pad_dynamic():
    mb = single_op_model("MIRROR_PAD", [("x", [-1, -1], np.float32), ("p", [2, 2], np.int64)],
                         [("o", [-1, -1], np.float32)], mode=1)
    assert_matches_litert(mb, [_data((3, 2), np.float32), np.array([[3, 1], [2, 2]], np.int64)])


# ----------------------------------------------------------------------------- CONCATENATION

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.uint8, np.bool_, np.int16])
@pytest.mark.parametrize("shapes,axis", [([(2, 3), (2, 1)], 1), ([(2, 3), (1, 3), (3, 3)], 0),
                                         ([(2, 3, 4), (2, 3, 2)], -1), ([(3,), (0,), (2,)], 0)])
def test_concatenation(dtype, shapes, axis):
    xs = [_data(s, dtype) for s in shapes]
    out = list(shapes[0])
    ax = axis % len(out)
    out[ax] = sum(s[ax] for s in shapes)
    _check("CONCATENATION", [(f"x{k}", s, dtype) for k, s in enumerate(shapes)], xs, [("o", out, dtype)],
           axis=axis, fused_activation_function=0)


@pytest.mark.parametrize("act,fn", [(1, lambda x: np.maximum(x, 0)), (2, lambda x: np.clip(x, -1, 1)),
                                    (3, lambda x: np.clip(x, 0, 6))])
def test_concatenation_activation(act, fn):
    # LiteRT ignores CONCATENATION's fused activation: take its plain concatenation as the reference
    # and apply the activation (as onert does) on top.
    xs = [(_data((2, 3), np.float32) * 4), _data((2, 2), np.float32) * 4]
    specs = [("a", [2, 3], np.float32), ("b", [2, 2], np.float32)]
    plain = _check("CONCATENATION", specs, xs, [("o", [2, 5], np.float32)], axis=1)
    mb = single_op_model("CONCATENATION", specs, [("o", [2, 5], np.float32)], axis=1,
                         fused_activation_function=act)
    np.testing.assert_array_equal(run_onert(mb, xs)[0], fn(plain[0]))


def test_concatenation_const_and_dynamic():
    c = _data((1, 3), np.float32)
    mb = single_op_model("CONCATENATION", [("a", [-1, 3], np.float32), ("const", c)],
                         [("o", [-1, 3], np.float32)], axis=0)
    assert_matches_litert(mb, [_data((4, 3), np.float32)])
    assert_matches_litert(mb, [_data((1, 3), np.float32)])


# ----------------------------------------------------------------------------- PACK / UNPACK

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("shape,axis,n", [((), 0, 3), ((3,), 0, 2), ((3,), 1, 2), ((2, 3), -1, 4),
                                          ((2, 3), 1, 1)])
def test_pack(dtype, shape, axis, n):
    xs = [_data(shape, dtype) for _ in range(n)]
    out = list(shape)
    out.insert(axis % (len(shape) + 1), n)
    _check("PACK", [(f"x{k}", shape, dtype) for k in range(n)], xs, [("o", out, dtype)],
           values_count=n, axis=axis)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int16, np.int8, np.uint8, np.bool_])
@pytest.mark.parametrize("shape,axis", [((3,), 0), ((2, 3), 0), ((2, 3), 1), ((2, 3, 4), -1), ((1, 2), 0)])
def test_unpack(dtype, shape, axis):
    x = _data(shape, dtype)
    n = shape[axis]
    rest = [d for k, d in enumerate(shape) if k != axis % len(shape)]
    _check("UNPACK", [("x", shape, dtype)], [x], [(f"o{k}", rest, dtype) for k in range(n)],
           num=n, axis=axis)


# ----------------------------------------------------------------------------- SPLIT / SPLIT_V

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.int16])
@pytest.mark.parametrize("shape,axis,n", [((6,), 0, 3), ((2, 4), 1, 2), ((2, 4), -1, 4), ((4, 2, 3), 0, 1)])
def test_split(dtype, shape, axis, n):
    x = _data(shape, dtype)
    out = list(shape)
    out[axis] //= n
    _check("SPLIT", [("const", np.array(axis, np.int32)), ("x", shape, dtype)], [x],
           [(f"o{k}", out, dtype) for k in range(n)], num_splits=n)


def test_split_dynamic_axis():
    mb = single_op_model("SPLIT", [("a", [], np.int32), ("x", [4, 6], np.float32)],
                         [("o0", [-1, -1], np.float32), ("o1", [-1, -1], np.float32)], num_splits=2)
    x = _data((4, 6), np.float32)
    assert_matches_litert(mb, [np.array(1, np.int32), x])
    assert_matches_litert(mb, [np.array(0, np.int32), x])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("shape,sizes,axis", [((6,), [1, 2, 3], 0), ((2, 7), [3, -1, 2], 1),
                                              ((5, 2), [-1], 0), ((4, 3), [0, 4], -2)])
def test_split_v(dtype, shape, sizes, axis):
    x = _data(shape, dtype)
    rest = shape[axis] - sum(s for s in sizes if s >= 0)
    outs = []
    for k, s in enumerate(sizes):
        o = list(shape)
        o[axis] = rest if s == -1 else s
        outs.append((f"o{k}", o, dtype))
    _check("SPLIT_V", [("x", shape, dtype), ("const", np.array(sizes, np.int32)),
                       ("const", np.array(axis, np.int32))], [x], outs, num_splits=len(sizes))


def test_split_v_dynamic_sizes():
    mb = single_op_model("SPLIT_V", [("x", [5, 2], np.float32), ("s", [2], np.int32),
                                     ("const", np.array([0], np.int32))],
                         [("o0", [-1, 2], np.float32), ("o1", [-1, 2], np.float32)], num_splits=2)
    assert_matches_litert(mb, [_data((5, 2), np.float32), np.array([2, 3], np.int32)])
    assert_matches_litert(mb, [_data((5, 2), np.float32), np.array([-1, 1], np.int32)])


# ----------------------------------------------------------------------------- TRANSPOSE / REVERSE

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.uint8, np.bool_, np.int16])
@pytest.mark.parametrize("shape,perm", [((2, 3), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((2, 3, 4, 5), (0, 3, 1, 2)),
                                        ((1, 2, 3, 2, 2), (4, 3, 2, 1, 0)), ((4,), (0,))])
def test_transpose(dtype, shape, perm):
    x = _data(shape, dtype)
    _check("TRANSPOSE", [("x", shape, dtype), ("const", np.array(perm, np.int32))], [x],
           [("o", [shape[p] for p in perm], dtype)])


def test_transpose_dynamic_perm():
    mb = single_op_model("TRANSPOSE", [("x", [2, 3, 4], np.float32), ("p", [3], np.int32)],
                         [("o", [-1, -1, -1], np.float32)])
    x = _data((2, 3, 4), np.float32)
    assert_matches_litert(mb, [x, np.array([1, 2, 0], np.int32)])
    assert_matches_litert(mb, [x, np.array([2, 1, 0], np.int32)])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.uint8, np.int16, np.bool_])
@pytest.mark.parametrize("shape,axes", [((5,), [0]), ((2, 3), [1]), ((2, 3, 4), [-1]), ((2, 3, 4), [1, 2]),
                                        ((2, 3, 4, 2), [1])])
def test_reverse_v2(dtype, shape, axes):
    x = _data(shape, dtype)
    version = 3 if len(axes) > 1 else 2
    _check("REVERSE_V2", [("x", shape, dtype), ("const", np.array(axes, np.int32))], [x],
           [("o", shape, dtype)], version=version)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("shape,seq_dim,batch_dim,lens", [((3, 5), 1, 0, [5, 0, 2]), ((4, 2, 3), 0, 1, [3, 1]),
                                                          ((2, 4, 3), 1, 0, [4, 2]),
                                                          ((3, 2, 4), 2, 1, [1, 4])])
def test_reverse_sequence(dtype, shape, seq_dim, batch_dim, lens):
    x = _data(shape, dtype)
    _check("REVERSE_SEQUENCE", [("x", shape, dtype), ("l", [len(lens)], np.int32)],
           [x, np.array(lens, np.int32)], [("o", shape, dtype)], seq_dim=seq_dim, batch_dim=batch_dim)


# ----------------------------------------------------------------------------- space/depth/batch

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int8, np.uint8, np.int64])
@pytest.mark.parametrize("bs", [1, 2, 3])
def test_space_to_depth_and_back(dtype, bs):
    x = _data((2, 2 * bs, 3 * bs, 2), dtype)
    _check("SPACE_TO_DEPTH", [("x", x.shape, dtype)], [x], [("o", [2, 2, 3, 2 * bs * bs], dtype)],
           block_size=bs)
    y = _data((1, 2, 3, 3 * bs * bs), dtype)
    _check("DEPTH_TO_SPACE", [("x", y.shape, dtype)], [y], [("o", [1, 2 * bs, 3 * bs, 3], dtype)],
           block_size=bs)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8])
@pytest.mark.parametrize("shape,block,pads", [((1, 4, 4, 1), [2, 2], [[0, 0], [0, 0]]),
                                              ((2, 3, 5, 2), [2, 3], [[1, 0], [0, 1]]),
                                              ((1, 5, 2), [3], [[1, 0]]),
                                              ((2, 2, 4, 3), [1, 2], [[0, 0], [2, 2]])])
def test_space_to_batch_nd(dtype, shape, block, pads):
    x = _data(shape, dtype)
    sp = [(s + a + b) // k for s, k, (a, b) in zip(shape[1:], block, pads)]
    out = [shape[0] * int(np.prod(block))] + sp + list(shape[1 + len(block):])
    _check("SPACE_TO_BATCH_ND", [("x", shape, dtype), ("const", np.array(block, np.int32)),
                                 ("const", np.array(pads, np.int32))], [x], [("o", out, dtype)])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8])
@pytest.mark.parametrize("shape,block,crops", [((4, 2, 2, 1), [2, 2], [[0, 0], [0, 0]]),
                                               ((12, 2, 2, 2), [2, 3], [[1, 0], [0, 2]]),
                                               ((3, 2, 2), [3], [[1, 1]]),
                                               ((4, 1, 3, 2), [1, 2], [[0, 0], [2, 1]])])
def test_batch_to_space_nd(dtype, shape, block, crops):
    x = _data(shape, dtype)
    sp = [s * k - a - b for s, k, (a, b) in zip(shape[1:], block, crops)]
    out = [shape[0] // int(np.prod(block))] + sp + list(shape[1 + len(block):])
    _check("BATCH_TO_SPACE_ND", [("x", shape, dtype), ("const", np.array(block, np.int32)),
                                 ("const", np.array(crops, np.int32))], [x], [("o", out, dtype)])


def test_space_to_batch_nd_dynamic():
    mb = single_op_model("SPACE_TO_BATCH_ND", [("x", [1, 4, 6, 1], np.float32), ("b", [2], np.int32),
                                               ("p", [2, 2], np.int32)], [("o", [-1, -1, -1, 1], np.float32)])
    assert_matches_litert(mb, [_data((1, 4, 6, 1), np.float32), np.array([2, 3], np.int32),
                               np.array([[0, 2], [1, 2]], np.int32)])


# ----------------------------------------------------------------------------- matrix diag

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.uint8, np.int8])
@pytest.mark.parametrize("shape", [(3,), (2, 4), (2, 1, 3)])
def test_matrix_diag(dtype, shape):
    x = _data(shape, dtype)
    _check("MATRIX_DIAG", [("x", shape, dtype)], [x], [("o", list(shape) + [shape[-1]], dtype)])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.uint8, np.int8])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4), (2, 5, 3), (2, 1, 2, 2)])
def test_matrix_set_diag(dtype, shape):
    x = _data(shape, dtype)
    d = _data(shape[:-2] + (min(shape[-2:]),), dtype)
    _check("MATRIX_SET_DIAG", [("x", shape, dtype), ("d", d.shape, dtype)], [x, d], [("o", shape, dtype)])


# ----------------------------------------------------------------------------- dtype audit
# Every non-quantized type LiteRT 2.3's builtin kernels run for each op (found by running each op in
# each candidate type), each compared with LiteRT on one case that moves every element. float16 SPLIT
# and DEPTH_TO_SPACE run on the XNNPACK delegate only (the default interpreter).


def _array_case(op, dt):
    """(model, inputs) of a single `op` in type `dt`."""
    dt, x = audit_dtype(dt)
    if op == "CONCATENATION":
        a, b = x(2, 3), x(2, 2)
        return single_op_model(op, [("a", [2, 3], dt), ("b", [2, 2], dt)], [("o", [2, 5], dt)],
                               axis=1, fused_activation_function=0), [a, b]
    if op == "PACK":
        a, b = x(2, 3), x(3, 2).reshape(2, 3)
        return single_op_model(op, [("a", [2, 3], dt), ("b", [2, 3], dt)], [("o", [2, 2, 3], dt)],
                               values_count=2, axis=1), [a, b]
    if op == "UNPACK":
        return single_op_model(op, [("x", [2, 3], dt)], [(f"o{k}", [2], dt) for k in range(3)],
                               num=3, axis=1), [x(2, 3)]
    if op == "SPLIT":
        return single_op_model(op, [int32_const(1), ("x", [2, 4], dt)], [("o0", [2, 2], dt), ("o1", [2, 2], dt)],
                               num_splits=2), [x(2, 4)]
    if op == "SPLIT_V":
        return single_op_model(op, [("x", [2, 5], dt), int32_const([2, 3]), int32_const(1)],
                               [("o0", [2, 2], dt), ("o1", [2, 3], dt)], num_splits=2), [x(2, 5)]
    if op == "TILE":
        return single_op_model(op, [("x", [2, 3], dt), int32_const([2, 2])], [("o", [4, 6], dt)]), [x(2, 3)]
    if op == "TRANSPOSE":
        return single_op_model(op, [("x", [2, 3, 4], dt), int32_const([2, 0, 1])], [("o", [4, 2, 3], dt)]), [x(2, 3, 4)]
    if op == "REVERSE_V2":
        return single_op_model(op, [("x", [2, 3, 4], dt), int32_const([1])], [("o", [2, 3, 4], dt)]), [x(2, 3, 4)]
    if op == "REVERSE_SEQUENCE":
        return single_op_model(op, [("x", [3, 4], dt), int32_const([2, 3, 4])], [("o", [3, 4], dt)],
                               seq_dim=1, batch_dim=0), [x(3, 4)]
    if op in ("PAD", "PADV2", "MIRROR_PAD"):
        ins = [("x", [3, 4], dt), int32_const([[1, 2], [2, 1]])]
        if op == "PADV2":
            ins.append(("const", dtype_values([], dt, seed=9)))
        opts = {"mode": 1} if op == "MIRROR_PAD" else {}
        return single_op_model(op, ins, [("o", [6, 7], dt)], **opts), [x(3, 4)]
    if op == "SPACE_TO_DEPTH":
        return single_op_model(op, [("x", [1, 4, 2, 3], dt)], [("o", [1, 2, 1, 12], dt)], block_size=2), \
            [x(1, 4, 2, 3)]
    if op == "DEPTH_TO_SPACE":
        return single_op_model(op, [("x", [1, 2, 1, 12], dt)], [("o", [1, 4, 2, 3], dt)], block_size=2), \
            [x(1, 2, 1, 12)]
    if op == "SPACE_TO_BATCH_ND":
        return single_op_model(op, [("x", [1, 4, 3, 2], dt), int32_const([2, 2]), int32_const([[0, 0], [0, 1]])],
                               [("o", [4, 2, 2, 2], dt)]), [x(1, 4, 3, 2)]
    if op == "BATCH_TO_SPACE_ND":
        return single_op_model(op, [("x", [4, 2, 2, 2], dt), int32_const([2, 2]), int32_const([[0, 1], [1, 0]])],
                               [("o", [1, 3, 3, 2], dt)]), [x(4, 2, 2, 2)]
    if op == "MATRIX_DIAG":
        return single_op_model(op, [("x", [2, 3], dt)], [("o", [2, 3, 3], dt)]), [x(2, 3)]
    if op == "MATRIX_SET_DIAG":
        return single_op_model(op, [("x", [2, 3, 4], dt), ("d", [2, 3], dt)], [("o", [2, 3, 4], dt)]), \
            [x(2, 3, 4), x(3, 2).reshape(2, 3)]
    raise AssertionError(op)


_ARRAY_DTYPES = {
    "CONCATENATION": SMALL_TYPES + ("float16", "uint32", "bool"),
    "PACK": SMALL_TYPES + ("uint32",),
    "UNPACK": ("float32", "float16", "int8", "uint8", "int16", "int32", "bool"),
    "SPLIT": SMALL_TYPES + ("float16",),
    "SPLIT_V": SMALL_TYPES,
    "TILE": FIXED_DTYPES + ("string",),
    "TRANSPOSE": FIXED_DTYPES,
    "REVERSE_V2": SMALL_TYPES + ("float16", "bool"),
    "REVERSE_SEQUENCE": ("float32", "uint8", "int16", "int32", "int64"),
    "PAD": SMALL_TYPES + ("float16", "bool"),
    "PADV2": SMALL_TYPES + ("float16", "bool"),
    "MIRROR_PAD": FIXED_DTYPES,
    "SPACE_TO_DEPTH": ("float32", "int8", "uint8", "int32", "int64"),
    "DEPTH_TO_SPACE": ("float32", "float16", "int8", "uint8", "int32", "int64"),
    "SPACE_TO_BATCH_ND": FIXED_DTYPES,
    "BATCH_TO_SPACE_ND": FIXED_DTYPES,
    "MATRIX_DIAG": SMALL_TYPES + ("uint32",),
    "MATRIX_SET_DIAG": SMALL_TYPES + ("uint32",),
}
_XNNPACK_ONLY = {("SPLIT", "float16"), ("DEPTH_TO_SPACE", "float16")}


@pytest.mark.parametrize("op,dtype", [(op, d) for op, ds in _ARRAY_DTYPES.items() for d in ds])
def test_array_dtypes(op, dtype):
    mb, inputs = _array_case(op, dtype)
    check_builtin(mb, inputs, delegate=(op, dtype) in _XNNPACK_ONLY)
    assert set(_ARRAY_DTYPES[op]) <= set(CPU.dtypes[op])   # docs/ops.md lists what is tested


@pytest.mark.parametrize("op", ["MATRIX_DIAG", "MATRIX_SET_DIAG"])
@pytest.mark.parametrize("dtype", ["float16", "float64", "uint16", "uint64", "bool", "complex64", "complex128"])
def test_matrix_diag_other_types_numpy(op, dtype):
    # LiteRT treats these types as 4-byte floats (wrong results); the numpy definition is the reference
    mb, inputs = _array_case(op, dtype)
    got = run_onert(mb, inputs)[0]
    if op == "MATRIX_DIAG":
        want = inputs[0][..., :, None] * np.eye(3, dtype=np.int64).astype(dtype)
    else:
        want = inputs[0].copy()
        for i in range(3):
            want[:, i, i] = inputs[1][:, i]
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)


# Types we run beyond LiteRT's (its kernels reject them): pure element moves, checked against numpy.
@pytest.mark.parametrize("op,dtype", [("REVERSE_SEQUENCE", "int8"), ("SPACE_TO_DEPTH", "float16"),
                                      ("SPACE_TO_DEPTH", "int16"), ("DEPTH_TO_SPACE", "int16"),
                                      ("TRANSPOSE", "string"), ("REVERSE_V2", "string")])
def test_array_types_beyond_litert(op, dtype):
    mb, inputs = _array_case(op, dtype)
    assert dtype in CPU.dtypes[op]
    x = inputs[0]
    got = run_onert(mb, inputs)[0]
    if op == "REVERSE_SEQUENCE":
        want = x.copy()
        for b, n in enumerate([2, 3, 4]):
            want[b, :n] = x[b, :n][::-1]
    elif op == "SPACE_TO_DEPTH":
        want = x.reshape(1, 2, 2, 1, 2, 3).transpose(0, 1, 3, 2, 4, 5).reshape(1, 2, 1, 12)
    elif op == "DEPTH_TO_SPACE":
        want = x.reshape(1, 2, 1, 2, 2, 3).transpose(0, 1, 3, 2, 4, 5).reshape(1, 4, 2, 3)
    elif op == "TRANSPOSE":
        want = np.transpose(x, (2, 0, 1))
    else:
        want = x[:, ::-1]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op,dtype", [("PACK", "float16"), ("TILE", "complex128"), ("CONCATENATION", "string"),
                                      ("SPLIT_V", "bool")])
def test_unsupported_type_is_prepare_error(op, dtype):
    # types LiteRT 2.3 does not run either (they are not in docs/ops.md) fail when the session is made
    mb, _ = _array_case(op, dtype)
    with pytest.raises(onert_py.PrepareError, match=f"has type {dtype}, not supported"):
        onert_py.infer.session(mb.to_bytes("tflite"))
