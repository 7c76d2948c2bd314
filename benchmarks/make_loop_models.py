"""Make the converter-made loop models of benchmarks/models/ (needs the dev extra: TensorFlow).

    python benchmarks/make_loop_models.py

scalar_loop.tflite: tf.while_loop over [1]-shaped values, `i < reshape(n, [])`, v = v * 0.999 + 0.001,
n an input; matmul_loop.tflite: the same loop with body relu(v @ W) + sin(v) * 0.1 on a [512, 64] v;
and six more bodies on the same v, as recurrent cells, decays and normalisations write them
(tanh_cos_loop, sigmoid_gate_loop, exp_decay_loop, sin_square_loop, elu_residual_loop, row_norm_loop:
BODIES below); and models/idioms/: small loops
written the ways people write them (IDIOMS below), for the tests and benchmarks/loops.py --idioms.
What the TFLite converter emits for these (shape-[1] loop values, a RESHAPE of the bound) is what the
loop benchmark measures, beside hand-built loops.
"""
from pathlib import Path

import numpy as np
import tensorflow as tf

OUT = Path(__file__).resolve().parent / "models"


def _convert(fn) -> bytes:
    return tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], fn).convert()


@tf.function(input_signature=[tf.TensorSpec([1], tf.float32, name="v"), tf.TensorSpec([1], tf.int32, name="n")])
def scalar_loop(v, n):
    _, v = tf.while_loop(lambda i, v: i < tf.reshape(n, []), lambda i, v: (i + 1, v * 0.999 + 0.001),
                         [tf.constant(0), v])
    return v


W = tf.constant(np.random.default_rng(0).normal(0, 0.1, (64, 64)).astype(np.float32))


@tf.function(input_signature=[tf.TensorSpec([512, 64], tf.float32, name="v"), tf.TensorSpec([1], tf.int32, name="n")])
def matmul_loop(v, n):
    _, v = tf.while_loop(lambda i, v: i < tf.reshape(n, []),
                         lambda i, v: (i + 1, tf.nn.relu(v @ W) + tf.sin(v) * 0.1), [tf.constant(0), v])
    return v


B = tf.constant(np.random.default_rng(1).normal(0, 0.1, (64,)).astype(np.float32))
BODIES = {
    "tanh_cos_loop": lambda v: tf.tanh(v @ W) + tf.cos(v) * 0.1,
    "sigmoid_gate_loop": lambda v: tf.sigmoid(v @ W + B) * v,
    "exp_decay_loop": lambda v: tf.nn.relu(v @ W) + tf.exp(-tf.abs(v)) * 0.05,
    "sin_square_loop": lambda v: tf.nn.relu6(v @ W + B) - tf.square(tf.sin(v)) * 0.1,
    "elu_residual_loop": lambda v: tf.nn.elu(v @ W) * 0.9 + v * 0.1,
    "row_norm_loop": lambda v: tf.nn.leaky_relu(v @ W, 0.2) / (1.0 + tf.reduce_mean(tf.abs(v), axis=-1, keepdims=True)),
}


def _body_loop(body):
    @tf.function(input_signature=[tf.TensorSpec([512, 64], tf.float32, name="v"),
                                  tf.TensorSpec([1], tf.int32, name="n")])
    def loop(v, n):
        _, v = tf.while_loop(lambda i, v: i < tf.reshape(n, []), lambda i, v: (i + 1, body(v)),
                             [tf.constant(0), v])
        return v
    return loop


# Loops as people write them, each an idiom the converter lowers its own way (whole-loop compilation
# must take them all): maximum_iterations (a second counter and a LOGICAL_AND in the cond), Python
# loops over tf.range (autograph), two loop values, a shift register (STRIDED_SLICE, MEAN,
# CONCATENATION), a recurrent cell (a small FULLY_CONNECTED), a sequence read at the counter (xs[t]:
# a STRIDED_SLICE whose begin is the counter; tf.gather), tf.where (SELECT), a tolerance test
# (REDUCE_MAX), a loop in a loop, a Python `and` in the cond (an IF in the cond subgraph), a unary op on a
# [1]-shaped value (SQRT) and a [1, 1]-shaped value (a 1x1 matrix).
S = tf.TensorSpec
W64 = tf.constant(np.random.default_rng(2).normal(0, 0.15, (64, 64)).astype(np.float32))


@tf.function(input_signature=[S([1], tf.float32, name="v"), S([], tf.int32, name="n")])
def maxiter_loop(v, n):
    _, v = tf.while_loop(lambda i, v: v[0] < 1e9, lambda i, v: (i + 1, v * 0.999 + 0.001), [tf.constant(0), v],
                         maximum_iterations=n)
    return v


@tf.function(input_signature=[S([], tf.float32, name="v"), S([], tf.int32, name="n")])
def range_loop(v, n):
    for _ in tf.range(n):
        v = v * 0.999 + 0.001
    return v


@tf.function(input_signature=[S([4], tf.float32, name="v"), S([], tf.int32, name="n")])
def two_values_loop(v, n):
    i, a = tf.constant(0), tf.zeros([4])
    while i < n:
        a = a + tf.tanh(v) * 0.5
        v = v * 0.9 + 0.1
        i += 1
    return a, v


@tf.function(input_signature=[S([8], tf.float32, name="v"), S([], tf.int32, name="n")])
def shift_loop(v, n):
    for _ in tf.range(n):
        v = tf.concat([v[1:], tf.reshape(tf.reduce_mean(v), [1])], 0)
    return v


@tf.function(input_signature=[S([1, 64], tf.float32, name="v"), S([], tf.int32, name="n")])
def rnn_loop(v, n):
    for _ in tf.range(n):
        v = tf.tanh(tf.matmul(v, W64) + 0.01)
    return v


@tf.function(input_signature=[S([10, 8], tf.float32, name="xs"), S([], tf.int32, name="n")])
def sequence_loop(xs, n):
    h = tf.zeros([8])
    for t in tf.range(n):
        h = tf.tanh(h * 0.5 + xs[t])
    return h


@tf.function(input_signature=[S([10, 8], tf.float32, name="xs"), S([], tf.int32, name="n")])
def gather_loop(xs, n):
    h = tf.zeros([8])
    for t in tf.range(n):
        h = h * 0.5 + tf.gather(xs, t)
    return h


@tf.function(input_signature=[S([8], tf.float32, name="v"), S([], tf.int32, name="n")])
def select_loop(v, n):
    for _ in tf.range(n):
        v = tf.where(v > 0.5, v * 0.5, v + 0.3)
    return v


@tf.function(input_signature=[S([8], tf.float32, name="v")])
def tolerance_loop(v):
    d = tf.constant(1.0)
    while d > 1e-4:
        y = 0.5 * v + 0.1
        d = tf.reduce_max(tf.abs(y - v))
        v = y
    return v


@tf.function(input_signature=[S([16], tf.float32, name="v"), S([], tf.int32, name="n")])
def nested_loop(v, n):
    for _ in tf.range(n):
        for j in tf.range(3):
            v = v * 0.99 + tf.cast(j, tf.float32) * 0.001
    return v


@tf.function(input_signature=[S([], tf.float32, name="x")])
def newton_loop(x):
    y, i = x, tf.constant(0)
    while tf.abs(y * y - x) > 1e-3 * x and i < 1000:
        y, i = 0.5 * (y + x / y), i + 1
    return y, i


@tf.function(input_signature=[S([8], tf.float32, name="v"), S([], tf.int32, name="n")])
def tensor_array_loop(v, n):
    steps = tf.TensorArray(tf.float32, size=6)
    for t in tf.range(n):
        v = v * 0.9 + 0.1
        steps = steps.write(t, v)
    return steps.stack()


@tf.function(input_signature=[S([1], tf.float32, name="v"), S([], tf.int32, name="n")])
def sqrt_loop(v, n):
    i = tf.constant(0)
    while i < n:
        v = tf.sqrt(v * v + 1.0) - 0.5
        i += 1
    return v


@tf.function(input_signature=[S([1, 1], tf.float32, name="v"), S([], tf.int32, name="n")])
def unit_matrix_loop(v, n):
    for _ in tf.range(n):
        v = v * 0.999 + 0.001
    return v


IDIOMS = (maxiter_loop, range_loop, two_values_loop, shift_loop, rnn_loop, sequence_loop, gather_loop,
          select_loop, tolerance_loop, nested_loop, newton_loop, tensor_array_loop, sqrt_loop, unit_matrix_loop)


def _recurrent_model(layer) -> bytes:
    """A Keras recurrent layer over [1, 24, 8] steps as from_keras_model converts it: a WHILE over the
    steps whose body reads step t (GATHER), runs the cell's two FULLY_CONNECTEDs, SPLITs the gates and
    applies them (LOGISTIC, TANH, MUL, ADD; GRU's recurrent gates by STRIDED_SLICE); with
    return_sequences, writes step t's output into a list (TensorListSetItem: two SLICEs and a
    CONCATENATION)."""
    tf.keras.utils.set_random_seed(0)
    xs = tf.keras.Input((24, 8), batch_size=1, name="xs")
    model = tf.keras.Model(xs, layer(16)(xs))
    return tf.lite.TFLiteConverter.from_keras_model(model).convert()


# Keras layers: converted from a model (with its weights), not from a tf.function
RECURRENT = {"lstm_layer": tf.keras.layers.LSTM, "gru_layer": tf.keras.layers.GRU,
             "lstm_sequence": lambda units: tf.keras.layers.LSTM(units, return_sequences=True)}


if __name__ == "__main__":
    OUT.mkdir(exist_ok=True)
    (OUT / "scalar_loop.tflite").write_bytes(_convert(scalar_loop))
    (OUT / "matmul_loop.tflite").write_bytes(_convert(matmul_loop))
    for name, body in BODIES.items():
        (OUT / f"{name}.tflite").write_bytes(_convert(_body_loop(body)))
    (OUT / "idioms").mkdir(exist_ok=True)
    for fn in IDIOMS:
        (OUT / "idioms" / f"{fn.__name__}.tflite").write_bytes(_convert(fn))
    for name, layer in RECURRENT.items():
        (OUT / "idioms" / f"{name}.tflite").write_bytes(_recurrent_model(layer))
