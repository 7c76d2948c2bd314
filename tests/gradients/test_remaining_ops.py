"""Gradients of the less common ops: DYNAMIC_UPDATE_SLICE, UNSORTED_SEGMENT_*, MATRIX_DIAG,
MATRIX_SET_DIAG, SPARSE_TO_DENSE (indexing.py, array.py), INSTANCE_NORM, RMS_NORM, ROPE (circle.py),
LOCAL_RESPONSE_NORMALIZATION (image.py) and FAKE_QUANT (misc.py), against central finite differences;
ties and edges against TensorFlow's conventions."""
import numpy as np
import pytest
from helpers import check_gradients, rng, single_op_model
from helpers import distinct_f32 as distinct, rand_f32 as rand

import onert_py

F32 = np.float32
I32 = np.int32



def grads(mb, inputs, cotangents=None, wrt=None):
    _, g = onert_py.infer.session(mb.to_bytes("tflite")).gradients(inputs, cotangents, wrt)
    return g


# ----------------------------------------------------------------------------------- DYNAMIC_UPDATE_SLICE

@pytest.mark.parametrize("start", [[1, 2], [0, 0], [3, 4], [-2, 9]])   # the last two are clamped
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_dynamic_update_slice(start, dtype):
    m = single_op_model("DYNAMIC_UPDATE_SLICE", [("x", [4, 5], F32), ("u", [2, 3], F32),
                                                 ("const", np.array(start, dtype))], [("y", [4, 5], F32)])
    check_gradients(m, [rand(4, 5), rand(2, 3, seed=1)])


def test_dynamic_update_slice_runtime_start():
    # start indices given at run time (an integer input: no gradient of its own)
    m = single_op_model("DYNAMIC_UPDATE_SLICE", [("x", [3, 4, 2], F32), ("u", [2, 2, 2], F32), ("s", [3], I32)],
                        [("y", [3, 4, 2], F32)])
    x, u, s = rand(3, 4, 2), rand(2, 2, 2, seed=1), np.array([2, 1, 0], I32)
    g = check_gradients(m, [x, u, s], wrt=["x", "u"])
    d = rng(5).normal(size=(3, 4, 2)).astype(F32)
    g = grads(m, [x, u, s], [d])
    want = d.copy()
    want[1:3, 1:3] = 0
    np.testing.assert_array_equal(g["x"], want)
    np.testing.assert_array_equal(g["u"], d[1:3, 1:3])       # start clamped to [1, 1, 0]
    assert list(g) == ["x", "u"]                              # the integer start takes none


# ----------------------------------------------------------------------------------- unsorted segments

SEGMENT_CASES = [
    # (data shape, ids, num_segments)
    ((5, 3), [0, 2, -1, 0, 1], 3),
    ((6,), [1, 1, 3, 0, -1, 3], 5),              # an empty segment (2) and a dropped row
    ((2, 3, 2), [[0, 1, 1], [2, -1, 0]], 3),     # ids over two leading dims
]


def segment_model(kind, shape, ids, n):
    ids = np.array(ids, I32)
    out = [n] + list(shape[ids.ndim:])
    return single_op_model(f"UNSORTED_SEGMENT_{kind}", [("x", list(shape), F32), ("const", ids),
                                                        ("const", np.array([n], I32))], [("y", out, F32)])


def _no_empty_segment(case):
    _, ids, n = case
    return not set(range(n)) - set(np.ravel(ids).tolist())


# an empty segment's MAX / MIN is the type's lowest / highest value: finite differences cannot see past it
@pytest.mark.parametrize("kind,shape,ids,n", [("SUM",) + c for c in SEGMENT_CASES] +
                         [(k,) + c for k in ("MAX", "MIN") for c in SEGMENT_CASES if _no_empty_segment(c)])
def test_unsorted_segment(kind, shape, ids, n):
    check_gradients(segment_model(kind, shape, ids, n), [distinct(*shape)])


@pytest.mark.parametrize("kind", ["MAX", "MIN"])
def test_unsorted_segment_max_min_empty_segments(kind):
    # segment 0 (where dropped rows are gathered from) and 2 are empty: nothing flows, and nothing is nan
    m = segment_model(kind, (5, 2), [1, -1, 3, 1, -2], 4)
    d = rand(4, 2, seed=3)
    x = distinct(5, 2)
    g = grads(m, [x], [d])["x"]
    pick = (lambda a, b: a >= b) if kind == "MAX" else (lambda a, b: a <= b)
    want = np.zeros((5, 2), F32)
    want[2] = d[3]
    for c in range(2):
        r = 0 if pick(x[0, c], x[3, c]) else 3
        want[r, c] = d[1, c]
    np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("shape,ids,n", SEGMENT_CASES)
def test_unsorted_segment_prod(shape, ids, n):
    x = rng(1).uniform(0.5, 1.5, size=shape).astype(F32) * rng(2).choice([-1, 1], size=shape).astype(F32)
    check_gradients(segment_model("PROD", shape, ids, n), [x])


def test_unsorted_segment_sum_negative_ids_get_nothing():
    m = segment_model("SUM", (5, 2), [0, -1, 1, -3, 0], 2)
    d = rand(2, 2, seed=3)
    g = grads(m, [rand(5, 2)], [d])["x"]
    np.testing.assert_array_equal(g, [d[0], [0, 0], d[1], [0, 0], d[0]])


@pytest.mark.parametrize("kind", ["MAX", "MIN"])
def test_unsorted_segment_max_min_ties_split(kind):
    # TensorFlow: the elements equal to the segment's result share its gradient equally
    x = np.array([1.0, 3.0, 3.0, -2.0, -2.0, 0.5, 3.0], F32)
    ids = [0, 0, 0, 1, 1, 1, -1]
    m = segment_model(kind, (7,), ids, 2)
    d = np.array([2.0, 4.0], F32)
    g = grads(m, [x], [d])["x"]
    want = [0, 1, 1, 0, 0, 4, 0] if kind == "MAX" else [2, 0, 0, 2, 2, 0, 0]
    np.testing.assert_allclose(g, want)


def test_unsorted_segment_prod_zeros():
    # one zero in a segment: only it gets a gradient (the product of the others); two: none
    x = np.array([0.0, 2.0, 3.0, 0.0, 0.0, 5.0, 1.5, 4.0], F32)
    ids = [0, 0, 0, 1, 1, 1, 2, -1]
    m = segment_model("PROD", (8,), ids, 3)
    g = grads(m, [x], [np.ones(3, F32)])["x"]
    np.testing.assert_allclose(g, [6.0, 0, 0, 0, 0, 0, 1.0, 0])
    check_gradients(m, [x])


def test_unsorted_segment_ids_at_run_time():
    m = single_op_model("UNSORTED_SEGMENT_MAX", [("x", [4, 2], F32), ("ids", [4], I32), ("const", np.array([2], I32))],
                        [("y", [2, 2], F32)])
    x, ids = distinct(4, 2), np.array([1, 0, -1, 1], I32)
    g = check_gradients(m, [x, ids], wrt=["x"])
    assert g["x"].shape == (4, 2)
    assert list(grads(m, [x, ids])) == ["x"]


# ----------------------------------------------------------------------------------- matrix diagonals

@pytest.mark.parametrize("shape", [(3,), (2, 4), (2, 1, 3)])
def test_matrix_diag(shape):
    m = single_op_model("MATRIX_DIAG", [("x", list(shape), F32)], [("y", list(shape) + [shape[-1]], F32)])
    check_gradients(m, [rand(*shape)])


@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 4), (2, 4, 3), (1, 2, 5, 2)])
def test_matrix_set_diag(shape):
    k = min(shape[-2:])
    ds = list(shape[:-2]) + [k]
    m = single_op_model("MATRIX_SET_DIAG", [("x", list(shape), F32), ("d", ds, F32)], [("y", list(shape), F32)])
    g = check_gradients(m, [rand(*shape), rand(*ds, seed=1)])
    assert g["d"].shape == tuple(ds)


def test_matrix_diag_second_order_kernel():
    # the diagonal part (the gradient op) differentiates too: MATRIX_SET_DIAG of its cotangent into zeros
    m = single_op_model("OnertPyMatrixDiagPart", [("x", [2, 3, 4], F32)], [("y", [2, 3], F32)],
                        custom_code="OnertPyMatrixDiagPart")
    g = check_gradients(m, [rand(2, 3, 4)])
    assert g["x"].shape == (2, 3, 4)


# ----------------------------------------------------------------------------------- SPARSE_TO_DENSE

@pytest.mark.parametrize("scalar_values", [False, True])
def test_sparse_to_dense(scalar_values):
    idx = np.array([[0, 1], [2, 3], [1, 0]], I32)
    vs = [] if scalar_values else [3]
    m = single_op_model("SPARSE_TO_DENSE", [("const", idx), ("const", np.array([3, 4], I32)), ("v", vs, F32),
                                            ("dv", [], F32)], [("y", [3, 4], F32)])
    v = rand(*vs) if vs else np.array(1.5, F32)
    g = check_gradients(m, [v, np.array(-0.5, F32)])
    assert g["v"].shape == tuple(vs) and g["dv"].shape == ()


@pytest.mark.parametrize("idx,shape,vals", [
    (np.array([0, 3, 1], I32), [5], [3]),           # indices into a vector
    (np.array([1, 2], I32), [3, 4], [1]),            # one index, given as a vector
    (np.array(2, I32), [4], []),                     # one index, a scalar
])
def test_sparse_to_dense_index_forms(idx, shape, vals):
    m = single_op_model("SPARSE_TO_DENSE", [("const", idx), ("const", np.array(shape, I32)), ("v", vals, F32),
                                            ("dv", [], F32)], [("y", shape, F32)])
    check_gradients(m, [rand(*vals) if vals else np.array(0.7, F32), np.array(0.25, F32)])


def test_sparse_to_dense_runtime_indices():
    m = single_op_model("SPARSE_TO_DENSE", [("i", [2, 2], I32), ("const", np.array([2, 3], I32)), ("v", [2], F32),
                                            ("const", np.array(0.0, F32))], [("y", [2, 3], F32)])
    i = np.array([[1, 2], [0, 0]], I32)
    d = rand(2, 3, seed=4)
    g = grads(m, [i, rand(2)], [d])
    np.testing.assert_array_equal(g["v"], [d[1, 2], d[0, 0]])
    assert list(g) == ["v"]


# ----------------------------------------------------------------------------------- INSTANCE_NORM, RMS_NORM

@pytest.mark.parametrize("shape,c_params", [((2, 3, 4, 3), 3), ((2, 3, 4, 3), 1), ((2, 5, 2), 2), ((1, 2, 2, 2, 1), 1)])
@pytest.mark.parametrize("eps", [1e-3, 0.0])
def test_instance_norm(shape, c_params, eps):
    x = rng(1).normal(1.0, 2.0, size=shape).astype(F32)
    gamma = rng(2).uniform(0.5, 2, size=[c_params]).astype(F32)
    beta = rng(3).uniform(-1, 1, size=[c_params]).astype(F32)
    m = single_op_model("INSTANCE_NORM", [("x", list(shape), F32), ("g", [c_params], F32), ("b", [c_params], F32)],
                        [("y", list(shape), F32)], epsilon=eps, fused_activation_function=0)
    check_gradients(m, [x, gamma, beta])


def test_instance_norm_weights_and_activation():
    # gamma and beta are the op's trainable weights; a fused TANH is split off by the engine
    x = rng(1).normal(size=(2, 3, 3, 2)).astype(F32)
    m = single_op_model("INSTANCE_NORM", [("x", [2, 3, 3, 2], F32),
                                          ("const", np.array([0.7, 1.3], F32)), ("const", np.array([0.1, -0.2], F32))],
                        [("y", [2, 3, 3, 2], F32)], epsilon=1e-3, fused_activation_function=4)
    g = check_gradients(m, [x], wrt="weights")
    assert sorted(v.shape for v in g.values()) == [(2,), (2,)]
    check_gradients(m, [x])


@pytest.mark.parametrize("shape,c_gamma", [((2, 3, 4), 4), ((2, 3, 4), 1), ((5,), 5), ((2, 2, 3, 6), 6)])
@pytest.mark.parametrize("eps", [1e-6, 0.5])
def test_rms_norm(shape, c_gamma, eps):
    m = single_op_model("RMS_NORM", [("x", list(shape), F32), ("g", [c_gamma], F32)], [("y", list(shape), F32)],
                        epsilon=eps)
    check_gradients(m, [rand(*shape), rng(2).uniform(0.5, 2, size=[c_gamma]).astype(F32)])


def test_rms_norm_weights():
    m = single_op_model("RMS_NORM", [("x", [3, 4], F32), ("const", np.array([0.5, 1.0, 1.5, 2.0], F32))],
                        [("y", [3, 4], F32)], epsilon=1e-5)
    g = check_gradients(m, [rand(3, 4)], wrt="weights")
    assert [v.shape for v in g.values()] == [(4,)]


# ----------------------------------------------------------------------------------- ROPE

@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("x_shape,t_shape", [((2, 3, 8), (3, 8)), ((1, 2, 3, 6), (1, 1, 3, 6)), ((4,), (4,))])
def test_rope(mode, x_shape, t_shape):
    ang = rng(7).uniform(-3, 3, size=t_shape)
    m = single_op_model("ROPE", [("x", list(x_shape), F32), ("s", list(t_shape), F32), ("c", list(t_shape), F32)],
                        [("y", list(x_shape), F32)], mode=mode)
    g = check_gradients(m, [rand(*x_shape), np.sin(ang).astype(F32), np.cos(ang).astype(F32)])
    assert g["s"].shape == t_shape and g["c"].shape == t_shape


@pytest.mark.parametrize("mode", [0, 1])
def test_rope_constant_tables(mode):
    a = rng(8).uniform(-3, 3, size=(3, 2))
    ang = np.concatenate([a, a], axis=-1) if mode == 0 else np.repeat(a, 2, axis=-1)   # one angle per pair
    m = single_op_model("ROPE", [("x", [2, 3, 4], F32), ("const", np.sin(ang).astype(F32)),
                                 ("const", np.cos(ang).astype(F32))], [("y", [2, 3, 4], F32)], mode=mode)
    d = rand(2, 3, 4, seed=9)
    g = check_gradients(m, [rand(2, 3, 4)])["x"]
    # a rotation: its gradient is the inverse rotation of the cotangent (the norm per pair is kept)
    assert g.shape == (2, 3, 4)
    gd = grads(m, [rand(2, 3, 4)], [d])["x"]
    np.testing.assert_allclose(np.sum(gd * gd), np.sum(d * d), rtol=1e-5)


# ----------------------------------------------------------------------------------- LRN

@pytest.mark.parametrize("radius,bias,alpha,beta", [(2, 1.0, 0.5, 0.75), (0, 2.0, 1.0, 0.5), (9, 1.0, 0.2, 1.0),
                                                    (1, 0.5, 2.0, 0.3)])
def test_local_response_normalization(radius, bias, alpha, beta):
    m = single_op_model("LOCAL_RESPONSE_NORMALIZATION", [("x", [1, 2, 2, 6], F32)], [("y", [1, 2, 2, 6], F32)],
                        radius=radius, bias=bias, alpha=alpha, beta=beta)
    check_gradients(m, [rand(1, 2, 2, 6)])


# ----------------------------------------------------------------------------------- FAKE_QUANT

@pytest.mark.parametrize("lo,hi,bits", [(-1.0, 1.0, 8), (0.0, 6.0, 8), (-3.3, 2.1, 4), (0.5, 3.0, 8)])
def test_fake_quant_straight_through(lo, hi, bits):
    # TensorFlow's FakeQuantWithMinMaxArgsGradient: dy inside the nudged range (ends included), 0 outside;
    # not the finite difference of a step function
    from onert_py.backends.cpu.misc import _nudged_range
    nmin, nmax, _ = _nudged_range(F32(lo), F32(hi), bits)
    x = np.concatenate([(rng(1).normal(size=40) * 3).astype(F32), np.array([nmin, nmax], F32),
                        np.nextafter(np.array([nmin, nmax], F32), np.array([-np.inf, np.inf], F32))])
    m = single_op_model("FAKE_QUANT", [("x", [44], F32)], [("y", [44], F32)], min=lo, max=hi, num_bits=bits)
    d = rng(2).normal(size=44).astype(F32)
    for fmt in ("tflite", "circle"):
        _, g = onert_py.infer.session(m.to_bytes(fmt)).gradients([x], [d])
        np.testing.assert_array_equal(g["x"], np.where((x >= nmin) & (x <= nmax), d, 0))
    assert nmin <= x[-4] and x[-3] <= nmax and x[-2] < nmin and x[-1] > nmax


# ----------------------------------------------------------------------------------- dynamic shapes

# A dynamic dim stays -1 in the forward shapes the rules see, so they take their run-time paths.

def test_dynamic_dims():
    x = rand(3, 4, 2)
    m = single_op_model("INSTANCE_NORM", [("x", [-1, 4, 2], F32), ("const", np.array([1.5, 0.5], F32)),
                                          ("const", np.array([0.1, 0.2], F32))], [("y", [-1, 4, 2], F32)],
                        epsilon=1e-3)
    check_gradients(m, [x])
    check_gradients(single_op_model("RMS_NORM", [("x", [-1, 2], F32), ("const", np.array([1.5, 0.5], F32))],
                                    [("y", [-1, 2], F32)], epsilon=1e-3), [rand(3, 2)])
    check_gradients(single_op_model("LOCAL_RESPONSE_NORMALIZATION", [("x", [-1, 2, 1, 4], F32)],
                                    [("y", [-1, 2, 1, 4], F32)], radius=1, bias=1.0, alpha=0.5, beta=0.5),
                    [rand(2, 2, 1, 4)])
    check_gradients(single_op_model("ROPE", [("x", [-1, 4], F32), ("const", np.sin([0.3, 1.0, 0.3, 1.0]).astype(F32)),
                                             ("const", np.cos([0.3, 1.0, 0.3, 1.0]).astype(F32))],
                                    [("y", [-1, 4], F32)], mode=0), [rand(3, 4)])
    check_gradients(single_op_model("DYNAMIC_UPDATE_SLICE", [("x", [-1, 4], F32), ("u", [-1, 2], F32),
                                                             ("const", np.array([1, 3], I32))], [("y", [-1, 4], F32)]),
                    [rand(3, 4), rand(2, 2, seed=1)])
    check_gradients(single_op_model("UNSORTED_SEGMENT_MIN", [("x", [4, -1], F32), ("const", np.array([1, 0, 1, -1], I32)),
                                                             ("const", np.array([2], I32))], [("y", [2, -1], F32)]),
                    [distinct(4, 3)])
    check_gradients(single_op_model("MATRIX_SET_DIAG", [("x", [-1, 2, 3], F32), ("d", [-1, 2], F32)],
                                    [("y", [-1, 2, 3], F32)]), [rand(2, 2, 3), rand(2, 2, seed=1)])
    check_gradients(single_op_model("MATRIX_DIAG", [("x", [-1, 3], F32)], [("y", [-1, 3, 3], F32)]), [rand(2, 3)])
