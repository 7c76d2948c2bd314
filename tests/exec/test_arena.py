"""Arena memory plan (onert_py/exec/memory_plan.py): planned tensors share memory only when their
lifetimes (extended through aliases) do not overlap, and the results are those of a numpy evaluation of
the same graph, run after run. Kernels here are custom two-phase kernels that write into their planned
slot (`ctx.output_buffer`), so the tests do not depend on which builtin kernels use the arena."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import onert_py
from onert_py.backends.registry import register_custom_kernel, register_custom_op
from onert_py.exec.memory_plan import ALIGN, aligned_empty, plan_arena
from onert_py.schema.writer import ModelBuilder

N = 4096


def _arena_add(ctx):
    """out = a + b written into the planned slot (a fresh array when there is none)."""
    a, b = ctx.inputs
    (o,) = ctx.outputs
    v, alloc = ctx.values, ctx.output_buffer(0)

    def run() -> None:
        x, y = v[a], v[b]
        out = alloc(np.broadcast_shapes(np.shape(x), np.shape(y)))
        np.add(x, y, out=out)
        v[o] = out
    return run


register_custom_kernel("ArenaAdd", _arena_add, replace=True)
_stash: list = []
register_custom_op("Stash", lambda x, custom_options: (_stash.append(x), np.zeros_like(x))[1], replace=True)
register_custom_op("Identity", lambda x, custom_options: x, replace=True)


def add(sg, a, b, name, shape=(N,)):
    t = sg.tensor(name, list(shape), np.float32)
    sg.op("ADD", [a, b], [t], custom_code="ArenaAdd")
    return t


def executor(sess, k=0):
    return sess.executors[k]


def assert_plan_safe(plan):
    """Tensors alive at the same step never share bytes."""
    items = [(t, off, off + -(-int(np.prod(plan.shapes[t])) * 4 // ALIGN) * ALIGN, plan.intervals[t])
             for t, off in plan.offsets.items()]
    for i, (t, a0, a1, (s0, e0)) in enumerate(items):
        for u, b0, b1, (s1, e1) in items[i + 1:]:
            if s0 <= e1 and s1 <= e0:
                assert a1 <= b0 or b1 <= a0, f"tensors {t} and {u} overlap in time and memory"


def chain_model(length: int) -> tuple[bytes, list[int]]:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [N], np.float32)
    one = sg.const("one", np.ones(N, np.float32))
    prev, ts = x, []
    for k in range(length):
        prev = add(sg, prev, one, f"t{k}")
        ts.append(prev)
    out = add(sg, prev, one, "out")
    sg.inputs, sg.outputs = [x], [out]
    return mb.to_bytes("tflite"), ts


def test_chain_shares_memory_and_stays_correct():
    model, ts = chain_model(10)
    sess = onert_py.infer.session(model)
    plan = executor(sess).arena_plan
    assert set(plan.offsets) == set(ts)            # every intermediate planned, the output not
    assert plan.size <= 2 * N * 4 < plan.unshared  # a chain needs two live slots at a time
    assert_plan_safe(plan)
    planned = executor(sess).planned
    assert np.shares_memory(planned[ts[0]], planned[ts[2]])
    outs = []
    for k in range(3):
        x = np.full(N, k, np.float32)
        (out,) = sess.infer([x])
        np.testing.assert_array_equal(out, np.full(N, k + 11, np.float32))
        outs.append(out)
    # outputs are the caller's own: later runs do not write into earlier results
    for k, out in enumerate(outs):
        np.testing.assert_array_equal(out, np.full(N, k + 11, np.float32))
        assert not any(np.shares_memory(out, p) for p in planned if p is not None)


def test_planned_slots_start_on_a_cache_line():
    # the offsets are ALIGN-aligned and so is the arena's base (numpy's large arrays start 16 bytes
    # past a boundary: every vector load of the jit kernels would cross two cache lines)
    model, ts = chain_model(6)
    planned = executor(onert_py.infer.session(model)).planned
    assert all(planned[t].ctypes.data % ALIGN == 0 for t in ts)


@pytest.mark.parametrize("shape,dtype", [(0, np.float32), (1, np.int8), ((3, 5), np.float64), ((1 << 18,), np.float32),
                                         ((2, 0, 3), np.int32)])
def test_aligned_empty(shape, dtype):
    for zero in (False, True):
        a = aligned_empty(shape, dtype, zero=zero)
        assert a.shape == ((shape,) if isinstance(shape, int) else shape) and a.dtype == dtype
        assert a.flags.c_contiguous and a.flags.writeable
        assert a.size == 0 or a.ctypes.data % ALIGN == 0     # (an empty array's pointer means nothing)
        if zero:
            assert not a.any()


def test_alias_through_reshape_keeps_source_alive():
    """t0 is read through a RESHAPE view at the very end: its slot must not be reused meanwhile."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [N], np.float32)
    one = sg.const("one", np.ones(N, np.float32))
    t0 = add(sg, x, one, "t0")
    r = sg.tensor("r", [64, 64], np.float32)
    sg.op("RESHAPE", [t0, sg.const("shape", np.array([64, 64], np.int32))], [r])
    prev = x
    for k in range(4):
        prev = add(sg, prev, one, f"u{k}")
    back = sg.tensor("back", [N], np.float32)
    sg.op("RESHAPE", [r, sg.const("flat", np.array([N], np.int32))], [back])
    out = add(sg, back, prev, "out")
    sg.inputs, sg.outputs = [x], [out]
    sess = onert_py.infer.session(mb.to_bytes("tflite"))
    plan = executor(sess).arena_plan
    assert_plan_safe(plan)
    assert plan.intervals[t0][1] == len(executor(sess).operations) - 1
    x = np.arange(N, dtype=np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(sess.infer([x])[0], (x + 1) + (x + 4))


def test_alias_reaching_an_output_is_not_planned():
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [N], np.float32)
    one = sg.const("one", np.ones(N, np.float32))
    t0 = add(sg, x, one, "t0")
    same = sg.tensor("same", [N], np.float32)
    sg.op("CUSTOM", [t0], [same], custom_code="Identity")
    t1 = add(sg, x, x, "t1")
    sg.inputs, sg.outputs = [x], [same, t1]
    sess = onert_py.infer.session(mb.to_bytes("tflite"))
    assert t0 not in executor(sess).arena_plan.offsets
    x = np.ones(N, np.float32)
    first = sess.infer([x])
    sess.infer([x * 5])
    np.testing.assert_array_equal(first[0], x + 1)


def test_inputs_a_custom_function_keeps_are_not_planned():
    _stash.clear()
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [N], np.float32)
    one = sg.const("one", np.ones(N, np.float32))
    t0 = add(sg, x, one, "t0")
    z = sg.tensor("z", [N], np.float32)
    sg.op("CUSTOM", [t0], [z], custom_code="Stash")
    prev = z
    for k in range(4):
        prev = add(sg, prev, one, f"u{k}")
    sg.inputs, sg.outputs = [x], [prev]
    sess = onert_py.infer.session(mb.to_bytes("tflite"))
    assert t0 not in executor(sess).arena_plan.offsets
    sess.infer([np.zeros(N, np.float32)])
    sess.infer([np.ones(N, np.float32)])
    np.testing.assert_array_equal(_stash[0], np.ones(N, np.float32))
    np.testing.assert_array_equal(_stash[1], np.full(N, 2, np.float32))


def test_assigned_variable_survives_later_ops_and_runs():
    """ASSIGN_VARIABLE keeps its value by reference: that value must not live in the arena."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [N], np.float32)
    one = sg.const("one", np.ones(N, np.float32))
    h = sg.tensor("h", [], np.int32, type_name="RESOURCE")
    sg.op("VAR_HANDLE", [], [h], container="", shared_name="v")
    prev_value = sg.tensor("prev", [N], np.float32)
    t0 = add(sg, x, one, "t0")
    sg.op("ASSIGN_VARIABLE", [h, t0], [])
    prev = x
    for k in range(4):
        prev = add(sg, prev, x, f"u{k}")
    sg.op("READ_VARIABLE", [h], [prev_value])
    sg.inputs, sg.outputs = [x], [prev_value, prev]
    sess = onert_py.infer.session(mb.to_bytes("tflite"))
    assert t0 not in executor(sess).arena_plan.offsets
    x = np.full(N, 3, np.float32)
    value, last = sess.infer([x])
    np.testing.assert_array_equal(value, x + 1)
    np.testing.assert_array_equal(last, 5 * x)


def while_model() -> bytes:
    """main(x) -> x after `for i in range(5): x = ((x + 1) + x) + 1` with the adds in the body."""
    mb = ModelBuilder()
    main, cond, body = mb.subgraph("main"), mb.subgraph("cond"), mb.subgraph("body")
    x = main.tensor("x", [N], np.float32)
    i0 = main.const("i0", np.array(0, np.int32))
    io, xo = main.tensor("i_out", [], np.int32), main.tensor("x_out", [N], np.float32)
    main.op("WHILE", [i0, x], [io, xo], cond_subgraph_index=1, body_subgraph_index=2)
    main.inputs, main.outputs = [x], [xo]
    ci, cx, go = cond.tensor("i", [], np.int32), cond.tensor("x", [N], np.float32), cond.tensor("go", [], np.bool_)
    cond.op("LESS", [ci, cond.const("n", np.array(5, np.int32))], [go])
    cond.inputs, cond.outputs = [ci, cx], [go]
    bi, bx = body.tensor("i", [], np.int32), body.tensor("x", [N], np.float32)
    i1 = body.tensor("i1", [], np.int32)
    body.op("ADD", [bi, body.const("one_i", np.array(1, np.int32))], [i1], fused_activation_function=0)
    one = body.const("one", np.ones(N, np.float32))
    a = add(body, bx, one, "a")
    b = add(body, a, bx, "b")
    c = add(body, b, one, "c")
    body.inputs, body.outputs = [bi, bx], [i1, c]
    return mb.to_bytes("tflite")


@pytest.mark.parametrize("copy", ["reference", "all"])
def test_while_body_intermediates_in_the_arena(copy):
    sess = onert_py.infer.session(while_model(), controlflow_copy=copy)
    assert len(executor(sess, 2).arena_plan.offsets) == 2   # a and b; c is the body's output
    x = np.linspace(-1, 1, N, dtype=np.float32)
    want = x.copy()
    for _ in range(5):
        want = ((want + 1) + want) + 1
    for _ in range(2):
        np.testing.assert_array_equal(sess.infer([x])[0], want)


def carry_model(n: int, swap: bool = False, stash: bool = False) -> bytes:
    """main(a, b) -> (a, b, c) after n iterations of a body on the loop state (i, a, b, c):
    plain: a, b, c = a + 1, (a + 1) + b, b + b;  swap: a, b, c = b + 1, a, b + b (b is the old a, and
    c reads b after the new a is written); stash: plain, with the new a also kept by a custom op."""
    mb = ModelBuilder()
    main, cond, body = mb.subgraph("main"), mb.subgraph("cond"), mb.subgraph("body")
    ma, mbv = main.tensor("a", [N], np.float32), main.tensor("b", [N], np.float32)
    outs = [main.tensor(k, [], np.int32) if k == "i_out" else main.tensor(k, [N], np.float32)
            for k in ("i_out", "a_out", "b_out", "c_out")]
    main.op("WHILE", [main.const("i0", np.array(0, np.int32)), ma, mbv, mbv], outs,
            cond_subgraph_index=1, body_subgraph_index=2)
    main.inputs, main.outputs = [ma, mbv], outs[1:]
    cin = [cond.tensor("i", [], np.int32)] + [cond.tensor(k, [N], np.float32) for k in "abc"]
    go = cond.tensor("go", [], np.bool_)
    cond.op("LESS", [cin[0], cond.const("n", np.array(n, np.int32))], [go])
    cond.inputs, cond.outputs = cin, [go]
    bi = body.tensor("i", [], np.int32)
    ba, bb, bc = (body.tensor(k, [N], np.float32) for k in "abc")
    i1 = body.tensor("i1", [], np.int32)
    body.op("ADD", [bi, body.const("one_i", np.array(1, np.int32))], [i1], fused_activation_function=0)
    one = body.const("one", np.ones(N, np.float32))
    if swap:
        a1 = add(body, bb, one, "a1")
        b1 = ba
    else:
        a1 = add(body, ba, one, "a1")
        b1 = add(body, a1, bb, "b1")
    c1 = add(body, bb, bb, "c1")
    if stash:
        kept = body.tensor("kept", [N], np.float32)
        body.op("CUSTOM", [a1], [kept], custom_code="Stash")
    body.inputs, body.outputs = [bi, ba, bb, bc], [i1, a1, b1, c1]
    return mb.to_bytes("tflite")


def carry_reference(a, b, n, swap=False):
    a, b, c = a.copy(), b.copy(), b.copy()
    for _ in range(n):
        if swap:
            a, b, c = b + 1, a, b + b
        else:
            a, b, c = a + 1, (a + 1) + b, b + b
    return a, b, c


def _counting_empty(monkeypatch):
    """np.empty replaced by a counter of [N] float32 arrays (kernels take np.empty when prepared)."""
    calls = []
    real = np.empty

    def empty(shape, dtype=float, *args, **kwargs):
        if tuple(np.atleast_1d(shape)) == (N,) and np.dtype(dtype) == np.float32:
            calls.append(1)
        return real(shape, dtype, *args, **kwargs)
    monkeypatch.setattr(np, "empty", empty)
    return calls


@pytest.mark.parametrize("arena", ["1", "0"])
def test_while_body_outputs_alternate_between_two_buffers(monkeypatch, arena):
    """The body's outputs a, b, c are written into two buffers per output and WHILE run, iteration k
    into buffer k % 2 (not a new array per iteration); results are those of numpy, run after run, and
    the arrays one run returned are not overwritten by the next."""
    monkeypatch.setenv("ONERT_PY_ARENA", arena)
    calls = _counting_empty(monkeypatch)
    n = 12
    sess = onert_py.infer.session(carry_model(n))
    a = np.linspace(-1, 1, N, dtype=np.float32)
    b = np.linspace(2, 0, N, dtype=np.float32)
    first = sess.infer([a, b])
    kept = [x.copy() for x in first]
    for k in range(3):
        del calls[:]
        got = sess.infer([a * k, b])
        for g, w in zip(got, carry_reference(a * k, b, n)):
            np.testing.assert_array_equal(g, w)
        if arena == "1":
            assert len(calls) == 3 * 2, "two buffers per carried output and run"
        else:
            assert len(calls) >= 3 * n
    for x, y in zip(first, kept):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("swap,stash", [(True, False), (False, True)], ids=["swap", "stash"])
def test_while_body_outputs_not_carried_when_unsafe(monkeypatch, swap, stash):
    """swap: the loop value b is the previous a, so a's buffer from two iterations back is still live
    (and c reads b after the new a is written); stash: a custom op keeps the new a. No buffers are
    carried and the results stay those of numpy."""
    from onert_py.exec.memory_plan import loop_carried_buffers
    _stash.clear()
    calls = _counting_empty(monkeypatch)
    n = 7
    sess = onert_py.infer.session(carry_model(n, swap=swap, stash=stash))
    body = executor(sess, 2)
    assert loop_carried_buffers(body.subgraph, body.operations, body.fresh, may_keep=body.may_keep) == []
    a = np.linspace(-1, 1, N, dtype=np.float32)
    b = np.linspace(2, 0, N, dtype=np.float32)
    for _ in range(2):
        del calls[:]
        got = sess.infer([a, b])
        for g, w in zip(got, carry_reference(a, b, n, swap=swap)):
            np.testing.assert_array_equal(g, w)
        assert len(calls) >= n
    if stash:
        assert len(_stash) == 2 * n and len({id(x) for x in _stash}) == len(_stash)


def test_preserve_all_tensors_and_env_switch_plan_nothing(monkeypatch):
    model, ts = chain_model(4)
    assert executor(onert_py.infer.session(model, preserve_all_tensors=True)).arena_plan.offsets == {}
    monkeypatch.setenv("ONERT_PY_ARENA", "0")
    sess = onert_py.infer.session(model)
    assert executor(sess).arena_plan.offsets == {}
    np.testing.assert_array_equal(sess.infer([np.zeros(N, np.float32)])[0], np.full(N, 5, np.float32))


def test_resized_input_falls_back_to_fresh_arrays():
    """A planned slot is used only when the run-time shape is the planned one."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [N], np.float32, shape_signature=[-1])
    prev = x
    for k in range(3):
        prev = add(sg, prev, x, f"t{k}", shape=(-1,))
    sg.inputs, sg.outputs = [x], [prev]
    sess = onert_py.infer.session(mb.to_bytes("tflite"))
    assert executor(sess).arena_plan.offsets == {}   # dynamic shapes: nothing planned up front
    # what a resize does, with the shapes shape inference gives (it does not know custom ops)
    inferred = SimpleNamespace(subgraphs={0: SimpleNamespace(shapes=[(7,), (7,), (7,), (-1,)])})
    sess.executors.plan_memory(inferred)
    assert len(executor(sess).arena_plan.offsets) == 2   # t0, t1; t2 is the output
    for n in (7, 5, N):
        v = np.arange(n, dtype=np.float32)
        if n != 7:
            sess.update_inputs_tensorinfo([onert_py.infer.tensorinfo("x", "float32", 1, [n])])
        np.testing.assert_array_equal(sess.infer([v])[0], 4 * v)
    again = executor(sess).plan_memory({t: (7,) for t in (1, 2, 3)})
    assert executor(sess).plan_memory({t: (7,) for t in (1, 2, 3)}) is again   # kept per shapes


# ------------------------------------------------------------------ property: random graphs

@st.composite
def graphs(draw):
    """Random DAGs over float32 [N] tensors: ArenaAdd (planned), Identity (aliases its input) and
    RESHAPE (a view), with one or two outputs."""
    n_ops = draw(st.integers(2, 14))
    ops = []
    for k in range(n_ops):
        avail = k + 1   # value 0 is the input, value j+1 the output of op j
        kind = draw(st.sampled_from(["add", "add", "add", "identity", "reshape"]))
        a = draw(st.integers(0, avail - 1))
        b = draw(st.integers(0, avail - 1))
        ops.append((kind, a, b))
    outs = sorted(set(draw(st.lists(st.integers(1, n_ops), min_size=1, max_size=2))))
    return ops, outs


def build(ops, outs) -> bytes:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    vals = [sg.tensor("x", [N], np.float32)]
    flat = sg.const("flat", np.array([N], np.int32))
    for k, (kind, a, b) in enumerate(ops):
        if kind == "add":
            vals.append(add(sg, vals[a], vals[b], f"v{k}"))
        else:
            t = sg.tensor(f"v{k}", [N], np.float32)
            if kind == "identity":
                sg.op("CUSTOM", [vals[a]], [t], custom_code="Identity")
            else:
                sg.op("RESHAPE", [vals[a], flat], [t])
            vals.append(t)
    sg.inputs, sg.outputs = [vals[0]], [vals[o] for o in outs]
    return mb.to_bytes("tflite")


def evaluate(ops, outs, x):
    vals = [x]
    for kind, a, b in ops:
        vals.append(vals[a] + vals[b] if kind == "add" else vals[a])
    return [vals[o] for o in outs]


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_random_graphs_match_numpy(graph):
    ops, outs = graph
    sess = onert_py.infer.session(build(ops, outs))
    assert_plan_safe(executor(sess).arena_plan)
    for seed in range(2):
        x = np.random.default_rng(seed).standard_normal(N).astype(np.float32)
        got = sess.infer([x])
        for g, w in zip(got, evaluate(ops, outs, x)):
            np.testing.assert_array_equal(g, w)


def test_plan_arena_on_plain_ir():
    """plan_arena needs only tensors and ops: a diamond a -> (b, c) -> d keeps b alive while c is
    computed, so b and c never share, while d may reuse a's bytes."""
    tensors = [SimpleNamespace(index=i, data=None, is_variable=False, is_dynamic=False, shape=(256,),
                               dtype=np.dtype(np.float32)) for i in range(5)]
    ops = [SimpleNamespace(opcode="ADD", inputs=(0, 0), outputs=(1,)),
           SimpleNamespace(opcode="ADD", inputs=(1, 1), outputs=(2,)),
           SimpleNamespace(opcode="ADD", inputs=(1, 1), outputs=(3,)),
           SimpleNamespace(opcode="ADD", inputs=(2, 3), outputs=(4,))]
    sg = SimpleNamespace(tensors=tensors, inputs=(0,), outputs=())
    plan = plan_arena(sg, ops, fresh={1, 2, 3, 4})
    assert plan.intervals == {1: (0, 2), 2: (1, 3), 3: (2, 3), 4: (3, 3)}
    assert_plan_safe(plan)
    assert plan.offsets[4] == plan.offsets[1]          # b is dead once d runs
    assert plan.size == 3 * 1024


def _run_peak_bytes(sess, x) -> int:
    import tracemalloc
    sess.infer([x])   # warm: plans and lazy state settled
    tracemalloc.start()
    try:
        sess.infer([x])
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_static_run_allocates_only_its_output(monkeypatch):
    """With the arena, a run of planned kernels allocates the returned output and nothing else; without
    it, every intermediate is a new array (at least two live at a time in a chain)."""
    model, _ = chain_model(8)
    x = np.zeros(N, np.float32)
    out_bytes = N * 4
    assert _run_peak_bytes(onert_py.infer.session(model), x) < 1.25 * out_bytes
    monkeypatch.setenv("ONERT_PY_ARENA", "0")
    assert _run_peak_bytes(onert_py.infer.session(model), x) >= 2 * out_bytes


def test_builtin_kernels_share_the_arena_and_match_litert():
    """PAD -> DEPTHWISE -> CONV (+RELU6) -> CONCATENATION -> ADD with builtin kernels: their outputs are
    planned, slots are reused, and one session gives LiteRT's results for several inputs in a row."""
    from helpers import run_litert_builtin
    rng = np.random.default_rng(0)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [1, 16, 16, 8], np.float32)
    p = sg.tensor("p", [1, 18, 18, 8], np.float32)
    sg.op("PAD", [x, sg.const("pads", np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32))], [p])
    d = sg.tensor("d", [1, 16, 16, 8], np.float32)
    sg.op("DEPTHWISE_CONV_2D", [p, sg.const("dw", rng.standard_normal((1, 3, 3, 8)).astype(np.float32)),
                                sg.const("db", rng.standard_normal(8).astype(np.float32))], [d],
          padding=1, stride_w=1, stride_h=1, depth_multiplier=1, fused_activation_function=0)
    c = sg.tensor("c", [1, 16, 16, 8], np.float32)
    sg.op("CONV_2D", [d, sg.const("cw", rng.standard_normal((8, 1, 1, 8)).astype(np.float32)),
                      sg.const("cb", rng.standard_normal(8).astype(np.float32))], [c],
          padding=1, stride_w=1, stride_h=1, fused_activation_function=3)
    cat = sg.tensor("cat", [1, 16, 16, 16], np.float32)
    sg.op("CONCATENATION", [c, x], [cat], axis=3, fused_activation_function=0)
    out = sg.tensor("out", [1, 16, 16, 16], np.float32)
    sg.op("ADD", [cat, cat], [out], fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [out]
    # cpu: the jit backend folds the PAD into the depthwise kernel (its output p is then never made)
    sess = onert_py.infer.session(mb.to_bytes("tflite"), "cpu")
    plan = executor(sess).arena_plan
    assert set(plan.offsets) == {p, d, c, cat}
    assert plan.size < plan.unshared
    assert_plan_safe(plan)
    for seed in range(3):
        xv = np.random.default_rng(seed).standard_normal((1, 16, 16, 8)).astype(np.float32)
        (want,) = run_litert_builtin(mb, [xv])
        np.testing.assert_allclose(sess.infer([xv])[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 6])   # one row: the gemv path; several: one sgemm
def test_fully_connected_chain_is_planned_and_matches_litert(rows):
    """FULLY_CONNECTED (RELU) -> FULLY_CONNECTED (keep_num_dims) -> SIN: both FC outputs get arena slots,
    and one session gives LiteRT's results for several inputs in a row (the slots are rewritten)."""
    from helpers import run_litert_builtin
    rng = np.random.default_rng(3)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [rows, 16], np.float32)
    h = sg.tensor("h", [rows, 24], np.float32)
    sg.op("FULLY_CONNECTED", [x, sg.const("w1", rng.standard_normal((24, 16)).astype(np.float32)),
                              sg.const("b1", rng.standard_normal(24).astype(np.float32))], [h],
          fused_activation_function=1)
    g = sg.tensor("g", [rows, 8], np.float32)
    sg.op("FULLY_CONNECTED", [h, sg.const("w2", rng.standard_normal((8, 24)).astype(np.float32)), -1], [g],
          fused_activation_function=0, keep_num_dims=True)
    out = sg.tensor("out", [rows, 8], np.float32)
    sg.op("SIN", [g], [out])
    sg.inputs, sg.outputs = [x], [out]
    sess = onert_py.infer.session(mb.to_bytes("tflite"))
    plan = executor(sess).arena_plan
    assert set(plan.offsets) == {h, g}
    assert_plan_safe(plan)
    for seed in range(3):
        xv = np.random.default_rng(seed).standard_normal((rows, 16)).astype(np.float32)
        (want,) = run_litert_builtin(mb, [xv])
        np.testing.assert_allclose(sess.infer([xv])[0], want, rtol=1e-5, atol=1e-5)


def test_resize_replans_the_arena_for_builtin_kernels():
    """A dynamic-batch model: after update_inputs_tensorinfo (session) or resize_tensor_input +
    allocate_tensors (Interpreter) the arena holds the new shapes, and results stay right. (`a` has two
    readers, so that no fused chain takes it out of the arena.)"""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [-1, 64], np.float32)
    a = sg.tensor("a", [-1, 64], np.float32)
    sg.op("EXP", [x], [a])
    b = sg.tensor("b", [-1, 64], np.float32)
    sg.op("ABS", [a], [b])
    c = sg.tensor("c", [-1, 64], np.float32)
    sg.op("NEG", [a], [c])
    d = sg.tensor("d", [-1, 64], np.float32)
    sg.op("MAXIMUM", [b, c], [d])
    out = sg.tensor("out", [-1, 64], np.float32)
    sg.op("SQRT", [d], [out])
    sg.inputs, sg.outputs = [x], [out]
    model = mb.to_bytes("tflite")
    want = lambda v: np.sqrt(np.abs(np.exp(v)))  # noqa: E731
    sess = onert_py.infer.session(model)
    info = sess.get_inputs_tensorinfo()[0]
    info.dims = [5, 64]
    sess.update_inputs_tensorinfo([info])
    plan = executor(sess).arena_plan
    assert plan.shapes.get(a) == (5, 64)
    v = np.random.default_rng(1).random((5, 64), np.float32)
    np.testing.assert_allclose(sess.infer([v])[0], want(v), rtol=1e-6)
    it = onert_py.Interpreter(model_content=model)
    it.resize_tensor_input(0, [3, 64])
    it.allocate_tensors()
    assert it._executors[0].arena_plan.shapes.get(a) == (3, 64)
    v = v[:3]
    it.set_tensor(it.get_input_details()[0]["index"], v)
    it.invoke()
    np.testing.assert_allclose(it.get_tensor(it.get_output_details()[0]["index"]), want(v), rtol=1e-6)
