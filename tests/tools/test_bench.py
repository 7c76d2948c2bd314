"""`onert-py bench`: output structure, profile tables, Chrome trace, one-line errors. No timed assertions."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from helpers import doubling_loop_file
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
    assert data["warmup_runs"] == 1 and data["profiled"] is False
    assert data["memory_plan"] in out


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
