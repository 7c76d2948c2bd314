"""StableHLO CPU kernels vs LiteRT."""
import numpy as np
import pytest

import onert_py
from helpers import FIXED_DTYPES, assert_matches_litert, check_builtin, dtype_values, rng, run_onert, single_op_model
from onert_py.backends.registry import CPU, load_builtin_kernels
from onert_py.schema.writer import ModelBuilder

load_builtin_kernels()   # the dtype audits read CPU.dtypes (what docs/ops.md lists)

BINARY = {"STABLEHLO_ADD": np.add, "STABLEHLO_MULTIPLY": np.multiply,
          "STABLEHLO_MAXIMUM": np.maximum, "STABLEHLO_MINIMUM": np.minimum}


# LiteRT 2.3 runs the elementwise StableHLO ops in every real type and bool (not complex64).
_REAL_AND_BOOL = tuple(d for d in FIXED_DTYPES if d != "complex64")
_INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("dtype", _REAL_AND_BOOL)
def test_binary(op, dtype):
    shape = [2, 3, 4]
    a, b = dtype_values(shape, dtype, seed=1), dtype_values(shape, dtype, seed=2)
    m = single_op_model(op, [("a", shape, dtype), ("b", shape, dtype)], [("o", shape, dtype)])
    out = check_builtin(m, [a, b], rtol=1e-3 if dtype == "float16" else 1e-5)
    want = BINARY[op](a, b)   # integers wrap; bool add/max = OR, multiply/min = AND, as in C++
    np.testing.assert_array_equal(out[0], want)
    assert set(_REAL_AND_BOOL) <= set(CPU.dtypes[op])


@pytest.mark.parametrize("dtype", ("bool",) + _INTS)
def test_and(dtype):
    shape = [3, 5]
    a, b = dtype_values(shape, dtype, seed=3), dtype_values(shape, dtype, seed=4)
    m = single_op_model("STABLEHLO_AND", [("a", shape, dtype), ("b", shape, dtype)], [("o", shape, dtype)])
    check_builtin(m, [a, b])


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
def test_shift_left(dtype):
    g = rng(3)
    bits = np.iinfo(dtype).bits
    a = g.integers(-100, 100, [4, 6]).astype(dtype)
    s = g.integers(0, bits, [4, 6]).astype(dtype)
    m = single_op_model("STABLEHLO_SHIFT_LEFT", [("a", [4, 6], dtype), ("s", [4, 6], dtype)],
                        [("o", [4, 6], dtype)])
    assert_matches_litert(m, [a, s])


@pytest.mark.parametrize("low,high,interior", [
    ([1, 0], [0, 2], [0, 0]),
    ([0, 1], [2, 1], [1, 2]),
    ([-1, 2], [1, -2], [0, 1]),
    ([2, -1], [-1, 0], [2, 0]),
])
def test_pad(low, high, interior):
    x = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    out_shape = [lo + d + (d - 1) * it + hi for d, lo, hi, it in zip(x.shape, low, high, interior)]
    m = single_op_model("STABLEHLO_PAD", [("x", [3, 4], np.float32), ("const", np.float32(-7))],
                        [("o", out_shape, np.float32)],
                        edge_padding_low=low, edge_padding_high=high, interior_padding=interior)
    assert_matches_litert(m, [x])


@pytest.mark.parametrize("dtype", FIXED_DTYPES + ("complex128",))
def test_pad_dtypes(dtype):
    x = dtype_values([3, 4], dtype, seed=5)
    m = single_op_model("STABLEHLO_PAD", [("x", [3, 4], dtype), ("const", dtype_values([], dtype, seed=6))],
                        [("o", [5, 10], dtype)], edge_padding_low=[1, -1], edge_padding_high=[1, 1],
                        interior_padding=[0, 2])
    check_builtin(m, [x])
    assert dtype in CPU.dtypes["STABLEHLO_PAD"]


# (operand shape, indices, offset_dims, collapsed, start_index_map, index_vector_dim, slice_sizes, out shape)
GATHERS = [
    # Plain row gather (like tf.gather axis 0).
    ([5, 3], [[0], [4], [2]], [1], [0], [0], 1, [1, 3], [3, 3]),
    # Windows of 2x2 from a 2-D start vector; starts out of range get clamped.
    ([4, 5], [[0, 0], [3, 4], [1, 2]], [1, 2], [], [0, 1], 1, [2, 2], [3, 2, 2]),
    # Index vector dim first, batch in the middle of the output.
    ([3, 4, 5], [[1, 0], [2, 3]], [0, 2], [1], [1, 2], 0, [3, 1, 2], [3, 2, 2]),
    # Scalar indices (index_vector_dim == rank of indices).
    ([6, 2], [5, 1, 3, 0], [1], [0], [0], 1, [1, 2], [4, 2]),
]


@pytest.mark.parametrize("case", range(len(GATHERS)))
def test_gather(case):
    shape, idx, offset, collapsed, sim, ivd, sizes, out_shape = GATHERS[case]
    x = rng(4).uniform(-1, 1, shape).astype(np.float32)
    idx = np.array(idx, np.int32)
    m = single_op_model("STABLEHLO_GATHER", [("x", shape, np.float32), ("const", idx)],
                        [("o", out_shape, np.float32)], offset_dims=offset, collapsed_slice_dims=collapsed,
                        start_index_map=sim, index_vector_dim=ivd, slice_sizes=sizes)
    assert_matches_litert(m, [x])


@pytest.mark.parametrize("dtype", FIXED_DTYPES)
def test_gather_dtypes(dtype):
    x = dtype_values([5, 3], dtype, seed=7)
    m = single_op_model("STABLEHLO_GATHER", [("x", [5, 3], dtype), ("const", np.array([[0], [4], [4]], np.int32))],
                        [("o", [3, 3], dtype)], offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                        index_vector_dim=1, slice_sizes=[1, 3])
    check_builtin(m, [x])
    assert dtype in CPU.dtypes["STABLEHLO_GATHER"]


def _region(mb: ModelBuilder, op: str | None, dtype=np.float32):
    sg = mb.subgraph("region")
    a = sg.tensor("a", [], dtype)
    b = sg.tensor("b", [], dtype)
    sg.inputs = [a, b]
    if op is None:
        sg.outputs = [b]
    else:
        r = sg.tensor("r", [], dtype)
        sg.op(op, [a, b], [r])
        sg.outputs = [r]
    return sg.index


def _scatter_model(region_op, shape, idx, upd_shape, dtype=np.float32, **opts):
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", shape, dtype)
    u = sg.tensor("u", upd_shape, dtype)
    i = sg.const("idx", np.array(idx, np.int32))
    o = sg.tensor("o", shape, dtype)
    sg.inputs, sg.outputs = [x, u], [o]
    sg.op("STABLEHLO_SCATTER", [x, i, u], [o], update_computation_subgraph_index=1, **opts)
    mb.signature("serving_default", sg)
    _region(mb, region_op, dtype)
    return mb


@pytest.mark.parametrize("region_op", [None, "STABLEHLO_ADD", "STABLEHLO_MAXIMUM"])
@pytest.mark.parametrize("dtype", _REAL_AND_BOOL)   # LiteRT 2.3 scatters every real type and bool
def test_scatter_dtypes(region_op, dtype):
    x, u = dtype_values([5, 3], dtype, seed=8), dtype_values([3, 3], dtype, seed=9)
    m = _scatter_model(region_op, [5, 3], [[1], [3], [1]], [3, 3], dtype, update_window_dims=[1],
                       inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    check_builtin(m, [x, u], rtol=1e-3 if dtype == "float16" else 1e-5)
    assert dtype in CPU.dtypes["STABLEHLO_SCATTER"]


@pytest.mark.parametrize("region_op", [None, "STABLEHLO_ADD", "STABLEHLO_MULTIPLY", "STABLEHLO_MAXIMUM",
                                       "STABLEHLO_MINIMUM"])
def test_scatter_rows(region_op):
    # Rows 1, 3 and (again) 1 get updated; row 9 is out of bounds and skipped.
    idx = [[1], [3], [1], [9]]
    g = rng(5)
    x = g.uniform(-2, 2, [5, 3]).astype(np.float32)
    u = g.uniform(-2, 2, [4, 3]).astype(np.float32)
    m = _scatter_model(region_op, [5, 3], idx, [4, 3], update_window_dims=[1], inserted_window_dims=[0],
                       scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    assert_matches_litert(m, [x, u])


def test_scatter_windows():
    idx = [[0, 1], [2, 2], [3, 0]]
    g = rng(6)
    x = g.uniform(-2, 2, [4, 4]).astype(np.float32)
    u = g.uniform(-2, 2, [3, 2, 2]).astype(np.float32)
    m = _scatter_model("STABLEHLO_ADD", [4, 4], idx, [3, 2, 2], update_window_dims=[1, 2],
                       inserted_window_dims=[], scatter_dims_to_operand_dims=[0, 1], index_vector_dim=1)
    assert_matches_litert(m, [x, u])


def _reduce_window_model(body, shape, out_shape, dtype=np.float32, init=0, **opts):
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", shape, dtype)
    c = sg.const("init", np.array(init, dtype))
    o = sg.tensor("o", out_shape, dtype)
    sg.inputs, sg.outputs = [x], [o]
    sg.op("STABLEHLO_REDUCE_WINDOW", [x, c], [o], body_subgraph_index=1, **opts)
    mb.signature("serving_default", sg)
    _region(mb, body, dtype)
    return mb


@pytest.mark.parametrize("body,init", [("STABLEHLO_ADD", 0.0), ("STABLEHLO_MAXIMUM", -np.inf),
                                       ("STABLEHLO_MINIMUM", np.inf), ("STABLEHLO_MULTIPLY", 1.0)])
@pytest.mark.parametrize("cfg", [
    dict(window_dimensions=[2, 2], window_strides=[1, 1], out=[3, 4]),
    dict(window_dimensions=[2, 3], window_strides=[2, 1], padding=[1, 0, 0, 1], out=[2, 4]),
    dict(window_dimensions=[2, 2], window_strides=[1, 2], base_dilations=[2, 1], window_dilations=[1, 2],
         out=[6, 2]),
])
def test_reduce_window(body, init, cfg):
    cfg = dict(cfg)
    out = cfg.pop("out")
    x = rng(7).uniform(0.5, 1.5, [4, 5]).astype(np.float32)
    m = _reduce_window_model(body, [4, 5], out, init=init, **cfg)
    assert_matches_litert(m, [x], rtol=1e-5)


_RW_LITERT = ("float32", "float64", "int8", "uint8", "int16", "int32", "int64", "bool")


@pytest.mark.parametrize("body", ["STABLEHLO_ADD", "STABLEHLO_MAXIMUM"])
@pytest.mark.parametrize("dtype", _RW_LITERT)
def test_reduce_window_dtypes(body, dtype):
    x = dtype_values([4, 5], dtype, seed=10)
    init = np.zeros((), dtype) if body == "STABLEHLO_ADD" else dtype_values([], dtype, seed=11)
    m = _reduce_window_model(body, [4, 5], [2, 4], dtype, init=init, window_dimensions=[2, 2],
                             window_strides=[2, 1])
    check_builtin(m, [x])


@pytest.mark.parametrize("dtype", ["float16", "uint16", "uint32", "uint64"])
def test_reduce_window_other_types_numpy(dtype):
    # LiteRT's kernel rejects these types; their result is exact (max, wrapping integer sums), so the
    # numpy formula is the reference
    x = dtype_values([4, 5], dtype, seed=12)
    body = "STABLEHLO_MAXIMUM" if dtype == "float16" else "STABLEHLO_ADD"
    init = np.array(-np.inf if dtype == "float16" else 0, dtype)
    m = _reduce_window_model(body, [4, 5], [3, 2], dtype, init=init, window_dimensions=[2, 3],
                             window_strides=[1, 2])
    (got,) = run_onert(m, [x])
    w = np.lib.stride_tricks.sliding_window_view(x, (2, 3))[:, ::2]
    want = w.max(axis=(2, 3)) if dtype == "float16" else w.sum(axis=(2, 3), dtype=dtype)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)


def test_reduce_window_sum_formula():
    # 1-D sliding sum, checked against a numpy formula as well.
    x = np.arange(1, 9, dtype=np.float32)
    m = _reduce_window_model("STABLEHLO_ADD", [8], [3], window_dimensions=[3], window_strides=[2])
    (got,) = run_onert(m, [x])
    np.testing.assert_array_equal(got, [6, 12, 18])


@pytest.mark.parametrize("algorithm,n_state", [(0, 2), (1, 2), (1, 3), (2, 2)])
@pytest.mark.parametrize("dtype,shape", [(np.uint32, [2, 3]), (np.int32, [7]), (np.uint64, [3, 2]),
                                         (np.int64, [5])])
def test_rng_bit_generator(algorithm, n_state, dtype, shape):
    state = np.array([0x0123456789ABCDEF, 0xFFFFFFFFFFFFFFFE, 42][:n_state], np.uint64)
    m = single_op_model("STABLEHLO_RNG_BIT_GENERATOR", [("s", [n_state], np.uint64)],
                        [("so", [n_state], np.uint64), ("o", shape, dtype)], algorithm=algorithm)
    assert_matches_litert(m, [state])


def test_unsupported_type_is_prepare_error():
    m = single_op_model("STABLEHLO_ADD", [("a", [2], np.complex64), ("b", [2], np.complex64)],
                        [("o", [2], np.complex64)])
    with pytest.raises(onert_py.PrepareError, match="has type complex64, not supported"):
        run_onert(m, [np.zeros(2, np.complex64)] * 2)
