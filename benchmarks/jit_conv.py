"""The jit backend's convolutions beside the cpu kernels they replace.

    python benchmarks/jit_conv.py [--rounds 11] [--threads 1,2] [--only dw|qdw|qconv]

Per case, a one-op model is compiled twice (backends="cpu", and the jit kernel forced, bypassing the jit
kernel's own geometry rule `_wins` so that the rule's numbers can be read here); the op's run closure is
timed alone (inputs set once), cpu and jit in alternating blocks of calls (A/B/A/B, ~2 ms each) per
round, the median of all per-call times. The thread count is the session's num_threads, which sets
BLAS's (threadpoolctl) and numba's (set_num_threads) for each run. Prints a markdown table per thread
count: op, shape, cpu µs, jit µs, cpu/jit (> 1: jit faster) and whether the jit kernel's rule takes it.
Quantized results are also checked equal (bit for bit) between the backends.

Cases: the float depthwise layers of the mediapipe models (benchmarks/run.py's set), the int8
convolutions of mobilenet-like models, and small and odd shapes near the rules' limits. On a small
machine shared with other work, 2-thread numbers are noisy (a call can wait a scheduler time slice).
"""
from __future__ import annotations

import numpy as np

from _jit_timing import main
from helpers import single_op_model
from onert_py.backends.cpu.conv import conv_output_size

SAME, VALID = 0, 1
RELU6 = 3


def _dw_case(x_shape, k, s, padding, act=0, mult=1, dil=1):
    n, h, w, c = x_shape
    oh, ow = (conv_output_size(d, k, s, dil, padding) for d in (h, w))
    r = np.random.default_rng(0)
    wt = r.normal(size=(1, k, k, c * mult)).astype(np.float32)
    b = r.normal(size=c * mult).astype(np.float32)
    mb = single_op_model("DEPTHWISE_CONV_2D", [("x", list(x_shape), np.float32), ("const", wt), ("const", b)],
                         [("o", [n, oh, ow, c * mult], np.float32)], padding=padding, stride_h=s, stride_w=s,
                         dilation_h_factor=dil, dilation_w_factor=dil, fused_activation_function=act,
                         depth_multiplier=mult)
    label = f"dw {k}x{k}/{s}" + (f" d{dil}" if dil > 1 else "") + (f" M{mult}" if mult > 1 else "") + \
        (" VALID" if padding == VALID else "")
    return label, "x".join(map(str, x_shape)), mb, [r.normal(size=x_shape).astype(np.float32)]


def _q_case(op, x_shape, k, s, padding, cout=None, mult=1, zp_in=-5, act=RELU6):
    n, h, w, c = x_shape
    oh, ow = (conv_output_size(d, k, s, 1, padding) for d in (h, w))
    r = np.random.default_rng(1)
    co = c * mult if op == "DEPTHWISE_CONV_2D" else cout
    w_shape = (1, k, k, co) if op == "DEPTHWISE_CONV_2D" else (co, k, k, c)
    scales = (10 ** r.uniform(-3, -2, co)).astype(np.float32)
    sx = 0.05
    ins = [("x", list(x_shape), np.int8, (sx, zp_in)),
           ("const", r.integers(-127, 128, w_shape).astype(np.int8),
            (scales, np.zeros(co, np.int64), 3 if op == "DEPTHWISE_CONV_2D" else 0)),
           ("const", r.integers(-20000, 20000, co).astype(np.int32),
            ((scales * np.float32(sx)).astype(np.float32), np.zeros(co, np.int64), 0))]
    opts = dict(padding=padding, stride_h=s, stride_w=s, dilation_h_factor=1, dilation_w_factor=1,
                fused_activation_function=act)
    if op == "DEPTHWISE_CONV_2D":
        opts["depth_multiplier"] = mult
    mb = single_op_model(op, ins, [("y", [n, oh, ow, co], np.int8, (0.1, 3))], **opts)
    kind = "qdw" if op == "DEPTHWISE_CONV_2D" else "qconv"
    label = f"{kind} {k}x{k}/{s}" + (f" M{mult}" if mult > 1 else "") + (" VALID" if padding == VALID else "")
    shape = "x".join(map(str, x_shape)) + (f" -> {cout}" if cout else "")
    return label, shape, mb, [r.integers(-128, 128, x_shape).astype(np.int8)]


def dw_cases():
    return [_dw_case([1, 96, 96, 32], 5, 1, SAME), _dw_case([1, 48, 48, 64], 5, 1, SAME),
            _dw_case([1, 24, 24, 128], 5, 1, SAME), _dw_case([1, 12, 12, 256], 5, 1, SAME),
            _dw_case([1, 112, 112, 64], 3, 2, SAME, RELU6), _dw_case([1, 130, 130, 64], 3, 2, VALID, RELU6),
            _dw_case([1, 256, 256, 8], 3, 1, SAME, RELU6), _dw_case([1, 112, 112, 24], 3, 1, SAME, RELU6),
            _dw_case([1, 56, 56, 144], 3, 1, SAME, RELU6), _dw_case([1, 68, 68, 144], 5, 2, VALID, RELU6),
            _dw_case([1, 98, 98, 32], 3, 1, VALID), _dw_case([1, 96, 96, 16], 3, 2, SAME),
            _dw_case([1, 14, 14, 672], 5, 1, SAME, RELU6), _dw_case([1, 7, 7, 1152], 5, 1, SAME, RELU6),
            _dw_case([1, 28, 28, 240], 5, 1, SAME, RELU6), _dw_case([1, 96, 96, 32], 5, 2, SAME),
            _dw_case([1, 8, 8, 64], 3, 1, SAME), _dw_case([1, 6, 6, 256], 5, 1, SAME),
            _dw_case([1, 128, 128, 8], 1, 1, VALID), _dw_case([2, 40, 40, 32], 3, 1, SAME),
            _dw_case([1, 32, 32, 16], 3, 1, SAME, mult=2), _dw_case([1, 40, 40, 32], 3, 1, SAME, dil=2),
            _dw_case([1, 4, 4, 8], 3, 1, SAME)]


def qdw_cases():
    return [_q_case("DEPTHWISE_CONV_2D", [1, 112, 112, 32], 3, 1, SAME),
            _q_case("DEPTHWISE_CONV_2D", [1, 112, 112, 96], 3, 2, SAME),
            _q_case("DEPTHWISE_CONV_2D", [1, 56, 56, 144], 3, 1, SAME),
            _q_case("DEPTHWISE_CONV_2D", [1, 28, 28, 192], 3, 1, SAME),
            _q_case("DEPTHWISE_CONV_2D", [1, 14, 14, 576], 3, 1, SAME),
            _q_case("DEPTHWISE_CONV_2D", [1, 7, 7, 960], 3, 1, SAME),
            _q_case("DEPTHWISE_CONV_2D", [1, 48, 48, 16], 3, 1, SAME),
            _q_case("DEPTHWISE_CONV_2D", [1, 28, 28, 256], 5, 1, SAME),
            _q_case("DEPTHWISE_CONV_2D", [1, 20, 20, 8], 3, 1, VALID, mult=2),
            _q_case("DEPTHWISE_CONV_2D", [1, 6, 6, 16], 3, 1, SAME)]


def qconv_cases():
    return [_q_case("CONV_2D", [1, 224, 224, 3], 3, 2, SAME, cout=32),
            _q_case("CONV_2D", [1, 96, 96, 3], 3, 2, SAME, cout=16),
            _q_case("CONV_2D", [1, 112, 112, 32], 1, 1, SAME, cout=16),
            _q_case("CONV_2D", [1, 56, 56, 24], 1, 1, SAME, cout=144),
            _q_case("CONV_2D", [1, 28, 28, 144], 1, 1, SAME, cout=32),
            _q_case("CONV_2D", [1, 14, 14, 384], 1, 1, SAME, cout=96),
            _q_case("CONV_2D", [1, 7, 7, 960], 1, 1, SAME, cout=320),
            _q_case("CONV_2D", [1, 7, 7, 320], 1, 1, SAME, cout=1280),
            _q_case("CONV_2D", [1, 24, 24, 32], 3, 1, SAME, cout=32),
            _q_case("CONV_2D", [1, 24, 24, 64], 3, 1, SAME, cout=64),
            _q_case("CONV_2D", [1, 12, 12, 96], 1, 1, SAME, cout=16),
            _q_case("CONV_2D", [1, 12, 12, 96], 1, 1, SAME, cout=64),
            _q_case("CONV_2D", [1, 16, 16, 32], 1, 1, SAME, cout=16),
            _q_case("CONV_2D", [1, 8, 8, 64], 1, 1, SAME, cout=32),
            _q_case("CONV_2D", [1, 6, 6, 192], 1, 1, SAME, cout=32),
            _q_case("CONV_2D", [1, 8, 8, 3], 3, 1, SAME, cout=4)]


if __name__ == "__main__":
    main(__doc__.splitlines()[0], {"dw": dw_cases, "qdw": qdw_cases, "qconv": qconv_cases}, 11)
