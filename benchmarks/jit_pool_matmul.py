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

import numpy as np

from _jit_timing import main
from helpers import single_op_model
from onert_py.backends.cpu.conv import conv_output_size

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


if __name__ == "__main__":
    main(__doc__.splitlines()[0], {"pool": pool_cases, "fc": fc_cases}, 15)
