"""`onert-py view`: the HTML page (drawn in headless Chromium), DOT, Model Explorer node data, overlays,
the lowered graph (`--lowered`) and bad input.

Expected node and edge counts are counted by hand (examples/while_if.tflite) or recomputed here from
the loader's IR with a formula of this file's own (the mediapipe model), never read back from the
generator."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from onert_py.compiler.lowering import lower
from onert_py.ir.lowered import PRIMITIVES
from onert_py.loader import load_model
from onert_py.schema.writer import ModelBuilder
from onert_py.tools import cmd_view
from onert_py.tools.cli import main
from helpers import cli, one_line_error

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "while_if.tflite"

# examples/while_if.tflite, counted by hand from `onert-py inspect --subgraph N`. Nodes are graph
# inputs + ops + graph outputs; edges one per (producer, consumer, tensor); constants folded:
#   0 main:  x, n -> WHILE -> i, y (n_out is returned by no one)      5 nodes, 4 edges (+ i0: 6, 5)
#   1 cond:  i, n, x; LESS(i, n) -> go (x unused)                     5 nodes, 3 edges
#   2 body:  i, n, x; LESS(i, three), IF(early, x), ADD(i, one);
#            i1, n, x1 (n passes straight through)                    9 nodes, 7 edges (+ three, one: 11, 9)
#   3 double / 4 increment: a -> MUL/ADD(a, k) -> r                   3 nodes, 2 edges (+ k: 4, 3)
WHILE_IF_DRAWN = "0=5:4 1=5:3 2=9:7 3=3:2 4=3:2"
WHILE_IF_DRAWN_CONSTS = "0c=6:5 1c=5:3 2c=11:9 3c=4:3 4c=4:3"


# ---- the browser

def chromium() -> str | None:
    return shutil.which("chromium") or (os.path.exists("/usr/bin/chromium") and "/usr/bin/chromium") or None


def _system_tool(path: str | None, what: str, package: str) -> str:
    """A Debian package's program the tests need: under CI (whose .ci/run installs it) a missing one
    fails; elsewhere the tests that need it skip."""
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {what} is missing: .ci/run installs Debian's {package} package "
                        f"(apt-get install {package})", pytrace=False)
        pytest.skip(f"{what} is not installed (apt-get install {package}); under CI=1 this fails")
    return path


@pytest.fixture(scope="module")
def browser() -> str:
    return _system_tool(chromium(), "headless Chromium", "chromium")


@pytest.fixture(scope="module")
def graphviz_dot() -> str:
    """graphviz's `dot`, which lays out the DOT files `view --dot` writes."""
    return _system_tool(shutil.which("dot"), "graphviz's dot", "graphviz")


def _chromium(browser: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"chromium-profile-{len(list(tmp_path.glob('chromium-profile-*')))}"
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--virtual-time-budget=5000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


class _Status(HTMLParser):
    """The attributes of #view-status (what the page drew, its script errors) in a dumped DOM."""
    def __init__(self):
        super().__init__()
        self.attrs: dict[str, str] | None = None
        self.pwned = False

    def handle_starttag(self, tag, attrs):
        d = dict(attrs)
        if d.get("id") == "view-status":
            self.attrs = {k: v or "" for k, v in d.items()}
        if tag == "body" and "data-pwned" in d:
            self.pwned = True


def render(browser: str, page: Path, tmp_path: Path, fragment: str = "") -> tuple[dict[str, str], str]:
    """Load the page in headless Chromium; the status element's attributes and the DOM text."""
    proc = _chromium(browser, tmp_path, "--dump-dom", page.resolve().as_uri() + (f"#{fragment}" if fragment else ""))
    assert proc.returncode == 0, proc.stderr[-2000:]
    parser = _Status()
    parser.feed(proc.stdout)
    assert parser.attrs is not None, f"no #view-status in the DOM: {proc.stdout[:500]}"
    assert not parser.pwned
    return parser.attrs, proc.stdout


def screenshot(browser: str, page: Path, tmp_path: Path, png: Path, fragment: str = "") -> None:
    proc = _chromium(browser, tmp_path, f"--screenshot={png}", "--window-size=1400,900",
                     page.resolve().as_uri() + (f"#{fragment}" if fragment else ""))
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000  # a drawing, not a blank page


def assert_clean(status: dict[str, str]) -> None:
    assert status["data-ready"] == "1", status
    assert status["data-errors"] == "", status["data-errors"]


@pytest.fixture(scope="module")
def while_if_page(tmp_path_factory) -> Path:
    page = tmp_path_factory.mktemp("view") / "while_if.html"
    assert main(["view", str(EXAMPLE), "-o", str(page)]) == 0
    return page


# ---- the page in a browser

def test_page_draws_every_subgraph_of_while_if(browser, while_if_page, tmp_path):
    status, _ = render(browser, while_if_page, tmp_path, "all=1")
    assert_clean(status)
    assert status["data-drawn"] == WHILE_IF_DRAWN
    assert (status["data-subgraph"], status["data-nodes"], status["data-edges"]) == ("0", "5", "4")
    status, _ = render(browser, while_if_page, tmp_path, "all=1&consts=1")
    assert_clean(status)
    assert status["data-drawn"] == WHILE_IF_DRAWN_CONSTS
    screenshot(browser, while_if_page, tmp_path, tmp_path / "body.png", "sg=2")


def test_search_by_type_index_and_tensor_name(browser, while_if_page, tmp_path):
    # LESS is op 0 of cond (1) and of body (2); the first match opens cond, found from subgraph 0
    status, _ = render(browser, while_if_page, tmp_path, "search=LESS")
    assert_clean(status)
    assert (status["data-matches"], status["data-subgraph"], status["data-selected"]) == ("2", "1", "o0")
    # "2:1" is subgraph 2's op 1, the IF; its panel links the subgraphs it calls by name
    status, dom = render(browser, while_if_page, tmp_path, "search=2:1")
    assert (status["data-subgraph"], status["data-selected"]) == ("2", "o1")
    assert "subgraph 3: double" in dom and "subgraph 4: increment" in dom
    # tensor x1: the IF writing it and body's output node 2
    status, _ = render(browser, while_if_page, tmp_path, "search=x1")
    assert (status["data-matches"], status["data-subgraph"], status["data-selected"]) == ("2", "2", "o1")


def test_hostile_tensor_names_stay_text(browser, tmp_path, capsys):
    hostile = "</script><script>document.body.dataset.pwned=1</script>"
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor(hostile, [2], np.float32)
    y = sg.tensor("<!--<img src=x onerror=alert(1)>&amp;\u2028", [2], np.float32)
    sg.op("ADD", [x, sg.const("</script><script>alert(1)</script>", np.ones(2, np.float32))], [y],
          fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [y]
    model, page = tmp_path / "hostile.tflite", tmp_path / "hostile.html"
    model.write_bytes(mb.to_bytes("tflite"))
    assert cli(capsys, "view", model, "-o", page)[0] == 0
    text = page.read_text(encoding="utf-8")
    # our four script elements (error recorder, model data, dagre, drawing) are the only ones closed
    assert text.count("</script>") == 4 and text.lower().count("<script") == 4
    data = json.loads(re.search(r'<script type="application/json" id="model-data">(.*?)</script>', text,
                                re.S).group(1))
    assert [t["name"] for t in data["subgraphs"][0]["tensors"]][:2] == [hostile, load_model(model).main.tensors[1].name]
    status, dom = render(browser, page, tmp_path, "select=i0")  # the panel shows the input's name
    assert_clean(status)
    assert (status["data-nodes"], status["data-edges"]) == ("3", "2")
    assert "&lt;/script&gt;&lt;script&gt;document.body.dataset.pwned=1&lt;/script&gt;" in dom


def test_panel_shows_quantization_backend_and_folded_constants(browser, tmp_path, capsys):
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", [2], np.float32)
    q = sg.tensor("q", [2], np.int8, quantization=(0.5, 3))
    y = sg.tensor("y", [2], np.float32)
    sg.op("QUANTIZE", [x], [q])
    sg.op("DEQUANTIZE", [q], [y])
    z = sg.tensor("z", [2], np.float32)
    sg.op("MUL", [y, sg.const("two", np.full(2, 2, np.float32))], [z], fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [z]
    model, page = tmp_path / "q.tflite", tmp_path / "q.html"
    model.write_bytes(mb.to_bytes("tflite"))
    assert cli(capsys, "view", model, "-o", page, "--backends", "cpu")[0] == 0
    status, dom = render(browser, page, tmp_path, "select=o0")
    assert_clean(status)
    assert (status["data-nodes"], status["data-edges"]) == ("5", "4")  # x, 3 ops, z; "two" folded
    assert "scale 0.5 zp 3" in dom and ">int8 2<" in dom  # q's panel card and its edge label
    assert re.search(r"<td>backend</td><td>cpu</td>", dom)
    _, dom = render(browser, page, tmp_path, "select=o2")
    assert "1 constant input folded into this op" in dom


def test_profile_overlay_colours_ops(browser, tmp_path, capsys):
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"ops": [
        {"subgraph": 0, "index": 0, "op": "WHILE", "backend": "controlflow", "count": 1, "avg_ms": 2.0,
         "min_ms": 2.0, "max_ms": 2.0, "total_ms": 2.0, "folded": False},
        {"subgraph": 2, "index": 2, "op": "ADD", "backend": "cpu", "count": 4, "avg_ms": 0.5,
         "min_ms": 0.4, "max_ms": 0.6, "total_ms": 2.0, "folded": False},
        {"subgraph": 2, "index": 0, "op": "LESS", "backend": "cpu", "count": 0, "avg_ms": None,
         "folded": True}]}))
    page, dot = tmp_path / "p.html", tmp_path / "p.dot"
    assert cli(capsys, "view", EXAMPLE, "-o", page, "--profile", report, "--dot", dot)[0] == 0
    status, dom = render(browser, page, tmp_path, "sg=2&select=o2")
    assert_clean(status)
    assert (status["data-overlay"], status["data-colored"]) == ("time", "1")  # ADD; LESS has no value
    assert "0.5 ms" in dom and "time (avg ms per run)" in dom
    status, _ = render(browser, page, tmp_path, "overlay=none")
    assert (status["data-overlay"], status["data-colored"]) == ("", "0")
    # linear from 0 to the slowest op: WHILE the top colour, ADD a quarter of the way
    fills = dict(re.findall(r'(s\d+_o\d+) \[[^\]]*fillcolor="(#[0-9a-f]{6})"', dot.read_text()))
    assert fills["s0_o0"] == cmd_view.COLOUR_STOPS[-1]
    assert fills["s2_o2"] == cmd_view.colour_at(0.25)
    assert "s2_o0" not in fills


def test_colour_scale_ends_and_stops():
    assert cmd_view.colour_at(0) == "#ffffff" and cmd_view.colour_at(1) == "#991b1b"
    assert cmd_view.colour_at(1 / 3) == "#fde68a" and cmd_view.colour_at(2 / 3) == "#f97316"
    assert cmd_view.colour_at(-1) == "#ffffff" and cmd_view.colour_at(7) == "#991b1b"


def _errors_report(path: Path, rows: list[dict]) -> Path:
    path.write_text(json.dumps({"model": "x", "reference": "litert", "rule": "range", "outputs": [],
                                "ops": rows, "worst_op": None}))
    return path


def test_errors_overlay_is_log_scaled_and_written_as_node_data(tmp_path, capsys):
    report = _errors_report(tmp_path / "d.json", [
        {"subgraph": 2, "index": 0, "op": "LESS", "outputs": [], "rel_err": 0.0, "added_err": 0.0},
        {"subgraph": 2, "index": 1, "op": "IF", "outputs": [], "rel_err": 1e-6, "added_err": 1e-6},
        {"subgraph": 2, "index": 2, "op": "ADD", "outputs": [], "rel_err": 1e-3, "added_err": 1e-3},
        {"subgraph": 0, "index": 0, "op": "WHILE", "outputs": [], "rel_err": 1e-5, "added_err": 1e-5}])
    out = tmp_path / "nd.json"
    rc, stdout, _ = cli(capsys, "view", EXAMPLE, "--errors", report, "--node-data", out)
    assert rc == 0 and str(out) in stdout
    nd = json.loads(out.read_text())
    # Model Explorer's graph ids are the subgraph names; node ids the op indices as strings
    assert sorted(nd) == ["body", "main"]
    body = nd["body"]["results"]
    assert {k: v["value"] for k, v in body.items()} == {"0": 0.0, "1": 1e-6, "2": 1e-3}
    # log10 from 1e-6 (lowest colour) to 1e-3 (top); 1e-5 sits a third of the way; 0 is the lowest
    assert body["1"]["bgColor"] == body["0"]["bgColor"] == "#ffffff"
    assert body["2"]["bgColor"] == "#991b1b"
    assert nd["main"]["results"]["0"]["bgColor"] == cmd_view.colour_at(1 / 3)


def test_node_data_graph_ids_follow_model_explorer(tmp_path, capsys):
    """Unnamed subgraphs: the signature key on subgraph 0, else "main"/"subgraph_N" (Model Explorer's
    GetSubgraphName in its TFLite flatbuffer adapter)."""
    mb = ModelBuilder()
    main_sg, other = mb.subgraph(), mb.subgraph()
    for sg in (main_sg, other):
        a, b = sg.tensor("a", [1], np.float32), sg.tensor("b", [1], np.float32)
        sg.op("ABS", [a], [b])
        sg.inputs, sg.outputs = [a], [b]
        sg.name = ""
    mb.signature("serve", main_sg)
    model = tmp_path / "unnamed.tflite"
    model.write_bytes(mb.to_bytes("tflite"))
    assert [sg.name for sg in load_model(model).subgraphs] == ["", ""]
    profile = tmp_path / "r.json"
    profile.write_text(json.dumps({"ops": [{"subgraph": s, "index": 0, "op": "ABS", "avg_ms": 1.0 + s}
                                           for s in (0, 1)]}))
    errors = _errors_report(tmp_path / "d.json", [{"subgraph": 1, "index": 0, "op": "ABS", "added_err": 0.1}])
    out = tmp_path / "nd.json"
    rc, _, _ = cli(capsys, "view", model, "--profile", profile, "--errors", errors, "--node-data", out)
    assert rc == 0
    time = json.loads((tmp_path / "nd.time.json").read_text())
    err = json.loads((tmp_path / "nd.error.json").read_text())
    assert sorted(time) == ["serve", "subgraph_1"] and time["subgraph_1"]["results"]["0"]["value"] == 2.0
    assert list(err) == ["subgraph_1"] and err["subgraph_1"]["results"]["0"]["value"] == 0.1
    assert not out.exists()


# ---- DOT

_NODE = re.compile(r"^\s+(s\d+_\w+) \[(.*)\];$")
_EDGE = re.compile(r"^\s+(s\d+_\w+) -> (s\d+_\w+) \[(.*)\];$")


def parse_dot(text: str) -> tuple[dict[int, set[str]], list[tuple[str, str, str]]]:
    """Nodes per cluster and all edges of our DOT output (one statement per line)."""
    clusters: dict[int, set[str]] = {}
    current = None
    edges = []
    for line in text.splitlines():
        if m := re.match(r"^\s+subgraph cluster_(\d+) \{$", line):
            current = clusters.setdefault(int(m.group(1)), set())
        elif line == "  }":
            current = None
        elif m := _EDGE.match(line):
            edges.append(m.groups())
        elif m := _NODE.match(line):
            assert current is not None, line
            current.add(m.group(1))
    assert text.startswith("digraph model {") and text.rstrip().endswith("}")
    return clusters, edges


def test_dot_has_clusters_and_dashed_calls(tmp_path, capsys):
    dot = tmp_path / "m.dot"
    rc, _, _ = cli(capsys, "view", EXAMPLE, "--dot", dot)
    assert rc == 0 and not (tmp_path / "while_if.html").exists()
    clusters, edges = parse_dot(dot.read_text())
    assert clusters == {0: {"s0_i0", "s0_i1", "s0_o0", "s0_r0", "s0_r1"},
                        1: {"s1_i0", "s1_i1", "s1_i2", "s1_o0", "s1_r0"},
                        2: {"s2_i0", "s2_i1", "s2_i2", "s2_o0", "s2_o1", "s2_o2", "s2_r0", "s2_r1", "s2_r2"},
                        3: {"s3_i0", "s3_o0", "s3_r0"}, 4: {"s4_i0", "s4_o0", "s4_r0"}}
    calls = [(a, b, attrs) for a, b, attrs in edges if "dashed" in attrs]
    plain = [e for e in edges if "dashed" not in e[2]]
    assert len(plain) == 4 + 3 + 7 + 2 + 2
    assert sorted((a, re.search(r"lhead=cluster_(\d)", attrs).group(1), re.search(r'label="(\w+)"', attrs).group(1))
                  for a, _, attrs in calls) == [("s0_o0", "1", "cond"), ("s0_o0", "2", "body"),
                                                 ("s2_o1", "3", "then"), ("s2_o1", "4", "else")]
    for a, b, attrs in calls:  # each call points into the cluster it names
        assert b in clusters[int(re.search(r"lhead=cluster_(\d)", attrs).group(1))]
    if shutil.which("dot"):
        proc = subprocess.run(["dot", "-Tsvg", str(dot)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.count('class="cluster"') == 5


def test_dot_escapes_names_and_shows_constants(tmp_path, capsys):
    mb = ModelBuilder()
    sg = mb.subgraph('say "hi"\\')
    x, y = sg.tensor('in "x"\\n', [2], np.float32), sg.tensor("y", [2], np.float32)
    sg.op("MUL", [x, sg.const("k", np.ones(2, np.float32))], [y], fused_activation_function=0)
    sg.inputs, sg.outputs = [x], [y]
    model, dot = tmp_path / "q.tflite", tmp_path / "q.dot"
    model.write_bytes(mb.to_bytes("tflite"))
    assert cli(capsys, "view", model, "--dot", dot, "--show-constants")[0] == 0
    text = dot.read_text()
    clusters, edges = parse_dot(text)
    assert clusters == {0: {"s0_i0", "s0_o0", "s0_r0", "s0_c2"}} and len(edges) == 3
    assert 'label="in \\"x\\"\\\\n"' in text and 'label="subgraph 0: say \\"hi\\"\\\\"' in text
    if shutil.which("dot"):
        proc = subprocess.run(["dot", "-Tsvg", str(dot)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr


# ---- a real model

def _expected_counts(sg) -> tuple[tuple[int, int], tuple[int, int]]:
    """(nodes, edges) with constants drawn, and folded: a formula of its own over the IR. Folded away:
    constant tensors and the ops whose every input is constant or comes from such an op."""
    produced = {t: ("i", k) for k, t in reversed(list(enumerate(sg.inputs)))}
    for op in sg.operations:
        for t in op.outputs:
            produced.setdefault(t, ("o", op.index))
    consumers = [(("o", op.index), op.inputs) for op in sg.operations] + \
                [(("r", k), (t,)) for k, t in enumerate(sg.outputs)]
    edges = {(produced.get(t, ("c", t)), dst, t) for dst, ts in consumers for t in ts if t >= 0}
    nodes = {("i", k) for k in range(len(sg.inputs))} | {dst for dst, _ in consumers} | {e[0] for e in edges}
    constant = {t.index for t in sg.tensors if t.data is not None}
    hidden = set()
    for op in sg.operations:
        ins = [t for t in op.inputs if t >= 0]
        if ins and all(t in constant for t in ins) and not set(op.outputs) & set(sg.outputs):
            hidden.add(("o", op.index))
            constant.update(op.outputs)
    hidden |= {n for n in nodes if n[0] == "c"}
    folded_edges = {e for e in edges if e[0] not in hidden and e[1] not in hidden}
    return (len(nodes), len(edges)), (len(nodes - hidden), len(folded_edges))


def _mediapipe_model(stem: str) -> Path:
    from models.conftest import mediapipe_model_paths
    return mediapipe_model_paths()[stem]


def test_mediapipe_pose_landmark_page(browser, tmp_path, capsys):
    model = _mediapipe_model("pose_landmark_full")
    page = tmp_path / "pose.html"
    assert cli(capsys, "view", model, "-o", page)[0] == 0
    (drawn_all, drawn_folded) = _expected_counts(load_model(model).main)
    assert drawn_all[0] > 500 and drawn_folded[0] < drawn_all[0] - 300  # 192 DEQUANTIZE of weights fold
    status, _ = render(browser, page, tmp_path)
    assert_clean(status)
    assert (int(status["data-nodes"]), int(status["data-edges"])) == drawn_folded
    status, _ = render(browser, page, tmp_path, "consts=1&search=%2312")  # op #12, centred
    assert_clean(status)
    assert (int(status["data-nodes"]), int(status["data-edges"])) == drawn_all
    assert status["data-selected"] == "o12"
    screenshot(browser, page, tmp_path, tmp_path / "pose.png", "select=o12")


# ---- bad input

def test_bad_overlay_files(tmp_path, capsys):
    def write(name, text):
        path = tmp_path / name
        path.write_text(text)
        return path
    cases = {
        write("notjson.json", "{oops"): "--profile {}: not JSON",
        write("noops.json", json.dumps({"latency_ms": {}})): '--profile {}: no "ops" list',
        write("badrow.json", json.dumps({"ops": [{"index": 0}]})): 'row 0 is not an object with integer',
        write("wrongop.json", json.dumps({"ops": [{"subgraph": 0, "index": 0, "op": "CONV_2D", "avg_ms": 1}]})):
            "calls subgraph 0 op 0 CONV_2D, but the model has WHILE there",
        write("text.json", json.dumps({"ops": [{"subgraph": 0, "index": 0, "op": "WHILE", "avg_ms": "fast"}]})):
            "avg_ms is 'fast', not a number",
        tmp_path / "missing.json": "--profile {}: file not found",
    }
    for path, message in cases.items():
        line = one_line_error(capsys, "view", EXAMPLE, "-o", tmp_path / "x.html", "--profile", path)
        assert message.format(path) in line, line
    line = one_line_error(capsys, "view", EXAMPLE, "-o", tmp_path / "x.html", "--errors", tmp_path / "noops.json")
    assert "--errors" in line and "compare" in line


def test_rows_for_ops_the_model_lacks_are_counted_and_ignored(tmp_path, capsys):
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"ops": [
        {"subgraph": 0, "index": 0, "op": "WHILE", "avg_ms": 1.0},
        {"subgraph": 0, "index": 7, "op": "ADD", "avg_ms": 1.0},
        {"subgraph": 9, "index": 0, "op": "ADD", "avg_ms": 1.0}]}))
    rc, out, err = cli(capsys, "view", EXAMPLE, "-o", tmp_path / "x.html", "--profile", report)
    assert rc == 0 and "overlays time" in out
    assert err.strip() == (f"onert-py: warning: --profile {report}: 2 row(s) name ops this model does not "
                           "have; ignored")


def test_bad_model_and_output(tmp_path, capsys):
    assert "model file not found" in one_line_error(capsys, "view", tmp_path / "nope.tflite")
    truncated = tmp_path / "truncated.tflite"
    truncated.write_bytes(EXAMPLE.read_bytes()[:200])
    one_line_error(capsys, "view", truncated, "-o", tmp_path / "t.html")
    assert not (tmp_path / "t.html").exists()
    line = one_line_error(capsys, "view", EXAMPLE, "-o", tmp_path / "no" / "dir" / "x.html")
    assert "cannot write the page" in line and "x.html" in line
    line = one_line_error(capsys, "view", EXAMPLE, "--dot", tmp_path)  # a directory
    assert "cannot write the DOT file" in line
    copy = tmp_path / "m.tflite"
    copy.write_bytes(EXAMPLE.read_bytes())
    assert "is the model itself" in one_line_error(capsys, "view", copy, "-o", copy)
    assert copy.read_bytes() == EXAMPLE.read_bytes()
    assert "--node-data writes the overlays" in one_line_error(capsys, "view", EXAMPLE, "--node-data",
                                                                tmp_path / "nd.json")


def test_default_output_and_offline_page(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, _ = cli(capsys, "view", EXAMPLE)
    assert rc == 0 and out.startswith("wrote while_if.html (5 subgraph(s), 7 ops")
    text = (tmp_path / "while_if.html").read_text(encoding="utf-8")
    # one file: nothing loaded from elsewhere, and a policy that forbids any fetch
    assert not re.search(r"<(link|img|iframe)\b|<script[^>]*\bsrc=|@import|url\((?!#)", text)
    assert "default-src 'none'" in text
    assert "sourceMappingURL" not in text
    assert "var dagre=" in text  # dagre's bundle, inlined


# ---- the lowered graph (`view --lowered`)
#
# What must be drawn is counted from the lowering itself (compiler/lowering.lower, which `inspect
# --lowered` prints), never from the view's data: a node per lowered node plus one per model output; an
# edge per input and control of each node plus one per output; one back-edge per NextIteration (it feeds
# its loop's Merge). examples/while_if.tflite, counted by hand from `onert-py inspect --lowered`: 28
# nodes (Switch 5, Merge 4, Enter 4, Exit 3, NextIteration 3: 19 primitives) + 2 outputs; 34 inputs,
# 1 control (Source -> Const i0), 2 outputs: 37 edges; one frame, while_0_0.


def _nested_loop_file(tmp_path: Path) -> Path:
    """tests/dataflow's nested-loop model (a WHILE in a WHILE's body, an IF beside it) as a file."""
    import importlib.util
    source = Path(__file__).resolve().parents[1] / "dataflow" / "dataflow_models.py"
    spec = importlib.util.spec_from_file_location("_view_dataflow_models", source)
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)
    path = tmp_path / "nested.tflite"
    path.write_bytes(models.nested_loop_model().to_bytes("tflite"))
    return path


def _constant_heavy_loop_file(tmp_path: Path) -> Path:
    """WHILE i < 3: i + 1, and x + c0 + ... + c5 with each ck = ADD(ak, bk) of two constants. An op on
    constants only runs once per iteration through a control edge from the body's pivot: 6 of them, more
    than cmd_view.STUB_FANOUT, so they are drawn as stubs."""
    mb = ModelBuilder()
    main, cond, body = mb.subgraph("main"), mb.subgraph("cond"), mb.subgraph("body")
    ins = [main.tensor("i", [1], np.int32), main.tensor("x", [2], np.float32)]
    outs = [main.tensor("i_out", [1], np.int32), main.tensor("x_out", [2], np.float32)]
    ci, cx = cond.tensor("i", [1], np.int32), cond.tensor("x", [2], np.float32)
    go = cond.tensor("go", [1], np.bool_)
    cond.op("LESS", [ci, cond.const("n", np.array([3], np.int32))], [go])
    cond.inputs, cond.outputs = [ci, cx], [go]
    bi, bx = body.tensor("i", [1], np.int32), body.tensor("x", [2], np.float32)
    i1 = body.tensor("i1", [1], np.int32)
    body.op("ADD", [bi, body.const("one", np.array([1], np.int32))], [i1], fused_activation_function=0)
    acc = bx
    for k in range(6):
        c, nxt = body.tensor(f"c{k}", [2], np.float32), body.tensor(f"x{k}", [2], np.float32)
        body.op("ADD", [body.const(f"a{k}", np.full(2, k, np.float32)), body.const(f"b{k}", np.ones(2, np.float32))],
                [c], fused_activation_function=0)
        body.op("ADD", [acc, c], [nxt], fused_activation_function=0)
        acc = nxt
    body.inputs, body.outputs = [bi, bx], [i1, acc]
    main.op("WHILE", ins, outs, cond_subgraph_index=1, body_subgraph_index=2)
    main.inputs, main.outputs = ins, outs
    path = tmp_path / "constant_heavy.tflite"
    path.write_bytes(mb.to_bytes("tflite"))
    return path


def _lowered_counts(path: Path) -> dict[str, int]:
    g = lower(load_model(path))
    return {"nodes": len(g.nodes) + len(g.outputs),
            "edges": sum(len(n.inputs) + len(n.controls) for n in g.nodes) + len(g.outputs),
            "frames": len(g.frames), "primitives": sum(n.kind in PRIMITIVES for n in g.nodes),
            "back-edges": sum(n.kind == "NextIteration" for n in g.nodes),
            "control-edges": sum(len(n.controls) + sum(p < 0 for _, p in n.inputs) for n in g.nodes)}


def _expected_stubs(g) -> int:
    """Control edges (controls, and completions used as inputs) out of nodes with more than
    cmd_view.STUB_FANOUT of them."""
    out: dict[int, int] = {}
    for n in g.nodes:
        for s, p in n.inputs:
            if p < 0:
                out[s] = out.get(s, 0) + 1
        for s, _ in n.controls:
            out[s] = out.get(s, 0) + 1
    return sum(k for k in out.values() if k > cmd_view.STUB_FANOUT)


def _drawn(status: dict[str, str]) -> dict[str, int]:
    return {k: int(status[f"data-{k}"]) for k in ("nodes", "edges", "frames", "primitives", "back-edges",
                                                   "control-edges")}


def test_lowered_page_of_while_if(browser, tmp_path, capsys):
    page = tmp_path / "lowered.html"
    rc, out, _ = cli(capsys, "view", EXAMPLE, "--lowered", "-o", page)
    assert rc == 0 and "lowered subgraph 0: 28 nodes, 1 frame(s)" in out
    status, dom = render(browser, page, tmp_path)
    assert_clean(status)
    assert status["data-lowered"] == "1"
    expected = {"nodes": 30, "edges": 37, "frames": 1, "primitives": 19, "back-edges": 3, "control-edges": 1}
    assert _lowered_counts(EXAMPLE) == expected
    assert _drawn(status) == expected
    legend = status["data-legend"].split()
    assert all(k in legend for k in PRIMITIVES) and "control" in legend and "back-edge" in legend
    assert "while_0_0 (WHILE [0:0])" in dom
    # both LESS ops (cond's and body's), found by type; an op by [subgraph:op]; a node by %id
    status, dom = render(browser, page, tmp_path, "search=LESS")
    assert (status["data-matches"], status["data-selected"]) == ("2", "n11")
    assert "1: cond" in dom and "subgraph 0 operator 0 (WHILE)" in dom   # its panel: subgraph, where
    status, _ = render(browser, page, tmp_path, "search=2:2")
    assert (status["data-matches"], status["data-selected"]) == ("1", "n21")
    status, dom = render(browser, page, tmp_path, "select=n8")
    assert_clean(status)
    assert "frame constant" in dom and "yes (every iteration)" in dom
    screenshot(browser, page, tmp_path, tmp_path / "lowered.png")


def test_lowered_page_of_a_nested_loop(browser, tmp_path, capsys):
    model = _nested_loop_file(tmp_path)
    page = tmp_path / "nested.html"
    assert cli(capsys, "view", model, "--lowered", "-o", page)[0] == 0
    expected = _lowered_counts(model)
    assert expected["frames"] == 2 and expected["back-edges"] == 6   # 3 loop values + control per loop
    status, dom = render(browser, page, tmp_path)
    assert_clean(status)
    assert _drawn(status) == expected
    assert "while_0_0 (WHILE [0:0])" in dom and "while_0_0/while_2_0 (WHILE [2:0])" in dom
    assert status["data-stubs"] == "0"


def test_lowered_page_draws_a_wide_fanout_as_stubs(browser, tmp_path, capsys):
    model = _constant_heavy_loop_file(tmp_path)
    page = tmp_path / "heavy.html"
    assert cli(capsys, "view", model, "--lowered", "-o", page)[0] == 0
    g = lower(load_model(model))
    assert _expected_stubs(g) >= 6
    status, dom = render(browser, page, tmp_path)
    assert_clean(status)
    assert _drawn(status) == _lowered_counts(model)     # stubs are edges, their references no nodes
    assert int(status["data-stubs"]) == _expected_stubs(g)
    assert "^%" in dom and "Switch" in dom


# DOT shapes the five primitives are drawn with (LOWERED_STYLES): each its own, none a box
_PRIMITIVE_SHAPES = {"Switch": "diamond", "Merge": "invtrapezium", "Enter": "house", "Exit": "invhouse",
                     "NextIteration": "octagon"}


def _lowered_dot(text: str) -> tuple[dict[str, list[str]], dict[str, str], list[tuple[str, str, str]]]:
    """Our lowered DOT: each node's chain of frame clusters (outermost first), each node's attributes,
    and every edge (legend nodes left out). A stub's reference node p<k> ("^%id ...") stands for node
    n<id> as an edge's source."""
    stack: list[str] = []
    where: dict[str, list[str]] = {}
    attrs: dict[str, str] = {}
    edges = []
    for line in text.splitlines():
        s = line.strip()
        if m := re.match(r"^subgraph (cluster_\w+) \{$", s):
            stack.append(m.group(1))
        elif s == "}" and stack:
            stack.pop()
        elif m := re.match(r"^([nrp]\d+) -> ([nr]\d+)(?: \[(.*)\])?;$", s):
            edges.append((m.group(1), m.group(2), m.group(3) or ""))
        elif m := re.match(r"^([nrp]\d+) \[(.*)\];$", s):
            where[m.group(1)] = list(stack)
            attrs[m.group(1)] = m.group(2)
    stub_source = {p: "n" + re.match(r'label="\^%(\d+):', attrs[p]).group(1) for p in attrs if p[0] == "p"}
    edges = [(stub_source.get(a, a), b, at + (f", stub={a}" if a in stub_source else "")) for a, b, at in edges]
    assert text.startswith("digraph lowered {") and text.rstrip().endswith("}") and not stack
    return where, attrs, edges


@pytest.mark.parametrize("which", ["while_if", "nested", "constant_heavy"])
def test_lowered_dot_nests_frames_and_draws_the_primitives(tmp_path, capsys, which, graphviz_dot):
    model = {"while_if": lambda _: EXAMPLE, "nested": _nested_loop_file,
             "constant_heavy": _constant_heavy_loop_file}[which](tmp_path)
    dot = tmp_path / "lowered.dot"
    rc, _, _ = cli(capsys, "view", model, "--lowered", "--dot", dot)
    assert rc == 0 and not list(tmp_path.glob("*.html"))
    text = dot.read_text()
    where, attrs, edges = _lowered_dot(text)
    g = lower(load_model(model))
    # one cluster per frame, nested as the frames are, every node inside its own frame's
    cluster = {}
    for m in re.finditer(r"subgraph (cluster_f\d+) \{\n\s*label=\"([^\"]*) \(WHILE", text):
        cluster[m.group(2)] = m.group(1)
    assert sorted(cluster) == sorted(g.frames)

    def chain(frame: str) -> list[str]:
        out = []
        while frame:
            out.insert(0, cluster[frame])
            frame = g.frames[frame].parent or ""
        return out
    assert {k: v for k, v in where.items() if k[0] != "p"} == \
        {**{f"n{n.id}": chain(n.frame) for n in g.nodes}, **{f"r{k}": [] for k in range(len(g.outputs))}}
    for n in g.nodes:
        if n.kind in PRIMITIVES:
            assert f"shape={_PRIMITIVE_SHAPES[n.kind]}," in attrs[f"n{n.id}"]
        elif n.kind == "Op":
            assert f"[{n.sg}:{n.op}]" in attrs[f"n{n.id}"] and "shape=box" in attrs[f"n{n.id}"]
    # control edges (a node's controls, and completions: port -1) dashed, NextIteration -> Merge back-edges
    # out of the ranking, as the lowering has them
    kinds = {f"n{n.id}": n.kind for n in g.nodes}
    dashed = sorted((a, b) for a, b, at in edges if "style=dashed" in at)
    assert dashed == sorted([(f"n{s}", f"n{n.id}") for n in g.nodes for s, _ in n.controls] +
                            [(f"n{s}", f"n{n.id}") for n in g.nodes for s, p in n.inputs if p < 0])
    assert dashed
    back = [(a, b) for a, b, at in edges if "constraint=false" in at]
    assert len(back) == sum(n.kind == "NextIteration" for n in g.nodes)
    assert all(kinds[a] == "NextIteration" and kinds[b] == "Merge" for a, b in back)
    assert len(edges) == sum(len(n.inputs) + len(n.controls) for n in g.nodes) + len(g.outputs)
    # a node with many control edges out has them drawn from references next to their targets
    stubs = [(a, b, at) for a, b, at in edges if "stub=" in at]
    assert len(stubs) == _expected_stubs(g)
    for a, b, at in stubs:
        assert where[re.search(r"stub=(p\d+)", at).group(1)] == where[b]
    assert (which == "constant_heavy") == bool(stubs)
    # Graphviz reads it: a cluster per frame plus the legend, every node, the legend's primitives
    proc = subprocess.run([graphviz_dot, "-Tsvg", str(dot)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    svg = proc.stdout
    assert svg.count('class="cluster"') == len(g.frames) + 1
    assert sorted(re.findall(r"<title>(cluster_f\d+)</title>", svg)) == sorted(cluster.values())
    assert len(re.findall(r"<title>[nr]\d+</title>", svg)) == len(g.nodes) + len(g.outputs)
    for k in PRIMITIVES:
        assert f"<title>legend_{k}</title>" in svg


def test_lowered_overlay_colours_op_nodes_by_subgraph_and_op(browser, tmp_path, capsys):
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"ops": [
        {"subgraph": 0, "index": 0, "op": "WHILE", "avg_ms": 2.0},   # lowered away: no node to colour
        {"subgraph": 2, "index": 2, "op": "ADD", "avg_ms": 0.5}]}))
    page, dot = tmp_path / "p.html", tmp_path / "p.dot"
    assert cli(capsys, "view", EXAMPLE, "--lowered", "-o", page, "--dot", dot, "--profile", report)[0] == 0
    _, attrs, _ = _lowered_dot(dot.read_text())
    fills = {n: re.search(r'fillcolor="(#[0-9a-f]{6})"', a).group(1) for n, a in attrs.items() if "tooltip" in a}
    g = lower(load_model(EXAMPLE))
    add = next(f"n{n.id}" for n in g.nodes if n.kind == "Op" and (n.sg, n.op) == (2, 2))
    assert fills == {add: cmd_view.colour_at(0.25)}     # linear from 0 to the slowest row (WHILE's 2 ms)
    status, dom = render(browser, page, tmp_path, f"select={add}")
    assert_clean(status)
    assert (status["data-overlay"], status["data-colored"]) == ("time", "1")
    assert "0.5 ms" in dom


def test_lowered_options_and_subgraph(browser, tmp_path, capsys):
    line = one_line_error(capsys, "view", EXAMPLE, "--lowered", "--profile", tmp_path / "r.json",
                          "--node-data", tmp_path / "nd.json")
    assert "--node-data" in line and "--lowered" in line
    line = one_line_error(capsys, "view", EXAMPLE, "--lowered", "--subgraph", "9", "-o", tmp_path / "x.html")
    assert "--subgraph 9: the model has no subgraph 9 (it has 0..4)" in line
    # a callee lowered on its own (body: LESS, IF -> MUL / ADD, ADD; no frame), as inspect --lowered does
    dot = tmp_path / "body.dot"
    rc, out, _ = cli(capsys, "view", EXAMPLE, "--lowered", "--subgraph", "2", "--dot", dot)
    assert rc == 0 and "lowered subgraph 2:" in out and "0 frame(s)" in out
    assert "cluster_f" not in dot.read_text()
    # without --lowered, --subgraph is where the page opens
    page = tmp_path / "open2.html"
    assert cli(capsys, "view", EXAMPLE, "--subgraph", "2", "-o", page)[0] == 0
    status, _ = render(browser, page, tmp_path)
    assert_clean(status)
    assert (status["data-subgraph"], status["data-nodes"], status["data-edges"]) == ("2", "9", "7")


def test_lowered_mediapipe_pose_landmark(browser, graphviz_dot, tmp_path, capsys):
    """No control flow, but 192 DEQUANTIZE of weights, each under a control edge from Source: drawn as
    stubs, the page lays it out in well under a second and Graphviz in one (both took minutes with
    the edges spanning the graph)."""
    model = _mediapipe_model("pose_landmark_full")
    page, dot = tmp_path / "pose_lowered.html", tmp_path / "pose_lowered.dot"
    assert cli(capsys, "view", model, "--lowered", "-o", page, "--dot", dot)[0] == 0
    g = lower(load_model(model))
    assert _expected_stubs(g) >= 192
    status, _ = render(browser, page, tmp_path)
    assert_clean(status)
    assert _drawn(status) == _lowered_counts(model) and int(status["data-stubs"]) == _expected_stubs(g)
    proc = subprocess.run([graphviz_dot, "-Tsvg", str(dot)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert len(re.findall(r"<title>[nr]\d+</title>", proc.stdout)) == len(g.nodes) + len(g.outputs)
