"""Reference gradients of the conformance corpus's control-flow programs, computed by TensorFlow.

For every program named in GRADIENT_PROGRAMS this rebuilds the program of ``generate.py`` (its
weights are deterministic: seeded Keras initialisers, ``rng_for(name)`` constants), checks that the
rebuilt TensorFlow function reproduces the outputs stored with the corpus's existing ``.tflite`` (the
converted file is *not* regenerated: the stored model is the one differentiated), and then computes
with ``tf.GradientTape`` the gradient of ``sum_k sum(output_k * cotangent_k)`` over the model's float
outputs (cotangents: standard normal, seeded per program) with respect to

- the model's float inputs, keyed by the main subgraph's input tensor names, and
- the program's weights -- Keras layer weights, or the constants a ``tf.function`` captures -- that
  can be matched to float constant tensors of the ``.tflite`` holding exactly their values, as they are
  or in a layout the converter uses (transposed for FULLY_CONNECTED, OHWI for CONV_2D, [1, H, W, C*M]
  for DEPTHWISE_CONV_2D, split into rows), keyed by onert-py's ``wrt`` name for the constant (``NAME``
  in the main subgraph, ``SUBGRAPH:NAME`` elsewhere, e.g. a weight constant of a WHILE body). When the
  converter copied a weight into several subgraphs, the weight's gradient is the sum of the copies'
  gradients, and the entry lists every copy. A weight that matches no constant (folded, or a zero bias
  the converter drops) or a constant shared with another weight is listed as unmapped with the reason.

It writes ``tests/conformance/corpus/gradients/<program>.npz`` (``in_k``: the inputs, in the main
subgraph's order; ``cot_k``: the cotangent of float output k; ``grad_j``: TensorFlow's gradient of
the manifest's j-th ``gradients`` entry, in the constant's layout) and ``GRADIENTS.json`` (per program:
the ``gradients`` entries -- ``wrt``: the onert-py names whose gradients sum to ``grad_j`` -- and
the tolerance and its reason; skipped programs with the reason). A developer tool: TensorFlow (the
``dev`` extra) runs it, never the tests. Usage::

    python tools/conformance/generate_gradients.py [--only NAME ...]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import zlib
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import generate as G  # tools/conformance/generate.py

CORPUS = G.DEFAULT_OUT
OUT = CORPUS / "gradients"

# The control-flow programs (and two plain graphs as a baseline) whose gradients are stored.
GRADIENT_PROGRAMS = [
    "mlp", "convnet",
    "cond_chain", "cond_multi", "cond_nested", "cond_dynamic_shape",
    "while_accumulator", "while_data_dependent", "while_nested", "while_zero_iterations",
    "while_concat_grow", "while_pad_grow", "while_partial_outputs", "while_dynamic_input",
    "cond_in_while", "while_in_cond", "tensorarray_fixed", "dense_loop",
    "while_rnn_weights", "while_nested_weights",
    "keras_simplernn", "keras_gru", "keras_lstm",
    "greedy_decode", "greedy_decode_grow", "greedy_decode_grow_empty",
    "while_counter",
]

# Tolerances: onert-py's gradient of a float32 model against TensorFlow's float32 GradientTape. Both
# run float32 kernels that sum in different orders (matmul/conv accumulation, reductions, the order in
# which a loop's per-iteration gradient contributions are added), so element k must satisfy
# |got - tf| <= rtol * |tf| + atol_scaled * max|tf| (the gradient's largest magnitude: an element near
# zero that results from cancelling larger terms carries their rounding error, not its own).
DEFAULT_RTOL, DEFAULT_ATOL_SCALED = 1e-4, 1e-5
DEFAULT_REASON = ("float32 on both sides, different summation orders: rtol 1e-4 (a few hundred float32 ulps "
                  "accumulated over the loop's iterations), atol 1e-5 of the gradient's largest magnitude for "
                  "elements that cancel")
# Per-program overrides (rtol, atol_scaled, reason) for a program that needs a looser tolerance. None does
# today: the largest difference measured (greedy_decode: ten steps of tanh RNN cell with gathers) is 1e-6
# of the gradient's magnitude, 3% of the default tolerance; Keras GRU/LSTM/SimpleRNN differ by < 5e-7.
TOLERANCES: dict[str, tuple[float, float, str]] = {}


def _tf():
    import tensorflow as tf
    return tf


def _flat_outputs(out: Any) -> list:
    tf = _tf()
    if isinstance(out, dict):
        out = list(out.values())
    return tf.nest.flatten(out)


def _match_outputs(tf_out: list[np.ndarray], stored: list[np.ndarray]) -> tuple[list[int] | None, float]:
    """For every stored output the index of the TF output it equals (shape, dtype, values within float32
    kernel differences), preferring the same position; (None, diff) when some stored output has none."""
    used: set[int] = set()
    mapping, worst = [], 0.0
    for k, y in enumerate(stored):
        order = [k] + [j for j in range(len(tf_out)) if j != k]
        found = None
        for j in order:
            if j >= len(tf_out) or j in used:
                continue
            a = tf_out[j]
            if a.shape != y.shape or a.dtype != y.dtype:
                continue
            if y.dtype.kind == "f":
                scale = max(1.0, float(np.max(np.abs(y), initial=0.0)))
                if not np.allclose(a, y, rtol=1e-4, atol=1e-4 * scale):
                    continue
                worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - y), initial=0.0)))
            elif not np.array_equal(a, y):
                continue
            found = j
            break
        if found is None:
            return None, worst
        used.add(found)
        mapping.append(found)
    return mapping, worst


def _tflite_constants(model) -> list[tuple[int, int, np.ndarray]]:
    return [(sg.index, t.index, np.asarray(t.data)) for sg in model.subgraphs for t in sg.tensors
            if t.data is not None and t.dtype.kind == "f" and t.quantization is None]


def _views(v: np.ndarray) -> list[tuple[str, Any]]:
    """(name, function) of the layouts in which the converter stores a weight: as it is, transposed (a
    FULLY_CONNECTED weight is [out, in]), a Conv2D kernel as OHWI, a depthwise kernel as [1, H, W, C*M],
    or split into the rows of a [k, n] weight (Keras GRU's input and recurrent biases). Each is linear, so
    the same function maps TensorFlow's gradient of the weight to the gradient of the constant."""
    views: list[tuple[str, Any]] = [("same", lambda a: a)]
    if v.ndim == 2 and not np.array_equal(v, v.T):
        views.append(("transposed", lambda a: a.T))
    if v.ndim == 4:
        views.append(("OHWI", lambda a: np.transpose(a, (3, 0, 1, 2))))
        views.append(("depthwise", lambda a: a.reshape(1, a.shape[0], a.shape[1], -1)))
    if v.ndim == 2 and v.shape[0] <= 4:
        views += [(f"row {k}", lambda a, k=k: a[k]) for k in range(v.shape[0])]
    return views


def _map_weights(model, weights: list[tuple[str, np.ndarray]]):
    """([target], [unmapped]): a target is {"source": TF weight, "view": layout, "wrt": [constant names],
    "fn": layout function} -- the constants holding that view of the weight (several when the converter
    copied it into several subgraphs: the weight's gradient is then the sum of theirs); unmapped:
    {tf, shape, reason} of the weights with no such constant."""
    from onert_py.compiler.gradients import _find_tensor, _qualified
    consts = _tflite_constants(model)
    found = []    # (weight index, view name, fn, [(si, t)])
    for w, (_, v) in enumerate(weights):
        if not np.any(v):
            continue
        for vname, fn in _views(v):
            a = fn(v)
            hits = [(si, t) for si, t, c in consts if c.shape == a.shape and np.array_equal(c, a)]
            # two layouts that coincide (a depthwise kernel with multiplier 1 is both OHWI and
            # [1, H, W, C]) are one
            if hits and not any(f[0] == w and f[3] == hits for f in found):
                found.append((w, vname, fn, hits))
    owners: dict[tuple[int, int], set[int]] = {}
    for w, _, _, hits in found:
        for h in hits:
            owners.setdefault(h, set()).add(w)
    targets, unmapped = [], []
    for w, (label, v) in enumerate(weights):
        mine = [f for f in found if f[0] == w]

        def skip(reason, label=label, v=v):
            unmapped.append({"tf": label, "shape": list(v.shape), "reason": reason})
        if not np.any(v):
            skip("all zeros (a zero bias: the converter drops it or shares one zero constant among several)")
            continue
        if not mine:
            skip("no constant of the .tflite holds its values in a known layout (folded by the converter)")
            continue
        if any(len(owners[h]) > 1 for f in mine for h in f[3]):
            skip("ambiguous: a constant holding it equals another weight too")
            continue
        full = [f for f in mine if not f[1].startswith("row")]
        if len(full) > 1:
            skip(f"stored in several layouts ({', '.join(f[1] for f in full)})")
            continue
        for _, vname, fn, hits in (full or mine):
            names = [_qualified(model, 0, si, t) for si, t in hits]
            bad = []
            for n, h in zip(names, hits):
                try:
                    if _find_tensor(model, 0, n) != h:
                        bad.append(f"{n!r} resolves to another tensor")
                except Exception as e:  # a duplicate name: onert-py cannot address it
                    bad.append(f"{n!r}: {e}")
            if bad:
                skip("; ".join(bad))
                break
            targets.append({"source": label, "view": vname, "wrt": names, "fn": fn})
    return targets, unmapped


def _tf_weights(obj: Any) -> list[tuple[str, Any]]:
    """(label, differentiable source) of a program's weights: Keras trainable variables, or the float
    tensors a tf.function captures."""
    tf = _tf()
    keras = G._keras()
    if isinstance(obj, keras.Model):
        return [(getattr(w, "path", w.name), w) for w in obj.trainable_weights]
    cf = obj.get_concrete_function()
    return [(f"captured_{i}", c) for i, c in enumerate(cf.captured_inputs)
            if c.dtype == tf.float32]


def gradients_for(prog) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(manifest entry, arrays); the entry has "skipped" instead of "wrt" when the program cannot be used."""
    tf = _tf()
    keras = G._keras()
    import onert_py
    name = prog.name
    data = (CORPUS / f"{name}.tflite").read_bytes()
    model = onert_py.load_model(data)
    main = model.subgraphs[0]
    with np.load(CORPUS / f"{name}.npz", allow_pickle=False) as z:
        stored_in = [z[f"in_{k}"] for k in range(len(main.inputs))]
        stored_out = [z[f"out_{k}"] for k in range(len(main.outputs))]
    obj, feeds = prog.build()
    feed = feeds[0] if isinstance(feeds, list) else feeds
    is_keras = isinstance(obj, keras.Model)
    names = ([t.name.split(":")[0] for t in obj.inputs] if is_keras else [s.name for s in obj.input_signature])
    order = G.input_order(data, names)
    entry: dict[str, Any] = {"program": name}
    for k, n in enumerate(order):
        if not np.array_equal(np.asarray(feed[n]), stored_in[k]):
            entry["skipped"] = f"the rebuilt program's input {n!r} differs from the stored in_{k}"
            return entry, {}

    weights = _tf_weights(obj)
    targets_w, unmapped = _map_weights(model, [(label, np.asarray(w.numpy())) for label, w in weights])
    sources = dict(weights)
    used = list(dict.fromkeys(t["source"] for t in targets_w))
    r = np.random.default_rng(zlib.crc32(f"{name}/cotangents".encode()))
    cots = {k: r.standard_normal(y.shape).astype(y.dtype) for k, y in enumerate(stored_out) if y.dtype.kind == "f"}
    float_inputs = [k for k, t in enumerate(main.inputs) if main.tensors[t].dtype.kind == "f"]
    x_vars = {k: tf.constant(stored_in[k]) for k in range(len(stored_in))}
    targets = [x_vars[k] for k in float_inputs] + [sources[label] for label in used]
    if not targets:
        entry["skipped"] = "no float input and no weight: nothing to differentiate"
        return entry, {}
    with tf.GradientTape(persistent=False) as tape:
        for k in float_inputs:
            tape.watch(x_vars[k])
        for label in used:
            if not isinstance(sources[label], tf.Variable) and not hasattr(sources[label], "trainable"):
                tape.watch(sources[label])
        by_name = {n: x_vars[k] for k, n in enumerate(order)}
        if is_keras:
            xs = [by_name[n] for n in names]
            out = obj(xs if len(xs) > 1 else xs[0], training=False)
        else:
            out = obj(*[by_name[n] for n in names])
        tf_out = _flat_outputs(out)
        mapping, diff = _match_outputs([np.asarray(t) for t in tf_out], stored_out)
        if mapping is None:
            entry["skipped"] = ("the rebuilt program does not reproduce the stored outputs (weights or "
                                "program changed since the .tflite was converted)")
            return entry, {}
        loss = tf.add_n([tf.reduce_sum(tf_out[mapping[k]] * c) for k, c in cots.items()]) if cots else None
    if loss is None:
        entry["skipped"] = "no float output: nothing to differentiate"
        return entry, {}
    grads = tape.gradient(loss, targets, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    grads = [np.asarray(tf.convert_to_tensor(g)) for g in grads]
    by_source = dict(zip(used, grads[len(float_inputs):]))
    gradients = [{"wrt": [main.tensors[main.inputs[k]].name], "source": f"input {k}"} for k in float_inputs]
    grads = grads[:len(float_inputs)]
    for t in targets_w:
        gradients.append({"wrt": t["wrt"], "source": t["source"], "layout": t["view"]})
        grads.append(np.ascontiguousarray(t["fn"](by_source[t["source"]])))
    rtol, atol_scaled, reason = TOLERANCES.get(name, (DEFAULT_RTOL, DEFAULT_ATOL_SCALED, DEFAULT_REASON))
    entry.update({
        "inputs": [main.tensors[t].name for t in main.inputs],
        "cotangents": sorted(cots),
        "gradients": gradients,
        "rtol": rtol,
        "atol_scaled": atol_scaled,
        "tolerance_reason": reason,
        "tf_forward_max_abs_diff": float(f"{diff:.3g}"),
    })
    if unmapped:
        entry["unmapped_weights"] = unmapped
    arrays = {f"in_{k}": x for k, x in enumerate(stored_in)}
    arrays.update({f"cot_{k}": c for k, c in cots.items()})
    arrays.update({f"grad_{j}": g.astype(np.float32) for j, g in enumerate(grads)})
    return entry, arrays


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*", help="only these programs (GRADIENTS.json is merged)")
    args = p.parse_args(argv)
    tf = _tf()
    tf.config.set_visible_devices([], "GPU")
    OUT.mkdir(parents=True, exist_ok=True)
    manifest_path = OUT / "GRADIENTS.json"
    old = {}
    if args.only and manifest_path.exists():
        m = json.loads(manifest_path.read_text())
        old = {e["program"]: e for e in m["programs"] + m.get("skipped", [])}
    entries = dict(old)
    progs = {p.name: p for p in G.PROGRAMS}
    failed = []
    for name in GRADIENT_PROGRAMS:
        if args.only and name not in args.only:
            continue
        try:
            entry, arrays = gradients_for(progs[name])
        except Exception as ex:
            failed.append(name)
            print(f"{name:26s} FAILED: {type(ex).__name__}: {ex}", file=sys.stderr, flush=True)
            continue
        entries[name] = entry
        path = OUT / f"{name}.npz"
        if arrays:
            np.savez_compressed(path, **arrays)
            print(f"{name:26s} wrt={[g['wrt'] for g in entry['gradients']]} unmapped={[u['tf'] for u in entry.get('unmapped_weights', [])]}",
                  flush=True)
        else:
            path.unlink(missing_ok=True)
            print(f"{name:26s} skipped: {entry['skipped']}", flush=True)
    order = {n: i for i, n in enumerate(GRADIENT_PROGRAMS)}
    ordered = sorted(entries.values(), key=lambda e: order.get(e["program"], 1e9))
    manifest = {
        "generator": "tools/conformance/generate_gradients.py",
        "tensorflow": tf.__version__,
        "objective": "sum over float outputs k of sum(output_k * cot_k); cot_k standard normal, seeded per program",
        "tolerance": "|onert - tf| <= rtol * |tf| + atol_scaled * max|tf|, per gradient",
        "programs": [e for e in ordered if "skipped" not in e],
        "skipped": [e for e in ordered if "skipped" in e],
    }
    manifest_path.write_text(G._dump_json(manifest) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
