"""Make the converter-made Keras models of benchmarks/models/keras/ (needs the dev extra: TensorFlow).

    python benchmarks/make_keras_models.py [NAME ...]

Small models as people build them with Keras and convert with `from_keras_model` (1 thread, batch 1):
- transformer.tflite: token ids [1, 16] -> Embedding(200, 32) -> two encoder blocks (4-head
  MultiHeadAttention, residual + LayerNormalization, a GELU FFN of 64) -> mean over tokens -> Dense(10,
  softmax). The converter writes ~90 small ops: FULLY_CONNECTED, BATCH_MATMUL, TRANSPOSE, RESHAPE,
  SOFTMAX, MEAN, RSQRT and elementwise ones.
- mlp.tflite: [1, 64] -> Dense(128, relu) -> Dense(128, swish) -> Dense(10, softmax).
- small_cnn.tflite: [1, 32, 32, 3] -> Conv2D / BatchNormalization / MaxPool / SeparableConv2D /
  LeakyReLU -> GlobalAveragePooling2D -> Dense(10).
- causal_lm.tflite: token ids [batch, 16] with the batch left dynamic, as `K.Input` leaves it ->
  Embedding(200, 32) -> a decoder block (causally masked 4-head attention, LayerNormalization, a GELU FFN
  of 64) -> Dense(200) logits per token. The converter computes the reshapes' shapes at run time (SHAPE,
  STRIDED_SLICE, PACK, FILL of the mask): a compile for known input shapes folds them.
The tests run them against LiteRT (tests/models/test_keras_models.py); benchmarks/keras_models.py times
them.
"""
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

OUT = Path(__file__).resolve().parent / "models" / "keras"
K = tf.keras


def _save(name: str, model) -> None:
    data = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    (OUT / f"{name}.tflite").write_bytes(data)
    print(f"{name}.tflite: {len(data)} bytes")


def _encoder(x, d: int, heads: int, ff: int):
    a = K.layers.MultiHeadAttention(heads, d // heads)(x, x)
    x = K.layers.LayerNormalization()(x + a)
    f = K.layers.Dense(d)(K.layers.Dense(ff, activation="gelu")(x))
    return K.layers.LayerNormalization()(x + f)


def transformer():
    ids = K.Input((16,), batch_size=1, dtype="int32")
    x = K.layers.Embedding(200, 32)(ids)
    x = _encoder(_encoder(x, 32, 4, 64), 32, 4, 64)
    x = K.layers.GlobalAveragePooling1D()(x)
    return K.Model(ids, K.layers.Dense(10, activation="softmax")(x))


def causal_lm():
    ids = K.Input((16,), dtype="int32")
    x = K.layers.Embedding(200, 32)(ids)
    a = K.layers.MultiHeadAttention(4, 8)(x, x, use_causal_mask=True)
    x = K.layers.LayerNormalization()(x + a)
    f = K.layers.Dense(32)(K.layers.Dense(64, activation="gelu")(x))
    x = K.layers.LayerNormalization()(x + f)
    return K.Model(ids, K.layers.Dense(200)(x))


def mlp():
    m = K.Input((64,), batch_size=1)
    h = K.layers.Dense(128, activation="swish")(K.layers.Dense(128, activation="relu")(m))
    return K.Model(m, K.layers.Dense(10, activation="softmax")(h))


def small_cnn():
    i = K.Input((32, 32, 3), batch_size=1)
    z = K.layers.BatchNormalization()(K.layers.Conv2D(16, 3, padding="same", activation="relu")(i))
    z = K.layers.SeparableConv2D(32, 3, padding="same", activation="relu")(K.layers.MaxPool2D()(z))
    z = K.layers.LeakyReLU(0.1)(K.layers.Conv2D(32, 3, padding="same")(K.layers.MaxPool2D()(z)))
    return K.Model(i, K.layers.Dense(10)(K.layers.GlobalAveragePooling2D()(z)))


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    tf.random.set_seed(0)
    np.random.seed(0)
    wanted = sys.argv[1:]   # names to make (default: all)
    for make in (transformer, mlp, small_cnn, causal_lm):
        if not wanted or make.__name__ in wanted:
            _save(make.__name__, make())
