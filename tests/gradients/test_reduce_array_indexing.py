"""Gradients of the reduction, array, indexing and shape families (backends/cpu/reduce.py, array.py,
indexing.py, shape.py), against central finite differences; ties and edges against TensorFlow's
conventions."""
import numpy as np
import pytest
from helpers import check_gradients, rng, single_op_model
from helpers import distinct_f32 as distinct, rand_f32 as rand

import onert_py
from onert_py.backends.registry import GRAD_RULES, load_builtin_kernels

F32 = np.float32
I32 = np.int32



def model(opcode, x_shape, consts, out_shape, **options):
    """One op reading model input x (float32) then the constants `consts`."""
    return single_op_model(opcode, [("x", list(x_shape), F32)] + [("const", c) for c in consts],
                           [("y", list(out_shape), F32)], **options)


def grads(mb, inputs, cotangents=None, wrt=None):
    _, g = onert_py.infer.session(mb.to_bytes("tflite")).gradients(inputs, cotangents, wrt)
    return g


# ----------------------------------------------------------------------------------- reductions

REDUCE_CASES = [
    # (x shape, axes, keep_dims, output shape)
    ((2, 3, 4), [1], False, (2, 4)),
    ((2, 3, 4), [1], True, (2, 1, 4)),
    ((2, 3, 4), [-1, 0], False, (3,)),
    ((2, 3, 4), [2, -3], True, (1, 3, 1)),
    ((2, 3), [0, 1], False, ()),
    ((2, 3), [1, 1, -1], False, (2,)),        # duplicate axes
    ((2, 3), [], False, (2, 3)),              # nothing reduced
]


@pytest.mark.parametrize("opcode", ["SUM", "MEAN"])
@pytest.mark.parametrize("shape,axes,keep,out", REDUCE_CASES)
def test_sum_mean(opcode, shape, axes, keep, out):
    check_gradients(model(opcode, shape, [np.array(axes, I32)], out, keep_dims=keep), [rand(*shape)])


@pytest.mark.parametrize("shape,axes,keep,out", REDUCE_CASES[:5])
def test_reduce_prod(shape, axes, keep, out):
    x = rng(1).uniform(0.5, 1.5, size=shape).astype(F32) * rng(2).choice([-1, 1], size=shape).astype(F32)
    check_gradients(model("REDUCE_PROD", shape, [np.array(axes, I32)], out, keep_dims=keep), [x])


@pytest.mark.parametrize("zeros", [[0], [0, 2], [1, 4, 5]])
def test_reduce_prod_with_zeros(zeros):
    # one zero in a slice: only the zero gets a gradient (the product of the others); two: none
    x = rng(3).uniform(0.5, 1.5, size=(2, 3)).astype(F32)
    x.reshape(-1)[zeros] = 0
    m = model("REDUCE_PROD", (2, 3), [np.array([1], I32)], (2,), keep_dims=False)
    g = check_gradients(m, [x])["x"]
    assert np.all(np.isfinite(g))
    g1 = grads(m, [x], [np.ones(2, F32)])["x"]
    for r in range(2):
        z = x[r] == 0
        if z.sum() == 0:
            np.testing.assert_allclose(g1[r], np.prod(x[r]) / x[r], rtol=1e-5)
        elif z.sum() == 1:
            np.testing.assert_allclose(g1[r], np.where(z, np.prod(x[r][~z]), 0), rtol=1e-5)
        else:
            np.testing.assert_array_equal(g1[r], 0)


@pytest.mark.parametrize("opcode", ["REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("shape,axes,keep,out", REDUCE_CASES[:5])
def test_reduce_extremum(opcode, shape, axes, keep, out):
    check_gradients(model(opcode, shape, [np.array(axes, I32)], out, keep_dims=keep), [distinct(*shape)])


@pytest.mark.parametrize("opcode", ["REDUCE_MAX", "REDUCE_MIN"])
def test_reduce_extremum_ties_split_equally(opcode):
    x = np.array([[1, 3, 3, 0], [2, 2, 2, -1], [5, 5, 5, 5]], F32)
    if opcode == "REDUCE_MIN":
        x = -x
    m = model(opcode, (3, 4), [np.array([1], I32)], (3,), keep_dims=False)
    g = grads(m, [x], [np.array([1, 3, 8], F32)])["x"]
    want = np.array([[0, .5, .5, 0], [1, 1, 1, 0], [2, 2, 2, 2]], F32)
    np.testing.assert_allclose(g, want, rtol=1e-6)
    # two tied values: central differences give the same half each
    check_gradients(m, [x[:1].repeat(3, 0)])


def test_topk_values():
    m = single_op_model("TOPK_V2", [("x", [2, 5], F32), ("const", np.array(3, I32))],
                        [("values", [2, 3], F32), ("indices", [2, 3], I32)])
    check_gradients(m, [distinct(2, 5)])


@pytest.mark.parametrize("opcode", ["ARG_MAX", "ARG_MIN", "REDUCE_ANY", "REDUCE_ALL", "SHAPE", "RANK", "RANGE",
                                    "ONE_HOT", "WHERE", "UNIQUE", "BUCKETIZE", "BROADCAST_ARGS"])
def test_no_gradient_registered(opcode):
    load_builtin_kernels()
    assert not GRAD_RULES[opcode].differentiable


def test_unique_stops_the_gradient():
    m = single_op_model("UNIQUE", [("x", [5], F32)], [("y", [-1], F32), ("idx", [5], I32)])
    x = np.array([1, 2, 1, 3, 2], F32)
    _, g = onert_py.infer.session(m.to_bytes("tflite")).gradients([x], [np.ones(3, F32), None])
    np.testing.assert_array_equal(g["x"], 0)


# ----------------------------------------------------------------------------------- array

@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenation(axis):
    shapes = {0: [(1, 3), (2, 3)], 1: [(2, 1), (2, 3)], -1: [(2, 2), (2, 1)]}[axis]
    out = list(shapes[0])
    out[axis] = shapes[0][axis] + shapes[1][axis]
    m = single_op_model("CONCATENATION", [("a", list(shapes[0]), F32), ("b", list(shapes[1]), F32)],
                        [("y", out, F32)], axis=axis, fused_activation_function=0)
    check_gradients(m, [rand(*shapes[0]), rand(*shapes[1], seed=1)])


def test_concatenation_fused_relu_and_repeated_input():
    mb = single_op_model("CONCATENATION", [("a", [2, 2], F32), ("b", [2, 1], F32)], [("y", [2, 3], F32)],
                         axis=1, fused_activation_function=1)
    check_gradients(mb, [np.array([[1, -1], [0.5, -2]], F32), np.array([[0.3], [-0.4]], F32)])
    # the same tensor twice: the contributions add up
    from helpers import ModelBuilder
    b = ModelBuilder()
    sg = b.subgraph("main")
    x = sg.tensor("x", [2, 2], F32)
    y = sg.tensor("y", [2, 4], F32)
    sg.inputs, sg.outputs = [x], [y]
    sg.op("CONCATENATION", [x, x], [y], axis=1, fused_activation_function=0)
    b.signature("serving_default", sg)
    check_gradients(b, [rand(2, 2)])


def test_concatenation_with_int_input_gets_none():
    m = single_op_model("CONCATENATION", [("a", [2], I32), ("b", [3], I32)], [("y", [5], I32)], axis=0)
    # integer inputs and outputs: nothing to differentiate, no gradient asked by default
    outs, g = onert_py.infer.session(m.to_bytes("tflite")).gradients([np.arange(2, dtype=I32),
                                                                        np.arange(3, dtype=I32)])
    np.testing.assert_array_equal(outs[0], [0, 1, 0, 1, 2])
    assert g == {}


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_pack_unpack(axis):
    out = {0: [3, 2, 2], 1: [2, 3, 2], -1: [2, 2, 3]}[axis]
    m = single_op_model("PACK", [(n, [2, 2], F32) for n in "abc"], [("y", out, F32)], axis=axis,
                        values_count=3)
    check_gradients(m, [rand(2, 2, seed=k) for k in range(3)])
    m = single_op_model("UNPACK", [("x", out, F32)], [(f"y{k}", [2, 2], F32) for k in range(3)], axis=axis,
                        num=3)
    check_gradients(m, [rand(*out)])


def test_unpack_unused_output():
    # an output nothing depends on contributes zeros
    m = single_op_model("UNPACK", [("x", [3, 2], F32)], [(f"y{k}", [2], F32) for k in range(3)], axis=0, num=3)
    g = grads(m, [rand(3, 2)], [np.ones(2, F32), np.zeros(2, F32), np.full(2, 2, F32)])["x"]
    np.testing.assert_array_equal(g, [[1, 1], [0, 0], [2, 2]])


@pytest.mark.parametrize("axis", [1, -1])
def test_split(axis):
    m = single_op_model("SPLIT", [("const", np.array(axis, I32)), ("x", [2, 6], F32)],
                        [(f"y{k}", [2, 2], F32) for k in range(3)], num_splits=3)
    check_gradients(m, [rand(2, 6)])


def test_split_v():
    m = single_op_model("SPLIT_V", [("x", [5, 2], F32), ("const", np.array([2, -1, 1], I32)),
                                    ("const", np.array(0, I32))],
                        [("y0", [2, 2], F32), ("y1", [2, 2], F32), ("y2", [1, 2], F32)], num_splits=3)
    check_gradients(m, [rand(5, 2)])


@pytest.mark.parametrize("perm", [[1, 0, 2], [2, 0, 1], [-1, 0, 1]])
def test_transpose(perm):
    s = (2, 3, 4)
    out = [s[p] for p in perm]
    check_gradients(model("TRANSPOSE", s, [np.array(perm, I32)], out), [rand(*s)])


def test_transpose_runtime_perm():
    m = single_op_model("TRANSPOSE", [("x", [2, 3, 4], F32), ("perm", [3], I32)], [("y", [4, 2, 3], F32)])
    check_gradients(m, [rand(2, 3, 4), np.array([2, 0, 1], I32)])


@pytest.mark.parametrize("mult", [[1, 2], [3, 1], [2, 3]])
def test_tile(mult):
    check_gradients(model("TILE", (2, 3), [np.array(mult, I32)], (2 * mult[0], 3 * mult[1])), [rand(2, 3)])


def test_tile_runtime_multiples():
    m = single_op_model("TILE", [("x", [2, 3], F32), ("m", [2], I32)], [("y", [-1, -1], F32)])
    check_gradients(m, [rand(2, 3), np.array([2, 2], I32)])


@pytest.mark.parametrize("axes", [[0], [1, 2], [-1]])
def test_reverse_v2(axes):
    check_gradients(model("REVERSE_V2", (2, 3, 2), [np.array(axes, I32)], (2, 3, 2)), [rand(2, 3, 2)])


def test_reverse_sequence():
    m = single_op_model("REVERSE_SEQUENCE", [("x", [3, 4], F32), ("const", np.array([1, 3, 4], I32))],
                        [("y", [3, 4], F32)], seq_dim=1, batch_dim=0)
    check_gradients(m, [rand(3, 4)])


PADS = [[[1, 0], [0, 2]], [[0, 0], [2, 1]], [[1, 1], [1, 1]]]


@pytest.mark.parametrize("pads", PADS)
def test_pad(pads):
    p = np.array(pads, I32)
    out = [2 + p[0].sum(), 3 + p[1].sum()]
    check_gradients(model("PAD", (2, 3), [p], out), [rand(2, 3)])


def test_pad_runtime_paddings():
    m = single_op_model("PAD", [("x", [2, 3], F32), ("p", [2, 2], I32)], [("y", [-1, -1], F32)])
    check_gradients(m, [rand(2, 3), np.array([[1, 0], [2, 1]], I32)])


@pytest.mark.parametrize("pads", PADS)
def test_padv2_value(pads):
    p = np.array(pads, I32)
    out = [2 + p[0].sum(), 3 + p[1].sum()]
    m = single_op_model("PADV2", [("x", [2, 3], F32), ("const", p), ("v", [], F32)], [("y", out, F32)])
    check_gradients(m, [rand(2, 3), np.array(0.5, F32)])


@pytest.mark.parametrize("mode", [0, 1])          # REFLECT, SYMMETRIC
@pytest.mark.parametrize("pads", [[[1, 2], [0, 2]], [[2, 2], [2, 0]], [[0, 0], [1, 1]]])
def test_mirror_pad(mode, pads):
    p = np.array(pads, I32)
    s = (3, 3)
    out = [s[0] + p[0].sum(), s[1] + p[1].sum()]
    check_gradients(model("MIRROR_PAD", s, [p], out, mode=mode), [rand(*s)])


def test_mirror_pad_symmetric_full():
    p = np.array([[2, 2], [1, 2]], I32)
    check_gradients(model("MIRROR_PAD", (2, 2), [p], (6, 5), mode=1), [rand(2, 2)])


@pytest.mark.parametrize("opcode,shape,out", [("SPACE_TO_DEPTH", (1, 4, 4, 2), (1, 2, 2, 8)),
                                              ("DEPTH_TO_SPACE", (1, 2, 2, 8), (1, 4, 4, 2))])
def test_space_depth(opcode, shape, out):
    check_gradients(model(opcode, shape, [], out, block_size=2), [rand(*shape)])


def test_space_to_batch_and_back():
    m = model("SPACE_TO_BATCH_ND", (1, 3, 4, 1), [np.array([2, 2], I32), np.array([[1, 0], [0, 0]], I32)],
              (4, 2, 2, 1))
    check_gradients(m, [rand(1, 3, 4, 1)])
    m = model("BATCH_TO_SPACE_ND", (4, 2, 2, 1), [np.array([2, 2], I32), np.array([[1, 0], [0, 1]], I32)],
              (1, 3, 3, 1))
    check_gradients(m, [rand(4, 2, 2, 1)])


# ----------------------------------------------------------------------------------- shape

@pytest.mark.parametrize("shape,target", [((3,), (2, 3)), ((2, 1), (2, 3)), ((1, 3, 1), (2, 3, 2)),
                                          ((2, 3), (2, 3))])
def test_broadcast_to(shape, target):
    check_gradients(model("BROADCAST_TO", shape, [np.array(target, I32)], target), [rand(*shape)])


def test_fill_value():
    m = single_op_model("FILL", [("const", np.array([2, 3], I32)), ("v", [], F32)], [("y", [2, 3], F32)])
    check_gradients(m, [np.array(1.5, F32)])


# ----------------------------------------------------------------------------------- indexing

@pytest.mark.parametrize("begin,size,out", [([0, 1], [2, 2], [2, 2]), ([1, 0], [-1, 3], [2, 3]),
                                            ([2, 3], [1, 1], [1, 1])])
def test_slice(begin, size, out):
    check_gradients(model("SLICE", (3, 4), [np.array(begin, I32), np.array(size, I32)], out), [rand(3, 4)])


def test_slice_runtime_begin():
    m = single_op_model("SLICE", [("x", [3, 4], F32), ("b", [2], I32), ("const", np.array([2, 2], I32))],
                        [("y", [2, 2], F32)])
    check_gradients(m, [rand(3, 4), np.array([1, 2], I32)])


STRIDED = [
    # begin, end, strides, options, output shape (input (4, 5, 3))
    ([0, 1, 0], [4, 5, 3], [2, 2, 1], {}, (2, 2, 3)),
    ([3, 4, 2], [0, 0, 0], [-1, -2, -1], {}, (3, 2, 2)),
    ([1, 0, 0], [2, 5, 3], [1, 1, 1], {"shrink_axis_mask": 1}, (5, 3)),
    ([0, -1], [0, 0], [1, 1], {"begin_mask": 1, "end_mask": 1, "shrink_axis_mask": 2}, (4, 3)),
    ([1, 0], [3, 2], [1, 1], {"ellipsis_mask": 2}, (2, 5, 2)),         # x[1:3, ..., 0:2]
    ([0, 0, 1], [0, 0, 3], [1, 1, 1], {"new_axis_mask": 2, "begin_mask": 1, "end_mask": 1}, (4, 1, 2, 3)),
    ([-3, 1, 0], [-1, 4, 3], [1, 2, 1], {"offset": False}, (2, 2, 3)),
]


@pytest.mark.parametrize("begin,end,strides,opts,out", STRIDED)
def test_strided_slice(begin, end, strides, opts, out):
    m = model("STRIDED_SLICE", (4, 5, 3), [np.array(begin, I32), np.array(end, I32), np.array(strides, I32)],
              out, **opts)
    check_gradients(m, [rand(4, 5, 3)])


@pytest.mark.parametrize("axis,bd,x_shape,idx,out", [
    (0, 0, (4, 3), np.array([2, 0, 2], I32), (3, 3)),
    (1, 0, (2, 4, 3), np.array([[3, 1], [1, 1]], I32), (2, 2, 2, 3)),
    (-1, 0, (2, 4), np.array(1, I32), (2,)),
    (1, 1, (2, 4, 3), np.array([[0, 0, 3], [2, 1, 2]], I32), (2, 3, 3)),
    (2, 1, (2, 3, 4), np.array([[1, 1], [3, 0]], I32), (2, 3, 2)),
])
def test_gather(axis, bd, x_shape, idx, out):
    check_gradients(model("GATHER", x_shape, [idx], out, axis=axis, batch_dims=bd), [rand(*x_shape)])


def test_gather_runtime_indices_and_weights():
    m = single_op_model("GATHER", [("const", rand(4, 2)), ("i", [3], I32)], [("y", [3, 2], F32)], axis=0)
    g = check_gradients(m, [np.array([1, 1, 3], I32)], wrt=["const0"])["const0"]
    assert np.all(g[[0, 2]] == 0)


def test_embedding_lookup_weights():
    m = single_op_model("EMBEDDING_LOOKUP", [("ids", [3], I32), ("const", rand(4, 2))], [("y", [3, 2], F32)])
    check_gradients(m, [np.array([3, 0, 3], I32)], wrt="weights")


@pytest.mark.parametrize("idx,out", [(np.array([[1, 0], [2, 1], [1, 0]], I32), (3, 4)),
                                     (np.array([[[2]], [[0]]], I32), (2, 1, 2, 4)),
                                     (np.array([1, 1, 3], I32), ())])
def test_gather_nd(idx, out):
    check_gradients(model("GATHER_ND", (3, 2, 4), [idx], out), [rand(3, 2, 4)])


def test_scatter_nd_updates():
    m = single_op_model("SCATTER_ND", [("const", np.array([[1], [3], [1]], I32)), ("u", [3, 2], F32),
                                       ("const", np.array([4, 2], I32))], [("y", [4, 2], F32)])
    check_gradients(m, [rand(3, 2)])


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, -1])
def test_cumsum(exclusive, reverse, axis):
    check_gradients(model("CUMSUM", (3, 4), [np.array(axis, I32)], (3, 4), exclusive=exclusive,
                          reverse=reverse), [rand(3, 4)])


def test_segment_sum():
    m = model("SEGMENT_SUM", (4, 2), [np.array([0, 0, 2, 2], I32)], (3, 2))
    check_gradients(m, [rand(4, 2)])


def test_integer_index_input_gets_no_gradient():
    # the indices are integers: asking for their gradient is refused, the float input's is computed
    m = single_op_model("GATHER", [("x", [4], F32), ("i", [2], I32)], [("y", [2], F32)], axis=0)
    _, g = onert_py.infer.session(m.to_bytes("tflite")).gradients([rand(4), np.array([3, 3], I32)])
    assert list(g) == ["x"]
    np.testing.assert_array_equal(g["x"], [0, 0, 0, 2])
    with pytest.raises(onert_py.errors.GradientError):
        onert_py.infer.session(m.to_bytes("tflite")).gradients([rand(4), np.array([3, 3], I32)], wrt=["i"])


# ----------------------------------------------------------------------------------- dynamic shapes

# A dynamic dim stays -1 in the forward shapes the rules see, so they take their run-time paths.

def test_mean_of_dynamic_dims():
    m = single_op_model("MEAN", [("x", [-1, 3], F32), ("const", np.array([0], I32))], [("y", [3], F32)],
                        keep_dims=False)
    check_gradients(m, [rand(4, 3)])


def test_concatenation_of_dynamic_dims():
    m = single_op_model("CONCATENATION", [("a", [2, -1], F32), ("b", [2, -1], F32)], [("y", [2, -1], F32)],
                        axis=1, fused_activation_function=0)
    check_gradients(m, [rand(2, 3), rand(2, 1, seed=1)])


def test_slice_and_pad_of_dynamic_dims():
    m = single_op_model("SLICE", [("x", [-1, 4], F32), ("const", np.array([1, 1], I32)),
                                  ("const", np.array([-1, 2], I32))], [("y", [-1, 2], F32)])
    check_gradients(m, [rand(3, 4)])
    m = single_op_model("PAD", [("x", [-1, 2], F32), ("const", np.array([[1, 0], [0, 2]], I32))],
                        [("y", [-1, 4], F32)])
    check_gradients(m, [rand(3, 2)])
