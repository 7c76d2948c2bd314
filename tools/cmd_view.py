"""`onert-py view`: a picture of the graph.

One self-contained HTML page (works offline, no server): every subgraph, ops with their options and
tensors, control-flow ops linked to the subgraphs they call, constants folded away unless asked for.
The layout is dagre's (bundled in tools/view/ with its licence), drawn as SVG by tools/view/view.js.
Overlays read the per-op rows of `bench --report` (time) and `compare --report` (added error) and
colour the ops; the same graph can be written as Graphviz DOT and the overlays as Model Explorer
node data.

This module turns the loader's IR into plain data (build_view), which the page, the DOT writer and
the node-data writer all draw from. With --lowered it draws the dataflow executor's lowered graph
(compiler/lowering.py) instead, from plain data built the same way (build_lowered_view): one graph,
WHILE frames as nested groups, the five control-flow primitives in shapes of their own.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from onert_py.ir import Model, Subgraph
from onert_py.ir.lowered import PRIMITIVES, LoweredGraph
from onert_py.tools.cmd_inspect import assign_backends, labelled_calls, operator_details, tensor_details
from onert_py.tools.custom_ops import load_custom_ops
from onert_py.tools.errors import CliError
from onert_py.tools.formatting import dtype_of, shape_of
from onert_py.tools.options import add_backend_options, add_custom_ops_option, backend_choice, read_model

# Overlay colours, from "cheap / exact" to "hot / wrong": white, amber, orange, dark red. The page, the
# DOT file and the node data all take the colours computed here, so they agree.
COLOUR_STOPS = ("#ffffff", "#fde68a", "#f97316", "#991b1b")
NO_DATA_COLOUR = "#e5e7eb"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("view", help="draw the graph: one offline HTML page, Graphviz DOT, overlays",
                       description="Draw a model's graph as one self-contained HTML page that works "
                                   "offline: every subgraph, ops with their options, tensors with names, "
                                   "shapes, dtypes and quantization, control-flow ops linked to the "
                                   "subgraphs they call; search, zoom and pan. --profile and --errors "
                                   "colour ops by time (bench --report) or by the error they add "
                                   "(compare --report). --lowered draws the dataflow executor's lowered "
                                   "graph of one subgraph instead.")
    p.add_argument("model", help=".tflite / .circle file or nnpackage directory")
    p.add_argument("-o", "--output", metavar="OUT.html",
                   help="the HTML page to write (default: MODEL's name with .html in the current "
                        "directory, unless only --dot / --node-data are asked for)")
    p.add_argument("--profile", metavar="R.json",
                   help="colour ops by time: the per-op rows ('ops', avg_ms) of `onert-py bench "
                        "--profile --report R.json`")
    p.add_argument("--errors", metavar="D.json",
                   help="colour ops by the error they add: the per-op rows ('ops', added_err) of "
                        "`onert-py compare --report D.json`")
    p.add_argument("--dot", metavar="OUT.dot",
                   help="also write Graphviz DOT: one cluster per subgraph (with --lowered: one nested "
                        "cluster per WHILE frame), control-flow calls dashed, "
                        "the overlay's colours (--profile's, else --errors') as fillcolor (render with "
                        "`dot -Tsvg OUT.dot`)")
    p.add_argument("--node-data", metavar="OUT.json",
                   help="also write the overlay in Model Explorer's node-data JSON (graph ids and node "
                        "ids as its TFLite adapter gives them); with both overlays, two files "
                        "OUT.time.json and OUT.error.json")
    p.add_argument("--show-constants", action="store_true",
                   help="draw constant tensors, and ops computing only from constants (DEQUANTIZE of "
                        "fp16 weights), as nodes (the page has a toggle; default: folded into the ops "
                        "that read them, as the compiler folds them)")
    p.add_argument("--lowered", action="store_true",
                   help="draw the dataflow executor's lowered graph instead (docs/dataflow.md): control flow "
                        "inlined as Switch/Merge/Enter/Exit/NextIteration (each its own shape and colour, "
                        "see the legend), WHILE loops as nested frames, NextIteration back-edges in red, "
                        "control edges (control inputs, completions) dashed, ops as 'TYPE [subgraph:op]'. --profile / "
                        "--errors colour the Op nodes by their (subgraph, op) row (an op inlined twice "
                        "shows its one row twice); --node-data is refused (Model Explorer draws the "
                        "model's own graph); constants are always drawn (Const nodes)")
    p.add_argument("--subgraph", type=int, metavar="N",
                   help="with --lowered: lower subgraph N (a signature's entry; default 0), as `inspect "
                        "--lowered --subgraph N`; without it: the subgraph the page opens on")
    add_custom_ops_option(p)
    add_backend_options(p, threads=False)
    p.set_defaults(func=view_cmd)


# ---- the model as plain data

def shape_text(t: dict[str, Any]) -> str:
    """An edge label: the shape (dims joined by ×, 'scalar' for rank 0), with the dtype unless float32."""
    shape = "×".join(str(d) for d in t["shape"]) if t["shape"] else "scalar"
    return shape if t["dtype"] == "float32" else f"{t['dtype']} {shape}"


def model_explorer_graph_id(model: Model, sg: Subgraph) -> str:
    """The graph id Model Explorer's TFLite flatbuffer adapter gives a subgraph: its name, else the key
    of a signature on it, else "main" for subgraph 0 and "subgraph_N" for the others
    (GetSubgraphName in model-explorer's direct_flatbuffer_to_json_graph_convert.cc)."""
    if sg.name:
        return sg.name
    for s in model.signatures:
        if s.subgraph_index == sg.index:
            if s.key:
                return s.key
            break
    return "main" if sg.index == 0 else f"subgraph_{sg.index}"


def constant_only_ops(sg: Subgraph) -> set[int]:
    """Ops that compute only from constants (DEQUANTIZE of fp16 weights, a RESHAPE of a constant...):
    the compiler folds them, and the page folds them with the constants. Not: ops without inputs,
    custom ops, ops calling subgraphs, ops producing a graph output (they stay visible), ops reading a
    variable."""
    derived = {t.index for t in sg.tensors if t.is_constant}
    outputs = set(sg.outputs)
    folded = set()
    for op in sg.operations:
        ins = [t for t in op.inputs if t >= 0]
        if (ins and all(t in derived for t in ins) and not op.is_custom and not labelled_calls(op)
                and not outputs.intersection(op.outputs)):
            folded.add(op.index)
            derived.update(t for t in op.outputs if t >= 0)
    return folded


def subgraph_graph(sg: Subgraph, tensors: list[dict[str, Any]],
                   folded_ops: set[int] = frozenset()) -> tuple[list[dict], list[dict]]:
    """Nodes and edges of one subgraph, constants included but flagged "const" (the page and DOT fold
    them unless asked to show constants): constant tensors, and the ops in folded_ops with what they read
    and write.

    Nodes: "i<k>" graph input k, "o<n>" op n, "r<k>" graph output k, "c<t>" a tensor nobody produces
    (a constant, or a variable) read by an op or returned. Edges: one per (producer, consumer, tensor),
    labelled by the tensor's shape."""
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    producer: dict[int, str] = {}
    for k, t in enumerate(sg.inputs):
        nodes.append({"id": f"i{k}", "kind": "input", "tensor": t})
        producer.setdefault(t, f"i{k}")
    for op in sg.operations:  # all producers first: an out-of-order file still links up
        for t in op.outputs:
            if t >= 0:
                producer.setdefault(t, f"o{op.index}")
    hidden = {f"o{i}" for i in folded_ops}
    const_nodes: dict[int, str] = {}
    seen: set[tuple[str, str, int]] = set()

    def link(t: int, dst: str) -> None:
        src = producer.get(t)
        if src is None:
            src = const_nodes.get(t)
            if src is None:
                src = const_nodes[t] = f"c{t}"
                nodes.append({"id": src, "kind": "const", "tensor": t, "const": True})
        if (src, dst, t) in seen:  # ADD(x, x): one edge
            return
        seen.add((src, dst, t))
        edge = {"from": src, "to": dst, "tensor": t, "label": shape_text(tensors[t])}
        if src.startswith("c") or src in hidden or dst in hidden:
            edge["const"] = True
        edges.append(edge)

    for op in sg.operations:
        node = {"id": f"o{op.index}", "kind": "op", "op": op.index}
        if op.index in folded_ops:
            node["const"] = True
        nodes.append(node)
        for t in op.inputs:
            if t >= 0:
                link(t, f"o{op.index}")
    for k, t in enumerate(sg.outputs):
        nodes.append({"id": f"r{k}", "kind": "output", "tensor": t})
        link(t, f"r{k}")
    return nodes, edges


def build_view(model: Model, assigned: dict | None = None, title: str = "") -> dict[str, Any]:
    """Everything the page draws, as JSON-ready data (overlays are added by add_overlays)."""
    subgraphs = []
    for sg in model.subgraphs:
        tensors = tensor_details(sg)
        ops = operator_details(sg, assigned)
        for op_data, op in zip(ops, sg.operations):
            for redundant in ("input_tensors", "output_tensors"):  # the page looks tensors up by index
                op_data.pop(redundant, None)
            op_data["calls"] = [{"role": role, "subgraph": s} for role, s in labelled_calls(op)
                                if 0 <= s < len(model.subgraphs)]
            op_data["custom"] = op.is_custom
        folded = constant_only_ops(sg)
        for i in folded:
            ops[i]["constant_only"] = True
        nodes, edges = subgraph_graph(sg, tensors, folded)
        subgraphs.append({"index": sg.index, "name": sg.name, "graph_id": model_explorer_graph_id(model, sg),
                          "inputs": list(sg.inputs), "outputs": list(sg.outputs), "tensors": tensors,
                          "ops": ops, "nodes": nodes, "edges": edges})
    return {"title": title, "format": model.format, "description": model.description,
            "signatures": [{"key": s.key, "subgraph": s.subgraph_index} for s in model.signatures],
            "subgraphs": subgraphs, "overlays": [], "show_constants": False}


# ---- the lowered graph (the dataflow executor's, compiler/lowering.py) as plain data

# How the lowered graph's node kinds are drawn: DOT shape and fill; the page draws the same shapes
# (view.js) in the same colours, and both show them in a legend. The five primitives each get a
# shape and colour of their own; Op nodes are white boxes as in the model view.
LOWERED_STYLES: dict[str, dict[str, str]] = {
    "Op": {"shape": "box", "fill": "#ffffff", "what": "an op of the model, run by its compiled kernel"},
    "Switch": {"shape": "diamond", "fill": "#fde68a", "what": "routes a value to its F or T side by a predicate"},
    "Merge": {"shape": "invtrapezium", "fill": "#bbf7d0", "what": "forwards the first live input"},
    "Enter": {"shape": "house", "fill": "#bfdbfe", "what": "into a loop frame"},
    "Exit": {"shape": "invhouse", "fill": "#fbcfe8", "what": "out of a loop frame"},
    "NextIteration": {"shape": "octagon", "fill": "#ddd6fe", "what": "into the loop's next iteration"},
    "Arg": {"shape": "ellipse", "fill": "#dbeafe", "what": "a model input"},
    "Const": {"shape": "note", "fill": "#f3f4f6", "what": "a constant (or variable) slot"},
    "Source": {"shape": "ellipse", "fill": "#e5e7eb", "what": "fires once as the run starts"},
    "Output": {"shape": "ellipse", "fill": "#dcfce7", "what": "a model output"},
}
BACK_EDGE_COLOUR = "#dc2626"      # NextIteration -> Merge, the loop's back-edges
CONTROL_EDGE_COLOUR = "#6b7280"   # port -1: completion (deadness), not a value
# A node with more control edges out than this (a pivot over many ops on constants: Source over every
# DEQUANTIZE of a weight) has them drawn as stubs: a small "^%id" reference just above each target,
# laid out there, instead of edges spanning the whole graph (which cost the layouts minutes).
STUB_FANOUT = 4


def _tensor_brief(sg: Subgraph, t: int) -> dict[str, Any] | None:
    if t < 0:
        return None
    tensor = sg.tensors[t]
    info = {"index": t, "name": tensor.name, "shape": shape_of(tensor), "dtype": dtype_of(tensor)}
    return {**info, "text": shape_text(info)}


def build_lowered_view(model: Model, g: LoweredGraph, assigned: dict | None = None,
                       title: str = "") -> dict[str, Any]:
    """The lowered graph as JSON-ready data for the page and the DOT writer.

    Nodes: "n<id>" per lowered node (kind, frame, the text drawn: `main` and `sub`, and what the side
    panel shows), "r<k>" per model output (kind "Output"). Edges: one per input and control of each
    node, {"from", "to", "port", "control" (port -1: a completion), "back" (NextIteration -> its loop
    Merge), "label" (F / T out of a Switch, the shape out of an Op, Arg or Const), "stub" (the text of
    a reference drawn instead of the edge's length: see STUB_FANOUT)}, then one per output.
    Frames: the WHILE loops, with their parent frame ("" = root)."""
    assigned = assigned or {}
    entry = model.subgraphs[g.subgraph]
    details: dict[int, list[dict[str, Any]]] = {}

    def ops_of(s: int) -> list[dict[str, Any]]:
        if s not in details:
            details[s] = operator_details(model.subgraphs[s], assigned)
        return details[s]

    nodes: list[dict[str, Any]] = []
    out_shape: dict[tuple[int, int], str] = {}    # (node, port) -> shape text of the value it sends
    for n in g.nodes:
        node: dict[str, Any] = {"id": f"n{n.id}", "node": n.id, "kind": n.kind, "frame": n.frame,
                                "label": n.label, "primitive": n.kind in PRIMITIVES,
                                "inputs": [list(e) for e in n.inputs], "controls": [list(e) for e in n.controls]}
        if n.kind == "Op":
            sg = model.subgraphs[n.sg]
            op = sg.operations[n.op]
            d = ops_of(n.sg)[n.op]
            node.update(main=n.label, sub=f"[{n.sg}:{n.op}]" + (" stateful" if n.stateful else ""),
                        sg=n.sg, op=n.op, subgraph_name=sg.name, stateful=n.stateful, where=n.where,
                        backend=d["backend"], version=d["version"], options=d["options"],
                        input_tensors=[_tensor_brief(sg, t) for t in op.inputs],
                        output_tensors=[_tensor_brief(sg, t) for t in op.outputs])
            for k, t in enumerate(op.outputs):
                if t >= 0:
                    out_shape[n.id, k] = _tensor_brief(sg, t)["text"]
        elif n.kind in ("Const", "Arg"):
            sg = model.subgraphs[n.sg]
            tensor = _tensor_brief(sg, n.tensor)
            what = f"Const [{n.sg}:t{n.tensor}]" if n.kind == "Const" else f"Arg {n.index}"
            node.update(main=n.label or f"t{n.tensor}", sub=f"{what} \u00b7 {tensor['text']}", sg=n.sg,
                        tensor=tensor, index=n.index)
            if n.kind == "Const":
                node["variable"] = bool(sg.tensors[n.tensor].is_variable)
            out_shape[n.id, 0] = tensor["text"]
        elif n.kind == "Source":
            node.update(main="Source", sub="run start")
        else:
            sub = n.label
            if n.kind == "Enter":
                sub = f"{n.label} \u00b7 constant" if n.is_constant else n.label
                node.update(frame_name=n.frame_name, is_constant=n.is_constant)
            elif n.kind == "Merge":
                node["loop_merge"] = n.loop_merge
            elif n.kind == "Switch":
                node.update(loop_control=n.loop_control, strict=n.strict)
            elif n.kind == "Exit":
                node["loop_control"] = n.loop_control
            node.update(main=n.kind, sub=sub)
        nodes.append(node)
    by_id = g.nodes
    edges: list[dict[str, Any]] = []
    for n in g.nodes:
        for slot, (src, port) in enumerate(n.inputs):
            label = ("F", "T")[port] if by_id[src].kind == "Switch" and port in (0, 1) else out_shape.get((src, port), "")
            edges.append({"from": f"n{src}", "to": f"n{n.id}", "port": port, "slot": slot, "control": port < 0,
                          "back": by_id[src].kind == "NextIteration" and n.kind == "Merge", "label": label})
        for src, port in n.controls:
            edges.append({"from": f"n{src}", "to": f"n{n.id}", "port": port, "slot": -1, "control": True,
                          "back": False, "label": ""})
    fanout: dict[str, int] = {}
    for e in edges:
        if e["control"]:
            fanout[e["from"]] = fanout.get(e["from"], 0) + 1
    for e in edges:
        if e["control"] and fanout[e["from"]] > STUB_FANOUT:
            source = nodes[int(e["from"][1:])]
            tail = f" {source['label']}" if source["label"] and source["label"] != source["main"] else ""
            e["stub"] = f"^%{source['node']}:{e['port'] if e['port'] >= 0 else 'ctl'} {source['main']}{tail}"
    for k, (src, port) in enumerate(g.outputs):
        t = entry.outputs[k]
        tensor = _tensor_brief(entry, t)
        nodes.append({"id": f"r{k}", "kind": "Output", "frame": "", "primitive": False, "index": k,
                      "main": tensor["name"] or f"t{t}", "sub": f"output {k} \u00b7 {tensor['text']}",
                      "tensor": tensor, "inputs": [[src, port]], "controls": []})
        edges.append({"from": f"n{src}", "to": f"r{k}", "port": port, "slot": 0, "control": False,
                      "back": False, "label": out_shape.get((src, port), "")})
    frames = [{"name": f.name, "parent": f.parent or "", "loop": list(f.loop),
               "label": f"{f.name} (WHILE [{f.loop[0]}:{f.loop[1]}])"} for f in g.frames.values()]
    return {"title": title, "format": model.format, "description": model.description, "lowered": True,
            "subgraph": g.subgraph, "subgraph_name": entry.name, "counts": g.counts(), "frames": frames,
            "nodes": nodes, "edges": edges, "styles": LOWERED_STYLES,
            "colours": {"back": BACK_EDGE_COLOUR, "control": CONTROL_EDGE_COLOUR},
            "primitives": list(PRIMITIVES), "overlays": [], "subgraphs": [], "signatures": [],
            "show_constants": True}


# ---- overlays

@dataclass
class Overlay:
    """One per-op measure read from a report: its values, the colours they map to, and what to show."""
    name: str                       # "time" / "error"
    title: str                      # legend title
    source: str                     # the file it came from
    scale: str                      # "linear" or "log"
    values: dict[tuple[int, int], float | None] = field(default_factory=dict)  # None: a row without value
    details: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    colours: dict[tuple[int, int], str] = field(default_factory=dict)
    low: float | None = None
    high: float | None = None
    ignored: int = 0                # rows naming ops the model lacks

    def text(self, value: float | None) -> str:
        if value is None:
            return "no value"
        if self.name == "time":
            return f"{value:.3g} ms"
        return f"+{value:.2e}"


# What each overlay reads: option, value key, the row keys shown in the panel, how to make the file.
_OVERLAYS = {
    "time": ("--profile", "avg_ms", "time (avg ms per run)", "linear",
             ("avg_ms", "min_ms", "max_ms", "total_ms", "count", "backend", "folded"),
             "write it with `onert-py bench MODEL --profile --report R.json`"),
    "error": ("--errors", "added_err", "error added (relative to the range)", "log",
              ("added_err", "rel_err"),
              ("write it with `onert-py compare MODEL --report D.json` (per-op rows need LiteRT's "
               "intermediates)")),
}


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def read_overlay(path: str, name: str, model: Model) -> Overlay:
    """Read the "ops" rows of a bench or compare report, checked against the model: not JSON, no "ops"
    list, a malformed row or an op of another type at a row's place is an error; rows naming ops the
    model lacks are counted (the caller warns) and left out."""
    option, key, title, scale, shown, how = _OVERLAYS[name]
    where = f"{option} {path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"{where}: file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"{where}: cannot read it ({e})") from None
    try:
        report = json.loads(text)
    except json.JSONDecodeError as e:
        raise CliError(f"{where}: not JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    rows = report.get("ops") if isinstance(report, dict) else None
    if not isinstance(rows, list):
        raise CliError(f"{where}: no \"ops\" list of per-op rows; {how}")
    overlay = Overlay(name, title, path, scale)
    for k, row in enumerate(rows):
        if not isinstance(row, dict) or not all(isinstance(row.get(f), int) and not isinstance(row.get(f), bool)
                                                for f in ("subgraph", "index")):
            raise CliError(f"{where}: \"ops\" row {k} is not an object with integer \"subgraph\" and "
                           f"\"index\"")
        s, i = row["subgraph"], row["index"]
        if not (0 <= s < len(model.subgraphs) and 0 <= i < len(model.subgraphs[s].operations)):
            overlay.ignored += 1
            continue
        op = model.subgraphs[s].operations[i]
        said = row.get("op")
        if said is not None and said not in (op.kernel_name, op.opcode):
            raise CliError(f"{where}: row {k} calls subgraph {s} op {i} {said}, but the model has "
                           f"{op.kernel_name} there; was the report written for another model?")
        value = row.get(key)
        if value is not None and not _number(value):
            raise CliError(f"{where}: row {k} ({op.kernel_name}, subgraph {s} op {i}): {key} is "
                           f"{value!r}, not a number")
        if value is not None and math.isnan(value):
            value = None
        overlay.values[s, i] = None if value is None else float(value)
        overlay.details[s, i] = {f: _plain(row[f]) for f in shown if f in row}
    _colour(overlay)
    return overlay


def colour_at(t: float) -> str:
    """The overlay colour at t in [0, 1], interpolated between COLOUR_STOPS."""
    t = min(max(t, 0.0), 1.0) * (len(COLOUR_STOPS) - 1)
    k = min(int(t), len(COLOUR_STOPS) - 2)
    a, b = (np.array([int(c[j:j + 2], 16) for j in (1, 3, 5)], float) for c in COLOUR_STOPS[k:k + 2])
    rgb = a + (b - a) * (t - k)
    return "#" + "".join(f"{round(float(v)):02x}" for v in rgb)


def _colour(overlay: Overlay) -> None:
    """Colours by value: time linearly from 0 to the slowest op; errors on a log scale (they span
    decades) from the smallest positive value to the largest, 0 drawn as the lowest colour."""
    values = [v for v in overlay.values.values() if v is not None and not math.isinf(v)]
    finite_high = max(values, default=None)
    if overlay.scale == "linear":
        low, high = (0.0 if finite_high is not None else None), finite_high
    else:
        positive = [v for v in values if v > 0]
        low, high = (min(positive), max(positive)) if positive else (None, None)
    overlay.low, overlay.high = low, high
    for place, v in overlay.values.items():
        if v is None:
            continue
        if math.isinf(v):
            t = 1.0 if v > 0 else 0.0
        elif overlay.scale == "linear":
            t = v / high if high is not None and high > 0 else 0.0
        elif v <= 0 or low is None:
            t = 0.0
        elif high == low:
            t = 1.0
        else:
            t = (math.log10(v) - math.log10(low)) / (math.log10(high) - math.log10(low))
        overlay.colours[place] = colour_at(t)


def add_overlays(data: dict[str, Any], overlays: list[Overlay]) -> None:
    """Put the overlays into the page data: per op ("S:I") its value, colour and text."""
    for ov in overlays:
        ops = {}
        for (s, i), v in ov.values.items():
            folded = v is None and ov.details[s, i].get("folded")  # bench: folded at prepare, never timed
            ops[f"{s}:{i}"] = {"value": v, "color": ov.colours.get((s, i)),
                               "text": "folded" if folded else ov.text(v), "details": ov.details[s, i]}
        data["overlays"].append({
            "name": ov.name, "title": ov.title, "source": ov.source, "scale": ov.scale,
            "low": ov.low, "high": ov.high, "stops": list(COLOUR_STOPS), "no_data": NO_DATA_COLOUR,
            "low_text": "" if ov.low is None else ov.text(ov.low),
            "high_text": "" if ov.high is None else ov.text(ov.high), "ops": ops})


# ---- writers

def _plain(x: Any) -> Any:
    """JSON-safe data: numpy scalars as Python numbers, non-finite floats as strings (JSON has none)."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if x is None or isinstance(x, (str, int, float, bool)):
        return x
    return str(x)


def script_json(data: Any) -> str:
    """JSON to embed in a <script> element: '<', '>' and '&' as \\u escapes, so no tensor name can
    close the element ("</script>") or open a comment, and the text is still JSON."""
    text = json.dumps(_plain(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                    ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def _asset(name: str) -> str:
    return resources.files("onert_py.tools.view").joinpath(name).read_text(encoding="utf-8")


def _inline_script(code: str, what: str) -> str:
    # The bundled files are ours or dagre's; a "</script" in them would end the element early.
    code = re.sub(r"^//# sourceMappingURL=.*$", "", code, flags=re.M)  # the map is not shipped
    if "</script" in code.lower():
        raise RuntimeError(f"{what} contains '</script' and cannot be inlined")
    return code


def render_html(data: dict[str, Any]) -> str:
    """The page: the template with dagre, our drawing script and the model data inlined."""
    import html
    parts = {"TITLE": html.escape(data["title"] or "model"),
             "DAGRE": _inline_script(_asset("dagre.min.js"), "dagre.min.js"),
             "VIEW_JS": _inline_script(_asset("view.js"), "view.js"),
             "MODEL_JSON": script_json(data)}
    # one pass, so nothing inserted is searched for placeholders again
    return re.sub(r"__ONERT_VIEW_([A-Z_]+)__", lambda m: parts[m.group(1)], _asset("template.html"))


def _dot_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render_dot(data: dict[str, Any], show_constants: bool = False, overlay: dict | None = None) -> str:
    """Graphviz DOT: one cluster per subgraph (nodes named s<S>_<node id>), tensors as edges labelled by
    shape, control-flow calls as dashed edges into the called subgraph's cluster, overlay colours as
    fillcolor."""
    ops_colour = (overlay or {}).get("ops", {})
    lines = ["digraph model {",
             '  graph [rankdir=TB, compound=true, fontname="Helvetica", fontsize=11];',
             ('  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica", '
              'fontsize=10];'),
             '  edge [fontname="Helvetica", fontsize=8, color="#6b7280"];']
    first_node: dict[int, str] = {}
    calls = []
    for sg in data["subgraphs"]:
        s = sg["index"]
        lines.append(f"  subgraph cluster_{s} {{")
        lines.append(f"    label={_dot_string(f'subgraph {s}: ' + (sg['name'] or sg['graph_id']))};")
        lines.append('    style="rounded"; color="#9ca3af";')
        drawn = set()
        for node in sg["nodes"]:
            if node.get("const") and not show_constants:
                continue
            nid = f"s{s}_{node['id']}"
            drawn.add(node["id"])
            first_node.setdefault(s, nid)
            if node["kind"] == "op":
                op = sg["ops"][node["op"]]
                label = f"{op['opcode']}\n#{op['index']}"
                attrs = [f"label={_dot_string(label)}"]
                row = ops_colour.get(f"{s}:{op['index']}")
                if row and row.get("color"):
                    attrs.append(f'fillcolor="{row["color"]}"')
                    attrs.append(f"tooltip={_dot_string(row['text'])}")
                for c in op["calls"]:
                    calls.append((nid, s, c["subgraph"], c["role"]))
            else:
                t = sg["tensors"][node["tensor"]]
                label = t["name"] or f"#{t['index']}"
                shape = {"input": "ellipse", "output": "ellipse", "const": "note"}[node["kind"]]
                fill = {"input": "#dbeafe", "output": "#dcfce7", "const": "#f3f4f6"}[node["kind"]]
                attrs = [f"label={_dot_string(label)}", f"shape={shape}", f'fillcolor="{fill}"']
            lines.append(f"    {nid} [{', '.join(attrs)}];")
        if not drawn:  # an empty subgraph still needs a node for calls to point at
            nid = f"s{s}_empty"
            first_node[s] = nid
            lines.append(f'    {nid} [label="(no ops)", shape=plaintext, style=""];')
        for e in sg["edges"]:
            if e["from"] in drawn and e["to"] in drawn:
                lines.append(f"    s{s}_{e['from']} -> s{s}_{e['to']} [label={_dot_string(e['label'])}];")
        lines.append("  }")
    for nid, s, target, role in calls:
        head = f", lhead=cluster_{target}" if target != s else ""  # a self-call has no outside to enter
        lines.append(f"  {nid} -> {first_node[target]} [style=dashed, color=\"#7c3aed\", "
                     f"label={_dot_string(role)}{head}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_lowered_dot(data: dict[str, Any], overlay: dict | None = None) -> str:
    """The lowered graph as Graphviz DOT: one nested cluster per frame (cluster_f<k>, inside its
    parent's), the root's nodes outside any; node kinds by LOWERED_STYLES' shapes and colours; control
    edges (control inputs, completions: port -1) dashed; NextIteration back-edges bold in BACK_EDGE_COLOUR and left out of the ranking
    (constraint=false), so a loop reads top to bottom; a stub edge from its reference node p<edge>; a
    legend cluster; overlay colours on Op nodes."""
    ops_colour = (overlay or {}).get("ops", {})
    styles = data["styles"]
    lines = ["digraph lowered {",
             '  graph [rankdir=TB, compound=true, fontname="Helvetica", fontsize=11, '
             f'label={_dot_string(_lowered_title(data))}, labelloc=t];',
             '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=8, color="#6b7280"];']
    by_frame: dict[str, list[str]] = {}
    for node in data["nodes"]:
        style = styles[node["kind"]]
        attrs = [f"label={_dot_string(node['main'] + chr(10) + node['sub'] if node.get('sub') else node['main'])}",
                 f"shape={style['shape']}", f'fillcolor="{style["fill"]}"']
        if node["kind"] != "Op":
            attrs.append('style="filled"')
        else:
            row = ops_colour.get(f"{node['sg']}:{node['op']}")
            if row and row.get("color"):
                attrs[2] = f'fillcolor="{row["color"]}"'
                attrs.append(f"tooltip={_dot_string(row['text'])}")
            if node.get("stateful"):
                attrs.append("penwidth=2")
        by_frame.setdefault(node["frame"], []).append(f"{node['id']} [{', '.join(attrs)}];")
    children: dict[str, list[dict]] = {}
    frame_of = {node["id"]: node["frame"] for node in data["nodes"]}
    for k, e in enumerate(data["edges"]):
        if e.get("stub"):   # its reference, in the target's frame, so it is laid out next to it
            by_frame.setdefault(frame_of[e["to"]], []).append(
                f"p{k} [label={_dot_string(e['stub'])}, shape=box, style=\"rounded,dashed\", fontsize=8, "
                f"color=\"{data['colours']['control']}\", height=0.2, margin=\"0.04,0.02\"];")
    for k, f in enumerate(data["frames"]):
        f = {**f, "cluster": f"cluster_f{k}"}
        children.setdefault(f["parent"], []).append(f)

    def frame_block(f: dict, depth: int) -> None:
        pad = "  " * depth
        lines.append(f"{pad}subgraph {f['cluster']} {{")
        lines.append(f"{pad}  label={_dot_string(f['label'])}; style=\"rounded,dashed\"; color=\"#7c3aed\";")
        for stmt in by_frame.get(f["name"], []):
            lines.append(f"{pad}  {stmt}")
        for child in children.get(f["name"], []):
            frame_block(child, depth + 1)
        lines.append(f"{pad}}}")

    for stmt in by_frame.get("", []):
        lines.append(f"  {stmt}")
    for f in children.get("", []):
        frame_block(f, 1)
    for k, e in enumerate(data["edges"]):
        attrs = [f"label={_dot_string(e['label'])}"] if e["label"] else []
        if e["control"]:
            attrs += ["style=dashed", f'color="{data["colours"]["control"]}"', "arrowhead=empty"]
        if e["back"]:
            attrs += [f'color="{data["colours"]["back"]}"', "penwidth=1.6", "constraint=false"]
        source = f"p{k}" if e.get("stub") else e["from"]
        lines.append(f"  {source} -> {e['to']}" + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
    # the legend: the kinds drawn, and the two special edges
    kinds = [k for k in styles if any(n["kind"] == k for n in data["nodes"])]
    lines.append("  subgraph cluster_legend {")
    lines.append('    label="legend"; style="rounded"; color="#d1d5db"; fontsize=10;')
    for k in kinds:
        s = styles[k]
        style = '"rounded,filled"' if k == "Op" else '"filled"'
        lines.append(f"    legend_{k} [label={_dot_string(k)}, shape={s['shape']}, style={style}, "
                     f"fillcolor=\"{s['fill']}\", tooltip={_dot_string(s['what'])}];")
    if len(kinds) > 1:   # one row, in LOWERED_STYLES' order
        lines.append("    { rank=same; " + " -> ".join(f"legend_{k}" for k in kinds) + " [style=invis]; }")
    lines.append('    legend_ctl_a [label="", shape=point]; legend_ctl_b [label="control", shape=plaintext, style=""];')
    lines.append('    legend_back_a [label="", shape=point]; legend_back_b [label="back-edge", shape=plaintext, style=""];')
    lines.append(f'    legend_ctl_a -> legend_ctl_b [style=dashed, color="{data["colours"]["control"]}", arrowhead=empty];')
    lines.append(f'    legend_back_a -> legend_back_b [color="{data["colours"]["back"]}", penwidth=1.6];')
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _lowered_title(data: dict[str, Any]) -> str:
    counts = data["counts"]
    name = f" {data['subgraph_name']!r}" if data["subgraph_name"] else ""
    return (f"{data['title']}: lowered subgraph {data['subgraph']}{name}, {sum(counts.values())} nodes, "
            f"{len(data['frames'])} frame(s)")


def node_data(data: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """Model Explorer node data for one overlay, keyed by graph id ({graph_id: {"results": {node_id:
    {"value", "bgColor"}}}}). Its TFLite adapter names op n of a subgraph "n" and the graph as
    model_explorer_graph_id does; our colours go in bgColor so both viewers agree."""
    out: dict[str, Any] = {}
    for sg in data["subgraphs"]:
        results = {}
        for op in sg["ops"]:
            row = overlay["ops"].get(f"{sg['index']}:{op['index']}")
            if row is None or row["value"] is None:
                continue
            value = row["value"]
            result: dict[str, Any] = {"value": value if math.isfinite(value) else str(value)}
            if row.get("color"):
                result["bgColor"] = row["color"]
            results[str(op["index"])] = result
        if results:
            out.setdefault(sg["graph_id"], {"results": {}})["results"].update(results)
    return out


def _write(path: str, text: str, what: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise CliError(f"cannot write {what} {path}: {e.strerror or e}") from None


def _node_data_paths(path: str, names: list[str]) -> list[str]:
    if len(names) == 1:
        return [path]
    p = Path(path)
    return [str(p.with_name(f"{p.stem}.{n}{p.suffix or '.json'}")) for n in names]


def view_cmd(args: argparse.Namespace) -> int:
    load_custom_ops(args.custom_ops)
    model_path = Path(args.model)
    # the page, unless only --dot / --node-data are asked for; by default named after the model, here
    html_out = args.output or (None if args.dot or args.node_data else Path(model_path.name).with_suffix(".html").name)
    if args.node_data and not (args.profile or args.errors):
        raise CliError("--node-data writes the overlays: give --profile R.json and/or --errors D.json")
    if args.lowered and args.node_data:
        raise CliError("--node-data is for Model Explorer, which draws the model's own graph, not the lowered "
                       "one: write it without --lowered")
    model = read_model(args.model)
    for out in (html_out, args.dot, args.node_data):
        if out and model_path.exists() and Path(out).resolve() == model_path.resolve():
            raise CliError(f"{out} is the model itself; choose another output file")
    if args.subgraph is not None and not 0 <= args.subgraph < len(model.subgraphs):
        raise CliError(f"--subgraph {args.subgraph}: the model has no subgraph {args.subgraph} (it has "
                       f"0..{len(model.subgraphs) - 1})")
    assigned = assign_backends(model, backend_choice(args, model))
    if args.lowered:
        from onert_py.compiler.lowering import lower
        data = build_lowered_view(model, lower(model, args.subgraph or 0), assigned, title=model_path.name)
    else:
        data = build_view(model, assigned, title=model_path.name)
        data["show_constants"] = bool(args.show_constants)
        data["start_subgraph"] = args.subgraph or 0
    overlays = []
    for name, path in (("time", args.profile), ("error", args.errors)):
        if path:
            ov = read_overlay(path, name, model)
            if ov.ignored:
                print(f"onert-py: warning: {_OVERLAYS[name][0]} {path}: {ov.ignored} row(s) name ops "
                      f"this model does not have; ignored", file=sys.stderr)
            overlays.append(ov)
    add_overlays(data, overlays)
    written = []
    if html_out:
        _write(html_out, render_html(data), "the page")
        written.append(html_out)
    if args.dot:
        overlay = data["overlays"][0] if overlays else None
        _write(args.dot, render_lowered_dot(data, overlay) if args.lowered else
               render_dot(data, args.show_constants, overlay), "the DOT file")
        written.append(args.dot)
    if args.node_data:
        paths = _node_data_paths(args.node_data, [o["name"] for o in data["overlays"]])
        for path, ov in zip(paths, data["overlays"]):
            _write(path, json.dumps(_plain(node_data(data, ov)), indent=1, allow_nan=False), "node data")
            written.append(path)
    shown = ', overlays ' + ', '.join(o.name for o in overlays) if overlays else ''
    if args.lowered:
        print(f"wrote {', '.join(written)} (lowered subgraph {data['subgraph']}: "
              f"{sum(data['counts'].values())} nodes, {len(data['frames'])} frame(s){shown})")
        return 0
    ops = sum(len(sg["ops"]) for sg in data["subgraphs"])
    print(f"wrote {', '.join(written)} ({len(data['subgraphs'])} subgraph(s), {ops} ops{shown})")
    return 0
