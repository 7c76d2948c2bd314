"""Shape rule coverage: every registered kernel has a shape rule or is listed as dynamic on purpose, and
the rules of the ops that had none give the shapes a run gives.

References: onert-py's own run (the shapes its kernels produce), and LiteRT's run where LiteRT has the
op (Circle-only ops such as GRU and the BCQ ops run in onert-py only).
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import onert_py
from helpers import accumulator_model, rng, run_litert, single_op_model
from onert_py.backends.registry import (CONTROLFLOW, CPU, SHAPE_RULES, VALUE_RULES, load_builtin_kernels,
                                       register_shape_function, shape_rule, value_rule)
from onert_py.compiler.shape_inference import infer_shapes, is_static
from onert_py.interpreter import Interpreter
from onert_py.schema.writer import ModelBuilder

# The op tests' model builders are reused (their modules are imported by name, as pytest imports them).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends" / "cpu"))
import test_bcq as bcq
import test_recurrent as rec
import test_stablehlo as shlo

F32, I32 = np.float32, np.int32

# Registered kernels without a shape rule, on purpose: their outputs are dynamic (-1 / unknown rank).
DYNAMIC_ON_PURPOSE = {
    # The value read is the variable's, whose shape is session state (the last ASSIGN_VARIABLE, maybe
    # in another subgraph or an earlier invoke) that shape inference does not see; LiteRT makes it
    # dynamic too.
    "READ_VARIABLE",
    # The number of skip-grams depends on the words of the input sentence (its value).
    "SKIP_GRAM",
}


# ---------------------------------------------------------------- coverage

def _kernels() -> set[str]:
    load_builtin_kernels()
    return set(CPU.kernels) | set(CONTROLFLOW.kernels)


def test_every_kernel_has_a_shape_rule_or_is_dynamic_on_purpose() -> None:
    missing = sorted(_kernels() - set(SHAPE_RULES) - DYNAMIC_ON_PURPOSE)
    assert not missing, f"registered kernels without a shape rule (add one, or list them in " \
                        f"DYNAMIC_ON_PURPOSE with the reason): {', '.join(missing)}"


def test_dynamic_on_purpose_list_is_not_stale() -> None:
    kernels = _kernels()
    unknown = sorted(DYNAMIC_ON_PURPOSE - kernels)
    assert not unknown, f"DYNAMIC_ON_PURPOSE names ops that have no kernel: {', '.join(unknown)}"
    ruled = sorted(DYNAMIC_ON_PURPOSE & set(SHAPE_RULES))
    assert not ruled, f"DYNAMIC_ON_PURPOSE names ops that now have a shape rule: {', '.join(ruled)}"


def test_registering_twice_is_refused_naming_the_op() -> None:
    """A second kernel, shape rule or value rule for the same op is a mistake, not an override."""
    load_builtin_kernels()
    before = (dict(SHAPE_RULES), dict(VALUE_RULES), dict(CPU.kernels))
    with pytest.raises(RuntimeError, match="shape rule RESHAPE registered twice"):
        shape_rule("RESHAPE")(lambda n: [None])
    with pytest.raises(RuntimeError, match="value rule SHAPE registered twice"):
        value_rule("SHAPE")(lambda n, v: None)
    with pytest.raises(RuntimeError, match="cpu: kernel ADD registered twice"):
        CPU.register("ADD")(lambda ctx: None)
    with pytest.raises(ValueError, match="already registered"):
        register_shape_function("TILE", lambda n: [None])
    assert (SHAPE_RULES, VALUE_RULES, CPU.kernels) == before


def test_kernel_attributes_replace_name_lists() -> None:
    """What the compiler and memory plan need is declared at registration."""
    load_builtin_kernels()
    assert CPU.attributes("ASSIGN_VARIABLE").keeps_inputs
    assert not CPU.attributes("ADD").keeps_inputs and CPU.attributes("ADD").foldable
    assert not any(CPU.attributes(op).foldable for op in ("VAR_HANDLE", "READ_VARIABLE", "RANDOM_UNIFORM",
                                                         "MULTINOMIAL", "HASHTABLE_FIND"))
    assert all(CONTROLFLOW.attributes(op).calls_subgraphs and not CONTROLFLOW.attributes(op).foldable
               for op in CONTROLFLOW.kernels)


# ---------------------------------------------------------------- inferred shapes vs run shapes

def _run_and_infer(data: bytes, inputs: Sequence[np.ndarray]) -> tuple[list, list, Any]:
    """The outputs of a run, the inferred output shapes for the inputs' shapes, and the inference result;
    every tensor of subgraph 0 inferred static (handles and other intermediates too) has the run's shape."""
    sess = onert_py.infer.session(data, preserve_all_tensors=True)
    outputs = sess.infer([np.array(x, copy=True) for x in inputs])
    model = onert_py.load_model(data)
    result = infer_shapes(model, 0, [np.shape(x) for x in inputs])
    for i, shape in enumerate(result.main.shapes):
        value = sess.executors[0].values[i]
        if is_static(shape) and value is not None:
            assert shape == np.shape(value), f"tensor {model.subgraphs[0].tensors[i].name}: inferred {shape}, " \
                                             f"the run gave {np.shape(value)}"
    return outputs, result.output_shapes(model), result


def check_rule(mb: ModelBuilder, inputs: Sequence[np.ndarray], fmt: str = "tflite", litert: bool = True,
               static: bool = True, declared: bool = False) -> list:
    """Shape inference gives exactly the shape of every output of a run (static, unless `static` is
    False: then each known dim is the run's). With `litert`, LiteRT's run gives the same shapes, and
    onert_py.Interpreter (the LITERT policy) reports LiteRT's shapes after allocate_tensors().

    The model's outputs are declared of unknown size first (so a rule cannot pass by echoing them),
    unless `declared`: the op's semantics give its outputs their declared shape."""
    if not declared:
        sg = mb.subgraphs[0]
        for o in sg.outputs:
            t = sg.tensors[o]
            t.shape, t.shape_signature = (1,) * len(t.shape), (-1,) * len(t.shape)
    outputs, inferred, _ = _run_and_infer(mb.to_bytes(fmt), inputs)
    assert len(inferred) == len(outputs)
    for k, (s, got) in enumerate(zip(inferred, outputs)):
        shape = np.shape(got)
        if static:
            assert is_static(s) and s == shape, f"output {k}: inferred {s}, the run gave {shape}"
        else:
            assert s is not None and len(s) == len(shape) and all(d < 0 or d == g for d, g in zip(s, shape)), \
                f"output {k}: inferred {s}, the run gave {shape}"
    if litert:
        expected = run_litert(mb, inputs)
        assert [np.shape(e) for e in expected] == [np.shape(g) for g in outputs]
        lite = pytest.importorskip("ai_edge_litert.interpreter")
        data = mb.to_bytes("tflite")
        builtin = lite.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES     # the shapes before any delegate
        reference = lite.Interpreter(model_content=data, experimental_op_resolver_type=builtin)
        assert _allocated(Interpreter(model_content=data), inputs) == _allocated(reference, inputs)
    return inferred


def _allocated(it: Any, inputs: Sequence[np.ndarray]) -> list[tuple[int, ...]]:
    """Output shapes an interpreter reports after resizing its inputs to `inputs` and allocate_tensors()."""
    for d, x in zip(it.get_input_details(), inputs):
        if tuple(d["shape"]) != np.shape(x):
            it.resize_tensor_input(d["index"], list(np.shape(x)))
    it.allocate_tensors()
    return [tuple(d["shape"].tolist()) for d in it.get_output_details()]


def _feed(shapes: Sequence[Sequence[int]], seed: int = 0) -> list[np.ndarray]:
    g = rng(seed)
    return [g.normal(size=s).astype(F32) for s in shapes]


def _resized(shape: Sequence[int], axis: int, size: int) -> list[int]:
    out = list(shape)
    out[axis] = size
    return out


def _open_axis(mb: ModelBuilder, axis: int) -> ModelBuilder:
    """Declares `axis` of every model input any size (a shape signature of -1), so runs may resize it."""
    sg = mb.subgraphs[0]
    for i in sg.inputs:
        t = sg.tensors[i]
        t.shape_signature = tuple(_resized(t.shape, axis, -1))
    return mb


# ---------------------------------------------------------------- recurrent (batch 3, a resized time axis)

@pytest.mark.parametrize("cfg", ["plain", "projection", "cifg_peephole"])
@pytest.mark.parametrize("time_major", [False, True])
def test_unidirectional_sequence_lstm(cfg: str, time_major: bool) -> None:
    mb, x_shape = rec._uni_lstm_model(cfg, batch=3, steps=4, time_major=time_major)
    time_axis = 0 if time_major else 1
    (out,) = check_rule(_open_axis(mb, time_axis), _feed([_resized(x_shape, time_axis, 6)]))
    assert out[time_axis] == 6 and out[1 - time_axis] == 3


@pytest.mark.parametrize("cfg", ["plain", "projection"])
def test_lstm(cfg: str) -> None:
    mb, x_shape = rec._lstm_step_model(cfg, batch=3)
    (out,) = check_rule(mb, _feed([x_shape]))
    assert out == (3, 4 if cfg == "projection" else 5)     # n_output: the projection's, else n_cell


@pytest.mark.parametrize("merge", [False, True])
@pytest.mark.parametrize("time_major,aux", [(True, None), (False, None), (True, "cross")])
def test_bidirectional_sequence_lstm(merge: bool, time_major: bool, aux: str | None) -> None:
    mb, shapes = rec._bidi_lstm_model("projection", batch=3, steps=4, time_major=time_major, merge=merge,
                                      aux=aux)
    time_axis = 0 if time_major else 1
    check_rule(_open_axis(mb, time_axis), _feed([_resized(s, time_axis, 5) for s in shapes]))


def test_rnn() -> None:
    mb, x_shape = rec._rnn_model("RNN", batch=3, units=7)
    assert check_rule(mb, _feed([x_shape])) == [(3, 7)]


@pytest.mark.parametrize("time_major", [False, True])
def test_unidirectional_sequence_rnn(time_major: bool) -> None:
    mb, x_shape = rec._rnn_model("UNIDIRECTIONAL_SEQUENCE_RNN", batch=3, steps=4, time_major=time_major)
    time_axis = 0 if time_major else 1
    check_rule(_open_axis(mb, time_axis), _feed([_resized(x_shape, time_axis, 7)]))


@pytest.mark.parametrize("merge", [False, True])
@pytest.mark.parametrize("time_major,aux", [(False, None), (True, None), (True, "bw_input")])
def test_bidirectional_sequence_rnn(merge: bool, time_major: bool, aux: str | None) -> None:
    mb, shapes = rec._bidi_rnn_model(batch=3, steps=4, time_major=time_major, merge=merge, aux=aux)
    time_axis = 0 if time_major else 1
    outs = check_rule(_open_axis(mb, time_axis), _feed([_resized(s, time_axis, 6) for s in shapes]))
    assert [o[-1] for o in outs] == ([5 + 3] if merge else [5, 3])     # fw_units=5, bw_units=3


@pytest.mark.parametrize("rank", [1, 2])
def test_svdf(rank: int) -> None:
    mb, x_shape = rec._svdf_model(batch=3, units=5, rank=rank)
    assert check_rule(mb, _feed([x_shape])) == [(3, 5)]


# ---------------------------------------------------------------- Circle-only ops (onert-py runs them alone)

@pytest.mark.parametrize("sequences", [False, True])
def test_gru(sequences: bool) -> None:
    g = rng(1)
    t, b, i, h = 5, 3, 2, 4
    w_x, w_h = g.normal(size=[3 * h, i]).astype(F32), g.normal(size=[3 * h, h]).astype(F32)
    bias = g.normal(size=[3 * h]).astype(F32)
    out_shape = [t, b, h] if sequences else [b, h]
    mb = single_op_model("GRU", [("x", [t, b, i], F32), ("const", w_x), ("const", bias), ("const", w_h),
                                 ("const", bias), ("h0", [b, h], F32)], [("o", out_shape, F32)],
                         return_sequences=sequences)
    check_rule(mb, _feed([[t, b, i], [b, h]]), fmt="circle", litert=False, declared=True)


def test_bcq_fully_connected() -> None:
    g = rng(2)
    _, scales, binary, cl = bcq.make_bcq(g, [(2, 3), (1, 4)], 40)
    mb = bcq.fc_model(scales, binary, cl, 40, None, x_shape=[40, -1])
    for batch in (1, 3):
        assert check_rule(mb, [g.normal(size=[40, batch]).astype(F32)], fmt="circle", litert=False) \
            == [(7, batch)]


@pytest.mark.parametrize("axis,idx_shape", [(0, [2, 3]), (1, [4]), (-1, [])])
def test_bcq_gather(axis: int, idx_shape: list[int]) -> None:
    g = rng(3)
    w, scales, binary, cl = bcq.make_bcq(g, [(2, 3), (1, 2)], 33)
    idx = g.integers(0, w.shape[axis], idx_shape).astype(I32)
    mb = bcq.gather_model(scales, binary, cl, 33, idx_shape, list(np.take(w, idx, axis=axis).shape), axis=axis)
    check_rule(mb, [idx], fmt="circle", litert=False)


# ---------------------------------------------------------------- lookups

def test_hashtable_lookup() -> None:
    keys = np.array([-3, 0, 2, 5, 9], I32)
    vals = rng(4).normal(size=[5, 2, 3]).astype(F32)
    mb = single_op_model("HASHTABLE_LOOKUP", [("q", [-1], I32), ("const", keys), ("const", vals)],
                         [("o", [7, 2, 3], F32), ("hits", [7], np.uint8)])
    q = np.array([5, 1, -3, 9], I32)            # 4 lookups, not the declared output's 7
    assert check_rule(mb, [q]) == [(4, 2, 3), (4,)]


@pytest.mark.parametrize("const_dense", [True, False])
def test_embedding_lookup_sparse(const_dense: bool) -> None:
    params = rng(5).normal(size=(10, 3, 2)).astype(F32)
    indices = np.array([[0, 0, 0], [0, 0, 1], [0, 2, 0], [1, 1, 0], [1, 1, 4], [1, 2, 1]], I32)
    dense = np.array([2, 4, 5], I32)
    ids, w = np.array([1, 3, 0, 9, 9, 4], I32), rng(6).uniform(0.5, 2, 6).astype(F32)
    dense_in = ("const", dense) if const_dense else ("dense", [3], I32)
    mb = single_op_model("EMBEDDING_LOOKUP_SPARSE", [("ids", [6], I32), ("const", indices), dense_in,
                                                     ("w", [6], F32), ("const", params)],
                         [("o", [2, 4, 3, 2], F32)], combiner=1)
    inputs = [ids, w] if const_dense else [ids, dense, w]
    # dense_shape given at run time: its length still gives the rank, its values the first dims.
    out = check_rule(mb, inputs, static=const_dense)
    assert out == [(2, 4, 3, 2) if const_dense else (-1, -1, 3, 2)]


@pytest.mark.parametrize("kind", [1, 2])       # SPARSE, DENSE
@pytest.mark.parametrize("const_hash", [True, False])
def test_lsh_projection(kind: int, const_hash: bool) -> None:
    hashes = rng(7).normal(size=(3, 5)).astype(F32)
    hash_in = ("const", hashes) if const_hash else ("h", [3, 5], F32)
    mb = single_op_model("LSH_PROJECTION", [hash_in, ("x", [4, 2], I32), ("w", [4], F32)],
                         [("o", [3 if kind == 1 else 15], I32)], type=kind)
    inputs = [np.arange(8, dtype=I32).reshape(4, 2), np.linspace(0.5, 2, 4).astype(F32)]
    assert check_rule(mb, inputs if const_hash else [hashes] + inputs) == [(3,) if kind == 1 else (15,)]


# ---------------------------------------------------------------- DILATE, REDUCE_WINDOW

def test_dilate() -> None:
    mb = single_op_model("DILATE", [("x", [-1, -1, -1], F32), ("const", np.array([2, 1, 3], I32)),
                                    ("const", np.array(-1.5, F32))], [("o", [5, 2, 10], F32)])
    assert check_rule(mb, _feed([[4, 3, 2]])) == [(7, 3, 4)]     # not the declared output [5, 2, 10]


def test_dilate_runtime_dilations_keep_the_rank() -> None:
    mb = single_op_model("DILATE", [("x", [3, 2], F32), ("d", [2], I32), ("const", np.array(0, F32))],
                         [("o", [5, 4], F32)])
    out = check_rule(mb, _feed([[3, 2]]) + [np.array([2, 3], I32)], static=False)
    assert out == [(-1, -1)]


def test_reduce_window() -> None:
    mb = single_op_model("REDUCE_WINDOW", [("x", [-1, -1], F32), ("const", np.array(0, F32)),
                                           ("const", np.array([2, 3], np.int64)),
                                           ("const", np.array([2, 1], np.int64)),
                                           ("const", np.array([1, 2], np.int64))],
                         [("o", [3, 4], F32)], reduce_function=1)
    # dim 0: (9 - 2) // 2 + 1 = 4; dim 1: the dilated window spans 5 of 6, (6 - 5) // 1 + 1 = 2
    assert check_rule(mb, _feed([[9, 6]])) == [(4, 2)]


# ---------------------------------------------------------------- StableHLO

@pytest.mark.parametrize("case", range(len(shlo.GATHERS)))
def test_stablehlo_gather(case: int) -> None:
    shape, idx, offset, collapsed, sim, ivd, sizes, out_shape = shlo.GATHERS[case]
    x = rng(8).uniform(-1, 1, shape).astype(F32)
    idx = np.array(idx, I32)
    mb = single_op_model("STABLEHLO_GATHER", [("x", shape, F32), ("const", idx)], [("o", out_shape, F32)],
                         offset_dims=offset, collapsed_slice_dims=collapsed, start_index_map=sim,
                         index_vector_dim=ivd, slice_sizes=sizes)
    assert check_rule(mb, [x]) == [tuple(out_shape)]


def test_stablehlo_gather_indices_given_at_run_time() -> None:
    # Rows gathered by a [4, 1] index input (declared [3, 1]): the batch dim follows the indices.
    mb = single_op_model("STABLEHLO_GATHER", [("x", [5, 3], F32), ("idx", [-1, 1], I32)], [("o", [3, 3], F32)],
                         offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1,
                         slice_sizes=[1, 3])
    assert check_rule(mb, _feed([[5, 3]]) + [np.array([[0], [4], [2], [1]], I32)]) == [(4, 3)]


@pytest.mark.parametrize("cfg", [
    {"window_dimensions": [2, 2], "window_strides": [1, 1]},
    {"window_dimensions": [2, 3], "window_strides": [2, 1], "padding": [1, 0, 0, 1]},
    {"window_dimensions": [2, 2], "window_strides": [1, 2], "base_dilations": [2, 1], "window_dilations": [1, 2]},
])
def test_stablehlo_reduce_window(cfg: dict) -> None:
    mb = shlo._reduce_window_model("STABLEHLO_ADD", [-1, -1], [4, 5], **cfg)
    check_rule(mb, _feed([[6, 7]]))         # not the declared output [4, 5]


def test_stablehlo_reduce_window_negative_padding_crops() -> None:
    # Negative edge padding crops the operand (LiteRT's kernel is not the reference for it).
    mb = shlo._reduce_window_model("STABLEHLO_MAXIMUM", [6, 5], [2, 5], window_dimensions=[2, 1],
                                   window_strides=[2, 1], padding=[-1, -1, 1, -1])
    assert check_rule(mb, _feed([[6, 5]]), litert=False) == [(2, 5)]


@pytest.mark.parametrize("algorithm,n_state", [(0, 2), (1, 3), (2, 2)])
def test_stablehlo_rng_bit_generator(algorithm: int, n_state: int) -> None:
    state_value = np.array([0x0123456789ABCDEF, 0xFFFFFFFFFFFFFFFE, 42][:n_state], np.uint64)
    mb = single_op_model("STABLEHLO_RNG_BIT_GENERATOR", [("s", [n_state], np.uint64)],
                         [("so", [n_state], np.uint64), ("o", [2, 3], np.uint32)], algorithm=algorithm)
    assert check_rule(mb, [state_value], declared=True) == [(n_state,), (2, 3)]


# ---------------------------------------------------------------- variables and hash tables

@pytest.mark.parametrize("handle_shape", [[], [1]])
def test_assign_variable_has_no_outputs_and_leaves_nothing_dynamic(handle_shape: list[int]) -> None:
    mb = ModelBuilder()
    main = mb.subgraph("main")
    x = main.tensor("x", [3], F32)
    h = main.tensor("h", handle_shape, I32, type_name="RESOURCE")
    y = main.tensor("y", [3], F32)
    main.op("VAR_HANDLE", [], [h], container="", shared_name="v")
    main.op("ASSIGN_VARIABLE", [h, x], [])
    main.op("RELU", [x], [y])
    main.inputs, main.outputs = [x], [y]
    mb.signature("serving_default", main)
    check_rule(mb, [np.ones([3], F32)])
    model = onert_py.load_model(mb.to_bytes("tflite"))
    result = infer_shapes(model, 0, [(3,)])
    assert not result.main.has_dynamic and len(result.main.order) == 3
    # VAR_HANDLE writes the handle in its declared shape
    sess = onert_py.infer.session(mb.to_bytes("tflite"))
    sess.infer([np.ones([3], F32)])
    assert result.main.shapes[h] == np.shape(sess.executors[0].values[h]) == tuple(handle_shape)


def test_read_variable_is_dynamic() -> None:
    model = onert_py.load_model(accumulator_model().to_bytes("tflite"))
    result = infer_shapes(model, 0, [(2,)])
    cur = next(t.index for t in model.subgraphs[0].tensors if t.name == "cur")
    assert result.main.shapes[cur] is None


def _hashtable_model(size_shape: list[int]) -> ModelBuilder:
    """test_state's table (CALL_ONCE imports {1: one, 5: five, 9: nine}), with keys of any 2-D shape
    and the size declared `size_shape`."""
    mb = ModelBuilder()
    main, init = mb.subgraph("main"), mb.subgraph("init")
    keys = main.tensor("keys", [-1, -1], np.int64)
    h = main.tensor("h", [], I32, type_name="RESOURCE")
    dflt = main.const("default", np.array(b"?", dtype=object).reshape(()))
    found, size = main.tensor("found", [-1, -1], object), main.tensor("size", size_shape, np.int64)
    main.op("CALL_ONCE", [], [], init_subgraph_index=1)
    main.op("HASHTABLE", [], [h], table_id=7, key_dtype=4, value_dtype=5)  # INT64 -> STRING
    main.op("HASHTABLE_FIND", [h, keys, dflt], [found])
    main.op("HASHTABLE_SIZE", [h], [size])
    main.inputs, main.outputs = [keys], [found, size]
    ih = init.tensor("h", [], I32, type_name="RESOURCE")
    ks = init.const("k", np.array([1, 5, 9], np.int64))
    vs = init.const("v", np.array([b"one", b"five", b"nine"], dtype=object))
    init.op("HASHTABLE", [], [ih], table_id=7, key_dtype=4, value_dtype=5)
    init.op("HASHTABLE_IMPORT", [ih, ks, vs], [])
    mb.signature("serving_default", main)
    return mb


@pytest.mark.parametrize("size_shape", [[], [1]])
def test_hashtable_ops(size_shape: list[int]) -> None:
    mb = _hashtable_model(size_shape)
    keys = np.array([[5, 2, 1], [9, 0, 5]], np.int64)
    data = mb.to_bytes("tflite")
    outputs, inferred, result = _run_and_infer(data, [keys])
    assert inferred == [(2, 3), tuple(size_shape)] == [np.shape(o) for o in outputs]
    assert not any(r.has_dynamic for r in result.subgraphs.values())    # HASHTABLE, IMPORT (init), FIND, SIZE
    found, size = run_litert(mb, [keys])
    assert found.shape == (2, 3)
    # LiteRT resizes the size to [1] whatever its declared shape; onert-py keeps the declared one.
    assert size.shape == (1,)
