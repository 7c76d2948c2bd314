"""Make the conformance corpus: small programs converted by the real TensorFlow Lite converter.

For every program this writes, under tests/conformance/corpus/:

- ``<name>.tflite`` -- the converter's output (builtin ops only, no quantization);
- ``<name>.npz``    -- deterministic inputs ``in_0, in_1, ...`` (in the order of the main
  subgraph's inputs) and the reference outputs ``out_0, ...`` (in the order of its outputs),
  plus ``source`` ("litert" when LiteRT's Interpreter produced them, "tensorflow" when LiteRT
  could not run the model and TensorFlow's own outputs were stored instead); a model with a
  dynamic shape signature may store further input sets (another batch size or sequence length)
  as ``run1_in_0, ..., run1_out_0, ...``, ``run2_...``;
- ``MANIFEST.json`` -- every model with its description, reference source, tolerances and ops
  (``extra_runs``: the shapes of the further input sets; ``litert_kernel_spread``: the max abs
  difference between LiteRT's default and reference kernels on the stored inputs, i.e. how far two
  correct float32 implementations drift apart on that model, for a dynamic-range model between its
  default path and the builtin kernels of its reference; ``converter``: a non-default converter variant
  such as float16 weights or dynamic-range quantization).

Post-training-quantized models (integer variants and dynamic range) store LiteRT's builtin kernels'
outputs without the XNNPACK delegate (``source`` "litert-builtin").

Realistic models (MobileNet/EfficientNet/U-Net style vision nets, transformer encoders/decoders)
get seeded random weights with every bias and scale non-trivial and batch-norm statistics
calibrated on image-like inputs, so activations keep a realistic scale; nothing is downloaded.

This is a developer tool: TensorFlow (the ``dev`` extra) is needed to run it, never to run the
tests. Inputs and references are deterministic; the .tflite bytes can differ between runs only in
names the converter numbers with a process-wide counter (e.g. ``while_cond_true_290``). Usage::

    python tools/conformance/generate.py [--out DIR] [--only NAME ...] [--list]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "tests" / "conformance" / "corpus"


@dataclass
class Program:
    name: str
    description: str
    build: Callable[[], tuple[Any, dict[str, np.ndarray]]]
    # tolerances used by the tests, with the reason when they differ from the defaults
    rtol: float = 1e-5
    atol: float = 1e-5
    tolerance_reason: str = ""
    tags: list[str] = field(default_factory=list)
    # converter variant: "" (float32, no optimizations), "float16" (weights stored as float16,
    # DEQUANTIZE ops in front of their consumers: the converter's float16 post-training option),
    # "dynamic_range" (Optimize.DEFAULT without a representative dataset: int8 weights, float
    # activations, hybrid ops quantizing their input on the fly), or a post-training quantization of
    # QUANTIZED_VARIANTS
    converter: str = ""


# Post-training integer quantization, calibrated on perturbed copies of the program's inputs:
# converter variant -> (supported ops, inference input/output type). Their references come from
# LiteRT's builtin kernels without the default (XNNPACK) delegate, which onert-py matches bit for bit.
QUANTIZED_VARIANTS = {
    "int8": ("TFLITE_BUILTINS_INT8", "int8"),               # full integer, int8 inputs and outputs
    "int8_uint8io": ("TFLITE_BUILTINS_INT8", "uint8"),      # full integer, uint8 inputs and outputs
    "int16x8": ("EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8", "int16"),
}


# Converter variants whose references come from LiteRT's builtin kernels without the default (XNNPACK)
# delegate: the integer ones (bit-exact), and dynamic range, whose hybrid kernels (int8 weights, inputs
# quantized per row on the fly) XNNPACK does not follow (it runs its own dynamically quantized kernels).
BUILTIN_REFERENCE_VARIANTS = (*QUANTIZED_VARIANTS, "dynamic_range")


PROGRAMS: list[Program] = []


def program(name: str, description: str, **kw: Any):
    def deco(fn):
        PROGRAMS.append(Program(name, description, fn, **kw))
        return fn
    return deco


def rng_for(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def _tf():
    import tensorflow as tf
    return tf


def _keras():
    import keras
    return keras


def spec(shape, dtype, name):
    tf = _tf()
    return tf.TensorSpec(shape, dtype, name=name)


# ----------------------------------------------------------------------------------------------
# plain graphs

@program("mlp", "Plain graph: two-layer perceptron (dense+relu, dense, softmax) built in Keras.")
def _mlp(hidden: int = 16):
    keras = _keras()
    keras.utils.set_random_seed(1)
    model = keras.Sequential([
        keras.Input((8,), batch_size=2, name="x"),
        keras.layers.Dense(hidden, activation="relu"),
        keras.layers.Dense(4),
        keras.layers.Softmax(),
    ])
    x = rng_for("mlp").standard_normal((2, 8)).astype(np.float32)
    return model, {"x": x}


@program("convnet", "Plain graph: small conv net (conv+relu, max-pool, depthwise conv, average-pool, "
                    "flatten, dense) built in Keras.")
def _convnet(filters: int = 4, units: int = 5):
    keras = _keras()
    keras.utils.set_random_seed(2)
    model = keras.Sequential([
        keras.Input((8, 8, 3), batch_size=1, name="image"),
        keras.layers.Conv2D(filters, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.DepthwiseConv2D(3, padding="valid", activation="relu6"),
        keras.layers.AveragePooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dense(units),
    ])
    x = rng_for("convnet").standard_normal((1, 8, 8, 3)).astype(np.float32)
    return model, {"image": x}


@program("elementwise_mix", "Plain graph: tf.function mixing elementwise math, reductions, reshape, "
                            "transpose, slicing, concat and a batch matmul.")
def _elementwise_mix():
    tf = _tf()
    w = tf.constant(rng_for("elementwise_mix/w").standard_normal((4, 3)).astype(np.float32))

    @tf.function(input_signature=[spec([2, 3, 4], tf.float32, "a"), spec([2, 3, 4], tf.float32, "b")])
    def f(a, b):
        c = tf.tanh(a) * tf.exp(-tf.abs(b)) + tf.maximum(a, b)
        d = tf.reduce_mean(c, axis=1, keepdims=True) - tf.reduce_max(c, axis=2, keepdims=True)
        e = tf.transpose(d, [0, 2, 1])
        f_ = tf.reshape(c, [2, 12])[:, 2:10]
        g = tf.matmul(c, w)
        return tf.concat([tf.reshape(e, [2, -1]), f_], axis=1), tf.nn.sigmoid(g)

    r = rng_for("elementwise_mix")
    return f, {"a": r.standard_normal((2, 3, 4)).astype(np.float32),
               "b": r.standard_normal((2, 3, 4)).astype(np.float32)}


# ----------------------------------------------------------------------------------------------
# tf.cond

@program("cond_chain", "tf.cond chain: three conds in sequence, each on one element of the input, "
                       "so both branch kinds are taken within one run; int and float outputs.")
def _cond_chain():
    tf = _tf()

    @tf.function(input_signature=[spec([4], tf.float32, "x")])
    def f(x):
        y = tf.cond(x[0] > 0, lambda: x * 2.0, lambda: x - 1.0)
        z = tf.cond(y[1] > 0, lambda: tf.square(y), lambda: tf.negative(y) + 0.5)
        k = tf.cond(tf.reduce_sum(z) > 100.0, lambda: tf.constant(7, tf.int32),
                    lambda: tf.cast(tf.reduce_sum(z), tf.int32))
        return z, k

    return f, {"x": np.array([1.5, -0.75, 2.0, -3.0], np.float32)}


@program("cond_nested", "tf.cond nests: a cond whose branches contain further conds (depth 3).")
def _cond_nested():
    tf = _tf()

    @tf.function(input_signature=[spec([3], tf.float32, "x"), spec([], tf.int32, "sel")])
    def f(x, sel):
        def inner(v):
            return tf.cond(sel > 1,
                           lambda: tf.cond(sel > 2, lambda: v * 3.0, lambda: v + 10.0),
                           lambda: v - 5.0)

        return tf.cond(tf.reduce_sum(x) > 0, lambda: inner(x) * 2.0, lambda: inner(-x))

    return f, {"x": np.array([0.5, 1.0, -0.25], np.float32), "sel": np.array(2, np.int32)}


@program("cond_multi", "tf.cond returning several values of different dtypes and shapes, one branch "
                       "passing an input straight through.")
def _cond_multi():
    tf = _tf()

    @tf.function(input_signature=[spec([2, 3], tf.float32, "x"), spec([2], tf.int32, "n"),
                                  spec([], tf.bool, "p")])
    def f(x, n, p):
        return tf.cond(p, lambda: (x, n * 2, tf.reduce_sum(x, axis=0)),
                       lambda: (x * x, n + 1, tf.reduce_max(x, axis=0)))

    r = rng_for("cond_multi")
    return f, {"x": r.standard_normal((2, 3)).astype(np.float32), "n": np.array([3, -4], np.int32),
               "p": np.array(False)}


@program("cond_dynamic_shape", "tf.cond whose branches return different shapes (a slice or a "
                               "doubled concat), so the IF output is dynamic; then a reduction.")
def _cond_dynamic_shape():
    tf = _tf()

    @tf.function(input_signature=[spec([4], tf.float32, "x"), spec([], tf.bool, "p")])
    def f(x, p):
        y = tf.cond(p, lambda: x[1:3] * 2.0, lambda: tf.concat([x, x + 1.0], axis=0))
        return y, tf.reduce_sum(y)

    return f, {"x": np.array([0.5, -1.0, 2.0, 4.0], np.float32), "p": np.array(False)}


# ----------------------------------------------------------------------------------------------
# tf.while_loop

@program("while_counter", "tf.while_loop counter: count up to an input bound (int32 scalars).")
def _while_counter():
    tf = _tf()

    @tf.function(input_signature=[spec([], tf.int32, "n")])
    def f(n):
        return tf.while_loop(lambda i: i < n, lambda i: i + 1, [tf.constant(0)])

    return f, {"n": np.array(7, np.int32)}


@program("while_accumulator", "tf.while_loop accumulator: acc += x * i for i < n, plus a counter.")
def _while_accumulator():
    tf = _tf()

    @tf.function(input_signature=[spec([3], tf.float32, "x"), spec([], tf.int32, "n")])
    def f(x, n):
        i, acc = tf.while_loop(lambda i, acc: i < n,
                               lambda i, acc: (i + 1, acc + x * tf.cast(i, tf.float32)),
                               [tf.constant(0), tf.zeros([3])])
        return i, acc

    return f, {"x": np.array([1.0, -2.0, 0.5], np.float32), "n": np.array(5, np.int32)}


@program("while_data_dependent", "tf.while_loop whose trip count depends on the data: halve/scale a "
                                 "vector until its norm drops below a threshold.")
def _while_data_dependent():
    tf = _tf()

    @tf.function(input_signature=[spec([4], tf.float32, "x")])
    def f(x):
        def body(v, k):
            return v * 0.6 + 0.01, k + 1
        v, k = tf.while_loop(lambda v, k: tf.norm(v) > 0.5, body, [x, tf.constant(0)])
        return v, k

    return f, {"x": np.array([3.0, -1.0, 2.0, 0.5], np.float32)}


@program("while_concat_grow", "Growing loop: concatenate a row per iteration (shape_invariants "
                              "[None, 3]), so the carried value and the output are dynamic.")
def _while_concat_grow():
    tf = _tf()

    @tf.function(input_signature=[spec([1, 3], tf.float32, "row"), spec([], tf.int32, "n")])
    def f(row, n):
        def body(i, acc):
            nxt = acc[-1:] * 1.5 + tf.cast(i, tf.float32)
            return i + 1, tf.concat([acc, nxt], axis=0)
        _, acc = tf.while_loop(lambda i, acc: i < n, body, [tf.constant(0), row],
                               shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, 3])])
        return acc

    return f, {"row": np.array([[1.0, 2.0, -1.0]], np.float32), "n": np.array(4, np.int32)}


@program("while_pad_grow", "Growing loop: pad a 1-D vector by one element each iteration "
                           "(shape_invariants [None]) and also return its running sum.")
def _while_pad_grow():
    tf = _tf()

    @tf.function(input_signature=[spec([2], tf.float32, "v"), spec([], tf.int32, "n")])
    def f(v, n):
        def body(i, acc, s):
            acc = tf.pad(acc, [[0, 1]], constant_values=tf.cast(i, tf.float32))
            return i + 1, acc, s + tf.reduce_sum(acc)
        _, acc, s = tf.while_loop(lambda i, acc, s: i < n, body, [tf.constant(0), v, tf.constant(0.0)],
                                  shape_invariants=[tf.TensorShape([]), tf.TensorShape([None]),
                                                    tf.TensorShape([])])
        return acc, s

    return f, {"v": np.array([0.5, -1.0], np.float32), "n": np.array(5, np.int32)}


@program("while_partial_outputs", "tf.while_loop carrying five values (counter, two accumulators, "
                                  "a loop-invariant matrix, a flag) of which only two are returned.")
def _while_partial_outputs():
    tf = _tf()

    @tf.function(input_signature=[spec([2, 2], tf.float32, "m"), spec([2], tf.float32, "x"),
                                  spec([], tf.int32, "n")])
    def f(m, x, n):
        def body(i, a, b, mat, flag):
            a2 = tf.linalg.matvec(mat, a) * 0.5 + 1.0
            b2 = b + tf.reduce_sum(a2)
            return i + 1, a2, b2, mat, tf.logical_not(flag)
        _, a, b, _, flag = tf.while_loop(lambda i, a, b, mat, flag: i < n, body,
                                         [tf.constant(0), x, tf.constant(0.0), m, tf.constant(True)])
        return b, flag

    r = rng_for("while_partial_outputs")
    return f, {"m": r.standard_normal((2, 2)).astype(np.float32), "x": np.array([1.0, -0.5], np.float32),
               "n": np.array(6, np.int32)}


@program("while_zero_iterations", "tf.while_loop that runs zero times for the stored input (the "
                                  "outputs are the initial values).")
def _while_zero():
    tf = _tf()

    @tf.function(input_signature=[spec([3], tf.float32, "x"), spec([], tf.int32, "n")])
    def f(x, n):
        i, y = tf.while_loop(lambda i, y: i < n, lambda i, y: (i + 1, y * 2.0 + 1.0), [tf.constant(0), x])
        return i, y

    return f, {"x": np.array([1.0, 2.0, 3.0], np.float32), "n": np.array(0, np.int32)}


@program("while_nested", "Nested tf.while_loop: the inner loop's bound depends on the outer counter.")
def _while_nested():
    tf = _tf()

    @tf.function(input_signature=[spec([], tf.int32, "n"), spec([2], tf.float32, "x")])
    def f(n, x):
        def outer(i, acc):
            def inner(j, a):
                return j + 1, a + x * tf.cast(i * j, tf.float32)
            _, acc = tf.while_loop(lambda j, a: j < i, inner, [tf.constant(0), acc])
            return i + 1, acc
        return tf.while_loop(lambda i, acc: i < n, outer, [tf.constant(0), tf.zeros([2])])[1]

    return f, {"n": np.array(4, np.int32), "x": np.array([1.0, -0.5], np.float32)}


@program("cond_in_while", "tf.cond inside a tf.while_loop body (Collatz-like step, int32) with a "
                          "float side value updated in both branches.")
def _cond_in_while():
    tf = _tf()

    @tf.function(input_signature=[spec([], tf.int32, "start"), spec([], tf.float32, "w")])
    def f(start, w):
        def body(v, steps, acc):
            v2, acc2 = tf.cond(v % 2 == 0, lambda: (v // 2, acc * 0.5),
                               lambda: (3 * v + 1, acc + w))
            return v2, steps + 1, acc2
        return tf.while_loop(lambda v, steps, acc: v > 1, body, [start, tf.constant(0), tf.constant(1.0)])

    return f, {"start": np.array(6, np.int32), "w": np.array(0.25, np.float32)}


@program("while_in_cond", "tf.while_loop inside a tf.cond branch (the other branch is a plain op).")
def _while_in_cond():
    tf = _tf()

    @tf.function(input_signature=[spec([3], tf.float32, "x"), spec([], tf.int32, "n")])
    def f(x, n):
        def looping():
            return tf.while_loop(lambda i, y: i < n, lambda i, y: (i + 1, y * 1.1 + 0.2), [tf.constant(0), x])[1]
        return tf.cond(n > 2, looping, lambda: x * -1.0)

    return f, {"x": np.array([0.5, -1.5, 2.0], np.float32), "n": np.array(4, np.int32)}


@program("tensorarray_fixed", "Fixed-size TensorArray (size 5) written in a tf.while_loop then "
                              "stacked.")
def _tensorarray_fixed():
    tf = _tf()

    @tf.function(input_signature=[spec([3], tf.float32, "x")])
    def f(x):
        ta = tf.TensorArray(tf.float32, size=5, element_shape=[3])

        def body(i, v, ta):
            v = tf.sin(v) + tf.cast(i, tf.float32) * 0.1
            return i + 1, v, ta.write(i, v)
        _, _, ta = tf.while_loop(lambda i, v, ta: i < 5, body, [tf.constant(0), x, ta])
        return ta.stack()

    return f, {"x": np.array([0.1, 0.7, -1.3], np.float32)}


@program("while_dynamic_input", "tf.while_loop over an input with a dynamic batch dimension "
                                "(shape signature [-1, 2]); stored input has batch 3.")
def _while_dynamic_input():
    tf = _tf()

    @tf.function(input_signature=[spec([None, 2], tf.float32, "x")])
    def f(x):
        def body(i, y):
            return i + 1, y * 0.5 + tf.reduce_mean(y, axis=0, keepdims=True)
        return tf.while_loop(lambda i, y: i < 3, body, [tf.constant(0), x])[1]

    return f, {"x": rng_for("while_dynamic_input").standard_normal((3, 2)).astype(np.float32)}


@program("while_rnn_weights", "tf.while_loop with an input-given trip count over captured weights: a tanh "
                              "RNN cell h = tanh(x U + h W + b) (U [3, 4], W [4, 4], b [4] captured "
                              "constants, h0 = 0) run n times; returns h and the counter.")
def _while_rnn_weights():
    tf = _tf()
    r = rng_for("while_rnn_weights/weights")
    u = tf.constant((r.standard_normal((3, 4)) * 0.6).astype(np.float32))
    w = tf.constant((r.standard_normal((4, 4)) * 0.5).astype(np.float32))
    b = tf.constant((r.standard_normal((4,)) * 0.1).astype(np.float32))

    @tf.function(input_signature=[spec([2, 3], tf.float32, "x"), spec([], tf.int32, "n")])
    def f(x, n):
        xu = tf.matmul(x, u)
        i, h = tf.while_loop(lambda i, h: i < n, lambda i, h: (i + 1, tf.tanh(xu + tf.matmul(h, w) + b)),
                             [tf.constant(0), tf.zeros([2, 4])])
        return h, i

    return f, {"x": rng_for("while_rnn_weights").standard_normal((2, 3)).astype(np.float32),
               "n": np.array(4, np.int32)}


@program("while_nested_weights", "Nested tf.while_loop with captured weights and a tf.cond in the inner "
                                 "body: the outer loop runs an input-given n times, the inner one 2 times "
                                 "h = tanh(h W + b); the outer body then picks relu(h) V or h * s by the "
                                 "sign of h's sum (W [3, 3], V [3, 3], b [3], s [3] captured constants).")
def _while_nested_weights():
    tf = _tf()
    r = rng_for("while_nested_weights/weights")
    w = tf.constant((r.standard_normal((3, 3)) * 0.7).astype(np.float32))
    v = tf.constant((r.standard_normal((3, 3)) * 0.7).astype(np.float32))
    b = tf.constant((r.standard_normal((3,)) * 0.2).astype(np.float32))
    s = tf.constant(r.uniform(0.5, 1.5, (3,)).astype(np.float32))

    @tf.function(input_signature=[spec([1, 3], tf.float32, "x"), spec([], tf.int32, "n")])
    def f(x, n):
        def outer(i, h):
            _, h = tf.while_loop(lambda j, h: j < 2, lambda j, h: (j + 1, tf.tanh(tf.matmul(h, w) + b)),
                                 [tf.constant(0), h])
            h = tf.cond(tf.reduce_sum(h) > 0, lambda: tf.matmul(tf.nn.relu(h), v), lambda: h * s)
            return i + 1, h + x
        return tf.while_loop(lambda i, h: i < n, outer, [tf.constant(0), x])[1]

    return f, {"x": rng_for("while_nested_weights").standard_normal((1, 3)).astype(np.float32),
               "n": np.array(3, np.int32)}


@program("mlp_dynamic_batch", "Plain graph: Keras MLP with an unknown batch size (shape signature "
                              "[-1, 6]); stored input has batch 3.")
def _mlp_dynamic_batch():
    keras = _keras()
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((6,), name="x"), keras.layers.Dense(5, activation="tanh"),
                              keras.layers.Dense(3)])
    return model, {"x": rng_for("mlp_dynamic_batch").standard_normal((3, 6)).astype(np.float32)}


# ----------------------------------------------------------------------------------------------
# Keras recurrent layers (unroll=False -> WHILE)

def _rnn_model(name: str, layer_cls: str, return_sequences: bool, units: int = 4):
    keras = _keras()
    keras.utils.set_random_seed(zlib.crc32(name.encode()) % 10000)
    layer = getattr(keras.layers, layer_cls)(units, return_sequences=return_sequences, unroll=False)
    model = keras.Sequential([keras.Input((5, 3), batch_size=2, name="seq"), layer,
                              keras.layers.Dense(2)])
    x = rng_for(name).standard_normal((2, 5, 3)).astype(np.float32)
    return model, {"seq": x}


@program("keras_simplernn", "Keras SimpleRNN(4, unroll=False, return_sequences=True) + Dense, "
                            "batch 2, 5 steps, 3 features.")
def _keras_simplernn():
    return _rnn_model("keras_simplernn", "SimpleRNN", True)


@program("keras_gru", "Keras GRU(4, unroll=False) + Dense, batch 2, 5 steps, 3 features.")
def _keras_gru():
    return _rnn_model("keras_gru", "GRU", False)


@program("keras_lstm", "Keras LSTM(4, unroll=False, return_sequences=True) + Dense, batch 2, "
                       "5 steps, 3 features.")
def _keras_lstm(units: int = 4):
    return _rnn_model("keras_lstm", "LSTM", True, units)


@program("lstm", "Keras 2 (tf_keras) LSTM(32, return_sequences=True) + Dense(4), which the converter fuses "
                 "into one UNIDIRECTIONAL_SEQUENCE_LSTM (Keras 3's LSTM becomes a WHILE loop instead); batch 2, "
                 "6 steps, 32 features (so every gate weight has 1024 elements, enough for dynamic-range "
                 "quantization). Needs the tf-keras package.")
def _lstm():
    import tf_keras
    tf_keras.utils.set_random_seed(_seed("lstm"))
    model = tf_keras.Sequential([tf_keras.Input((6, 32), batch_size=2, name="seq"),
                                 tf_keras.layers.LSTM(32, return_sequences=True, unroll=False),
                                 tf_keras.layers.Dense(4)])
    return model, {"seq": rng_for("lstm").standard_normal((2, 6, 32)).astype(np.float32)}


# ----------------------------------------------------------------------------------------------
# greedy decoding

_VOCAB, _EMB, _HID, _END, _MAX_STEPS = 12, 6, 8, 4, 10


def _decoder_weights():
    r = rng_for("greedy_decode/weights")
    return (r.standard_normal((_VOCAB, _EMB)).astype(np.float32),
            (r.standard_normal((_EMB + _HID, _HID)) * 0.6).astype(np.float32),
            (r.standard_normal((_HID,)) * 0.1).astype(np.float32),
            (r.standard_normal((_HID, _VOCAB)) * 1.5).astype(np.float32))


def _decoder_step(tf, emb, w_h, b_h, w_o, tok, h):
    e = tf.gather(emb, tok)                                # [1, EMB]
    h = tf.tanh(tf.matmul(tf.concat([e, h], axis=1), w_h) + b_h)
    logits = tf.matmul(h, w_o)
    nxt = tf.cast(tf.argmax(logits, axis=1), tf.int32)     # [1]
    return nxt, h


@program("greedy_decode", "Greedy decoding loop: embedding lookup -> tanh RNN cell -> dense -> argmax "
                          "-> fed back; at most 10 steps, stops early on the end token 4; tokens are "
                          "written into a fixed [10] buffer (padding -1) and the step count returned.")
def _greedy_decode():
    tf = _tf()
    emb, w_h, b_h, w_o = (tf.constant(a) for a in _decoder_weights())

    @tf.function(input_signature=[spec([1], tf.int32, "start_token"), spec([1, _HID], tf.float32, "h0")])
    def f(start_token, h0):
        def cond(i, tok, h, out, done):
            return tf.logical_and(i < _MAX_STEPS, tf.logical_not(done))

        def body(i, tok, h, out, done):
            nxt, h = _decoder_step(tf, emb, w_h, b_h, w_o, tok, h)
            out = tf.tensor_scatter_nd_update(out, tf.reshape(i, [1, 1]), nxt)
            return i + 1, nxt, h, out, tf.equal(nxt[0], _END)

        out0 = tf.fill([_MAX_STEPS], -1)
        n, _, h, out, _ = tf.while_loop(cond, body, [tf.constant(0), start_token, h0, out0, tf.constant(False)])
        return out, n, h

    h0 = (rng_for("greedy_decode").standard_normal((1, _HID)) * 0.5).astype(np.float32)
    return f, {"start_token": np.array([1], np.int32), "h0": h0}


def _grow_decoder(name: str, from_empty: bool):
    tf = _tf()
    emb, w_h, b_h, w_o = (tf.constant(a) for a in _decoder_weights())

    @tf.function(input_signature=[spec([1], tf.int32, "start_token"), spec([1, _HID], tf.float32, "h0")])
    def f(start_token, h0):
        def cond(i, tok, h, seq):
            return tf.logical_and(i < _MAX_STEPS, tf.not_equal(tok[0], _END))

        def body(i, tok, h, seq):
            nxt, h = _decoder_step(tf, emb, w_h, b_h, w_o, tok, h)
            return i + 1, nxt, h, tf.concat([seq, nxt], axis=0)

        seq0 = tf.zeros([0], tf.int32) if from_empty else start_token
        _, _, _, seq = tf.while_loop(cond, body, [tf.constant(0), start_token, h0, seq0],
                                     shape_invariants=[tf.TensorShape([]), tf.TensorShape([1]),
                                                       tf.TensorShape([1, _HID]), tf.TensorShape([None])])
        return seq

    h0 = (rng_for(name).standard_normal((1, _HID)) * 0.5).astype(np.float32)
    return f, {"start_token": np.array([5], np.int32), "h0": h0}


@program("greedy_decode_grow", "Greedy decoding loop emitting a growing token sequence (starts as the "
                               "start token, concat per step, shape_invariants [None]); at most 10 "
                               "steps, early stop on the end token 4.")
def _greedy_decode_grow():
    return _grow_decoder("greedy_decode_grow", from_empty=False)


@program("greedy_decode_grow_empty", "As greedy_decode_grow but the carried sequence starts empty "
                                     "(shape [0]); LiteRT's WHILE fails to invoke on it, so the "
                                     "references are TensorFlow's.")
def _greedy_decode_grow_empty():
    return _grow_decoder("greedy_decode_grow_empty", from_empty=True)


# ----------------------------------------------------------------------------------------------
# realistic models: MobileNet / EfficientNet / U-Net style vision nets and transformer-style
# encoders/decoders, with seeded random weights (nothing is downloaded). Zero biases, unit scales
# and batch-norm statistics are replaced by seeded values so that every parameter matters and the
# activations keep a realistic scale through the whole network.

def _seed(name: str) -> int:
    return zlib.crc32(name.encode()) % 100000


def _realistic_weights(model: Any, name: str, calibration: Any = None) -> None:
    """Give every all-zero weight (biases, LayerNorm/BatchNorm beta) a small seeded value and every
    all-one weight (gamma) a seeded scale around 1; then, when ``calibration`` inputs are given,
    set the BatchNormalization moving statistics to the statistics of that batch (momentum 0 and one
    training-mode call), so the folded convolutions neither blow up nor vanish the activations."""
    keras = _keras()
    r = rng_for(f"{name}/weights")
    bns = []
    for layer in model._flatten_layers(include_self=False):
        if isinstance(layer, keras.layers.BatchNormalization):
            bns.append(layer)
        for w in layer.weights:
            if not w.trainable:
                continue
            v = np.asarray(w.numpy())
            if v.size and np.all(v == 0):
                w.assign((r.standard_normal(v.shape) * 0.1).astype(v.dtype))
            elif v.size and np.all(v == 1):
                w.assign(r.uniform(0.7, 1.3, v.shape).astype(v.dtype))
    if calibration is not None and bns:
        for bn in bns:
            bn.momentum = 0.0
        model(calibration, training=True)


def _smooth_images(r: np.random.Generator, shape, lo: float, hi: float) -> np.ndarray:
    """Image-like inputs: low-frequency random fields (bilinear upsampling of an 8x coarser grid)
    plus a little pixel noise, quantized to 8-bit pixel levels (as decoded images are) and scaled
    into [lo, hi]."""
    n, h, w, c = shape
    gh, gw = h // 8 + 2, w // 8 + 2
    grid = r.random((n, gh, gw, c))
    ys = np.linspace(0, gh - 1.001, h)
    xs = np.linspace(0, gw - 1.001, w)
    y0, x0 = ys.astype(int), xs.astype(int)
    fy, fx = (ys - y0)[None, :, None, None], (xs - x0)[None, None, :, None]
    top = grid[:, y0][:, :, x0] * (1 - fx) + grid[:, y0][:, :, x0 + 1] * fx
    bot = grid[:, y0 + 1][:, :, x0] * (1 - fx) + grid[:, y0 + 1][:, :, x0 + 1] * fx
    img = top * (1 - fy) + bot * fy + r.standard_normal(shape) * 0.03
    pixels = np.round((img - img.min()) / (img.max() - img.min()) * 255.0)
    return (lo + (hi - lo) * (pixels / 255.0)).astype(np.float32)


def _token_ids(r: np.random.Generator, batch: int, length: int, vocab: int, lengths=None) -> np.ndarray:
    """Token ids in [2, vocab) with id 1 as [CLS] first and 0 as padding after each row's length."""
    ids = r.integers(2, vocab, size=(batch, length)).astype(np.int32)
    ids[:, 0] = 1
    for b, n in enumerate(lengths or [length] * batch):
        ids[b, n:] = 0
    return ids


@program("mobilenet_v2", "Realistic: keras.applications.MobileNetV2(alpha=0.35, 96x96x3, weights=None, "
                         "10 classes, softmax) with seeded weights and calibrated batch-norm statistics "
                         "(folded by the converter); input image in [-1, 1].")
def _mobilenet_v2():
    keras = _keras()
    keras.utils.set_random_seed(_seed("mobilenet_v2"))
    model = keras.applications.MobileNetV2(input_tensor=keras.Input((96, 96, 3), batch_size=1, name="image"),
                                           alpha=0.35, weights=None, classes=10)
    r = rng_for("mobilenet_v2")
    _realistic_weights(model, "mobilenet_v2", _smooth_images(r, (8, 96, 96, 3), -1.0, 1.0))
    return model, {"image": _smooth_images(r, (1, 96, 96, 3), -1.0, 1.0)}


def _hard_sigmoid(keras, x):
    # MobileNetV3's hard sigmoid: relu6(x + 3) / 6
    return keras.layers.Rescaling(1.0 / 6.0)(keras.layers.ReLU(6.0)(keras.layers.Rescaling(1.0, offset=3.0)(x)))


def _hard_swish(keras, x):
    return keras.layers.Multiply()([x, _hard_sigmoid(keras, x)])


def _se_block(keras, x, channels: int, squeeze: int, gate: str):
    s = keras.layers.GlobalAveragePooling2D(keepdims=True)(x)
    s = keras.layers.Conv2D(squeeze, 1, activation="relu" if gate == "hard_sigmoid" else "swish")(s)
    s = keras.layers.Conv2D(channels, 1)(s)
    s = _hard_sigmoid(keras, s) if gate == "hard_sigmoid" else keras.layers.Activation("sigmoid")(s)
    return keras.layers.Multiply()([x, s])


@program("mobilenet_v3_small_blocks", "Realistic: MobileNetV3-small-style stack (conv 3x3/2 + "
                                      "hard-swish; depthwise 3x3/2 with squeeze-excite (relu, hard "
                                      "sigmoid); inverted residuals with depthwise 5x5/2 and 3x3, "
                                      "hard-swish and SE, residual add; 1x1 conv, global average pool, "
                                      "1x1 conv + hard-swish, dense logits) on a 64x64 image in [-1, 1].")
def _mobilenet_v3_small():
    keras = _keras()
    L = keras.layers
    keras.utils.set_random_seed(_seed("mobilenet_v3_small_blocks"))

    def conv_bn(x, c, k=1, s=1, act=None):
        x = L.Conv2D(c, k, strides=s, padding="same", use_bias=False)(x)
        x = L.BatchNormalization(epsilon=1e-3)(x)
        return _hard_swish(keras, x) if act == "hs" else (L.ReLU()(x) if act == "relu" else x)

    def dw_bn(x, k, s, act):
        x = L.DepthwiseConv2D(k, strides=s, padding="same", use_bias=False)(x)
        x = L.BatchNormalization(epsilon=1e-3)(x)
        return _hard_swish(keras, x) if act == "hs" else L.ReLU()(x)

    def block(x, expand, out, k, s, se, act):
        inp = x
        c_in = x.shape[-1]
        if expand != c_in:
            x = conv_bn(x, expand, act=act)
        x = dw_bn(x, k, s, act)
        if se:
            x = _se_block(keras, x, expand, max(8, expand // 4), "hard_sigmoid")
        x = conv_bn(x, out)
        if s == 1 and c_in == out:
            x = L.Add()([inp, x])
        return x

    image = keras.Input((64, 64, 3), batch_size=1, name="image")
    x = conv_bn(image, 16, 3, 2, "hs")
    x = block(x, 16, 16, 3, 2, True, "relu")
    x = block(x, 72, 24, 3, 2, False, "relu")
    x = block(x, 88, 24, 3, 1, False, "relu")
    x = block(x, 96, 40, 5, 2, True, "hs")
    x = block(x, 120, 40, 5, 1, True, "hs")
    x = conv_bn(x, 96, act="hs")
    x = L.GlobalAveragePooling2D(keepdims=True)(x)
    x = L.Conv2D(128, 1)(x)
    x = _hard_swish(keras, x)
    x = L.Flatten()(x)
    x = L.Dropout(0.2)(x)
    logits = L.Dense(10)(x)
    model = keras.Model(image, logits)
    r = rng_for("mobilenet_v3_small_blocks")
    _realistic_weights(model, "mobilenet_v3_small_blocks", _smooth_images(r, (8, 64, 64, 3), -1.0, 1.0))
    return model, {"image": _smooth_images(r, (1, 64, 64, 3), -1.0, 1.0)}


_EFFICIENTNET = ("EfficientNet-style stem and MBConv blocks (input normalization, conv 3x3/2 + swish, "
                 "expand 1x1 + swish, depthwise 3x3 and 5x5/2 + swish, squeeze-excite with sigmoid gate, "
                 "project 1x1, residual add; head 1x1 conv, global average pool, dense softmax), batch 2 "
                 "of 48x48 images in [0, 1]")


@program("efficientnet_blocks", f"Realistic: {_EFFICIENTNET}.")
def _efficientnet_blocks():
    return _efficientnet("efficientnet_blocks")


@program("efficientnet_blocks_dynamic_batch", "Realistic: the efficientnet_blocks network with an unknown "
                                              "batch size, as from_keras_model writes it (shape signature "
                                              "[-1, 48, 48, 3] and -1 down the graph); run with batch 3 "
                                              "and batch 1.")
def _efficientnet_blocks_dynamic_batch():
    return _efficientnet("efficientnet_blocks_dynamic_batch", batch_sizes=(3, 1))


@program("efficientnet_blocks_fp16", f"Realistic: {_EFFICIENTNET}; converted with float16 weights "
                                     "(Optimize.DEFAULT, supported_types [float16]), so every weight "
                                     "reaches its op through a DEQUANTIZE (TensorFlow, running the "
                                     "float32 weights, differs by the weight rounding).",
         converter="float16")
def _efficientnet_blocks_fp16():
    return _efficientnet("efficientnet_blocks")


def _efficientnet(name: str, batch_sizes: tuple[int, ...] = (2,)):
    """batch_sizes: one = that batch declared; several = the batch left unknown and one feed per size."""
    keras = _keras()
    L = keras.layers
    keras.utils.set_random_seed(_seed(name))

    def mbconv(x, expand_ratio, out, k, s):
        inp = x
        c_in = x.shape[-1]
        c = c_in * expand_ratio
        if expand_ratio != 1:
            x = L.Conv2D(c, 1, use_bias=False)(x)
            x = L.BatchNormalization()(x)
            x = L.Activation("swish")(x)
        x = L.DepthwiseConv2D(k, strides=s, padding="same", use_bias=False)(x)
        x = L.BatchNormalization()(x)
        x = L.Activation("swish")(x)
        x = _se_block(keras, x, c, max(1, c_in // 4), "sigmoid")
        x = L.Conv2D(out, 1, use_bias=False)(x)
        x = L.BatchNormalization()(x)
        if s == 1 and c_in == out:
            x = L.Dropout(0.2, noise_shape=(None, 1, 1, 1))(x)
            x = L.Add()([x, inp])
        return x

    image = keras.Input((48, 48, 3), batch_size=batch_sizes[0] if len(batch_sizes) == 1 else None, name="image")
    x = L.Normalization(mean=[0.485, 0.456, 0.406], variance=[0.229 ** 2, 0.224 ** 2, 0.225 ** 2])(image)
    x = L.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(x)
    x = L.BatchNormalization()(x)
    x = L.Activation("swish")(x)
    x = mbconv(x, 1, 8, 3, 1)
    x = mbconv(x, 6, 12, 3, 2)
    x = mbconv(x, 6, 12, 3, 1)
    x = mbconv(x, 6, 20, 5, 2)
    x = mbconv(x, 6, 20, 5, 1)
    x = L.Conv2D(96, 1, use_bias=False)(x)
    x = L.BatchNormalization()(x)
    x = L.Activation("swish")(x)
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dropout(0.2)(x)
    probs = L.Dense(10, activation="softmax")(x)
    model = keras.Model(image, probs)
    r = rng_for(name)
    _realistic_weights(model, name, _smooth_images(r, (8, 48, 48, 3), 0.0, 1.0))
    feeds = [{"image": _smooth_images(r, (b, 48, 48, 3), 0.0, 1.0)} for b in batch_sizes]
    return model, feeds if len(feeds) > 1 else feeds[0]


@program("unet_tiny", "Realistic: tiny U-Net segmenter on a 32x32 image in [0, 1]: two encoder stages "
                      "(conv 3x3 + BN + relu, max-pool), bottleneck, decoder with Conv2DTranspose "
                      "stride 2 + concat skip and bilinear upsampling + concat skip, per-pixel softmax "
                      "over 3 classes; a second head resizes the logits to 48x48 (nearest).")
def _unet_tiny():
    keras = _keras()
    L = keras.layers
    keras.utils.set_random_seed(_seed("unet_tiny"))

    def conv_block(x, c):
        for _ in range(2):
            x = L.Conv2D(c, 3, padding="same", use_bias=False)(x)
            x = L.BatchNormalization()(x)
            x = L.ReLU()(x)
        return x

    image = keras.Input((32, 32, 3), batch_size=1, name="image")
    e1 = conv_block(image, 8)                                   # 32x32
    e2 = conv_block(L.MaxPooling2D(2)(e1), 16)                  # 16x16
    b = conv_block(L.MaxPooling2D(2)(e2), 32)                   # 8x8
    d2 = L.Conv2DTranspose(16, 3, strides=2, padding="same")(b)  # 16x16
    d2 = conv_block(L.Concatenate()([d2, e2]), 16)
    d1 = L.UpSampling2D(2, interpolation="bilinear")(d2)        # 32x32
    d1 = L.Conv2D(8, 1)(d1)
    d1 = conv_block(L.Concatenate()([e1, d1]), 8)
    logits = L.Conv2D(3, 1)(d1)
    probs = L.Softmax(axis=-1)(logits)
    big = L.Resizing(48, 48, interpolation="nearest")(logits)
    model = keras.Model(image, [probs, big])
    r = rng_for("unet_tiny")
    _realistic_weights(model, "unet_tiny", _smooth_images(r, (8, 32, 32, 3), 0.0, 1.0))
    return model, {"image": _smooth_images(r, (1, 32, 32, 3), 0.0, 1.0)}


# ---- transformer-style

def _gelu(approximate: bool):
    keras = _keras()
    return lambda t: keras.activations.gelu(t, approximate=approximate)


def _position_embedding(max_len: int, dim: int, name: str):
    """A Keras layer adding a learned position embedding for positions 0..T-1 of its input (T read
    at run time, so it works with a dynamic sequence length)."""
    keras = _keras()

    class PositionEmbedding(keras.layers.Layer):
        def build(self, input_shape):
            self.table = self.add_weight(shape=(max_len, dim), name="table",
                                         initializer=keras.initializers.RandomNormal(stddev=0.5))

        def call(self, x):
            ops = keras.ops
            n = ops.shape(x)[1]
            return x + ops.expand_dims(ops.take(self.table, ops.arange(n), axis=0), 0)

    return PositionEmbedding(name=name)


def _encoder_layer(keras, x, attention_mask, dim: int, heads: int, ff: int, approximate: bool, prefix: str,
                   causal: bool = False, memory=None):
    """Post-LN transformer layer: MHA (+ optional cross-attention) -> add & LayerNorm -> FFN (GELU)
    -> add & LayerNorm."""
    L = keras.layers
    att = L.MultiHeadAttention(heads, dim // heads, name=f"{prefix}_mha")(
        x, x, attention_mask=attention_mask, use_causal_mask=causal)
    x = L.LayerNormalization(epsilon=1e-12, name=f"{prefix}_ln1")(L.Add()([x, att]))
    if memory is not None:
        cross = L.MultiHeadAttention(heads, dim // heads, name=f"{prefix}_cross")(x, memory)
        x = L.LayerNormalization(epsilon=1e-6, name=f"{prefix}_ln_cross")(L.Add()([x, cross]))
    h = L.Dense(ff, name=f"{prefix}_ff1")(x)
    h = L.Activation(_gelu(approximate), name=f"{prefix}_gelu")(h)
    h = L.Dense(dim, name=f"{prefix}_ff2")(h)
    return L.LayerNormalization(epsilon=1e-12, name=f"{prefix}_ln2")(L.Add()([x, h]))


def _embed(keras, ids, vocab: int, dim: int, max_len: int, name: str):
    tok = keras.layers.Embedding(vocab, dim, embeddings_initializer=keras.initializers.RandomNormal(stddev=1.0),
                                 name=f"{name}_tok")(ids)
    return _position_embedding(max_len, dim, f"{name}_pos")(tok)


_T_VOCAB, _T_DIM, _T_HEADS, _T_FF = 96, 32, 4, 64


@program("transformer_encoder", "Realistic: 2-layer transformer encoder (token + learned position "
                                "embedding, Keras MultiHeadAttention with a padding mask built from "
                                "the ids, post-LN LayerNormalization, FFN with exact GELU in layer 1 "
                                "and tanh-approximate GELU in layer 2, residuals); ids [2, 16] in "
                                "[0, 96) with 0 as padding (row lengths 16 and 9).")
def _transformer_encoder():
    keras = _keras()
    keras.utils.set_random_seed(_seed("transformer_encoder"))
    ids = keras.Input((16,), batch_size=2, dtype="int32", name="input_ids")
    x = _embed(keras, ids, _T_VOCAB, _T_DIM, 16, "emb")
    keep = keras.ops.not_equal(ids, 0)
    mask = keras.ops.logical_and(keras.ops.expand_dims(keep, 1), keras.ops.expand_dims(keep, 2))
    x = _encoder_layer(keras, x, mask, _T_DIM, _T_HEADS, _T_FF, False, "l1")
    x = _encoder_layer(keras, x, mask, _T_DIM, _T_HEADS, _T_FF, True, "l2")
    model = keras.Model(ids, x)
    _realistic_weights(model, "transformer_encoder")
    r = rng_for("transformer_encoder")
    return model, {"input_ids": _token_ids(r, 2, 16, _T_VOCAB, [16, 9])}


# No 16x8 transformer encoder (TF 2.21): transformer_encoder's 16x8 calibration fails on the GATHER of its
# token ids; a twin taking the embeddings (token + position) as a float input instead then fails on its
# padding mask ("Quantization to 16x8-bit not yet supported for op" NOT_EQUAL or GREATER, LOGICAL_AND,
# SELECT_V2, NEG; an int32 mask input also fails, "Empty min/max for tensor serving_default_attention_mask"),
# and without a mask still on the NEG of Keras' LayerNormalization, which every layer has.


@program("transformer_decoder_step", "Realistic: one transformer decoder step (token + position "
                                     "embedding of the 6-token prefix, causal self-attention, "
                                     "cross-attention to an [1, 8, 32] encoder memory, FFN with GELU, "
                                     "LayerNorm, vocabulary logits of the last position, softmax and "
                                     "argmax of the next token).")
def _transformer_decoder_step():
    keras = _keras()
    L = keras.layers
    keras.utils.set_random_seed(_seed("transformer_decoder_step"))
    prefix = keras.Input((6,), batch_size=1, dtype="int32", name="prefix_ids")
    memory = keras.Input((8, _T_DIM), batch_size=1, name="memory")
    x = _embed(keras, prefix, _T_VOCAB, _T_DIM, 6, "emb")
    x = _encoder_layer(keras, x, None, _T_DIM, _T_HEADS, _T_FF, False, "dec", causal=True, memory=memory)
    last = x[:, -1, :]
    # a wide output projection, so the next-token distribution is peaked as in a trained model
    logits = L.Dense(_T_VOCAB, kernel_initializer=keras.initializers.RandomNormal(stddev=0.5), name="lm_head")(last)
    probs = L.Softmax()(logits)
    # tf.argmax: keras.ops.argmax adds a -0.0 fix-up through tf.BitwiseAnd, not a builtin op
    nxt = L.Lambda(lambda t: _tf().cast(_tf().argmax(t, axis=-1), "int32"), name="next_token")(logits)
    model = keras.Model([prefix, memory], [probs, nxt])
    _realistic_weights(model, "transformer_decoder_step")
    r = rng_for("transformer_decoder_step")
    return model, {"prefix_ids": _token_ids(r, 1, 6, _T_VOCAB),
                   "memory": r.standard_normal((1, 8, _T_DIM)).astype(np.float32)}


@program("vit_tiny", "Realistic: ViT-style classifier: patch embedding (Conv2D 8x8 stride 8 on a "
                     "32x32 image in [-1, 1]), reshape to 16 tokens, class-token concat, position "
                     "embedding, one pre-LN transformer block (MHA, GELU MLP), LayerNorm, class-token "
                     "head; batch 2.")
def _vit_tiny():
    keras = _keras()
    L = keras.layers
    ops = keras.ops
    keras.utils.set_random_seed(_seed("vit_tiny"))
    dim = _T_DIM

    class ClassToken(L.Layer):
        def build(self, input_shape):
            self.cls = self.add_weight(shape=(1, 1, dim), name="cls",
                                       initializer=keras.initializers.RandomNormal(stddev=0.5))

        def call(self, x):
            cls = ops.broadcast_to(self.cls, (ops.shape(x)[0], 1, dim))
            return ops.concatenate([cls, x], axis=1)

    image = keras.Input((32, 32, 3), batch_size=2, name="image")
    x = L.Conv2D(dim, 8, strides=8, name="patch_embed")(image)   # [2, 4, 4, dim]
    x = L.Reshape((16, dim))(x)
    x = ClassToken(name="cls_token")(x)                            # [2, 17, dim]
    x = _position_embedding(17, dim, "pos")(x)
    h = L.LayerNormalization(epsilon=1e-6)(x)
    h = L.MultiHeadAttention(_T_HEADS, dim // _T_HEADS)(h, h)
    x = L.Add()([x, h])
    h = L.LayerNormalization(epsilon=1e-6)(x)
    h = L.Dense(_T_FF, activation="gelu")(h)
    h = L.Dense(dim)(h)
    x = L.Add()([x, h])
    x = L.LayerNormalization(epsilon=1e-6)(x)
    logits = L.Dense(10)(x[:, 0])
    model = keras.Model(image, logits)
    _realistic_weights(model, "vit_tiny")
    r = rng_for("vit_tiny")
    return model, {"image": _smooth_images(r, (2, 32, 32, 3), -1.0, 1.0)}


@program("bert_classifier_dynamic_batch", "Realistic: BERT-style sentence classifier with a dynamic "
                                          "batch (shape signatures [-1, 12]): input_ids, token_type_ids "
                                          "and attention_mask inputs, token + segment + position "
                                          "embeddings, embedding LayerNorm, one encoder layer (padding "
                                          "mask, exact GELU), tanh pooler on [CLS], 3-way softmax; run "
                                          "with batch 3 and batch 1.")
def _bert_classifier():
    keras = _keras()
    L = keras.layers
    ops = keras.ops
    keras.utils.set_random_seed(_seed("bert_classifier_dynamic_batch"))
    n = 12
    ids = keras.Input((n,), dtype="int32", name="input_ids")
    seg = keras.Input((n,), dtype="int32", name="token_type_ids")
    am = keras.Input((n,), dtype="int32", name="attention_mask")
    x = _embed(keras, ids, _T_VOCAB, _T_DIM, n, "emb")
    x = L.Add()([x, L.Embedding(2, _T_DIM, embeddings_initializer=keras.initializers.RandomNormal(stddev=0.5),
                                name="segment")(seg)])
    x = L.LayerNormalization(epsilon=1e-12, name="emb_ln")(x)
    mask = ops.expand_dims(ops.cast(am, "bool"), 1)                # [B, 1, S]
    x = _encoder_layer(keras, x, mask, _T_DIM, _T_HEADS, _T_FF, False, "l1")
    pooled = L.Dense(_T_DIM, activation="tanh", name="pooler")(x[:, 0])
    probs = L.Dense(3, activation="softmax", name="classifier")(pooled)
    model = keras.Model([ids, seg, am], probs)
    _realistic_weights(model, "bert_classifier_dynamic_batch")
    r = rng_for("bert_classifier_dynamic_batch")

    def feed(lengths, seg_starts):
        b = len(lengths)
        i = _token_ids(r, b, n, _T_VOCAB, lengths)
        t = np.zeros((b, n), np.int32)
        for k, (ln, s) in enumerate(zip(lengths, seg_starts)):
            t[k, s:ln] = 1
        return {"input_ids": i, "token_type_ids": t, "attention_mask": (i != 0).astype(np.int32)}

    return model, [feed([12, 7, 4], [6, 4, 2]), feed([9], [5])]


@program("transformer_dynamic_seq", "Realistic: transformer encoder + per-token tagging head with a "
                                    "dynamic batch and sequence length (input_ids shape signature "
                                    "[-1, -1]): position embedding gathered for arange(T) at run time, "
                                    "padding mask from the ids, one encoder layer (approximate GELU), "
                                    "dense logits and log-softmax; run with [2, 7] and [1, 12].")
def _transformer_dynamic_seq():
    keras = _keras()
    L = keras.layers
    ops = keras.ops
    keras.utils.set_random_seed(_seed("transformer_dynamic_seq"))
    ids = keras.Input((None,), dtype="int32", name="input_ids")
    x = _embed(keras, ids, _T_VOCAB, _T_DIM, 32, "emb")
    keep = ops.not_equal(ids, 0)
    mask = ops.expand_dims(keep, 1)
    x = _encoder_layer(keras, x, mask, _T_DIM, _T_HEADS, _T_FF, True, "l1")
    logits = L.Dense(5, name="tagger")(x)
    out = L.Activation("log_softmax")(logits)
    model = keras.Model(ids, out)
    _realistic_weights(model, "transformer_dynamic_seq")
    r = rng_for("transformer_dynamic_seq")
    return model, [{"input_ids": _token_ids(r, 2, 7, _T_VOCAB, [7, 5])},
                   {"input_ids": _token_ids(r, 1, 12, _T_VOCAB)}]


@program("llama_block", "Realistic: decoder-only LLM block written with tf ops (tf.function): token "
                        "embedding, RMSNorm, rotary position embedding (sin/cos tables, rotate-half), "
                        "grouped-query attention (4 query heads, 2 key/value heads via tf.repeat), "
                        "causal mask from tf.linalg.band_part, softmax, SwiGLU MLP (silu), residuals, "
                        "final RMSNorm and tied-embedding logits of the last token; ids [1, 10] in "
                        "[0, 96).")
def _llama_block():
    tf = _tf()
    r = rng_for("llama_block/weights")
    vocab, dim, heads, kv_heads, ff, t_len = _T_VOCAB, _T_DIM, 4, 2, 64, 10
    hd = dim // heads

    def w(*shape, scale=None):
        scale = (1.0 / np.sqrt(shape[0])) if scale is None else scale
        return tf.constant((r.standard_normal(shape) * scale).astype(np.float32))

    emb = w(vocab, dim, scale=1.0)
    wq, wk, wv, wo = w(dim, heads * hd), w(dim, kv_heads * hd), w(dim, kv_heads * hd), w(heads * hd, dim)
    w_gate, w_up, w_down = w(dim, ff), w(dim, ff), w(ff, dim)
    g1, g2, g3 = (tf.constant(r.uniform(0.7, 1.3, dim).astype(np.float32)) for _ in range(3))
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, hd, 2) / hd))
    ang = np.arange(t_len)[:, None] * inv_freq[None, :]                     # [T, hd/2]
    cos = tf.constant(np.cos(np.concatenate([ang, ang], -1)).astype(np.float32))
    sin = tf.constant(np.sin(np.concatenate([ang, ang], -1)).astype(np.float32))

    def rms_norm(x, g):
        return x * tf.math.rsqrt(tf.reduce_mean(tf.square(x), axis=-1, keepdims=True) + 1e-6) * g

    def rope(x):                                                              # [B, H, T, hd]
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos + tf.concat([-x2, x1], axis=-1) * sin

    @tf.function(input_signature=[spec([1, t_len], tf.int32, "input_ids")])
    def f(ids):
        x = tf.gather(emb, ids)                                               # [1, T, D]
        h = rms_norm(x, g1)
        q = tf.transpose(tf.reshape(tf.matmul(h, wq), [1, t_len, heads, hd]), [0, 2, 1, 3])
        k = tf.transpose(tf.reshape(tf.matmul(h, wk), [1, t_len, kv_heads, hd]), [0, 2, 1, 3])
        v = tf.transpose(tf.reshape(tf.matmul(h, wv), [1, t_len, kv_heads, hd]), [0, 2, 1, 3])
        q, k = rope(q), rope(k)
        k = tf.repeat(k, heads // kv_heads, axis=1)
        v = tf.repeat(v, heads // kv_heads, axis=1)
        scores = tf.matmul(q, k, transpose_b=True) / np.sqrt(hd).astype(np.float32)
        causal = tf.linalg.band_part(tf.ones([t_len, t_len]), -1, 0)
        scores = scores + (1.0 - causal) * -1e9
        att = tf.matmul(tf.nn.softmax(scores, axis=-1), v)                    # [1, H, T, hd]
        att = tf.reshape(tf.transpose(att, [0, 2, 1, 3]), [1, t_len, dim])
        x = x + tf.matmul(att, wo)
        h = rms_norm(x, g2)
        x = x + tf.matmul(tf.nn.silu(tf.matmul(h, w_gate)) * tf.matmul(h, w_up), w_down)
        last = rms_norm(x[:, -1, :], g3)
        logits = tf.matmul(last, emb, transpose_b=True)
        return logits, tf.cast(tf.argmax(logits, axis=-1), tf.int32)

    return f, {"input_ids": _token_ids(rng_for("llama_block"), 1, t_len, _T_VOCAB)}


# ----------------------------------------------------------------------------------------------
# single-op models: one builtin op per model (several dtypes / shapes / options per op)

def _single(name: str, description: str, fn: Callable[..., Any], feeds: dict[str, np.ndarray],
            dynamic: dict[str, list] | None = None, **kw: Any) -> None:
    """Register a tf.function of the feeds (in order) as a single-op program. ``dynamic`` gives a
    shape signature (with None) for some inputs; the stored input keeps its concrete shape."""
    dynamic = dynamic or {}

    def build():
        tf = _tf()
        sig = [spec(dynamic.get(n, list(x.shape)), tf.as_dtype(x.dtype), n) for n, x in feeds.items()]
        f = tf.function(lambda *xs: fn(tf, *xs))
        arity = len(sig)
        # tf.function needs a named positional signature: wrap per arity
        if arity == 1:
            g = tf.function(lambda a: f(a), input_signature=sig)
        elif arity == 2:
            g = tf.function(lambda a, b: f(a, b), input_signature=sig)
        elif arity == 3:
            g = tf.function(lambda a, b, c: f(a, b, c), input_signature=sig)
        else:
            g = tf.function(lambda a, b, c, d: f(a, b, c, d), input_signature=sig)
        return g, dict(feeds)
    PROGRAMS.append(Program(f"op_{name}", description, build, tags=["single_op"], **kw))


def _rand(name: str, shape, dtype="float32", lo=None, hi=None) -> np.ndarray:
    r = rng_for(name)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return r.random(shape) < 0.5
    if dt.kind in "iu":
        lo = -8 if lo is None else lo
        hi = 9 if hi is None else hi
        return r.integers(lo, hi, size=shape).astype(dt)
    x = r.standard_normal(shape) * 2.0
    if lo is not None or hi is not None:
        lo = -2.0 if lo is None else lo
        hi = 2.0 if hi is None else hi
        x = r.uniform(lo, hi, size=shape)
    return x.astype(dt)


def _register_single_ops() -> None:  # noqa: C901 - a table
    # binary elementwise: float with broadcasting, int with broadcasting, fused activations
    binary = {
        "add": (lambda tf, a, b: a + b, ["float32", "int32", "int64"]),
        "sub": (lambda tf, a, b: a - b, ["float32", "int32", "int64"]),
        "mul": (lambda tf, a, b: a * b, ["float32", "int32", "int64"]),
        "div": (lambda tf, a, b: a / b, ["float32"]),
        "maximum": (lambda tf, a, b: tf.maximum(a, b), ["float32", "int32"]),
        "minimum": (lambda tf, a, b: tf.minimum(a, b), ["float32", "int32"]),
        "squared_difference": (lambda tf, a, b: tf.math.squared_difference(a, b), ["float32", "int32"]),
        "floor_div": (lambda tf, a, b: tf.math.floordiv(a, b), ["float32", "int32"]),
        "floor_mod": (lambda tf, a, b: tf.math.floormod(a, b), ["float32", "int32"]),
        "pow": (lambda tf, a, b: tf.pow(a, b), ["float32", "int32"]),
        "atan2": (lambda tf, a, b: tf.math.atan2(a, b), ["float32"]),
        "equal": (lambda tf, a, b: tf.equal(a, b), ["float32", "int32"]),
        "not_equal": (lambda tf, a, b: tf.not_equal(a, b), ["float32", "int32"]),
        "less": (lambda tf, a, b: tf.less(a, b), ["float32", "int32"]),
        "less_equal": (lambda tf, a, b: tf.less_equal(a, b), ["float32", "int32"]),
        "greater": (lambda tf, a, b: tf.greater(a, b), ["float32", "int32"]),
        "greater_equal": (lambda tf, a, b: tf.greater_equal(a, b), ["float32", "int32"]),
    }
    for op, (fn, dtypes) in binary.items():
        for dt in dtypes:
            shapes = ([2, 3, 4], [4]) if dt == "float32" else ([3, 1], [1, 4])
            if op == "atan2":  # the converter's tfl.atan2 does not broadcast
                shapes = ([2, 3, 4], [2, 3, 4])
            a = _rand(f"{op}/{dt}/a", shapes[0], dt)
            b = _rand(f"{op}/{dt}/b", shapes[1], dt)
            if op in ("div", "floor_div", "floor_mod"):
                b = np.where(b == 0, 3, b).astype(dt)
                if dt == "float32":
                    b = np.where(np.abs(b) < 0.25, 0.5, b).astype(dt)
            if op == "pow":
                if dt == "float32":
                    a = np.abs(a) + 0.1
                else:
                    b = np.abs(b) % 4
            if op in ("equal", "not_equal") and dt == "float32":
                b = a[0, 0].copy()
                a[1, 1] = b
            _single(f"{op}_{dt}" + ("_bcast" if shapes[0] != shapes[1] else ""),
                    f"{op} ({dt}) of {shapes[0]} with {shapes[1]}.", fn,
                    {"a": a, "b": b})
    # same-shape float, dynamic batch
    for op in ("add", "mul", "sub"):
        _single(f"{op}_float32_dynamic", f"{op} (float32) of two [-1, 5] inputs (stored batch 3).",
                binary[op][0], {"a": _rand(f"{op}/dyn/a", [3, 5]), "b": _rand(f"{op}/dyn/b", [3, 5])},
                dynamic={"a": [None, 5], "b": [None, 5]})
    # fused activations
    fused = {
        "add_relu": lambda tf, a, b: tf.nn.relu(a + b),
        "sub_relu6": lambda tf, a, b: tf.nn.relu6(a - b),
        "mul_relu_n1_to_1": lambda tf, a, b: tf.clip_by_value(a * b, -1.0, 1.0),
        "div_relu": lambda tf, a, b: tf.nn.relu(a / b),
        "add_tanh": lambda tf, a, b: tf.tanh(a + b),
    }
    for n, fn in fused.items():
        b = _rand(f"{n}/b", [1, 4])
        b = np.where(np.abs(b) < 0.25, 0.5, b).astype(np.float32)
        _single(n, f"{n.split('_')[0]} with a fused activation where the converter fuses it "
                   f"({n}); broadcasting [2,3,4] with [1,4].", fn, {"a": _rand(f"{n}/a", [2, 3, 4]), "b": b})
    _single("logical_and", "logical_and of bool [2,3] with [3].", lambda tf, a, b: tf.logical_and(a, b),
            {"a": _rand("land/a", [2, 3], "bool"), "b": _rand("land/b", [3], "bool")})
    _single("logical_or", "logical_or of bool [2,3] with [2,1].", lambda tf, a, b: tf.logical_or(a, b),
            {"a": _rand("lor/a", [2, 3], "bool"), "b": _rand("lor/b", [2, 1], "bool")})
    _single("logical_not", "logical_not of bool [2,3].", lambda tf, a: tf.logical_not(a),
            {"a": _rand("lnot/a", [2, 3], "bool")})
    _single("bitwise_xor_int32", "bitwise_xor int32 [2,3] with [3].", lambda tf, a, b: tf.bitwise.bitwise_xor(a, b),
            {"a": _rand("bxor/a", [2, 3], "int32", -100, 100), "b": _rand("bxor/b", [3], "int32", -100, 100)})
    _single("right_shift_int32", "right_shift int32 by 0..5 (arithmetic shift of negatives).",
            lambda tf, a, b: tf.bitwise.right_shift(a, b),
            {"a": _rand("rsh/a", [2, 4], "int32", -1000, 1000), "b": _rand("rsh/b", [2, 4], "int32", 0, 6)})
    _single("add_n", "add_n of three float32 [2,3] tensors.", lambda tf, a, b, c: tf.math.add_n([a, b, c]),
            {"a": _rand("addn/a", [2, 3]), "b": _rand("addn/b", [2, 3]), "c": _rand("addn/c", [2, 3])})

    # unary float ops
    pos = dict(lo=0.05, hi=5.0)
    unary = {
        "abs": (lambda tf, x: tf.abs(x), {}), "neg": (lambda tf, x: -x, {}),
        "exp": (lambda tf, x: tf.exp(x), {}), "log": (lambda tf, x: tf.math.log(x), pos),
        "sqrt": (lambda tf, x: tf.sqrt(x), pos), "rsqrt": (lambda tf, x: tf.math.rsqrt(x), pos),
        "sin": (lambda tf, x: tf.sin(x), {}), "cos": (lambda tf, x: tf.cos(x), {}),
        "tanh": (lambda tf, x: tf.tanh(x), {}), "logistic": (lambda tf, x: tf.sigmoid(x), {}),
        "relu": (lambda tf, x: tf.nn.relu(x), {}), "relu6": (lambda tf, x: tf.nn.relu6(x), {}),
        "relu_n1_to_1": (lambda tf, x: tf.clip_by_value(x, -1.0, 1.0), {}),
        "relu_0_to_1": (lambda tf, x: tf.clip_by_value(x, 0.0, 1.0), {}),
        "elu": (lambda tf, x: tf.nn.elu(x), {}),
        "leaky_relu": (lambda tf, x: tf.nn.leaky_relu(x, alpha=0.15), {}),
        "gelu_exact": (lambda tf, x: tf.nn.gelu(x, approximate=False), {}),
        "gelu_tanh": (lambda tf, x: tf.nn.gelu(x, approximate=True), {}),
        "hard_swish": (lambda tf, x: x * tf.nn.relu6(x + 3.0) / 6.0, {}),
        "square": (lambda tf, x: tf.square(x), {}), "sign": (lambda tf, x: tf.sign(x), {}),
        "floor": (lambda tf, x: tf.floor(x), {}), "ceil": (lambda tf, x: tf.math.ceil(x), {}),
        "round": (lambda tf, x: tf.round(x), {}),
        "softmax": (lambda tf, x: tf.nn.softmax(x), {}),
        "softmax_beta": (lambda tf, x: tf.nn.softmax(x * 0.5), {}),
        "log_softmax": (lambda tf, x: tf.nn.log_softmax(x), {}),
        "l2_normalize": (lambda tf, x: tf.math.l2_normalize(x, axis=-1), {}),
        "lrn": (lambda tf, x: tf.nn.local_response_normalization(x, depth_radius=2, bias=1.0, alpha=0.5,
                                                                 beta=0.75), {}),
    }
    for op, (fn, rng_kw) in unary.items():
        shape = [1, 3, 4, 6] if op == "lrn" else [2, 3, 5]
        x = _rand(f"{op}/x", shape, "float32", **rng_kw)
        if op == "round":
            x[0, 0, :4] = [0.5, 1.5, -2.5, 2.5]
        _single(f"{op}_float32", f"{op} of float32 {shape}.", fn, {"x": x})
    for op in ("abs", "neg", "square", "sign"):
        _single(f"{op}_int32", f"{op} of int32 [2,5].", unary[op][0], {"x": _rand(f"{op}/i", [2, 5], "int32")})
    _single("exp_dynamic", "exp of a float32 [-1, 4] input (stored batch 2).", unary["exp"][0],
            {"x": _rand("expdyn", [2, 4])}, dynamic={"x": [None, 4]})
    # casts
    for src, dst in (("float32", "int32"), ("int32", "float32"), ("bool", "float32"), ("float32", "bool"),
                     ("int32", "int64"), ("float32", "uint8")):
        x = _rand(f"cast/{src}/{dst}", [2, 5], src)
        if dst == "uint8":
            x = np.abs(x) * 20
        _single(f"cast_{src}_to_{dst}", f"cast {src} -> {dst}.", lambda tf, x, d=dst: tf.cast(x, d), {"x": x})

    # reductions
    reductions = {
        "sum": lambda tf, x, ax, k: tf.reduce_sum(x, axis=ax, keepdims=k),
        "mean": lambda tf, x, ax, k: tf.reduce_mean(x, axis=ax, keepdims=k),
        "max": lambda tf, x, ax, k: tf.reduce_max(x, axis=ax, keepdims=k),
        "min": lambda tf, x, ax, k: tf.reduce_min(x, axis=ax, keepdims=k),
        "prod": lambda tf, x, ax, k: tf.reduce_prod(x, axis=ax, keepdims=k),
    }
    for op, fn in reductions.items():
        for dt, ax, keep in (("float32", [1], False), ("float32", [0, 2], True), ("int32", [-1], False),
                             ("float32", [0, 1, 2], False)):
            x = _rand(f"reduce/{op}/{dt}/{ax}", [2, 3, 4], dt, *((-3, 4) if dt == "int32" else ()))
            if op == "prod" and dt == "float32":
                x = _rand(f"reduce/{op}/{ax}", [2, 3, 4], dt, 0.5, 1.5)
            tag = "_".join(str(a) for a in ax).replace("-", "m")
            _single(f"reduce_{op}_{dt}_ax{tag}{'_keep' if keep else ''}",
                    f"reduce_{op} of {dt} [2,3,4] over axes {ax}, keepdims={keep}.",
                    lambda tf, x, f=fn, ax=ax, k=keep: f(tf, x, ax, k), {"x": x})
    for op, fn in (("any", lambda tf, x: tf.reduce_any(x, axis=1)), ("all", lambda tf, x: tf.reduce_all(x, axis=[0, 2], keepdims=True))):
        _single(f"reduce_{op}", f"reduce_{op} of bool [2,3,4].", fn, {"x": _rand(f"red/{op}", [2, 3, 4], "bool")})
    _single("reduce_sum_dynamic_axis", "reduce_sum with the axis as a (non-constant) input.",
            lambda tf, x, ax: tf.reduce_sum(x, axis=ax), {"x": _rand("rsda", [2, 3, 4]), "ax": np.array([2], np.int32)})

    # arg / top-k / unique / cumsum
    for dt in ("float32", "int32"):
        x = _rand(f"arg/{dt}", [3, 5], dt)
        _single(f"arg_max_{dt}", f"argmax over axis 1 of {dt} [3,5] (int64 output).", lambda tf, x: tf.argmax(x, axis=1), {"x": x})
        _single(f"arg_min_{dt}_i32", f"argmin over axis 0 of {dt} [3,5] (int32 output).",
                lambda tf, x: tf.argmin(x, axis=0, output_type=tf.int32), {"x": x})
    _single("top_k_float32", "top_k k=3 of float32 [2,6] (values and int32 indices).",
            lambda tf, x: tf.math.top_k(x, k=3), {"x": _rand("topk", [2, 6])})
    _single("top_k_int32", "top_k k=2 of int32 [4] with ties.", lambda tf, x: tf.math.top_k(x, k=2),
            {"x": np.array([3, 7, 7, 1], np.int32)})
    _single("unique_int32", "unique of an int32 vector (values and int32 indices).",
            lambda tf, x: tf.unique(x), {"x": np.array([4, 1, 4, 2, 1, 7, 7], np.int32)})
    _single("unique_float32", "unique of a float32 vector with out_idx int64.",
            lambda tf, x: tf.unique(x, out_idx=tf.int64), {"x": np.array([0.5, -1.0, 0.5, 2.0], np.float32)})
    for excl, rev in ((False, False), (True, False), (False, True), (True, True)):
        _single(f"cumsum_e{int(excl)}_r{int(rev)}", f"cumsum over axis 1 of float32 [2,5], exclusive={excl}, reverse={rev}.",
                lambda tf, x, e=excl, r=rev: tf.cumsum(x, axis=1, exclusive=e, reverse=r), {"x": _rand(f"cumsum/{excl}{rev}", [2, 5])})
    _single("cumsum_int32", "cumsum over axis 0 of int32 [4,3].", lambda tf, x: tf.cumsum(x, axis=0),
            {"x": _rand("cumsum/i", [4, 3], "int32")})

    # gather / scatter / segments / one_hot / where
    params = _rand("gather/p", [5, 3])
    _single("gather_axis0", "gather rows of float32 [5,3] with int32 indices [2,2].",
            lambda tf, p, i: tf.gather(p, i), {"p": params, "i": np.array([[0, 4], [2, 2]], np.int32)})
    _single("gather_axis1_int64", "gather along axis 1 of int32 [2,4,3] with int64 indices.",
            lambda tf, p, i: tf.gather(p, i, axis=1), {"p": _rand("g1", [2, 4, 3], "int32"), "i": np.array([3, 0, 1], np.int64)})
    _single("gather_batch_dims", "gather with batch_dims=1: params [2,4,3], indices [2,2].",
            lambda tf, p, i: tf.gather(p, i, axis=1, batch_dims=1), {"p": _rand("gbd", [2, 4, 3]), "i": np.array([[1, 3], [0, 0]], np.int32)})
    _single("gather_nd", "gather_nd of float32 [3,4,2] with indices [2,2] (slices).",
            lambda tf, p, i: tf.gather_nd(p, i), {"p": _rand("gnd", [3, 4, 2]), "i": np.array([[0, 1], [2, 3]], np.int32)})
    _single("gather_nd_full", "gather_nd of int32 [3,4] with full indices [3,2].",
            lambda tf, p, i: tf.gather_nd(p, i), {"p": _rand("gndf", [3, 4], "int32"), "i": np.array([[0, 1], [2, 3], [1, 0]], np.int32)})
    _single("scatter_nd", "scatter_nd of float32 updates [3,2] into shape [4,2] (a duplicate index sums).",
            lambda tf, i, u: tf.scatter_nd(i, u, [4, 2]), {"i": np.array([[1], [3], [1]], np.int32), "u": _rand("snd", [3, 2])})
    _single("scatter_nd_int32", "scatter_nd of int32 scalars into [2,3].",
            lambda tf, i, u: tf.scatter_nd(i, u, [2, 3]), {"i": np.array([[0, 1], [1, 2]], np.int32), "u": np.array([5, -3], np.int32)})
    _single("segment_sum", "math.segment_sum of float32 [5,2] with sorted ids.",
            lambda tf, x, s: tf.math.segment_sum(x, s), {"x": _rand("segsum", [5, 2]), "s": np.array([0, 0, 1, 3, 3], np.int32)})
    for op, fn in (("sum", "unsorted_segment_sum"), ("max", "unsorted_segment_max"),
                   ("min", "unsorted_segment_min"), ("prod", "unsorted_segment_prod")):
        _single(f"unsorted_segment_{op}", f"math.{fn} of float32 [5,2] with 3 segments (segment 1 empty).",
                lambda tf, x, s, f=fn: getattr(tf.math, f)(x, s, 3),
                {"x": _rand(f"useg/{op}", [5, 2]), "s": np.array([2, 0, 2, 0, 2], np.int32)})
    _single("one_hot", "one_hot depth 4 of int32 [3] (out-of-range -1 and 5), on 2.0 off -1.0.",
            lambda tf, i: tf.one_hot(i, 4, on_value=2.0, off_value=-1.0), {"i": np.array([0, -1, 5], np.int32)})
    _single("one_hot_axis0_int", "one_hot depth 3 along axis 0, int32 output.",
            lambda tf, i: tf.one_hot(i, 3, axis=0, dtype=tf.int32), {"i": np.array([[2, 0], [1, 1]], np.int32)})
    _single("select_v2_bcast", "tf.where(cond, a, b) with broadcasting [2,1] / [2,3] / [3].",
            lambda tf, c, a, b: tf.where(c, a, b),
            {"c": _rand("sel/c", [2, 1], "bool"), "a": _rand("sel/a", [2, 3]), "b": _rand("sel/b", [3])})
    _single("select_int32", "tf.where(cond, a, b), same shapes, int32.", lambda tf, c, a, b: tf.where(c, a, b),
            {"c": _rand("seli/c", [2, 3], "bool"), "a": _rand("seli/a", [2, 3], "int32"), "b": _rand("seli/b", [2, 3], "int32")})
    _single("where_indices", "tf.where(cond) -> int64 coordinates of true elements (dynamic output).",
            lambda tf, c: tf.where(c), {"c": _rand("where", [3, 4], "bool")})
    _single("where_float", "tf.where(x > 0) on float32 (coordinates of positive elements).",
            lambda tf, x: tf.where(x), {"x": np.array([0.0, 1.5, 0.0, -2.0], np.float32)})

    # shape ops
    x234 = _rand("shape/x", [2, 3, 4])
    shape_ops = {
        "reshape": (lambda tf, x: tf.reshape(x, [4, -1]), x234),
        "reshape_dynamic": (lambda tf, x, s: tf.reshape(x, s), (x234, np.array([3, 8], np.int32))),
        "transpose": (lambda tf, x: tf.transpose(x, [2, 0, 1]), x234),
        "transpose_int32_4d": (lambda tf, x: tf.transpose(x, [0, 3, 1, 2]), _rand("tr4", [1, 2, 3, 4], "int32")),
        "tile": (lambda tf, x: tf.tile(x, [2, 1, 3]), x234),
        "tile_int32": (lambda tf, x: tf.tile(x, [3, 2]), _rand("tile/i", [2, 2], "int32")),
        "pad": (lambda tf, x: tf.pad(x, [[1, 0], [0, 2], [1, 1]]), x234),
        "padv2": (lambda tf, x: tf.pad(x, [[1, 1], [2, 0], [0, 0]], constant_values=-3.5), x234),
        "pad_int32": (lambda tf, x: tf.pad(x, [[0, 1], [2, 1]]), _rand("pad/i", [2, 3], "int32")),
        "mirror_pad_reflect": (lambda tf, x: tf.pad(x, [[1, 1], [2, 2], [0, 1]], mode="REFLECT"), x234),
        "mirror_pad_symmetric": (lambda tf, x: tf.pad(x, [[1, 0], [3, 3], [2, 1]], mode="SYMMETRIC"), x234),
        "expand_dims": (lambda tf, x: tf.expand_dims(x, 1) * 2.0, x234),
        "squeeze": (lambda tf, x: tf.squeeze(x, [0, 2]), _rand("sq", [1, 3, 1, 2])),
        "concat": (lambda tf, a, b: tf.concat([a, b], axis=1), (x234, _rand("cat/b", [2, 2, 4]))),
        "concat_int32": (lambda tf, a, b: tf.concat([a, b], axis=0), (_rand("cati/a", [1, 3], "int32"), _rand("cati/b", [2, 3], "int32"))),
        "pack": (lambda tf, a, b: tf.stack([a, b], axis=1), (_rand("pack/a", [2, 3]), _rand("pack/b", [2, 3]))),
        "unpack": (lambda tf, x: tf.unstack(x, axis=1), x234),
        "split": (lambda tf, x: tf.split(x, 2, axis=2), x234),
        "split_v": (lambda tf, x: tf.split(x, [1, 3], axis=2), x234),
        "slice": (lambda tf, x: tf.slice(x, [0, 1, 1], [2, 2, -1]), x234),
        "strided_slice": (lambda tf, x: x[:, ::2, 1:3], x234),
        "strided_slice_neg_stride": (lambda tf, x: x[::-1, 2:0:-1, ::-2], x234),
        "strided_slice_masks": (lambda tf, x: x[1, ..., tf.newaxis, 2], x234),
        "strided_slice_shrink": (lambda tf, x: x[-1, :, 0], _rand("ssi", [3, 4, 2], "int32")),
        "reverse": (lambda tf, x: tf.reverse(x, [1]), x234),
        "reverse_2axes": (lambda tf, x: tf.reverse(x, [0, 2]), _rand("rev2", [2, 3, 4], "int32")),
        "reverse_sequence": (lambda tf, x, l: tf.reverse_sequence(x, l, seq_axis=1, batch_axis=0),
                             (_rand("revseq", [3, 5, 2]), np.array([2, 5, 0], np.int32))),
        "broadcast_to": (lambda tf, x: tf.broadcast_to(x, [2, 3, 4]), _rand("bto", [3, 1])),
        "fill": (lambda tf, d, v: tf.fill(d, v), (np.array([2, 3], np.int32), np.array(1.5, np.float32))),
        "range_int32": (lambda tf, s, l, d: tf.range(s, l, d), tuple(np.array(v, np.int32) for v in (2, 11, 3))),
        "range_float32": (lambda tf, s, l, d: tf.range(s, l, d), tuple(np.array(v, np.float32) for v in (1.0, -1.0, -0.5))),
        "depth_to_space": (lambda tf, x: tf.nn.depth_to_space(x, 2), _rand("d2s", [1, 2, 3, 8])),
        "space_to_depth": (lambda tf, x: tf.nn.space_to_depth(x, 2), _rand("s2d", [1, 4, 6, 2])),
        "space_to_batch_nd": (lambda tf, x: tf.space_to_batch_nd(x, [2, 2], [[0, 1], [1, 1]]), _rand("s2b", [1, 3, 4, 2])),
        "batch_to_space_nd": (lambda tf, x: tf.compat.v1.batch_to_space_nd(x, [2, 2], [[0, 1], [1, 0]]), _rand("b2s", [4, 2, 3, 1])),
        "matrix_diag": (lambda tf, x: tf.linalg.diag(x), _rand("mdiag", [2, 3])),
        "matrix_set_diag": (lambda tf, x, d: tf.linalg.set_diag(x, d), (_rand("msd/x", [2, 3, 3]), _rand("msd/d", [2, 3]))),
        "bucketize": (lambda tf, x: tf.raw_ops.Bucketize(input=x, boundaries=[-1.0, 0.0, 0.5, 2.0]), _rand("buck", [2, 5])),
    }
    _single("shape_dynamic", "tf.shape of a float32 [-1, 3, -1] input (stored [2,3,4]), int32 output.",
            lambda tf, x: tf.shape(x), {"x": x234}, dynamic={"x": [None, 3, None]})
    _single("shape_int64", "tf.shape with out_type int64 of a [-1, 4] input (stored [3,4]).",
            lambda tf, x: tf.shape(x, out_type=tf.int64), {"x": _rand("shape64", [3, 4])}, dynamic={"x": [None, 4]})
    _single("zeros_like_dynamic", "tf.zeros_like of an int32 [-1, 3] input (stored [2,3]).",
            lambda tf, x: tf.zeros_like(x), {"x": _rand("zl/i", [2, 3], "int32")}, dynamic={"x": [None, 3]})
    for op, (fn, arrays) in shape_ops.items():
        arrays = arrays if isinstance(arrays, tuple) else (arrays,)
        feeds = {n: a for n, a in zip("abcd", arrays)}
        _single(op, f"{op.replace('_', ' ')}: inputs {[list(a.shape) for a in arrays]} "
                    f"{[str(a.dtype) for a in arrays]}.", fn, feeds)

    # matmul / conv / pool / resize
    w = rng_for("fc/w").standard_normal((6, 4)).astype(np.float32)
    bias = rng_for("fc/b").standard_normal((4,)).astype(np.float32)
    _single("fully_connected", "matmul with constant weights + bias + relu (FULLY_CONNECTED, fused relu).",
            lambda tf, x: tf.nn.relu(tf.matmul(x, w) + bias), {"x": _rand("fc/x", [3, 6])})
    _single("fully_connected_dynamic", "matmul with constant weights, [-1, 6] input (stored batch 2).",
            lambda tf, x: tf.matmul(x, w), {"x": _rand("fcd/x", [2, 6])}, dynamic={"x": [None, 6]})
    _single("batch_matmul", "batch matmul of two inputs [2,3,4] x [2,4,5].", lambda tf, a, b: tf.matmul(a, b),
            {"a": _rand("bmm/a", [2, 3, 4]), "b": _rand("bmm/b", [2, 4, 5])})
    _single("batch_matmul_adj_bcast", "batch matmul with adjoint_b and batch broadcasting [2,1,3,4] x [3,5,4].",
            lambda tf, a, b: tf.matmul(a, b, adjoint_b=True), {"a": _rand("bmma/a", [2, 1, 3, 4]), "b": _rand("bmma/b", [3, 5, 4])})
    for name, stride, dil, pad, act in (("conv2d_same_relu", 1, 1, "SAME", "relu"), ("conv2d_valid_s2", 2, 1, "VALID", None),
                                        ("conv2d_dilated_relu6", 1, 2, "SAME", "relu6")):
        k = rng_for(f"{name}/k").standard_normal((3, 3, 3, 4)).astype(np.float32)
        kb = rng_for(f"{name}/b").standard_normal((4,)).astype(np.float32)

        def conv(tf, x, k=k, kb=kb, stride=stride, dil=dil, pad=pad, act=act):
            y = tf.nn.conv2d(x, k, strides=stride, padding=pad, dilations=dil) + kb
            return getattr(tf.nn, act)(y) if act else y
        _single(name, f"conv2d 3x3x3->4, stride {stride}, dilation {dil}, {pad}, bias, activation {act}.",
                conv, {"x": _rand(f"{name}/x", [1, 7, 8, 3])})
    dk = rng_for("dw/k").standard_normal((3, 3, 2, 2)).astype(np.float32)
    _single("depthwise_conv2d_mult2_relu", "depthwise conv 3x3, channel multiplier 2, SAME, stride 2, relu.",
            lambda tf, x: tf.nn.relu(tf.nn.depthwise_conv2d(x, dk, [1, 2, 2, 1], "SAME")), {"x": _rand("dw/x", [1, 6, 7, 2])})
    k3 = rng_for("conv3d/k").standard_normal((2, 2, 2, 2, 3)).astype(np.float32)
    _single("conv3d", "conv3d 2x2x2, 2->3 channels, VALID.", lambda tf, x: tf.nn.conv3d(x, k3, [1, 1, 1, 1, 1], "VALID"),
            {"x": _rand("conv3d/x", [1, 3, 4, 4, 2])})
    kt = rng_for("tconv/k").standard_normal((3, 3, 2, 3)).astype(np.float32)
    _single("transpose_conv", "conv2d_transpose 3x3, stride 2, SAME, 3->2 channels.",
            lambda tf, x: tf.nn.conv2d_transpose(x, kt, [1, 8, 8, 2], 2, "SAME"), {"x": _rand("tconv/x", [1, 4, 4, 3])})
    for name, fn in (("max_pool_same", lambda tf, x: tf.nn.max_pool2d(x, 3, 2, "SAME")),
                     ("max_pool_valid_relu", lambda tf, x: tf.nn.relu(tf.nn.max_pool2d(x, 2, 2, "VALID"))),
                     ("avg_pool_same", lambda tf, x: tf.nn.avg_pool2d(x, 3, 2, "SAME")),
                     ("avg_pool_valid", lambda tf, x: tf.nn.avg_pool2d(x, [2, 3], [1, 2], "VALID"))):
        _single(name, f"{name.replace('_', ' ')} on float32 [1,7,6,2].", fn, {"x": _rand(f"{name}/x", [1, 7, 6, 2])})
    for name, fn in (("resize_bilinear", lambda tf, x: tf.image.resize(x, [5, 7], "bilinear")),
                     ("resize_bilinear_align", lambda tf, x: tf.compat.v1.image.resize_bilinear(x, [5, 7], align_corners=True)),
                     ("resize_bilinear_legacy", lambda tf, x: tf.compat.v1.image.resize_bilinear(x, [2, 3])),
                     ("resize_nearest", lambda tf, x: tf.image.resize(x, [6, 9], "nearest")),
                     ("resize_nearest_align", lambda tf, x: tf.compat.v1.image.resize_nearest_neighbor(x, [5, 7], align_corners=True)),
                     ("resize_nearest_legacy", lambda tf, x: tf.compat.v1.image.resize_nearest_neighbor(x, [2, 5]))):
        _single(name, f"{name.replace('_', ' ')} of float32 [1,3,4,2].", fn, {"x": _rand(f"{name}/x", [1, 3, 4, 2])})
    _single("prelu_pattern", "PReLU written as relu(x) + alpha*min(x, 0) with per-channel alpha (the "
            "converter keeps RELU/MINIMUM/MUL/ADD).",
            lambda tf, x: tf.nn.relu(x) + np.array([0.1, -0.5, 2.0], np.float32) * tf.minimum(x, 0.0),
            {"x": _rand("prelu", [2, 4, 3])})
    _single("embedding_lookup", "nn.embedding_lookup of a constant [6,3] table.",
            lambda tf, i: tf.nn.embedding_lookup(rng_for("emb/t").standard_normal((6, 3)).astype(np.float32), i),
            {"i": np.array([[5, 0], [2, 2]], np.int32)})
    _single("sparse_to_dense", "raw_ops.SparseToDense: 3 indices into [3,4], default -1.",
            lambda tf, i, v: tf.raw_ops.SparseToDense(sparse_indices=i, output_shape=[3, 4], sparse_values=v, default_value=-1.0),
            {"i": np.array([[0, 1], [1, 3], [2, 0]], np.int32), "v": np.array([1.5, -2.0, 3.0], np.float32)})
    _single("bitcast_f32_to_i32", "bitcast float32 -> int32.", lambda tf, x: tf.bitcast(x, tf.int32), {"x": _rand("bitcast", [2, 3])})


_register_single_ops()


# ----------------------------------------------------------------------------------------------
# conversion and reference outputs

def _quiet(fn):
    def run(*a, **kw):
        import contextlib
        import io
        with contextlib.redirect_stdout(io.StringIO()):
            return fn(*a, **kw)
    return run


# ----------------------------------------------------------------------------------------------
# post-training quantization of programs above (converter variants of QUANTIZED_VARIANTS)

_VARIANT_TEXT = {"int8": "full-integer int8 (int8 inputs and outputs)",
                 "int8_uint8io": "full-integer int8 with uint8 inputs and outputs",
                 "int16x8": "16x8 (int16 activations, int8 weights, int16 inputs and outputs)",
                 "dynamic_range": "with dynamic-range quantization (Optimize.DEFAULT without a representative "
                                  "dataset: weights of 1024 or more elements int8, float activations, hybrid "
                                  "ops quantizing their inputs on the fly)",
                 "float16": "with float16 weights (Optimize.DEFAULT, supported_types [float16]: DEQUANTIZE "
                            "ops in front of the weights' consumers)"}
_VARIANT_SUFFIX = {"float16": "fp16"}  # program name suffix, as efficientnet_blocks_fp16


@program("dense_loop", "Quantized control flow's float twin: a tf.while_loop whose body is a dense layer "
                       "(matmul + bias, relu6) on a [2, 16] state, run a fixed 4 times; an IF picks one "
                       "of two dense heads by the sign of the state's sum.")
def _dense_loop(width: int = 16, heads: int = 4):
    tf = _tf()
    r = rng_for("dense_loop")
    w = tf.constant(r.normal(0, 0.3 * (16 / width) ** 0.5, (width, width)).astype(np.float32))
    b = tf.constant(r.normal(0, 0.1, (width,)).astype(np.float32))
    h1, h2 = (tf.constant(r.normal(0, 0.3, (width, heads)).astype(np.float32)) for _ in range(2))

    @tf.function(input_signature=[spec([2, width], tf.float32, "x")])
    def f(x):
        _, y = tf.while_loop(lambda i, y: i < 4, lambda i, y: (i + 1, tf.nn.relu6(tf.matmul(y, w) + b)),
                             [tf.constant(0), x])
        return tf.cond(tf.reduce_sum(y) > 10.0, lambda: tf.matmul(y, h1), lambda: tf.matmul(y, h2))

    return f, {"x": r.uniform(-1, 3, (2, width)).astype(np.float32)}


# Dynamic-range quantization leaves weights of fewer than 1024 elements float (a threshold the TF 2.21
# converter's Python API cannot change), so the small programs get widened twins for it.
_DYNAMIC_RANGE_WIDENED = {
    "mlp": (lambda: _mlp(hidden=128), "hidden Dense widened to 128 units"),
    "convnet": (lambda: _convnet(filters=128, units=8), "Conv2D widened to 128 filters, so the depthwise conv "
                                                        "has 128 channels, and the Dense to 8 units"),
    "keras_lstm": (lambda: _keras_lstm(units=16), "LSTM widened to 16 units"),
    "dense_loop": (lambda: _dense_loop(width=32, heads=32), "state widened to [2, 32] and the heads to 32 "
                                                            "outputs"),
}

for _base, _builder, _variants in (("mlp", _mlp, ("int8", "int8_uint8io", "int16x8", "dynamic_range", "float16")),
                                   ("convnet", _convnet, ("int8", "int8_uint8io", "int16x8", "dynamic_range",
                                                          "float16")),
                                   ("mobilenet_v2", _mobilenet_v2, ("int8", "int8_uint8io", "dynamic_range",
                                                                    "float16")),
                                   # no int16x8: see the note above transformer_decoder_step
                                   ("transformer_encoder", _transformer_encoder, ("int8", "dynamic_range",
                                                                                  "float16")),
                                   # Keras 3's LSTM becomes a WHILE loop of plain ops (no LSTM op) whose
                                   # int8 and int16x8 conversions crash (SIGSEGV in the calibrator's
                                   # _feed_tensors, TF 2.21) with every variation tried: float I/O, mixed
                                   # INT8+BUILTINS ops, return_sequences=False, batch 1, LSTM(2) on 3 steps
                                   # of 2 features, LSTM(8), stateful=True, experimental_new_quantizer
                                   # True/False, _experimental_lower_tensor_list_ops=True (False: the
                                   # TensorList ops are not legalized), a tf.function around the layer
                                   # (batch- or time-major); from_saved_model fails to legalize
                                   # TensorListReserve. unroll=True converts (no loop, no LSTM op left).
                                   # The full-integer LSTM op comes from Keras 2: see the lstm programs.
                                   ("keras_lstm", _keras_lstm, ("dynamic_range", "float16")),
                                   # the converter has no 16x8 UNIDIRECTIONAL_SEQUENCE_LSTM ("Quantization to
                                   # 16x8-bit not yet supported for op"), so no lstm_int16x8
                                   ("lstm", _lstm, ("int8", "int8_uint8io", "dynamic_range", "float16")),
                                   ("dense_loop", _dense_loop, ("int8", "dynamic_range", "float16"))):
    for _variant in _variants:
        _calibrated = _variant in QUANTIZED_VARIANTS
        _wide = _DYNAMIC_RANGE_WIDENED.get(_base) if _variant == "dynamic_range" else None
        program(f"{_base}_{_VARIANT_SUFFIX.get(_variant, _variant)}",
                f"{'Quantized' if _variant != 'float16' else 'Float16 weights'}: the {_base} program"
                + (f" ({_wide[1]}, so that weights reach the converter's 1024-element minimum for dynamic-range "
                   "quantization: at the float program's sizes every weight stays float)" if _wide else "")
                + f" converted {_VARIANT_TEXT[_variant]}"
                + (", calibrated on perturbed copies of its input." if _calibrated else "."),
                converter=_variant)(_wide[0] if _wide else _builder)


def _calibration(feed: dict[str, np.ndarray], name: str, count: int = 24) -> list[dict[str, np.ndarray]]:
    """Representative inputs for post-training quantization: the feed and perturbed copies of its float
    inputs (scaled by 0.7-1.3 plus noise of 10% of their spread); integer inputs stay as they are."""
    r = rng_for(name + "/calibration")
    out = [feed]
    for _ in range(count - 1):
        d = {}
        for k, x in feed.items():
            x = np.asarray(x)
            if x.dtype.kind == "f":
                spread = float(np.std(x)) or 1.0
                x = (x * r.uniform(0.7, 1.3) + r.normal(0, 0.1 * spread, x.shape)).astype(x.dtype)
            d[k] = x
        out.append(d)
    return out


def _is_tf_keras_model(obj: Any) -> bool:
    """A Keras 2 (tf_keras) model: the lstm programs need its LSTM, which the converter fuses."""
    return "tf_keras" in sys.modules and isinstance(obj, sys.modules["tf_keras"].Model)


def convert(obj: Any, variant: str = "", calibration: list[dict[str, np.ndarray]] | None = None
            ) -> tuple[bytes, Callable[..., Any], list[str]]:
    """(tflite bytes, a TF callable taking inputs by name, the argument names in call order).
    variant: see Program.converter; calibration: the representative inputs of a quantized variant."""
    tf = _tf()
    keras = _keras()
    if isinstance(obj, keras.Model) or _is_tf_keras_model(obj):
        names = [t.name.split(":")[0] for t in obj.inputs]
        try:
            conv = tf.lite.TFLiteConverter.from_keras_model(obj)
            conv.convert = _quiet(conv.convert)  # Keras' exporter prints its saved signature
        except Exception:  # pragma: no cover - older/newer Keras integrations
            conv = None
        if conv is None:
            fn = tf.function(lambda *xs: obj(list(xs) if len(xs) > 1 else xs[0]))
            cf = fn.get_concrete_function(*[tf.TensorSpec(t.shape, t.dtype) for t in obj.inputs])
            conv = tf.lite.TFLiteConverter.from_concrete_functions([cf], obj)

        def run_tf(feed):
            xs = [feed[n] for n in names]
            out = obj(xs if len(xs) > 1 else xs[0], training=False)
            return out if isinstance(out, (list, tuple)) else [out]
    else:
        cf = obj.get_concrete_function()
        names = [s.name for s in obj.input_signature]
        conv = tf.lite.TFLiteConverter.from_concrete_functions([cf], obj)

        def run_tf(feed):
            out = obj(*[feed[n] for n in names])
            if isinstance(out, dict):
                out = list(out.values())
            return list(out) if isinstance(out, (list, tuple)) else [out]
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    conv.optimizations = []
    if variant == "float16":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    elif variant == "dynamic_range":
        # no representative dataset: weights of >= 1024 elements become int8 (per channel where the
        # op allows), activations stay float32
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
    elif variant in QUANTIZED_VARIANTS:
        ops, io_type = QUANTIZED_VARIANTS[variant]
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_ops = [getattr(tf.lite.OpsSet, ops)]
        conv.inference_input_type = conv.inference_output_type = getattr(tf, io_type)
        feeds = calibration or []
        # several inputs go by signature name: the converted model may order them otherwise than `names`
        conv.representative_dataset = lambda: (({n: np.asarray(f[n]) for n in names} if len(names) > 1
                                                else [np.asarray(f[names[0]])]) for f in feeds)
    elif variant:
        raise ValueError(f"unknown converter variant {variant!r}")
    return conv.convert(), run_tf, names


def quantize_inputs(data: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Float inputs of a model whose inputs are quantized, quantized with each input's parameters (as
    the application feeding the model would: round half to even, clamp to the type)."""
    from ai_edge_litert.interpreter import Interpreter
    out = []
    for d, x in zip(Interpreter(model_content=data).get_input_details(), inputs):
        dt = np.dtype(d["dtype"])
        scale, zp = d["quantization"]
        if dt.kind in "iu" and x.dtype.kind == "f" and scale:
            info = np.iinfo(dt)
            x = np.clip(np.rint(x / scale) + zp, info.min, info.max).astype(dt)
        out.append(x)
    return out


def input_order(data: bytes, names: list[str]) -> list[str]:
    """The program's argument names in the order of the main subgraph's inputs."""
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_content=data)
    sigs = it.get_signature_list()
    details = it.get_input_details()
    index_to_pos = {d["index"]: k for k, d in enumerate(details)}
    if len(sigs) == 1:
        runner = it.get_signature_runner(next(iter(sigs)))
        by_name = runner.get_input_details()
        if len(by_name) == len(details):
            order = [None] * len(details)
            for arg, d in by_name.items():
                order[index_to_pos[d["index"]]] = arg
            if all(o in names for o in order):
                return order
            # Keras names signature inputs after the layer, not after our name: match by position
    if len(names) == len(details):
        return list(names)
    raise RuntimeError(f"cannot match inputs {names} to {[d['name'] for d in details]}")


def run_litert(data: bytes, inputs: list[np.ndarray], reference_kernels: bool = False,
               builtin: bool = False) -> list[np.ndarray]:
    """LiteRT's outputs: with its default resolver (XNNPACK where it applies), with ``reference_kernels``
    its BUILTIN_REF kernels, with ``builtin`` its builtin kernels without the default delegate."""
    from ai_edge_litert import interpreter as lite
    kw = {"experimental_op_resolver_type": lite.OpResolverType.BUILTIN_REF} if reference_kernels else {}
    if builtin:
        kw = {"experimental_op_resolver_type": lite.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}
    it = lite.Interpreter(model_content=data, **kw)
    details = it.get_input_details()
    for d, x in zip(details, inputs):
        if tuple(d["shape"]) != x.shape:
            it.resize_tensor_input(d["index"], list(x.shape))
    it.allocate_tensors()
    for d, x in zip(details, inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]


def ops_used(data: bytes) -> list[list[str]]:
    """Builtin op names per subgraph, read with onert_py's own loader."""
    sys.path.insert(0, str(REPO))
    import onert_py
    m = onert_py.load_model(data)
    return [sorted({op.opcode if op.opcode != "CUSTOM" else f"CUSTOM:{op.custom_name}"
                    for op in sg.operations}) for sg in m.subgraphs]


def _reference(data: bytes, run_tf: Callable[..., Any], feed: dict[str, np.ndarray],
               inputs: list[np.ndarray], quantized: bool = False, builtin: bool = False
               ) -> tuple[list[np.ndarray], str, str, bool | None, float | None]:
    """(outputs, source, note, tensorflow_agrees, kernel_spread) for one input set. kernel_spread is
    the max abs difference between LiteRT's default kernels and its reference kernels over the float
    outputs: how far two correct float32 implementations drift apart on this model. A quantized model's
    reference is LiteRT's builtin kernels (no delegate): what integer results must equal. So is a
    dynamic-range (`builtin`) model's, whose kernel_spread is then the max abs difference between
    LiteRT's default path (XNNPACK's own dynamically quantized kernels) and the builtin hybrid kernels."""
    if quantized:
        return run_litert(data, inputs, builtin=True), "litert-builtin", "", None, None
    if builtin:
        outputs = run_litert(data, inputs, builtin=True)
        default = run_litert(data, inputs)
        spread = max((float(np.max(np.abs(a.astype(np.float64) - b), initial=0.0))
                      for a, b in zip(default, outputs) if a.dtype.kind == "f"), default=None)
        return outputs, "litert-builtin", "", None, spread
    try:
        outputs = run_litert(data, inputs)
        source, note = "litert", ""
    except Exception as e:  # LiteRT cannot run it: keep TF's outputs and say so
        outputs = [np.asarray(t) for t in run_tf(feed)]
        source = "tensorflow"
        note = f"LiteRT failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
    # cross-check against TensorFlow itself (informational)
    try:
        tf_out = [np.asarray(t) for t in run_tf(feed)]
        # Keras models may list their outputs in another order than the converted model
        tf_agrees = len(tf_out) == len(outputs) and all(
            any(a.shape == b.shape and np.allclose(a, b, rtol=1e-4, atol=1e-4) for a in tf_out) for b in outputs)
    except Exception:
        tf_agrees = None
    spread = None
    if source == "litert" and any(y.dtype.kind == "f" for y in outputs):
        try:
            ref = run_litert(data, inputs, reference_kernels=True)
            spread = max(float(np.max(np.abs(a.astype(np.float64) - b), initial=0.0))
                         for a, b in zip(outputs, ref) if a.dtype.kind == "f")
        except Exception:
            spread = None
    return outputs, source, note, tf_agrees, spread


def _tolerances(prog: Program, outputs: list[np.ndarray]) -> tuple[float, float, str]:
    """(rtol, atol, reason) of a program. A dynamic-range model must equal LiteRT's builtin hybrid kernels
    within float32 rounding: the integer accumulators are exact, but their rescaling (input scale x weight
    scale) and the float ops around them round, so an output near zero that cancels larger terms carries
    an error relative to the model's magnitude rather than its own: atol 1e-5 is scaled to the largest
    output (when that is above 1)."""
    rtol, atol, reason = prog.rtol, prog.atol, prog.tolerance_reason
    if prog.converter == "dynamic_range" and not reason:
        mag = max((float(np.max(np.abs(y), initial=0.0)) for y in outputs if y.dtype.kind == "f"), default=0.0)
        if mag > 1.0:
            e = 10.0 ** np.floor(np.log10(atol * mag))
            atol = float(f"{np.ceil(atol * mag / e) * e:.1g}")
            reason = (f"dynamic range: equal to LiteRT's builtin hybrid kernels within float32 rounding; atol "
                      f"1e-5 scaled to the largest output magnitude ({mag:.3g}), since the hybrid kernels "
                      "rescale exact integer accumulators in float32 and cancellation near zero keeps the "
                      "rounding error of the larger terms")
    return rtol, atol, reason


def generate(prog: Program, out_dir: Path) -> dict[str, Any]:
    """Convert one program and store its .tflite and .npz; returns its MANIFEST entry.

    A program's build may return a list of feeds (e.g. two batch sizes or sequence lengths of a
    model with a dynamic shape signature): the first is stored as ``in_k``/``out_k``, the n-th
    further one as ``run<n>_in_k``/``run<n>_out_k``."""
    obj, feeds = prog.build()
    feeds = feeds if isinstance(feeds, list) else [feeds]
    quantized = prog.converter in QUANTIZED_VARIANTS
    builtin = prog.converter in BUILTIN_REFERENCE_VARIANTS
    calibration = _calibration(feeds[0], prog.name) if quantized else None
    data, run_tf, names = convert(obj, prog.converter, calibration)
    order = input_order(data, names)
    arrays: dict[str, np.ndarray] = {}
    runs = []
    for r, feed in enumerate(feeds):
        inputs = [np.array(feed[n], copy=True, order="C") for n in order]  # keeps 0-d inputs 0-d
        if quantized:
            inputs = quantize_inputs(data, inputs)
        outputs, source, note, tf_agrees, spread = _reference(data, run_tf, feed, inputs, quantized, builtin)
        prefix = f"run{r}_" if r else ""
        arrays.update({f"{prefix}in_{k}": x for k, x in enumerate(inputs)})
        arrays.update({f"{prefix}out_{k}": y for k, y in enumerate(outputs)})
        runs.append((inputs, outputs, source, note, tf_agrees, spread))
    sources = {run[2] for run in runs}
    if len(sources) > 1:
        raise RuntimeError(f"references from {sorted(sources)}: LiteRT ran only some input sets")
    inputs, outputs, source, note, _, _ = runs[0]
    rtol, atol, tolerance_reason = _tolerances(prog, [y for run in runs for y in run[1]])
    tf_agrees = None if any(run[4] is None for run in runs) else all(run[4] for run in runs)
    (out_dir / f"{prog.name}.tflite").write_bytes(data)
    arrays["source"] = np.array(source)
    np.savez_compressed(out_dir / f"{prog.name}.npz", **arrays)
    entry = {
        "name": prog.name,
        "description": prog.description,
        "source": source,
        "inputs": [{"name": n, "shape": list(x.shape), "dtype": str(x.dtype)} for n, x in zip(order, inputs)],
        "outputs": [{"shape": list(y.shape), "dtype": str(y.dtype)} for y in outputs],
        "rtol": rtol,
        "atol": atol,
        "ops": ops_used(data),
        "tensorflow_agrees": tf_agrees,
        "tflite_bytes": len(data),
    }
    if prog.converter:
        entry["converter"] = prog.converter
    if len(runs) > 1:
        entry["extra_runs"] = [{"inputs": [list(x.shape) for x in run[0]],
                                "outputs": [list(y.shape) for y in run[1]]} for run in runs[1:]]
    spreads = [run[5] for run in runs if run[5] is not None]
    if spreads:
        entry["litert_kernel_spread"] = float(f"{max(spreads):.3g}")
    if tolerance_reason:
        entry["tolerance_reason"] = tolerance_reason
    if note:
        entry["note"] = note
    return entry


def _dump_json(obj: Any) -> str:
    """Indented JSON with short lists and small objects kept on one line (readable diffs)."""
    import re
    text = json.dumps(obj, indent=1)
    # collapse lists of scalars, then {name, shape, dtype} objects
    text = re.sub(r"\[\s*([^\[\]{}]*?)\s*\]", lambda m: "[" + re.sub(r"\s*\n\s*", " ", m.group(1)) + "]", text)
    text = re.sub(r"\{\s*([^{}\[\]]*?(?:\[[^\[\]]*\][^{}\[\]]*?)*)\s*\}",
                  lambda m: "{" + re.sub(r"\s*\n\s*", " ", m.group(1)) + "}" if len(m.group(0)) < 200 else m.group(0),
                  text)
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--only", nargs="*", help="regenerate only these programs (MANIFEST is merged)")
    p.add_argument("--list", action="store_true")
    args = p.parse_args(argv)
    if args.list:
        for prog in PROGRAMS:
            print(f"{prog.name:24s} {prog.description}")
        return 0
    import tensorflow as tf
    tf.config.set_visible_devices([], "GPU")
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "MANIFEST.json"
    old = {}
    if args.only and manifest_path.exists():
        old = {e["name"]: e for e in json.loads(manifest_path.read_text())["models"]}
    entries = dict(old)
    failed = []
    for prog in PROGRAMS:
        if args.only and prog.name not in args.only:
            continue
        try:
            entries[prog.name] = e = generate(prog, args.out)
            print(f"{prog.name:24s} {e['source']:10s} {e['tflite_bytes']:7d} B  "
                  f"tf_agrees={e['tensorflow_agrees']}  ops={e['ops']}", flush=True)
        except Exception as ex:
            failed.append(prog.name)
            print(f"{prog.name:24s} FAILED: {type(ex).__name__}: {ex}", file=sys.stderr, flush=True)
    order = [p.name for p in PROGRAMS]
    models = sorted(entries.values(), key=lambda e: order.index(e["name"]) if e["name"] in order else 1e9)
    manifest = {
        "generator": "tools/conformance/generate.py",
        "tensorflow": tf.__version__,
        "converter": "TFLiteConverter, supported_ops=[TFLITE_BUILTINS], no optimizations",
        "default_rtol": 1e-5,
        "default_atol": 1e-5,
        "models": models,
    }
    manifest_path.write_text(_dump_json(manifest) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
