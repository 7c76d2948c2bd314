/* onert-py view: draws the model described by the JSON in #model-data, one subgraph at a time, laid out
   by dagre and drawn as SVG. Everything from the model is inserted as text (textContent), never as
   markup, so tensor names cannot inject anything. What was drawn, and any script error, is recorded on
   #view-status for tests (data-nodes, data-edges, data-drawn, data-errors...). */
(function () {
  "use strict";
  var SVG_NS = "http://www.w3.org/2000/svg";
  var FONT = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
  var $ = function (id) { return document.getElementById(id); };
  var status = $("view-status");
  var data = JSON.parse($("model-data").textContent);
  var svg = $("graph"), viewport = $("viewport"), panel = $("panel"), canvas = $("canvas");
  var state = {
    sg: 0, consts: !!data.show_constants, overlay: data.overlays.length ? 0 : -1, selected: null,
    history: [], matches: [], matchPos: -1, view: { x: 0, y: 0, k: 1 }, nodeEls: {}, edgeEls: []
  };
  var layouts = {};  // "subgraph:constants" -> {g, ms}; "lowered" -> the lowered graph's
  var LOW = !!data.lowered;  // `view --lowered`: one lowered graph (frames, primitives), not subgraphs
  var drawnLog = {};

  // ---- small helpers

  function el(tag, attrs) {
    var node = document.createElement(tag);
    for (var k in attrs || {}) {
      if (k === "text") { node.textContent = attrs[k]; } else if (k === "onclick") { node.onclick = attrs[k]; }
      else { node.setAttribute(k, attrs[k]); }
    }
    for (var i = 2; i < arguments.length; i++) {
      var c = arguments[i];
      if (c != null) { node.appendChild(typeof c === "string" ? document.createTextNode(c) : c); }
    }
    return node;
  }

  function sv(tag, attrs) {
    var node = document.createElementNS(SVG_NS, tag);
    for (var k in attrs || {}) { node.setAttribute(k, attrs[k]); }
    return node;
  }

  var measure = document.createElement("canvas").getContext("2d");
  function textWidth(text, size, weight) {
    measure.font = (weight || "normal") + " " + size + "px " + FONT;
    return measure.measureText(text).width;
  }

  function clip(text, n) { return text.length > n ? text.slice(0, n - 1) + "\u2026" : text; }

  function shapeText(t) { return "[" + t.shape.join(", ") + "] " + t.dtype; }

  function sgLabel(s) {
    var sg = data.subgraphs[s];
    return s + ": " + (sg.name || sg.graph_id);
  }

  function overlayRow(s, opIndex) {
    if (state.overlay < 0) { return null; }
    return data.overlays[state.overlay].ops[s + ":" + opIndex] || null;
  }

  function darkColour(hex) {
    var r = parseInt(hex.slice(1, 3), 16) / 255, g = parseInt(hex.slice(3, 5), 16) / 255,
      b = parseInt(hex.slice(5, 7), 16) / 255;
    return 0.2126 * Math.pow(r, 2.2) + 0.7152 * Math.pow(g, 2.2) + 0.0722 * Math.pow(b, 2.2) < 0.3;
  }

  // ---- what each node shows

  function nodeText(sg, n) {
    if (n.kind === "op") {
      var op = sg.ops[n.op];
      var sub = "#" + op.index;
      if (op.calls.length) {
        sub += " \u2192 " + op.calls.map(function (c) { return c.role + " " + c.subgraph; }).join(", ");
      }
      if (op.constant_only) { sub += " \u00b7 constant-only"; }
      var row = overlayRow(sg.index, op.index);
      if (row) { sub += " \u00b7 " + row.text; }
      return { main: op.opcode, sub: sub, tip: op.opcode + " #" + op.index };
    }
    var t = sg.tensors[n.tensor];
    var name = t.name || "#" + t.index;
    var where = n.kind === "input" ? "input " + n.id.slice(1) : n.kind === "output" ? "output " + n.id.slice(1)
      : (t.kind.indexOf("variable") >= 0 ? "variable" : "constant");
    return { main: clip(name, 34), sub: where + " \u00b7 " + shapeText(t), tip: name };
  }

  function nodeSize(sg, n) {
    var txt = nodeText(sg, n);
    var w = Math.max(textWidth(txt.main, 12, n.kind === "op" ? "600" : "normal"), textWidth(txt.sub, 10)) + 22;
    if (n.kind === "input" || n.kind === "output") { w += 16; }
    return { width: Math.ceil(Math.max(w, 60)), height: n.kind === "op" ? 38 : 36 };
  }

  // ---- layout (dagre), cached per subgraph and constants setting

  function layoutFor(s, consts) {
    if (LOW) { return lowLayout(); }
    var key = s + ":" + (consts ? 1 : 0);
    if (layouts[key]) { return layouts[key]; }
    var sg = data.subgraphs[s];
    var g = new dagre.graphlib.Graph({ multigraph: true });
    g.setGraph({ rankdir: "TB", nodesep: 22, ranksep: 34, edgesep: 10, marginx: 24, marginy: 24 });
    g.setDefaultEdgeLabel(function () { return {}; });
    var shown = {};
    sg.nodes.forEach(function (n) {
      if (n.const && !consts) { return; }
      shown[n.id] = true;
      var size = nodeSize(sg, n);
      g.setNode(n.id, { width: size.width, height: size.height, node: n });
    });
    sg.edges.forEach(function (e, k) {
      if (!shown[e.from] || !shown[e.to]) { return; }
      g.setEdge(e.from, e.to, { width: Math.ceil(textWidth(e.label, 10)) + 8, height: 14, labelpos: "c", edge: e },
        "e" + k);
    });
    var t0 = performance.now();
    dagre.layout(g);
    layouts[key] = { g: g, ms: Math.round(performance.now() - t0) };
    return layouts[key];
  }

  // ---- drawing

  function edgePath(points) {
    // through dagre's points, rounding the bends with quadratic curves
    var d = "M" + points[0].x + "," + points[0].y;
    for (var i = 1; i < points.length - 1; i++) {
      var p = points[i], q = points[i + 1];
      d += " Q" + p.x + "," + p.y + " " + (p.x + q.x) / 2 + "," + (p.y + q.y) / 2;
    }
    var last = points[points.length - 1];
    return d + " L" + last.x + "," + last.y;
  }

  // A node's tooltip, shape, two text lines (bold for ops; light on a dark fill, 'dy' down) and its
  // click-to-select: the same for the model's and the lowered graph's nodes.
  function labelNode(g, id, shape, txt, w, h, dy, bold, fill) {
    var title = sv("title");
    title.textContent = txt.tip;
    g.appendChild(title);
    g.appendChild(shape);
    var main = sv("text", { x: w / 2, y: h / 2 - 3 + dy, "text-anchor": "middle" });
    main.textContent = txt.main;
    if (bold) { main.setAttribute("font-weight", "600"); }
    var sub = sv("text", { x: w / 2, y: h / 2 + 11 + dy, "text-anchor": "middle", "class": "sub" });
    sub.textContent = txt.sub;
    if (fill && darkColour(fill)) { main.style.fill = "#fff"; sub.style.fill = "#f3f4f6"; }
    g.appendChild(main);
    g.appendChild(sub);
    g.addEventListener("click", function (ev) {
      if (dragMoved) { return; }
      ev.stopPropagation();
      select(id);
    });
  }

  function drawNode(sg, id, box) {
    var n = box.node, txt = nodeText(sg, n);
    var g = sv("g", { "class": "node " + n.kind, transform: "translate(" + (box.x - box.width / 2) + "," +
      (box.y - box.height / 2) + ")", "data-id": id });
    var w = box.width, h = box.height, shape;
    if (n.kind === "op") {
      var op = sg.ops[n.op];
      if (op.custom) { g.classList.add("custom"); }
      if (op.calls.length) { g.classList.add("calls"); }
      if (op.constant_only) { g.classList.add("folded"); }
      shape = sv("rect", { width: w, height: h, rx: 6, ry: 6 });
      var row = overlayRow(sg.index, op.index);
      var fill = row ? (row.color || data.overlays[state.overlay].no_data) : null;
      if (fill) { shape.style.fill = fill; g.classList.add(row.color ? "colored" : "no-value"); }
    } else if (n.kind === "const") {
      shape = sv("path", { d: "M0,0 H" + (w - 10) + " L" + w + ",10 V" + h + " H0 Z" });
    } else {
      shape = sv("ellipse", { cx: w / 2, cy: h / 2, rx: w / 2, ry: h / 2 });
    }
    labelNode(g, id, shape, txt, w, h, 0, n.kind === "op", fill);
    g.addEventListener("dblclick", function (ev) {
      ev.stopPropagation();
      if (n.kind === "op" && sg.ops[n.op].calls.length) { goToSubgraph(sg.ops[n.op].calls[0].subgraph, true); }
    });
    return g;
  }

  function draw() {
    if (LOW) { drawLowered(); return; }
    var sg = data.subgraphs[state.sg];
    var L = layoutFor(state.sg, state.consts), g = L.g;
    while (viewport.firstChild) { viewport.removeChild(viewport.firstChild); }
    var edgeLayer = sv("g", { "class": "edges" }), nodeLayer = sv("g", { "class": "nodes" });
    state.nodeEls = {};
    state.edgeEls = [];
    g.edges().forEach(function (ref) {
      var e = g.edge(ref);
      var ge = sv("g", { "class": "edge" + (e.edge.const ? " const" : "") });
      ge.appendChild(sv("path", { d: edgePath(e.points), "marker-end": "url(#arrow)" }));
      var label = sv("text", { x: e.x, y: e.y + 3, "text-anchor": "middle" });
      label.textContent = e.edge.label;
      ge.appendChild(label);
      edgeLayer.appendChild(ge);
      state.edgeEls.push({ from: ref.v, to: ref.w, el: ge });
    });
    var colored = 0;
    g.nodes().forEach(function (id) {
      var node = drawNode(sg, id, g.node(id));
      if (node.classList.contains("colored")) { colored++; }
      state.nodeEls[id] = node;
      nodeLayer.appendChild(node);
    });
    viewport.appendChild(edgeLayer);
    viewport.appendChild(nodeLayer);
    var nodes = g.nodeCount(), edges = g.edgeCount();
    drawnLog[state.sg + (state.consts ? "c" : "")] = nodes + ":" + edges;
    status.dataset.subgraph = state.sg;
    status.dataset.constants = state.consts ? "1" : "0";
    status.dataset.nodes = nodes;
    status.dataset.edges = edges;
    status.dataset.colored = colored;
    status.dataset.layoutMs = L.ms;
    status.dataset.drawn = Object.keys(drawnLog).map(function (k) { return k + "=" + drawnLog[k]; }).join(" ");
    $("message").textContent = sg.ops.length + " ops \u00b7 " + nodes + " nodes, " + edges + " edges \u00b7 layout " +
      L.ms + " ms \u00b7 wheel: zoom, drag: pan, click: details, double-click a control-flow op: open its subgraph";
    highlightMatches();
    if (state.selected && state.nodeEls[state.selected]) { markSelected(state.selected); } else { state.selected = null; }
  }

  // ---- view: zoom, pan, fit, centre

  function applyView() {
    var v = state.view;
    viewport.setAttribute("transform", "translate(" + v.x + "," + v.y + ") scale(" + v.k + ")");
  }

  function graphBox() {
    var gg = layoutFor(state.sg, state.consts).g.graph();
    return { w: Math.max(gg.width || 1, 1), h: Math.max(gg.height || 1, 1) };
  }

  function fit() {
    var W = svg.clientWidth || 800, H = svg.clientHeight || 600, b = graphBox();
    var k = Math.min(W / b.w, H / b.h, 1.5) * 0.96;
    state.view = { k: k, x: (W - b.w * k) / 2, y: (H - b.h * k) / 2 };
    applyView();
  }

  function initialView() {
    // Small graphs fit; tall ones start readable at the top (the graph inputs), as a reader starts.
    var W = svg.clientWidth || 800, H = svg.clientHeight || 600, b = graphBox();
    var k = Math.min(W / b.w, H / b.h, 1.5) * 0.96;
    if (k >= 0.5) { fit(); return; }
    k = Math.max(Math.min(1, (W / b.w) * 0.96), 0.8);
    var g = layoutFor(state.sg, state.consts).g, first = g.node(LOW ? "n0" : "i0");
    var x = b.w * k <= W ? (W - b.w * k) / 2 : (first ? W / 2 - first.x * k : 10);
    state.view = { k: k, x: x, y: 8 };
    applyView();
  }

  function centreOn(id) {
    var box = layoutFor(state.sg, state.consts).g.node(id);
    if (!box) { return; }
    var W = svg.clientWidth || 800, H = svg.clientHeight || 600;
    var k = Math.max(state.view.k, 0.9);
    state.view = { k: k, x: W / 2 - box.x * k, y: H / 2 - box.y * k };
    applyView();
  }

  svg.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var r = svg.getBoundingClientRect(), v = state.view;
    var px = ev.clientX - r.left, py = ev.clientY - r.top;
    var k = Math.min(Math.max(v.k * Math.exp(-ev.deltaY * (ev.deltaMode ? 0.05 : 0.0015)), 0.02), 4);
    state.view = { k: k, x: px - (px - v.x) * k / v.k, y: py - (py - v.y) * k / v.k };
    applyView();
  }, { passive: false });

  var drag = null, dragMoved = false;
  svg.addEventListener("pointerdown", function (ev) {
    if (ev.button !== 0) { return; }
    drag = { x: ev.clientX, y: ev.clientY, vx: state.view.x, vy: state.view.y };
    dragMoved = false;
  });
  window.addEventListener("pointermove", function (ev) {
    if (!drag) { return; }
    var dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (!dragMoved && Math.abs(dx) + Math.abs(dy) < 4) { return; }
    dragMoved = true;
    canvas.classList.add("dragging");
    state.view.x = drag.vx + dx;
    state.view.y = drag.vy + dy;
    applyView();
  });
  window.addEventListener("pointerup", function () {
    drag = null;
    canvas.classList.remove("dragging");
    setTimeout(function () { dragMoved = false; }, 0);
  });
  svg.addEventListener("click", function () { if (!dragMoved) { select(null); } });

  // ---- selection and the side panel

  function markSelected(id) {
    Object.keys(state.nodeEls).forEach(function (k) { state.nodeEls[k].classList.toggle("selected", k === id); });
    state.edgeEls.forEach(function (e) { e.el.classList.toggle("hot", e.from === id || e.to === id); });
  }

  function select(id) {
    state.selected = id;
    status.dataset.selected = id || "";
    markSelected(id);
    showPanel();
  }

  function tensorCard(sg, t, extra) {
    var info = sg.tensors[t];
    var meta = [shapeText(info)];
    if (info.quantization) { meta.push(info.quantization); }
    if (info.kind) { meta.push(info.kind); }
    if (info.bytes != null) { meta.push(info.bytes + " bytes"); }
    if (info.sparse) { meta.push("sparse"); }
    return el("div", { "class": "tensor" },
      el("div", { "class": "name", text: (info.name || "(unnamed)") + "  #" + info.index }),
      el("div", { "class": "meta", text: meta.join(" \u00b7 ") + (extra ? " \u00b7 " + extra : "") }));
  }

  // The overlays' rows for op (s, i) in the side panel: a heading per overlay, its value and details.
  function overlayRows(panel, s, i) {
    data.overlays.forEach(function (ov) {
      var r = ov.ops[s + ":" + i];
      if (!r) { return; }
      panel.appendChild(el("h3", { text: ov.title }));
      var pairs = [["value", r.text]];
      Object.keys(r.details).forEach(function (k) { pairs.push([k, r.details[k] === null ? "-" : r.details[k]]); });
      panel.appendChild(rows(pairs));
    });
  }

  function rows(pairs) {
    var table = el("table");
    pairs.forEach(function (p) {
      var value = p[1];
      var cell = el("td");
      if (value instanceof Node) { cell.appendChild(value); } else {
        cell.textContent = typeof value === "object" ? JSON.stringify(value) :
          typeof value === "number" && !Number.isInteger(value) ? String(+value.toPrecision(4)) : String(value);
      }
      table.appendChild(el("tr", {}, el("td", { text: p[0] }), cell));
    });
    return table;
  }

  function constantSource(sg, t) {
    // how tensor t is constant: "constant" (stored), "constant-only OP #n" (an op the page folds), or null
    if (sg.nodes.some(function (x) { return x.kind === "const" && x.tensor === t; })) {
      return sg.tensors[t].kind.indexOf("variable") >= 0 ? "variable" : "constant";
    }
    var producer = sg.ops.filter(function (op) { return op.outputs.indexOf(t) >= 0; })[0];
    return producer && producer.constant_only ? "from constant-only " + producer.opcode + " #" + producer.index : null;
  }

  function nodeByTensorUse(sg, t) {
    // ops reading tensor t, and the op producing it
    var readers = [], producer = null;
    sg.ops.forEach(function (op) {
      if (op.inputs.indexOf(t) >= 0) { readers.push(op); }
      if (op.outputs.indexOf(t) >= 0 && producer == null) { producer = op; }
    });
    return { readers: readers, producer: producer };
  }

  function opLink(s, op) {
    return el("button", { "class": "link", text: op.opcode + " #" + op.index, onclick: function () { goToNode(s, "o" + op.index); } });
  }

  function showPanel() {
    if (LOW) { lowPanel(); return; }
    var sg = data.subgraphs[state.sg];
    while (panel.firstChild) { panel.removeChild(panel.firstChild); }
    panel.hidden = false;
    var node = state.selected ? sg.nodes.filter(function (n) { return n.id === state.selected; })[0] : null;
    if (!node) { subgraphPanel(sg); return; }
    panel.appendChild(el("button", { "class": "close", title: "close", text: "\u00d7", onclick: function () { select(null); } }));
    if (node.kind === "op") { opPanel(sg, sg.ops[node.op]); return; }
    var t = node.tensor, info = sg.tensors[t];
    var what = node.kind === "input" ? "graph input " + node.id.slice(1) : node.kind === "output" ?
      "graph output " + node.id.slice(1) : "constant";
    panel.appendChild(el("h2", { text: info.name || "#" + t }));
    panel.appendChild(el("div", { "class": "note", text: what + " of subgraph " + sgLabel(sg.index) }));
    panel.appendChild(tensorCard(sg, t));
    var use = nodeByTensorUse(sg, t);
    if (use.producer) {
      panel.appendChild(el("h3", { text: "produced by" }));
      panel.appendChild(el("div", {}, opLink(sg.index, use.producer)));
    }
    panel.appendChild(el("h3", { text: "read by" }));
    if (!use.readers.length) { panel.appendChild(el("div", { "class": "note", text: "no op" })); }
    use.readers.forEach(function (op) { panel.appendChild(el("div", {}, opLink(sg.index, op))); });
  }

  function opPanel(sg, op) {
    panel.appendChild(el("h2", { text: op.opcode + "  #" + op.index }));
    var info = [["subgraph", sgLabel(sg.index)], ["op index", op.index], ["version", op.version]];
    var backend = op.backend;
    data.overlays.forEach(function (ov) {
      var r = ov.ops[sg.index + ":" + op.index];
      if (r && r.details && r.details.backend) { backend = r.details.backend; }
    });
    info.push(["backend", backend || "no kernel"]);
    if (op.custom) { info.push(["custom op", "yes"]); }
    panel.appendChild(rows(info));
    if (op.constant_only) {
      panel.appendChild(el("div", { "class": "note", text: "computes only from constants: folded with them " +
        "(as the compiler folds it); \u201cshow constants\u201d draws it" }));
    }
    var opts = Object.keys(op.options);
    panel.appendChild(el("h3", { text: "options" }));
    panel.appendChild(opts.length ? rows(opts.map(function (k) { return [k, op.options[k]]; }))
      : el("div", { "class": "note", text: "none" }));
    if (op.calls.length) {
      panel.appendChild(el("h3", { text: "calls" }));
      op.calls.forEach(function (c) {
        panel.appendChild(el("div", {}, c.role + ": ", el("button", {
          "class": "link", text: "subgraph " + sgLabel(c.subgraph),
          onclick: function () { goToSubgraph(c.subgraph, true); }
        })));
      });
    }
    overlayRows(panel, sg.index, op.index);
    panel.appendChild(el("h3", { text: "inputs" }));
    var folded = 0;
    op.inputs.forEach(function (t, k) {
      if (t < 0) { panel.appendChild(el("div", { "class": "note", text: k + ": (optional input omitted)" })); return; }
      var source = constantSource(sg, t);
      if (source && !state.consts) { folded++; }
      panel.appendChild(tensorCard(sg, t, source ? source + (state.consts ? "" : ", folded") : null));
    });
    if (folded && !op.constant_only) {
      panel.appendChild(el("div", { "class": "note", text: folded + " constant input" + (folded > 1 ? "s" : "") +
        " folded into this op (tick \u201cshow constants\u201d to draw them)" }));
    }
    panel.appendChild(el("h3", { text: "outputs" }));
    op.outputs.forEach(function (t) { if (t >= 0) { panel.appendChild(tensorCard(sg, t)); } });
  }

  function subgraphPanel(sg) {
    panel.appendChild(el("h2", { text: "subgraph " + sgLabel(sg.index) }));
    var sigs = data.signatures.filter(function (s) { return s.subgraph === sg.index; }).map(function (s) { return s.key; });
    var consts = sg.nodes.filter(function (n) { return n.kind === "const"; }).length;
    var constOps = sg.ops.filter(function (op) { return op.constant_only; }).length;
    panel.appendChild(rows([["model", data.title + " (" + data.format + ")"],
      ["ops", sg.ops.length + (constOps ? " (" + constOps + " constant-only" + (state.consts ? ")" : ", folded)") : "")],
      ["tensors", sg.tensors.length], ["constants", consts + (state.consts ? " (drawn)" : " (folded)")],
      ["signature", sigs.length ? sigs.join(", ") : "-"], ["Model Explorer id", sg.graph_id]]));
    var callers = [];
    data.subgraphs.forEach(function (other) {
      other.ops.forEach(function (op) {
        op.calls.forEach(function (c) { if (c.subgraph === sg.index) { callers.push([other.index, op, c.role]); } });
      });
    });
    if (callers.length) {
      panel.appendChild(el("h3", { text: "called by" }));
      callers.forEach(function (c) {
        panel.appendChild(el("div", {}, "subgraph " + sgLabel(c[0]) + " ", opLink(c[0], c[1]), " as " + c[2]));
      });
    }
    panel.appendChild(el("h3", { text: "inputs" }));
    sg.inputs.forEach(function (t) { panel.appendChild(tensorCard(sg, t)); });
    panel.appendChild(el("h3", { text: "outputs" }));
    sg.outputs.forEach(function (t) { panel.appendChild(tensorCard(sg, t)); });
    var counts = {};
    sg.ops.forEach(function (op) { counts[op.opcode] = (counts[op.opcode] || 0) + 1; });
    panel.appendChild(el("h3", { text: "op types" }));
    panel.appendChild(rows(Object.keys(counts).sort().map(function (k) { return [k, counts[k]]; })));
  }

  // ---- moving between subgraphs

  function goToSubgraph(s, remember) {
    if (s === state.sg) { return; }
    if (remember) { state.history.push({ sg: state.sg, view: state.view, selected: state.selected }); }
    state.sg = s;
    state.selected = null;
    $("subgraph").value = String(s);
    $("back").hidden = state.history.length === 0;
    draw();
    showPanel();  // first: the panel takes width from the canvas the view is fitted to
    initialView();
  }

  function goToNode(s, id) {
    if (!LOW && s !== state.sg) { goToSubgraph(s, true); }
    if (!LOW && !state.nodeEls[id] && !state.consts) {  // a folded constant-only op: draw constants to show it
      state.consts = true;
      $("constants").checked = true;
      draw();
    }
    select(id);
    centreOn(id);
  }

  $("back").addEventListener("click", function () {
    var h = state.history.pop();
    if (!h) { return; }
    state.sg = h.sg;
    $("subgraph").value = String(h.sg);
    $("back").hidden = state.history.length === 0;
    draw();
    state.view = h.view;
    applyView();
    select(h.selected);
  });

  // ---- search: op type, tensor name, op index ("12", "#12", "1:12" for subgraph 1)

  function findMatches(q) {
    q = q.trim();
    if (!q) { return []; }
    if (LOW) { return lowMatches(q); }
    var order = [state.sg].concat(data.subgraphs.map(function (sg) { return sg.index; })
      .filter(function (s) { return s !== state.sg; }));
    var out = [];
    var m = /^(?:(\d+):)?#?(\d+)$/.exec(q);
    if (m) {
      order.forEach(function (s) {
        var idx = +m[2];
        if ((m[1] == null || +m[1] === s) && idx < data.subgraphs[s].ops.length) { out.push({ sg: s, id: "o" + idx }); }
      });
      return out;
    }
    var ql = q.toLowerCase();
    function named(sg, t) { return t >= 0 && (sg.tensors[t].name || "").toLowerCase().indexOf(ql) >= 0; }
    order.forEach(function (s) {
      var sg = data.subgraphs[s];
      sg.nodes.forEach(function (n) {
        var hit;
        if (n.kind === "op") {
          var op = sg.ops[n.op];  // folded ops too: going to one draws the constants
          hit = op.opcode.toLowerCase().indexOf(ql) >= 0 || op.outputs.some(function (t) { return named(sg, t); }) ||
            op.inputs.some(function (t) { return named(sg, t); });
        } else {
          hit = (!n.const || state.consts) && named(sg, n.tensor);
        }
        if (hit) { out.push({ sg: s, id: n.id }); }
      });
    });
    return out;
  }

  function highlightMatches() {
    var here = {};
    state.matches.forEach(function (m) { if (m.sg === state.sg) { here[m.id] = true; } });
    Object.keys(state.nodeEls).forEach(function (id) { state.nodeEls[id].classList.toggle("match", !!here[id]); });
  }

  function updateSearch() {
    state.matches = findMatches($("search").value);
    state.matchPos = -1;
    status.dataset.matches = state.matches.length;
    $("search-count").textContent = $("search").value.trim() ? (state.matches.length ? state.matches.length + " found" : "none") : "";
    highlightMatches();
  }

  function nextMatch(step) {
    if (!state.matches.length) { return; }
    state.matchPos = (state.matchPos + step + state.matches.length) % state.matches.length;
    var m = state.matches[state.matchPos];
    goToNode(m.sg, m.id);
    highlightMatches();
    $("search-count").textContent = (state.matchPos + 1) + "/" + state.matches.length;
  }

  $("search").addEventListener("input", updateSearch);
  $("search").addEventListener("keydown", function (ev) {
    if (ev.key === "Enter") { ev.preventDefault(); nextMatch(ev.shiftKey ? -1 : 1); }
  });

  // ---- header controls

  function legend() {
    var box = $("legend");
    while (box.firstChild) { box.removeChild(box.firstChild); }
    box.hidden = state.overlay < 0;
    if (state.overlay < 0) { return; }
    var ov = data.overlays[state.overlay];
    var bar = el("span", { "class": "bar" });
    bar.style.background = "linear-gradient(to right, " + ov.stops.join(", ") + ")";
    var swatch = el("span", { "class": "swatch" });
    swatch.style.background = ov.no_data;
    box.appendChild(el("span", { text: ov.title + (ov.scale === "log" ? " (log scale)" : "") + ":" }));
    box.appendChild(el("span", { text: ov.low_text }));
    box.appendChild(bar);
    box.appendChild(el("span", { text: ov.high_text }));
    box.appendChild(swatch);
    box.appendChild(el("span", { text: "no value" }));
  }

  function setupControls() {
    $("title").textContent = data.title;
    $("title").title = data.title + (data.description ? " \u2014 " + data.description : "");
    if (LOW) { lowControls(); }
    var select_ = $("subgraph");
    data.subgraphs.forEach(function (sg) {
      select_.appendChild(el("option", { value: String(sg.index), text: sgLabel(sg.index) + " (" + sg.ops.length + " ops)" }));
    });
    select_.addEventListener("change", function () { goToSubgraph(+select_.value, false); });
    $("constants").checked = state.consts;
    $("constants").addEventListener("change", function () {
      state.consts = $("constants").checked;
      draw();
      showPanel();
    });
    $("fit").addEventListener("click", fit);
    if (data.overlays.length) {
      $("overlay-choice").hidden = false;
      var ovSel = $("overlay");
      ovSel.appendChild(el("option", { value: "-1", text: "nothing" }));
      data.overlays.forEach(function (ov, k) { ovSel.appendChild(el("option", { value: String(k), text: ov.title })); });
      ovSel.value = String(state.overlay);
      ovSel.addEventListener("change", function () {
        state.overlay = +ovSel.value;
        layouts = {};  // node labels carry the overlay value, so sizes change
        status.dataset.overlay = state.overlay >= 0 ? data.overlays[state.overlay].name : "";
        legend();
        draw();
      });
    }
    status.dataset.overlay = state.overlay >= 0 ? data.overlays[state.overlay].name : "";
    legend();
  }

  // ---- `view --lowered`: the dataflow executor's lowered graph (one graph; WHILE frames as nested
  // groups laid out by dagre's compound graphs; the five primitives in shapes of their own)

  var lowIndex = {}, lowConsumers = {};
  if (LOW) {
    data.nodes.forEach(function (n) { lowIndex[n.id] = n; lowConsumers[n.id] = []; });
    data.edges.forEach(function (e) { lowConsumers[e.from].push(e); });
  }

  function lowText(n) {
    var sub = n.sub || "";
    if (n.kind === "Op") {
      var row = overlayRow(n.sg, n.op);
      if (row) { sub += " \u00b7 " + row.text; }
    }
    return { main: clip(n.main, 34), sub: clip(sub, 48), tip: n.main + (n.sub ? " " + n.sub : "") };
  }

  function lowSize(n) {
    var txt = lowText(n);
    var w = Math.max(textWidth(txt.main, 12, n.kind === "Op" ? "600" : "normal"), textWidth(txt.sub, 10)) + 22;
    var h = 38;
    if (n.kind === "Switch") { w = w * 1.45 + 12; h = 46; }
    else if (n.kind === "Merge") { w += 30; }
    else if (n.kind === "Enter" || n.kind === "Exit") { w += 8; h = 44; }
    else if (n.kind === "NextIteration") { w += 18; }
    else if (n.kind !== "Op" && n.kind !== "Const") { w += 16; }
    return { width: Math.ceil(Math.max(w, 60)), height: h };
  }

  // The outline of each kind in a w x h box: [element, attributes] (the legend draws them small)
  function lowShape(kind, w, h) {
    var c = Math.min(9, w / 4, h / 4);
    switch (kind) {
      case "Op": return ["rect", { width: w, height: h, rx: 6, ry: 6 }];
      case "Switch": return ["path", { d: "M" + w / 2 + ",0 L" + w + "," + h / 2 + " L" + w / 2 + "," + h + " L0," + h / 2 + " Z" }];
      case "Merge": return ["path", { d: "M0,0 H" + w + " L" + (w - 2 * c) + "," + h + " H" + 2 * c + " Z" }];
      case "Enter": return ["path", { d: "M" + w / 2 + ",0 L" + w + "," + c + " V" + h + " H0 V" + c + " Z" }];
      case "Exit": return ["path", { d: "M0,0 H" + w + " V" + (h - c) + " L" + w / 2 + "," + h + " L0," + (h - c) + " Z" }];
      case "NextIteration": return ["path", { d: "M" + c + ",0 H" + (w - c) + " L" + w + "," + c + " V" + (h - c) + " L" +
        (w - c) + "," + h + " H" + c + " L0," + (h - c) + " V" + c + " Z" }];
      case "Const": return ["path", { d: "M0,0 H" + (w - c) + " L" + w + "," + c + " V" + h + " H0 Z" }];
      default: return ["ellipse", { cx: w / 2, cy: h / 2, rx: w / 2, ry: h / 2 }];
    }
  }

  function lowLayout() {
    if (layouts.lowered) { return layouts.lowered; }
    // compound (frames) only when there are frames: dagre lays out a flat graph ~10x faster
    var g = new dagre.graphlib.Graph({ multigraph: true, compound: data.frames.length > 0 });
    g.setGraph({ rankdir: "TB", nodesep: 18, ranksep: 30, edgesep: 8, marginx: 24, marginy: 24 });
    g.setDefaultEdgeLabel(function () { return {}; });
    data.frames.forEach(function (f) { g.setNode("frame:" + f.name, { frame: f }); });
    data.frames.forEach(function (f) { if (f.parent) { g.setParent("frame:" + f.name, "frame:" + f.parent); } });
    data.nodes.forEach(function (n) {
      var size = lowSize(n);
      g.setNode(n.id, { width: size.width, height: size.height, node: n });
      if (n.frame) { g.setParent(n.id, "frame:" + n.frame); }
    });
    data.edges.forEach(function (e, k) {
      // A back-edge is laid out from its Merge to its NextIteration (and drawn the other way), as DOT's
      // constraint=false: every cycle runs through one, so the loop body reads top to bottom.
      var label = { width: e.label ? Math.ceil(textWidth(e.label, 10)) + 8 : 0, height: e.label ? 14 : 0,
        labelpos: "c", edge: e };
      if (e.stub) {  // one of many control edges from one node: from a reference next to its target
        var ref = "p" + k;
        g.setNode(ref, { width: Math.ceil(textWidth(e.stub, 9)) + 12, height: 16, stub: e });
        if (lowIndex[e.to].frame) { g.setParent(ref, "frame:" + lowIndex[e.to].frame); }
        g.setEdge(ref, e.to, label, "e" + k);
      } else if (e.back) { g.setEdge(e.to, e.from, label, "e" + k); } else { g.setEdge(e.from, e.to, label, "e" + k); }
    });
    var t0 = performance.now();
    dagre.layout(g);
    layouts.lowered = { g: g, ms: Math.round(performance.now() - t0) };
    return layouts.lowered;
  }

  function drawLowNode(id, box) {
    var n = box.node, txt = lowText(n), w = box.width, h = box.height;
    var g = sv("g", { "class": "node low " + n.kind + (n.primitive ? " prim" : "") + (n.stateful ? " stateful" : ""),
      transform: "translate(" + (box.x - w / 2) + "," + (box.y - h / 2) + ")", "data-id": id, "data-kind": n.kind });
    var spec = lowShape(n.kind, w, h), shape = sv(spec[0], spec[1]);
    var fill = data.styles[n.kind].fill;
    if (n.kind === "Op") {
      var row = overlayRow(n.sg, n.op);
      if (row) { fill = row.color || data.overlays[state.overlay].no_data; g.classList.add(row.color ? "colored" : "no-value"); }
    }
    shape.style.fill = fill;
    var dy = n.kind === "Enter" ? 3 : n.kind === "Exit" ? -3 : 0;   // centred in the house shapes
    labelNode(g, id, shape, txt, w, h, dy, n.kind === "Op", fill);
    return g;
  }

  function drawStub(box) {
    // "^%0 Source": a control edge from a node with many, drawn from here; a click selects that node
    var e = box.stub, w = box.width, h = box.height;
    var g = sv("g", { "class": "stub", transform: "translate(" + (box.x - w / 2) + "," + (box.y - h / 2) + ")" });
    var title = sv("title");
    title.textContent = "control edge from " + lowRef(e.from, e.port);
    g.appendChild(title);
    g.appendChild(sv("rect", { width: w, height: h, rx: 8, ry: 8 }));
    var text = sv("text", { x: w / 2, y: h / 2 + 3, "text-anchor": "middle" });
    text.textContent = e.stub;
    g.appendChild(text);
    g.addEventListener("click", function (ev) {
      if (dragMoved) { return; }
      ev.stopPropagation();
      goToNode(0, e.from);
    });
    return g;
  }

  function drawLowered() {
    var L = lowLayout(), g = L.g;
    while (viewport.firstChild) { viewport.removeChild(viewport.firstChild); }
    var frameLayer = sv("g", { "class": "frames" }), edgeLayer = sv("g", { "class": "edges" }),
      nodeLayer = sv("g", { "class": "nodes" });
    state.nodeEls = {};
    state.edgeEls = [];
    var frames = 0;
    data.frames.forEach(function (f) {  // parents come first in data.frames, so children are drawn on top
      var box = g.node("frame:" + f.name);
      if (!box || box.width == null) { return; }
      frames++;
      var gf = sv("g", { "class": "frame", "data-frame": f.name });
      gf.appendChild(sv("rect", { x: box.x - box.width / 2, y: box.y - box.height / 2, width: box.width,
        height: box.height, rx: 8, ry: 8 }));
      var label = sv("text", { x: box.x - box.width / 2 + 8, y: box.y - box.height / 2 + 13 });
      label.textContent = f.label;
      gf.appendChild(label);
      frameLayer.appendChild(gf);
    });
    var back = 0, control = 0, nodes = 0, prims = 0, colored = 0;
    g.edges().forEach(function (ref) {
      var e = g.edge(ref);
      var cls = "edge" + (e.edge.control ? " control" : "") + (e.edge.back ? " back" : "");
      var ge = sv("g", { "class": cls });
      var points = e.edge.back ? e.points.slice().reverse() : e.points;
      var path = sv("path", { d: edgePath(points), "marker-end": e.edge.back ? "url(#arrow-back)" : "url(#arrow)" });
      if (e.edge.back) { path.style.stroke = data.colours.back; back++; }
      if (e.edge.control) { path.style.stroke = data.colours.control; control++; }
      ge.appendChild(path);
      if (e.edge.label) {
        var label = sv("text", { x: e.x, y: e.y + 3, "text-anchor": "middle" });
        label.textContent = e.edge.label;
        ge.appendChild(label);
      }
      edgeLayer.appendChild(ge);
      state.edgeEls.push({ from: e.edge.from, to: e.edge.to, el: ge });
    });
    var stubs = 0;
    g.nodes().forEach(function (id) {
      var box = g.node(id);
      if (box.stub) { stubs++; nodeLayer.appendChild(drawStub(box)); return; }
      if (!box.node) { return; }  // a frame
      var node = drawLowNode(id, box);
      nodes++;
      if (box.node.primitive) { prims++; }
      if (node.classList.contains("colored")) { colored++; }
      state.nodeEls[id] = node;
      nodeLayer.appendChild(node);
    });
    viewport.appendChild(frameLayer);
    viewport.appendChild(edgeLayer);
    viewport.appendChild(nodeLayer);
    var edges = g.edgeCount();
    drawnLog.lowered = nodes + ":" + edges;
    status.dataset.lowered = "1";
    status.dataset.subgraph = data.subgraph;
    status.dataset.nodes = nodes;
    status.dataset.edges = edges;
    status.dataset.frames = frames;
    status.dataset.primitives = prims;
    status.dataset.backEdges = back;
    status.dataset.controlEdges = control;
    status.dataset.stubs = stubs;
    status.dataset.colored = colored;
    status.dataset.layoutMs = L.ms;
    status.dataset.drawn = Object.keys(drawnLog).map(function (k) { return k + "=" + drawnLog[k]; }).join(" ");
    $("message").textContent = nodes + " nodes, " + edges + " edges, " + frames + " frame(s) \u00b7 layout " + L.ms +
      " ms \u00b7 wheel: zoom, drag: pan, click: details";
    highlightMatches();
    if (state.selected && state.nodeEls[state.selected]) { markSelected(state.selected); } else { state.selected = null; }
  }

  function lowLink(id, text) {
    return el("button", { "class": "link", text: text, onclick: function () { goToNode(0, id); } });
  }

  function lowName(id) {
    var n = lowIndex[id];
    if (n.kind === "Op") { return n.main + " " + n.sub; }
    if (n.kind === "Output") { return "output " + n.index + " " + n.main; }
    return n.main + (n.kind !== "Source" && n.label && n.main !== n.label ? " '" + n.label + "'" : "");
  }

  function lowRef(id, port) {  // a value as inspect --lowered prints it: %node:port (ctl: its completion)
    return "%" + id.slice(1) + ":" + (port < 0 ? "ctl" : port) + " " + lowName(id);
  }

  function lowTensor(t) {
    if (!t) { return el("div", { "class": "note", text: "(optional input omitted)" }); }
    return el("div", { "class": "tensor" }, el("div", { "class": "name", text: (t.name || "(unnamed)") + "  #" + t.index }),
      el("div", { "class": "meta", text: t.text }));
  }

  function lowPanel() {
    while (panel.firstChild) { panel.removeChild(panel.firstChild); }
    panel.hidden = false;
    var n = state.selected ? lowIndex[state.selected] : null;
    if (!n) { lowSummary(); return; }
    panel.appendChild(el("button", { "class": "close", title: "close", text: "\u00d7", onclick: function () { select(null); } }));
    panel.appendChild(el("h2", { text: n.kind === "Op" ? n.main + "  [" + n.sg + ":" + n.op + "]" : n.kind +
      (n.kind !== n.main ? " " + n.main : n.label ? " '" + n.label + "'" : "") }));
    panel.appendChild(el("div", { "class": "note", text: data.styles[n.kind].what }));
    var info = [["node", n.kind === "Output" ? "output " + n.index : "%" + n.node], ["frame", n.frame || "root"]];
    if (n.kind === "Op") {
      info.push(["subgraph", n.sg + (n.subgraph_name ? ": " + n.subgraph_name : "")], ["op index", n.op],
        ["version", n.version], ["backend", n.backend || "no kernel"], ["stateful", n.stateful ? "yes (chained)" : "no"]);
      if (n.where) { info.push(["inside", n.where.replace(/ -> $/, "")]); }
    } else if (n.kind === "Enter") {
      info.push(["into frame", n.frame_name], ["frame constant", n.is_constant ? "yes (every iteration)" : "no"]);
    } else if (n.kind === "Merge") {
      info.push(["loop merge", n.loop_merge ? "yes (Enter, NextIteration)" : "no"]);
    } else if (n.kind === "Switch" || n.kind === "Exit") {
      info.push(["loop control", n.loop_control ? "yes" : "no"]);
      if (n.kind === "Switch") { info.push(["predicate", n.strict ? "must have one element" : "element 0"]); }
    } else if (n.kind === "Const") {
      info.push(["slot", "subgraph " + n.sg + " tensor " + n.tensor.index + (n.variable ? " (variable)" : "")]);
    }
    panel.appendChild(rows(info));
    if (n.tensor) { panel.appendChild(el("h3", { text: "tensor" })); panel.appendChild(lowTensor(n.tensor)); }
    if (n.kind === "Op") {
      overlayRows(panel, n.sg, n.op);
      var opts = Object.keys(n.options);
      panel.appendChild(el("h3", { text: "options" }));
      panel.appendChild(opts.length ? rows(opts.map(function (k) { return [k, n.options[k]]; }))
        : el("div", { "class": "note", text: "none" }));
      panel.appendChild(el("h3", { text: "op tensors in / out" }));
      n.input_tensors.forEach(function (t) { panel.appendChild(lowTensor(t)); });
      panel.appendChild(el("div", { "class": "note", text: "\u2193" }));
      n.output_tensors.forEach(function (t) { if (t) { panel.appendChild(lowTensor(t)); } });
    }
    [["inputs", n.inputs], ["controls (completions)", n.controls]].forEach(function (part) {
      if (!part[1].length) { return; }
      panel.appendChild(el("h3", { text: part[0] }));
      part[1].forEach(function (e, k) {
        panel.appendChild(el("div", {}, k + ": ", lowLink("n" + e[0], lowRef("n" + e[0], e[1]))));
      });
    });
    var out = lowConsumers[n.id] || [];
    panel.appendChild(el("h3", { text: "consumers" }));
    if (!out.length) { panel.appendChild(el("div", { "class": "note", text: "none" })); }
    out.forEach(function (e) {
      var port = e.port < 0 ? "completion" : (e.label && lowIndex[e.from].kind === "Switch" ? e.label : "port " + e.port);
      panel.appendChild(el("div", {}, port + " \u2192 ", lowLink(e.to, (e.to.charAt(0) === "n" ? "%" + e.to.slice(1) + " " : "") + lowName(e.to))));
    });
  }

  function lowSummary() {
    panel.appendChild(el("h2", { text: "lowered subgraph " + data.subgraph + (data.subgraph_name ? ": " + data.subgraph_name : "") }));
    var total = Object.keys(data.counts).reduce(function (a, k) { return a + data.counts[k]; }, 0);
    panel.appendChild(rows([["model", data.title + " (" + data.format + ")"], ["nodes", total],
      ["frames", data.frames.length], ["outputs", data.nodes.filter(function (n) { return n.kind === "Output"; }).length]]));
    panel.appendChild(el("div", { "class": "note", text: "control flow inlined as TensorFlow's Switch / Merge / Enter / " +
      "Exit / NextIteration (docs/dataflow.md); dashed edges are control edges (they carry deadness, not a " +
      "value; \u201c^%id\u201d boxes stand for many from one node), red ones go back into a loop's next iteration" }));
    panel.appendChild(el("h3", { text: "node kinds" }));
    panel.appendChild(rows(Object.keys(data.counts).sort().map(function (k) { return [k, data.counts[k]]; })));
    if (data.frames.length) {
      panel.appendChild(el("h3", { text: "frames" }));
      data.frames.forEach(function (f) {
        panel.appendChild(el("div", { text: f.label + " in " + (f.parent || "root") }));
      });
    }
    panel.appendChild(el("h3", { text: "outputs" }));
    data.nodes.forEach(function (n) { if (n.kind === "Output") { panel.appendChild(el("div", {}, lowLink(n.id, n.main + " \u00b7 " + n.sub))); } });
  }

  function lowMatches(q) {
    var m = /^%?(\d+)$/.exec(q), out = [];
    if (m) { return lowIndex["n" + m[1]] ? [{ sg: 0, id: "n" + m[1] }] : []; }
    m = /^(\d+):(\d+)$/.exec(q);
    data.nodes.forEach(function (n) {
      var hit = m ? n.kind === "Op" && n.sg === +m[1] && n.op === +m[2] :
        [n.main, n.sub, n.kind, n.label || "", n.frame].some(function (s) { return s.toLowerCase().indexOf(q.toLowerCase()) >= 0; });
      if (hit) { out.push({ sg: 0, id: n.id }); }
    });
    return out;
  }

  function lowControls() {
    $("subgraph").parentNode.hidden = true;
    $("constants").parentNode.hidden = true;
    $("search").placeholder = "search: op type, label, %node, sg:op";
    $("fit").title = "fit the whole graph on screen";
    var box = $("kinds"), shown = [];
    box.hidden = false;
    Object.keys(data.styles).forEach(function (kind) {
      if (!data.nodes.some(function (n) { return n.kind === kind; })) { return; }
      var icon = sv("svg", { width: 30, height: 16, viewBox: "-1 -1 32 18" });
      var spec = lowShape(kind, 30, 16), shape = sv(spec[0], spec[1]);
      shape.style.fill = data.styles[kind].fill;
      shape.setAttribute("stroke", "#6b7280");
      icon.appendChild(shape);
      box.appendChild(el("span", { "class": "kind", title: data.styles[kind].what }, icon, kind));
      shown.push(kind);
    });
    [["control", data.colours.control, "4 3"], ["back-edge", data.colours.back, ""]].forEach(function (k) {
      if (!data.edges.some(function (e) { return k[0] === "control" ? e.control : e.back; })) { return; }
      var icon = sv("svg", { width: 24, height: 10 });
      var line = sv("line", { x1: 1, y1: 5, x2: 23, y2: 5, stroke: k[1], "stroke-width": 1.6 });
      if (k[2]) { line.setAttribute("stroke-dasharray", k[2]); }
      icon.appendChild(line);
      box.appendChild(el("span", { "class": "kind" }, icon, k[0]));
      shown.push(k[0]);
    });
    status.dataset.legend = shown.join(" ");
    document.title = data.title + " (lowered) - onert-py view";
  }

  // ---- start: URL hash options (#sg=2&consts=1&search=ADD&select=o3&overlay=error&all=1)

  function hashOptions() {
    var out = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      if (!kv) { return; }
      var i = kv.indexOf("=");
      out[decodeURIComponent(i < 0 ? kv : kv.slice(0, i))] = i < 0 ? "1" : decodeURIComponent(kv.slice(i + 1));
    });
    return out;
  }

  function start() {
    var opt = hashOptions();
    if (opt.consts != null) { state.consts = opt.consts === "1"; }
    if (opt.overlay != null) {
      state.overlay = data.overlays.map(function (o) { return o.name; }).indexOf(opt.overlay);
    }
    setupControls();
    if (opt.all === "1") {  // lay out and draw every subgraph once (tests use it)
      data.subgraphs.forEach(function (sg) { state.sg = sg.index; draw(); });
    }
    var s = opt.sg != null ? +opt.sg : (data.start_subgraph || 0);
    state.sg = s >= 0 && s < data.subgraphs.length ? s : 0;
    $("subgraph").value = String(state.sg);
    draw();
    showPanel();
    initialView();
    if (opt.search) {
      $("search").value = opt.search;
      updateSearch();
      nextMatch(1);
    }
    if (opt.select && state.nodeEls[opt.select]) { select(opt.select); centreOn(opt.select); }
    status.dataset.ready = "1";
  }

  try {
    start();
  } catch (e) {
    window.__onertViewError(String(e && e.stack || e));
  }
})();
