"""NON_MAX_SUPPRESSION_V4/V5, RANDOM_UNIFORM / RANDOM_STANDARD_NORMAL / MULTINOMIAL (bit-exact Philox),
HASHTABLE_LOOKUP and EMBEDDING_LOOKUP_SPARSE against LiteRT."""
import numpy as np
import pytest

import onert_py
from helpers import FIXED_DTYPES, assert_matches_litert, dtype_values, rng, run_litert, run_onert, single_op_model

R = rng(43)
F32 = np.float32


def _boxes(n, ties=False):
    c = R.uniform(0, 10, (n, 2))
    hw = R.uniform(0.5, 4, (n, 2))
    b = np.concatenate([c - hw / 2, c + hw / 2], axis=1)
    flip = R.integers(0, 2, n).astype(bool)             # some boxes given with swapped corners
    b[flip] = b[flip][:, [2, 3, 0, 1]]
    s = R.integers(0, 4, n) / 4.0 if ties else R.uniform(0, 1, n)
    return b.astype(F32), s.astype(F32)


def _nms_model(n, max_out, soft, const_max=True):
    specs = [("boxes", [n, 4], F32), ("scores", [n], F32),
             ("const", np.array(max_out, np.int32)) if const_max else ("m", [], np.int32),
             ("iou", [], F32), ("st", [], F32)]
    outs = [("idx", [max_out], np.int32)]
    if soft:
        specs.append(("sigma", [], F32))
        outs.append(("sc", [max_out], F32))
    outs.append(("num", [], np.int32))
    return single_op_model("NON_MAX_SUPPRESSION_V5" if soft else "NON_MAX_SUPPRESSION_V4", specs, outs)


@pytest.mark.parametrize("n,max_out,iou,st", [(20, 6, 0.5, 0.0), (40, 40, 0.3, 0.2), (30, 10, 0.7, -np.inf),
                                              (10, 0, 0.5, 0.0), (25, 8, 0.0, 0.9)])
@pytest.mark.parametrize("ties", [False, True])
def test_nms_v4(n, max_out, iou, st, ties):
    b, s = _boxes(n, ties)
    assert_matches_litert(_nms_model(n, max_out, False), [b, s, np.array(iou, F32), np.array(st, F32)])


@pytest.mark.parametrize("n,max_out,iou,st,sigma", [(20, 6, 0.5, 0.0, 0.5), (40, 40, 0.6, 0.1, 0.3),
                                                    (30, 12, 1.0, 0.05, 1.0), (15, 15, 0.4, 0.0, 0.0)])
@pytest.mark.parametrize("ties", [False, True])
def test_nms_v5(n, max_out, iou, st, sigma, ties):
    b, s = _boxes(n, ties)
    assert_matches_litert(_nms_model(n, max_out, True),
                          [b, s, np.array(iou, F32), np.array(st, F32), np.array(sigma, F32)])


def test_nms_v5_dynamic_max_output_size():
    b, s = _boxes(20)
    mb = _nms_model(20, -1, True, const_max=False)
    ins = [b, s, np.array(7, np.int32), np.array(0.5, F32), np.array(0.0, F32), np.array(0.5, F32)]
    exp = run_litert(mb, ins)
    got = run_onert(mb, ins)
    assert int(got[2]) == int(exp[2]) and got[0].shape == (int(exp[2]),)
    np.testing.assert_array_equal(got[0], exp[0])
    np.testing.assert_allclose(got[1], exp[1], rtol=1e-6)


def test_nms_negative_sigma_fails():
    b, s = _boxes(5)
    with pytest.raises(onert_py.OnertPyError, match="sigma"):
        run_onert(_nms_model(5, 3, True), [b, s, np.array(0.5, F32), np.array(0.0, F32), np.array(-1, F32)])


# ----------------------------------------------------------------------------- random

@pytest.mark.parametrize("op", ["RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL"])
@pytest.mark.parametrize("shape,seed,seed2", [((3, 5), 1, 2), ((7,), 12345, 0), ((2, 3, 3), 0, 99),
                                              ((4, 4), -7, 1 << 40)])
def test_random_matches_litert(op, shape, seed, seed2):
    mb = single_op_model(op, [("const", np.array(shape, np.int32))], [("o", list(shape), F32)],
                         seed=seed, seed2=seed2)
    assert_matches_litert(mb, [], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL"])
def test_random_state_advances_like_litert(op):
    """The generator carries over between invocations: compare three invokes of one interpreter/session."""
    from helpers import litert_interpreter
    mb = single_op_model(op, [("const", np.array([5], np.int32))], [("o", [5], F32)], seed=3, seed2=4)
    it = litert_interpreter(mb.to_bytes())
    it.allocate_tensors()
    sess = onert_py.infer.session(mb.to_bytes())
    for _ in range(3):
        it.invoke()
        exp = it.get_tensor(it.get_output_details()[0]["index"])
        np.testing.assert_allclose(sess.infer([])[0], exp, rtol=1e-5, atol=1e-6)


def test_random_distribution():
    n = 20000
    u = run_onert(single_op_model("RANDOM_UNIFORM", [("const", np.array([n], np.int32))], [("o", [n], F32)],
                                  seed=5, seed2=6), [])[0]
    g = run_onert(single_op_model("RANDOM_STANDARD_NORMAL", [("const", np.array([n], np.int32))],
                                  [("o", [n], F32)], seed=5, seed2=6), [])[0]
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01 and abs(u.std() - 12 ** -0.5) < 0.01
    assert abs(g.mean()) < 0.03 and abs(g.std() - 1) < 0.03


def test_random_unseeded_differs():
    mb = single_op_model("RANDOM_UNIFORM", [("const", np.array([8], np.int32))], [("o", [8], F32)])
    assert not np.array_equal(run_onert(mb, [])[0], run_onert(mb, [])[0])


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
@pytest.mark.parametrize("batch,classes,ns,seed,seed2", [(2, 5, 7, 1, 2), (3, 4, 16, 77, 0), (1, 10, 1, 0, 5)])
def test_multinomial(dtype, batch, classes, ns, seed, seed2):
    logits = R.standard_normal((batch, classes)).astype(F32)
    logits[0, 1] = -np.inf
    mb = single_op_model("MULTINOMIAL", [("const", logits), ("const", np.array(ns, np.int32))],
                         [("o", [batch, ns], dtype)], seed=seed, seed2=seed2)
    assert_matches_litert(mb, [])


# ----------------------------------------------------------------------------- lookups

@pytest.mark.parametrize("dtype", FIXED_DTYPES + ("complex128",))   # every fixed-size type runs in LiteRT 2.3
def test_hashtable_lookup(dtype):
    keys = np.array([-3, 0, 2, 5, 9, 40], np.int32)
    vals = dtype_values([6, 3], dtype, seed=3)
    q = np.array([5, 1, -3, 40, 41, 2, -10], np.int32)
    mb = single_op_model("HASHTABLE_LOOKUP", [("q", [7], np.int32), ("const", keys), ("const", vals)],
                         [("o", [7, 3], dtype), ("hits", [7], np.uint8)])
    assert_matches_litert(mb, [q])


@pytest.mark.parametrize("combiner", [0, 1, 2])
@pytest.mark.parametrize("rank", [2, 3])
def test_embedding_lookup_sparse(combiner, rank):
    params = R.standard_normal((10, 3, 2)).astype(F32)
    if rank == 2:
        indices = np.array([[0, 0], [0, 1], [2, 0], [2, 2], [2, 3], [3, 0]], np.int32)
        dense = np.array([4, 5], np.int32)
        out = [4, 3, 2]
    else:
        indices = np.array([[0, 0, 0], [0, 0, 1], [0, 2, 0], [1, 1, 0], [1, 1, 4], [1, 2, 1]], np.int32)
        dense = np.array([2, 3, 5], np.int32)
        out = [2, 3, 3, 2]
    ids = np.array([1, 3, 0, 9, 9, 4], np.int32)
    w = R.uniform(0.5, 2, 6).astype(F32)
    mb = single_op_model("EMBEDDING_LOOKUP_SPARSE",
                         [("ids", [6], np.int32), ("const", indices), ("const", dense), ("w", [6], F32),
                          ("const", params)], [("o", out, F32)], combiner=combiner)
    assert_matches_litert(mb, [ids, w])
