"""The memory budget on shapes onert-py derives rather than reads: a broadcast, a gather, a transposed
convolution's output_shape, BROADCAST_TO/TILE, constant folding at prepare, and the same ops with shapes
known only at run time. Each is refused with a ResourceError naming the op, the tensor and the size
before anything is allocated (peak RSS stays small), the session stays usable, and the same models with
small sizes run under max_memory=inf. Also: the arenas of all subgraphs and the constants are summed.

References for the small runs are numpy formulas written here (broadcasting, take, tile, a transposed
convolution's scatter loop), not onert-py's output."""
from __future__ import annotations

import math
import resource

import numpy as np
import pytest

import onert_py
from onert_py.errors import ResourceError, ResourceRuntimeError
from onert_py.schema.writer import ModelBuilder

F32, I32 = np.float32, np.int32
MIB = 1 << 20
BUDGET = "64M"
BIG = 1 << 16      # 65536: [1, BIG] + [BIG, 1] broadcasts to 2**32 floats = 16 GiB


def session(mb: ModelBuilder, max_memory=BUDGET, **options):
    return onert_py.infer.session(mb.to_bytes(), backends="cpu", max_memory=max_memory, **options)


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.fixture
def small_peak():
    """The test may not raise the process's peak RSS by more than 256 MiB: nothing of the refused sizes
    (GiBs) was allocated and written first."""
    before = _peak_mib()
    yield
    grown = _peak_mib() - before
    assert grown < 256, f"peak RSS grew by {grown:.0f} MiB"


def _over(op: str, name: str, shape: list[int], size: str, at_run: bool = False) -> str:
    sep = r" -> " if at_run else r": "
    dims = ", ".join(map(str, shape))
    return (rf"operator \d+ \({op}\){sep}output '{name}' of shape \[{dims}\] \(float32\) needs {size} .*"
            r"more than the memory budget max_memory=64\.0 MiB")


# ---------------------------------------------------------------------------------------------- ADD

def _add_model(a_shape, b_shape, out_shape, signature=None) -> ModelBuilder:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    a = sg.tensor("a", a_shape, shape_signature=signature)
    b = sg.tensor("b", b_shape, shape_signature=signature)
    y = sg.tensor("sum", out_shape)
    sg.op("ADD", [a, b], [y], fused_activation_function=0)
    sg.inputs, sg.outputs = [a, b], [y]
    return mb


@pytest.mark.parametrize("declared", [[1, 1], [-1, -1]], ids=["small", "dynamic"])
def test_static_broadcast_refused_at_prepare(declared, small_peak):
    mb = _add_model([1, BIG], [BIG, 1], declared)
    with pytest.raises(ResourceError, match=_over("ADD", "sum", [BIG, BIG], r"16\.0 GiB")):
        session(mb)
    with pytest.raises(ResourceRuntimeError, match="ADD.*'sum'.*16\\.0 GiB"):   # the Interpreter's prepare
        onert_py.Interpreter(model_content=mb.to_bytes(), max_memory=BUDGET).allocate_tensors()
    # the same model with small sizes, and no limit: runs
    a, b = np.arange(3, dtype=F32).reshape(1, 3), np.array([[10], [20]], F32)
    got = session(_add_model([1, 3], [2, 1], declared), max_memory=math.inf).infer([a, b])[0]
    np.testing.assert_array_equal(got, a + b)


def test_dynamic_broadcast_refused_at_run_then_usable(small_peak):
    s = session(_add_model([1, 1], [1, 1], [-1, -1], signature=[-1, -1]))
    a, b = np.ones((1, BIG), F32), np.ones((BIG, 1), F32)
    with pytest.raises(ResourceError, match=_over("ADD", "sum", [BIG, BIG], r"16\.0 GiB", at_run=True)):
        s.infer([a, b])
    x, y = np.arange(4, dtype=F32).reshape(1, 4), np.array([[1], [2], [3]], F32)
    np.testing.assert_array_equal(s.infer([x, y])[0], x + y)        # usable afterwards
    with pytest.raises(ResourceError, match="ADD"):                  # and refuses it again
        s.infer([a, b])
    np.testing.assert_array_equal(session(_add_model([1, 1], [1, 1], [-1, -1], signature=[-1, -1]),
                                          max_memory=math.inf).infer([x, y])[0], x + y)


def test_dynamic_broadcast_in_the_interpreter_after_a_resize(small_peak):
    it = onert_py.Interpreter(model_content=_add_model([1, 1], [1, 1], [-1, -1], signature=[-1, -1]).to_bytes(),
                              max_memory=BUDGET)
    a_i, b_i = (d["index"] for d in it.get_input_details())
    it.resize_tensor_input(a_i, [1, BIG])
    it.resize_tensor_input(b_i, [BIG, 1])
    with pytest.raises(ResourceRuntimeError, match="ADD.*'sum'.*16\\.0 GiB"):
        it.allocate_tensors()
    it.resize_tensor_input(a_i, [1, 3])
    it.resize_tensor_input(b_i, [2, 1])
    it.allocate_tensors()
    a, b = np.arange(3, dtype=F32).reshape(1, 3), np.array([[1], [2]], F32)
    it.set_tensor(a_i, a)
    it.set_tensor(b_i, b)
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]), a + b)


def _folded_add_model(n: int) -> ModelBuilder:
    """ADD of two constants (folded at prepare) [1, n] and [n, 1], then + x."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    c1 = sg.const("row", np.arange(n, dtype=F32).reshape(1, n))
    c2 = sg.const("column", np.arange(n, dtype=F32).reshape(n, 1))
    t = sg.tensor("table", [1, 1])
    x, y = sg.tensor("x", [1]), sg.tensor("y", [-1, -1])
    sg.op("ADD", [c1, c2], [t], fused_activation_function=0)
    sg.op("ADD", [t, x], [y], fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [y]
    return mb


def test_broadcast_of_two_constants_refused_before_folding(small_peak):
    with pytest.raises(ResourceError, match=_over("ADD", "table", [BIG, BIG], r"16\.0 GiB")):
        session(_folded_add_model(BIG))
    n = np.arange(3, dtype=F32)
    got = session(_folded_add_model(3), max_memory=math.inf).infer([np.array([0.5], F32)])[0]
    np.testing.assert_array_equal(got, n[None, :] + n[:, None] + 0.5)


# ---------------------------------------------------------------------------------------------- GATHER

def _gather_model(n_indices: int, signature=None) -> ModelBuilder:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    params = sg.const("params", np.arange(4 * 16384, dtype=F32).reshape(4, 16384))
    idx = sg.tensor("indices", [n_indices], I32, shape_signature=signature)
    y = sg.tensor("gathered", [-1, 16384])
    sg.op("GATHER", [params, idx], [y], axis=0, batch_dims=0)
    sg.inputs, sg.outputs = [idx], [y]
    return mb


def test_gather_of_many_rows_refused(small_peak):
    # [65536] indices of [4, 16384] params: [65536, 16384] floats = 4 GiB
    with pytest.raises(ResourceError, match=_over("GATHER", "gathered", [BIG, 16384], r"4\.0 GiB")):
        session(_gather_model(BIG))
    s = session(_gather_model(1, signature=[-1]))
    with pytest.raises(ResourceError, match=_over("GATHER", "gathered", [BIG, 16384], r"4\.0 GiB", at_run=True)):
        s.infer([np.zeros(BIG, I32)])
    params = np.arange(4 * 16384, dtype=F32).reshape(4, 16384)
    np.testing.assert_array_equal(s.infer([np.array([3, 1], I32)])[0], params[[3, 1]])
    got = session(_gather_model(2), max_memory=math.inf).infer([np.array([2, 0], I32)])[0]
    np.testing.assert_array_equal(got, params[[2, 0]])


# ---------------------------------------------------------------------------------------------- TRANSPOSE_CONV

def _transpose_conv_model(output_shape, stride: int = 2, const_shape: bool = True) -> ModelBuilder:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [1, 2, 2, 1])
    shape = (sg.const("output_shape", np.array(output_shape, I32)) if const_shape
             else sg.tensor("output_shape", [4], I32))
    w = sg.const("filter", np.arange(9, dtype=F32).reshape(1, 3, 3, 1))
    y = sg.tensor("y", [-1, -1, -1, -1])
    sg.op("TRANSPOSE_CONV", [shape, w, x], [y], padding=1, stride_h=stride, stride_w=stride)   # VALID
    sg.inputs, sg.outputs = ([x] if const_shape else [shape, x]), [y]
    return mb


def _transpose_conv_reference(x: np.ndarray, w: np.ndarray, stride: int, out_hw: tuple[int, int]) -> np.ndarray:
    """VALID: every input pixel scatters its filter window, at stride, onto the output."""
    out = np.zeros((1, *out_hw, 1), F32)
    for i in range(x.shape[1]):
        for j in range(x.shape[2]):
            for a in range(w.shape[1]):
                for b in range(w.shape[2]):
                    r, c = i * stride + a, j * stride + b
                    if r < out_hw[0] and c < out_hw[1]:
                        out[0, r, c, 0] += x[0, i, j, 0] * w[0, a, b, 0]
    return out


def test_transpose_conv_with_a_huge_output_shape_refused(small_peak):
    huge = [1, BIG, BIG, 1]
    with pytest.raises(ResourceError, match=_over("TRANSPOSE_CONV", "y", huge, r"16\.0 GiB")):
        session(_transpose_conv_model(huge))
    s = session(_transpose_conv_model(None, const_shape=False))
    x = np.array([1, 2, 3, 4], F32).reshape(1, 2, 2, 1)
    with pytest.raises(ResourceError, match=_over("TRANSPOSE_CONV", "y", huge, r"16\.0 GiB", at_run=True)):
        s.infer([np.array(huge, I32), x])
    w = np.arange(9, dtype=F32).reshape(1, 3, 3, 1)
    want = _transpose_conv_reference(x, w, 2, (5, 5))
    np.testing.assert_array_equal(s.infer([np.array([1, 5, 5, 1], I32), x])[0], want)
    np.testing.assert_array_equal(session(_transpose_conv_model([1, 5, 5, 1]), max_memory=math.inf).infer([x])[0],
                                  want)


def test_transpose_conv_with_a_huge_stride_refused(small_peak):
    """A stride far past the output: the output is output_shape's, but the kernel's accumulator spans
    every input pixel's window at that stride (here 4 TiB): checked before it is allocated."""
    x = np.array([1, 2, 3, 4], F32).reshape(1, 2, 2, 1)
    w = np.arange(9, dtype=F32).reshape(1, 3, 3, 1)
    with pytest.raises(ResourceError, match=r"TRANSPOSE_CONV\): the accumulator of shape \[1, 1048579, 1048579, 1\]"):
        session(_transpose_conv_model([1, 4, 4, 1], stride=1 << 20)).infer([x])
    # a stride whose accumulator fits: the output within the window of the first pixel only
    got = session(_transpose_conv_model([1, 4, 4, 1], stride=100)).infer([x])[0]
    np.testing.assert_array_equal(got, _transpose_conv_reference(x, w, 100, (4, 4)))


# ---------------------------------------------------------------------------------------------- BROADCAST_TO, TILE

def _one_op(opcode: str, param: np.ndarray, x_shape=(2, 2), out_rank: int = 2) -> ModelBuilder:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", list(x_shape))
    p = sg.const("param", param)
    y = sg.tensor("y", [-1] * out_rank)
    sg.op(opcode, [x, p], [y])
    sg.inputs, sg.outputs = [x], [y]
    return mb


@pytest.mark.parametrize("opcode, param, x_shape", [
    ("BROADCAST_TO", np.array([BIG, BIG], I32), (1, 1)),
    ("TILE", np.array([BIG // 2, BIG // 2], I32), (2, 2))])
def test_broadcast_to_and_tile_with_constant_parameters_refused(opcode, param, x_shape, small_peak):
    with pytest.raises(ResourceError, match=_over(opcode, "y", [BIG, BIG], r"16\.0 GiB")):
        session(_one_op(opcode, param, x_shape))


def test_broadcast_to_and_tile_small_run_without_a_limit():
    x = np.array([[1, 2]], F32)
    got = session(_one_op("BROADCAST_TO", np.array([3, 2], I32), (1, 2)), max_memory=math.inf).infer([x])[0]
    np.testing.assert_array_equal(got, np.broadcast_to(x, (3, 2)))
    x = np.arange(4, dtype=F32).reshape(2, 2)
    got = session(_one_op("TILE", np.array([2, 3], I32)), max_memory=math.inf).infer([x])[0]
    np.testing.assert_array_equal(got, np.tile(x, (2, 3)))


# ---------------------------------------------------------------------------------------------- in a loop body

def _while_broadcasting_body() -> ModelBuilder:
    """while i < n: x = x + transpose(x) ([k, 1] + [1, k] -> [k, k], then [k, k] on), i += 1."""
    mb = ModelBuilder()
    main, cond, body = mb.subgraph("main"), mb.subgraph("cond"), mb.subgraph("body")
    i, n, x = main.tensor("i", [], I32), main.tensor("n", [], I32), main.tensor("x", [-1, -1])
    outs = [main.tensor("i_out", [], I32), main.tensor("n_out", [], I32), main.tensor("x_out", [-1, -1])]
    main.op("WHILE", [i, n, x], outs, cond_subgraph_index=1, body_subgraph_index=2)
    main.inputs, main.outputs = [i, n, x], [outs[0], outs[2]]
    ci, cn, cx = cond.tensor("i", [], I32), cond.tensor("n", [], I32), cond.tensor("x", [-1, -1])
    go = cond.tensor("go", [], np.bool_)
    cond.op("LESS", [ci, cn], [go])
    cond.inputs, cond.outputs = [ci, cn, cx], [go]
    bi, bn, bx = body.tensor("i", [], I32), body.tensor("n", [], I32), body.tensor("x", [-1, -1])
    perm = body.const("perm", np.array([1, 0], I32))
    xt, bx2, bi2 = body.tensor("xt", [-1, -1]), body.tensor("x_next", [-1, -1]), body.tensor("i_next", [], I32)
    body.op("TRANSPOSE", [bx, perm], [xt])
    body.op("ADD", [bx, xt], [bx2], fused_activation_function=0)
    body.op("ADD", [bi, body.const("one", np.array(1, I32))], [bi2], fused_activation_function=0)
    body.inputs, body.outputs = [bi, bn, bx], [bi2, bn, bx2]
    return mb


def test_broadcast_inside_a_loop_body_refused_then_usable(small_peak):
    s = session(_while_broadcasting_body())
    col = np.ones((BIG, 1), F32)
    with pytest.raises(ResourceError, match=r"WHILE\) -> subgraph 2 operator 1 \(ADD\) -> output 'x_next' of "
                                            r"shape \[65536, 65536\]"):
        s.infer([np.array(0, I32), np.array(3, I32), col])
    x = np.array([[1], [2]], F32)
    i, got = s.infer([np.array(0, I32), np.array(2, I32), x])
    want = x + x.T
    want = want + want.T
    assert int(i) == 2
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------- the total

def _two_chains(n: int = 256, const_rows: int = 0) -> ModelBuilder:
    """main: x -> t1 = -x -> t2 = |t1| -> c = CALL(sub)(t2) -> y = c + t1; sub: t1 = -x, t2 = |t1|,
    y = t2 * t1. Each subgraph's arena holds t1 and t2 ([n, 1024] float32 each, live together: 2 MiB for
    n = 256); main's x may be resized ([-1, 1024]). const_rows adds a constant of that many 1024-float
    rows to main's output."""
    mb = ModelBuilder()
    main, sub = mb.subgraph("main"), mb.subgraph("sub")
    for sg in (main, sub):
        x = sg.tensor("x", [n, 1024], shape_signature=[-1, 1024] if sg is main else None)
        t1, t2, y = sg.tensor("t1", [n, 1024]), sg.tensor("t2", [n, 1024]), sg.tensor("y", [n, 1024])
        sg.op("NEG", [x], [t1])
        sg.op("ABS", [t1], [t2])
        if sg is main:
            c = sg.tensor("c", [n, 1024])
            sg.op("CALL", [t2], [c], subgraph=1)
            sg.op("ADD", [c, t1], [y], fused_activation_function=0)
            if const_rows:
                k = sg.const("k", np.full((const_rows, 1024), 0.5, F32))
                y2 = sg.tensor("y2", [n, 1024])
                sg.op("ADD", [y, k], [y2], fused_activation_function=0)
                y = y2
        else:
            sg.op("MUL", [t2, t1], [y], fused_activation_function=0)
        sg.inputs, sg.outputs = [x], [y]
    return mb


def _two_chains_reference(x: np.ndarray) -> np.ndarray:
    return -(x * x) - x     # sub(|x|) = |x| * -|x|, plus -x


def _arenas(s) -> list[int]:
    return [ex.arena_plan.size for ex in s.executors]


def test_arenas_of_all_subgraphs_are_summed():
    x = np.full((256, 1024), 0.5, F32)
    roomy = session(_two_chains(), max_memory=16 * MIB)
    assert _arenas(roomy) == [2 * MIB, 2 * MIB]   # each fits 3 MiB alone
    np.testing.assert_array_equal(roomy.infer([x])[0], _two_chains_reference(x))
    with pytest.raises(ResourceError, match=r"the arenas of its 2 subgraph\(s\) \(largest: subgraph 0: 2\.0 MiB, "
                                            r"subgraph 1: 2\.0 MiB; 4\.0 MiB together\) plus 0 bytes of "
                                            r"constants, needs 4\.0 MiB .*max_memory=3\.0 MiB"):
        session(_two_chains(), max_memory=3 * MIB)


def test_total_counts_the_constants():
    x = np.full((256, 1024), 0.5, F32)
    roomy = session(_two_chains(const_rows=256), max_memory=16 * MIB)
    np.testing.assert_array_equal(roomy.infer([x])[0], _two_chains_reference(x) + F32(0.5))
    assert sum(_arenas(roomy)) == 5 * MIB       # main's y is an intermediate now
    # the arenas fit 5.5 MiB; with the 1 MiB constant they do not
    with pytest.raises(ResourceError, match=r"5\.0 MiB together\) plus 1\.0 MiB of constants, needs 6\.0 MiB"):
        session(_two_chains(const_rows=256), max_memory=11 * MIB // 2)


def test_resize_checks_the_total_and_keeps_the_session_usable():
    s = session(_two_chains(), max_memory=5 * MIB)   # 2 + 2 MiB of arenas
    info = s.get_inputs_tensorinfo()
    info[0].dims = [384, 1024]      # 3 MiB each: each fits, together they do not
    with pytest.raises(ResourceError, match=r"the arenas of its 2 subgraph\(s\) \(largest: subgraph \d: 3\.0 MiB, "
                                            r"subgraph \d: 3\.0 MiB; 6\.0 MiB together\)"):
        s.update_inputs_tensorinfo(info)
    x = np.full((256, 1024), 0.25, F32)
    np.testing.assert_array_equal(s.infer([x])[0], _two_chains_reference(x))
