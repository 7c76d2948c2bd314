"""The jit backend's packed GEMM (backends/jit/_gemm.py) against a float64 product, within the bound a
float32 sum of K products can be off by (an independent formula, not our own output), over the shapes its
blocking distinguishes: whole panels, a partial panel of more or fewer than one vector, a half panel,
rows past the last 6-row (and 8-row) block, K = 1, A by rows and by columns, threads; and the bias and
clamp it applies in registers (NaN kept, as np.clip)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from onert_py.backends.cpu._conv_plan import ConvPlan  # noqa: E402
from onert_py.backends.cpu.conv import _geometry  # noqa: E402
from onert_py.backends.jit._gemm import LANES, PANEL, PackedProduct, gemm, gemm_wins, pack_panels, pad_bias  # noqa: E402
from onert_py.backends.jit._simd import VECTOR  # noqa: E402

EPS = float(np.finfo(np.float32).eps)


def _bound(a: np.ndarray, b: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """|float32 result - exact| <= (K + 2) * eps * (sum_k |a b| + |bias|): K roundings of the sum,
    one of the bias add, and the inputs' own float32 products are exact in float64."""
    k = a.shape[1]
    return (k + 2) * EPS * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(bias)) + 1e-30


def _exact(a, b, bias, lo=-np.inf, hi=np.inf):
    return np.clip(a.astype(np.float64) @ b.astype(np.float64) + bias, lo, hi)


def _run(a, b, bias, lo=-np.inf, hi=np.inf, chunks=1, by_columns=False):
    m, k = a.shape
    n = b.shape[1]
    c = np.full(m * n + 7, 12345.0, np.float32)       # guard values past the end: never written
    if by_columns:
        flat, sm, sk = np.ascontiguousarray(a.T).reshape(-1), 1, m
    else:
        flat, sm, sk = a.reshape(-1), k, 1
    gemm(flat, sm, sk, pack_panels(b), pad_bias(bias, n), np.float32(lo), np.float32(hi), c, m, k, n, chunks)
    assert np.all(c[m * n:] == 12345.0)
    return c[:m * n].reshape(m, n)


# N around the panel (2 vectors) and half-panel (1 vector) widths; M around the 6- and 8-row blocks
# and every leftover of the 6-row block (taken 3, 2 and 1 rows at a time)
NS = sorted({1, 2, LANES - 1, LANES, LANES + 1, PANEL - 1, PANEL, PANEL + 3, PANEL + LANES, 2 * PANEL + 5})
MS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 50]


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("m", MS)
def test_gemm_within_the_float32_sum_bound(m, n):
    g = np.random.default_rng(m * 100 + n)
    k = 37
    a = g.normal(size=(m, k)).astype(np.float32)
    b = g.normal(size=(k, n)).astype(np.float32)
    bias = g.normal(size=n).astype(np.float32)
    got = _run(a, b, bias)
    assert np.all(np.abs(got - _exact(a, b, bias)) <= _bound(a, b, bias))
    # A read by columns (a transposed im2col matrix) sums in the same order: the same bits
    np.testing.assert_array_equal(_run(a, b, bias, by_columns=True), got)


@pytest.mark.parametrize("k", [1, 2, 300])
def test_gemm_depths(k):
    g = np.random.default_rng(k)
    a = g.normal(size=(19, k)).astype(np.float32)
    b = g.normal(size=(k, PANEL + 5)).astype(np.float32)
    bias = np.zeros(PANEL + 5, np.float32)
    got = _run(a, b, bias)
    assert np.all(np.abs(got - _exact(a, b, bias)) <= _bound(a, b, bias))


def test_gemm_sums_in_order_with_fused_multiply_adds():
    # each output is fma(a_k, b_k, acc) over k in order: a case where any other order or a separate
    # rounding of the product gives another float32
    a = np.array([[1.0 + 2.0 ** -12, 1.0]], np.float32)     # (1 + 2^-12)^2 - 1 = 2^-11 + 2^-24
    b = np.array([[1.0 + 2.0 ** -12], [-1.0]], np.float32)
    acc = np.float32(0)
    for ak, bk in zip(a[0], b[:, 0]):
        acc = np.float32(np.float64(ak) * np.float64(bk) + np.float64(acc))   # one rounding per step
    got = _run(a, b, np.zeros(1, np.float32))
    assert got[0, 0] == acc
    assert acc != np.float32(a[0].astype(np.float64) @ b[:, 0].astype(np.float64))   # the order shows


@pytest.mark.parametrize("m", [2, 3, 4, 5, 10, 11])
def test_row_blocks_give_each_row_its_own_bits(m):
    """The 6-, 3-, 2- and 1-row blocks sum each output in the same order: a matrix's rows have the bits
    of the same rows computed one at a time."""
    g = np.random.default_rng(m)
    a = g.normal(size=(m, 70)).astype(np.float32)
    b = g.normal(size=(70, PANEL + 3)).astype(np.float32)
    bias = g.normal(size=PANEL + 3).astype(np.float32)
    whole = _run(a, b, bias)
    for r in range(m):
        np.testing.assert_array_equal(whole[r], _run(a[r:r + 1].copy(), b, bias)[0])


def test_gemm_threads_give_the_same_bits():
    g = np.random.default_rng(3)
    a = g.normal(size=(97, 20)).astype(np.float32)
    b = g.normal(size=(20, PANEL + 7)).astype(np.float32)
    bias = g.normal(size=PANEL + 7).astype(np.float32)
    one = _run(a, b, bias)
    for chunks in (2, 3, 16):
        np.testing.assert_array_equal(_run(a, b, bias, chunks=chunks), one)


def test_gemm_bias_and_clamp_keep_nan_and_inf():
    k, n = 4, LANES + 3
    a = np.ones((7, k), np.float32)
    a[1, 0] = np.nan
    a[2, 0] = np.inf
    a[3, 0] = -np.inf
    b = np.ones((k, n), np.float32)
    bias = np.linspace(-3, 3, n).astype(np.float32)
    got = _run(a, b, bias, lo=0.0, hi=6.0)
    assert np.all(np.isnan(got[1]))                    # NaN passes the clamp, as np.clip
    assert np.all(got[2] == 6.0) and np.all(got[3] == 0.0)
    np.testing.assert_array_equal(got[0], np.clip(4 + bias, 0, 6))


def test_packed_product_reads_rows_columns_and_read_only_arrays():
    g = np.random.default_rng(5)
    a = g.normal(size=(30, 11)).astype(np.float32)
    w = g.normal(size=(11, 24)).astype(np.float32)
    bias = g.normal(size=24).astype(np.float32)
    product = PackedProduct(w, bias, (0.0, 6.0), parallel_min=1 << 40).matrix
    out = np.empty((30, 24), np.float32)
    product(a, out)
    expected = _exact(a, w, bias, 0.0, 6.0)
    assert np.all(np.abs(out - expected) <= _bound(a, w, bias))
    for variant in (np.asfortranarray(a), a[:, :]):
        again = np.empty_like(out)
        product(variant, again)
        np.testing.assert_array_equal(again, out)
    frozen = a.copy()
    frozen.flags.writeable = False
    again = np.empty_like(out)
    product(frozen, again)
    np.testing.assert_array_equal(again, out)
    strided = np.empty((30, 22), np.float32)[:, ::2]     # neither rows nor columns contiguous
    strided[...] = a
    product(strided, again)
    np.testing.assert_array_equal(again, out)


def test_gemm_wins_rule():
    # taken where at most 30 % of the columns computed are padding
    assert gemm_wins(PANEL) and gemm_wins(2 * PANEL) and gemm_wins(LANES)
    assert not gemm_wins(2) and not gemm_wins(0)
    assert VECTOR.lanes == LANES


# (input [N, H, W, C], filter KH x KW, strides, dilations, padding): convolutions read in place
WINDOWS = [
    ([1, 9, 11, 3], (3, 3), (2, 2), (1, 1), 0),     # an RGB stem: SAME, stride 2
    ([2, 7, 8, 5], (5, 3), (1, 2), (2, 1), 0),      # batch 2, dilation_h 2, mixed strides
    ([1, 6, 6, 8], (2, 2), (2, 2), (1, 1), 1),      # VALID: the input itself, no border
    ([1, 5, 13, 4], (1, 3), (1, 1), (1, 1), 0),     # rows of 13 pixels: 6-row blocks and the rest
]


@pytest.mark.parametrize("x_shape,filt,strides,dils,padding", WINDOWS)
@pytest.mark.parametrize("cout", [LANES - 3, PANEL + 5])
def test_convolution_windows_read_in_place(x_shape, filt, strides, dils, padding, cout):
    g = np.random.default_rng(cout)
    c = x_shape[-1]
    w2 = g.normal(size=(filt[0] * filt[1] * c, cout)).astype(np.float32)
    bias = g.normal(size=cout).astype(np.float32)
    x = g.normal(size=x_shape).astype(np.float32)
    out, pads = _geometry(x_shape[1:3], filt, strides, dils, padding)
    packed = PackedProduct(w2, bias, None, parallel_min=1 << 40)
    plan = ConvPlan(tuple(x_shape), w2, filt, strides, dils, out, pads, None, None, packed.matrix, packed.windows)
    assert plan.kind == "im2col" and plan.windows_product is not None
    reference = ConvPlan(tuple(x_shape), w2, filt, strides, dils, out, pads, None)   # im2col + sgemm
    for _ in range(2):                       # a second run reuses the zero border
        got = plan.run(x)
    patches = np.zeros((int(np.prod(got.shape[:-1])), w2.shape[0]), np.float32)
    # the patches, rebuilt from the im2col plan's own product: reference.run(x) with w2 = identity
    eye = ConvPlan(tuple(x_shape), np.eye(w2.shape[0], dtype=np.float32), filt, strides, dils, out, pads, None)
    patches[...] = eye.run(x).reshape(patches.shape)
    exact = _exact(patches, w2, bias).reshape(got.shape)
    bound = _bound(patches, w2, bias).reshape(got.shape)
    assert np.all(np.abs(got - exact) <= bound)
    assert np.abs(reference.run(x) + bias - exact).max() <= bound.max()
    # the output rows split over numba's threads: the same bits
    threaded = PackedProduct(w2, bias, None, parallel_min=0)
    plan2 = ConvPlan(tuple(x_shape), w2, filt, strides, dils, out, pads, None, None, threaded.matrix,
                     threaded.windows)
    np.testing.assert_array_equal(plan2.run(x), got)


def test_dilated_columns_take_the_im2col_copy():
    w2 = np.ones((3 * 3 * 2, 20), np.float32)
    packed = PackedProduct(w2, None, None, parallel_min=1 << 40)
    plan = ConvPlan((1, 9, 9, 2), w2, (3, 3), (1, 1), (1, 2), (5, 5), ((0, 0), (0, 0)), None, None,
                    packed.matrix, packed.windows)
    assert plan.windows_product is None
    x = np.random.default_rng(0).normal(size=(1, 9, 9, 2)).astype(np.float32)
    ref = ConvPlan((1, 9, 9, 2), w2, (3, 3), (1, 1), (1, 2), (5, 5), ((0, 0), (0, 0)), None).run(x)
    np.testing.assert_allclose(plan.run(x), ref, rtol=1e-5, atol=1e-5)


def test_thread_count_follows_numba():
    # the kernels read numba's count through its threading layer's getter (no locks); it must follow
    # set_num_threads, as num_threads sets it for each run
    import numba

    from onert_py.backends.jit._numba import threads
    before = numba.get_num_threads()
    try:
        for n in (1, min(2, numba.config.NUMBA_NUM_THREADS), 1):
            numba.set_num_threads(n)
            assert threads() == numba.get_num_threads() == n
    finally:
        numba.set_num_threads(before)
