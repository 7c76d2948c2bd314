"""`onert-py inspect`: what a model holds, without compiling it (so unsupported ops are fine), which
backend each op would run on (the compiler's own choice, compile.assign_backend, under the default
backends or --backends / --op-backend), and which ops have no kernel for their types (the one case
where a kernel is prepared: an op with tensors of types outside its kernel's list)."""
from __future__ import annotations

import argparse
import json
import os
import re
from collections import Counter
from typing import Any

import numpy as np

from onert_py.backends.cpu.shape import type_name
from onert_py.backends.registry import CPU, JIT, Backend, KernelContext
from onert_py.compiler.compile import assign_backend, quantized_type
from onert_py.compiler.specialize import specialize_declared
from onert_py.errors import PrepareError
from onert_py.exec.runtime import RuntimeState
from onert_py.ir import Model, Operation, Subgraph, Tensor
from onert_py.tools.custom_ops import custom_ops_hint, load_custom_ops
from onert_py.tools.errors import CliError
from onert_py.tools.formatting import dtype_of, format_table, shape_of
from onert_py.tools.options import (BackendChoice, add_backend_options, add_custom_ops_option, backend_choice,
                                    option_message, read_model)

# (subgraph, op index) -> the backend the compiler would give the op (None: no kernel, or none for
# its types), the name an op without a kernel is listed by ("CONV_2D (quantized int16)", "EXP (int32)")
# and, for a kernel refusing the op's types, its message
Assignment = dict[tuple[int, int], tuple[str | None, str, str | None]]

# A kernel's refusal of a tensor type (check_dtype's "has type int64, not supported", "input type int64
# is not supported"); group 1: the type.
_TYPE_REFUSAL = re.compile(r"\btype (\w+)\b.*\bnot supported\b")

# Longest tensor name shown in an operator table (TF's fused names run to hundreds of characters).
_NAME_WIDTH = 28

# Backends whose kernels declare the tensor types they run (control flow and custom kernels take any).
_COMPUTE = (CPU.name, JIT.name)

# Option enums worth a name in the operator table (the schema's ActivationFunctionType and Padding).
_ENUMS = {"fused_activation_function": {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH",
                                        5: "SIGN_BIT"},
          "padding": {0: "SAME", 1: "VALID"}}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="show subgraphs, ops, signatures, control flow and support",
                       description="Show what a model holds without compiling it (so models with "
                                   "unsupported ops are fine): subgraphs with their inputs, outputs and "
                                   "op counts, signatures with the tensors they name, the control-flow "
                                   "call graph, weights, the backends ops would run on and ops without a "
                                   "kernel. --subgraph N adds the tensor and operator tables of subgraph "
                                   "N.")
    p.add_argument("model", help=".tflite / .circle file or nnpackage directory")
    p.add_argument("--subgraph", type=int, metavar="N", action="append", default=[],
                   help="also list every tensor (shape, dtype, kind, bytes, quantization) and operator "
                        "(inputs, outputs, options) of subgraph N (repeatable)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("--lowered", action="store_true",
                   help="print the dataflow executor's lowered graph instead (control flow inlined as "
                        "Switch/Merge/Enter/Exit/NextIteration, docs/dataflow.md) of subgraph 0, or of "
                        "the first --subgraph N")
    add_custom_ops_option(p)
    add_backend_options(p, threads=False)
    p.set_defaults(func=inspect_cmd)


def _kind(sg: Subgraph, t: Tensor) -> str:
    kinds = [k for k, on in (("input", t.index in sg.inputs), ("output", t.index in sg.outputs),
                             ("const", t.is_constant), ("variable", t.is_variable)) if on]
    return ",".join(kinds)


def _quant(t: Tensor) -> str | None:
    q = t.quantization
    if q is None or q.scale is None or np.size(q.scale) == 0:
        return None
    scale, zp = np.asarray(q.scale).reshape(-1), np.asarray(q.zero_point).reshape(-1)
    if scale.size == 1:
        return f"scale {float(scale[0]):.6g} zp {int(zp[0]) if zp.size else 0}"
    zps = sorted({int(z) for z in zp}) if zp.size else [0]
    zp_text = f"zp {zps[0]}" if len(zps) == 1 else f"zp {zps[0]}..{zps[-1]}"
    return (f"per-channel x{scale.size} on axis {q.quantized_dimension}, scale {float(scale.min()):.3g}.."
            f"{float(scale.max()):.3g} {zp_text}")


def _option_value(key: str, value: Any) -> Any:
    if key in _ENUMS and isinstance(value, int):
        return _ENUMS[key].get(value, value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    return value


def tensor_details(sg: Subgraph) -> list[dict[str, Any]]:
    return [{"index": t.index, "name": t.name, "shape": shape_of(t), "dtype": dtype_of(t),
             "kind": _kind(sg, t), "bytes": int(t.data.nbytes) if t.is_constant else None,
             "quantization": _quant(t), "sparse": t.sparsity is not None} for t in sg.tensors]


def operator_details(sg: Subgraph, assigned: Assignment | None = None) -> list[dict[str, Any]]:
    """Each operator's type, version, tensors (indices, and name/shape/dtype of each: None for an
    omitted optional input), options and backend (from assign_backends; None without)."""
    assigned = assigned or {}

    def described(indices):
        return [None if i < 0 else {"index": i, "name": sg.tensors[i].name, "shape": shape_of(sg.tensors[i]),
                                    "dtype": dtype_of(sg.tensors[i])} for i in indices]
    return [{"index": op.index, "opcode": op.kernel_name, "version": op.version,
             "inputs": list(op.inputs), "outputs": list(op.outputs),
             "input_tensors": described(op.inputs), "output_tensors": described(op.outputs),
             "options": {k: _option_value(k, v) for k, v in op.options.items()},
             "backend": assigned.get((sg.index, op.index), (None, ""))[0]} for op in sg.operations]


def tensor_label(t: dict[str, Any] | None) -> str:
    """`3:input_1[1,224,224,3]` for an operator table: index, name (the first of TF's ';'-joined fused
    names, its tail kept when still long: the tail tells layers apart), shape; "-" when omitted."""
    if t is None:
        return "-"
    name = (t["name"] or "").split(";")[0]
    if len(name) > _NAME_WIDTH:
        name = "…" + name[-(_NAME_WIDTH - 1):]
    return f"{t['index']}:{name}[{','.join(map(str, t['shape']))}]"


def type_refusal(op: Operation, sg: Subgraph, model: Model, backend: Backend) -> str | None:
    """The kernel's own refusal ("input 0 ('x') has type int64, not supported (supported: ...)") when
    `op` has tensors of types its kernel is not registered for; None when it takes them. Only then is
    the kernel prepared, alone (as the compiler prepares it, without folding), and only a refusal that
    names a type counts: whatever else fails out of context is for the compiler to judge."""
    allowed = backend.types(op.kernel_name)
    types = {type_name(sg.tensors[t].dtype) for t in (*op.inputs, *op.outputs) if t >= 0}
    if not allowed or types <= set(allowed):
        return None
    ctx = KernelContext(op, sg, model, [None] * len(sg.tensors), RuntimeState())
    try:
        backend.kernel(op.kernel_name)(ctx)
    except PrepareError as e:
        message = str(e).removeprefix(f"{ctx.where}: ")
        return message if _TYPE_REFUSAL.search(message) else None
    except Exception:  # noqa: BLE001 - out of context a kernel may fail for other reasons: not ours to say
        return None
    return None


def assign_backends(model: Model, choice: BackendChoice) -> Assignment:
    """The backend of every op as the compiler picks it (compile.assign_backend: a backend's own
    `accepts` test included), and the ops whose kernel refuses their tensor types (type_refusal) as
    ops without a kernel. An op --op-backend forces onto a backend that cannot run it is the same
    one-line error as in `run`."""
    return place_ops(specialize_declared(model)[0], choice)   # dynamic shapes: as a session first compiles it


def place_ops(model: Model, choice: BackendChoice) -> Assignment:
    """assign_backends on the model as given (already the one a session compiles)."""
    out: Assignment = {}
    for sg in model.subgraphs:
        for op in sg.operations:
            qtype = quantized_type(op, sg)
            try:
                backend = assign_backend(op, choice.names, qtype, sg, choice.forced)
            except PrepareError as e:
                ours = choice.op_backend and not os.environ.get("ONERT_PY_OP_BACKEND_MAP")
                raise CliError(option_message(str(e)) if ours else str(e)) from None
            label = op.kernel_name + (f" (quantized {qtype})" if qtype else "")
            refusal = None
            if backend is not None and qtype is None and backend.name in _COMPUTE:
                refusal = type_refusal(op, sg, model, backend)
            if refusal is not None:   # a kernel, but not for these types: the op would fail at prepare
                backend, label = None, f"{op.kernel_name} ({_TYPE_REFUSAL.search(refusal).group(1)})"
            out[sg.index, op.index] = (backend.name if backend is not None else None, label, refusal)
    return out


def labelled_calls(op: Operation) -> list[tuple[str, int]]:
    """(role, subgraph) pairs an op calls: WHILE -> [("cond", 1), ("body", 2)].

    Mirrors loader.subgraph_calls, which returns only the indices; the role comes from the option
    name ("cond_subgraph_index" -> "cond", Circle CALL's "subgraph" -> "subgraph")."""
    calls = []
    for key, value in op.options.items():
        if "subgraph" not in key:
            continue
        role = key.replace("_subgraph_indices", "").replace("_subgraph_index", "") or "subgraph"
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(v, int):
                calls.append((role, int(v)))
    return calls


def describe(model: Model, choice: BackendChoice, assigned: Assignment,
             compiled_for: tuple | None = None) -> dict[str, Any]:
    """Everything `inspect` reports, as plain data (the JSON form); `assigned` from assign_backends,
    `compiled_for` the input shapes a model with dynamic shapes was placed for (specialize_declared)."""
    subgraphs = []
    calls = []
    for sg in model.subgraphs:
        def io(indices):
            return [{"index": i, "name": sg.tensors[i].name, "shape": shape_of(sg.tensors[i]),
                     "dtype": dtype_of(sg.tensors[i])} for i in indices]
        counts = Counter(op.kernel_name for op in sg.operations)
        subgraphs.append({"index": sg.index, "name": sg.name, "tensors": len(sg.tensors),
                          "ops": len(sg.operations), "inputs": io(sg.inputs), "outputs": io(sg.outputs),
                          "op_counts": dict(sorted(counts.items())),
                          "backends": _backend_counts(sg, choice, assigned)})
        for op in sg.operations:
            targets = labelled_calls(op)
            if targets:
                calls.append({"subgraph": sg.index, "op": op.index, "opcode": op.kernel_name,
                              "calls": [{"role": r, "subgraph": s} for r, s in targets]})

    def sig_tensors(s, mapping):
        sg = model.subgraphs[s.subgraph_index]
        return [{"name": n, "tensor": t, "tensor_name": sg.tensors[t].name, "shape": shape_of(sg.tensors[t]),
                 "dtype": dtype_of(sg.tensors[t])} for n, t in mapping.items() if 0 <= t < len(sg.tensors)]
    signatures = [{"key": s.key, "subgraph": s.subgraph_index, "inputs": dict(s.inputs),
                   "outputs": dict(s.outputs), "input_details": sig_tensors(s, s.inputs),
                   "output_details": sig_tensors(s, s.outputs)} for s in model.signatures]
    consts = [t for sg in model.subgraphs for t in sg.tensors if t.is_constant]
    unsupported = [{"subgraph": s, "op": i, "opcode": name, **({"reason": why} if why else {})}
                   for (s, i), (backend, name, why) in assigned.items() if backend is None]
    text = {}
    for k, v in model.metadata.items():  # short printable values (min_runtime_version "1.5.0") as text
        value = bytes(v).rstrip(b"\0")
        if len(value) <= 64 and value.isascii() and value.decode().isprintable():
            text[k] = value.decode()
    return {"format": model.format, "version": model.version, "description": model.description,
            "metadata": sorted(model.metadata), "metadata_text": text,
            "metadata_bytes": {k: len(v) for k, v in sorted(model.metadata.items())},
            "subgraphs": subgraphs, "signatures": signatures,
            "call_graph": calls, "backend_order": list(choice.names), "backends_from": _backends_from(choice),
            "op_backend": choice.forced, "unsupported_ops": unsupported,
            "compiled_for": compiled_for,
            "constants": {"tensors": len(consts), "bytes": int(sum(t.data.nbytes for t in consts))}}


def _backend_counts(sg: Subgraph, choice: BackendChoice, assigned: Assignment) -> dict[str, int]:
    """Ops per backend in one subgraph, the compute backends in the order tried; "none": no kernel."""
    counts = Counter(assigned[sg.index, op.index][0] or "none" for op in sg.operations)
    order = [*choice.names, *sorted(k for k in counts if k not in choice.names and k != "none"), "none"]
    return {k: counts[k] for k in order if counts.get(k)}


def _backends_from(choice: BackendChoice) -> str:
    if choice.backends is not None:
        return "--backends"
    return "ONERT_PY_BACKENDS" if os.environ.get("ONERT_PY_BACKENDS", "").strip() else "default"


def _counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{'no kernel' if k == 'none' else k} {n} op{'' if n == 1 else 's'}"
                     for k, n in counts.items()) or "-"


def _io_line(items: list[dict]) -> str:
    return ", ".join(f"{d['name'] or '#' + str(d['index'])} {d['shape']} {d['dtype']}" for d in items) or "-"


def render(info: dict[str, Any], path: str) -> str:
    lines = [f"model: {path}", f"format: {info['format']} (schema version {info['version']})",
             f"description: {info['description'] or '-'}"]
    if info["metadata"]:
        shown = [f"{k} {info['metadata_text'][k]!r}" if k in info["metadata_text"] else
                 f"{k} ({_size(info['metadata_bytes'][k])})" for k in info["metadata"]]
        lines.append(f"metadata: {', '.join(shown)}")
    c = info["constants"]
    lines.append(f"constants: {c['tensors']} tensor(s), {_size(c['bytes'])}")
    where = info["backends_from"]
    if info["op_backend"]:
        where += "; op backend " + ", ".join(f"{k}={v}" for k, v in info["op_backend"].items())
    lines.append(f"backends: {';'.join(info['backend_order'])} ({where})")
    if info["compiled_for"] is not None:
        lines.append("  dynamic shapes: ops placed as compiled for subgraph 0's declared input shapes "
                     f"{', '.join(str(list(s)) for s in info['compiled_for'])} (other shapes compile again)")
    lines.append(f"subgraphs: {len(info['subgraphs'])}")
    for sg in info["subgraphs"]:
        lines.append(f"  [{sg['index']}] {sg['name'] or '-'}: {sg['tensors']} tensors, {sg['ops']} ops")
        lines.append(f"      inputs:  {_io_line(sg['inputs'])}")
        lines.append(f"      outputs: {_io_line(sg['outputs'])}")
        counts = ", ".join(f"{name} x{n}" for name, n in sg["op_counts"].items()) or "-"
        lines.append(f"      ops:     {counts}")
        lines.append(f"      backends: {_counts_text(sg['backends'])}")
    lines.append(f"signatures: {len(info['signatures'])}")
    for s in info["signatures"]:
        lines.append(f"  {s['key']!r} -> subgraph {s['subgraph']}")
        for what in ("inputs", "outputs"):
            items = ", ".join(f"{d['name']} = {d['tensor_name'] or '#' + str(d['tensor'])} {d['shape']} "
                              f"{d['dtype']}" for d in s[what[:-1] + "_details"]) or "-"
            lines.append(f"      {what}:{' ' * (8 - len(what))}{items}")
    lines.append("call graph:" + ("" if info["call_graph"] else " none"))
    for c in info["call_graph"]:
        targets = ", ".join(f"{t['role']} {t['subgraph']}" for t in c["calls"])
        lines.append(f"  subgraph {c['subgraph']} op {c['op']} {c['opcode']} -> {targets}")
    lines.append("ops without a kernel:" + ("" if info["unsupported_ops"] else " none"))
    groups: dict[tuple[int, str], list[int]] = {}
    reasons: dict[tuple[int, str], str] = {}
    for u in info["unsupported_ops"]:  # one line per op type (and type) and subgraph: models repeat them
        groups.setdefault((u["subgraph"], u["opcode"]), []).append(u["op"])
        if u.get("reason"):
            reasons.setdefault((u["subgraph"], u["opcode"]), u["reason"])
    for (sg, opcode), ops in groups.items():
        where = f"op {ops[0]}" if len(ops) == 1 else f"ops {', '.join(map(str, ops))}"
        why = reasons.get((sg, opcode))
        lines.append(f"  subgraph {sg} {where} {opcode}" + (f": {why}" if why else ""))
    if info.get("hint"):
        lines.append(f"  ({info['hint']})")
    for sg in info["subgraphs"]:
        if "tensor_details" in sg:
            lines += ["", *render_subgraph(sg)]
    return "\n".join(lines)


def _size(n: int) -> str:
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def render_subgraph(sg: dict[str, Any]) -> list[str]:
    # The name last: TF's fused names run to hundreds of characters and would push every column away.
    rows = [(str(t["index"]), str(t["shape"]), t["dtype"], t["kind"] or "-",
             _size(t["bytes"]) if t["bytes"] is not None else "-",
             " ".join(x for x in (t["quantization"], "sparse" if t["sparse"] else None) if x) or "-",
             t["name"] or "-")
            for t in sg["tensor_details"]]
    lines = [f"subgraph {sg['index']} {sg['name'] or '-'!r}: tensors",
             format_table(("#", "shape", "dtype", "kind", "size", "quantization", "name"), rows), "",
             f"subgraph {sg['index']} {sg['name'] or '-'!r}: operators"]

    def refs(ts):
        return " ".join(tensor_label(t) for t in ts) or "-"
    rows = [(str(op["index"]), op["opcode"] + (f" v{op['version']}" if op["version"] > 1 else ""),
             op.get("backend") or "-", refs(op["input_tensors"]), refs(op["output_tensors"]),
             " ".join(f"{k}={v}" for k, v in op["options"].items()) or "-") for op in sg["operator_details"]]
    lines.append(format_table(("#", "op", "backend", "inputs", "outputs", "options"), rows))
    return lines


def inspect_cmd(args: argparse.Namespace) -> int:
    load_custom_ops(args.custom_ops)
    model = read_model(args.model)
    for n in args.subgraph:
        if not 0 <= n < len(model.subgraphs):
            raise CliError(f"--subgraph {n}: the model has subgraphs 0..{len(model.subgraphs) - 1}")
    if getattr(args, "lowered", False):
        from onert_py.compiler.lowering import format_lowered, lower
        print(format_lowered(lower(model, args.subgraph[0] if args.subgraph else 0)))
        return 0
    choice = backend_choice(args, model)
    placed, compiled_for = specialize_declared(model)   # dynamic shapes: as a session first compiles it
    assigned = place_ops(placed, choice)
    info = describe(model, choice, assigned, compiled_for)
    hint = custom_ops_hint(model).lstrip("; ")
    if hint:
        info["hint"] = hint
    for n in args.subgraph:
        sg = info["subgraphs"][n]
        sg["tensor_details"] = tensor_details(model.subgraphs[n])
        sg["operator_details"] = operator_details(model.subgraphs[n], assigned)
    print(json.dumps(info, indent=2, default=_json_value) if args.json else render(info, args.model))
    return 0


def _json_value(x: Any) -> Any:
    """numpy scalars and anything else an option may hold, for json.dumps."""
    return x.item() if isinstance(x, np.generic) else str(x)
