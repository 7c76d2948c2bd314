"""Make the converter-made loop models of benchmarks/models/ (needs the dev extra: TensorFlow).

    python benchmarks/make_loop_models.py

scalar_loop.tflite: tf.while_loop over [1]-shaped values, `i < reshape(n, [])`, v = v * 0.999 + 0.001,
n an input; matmul_loop.tflite: the same loop with body relu(v @ W) + sin(v) * 0.1 on a [512, 64] v;
and four more bodies on the same v, as recurrent cells and decays write them (tanh_cos_loop,
sigmoid_gate_loop, exp_decay_loop, sin_square_loop; BODIES below).
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
}


def _body_loop(body):
    @tf.function(input_signature=[tf.TensorSpec([512, 64], tf.float32, name="v"),
                                  tf.TensorSpec([1], tf.int32, name="n")])
    def loop(v, n):
        _, v = tf.while_loop(lambda i, v: i < tf.reshape(n, []), lambda i, v: (i + 1, body(v)),
                             [tf.constant(0), v])
        return v
    return loop


if __name__ == "__main__":
    OUT.mkdir(exist_ok=True)
    (OUT / "scalar_loop.tflite").write_bytes(_convert(scalar_loop))
    (OUT / "matmul_loop.tflite").write_bytes(_convert(matmul_loop))
    for name, body in BODIES.items():
        (OUT / f"{name}.tflite").write_bytes(_convert(_body_loop(body)))
