"""`onert-py bench`: output structure, profile tables, Chrome trace, one-line errors. No timed assertions."""
from __future__ import annotations

import json
import re
import sys

import numpy as np
import pytest

import onert_py
from helpers import doubling_loop_file
from onert_py.schema.writer import ModelBuilder
from onert_py.tools import cmd_bench
from onert_py.tools.cli import main


def loop_model(path) -> str:
    """x [-1, 2] -> WHILE(i < 5: i += 1, x = x + x) -> x * 2; i is a constant 0, x the only input."""
    return doubling_loop_file(path, 5, [-1, 2])


@pytest.fixture
def model(tmp_path):
    return loop_model(tmp_path)


def _table_rows(out: str, title: str) -> list[list[str]]:
    """Rows of the table printed under `title` (after its header and dashes line)."""
    lines = out.splitlines()
    k = lines.index(title) + 3
    rows = []
    while k < len(lines) and lines[k].strip():
        rows.append(lines[k].split())
        k += 1
    return rows


def test_bench_prints_times_stats_and_rss(model, capsys):
    assert main(["bench", model, "--num-runs", "4", "--warmup-runs", "2"]) == 0
    out = capsys.readouterr().out
    assert "input 0 'x': shape [1, 2] (model: [-1, 2]) dtype float32  random normal, seed 0" in out
    assert re.search(r"^init: [\d.]+ ms$", out, re.M)
    assert re.search(r"^first inference: [\d.]+ ms$", out, re.M)
    assert re.search(r"^warmup: 2 run\(s\), avg [\d.]+ ms$", out, re.M)
    m = re.search(r"^inference: count=(\d+) min=([\d.]+) max=([\d.]+) avg=([\d.]+) std=([\d.]+) "
                  r"p5=([\d.]+) median=([\d.]+) p95=([\d.]+) \(ms\)$", out, re.M)
    assert m and m.group(1) == "4"
    lo, hi, avg, _std, p5, med, p95 = map(float, m.groups()[1:])
    assert lo <= p5 <= med <= p95 <= hi and lo <= avg <= hi
    assert re.search(r"^peak RSS: [\d.]+ MB$", out, re.M)
    assert re.search(r"^memory plan: \d+ tensor\(s\) in arenas of [\d.]+ MB \([\d.]+ MB unshared\)$", out, re.M)
    assert "by op type" not in out


def test_bench_input_shape_and_input_file(model, tmp_path, capsys):
    assert main(["bench", model, "--num-runs", "1", "--input-shape", "x=3,2"]) == 0
    assert "shape [3, 2]" in capsys.readouterr().out
    f = tmp_path / "x.npy"
    np.save(f, np.ones((4, 2), np.float32))
    assert main(["bench", model, "--num-runs", "1", "--input", f"0={f}"]) == 0
    assert "shape [4, 2]" in capsys.readouterr().out


def test_min_secs_adds_runs(model, capsys):
    assert main(["bench", model, "--num-runs", "1", "--warmup-runs", "0", "--min-secs", "0.05"]) == 0
    count = int(re.search(r"count=(\d+)", capsys.readouterr().out).group(1))
    assert count > 1


def test_profile_tables_count_loop_calls(model, capsys):
    assert main(["bench", model, "--num-runs", "3", "--profile"]) == 0
    out = capsys.readouterr().out
    by_type = {r[0]: r for r in _table_rows(out, "by op type")}
    assert set(by_type) == {"WHILE", "MUL", "LESS", "ADD"}
    assert by_type["WHILE"][3] == "1" and by_type["MUL"][3] == "1"
    assert by_type["LESS"][3] == "6"    # cond runs 5 times true, once false
    assert by_type["ADD"][3] == "10"    # 2 ADDs x 5 iterations
    assert sum(float(r[2]) for r in by_type.values()) == pytest.approx(100, abs=0.5)
    by_sg = {r[0]: r for r in _table_rows(out, "by subgraph")}
    assert by_sg["1"][3] == "6" and by_sg["2"][3] == "10" and by_sg["0"][3] == "2"
    assert len(_table_rows(out, "top 5 operators")) == 5


def test_trace_is_chrome_json(model, tmp_path, capsys):
    trace = tmp_path / "t.json"
    assert main(["bench", model, "--num-runs", "2", "--trace", str(trace)]) == 0
    assert f"written to {trace}" in capsys.readouterr().out
    data = json.loads(trace.read_text())
    events = [e for e in data["traceEvents"] if e["ph"] == "X"]
    ops = [e for e in events if e.get("cat") == "op"]
    runs = [e for e in events if e.get("cat") == "run"]
    assert len(runs) == 2 and len(ops) == 2 * (1 + 1 + 6 + 10)
    for e in events:
        assert {"name", "ts", "dur", "pid", "tid"} <= set(e) and e["dur"] >= 0 and e["ts"] >= 0
    assert {e["name"] for e in ops} == {"WHILE", "MUL", "LESS", "ADD"}
    assert all(set(e["args"]) == {"subgraph", "op"} for e in ops)
    # every op lies inside a run
    assert all(any(r["ts"] <= e["ts"] and e["ts"] + e["dur"] <= r["ts"] + r["dur"] + 1 for r in runs)
               for e in ops)


@pytest.mark.parametrize("args, message", [
    (["--num-runs", "0"], "--num-runs must be >= 1"),
    (["--warmup-runs", "-1"], "--warmup-runs must be >= 0"),
    (["--min-secs", "-2"], "--min-secs must be a finite number >= 0, not -2"),
    (["--min-secs", "inf"], "--min-secs must be a finite number >= 0, not inf"),
    (["--input-shape", "x"], "expected NAME_OR_INDEX=D0,D1"),
    (["--input-shape", "x=1,a"], "comma-separated integers"),
    (["--input-shape", "nope=1,2"], "unknown input 'nope'"),
    (["--input-shape", "x=1,2,3"], "input 0"),
    (["--input", "x=/no/such.npy"], "input file not found"),
    (["--trace", "/no/such/dir/t.json"], "does not exist"),
])
def test_bad_arguments_are_one_line_errors(model, capsys, args, message):
    assert main(["bench", model, "--num-runs", "1", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("onert-py: error:") and message in err


def test_missing_model(capsys):
    assert main(["bench", "/no/such/model.tflite"]) == 2
    assert "model file not found" in capsys.readouterr().err


def test_latency_stats_values():
    s = cmd_bench.latency_stats([0.001 * k for k in range(1, 101)])
    assert s["count"] == 100 and s["min"] == pytest.approx(1) and s["max"] == pytest.approx(100)
    assert s["median"] == pytest.approx(50.5) and s["p5"] == pytest.approx(5.95)


def test_report_json_matches_printed_results(model, tmp_path, capsys):
    report = tmp_path / "r.json"
    assert main(["bench", model, "--num-runs", "3", "--input-shape", "x=2,2", "--report", str(report)]) == 0
    out = capsys.readouterr().out
    data = json.loads(report.read_text())
    assert data["inputs"] == [{"name": "x", "shape": [2, 2], "dtype": "float32", "source": "random normal, seed 0"}]
    lat = data["latency_ms"]
    assert lat["count"] == 3 and lat["min"] <= lat["p5"] <= lat["median"] <= lat["p95"] <= lat["max"]
    printed = re.search(r"^inference: count=3 min=([\d.]+) max=([\d.]+) avg=([\d.]+)", out, re.M).groups()
    assert [float(v) for v in printed] == [round(lat[k], 3) for k in ("min", "max", "avg")]
    assert f"init: {data['init_ms']:.3f} ms" in out and f"peak RSS: {data['peak_rss_mb']:.1f} MB" in out
    assert data["warmup_runs"] == 1 and data["profiled"] is False and data["interrupted"] is False
    plan = data["memory_plan"]
    m = re.search(r"^memory plan: (\d+) tensor\(s\) in arenas of ([\d.]+) MB \(([\d.]+) MB unshared\)$", out, re.M)
    assert int(m.group(1)) == plan["planned_tensors"]
    assert m.group(2) == f"{plan['arena_bytes'] / 2**20:.1f}" and m.group(3) == f"{plan['unshared_bytes'] / 2**20:.1f}"
    assert f"report written to {report}" in out


@pytest.mark.parametrize("args, message", [
    (["--report", "/no/such/dir/r.json"], "does not exist"),
    (["--report", "same.json", "--trace", "same.json"], "name the same file"),
])
def test_bad_report_paths(model, tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    assert main(["bench", model, "--num-runs", "1", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not (tmp_path / "same.json").exists()


# ---- the report's per-op rows and memory plan, folded ops, --profile-all

def chain_model(tmp_path) -> str:
    """x [1, 64] -> ADD w -> t1 -> MUL w2 -> t2 -> ADD w -> t3 -> ADD w -> y, where w = DEQUANTIZE(0.5 as
    float16) and w2 = DEQUANTIZE(2 as float16): two ops whose inputs are constants, which the compiler
    folds at prepare (ops 0 and 1), and four that run (ops 2..5)."""
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [1, 64], np.float32)
    w, w2 = sg.tensor("w", [1, 64], np.float32), sg.tensor("w2", [1, 64], np.float32)
    sg.op("DEQUANTIZE", [sg.const("w16", np.full((1, 64), 0.5, np.float16))], [w])
    sg.op("DEQUANTIZE", [sg.const("w2_16", np.full((1, 64), 2, np.float16))], [w2])
    prev = x
    for k, name in enumerate(["t1", "t2", "t3", "y"]):
        t = sg.tensor(name, [1, 64], np.float32)
        sg.op("MUL" if k == 1 else "ADD", [prev, w2 if k == 1 else w], [t], fused_activation_function=0)
        prev = t
    sg.inputs, sg.outputs = [x], [prev]
    path = tmp_path / "chain.tflite"
    path.write_bytes(mb.to_bytes("tflite"))
    return str(path)


def test_report_rows_without_profile_have_backends_shapes_and_no_timings(model, tmp_path, capsys):
    report = tmp_path / "r.json"
    assert main(["bench", model, "--num-runs", "2", "--input-shape", "x=3,2", "--report", str(report),
                 "--backends", "cpu"]) == 0
    data = json.loads(report.read_text())
    rows = data["ops"]
    # every op of every subgraph, in execution order (doubling_loop_file's docstring lists them)
    assert [(r["subgraph"], r["index"], r["op"]) for r in rows] == \
        [(0, 0, "WHILE"), (0, 1, "MUL"), (1, 0, "LESS"), (2, 0, "ADD"), (2, 1, "ADD")]
    assert [r["backend"] for r in rows] == ["controlflow", "cpu", "cpu", "cpu", "cpu"]
    # shapes for the inputs run (x is [3, 2] here, [-1, 2] in the model)
    assert rows[1]["outputs"] == [{"name": "y", "shape": [3, 2]}]
    assert rows[0]["outputs"] == [{"name": "i_out", "shape": []}, {"name": "x_out", "shape": [3, 2]}]
    assert rows[2]["outputs"] == [{"name": "cb", "shape": []}]
    for r in rows:
        assert r["folded"] is False and r["count"] == 0
        assert r["avg_ms"] is r["min_ms"] is r["max_ms"] is r["total_ms"] is None
    assert data["profile_runs"] == 0


def test_report_rows_with_profile_count_calls_and_time_per_run(model, tmp_path, capsys):
    report = tmp_path / "r.json"
    assert main(["bench", model, "--num-runs", "3", "--profile", "--report", str(report)]) == 0
    data = json.loads(report.read_text())
    assert data["profiled"] is True and data["profile_runs"] == 3
    rows = {(r["subgraph"], r["index"]): r for r in data["ops"]}
    # per run: WHILE and MUL once, LESS 6 times (5 true, 1 false), each body ADD 5 times
    assert {k: r["count"] for k, r in rows.items()} == {(0, 0): 3, (0, 1): 3, (1, 0): 18, (2, 0): 15, (2, 1): 15}
    for r in rows.values():
        assert 0 <= r["min_ms"] <= r["avg_ms"] <= r["max_ms"]
        assert r["total_ms"] == pytest.approx(3 * r["avg_ms"])
    # the WHILE's time includes the ops of the subgraphs it runs
    assert rows[(0, 0)]["total_ms"] >= rows[(1, 0)]["total_ms"] + rows[(2, 0)]["total_ms"]
    # the printed tables come from the same counters: ms per run of the costliest op
    out = capsys.readouterr().out
    top = _table_rows(out, "top 5 operators")[0]
    assert float(top[3]) == pytest.approx(rows[(int(top[0]), int(top[1]))]["avg_ms"], abs=1e-3)


def test_folded_ops_are_listed_in_rows_and_profile(tmp_path, capsys):
    path = chain_model(tmp_path)
    report = tmp_path / "r.json"
    assert main(["bench", path, "--num-runs", "2", "--profile", "--report", str(report), "--backends", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "2 ops folded at prepare (not timed): DEQUANTIZE×2" in out
    rows = json.loads(report.read_text())["ops"]
    assert [(r["index"], r["op"], r["folded"]) for r in rows] == [
        (0, "DEQUANTIZE", True), (1, "DEQUANTIZE", True), (2, "ADD", False), (3, "MUL", False),
        (4, "ADD", False), (5, "ADD", False)]
    for r in rows[:2]:
        assert r["backend"] is None and r["count"] == 0 and r["avg_ms"] is None and r["total_ms"] is None
    assert rows[0]["outputs"] == [{"name": "w", "shape": [1, 64]}]
    assert all(r["backend"] == "cpu" and r["count"] == 2 and r["avg_ms"] >= 0 for r in rows[2:])
    # the profile tables hold only the four ops that ran
    assert {r[0]: r[4] for r in _table_rows(out, "by op type")} == {"ADD": "3", "MUL": "1"}


def test_profile_all_lists_every_op_run(tmp_path, capsys):
    path = chain_model(tmp_path)
    assert main(["bench", path, "--num-runs", "1", "--profile-all", "--backends", "cpu"]) == 0
    out = capsys.readouterr().out
    rows = _table_rows(out, "all 4 operators run")
    assert sorted((r[1], r[2], r[7]) for r in rows) == [("2", "ADD", "t1"), ("3", "MUL", "t2"), ("4", "ADD", "t3"),
                                                       ("5", "ADD", "y")]
    ms = [float(r[3]) for r in rows]
    assert ms == sorted(ms, reverse=True)


def test_top_table_stops_at_ten(tmp_path, capsys, monkeypatch):
    """12 ADDs: --profile shows the 10 costliest, --profile-all all 12 (op by op: the jit backend would
    compile them as one segment, test_profile_names_segments in tests/backends/jit/test_segment.py)."""
    monkeypatch.setenv("ONERT_PY_JIT_SEGMENTS", "0")
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    prev = x = sg.tensor("x", [4], np.float32)
    for k in range(12):
        t = sg.tensor(f"t{k}", [4], np.float32)
        sg.op("ADD", [prev, prev], [t], fused_activation_function=0)
        prev = t
    sg.inputs, sg.outputs = [x], [prev]
    path = tmp_path / "adds.tflite"
    path.write_bytes(mb.to_bytes("tflite"))
    assert main(["bench", str(path), "--num-runs", "1", "--profile"]) == 0
    out = capsys.readouterr().out
    assert len(_table_rows(out, "top 10 operators")) == 10 and "folded" not in out
    assert main(["bench", str(path), "--num-runs", "1", "--profile-all"]) == 0
    assert len(_table_rows(capsys.readouterr().out, "all 12 operators run")) == 12


def test_memory_plan_is_structured(tmp_path, capsys):
    """chain_model's t1, t2, t3 ([1, 64] float32: 256 bytes each) are planned: t1 (written by op 2, last
    read by op 3) and t3 (op 4 to op 5) never live at once and share offset 0, t2 (op 3 to op 4)
    overlaps both: a 512-byte arena for 768 bytes of tensors. x and y are the subgraph's input and
    output and w, w2 are folded: not planned."""
    report = tmp_path / "r.json"
    assert main(["bench", chain_model(tmp_path), "--num-runs", "1", "--report", str(report),
                 "--backends", "cpu"]) == 0
    plan = json.loads(report.read_text())["memory_plan"]
    assert plan["enabled"] is True
    assert (plan["arena_bytes"], plan["planned_tensors"], plan["unshared_bytes"], plan["saved_bytes"]) == \
        (512, 3, 768, 256)
    assert plan["reuse_ratio"] == pytest.approx(1.5)
    (sub,) = plan["subgraphs"]
    assert sub["subgraph"] == 0 and sub["arena_bytes"] == 512 and sub["planned_tensors"] == 3
    tensors = {t["name"]: t for t in sub["tensors"]}
    assert set(tensors) == {"t1", "t2", "t3"}
    assert [(tensors[n]["written_by"], tensors[n]["last_read_by"]) for n in ("t1", "t2", "t3")] == \
        [(2, 3), (3, 4), (4, 5)]
    assert tensors["t1"]["offset"] == tensors["t3"]["offset"] != tensors["t2"]["offset"]
    assert all(t["bytes"] == 256 and t["shape"] == [1, 64] for t in tensors.values())


def test_memory_plan_disabled_by_environment(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ONERT_PY_ARENA", "0")
    report = tmp_path / "r.json"
    assert main(["bench", chain_model(tmp_path), "--num-runs", "1", "--report", str(report)]) == 0
    plan = json.loads(report.read_text())["memory_plan"]
    assert plan["enabled"] is False and plan["arena_bytes"] == 0 and plan["reuse_ratio"] is None


def test_benchmark_model_spellings(model, capsys):
    assert main(["bench", model, "--num_runs", "3", "--warmup_runs", "0", "--num_threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "count=3 " in out and "warmup" not in out and re.search(r"^num_threads: 1 \(", out, re.M)


# ---- Ctrl-C and progress

def _interrupt_after(monkeypatch, timed_runs: int, warmup: int = 1, midway: bool = False) -> None:
    """Make session.infer raise KeyboardInterrupt in the timed run after `timed_runs` completed ones
    (calls before them: the first inference and the warmup runs). With `midway`, the run is stopped
    after some of its ops ran (the profiler's clock raises on its 10th reading), as a real Ctrl-C does."""
    original = onert_py.infer.session.infer
    calls = [0]

    def infer(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] == 1 + warmup + timed_runs + 1:
            if not midway:
                raise KeyboardInterrupt
            clock, readings = self.runtime.clock, [0]

            def stopping_clock():
                readings[0] += 1
                if readings[0] == 10:
                    raise KeyboardInterrupt
                return clock()
            self.runtime.clock = stopping_clock
        return original(self, *args, **kwargs)
    monkeypatch.setattr(onert_py.infer.session, "infer", infer)


def test_interrupt_prints_statistics_so_far_and_writes_report(model, tmp_path, capsys, monkeypatch):
    _interrupt_after(monkeypatch, 3)
    report = tmp_path / "r.json"
    assert main(["bench", model, "--num-runs", "100", "--report", str(report)]) == cmd_bench.INTERRUPTED == 130
    out, err = capsys.readouterr()
    assert "interrupted (Ctrl-C) after 3 of 100 timed run(s): statistics of those" in out
    assert re.search(r"^inference: count=3 min=", out, re.M) and "peak RSS" in out
    assert "error" not in err
    data = json.loads(report.read_text())
    assert data["interrupted"] is True and data["latency_ms"]["count"] == 3


def test_interrupt_midway_keeps_the_profile_of_completed_runs(model, tmp_path, capsys, monkeypatch):
    _interrupt_after(monkeypatch, 2, midway=True)
    trace, report = tmp_path / "t.json", tmp_path / "r.json"
    assert main(["bench", model, "--num-runs", "50", "--profile", "--trace", str(trace), "--report", str(report)]) == 130
    out = capsys.readouterr().out
    assert "after 2 of 50 timed run(s)" in out and re.search(r"^inference \(with per-op profiling\): count=2 ", out, re.M)
    # what the stopped run's first ops added is gone: the per-run counts are whole numbers
    by_type = {r[0]: r for r in _table_rows(out, "by op type")}
    assert (by_type["LESS"][3], by_type["ADD"][3], by_type["WHILE"][3]) == ("6", "10", "1")
    ops = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "op"]
    assert len(ops) == 2 * (1 + 1 + 6 + 10)
    counts = {(r["subgraph"], r["index"]): r["count"] for r in json.loads(report.read_text())["ops"]}
    assert counts == {(0, 0): 2, (0, 1): 2, (1, 0): 12, (2, 0): 10, (2, 1): 10}


def test_interrupt_before_any_timed_run(model, tmp_path, capsys, monkeypatch):
    _interrupt_after(monkeypatch, 0)
    report, trace = tmp_path / "r.json", tmp_path / "t.json"
    assert main(["bench", model, "--report", str(report), "--trace", str(trace)]) == 130
    out = capsys.readouterr().out
    assert "interrupted (Ctrl-C) after 0 of 50 timed run(s): no statistics" in out and "count=" not in out
    assert json.loads(report.read_text())["latency_ms"] is None
    assert "not written" in out and not trace.exists()


def test_interrupt_outside_the_timed_runs_is_an_error(model, capsys, monkeypatch):
    """Ctrl-C in the first inference: nothing measured yet, the usual one-line error (exit 2)."""
    monkeypatch.setattr(onert_py.infer.session, "infer", lambda self, *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    assert main(["bench", model]) == 2
    assert "interrupted" in capsys.readouterr().err


def _as_terminal(monkeypatch) -> None:
    """stderr a terminal, the progress line drawn from the first run on. Called in the test, not in a
    fixture: capsys puts its own sys.stderr in place only when the test starts."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setattr(cmd_bench._Progress, "delay", 0.0)
    monkeypatch.setattr(cmd_bench._Progress, "interval", 0.0)


def test_progress_on_a_terminal(model, capsys, monkeypatch):
    _as_terminal(monkeypatch)
    assert main(["bench", model, "--num-runs", "3"]) == 0
    out, err = capsys.readouterr()
    draws = [d for d in err.split("\r") if d.strip()]
    assert [re.match(r"\[#*\s*\] (\d+)/3 runs  [\d.]+ s  avg [\d.]+ ms", d).group(1) for d in draws] == ["1", "2", "3"]
    assert err.endswith("\r") and err.split("\r")[-2].strip() == ""   # the line is blanked at the end
    assert "runs" not in out


def test_progress_shows_min_secs(model, capsys, monkeypatch):
    _as_terminal(monkeypatch)
    assert main(["bench", model, "--num-runs", "1", "--min-secs", "0.01"]) == 0
    assert re.search(r"runs  [\d.]+/0.01 s  avg", capsys.readouterr().err)


def test_no_progress_when_piped(model, capsys, monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    monkeypatch.setattr(cmd_bench._Progress, "delay", 0.0)
    assert main(["bench", model, "--num-runs", "3"]) == 0
    assert capsys.readouterr().err == ""
