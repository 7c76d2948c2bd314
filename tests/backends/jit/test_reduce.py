"""The jit backend's 8-bit MEAN over height and width (backends/jit/reduce.py): the values and
parameters are tested in tests/backends/cpu/test_reduce_quantized.py (run_onert runs both backends
there, against LiteRT); here, that the compiled loop is the kernel taken, for which ops, and against
LiteRT on a classifier head's shapes."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

import onert_py  # noqa: E402
from helpers import int32_const, rng, run_litert_builtin, single_op_model  # noqa: E402


def _mean(dt, shape, axes, keep, q_in=(0.07, -3), q_out=(0.05, 4)):
    ax = {a % len(shape) for a in axes}
    out = [1 if k in ax else d for k, d in enumerate(shape)] if keep else [d for k, d in enumerate(shape) if k not in ax]
    return single_op_model("MEAN", [("x", list(shape), dt, q_in), int32_const(axes)], [("y", out, dt, q_out)],
                           keep_dims=keep)


def _run(mb, x, backends="jit;cpu"):
    sess = onert_py.infer.session(mb.to_bytes("tflite"), backends=backends)
    return sess.executors[0].backend_names, sess.infer([x])[0]


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("shape, axes", [((1, 3, 3, 1280), [1, 2]), ((2, 7, 5, 24), [2, 1]), ((1, 7, 7, 3), [-3, -2])])
def test_global_average_pool(dt, keep, shape, axes):
    info = np.iinfo(dt)
    x = rng(2).integers(int(info.min), int(info.max), shape, endpoint=True).astype(dt)
    mb = _mean(dt, shape, axes, keep)
    backends, got = _run(mb, x)
    assert backends == ["jit"]
    np.testing.assert_array_equal(got, run_litert_builtin(mb, [x])[0])
    np.testing.assert_array_equal(got, _run(mb, x, "cpu")[1])


def test_other_reductions_stay_on_cpu():
    x = np.zeros((2, 5, 7, 3), np.int8)
    for axes in ([1], [3], [1, 2, 3], [0, 1]):
        assert _run(_mean(np.int8, x.shape, axes, False), x)[0] == ["cpu"]
    x16 = np.zeros((1, 3, 3, 4), np.int16)
    assert _run(_mean(np.int16, x16.shape, [1, 2], True, (0.01, 0), (0.01, 0)), x16)[0] == ["cpu"]
