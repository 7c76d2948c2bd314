"""The jit backend's pools and quantized FULLY_CONNECTED beside the cpu kernels they replace.

    python benchmarks/jit_pool_matmul.py [--rounds 15] [--threads 1,2] [--only pool|fc]

Per case, a one-op model is compiled twice (backends="cpu" and the jit kernel forced, bypassing the jit
kernel's own accept rule so that the rule's numbers can be read here); the op's run closure is timed
alone (inputs set once), cpu and jit in alternating blocks of calls (A/B/A/B, ~2 ms each) per round,
the median of all per-call times. The thread count is the session's num_threads, which sets BLAS's
(threadpoolctl) and numba's (set_num_threads) for each run. Prints a markdown table per thread count:
op, shape, cpu µs, jit µs, cpu/jit (> 1: jit faster) and whether the jit kernel's rule takes the op.

On a small machine shared with other work, 2-thread numbers are noisy: OpenBLAS's and numba's worker
threads compete for the cores (a call can wait a whole scheduler time slice, milliseconds).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import onert_py  # noqa: E402
from helpers import single_op_model  # noqa: E402
from onert_py.backends import jit  # noqa: E402
from onert_py.backends.cpu.conv import conv_output_size  # noqa: E402
from onert_py.exec.threads import thread_limit  # noqa: E402

SAME, VALID = 0, 1


def _pool_case(op, x_shape, k, s, padding, act=0, q=None):
    n, h, w, c = x_shape
    oh, ow = conv_output_size(h, k[0], s[0], 1, padding), conv_output_size(w, k[1], s[1], 1, padding)
    r = np.random.default_rng(0)
    if q is None:
        specs = ([("x", list(x_shape), np.float32)], [("o", [n, oh, ow, c], np.float32)])
        x = r.normal(size=x_shape).astype(np.float32)
    else:
        specs = ([("x", list(x_shape), np.int8, q)], [("o", [n, oh, ow, c], np.int8, q)])
        x = r.integers(-128, 128, x_shape).astype(np.int8)
    mb = single_op_model(op, *specs, padding=padding, stride_h=s[0], stride_w=s[1], filter_height=k[0],
                         filter_width=k[1], fused_activation_function=act)
    kind = ("q" if q is not None else "") + {"AVERAGE_POOL_2D": "avg", "MAX_POOL_2D": "max"}[op]
    label = f"{k[0]}x{k[1]}/{s[0]} {'SAME' if padding == SAME else 'VALID'}"
    return (f"{kind} {label}", "x".join(map(str, x_shape)), mb, [x])


def _fc_case(rows, depth, units, per_channel=False, zx=-3, zw=0, bias=True, act=0):
    r = np.random.default_rng(1)
    x = r.integers(-128, 128, (rows, depth)).astype(np.int8)
    w = r.integers(-127, 128, (units, depth)).astype(np.int8)
    sx = 0.05
    if per_channel:
        sw = r.uniform(0.001, 0.01, units).astype(np.float32)
        q_w = (sw, np.zeros(units, np.int64), 0)
        q_b = ((np.float32(sx) * sw).astype(np.float32), np.zeros(units, np.int64), 0)
    else:
        q_w, q_b = (0.004, zw), (float(np.float32(sx) * np.float32(0.004)), 0)
    ins = [("x", [rows, depth], np.int8, (sx, zx)), ("const", w, q_w)]
    if bias:
        ins.append(("const", r.integers(-20000, 20000, units).astype(np.int32), q_b))
    mb = single_op_model("FULLY_CONNECTED", ins, [("y", [rows, units], np.int8, (0.3, 5))],
                         fused_activation_function=act)
    label = "qFC " + ("per-channel" if per_channel else "per-tensor")
    return (label, f"{rows}x{depth} -> {units}", mb, [x])


def pool_cases():
    f = [_pool_case("MAX_POOL_2D", [1, 112, 112, 64], (3, 3), (2, 2), SAME),          # resnet stem
         _pool_case("MAX_POOL_2D", [1, 112, 112, 32], (2, 2), (2, 2), VALID),
         _pool_case("MAX_POOL_2D", [1, 56, 56, 128], (2, 2), (2, 2), SAME, act=1),
         _pool_case("MAX_POOL_2D", [1, 28, 28, 256], (2, 2), (2, 2), VALID),
         _pool_case("MAX_POOL_2D", [1, 14, 14, 512], (2, 2), (2, 2), VALID),
         _pool_case("MAX_POOL_2D", [1, 35, 35, 192], (3, 3), (1, 1), SAME),          # inception branch
         _pool_case("MAX_POOL_2D", [1, 32, 32, 3], (2, 2), (2, 2), VALID),
         _pool_case("MAX_POOL_2D", [4, 16, 16, 8], (2, 2), (2, 2), VALID),
         _pool_case("MAX_POOL_2D", [1, 8, 8, 16], (3, 3), (1, 1), SAME),
         _pool_case("MAX_POOL_2D", [1, 13, 13, 5], (3, 3), (2, 2), VALID),
         _pool_case("MAX_POOL_2D", [1, 64, 64, 1], (2, 2), (2, 2), VALID),
         _pool_case("MAX_POOL_2D", [1, 16, 16, 1], (2, 2), (2, 2), VALID),
         _pool_case("MAX_POOL_2D", [1, 64, 64, 1], (3, 3), (2, 2), SAME),
         _pool_case("AVERAGE_POOL_2D", [1, 7, 7, 1280], (7, 7), (1, 1), VALID),     # global, mobilenet
         _pool_case("AVERAGE_POOL_2D", [1, 7, 7, 2048], (7, 7), (7, 7), VALID),
         _pool_case("AVERAGE_POOL_2D", [1, 35, 35, 192], (3, 3), (1, 1), SAME),
         _pool_case("AVERAGE_POOL_2D", [1, 17, 17, 768], (5, 5), (3, 3), VALID),
         _pool_case("AVERAGE_POOL_2D", [1, 56, 56, 64], (2, 2), (2, 2), VALID),
         _pool_case("AVERAGE_POOL_2D", [2, 28, 28, 32], (3, 3), (2, 2), SAME, act=3),
         _pool_case("AVERAGE_POOL_2D", [1, 14, 14, 16], (14, 14), (1, 1), VALID),
         _pool_case("AVERAGE_POOL_2D", [1, 32, 32, 64], (32, 32), (32, 32), VALID),
         _pool_case("AVERAGE_POOL_2D", [1, 8, 8, 16], (2, 2), (2, 2), VALID),
         _pool_case("AVERAGE_POOL_2D", [1, 64, 64, 3], (5, 5), (1, 1), SAME),
         _pool_case("AVERAGE_POOL_2D", [1, 128, 128, 1], (2, 2), (2, 2), VALID)]
    q = (0.05, -3)
    qi = [_pool_case("MAX_POOL_2D", [1, 112, 112, 64], (3, 3), (2, 2), SAME, q=q),
          _pool_case("MAX_POOL_2D", [1, 56, 56, 128], (2, 2), (2, 2), VALID, q=q),
          _pool_case("MAX_POOL_2D", [1, 8, 8, 16], (2, 2), (2, 2), VALID, q=q),
          _pool_case("MAX_POOL_2D", [1, 128, 128, 1], (2, 2), (2, 2), VALID, q=q),
          _pool_case("AVERAGE_POOL_2D", [1, 7, 7, 1280], (7, 7), (1, 1), VALID, q=q),
          _pool_case("AVERAGE_POOL_2D", [1, 35, 35, 192], (3, 3), (1, 1), SAME, q=q),
          _pool_case("AVERAGE_POOL_2D", [1, 28, 28, 64], (2, 2), (2, 2), VALID, act=1, q=q),
          _pool_case("AVERAGE_POOL_2D", [1, 8, 8, 16], (3, 3), (2, 2), SAME, q=q),
          _pool_case("AVERAGE_POOL_2D", [1, 128, 128, 1], (2, 2), (2, 2), VALID, q=q),
          _pool_case("MAX_POOL_2D", [1, 16, 16, 1], (2, 2), (2, 2), VALID, q=q)]
    return f + qi


def fc_cases():
    return [_fc_case(1, 1280, 1000), _fc_case(1, 1280, 1000, per_channel=True),
            _fc_case(1, 1024, 1001, per_channel=True), _fc_case(1, 512, 10), _fc_case(1, 64, 16),
            _fc_case(1, 2048, 2048, zw=3), _fc_case(1, 256, 256, per_channel=True, act=1),
            _fc_case(4, 1280, 1000, per_channel=True), _fc_case(8, 512, 512),
            _fc_case(16, 256, 256, per_channel=True), _fc_case(32, 1024, 1024, per_channel=True),
            _fc_case(64, 128, 128), _fc_case(128, 384, 1536, per_channel=True),
            _fc_case(256, 256, 256)]


def _runner(mb, inputs, backends, op_backend, threads):
    """The op's run closure, its input set in the executor's slots, and the backend it ran on."""
    sess = onert_py.infer.session(mb.to_bytes("tflite"), backends=backends, op_backend=op_backend,
                                  num_threads=threads)
    sess.infer(inputs)                                   # compiles, plans memory
    ex = sess.executors[0]
    for i, x in zip(ex.input_indices, inputs):
        ex.values[i] = x
    return ex.runs[0], ex.backend_names[0]


def _per_call(run, threads, reps) -> list[float]:
    """The times of `reps` calls, each timed alone: the median then leaves out the calls that waited for
    the other backend's threads (OpenBLAS's and numba's OpenMP workers both spin for a while after
    their last job: on 2 cores, a call right after the other backend's can wait a 4 ms time slice)."""
    times = []
    with np.errstate(all="ignore"), thread_limit(threads):
        for _ in range(reps):
            t = time.perf_counter()
            run()
            times.append(time.perf_counter() - t)
    return times


def measure(case, threads, rounds):
    label, shape, mb, inputs = case
    op = mb.to_bytes("tflite")
    opcode = onert_py.load_model(op).subgraphs[0].operations[0].opcode
    cpu, b_cpu = _runner(mb, inputs, "cpu", None, threads)
    accepted = _accepted(mb)
    with _rules_off():
        jit_run, b_jit = _runner(mb, inputs, "jit;cpu", {opcode: "jit"}, threads)
    assert (b_cpu, b_jit) == ("cpu", "jit"), (b_cpu, b_jit)
    once = statistics.median(_per_call(cpu, threads, 3))
    reps = max(3, min(500, int(2e-3 / max(once, 1e-7))))    # ~2 ms per block
    for _ in range(2):       # warm-up rounds: both backends' threads started, caches and plans made
        _per_call(cpu, threads, reps)
        _per_call(jit_run, threads, reps)
    a, b = [], []
    for _ in range(rounds):
        a += _per_call(cpu, threads, reps)
        b += _per_call(jit_run, threads, reps)
    tc, tj = statistics.median(a) * 1e6, statistics.median(b) * 1e6
    return label, shape, tc, tj, accepted


def _accepted(mb) -> bool:
    sess = onert_py.infer.session(mb.to_bytes("tflite"), backends="jit;cpu")
    return sess.executors[0].backend_names[0] == "jit"


class _rules_off:
    """The jit kernels' accept rules replaced by "accept" (timing the shapes the rules decline)."""
    def __enter__(self):
        mods = [importlib.import_module(f"onert_py.backends.jit.{m}") for m in ("pool", "matmul")
                if importlib.util.find_spec(f"onert_py.backends.jit.{m}")]
        self.saved = [(m, m._wins) for m in mods]
        for m, _ in self.saved:
            m._wins = lambda *a, **k: True

    def __exit__(self, *exc):
        for m, f in self.saved:
            m._wins = f


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--only", choices=("pool", "fc"))
    args = ap.parse_args()
    if not (jit.installed() and jit.load()):
        sys.exit(f"the jit backend is not available: {jit.why_not()}")
    cases = ([] if args.only == "fc" else pool_cases()) + ([] if args.only == "pool" else fc_cases())
    for threads in (int(t) for t in args.threads.split(",")):
        print(f"\n### {threads} thread{'s' if threads > 1 else ''}\n")
        print("| op | shape | cpu µs | jit µs | cpu/jit | jit accepts |")
        print("|---|---|---:|---:|---:|---|")
        for case in cases:
            label, shape, tc, tj, acc = measure(case, threads, args.rounds)
            print(f"| {label} | {shape} | {tc:.1f} | {tj:.1f} | {tc / tj:.2f} | {'yes' if acc else 'no'} |",
                  flush=True)


if __name__ == "__main__":
    main()
