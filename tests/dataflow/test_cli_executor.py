"""`--executor`, `--parallel-iterations`, `--inter-op-threads` on `run`, `compare` and `bench`: the dataflow
executor gives the linear executor's outputs bit for bit, and LiteRT's; bench names the executor that
ran; bad values are one-line errors."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import onert_py.compiler.lowering as lowering
from helpers import cli, compare_rows, one_line_error

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "while_if.tflite"
# n = 3: the WHILE runs 3 iterations, the body's IF takes both sides (i < 2, then not)
LOOPS = ("--input-range", "n=3,3")


@pytest.fixture
def dataflow_builds(monkeypatch) -> list[int]:
    """Entry subgraphs the dataflow executor was built for: proof that it, not the linear one, ran."""
    built: list[int] = []
    real = lowering.build_dataflow

    def spy(model, executors, runtime, subgraph=0, **kw):
        built.append(subgraph)
        return real(model, executors, runtime, subgraph, **kw)
    monkeypatch.setattr(lowering, "build_dataflow", spy)
    return built


def test_run_under_dataflow_gives_the_linear_outputs(tmp_path, capsys, dataflow_builds):
    outs = {}
    for executor, extra in (("linear", ()), ("dataflow", ()),
                            ("dataflow", ("--inter-op-threads", "2", "--parallel-iterations", "2"))):
        path = tmp_path / f"{executor}{len(outs)}.npz"
        rc, _, err = cli(capsys, "run", EXAMPLE, *LOOPS, "--output", path, "--executor", executor, *extra)
        assert rc == 0, err
        with np.load(path) as z:
            outs[path.stem] = {k: z[k] for k in z.files}
    assert dataflow_builds == [0, 0]
    linear = outs.pop("linear0")
    assert int(linear["i"]) == 3
    for got in outs.values():
        assert sorted(got) == sorted(linear)
        for k in linear:
            assert got[k].dtype == linear[k].dtype
            np.testing.assert_array_equal(got[k], linear[k])


def test_compare_under_dataflow_matches_litert_and_the_linear_outputs(tmp_path, capsys, dataflow_builds):
    linear = tmp_path / "linear.npz"
    assert cli(capsys, "run", EXAMPLE, *LOOPS, "--output", linear)[0] == 0
    rc, out, err = cli(capsys, "compare", EXAMPLE, *LOOPS, "--executor", "dataflow", "--inter-op-threads", "2")
    assert rc == 0 and out.rstrip().endswith("PASS"), out + err
    assert [r[-1] for r in compare_rows(out)] == ["PASS", "PASS"]
    # bit for bit against the linear executor's outputs (the strict rule with zero tolerances)
    rc, out, _ = cli(capsys, "compare", EXAMPLE, *LOOPS, "--executor", "dataflow", "--reference", linear,
                     "--rtol", "0", "--atol", "0")
    assert rc == 0 and [r[-1] for r in compare_rows(out)] == ["PASS", "PASS"]
    # recording ops (per-op errors) runs the dataflow executor sequentially, and says so
    report = tmp_path / "d.json"
    rc, out, _ = cli(capsys, "compare", EXAMPLE, *LOOPS, "--executor", "dataflow", "--report", report)
    assert rc == 0 and "runs sequentially (inter_op_threads 1)" in out
    assert json.loads(report.read_text())["pass"] is True
    assert dataflow_builds == [0, 0, 0]


def test_bench_names_the_executor(tmp_path, capsys, monkeypatch, dataflow_builds):
    report = tmp_path / "r.json"
    common = ("bench", EXAMPLE, *LOOPS, "--num-runs", "1", "--warmup-runs", "0")
    rc, out, _ = cli(capsys, *common, "--executor", "dataflow", "--parallel-iterations", "3",
                     "--inter-op-threads", "1", "--report", report)
    assert rc == 0
    assert "executor: dataflow (parallel_iterations 3, inter_op_threads 1)" in out.splitlines()[:8]
    assert json.loads(report.read_text())["executor"] == {"executor": "dataflow", "parallel_iterations": 3,
                                                          "inter_op_threads": 1}
    rc, out, _ = cli(capsys, *common)
    assert rc == 0 and "executor: linear" in out.splitlines()
    monkeypatch.setenv("ONERT_PY_EXECUTOR", "dataflow")   # the default from outside, as the session's
    rc, out, _ = cli(capsys, *common, "--inter-op-threads", "1")
    assert rc == 0 and "executor: dataflow (parallel_iterations 10, inter_op_threads 1)" in out.splitlines()
    assert dataflow_builds == [0, 0]


@pytest.mark.parametrize("verb", ["run", "compare", "bench"])
def test_bad_executor_options(capsys, monkeypatch, verb):
    rc, _, err = cli(capsys, verb, EXAMPLE, "--executor", "graph")
    assert rc == 2 and "argument --executor: invalid choice: 'graph'" in err
    for option in ("--parallel-iterations", "--inter-op-threads"):
        line = one_line_error(capsys, verb, EXAMPLE, "--executor", "dataflow", option, "0")
        assert f"{option} must be >= 1, got 0" in line
        line = one_line_error(capsys, verb, EXAMPLE, option, "2")
        assert f"{option} only applies to the dataflow executor: add --executor dataflow" in line
    monkeypatch.setenv("ONERT_PY_EXECUTOR", "graph")
    assert "ONERT_PY_EXECUTOR=graph" in one_line_error(capsys, verb, EXAMPLE)
