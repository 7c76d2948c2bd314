"""DILATE, REDUCE_WINDOW, CONV_3D_TRANSPOSE, FAKE_QUANT, RFFT2D, NMS V4/V5, random ops and lookups
against LiteRT."""
import numpy as np
import pytest

from helpers import (FIXED_DTYPES, assert_matches_litert, check_builtin, dtype_values, rng, run_onert,
                     single_op_model)
from onert_py.backends.registry import CPU, load_builtin_kernels

load_builtin_kernels()   # the dtype audits read CPU.dtypes (what docs/ops.md lists)

R = rng(41)
F32 = np.float32


def test_dilate():
    x = R.standard_normal((3, 2, 4)).astype(F32)
    mb = single_op_model("DILATE", [("x", x.shape, F32), ("const", np.array([2, 1, 3], np.int32)),
                                    ("const", np.array(-1.5, F32))], [("o", [5, 2, 10], F32)])
    assert_matches_litert(mb, [x])


def test_dilate_int():
    x = R.integers(-9, 9, (2, 3)).astype(np.int32)
    mb = single_op_model("DILATE", [("x", x.shape, np.int32), ("const", np.array([3, 2], np.int32)),
                                    ("p", [], np.int32)], [("o", [4, 5], np.int32)])
    assert_matches_litert(mb, [x, np.array(7, np.int32)])


@pytest.mark.parametrize("dtype", FIXED_DTYPES + ("complex128",))
def test_dilate_dtypes(dtype):
    # LiteRT 2.3's DILATE moves elements of every fixed-size type
    x = dtype_values([2, 3], dtype, seed=1)
    mb = single_op_model("DILATE", [("x", [2, 3], dtype), ("const", np.array([2, 3], np.int32)),
                                    ("const", dtype_values([], dtype, seed=2))], [("o", [3, 7], dtype)])
    check_builtin(mb, [x])
    assert dtype in CPU.dtypes["DILATE"]


@pytest.mark.parametrize("fn", [1, 2, 3, 4])
@pytest.mark.parametrize("win,strides,dils", [((2, 3), (1, 1), (1, 1)), ((2, 2), (2, 1), (1, 2)),
                                              ((3, 1), (1, 3), (2, 1))])
def test_reduce_window(fn, win, strides, dils):
    x = R.standard_normal((7, 8)).astype(F32)
    out = [(s - ((w - 1) * d + 1)) // st + 1 for s, w, st, d in zip(x.shape, win, strides, dils)]
    init = {1: 0.0, 2: 1.0, 3: np.inf, 4: -np.inf}[fn]
    mb = single_op_model("REDUCE_WINDOW", [("x", x.shape, F32), ("const", np.array(init, F32)),
                                           ("const", np.array(win, np.int64)),
                                           ("const", np.array(strides, np.int64)),
                                           ("const", np.array(dils, np.int64))],
                         [("o", out, F32)], reduce_function=fn)
    assert_matches_litert(mb, [x])


@pytest.mark.parametrize("fn", [5, 6])
def test_reduce_window_bool(fn):
    x = R.integers(0, 2, (4, 5)).astype(bool)
    mb = single_op_model("REDUCE_WINDOW", [("x", x.shape, bool), ("const", np.array(fn == 5)),
                                           ("const", np.array([2, 2], np.int64)),
                                           ("const", np.array([1, 2], np.int64)),
                                           ("const", np.array([1, 1], np.int64))],
                         [("o", [3, 2], bool)], reduce_function=fn)
    assert_matches_litert(mb, [x])


@pytest.mark.parametrize("padding,strides,out_dhw", [(1, (1, 1, 1), (4, 5, 6)), (0, (2, 2, 1), (6, 8, 4)),
                                                     (1, (2, 1, 2), (7, 6, 9)), (0, (1, 2, 2), (3, 7, 7))])
@pytest.mark.parametrize("bias", [False, True])
def test_conv_3d_transpose(padding, strides, out_dhw, bias):
    x = R.standard_normal((2, 3, 4, 4, 3)).astype(F32)
    w = R.standard_normal((2, 3, 3, 5, 3)).astype(F32)
    if padding == 1:  # VALID
        out_dhw = tuple((i - 1) * s + k for i, s, k in zip(x.shape[1:4], strides, w.shape[:3]))
    else:
        out_dhw = tuple(i * s for i, s in zip(x.shape[1:4], strides))
    os_ = np.array([2, *out_dhw, 5], np.int32)
    specs = [("const", os_), ("const", w), ("x", x.shape, F32)]
    if bias:
        specs.append(("const", R.standard_normal(5).astype(F32)))
    mb = single_op_model("CONV_3D_TRANSPOSE", specs, [("o", list(os_), F32)], padding=padding,
                         stride_d=strides[0], stride_h=strides[1], stride_w=strides[2],
                         fused_activation_function=1 if bias else 0)
    assert_matches_litert(mb, [x], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("lo,hi,bits,narrow", [(-1.0, 1.0, 8, False), (0.0, 6.0, 8, False), (-0.2, 6.0, 16, False), (-3.3, 2.1, 4, False),
                                               (0.5, 3.0, 8, False)])
def test_fake_quant(lo, hi, bits, narrow):
    x = (R.standard_normal((3, 50)) * 3).astype(F32)
    mb = single_op_model("FAKE_QUANT", [("x", x.shape, F32)], [("o", x.shape, F32)],
                         min=lo, max=hi, num_bits=bits, narrow_range=narrow)
    assert_matches_litert(mb, [x])


def test_fake_quant_narrow_range_refused():
    mb = single_op_model("FAKE_QUANT", [("x", [3], F32)], [("o", [3], F32)], min=-1.0, max=1.0, narrow_range=True)
    with pytest.raises(Exception, match="narrow_range"):
        run_onert(mb, [np.zeros(3, F32)])


@pytest.mark.parametrize("shape,fl", [((4, 8), (4, 8)), ((2, 3, 5, 6), (4, 8)), ((8, 8), (2, 4)),
                                      ((3, 4, 16), (4, 16))])
def test_rfft2d(shape, fl):
    x = R.standard_normal(shape).astype(F32)
    out = list(shape[:-2]) + [fl[0], fl[1] // 2 + 1]
    mb = single_op_model("RFFT2D", [("x", shape, F32), ("const", np.array(fl, np.int32))],
                         [("o", out, np.complex64)])
    assert_matches_litert(mb, [x], rtol=1e-4, atol=1e-4)
