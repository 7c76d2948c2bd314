"""Unary math, CAST, bit ops, complex parts and SELECT against LiteRT."""
import numpy as np
import pytest

import onert_py
from helpers import check_builtin, rng, single_op_model


check = check_builtin

SHAPES = [(), (7,), (2, 3, 4), (1, 2, 1, 3, 2)]

# Edge values per op family (random values fill the rest of each tensor).
_GENERIC = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, 2.5, 1e-30, -1e-30, 123.456, -987.25,
            np.nan, np.inf, -np.inf]


def _fill(shape, dtype, edges, scale=10.0, seed=0, low=None):
    """An array of `shape`: the edge values first, then random values of magnitude ~scale."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    r = rng(seed)
    if dtype.kind == "f":
        lo = -scale if low is None else low
        rand = r.uniform(lo, scale, n)
    elif dtype == np.bool_:
        rand = r.integers(0, 2, n)
    else:
        info = np.iinfo(dtype)
        rand = r.integers(max(info.min, -1000), min(info.max, 1000), n, endpoint=True)
    flat = np.asarray(rand).astype(dtype)
    edges = np.asarray(edges).astype(dtype)[:n]
    flat[:len(edges)] = edges
    return flat.reshape(shape)


def _unary_case(op, shape, dtype, x, rtol=1e-5, atol=1e-6, delegate=False, **opts):
    mb = single_op_model(op, [("x", list(shape), dtype)], [("y", list(shape), dtype)], **opts)
    check(mb, [x], rtol=rtol, atol=atol, delegate=delegate)


def _tol(dtype):
    # float16 outputs: LiteRT (XNNPACK) and numpy may round the last fp16 bit differently after an
    # fp32 computation; one fp16 ulp is ~1e-3 relative.
    return dict(rtol=2e-3, atol=1e-3, delegate=True) if np.dtype(dtype) == np.float16 else {}


def _finite_for(dtype, edges):
    """float16 runs on XNNPACK only, whose special-value handling differs: keep finite edges."""
    if np.dtype(dtype) == np.float16:
        return [e for e in edges if np.isfinite(e) and abs(e) < 6e4]
    return edges


FLOAT_OPS = {
    "ABS": _GENERIC, "NEG": _GENERIC, "FLOOR": _GENERIC, "CEIL": _GENERIC, "SQUARE": _GENERIC,
    "ROUND": _GENERIC + [0.49999997, -0.49999997, 3.5, -3.5, 4.5, 1e7 + 0.5, 8388609.0, -1e20],
    "EXP": [0.0, -0.0, 1.0, -1.0, 20.0, -20.0, 88.0, -87.0, 100.0, -200.0, np.nan, np.inf, -np.inf],
    "LOG": [0.0, -0.0, 1.0, -1.0, 1e-30, 1e30, 2.718281828, 0.5, np.nan, np.inf, -np.inf],
    "SQRT": [0.0, -0.0, 1.0, -1.0, 1e-30, 1e30, 2.0, 0.25, np.nan, np.inf, -np.inf],
    "RSQRT": [-0.0, 1.0, -1.0, 1e-30, 1e30, 2.0, 0.25, np.nan, np.inf],
    "SIN": [0.0, -0.0, 1.0, -1.0, np.pi, -np.pi / 2, 100.0, -100.0, np.nan, np.inf],
    "COS": [0.0, -0.0, 1.0, -1.0, np.pi, -np.pi / 2, 100.0, -100.0, np.nan, -np.inf],
}
_FLOAT_OP_DTYPES = {"ABS": [np.float32, np.float16, np.int32, np.int16],
                    "NEG": [np.float32, np.float16, np.int64, np.int32, np.int16, np.int8]}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("op", sorted(FLOAT_OPS))
def test_float_unary(op, shape):
    for dtype in _FLOAT_OP_DTYPES.get(op, [np.float32, np.float16]):
        edges = _finite_for(dtype, FLOAT_OPS[op])
        if np.dtype(dtype).kind == "i":
            info = np.iinfo(dtype)
            edges = [0, 1, -1, info.max, info.min + 1, 7, -100]
        scale = 5.0 if op in ("EXP", "SQUARE") else 50.0
        x = _fill(shape, dtype, edges, scale=scale, low=0.0 if op in ("LOG", "SQRT", "RSQRT") else None)
        _unary_case(op, shape, dtype, x, **_tol(dtype))


@pytest.mark.parametrize("shape", [(1,), (1, 1)], ids=str)
@pytest.mark.parametrize("op", sorted(FLOAT_OPS) + ["SIGN", "LOGICAL_NOT"])
def test_one_value_unary(op, shape):
    """A one-element tensor (a converter's [1]-shaped loop value) takes a path of its own (the ufunc on
    the numpy scalar, written into the planned buffer): every edge value of the op, one per run of one
    session, against LiteRT."""
    dtypes = {"LOGICAL_NOT": [np.bool_], "SIGN": [np.float32, np.float64, np.int32]}
    for dtype in dtypes.get(op) or _FLOAT_OP_DTYPES.get(op, [np.float32, np.float16]):
        edges = [True, False] if op == "LOGICAL_NOT" else _finite_for(dtype, FLOAT_OPS.get(op, _GENERIC))
        if np.dtype(dtype).kind == "i":
            edges = [0, 1, -1, np.iinfo(dtype).max, np.iinfo(dtype).min]
        for e in edges:
            _unary_case(op, shape, dtype, np.full(shape, e, dtype), **_tol(dtype))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_abs_neg_int_min(shape):
    # std::abs / unary minus of INT_MIN wrap around to INT_MIN.
    for op in ("ABS", "NEG"):
        x = _fill(shape, np.int32, [np.iinfo(np.int32).min, -5, 5])
        _unary_case(op, shape, np.int32, x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_sign(dtype, shape):
    edges = [0, -0.0, 3, -3, np.nan, np.inf, -np.inf, 1e-30] if np.dtype(dtype).kind == "f" \
        else [0, 3, -3, 2**31 - 1, -2**31]
    x = _fill(shape, dtype, edges)
    _unary_case("SIGN", shape, dtype, x)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_logical_not(shape):
    x = _fill(shape, np.bool_, [True, False])
    _unary_case("LOGICAL_NOT", shape, np.bool_, x)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_zeros_like(dtype, shape):
    x = _fill(shape, dtype, [np.nan, -1] if np.dtype(dtype).kind == "f" else [-1, 5])
    _unary_case("ZEROS_LIKE", shape, dtype, x)


# ---- ATAN2 / ADD_N

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_atan2(dtype, shape):
    ey = [0.0, 0.0, -0.0, -0.0, 1.0, -1.0, np.inf, np.inf, np.nan, -2.0, 3.0, 1e-30]
    ex = [0.0, -0.0, 0.0, -0.0, 0.0, 0.0, np.inf, -np.inf, 1.0, -5.0, np.nan, -1e30]
    if dtype == np.float16:
        ey, ex = ey[:6] + ey[9:10], ex[:6] + ex[9:10]     # finite pairs only on the XNNPACK path
    y = _fill(shape, dtype, ey, seed=1)
    x = _fill(shape, dtype, ex, seed=2)
    mb = single_op_model("ATAN2", [("y", list(shape), dtype), ("x", list(shape), dtype)],
                         [("o", list(shape), dtype)])
    check(mb, [y, x], **_tol(dtype))


@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4)], ids=str)
def test_add_n(n, dtype, shape):
    edges = [[2**31 - 1, 1, -2**31, -1, 5]] * n if dtype == np.int32 else \
        [[3e38, np.inf, -np.inf, np.nan, 1.0], [3e38, 1.0, -np.inf, 1.0, np.inf],
         [-np.inf, -np.inf, np.inf, 2.0, -np.inf]] + [[1.0, 2.0, 3.0, 4.0, 5.0]] * 2
    xs = [_fill(shape, dtype, edges[k], seed=k) for k in range(n)]
    mb = single_op_model("ADD_N", [(f"x{k}", list(shape), dtype) for k in range(n)],
                         [("o", list(shape), dtype)])
    check(mb, xs)


# ---- CAST

CAST_TYPES = [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int16, np.uint16, np.int32,
              np.uint32, np.int64, np.bool_, np.complex64]


def _cast_source(dtype, shape, seed=0):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        edges = [np.nan, np.inf, -np.inf, 3.7, -3.7, 0.5, -0.5, -0.0, 255.9, 256.0, -128.5, -129.0,
                 65535.5, 65536.0, -32769.0, 2.0**31, -2.0**31 - 4096, 2.0**32, 3e9, 1e19, -1e19,
                 2.0**63, -2.0**63, 1e-40, 127.0, 32767.0]
        if dtype == np.float16:
            edges = [e for e in edges if not np.isfinite(e) or abs(e) < 65504]
        return _fill(shape, dtype, edges, scale=3e4, seed=seed)
    if dtype.kind == "c":
        re = _cast_source(np.float32, shape, seed)
        im = _fill(shape, np.float32, [], seed=seed + 1)
        return (re + 1j * im).astype(dtype)
    if dtype == np.bool_:
        return _fill(shape, dtype, [True, False], seed=seed)
    info = np.iinfo(dtype)
    edges = [info.min, info.max, 0, 1, -1 if info.min < 0 else 2, info.max // 2 + 1, 255, 256, 128,
             -129 if info.min < 0 else 65536 % (info.max + 1), 70000 % (info.max + 1)]
    flat = _fill((int(np.prod(shape)),), dtype, [], seed=seed)
    e = np.array([int(v) for v in edges], dtype=object)
    e = np.array([int(v) % (info.max - info.min + 1) + info.min
                  if not info.min <= v <= info.max else v for v in e]).astype(dtype)
    flat[:len(e)] = e[:flat.size]
    # Large random values so that every narrowing conversion is exercised.
    if flat.size > len(e):
        big = rng(seed).integers(info.min, info.max, flat.size - len(e), endpoint=True, dtype=dtype)
        flat[len(e):] = big
    return flat.reshape(shape)


@pytest.mark.parametrize("src", CAST_TYPES, ids=lambda d: np.dtype(d).name)
def test_cast_all_pairs(src):
    shape = (4, 9)
    x = _cast_source(src, shape)
    for dst in CAST_TYPES:
        mb = single_op_model("CAST", [("x", list(shape), src)], [("y", list(shape), dst)])
        check(mb, [x])


@pytest.mark.parametrize("shape", [(), (3,), (1, 2, 1, 2, 3)], ids=str)
def test_cast_shapes(shape):
    x = _cast_source(np.float32, shape, seed=3)
    for dst in (np.int32, np.bool_, np.uint8):
        mb = single_op_model("CAST", [("x", list(shape), np.float32)], [("y", list(shape), dst)])
        check(mb, [x])


# ---- BITCAST

@pytest.mark.parametrize("src,dst,in_shape,out_shape", [
    (np.float32, np.int32, [2, 3], [2, 3]),
    (np.float32, np.uint32, [], []),
    (np.int32, np.float32, [5], [5]),
    (np.float32, np.uint8, [2, 3], [2, 3, 4]),
    (np.float32, np.int16, [], [2]),
    (np.int64, np.int8, [3], [3, 8]),
    (np.uint8, np.float32, [2, 3, 4], [2, 3]),
    (np.int16, np.int64, [4], []),
    (np.int16, np.float32, [2, 2], [2]),
    (np.float64, np.int64, [3], [3]),
    (np.complex64, np.float32, [3], [3, 2]),
    (np.float32, np.complex64, [3, 2], [3]),
    (np.complex128, np.float64, [3], [3, 2]),
    (np.int64, np.complex128, [2, 2], [2]),
], ids=str)
def test_bitcast(src, dst, in_shape, out_shape):
    n = int(np.prod(in_shape))
    raw = rng(5).integers(0, 256, n * np.dtype(src).itemsize, dtype=np.uint8)
    x = raw.view(src).reshape(in_shape)
    if np.dtype(src).kind in "fc" or np.dtype(dst).kind in "fc":
        # NaN payloads compare equal under equal_nan; keep the test about bits, not NaN signalling.
        real = {np.complex64: np.float32, np.complex128: np.float64}.get(src, src)
        x = _fill(in_shape, real, [1.5, -2.0], seed=4)
        if np.dtype(src).kind == "c":
            x = (x + 1j * x[::-1]).astype(src)
    mb = single_op_model("BITCAST", [("x", in_shape, src)], [("y", out_shape, dst)])
    check(mb, [x])


# ---- BITWISE_XOR / RIGHT_SHIFT

BIT_TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32]
BROADCAST = [((2, 3), (2, 3)), ((), (4,)), ((2, 1, 3), (4, 1)), ((1, 2, 1, 2, 3), (3,)), ((), ())]


@pytest.mark.parametrize("sa,sb", BROADCAST, ids=str)
@pytest.mark.parametrize("dtype", BIT_TYPES, ids=lambda d: np.dtype(d).name)
def test_bitwise_xor(dtype, sa, sb):
    info = np.iinfo(dtype)
    a = _fill(sa, dtype, [info.min, info.max, 0, 5], seed=1)
    b = _fill(sb, dtype, [info.max, info.min, 7, 5], seed=2)
    out = np.broadcast_shapes(sa, sb)
    mb = single_op_model("BITWISE_XOR", [("a", list(sa), dtype), ("b", list(sb), dtype)],
                         [("o", list(out), dtype)])
    check(mb, [a, b])


@pytest.mark.parametrize("sa,sb", BROADCAST, ids=str)
@pytest.mark.parametrize("dtype", BIT_TYPES, ids=lambda d: np.dtype(d).name)
def test_right_shift(dtype, sa, sb):
    info = np.iinfo(dtype)
    bits = np.dtype(dtype).itemsize * 8
    a = _fill(sa, dtype, [info.min, info.max, -1 if info.min else 1, 1000 % info.max, info.min, 77],
              seed=1)
    shifts = [bits - 1, bits, bits + 3, 0, -1 if info.min else 100, 3]
    b = np.asarray(rng(2).integers(0, bits + 2, int(np.prod(sb)))).astype(dtype)
    b[:len(shifts)] = np.array(shifts)[:b.size].astype(dtype)
    b = b.reshape(sb)
    out = np.broadcast_shapes(sa, sb)
    mb = single_op_model("RIGHT_SHIFT", [("a", list(sa), dtype), ("b", list(sb), dtype)],
                         [("o", list(out), dtype)])
    check(mb, [a, b])


# ---- REAL / IMAG / COMPLEX_ABS

@pytest.mark.parametrize("op", ["REAL", "IMAG", "COMPLEX_ABS"])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_complex_parts(op, dtype, shape):
    real_t = np.float32 if dtype == np.complex64 else np.float64
    re = _fill(shape, real_t, [0.0, 3.0, -1e30, np.inf, np.nan, 1e-30], seed=1)
    im = _fill(shape, real_t, [-0.0, 4.0, 1e30, 1.0, 2.0, 1e-30], seed=2)
    x = (re + 1j * im).astype(dtype)
    mb = single_op_model(op, [("x", list(shape), dtype)], [("y", list(shape), real_t)])
    check(mb, [x])


# ---- SELECT / SELECT_V2

SELECT_TYPES = [np.float32, np.int32, np.int64, np.bool_, np.int8, np.uint8, np.int16, np.float16,
                np.float64, np.uint16, np.uint32, np.uint64, np.complex64]


def _select_case(op, sc, sx, sy, so, dtype, seed=0):
    c = _fill(sc, np.bool_, [True, False], seed=seed)
    plain = np.dtype(dtype) in (np.bool_, np.uint64)    # (CAST has no uint64: no edge values for it)
    x = _fill(sx, dtype, [], seed=seed + 1) if plain else _cast_source(dtype, sx, seed=seed + 1)
    y = _fill(sy, dtype, [], seed=seed + 2) if plain else _cast_source(dtype, sy, seed=seed + 2)
    mb = single_op_model(op, [("c", list(sc), np.bool_), ("x", list(sx), dtype), ("y", list(sy), dtype)],
                         [("o", list(so), dtype)])
    check(mb, [c, x, y])


@pytest.mark.parametrize("dtype", SELECT_TYPES, ids=lambda d: np.dtype(d).name)
def test_select_dtypes(dtype):
    for op in ("SELECT", "SELECT_V2"):
        _select_case(op, (2, 3), (2, 3), (2, 3), (2, 3), dtype)


@pytest.mark.parametrize("sc,sx", [((), ()), ((), (3, 4)), ((3,), (3, 4)), ((2,), (2, 1, 3, 2)),
                                   ((4,), (4,)), ((2, 5), (2, 5)), ((1, 2, 1, 2, 3), (1, 2, 1, 2, 3))],
                         ids=str)
def test_select_v1_shapes(sc, sx):
    _select_case("SELECT", sc, sx, sx, sx, np.float32)


@pytest.mark.parametrize("sc,sx,sy", [
    ((), (3, 4), (3, 4)), ((4,), (3, 4), (3, 4)), ((3, 1), (1, 4), (3, 4)), ((3, 4), (), ()),
    ((2, 1, 3), (4, 1), (1,)), ((1, 2, 1, 2, 3), (2, 1, 3), (3,)), ((), (), ()),
    ((1,), (), (1, 1)),    # every operand holds one element: LiteRT keeps the declared output shape
], ids=str)
def test_select_v2_broadcast(sc, sx, sy):
    so = np.broadcast_shapes(sc, sx, sy)
    _select_case("SELECT_V2", sc, sx, sy, so, np.float32)
    _select_case("SELECT_V2", sc, sx, sy, so, np.int32, seed=3)


# ---- unsupported types are prepare-time errors

@pytest.mark.parametrize("op,dtype", [("EXP", np.int32), ("ABS", object), ("ABS", np.int8), ("SIGN", np.float16),
                                      ("LOGICAL_NOT", np.int32), ("ZEROS_LIKE", np.complex64)])
def test_unsupported_type_is_prepare_error(op, dtype):
    # (numpy would compute a float64 EXP of int32, fail on strings at run time, ...; LiteRT rejects them)
    mb = single_op_model(op, [("x", [3], dtype)], [("y", [3], dtype)])
    name = "string" if dtype is object else np.dtype(dtype).name
    with pytest.raises(onert_py.PrepareError, match=f"has type {name}, not supported"):
        onert_py.infer.session(mb.to_bytes("tflite"))


def test_mismatched_types_are_prepare_errors():
    cases = [("EXP", [("x", [3], np.float32)], [("y", [3], np.float16)], "differs from input type"),
             ("ATAN2", [("a", [3], np.float32), ("b", [3], np.float64)], [("y", [3], np.float32)],
              r"input 1 \('b'\) has type float64, input 0 has float32"),
             ("SELECT_V2", [("c", [3], np.bool_), ("a", [3], np.int32), ("b", [3], np.int64)],
              [("y", [3], np.int32)], r"input 2 \('b'\) has type int64, input 1 has int32"),
             ("SELECT_V2", [("c", [3], np.int32), ("a", [3], np.int32), ("b", [3], np.int32)],
              [("y", [3], np.int32)], "condition must be bool")]
    for op, ins, outs, msg in cases:
        with pytest.raises(onert_py.PrepareError, match=msg):
            onert_py.infer.session(single_op_model(op, ins, outs).to_bytes("tflite"))


@pytest.mark.parametrize("op", ["ATAN2", "ADD", "ADD_N"])
def test_omitted_operand_is_a_prepare_error(op):
    # an operand given as -1 (omitted) is named at prepare time, not a crash in the type check or the run
    mb = single_op_model(op, [("a", [3], np.float32), None], [("y", [3], np.float32)])
    with pytest.raises(onert_py.PrepareError, match="input 1 is missing"):
        onert_py.infer.session(mb.to_bytes("tflite"))
