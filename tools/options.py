"""Options and model loading shared by the `onert-py` subcommands: the argparse option adders (the model,
--signature, --max-while-iterations, --custom-ops, the backend options --backends, --op-backend and
--num-threads, the executor options --executor, --parallel-iterations and --inter-op-threads, and the
input options of `run`, `compare` and `bench`), checks on option values, reading a model (and listing its
Circle-only ops) and opening a session from the parsed args."""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onert_py
from onert_py.compiler.compile import backend_names, parse_op_backend
from onert_py.errors import PrepareError, UnsupportedOpError
from onert_py.exec.executor_choice import EXECUTOR_ENV, EXECUTORS, dataflow_options, default_inter_op_threads
from onert_py.ir import Model
from onert_py.loader import load_model
from onert_py.tools.custom_ops import custom_ops_hint, load_custom_ops
from onert_py.tools.errors import CliError


def read_model(path: str) -> Model:
    """Load a model, turning a missing path into a CliError before the loader sees it."""
    p = Path(path)
    if not p.exists():
        raise CliError(f"model file not found: {path}")
    return load_model(p)


def circle_only_ops(model: Model) -> list[str]:
    """Ops with Circle's negative op codes, which no TFLite reader (LiteRT included) accepts."""
    from onert_py.schema.opcodes import op_code
    return sorted({op.opcode for sg in model.subgraphs for op in sg.operations
                   if op.opcode != "CUSTOM" and op_code(op.opcode) < 0})


# ---- options shared by run, compare and bench

def add_model_options(p: argparse.ArgumentParser, verb: str = "run") -> None:
    """The model argument and how to open it (--signature, --max-while-iterations, --custom-ops)."""
    p.add_argument("model", help=".tflite / .circle file or nnpackage directory")
    p.add_argument("--signature", metavar="KEY",
                   help=f"{verb} this signature's subgraph (default: subgraph 0); see `onert-py inspect`")
    p.add_argument("--max-while-iterations", type=int, default=None, metavar="N",
                   help="fail a WHILE loop that runs more than N iterations")
    add_custom_ops_option(p)
    add_backend_options(p)


def add_custom_ops_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--custom-ops", action="append", default=[], metavar="MODULE",
                   help="add custom-op kernels (repeatable): 'mediapipe' (mediapipe's custom ops), a module "
                        "name or .py file whose register() is called, or 'module:function'; the Python "
                        "API takes the same (Interpreter(custom_op_registerers=[...])). Custom ops LiteRT "
                        "runs by default (mediapipe's Convolution2DTransposeBias) need no flag")


def add_backend_options(p: argparse.ArgumentParser, threads: bool = True) -> None:
    """--backends, --op-backend (onert's BACKENDS and OP_BACKEND_MAP) and, for verbs that run, --num-threads."""
    p.add_argument("--backends", metavar="LIST",
                   help="compute backends to try for each op, in order, ';'-separated as onert's BACKENDS: "
                        "'jit;cpu' (the default when numba is installed; else 'cpu'; ONERT_PY_BACKENDS "
                        "sets another default) or 'cpu'")
    p.add_argument("--op-backend", action="append", default=[], metavar="KEY=BACKEND",
                   help="run the ops KEY on BACKEND, KEY an op type (CONV_2D, a custom op's name) or "
                        "SUBGRAPH:INDEX (repeatable, or ';'-joined as onert's OP_BACKEND_MAP); a backend "
                        "that cannot run a forced op is an error")
    if threads:
        # benchmark_model's spelling too, unlisted (a second option keeps argparse's messages naming --num-threads)
        p.add_argument("--num_threads", dest="num_threads", type=int, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        p.add_argument("--num-threads", type=int, default=-1, metavar="N",
                       help="threads for BLAS (numpy's matrix products) and the jit kernels, as "
                            "benchmark_model's --num_threads (default -1: each library's own default)")


@dataclass(frozen=True)
class BackendChoice:
    """The checked backend options: what a session is opened with, and what to report."""
    backends: str | None           # --backends as given (None: the session's default)
    names: tuple[str, ...]         # the compute backends tried, in order
    op_backend: str | None         # --op-backend joined with ';' (the session also merges the env map)
    forced: dict[str, str]         # the merged map, parsed
    num_threads: int | None        # None: the libraries' default (--num-threads -1)


def backend_choice(args: argparse.Namespace, model: Model | None = None) -> BackendChoice:
    """Check --backends, --op-backend and --num-threads (and the ONERT_PY_BACKENDS /
    ONERT_PY_OP_BACKEND_MAP defaults), each mistake a one-line CliError naming the option. With a
    model, an --op-backend key must name one of its ops."""
    n = getattr(args, "num_threads", -1)
    if n == 0 or n < -1:
        raise CliError(f"--num-threads must be >= 1, or -1 for the libraries' default; got {n}")
    spec = getattr(args, "backends", None)
    if spec is not None and not spec.strip(" ;"):
        raise CliError("--backends is empty; give e.g. 'jit;cpu' or 'cpu'")
    try:
        names = backend_names(spec)
    except ValueError as e:
        where = f"--backends {spec}" if spec is not None else \
            f"ONERT_PY_BACKENDS={os.environ.get('ONERT_PY_BACKENDS', '')}"
        raise CliError(f"{where}: {e}") from None
    if spec is not None and "jit" in spec.replace(" ", "").split(";") and "jit" not in names:
        # backend_names passes over jit when numba is missing and another backend is left, as onert
        # skips a backend it cannot load; asked for by name, the user should hear why it did not run.
        from onert_py.backends import jit
        raise CliError(f"--backends {spec}: the jit backend needs numba ({jit.why_not()}); install it with "
                       "pip install \"onert-py[jit]\", or give --backends cpu")
    joined = ";".join(args.op_backend) if getattr(args, "op_backend", None) else None
    try:
        forced = parse_op_backend(joined)
    except ValueError as e:
        raise CliError(option_message(str(e))) from None
    if model is not None and joined:
        # only the option's own keys: an ONERT_PY_OP_BACKEND_MAP is often set for more models than one
        from_env = parse_op_backend(None) if os.environ.get("ONERT_PY_OP_BACKEND_MAP") else {}
        _check_op_backend_keys(model, {k: v for k, v in forced.items() if k not in from_env})
    return BackendChoice(spec, names, joined, forced, None if n == -1 else n)


def option_message(message: str) -> str:
    """compile.parse_op_backend and assign_backend name the keyword argument; the user typed the option."""
    return "--op-backend" + message[len("op_backend"):] if message.startswith("op_backend") else message


def _check_op_backend_keys(model: Model, forced: dict[str, str]) -> None:
    """A key that matches no op is a typo (CONV2D) or a wrong index: say so instead of ignoring it."""
    types = {op.kernel_name for sg in model.subgraphs for op in sg.operations}
    for key, backend in forced.items():
        if ":" in key:
            s, i = map(int, key.split(":"))
            if not 0 <= s < len(model.subgraphs):
                raise CliError(f"--op-backend {key}={backend}: the model has no subgraph {s} (it has "
                               f"0..{len(model.subgraphs) - 1})")
            n = len(model.subgraphs[s].operations)
            if not 0 <= i < n:
                raise CliError(f"--op-backend {key}={backend}: subgraph {s} has no operator {i} (it has {n})")
        elif key not in types:
            raise CliError(f"--op-backend {key}={backend}: the model has no {key} op (its op types: "
                           f"{', '.join(sorted(types)) or 'none'})")


def add_executor_options(p: argparse.ArgumentParser) -> None:
    """--executor, --parallel-iterations, --inter-op-threads: the session's executor options
    (docs/dataflow.md), for the verbs that run a model."""
    p.add_argument("--executor", choices=EXECUTORS, default=None,
                   help="how control flow runs: 'linear' (the default; ONERT_PY_EXECUTOR sets another) runs "
                        "IF/WHILE ops whole, one op after another; 'dataflow' lowers them to "
                        "Switch/Merge/Enter/Exit/NextIteration and runs every op once its inputs are ready, "
                        "independent ops on a thread pool (docs/dataflow.md; `onert-py view --lowered` "
                        "draws that graph). The outputs are the same")
    p.add_argument("--parallel-iterations", type=int, default=None, metavar="N",
                   help="with --executor dataflow: at most N iterations of one loop live at once (default "
                        "10, TensorFlow's); 1 runs sequentially in the linear executor's order")
    p.add_argument("--inter-op-threads", type=int, default=None, metavar="N",
                   help="with --executor dataflow: ops run at once (default min(4, cores)); 1 runs "
                        "sequentially in the calling thread")


@dataclass(frozen=True)
class ExecutorChoice:
    """The checked executor options: what a session is opened with, and what to report."""
    executor: str                  # "linear" or "dataflow" (--executor, else ONERT_PY_EXECUTOR, else linear)
    parallel_iterations: int
    inter_op_threads: int

    def session_options(self) -> dict[str, Any]:
        return {"executor": self.executor, "parallel_iterations": self.parallel_iterations,
                "inter_op_threads": self.inter_op_threads}

    def describe(self) -> str:
        """"executor: linear" / "executor: dataflow (parallel_iterations 10, inter_op_threads 2)"."""
        if self.executor == "linear":
            return "executor: linear"
        return (f"executor: dataflow (parallel_iterations {self.parallel_iterations}, inter_op_threads "
                f"{self.inter_op_threads})")


def executor_choice(args: argparse.Namespace) -> ExecutorChoice:
    """Check --executor, --parallel-iterations and --inter-op-threads (and ONERT_PY_EXECUTOR), each
    mistake a one-line CliError naming the option; the dataflow-only options with the linear executor
    are a mistake too (they would change nothing)."""
    executor = getattr(args, "executor", None)
    if executor is None:
        executor = os.environ.get(EXECUTOR_ENV, "").strip() or "linear"
        if executor not in EXECUTORS:
            raise CliError(f"{EXECUTOR_ENV}={executor}: the executor must be one of {', '.join(EXECUTORS)}")
    given = {"--parallel-iterations": getattr(args, "parallel_iterations", None),
             "--inter-op-threads": getattr(args, "inter_op_threads", None)}
    for option, value in given.items():
        if value is not None and value < 1:
            raise CliError(f"{option} must be >= 1, got {value}")
    if executor == "linear":
        extra = [option for option, value in given.items() if value is not None]
        if extra:
            verb = "applies" if len(extra) == 1 else "apply"
            raise CliError(f"{' and '.join(extra)} only {verb} to the dataflow executor: add --executor dataflow")
    choice = ExecutorChoice(executor, given["--parallel-iterations"] or 10,
                            given["--inter-op-threads"] or default_inter_op_threads())
    dataflow_options(choice.executor, choice.parallel_iterations, choice.inter_op_threads)  # the API's own check
    return choice


def add_input_options(p: argparse.ArgumentParser, save: bool = False) -> None:
    """How inputs are chosen; `run`, `compare` and `bench` pick them the same way."""
    p.add_argument("--input", action="append", default=[], metavar="NAME_OR_INDEX=FILE",
                   help="an input from a .npy file, or from raw bytes (any other suffix, e.g. x=x.bin: "
                        "little-endian, C order, the model's dtype and shape after --input-shape, as "
                        "onert_run's raw inputs) (repeatable); or an .npz with one array per input "
                        "name. Inputs not given are seeded random values")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME_OR_INDEX=D0,D1,...",
                   help="fix the shape of an input with -1 (dynamic) dims (repeatable), e.g. "
                        "input=1,224,224,3; without it random inputs use 1 for every -1")
    p.add_argument("--input-range", action="append", default=[], metavar="NAME_OR_INDEX=LO,HI",
                   help="draw a random input uniformly from LO..HI (repeatable): integers in [LO, HI] "
                        "(both inclusive, as benchmark_model's --input_layer_value_range), floats in "
                        "[LO, HI). Default: floats standard normal; ints in [-5, 5], or [0, N-1] for "
                        "an input used as indices of a GATHER/EMBEDDING_LOOKUP over N rows")
    p.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")
    if save:
        p.add_argument("--save-inputs", metavar="IN.npz",
                       help="save the inputs used, keyed by input name (reuse them with --input IN.npz)")


def check_writable(path: str | None, option: str) -> None:
    """Fail before a long run, not after it, when an output file cannot be written."""
    if not path:
        return
    p = Path(path)
    if p.is_dir():
        raise CliError(f"{option} {path} is a directory; give a file name")
    if not p.resolve().parent.is_dir():
        raise CliError(f"cannot write {path}: directory {p.parent} does not exist")


def check_distinct_files(**paths: str | None) -> None:
    """Output files given to two options (keyword = option name with _ for -) must differ: one would
    overwrite the other."""
    given = [(f"--{k.replace('_', '-')}", Path(v).resolve()) for k, v in paths.items() if v]
    for i, (a, pa) in enumerate(given):
        for b, pb in given[i + 1:]:
            if pa == pb:
                raise CliError(f"{a} and {b} name the same file; give two")


def check_session_args(args: argparse.Namespace) -> None:
    if args.max_while_iterations is not None and args.max_while_iterations < 0:
        raise CliError("--max-while-iterations must be >= 0")
    if getattr(args, "seed", 0) < 0:
        raise CliError("--seed must be >= 0")
    check_writable(getattr(args, "save_inputs", None), "--save-inputs")


def open_session(args: argparse.Namespace, **session_options: Any) -> Any:
    """Load custom ops, the model and compile a session on the chosen backends and threads (plus
    `session_options` for infer.session), all failures as one-line errors."""
    check_session_args(args)
    if hasattr(args, "executor"):   # the verb has the executor options
        session_options = {**executor_choice(args).session_options(), **session_options}
    load_custom_ops(args.custom_ops)
    model = read_model(args.model)
    choice = backend_choice(args, model)
    try:
        return onert_py.infer.session(model, choice.backends, max_while_iterations=args.max_while_iterations,
                                      signature=args.signature, op_backend=choice.op_backend,
                                      num_threads=choice.num_threads, **session_options)
    except UnsupportedOpError as e:
        hint = "" if "cpu" in choice.names else \
            f"; the {'/'.join(choice.names)} backend takes only some ops: add cpu, e.g. --backends 'jit;cpu'"
        raise CliError(f"{e}{custom_ops_hint(model)}{hint}") from None
    except PrepareError as e:
        # an op forced onto a backend that declines it: name the option, not the keyword argument
        ours = choice.op_backend and not os.environ.get("ONERT_PY_OP_BACKEND_MAP")
        raise CliError(option_message(str(e)) if ours else str(e)) from None
