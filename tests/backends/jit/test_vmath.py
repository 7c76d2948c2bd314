"""The jit backend's float32 sin, cos, exp and logistic (jit/_vmath.py) and its SIN / COS / EXP /
LOGISTIC kernel (jit/elementwise.py): accuracy against the float64 functions, the values that need care
(±0, subnormals, ±inf, NaN, the largest reduced arguments, past NEAR_LIMIT, overflow and underflow), and
the kernel with the ops fused after it (or fused into the op before it) against its unfused run, the
cpu backend and LiteRT."""
from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")

import onert_py  # noqa: E402
from helpers import assert_close, rng, run_litert, run_litert_builtin  # noqa: E402
from onert_py.backends.jit._vmath import (NEAR_LIMIT, cos32, cos_near, exp32, expm1_32, logistic32, sin32,  # noqa: E402
                                          sin_near, tanh32)
from onert_py.schema.writer import ModelBuilder  # noqa: E402

F32 = np.float32
MAX_ULP = 2.0    # the module's claim: measured 1.53 over 10^6 samples per scale


# not cached on disk: numba's cache would not see a change to _vmath, which this kernel inlines
@numba.njit(error_model="numpy")
def _apply(x, out, which):
    """out = sin32 / cos32 / sin_near / cos_near / exp32 / logistic32 / expm1_32 / tanh32 (which = 0..7)
    of x."""
    for i in range(x.size):
        a = x[i]
        if which == 0:
            out[i] = sin32(a)
        elif which == 1:
            out[i] = cos32(a)
        elif which == 2:
            out[i] = sin_near(a)
        elif which == 3:
            out[i] = cos_near(a)
        elif which == 4:
            out[i] = exp32(a)
        elif which == 5:
            out[i] = logistic32(a)
        elif which == 6:
            out[i] = expm1_32(a)
        else:
            out[i] = tanh32(a)


def _run(x: np.ndarray, which: int) -> np.ndarray:
    out = np.empty_like(x)
    _apply(x, out, which)
    return out


def _ulps(got: np.ndarray, x: np.ndarray, fn) -> np.ndarray:
    """|got - fn(x)| in units of the float32 spacing at fn(x) (fn of float64: the exact value to ~1e-16)."""
    exact = fn(x.astype(np.float64))
    return np.abs(got.astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(F32)).astype(np.float64)


@pytest.mark.parametrize("scale", [1.0, 10.0, 1e3, 1e5, float(NEAR_LIMIT)])
@pytest.mark.parametrize("which,fn", [(0, np.sin), (1, np.cos)])
def test_within_two_ulp(scale, which, fn):
    x = (rng(int(scale) % 97).uniform(-1, 1, size=200_000) * scale).astype(F32)
    assert _ulps(_run(x, which), x, fn).max() <= MAX_ULP


@pytest.mark.parametrize("which,fn,zeros", [(0, np.sin, 0.0), (1, np.cos, 0.5)])
def test_near_zeros_of_the_function(which, fn, zeros):
    """Arguments next to k·π (sin) or (k + ½)·π (cos), where the reduction cancels most: the result
    keeps its relative accuracy."""
    exact = (np.arange(1, 30000) + zeros) * np.pi
    x = np.concatenate([np.nextafter(exact.astype(F32), F32(d)) for d in (-np.inf, np.inf)] + [exact.astype(F32)])
    x = np.concatenate([x, -x])
    assert _ulps(_run(x, which), x, fn).max() <= MAX_ULP


def test_quadrant_edges():
    """x = n·π/4 for every octant boundary up to 2^17: the reduced argument at its largest."""
    x = (np.arange(-40000, 40000) * (np.pi / 4)).astype(F32)
    assert _ulps(_run(x, 0), x, np.sin).max() <= MAX_ULP
    assert _ulps(_run(x, 1), x, np.cos).max() <= MAX_ULP


def test_special_values():
    x = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-45, -1e-45, np.inf, -np.inf, np.nan], F32)
    s, c = _run(x, 0), _run(x, 1)
    np.testing.assert_array_equal(s[:6], x[:6])        # sin x = x below 2^-12, -0.0 and subnormals too
    assert np.signbit(s[1]) and not np.signbit(s[0])
    np.testing.assert_array_equal(c[:6], np.ones(6, F32))   # cos 0 = 1 exactly
    assert np.isnan(s[6:]).all() and np.isnan(c[6:]).all()
    half_pi = np.array([np.pi / 2], F32)
    assert _run(half_pi, 0)[0] == 1.0


def test_past_the_limit_libm_takes_over():
    """Above NEAR_LIMIT sin32 / cos32 are libm's sinf / cosf (as LiteRT's kernels); below, the
    straight-line code: both within the bound on either side of the limit, up to FLT_MAX."""
    x = np.array([NEAR_LIMIT, np.nextafter(NEAR_LIMIT, F32(np.inf)), 1e6, 3e7, 1e20, 3.4e38], F32)
    x = np.concatenate([x, -x])
    for which, fn in ((0, np.sin), (1, np.cos)):
        assert _ulps(_run(x, which), x, fn).max() <= MAX_ULP
    # the straight-line code is not sin up there: what the kernels' second pass is for
    big = np.array([3e7, 1e20], F32)
    assert not (_ulps(_run(big, 2), big, np.sin) <= MAX_ULP).any()


def _logistic64(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


SMALLEST_NORMAL = np.finfo(F32).tiny


@pytest.mark.parametrize("lo,hi", [(-1, 1), (-20, 20), (-87, 88.7)])
@pytest.mark.parametrize("which,fn,bound", [(4, np.exp, 1.0), (5, _logistic64, 2.5)])
def test_exp_and_logistic_accuracy(lo, hi, which, fn, bound):
    x = rng(int(hi)).uniform(lo, hi, size=200_000).astype(F32)
    exact = fn(x.astype(np.float64))
    normal = exact >= SMALLEST_NORMAL
    assert _ulps(_run(x, which)[normal], x[normal], fn).max() <= bound


@pytest.mark.parametrize("which,fn", [(4, np.exp), (5, _logistic64)])
def test_exp_and_logistic_underflow(which, fn):
    """Results in the subnormals (x down to -104) round once: within one subnormal step of the
    float64 value; below, 0."""
    x = np.concatenate([np.linspace(-104, -87, 20001), [-110.0, -1e30, -np.inf]]).astype(F32)
    with np.errstate(over="ignore"):
        exact = fn(x.astype(np.float64))
    got = _run(x, which)
    assert np.abs(got.astype(np.float64) - exact).max() <= 2.0 ** -149
    np.testing.assert_array_equal(got[-3:], np.zeros(3, F32))


def test_exp_and_logistic_special_values():
    x = np.array([0.0, -0.0, 88.72, 88.73, 1e30, np.inf, np.nan], F32)
    e, s = _run(x, 4), _run(x, 5)
    np.testing.assert_array_equal(e[:2], [1.0, 1.0])
    assert np.isfinite(e[2]) and e[2] > 3.3e38 and np.isinf(e[3:6]).all() and np.isnan(e[6])
    np.testing.assert_array_equal(s[:6], [0.5, 0.5, 1.0, 1.0, 1.0, 1.0])
    assert np.isnan(s[6])


# ------------------------------------------------------------------------------------ the kernel

SHAPE = [1, 8, 8, 32]


def _sin_block(opcode: str = "SIN", *, scale_shape=(1,), second_reader: bool = False,
               shape=SHAPE) -> ModelBuilder:
    """y = OP(x) * scale + r: the converter's sin(v) * 0.1 + ... (benchmarks/models/matmul_loop)."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x, r = sg.tensor("x", shape, F32), sg.tensor("r", shape, F32)
    scale = sg.const("scale", np.full(scale_shape, 0.1, F32))
    s, m, y = (sg.tensor(n, shape, F32) for n in ("s", "m", "y"))
    sg.inputs = [x, r]
    sg.op(opcode, [x], [s])
    sg.op("MUL", [s, scale], [m], fused_activation_function=0)
    sg.op("ADD", [m, r], [y], fused_activation_function=0)
    sg.outputs = [y]
    if second_reader:
        sg.outputs.append(s)
    return mb


def _inputs(far: bool = True, shape=SHAPE) -> list[np.ndarray]:
    g = rng(7)
    x = (g.normal(size=shape) * 4).astype(F32)
    if far:   # a few elements past NEAR_LIMIT and the special values, spread over the tensor
        flat = x.reshape(-1)
        flat[::97] = g.uniform(2e5, 1e30, size=flat[::97].size).astype(F32) * g.choice([-1, 1], flat[::97].size)
        flat[5:10] = [np.inf, -np.inf, np.nan, -0.0, 1e-40]
    return [x, g.normal(size=shape).astype(F32)]


def _fused(sess) -> list[tuple[str, tuple[int, ...]]]:
    return [(op.kernel_name, op.fused) for ex in sess.executors for op in ex.operations if op.fused]


@pytest.mark.parametrize("opcode", ["SIN", "COS", "EXP", "LOGISTIC"])
@pytest.mark.parametrize("far", [False, True])
def test_kernel_fuses_the_scale_and_residual(opcode, far):
    mb = _sin_block(opcode)
    data, ins = mb.to_bytes("tflite"), _inputs(far)
    before = [a.copy() for a in ins]
    sess = onert_py.infer.session(data, "jit;cpu")
    assert [k for k, _ in _fused(sess)] == [opcode]
    got = sess.infer(ins)
    unfused = onert_py.infer.session(data, "jit;cpu", fuse_ops=False)
    assert not _fused(unfused)
    np.testing.assert_array_equal(got[0], unfused.infer(ins)[0])
    assert_close(got, onert_py.infer.session(data, "cpu").infer(ins), rtol=1e-5, atol=1e-6)
    # LiteRT's builtin SIN / COS are libm's; its default XNNPACK path loses the values past ~1e4
    # (sin(1e10) = -4891) and gives NaN past ~1e20, so the far values compare with the builtin kernels
    assert_close(got, run_litert_builtin(mb, ins), rtol=1e-5, atol=1e-6)
    if not far:
        assert_close(got, run_litert(data, ins), rtol=1e-5, atol=1e-6)
    for a, b in zip(ins, before):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("opcode", ["SIN", "LOGISTIC"])
def test_one_channel_runs_as_one_flat_loop(opcode):
    """A [1, H, W, 1] tensor (selfie_segmentation's mask): the kernel's loop is one flat loop (a row loop
    per one-element channel did not vectorise: 320 us for 144x256) with the fused scale and residual,
    the unfused bits, and values past the limit redone."""
    shape = [1, 24, 40, 1]
    mb = _sin_block(opcode, shape=shape)
    data, ins = mb.to_bytes("tflite"), _inputs(True, shape)
    sess = onert_py.infer.session(data, "jit;cpu")
    assert [k for k, _ in _fused(sess)] == [opcode]
    got = sess.infer(ins)
    np.testing.assert_array_equal(got[0], onert_py.infer.session(data, "jit;cpu", fuse_ops=False).infer(ins)[0])
    assert_close(got, run_litert_builtin(mb, ins), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opcode,fn", [("SIN", np.sin), ("COS", np.cos)])
def test_kernel_alone_far_values(opcode, fn):
    """OP alone (its output is read twice: the MUL starts the chain instead), values past NEAR_LIMIT
    redone by libm."""
    mb = _sin_block(opcode, second_reader=True)
    data, ins = mb.to_bytes("tflite"), _inputs(True)
    sess = onert_py.infer.session(data, "jit;cpu")
    assert _fused(sess) == [("MUL", (2,))]
    y, s = sess.infer(ins)
    x = ins[0]
    finite = np.isfinite(x)
    assert _ulps(s[finite], x[finite], fn).max() <= MAX_ULP
    assert np.isnan(s[~finite]).all()
    assert_close([y, s], run_litert_builtin(mb, ins), rtol=1e-5, atol=1e-6)


def test_channel_scale_fuses():
    mb = _sin_block(scale_shape=(32,))
    data, ins = mb.to_bytes("tflite"), _inputs()
    sess = onert_py.infer.session(data, "jit;cpu")
    assert [k for k, _ in _fused(sess)] == ["SIN"]
    assert_close(sess.infer(ins), run_litert_builtin(mb, ins), rtol=1e-5, atol=1e-6)


def _gate_model(act: str = "LOGISTIC") -> ModelBuilder:
    """y = act(x @ W + b) * x: FULLY_CONNECTED, then a gate, as the converter emits sigmoid(v @ W + b) * v."""
    g = rng(11)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [256, 64], F32)
    w = sg.const("w", (g.normal(size=(64, 64)) * 0.3).astype(F32))
    b = sg.const("b", g.normal(size=64).astype(F32))
    h, s, y = (sg.tensor(n, [256, 64], F32) for n in ("h", "s", "y"))
    sg.inputs = [x]
    sg.op("FULLY_CONNECTED", [x, w, b], [h], fused_activation_function=0)
    sg.op(act, [h], [s])
    sg.op("MUL", [s, x], [y], fused_activation_function=0)
    sg.outputs = [y]
    return mb


@pytest.mark.parametrize("act", ["LOGISTIC", "EXP"])
def test_gate_fuses_into_the_fully_connected(act):
    mb = _gate_model(act)
    data = mb.to_bytes("tflite")
    x = (rng(12).normal(size=(256, 64)) * 2).astype(F32)
    x.reshape(-1)[:4] = [np.nan, np.inf, -np.inf, -0.0]
    sess = onert_py.infer.session(data, "jit;cpu")
    assert _fused(sess) == [("FULLY_CONNECTED", (1, 2))]
    (got,) = sess.infer([x])
    np.testing.assert_array_equal(got, onert_py.infer.session(data, "jit;cpu", fuse_ops=False).infer([x])[0])
    assert_close([got], onert_py.infer.session(data, "cpu").infer([x]), rtol=1e-5, atol=1e-6)
    assert_close([got], run_litert_builtin(mb, [x]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lo,hi", [(-1e-6, 0), (-0.5, 0), (-20, 0), (-104, -10)])
def test_expm1_accuracy_on_elus_side(lo, hi):
    """expm1_32 for x < 0 (what ELU takes it for): the series near 0, exp32(x) - 1 beyond."""
    x = rng(int(-lo * 10)).uniform(lo, hi, size=200_000).astype(F32)
    assert _ulps(_run(x, 6), x, np.expm1).max() <= 1.5


def test_expm1_special_values():
    x = np.array([0.0, -0.0, -1e-30, -1e-45, -np.inf, -200.0, -25.0, -17.5, np.nan], F32)
    got = _run(x, 6)
    np.testing.assert_array_equal(got[:8], np.array([0.0, -0.0, -1e-30, -1e-45, -1.0, -1.0, -1.0, -1.0], F32))
    assert np.signbit(got[1]) and np.isnan(got[8])


@pytest.mark.parametrize("lo,hi", [(-1e-5, 1e-5), (-0.6, 0.6), (-10, 10)])
def test_tanh_accuracy(lo, hi):
    x = rng(int(hi * 100)).uniform(lo, hi, size=300_000).astype(F32)
    assert _ulps(_run(x, 7), x, np.tanh).max() <= 2.5


def test_tanh_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, 9.1, -9.1, 1e30, 1e-30, -1e-45, np.nan], F32)
    got = _run(x, 7)
    np.testing.assert_array_equal(got[:9], np.array([0.0, -0.0, 1, -1, 1, -1, 1, 1e-30, -1e-45], F32))
    np.testing.assert_array_equal(np.signbit(got[:2]), [False, True])
    assert np.isnan(got[9])
