"""The session's backend and thread options (backends, op_backend, num_threads, ONERT_PY_BACKENDS,
ONERT_PY_OP_BACKEND_MAP): good values reach the compiler, bad ones are named in one clear error."""
from __future__ import annotations

import numpy as np
import pytest

import onert_py
from helpers import single_op_model
from onert_py.errors import PrepareError

F32 = np.float32


def _add(dtype=F32, shape=(64, 64)) -> bytes:
    mb = single_op_model("ADD", [("a", list(shape), dtype), ("b", list(shape), dtype)],
                         [("o", list(shape), dtype)], fused_activation_function=0)
    return mb.to_bytes("tflite")


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv("ONERT_PY_BACKENDS", raising=False)
    monkeypatch.delenv("ONERT_PY_OP_BACKEND_MAP", raising=False)


@pytest.mark.parametrize("n, message", [(0, "num_threads must be >= 1"), (-3, "num_threads must be >= 1"),
                                        ("2", "num_threads must be an int"), (True, "num_threads must be an int"),
                                        (1.5, "num_threads must be an int")])
def test_bad_num_threads(n, message, no_env):
    with pytest.raises(ValueError, match=message):
        onert_py.infer.session(_add(), num_threads=n)


@pytest.mark.parametrize("spec, message", [
    ("ADD", "op_backend: 'ADD' is not KEY=BACKEND"),
    ("ADD=", "op_backend: 'ADD=' is not KEY=BACKEND"),
    ({"0:x": "cpu"}, "op_backend: key '0:x' is not SUBGRAPH:INDEX"),
    ({"ADD": "gpu"}, "op_backend ADD=gpu: unknown backend 'gpu'"),
])
def test_bad_op_backend(spec, message, no_env):
    with pytest.raises(ValueError, match=message):
        onert_py.infer.session(_add(), op_backend=spec)


def test_bad_backends_env(monkeypatch):
    monkeypatch.setenv("ONERT_PY_BACKENDS", "tpu")
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        onert_py.infer.session(_add())


def test_jit_named_without_numba(monkeypatch, no_env):
    """numba missing (simulated): "jit;cpu" runs on cpu, as onert skips a backend it cannot load;
    "jit" alone, or an op forced onto it, says what to install."""
    from onert_py.backends import jit
    monkeypatch.setattr(jit, "_state", {"loaded": False, "why": "ModuleNotFoundError: No module named 'numba'"})
    sess = onert_py.infer.session(_add(), "jit;cpu")
    assert sess.executors[0].backend_names == ["cpu"]
    with pytest.raises(ValueError, match=r'needs numba .*pip install "onert-py\[jit\]"'):
        onert_py.infer.session(_add(), "jit")
    with pytest.raises(ValueError, match="op_backend ADD=jit: the jit backend needs numba"):
        onert_py.infer.session(_add(), "cpu", op_backend="ADD=jit")


def test_forced_op_and_env_map(monkeypatch, no_env):
    pytest.importorskip("numba")
    data = _add()
    assert onert_py.infer.session(data, "jit;cpu").executors[0].backend_names == ["jit"]
    assert onert_py.infer.session(data, "jit;cpu", op_backend="ADD=cpu").executors[0].backend_names == ["cpu"]
    assert onert_py.infer.session(data, "cpu", op_backend={"0:0": "jit"}).executors[0].backend_names == ["jit"]
    monkeypatch.setenv("ONERT_PY_OP_BACKEND_MAP", "ADD=cpu")
    assert onert_py.infer.session(data, "jit;cpu").executors[0].backend_names == ["cpu"]
    # the option's own key wins over the environment's
    assert onert_py.infer.session(data, "jit;cpu", op_backend="ADD=jit").executors[0].backend_names == ["jit"]
    monkeypatch.setenv("ONERT_PY_BACKENDS", "cpu")
    monkeypatch.delenv("ONERT_PY_OP_BACKEND_MAP")
    assert onert_py.infer.session(data).executors[0].backend_names == ["cpu"]


def test_op_forced_onto_a_backend_that_declines_it(no_env):
    """jit's elementwise kernels are float32: an int32 ADD forced onto jit is refused, naming the op."""
    pytest.importorskip("numba")
    with pytest.raises(PrepareError, match=r"subgraph 0 operator 0 \(ADD\) on backend 'jit'"):
        onert_py.infer.session(_add(np.int32), "jit;cpu", op_backend="ADD=jit")


def test_num_threads_runs_and_puts_blas_back(no_env):
    """num_threads limits BLAS only while the session runs; results are the same as without it, and
    the caller's inputs are left as they were."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    data = _add()
    x = np.random.default_rng(0).normal(size=(64, 64)).astype(F32)
    y = x[::-1].copy()
    before = [x.copy(), y.copy()]
    blas = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    want = onert_py.infer.session(data, "cpu").infer([x, y])
    for n in (1, 2):
        got = onert_py.infer.session(data, num_threads=n).infer([x, y])
        np.testing.assert_array_equal(got[0], want[0])
    assert [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"] == blas
    np.testing.assert_array_equal(x, before[0])
    np.testing.assert_array_equal(y, before[1])


def _seen_threads_model(first_op: str) -> bytes:
    """x [1, 8, 8, 4] -> first_op (a 1x1 CONV_2D, which jit takes, or ABS on cpu) -> a custom op that
    reports the thread counts BLAS and numba have while the run is on."""
    from onert_py.schema.writer import ModelBuilder
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x, t, y = (sg.tensor(n, [1, 8, 8, 4], F32) for n in ("x", "t", "y"))
    if first_op == "CONV_2D":
        w = sg.const("w", np.eye(4, dtype=F32).reshape(4, 1, 1, 4))
        sg.op("CONV_2D", [x, w, -1], [t], padding=0, stride_w=1, stride_h=1, fused_activation_function=0)
    else:
        sg.op(first_op, [x], [t])
    sg.op("SeenThreads", [t], [y], custom_code="SeenThreads")
    sg.inputs, sg.outputs = [x], [y]
    return mb.to_bytes("tflite")


@pytest.mark.parametrize("backends, first_op, blas_threads",
                         [("jit;cpu", "CONV_2D", 1), ("cpu", "CONV_2D", 2), ("jit;cpu", "ABS", 2)])
def test_blas_gets_one_thread_while_jit_kernels_have_the_pool(no_env, backends, first_op, blas_threads):
    """num_threads=2: a run with ops on the jit backend gives numba's pool the 2 threads and BLAS one
    (two pools spinning on 2 cores starve each other: exec/threads.py); a run with no op on jit (cpu
    only, or jit offered but its one candidate forced onto cpu) gives BLAS the 2."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    numba = pytest.importorskip("numba")
    if not [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]:
        pytest.skip("threadpoolctl found no BLAS library")
    from onert_py.backends.registry import register_custom_op
    seen = []

    def report(x, custom_options=b""):
        seen.append(([i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"],
                     numba.get_num_threads()))
        return x
    register_custom_op("SeenThreads", report, replace=True)
    forced = "ABS=cpu" if first_op == "ABS" else None
    sess = onert_py.infer.session(_seen_threads_model(first_op), backends, op_backend=forced, num_threads=2)
    x = np.random.default_rng(0).normal(size=(1, 8, 8, 4)).astype(F32)
    seen.clear()
    sess.infer([x])
    blas, jit = seen[-1]
    assert set(blas) == {blas_threads}
    assert jit == min(2, numba.config.NUMBA_NUM_THREADS)


def test_numba_thread_count_set_for_a_run_and_put_back():
    """thread_limit sets numba's count through its threading layer only when it differs, and puts the
    caller's count back (also when the caller had set one of its own)."""
    numba = pytest.importorskip("numba")
    from onert_py.exec.threads import numba_threads, thread_limit
    outer, most = numba.get_num_threads(), numba.config.NUMBA_NUM_THREADS
    try:
        for start in {outer, 1}:
            numba.set_num_threads(start)
            for n, inside in ((1, 1), (None, 1), (most, most), (most + 5, most)):
                with thread_limit(n):
                    assert numba.get_num_threads() == inside == numba_threads()
                assert numba.get_num_threads() == start == numba_threads()
    finally:
        numba.set_num_threads(outer)
