"""Ops that move quantized values (reshapes, slices, gathers, pads, joins) against LiteRT's builtin
kernels, bit for bit, with zero points away from 0 so that a pad or a join that ignored them shows."""
import numpy as np
import pytest

import onert_py
from helpers import check_builtin, int32_const, rng, run_litert_builtin, run_onert, single_op_model

R = rng(11)
TYPES = [np.int8, np.uint8, np.int16]


def _q(dtype, scale=0.05, zp=3):
    """Parameters valid for the type: int16 is symmetric (zero point 0); uint8's zero point is shifted."""
    if dtype == np.int16:
        return (scale, 0)
    return (scale, zp + (128 if dtype == np.uint8 else 0))


def _x(shape, dtype):
    info = np.iinfo(dtype)
    return R.integers(info.min, int(info.max) + 1, size=shape).astype(dtype)


CASES = [
    ("RESHAPE", [2, 3, 4], [int32_const([4, 6])], [4, 6], 1, {}),
    ("SQUEEZE", [2, 1, 4], [], [2, 4], 1, {"squeeze_dims": [1]}),
    ("EXPAND_DIMS", [2, 4], [int32_const(1)], [2, 1, 4], 1, {}),
    ("TRANSPOSE", [2, 3, 4], [int32_const([2, 0, 1])], [4, 2, 3], 1, {}),
    ("SLICE", [3, 4], [int32_const([1, 1]), int32_const([2, 2])], [2, 2], 1, {}),
    ("STRIDED_SLICE", [4, 6], [int32_const([0, 1]), int32_const([4, 6]), int32_const([2, 2])], [2, 3], 1,
     {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 0}),
    ("GATHER", [5, 3], [int32_const([4, 0, 2])], [3, 3], 1, {"axis": 0, "batch_dims": 0}),
    ("GATHER_ND", [4, 3], [int32_const([[1], [3]])], [2, 3], 1, {}),
    ("SPLIT", [4, 6], [], [4, 3], 2, {"num_splits": 2}),
    ("UNPACK", [3, 4], [], [4], 3, {"num": 3, "axis": 0}),
    ("TILE", [2, 3], [int32_const([2, 1])], [4, 3], 1, {}),
    ("REVERSE_V2", [3, 4], [int32_const([1])], [3, 4], 1, {}),
    ("SPACE_TO_DEPTH", [1, 4, 4, 2], [], [1, 2, 2, 8], 1, {"block_size": 2}),
    ("DEPTH_TO_SPACE", [1, 2, 2, 8], [], [1, 4, 4, 2], 1, {"block_size": 2}),
    ("BATCH_TO_SPACE_ND", [4, 2, 2, 1], [int32_const([2, 2]), int32_const([[0, 0], [0, 0]])], [1, 4, 4, 1], 1, {}),
    ("SPACE_TO_BATCH_ND", [1, 3, 4, 1], [int32_const([2, 2]), int32_const([[1, 0], [0, 0]])], [4, 2, 2, 1], 1, {}),
    ("PAD", [2, 3], [int32_const([[1, 0], [0, 2]])], [3, 5], 1, {}),
    ("MIRROR_PAD", [3, 3], [int32_const([[1, 1], [0, 2]])], [5, 5], 1, {"mode": 0}),
    ("MIRROR_PAD", [2, 3, 2], [int32_const([[2, 1], [0, 3], [1, 0]])], [5, 6, 3], 1, {"mode": 1}),
    ("SPLIT_V", [4, 6], [int32_const([2, 4]), int32_const(1)], [4, 2], 1, {"num_splits": 2}),
    ("SPACE_TO_BATCH_ND", [2, 3, 5, 2], [int32_const([2, 3]), int32_const([[0, 1], [2, 2]])], [12, 2, 3, 2], 1, {}),
    ("BATCH_TO_SPACE_ND", [12, 2, 3, 2], [int32_const([2, 3]), int32_const([[0, 1], [1, 2]])], [2, 3, 6, 2], 1, {}),
]


@pytest.mark.parametrize("dtype", TYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op,shape,consts,out_shape,n_out,options", CASES, ids=[c[0] for c in CASES])
def test_moves_quantized_values_as_litert(op, shape, consts, out_shape, n_out, options, dtype):
    if dtype == np.int16 and op in ("SPACE_TO_DEPTH", "DEPTH_TO_SPACE"):
        q = _q(dtype)
        mb = single_op_model(op, [("x", shape, dtype, q)], [("y", out_shape, dtype, q)], **options)
        with pytest.raises(onert_py.UnsupportedOpError, match=rf"{op} \(quantized int16\)"):   # LiteRT refuses it
            run_onert(mb, [_x(shape, dtype)])
        return
    check_builtin(_mover(op, shape, consts, out_shape, n_out, options, dtype, _q(dtype), _q(dtype)),
                  [_x(shape, dtype)])


def _mover(op, shape, consts, out_shape, n_out, options, dtype, q_in, q_out):
    """The one-op model of a CASES row, its input quantized with q_in and its outputs with q_out."""
    if op == "SPLIT_V":    # outputs of sizes 2 and 4
        return single_op_model(op, [("x", shape, dtype, q_in)] + consts,
                               [("y0", [4, 2], dtype, q_out), ("y1", [4, 4], dtype, q_out)], **options)
    ins = [("x", shape, dtype, q_in)] + consts
    if op == "SPLIT":      # SPLIT's axis is input 0
        ins = [int32_const(1), ("x", shape, dtype, q_in)]
    return single_op_model(op, ins, [(f"y{k}", out_shape, dtype, q_out) for k in range(n_out)], **options)


@pytest.mark.parametrize("dtype", TYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["CONCATENATION", "PACK"])
def test_joins_quantized_values_with_equal_parameters(op, dtype):
    q = _q(dtype)
    opts = {"axis": 1, "fused_activation_function": 0} if op == "CONCATENATION" else {"axis": 1, "values_count": 2}
    out = [2, 7] if op == "CONCATENATION" else [2, 2, 3]
    shapes = ([2, 3], [2, 4]) if op == "CONCATENATION" else ([2, 3], [2, 3])
    mb = single_op_model(op, [("a", shapes[0], dtype, q), ("b", shapes[1], dtype, q)], [("y", out, dtype, q)], **opts)
    check_builtin(mb, [_x(shapes[0], dtype), _x(shapes[1], dtype)])


@pytest.mark.parametrize("op", ["SHAPE", "RANK"])
def test_shape_of_a_quantized_tensor(op):
    out = [2] if op == "SHAPE" else []
    mb = single_op_model(op, [("x", [3, 5], np.int8, _q(np.int8))], [("y", out, np.int32)],
                         **({"out_type": 2} if op == "SHAPE" else {}))
    check_builtin(mb, [_x([3, 5], np.int8)])


def test_quantized_op_without_kernel_is_named_at_session_creation():
    """A quantized op onert-py has no quantized kernel for is refused up front, naming it."""
    q = _q(np.int8)
    mb = single_op_model("CUMSUM", [("x", [3], np.int8, q), int32_const(0)], [("y", [3], np.int8, q)],
                         exclusive=False, reverse=False)
    with pytest.raises(onert_py.UnsupportedOpError, match=r"CUMSUM \(quantized int8\) \(subgraph 0 operator 0\)"):
        onert_py.infer.session(mb.to_bytes("tflite"))


@pytest.mark.parametrize("dtype", TYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["CONCATENATION", "PACK"])
def test_joins_with_other_parameters_as_litert(op, dtype):
    """LiteRT refuses int8 CONCATENATION and any PACK whose inputs have other parameters than the output,
    rescales uint8 CONCATENATION inputs (in float32, rounding half away from zero) and copies int16 ones."""
    zp = 128 if dtype == np.uint8 else 0
    d = 0 if dtype == np.int16 else 1
    opts = {"axis": 1, "fused_activation_function": 0} if op == "CONCATENATION" else {"axis": 1, "values_count": 2}
    out = [3, 400] if op == "CONCATENATION" else [3, 2, 200]
    mb = single_op_model(op, [("a", [3, 200], dtype, (0.1, zp)), ("b", [3, 200], dtype, (0.0371, zp + 2 * d))],
                         [("y", out, dtype, (0.2, zp + d))], **opts)
    xs = [_x([3, 200], dtype), _x([3, 200], dtype)]
    if op == "PACK" or dtype == np.int8:
        with pytest.raises(onert_py.PrepareError, match="other quantization parameters than the output"):
            run_onert(mb, xs)
        with pytest.raises(RuntimeError, match="failed to prepare"):
            check_builtin(mb, xs)
        return
    check_builtin(mb, xs)


def _q2(dtype):
    """Parameters other than _q's: another scale, a zero point at the type's end (int16: 0)."""
    if dtype == np.int16:
        return (0.3, 0)
    return (0.3, -128 if dtype == np.int8 else 255)


@pytest.mark.parametrize("dtype", TYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("const_value", [None, "min", "max", 17])
def test_padv2_quantized_as_litert(dtype, const_value):
    """PADV2 pads with its constant's integer (which must have the output's parameters), or with the
    output's zero point; the input's integers are copied (its parameters may differ from the output's)."""
    info = np.iinfo(dtype)
    qi, qo = _q2(dtype), _q(dtype)
    consts = [int32_const([[1, 2], [0, 0], [3, 1]])]
    if const_value is not None:
        c = {"min": info.min, "max": info.max}.get(const_value, const_value)
        consts.append(("const", np.array(c, dtype), qo))
    mb = single_op_model("PADV2", [("x", [2, 3, 4], dtype, qi)] + consts, [("y", [5, 3, 8], dtype, qo)])
    check_builtin(mb, [_x([2, 3, 4], dtype)])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=lambda d: np.dtype(d).name)
def test_padv2_quantized_pad_value_with_other_parameters_is_refused(dtype):
    """LiteRT checks the constant's parameters against the output's (when it runs); onert-py at prepare."""
    q = _q(dtype)
    mb = single_op_model("PADV2", [("x", [2, 3], dtype, q), int32_const([[1, 0], [0, 2]]),
                                   ("const", np.array(5, dtype), (q[0] * 2, q[1]))], [("y", [3, 5], dtype, q)])
    x = _x([2, 3], dtype)
    with pytest.raises(onert_py.PrepareError, match="pad value's quantization .* differs from the output's"):
        run_onert(mb, [x])
    with pytest.raises(RuntimeError):
        check_builtin(mb, [x])


@pytest.mark.parametrize("dtype", TYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["GATHER", "SPLIT_V", "PAD", "EMBEDDING_LOOKUP"])
def test_copies_integers_to_other_parameters_as_litert(op, dtype):
    """LiteRT's GATHER, SPLIT_V, PAD and EMBEDDING_LOOKUP never compare the output's quantization with
    the input's: the integers are copied unchanged (PAD fills with the output's zero point)."""
    qi, qo = _q(dtype), _q2(dtype)
    if op == "GATHER":
        mb = single_op_model(op, [("x", [5, 3], dtype, qi), int32_const([4, 0, 2, 4])],
                             [("y", [4, 3], dtype, qo)], axis=0, batch_dims=0)
        xs = [_x([5, 3], dtype)]
    elif op == "SPLIT_V":
        mb = single_op_model(op, [("x", [3, 5], dtype, qi), int32_const([1, 4]), int32_const(-1)],
                             [("y0", [3, 1], dtype, qo), ("y1", [3, 4], dtype, qo)], num_splits=2)
        xs = [_x([3, 5], dtype)]
    elif op == "PAD":
        mb = single_op_model(op, [("x", [2, 3], dtype, qi), int32_const([[1, 1], [2, 0]])],
                             [("y", [4, 5], dtype, qo)])
        xs = [_x([2, 3], dtype)]
    else:
        mb = single_op_model(op, [("ids", [4], np.int32), ("const", _x([6, 2, 3], dtype), qi)],
                             [("y", [4, 2, 3], dtype, qo)])
        xs = [np.array([5, 0, 3, 5], np.int32)]
    check_builtin(mb, xs)


@pytest.mark.parametrize("dtype", TYPES, ids=lambda d: np.dtype(d).name)
def test_embedding_lookup_quantized_table_as_litert(dtype):
    q = _q(dtype)
    mb = single_op_model("EMBEDDING_LOOKUP", [("ids", [5], np.int32), ("table", [7, 4], dtype, q)],
                         [("y", [5, 4], dtype, q)])
    check_builtin(mb, [np.array([6, 0, 0, 3, 1], np.int32), _x([7, 4], dtype)])


def test_embedding_lookup_per_channel_table_to_int8_is_refused():
    table = ("const", _x([3, 4], np.int8), (np.array([0.1, 0.2, 0.3], np.float32), np.zeros(3, np.int64), 0))
    mb = single_op_model("EMBEDDING_LOOKUP", [("ids", [2], np.int32), table], [("y", [2, 4], np.int8, (0.1, 0))])
    ids = np.array([2, 0], np.int32)
    with pytest.raises(onert_py.PrepareError, match="per-channel quantized lookup table"):
        run_onert(mb, [ids])
    with pytest.raises(RuntimeError, match="failed to prepare"):
        check_builtin(mb, [ids])


@pytest.mark.parametrize("dtype", TYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op,shape,consts,out_shape,options", [
    ("MIRROR_PAD", [3, 3], [int32_const([[1, 1], [0, 2]])], [5, 5], {"mode": 0}),
    ("SPACE_TO_BATCH_ND", [1, 4, 4, 1], [int32_const([2, 2]), int32_const([[0, 0], [0, 0]])], [4, 2, 2, 1], {}),
    ("BATCH_TO_SPACE_ND", [4, 2, 2, 1], [int32_const([2, 2]), int32_const([[0, 0], [0, 0]])], [1, 4, 4, 1], {}),
], ids=["MIRROR_PAD", "SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND"])
def test_refuses_other_output_parameters_as_litert(op, shape, consts, out_shape, options, dtype):
    mb = single_op_model(op, [("x", shape, dtype, _q(dtype))] + consts, [("y", out_shape, dtype, _q2(dtype))],
                         **options)
    x = _x(shape, dtype)
    with pytest.raises(onert_py.PrepareError, match="differs from the input's"):
        run_onert(mb, [x])
    with pytest.raises(RuntimeError, match="failed to prepare"):
        check_builtin(mb, [x])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=lambda d: np.dtype(d).name)
def test_sparse_to_dense_quantized_as_litert(dtype):
    q = _q(dtype)
    info = np.iinfo(dtype)
    mb = single_op_model("SPARSE_TO_DENSE", [("idx", [3, 2], np.int32), int32_const([4, 5]), ("vals", [3], dtype, q),
                                             ("const", np.array(info.max, dtype), q)],
                         [("y", [4, 5], dtype, q)], validate_indices=False)
    check_builtin(mb, [np.array([[0, 1], [2, 4], [3, 0]], np.int32), _x([3], dtype)])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=lambda d: np.dtype(d).name)
def test_one_hot_quantized_as_litert(dtype):
    q = _q(dtype)
    info = np.iinfo(dtype)
    mb = single_op_model("ONE_HOT", [("idx", [2, 3], np.int32), int32_const(4), ("const", np.array(info.max, dtype), q),
                                     ("const", np.array(info.min, dtype), q)],
                         [("y", [2, 3, 4], dtype, q)], axis=-1)
    check_builtin(mb, [np.array([[0, 3, 5], [-1, 2, 1]], np.int32)])


@pytest.mark.parametrize("op,shape,consts,out_shape,n_out,options", CASES, ids=[c[0] for c in CASES])
def test_movers_with_other_output_parameters_as_litert(op, shape, consts, out_shape, n_out, options):
    """An output quantized differently from the input: LiteRT copies the integers for most movers and
    refuses some at prepare (EXPAND_DIMS, UNPACK, MIRROR_PAD, SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND, ...);
    onert-py does the same."""
    mb = _mover(op, shape, consts, out_shape, n_out, options, np.int8, (0.05, 3), (0.1, 1))
    x = _x(shape, np.int8)
    try:
        run_litert_builtin(mb, [x])
    except RuntimeError:
        with pytest.raises(onert_py.PrepareError, match="LiteRT requires equal ones"):
            run_onert(mb, [x])
        return
    check_builtin(mb, [x])
