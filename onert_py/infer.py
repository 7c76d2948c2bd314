"""The onert-style session: `onert_py.infer.session(path, backends="cpu").infer([arrays])`."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from onert_py.compiler import compile_model
from onert_py.compiler.shape_inference import ShapeCache
from onert_py.errors import InputError
from onert_py.exec.executor import scalar_or_array
from onert_py.exec.runtime import RuntimeOptions, RuntimeState
from onert_py.ir import Model, Tensor
from onert_py.loader import load_model


@dataclass
class tensorinfo:  # noqa: N801 - named as onert's binding names it
    """Name, dtype, rank and dims of a model input or output (-1 for a dynamic dimension)."""
    name: str
    dtype: str
    rank: int
    dims: list[int] = field(default_factory=list)


def _info(t: Tensor) -> tensorinfo:
    dims = list(t.shape_signature) if t.shape_signature is not None else list(t.shape)
    dtype = "string" if t.type_name == "STRING" else t.dtype.name
    return tensorinfo(name=t.name, dtype=dtype, rank=len(dims), dims=dims)


class session:  # noqa: N801 - mirrors onert's `infer.session`
    """Load, compile and run a TFLite/Circle model (path, bytes, or nnpackage directory)."""

    def __init__(self, path: Any, backends: str = "cpu", *, max_while_iterations: int | None = None,
                 controlflow_copy: str = "reference", signature: str | None = None,
                 preserve_all_tensors: bool = False):
        if controlflow_copy not in ("reference", "all"):
            raise ValueError(f"controlflow_copy must be 'reference' or 'all', not {controlflow_copy!r}")
        self.model: Model = path if isinstance(path, Model) else load_model(path)
        self.runtime = RuntimeState(RuntimeOptions(max_while_iterations=max_while_iterations,
                                                   controlflow_copy=controlflow_copy,
                                                   preserve_all_tensors=preserve_all_tensors))
        self.executors = compile_model(self.model, self.runtime, backends)
        self._shapes = ShapeCache(self.model, known=self._folded_values)   # per input-shape signature
        self._subgraph_index = 0
        if signature is not None:
            self.select_signature(signature)
        self._input_dims: list[list[int] | None] = [None] * len(self._subgraph.inputs)

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
                self._subgraph_index = s.subgraph_index
                self._input_dims = [None] * len(self._subgraph.inputs)
                return
        raise InputError(f"no signature {key!r}; the model has {self.get_signature_list()}")

    # ---- tensor info
    def get_inputs_tensorinfo(self) -> list[tensorinfo]:
        infos = []
        for k, t in enumerate(self._subgraph.inputs):
            info = _info(self._subgraph.tensors[t])
            if self._input_dims[k] is not None:
                info.dims = list(self._input_dims[k])
            infos.append(info)
        return infos

    def get_outputs_tensorinfo(self) -> list[tensorinfo]:
        """Outputs' dims: the model's (-1 = dynamic) until update_inputs_tensorinfo fixes input dims;
        then the dims shape inference propagates from them (-1 where they depend on input values; the
        model's declaration where not even the rank is known before running)."""
        infos = [_info(self._subgraph.tensors[t]) for t in self._subgraph.outputs]
        if all(d is None for d in self._input_dims):
            return infos
        shapes = self._infer_shapes(self._input_dims).output_shapes(self.model)
        for info, shape in zip(infos, shapes):
            if shape is not None:
                info.dims, info.rank = list(shape), len(shape)
        return infos

    def _infer_shapes(self, dims: Sequence[list[int] | None]):
        sg = self._subgraph
        shapes = [tuple(d) if d is not None else tuple(_info(sg.tensors[t]).dims)
                  for d, t in zip(dims, sg.inputs)]
        return self._shapes.infer(self._subgraph_index, shapes)

    def _folded_values(self) -> dict[int, dict[int, Any]]:
        """Values the compiler folded into constants, per subgraph (known values for shape inference)."""
        return {ex.subgraph.index: {i: ex.values[i] for i in getattr(ex, "_folded", ())}
                for ex in self.executors}

    def update_inputs_tensorinfo(self, infos: Sequence[tensorinfo]) -> None:
        """Fix the shapes of inputs (e.g. the -1 dims of a dynamic model) before inference."""
        if len(infos) != len(self._subgraph.inputs):
            raise InputError(f"expected {len(self._subgraph.inputs)} tensorinfo(s), got {len(infos)}")
        dims = list(self._input_dims)
        for k, info in enumerate(infos):
            if any(d < 0 for d in info.dims):
                raise InputError(f"input {k} ({info.name!r}): dims {info.dims} must all be >= 0")
            self._check_shape(k, self._subgraph.tensors[self._subgraph.inputs[k]], tuple(info.dims),
                              signature_only=True)
            dims[k] = list(info.dims)
        self._infer_shapes(dims)   # shapes an op cannot take fail here (ShapeInferenceError), naming it
        self._input_dims = dims

    # ---- running
    def infer(self, inputs: Sequence[Any], *, measure: bool = False):
        """Run the model; returns a list of arrays, or (outputs, metrics in ms) when `measure`."""
        t0 = time.perf_counter()
        arrays = self._prepare_inputs(inputs)
        t1 = time.perf_counter()
        with np.errstate(all="ignore"):  # inf/NaN results are values, as in LiteRT, not warnings
            results = self.executors[self._subgraph_index].execute(self._executor_inputs(arrays))
        t2 = time.perf_counter()
        outputs = self._own_outputs(results, arrays)
        t3 = time.perf_counter()
        if measure:
            return outputs, {"prepare_time_ms": 0.0, "input_time_ms": (t1 - t0) * 1e3,
                             "run_time_ms": (t2 - t1) * 1e3, "output_time_ms": (t3 - t2) * 1e3}
        return outputs

    def run(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        return self.infer(inputs)

    @property
    def profile(self):
        return self.runtime.profile

    def reset_variables(self) -> None:
        """Variables back to their initial values; CALL_ONCE initialisers run again on the next infer."""
        self.runtime.reset_variables()
        for ex in self.executors:
            ex.reset_variables()

    def _prepare_inputs(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        sg = self._subgraph
        if isinstance(inputs, np.ndarray) or not isinstance(inputs, (list, tuple)):
            raise InputError(f"inputs must be a list of arrays (one per model input), got "
                             f"{type(inputs).__name__}")
        if len(inputs) != len(sg.inputs):
            names = [sg.tensors[t].name for t in sg.inputs]
            raise InputError(f"expected {len(sg.inputs)} input(s) {names}, got {len(inputs)}")
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
        if isinstance(value, (np.ndarray, np.generic)):
            if value.dtype != t.dtype:
                raise InputError(f"input {k} ({t.name!r}) has dtype {value.dtype}, the model expects "
                                 f"{t.dtype}")
            return np.asarray(value)
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError) as e:
            raise InputError(f"input {k} ({t.name!r}) cannot be made an array: {e}") from None
        if arr.dtype.kind not in "biuf" or (arr.dtype.kind == "f" and t.dtype.kind in "biu"):
            raise InputError(f"input {k} ({t.name!r}): cannot use {arr.dtype} values for a "
                             f"{t.dtype} input")
        return arr.astype(t.dtype)

    def _check_shape(self, k: int, t: Tensor, shape: tuple[int, ...], signature_only: bool = False) -> None:
        fixed = None if signature_only else self._input_dims[k]
        expected = tuple(fixed) if fixed is not None else (
            t.shape_signature if t.shape_signature is not None else t.shape)
        ok = len(shape) == len(expected) and all(e < 0 or e == s for e, s in zip(expected, shape))
        if not ok:
            raise InputError(f"input {k} ({t.name!r}) has shape {list(shape)}, the model expects "
                             f"{list(expected)}" + (" (-1 = any size)" if any(e < 0 for e in expected) else ""))

    def _own_outputs(self, results: list, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Outputs as arrays the caller owns: never a user input, a constant, or a shared buffer."""
        outs = []
        seen: set[int] = set()
        held = list(inputs) + self.runtime.held_arrays()  # what the caller or the runtime keeps
        for r in results:
            arr = np.asarray(r)
            if (not arr.flags.writeable or id(arr) in seen
                    or any(np.may_share_memory(arr, x) for x in held)):
                arr = arr.copy()
            seen.add(id(arr))
            outs.append(arr)
        return outs
