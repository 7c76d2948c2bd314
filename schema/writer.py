"""Serialize an ir.Model to TFLite (TFL3) or Circle (CIR0) bytes, and a small builder for tests.

Both formats share one table layout for everything TFLite has, so one writer (built on the Circle
bindings' object API) serves both; only the file identifier differs.
"""
from __future__ import annotations

import struct
from typing import Any, Iterable, Sequence

import flatbuffers
import numpy as np

from circle_schema.v0_10.circle import (
    Buffer as _Buffer, DimensionMetadata as _DimMeta, Int32Vector as _Int32Vector, Metadata as _Metadata,
    Model as _Model, Operator as _Operator, OperatorCode as _OperatorCode, QuantizationParameters as _Quant,
    SignatureDef as _SignatureDef, SparsityParameters as _Sparsity, SubGraph as _SubGraph, Tensor as _Tensor,
    TensorMap as _TensorMap, Uint8Vector as _Uint8Vector, Uint16Vector as _Uint16Vector,
)
from onert_py.ir import Model, Operation, Quantization, Signature, Subgraph, Tensor, TYPE_NAME_BY_DTYPE
from onert_py.schema.formats import CIRCLE_IDENTIFIER, TFLITE_IDENTIFIER, bindings
from onert_py.schema.opcodes import OPTIONS2_TYPES, OPTIONS_TYPES, op_code, options_class_name
from onert_py.schema.options import camel_case

_TYPE_CODES = {k: v for k, v in vars(bindings("circle", "TensorType").TensorType).items()
               if not k.startswith("_")}
_BUFFER_ALIGNMENT = 16


class _Prebuilt:
    """An already-serialized table offset that the object API's Pack() can place in a vector."""

    def __init__(self, offset: int):
        self.offset = offset

    def Pack(self, builder: flatbuffers.Builder) -> int:  # noqa: N802 (object API protocol)
        return self.offset


def encode_strings(values: np.ndarray) -> bytes:
    """TFLite's string-tensor buffer layout: count, offsets[count + 1], bytes."""
    items = [v if isinstance(v, bytes) else str(v).encode("utf-8") for v in values.reshape(-1)]
    header = 4 * (len(items) + 2)
    offsets, pos = [], header
    for s in items:
        offsets.append(pos)
        pos += len(s)
    offsets.append(pos)
    return struct.pack(f"<i{len(offsets)}i", len(items), *offsets) + b"".join(items)


def _tensor_bytes(t: Tensor) -> bytes | None:
    if t.data is None:
        return None
    if t.type_name == "STRING":
        return encode_strings(np.asarray(t.data, dtype=object))
    if t.type_name == "INT4":
        flat = np.asarray(t.data, dtype=np.int8).reshape(-1)
        if flat.size % 2:
            flat = np.concatenate([flat, np.zeros(1, np.int8)])
        return ((flat[0::2] & 0xF) | (flat[1::2] << 4)).astype(np.int8).tobytes()
    return np.ascontiguousarray(t.data, dtype=t.dtype).tobytes()


# DimensionType and the SparseIndexVector union of the schema (the same codes in TFLite and Circle).
DENSE, SPARSE_CSR = 0, 1
_INDEX_VECTORS = {np.dtype(np.int32): (1, _Int32Vector.Int32VectorT),
                  np.dtype(np.uint16): (2, _Uint16Vector.Uint16VectorT),
                  np.dtype(np.uint8): (3, _Uint8Vector.Uint8VectorT)}


def _index_vector(values: Any, what: str) -> tuple[int, Any]:
    """(union type, vector object) for a sparse index array: uint8 / uint16 arrays keep their narrow
    type, any other integer array is written as Int32Vector (its values must fit)."""
    if values is None:
        return 0, None
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"sparsity {what} must be integers, not {arr.dtype}")
    if arr.dtype not in _INDEX_VECTORS:
        if arr.size and (arr.min() < np.iinfo(np.int32).min or arr.max() > np.iinfo(np.int32).max):
            raise ValueError(f"sparsity {what} do not fit in int32")
        arr = arr.astype(np.int32)
    kind, cls = _INDEX_VECTORS[arr.dtype]
    vec = cls()
    vec.values = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
    return kind, vec


def _sparsity_object(sp: dict[str, Any]) -> Any:
    """SparsityParametersT for the IR's sparsity dict (the loader's layout)."""
    obj = _Sparsity.SparsityParametersT()
    obj.traversalOrder = [int(d) for d in sp.get("traversal_order") or ()]
    obj.blockMap = [int(d) for d in sp.get("block_map") or ()]
    obj.dimMetadata = []
    for level, d in enumerate(sp.get("dim_metadata") or ()):
        dm = _DimMeta.DimensionMetadataT()
        dm.format = int(d["format"])
        dm.denseSize = int(d.get("dense_size") or 0)
        dm.arraySegmentsType, dm.arraySegments = _index_vector(d.get("array_segments"), f"level {level} segments")
        dm.arrayIndicesType, dm.arrayIndices = _index_vector(d.get("array_indices"), f"level {level} indices")
        obj.dimMetadata.append(dm)
    return obj


def sparse_encode(dense: np.ndarray, traversal_order: Sequence[int] | None = None, block_map: Sequence[int] = (),
                  block_size: Sequence[int] = (), formats: Sequence[int] | None = None,
                  index_dtype: Any = np.int32) -> tuple[np.ndarray, dict[str, Any]]:
    """Compress `dense` in TFLite's sparsity format: (stored values, sparsity dict as the loader gives it).

    The n dims are split by `block_map` / `block_size` into n blocked dims plus k block dims (expanded
    dims n .. n+k-1); `traversal_order` lists the n + k expanded dims in storage order (default: in
    order) and `formats[level]` is DENSE or SPARSE_CSR for the dim stored at that level (default: all
    DENSE; block dims must be DENSE). A SPARSE_CSR level keeps the coordinates whose sub-tensor holds a
    nonzero. `index_dtype` (int32, uint16 or uint8) is the type of the segment and index vectors.
    """
    dense = np.asarray(dense)
    n, k = dense.ndim, len(block_map)
    if len(block_size) != k:
        raise ValueError(f"block_map {list(block_map)} needs one block size each, got {list(block_size)}")
    order = list(range(n + k)) if traversal_order is None else [int(d) for d in traversal_order]
    if sorted(order) != list(range(n + k)):
        raise ValueError(f"traversal_order {order} is not a permutation of the {n + k} expanded dims")
    fmts = [DENSE] * (n + k) if formats is None else [int(f) for f in formats]
    if len(fmts) != n + k or any(f not in (DENSE, SPARSE_CSR) for f in fmts):
        raise ValueError(f"formats {fmts} must give DENSE or SPARSE_CSR for each of the {n + k} levels")
    if any(fmts[order.index(n + b)] != DENSE for b in range(k)):
        raise ValueError("block dims must be stored DENSE")
    block_map = [int(d) for d in block_map]
    if any(not 0 <= d < n for d in block_map) or len(set(block_map)) != k:
        raise ValueError(f"block_map {block_map} must name distinct dims of a rank-{n} tensor")
    idt = np.dtype(index_dtype)
    if idt not in _INDEX_VECTORS:
        raise ValueError(f"index_dtype must be int32, uint16 or uint8, not {idt.name}")
    # split every blocked dim d into (shape[d] // bs, bs); axis_of[e] is expanded dim e's axis there
    split: list[int] = []
    axis_of = [0] * (n + k)
    for d, size in enumerate(dense.shape):
        axis_of[d] = len(split)
        if d in block_map:
            b = block_map.index(d)
            bs = int(block_size[b])
            if bs <= 0 or size % bs:
                raise ValueError(f"block size {bs} does not divide dim {d} of shape {list(dense.shape)}")
            axis_of[n + b] = len(split) + 1
            split += [size // bs, bs]
        else:
            split.append(size)
    expanded = dense.reshape(split)
    stored = np.transpose(expanded, [axis_of[e] for e in order])
    sizes = stored.shape
    levels: list[dict[str, Any]] = []
    prefixes = np.zeros(1, np.int64)                          # flat index of each kept prefix
    for level, (size, fmt) in enumerate(zip(sizes, fmts)):
        children = (prefixes[:, None] * size + np.arange(size, dtype=np.int64)).reshape(-1)
        if fmt == DENSE:
            levels.append({"format": DENSE, "dense_size": int(size), "array_segments": None, "array_indices": None})
            prefixes = children
            continue
        block = stored.reshape(int(np.prod(sizes[:level + 1], dtype=np.int64)), -1)
        keep = np.any(block[children] != 0, axis=1).reshape(prefixes.size, size)
        segments = np.concatenate([[0], np.cumsum(keep.sum(axis=1))])
        indices = np.nonzero(keep)[1]
        for what, arr in (("segments", segments), ("indices", indices)):
            if arr.size and arr.max() > np.iinfo(idt).max:
                raise ValueError(f"level {level} {what} reach {int(arr.max())}, beyond {idt.name}")
        levels.append({"format": SPARSE_CSR, "dense_size": 0, "array_segments": segments.astype(idt),
                       "array_indices": indices.astype(idt)})
        prefixes = children[keep.reshape(-1)]
    values = stored.reshape(-1)[prefixes]
    return values, {"traversal_order": tuple(order), "block_map": tuple(block_map),
                    "dim_metadata": levels}


# Fields that TFLite's schema and Circle's name differently (same slot in the same table).
_CIRCLE_FIELD_NAMES = {"adj_x": "adjoint_lhs", "adj_y": "adjoint_rhs"}


def _options_object(op: Operation) -> tuple[int, Any, int, Any]:
    """(type, T object) for builtin options and for builtin options 2."""
    if op.opcode == "CUSTOM":
        return 0, None, 0, None
    cls_name = options_class_name(op.opcode)
    if cls_name is None:
        if op.options:
            raise ValueError(f"{op.opcode} takes no options, got {sorted(op.options)}")
        return 0, None, 0, None
    module = bindings("circle", cls_name)
    obj = getattr(module, cls_name + "T")()
    for key, value in op.options.items():
        attr = camel_case(_CIRCLE_FIELD_NAMES.get(key, key) if not hasattr(obj, camel_case(key)) else key)
        if not hasattr(obj, attr):
            raise ValueError(f"{op.opcode}: {cls_name} has no field {key!r}")
        if isinstance(value, (tuple, list)):
            value = list(value)
        setattr(obj, attr, value)
    if cls_name in OPTIONS_TYPES:
        return OPTIONS_TYPES[cls_name], obj, 0, None
    return 0, None, OPTIONS2_TYPES[cls_name], obj


def serialize(model: Model, fmt: str = "tflite") -> bytes:
    """Write an ir.Model as a flatbuffer with the TFLite or Circle file identifier."""
    if fmt not in ("tflite", "circle"):
        raise ValueError(f"format must be 'tflite' or 'circle', not {fmt!r}")
    b = flatbuffers.Builder(1024)
    buffers: list[Any] = [_Prebuilt(_empty_buffer(b))]
    metadata = []
    for name, blob in model.metadata.items():
        buffers.append(_Prebuilt(_data_buffer(b, blob)))
        metadata.append((name, len(buffers) - 1))

    opcode_index: dict[tuple[str, str | None, int], int] = {}
    opcodes: list[Any] = []
    subgraphs = []
    for sg in model.subgraphs:
        sgt = _SubGraph.SubGraphT()
        sgt.name = sg.name
        sgt.inputs, sgt.outputs = list(sg.inputs), list(sg.outputs)
        sgt.tensors = []
        for t in sg.tensors:
            tt = _Tensor.TensorT()
            tt.name, tt.shape, tt.type = t.name, list(t.shape), _TYPE_CODES[t.type_name]
            tt.hasRank = t.has_rank
            tt.isVariable = t.is_variable
            if t.shape_signature is not None:
                tt.shapeSignature = list(t.shape_signature)
            raw = _tensor_bytes(t)
            if raw is not None:
                buffers.append(_Prebuilt(_data_buffer(b, raw)))
                tt.buffer = len(buffers) - 1
            if t.quantization is not None:
                q = _Quant.QuantizationParametersT()
                q.scale = [float(s) for s in np.ravel(t.quantization.scale)]
                q.zeroPoint = [int(z) for z in np.ravel(t.quantization.zero_point)]
                q.quantizedDimension = t.quantization.quantized_dimension
                tt.quantization = q
            if t.sparsity is not None:
                tt.sparsity = _sparsity_object(t.sparsity)
            sgt.tensors.append(tt)
        sgt.operators = []
        for op in sg.operations:
            key = (op.opcode, op.custom_name, op.version)
            if key not in opcode_index:
                oc = _OperatorCode.OperatorCodeT()
                code = op_code(op.opcode)
                oc.builtinCode = code
                oc.deprecatedBuiltinCode = code if code < 127 else 127  # Circle's negatives fit int8
                oc.version = op.version
                oc.customCode = op.custom_name
                opcode_index[key] = len(opcodes)
                opcodes.append(oc)
            ot = _Operator.OperatorT()
            ot.opcodeIndex = opcode_index[key]
            ot.inputs, ot.outputs = list(op.inputs), list(op.outputs)
            if op.intermediates:
                ot.intermediates = list(op.intermediates)
            ot.builtinOptionsType, ot.builtinOptions, ot.builtinOptions2Type, ot.builtinOptions2 = \
                _options_object(op)
            if op.custom_options:
                ot.customOptions = np.frombuffer(op.custom_options, dtype=np.uint8)
            sgt.operators.append(ot)
        subgraphs.append(sgt)

    m = _Model.ModelT()
    m.version = model.version or 3
    m.description = model.description or "onert-py"
    m.operatorCodes, m.subgraphs, m.buffers = opcodes, subgraphs, buffers
    if metadata:
        m.metadata = []
        for name, idx in metadata:
            md = _Metadata.MetadataT()
            md.name, md.buffer = name, idx
            m.metadata.append(md)
    if model.signatures:
        m.signatureDefs = [_signature(s) for s in model.signatures]
    ident = TFLITE_IDENTIFIER if fmt == "tflite" else CIRCLE_IDENTIFIER
    b.Finish(m.Pack(b), file_identifier=ident)
    return bytes(b.Output())


def _empty_buffer(b: flatbuffers.Builder) -> int:
    _Buffer.BufferStart(b)
    return _Buffer.BufferEnd(b)


def _data_buffer(b: flatbuffers.Builder, raw: bytes) -> int:
    b.StartVector(1, len(raw), _BUFFER_ALIGNMENT)
    b.head = b.head - len(raw)
    b.Bytes[b.head:b.head + len(raw)] = raw
    vec = b.EndVector()
    _Buffer.BufferStart(b)
    _Buffer.BufferAddData(b, vec)
    return _Buffer.BufferEnd(b)


def _signature(s: Signature) -> Any:
    sd = _SignatureDef.SignatureDefT()
    sd.signatureKey, sd.subgraphIndex = s.key, s.subgraph_index

    def tmap(d: dict[str, int]) -> list:
        out = []
        for name, idx in d.items():
            tm = _TensorMap.TensorMapT()
            tm.name, tm.tensorIndex = name, idx
            out.append(tm)
        return out

    sd.inputs, sd.outputs = tmap(s.inputs), tmap(s.outputs)
    return sd


# --------------------------------------------------------------------------------------------------
# Builder: a CircleGen-like way to make models in Python (tests, examples, corpus tools).


class SubgraphBuilder:
    def __init__(self, index: int, name: str):
        self.index = index
        self.name = name
        self.tensors: list[Tensor] = []
        self.operations: list[Operation] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    def tensor(self, name: str, shape: Sequence[int], dtype: Any = np.float32, *,
               shape_signature: Sequence[int] | None = None, quantization: tuple | None = None,
               is_variable: bool = False, type_name: str | None = None) -> int:
        """Add an activation tensor; returns its index. -1 dims become shape 1 + a signature of -1."""
        shape = list(shape)
        if shape_signature is None and any(d < 0 for d in shape):
            shape_signature = list(shape)
            shape = [1 if d < 0 else d for d in shape]
        dt = np.dtype(dtype)
        q = None
        if quantization is not None:
            scale, zp = quantization[0], quantization[1]
            qdim = quantization[2] if len(quantization) > 2 else 0
            q = Quantization(scale=np.atleast_1d(np.asarray(scale, np.float32)),
                             zero_point=np.atleast_1d(np.asarray(zp, np.int64)), quantized_dimension=qdim)
        t = Tensor(index=len(self.tensors), name=name, shape=tuple(shape), dtype=dt,
                   type_name=type_name or TYPE_NAME_BY_DTYPE[dt],
                   shape_signature=tuple(shape_signature) if shape_signature is not None else None,
                   quantization=q, is_variable=is_variable)
        self.tensors.append(t)
        return t.index

    def const(self, name: str, value: Any, dtype: Any = None, *, quantization: tuple | None = None,
              type_name: str | None = None) -> int:
        """Add a constant tensor holding `value`; returns its index."""
        if dtype is None and isinstance(value, (list, tuple, int, float, bool)) and not isinstance(value, np.ndarray):
            arr = np.asarray(value)
            if arr.dtype == np.float64:
                arr = arr.astype(np.float32)
            elif arr.dtype == np.int64:
                arr = arr.astype(np.int32)
        else:
            arr = np.asarray(value, dtype=dtype)
        if arr.dtype.kind in "US":
            arr = np.array([s.encode() if isinstance(s, str) else s for s in arr.reshape(-1)],
                           dtype=object).reshape(arr.shape)
        idx = self.tensor(name, arr.shape, arr.dtype, quantization=quantization, type_name=type_name)
        data = np.array(arr, copy=True)
        data.setflags(write=False)
        self.tensors[idx].data = data
        return idx

    def sparse_const(self, name: str, dense: Any, dtype: Any = None, *, traversal_order: Sequence[int] | None = None,
                     block_map: Sequence[int] = (), block_size: Sequence[int] = (),
                     formats: Sequence[int] | None = None, index_dtype: Any = np.int32,
                     quantization: tuple | None = None, type_name: str | None = None) -> int:
        """Add a sparse constant (the input of a DENSIFY) holding `dense`, compressed by sparse_encode
        with these layout arguments; returns its index."""
        arr = np.asarray(dense, dtype=dtype)
        if arr.dtype == np.float64 and dtype is None:
            arr = arr.astype(np.float32)
        values, sparsity = sparse_encode(arr, traversal_order, block_map, block_size, formats, index_dtype)
        idx = self.tensor(name, arr.shape, arr.dtype, quantization=quantization, type_name=type_name)
        values = np.array(values, copy=True)
        values.setflags(write=False)
        self.tensors[idx].data = values
        self.tensors[idx].sparsity = sparsity
        return idx

    def op(self, opcode: str, inputs: Iterable[int], outputs: Iterable[int], *, custom_code: str | None = None,
           custom_options: bytes = b"", version: int = 1, **options: Any) -> int:
        """Add an operation; options are the options table's fields in snake_case."""
        operation = Operation(index=len(self.operations), opcode="CUSTOM" if custom_code else opcode,
                              inputs=tuple(inputs), outputs=tuple(outputs), options=dict(options),
                              version=version, custom_name=custom_code, custom_options=custom_options)
        self.operations.append(operation)
        return operation.index

    def build(self) -> Subgraph:
        return Subgraph(index=self.index, name=self.name, tensors=list(self.tensors),
                        inputs=tuple(self.inputs), outputs=tuple(self.outputs), operations=list(self.operations))


class ModelBuilder:
    """Build multi-subgraph models in Python. Subgraph 0 is the main one."""

    def __init__(self) -> None:
        self.subgraphs: list[SubgraphBuilder] = []
        self.signatures: list[Signature] = []
        self.metadata: dict[str, bytes] = {}

    def subgraph(self, name: str = "") -> SubgraphBuilder:
        sg = SubgraphBuilder(len(self.subgraphs), name or f"subgraph_{len(self.subgraphs)}")
        self.subgraphs.append(sg)
        return sg

    def signature(self, key: str, subgraph: SubgraphBuilder, inputs: dict[str, int] | None = None,
                  outputs: dict[str, int] | None = None) -> None:
        ins = inputs if inputs is not None else {subgraph.tensors[i].name: i for i in subgraph.inputs}
        outs = outputs if outputs is not None else {subgraph.tensors[i].name: i for i in subgraph.outputs}
        self.signatures.append(Signature(key=key, subgraph_index=subgraph.index, inputs=ins, outputs=outs))

    def build(self) -> Model:
        return Model(subgraphs=[s.build() for s in self.subgraphs], signatures=list(self.signatures),
                     metadata=dict(self.metadata))

    def to_bytes(self, fmt: str = "tflite") -> bytes:
        return serialize(self.build(), fmt)
