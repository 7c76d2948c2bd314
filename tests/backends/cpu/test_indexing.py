"""CPU indexing kernels against LiteRT."""
import numpy as np
import pytest

import onert_py
from helpers import (FIXED_DTYPES, SMALL_TYPES, assert_matches_litert, audit_dtype, check_builtin,
                     dtype_values, int32_const, rng, run_litert, run_onert, single_op_model)
from onert_py.backends.registry import CPU, load_builtin_kernels

load_builtin_kernels()   # the dtype audits read CPU.dtypes (what docs/ops.md lists)

R = rng(23)


def _data(shape, dtype):
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return R.integers(0, 2, size=shape).astype(bool)
    if dt.kind == "f":
        return R.standard_normal(shape).astype(dt)
    return R.integers(-50 if dt.kind == "i" else 0, 50, size=shape).astype(dt)


def _check(op, specs, values, outs, **opts):
    return assert_matches_litert(single_op_model(op, specs, outs, **opts), values)


# ----------------------------------------------------------------------------- SLICE

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.uint8, np.bool_, np.int16])
@pytest.mark.parametrize("shape,begin,size", [((5,), [1], [3]), ((5,), [0], [-1]), ((3, 4), [1, 0], [2, -1]),
                                              ((2, 3, 4), [0, 1, 2], [2, 2, 2]), ((2, 3, 4, 2), [1, 0, 1, 0], [1, 3, 2, 2]),
                                              ((2, 3, 2, 2, 3), [0, 1, 0, 1, 1], [2, 1, -1, 1, 2]),
                                              ((4,), [2], [0])])
def test_slice(dtype, shape, begin, size):
    x = _data(shape, dtype)
    out = [d - b if s == -1 else s for d, b, s in zip(shape, begin, size)]
    _check("SLICE", [("x", shape, dtype), ("const", np.array(begin, np.int32)), ("const", np.array(size, np.int32))],
           [x], [("o", out, dtype)])


@pytest.mark.parametrize("idtype", [np.int32, np.int64])
def test_slice_dynamic(idtype):
    mb = single_op_model("SLICE", [("x", [-1, -1], np.float32), ("b", [2], idtype), ("s", [2], idtype)],
                         [("o", [-1, -1], np.float32)])
    assert_matches_litert(mb, [_data((4, 5), np.float32), np.array([1, 2], idtype), np.array([2, -1], idtype)])
    assert_matches_litert(mb, [_data((3, 3), np.float32), np.array([0, 0], idtype), np.array([3, 1], idtype)])


def test_slice_out_of_range_fails():
    mb = single_op_model("SLICE", [("x", [4], np.float32), ("b", [1], np.int32), ("const", np.array([3], np.int32))],
                         [("o", [-1], np.float32)])
    with pytest.raises(onert_py.OnertPyError, match="SLICE"):
        run_onert(mb, [np.zeros(4, np.float32), np.array([2], np.int32)])


# ----------------------------------------------------------------------------- GATHER

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.uint8, np.bool_, np.int16])
@pytest.mark.parametrize("shape,idx,axis", [((5,), [[0, 4], [2, 2]], 0), ((4, 3), [3, 0, 1], 0),
                                            ((4, 3), [2, 0], 1), ((2, 3, 4), [[1]], -1), ((3, 2), 2, 0),
                                            ((5,), 1, 0), ((2, 3, 4), [], 1)])
def test_gather(dtype, shape, idx, axis):
    x = _data(shape, dtype)
    idx = np.array(idx, np.int32)
    out = np.take(x, idx, axis=axis).shape
    _check("GATHER", [("x", shape, dtype), ("i", idx.shape, np.int32)], [x, idx], [("o", out, dtype)],
           axis=axis)


@pytest.mark.parametrize("idtype", [np.int64, np.int16])
def test_gather_index_types(idtype):
    x = _data((4, 3), np.float32)
    idx = np.array([3, 1, 1], idtype)
    _check("GATHER", [("x", [4, 3], np.float32), ("i", [3], idtype)], [x, idx], [("o", [3, 3], np.float32)])


@pytest.mark.parametrize("shape,ishape,axis,bd", [((2, 5), (2, 3), 1, 1), ((2, 3, 4), (2, 2), 2, 1),
                                                  ((2, 3, 4, 2), (2, 3, 2), 2, 2), ((2, 3, 4), (2, 5), 1, -1),
                                                  ((3, 4, 2), (3, 1, 2), 1, 1), ((2, 3, 4), (2, 3), 2, 2)])
def test_gather_batch_dims(shape, ishape, axis, bd):
    x = _data(shape, np.float32)
    idx = R.integers(0, shape[axis], size=ishape).astype(np.int32)
    bdn = bd % len(ishape) if bd < 0 else bd
    out = list(shape[:axis]) + list(ishape[bdn:]) + list(shape[axis + 1:])
    _check("GATHER", [("x", shape, np.float32), ("i", ishape, np.int32)], [x, idx], [("o", out, np.float32)],
           axis=axis, batch_dims=bd)


def test_gather_dynamic():
    mb = single_op_model("GATHER", [("x", [-1, 3], np.float32), ("i", [-1], np.int32)], [("o", [-1, 3], np.float32)])
    assert_matches_litert(mb, [_data((5, 3), np.float32), np.array([4, 0, 2, 2], np.int32)])
    assert_matches_litert(mb, [_data((2, 3), np.float32), np.array([1], np.int32)])


def test_gather_string():
    x = np.array([b"a", b"bb", b"ccc"], dtype=object)
    mb = single_op_model("GATHER", [("x", [3], "O"), ("i", [4], np.int32)], [("o", [4], "O")])
    assert run_onert(mb, [x, np.array([2, 0, 0, 1], np.int32)])[0].tolist() == [b"ccc", b"a", b"a", b"bb"]


@pytest.mark.parametrize("bad", [-1, 4, 100])
def test_gather_out_of_range_fails(bad):
    mb = single_op_model("GATHER", [("x", [4, 2], np.float32), ("i", [2], np.int32)], [("o", [2, 2], np.float32)])
    lite = pytest.importorskip("ai_edge_litert.interpreter").Interpreter(model_content=mb.to_bytes())
    lite.allocate_tensors()
    lite.set_tensor(lite.get_input_details()[1]["index"], np.array([0, bad], np.int32))
    with pytest.raises(RuntimeError):
        lite.invoke()
    with pytest.raises(onert_py.OnertPyError, match="GATHER"):
        run_onert(mb, [np.zeros((4, 2), np.float32), np.array([0, bad], np.int32)])


# ----------------------------------------------------------------------------- GATHER_ND / SCATTER_ND

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("shape,ishape", [((4, 3), (2, 1)), ((4, 3), (2, 2)), ((2, 3, 4), (3, 2)),
                                          ((2, 3, 4), (2, 2, 3)), ((5,), (1,)), ((3, 3), (2,))])
def test_gather_nd(dtype, shape, ishape):
    x = _data(shape, dtype)
    k = ishape[-1]
    idx = np.stack([R.integers(0, shape[j], size=ishape[:-1]) for j in range(k)], axis=-1).astype(np.int32)
    out = list(ishape[:-1]) + list(shape[k:])
    _check("GATHER_ND", [("x", shape, dtype), ("i", ishape, np.int32)], [x, idx], [("o", out, dtype)])


def test_gather_nd_out_of_range_fails():
    mb = single_op_model("GATHER_ND", [("x", [3, 2], np.float32), ("i", [1, 2], np.int32)], [("o", [1], np.float32)])
    with pytest.raises(onert_py.OnertPyError, match="GATHER_ND"):
        run_onert(mb, [np.zeros((3, 2), np.float32), np.array([[3, 0]], np.int32)])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.uint8])
@pytest.mark.parametrize("shape,ishape", [((8,), (4, 1)), ((4, 3), (2, 1)), ((4, 3), (5, 2)), ((2, 3, 4), (2, 2))])
def test_scatter_nd(dtype, shape, ishape):
    k = ishape[-1]
    idx = np.stack([R.integers(0, shape[j], size=ishape[:-1]) for j in range(k)], axis=-1).astype(np.int32)
    upd = _data(tuple(ishape[:-1]) + tuple(shape[k:]), dtype)
    _check("SCATTER_ND", [("i", ishape, np.int32), ("u", upd.shape, dtype), ("const", np.array(shape, np.int32))],
           [idx, upd], [("o", shape, dtype)])


# ----------------------------------------------------------------------------- STRIDED_SLICE

def _ss(x, begin, end, strides, out_shape=None, dtype=None, **masks):
    dtype = dtype or x.dtype
    specs = [("x", x.shape, dtype), ("const", np.array(begin, np.int32)), ("const", np.array(end, np.int32)),
             ("const", np.array(strides, np.int32))]
    opts = {k: masks.get(k, 0) for k in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                                          "shrink_axis_mask")}
    if masks.get("offset"):
        opts["offset"] = True
    mb = single_op_model("STRIDED_SLICE", specs, [("o", out_shape or [-1], dtype)], **opts)
    return assert_matches_litert(mb, [x])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.uint8, np.bool_, np.int16])
def test_strided_slice_dtypes(dtype):
    x = _data((4, 5), dtype)
    _ss(x, [1, 0], [3, 5], [1, 2])


@pytest.mark.parametrize("shape,begin,end,strides,masks", [
    ((10,), [1], [8], [3], {}),
    ((10,), [-2], [-9], [-2], {}),
    ((10,), [8], [1], [1], {}),                          # empty
    ((10,), [-100], [100], [1], {}),                     # clamped
    ((10,), [100], [-100], [-1], {}),
    ((10,), [3], [0], [-1], {"end_mask": 1}),
    ((4, 5), [1, 1], [0, 0], [1, 1], {"end_mask": 3}),
    ((4, 5), [2, 3], [4, 4], [1, 1], {"begin_mask": 1}),
    ((4, 5), [2, 3], [3, 4], [1, 1], {"shrink_axis_mask": 1}),
    ((4, 5), [-1, 3], [0, 4], [1, 1], {"shrink_axis_mask": 3}),
    ((2, 3, 4), [0, 1], [2, 3], [1, 1], {}),             # fewer entries than dims
    ((2, 3, 4), [0, 1], [0, 3], [1, 1], {"ellipsis_mask": 1}),   # [..., 1:3]
    ((2, 3, 4, 5), [1, 0, 2], [2, 0, 4], [1, 1, 1], {"ellipsis_mask": 2}),   # [1:2, ..., 2:4]
    ((2, 3, 4), [0, 0, 1], [0, 0, 3], [1, 1, 1], {"new_axis_mask": 1, "ellipsis_mask": 2}),
    ((2, 3), [0, 1, 0], [1, 2, 3], [1, 1, 1], {"new_axis_mask": 2}),
    ((2, 3), [0, 0, 0], [2, 0, 3], [1, 1, 1], {"new_axis_mask": 6}),
    ((2, 3, 4), [1, 0, 1], [2, 0, 3], [1, 1, -1], {"ellipsis_mask": 2, "shrink_axis_mask": 1}),
    ((3, 4), [1, 2], [2, 3], [1, 1], {"shrink_axis_mask": 3}),   # rank-0 result
    ((2, 3, 4, 2, 3), [0, 1, 0, 1, 0], [2, 3, 4, 2, 3], [2, 1, 3, 1, -1], {}),
])
def test_strided_slice_masks(shape, begin, end, strides, masks):
    _ss(_data(shape, np.float32), begin, end, strides, **masks)


@pytest.mark.parametrize("begin,size,masks", [([1, 0], [2, 3], {}), ([-3, 1], [2, 2], {}),
                                              ([0, 2], [1, 1], {"shrink_axis_mask": 1}),
                                              ([1, 1], [2, 2], {"end_mask": 2})])
def test_strided_slice_offset(begin, size, masks):
    _ss(_data((4, 5), np.float32), begin, size, [1, 1], offset=True, **masks)


def test_strided_slice_dynamic_begin_end():
    mb = single_op_model("STRIDED_SLICE", [("x", [-1, -1], np.float32), ("b", [2], np.int32),
                                           ("e", [2], np.int32), ("const", np.array([1, -1], np.int32))],
                         [("o", [-1, -1], np.float32)], begin_mask=0, end_mask=0)
    assert_matches_litert(mb, [_data((4, 6), np.float32), np.array([1, 5], np.int32), np.array([3, 0], np.int32)])
    assert_matches_litert(mb, [_data((3, 3), np.float32), np.array([0, -1], np.int32), np.array([3, -4], np.int32)])


# ----------------------------------------------------------------------------- DYNAMIC_UPDATE_SLICE

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.bool_])
@pytest.mark.parametrize("shape,ushape,start", [((5,), (2,), [1]), ((4, 5), (2, 3), [1, 1]),
                                                ((4, 5), (2, 3), [3, 4]), ((4, 5), (2, 3), [-2, -1]),
                                                ((2, 3, 4), (1, 3, 2), [1, 0, 2])])
def test_dynamic_update_slice(dtype, shape, ushape, start):
    x, u = _data(shape, dtype), _data(ushape, dtype)
    _check("DYNAMIC_UPDATE_SLICE", [("x", shape, dtype), ("u", ushape, dtype), ("s", [len(shape)], np.int32)],
           [x, u, np.array(start, np.int32)], [("o", shape, dtype)])


def test_dynamic_update_slice_int64_start():
    x, u = _data((4, 4), np.float32), _data((2, 2), np.float32)
    _check("DYNAMIC_UPDATE_SLICE", [("x", [4, 4], np.float32), ("u", [2, 2], np.float32), ("s", [2], np.int64)],
           [x, u, np.array([3, 1], np.int64)], [("o", [4, 4], np.float32)])


# ----------------------------------------------------------------------------- ONE_HOT

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.uint8, np.bool_])
@pytest.mark.parametrize("ishape,axis", [((), -1), ((4,), -1), ((4,), 0), ((2, 3), 1), ((2, 3), -1), ((2, 3), 0)])
def test_one_hot(dtype, ishape, axis):
    idx = R.integers(-1, 5, size=ishape).astype(np.int32)       # -1 and 4 are out of range: all off
    depth = 4
    out = list(ishape)
    out.insert(len(ishape) if axis == -1 else axis, depth)
    on, off = (np.array(True), np.array(False)) if dtype == np.bool_ else (np.array(3, dtype), np.array(-1 if np.dtype(dtype).kind != "u" else 9, dtype))
    _check("ONE_HOT", [("i", ishape, np.int32), ("const", np.array(depth, np.int32)), ("const", on.astype(dtype)),
                       ("const", off.astype(dtype))], [idx], [("o", out, dtype)], axis=axis)


def test_one_hot_dynamic_depth_int64_indices():
    mb = single_op_model("ONE_HOT", [("i", [3], np.int64), ("d", [], np.int32), ("on", [], np.float32),
                                     ("off", [], np.float32)], [("o", [3, -1], np.float32)], axis=-1)
    assert_matches_litert(mb, [np.array([0, 2, 5], np.int64), np.array(6, np.int32), np.array(1.5, np.float32),
                               np.array(0.25, np.float32)])


def test_one_hot_depth_changes_between_runs():
    """A depth given at run time changes the output's shape without a new compile: each depth gets its
    own plan (the indices' shape and the depth range), against LiteRT run after run."""
    mb = single_op_model("ONE_HOT", [("i", [2, 3], np.int32), ("d", [], np.int32), ("on", [], np.float32),
                                     ("off", [], np.float32)], [("o", [2, 3, -1], np.float32)], axis=-1)
    sess = onert_py.infer.session(mb.to_bytes("tflite"), backends="cpu")
    idx = np.array([[0, 2, 5], [1, -1, 3]], np.int32)
    for depth in (4, 6, 2, 4):
        inputs = [idx, np.array(depth, np.int32), np.array(1.5, np.float32), np.array(0.25, np.float32)]
        np.testing.assert_array_equal(sess.infer(inputs)[0], run_litert(mb, inputs)[0])


def test_gather_batch_dims_positions_change_shape_in_one_session():
    """A batched GATHER whose positions change shape run after run in one session (the dataflow executor
    compiles once for dynamic shapes): each shape pair gets its own plan, against LiteRT."""
    mb = single_op_model("GATHER", [("x", [2, 5, 3], np.float32), ("p", [2, -1], np.int32)],
                         [("o", [2, -1, 3], np.float32)], axis=1, batch_dims=1)
    sess = onert_py.infer.session(mb.to_bytes("tflite"), backends="cpu", executor="dataflow")
    x = np.arange(30, dtype=np.float32).reshape(2, 5, 3)
    for n in (3, 1, 4, 3):
        p = (np.arange(2 * n, dtype=np.int32).reshape(2, n) * 3) % 5
        np.testing.assert_array_equal(sess.infer([x, p])[0], run_litert(mb, [x, p])[0])


def test_batched_gather_and_one_hot_refuse_bad_values():
    """Positions out of range (past the axis, or negative: one unsigned reduction checks both) and a
    negative run-time depth are errors naming the op, the inputs stay as given, and the session keeps
    working (against LiteRT)."""
    gather = single_op_model("GATHER", [("x", [2, 5, 3], np.float32), ("p", [2, 2], np.int32)],
                             [("o", [2, 2, 3], np.float32)], axis=1, batch_dims=1)
    sess = onert_py.infer.session(gather.to_bytes("tflite"), backends="cpu")
    x = np.arange(30, dtype=np.float32).reshape(2, 5, 3)
    for bad in ([[0, 5], [1, 2]], [[0, 1], [-1, 2]]):
        p = np.array(bad, np.int32)
        given = p.copy()
        with pytest.raises(onert_py.ExecutionError, match=r"GATHER.*gather index -?\d+ out of range \[0, 5\)"):
            sess.infer([x, p])
        np.testing.assert_array_equal(p, given)
    good = np.array([[4, 0], [2, 2]], np.int32)
    np.testing.assert_array_equal(sess.infer([x, good])[0], run_litert(gather, [x, good])[0])

    one_hot = single_op_model("ONE_HOT", [("i", [3], np.int32), ("d", [], np.int32), ("on", [], np.float32),
                                          ("off", [], np.float32)], [("o", [3, -1], np.float32)], axis=-1)
    sess = onert_py.infer.session(one_hot.to_bytes("tflite"), backends="cpu")
    idx = np.array([0, 2, 1], np.int32)
    on_off = [np.array(1.0, np.float32), np.array(0.0, np.float32)]
    with pytest.raises(onert_py.ExecutionError, match="ONE_HOT.*depth -2 must be non-negative"):
        sess.infer([idx, np.array(-2, np.int32), *on_off])
    inputs = [idx, np.array(3, np.int32), *on_off]
    np.testing.assert_array_equal(sess.infer(inputs)[0], run_litert(one_hot, inputs)[0])


# ----------------------------------------------------------------------------- WHERE / UNIQUE

@pytest.mark.parametrize("dtype", [np.bool_, np.float32, np.int32, np.int64])
@pytest.mark.parametrize("shape", [(6,), (3, 4), (2, 3, 2)])
def test_where(dtype, shape):
    c = (R.integers(0, 3, size=shape) == 0).astype(dtype)
    c.flat[1] = 1    # LiteRT's Python API cannot read an empty result
    _check("WHERE", [("c", shape, dtype)], [c], [("o", [-1, len(shape)], np.int64)])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("idx_type,idx_dtype", [(2, np.int32), (4, np.int64)])
def test_unique(dtype, idx_type, idx_dtype):
    x = np.array([5, 1, 5, 3, 1, 1, 7, 3, 0], dtype)
    _check("UNIQUE", [("x", [9], dtype)], [x], [("y", [-1], dtype), ("i", [9], idx_dtype)], idx_out_type=idx_type)


# ----------------------------------------------------------------------------- segments

@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("shape,ids", [((5,), [0, 0, 1, 2, 2]), ((4, 3), [0, 1, 1, 1]), ((3, 2, 2), [0, 0, 1])])
def test_segment_sum(dtype, shape, ids):
    x = _data(shape, dtype)
    _check("SEGMENT_SUM", [("x", shape, dtype), ("s", [len(ids)], np.int32)], [x, np.array(ids, np.int32)],
           [("o", [ids[-1] + 1] + list(shape[1:]), dtype)])


@pytest.mark.parametrize("op", ["UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX",
                                "UNSORTED_SEGMENT_MIN"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("shape,ids,n", [((5,), [3, 0, 3, 1, 0], 5), ((4, 3), [2, 0, 2, 2], 3),
                                         ((2, 3, 2), [[0, 1, 0], [2, 1, 1]], 4)])
def test_unsorted_segment(op, dtype, shape, ids, n):
    x = (R.integers(-4, 5, size=shape)).astype(dtype)
    ids = np.array(ids, np.int32)
    out = [n] + list(shape[ids.ndim:])
    _check(op, [("x", shape, dtype), ("s", ids.shape, np.int32), ("const", np.array([n], np.int32))],
           [x, ids], [("o", out, dtype)])


# ----------------------------------------------------------------------------- lookups / dense

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int8, np.uint8])
@pytest.mark.parametrize("tshape,ids", [((5, 3), [4, 0, 0, 2]), ((3, 2, 2), [1]), ((4, 1), [3, 1])])
def test_embedding_lookup(dtype, tshape, ids):
    t = _data(tshape, dtype)
    _check("EMBEDDING_LOOKUP", [("i", [len(ids)], np.int32), ("t", tshape, dtype)],
           [np.array(ids, np.int32), t], [("o", [len(ids)] + list(tshape[1:]), dtype)])


def _segment_sum_model(ids, const: bool, rows: int = 5):
    n = max(ids) + 1 if len(ids) else 0
    s = ("const", np.array(ids, np.int32)) if const else ("s", [len(ids)], np.int32)
    return single_op_model("SEGMENT_SUM", [("x", [rows, 2], np.float32), s], [("o", [n, 2], np.float32)])


@pytest.mark.parametrize("const", [True, False], ids=["const_ids", "runtime_ids"])
@pytest.mark.parametrize("ids", [[0, 0, 1, 3, 3], [1, 1, 2, 2, 2], [2, 2, 5, 5, 9], [0, 4, 4, 4, 7]], ids=str)
def test_segment_sum_gaps(ids, const):
    # Deliberate difference from LiteRT: LiteRT refuses sorted ids with gaps or not starting at 0
    # (segment_sum.cc "delta == 0 || delta == 1", "current_segment_id != 0"), constant or not; we accept
    # them as TensorFlow's segment_sum does, with zero rows for the ids that do not occur.
    x = _data((5, 2), np.float32)
    mb = _segment_sum_model(ids, const)
    inputs = [x] if const else [x, np.array(ids, np.int32)]
    with pytest.raises((RuntimeError, ValueError)):
        run_litert(mb, inputs)
    want = np.zeros((max(ids) + 1, 2), np.float32)   # TensorFlow's definition: output[i] = sum of x[ids == i]
    for i, row in zip(ids, x):
        want[i] += row
    for fmt in ("tflite", "circle"):
        (got,) = run_onert(mb, inputs, fmt)
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("const", [True, False], ids=["const_ids", "runtime_ids"])
@pytest.mark.parametrize("ids, msg", [([0, 2, 1, 3, 3], "sorted: id 1 at position 2 follows 2"),
                                      ([0, 0, 1, 1, 0], "sorted: id 0 at position 4 follows 1"),
                                      ([-1, 0, 0, 1, 1], "non-negative, the first is -1")], ids=str)
def test_segment_sum_bad_ids_fail(ids, msg, const):
    # unsorted or negative ids are refused (by LiteRT too), constant ones when the session is made
    mb = _segment_sum_model(ids, const)
    x = np.ones((5, 2), np.float32)
    err = onert_py.PrepareError if const else onert_py.ExecutionError
    for fmt in ("tflite", "circle"):
        with pytest.raises(err, match=f"SEGMENT_SUM.*{msg}"):
            run_onert(mb, [x] if const else [x, np.array(ids, np.int32)], fmt)


def test_segment_sum_id_count_mismatch_fails():
    mb = single_op_model("SEGMENT_SUM", [("x", [3], np.float32), ("s", [2], np.int32)], [("o", [-1], np.float32)])
    with pytest.raises(onert_py.ExecutionError, match="2 segment ids do not match data of shape"):
        run_onert(mb, [np.ones(3, np.float32), np.array([0, 1], np.int32)])


def test_embedding_lookup_out_of_range_fails():
    mb = single_op_model("EMBEDDING_LOOKUP", [("i", [1], np.int32), ("t", [3, 2], np.float32)],
                         [("o", [1, 2], np.float32)])
    with pytest.raises(onert_py.OnertPyError, match="EMBEDDING_LOOKUP"):
        run_onert(mb, [np.array([3], np.int32), np.zeros((3, 2), np.float32)])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.int8, np.uint8])
@pytest.mark.parametrize("idx,shape,vals", [([[0, 1], [2, 3], [1, 0]], [3, 4], [1, 2, 3]),
                                            ([0, 3, 5], [6], [7, 8, 9]), ([[1, 2]], [3, 3], [4]),
                                            ([[0, 0, 1], [1, 1, 0]], [2, 2, 2], 5), (2, [4], 6)])
def test_sparse_to_dense(dtype, idx, shape, vals):
    idx = np.array(idx, np.int32)
    vals = np.array(vals, dtype)
    _check("SPARSE_TO_DENSE", [("const", idx), ("const", np.array(shape, np.int32)), ("v", vals.shape, dtype),
                               ("d", [], dtype)], [vals, np.array(2, dtype)], [("o", shape, dtype)],
           validate_indices=False)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("shape,axis", [((5,), 0), ((3, 4), 1), ((3, 4), -2), ((2, 3, 4), 2)])
@pytest.mark.parametrize("exclusive,reverse", [(False, False), (True, False), (False, True), (True, True)])
def test_cumsum(dtype, shape, axis, exclusive, reverse):
    x = _data(shape, dtype)
    _check("CUMSUM", [("x", shape, dtype), ("const", np.array(axis, np.int32))], [x], [("o", shape, dtype)],
           exclusive=exclusive, reverse=reverse)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.float64])
@pytest.mark.parametrize("shape", [(), (7,), (2, 3)])
def test_bucketize(dtype, shape):
    x = (R.integers(-10, 10, size=shape) * (0.5 if np.dtype(dtype).kind == "f" else 1)).astype(dtype)
    _check("BUCKETIZE", [("x", shape, dtype)], [x], [("o", shape, np.int32)], boundaries=[-3.0, 0.0, 0.5, 4.0])


# ----------------------------------------------------------------------------- dtype audit
# Every non-quantized type LiteRT 2.3's builtin kernels run for each op (found by running each op in
# each candidate type), each compared with LiteRT on one case.


def _indexing_case(op, dt):
    """(model, inputs) of a single `op` in type `dt`."""
    dt, x = audit_dtype(dt)
    if op == "SLICE":
        return single_op_model(op, [("x", [2, 3, 4], dt), int32_const([0, 1, 1]), int32_const([2, 2, -1])],
                               [("o", [2, 2, 3], dt)]), [x(2, 3, 4)]
    if op == "STRIDED_SLICE":
        return single_op_model(op, [("x", [2, 3, 4], dt), int32_const([1, 0, 3]), int32_const([2, 3, 0]), int32_const([1, 2, -2])],
                               [("o", [1, 2, 2], dt)]), [x(2, 3, 4)]
    if op == "GATHER":
        if dt is object:   # LiteRT gathers strings from 1-D inputs only
            return single_op_model(op, [("x", [5], dt), int32_const([3, 0, 3, 4])], [("o", [4], dt)], axis=0), [x(5)]
        return single_op_model(op, [("x", [4, 3], dt), int32_const([[3, 0], [2, 2]])], [("o", [2, 2, 3], dt)],
                               axis=0), [x(4, 3)]
    if op == "GATHER_ND":
        return single_op_model(op, [("x", [4, 3], dt), int32_const([[3], [1], [3]])], [("o", [3, 3], dt)]), [x(4, 3)]
    if op == "SCATTER_ND":
        return single_op_model(op, [int32_const([[3], [1]]), ("u", [2, 3], dt), int32_const([4, 3])], [("o", [4, 3], dt)]), \
            [x(2, 3)]
    if op == "DYNAMIC_UPDATE_SLICE":
        return single_op_model(op, [("x", [4, 3], dt), ("u", [2, 2], dt), int32_const([1, 1])], [("o", [4, 3], dt)]), \
            [x(4, 3), x(2, 2)]
    if op == "ONE_HOT":
        on, off = dtype_values([2], dt, seed=5)
        return single_op_model(op, [int32_const([0, 2, -1, 1]), int32_const(3), ("const", on), ("const", off)],
                               [("o", [4, 3], dt)], axis=-1), []
    if op == "WHERE":
        c = x(3, 4)
        c.reshape(-1)[::3] = 0
        return single_op_model(op, [("c", [3, 4], dt)], [("o", [-1, 2], np.int64)]), [c]
    if op == "UNIQUE":
        u = np.tile(x(4), 3)[[0, 5, 2, 2, 7, 1, 0, 11, 3, 4]]
        return single_op_model(op, [("x", [10], dt)], [("o", [-1], dt), ("i", [10], np.int32)],
                               idx_out_type=2), [u]
    if op == "SEGMENT_SUM":
        return single_op_model(op, [("x", [4, 2], dt), int32_const([0, 0, 1, 2])], [("o", [3, 2], dt)]), [x(4, 2)]
    if op.startswith("UNSORTED_SEGMENT_"):
        return single_op_model(op, [("x", [5, 2], dt), int32_const([0, 2, 1, 2, 0]), int32_const(3)], [("o", [3, 2], dt)]), \
            [x(5, 2)]
    if op == "EMBEDDING_LOOKUP":
        return single_op_model(op, [int32_const([2, 0, 2]), ("v", [3, 4], dt)], [("o", [3, 4], dt)]), [x(3, 4)]
    if op == "SPARSE_TO_DENSE":
        vals, default = dtype_values([2], dt, seed=6), dtype_values([], dt, seed=7)
        return single_op_model(op, [int32_const([[0, 1], [2, 0]]), int32_const([3, 3]), ("const", vals), ("const", default)],
                               [("o", [3, 3], dt)], validate_indices=False), []
    if op == "CUMSUM":
        return single_op_model(op, [("x", [2, 5], dt), int32_const(1)], [("o", [2, 5], dt)],
                               exclusive=False, reverse=True), [x(2, 5)]
    if op == "BUCKETIZE":
        return single_op_model(op, [("x", [2, 5], dt)], [("o", [2, 5], np.int32)],
                               boundaries=[-50.0, -1.0, 0.0, 2.5, 40.0]), [x(2, 5)]
    raise AssertionError(op)


_INDEXING_DTYPES = {
    "SLICE": FIXED_DTYPES + ("string",),
    "STRIDED_SLICE": FIXED_DTYPES + ("string",),
    "GATHER": SMALL_TYPES + ("float16", "bool", "string"),
    "GATHER_ND": SMALL_TYPES + ("float16", "bool", "string"),
    "SCATTER_ND": ("float32", "int8", "uint8", "int32", "int64", "bool"),
    "DYNAMIC_UPDATE_SLICE": FIXED_DTYPES + ("complex128",),
    "ONE_HOT": ("float32", "int8", "uint8", "int32", "int64", "bool"),
    "WHERE": ("float32", "int8", "uint8", "int32", "uint32", "int64", "bool"),
    "UNIQUE": SMALL_TYPES,
    "SEGMENT_SUM": ("float32", "int32"),
    "UNSORTED_SEGMENT_SUM": ("float32", "int32"),
    "UNSORTED_SEGMENT_PROD": ("float32", "int32"),
    "UNSORTED_SEGMENT_MAX": ("float32", "int32"),
    "UNSORTED_SEGMENT_MIN": ("float32", "int32"),
    "EMBEDDING_LOOKUP": FIXED_DTYPES + ("complex128",),
    "SPARSE_TO_DENSE": ("float32", "int8", "uint8", "int32", "int64"),
    "CUMSUM": ("float32", "int32", "int64"),
    "BUCKETIZE": ("float32", "float64", "int32", "int64"),
}


@pytest.mark.parametrize("op,dtype", [(op, d) for op, ds in _INDEXING_DTYPES.items() for d in ds])
def test_indexing_dtypes(op, dtype):
    mb, inputs = _indexing_case(op, dtype)
    check_builtin(mb, inputs)
    assert set(_INDEXING_DTYPES[op]) <= set(CPU.dtypes[op])   # docs/ops.md lists what is tested


def test_indexing_types_beyond_litert():
    # Types we run beyond LiteRT's (its kernels reject them), checked against numpy: GATHER of uint16 and
    # of 2-D strings, SPARSE_TO_DENSE of bool.
    for dtype in ("uint16", "string"):
        assert dtype in CPU.dtypes["GATHER"]
        dt = object if dtype == "string" else dtype
        x = dtype_values([4, 3], dt, seed=2)
        mb = single_op_model("GATHER", [("x", [4, 3], dt), int32_const([[3, 0], [2, 2]])], [("o", [2, 2, 3], dt)], axis=0)
        np.testing.assert_array_equal(run_onert(mb, [x])[0], x[np.array([[3, 0], [2, 2]])])
    assert "bool" in CPU.dtypes["SPARSE_TO_DENSE"]
    mb = single_op_model("SPARSE_TO_DENSE", [int32_const([[0, 1], [2, 0]]), int32_const([3, 2]), ("const", np.array([True, True])),
                                             ("const", np.array(False))], [("o", [3, 2], bool)])
    want = np.zeros((3, 2), bool)
    want[0, 1] = want[2, 0] = True
    np.testing.assert_array_equal(run_onert(mb, [])[0], want)


@pytest.mark.parametrize("op", ["SEGMENT_SUM", "UNSORTED_SEGMENT_MAX", "CUMSUM"])
def test_unsupported_type_is_prepare_error(op):
    mb, _ = _indexing_case(op, "float32")
    for t in mb.subgraphs[0].tensors:       # retype the data input and the output: int8 is not supported
        if t.dtype == np.float32:
            t.dtype, t.type_name = np.dtype(np.int8), "INT8"
    with pytest.raises(onert_py.PrepareError, match="has type int8, not supported"):
        onert_py.infer.session(mb.to_bytes("tflite"))


def test_hybrid_embedding_lookup_is_prepare_error():
    # an int8 table with a float32 output is LiteRT's hybrid (dequantizing) lookup: not a plain gather
    mb = single_op_model("EMBEDDING_LOOKUP", [int32_const([1, 0]), ("const", np.ones((2, 3), np.int8))],
                         [("o", [2, 3], np.float32)])
    with pytest.raises(onert_py.PrepareError, match="output type float32 differs from input type int8"):
        onert_py.infer.session(mb.to_bytes("tflite"))
