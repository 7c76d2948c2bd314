"""Quantized activations, bit-exact with LiteRT's builtin kernels over every input value."""
from __future__ import annotations

import numpy as np
import pytest

from onert_py.errors import PrepareError, UnsupportedOpError
from helpers import fit_quantization, check_builtin, run_litert_builtin, rng, run_onert, single_op_model


def _all_values(dt, shape=None):
    """Every value of an 8-bit type (a strided sample of int16), shuffled, in `shape` (odd by default)."""
    info = np.iinfo(dt)
    step = 1 if info.bits == 8 else 97
    x = np.arange(int(info.min), int(info.max) + 1, step)
    x = rng(info.bits).permutation(x).astype(dt)
    if shape is None:
        return x
    n = int(np.prod(shape))
    return np.resize(x, n).reshape(shape)




def _model(op, dt, q_in, q_out, shape=(7, 37), **options):
    return single_op_model(op, [("x", list(shape), dt, q_in)], [("y", list(shape), dt, q_out)], **options)


def _check(op, dt, q_in, q_out, **options):
    x = _all_values(dt)
    mb = _model(op, dt, q_in, q_out, shape=x.shape, **options)
    return check_builtin(mb, [x])


# Input/output parameters: multipliers below and above 1, zero points at the type's ends, equal scales.
_PARAMS = [((0.05, 3), (0.1, -2)),
           ((0.2, 0), (0.03, 1)),
           ((0.0123, -128), (0.0123, 127)),
           ((0.5, 127), (0.02, -128)),
           ((1e-3, 10), (0.7, -5))]


# LiteRT runs RELU_N1_TO_1 and RELU_0_TO_1 on 8-bit types only (int16: test_relu_n1_to_1_int16_is_refused).
@pytest.mark.parametrize("op,dt", [(op, dt) for op in ("RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1")
                                   for dt in (np.int8, np.uint8, np.int16)
                                   if dt != np.int16 or op in ("RELU", "RELU6")])
@pytest.mark.parametrize("q", _PARAMS)
def test_relu_family(op, dt, q):
    q_in, q_out = fit_quantization(q[0], dt), fit_quantization(q[1], dt)
    _check(op, dt, q_in, q_out)


def test_relu_odd_shapes_and_rank0():
    for shape in [(), (1,), (2, 3, 5, 1)]:
        x = _all_values(np.int8, shape) if shape else np.int8(-7)
        mb = _model("RELU6", np.int8, (0.04, -20), (0.03, -128), shape=shape)
        check_builtin(mb, [np.asarray(x, np.int8)])


def test_int16_relu_needs_zero_point_0():
    mb = _model("RELU", np.int16, (0.01, 3), (0.01, 0))
    with pytest.raises(PrepareError, match="zero point 0"):
        run_onert(mb, [np.zeros((7, 37), np.int16)])
    with pytest.raises(Exception):   # LiteRT refuses it too
        run_litert_builtin(mb, [np.zeros((7, 37), np.int16)])


def test_relu_n1_to_1_int16_is_refused():
    # LiteRT fails at invoke ("Only float32, uint8, int8 supported")
    mb = _model("RELU_N1_TO_1", np.int16, (0.01, 0), (0.01, 0))
    with pytest.raises(UnsupportedOpError, match="quantized int16"):
        run_onert(mb, [np.zeros((7, 37), np.int16)])


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("alpha", [0.2, -0.7, 1.5, 0.0])
@pytest.mark.parametrize("q", _PARAMS[:4])
def test_leaky_relu(dt, alpha, q):
    q_in, q_out = fit_quantization(q[0], dt), fit_quantization(q[1], dt)
    _check("LEAKY_RELU", dt, q_in, q_out, alpha=alpha)


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("q_in", [(0.05, 3), (0.1, -128), (0.02, 127), (0.5, 0), (1e-3, 40)])
@pytest.mark.parametrize("q_out", [(1 / 128, 0), (0.02, -10), (0.003, 60)])
def test_tanh(dt, q_in, q_out):
    _check("TANH", dt, fit_quantization(q_in, dt), fit_quantization(q_out, dt))


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("q_in", [(0.05, 3), (0.1, -128), (0.02, 127), (0.5, 0), (1e-3, 40)])
def test_logistic(dt, q_in):
    q_out = (1 / 256, -128) if dt == np.int8 else (1 / 256, 0)
    _check("LOGISTIC", dt, fit_quantization(q_in, dt), q_out)


def test_logistic_needs_output_scale_1_256():
    mb = _model("LOGISTIC", np.int8, (0.1, 0), (1 / 128, -128))
    with pytest.raises(PrepareError, match="1/256"):
        run_onert(mb, [np.zeros((7, 37), np.int8)])
    with pytest.raises(Exception):   # LiteRT refuses it too
        run_litert_builtin(mb, [np.zeros((7, 37), np.int8)])


@pytest.mark.parametrize("q_in", [(0.05, 3), (0.1, -128), (0.02, 127), (0.5, 0)])
@pytest.mark.parametrize("q_out", [(0.05, 3), (0.02, 127), (0.3, -128), (0.001, 0)])
def test_elu_int8(q_in, q_out):
    _check("ELU", np.int8, q_in, q_out)


def test_elu_uint8_is_refused():
    mb = _model("ELU", np.uint8, (0.1, 128), (0.1, 128))
    with pytest.raises(UnsupportedOpError, match="quantized uint8"):
        run_onert(mb, [np.zeros((7, 37), np.uint8)])


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("approximate", [False, True])
@pytest.mark.parametrize("q", [((0.05, 3), (0.04, -100)), ((0.1, -128), (0.05, 127)),
                               ((0.02, 127), (0.01, -20)), ((0.3, 0), (0.001, 0))])
def test_gelu(dt, approximate, q):
    _check("GELU", dt, fit_quantization(q[0], dt), fit_quantization(q[1], dt), approximate=approximate)


def _softmax_out(dt, out):
    if out == np.int16:
        return (1 / 32768, 0)
    return (1 / 256, -128) if dt == np.int8 else (1 / 256, 0)


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("to16", [False, True])
@pytest.mark.parametrize("q_in", [(0.05, 3), (0.1, -128), (0.02, 127), (0.5, 0), (1e-3, 40)])
@pytest.mark.parametrize("beta", [1.0, 0.3, 2.5])
@pytest.mark.parametrize("shape", [(7, 37), (2, 3, 256), (1,), (4, 1)])
def test_softmax(dt, to16, q_in, beta, shape):
    out = np.int16 if to16 else dt
    x = _all_values(dt, shape)
    mb = single_op_model("SOFTMAX", [("x", list(shape), dt, fit_quantization(q_in, dt))],
                         [("y", list(shape), out, _softmax_out(dt, out))], beta=beta)
    check_builtin(mb, [x])


def test_softmax_one_hot_saturates():
    # one large logit: its probability rounds to 256/256, clamped to the type's top
    x = np.full((3, 10), -128, np.int8)
    x[:, 4] = 127
    mb = single_op_model("SOFTMAX", [("x", [3, 10], np.int8, (0.5, 0))],
                         [("y", [3, 10], np.int8, (1 / 256, -128))], beta=1.0)
    check_builtin(mb, [x])


def test_softmax_int8_output_params_checked():
    mb = single_op_model("SOFTMAX", [("x", [2, 5], np.int8, (0.1, 0))],
                         [("y", [2, 5], np.int8, (1 / 256, 0))], beta=1.0)
    with pytest.raises(PrepareError, match="zero point -128"):
        run_onert(mb, [np.zeros((2, 5), np.int8)])
    with pytest.raises(Exception):   # LiteRT refuses it too
        run_litert_builtin(mb, [np.zeros((2, 5), np.int8)])


# ------------------------------------------------------------------------------ int16 SOFTMAX (16x8)

def _int16_values(shape, seed=5):
    """Random int16 values in `shape`, with every row's spread ranging from tight to the full type."""
    r = rng(seed)
    x = r.integers(-32768, 32768, size=shape)
    if len(shape) > 0 and shape[-1] > 1:
        rows = int(np.prod(shape[:-1]))
        spread = np.resize(np.array([1, 30, 1000, 65535]), rows).reshape(shape[:-1] + (1,))
        x = np.clip(x % spread + r.integers(-32768, 32768 - 65535 // 2, size=shape[:-1] + (1,)),
                    -32768, 32767)
    return x.astype(np.int16)


@pytest.mark.parametrize("s_in", [1 / 32768, 1e-4, 1e-3, 0.01, 0.2, 2.0])
@pytest.mark.parametrize("beta", [1.0, 0.3, 2.5])
@pytest.mark.parametrize("shape", [(7, 37), (2, 3, 300), (1,), (4, 1), (8, 2)])
def test_softmax_int16(s_in, beta, shape):
    x = _int16_values(shape)
    mb = single_op_model("SOFTMAX", [("x", list(shape), np.int16, (s_in, 0))],
                         [("y", list(shape), np.int16, (1 / 32768, 0))], beta=beta)
    check_builtin(mb, [x])


def test_softmax_int16_extremes():
    # one-hot rows (saturating at 32767), flat rows, rows spanning the whole type
    x = np.full((4, 12), -32768, np.int16)
    x[0, 3] = 32767
    x[1] = 5
    x[2, ::2] = 32767
    x[3] = np.linspace(-32768, 32767, 12).astype(np.int16)
    for s_in in (1e-4, 0.05):
        mb = single_op_model("SOFTMAX", [("x", [4, 12], np.int16, (s_in, 0))],
                             [("y", [4, 12], np.int16, (1 / 32768, 0))], beta=1.0)
        check_builtin(mb, [x])


@pytest.mark.parametrize("q_in, q_out, match", [((0.01, 0), (1 / 32768, 3), "zero point 0"),
                                                ((0.01, 0), (1 / 16384, 0), "1/32768"),
                                                ((0.01, 5), (1 / 32768, 0), "zero point 0")])
def test_softmax_int16_params_checked(q_in, q_out, match):
    mb = single_op_model("SOFTMAX", [("x", [2, 5], np.int16, q_in)],
                         [("y", [2, 5], np.int16, q_out)], beta=1.0)
    with pytest.raises(PrepareError, match=match):
        run_onert(mb, [np.zeros((2, 5), np.int16)])
    with pytest.raises(Exception):   # LiteRT refuses it too
        run_litert_builtin(mb, [np.zeros((2, 5), np.int16)])


# ------------------------------------------------------------------------------ HARD_SWISH

@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("q", [((0.05, 3), (0.04, -100)), ((0.1, -128), (0.05, 127)),
                               ((0.02, 127), (0.01, -20)), ((0.001, 10), (0.5, 5)),
                               ((0.5, 0), (0.0045, 0)), ((3.0, 0), (0.1, 0)), ((1e-4, 0), (1e-4, 0)),
                               ((0.2, -128), (0.0016, -128))])
def test_hard_swish(dt, q):
    _check("HARD_SWISH", dt, fit_quantization(q[0], dt), fit_quantization(q[1], dt))


def test_hard_swish_scale_ratio_128_is_refused():
    mb = _model("HARD_SWISH", np.int8, (0.3, 0), (0.001, 0))
    with pytest.raises(PrepareError, match="below 128"):
        run_onert(mb, [np.zeros((7, 37), np.int8)])
    with pytest.raises(Exception):   # LiteRT refuses it too
        run_litert_builtin(mb, [np.zeros((7, 37), np.int8)])


def test_hard_swish_int16_is_refused():
    mb = _model("HARD_SWISH", np.int16, (0.01, 0), (0.01, 0))
    with pytest.raises(UnsupportedOpError, match="quantized int16"):
        run_onert(mb, [np.zeros((7, 37), np.int16)])


# ------------------------------------------------------------------------------ PRELU

def _random(dt, shape, seed):
    info = np.iinfo(dt)
    return rng(seed).integers(int(info.min), int(info.max) + 1, size=shape).astype(dt)


_PRELU_Q = [((0.05, 3), (0.01, -20), (0.04, -100)),
            ((0.1, -128), (0.2, 127), (0.03, 127)),
            ((0.002, 100), (0.5, 0), (0.3, 0)),
            ((0.02, 127), (0.004, -128), (0.001, -128))]


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("shapes", [((2, 5, 7, 3), (3,)), ((2, 5, 7, 3), (1, 1, 3)), ((4, 9), (4, 9)),
                                    ((2, 3, 4), (3, 1)), ((2, 3, 2, 3, 4), (4,)), ((6,), (1,))])
@pytest.mark.parametrize("q", _PRELU_Q)
@pytest.mark.parametrize("const_alpha", [True, False])
def test_prelu(dt, shapes, q, const_alpha):
    xs, als = shapes
    adt = np.uint8 if dt == np.uint8 else np.int8
    q_in, q_al, q_out = q
    if dt == np.int16:
        q_in, q_out = (q_in[0], 0), (q_out[0], 0)
    q_in, q_out, q_al = fit_quantization(q_in, dt), fit_quantization(q_out, dt), fit_quantization(q_al, adt)
    x, al = _random(dt, xs, 1), _random(adt, als, 2)
    alpha = ("const", al, q_al) if const_alpha else ("al", list(als), adt, q_al)
    mb = single_op_model("PRELU", [("x", list(xs), dt, q_in), alpha], [("y", list(xs), dt, q_out)])
    check_builtin(mb, [x] if const_alpha else [x, al])


def test_prelu_alpha_type_checked():
    mb = single_op_model("PRELU", [("x", [2, 3], np.int8, (0.1, 0)),
                                   ("const", np.ones(3, np.uint8), (0.1, 0))],
                         [("y", [2, 3], np.int8, (0.1, 0))])
    with pytest.raises(PrepareError, match="alpha type uint8"):
        run_onert(mb, [np.zeros((2, 3), np.int8)])


# ------------------------------------------------------------------------------ int16 TANH, LOGISTIC

@pytest.mark.parametrize("op", ["TANH", "LOGISTIC"])
@pytest.mark.parametrize("s_in", [1e-4, 3e-4, 1 / 3000, 2 ** -10, 2 ** -13, 0.001, 0.01, 0.1, 1.0, 5.0])
def test_tanh_logistic_int16(op, s_in):
    x = np.arange(-32768, 32768).astype(np.int16)   # every value
    mb = single_op_model(op, [("x", [65536], np.int16, (s_in, 0))], [("y", [65536], np.int16, (2 ** -15, 0))])
    check_builtin(mb, [x])


def test_tanh_int16_output_scale_near_2_pow_minus_15():
    # TANH only checks log2 of the output scale to within 1e-3
    x = np.arange(-32768, 32768, 7).astype(np.int16)
    mb = single_op_model("TANH", [("x", [x.size], np.int16, (0.001, 0))],
                         [("y", [x.size], np.int16, (2 ** -15 * 1.0003, 0))])
    check_builtin(mb, [x])


@pytest.mark.parametrize("op, q_out, match", [("TANH", (1 / 128, 0), "2\\*\\*-15"),
                                              ("LOGISTIC", (2 ** -15 * 1.0003, 0), "1/32768"),
                                              ("LOGISTIC", (2 ** -15, 4), "zero point 0")])
def test_tanh_logistic_int16_params_checked(op, q_out, match):
    mb = single_op_model(op, [("x", [9], np.int16, (0.001, 0))], [("y", [9], np.int16, q_out)])
    with pytest.raises(PrepareError, match=match):
        run_onert(mb, [np.zeros(9, np.int16)])
    with pytest.raises(Exception):   # LiteRT refuses it too
        run_litert_builtin(mb, [np.zeros(9, np.int16)])


@pytest.mark.parametrize("op, s_in", [("TANH", 2 ** -12), ("TANH", 2 ** -11), ("LOGISTIC", 2 ** -12),
                                      # within CheckedLog2's 1e-3 of a power of two: the same kernel
                                      ("TANH", 2 ** -12 * 1.0005), ("TANH", 2 ** -11 * 0.9996),
                                      ("LOGISTIC", 2 ** -12 * 0.9994),
                                      # other powers of two take the table kernel
                                      ("LOGISTIC", 2 ** -11), ("TANH", 2 ** -10), ("LOGISTIC", 2 ** -10),
                                      ("TANH", 2 ** -8), ("LOGISTIC", 2 ** -8), ("TANH", 2 ** -13),
                                      ("TANH", 2 ** -12 * 1.002)])
def test_tanh_logistic_int16_power_of_two_scales(op, s_in):
    """Input scales 2**-12 (and 2**-11 for TANH), where LiteRT runs its gemmlowp fixed-point kernel,
    over every int16 value (saturation ends included), and the neighbouring scales of its table kernel."""
    x = np.arange(-32768, 32768).astype(np.int16)
    mb = single_op_model(op, [("x", [65536], np.int16, (s_in, 0))], [("y", [65536], np.int16, (2 ** -15, 0))])
    check_builtin(mb, [x])


@pytest.mark.parametrize("op, s_in", [("TANH", 2 ** -12), ("TANH", 2 ** -11), ("LOGISTIC", 2 ** -12)])
@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (2, 3, 17), (4, 1, 8)])
def test_tanh_logistic_int16_power_of_two_shapes(op, s_in, shape):
    """The gemmlowp kernel's SIMD blocks of 8 and 16 and its scalar tail (odd sizes, rank 0)."""
    n = int(np.prod(shape))
    x = rng(n).integers(-32768, 32768, n)
    x[: min(n, 4)] = [-32768, 32767, 0, -1][: min(n, 4)]
    x = x.astype(np.int16).reshape(shape)
    mb = single_op_model(op, [("x", list(shape), np.int16, (s_in, 0))],
                         [("y", list(shape), np.int16, (2 ** -15, 0))])
    check_builtin(mb, [x])


@pytest.mark.parametrize("op, q_in, q_out, match", [
    ("TANH", (2 ** -12, 0), (2 ** -14, 0), "2\\*\\*-15"),
    ("LOGISTIC", (2 ** -12, 0), (2 ** -15 * 1.0003, 0), "1/32768"),
    ("TANH", (2 ** -11, 3), (2 ** -15, 0), "zero point 0"),
    ("LOGISTIC", (2 ** -12, 0), (2 ** -15, -2), "zero point 0")])
def test_tanh_logistic_int16_power_of_two_params_checked(op, q_in, q_out, match):
    mb = single_op_model(op, [("x", [9], np.int16, q_in)], [("y", [9], np.int16, q_out)])
    with pytest.raises(PrepareError, match=match):
        run_onert(mb, [np.zeros(9, np.int16)])
    with pytest.raises(Exception):   # LiteRT refuses it too
        run_litert_builtin(mb, [np.zeros(9, np.int16)])


# ------------------------------------------------------------------------------ LOG_SOFTMAX

def _log_softmax_out(dt):
    return (16 / 256, 127 if dt == np.int8 else 255)


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
@pytest.mark.parametrize("q_in", [(0.05, 3), (0.1, -128), (0.02, 127), (0.5, 0), (1e-3, 40), (0.3, -5)])
@pytest.mark.parametrize("shape", [(7, 37), (2, 3, 256), (1,), (4, 1)])
def test_log_softmax(dt, q_in, shape):
    x = _all_values(dt, shape)
    mb = single_op_model("LOG_SOFTMAX", [("x", list(shape), dt, fit_quantization(q_in, dt))],
                         [("y", list(shape), dt, _log_softmax_out(dt))])
    check_builtin(mb, [x])


def test_log_softmax_one_hot_saturates():
    x = np.full((3, 10), -128, np.int8)
    x[:, 4] = 127
    mb = single_op_model("LOG_SOFTMAX", [("x", [3, 10], np.int8, (0.5, 0))],
                         [("y", [3, 10], np.int8, _log_softmax_out(np.int8))])
    check_builtin(mb, [x])


@pytest.mark.parametrize("dt, q_out", [(np.int8, (16 / 256, 0)), (np.int8, (1 / 256, 127)),
                                       (np.uint8, (16 / 256, 127))])
def test_log_softmax_output_params_checked(dt, q_out):
    mb = single_op_model("LOG_SOFTMAX", [("x", [2, 5], dt, (0.1, 0))], [("y", [2, 5], dt, q_out)])
    with pytest.raises(PrepareError, match="16/256"):
        run_onert(mb, [np.zeros((2, 5), dt)])
    with pytest.raises(Exception):   # LiteRT refuses it too
        run_litert_builtin(mb, [np.zeros((2, 5), dt)])
