"""The onert-style session: `onert_py.infer.session(path, backends="cpu").infer([arrays])`.

Mirrors onert's Python binding (`onert.infer.session`, 0.1.x): `infer(inputs_array, *, measure)`,
`get_inputs_tensorinfo`/`get_outputs_tensorinfo` (dims as of the last update or infer), the low-level
calls its session delegates to the native one (`input_size`, `input_tensorinfo(i)`, `set_input(i, a)`,
`run()`, `get_output(i)`, ...) and `tensorinfo` with onert's fields. Inputs of another numeric dtype
are converted as onert converts them, except where that would lose values (float -> int, out-of-range
integers), which raise InputError.

Where onert 0.1.0 is buggy we do the right thing: rank-0 inputs work (onert fails preparing them),
outputs are writable arrays the caller owns (onert's are read-only), inputs of the wrong rank are
refused (onert silently drops dims), and get_outputs_tensorinfo reports the last run's shapes (onert's
stay at the first run's).
"""
from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from onert_py.compiler import compile_model
from onert_py.compiler.shape_inference import ShapeCache
from onert_py.compiler.specialize import Specializations, declared_input_shapes, has_dynamic_shapes, specialized_for
from onert_py.errors import InputError, PrepareError, ResourceError, article
from onert_py.exec.executor import scalar_or_array
from onert_py.exec.executor_choice import dataflow_options
from onert_py.exec.budget import requested_max_memory, resolve_max_memory
from onert_py.exec.runtime import RuntimeOptions, RuntimeState, check_timeout
from onert_py.exec.threads import RunLock, check_num_threads, thread_limit
from onert_py.ir import Model, Tensor
from onert_py.loader import load_model


class tensorinfo:  # noqa: N801 - named as onert's binding names it
    """Name, dtype, rank and dims of a model input or output (-1 for a dynamic dimension).

    Like onert's native tensorinfo: constructible without arguments (dtype None, rank 0, dims []),
    dtype is a numpy type name ("float32", "int64", "bool"...; "string" for string tensors), setting
    `dims` sets `rank`, and setting `rank` truncates `dims` or pads them with 0. `name` is ours."""
    __slots__ = ("name", "dtype", "_dims")

    def __init__(self, name: str = "", dtype: Any = None, rank: int | None = None,
                 dims: Sequence[int] | None = None):
        self.name = name
        self.dtype = dtype if dtype is None or isinstance(dtype, str) else np.dtype(dtype).name
        self._dims: list[int] = [int(d) for d in dims] if dims is not None else []
        if rank is not None:
            self.rank = rank

    @property
    def dims(self) -> list[int]:
        return self._dims

    @dims.setter
    def dims(self, value: Sequence[int]) -> None:
        self._dims = [int(d) for d in value]

    @property
    def rank(self) -> int:
        return len(self._dims)

    @rank.setter
    def rank(self, value: int) -> None:
        value = int(value)
        if value < 0:
            raise ValueError(f"tensorinfo.rank must be >= 0, got {value}")
        self._dims = self._dims[:value] + [0] * (value - len(self._dims))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, tensorinfo):
            return NotImplemented
        return (self.name, self.dtype, self._dims) == (other.name, other.dtype, other._dims)

    def __repr__(self) -> str:
        return f"tensorinfo(name={self.name!r}, dtype={self.dtype!r}, rank={self.rank}, dims={self._dims})"


def _info(t: Tensor) -> tensorinfo:
    dims = list(t.shape_signature) if t.shape_signature is not None else list(t.shape)
    dtype = "string" if t.type_name == "STRING" else t.dtype.name
    return tensorinfo(name=t.name, dtype=dtype, rank=len(dims), dims=dims)


class session:  # noqa: N801 - mirrors onert's `infer.session`
    """Load, compile and run a TFLite/Circle model (path, bytes, or nnpackage directory)."""

    def __init__(self, path: Any, backends: str | None = None, *, max_while_iterations: int | None = None,
                 controlflow_copy: str = "reference", signature: str | None = None,
                 preserve_all_tensors: bool = False, op_backend: str | dict | None = None,
                 num_threads: int | None = None, timeout: float | None = None,
                 max_memory: int | float | str | None = None, executor: str | None = None,
                 parallel_iterations: int = 10, inter_op_threads: int | None = None, fuse_ops: bool = True,
                 segments: bool = True):
        if controlflow_copy not in ("reference", "all"):
            raise ValueError(f"controlflow_copy must be 'reference' or 'all', not {controlflow_copy!r}")
        t0 = time.perf_counter()
        # max_memory: bytes any one allocation may take (exec/budget.py); None: ONERT_PY_MAX_MEMORY, else
        # 4 x the model file + 1 GiB; inf: no limit.
        requested = requested_max_memory(max_memory)
        self.model: Model = path if isinstance(path, Model) else load_model(path, max_memory=requested)
        self.runtime = RuntimeState(RuntimeOptions(max_while_iterations=max_while_iterations,
                                                   controlflow_copy=controlflow_copy,
                                                   preserve_all_tensors=preserve_all_tensors,
                                                   num_threads=check_num_threads(num_threads),
                                                   timeout=check_timeout(timeout),
                                                   max_memory=resolve_max_memory(requested, self.model)))
        # executor: "linear" (default; ONERT_PY_EXECUTOR sets it from outside) or "dataflow" (control
        # flow lowered to Switch/Merge/Enter/Exit/NextIteration, docs/dataflow.md): parallel_iterations
        # bounds the live iterations per loop, inter_op_threads the ops run at once (default min(4, cores))
        self._dataflow = dataflow_options(executor, parallel_iterations, inter_op_threads)
        if self._dataflow is not None:
            self.runtime.options.arena = False   # tokens hold values as long as they need: no shared slots
        # fused ops compute no intermediate outputs, which the dataflow executor's lowered graph (made
        # from the model's ops) reads
        if not fuse_ops or self._dataflow is not None:
            self.runtime.options.fuse_ops = False
        self._dataflow_executors: dict = {}
        # segments: the jit backend may compile runs of small ops as one kernel (jit/segment.py)
        self._segments = segments
        # one run at a time: a second thread's infer waits (threads.RunLock)
        self._lock = RunLock()
        self._backends, self._op_backend = _loadable(backends), op_backend
        self._subgraph_index = 0
        # A model with dynamic shapes (a converter's -1 batch) is compiled per set of input shapes, its
        # shapes then static (compiler/specialize.py); not with the dataflow executor (built over one
        # compile) or variable tensors (their state lives in the executors).
        self._variants: Specializations | None = None
        self._variant_key: tuple | None = None
        if self._dataflow is None and has_dynamic_shapes(self.model) and not any(
                t.is_variable for sg in self.model.subgraphs for t in sg.tensors):
            self._variants = Specializations(self._compile)
            # FULL policy, no folded values (none before the first compile), the budget checked
            self._static_shapes = ShapeCache(self.model, max_entries=8, max_memory=self.runtime.options.max_memory)
            self._use_shapes(declared_input_shapes(self.model))
        else:
            self.executors = self._compile(self.model)
        # onert prepares on the first infer and reports it there; we compile here and report it there.
        self._prepare_ms: float | None = (time.perf_counter() - t0) * 1e3
        self._shapes = ShapeCache(self.model, known=self._folded_values)   # per input-shape signature
        self._gradient_sessions: dict = {}    # (subgraph, wrt) -> (GradientModel, its session)
        self.inputs: list[np.ndarray] = []    # the last run's inputs and outputs, as onert keeps them
        self.outputs: list[np.ndarray] = []
        self._select(0)
        if signature is not None:
            self.select_signature(signature)

    def _compile(self, model: Model, segments: bool = True):
        with thread_limit(self.runtime.options.num_threads):   # the jit backend compiles with them
            return compile_model(model, self.runtime, self._backends, self._op_backend,
                                 segments=segments and self._segments)

    def _use_shapes(self, shapes: tuple) -> bool:
        """Make the executors compiled for these input shapes of the selected subgraph current (a
        model with dynamic shapes only). Returns whether they are the fallback compile (shapes left
        dynamic: its arenas are planned per run or by _fix_input_dims)."""
        key = (self._subgraph_index, shapes)
        if key != self._variant_key:
            self.executors, model = self._variants.get(key, lambda: self._specialized(key), lambda: self.model)
            self._variant_key = key
            self._variant_is_fallback = model is self.model
        return self._variant_is_fallback

    def _specialized(self, key: tuple) -> Model | None:
        try:
            return specialized_for(self.model, self._static_shapes, [key])
        except (PrepareError, ResourceError):
            return None   # the fallback's kernels meet these shapes and name the problem as they run

    def _select(self, subgraph_index: int) -> None:
        self._subgraph_index = subgraph_index
        n = len(self._subgraph.inputs)
        self._input_dims: list[list[int] | None] = [None] * n   # fixed by update_inputs_tensorinfo
        self._shown_inputs: list[Sequence[int]] | None = None     # dims of the last update or infer
        self._shown_outputs: list[Sequence[int]] | None = None    # shapes of the last infer's outputs
        self._pending: list[np.ndarray | None] = [None] * n   # set_input() values for run()
        self.inputs, self.outputs = [], []

    @property
    def subgraph_index(self) -> int:
        """Index of the subgraph `infer` runs (0, or the selected signature's)."""
        return self._subgraph_index

    @property
    def _subgraph(self):
        return self.model.subgraphs[self._subgraph_index]

    # ---- signatures
    def get_signature_list(self) -> list[str]:
        return [s.key for s in self.model.signatures]

    def select_signature(self, key: str) -> None:
        for s in self.model.signatures:
            if s.key == key:
                self._select(s.subgraph_index)
                return
        raise InputError(f"no signature {key!r}; the model has {self.get_signature_list()}")

    # ---- tensor info
    def get_inputs_tensorinfo(self) -> list[tensorinfo]:
        """Inputs' dims: the model's (-1 = dynamic), or those of the last update_inputs_tensorinfo()
        or infer(), whichever came last (as onert reports them)."""
        infos = [_info(self._subgraph.tensors[t]) for t in self._subgraph.inputs]
        if self._shown_inputs is not None:
            for info, dims in zip(infos, self._shown_inputs):
                info.dims = list(dims)
        return infos

    def get_outputs_tensorinfo(self) -> list[tensorinfo]:
        """Outputs' dims: the shapes of the last infer's outputs; before any infer, the model's
        (-1 = dynamic) until update_inputs_tensorinfo fixes input dims, then the dims shape inference
        propagates from them (-1 where they depend on input values; the model's declaration where not
        even the rank is known before running)."""
        infos = [_info(self._subgraph.tensors[t]) for t in self._subgraph.outputs]
        if self._shown_outputs is not None:
            for info, dims in zip(infos, self._shown_outputs):
                info.dims = list(dims)
            return infos
        if self._shown_inputs is None:
            return infos
        shapes = self._infer_shapes(self._shown_inputs).output_shapes(self.model)
        for info, shape in zip(infos, shapes):
            if shape is not None:
                info.dims = list(shape)
        return infos

    def input_size(self) -> int:
        return len(self._subgraph.inputs)

    def output_size(self) -> int:
        return len(self._subgraph.outputs)

    def input_tensorinfo(self, index: int) -> tensorinfo:
        return self.get_inputs_tensorinfo()[self._io_index(index, self.input_size(), "input")]

    def output_tensorinfo(self, index: int) -> tensorinfo:
        return self.get_outputs_tensorinfo()[self._io_index(index, self.output_size(), "output")]

    @staticmethod
    def _io_index(index: int, n: int, what: str) -> int:
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"{what} index must be an int, got {type(index).__name__}")
        if not 0 <= index < n:
            raise InputError(f"{what} index {index!r} is out of range: the model has {n} {what}(s)")
        return int(index)

    def _infer_shapes(self, dims: Sequence[Sequence[int] | None]):
        sg = self._subgraph
        shapes = [tuple(d) if d is not None else tuple(_info(sg.tensors[t]).dims)
                  for d, t in zip(dims, sg.inputs)]
        return self._shapes.infer(self._subgraph_index, shapes)

    def _folded_values(self) -> dict[int, dict[int, Any]]:
        """Values the compiler folded into constants, per subgraph (known values for shape inference);
        not those proven for the compiled input shapes only (Subgraph.shape_values)."""
        return {ex.subgraph.index: {i: ex.values[i] for i in getattr(ex, "_folded", ())
                                    if i not in ex.shape_folded}
                for ex in self.executors}

    def update_inputs_tensorinfo(self, new_infos: Sequence[tensorinfo]) -> None:
        """Fix the shapes of inputs (e.g. the -1 dims of a dynamic model) before inference; later
        infer() calls must give inputs of these shapes."""
        if len(new_infos) != len(self._subgraph.inputs):
            raise InputError(f"Expected {len(self._subgraph.inputs)} input tensorinfo(s), but got "
                             f"{len(new_infos)}.")
        dims = list(self._input_dims)
        for k, info in enumerate(new_infos):
            dims[k] = self._checked_dims(k, info)
        self._fix_input_dims(dims)

    # onert 0.1.0 names it with an underscore; both spellings work.
    _update_inputs_tensorinfo = update_inputs_tensorinfo

    def set_input_tensorinfo(self, index: int, tensor_info: tensorinfo) -> None:
        """Fix the shape of one input (onert's native call behind update_inputs_tensorinfo)."""
        index = self._io_index(index, self.input_size(), "input")
        dims = list(self._input_dims)   # the other inputs keep their fixed dims (or stay open)
        dims[index] = self._checked_dims(index, tensor_info)
        self._fix_input_dims(dims)

    def _fix_input_dims(self, dims: list[list[int] | None]) -> None:
        """Make `dims` (None = as declared) the inputs' dims: shapes an op cannot take fail in shape
        inference, naming it; the arenas are planned for the new shapes (kept per shapes)."""
        with self._lock:   # not while another thread's run uses the arenas
            result = self._infer_shapes(dims)
            if self._variants is None or self._use_shapes(tuple(result.input_shapes)):
                self.executors.plan_memory(result)
            self._input_dims = dims
            self._shown_inputs = [list(d) if d is not None else _info(self._subgraph.tensors[t]).dims
                                  for d, t in zip(dims, self._subgraph.inputs)]
            self._shown_outputs = None

    def _checked_dims(self, k: int, info: tensorinfo) -> list[int]:
        dims = [int(d) for d in info.dims]
        if any(d < 0 for d in dims):
            raise InputError(f"Input tensorinfo at index {k} contains negative dimension(s): {dims} "
                             f"(input {self._subgraph.tensors[self._subgraph.inputs[k]].name!r})")
        t = self._subgraph.tensors[self._subgraph.inputs[k]]
        self._check_shape(k, t, tuple(dims), signature_only=True)
        return dims

    # ---- running
    def infer(self, inputs_array: Sequence[Any], *, measure: bool = False):
        """Run the model; returns a list of arrays, or (outputs, metrics in ms) when `measure`.
        Metrics are onert's: input/run/output_time_ms, plus prepare_time_ms on the first call.
        Calls from several threads run one at a time."""
        with self._lock:
            return self._infer(inputs_array, measure)

    def _infer(self, inputs_array: Sequence[Any], measure: bool):
        if not measure:
            outputs = self._execute(self._prepare_inputs(inputs_array))
            self._prepare_ms = None
            return outputs
        t0 = time.perf_counter()
        arrays = self._prepare_inputs(inputs_array)
        t1 = time.perf_counter()
        outputs = self._execute(arrays)
        t2 = time.perf_counter()
        metrics = {"input_time_ms": (t1 - t0) * 1e3, "run_time_ms": (t2 - t1) * 1e3,
                   "output_time_ms": self._output_ms}
        if self._prepare_ms is not None:
            metrics = {"prepare_time_ms": self._prepare_ms, **metrics}
            self._prepare_ms = None
        return (outputs, metrics) if measure else outputs

    def _execute(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        if self._variants is not None:
            self._use_shapes(tuple(a.shape for a in arrays))
        self.runtime.start_run()
        # inf/NaN results are values, as in LiteRT, not warnings
        with np.errstate(all="ignore"), self.runtime.run_threads():
            results = self._executor().execute(self._executor_inputs(arrays))
        t = time.perf_counter()
        outputs = self._own_outputs(results, arrays)
        self._output_ms = (time.perf_counter() - t) * 1e3
        self.inputs, self.outputs = arrays, outputs
        self._shown_inputs = [a.shape for a in arrays]   # tuples: lists only when asked for
        self._shown_outputs = [o.shape for o in outputs]
        return outputs

    def _executor(self):
        """The entry subgraph's executor: the linear one, or its dataflow executor (built on first use)."""
        if self._dataflow is None:
            return self.executors[self._subgraph_index]
        ex = self._dataflow_executors.get(self._subgraph_index)
        if ex is None:
            from onert_py.compiler.lowering import build_dataflow
            ex = self._dataflow_executors[self._subgraph_index] = build_dataflow(
                self.model, self.executors, self.runtime, self._subgraph_index, **self._dataflow)
        return ex

    def run(self, inputs: Sequence[Any] | None = None) -> list[np.ndarray] | None:
        """run(inputs) = infer(inputs). run() with no argument is onert's native run: it uses the
        values given by set_input(), and the outputs are read with get_output(i)."""
        if inputs is not None:
            return self.infer(inputs)
        with self._lock:
            missing = [k for k, a in enumerate(self._pending) if a is None]
            if missing:
                raise InputError(f"run(): input(s) {missing} not set; call set_input(index, array) first")
            self._execute(list(self._pending))
            self._prepare_ms = None
        return None

    def run_async(self) -> None:
        """onert's asynchronous run; here it runs to completion before returning (wait() is a no-op)."""
        self.run()

    def wait(self) -> None:
        pass

    def prepare(self) -> None:
        """Nothing to do: the model is compiled when the session is created."""

    def set_prepare_config(self, config: Any) -> None:
        """Accepted for onert compatibility (outputs are always allocated by the runtime)."""

    def set_input(self, index: int, buffer: Any) -> None:
        """Give one input's value for run() (converted and checked as infer() does; not modified)."""
        index = self._io_index(index, self.input_size(), "input")
        t = self._subgraph.tensors[self._subgraph.inputs[index]]
        arr = self._as_input_array(index, t, buffer)
        with self._lock:
            self._check_shape(index, t, arr.shape)
            self._pending[index] = arr

    def set_inputs(self, size: int, inputs_array: Sequence[Any] = ()) -> None:
        """onert's BaseSession.set_inputs: set inputs 0..size-1 from `inputs_array`; missing ones are
        zeros of the input's current dims (which must then be known)."""
        if size != self.input_size():
            raise InputError(f"set_inputs: the model has {self.input_size()} input(s), got size={size}")
        infos = self.get_inputs_tensorinfo()
        for k in range(size):
            if k < len(inputs_array):
                self.set_input(k, inputs_array[k])
                continue
            info = infos[k]
            if any(d < 0 for d in info.dims):
                raise InputError(f"set_inputs: input {k} ({info.name!r}) not given and its dims "
                                 f"{info.dims} are not known; give it")
            t = self._subgraph.tensors[self._subgraph.inputs[k]]
            self.set_input(k, _zeros(info.dims, t))
        self.inputs = [a for a in self._pending if a is not None]

    def get_output(self, index: int) -> np.ndarray:
        """A copy of output `index` of the last run."""
        index = self._io_index(index, self.output_size(), "output")
        if not self.outputs:
            raise InputError("get_output(): no run yet")
        return np.array(self.outputs[index], copy=True)

    @property
    def profile(self):
        return self.runtime.profile

    # ---- gradients
    def gradients(self, inputs: Sequence[Any], output_gradients: Sequence[Any] | None = None,
                  wrt: Sequence[str] | str | None = None, *, recompute: bool = False
                  ) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
        """(outputs, {name: gradient}): the forward outputs, and the gradient of the sum over the float
        outputs of output * its cotangent with respect to each `wrt` tensor, shaped like that tensor.

        output_gradients: one cotangent per output (None, or nothing, for integer/bool outputs; all
        ones by default: the gradient of the outputs' sum). wrt: tensor names as `onert-py inspect`
        prints them ("SUBGRAPH:NAME" for a tensor of another subgraph), or "weights" (every float
        constant a parameterised op reads); default the model's float inputs. recompute: WHILE loops
        keep only their loop values per iteration and recompute the rest backwards (checkpointing: less
        memory, more time). The backward pass is a model of its own (compiler.gradients), built once
        per `wrt` and run by the same executors."""
        from onert_py.compiler.gradients import gradient_model
        key = (self._subgraph_index, wrt if wrt is None or isinstance(wrt, str) else tuple(wrt), recompute)
        cached = self._gradient_sessions.get(key)
        if cached is None:
            gm = gradient_model(self.model, wrt, self._subgraph_index, recompute)
            cached = self._gradient_sessions[key] = (gm, session(
                gm.model, self._backends, controlflow_copy=self.runtime.options.controlflow_copy,
                max_while_iterations=self.runtime.options.max_while_iterations, op_backend=self._op_backend,
                num_threads=self.runtime.options.num_threads, timeout=self.runtime.options.timeout,
                max_memory=self.runtime.options.max_memory,
                # a backward model per `wrt`: its long runs of small ops would each be a segment to
                # compile (seconds with numba) for a model often run a few times
                segments=False))
        gm, grad_session = cached
        with self._lock:
            return self._gradients(gm, grad_session, inputs, output_gradients)

    def _gradients(self, gm, grad_session, inputs: Sequence[Any], output_gradients: Sequence[Any] | None
                   ) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
        arrays = self._prepare_inputs(inputs)
        sg = self._subgraph
        outs = [sg.tensors[t] for t in sg.outputs]
        if output_gradients is None:
            shapes = self._infer_shapes([list(a.shape) for a in arrays]).output_shapes(self.model)
            if any(s is None or any(d < 0 for d in s) for s in shapes):
                shapes = [np.shape(y) for y in self._execute(arrays)]
            cotangents = [np.ones(shapes[j], outs[j].dtype) for j in gm.cotangent_of]
        else:
            if len(output_gradients) != len(outs):
                raise InputError(f"output_gradients: {len(output_gradients)} given, the model has "
                                 f"{len(outs)} outputs")
            cotangents = []
            for j in gm.cotangent_of:
                c = output_gradients[j]
                if c is None:
                    raise InputError(f"output_gradients[{j}] ({outs[j].name!r}) is a float output: give its "
                                     "cotangent (zeros to leave it out)")
                cotangents.append(np.asarray(c, dtype=outs[j].dtype))
        results = grad_session.infer(arrays + cotangents)
        outputs = results[:gm.n_outputs]
        return outputs, dict(zip(gm.wrt, results[gm.n_outputs:]))

    def reset_variables(self) -> None:
        """Variables back to their initial values; CALL_ONCE initialisers run again on the next infer."""
        with self._lock:
            self.runtime.reset_variables()
            for executors in self._variants.all_executors() if self._variants else [self.executors]:
                for ex in executors:
                    ex.reset_variables()

    def _prepare_inputs(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        sg = self._subgraph
        if isinstance(inputs, np.ndarray) or not isinstance(inputs, (list, tuple)):
            raise InputError(f"inputs must be a list of arrays (one per model input), got "
                             f"{type(inputs).__name__}")
        if len(inputs) != len(sg.inputs):
            names = [sg.tensors[t].name for t in sg.inputs]
            raise InputError(f"Expected {len(sg.inputs)} input(s) {names}, but received {len(inputs)}.")
        arrays = []
        for k, (t_index, value) in enumerate(zip(sg.inputs, inputs)):
            t = sg.tensors[t_index]
            arr = self._as_input_array(k, t, value)
            self._check_shape(k, t, arr.shape)
            arrays.append(arr)
        return arrays

    def _executor_inputs(self, arrays: list[np.ndarray]) -> list:
        return [scalar_or_array(a) for a in arrays]

    def _as_input_array(self, k: int, t: Tensor, value: Any) -> np.ndarray:
        if t.type_name == "STRING":
            arr = np.asarray(value, dtype=object)
            flat = [s.encode("utf-8") if isinstance(s, str) else s for s in arr.reshape(-1)]
            if not all(isinstance(s, bytes) for s in flat):
                raise InputError(f"input {k} ({t.name!r}) is a string tensor; give str or bytes values")
            out = np.empty(len(flat), dtype=object)
            out[:] = flat
            return out.reshape(arr.shape)
        if isinstance(value, (np.ndarray, np.generic)) and value.dtype == t.dtype:
            return np.asarray(value)   # no copy: inputs are never written
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError) as e:
            raise InputError(f"input {k} ({t.name!r}) cannot be made an array: {e}") from None
        return _converted(k, t, arr)

    def _check_shape(self, k: int, t: Tensor, shape: tuple[int, ...], signature_only: bool = False) -> None:
        fixed = None if signature_only else self._input_dims[k]
        if fixed is None and not t.has_rank:
            return          # an input of unknown rank (a gradient model's cotangent) takes any shape
        expected = tuple(fixed) if fixed is not None else (
            t.shape_signature if t.shape_signature is not None else t.shape)
        if shape == expected:
            return
        ok = len(shape) == len(expected) and all(e < 0 or e == s for e, s in zip(expected, shape))
        if not ok:
            raise InputError(f"input {k} ({t.name!r}) has shape {list(shape)}, the model expects "
                             f"{list(expected)}" + (" (-1 = any size)" if any(e < 0 for e in expected) else ""))

    def _own_outputs(self, results: list, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Outputs as arrays the caller owns: never a user input, a constant, or a shared buffer."""
        outs = []
        seen: set[int] = set()
        variables = self.runtime.held_arrays()
        held = list(inputs) + variables  # what the caller or the runtime keeps
        for r in results:
            # the common case first: an array that owns its memory, made by this run, which can then
            # share memory with no input (the caller's arrays predate it; a variable could hold a view)
            if (r.__class__ is np.ndarray and r.base is None and not variables and r.flags.writeable
                    and id(r) not in seen and not any(r is x for x in inputs)):
                seen.add(id(r))
                outs.append(r)
                continue
            arr = np.asarray(r)
            if (not arr.flags.writeable or id(arr) in seen
                    or any(np.may_share_memory(arr, x) for x in held)):
                arr = arr.copy()
            seen.add(id(arr))
            outs.append(arr)
        return outs


# onert's backends that onert-py does not have. onert skips a listed backend it cannot load as long as
# another one is left ("cpu;acl_cl" runs on cpu where ACL is absent); so do we.
_ONERT_ONLY_BACKENDS = frozenset({"acl_cl", "acl_neon", "ruy", "xnnpack", "trix", "gpu_cl", "train"})


def _loadable(backends: Any) -> Any:
    if not isinstance(backends, str):
        return backends   # None: the default (compiler.default_backends)
    names = [b.strip() for b in backends.split(";") if b.strip()]
    kept = [b for b in names if b not in _ONERT_ONLY_BACKENDS]
    if names and not kept:
        raise ValueError(f"none of the backends {names} is available in onert-py (available: cpu, jit)")
    return ";".join(kept)


def _zeros(dims: Sequence[int], t: Tensor) -> np.ndarray:
    if t.type_name == "STRING":
        z = np.empty(tuple(dims), dtype=object)
        z.fill(b"")
        return z
    return np.zeros(tuple(dims), dtype=t.dtype)


def _converted(k: int, t: Tensor, arr: np.ndarray) -> np.ndarray:
    """`arr` as the input's dtype, as onert converts inputs (np.array(x, dtype=...)), refusing the
    conversions that would change values: non-numbers, float/complex -> int/bool, and integers
    outside the target type's range."""
    src, dst = arr.dtype, t.dtype
    if src.kind not in "biuf" or (src.kind == "f" and dst.kind in "biu") or (dst.kind == "b" and src.kind != "b"):
        raise InputError(f"input {k} ({t.name!r}): cannot use {src} values for {article(dst.name)} input")
    if src.kind in "iu" and dst.kind in "iu" and arr.size:
        info = np.iinfo(dst)
        lo, hi = arr.min(), arr.max()
        if lo < info.min or hi > info.max:
            raise InputError(f"input {k} ({t.name!r}): {src} values in [{lo}, {hi}] do not fit the "
                             f"{dst} input")
    return arr.astype(dst)
