"""BCQ_FULLY_CONNECTED and BCQ_GATHER against a dense numpy reference built from the documented layout.

Both ops exist only in Circle (negative op codes): LiteRT has no kernel for them and a TFL3 file cannot
name them, so every model here is written and run in the Circle encoding only. onert (the pip package)
loads them but has no kernel either ("Fail to find backend for BCQFullyConnected operation"), so there is
no runtime to compare with; the reference is the formula in docs/circle_ops.md:
W[r, h] = sum over row r's bit planes k of scale_k * (+1 if bit h of plane k is set else -1).
"""
import numpy as np
import pytest

from helpers import rng, run_onert, single_op_model
from onert_py import ExecutionError, PrepareError
from onert_py.loader import load_model

F32, I32 = np.float32, np.int32


def _pack(bits: np.ndarray, rng_for_padding=None) -> np.ndarray:
    """[planes, hidden] bools -> [planes, ceil(hidden/32)] int32; bit h is bit h % 32 of word h // 32.
    Written with explicit shifts (the kernel unpacks with np.unpackbits). Padding bits are random when a
    generator is given: the kernel must ignore them."""
    planes, hidden = bits.shape
    words = -(-hidden // 32)
    full = np.zeros((planes, words * 32), bool)
    full[:, :hidden] = bits
    if rng_for_padding is not None:
        full[:, hidden:] = rng_for_padding.integers(0, 2, (planes, words * 32 - hidden)).astype(bool)
    shifts = np.arange(32, dtype=np.uint64)
    packed = (full.reshape(planes, words, 32).astype(np.uint64) << shifts).sum(axis=-1)
    return packed.astype(np.uint32).view(I32)


def make_bcq(g, clusters, hidden):
    """Random BCQ codes for `clusters` [(qbits, size), ...]: dense float64 [rows, hidden], scales, binary,
    clusters.

    Layout: cluster after cluster, row after row, each row's qbits planes (scales and binary rows alike).
    """
    dense, scales, planes = [], [], []
    for q, n in clusters:
        alpha = g.uniform(0.05, 1.0, [n, q]).astype(F32)
        bits = g.integers(0, 2, [n, q, hidden]).astype(bool)
        dense.append(np.einsum("nk,nkh->nh", alpha.astype(np.float64), np.where(bits, 1.0, -1.0)))
        scales.append(alpha.reshape(-1))
        planes.append(bits.reshape(n * q, hidden))
    binary = _pack(np.concatenate(planes), g)
    return (np.concatenate(dense), np.concatenate(scales).astype(F32), binary,
            np.array(clusters, I32).reshape(-1, 2))


def fc_model(scales, binary, clusters, hidden, batch, bias=None, act=0, x_shape=None):
    rows = int(np.asarray(clusters)[:, 1].sum())
    return single_op_model(
        "BCQ_FULLY_CONNECTED",
        [("x", x_shape or [hidden, batch], F32), ("const", scales), ("const", binary),
         ("const", bias) if bias is not None else None, ("const", clusters)],
        [("o", [rows, batch if batch is not None else -1], F32)],
        weights_hidden_size=hidden, fused_activation_function=act)


def gather_model(scales, binary, clusters, hidden, idx_shape, out_shape, axis=0, idx_dtype=I32):
    return single_op_model(
        "BCQ_GATHER",
        [("const", scales), ("const", binary), ("idx", idx_shape, idx_dtype), ("const", clusters)],
        [("o", out_shape, F32)], input_hidden_size=hidden, axis=axis)


def _run(model, inputs):
    return run_onert(model, inputs, "circle")


CLUSTERS = [
    [(1, 4)],
    [(2, 3), (1, 5), (3, 2)],
    [(4, 6)],
    [(1, 2), (2, 0), (3, 3)],          # an empty cluster contributes no rows
]
HIDDEN = [1, 31, 32, 33, 70, 128]
ACTS = {0: lambda y: y, 1: lambda y: np.maximum(y, 0), 3: lambda y: np.clip(y, 0, 6)}


# ------------------------------------------------------------------ the documented layout, by hand

def test_bit_order_and_sign_by_hand():
    # One plane per row (cluster (1, 2)), hidden 35 -> two words per plane.
    # Row 0: word0 = 0b101 (h0, h2 set), word1 = 0b100 (h34 set); word1's bits 3..31 are padding.
    # Row 1: word0 = bit 31 only (h31 set; the int32 is negative), word1 = padding bits only.
    binary = np.array([[5, 4 | (1 << 20)], [-(2 ** 31), -8]], I32)
    scales = np.array([2.0, 0.5], F32)
    want = np.empty([2, 35], F32)
    want[0], want[1] = -2.0, -0.5
    want[0, [0, 2, 34]] = 2.0
    want[1, 31] = 0.5
    m = gather_model(scales, binary, np.array([[1, 2]], I32), 35, [2], [2, 35])
    (got,) = _run(m, [np.array([0, 1], I32)])
    np.testing.assert_array_equal(got, want)


def test_planes_of_a_row_are_consecutive_and_clusters_in_order():
    # Cluster (2, 1): row 0 = 1.0 * planes[0] + 0.25 * planes[1]; cluster (1, 1): row 1 = 3.0 * planes[2].
    binary = np.array([[0b01], [0b11], [0b10]], I32)
    scales = np.array([1.0, 0.25, 3.0], F32)
    want = np.array([[1.25, -0.75], [-3.0, 3.0]], F32)
    m = fc_model(scales, binary, np.array([[2, 1], [1, 1]], I32), 2, 2)
    x = np.array([[1.0, 0.0], [0.0, 1.0]], F32)        # identity input: the output is W itself
    (got,) = _run(m, [x])
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------ random codes vs dense numpy

@pytest.mark.parametrize("hidden", HIDDEN)
@pytest.mark.parametrize("clusters", CLUSTERS, ids=str)
def test_fully_connected(hidden, clusters):
    g = rng(40 + hidden)
    w, scales, binary, cl = make_bcq(g, clusters, hidden)
    rows, batch = w.shape[0], 3
    bias = g.normal(size=rows).astype(F32)
    x = g.normal(size=[hidden, batch]).astype(F32)
    x_before = x.copy()
    (got,) = _run(fc_model(scales, binary, cl, hidden, batch, bias=bias), [x])
    assert got.dtype == F32 and got.shape == (rows, batch)
    np.testing.assert_allclose(got, w @ x.astype(np.float64) + bias[:, None], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(x, x_before)


@pytest.mark.parametrize("act", sorted(ACTS))
def test_fully_connected_activation_without_bias(act):
    g = rng(50 + act)
    w, scales, binary, cl = make_bcq(g, [(2, 5), (3, 4)], 45)
    x = g.normal(size=[45, 2]).astype(F32)
    (got,) = _run(fc_model(scales, binary, cl, 45, 2, act=act), [x])
    np.testing.assert_allclose(got, ACTS[act](w @ x.astype(np.float64)), rtol=1e-5, atol=1e-5)


def test_fully_connected_dynamic_batch():
    g = rng(55)
    w, scales, binary, cl = make_bcq(g, [(3, 7)], 40)
    m = fc_model(scales, binary, cl, 40, None, x_shape=[40, -1])
    for batch in (1, 4):
        x = g.normal(size=[40, batch]).astype(F32)
        (got,) = _run(m, [x])
        np.testing.assert_allclose(got, w @ x.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_fully_connected_realistic_size():
    # Larger than the unit cases (512 x 1000 weights of 2-3 planes): exercises the vectorised decode.
    g = rng(56)
    w, scales, binary, cl = make_bcq(g, [(3, 300), (2, 212)], 1000)
    x = g.normal(size=[1000, 8]).astype(F32)
    (got,) = _run(fc_model(scales, binary, cl, 1000, 8), [x])
    np.testing.assert_allclose(got, w @ x.astype(np.float64), rtol=1e-4, atol=1e-3)


def test_fully_connected_decodes_in_row_blocks(monkeypatch):
    # The decoder bounds its temporaries by working on blocks of rows; make the blocks 3 rows so that
    # clusters of 5 and 7 rows are split across blocks.
    from onert_py.backends.cpu import circle
    monkeypatch.setattr(circle, "_DECODE_BLOCK", 3 * 33)
    g = rng(57)
    w, scales, binary, cl = make_bcq(g, [(2, 5), (1, 7), (3, 2)], 33)
    x = g.normal(size=[33, 2]).astype(F32)
    (got,) = _run(fc_model(scales, binary, cl, 33, 2), [x])
    np.testing.assert_allclose(got, w @ x.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_fully_connected_codes_given_at_run_time():
    # Scales and planes as model inputs (not constants) are decoded on every run.
    g = rng(58)
    w, scales, binary, cl = make_bcq(g, [(2, 3), (1, 2)], 40)
    m = single_op_model("BCQ_FULLY_CONNECTED",
                        [("x", [40, 2], F32), ("s", [8], F32), ("b", [8, 2], I32), None, ("const", cl)],
                        [("o", [5, 2], F32)], weights_hidden_size=40, fused_activation_function=0)
    x = g.normal(size=[40, 2]).astype(F32)
    (got,) = _run(m, [x, scales, binary])
    np.testing.assert_allclose(got, w @ x.astype(np.float64), rtol=1e-5, atol=1e-5)
    w2, scales2, binary2, _ = make_bcq(g, [(2, 3), (1, 2)], 40)
    (got,) = _run(m, [x, scales2, binary2])
    np.testing.assert_allclose(got, w2 @ x.astype(np.float64), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("hidden", [1, 33, 70])
@pytest.mark.parametrize("clusters", CLUSTERS[1:], ids=str)
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("idx_shape", [[5], [2, 3], []], ids=str)
def test_gather(hidden, clusters, axis, idx_shape):
    g = rng(60 + hidden)
    w, scales, binary, cl = make_bcq(g, clusters, hidden)
    limit = w.shape[axis]
    idx = g.integers(0, limit, idx_shape).astype(I32)
    want = np.take(w, idx, axis=axis)
    m = gather_model(scales, binary, cl, hidden, idx_shape, list(want.shape), axis=axis)
    (got,) = _run(m, [idx])
    assert got.dtype == F32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_gather_int64_indices_and_out_of_range():
    g = rng(70)
    w, scales, binary, cl = make_bcq(g, [(2, 4)], 20)
    m = gather_model(scales, binary, cl, 20, [3], [3, 20], idx_dtype=np.int64)
    (got,) = _run(m, [np.array([3, 0, 3], np.int64)])
    np.testing.assert_allclose(got, w[[3, 0, 3]], rtol=1e-6, atol=1e-6)
    with pytest.raises(ExecutionError, match="BCQ_GATHER index 4 out of range"):
        _run(m, [np.array([0, 4, 1], np.int64)])


# ------------------------------------------------------------------ the writer's Circle encoding

def test_writer_emits_bcq_ops_and_options_in_circle():
    g = rng(80)
    _, scales, binary, cl = make_bcq(g, [(2, 3)], 70)
    fc = fc_model(scales, binary, cl, 70, 2, act=1).to_bytes("circle")
    ga = gather_model(scales, binary, cl, 70, [4], [3, 4], axis=1).to_bytes("circle")
    for data, opcode, options in ((fc, "BCQ_FULLY_CONNECTED", {"weights_hidden_size": 70,
                                                               "fused_activation_function": 1}),
                                  (ga, "BCQ_GATHER", {"input_hidden_size": 70, "axis": 1})):
        assert data[4:8] == b"CIR0"
        (op,) = load_model(data).subgraphs[0].operations
        assert op.opcode == opcode
        assert {k: op.options[k] for k in options} == options


# ------------------------------------------------------------------ inconsistent models

def _fc_parts():
    _, scales, binary, cl = make_bcq(rng(90), [(2, 3)], 40)    # 6 planes of 2 words, 3 rows
    return scales, binary, cl


@pytest.mark.parametrize("case, message", [
    ("short scales",
     r"weights_scales has shape \[5\]; the clusters \[\[2, 3\]\] need sum\(qbits \* size\) = 6"),
    ("binary rows", r"weights_binary has shape \[5, 2\]; .* shape \[6, 2\]"),
    ("binary words", r"ceil\(weights_hidden_size=40 / 32\) = 2 words, shape \[6, 2\]"),
    ("clusters shape", r"weights_clusters must be an int32 \[n, 2\] tensor .* shape \[1, 3\]"),
    ("zero qbits", r"weights_clusters row 1 is \(qbits=0, size=1\): qbits must be >= 1"),
    ("no rows", r"give no rows"),
    ("hidden option", r"weights_hidden_size must be a positive number of columns, is 0"),
    ("input rows", r"input has shape \[39, 2\]: its first dimension must be weights_hidden_size \(40\)"),
    ("bias size", r"bias has shape \[4\], expected \[3\]"),
])
def test_fully_connected_prepare_errors(case, message):
    scales, binary, cl = _fc_parts()
    hidden, x_shape, bias = 40, None, None
    if case == "short scales":
        scales = scales[:5]
    elif case == "binary rows":
        binary = binary[:5]
    elif case == "binary words":
        binary = binary[:, :1]
    elif case == "clusters shape":
        cl = np.array([[2, 3, 0]], I32)
    elif case == "zero qbits":
        cl = np.array([[2, 3], [0, 1]], I32)
    elif case == "no rows":
        cl = np.array([[2, 0]], I32)
    elif case == "hidden option":
        hidden = 0
    elif case == "input rows":
        x_shape = [39, 2]
    elif case == "bias size":
        bias = np.zeros(4, F32)
    m = fc_model(scales, binary, cl, hidden, 2, bias=bias, x_shape=x_shape)
    with pytest.raises(PrepareError, match=message):
        _run(m, [np.zeros(x_shape or [40, 2], F32)])


def test_fully_connected_clusters_must_be_constant():
    scales, binary, cl = _fc_parts()
    m = single_op_model("BCQ_FULLY_CONNECTED",
                        [("x", [40, 2], F32), ("const", scales), ("const", binary), None, ("c", [1, 2], I32)],
                        [("o", [3, 2], F32)], weights_hidden_size=40, fused_activation_function=0)
    with pytest.raises(PrepareError, match=r"weights_clusters \(input 4\) must be a constant tensor"):
        _run(m, [np.zeros([40, 2], F32), cl])


@pytest.mark.parametrize("case, message", [
    ("axis", r"axis 2 is out of range"),
    ("float indices", r"indices must be integers"),
    ("scales", r"input_scales has shape \[7\]; the clusters \[\[2, 3\]\] need sum\(qbits \* size\) = 6"),
])
def test_gather_prepare_errors(case, message):
    scales, binary, cl = _fc_parts()
    axis, idx_dtype = 0, I32
    if case == "axis":
        axis = 2
    elif case == "float indices":
        idx_dtype = F32
    else:
        scales = np.concatenate([scales, scales[:1]])
    m = gather_model(scales, binary, cl, 40, [2], [2, 40], axis=axis, idx_dtype=idx_dtype)
    with pytest.raises(PrepareError, match=message):
        _run(m, [np.zeros([2], idx_dtype)])
