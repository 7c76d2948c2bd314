"""DEQUANTIZE, QUANTIZE (against LiteRT) and DENSIFY (against an independent sparse encoding)."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import assert_matches_litert, check_builtin, rng, run_onert, single_op_model
from onert_py.backends.cpu.weights import densify_array
from onert_py.errors import OnertPyError
from onert_py.schema.writer import ModelBuilder


def _model(op, in_shape, in_dtype, in_q, out_dtype, out_q=None, const=None):
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    if const is None:
        x = sg.tensor("x", in_shape, in_dtype, quantization=in_q)
        sg.inputs.append(x)
    else:
        x = sg.const("w", const, in_dtype, quantization=in_q)
    y = sg.tensor("y", in_shape, out_dtype, quantization=out_q)
    sg.outputs.append(y)
    sg.op(op, [x], [y])
    mb.signature("serving_default", sg)
    return mb


@pytest.mark.parametrize("dtype,q", [(np.int8, (0.05, -3)), (np.uint8, (0.1, 128)), (np.int16, (0.002, 0))])
def test_dequantize_per_tensor_matches_litert(dtype, q):
    info = np.iinfo(dtype)
    x = rng(1).integers(info.min, info.max, (2, 3, 5), endpoint=True).astype(dtype)
    assert_matches_litert(_model("DEQUANTIZE", x.shape, dtype, q, np.float32), [x], rtol=0, atol=0,
                          fmts=("tflite",))


def test_dequantize_float16_constant_matches_litert():
    w = rng(2).standard_normal((4, 3)).astype(np.float16)
    mb = _model("DEQUANTIZE", w.shape, np.float16, None, np.float32, const=w)
    (got,) = run_onert(mb, [])
    np.testing.assert_array_equal(got, w.astype(np.float32))


@pytest.mark.parametrize("shape", [(), (1,), (2, 3)])
def test_dequantize_float16_constant_keeps_its_rank(shape):
    # a rank-0 constant stays rank 0 (LiteRT's); the converter emits these for scalar operands
    w = np.asarray(rng(5).normal(size=shape)).astype(np.float16)
    mb = single_op_model("DEQUANTIZE", [("const", w)], [("y", list(shape), "float32")])
    (y,) = run_onert(mb, [])
    assert y.shape == shape and y.dtype == np.float32
    np.testing.assert_array_equal(y, w.astype(np.float32))
    check_builtin(mb, [])           # and LiteRT's shape (XNNPACK refuses a model of one constant)


def test_dequantize_per_channel_constant():
    g = rng(3)
    w = g.integers(-127, 127, (3, 4, 2), endpoint=True).astype(np.int8)
    scale, zp = np.array([0.5, 0.25, 0.125, 2.0], np.float32), np.array([0, 1, -2, 3])
    mb = _model("DEQUANTIZE", w.shape, np.int8, (scale, zp, 1), np.float32, const=w)
    (got,) = run_onert(mb, [])
    want = np.empty(w.shape, np.float32)
    for c in range(4):
        want[:, c, :] = (w[:, c, :].astype(np.float32) - zp[c]) * scale[c]
    np.testing.assert_array_equal(got, want)


def test_dequantize_without_quantization_is_a_prepare_error():
    with pytest.raises(OnertPyError, match="no quantization"):
        run_onert(_model("DEQUANTIZE", (2,), np.int8, None, np.float32), [np.zeros(2, np.int8)])


@pytest.mark.parametrize("dtype,q", [(np.int8, (0.05, -3)), (np.uint8, (0.1, 128))])
def test_quantize_matches_litert(dtype, q):
    x = (rng(4).standard_normal((3, 50)) * 8).astype(np.float32)
    x[0, :6] = np.array([0.5, -0.5, 1.5, -1.5, 2.5, 1e9], np.float32) * q[0]  # ties and saturation
    assert_matches_litert(_model("QUANTIZE", x.shape, np.float32, None, dtype, q), [x], fmts=("tflite",))


@pytest.mark.parametrize("dtype,q", [(np.int8, (0.05, -3)), (np.uint8, (0.1, 128)), (np.int16, (0.001, 0))])
@pytest.mark.parametrize("shape", [(), (1,), (2, 16, 1)])
def test_quantize_special_values_and_small_shapes(dtype, q, shape):
    # LiteRT for finite values (rank 0 too); non-finite ones against the documented rule: inf saturates,
    # NaN gives the zero point (an independent formula: x / scale in float32 as LiteRT, round half to even,
    # then clamp in float64)
    info = np.iinfo(dtype)
    x = (rng(5).standard_normal(shape) * 300 * q[0]).astype(np.float32)
    mb = _model("QUANTIZE", x.shape, np.float32, None, dtype, q)
    assert_matches_litert(mb, [x], fmts=("tflite",))
    special = np.resize(np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 2.5 * q[0]], np.float32), shape)
    before = special.copy()
    (got,) = run_onert(mb, [special])
    with np.errstate(invalid="ignore"):
        r = np.rint(special / np.float32(q[0])).astype(np.float64)
    want = np.where(np.isnan(r), q[1], np.clip(np.nan_to_num(r, posinf=1e9, neginf=-1e9) + q[1], info.min, info.max))
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_array_equal(got, want.astype(dtype))
    np.testing.assert_array_equal(special, before)


# --------------------------------------------------------------------------------------- DENSIFY

def _csr_encode(dense: np.ndarray):
    """Independent encoder: rank-2 tensor, dim 0 DENSE, dim 1 SPARSE_CSR (nonzeros only)."""
    segs, idx, vals = [0], [], []
    for row in dense:
        nz = np.nonzero(row)[0]
        idx.extend(nz)
        vals.extend(row[nz])
        segs.append(len(idx))
    meta = [{"format": 0, "dense_size": dense.shape[0], "array_segments": None, "array_indices": None},
            {"format": 1, "dense_size": 0, "array_segments": np.array(segs), "array_indices": np.array(idx)}]
    return np.array(vals, dense.dtype), {"traversal_order": (0, 1), "block_map": (), "dim_metadata": meta}


def test_densify_csr_rows():
    d = rng(5).standard_normal((6, 9)).astype(np.float32)
    d[rng(6).random(d.shape) < 0.6] = 0
    d[2] = 0  # an empty row
    vals, sp = _csr_encode(d)
    np.testing.assert_array_equal(densify_array(vals, d.shape, sp), d)


def test_densify_column_major_traversal():
    d = rng(7).standard_normal((4, 5)).astype(np.float32)
    d[rng(8).random(d.shape) < 0.5] = 0
    vals, sp = _csr_encode(d.T.copy())  # encode the transpose row-wise == d column-wise
    sp["traversal_order"] = (1, 0)
    sp["dim_metadata"][0]["dense_size"] = 5
    np.testing.assert_array_equal(densify_array(vals, d.shape, sp), d)


def test_densify_block_sparse():
    """4x8 tensor of 2x2 blocks (block_map (0, 1)); blocks stored CSR by block row, dense inside."""
    g = rng(9)
    d = np.zeros((4, 8), np.float32)
    kept = [(0, 1), (0, 3), (1, 0)]  # (block row, block col)
    for br, bc in kept:
        d[2 * br:2 * br + 2, 2 * bc:2 * bc + 2] = g.standard_normal((2, 2))
    vals = np.concatenate([d[2 * br:2 * br + 2, 2 * bc:2 * bc + 2].reshape(-1) for br, bc in kept])
    meta = [{"format": 0, "dense_size": 2},
            {"format": 1, "dense_size": 0, "array_segments": np.array([0, 2, 3]),
             "array_indices": np.array([1, 3, 0])},
            {"format": 0, "dense_size": 2}, {"format": 0, "dense_size": 2}]
    sp = {"traversal_order": (0, 1, 2, 3), "block_map": (0, 1), "dim_metadata": meta}
    np.testing.assert_array_equal(densify_array(vals, d.shape, sp), d)


def test_densify_rejects_inconsistent_metadata():
    vals, sp = _csr_encode(np.eye(3, dtype=np.float32))
    with pytest.raises(ValueError, match="stored values"):
        densify_array(vals[:-1], (3, 3), sp)
    sp["dim_metadata"][1]["array_indices"] = np.array([0, 1, 7])
    with pytest.raises(ValueError, match="out of range"):
        densify_array(vals, (3, 3), sp)
    with pytest.raises(ValueError, match="permutation"):
        densify_array(vals, (3, 3), dict(sp, traversal_order=(0, 0)))


# ----------------------------------------------------------------------------------- requantize

@pytest.mark.parametrize("src,dst", [(np.int8, np.int8), (np.uint8, np.int8), (np.int8, np.uint8),
                                     (np.int16, np.int16), (np.int16, np.int8), (np.uint8, np.uint8)])
@pytest.mark.parametrize("q_in,q_out", [((0.05, 3), (0.1, -2)),          # multiplier below 1
                                        ((0.2, 0), (0.03, 1)),           # above 1: saturates
                                        ((0.0123, -7), (0.0123, 5)),     # equal scales, shifted zero point
                                        ((1e-3, 0), (0.7, 0))])          # tiny multiplier
def test_requantize_matches_litert_bit_exact(src, dst, q_in, q_out):
    """QUANTIZE from an integer type: LiteRT's fixed-point rescale, bit for bit, over every input value."""
    def fit(q, dt):   # a zero point inside the type (uint8 zero points are shifted up)
        info = np.iinfo(dt)
        return (q[0], int(np.clip(q[1] + (128 if info.min == 0 else 0), info.min, info.max)))
    if dst == np.int16 or src == np.int16:
        q_in, q_out = (q_in[0], 0), (q_out[0], 0)   # LiteRT's int16 quantization is symmetric
    q_in, q_out = fit(q_in, src), fit(q_out, dst)
    info = np.iinfo(src)
    x = np.arange(info.min, info.max + 1, max(1, (int(info.max) - int(info.min)) // 4000)).astype(src)
    mb = single_op_model("QUANTIZE", [("x", list(x.shape), src, q_in)], [("y", list(x.shape), dst, q_out)])
    check_builtin(mb, [x])
