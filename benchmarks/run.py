"""onert-py beside LiteRT, onert (pip `onert`) and onnxruntime, on one machine in one run.

    python benchmarks/run.py [--threads 1] [--repeats 5] [--runs 15] [--out docs/performance.md]

(a)-(c) WHILE loops built with onert-py's ModelBuilder (and the same graphs built with `onnx.helper`
for onnxruntime): the loop counter and bound are constants inside the model (one model per n) and the
loop state is the only input, so onert 0.1.0, which rejects rank-0 *inputs* only, gets a fair try.
Per-iteration cost = (best time at n = 5200 - best time at n = 200) / 5000, runtimes paired A/B/A/B.
(d) the 14 mediapipe 0.10.14 models: median latency per runtime. (e) peak RSS of pose_landmark_full,
one fresh subprocess per runtime. OPENBLAS_NUM_THREADS/OMP_NUM_THREADS and every runtime's own thread
option are set to --threads for the whole run.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

if __name__ == "__main__":  # before numpy loads OpenBLAS
    _t = "1"
    for k, a in enumerate(sys.argv):
        if a == "--threads" and k + 1 < len(sys.argv):
            _t = sys.argv[k + 1]
        elif a.startswith("--threads="):
            _t = a.split("=", 1)[1]
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = _t

import datetime  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Callable  # noqa: E402

import numpy as np  # noqa: E402

import onert_py  # noqa: E402
from onert_py.schema.writer import ModelBuilder  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
N_SHORT, N_LONG = 200, 5200
# onert-py twice: the numpy cpu backend alone, and with the jit backend ("jit;cpu")
RUNTIMES = ("onert-py cpu", "onert-py jit", "LiteRT", "onert", "onnxruntime")
TFLITE_RUNTIMES = RUNTIMES[:4]
ONERT_PY_BACKENDS = {"onert-py cpu": "cpu", "onert-py jit": "jit;cpu"}
THREADS = int(os.environ.get("OPENBLAS_NUM_THREADS", "1"))


# ---------------------------------------------------------------- loop models (TFLite, ModelBuilder)

def loop_tflite(n: int, shape: list[int], body_ops: Callable, consts: dict) -> bytes:
    """main(v) -> v after `i = 0; while i < n: i += 1; v = body(v)`; i0 and n are constants."""
    mb = ModelBuilder()
    main, cond, body = mb.subgraph("main"), mb.subgraph("cond"), mb.subgraph("body")
    v = main.tensor("v", shape, np.float32)
    i0 = main.const("i0", np.array(0, np.int32))
    io, vo = main.tensor("i_out", [], np.int32), main.tensor("v_out", shape, np.float32)
    main.op("WHILE", [i0, v], [io, vo], cond_subgraph_index=1, body_subgraph_index=2)
    main.inputs, main.outputs = [v], [vo]
    ci, cv, go = cond.tensor("i", [], np.int32), cond.tensor("v", shape, np.float32), cond.tensor("go", [], np.bool_)
    cond.op("LESS", [ci, cond.const("n", np.array(n, np.int32))], [go])
    cond.inputs, cond.outputs = [ci, cv], [go]
    bi, bv = body.tensor("i", [], np.int32), body.tensor("v", shape, np.float32)
    i1 = body.tensor("i1", [], np.int32)
    body.op("ADD", [bi, body.const("one", np.array(1, np.int32))], [i1], fused_activation_function=0)
    v1 = body_ops(body, bv, {k: body.const(k, val) for k, val in consts.items()})
    body.inputs, body.outputs = [bi, bv], [i1, v1]
    return mb.to_bytes("tflite")


def scalar_body(sg, v, c):
    t, r = sg.tensor("t", [], np.float32), sg.tensor("r", [], np.float32)
    sg.op("MUL", [v, c["k"]], [t], fused_activation_function=0)
    sg.op("ADD", [t, c["b"]], [r], fused_activation_function=0)
    return r


def matmul_body(sg, v, c):
    mm, act = sg.tensor("mm", [512, 64], np.float32), sg.tensor("act", [512, 64], np.float32)
    sg.op("FULLY_CONNECTED", [v, c["w"], -1], [mm], fused_activation_function=1)  # RELU fused
    sg.op("SIN", [mm], [act])
    return act


def rnn_body(sg, v, c):
    # LiteRT's FULLY_CONNECTED rejects a fused TANH, so TANH is its own op (as the converter emits it)
    a, h = sg.tensor("a", [1, 256], np.float32), sg.tensor("h", [1, 256], np.float32)
    sg.op("FULLY_CONNECTED", [v, c["w"], c["bias"]], [a], fused_activation_function=0)
    sg.op("TANH", [a], [h])
    return h


# ---------------------------------------------------------------- the same loops in ONNX (onnx.helper)

def loop_onnx(n: int, shape: list[int], kind: str, consts: dict) -> bytes:
    from onnx import TensorProto, helper, numpy_helper
    f32 = TensorProto.FLOAT
    inits = [numpy_helper.from_array(np.array(n, np.int64), "M"),
             numpy_helper.from_array(np.array(True), "cond0")]
    body_inits = []
    if kind == "scalar":
        body_inits = [numpy_helper.from_array(consts["k"], "k"), numpy_helper.from_array(consts["b"], "b")]
        nodes = [helper.make_node("Mul", ["v_in", "k"], ["t"]), helper.make_node("Add", ["t", "b"], ["v_out"])]
    elif kind == "matmul":  # TFLite FC weights are [out, in]: y = v @ w.T
        body_inits = [numpy_helper.from_array(np.ascontiguousarray(consts["w"].T), "wt")]
        nodes = [helper.make_node("MatMul", ["v_in", "wt"], ["mm"]), helper.make_node("Relu", ["mm"], ["r"]),
                 helper.make_node("Sin", ["r"], ["v_out"])]
    else:
        body_inits = [numpy_helper.from_array(np.ascontiguousarray(consts["w"].T), "wt"),
                      numpy_helper.from_array(consts["bias"], "bias")]
        nodes = [helper.make_node("MatMul", ["v_in", "wt"], ["mm"]), helper.make_node("Add", ["mm", "bias"], ["a"]),
                 helper.make_node("Tanh", ["a"], ["v_out"])]
    nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    body = helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("iter", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", f32, shape)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", f32, shape)], body_inits)
    graph = helper.make_graph([helper.make_node("Loop", ["M", "cond0", "v"], ["v_final"], body=body)], "loop",
                              [helper.make_tensor_value_info("v", f32, shape)],
                              [helper.make_tensor_value_info("v_final", f32, shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def loop_cases() -> list[tuple[str, str, list[int], Callable, dict, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [
        ("(a) scalar body v = v*0.999 + 0.001", "scalar", [], scalar_body,
         {"k": np.array(0.999, np.float32), "b": np.array(0.001, np.float32)}, np.array(1.0, np.float32)),
        ("(b) 512x64 @ 64x64 + relu + sin", "matmul", [512, 64], matmul_body,
         {"w": (rng.standard_normal((64, 64)) / 8).astype(np.float32)},
         rng.standard_normal((512, 64)).astype(np.float32)),
        ("(c) 1x256 @ 256x256 tanh RNN", "rnn", [1, 256], rnn_body,
         {"w": (rng.standard_normal((256, 256)) / 16).astype(np.float32), "bias": np.zeros(256, np.float32)},
         rng.standard_normal((1, 256)).astype(np.float32)),
    ]


# ---------------------------------------------------------------- runners: (name, model) -> run(inputs)

def register_mediapipe_ops() -> None:
    """mediapipe's custom ops (Convolution2DTransposeBias in selfie_segmentation, Landmarks2TransformMatrix,
    TransformLandmarks and TransformTensorBilinear in face_landmark_with_attention) for onert-py, as an
    application using those models registers them. LiteRT has Convolution2DTransposeBias built in and
    none of the others; onert has none of them."""
    from onert_py.contrib import mediapipe_ops
    mediapipe_ops.register()


def _write_tmp(data: bytes, suffix: str) -> str:
    fd, path = tempfile.mkstemp(suffix=suffix)
    os.write(fd, data)
    os.close(fd)
    return path


def make_runner(name: str, tflite: str | bytes | None, onnx_model: bytes | None = None):
    """A callable running the model once on `name`; raises when that runtime cannot load it."""
    if name in ONERT_PY_BACKENDS:
        register_mediapipe_ops()
        sess = onert_py.infer.session(tflite, ONERT_PY_BACKENDS[name], num_threads=THREADS)
        return sess.infer
    if name == "LiteRT":
        from ai_edge_litert.interpreter import Interpreter
        kw = {"model_content": tflite} if isinstance(tflite, bytes) else {"model_path": str(tflite)}
        it = Interpreter(num_threads=THREADS, **kw)
        it.allocate_tensors()
        ins = [d["index"] for d in it.get_input_details()]
        outs = [d["index"] for d in it.get_output_details()]

        def run_litert(inputs):
            for i, x in zip(ins, inputs):
                it.set_tensor(i, x)
            it.invoke()
            return [it.get_tensor(o) for o in outs]
        return run_litert
    if name == "onert":
        from onert import infer
        path = _write_tmp(tflite, ".tflite") if isinstance(tflite, bytes) else str(tflite)
        sess = infer.session(path, "cpu")
        return sess.infer
    if name == "onnxruntime":
        if onnx_model is None:
            raise NotImplementedError("no ONNX model")
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = THREADS
        so.inter_op_num_threads = 1
        s = ort.InferenceSession(onnx_model, so, providers=["CPUExecutionProvider"])
        names = [i.name for i in s.get_inputs()]
        return lambda inputs: s.run(None, dict(zip(names, inputs)))
    raise ValueError(name)


def _onert_rejects_rank0() -> bool:
    """True when onert fails on a one-op model whose only difference from a working one is a rank-0 input."""
    from onert import infer

    def tiny(shape):
        mb = ModelBuilder()
        sg = mb.subgraph("main")
        x, y = sg.tensor("x", shape, np.float32), sg.tensor("y", shape, np.float32)
        sg.op("ADD", [x, x], [y], fused_activation_function=0)
        sg.inputs, sg.outputs = [x], [y]
        return infer.session(_write_tmp(mb.to_bytes("tflite"), ".tflite"), "cpu")
    tiny([1]).infer([np.ones([1], np.float32)])  # must work, or the cause is elsewhere
    try:
        tiny([]).infer([np.array(1.0, np.float32)])
    except Exception:  # noqa: BLE001
        return True
    return False


def _why(e: BaseException, native: list[str] | None = None) -> str:
    msg = " ".join(str(e).split())
    why = f"{type(e).__name__}{': ' + msg[:70] if msg else ''}"
    # onert's exceptions only say NNFW_STATUS_ERROR; the reason is what it printed to stderr
    said = [line for line in native or () if not line.startswith(("INFO", "WARNING"))]
    if said:
        why += "; " + re.sub(r"^(Fail to load model|Error during model prepare)\s*:\s*", "", said[-1])[:60]
    return f"cannot run ({why})"


@contextlib.contextmanager
def native_stderr(lines: list[str]):
    """Collect (and echo) what native code writes to file descriptor 2 inside the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            f.seek(0)
            text = f.read().decode(errors="replace")
            lines.extend(line.strip() for line in text.splitlines() if line.strip())
            sys.stderr.write(text)


def _timed(fn, inputs) -> float:
    t = time.perf_counter()
    fn(inputs)
    return time.perf_counter() - t


def bench_loops(repeats: int, log) -> list[tuple[str, dict]]:
    rows = []
    for label, kind, shape, body, consts, v0 in loop_cases():
        result: dict[str, object] = {}
        pairs = {}
        for name in RUNTIMES:
            try:
                fns = []
                for n in (N_SHORT, N_LONG):
                    fn = make_runner(name, loop_tflite(n, shape, body, consts), loop_onnx(n, shape, kind, consts))
                    out = fn([v0])  # warm-up and a check that it runs
                    if not np.all(np.isfinite(np.asarray(out[0], np.float64))):
                        raise RuntimeError("non-finite output")
                    fns.append(fn)
                pairs[name] = fns
            except Exception as e:  # noqa: BLE001 - a runtime that cannot run a model is reported
                if name == "onert" and v0.ndim == 0 and _onert_rejects_rank0():
                    result[name] = "cannot run (rank-0 input)"
                else:
                    result[name] = _why(e)
        best = {name: [float("inf"), float("inf")] for name in pairs}
        for _ in range(repeats):  # paired: every runtime once per round, A/B/A/B
            for name, (short, long_) in pairs.items():
                best[name][0] = min(best[name][0], _timed(short, [v0]))
                best[name][1] = min(best[name][1], _timed(long_, [v0]))
        for name, (s, l) in best.items():
            # µs per iteration; a compiled loop's is below the clock's resolution, and noise can make
            # the difference negative: 0 then
            result[name] = max((l - s) / (N_LONG - N_SHORT) * 1e6, 0.0)
        log(f"{label}: " + ", ".join(f"{k}={v:.3f} µs" if isinstance(v, float) else f"{k}: {v}"
                                      for k, v in result.items()))
        rows.append((label, result))
    return rows


# ---------------------------------------------------------------- mediapipe models

def mediapipe_models() -> list[Path]:
    sys.path.insert(0, str(ROOT / "tests" / "models"))
    from conftest import fetch_mediapipe_models  # the test suite's cached download
    return fetch_mediapipe_models()


def model_inputs(path: Path) -> list[np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter
    rng = np.random.default_rng(0)
    it = Interpreter(model_path=str(path))
    return [rng.random(tuple(d["shape"])).astype(d["dtype"]) for d in it.get_input_details()]


def _inputs_from_onert_py(path: Path) -> list[np.ndarray]:
    register_mediapipe_ops()
    rng = np.random.default_rng(0)
    s = onert_py.infer.session(str(path))
    return [rng.random([max(d, 1) for d in i.dims]).astype(i.dtype) for i in s.get_inputs_tensorinfo()]


def _mediapipe_runners(path: Path, names) -> tuple[dict, dict, list | None]:
    """({runtime: why it cannot run}, {runtime: run function}, the inputs) for one model."""
    result: dict[str, object] = {}
    try:
        inputs = model_inputs(path)
    except Exception:  # noqa: BLE001 - LiteRT without mediapipe's custom ops: ask onert-py
        try:
            inputs = _inputs_from_onert_py(path)
        except Exception as e:  # noqa: BLE001
            return {name: _why(e) for name in names}, {}, None
    fns = {}
    for name in names:
        native: list[str] = []
        try:
            with native_stderr(native):
                fn = make_runner(name, path)
                fn(inputs)
            fns[name] = fn
        except Exception as e:  # noqa: BLE001
            result[name] = _why(e, native)
    return result, fns, inputs


def _median_times(names, runs: int, path: Path) -> dict[str, object]:
    """Median ms per runtime over `runs` runs, the runtimes in turn (A/B/A/B), or why one cannot run."""
    result, fns, inputs = _mediapipe_runners(path, names)
    times = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            times[name].append(_timed(fn, inputs))
    result.update({name: float(np.median(ts)) * 1e3 for name, ts in times.items()})
    return result


# With more than one thread each runtime runs the models in a process of its own, ISOLATED_ROUNDS
# processes per runtime in turn, and a model's time is the median of the rounds' medians. Every
# runtime's workers spin a while after each run (numba's OpenMP, XNNPACK's pthreadpool, OpenBLAS): in
# one process that spinning takes the cores the next runtime's threads need (LiteRT's
# face_detection_short_range measured 2.49 ms interleaved at 2 threads, 0.59 ms alone), which measures
# the interference rather than the runtime.
ISOLATED_ROUNDS = 3


def bench_mediapipe(runs: int, log, isolate: bool = False) -> list[tuple[str, dict]]:
    paths = mediapipe_models()
    if isolate:
        rounds: dict[str, dict[str, list]] = {p.stem: {} for p in paths}
        for _ in range(ISOLATED_ROUNDS):
            for name in TFLITE_RUNTIMES:
                out = subprocess.run([sys.executable, __file__, "--threads", str(THREADS), "--worker", name,
                                      "--runs", str(runs)], capture_output=True, text=True, check=True).stdout
                for stem, value in json.loads(out.strip().splitlines()[-1]).items():
                    rounds[stem].setdefault(name, []).append(value)
    rows = []
    for path in paths:
        if isolate:
            result = {name: float(np.median(v)) if all(isinstance(x, float) for x in v) else
                      next(x for x in v if not isinstance(x, float)) for name, v in rounds[path.stem].items()}
        else:
            result = _median_times(TFLITE_RUNTIMES, runs, path)
        result["onnxruntime"] = "n/a (tflite)"
        log(f"{path.stem}: " + ", ".join(f"{k}={v:.2f} ms" if isinstance(v, float) else f"{k}: {v}"
                                          for k, v in result.items()))
        rows.append((path.stem, result))
    return rows


_RSS_SCRIPT = r"""
import os, resource, sys
sys.path.insert(0, {bench!r})
import numpy as np
from run import make_runner, model_inputs, _inputs_from_onert_py
from pathlib import Path
path = Path({path!r})
# inputs from the runtime under test itself, so no other runtime is loaded into this process
inputs = _inputs_from_onert_py(path) if {name!r}.startswith("onert-py") else model_inputs(path)
fn = make_runner({name!r}, path)
for _ in range(3):
    fn(inputs)
# VmHWM, not ru_maxrss: ru_maxrss keeps the parent's high-water mark across fork + exec
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")]
print(int(hwm[0].split()[1]) / 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def bench_rss(model_name: str, log) -> dict[str, object]:
    path = next(p for p in mediapipe_models() if p.stem == model_name)
    result: dict[str, object] = {}
    for name in TFLITE_RUNTIMES:
        code = _RSS_SCRIPT.format(bench=str(Path(__file__).parent), path=str(path), name=name)
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
        lines = proc.stdout.strip().splitlines()
        if proc.returncode == 0 and lines:
            result[name] = float(lines[-1])
        else:
            last = (proc.stderr.strip().splitlines() or ["?"])[-1]
            result[name] = f"cannot run ({last[:80]})"
    result["onnxruntime"] = "n/a (tflite)"
    log(f"peak RSS {model_name}: {result}")
    return result


# ---------------------------------------------------------------- report

def _cell(v, fmt: str) -> str:
    return fmt.format(v) if isinstance(v, float) else str(v)


def _ratio_value(res: dict, name: str) -> float | None:
    a, b = res.get(name), res.get("LiteRT")
    return a / b if isinstance(a, float) and isinstance(b, float) and b > 0 else None


def _ratio(res: dict, name: str) -> str:
    r = _ratio_value(res, name)
    return f"{r:.2f}×" if r is not None else "–"


def table(title: str, unit: str, rows: list[tuple[str, dict]], fmt: str) -> str:
    lines = [f"| {title} | " + " | ".join(f"{n} ({unit})" for n in RUNTIMES)
             + " | cpu / LiteRT | jit / LiteRT |", "|---|" + "---:|" * (len(RUNTIMES) + 2)]
    for label, res in rows:
        lines.append(f"| {label} | " + " | ".join(_cell(res.get(n, "–"), fmt) for n in RUNTIMES)
                     + f" | {_ratio(res, 'onert-py cpu')} | {_ratio(res, 'onert-py jit')} |")
    return "\n".join(lines)


def ratio_summary(rows: list[tuple[str, dict]]) -> str:
    """Median and worst onert-py / LiteRT ratio per backend over the rows LiteRT ran."""
    out = []
    for name in ONERT_PY_BACKENDS:
        rs = [r for r in (_ratio_value(res, name) for _, res in rows) if r is not None]
        if rs:
            out.append(f"{name} / LiteRT over {len(rs)} models: median {float(np.median(rs)):.2f}×, "
                       f"worst {max(rs):.2f}×")
    return "; ".join(out)


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import ai_edge_litert
    try:
        from importlib.metadata import version
        versions = {p: version(p) for p in ("ai-edge-litert", "onert", "onnxruntime", "numpy")}
    except Exception:  # noqa: BLE001
        versions = {}
    vs = ", ".join(f"{k} {v}" for k, v in versions.items())
    del ai_edge_litert
    return (f"{platform.system()} {platform.machine()}, {cpu}, {os.cpu_count()} logical CPUs, "
            f"Python {platform.python_version()}; {vs}")


# The user-facing summary of the profiles; the developers' log (per-op profiles, kernel changes and what
# they measured, open suggestions) is benchmarks/HOTSPOTS.md, kept out of the user docs.
WHERE_THE_TIME_GOES = """## Where the time goes

In the mediapipe models CONV_2D and DEPTHWISE_CONV_2D take 75–90 % of onert-py's time (`onert-py bench
MODEL --profile` shows it per op). On the cpu backend they are numpy/BLAS calls (one sgemm per pointwise
conv, one einsum per depthwise conv); LiteRT's XNNPACK computes convolutions in register-blocked
kernels that reach 1.2–1.6x OpenBLAS's rate on these shapes (small K and N), which is most of the cpu
backend's gap. The jit backend runs depthwise convolutions as direct numba kernels and the others as a
register-blocked GEMM of its own (explicit SIMD vectors, bias and activation in registers, windows read
in place without an im2col copy), then one compiled pass for the elementwise ops that follow (a
residual ADD, PRELU, RELU, HARD_SWISH: fused, docs/jit.md). Profiles, the kernel changes made and what
they measured are in [benchmarks/HOTSPOTS.md](../benchmarks/HOTSPOTS.md)."""


# The two executors: measured by benchmarks/dataflow.py, whose table is in docs/dataflow.md.
EXECUTORS = """## Linear and dataflow executors

`executor="dataflow"` (docs/dataflow.md) lowers IF/WHILE to Switch/Merge/Enter/Exit/NextIteration and
runs ready ops on a small thread pool; `python benchmarks/dataflow.py` times it beside the default linear
executor, and its table is in [docs/dataflow.md](dataflow.md#when-it-pays). It pays when control flow
holds heavy independent work (two matmul chains in a WHILE body: 1.75x on 2 threads; independent
iterations: 1.7x; a branch beside other work: 1.9x) and costs ~2 µs of Python per lowered node (5-10
under load), so the converter-made scalar loop runs ~20x slower per iteration than on the linear
executor's fused loop:
keep the linear executor for small-tensor loops."""


def render(loops, mp, rss, args) -> str:
    """The document: the sections of what ran (--only), the executors' note with the loops, where the
    time goes always."""
    cmd = "python benchmarks/run.py " + " ".join(shlex.quote(a) for a in (args.argv or []))
    models_how = (f"the median of {ISOLATED_ROUNDS} rounds' medians of {args.runs} runs, each runtime in a "
                  "process of its own (runtimes' spinning workers would take each other's cores)"
                  if getattr(args, "isolate", False) else f"the median of {args.runs} paired runs")
    title = "mediapipe models on the cpu and jit backends" if mp and not loops else "onert-py performance"
    sections = [f"""# {title}

Generated by `{cmd.strip()}` on {datetime.date.today().isoformat()}.

- Machine: {machine()}
- Threads: `OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}`,
  `OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}` for every runtime in this run; LiteRT
  `num_threads={THREADS}`, onnxruntime `intra_op_num_threads={THREADS}`.
- The machine is shared (other jobs may run beside the benchmark): loops take the best of
  {args.repeats} paired rounds, models {models_how}.
- onert = the pip `onert` package (Samsung ONE runtime); onnxruntime runs the loop models only,
  rebuilt with `onnx.helper` as the same graph (Loop + MatMul/Relu/Sin/Tanh): converting the mediapipe
  .tflite files needs tf2onnx, which is not a trivial conversion, so it is marked n/a there."""]
    if loops:
        sections.append(f"""## WHILE loops (µs per iteration)

Models built with onert-py's `ModelBuilder` (not the TFLite converter: the builder keeps the op set
identical across TFLite runtimes and the ONNX twin). Counter and bound are constants in the model (one
model per n); the loop state is the only input (rank 0 in (a)). Per iteration =
(best t(n={N_LONG}) − best t(n={N_SHORT})) / {N_LONG - N_SHORT}.

{table("WHILE body", "µs", loops, "{:.3f}")}""")
    if mp:
        sections.append(f"""## mediapipe 0.10.14 models (median latency, ms)

Inputs: seeded uniform [0, 1) of each model's input shape. Some models use mediapipe's custom ops.
Convolution2DTransposeBias (selfie_segmentation) runs by default on LiteRT (its XNNPACK delegate) and
on onert-py; Landmarks2TransformMatrix / TransformLandmarks / TransformTensorBilinear
(face_landmark_with_attention) run on onert-py with `--custom-ops mediapipe` (Python:
`Interpreter(custom_op_registerers=["mediapipe"])`, done here, as an application using these models
would) and not on LiteRT's pip wheel; a stock onert build has none of them. "cannot run" cells give the
error each runtime raised.

{table("model", "ms", mp, "{:.2f}")}

{ratio_summary(mp)}""")
    if rss:
        sections.append(f"""## Peak RSS running pose_landmark_full (MB)

One fresh subprocess per runtime (python + numpy + onert-py's loader + the runtime + the model,
3 inferences); `VmHWM` from /proc/self/status at the end (ru_maxrss would inherit the parent's peak).

{table("peak RSS", "MB", [("pose_landmark_full", rss)], "{:.0f}")}""")
    if loops:
        sections.append(EXECUTORS)
    sections.append(WHERE_THE_TIME_GOES)
    return "\n\n".join(sections) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP/runtime threads for every runtime")
    ap.add_argument("--repeats", type=int, default=5, help="paired rounds per WHILE model (best of)")
    ap.add_argument("--runs", type=int, default=15, help="paired runs per mediapipe model (median of)")
    ap.add_argument("--only", choices=["loops", "models", "rss"], action="append")
    ap.add_argument("--out", default=str(ROOT / "docs" / "performance.md"))
    ap.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=None,
                    help="each runtime in its own processes (default: with more than one thread)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)   # one runtime's medians, as JSON (isolated runs)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps({p.stem: _median_times((args.worker,), args.runs, p)[args.worker]
                          for p in mediapipe_models()}))
        return 0
    if args.isolate is None:
        args.isolate = args.threads > 1
    args.argv = sys.argv[1:] if argv is None else argv
    only = set(args.only or ["loops", "models", "rss"])

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    loops = bench_loops(args.repeats, log) if "loops" in only else []
    mp = bench_mediapipe(args.runs, log, args.isolate) if "models" in only else []
    rss = bench_rss("pose_landmark_full", log) if "rss" in only else {}
    doc = render(loops, mp, rss, args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(doc)
    print(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
