"""IR data classes.

Tensors carry numpy dtypes; `type_name` keeps the schema's TensorType name (e.g. "INT8", "RESOURCE")
for types numpy cannot express exactly. Operations carry their options already decoded into plain
Python values (snake_case keys), so nothing downstream touches the flatbuffer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Schema TensorType name -> numpy dtype used at run time.
DTYPE_BY_TYPE_NAME: dict[str, np.dtype] = {
    "FLOAT32": np.dtype(np.float32),
    "FLOAT16": np.dtype(np.float16),
    "FLOAT64": np.dtype(np.float64),
    "INT32": np.dtype(np.int32),
    "UINT8": np.dtype(np.uint8),
    "INT64": np.dtype(np.int64),
    "STRING": np.dtype(object),
    "BOOL": np.dtype(np.bool_),
    "INT16": np.dtype(np.int16),
    "COMPLEX64": np.dtype(np.complex64),
    "INT8": np.dtype(np.int8),
    "COMPLEX128": np.dtype(np.complex128),
    "UINT64": np.dtype(np.uint64),
    "RESOURCE": np.dtype(np.int32),  # resource handles are ids
    "VARIANT": np.dtype(object),
    "UINT32": np.dtype(np.uint32),
    "UINT16": np.dtype(np.uint16),
    "INT4": np.dtype(np.int8),  # unpacked to one value per byte by the loader
    "BFLOAT16": np.dtype(np.uint16),
}

TYPE_NAME_BY_DTYPE: dict[np.dtype, str] = {
    np.dtype(np.float32): "FLOAT32", np.dtype(np.float16): "FLOAT16", np.dtype(np.float64): "FLOAT64",
    np.dtype(np.int32): "INT32", np.dtype(np.uint8): "UINT8", np.dtype(np.int64): "INT64",
    np.dtype(object): "STRING", np.dtype(np.bool_): "BOOL", np.dtype(np.int16): "INT16",
    np.dtype(np.complex64): "COMPLEX64", np.dtype(np.int8): "INT8", np.dtype(np.complex128): "COMPLEX128",
    np.dtype(np.uint64): "UINT64", np.dtype(np.uint32): "UINT32", np.dtype(np.uint16): "UINT16",
}


@dataclass
class Quantization:
    scale: np.ndarray            # float32, one per channel (or one)
    zero_point: np.ndarray       # int64
    quantized_dimension: int = 0
    min: np.ndarray | None = None
    max: np.ndarray | None = None

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1


@dataclass
class Tensor:
    index: int
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    type_name: str
    shape_signature: tuple[int, ...] | None = None
    data: np.ndarray | None = None          # constant contents (read-only), None for activations
    quantization: Quantization | None = None
    is_variable: bool = False
    sparsity: dict[str, Any] | None = None  # raw sparsity parameters when the constant is sparse
    has_rank: bool = True

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    @property
    def is_dynamic(self) -> bool:
        sig = self.shape_signature
        return sig is not None and any(d < 0 for d in sig)


@dataclass
class Operation:
    index: int
    opcode: str                    # builtin name ("ADD", "WHILE", "INSTANCE_NORM") or "CUSTOM"
    inputs: tuple[int, ...]        # -1 marks an omitted optional input
    outputs: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict)
    version: int = 1
    custom_name: str | None = None  # for CUSTOM ops
    custom_options: bytes = b""
    intermediates: tuple[int, ...] = ()
    # set by the compiler on the op an executor runs: the indices of the model's ops whose elementwise
    # work this op's kernel does too (fused into it; their outputs but the last are never computed)
    fused: tuple[int, ...] = ()
    # likewise the ops whose work it does on its input 0 before its own (a zero padding folded into its
    # reads: KernelAttrs.prologue); their outputs are never computed
    prologue: tuple[int, ...] = ()
    # set on the op an executor runs for a run of ops one backend kernel computes at once (a compiled
    # segment: Backend.compile_segments): this op and its `fused` ones, all with outputs of their own
    segment: bool = False

    @property
    def is_custom(self) -> bool:
        return self.opcode == "CUSTOM"

    @property
    def kernel_name(self) -> str:
        return self.custom_name if self.is_custom and self.custom_name else self.opcode


@dataclass
class Subgraph:
    index: int
    name: str
    tensors: list[Tensor]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    operations: list[Operation]
    # values of computed tensors proven at specialization (compiler/specialize.py): shape arithmetic on
    # the static shapes a session compiles for (a converter's SHAPE -> STRIDED_SLICE -> PACK of a dynamic
    # batch). The compiler folds the ops that produce them, as it folds ops of constant inputs.
    shape_values: dict[int, np.ndarray] = field(default_factory=dict)

    def read_tensors(self) -> set[int]:
        """Tensors some operation reads or the subgraph returns."""
        read = {t for op in self.operations for t in op.inputs}
        read.update(self.outputs)
        return read

    def inputs_read(self) -> list[bool]:
        """Per input: whether an operation reads it or the subgraph returns it (control flow passes
        nothing for the others, and LiteRT does not resize them)."""
        read = self.read_tensors()
        return [i in read for i in self.inputs]


@dataclass
class Signature:
    key: str
    subgraph_index: int
    inputs: dict[str, int]   # name -> tensor index in that subgraph, in file order
    outputs: dict[str, int]


@dataclass
class Model:
    subgraphs: list[Subgraph]
    signatures: list[Signature] = field(default_factory=list)
    metadata: dict[str, bytes] = field(default_factory=dict)
    description: str = ""
    version: int = 3
    format: str = "tflite"         # "tflite" or "circle"
    file_size: int = 0             # bytes of the file it was loaded from (0: built in memory)

    @property
    def main(self) -> Subgraph:
        return self.subgraphs[0]
