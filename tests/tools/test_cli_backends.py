"""--backends, --op-backend and --num-threads on `run`, `bench`, `compare` and `inspect`: they parse,
reach the session (bench's backends line, --report JSON, inspect's backend columns), and bad values
are one-line errors naming the option. Tests needing the jit backend skip without numba."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from helpers import doubling_loop_file
from onert_py.backends import jit
from onert_py.backends.registry import JIT, KernelAttrs
from onert_py.compiler.compile import quantized_type
from onert_py.loader import load_model
from onert_py.schema.writer import ModelBuilder
from onert_py.tools.cli import main


def cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def chain_model(path) -> str:
    """x [2, 3] float32 -> ABS -> ADD(+1) -> ARG_MAX(axis 1) -> int32 [2]: ABS/ADD are jit-shaped ops,
    ARG_MAX one no jit family (elementwise, conv, pool, matmul) holds."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [2, 3], np.float32)
    a, b = sg.tensor("a", [2, 3], np.float32), sg.tensor("b", [2, 3], np.float32)
    y = sg.tensor("y", [2], np.int32)
    sg.op("ABS", [x], [a])
    sg.op("ADD", [a, sg.const("one", np.ones((2, 3), np.float32))], [b], fused_activation_function=0)
    sg.op("ARG_MAX", [b, sg.const("axis", np.array([1], np.int32))], [y], output_type=2)
    sg.inputs, sg.outputs = [x], [y]
    p = path / "chain.tflite"
    p.write_bytes(mb.to_bytes("tflite"))
    return str(p)


def loop_model(path) -> str:
    """x [2] -> WHILE(i < 3: i += 1, x = x + x) -> x * 2: subgraphs 0 main (WHILE, MUL), 1 cond (LESS),
    2 body (two ADDs)."""
    return doubling_loop_file(path, 3, [2])


@pytest.fixture
def chain(tmp_path):
    return chain_model(tmp_path)


@pytest.fixture
def loop(tmp_path):
    return loop_model(tmp_path)


def backends_of(out: str) -> dict[str, int]:
    """bench's "backends: jit 1 op, cpu 2 ops" line as {"jit": 1, "cpu": 2}."""
    line = re.search(r"^backends: (.*)$", out, re.M).group(1)
    return {name: int(n) for name, n in re.findall(r"(\w+) (\d+) ops?", line)}


def table_rows(out: str, title: str) -> list[list[str]]:
    lines = out.splitlines()
    k = lines.index(title) + 3
    rows = []
    while k < len(lines) and lines[k].strip():
        rows.append(lines[k].split())
        k += 1
    return rows


@pytest.fixture
def jit_abs(monkeypatch):
    """A jit kernel for ABS made here, with a fresh numba function (so it compiles in this test, and is
    not cached on disk), registered on JIT for the test only."""
    numba = pytest.importorskip("numba")
    assert jit.load()   # the real families first: they must not register over ours

    def _abs(x):
        return np.abs(x)
    compiled = numba.njit(_abs)

    def prepare(ctx):
        (a,), (o,) = ctx.inputs, ctx.outputs
        v = ctx.values

        def run() -> None:
            v[o] = compiled(v[a])
        return run
    monkeypatch.setitem(JIT.kernels, "ABS", prepare)
    monkeypatch.setitem(JIT.dtypes, "ABS", ("float32",))
    monkeypatch.setitem(JIT.attrs, "ABS", KernelAttrs())
    monkeypatch.setitem(JIT.accepts, ("ABS", False), lambda op, sg: True)
    return compiled


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv("ONERT_PY_BACKENDS", raising=False)
    monkeypatch.delenv("ONERT_PY_OP_BACKEND_MAP", raising=False)


# ---- bench: the backends line, threads, report

def test_backends_cpu_runs_only_cpu_and_controlflow(loop, tmp_path, capsys, no_env):
    report = tmp_path / "r.json"
    rc, out, err = cli(capsys, "bench", loop, "--num-runs", "2", "--backends", "cpu", "--report", report)
    assert rc == 0, err
    assert re.search(r"^backends: cpu 4 ops, controlflow 1 op$", out, re.M)
    data = json.loads(report.read_text())
    assert data["backends"] == {"cpu": 4, "controlflow": 1} and data["backend_order"] == ["cpu"]
    assert data["num_threads"] == -1
    assert re.search(r"^num_threads: -1 \(libraries' default: BLAS [\d?]+\)$", out, re.M)
    assert "jit:" not in out   # no jit, nothing compiled


@pytest.mark.parametrize("n", [1, 2])
def test_num_threads_reaches_report(loop, tmp_path, capsys, n, no_env):
    report = tmp_path / "r.json"
    rc, out, err = cli(capsys, "bench", loop, "--num-runs", "2", "--num-threads", n, "--report", report)
    assert rc == 0, err
    assert re.search(rf"^num_threads: {n} \(", out, re.M)
    data = json.loads(report.read_text())
    assert data["num_threads"] == n
    if data["threads"]["blas"] is not None:   # threadpoolctl reads back what BLAS runs with
        assert data["threads"]["blas"] <= n
    assert sum(data["backends"].values()) == 5


def test_num_threads_on_run_and_compare(loop, capsys, no_env):
    pytest.importorskip("ai_edge_litert")
    assert cli(capsys, "run", loop, "--num-threads", "2", "--backends", "cpu")[0] == 0
    rc, out, err = cli(capsys, "compare", loop, "--num-threads", "1", "--backends", "cpu")
    assert rc == 0, err + out
    assert out.rstrip().endswith("PASS")


def test_op_backend_forces_an_op_type(chain, tmp_path, capsys, jit_abs, no_env):
    rc, out, err = cli(capsys, "bench", chain, "--num-runs", "1")
    assert rc == 0, err
    assert backends_of(out)["jit"] >= 1   # ABS (ours) at least
    report = tmp_path / "r.json"
    rc, out, err = cli(capsys, "bench", chain, "--num-runs", "1", "--op-backend", "ABS=cpu",
                       "--op-backend", "ADD=cpu", "--report", report)
    assert rc == 0, err
    assert backends_of(out) == {"jit": 0, "cpu": 3}
    assert json.loads(report.read_text())["op_backend"] == {"ABS": "cpu", "ADD": "cpu"}
    # forced the other way: --backends cpu, and ABS by index onto jit (';'-joined as OP_BACKEND_MAP)
    rc, out, err = cli(capsys, "bench", chain, "--num-runs", "1", "--backends", "cpu",
                       "--op-backend", "0:0=jit;ADD=cpu")
    assert rc == 0, err
    assert backends_of(out) == {"cpu": 2, "jit": 1}


def test_profile_tables_name_each_ops_backend(chain, capsys, jit_abs, no_env):
    rc, out, err = cli(capsys, "bench", chain, "--num-runs", "2", "--profile", "--op-backend", "ADD=cpu")
    assert rc == 0, err
    by_type = {r[0]: r for r in table_rows(out, "by op type")}
    assert by_type["ABS"][-1] == "jit" and by_type["ADD"][-1] == "cpu" and by_type["ARG_MAX"][-1] == "cpu"
    top = {r[2]: r[-1] for r in table_rows(out, "top 3 operators")}
    assert top == {"ABS": "jit", "ADD": "cpu", "ARG_MAX": "cpu"}


def test_jit_compilation_is_reported_where_it_happens(chain, tmp_path, capsys, jit_abs, no_env):
    """The compiler runs each jit kernel once on zeros while the session is created (compiling it
    there): bench says so under the init line, and the first inference compiles nothing."""
    report = tmp_path / "r.json"
    rc, out, err = cli(capsys, "bench", chain, "--num-runs", "1", "--report", report)
    assert rc == 0, err
    data = json.loads(report.read_text())["jit_compile"]
    first, init = data["first_inference"], data["init"]
    assert init["compiled"] >= 1 and init["ms"] > 0   # our ABS kernel, compiled by the warm-up run
    assert first["compiled"] == 0
    lines = out.splitlines()
    k = next(i for i, line in enumerate(lines) if line.startswith("init:"))
    assert re.match(r"  jit: [\d.]+ ms of the init went to compiling \d+ function\(s\)", lines[k + 1])
    assert init["cached_on_disk"] == 0 and "cached" not in lines[k + 1]   # ours is not numba-cached
    # the same kernel in the same process: compiled already, nothing to say
    rc, out, err = cli(capsys, "bench", chain, "--num-runs", "1")
    assert rc == 0 and "jit:" not in out


def test_op_forced_on_a_backend_that_cannot_run_it(chain, tmp_path, capsys, no_env):
    pytest.importorskip("numba")
    # ARG_MAX: no jit kernel at all
    rc, out, err = cli(capsys, "run", chain, "--op-backend", "ARG_MAX=jit")
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith("onert-py: error: --op-backend puts subgraph 0 operator 2 (ARG_MAX) on backend 'jit'")
    # inspect refuses it the same way, without running
    rc, out, err2 = cli(capsys, "inspect", chain, "--op-backend", "ARG_MAX=jit")
    assert rc == 2 and err2 == err
    # an op jit has a kernel name for but declines (an int32 ADD: jit's elementwise kernels are float32)
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    a, o = sg.tensor("a", [4], np.int32), sg.tensor("o", [4], np.int32)
    sg.op("ADD", [a, a], [o], fused_activation_function=0)
    sg.inputs, sg.outputs = [a], [o]
    model = load_model(mb.to_bytes("tflite"))
    op = model.subgraphs[0].operations[0]
    assert jit.load()
    if JIT.takes(op, model.subgraphs[0], quantized_type(op, model.subgraphs[0])):
        pytest.skip("the jit backend now takes int32 ADD")
    path = tmp_path / "int_add.tflite"
    path.write_bytes(mb.to_bytes("tflite"))
    rc, out, err = cli(capsys, "run", path, "--op-backend", "ADD=jit")
    assert rc == 2 and "--op-backend puts subgraph 0 operator 0 (ADD) on backend 'jit'" in err


# ---- bad values: one line naming the option

@pytest.mark.parametrize("verb", ["run", "bench", "compare"])
@pytest.mark.parametrize("args, message", [
    (["--num-threads", "0"], "--num-threads must be >= 1, or -1 for the libraries' default; got 0"),
    (["--num-threads", "-3"], "--num-threads must be >= 1, or -1 for the libraries' default; got -3"),
    (["--backends", "gpu"], "--backends gpu: unknown backend 'gpu'; available: cpu, jit"),
    (["--backends", "cpu;acl_cl"], "--backends cpu;acl_cl: unknown backend 'acl_cl'"),
    (["--backends", " ; "], "--backends is empty"),
    (["--op-backend", "ADD"], "--op-backend: 'ADD' is not KEY=BACKEND"),
    (["--op-backend", "ADD=gpu"], "--op-backend ADD=gpu: unknown backend 'gpu'"),
    (["--op-backend", "0:x=cpu"], "--op-backend: key '0:x' is not SUBGRAPH:INDEX"),
    (["--op-backend", "CONV2D=cpu"], "--op-backend CONV2D=cpu: the model has no CONV2D op (its op types: "
                                     "ABS, ADD, ARG_MAX)"),
    (["--op-backend", "0:7=cpu"], "--op-backend 0:7=cpu: subgraph 0 has no operator 7 (it has 3)"),
    (["--op-backend", "3:0=cpu"], "--op-backend 3:0=cpu: the model has no subgraph 3 (it has 0..0)"),
])
def test_bad_values_are_one_line_errors(chain, capsys, verb, args, message, no_env):
    rc, out, err = cli(capsys, verb, chain, *args)
    assert rc == 2 and err.count("\n") == 1, err
    assert err.startswith(f"onert-py: error: {message}")


def test_num_threads_must_be_an_int(chain, capsys):
    rc, _, err = cli(capsys, "bench", chain, "--num-threads", "two")
    assert rc == 2 and "--num-threads: invalid int value: 'two'" in err


@pytest.mark.parametrize("args, message", [
    (["--backends", "jit"], "--backends jit: the jit backend needs numba (ModuleNotFoundError: No module "
                            "named 'numba'); install it with"),
    (["--backends", "jit;cpu"], "--backends jit;cpu: the jit backend needs numba (ModuleNotFoundError"),
    (["--op-backend", "ADD=jit"], "--op-backend ADD=jit: the jit backend needs numba"),
])
def test_jit_without_numba(chain, capsys, monkeypatch, args, message, no_env):
    monkeypatch.setattr(jit, "_state", {"loaded": False, "why": "ModuleNotFoundError: No module named 'numba'"})
    for verb in ("run", "inspect"):
        rc, _, err = cli(capsys, verb, chain, *args)
        assert rc == 2 and err.startswith(f"onert-py: error: {message}"), err
    # the default then is cpu alone, and says so
    monkeypatch.setattr(jit, "installed", lambda: False)
    rc, out, _ = cli(capsys, "bench", chain, "--num-runs", "1")
    assert rc == 0 and backends_of(out) == {"cpu": 3}


def test_bad_env_default_names_the_variable(chain, capsys, monkeypatch, no_env):
    monkeypatch.setenv("ONERT_PY_BACKENDS", "tpu")
    rc, _, err = cli(capsys, "run", chain)
    assert rc == 2 and err.startswith("onert-py: error: ONERT_PY_BACKENDS=tpu: unknown backend 'tpu'")
    # --backends wins over the variable
    assert cli(capsys, "run", chain, "--backends", "cpu")[0] == 0


def test_env_op_backend_map_is_merged_and_may_name_other_models_ops(chain, capsys, monkeypatch, no_env):
    monkeypatch.setenv("ONERT_PY_OP_BACKEND_MAP", "CONV_2D=cpu;ADD=cpu")
    rc, out, err = cli(capsys, "inspect", chain, "--json", "--op-backend", "ABS=cpu")
    assert rc == 0, err
    assert json.loads(out)["op_backend"] == {"CONV_2D": "cpu", "ADD": "cpu", "ABS": "cpu"}
    monkeypatch.setenv("ONERT_PY_OP_BACKEND_MAP", "ADD")
    rc, _, err = cli(capsys, "run", chain)
    assert rc == 2 and err.startswith("onert-py: error: ONERT_PY_OP_BACKEND_MAP: 'ADD' is not KEY=BACKEND")


def test_jit_alone_hints_at_cpu(chain, capsys, no_env):
    pytest.importorskip("numba")
    rc, _, err = cli(capsys, "run", chain, "--backends", "jit")
    assert rc == 2 and "ARG_MAX" in err and err.rstrip().endswith("add cpu, e.g. --backends 'jit;cpu'")


# ---- inspect: which backend each op would run on, without running

def test_inspect_backends_lines_and_columns(loop, capsys, no_env):
    rc, out, err = cli(capsys, "inspect", loop, "--backends", "cpu", "--subgraph", 2)
    assert rc == 0, err
    assert "backends: cpu (--backends)" in out
    lines = out.splitlines()
    k = lines.index("  [0] main: 6 tensors, 2 ops")
    assert lines[k + 4] == "      backends: cpu 1 op, controlflow 1 op"
    assert "      backends: cpu 2 ops" in lines   # body: two ADDs
    k = lines.index("subgraph 2 'body': operators")
    assert lines[k + 1].split()[:3] == ["#", "op", "backend"]
    assert [r.split()[2] for r in lines[k + 3:k + 5]] == ["cpu", "cpu"]
    info = json.loads(cli(capsys, "inspect", loop, "--json", "--backends", "cpu", "--subgraph", 0)[1])
    assert info["backend_order"] == ["cpu"] and info["backends_from"] == "--backends"
    assert [sg["backends"] for sg in info["subgraphs"]] == [{"cpu": 1, "controlflow": 1}, {"cpu": 1},
                                                              {"cpu": 2}]
    assert [(op["opcode"], op["backend"]) for op in info["subgraphs"][0]["operator_details"]] == \
        [("WHILE", "controlflow"), ("MUL", "cpu")]


def test_inspect_follows_op_backend_and_jit(chain, capsys, jit_abs, no_env):
    info = json.loads(cli(capsys, "inspect", chain, "--json", "--subgraph", 0)[1])
    assert info["backends_from"] == "default" and info["backend_order"][0] == "jit"
    assert info["subgraphs"][0]["operator_details"][0]["backend"] == "jit"   # ABS: ours
    rc, out, _ = cli(capsys, "inspect", chain, "--op-backend", "ABS=cpu", "--op-backend", "ADD=cpu")
    assert rc == 0
    assert "backends: jit;cpu (default; op backend ABS=cpu, ADD=cpu)" in out
    assert "      backends: cpu 3 ops" in out


def test_inspect_counts_ops_without_a_kernel(tmp_path, capsys, no_env):
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    a, o = sg.tensor("a", [3], np.float32), sg.tensor("o", [3], np.float32)
    sg.op("CUSTOM", [a], [o], custom_code="NoSuchCustomOp")
    sg.inputs, sg.outputs = [a], [o]
    path = tmp_path / "u.tflite"
    path.write_bytes(mb.to_bytes("tflite"))
    rc, out, _ = cli(capsys, "inspect", path, "--backends", "cpu")
    assert rc == 0 and "      backends: no kernel 1 op" in out
    info = json.loads(cli(capsys, "inspect", path, "--json")[1])
    assert info["subgraphs"][0]["backends"] == {"none": 1}
    assert info["unsupported_ops"] == [{"subgraph": 0, "op": 0, "opcode": "NoSuchCustomOp"}]
