"""Structure-aware fuzzing in CI: valid flatbuffers with hostile values (tests/fuzz/hostile.py) either
run or fail with an OnertPyError, never with a raw exception or a hang; plus the hostile cases whose
error we know, the findings of the fuzz runs as regression tests, and the worker pool's classification.

The bounded hypothesis run is derandomized (the same examples every time); a share of it, and a slice of
the deterministic sweep of hostile option, quantization and dim values, runs on the jit backend
("jit;cpu": numba kernels that index without bounds checks). benchmarks/robustness.py runs the same
generators for thousands of cases in worker processes under a 4 GiB address-space limit.
"""
from __future__ import annotations

import signal
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import onert_py
from fuzzrun import WorkerPool, byte_mutations, run_bytes, tally
from hostile import BASES, EDITS, HOME_BASE, JIT_BASES, HypothesisDraw, RandomDraw, hostile_model, pack, sweep_cases
from onert_py.schema.opcodes import OPTIONS_TYPES
from onert_py.schema.writer import ModelBuilder

CASE_SECONDS = 30     # a case still running after this is a hang (a guard, not a performance check)


@contextmanager
def hang_guard(desc: str):
    def on_alarm(signum, frame):
        raise AssertionError(f"hang: {desc} still running after {CASE_SECONDS} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(CASE_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def check_case(desc: str, data: bytes, backends: str = "cpu") -> str:
    with hang_guard(desc):
        r = run_bytes(data, max_while_iterations=8, backends=backends)
    assert r.outcome in ("ran", "prepared", "clean"), f"{desc} ({backends}): {r.detail}"
    return r.outcome


@settings(max_examples=150, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_hostile_models_run_or_fail_cleanly(data):
    desc, model = hostile_model(HypothesisDraw(data))
    check_case(desc, model)


def test_hostile_models_on_the_jit_backend_run_or_fail_cleanly():
    """The same generator on the bases whose ops the jit backend takes (its convolutions, pools, int8
    fully connected, elementwise kernels and whole-loop WHILE), run with backends="jit;cpu"."""
    pytest.importorskip("numba")

    @settings(max_examples=40, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def on_jit(data):
        d = HypothesisDraw(data)
        desc, model = hostile_model(d, base=d.choice(JIT_BASES))
        check_case(desc, model, backends="jit;cpu")
    on_jit()


def test_sweep_of_hostile_values_on_the_jit_backend():
    """Every 20th case of the deterministic sweep (each option, zero point, scale and dim of the jit
    bases set to a hostile value; benchmarks/robustness.py runs all of them)."""
    pytest.importorskip("numba")
    for k, (desc, model) in enumerate(sweep_cases(JIT_BASES, seeds=(0,))):
        if k % 20 == 0:
            check_case(desc, model, backends="jit;cpu")


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_every_edit_runs_or_fails_cleanly(edit):
    """Each kind of hostile edit, on its home base and on random ones (so none is left untried)."""
    outcomes = []
    for seed in range(6):
        d = RandomDraw(seed)
        base = HOME_BASE.get(edit) if seed % 2 == 0 else None
        desc, model = hostile_model(d, base=base, edits=[edit])
        outcomes.append(check_case(desc, model))
    assert "clean" in outcomes or edit in ("option_values", "const_values", "zero_size", "shape_signature"), \
        f"no {edit} edit was refused: {outcomes}"


@pytest.mark.parametrize("base", sorted(set(BASES) - {"call_chain"}))   # its deep chains are refused on purpose
def test_valid_bases_run(base):
    """Without edits every base model runs (so hostile edits, not broken bases, make the errors)."""
    desc, model = hostile_model(RandomDraw(3), base=base, edits=[])
    r = run_bytes(model, max_while_iterations=8)
    if base == "while_forever":
        assert r.outcome == "clean" and "max_while_iterations=8" in r.detail, r.detail
    else:
        assert r.outcome == "ran", f"{desc}: {r.detail}"


# ---------------------------------------------------------------------------------------------
# Hostile cases whose error we know.

def _model(base: str, edit=None, seed: int = 0) -> bytes:
    from circle_schema.v0_10.circle import Model as M
    mb = BASES[base](RandomDraw(seed))
    m = M.ModelT.InitFromPackedBuf(bytearray(mb.to_bytes("tflite")), 0)
    if edit is not None:
        edit(m)
    return pack(m)


def _error(data: bytes, **options) -> onert_py.OnertPyError:
    with pytest.raises(onert_py.OnertPyError) as info:
        sess = onert_py.infer.session(data, backends="cpu", **options)
        from fuzzrun import make_inputs
        sess.infer(make_inputs(sess))
    return info.value


def test_cond_that_never_ends_stops_at_max_while_iterations():
    e = _error(_model("while_forever"), max_while_iterations=5)
    assert isinstance(e, onert_py.ExecutionError) and "max_while_iterations=5" in str(e)


def test_self_recursive_and_mutually_recursive_subgraphs_refused_at_load():
    def self_loop(m):
        m.subgraphs[2].operators[0].builtinOptions = None   # body: keep it valid, then make it call itself
        from hostile import edit_recursion

        class Pick(RandomDraw):
            def integer(self, lo, hi):
                return 2 if hi >= 2 else lo
        edit_recursion(m, Pick(0))

    def mutual(m):       # main -IF-> then; then's op calls main back
        op = m.subgraphs[0].operators[0]
        op.builtinOptions.thenSubgraphIndex = 1
        from hostile import _opcode_index
        from circle_schema.v0_10.circle import CallOnceOptions, Operator
        call = Operator.OperatorT()
        call.opcodeIndex = _opcode_index(m, "CALL_ONCE")
        call.builtinOptionsType = OPTIONS_TYPES["CallOnceOptions"]
        call.builtinOptions = CallOnceOptions.CallOnceOptionsT()
        call.builtinOptions.initSubgraphIndex = 0
        call.inputs, call.outputs = [], []
        m.subgraphs[1].operators.append(call)

    e = _error(_model("while", self_loop))
    assert isinstance(e, onert_py.LoadError) and "cycle" in str(e)
    e = _error(_model("if", mutual))
    assert isinstance(e, onert_py.LoadError) and "cycle" in str(e) and "0" in str(e)


@pytest.mark.parametrize("value", [3, 7, -1, 2**31 - 1])
def test_out_of_range_subgraph_index_refused_at_load(value):
    def edit(m):
        m.subgraphs[0].operators[0].builtinOptions.bodySubgraphIndex = value
    e = _error(_model("while", edit))
    assert isinstance(e, onert_py.LoadError) and str(value) in str(e)


@pytest.mark.parametrize("size", [0, 1, 5, 28])
def test_constant_buffer_size_mismatch_refused(size):
    def edit(m):   # base_add's constant "c" (shape [2, 3] float32 = 24 bytes)
        t = next(t for t in m.subgraphs[0].tensors if t.name == b"c")
        m.buffers[t.buffer].data = np.arange(size, dtype=np.uint8)
    data = _model("add", edit, seed=5)
    if size == 0:    # an empty buffer reads as "no data": c becomes an activation that no op produces
        _error(data)
        return
    e = _error(data)
    assert isinstance(e, onert_py.LoadError) and "bytes" in str(e)


@pytest.mark.parametrize("header", [
    (2**31 - 1,), (-1,), (3, 20, 21, 22, 10_000), (3, 20, 22, 21, 24), (3, 2, 21, 22, 24)])
def test_string_buffer_with_bad_count_or_offsets_refused(header):
    import struct

    def edit(m):
        t = next(t for t in m.subgraphs[0].tensors if t.name == b"words")
        raw = struct.pack(f"<{len(header)}i", *header) + b"abcdef"
        m.buffers[t.buffer].data = np.frombuffer(raw, np.uint8)
    e = _error(_model("strings", edit))
    assert "string" in str(e)     # a LoadError, or the budget's ResourceError for a huge count


def test_signature_pointing_nowhere_refused():
    def to_missing_subgraph(m):
        m.signatureDefs[0].subgraphIndex = 9

    def to_missing_tensor(m):
        m.signatureDefs[0].outputs[0].tensorIndex = 1000
    for edit in (to_missing_subgraph, to_missing_tensor):
        e = _error(_model("add", edit))
        assert isinstance(e, onert_py.LoadError) and "signature" in str(e)


def test_options_table_of_another_op_read_as_its_defaults_or_refused():
    """ADD given CONV_2D's options table: LiteRT reads the union by its type code, so the ADD sees no
    AddOptions (its defaults); an unknown type code is refused."""
    from circle_schema.v0_10.circle import Conv2DOptions

    def conv_options(m):
        op = m.subgraphs[0].operators[0]
        op.builtinOptionsType, op.builtinOptions = 1, Conv2DOptions.Conv2DOptionsT()

    def unknown(m):
        m.subgraphs[0].operators[0].builtinOptionsType = 200
    r = run_bytes(_model("add", conv_options))
    assert r.outcome in ("ran", "clean"), r.detail
    e = _error(_model("add", unknown))
    assert isinstance(e, onert_py.LoadError) and "options type 200" in str(e)


@pytest.mark.parametrize("how", ["scale length", "dimension"])
def test_quantization_lengths_disagreeing_with_the_quantized_dimension_refused(how):
    def edit(m):
        t = next(t for t in m.subgraphs[0].tensors if t.name == b"filter")
        if how == "scale length":
            t.quantization.scale = [0.1] * 7
            t.quantization.zeroPoint = [0] * 7
        else:
            t.quantization.quantizedDimension = 9
    e = _error(_model("quant_conv", edit, seed=1))
    assert "filter" in str(e) or "quantiz" in str(e).lower()


# ---------------------------------------------------------------------------------------------
# Findings of the fuzz runs (fixed), as regression tests.

def _conv_model(x_shape, filter_shape) -> bytes:
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", x_shape)
    f = sg.const("filter", np.ones(filter_shape, np.float32))
    y = sg.tensor("y", [1, 4, 4, filter_shape[0]])
    sg.op("CONV_2D", [x, f, -1], [y], padding=0, stride_w=1, stride_h=1, fused_activation_function=0,
          dilation_w_factor=1, dilation_h_factor=1)
    sg.inputs, sg.outputs = [x], [y]
    return mb.to_bytes()


@pytest.mark.parametrize("x_shape, filter_shape", [([1, 4, 4, 2], [1, 2, 0, 2]), ([1, 4, 4, 0], [3, 1, 1, 2])])
def test_zero_size_conv_filter_or_channels_is_a_prepare_error(x_shape, filter_shape):
    """Found by the structure-aware run: a ZeroDivisionError escaped from the conv plan."""
    e = _error(_conv_model(x_shape, filter_shape))
    assert isinstance(e, onert_py.PrepareError) and "CONV_2D" in str(e)


def test_omitted_required_input_is_a_prepare_error():
    """Found by atheris: CAST with input -1 raised AttributeError from the kernel's prepare."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x, y = sg.tensor("x", [2]), sg.tensor("y", [2], np.int32)
    sg.op("CAST", [-1], [y])
    sg.inputs, sg.outputs = [x], [y]
    e = _error(mb.to_bytes())
    assert isinstance(e, onert_py.PrepareError) and "CAST" in str(e)


def test_huge_pool_filter_prepares_in_input_time_and_matches_a_whole_input_window():
    """Found by atheris: MAX_POOL_2D with filter_height 33554435 spent ~50 s listing taps at prepare.
    A VALID window taller than the input has no output rows; with SAME padding every output row sees
    the whole column of the input."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x, y = sg.tensor("x", [1, 7, 6, 2]), sg.tensor("y", [1, 4, 3, 2])
    sg.op("MAX_POOL_2D", [x], [y], padding=0, stride_w=2, stride_h=2, filter_width=3,
          filter_height=33554435, fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [y]
    xv = np.random.default_rng(0).standard_normal((1, 7, 6, 2)).astype(np.float32)
    with hang_guard("huge pool filter"):
        (out,) = onert_py.infer.session(mb.to_bytes(), backends="cpu").infer([xv])
    # SAME: window rows cover the whole input; columns are the ordinary 3-wide, stride-2 windows
    padded = np.pad(xv.max(axis=1), ((0, 0), (0, 1), (0, 0)), constant_values=-np.inf)   # W 6 -> 7
    want = np.stack([padded[:, j * 2:j * 2 + 3].max(axis=1) for j in range(3)], axis=1)
    np.testing.assert_array_equal(out, np.broadcast_to(want[:, None], (1, 4, 3, 2)))


# ---------------------------------------------------------------------------------------------
# The worker pool and the byte mutator used by the long runs.

def test_worker_pool_classifies_ran_clean_and_hang(tmp_path):
    good = hostile_model(RandomDraw(0), base="add", edits=[])[1]
    forever = hostile_model(RandomDraw(0), base="while_forever", edits=[])[1]
    with WorkerPool(timeout=60, max_while_iterations=4) as pool:
        results = [pool.run(good), pool.run(b"TFL3 not a model"), pool.run(forever)]
    assert [r.outcome for r in results] == ["ran", "clean", "clean"], [r.detail for r in results]
    assert pool.peak_rss_kb > 0
    with WorkerPool(timeout=2, max_while_iterations=None) as pool:   # unbounded: only the time limit
        r = pool.run(forever)
        assert r.outcome == "hang"
        assert pool.run(good).outcome == "ran"     # a fresh worker after the killed one
    assert tally(results + [r]) == {"ran": 1, "prepared": 0, "clean": 2, "other": 0, "hang": 1, "tried": 4}


def test_worker_pool_reports_a_dead_worker_as_other():
    with WorkerPool(memory_limit=64 << 20, timeout=60) as pool:    # too small to import numpy
        assert pool.run(b"x").outcome == "other"


def test_byte_mutations_are_deterministic_and_mutate():
    data = bytes(range(256)) * 4
    a = list(byte_mutations(data, 50, seed=3))
    assert a == list(byte_mutations(data, 50, seed=3))
    assert len(a) == 50 and all(m != data for _, m in a if _ != "truncate")
    assert {k for k, _ in a} == {"flip", "truncate", "splice"}


# ---------------------------------------------------------------------------------------------
# Findings of the jit runs (fixed in backends/jit), as regression tests.

def _jit_outcome(data: bytes) -> str:
    pytest.importorskip("numba")
    r = run_bytes(data, max_while_iterations=8, backends="jit;cpu")
    assert r.outcome in ("ran", "clean"), r.detail
    return r.outcome


def test_jit_int8_fully_connected_with_a_zero_output_scale_is_refused_cleanly():
    """Found by the sweep: the jit kernel's accepts() divided by the output scale (ZeroDivisionError
    out of compiling); now it declines and the cpu kernel refuses the scale."""
    def zero_scale(m):
        t = next(t for t in m.subgraphs[0].tensors if t.name == b"y")
        t.quantization.scale = [0.0]
    data = _model("quant_fc", zero_scale)
    assert _jit_outcome(data) == "clean"
    assert run_bytes(data, backends="cpu").outcome == "clean"


def test_jit_loop_with_a_zero_size_constant_falls_back():
    """Found by the structure-aware run: a WHILE body's constant made zero-size ([0] against the
    scalar counter) reached the compiled loop's code generator (a raw ValueError from broadcasting
    the declared shapes); declared shapes that do not broadcast to the output's now keep the loop on
    the per-op kernels, which say what is wrong."""
    def zero_size_one(m):
        t = next(t for t in m.subgraphs[2].tensors if t.name == b"one")
        t.shape = [0]
        m.buffers[t.buffer].data = np.zeros(0, np.uint8)
    assert _jit_outcome(_model("while", zero_size_one, seed=1)) in ("ran", "clean")


def test_jit_loop_never_reads_a_folded_value_past_its_end():
    """A compiled WHILE body reading a value folded at compile time whose tensor declares more elements
    than the value has ([2] computed, [4] declared): the generated loop (no bounds checks) would read
    past it. The loop is not compiled; the per-op kernels refuse the shapes, as on the cpu backend."""
    pytest.importorskip("numba")
    mb = ModelBuilder()
    main, cond, body = mb.subgraph("main"), mb.subgraph("cond"), mb.subgraph("body")
    i, x = main.tensor("i", [], np.int32), main.tensor("x", [4])
    outs = [main.tensor("i_out", [], np.int32), main.tensor("x_out", [4])]
    main.op("WHILE", [i, x], outs, cond_subgraph_index=1, body_subgraph_index=2)
    main.inputs, main.outputs = [i, x], outs
    ci, cx, go = cond.tensor("i", [], np.int32), cond.tensor("x", [4]), cond.tensor("go", [], np.bool_)
    cond.op("LESS", [ci, cond.const("limit", np.array(3, np.int32))], [go])
    cond.inputs, cond.outputs = [ci, cx], [go]
    bi, bx = body.tensor("i", [], np.int32), body.tensor("x", [4])
    folded = body.tensor("folded", [4])     # ADD of two [2] constants: [2], declared [4]
    body.op("ADD", [body.const("a", np.ones(2, np.float32)), body.const("b", np.ones(2, np.float32))], [folded],
            fused_activation_function=0)
    bi2, bx2 = body.tensor("i_next", [], np.int32), body.tensor("x_next", [4])
    body.op("ADD", [bi, body.const("one", np.array(1, np.int32))], [bi2], fused_activation_function=0)
    body.op("ADD", [bx, folded], [bx2], fused_activation_function=0)
    body.inputs, body.outputs = [bi, bx], [bi2, bx2]
    data = mb.to_bytes()
    for backends in ("jit;cpu", "cpu"):
        sess = onert_py.infer.session(data, backends=backends)
        with pytest.raises(onert_py.OnertPyError):
            sess.infer([np.array(0, np.int32), np.zeros(4, np.float32)])
