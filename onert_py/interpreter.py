"""A LiteRT-compatible `Interpreter`: swap `from ai_edge_litert.interpreter import Interpreter` for
`from onert_py import Interpreter` and the same script runs on onert-py.

Behaviour follows LiteRT 2.x (`ai_edge_litert.interpreter`): the same methods, details dicts with the
same keys and value types, the same exception types for misuse (ValueError for bad dtype/shape/index,
RuntimeError for invoke before allocate_tensors or while a tensor() view is alive).

Shapes: allocate_tensors() propagates the input shapes through every subgraph with LiteRT's rules
(onert_py.compiler.shape_inference, LITERT policy), so get_tensor_details()/get_output_details() report
what LiteRT reports before the first invoke: a subgraph is prepared up to its first op with a dynamic
output (one whose shape depends on values not known at prepare time); tensors after it keep their
previous shapes (declared, or those of the last invoke) until invoke. A resize that contradicts the
model (e.g. a constant-shape RESHAPE) fails in allocate_tensors with a RuntimeError naming the op and
shapes, as in LiteRT. Results are cached per input-shape signature, so resizing back costs a look-up.

Differences (documented, deliberate; tests/api/test_interpreter_parity.py pins each as a strict xfail):
- No delegates: `experimental_delegates` is accepted and ignored (with a warning), so
  `_get_ops_details` never lists LiteRT's XNNPACK "DELEGATE" nodes; `load_delegate` cannot load one.
- A SignatureRunner does not pin the interpreter (LiteRT's does, by accident of refcounting, which
  makes `invoke()` refuse to run while a runner object exists).
- tensor(i)() of a rank-0 tensor is a writeable 0-d view (LiteRT's is a numpy scalar copy: writes
  through it are lost).
- set_tensor with an array of the right type in the other byte order converts it (LiteRT copies the
  raw bytes); Python lists are accepted for string tensors too; model_content may be any buffer.
- An input resized so that an op's sizes no longer fit (e.g. FULLY_CONNECTED with an input that is not
  a multiple of its input size) fails in invoke with RuntimeError (LiteRT silently ignores elements).
- Where LiteRT crashes we raise ValueError: set_tensor on a constant (tensor() of one is read-only),
  _get_tensor_details with a bad subgraph index.
- set_tensor/tensor() on a computed tensor that is neither an input nor a variable stores a value for
  reading back but does not feed the computation. Variable tensors (RNN state) are fed, as in LiteRT.

Threads: every call that reads or changes the interpreter's state (set_tensor, invoke, get_tensor,
allocate_tensors, resize_tensor_input, reset_all_variables, a SignatureRunner call) holds a lock, so
calls from several threads run one at a time and an invoke never sees half-written inputs. A sequence
of calls is not atomic: two threads doing set_tensor/invoke/get_tensor on one interpreter interleave
(one may read the other's outputs), as with LiteRT, so give each thread its own interpreter or use
SignatureRunner calls, which are atomic. tensor() views bypass the lock.
"""
from __future__ import annotations

import enum
import operator
import sys
import warnings
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from onert_py import custom_ops
from onert_py.compiler import compile_model
from onert_py.exec.threads import RunLock, thread_limit
from onert_py.compiler.shape_inference import LITERT, ShapeCache
from onert_py.compiler.specialize import Specializations, has_dynamic_shapes, relaxed_model, specialized_for
from onert_py.errors import ExecutionError, OnertPyError, PrepareError, ResourceRuntimeError, UnsupportedOpError
from onert_py.exec.budget import requested_max_memory, resolve_max_memory
from onert_py.exec.executor_choice import dataflow_options
from onert_py.exec.runtime import RuntimeOptions, RuntimeState, check_timeout
from onert_py.ir import Model, Subgraph, Tensor
from onert_py.loader import load_model
from onert_py.loader.flatbuffer import subgraph_calls

__all__ = ["Interpreter", "InterpreterWithCustomOps", "SignatureRunner", "OpResolverType", "load_delegate"]


class OpResolverType(enum.Enum):
    """Mirrors LiteRT's enum; onert-py has one resolver, so every value means the same thing."""
    AUTO = 0
    BUILTIN = 1
    BUILTIN_REF = 2
    BUILTIN_WITHOUT_DEFAULT_DELEGATES = 3


def load_delegate(library: str, options: dict[str, Any] | None = None) -> Any:
    """LiteRT's delegate loader. A library that cannot be opened raises OSError, as in LiteRT (ctypes);
    any other raises the ValueError LiteRT raises for a delegate it cannot create, since onert-py runs
    every op itself and has no use for one."""
    import ctypes
    ctypes.CDLL(library)
    raise ValueError(f"Failed to load delegate from {library}: onert-py runs without delegates "
                     f"(its cpu backend runs every op; pass no experimental_delegates)")


# The numpy type LiteRT reports per schema type; None = LiteRT cannot describe it (skipped by
# get_tensor_details, like LiteRT does for BFLOAT16).
_DETAIL_TYPES: dict[str, type | None] = {
    "FLOAT32": np.float32, "FLOAT16": np.float16, "FLOAT64": np.float64, "INT32": np.int32,
    "UINT8": np.uint8, "INT64": np.int64, "STRING": np.bytes_, "BOOL": np.bool_, "INT16": np.int16,
    "COMPLEX64": np.complex64, "INT8": np.int8, "COMPLEX128": np.complex128, "UINT64": np.uint64,
    "RESOURCE": np.object_, "VARIANT": np.object_, "UINT32": np.uint32, "UINT16": np.uint16,
    "INT4": np.int8, "BFLOAT16": None,
}

_UNSAFE_MESSAGE = ("There is at least 1 reference to internal data in the interpreter in the form of a "
                   "numpy array or slice (from tensor(...)()). Be sure to only hold the function "
                   "returned from tensor() if you are using raw data access.")


def _type_name(dtype: np.dtype) -> str:
    """LiteRT-style name of a numpy dtype for messages (FLOAT64, INT64, STRING...)."""
    if dtype.kind in "OSU":
        return "STRING"
    return dtype.name.upper()


def _refs(objects: Iterable[Any]) -> int:
    """Largest reference count among `objects`, as seen from inside this loop."""
    return max((sys.getrefcount(o) for o in objects), default=0)


class _Buffer:
    """Interpreter-owned memory of one tensor. User views are made with np.frombuffer on `raw`, so
    every live view (and every slice of it, which keeps the view alive) adds one reference to `raw`:
    the same refcount test LiteRT applies to its wrapper object."""
    __slots__ = ("raw", "array")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype):
        self.raw = bytearray(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
        self.array = np.frombuffer(self.raw, dtype=dtype).reshape(shape)

    def view(self) -> np.ndarray:
        return np.frombuffer(self.raw, dtype=self.array.dtype).reshape(self.array.shape)


def _raws(buffers: Iterable[Any]) -> list[bytearray]:
    return [b.raw for b in buffers if isinstance(b, _Buffer)]


# References a buffer's memory has when no user view is alive: the _Buffer slot, the list made by
# _raws, the buffer's own internal array, and _refs' loop variable and getrefcount argument.
_PROBE = [_Buffer((1,), np.dtype(np.uint8))]
_SAFE_REFS = _refs(_raws(_PROBE))
del _PROBE


def _zeros(shape: tuple[int, ...], t: Tensor) -> np.ndarray:
    if t.dtype == np.dtype(object):
        arr = np.empty(shape, dtype=object)
        arr.fill(b"")
        return arr
    return np.zeros(shape, dtype=t.dtype)


class _SubgraphState:
    """Per subgraph: current dims of every tensor, which tensors are allocated, input storage and the
    outputs of the last invoke."""

    def __init__(self, sg: Subgraph):
        self.sg = sg
        n = len(sg.tensors)
        self.shapes: list[tuple[int, ...]] = [tuple(t.shape) for t in sg.tensors]
        self.allocated = [t.data is not None for t in sg.tensors]  # constants are always readable
        self.ready = False
        self.inputs: dict[int, _Buffer | np.ndarray] = {}   # object arrays for string inputs
        self.values: dict[int, np.ndarray] = {}               # last outputs / set_tensor on others
        self.exposed: dict[int, _Buffer] = {}                 # tensor() buffers of non-inputs
        self.input_shapes_at_invoke: list[tuple[int, ...]] | None = None
        self.prepared_for: tuple | None = None   # input shapes the current shapes were propagated from
        self.used = set(sg.inputs) | set(sg.outputs)
        for op in sg.operations:
            self.used.update(i for i in (*op.inputs, *op.outputs, *op.intermediates) if 0 <= i < n)


class Interpreter:
    """Runs a TFLite/Circle model with LiteRT's Python API.

    custom_op_registerers: run before the model is prepared, each given as the CLI's --custom-ops
    takes it (onert_py/custom_ops.py): a short name ("mediapipe"), a module or .py file with a
    `register()`, "module:function", or a callable. A callable with no parameters registers its ops
    itself with `onert_py.register_custom_op`; a callable with one parameter receives a hook
    `register(name, fn, *, prepare=False)` that registers `fn` as the kernel of CUSTOM op `name`
    (a plain function as `register_custom_op` takes it, or a prepare function when `prepare=True`),
    replacing any earlier registration so that creating several interpreters is harmless. Custom ops
    LiteRT runs by default (mediapipe's Convolution2DTransposeBias) need no registerer.

    executor, parallel_iterations, inter_op_threads: onert-py's, as `infer.session` takes them
    (docs/dataflow.md). executor="dataflow" runs control flow lowered to Switch/Merge/Enter/Exit/
    NextIteration, independent ops on up to inter_op_threads threads, in invoke() and in signature
    runners alike; the outputs are the linear executor's. Its intermediate values live in tokens, not
    tensors: experimental_preserve_all_tensors is refused with it, and get_tensor() of an intermediate
    tensor shows zeros (LiteRT without preserve_all_tensors shows reused memory).
    """

    def __init__(self, model_path: Any = None, model_content: bytes | None = None,
                 experimental_delegates: Sequence[Any] | None = None, num_threads: int | None = None,
                 experimental_op_resolver_type: Any = OpResolverType.AUTO,
                 experimental_preserve_all_tensors: bool = False,
                 experimental_disable_delegate_clustering: bool = False,
                 experimental_default_delegate_latest_features: bool = False,
                 experimental_compress_quantization_zero_points: bool = False,
                 experimental_disable_delegate_node_fusion: bool = False,
                 experimental_force_delegate_node_profiling: bool = False,
                 custom_op_registerers: Sequence[Any] | None = None, *, backends: str | None = None,
                 max_while_iterations: int | None = None, op_backend: str | dict | None = None,
                 timeout: float | None = None, max_memory: int | float | str | None = None,
                 executor: str | None = None, parallel_iterations: int = 10, inter_op_threads: int | None = None):
        if getattr(experimental_op_resolver_type, "name", None) not in OpResolverType.__members__:
            raise ValueError(f"Unrecognized passed in op resolver type: {experimental_op_resolver_type}")
        # executor: as infer.session's (docs/dataflow.md): "linear" (default; ONERT_PY_EXECUTOR sets it from
        # outside) or "dataflow", with parallel_iterations and inter_op_threads; checked before loading
        self._dataflow = dataflow_options(executor, parallel_iterations, inter_op_threads)
        if self._dataflow is not None and experimental_preserve_all_tensors:
            # intermediate values live in the dataflow executor's tokens, never in tensors get_tensor reads
            raise ValueError("experimental_preserve_all_tensors keeps the intermediate tensors of the linear "
                             "executor; the dataflow executor does not keep them: use executor='linear'")
        if experimental_preserve_all_tensors and experimental_op_resolver_type.name in ("AUTO", "BUILTIN"):
            warnings.warn("Enabling `experimental_preserve_all_tensors` keeps every intermediate tensor "
                          "alive; use it for debugging only.", stacklevel=2)
        if num_threads is not None:
            if not isinstance(num_threads, int):
                raise ValueError("type of num_threads should be int")
            if num_threads < 1:
                raise ValueError("num_threads should >= 1")
        if model_path and not model_content:
            self._model: Model = load_model(model_path, max_memory=requested_max_memory(max_memory))
        elif model_content and not model_path:
            self._model = load_model(model_content, max_memory=requested_max_memory(max_memory))
        elif not model_content and not model_path:
            raise ValueError("`model_path` or `model_content` must be specified.")
        else:
            raise ValueError("Can't both provide `model_path` and `model_content`")
        if experimental_delegates:
            warnings.warn("onert-py runs without delegates; experimental_delegates are ignored",
                          stacklevel=2)
        self._experimental_compress_quantization_zero_points = experimental_compress_quantization_zero_points
        self._backends, self._op_backend = backends, op_backend
        self._runtime = RuntimeState(RuntimeOptions(
            max_while_iterations=max_while_iterations, num_threads=num_threads, timeout=check_timeout(timeout),
            preserve_all_tensors=bool(experimental_preserve_all_tensors),
            # the session's memory budget (exec/budget.py): None = ONERT_PY_MAX_MEMORY or 4 x file + 1 GiB
            max_memory=resolve_max_memory(requested_max_memory(max_memory), self._model)))
        if self._dataflow is not None:
            self._runtime.options.arena = False   # tokens hold values as long as they need: no shared slots
            self._runtime.options.fuse_ops = False   # its lowered graph reads every op's outputs
        self._dataflow_executors: dict = {}      # subgraph -> its dataflow executor (built on first invoke)
        self._compiled_model = self._model       # the model the executors were compiled from (relaxed or not)
        for registerer in list(getattr(self, "_custom_op_registerers", [])) + list(custom_op_registerers or []):
            custom_ops.run(registerer)
        # Each public call that reads or changes state (set_tensor, invoke, get_tensor, allocate, resize,
        # a SignatureRunner call) holds this lock: calls from several threads run one at a time.
        self._lock = RunLock()
        self._executors = None           # compiled lazily by allocate_tensors, like LiteRT's prepare
        self._replan = None              # shape-inference result the arenas are re-planned for
        self._shape_cache = ShapeCache(self._model, LITERT)   # propagated shapes per input shapes
        self._relaxed = False            # compiled after a resize past the shape signatures
        # Compiled per set of input shapes when the model has dynamic shapes or inputs are resized
        # (compiler/specialize.py): the key of the current set (None: the model as it is)
        self._dynamic = has_dynamic_shapes(self._model)
        self._variants = Specializations(lambda m, segments: compile_model(m, self._runtime, self._backends,
                                                                           self._op_backend, segments=segments))
        # FULL policy (the shapes kernels meet) for specializing, the budget checked
        self._static_shapes = ShapeCache(self._model, max_entries=8, max_memory=self._runtime.options.max_memory)
        self._compiled_key: tuple | None = None
        self._as_is = None               # the executors compiled from the model as it is (key None)
        self._states: dict[int, _SubgraphState] = {}
        self._orphans: list[_Buffer] = []
        self._shapes_stale = False
        self._signatures = {s.key: s for s in self._model.signatures}
        self._signature_defs = self.get_signature_list()

    # ------------------------------------------------------------------ view safety
    def _safe_to_run(self) -> bool:
        """True when no array returned by a tensor() callable (or a slice of one) is alive."""
        # Buffers dropped while a view was alive (a SignatureRunner call does not check, as in
        # LiteRT) stay watched until their views are gone.
        self._orphans = [b for b in self._orphans if _refs(_raws([b])) > _SAFE_REFS]
        buffers = [b for st in self._states.values() for b in (*st.inputs.values(), *st.exposed.values())]
        return not self._orphans and _refs(_raws(buffers)) <= _SAFE_REFS

    def _drop(self, *buffers: Any) -> None:
        self._orphans.extend(b for b in buffers if isinstance(b, _Buffer))

    def _ensure_safe(self) -> None:
        if not self._safe_to_run():
            raise RuntimeError(_UNSAFE_MESSAGE)

    # ------------------------------------------------------------------ state helpers
    def _state(self, k: int) -> _SubgraphState:
        st = self._states.get(k)
        if st is None:
            st = self._states[k] = _SubgraphState(self._model.subgraphs[k])
        return st

    def _check_subgraph(self, k: int) -> None:
        n = len(self._model.subgraphs)
        if not 0 <= k < n:
            raise ValueError(f"Invalid subgraph index {k} exceeds max subgraph index {n}")

    def _check_tensor(self, k: int, index: int) -> Tensor:
        self._check_subgraph(k)   # LiteRT's _get_tensor_details crashes on a bad subgraph; we raise
        tensors = self._model.subgraphs[k].tensors
        if not 0 <= index < len(tensors):
            raise ValueError(f"Invalid tensor index {index} exceeds max tensor index {len(tensors)}")
        return tensors[index]

    def _reachable(self, k: int) -> list[int]:
        """Subgraph k and every subgraph its control-flow ops call (they are prepared together)."""
        seen, todo = [k], [k]
        while todo:
            for op in self._model.subgraphs[todo.pop()].operations:
                for c in subgraph_calls(op):
                    if c not in seen:
                        seen.append(c)
                        todo.append(c)
        return seen

    def _needs_relaxed(self) -> bool:
        """Whether some input was resized beyond what its shape signature allows."""
        for st in self._states.values():
            for i in st.sg.inputs:
                t = st.sg.tensors[i]
                sig = t.shape_signature if t.shape_signature is not None else t.shape
                shape = st.shapes[i]
                if len(sig) != len(shape) or any(d >= 0 and d != s for d, s in zip(sig, shape)):
                    return True
        return False

    def _compile(self) -> None:
        """Compile for the current input shapes. A static model not resized is compiled once, as it
        is; otherwise (resized inputs, dynamic shapes) per set of the entries' input shapes, with the
        shapes they give made static (compiler/specialize.py), as LiteRT prepares every op again."""
        relax = self._needs_relaxed()
        key = None if not relax and not self._dynamic else tuple(sorted(
            (j, st.prepared_for) for j, st in self._states.items() if st.prepared_for is not None))
        if self._executors is not None and key == self._compiled_key:
            return
        try:
            with thread_limit(self._runtime.options.num_threads):
                if key is None:
                    if self._as_is is None:
                        self._as_is = compile_model(self._model, self._runtime, self._backends, self._op_backend)
                    executors, model = self._as_is, self._model
                else:
                    executors, model = self._variants.get(
                        key, lambda: self._specialized(key, relax), lambda: relaxed_model(self._model))
        except (UnsupportedOpError, PrepareError) as e:
            raise ExecutionError(f"failed to prepare the model: {e}") from e
        except MemoryError as e:   # a RuntimeError as LiteRT's failures, a ResourceError as ours
            raise ResourceRuntimeError(f"failed to prepare the model: {e}") from e
        if self._executors is not None:   # a set compiled before: its variable tensors start afresh
            for ex in executors:
                ex.reset_variables()
        self._executors, self._compiled_model, self._compiled_key = executors, model, key
        self._close_dataflow()   # they ran the executors just replaced
        self._relaxed = relax

    def _specialized(self, key: tuple, relax: bool) -> Model | None:
        """The model specialized for the entries' input shapes in `key`; None when they cannot be
        inferred (a shape over the memory budget is allocate_tensors' error, as before)."""
        try:
            return specialized_for(self._model, self._static_shapes, key, relax)
        except PrepareError:
            return None

    # ------------------------------------------------------------------ LiteRT API
    def allocate_tensors(self) -> None:
        with self._lock:
            self._ensure_safe()
            self._allocate(0)

    def _allocate(self, k: int) -> None:
        if self._shapes_stale:
            self._refresh_shapes()   # the last run's shapes are the "previous" shapes kept past a dynamic op
        self._propagate_shapes(k)
        self._compile()
        if self._compiled_key is not None and self._compiled_model is not self._variants.fallback_model:
            self._replan = None   # compiled for these shapes: its arenas are planned for them
        if self._replan is not None:   # inputs resized: arenas for the new shapes (kept per shapes)
            try:
                self._executors.plan_memory(self._replan)
            except MemoryError as e:   # the new shapes are over the budget: LiteRT's RuntimeError too
                raise ResourceRuntimeError(f"allocate_tensors failed: {e}") from e
            self._replan = None
        for j in self._reachable(k):
            st = self._state(j)
            sg = st.sg
            changed = st.input_shapes_at_invoke != [st.shapes[i] for i in sg.inputs]
            for i in range(len(sg.tensors)):
                if i in st.used:
                    st.allocated[i] = True
            for i in sg.inputs:
                t, shape = sg.tensors[i], st.shapes[i]
                cur = st.inputs.get(i)
                cur_arr = cur.array if isinstance(cur, _Buffer) else cur
                if cur_arr is None or cur_arr.shape != shape:
                    self._drop(cur)
                    st.inputs[i] = _zeros(shape, t) if t.dtype == np.dtype(object) else _Buffer(shape, t.dtype)
            if changed:
                st.values.clear()
            self._drop(*st.exposed.values())
            st.exposed.clear()
            st.ready = True

    def _propagate_shapes(self, k: int) -> None:
        """LiteRT's prepare: input shapes through subgraph k and the subgraphs its control flow calls.
        A no-op when the inputs have not been resized since (LiteRT's AllocateTensors does nothing then)."""
        st = self._state(k)
        current = tuple(st.shapes[i] for i in st.sg.inputs)
        if st.prepared_for == current:
            return
        try:
            result = self._shape_cache.infer(k, current)
        except PrepareError as e:
            st.ready = False
            raise ExecutionError(f"allocate_tensors failed: {e}") from e
        if current != tuple(tuple(st.sg.tensors[i].shape) for i in st.sg.inputs):
            self._replan = result   # resized: the declared shapes' plan no longer fits
        for j, inferred in result.subgraphs.items():
            shapes = self._state(j).shapes
            for i, shape in inferred.resolved.items():
                shapes[i] = shape
        st.prepared_for = current

    def invoke(self) -> None:
        with self._lock:
            self._ensure_safe()
            self._invoke(0)

    def _invoke(self, k: int) -> None:
        st = self._state(k)
        if not st.ready or self._executors is None:
            raise RuntimeError("Invoke called on model that is not ready: call allocate_tensors() "
                               "first (after creating the interpreter and after resize_tensor_input)")
        sg = st.sg
        arrays = [b.array if isinstance(b, _Buffer) else b for b in (st.inputs[i] for i in sg.inputs)]
        self._runtime.start_run()
        try:   # inf/NaN results are values, as in LiteRT (and the session), not numpy warnings
            with np.errstate(all="ignore"), self._runtime.run_threads():
                results = self._executor(k).execute(arrays)
        except RuntimeError:
            raise
        except MemoryError as e:   # a ResourceError (executor) or numpy's, reported as both kinds
            raise ResourceRuntimeError(str(e) if isinstance(e, OnertPyError) else f"out of memory: {e}") from e
        except Exception as e:  # noqa: BLE001 - LiteRT reports every failed invoke as RuntimeError
            raise ExecutionError(str(e) if isinstance(e, OnertPyError) else f"{type(e).__name__}: {e}") from e
        self._drop(*st.exposed.values())
        st.exposed.clear()
        st.values.clear()
        for o, r in zip(sg.outputs, results):
            t = sg.tensors[o]
            arr = np.asarray(r)
            if arr.dtype != t.dtype and t.dtype != np.dtype(object):
                arr = arr.astype(t.dtype)
            st.values[o] = arr   # get_tensor copies, so the executor's array can be kept as is
        st.input_shapes_at_invoke = [st.shapes[i] for i in sg.inputs]
        self._shapes_stale = True

    def _executor(self, k: int):
        """Subgraph k's executor: the linear one, or its dataflow executor (built on first use over the
        same compiled executors, as infer.session builds it)."""
        if self._dataflow is None:
            return self._executors[k]
        ex = self._dataflow_executors.get(k)
        if ex is None:
            from onert_py.compiler.lowering import build_dataflow
            ex = self._dataflow_executors[k] = build_dataflow(self._compiled_model, self._executors,
                                                              self._runtime, k, **self._dataflow)
        return ex

    def _close_dataflow(self) -> None:
        for ex in self._dataflow_executors.values():
            ex.close()
        self._dataflow_executors = {}

    def _refresh_shapes(self) -> None:
        """Report the shapes the last run produced (LiteRT reports them after invoke too)."""
        self._shapes_stale = False
        if self._executors is None:
            return
        for j, st in self._states.items():
            if st.input_shapes_at_invoke is None and j != 0 and not st.ready:
                continue
            # Inputs of the subgraphs control flow calls take the shapes of the last call's values,
            # except inputs nothing reads (LiteRT does not resize those).
            inputs = set(st.sg.inputs)
            if st.input_shapes_at_invoke is None:
                inputs -= st.sg.read_tensors()
            for i, v in enumerate(self._executors[j].values):
                if i not in inputs and isinstance(v, np.ndarray) and st.sg.tensors[i].data is None:
                    st.shapes[i] = v.shape
            for o, v in st.values.items():
                st.shapes[o] = v.shape

    def set_tensor(self, tensor_index: int, value: Any) -> None:
        with self._lock:
            self._set_tensor(0, operator.index(tensor_index), value)

    def _set_tensor(self, k: int, index: int, value: Any) -> None:
        t = self._check_tensor(k, index)
        st = self._state(k)
        arr = np.asarray(value)
        if t.dtype == np.dtype(object):
            if arr.dtype.kind not in "OSU":
                raise ValueError(f"Cannot set tensor: Got value of type {_type_name(arr.dtype)} but "
                                 f"expected type STRING for input {index}, name: {t.name}")
        elif arr.dtype != t.dtype:
            if arr.dtype.newbyteorder("=") != t.dtype:
                raise ValueError(f"Cannot set tensor: Got value of type {_type_name(arr.dtype)} but "
                                 f"expected type {t.type_name} for input {index}, name: {t.name}")
            # Same type in the other byte order: LiteRT copies the raw bytes (garbage values); we convert.
            arr = arr.astype(t.dtype)
        shape = st.shapes[index]
        if arr.ndim != len(shape):
            raise ValueError(f"Cannot set tensor: Dimension mismatch. Got {arr.ndim} but expected "
                             f"{len(shape)} for input {index} ({t.name!r}): value shape {list(arr.shape)}, "
                             f"tensor shape {list(shape)}.")
        for d, (got, want) in enumerate(zip(arr.shape, shape)):
            if got != want:
                raise ValueError(f"Cannot set tensor: Dimension mismatch. Got {got} but expected {want} "
                                 f"for dimension {d} of input {index} ({t.name!r}): value shape "
                                 f"{list(arr.shape)}, tensor shape {list(shape)}.")
        if not st.allocated[index] or (index in st.sg.inputs and index not in st.inputs):
            raise ValueError("Cannot set tensor: Tensor is unallocated. Try calling allocate_tensors() first")
        if t.data is not None and index not in st.sg.inputs:
            # LiteRT writes into the model's read-only buffer (a segfault for model_path).
            raise ValueError(f"Cannot set tensor: tensor {index} ({t.name!r}) is a constant of the model "
                             f"and read-only")
        if t.dtype == np.dtype(object):
            flat = [s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in arr.reshape(-1)]
            arr = np.empty(len(flat), dtype=object)
            arr[:] = flat
            arr = arr.reshape(shape)
        target = st.inputs.get(index)
        if isinstance(target, _Buffer):
            np.copyto(target.array, arr)
        elif t.is_variable and self._executors is not None and index not in st.sg.inputs:
            # Variable tensors (RNN state) are the executor's own state: the next invoke reads them.
            if index in st.exposed:
                np.copyto(st.exposed[index].array, arr)
            else:
                self._executors[k].values[index] = np.array(arr, copy=True)
        elif index in st.sg.inputs:
            st.inputs[index] = np.array(arr, dtype=object, copy=True)
        elif index in st.exposed:
            np.copyto(st.exposed[index].array, arr)
        else:
            st.values[index] = np.array(arr, copy=True)

    def _current_value(self, k: int, index: int) -> np.ndarray:
        """The tensor's value without copying; ValueError when it has no memory yet."""
        t = self._check_tensor(k, index)
        st = self._state(k)
        if not st.allocated[index] or (index in st.sg.inputs and index not in st.inputs):
            raise ValueError("Tensor data is null. Run allocate_tensors() first")
        if index in st.inputs:
            b = st.inputs[index]
            return b.array if isinstance(b, _Buffer) else b
        if index in st.exposed:
            return st.exposed[index].array
        if t.is_variable and self._executors is not None:
            return np.asarray(self._executors[k].values[index])
        if index in st.values:
            return st.values[index]
        if t.data is not None:
            return t.data
        v = self._executors[k].values[index] if self._executors is not None else None
        if isinstance(v, np.ndarray):
            return v
        if v is not None:
            return np.asarray(v)
        return _zeros(st.shapes[index], t)   # never computed: LiteRT would show uninitialised memory

    def get_tensor(self, tensor_index: int, subgraph_index: int = 0) -> np.ndarray:
        with self._lock:
            return self._get_tensor(tensor_index, subgraph_index)

    def _get_tensor(self, tensor_index: int, subgraph_index: int = 0) -> np.ndarray:
        tensor_index, subgraph_index = operator.index(tensor_index), operator.index(subgraph_index)
        self._check_subgraph(subgraph_index)
        value = np.array(self._current_value(subgraph_index, tensor_index), copy=True)
        return value[()] if value.ndim == 0 else value   # LiteRT gives numpy scalars for 0-d tensors

    def tensor(self, tensor_index: int) -> Callable[[], np.ndarray]:
        """A callable giving a zero-copy view of the tensor's memory; do not keep the array across
        allocate_tensors()/invoke()/resize_tensor_input() (they raise RuntimeError while it lives)."""
        return lambda: self._view(0, tensor_index)

    def _view(self, k: int, index: int) -> np.ndarray:
        index = operator.index(index)
        value = self._current_value(k, index)
        st = self._state(k)
        b = st.inputs.get(index)
        if not isinstance(b, _Buffer):
            if value.dtype == np.dtype(object):
                raise ValueError(f"tensor(): string tensor {index} has no raw buffer to view")
            b = st.exposed.get(index)
            if b is None:   # snapshot into interpreter-owned memory, valid until the next invoke
                b = st.exposed[index] = _Buffer(value.shape, value.dtype)
                np.copyto(b.array, value)
                t = self._model.subgraphs[k].tensors[index]
                if t.is_variable and self._executors is not None:
                    self._executors[k].values[index] = b.array   # writes through the view feed the model
        view = b.view()
        if self._model.subgraphs[k].tensors[index].data is not None and index not in st.sg.inputs:
            view.flags.writeable = False   # a constant of the model: writes would be lost
        return view

    def resize_tensor_input(self, input_index: int, tensor_size: Any, strict: bool = False) -> None:
        with self._lock:
            self._ensure_safe()
            self._resize(0, operator.index(input_index), tensor_size, strict)

    def _resize(self, k: int, index: int, tensor_size: Any, strict: bool) -> None:
        size = np.array(tensor_size, dtype=np.int32)
        if size.ndim != 1:
            raise ValueError(f"Shape should be 1D instead of {size.ndim}: resize_tensor_input got "
                             f"{tensor_size!r}")
        dims = tuple(int(d) for d in size)
        sg = self._model.subgraphs[k]
        if not 0 <= index < len(sg.tensors):
            raise RuntimeError(f"resize_tensor_input: tensor index {index} is out of range "
                               f"[0, {len(sg.tensors)})")
        t = sg.tensors[index]
        st = self._state(k)
        cur = st.shapes[index]
        if any(d < 0 for d in dims):
            raise RuntimeError(f"resize_tensor_input: tensor {index} ({t.name!r}): negative dimension "
                               f"in {list(dims)}")
        if strict:
            if len(dims) != len(cur):
                raise RuntimeError(f"resize_tensor_input(strict=True): tensor {index} ({t.name!r}) has "
                                   f"rank {len(cur)}, got shape {list(dims)}")
            sig = t.shape_signature if t.shape_signature is not None else cur
            for d, (s, new) in enumerate(zip(sig, dims)):
                if s != -1 and s != new:
                    raise RuntimeError(
                        f"Attempting to resize dimension {d} of tensor {index} ({t.name!r}) with value "
                        f"{cur[d]} to {new}. ResizeInputTensorStrict only allows mutating unknown "
                        f"dimensions identified by -1 (shape signature {list(sig)}).")
        if dims == cur and st.allocated[index]:
            return
        st.shapes[index] = dims
        st.allocated[index] = False
        self._drop(st.inputs.pop(index, None), st.exposed.pop(index, None))
        st.ready = False

    def _tensor_details(self, tensor_index: int, subgraph_index: int) -> dict[str, Any]:
        t = self._check_tensor(subgraph_index, tensor_index)
        dtype = _DETAIL_TYPES.get(t.type_name)
        if dtype is None:
            raise ValueError("Could not get tensor details")
        if self._shapes_stale:
            self._refresh_shapes()
        shape = self._state(subgraph_index).shapes[tensor_index]
        sig = t.shape_signature if t.shape_signature is not None else shape
        q = t.quantization
        if q is not None and q.scale.size:
            scales = np.asarray(q.scale, dtype=np.float32).reshape(-1)
            zps = np.asarray(q.zero_point, dtype=np.int32).reshape(-1)
            qdim = int(q.quantized_dimension)
        else:
            scales, zps, qdim = np.zeros(0, np.float32), np.zeros(0, np.int32), 0
        # LiteRT's legacy (scale, zero_point) pair only describes per-tensor quantization.
        legacy = (float(scales[0]), int(zps[0])) if scales.size == 1 else (0.0, 0)
        return {
            "name": t.name,
            "index": int(tensor_index),
            "shape": np.array(shape, dtype=np.int32),
            "shape_signature": np.array(sig, dtype=np.int32),
            "dtype": dtype,
            "quantization": legacy,
            "quantization_parameters": {"scales": scales, "zero_points": zps,
                                        "quantized_dimension": qdim, "block_size": 0},
            "sparsity_parameters": _sparsity(t.sparsity),
        }

    def _get_tensor_details(self, tensor_index: int, subgraph_index: int) -> dict[str, Any]:
        return self._tensor_details(tensor_index, subgraph_index)

    def get_tensor_details(self, subgraph_index: int = 0) -> list[dict[str, Any]]:
        n = len(self._model.subgraphs)
        if subgraph_index < 0 or subgraph_index >= n:
            raise ValueError(f"subgraph_index is out of range: {subgraph_index} for the model, which "
                             f"has {n} subgraphs.")
        details = []
        for i in range(len(self._model.subgraphs[subgraph_index].tensors)):
            try:
                details.append(self._tensor_details(i, subgraph_index))
            except ValueError:
                pass   # LiteRT skips tensors it cannot describe
        return details

    def get_input_details(self) -> list[dict[str, Any]]:
        return [self._tensor_details(i, 0) for i in self._model.subgraphs[0].inputs]

    def get_output_details(self) -> list[dict[str, Any]]:
        return [self._tensor_details(i, 0) for i in self._model.subgraphs[0].outputs]

    def _get_full_signature_list(self) -> dict[str, dict[str, dict[str, int]]]:
        # Keys in file order; LiteRT keeps each signature's tensors in std::maps, so names are sorted.
        return {key: {"inputs": dict(sorted(s.inputs.items())), "outputs": dict(sorted(s.outputs.items()))}
                for key, s in self._signatures.items()}

    def get_signature_list(self) -> dict[str, dict[str, list[str]]]:
        return {key: {"inputs": list(d["inputs"]), "outputs": list(d["outputs"])}
                for key, d in self._get_full_signature_list().items()}

    def get_signature_runner(self, signature_key: str | None = None) -> "SignatureRunner":
        if signature_key is None:
            if len(self._signature_defs) != 1:
                raise ValueError(f"SignatureDef signature_key is None and model has "
                                 f"{len(self._signature_defs)} Signatures. None is only allowed when the "
                                 f"model has 1 SignatureDef")
            signature_key = next(iter(self._signature_defs))
        return SignatureRunner(interpreter=self, signature_key=signature_key)

    def reset_all_variables(self) -> None:
        """Variable tensors (is_variable: RNN/LSTM state) back to zero (int8: their zero point), as
        LiteRT's ResetVariableTensors does. Like LiteRT, resource variables (VAR_HANDLE) keep their
        values and CALL_ONCE initialisers do not run again; `infer.session.reset_variables` resets those."""
        with self._lock:
            self._reset_all_variables()

    def _reset_all_variables(self) -> None:
        if self._executors is None:
            return
        for ex in self._executors:
            st = self._states.get(ex.subgraph.index)
            for t in ex.subgraph.tensors:
                if t.is_variable:
                    fill = 0
                    if t.dtype == np.int8 and t.quantization is not None and t.quantization.zero_point.size:
                        fill = int(t.quantization.zero_point.reshape(-1)[0])
                    if st is not None and t.index in st.exposed:   # in place: a held view sees it
                        st.exposed[t.index].array.fill(fill)
                    else:
                        ex.values[t.index] = np.full(t.shape, fill, dtype=t.dtype)

    def num_subgraphs(self) -> int:
        return len(self._model.subgraphs)

    def _get_op_details(self, op_index: int) -> dict[str, Any]:
        sg = self._model.subgraphs[0]
        op_index = operator.index(op_index)
        if not 0 <= op_index < len(sg.operations):
            raise ValueError(f"Invalid node index {op_index}: subgraph 0 has {len(sg.operations)} nodes")
        op = sg.operations[op_index]

        def types(indices: Sequence[int]) -> list[type]:
            return [_DETAIL_TYPES.get(sg.tensors[i].type_name) for i in indices if i != -1]
        return {"index": int(op_index), "op_name": op.kernel_name,
                "inputs": np.array(op.inputs, dtype=np.int32), "outputs": np.array(op.outputs, dtype=np.int32),
                "operand_types": types(op.inputs), "result_types": types(op.outputs)}

    def _get_ops_details(self) -> list[dict[str, Any]]:
        return [self._get_op_details(i) for i in range(len(self._model.subgraphs[0].operations))]

    @property
    def experimental_compress_quantization_zero_points(self) -> bool:
        return self._experimental_compress_quantization_zero_points


class InterpreterWithCustomOps(Interpreter):
    """LiteRT's name for an interpreter taking `custom_op_registerers` first."""

    def __init__(self, custom_op_registerers: Sequence[Any] | None = None, **kwargs: Any):
        super().__init__(custom_op_registerers=custom_op_registerers, **kwargs)


class SignatureRunner:
    """Runs one SignatureDef: `runner(**inputs) -> {output name: array}`."""

    def __init__(self, interpreter: Interpreter | None = None, signature_key: str | None = None):
        if not interpreter:
            raise ValueError("None interpreter provided.")
        if not signature_key:
            raise ValueError("None signature_key provided.")
        self._interpreter = interpreter
        self._signature_key = signature_key
        defs = interpreter._get_full_signature_list()
        if signature_key not in defs:
            raise ValueError(f'Invalid signature_key provided: "{signature_key}". The model has '
                             f"{sorted(defs)}.")
        self._inputs: dict[str, int] = defs[signature_key]["inputs"]
        self._outputs: dict[str, int] = defs[signature_key]["outputs"]
        self._subgraph_index = interpreter._signatures[signature_key].subgraph_index

    def __call__(self, **kwargs: Any) -> dict[str, np.ndarray]:
        if len(kwargs) != len(self._inputs):
            raise ValueError(f"Invalid number of inputs provided for running a SignatureDef, expected "
                             f"{len(self._inputs)} ({list(self._inputs)}) vs provided {len(kwargs)} "
                             f"({list(kwargs)})")
        it = self._interpreter
        with it._lock:   # the whole call: another thread's set_tensor/invoke waits
            return self._run(kwargs)

    def _run(self, kwargs: dict[str, Any]) -> dict[str, np.ndarray]:
        it, k = self._interpreter, self._subgraph_index
        for name, value in kwargs.items():
            if name not in self._inputs:
                raise ValueError(f"Invalid Input name ({name}) for SignatureDef; expected one of "
                                 f"{list(self._inputs)}")
            it._resize(k, self._inputs[name], value.shape, False)  # like LiteRT: arrays only
        it._allocate(k)
        for name, value in kwargs.items():
            it._set_tensor(k, self._inputs[name], value)
        it._invoke(k)
        return {name: it._get_tensor(index, k) for name, index in self._outputs.items()}

    def get_input_details(self) -> dict[str, dict[str, Any]]:
        return {n: self._interpreter._tensor_details(i, self._subgraph_index) for n, i in self._inputs.items()}

    def get_output_details(self) -> dict[str, dict[str, Any]]:
        return {n: self._interpreter._tensor_details(i, self._subgraph_index) for n, i in self._outputs.items()}


# ---------------------------------------------------------------------------------------------------


def _sparsity(sp: dict[str, Any] | None) -> dict[str, Any]:
    """LiteRT's sparsity_parameters layout ({} for a dense tensor)."""
    if not sp:
        return {}
    dims = []
    for d in sp.get("dim_metadata", []):
        if d["format"] == 0:
            dims.append({"format": 0, "dense_size": int(d["dense_size"])})
        else:
            dims.append({"format": int(d["format"]),
                         "array_segments": np.asarray(d["array_segments"], dtype=np.int32),
                         "array_indices": np.asarray(d["array_indices"], dtype=np.int32)})
    return {"traversal_order": np.asarray(sp.get("traversal_order", ()), dtype=np.int32),
            "block_map": np.asarray(sp.get("block_map", ()), dtype=np.int32),
            "dim_metadata": dims}
