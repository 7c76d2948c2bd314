"""A zero-element constant (what the TFLite converter writes for ``tf.zeros([0])``) is stored with an
empty buffer; it must load as an empty array, not as a tensor without a value.

The converter model ``corpus/greedy_decode_grow_empty.tflite`` feeds such a constant to a WHILE as the
initial value of a growing sequence.
"""
import numpy as np

import onert_py
from helpers import assert_matches_litert, single_op_model

def _model():
    return single_op_model("CONCATENATION", [("x", [2], np.int32), ("const", np.zeros([0], np.int32))],
                           [("o", [2], np.int32)], axis=0, fused_activation_function=0)


def test_empty_constant_loads_as_empty_array():
    m = onert_py.load_model(_model().to_bytes("tflite"))
    t = m.subgraphs[0].tensors[m.subgraphs[0].operations[0].inputs[1]]
    assert t.data is not None and t.data.shape == (0,) and t.data.dtype == np.int32


def test_concat_with_empty_constant_matches_litert():
    assert_matches_litert(_model(), [np.array([3, 4], np.int32)])
