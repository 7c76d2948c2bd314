"""Read a TFLite or Circle flatbuffer into an ir.Model, validating as it goes.

Every index in the file is checked before it is used, and every vector length is bounded by the file
size, so a hostile file gives a LoadError naming what is wrong instead of an IndexError or a hang.
"""
from __future__ import annotations

import json
import mmap
import os
import re
import struct
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from onert_py.errors import LoadError, ResourceError
from onert_py.exec.budget import OBJECT_ITEMSIZE, check_alloc, default_max_memory, over_budget
from onert_py.ir import DTYPE_BY_TYPE_NAME, Model, Operation, Quantization, Signature, Subgraph, Tensor
from onert_py.schema.formats import binding_class, detect_format
from onert_py.schema.opcodes import OPTIONS2_TYPES, OPTIONS_TYPES, op_name
from onert_py.schema.options import decode_onert_py_options, decode_table

_MMAP_THRESHOLD = 1 << 20
_TYPE_NAMES = {v: k for k, v in vars(binding_class("circle", "TensorType")).items()
               if not k.startswith("_") and isinstance(v, int)}
_OPTIONS_NAMES = {v: k for k, v in OPTIONS_TYPES.items()}
_OPTIONS2_NAMES = {v: k for k, v in OPTIONS2_TYPES.items()}


def _read_source(source: Any) -> tuple[Any, str]:
    """Bytes-like view of the model and a label for messages; big files are memory-mapped."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source) if isinstance(source, memoryview) else source, "<bytes>"
    if not isinstance(source, (str, os.PathLike)):
        raise LoadError(f"expected a model path or bytes, got {type(source).__name__}")
    path = Path(source)
    if path.is_dir():
        return _read_source(_nnpackage_model(path))
    try:
        size = path.stat().st_size
        if size >= _MMAP_THRESHOLD:
            with open(path, "rb") as f:
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), str(path)
        return path.read_bytes(), str(path)
    except FileNotFoundError:
        raise LoadError(f"model file not found: {path}") from None
    except OSError as e:
        raise LoadError(f"cannot read model file {path}: {e}") from None


def _nnpackage_model(path: Path) -> Path:
    """The first model named by an nnpackage's metadata/MANIFEST."""
    manifest = path / "metadata" / "MANIFEST"
    try:
        info = json.loads(manifest.read_text())
        models = info["models"]
        first = models[0]
    except FileNotFoundError:
        raise LoadError(f"{path} is a directory but has no metadata/MANIFEST (not an nnpackage)") from None
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise LoadError(f"{manifest}: malformed nnpackage MANIFEST ({e})") from None
    return path / first


def load_model(source: Any, max_memory: int | float | None = None) -> Model:
    """Load a model from a path (file or nnpackage directory) or from bytes. A constant over
    `max_memory` bytes (default: exec.budget's for the file's size) is refused with a ResourceError."""
    buf, label = _read_source(source)
    fmt = detect_format(buf)
    if fmt is None:
        if len(buf) < 8:
            raise LoadError(f"{label}: file too short ({len(buf)} bytes) to be a TFLite or Circle model")
        ident = bytes(buf[4:8])
        raise LoadError(f"{label}: unknown file identifier {ident!r}; expected b'TFL3' (TFLite) "
                        "or b'CIR0' (Circle)")
    reader = _Reader(buf, fmt, label)
    if max_memory is not None:
        reader.max_memory = max_memory
    try:
        model = reader.model()
    except (LoadError, ResourceError):
        raise
    except MemoryError as e:
        raise ResourceError(f"{label}: out of memory while reading {reader.where} ({e})") from None
    except (struct.error, IndexError, ValueError, TypeError, UnicodeDecodeError, OverflowError,
            AttributeError) as e:
        needed = _bytes_needed(e)
        if needed is not None and needed > len(buf):   # a table or vector runs past the end of the file
            raise LoadError(f"{label}: file truncated: needs at least {needed} bytes, has {len(buf)} (reading "
                            f"{reader.where})") from None
        raise LoadError(f"{label}: malformed flatbuffer while reading {reader.where} "
                        f"({type(e).__name__}: {e})") from None
    _check_subgraph_calls(model, label)
    model.file_size = len(buf)
    return model


def _bytes_needed(e: Exception) -> int | None:
    """The file size a failed read needed, from struct's "unpack_from requires a buffer of at least N
    bytes" (flatbuffers reads every field with struct); None for other errors."""
    m = re.search(r"requires a buffer of at least (\d+) bytes", str(e)) if isinstance(e, struct.error) else None
    return int(m.group(1)) if m else None


class _Reader:
    def __init__(self, buf: Any, fmt: str, label: str):
        self.buf, self.fmt, self.label = buf, fmt, label
        self.size = len(buf)
        self.where = "model header"
        self.max_memory: int | float = default_max_memory(self.size)

    def fail(self, msg: str) -> LoadError:
        return LoadError(f"{self.label}: {msg}")

    def count(self, n: int, elem_bytes: int, what: str) -> int:
        if n < 0 or n * elem_bytes > self.size:
            raise self.fail(f"{what}: length {n} needs {n * elem_bytes} bytes, more than the whole file "
                            f"({self.size} bytes): truncated or corrupt")
        return n

    def items(self, table: Any, name: str, what: str, elem_bytes: int = 4) -> Iterator[Any]:
        n = self.count(getattr(table, name + "Length")(), elem_bytes, what)
        getter = getattr(table, name)
        for i in range(n):
            yield getter(i)

    def ints(self, table: Any, name: str, what: str) -> tuple[int, ...]:
        self.count(getattr(table, name + "Length")(), 4, what)
        arr = getattr(table, name + "AsNumpy")()
        return tuple(int(x) for x in arr) if isinstance(arr, np.ndarray) else ()

    def model(self) -> Model:
        root = struct.unpack_from("<I", self.buf, 0)[0]
        if root + 4 > self.size:
            raise self.fail(f"file truncated or corrupt: the root table offset {root} is outside the "
                            f"{self.size}-byte file")
        fb = binding_class(self.fmt, "Model").GetRootAs(self.buf, 0)
        self.where = "buffers"
        buffers = [self.buffer(b, i) for i, b in enumerate(self.items(fb, "Buffers", "buffers"))]
        self.where = "operator codes"
        opcodes = [self.opcode(c, i) for i, c in enumerate(self.items(fb, "OperatorCodes", "operator codes"))]
        n_sub = self.count(fb.SubgraphsLength(), 4, "subgraphs")
        if n_sub == 0:
            raise self.fail("model has no subgraphs")
        subgraphs = [self.subgraph(fb.Subgraphs(i), i, buffers, opcodes) for i in range(n_sub)]
        self.where = "signature defs"
        signatures = [self.signature(s, i, subgraphs)
                      for i, s in enumerate(self.items(fb, "SignatureDefs", "signature defs"))]
        self.where = "metadata"
        metadata = {}
        for m in self.items(fb, "Metadata", "metadata"):
            name = (m.Name() or b"").decode("utf-8", errors="replace")
            idx = m.Buffer()
            if not 0 <= idx < len(buffers):
                raise self.fail(f"metadata {name!r} refers to buffer {idx}, but there are {len(buffers)}")
            metadata[name] = bytes(buffers[idx]) if buffers[idx] is not None else b""
        desc = (fb.Description() or b"").decode("utf-8", errors="replace")
        return Model(subgraphs=subgraphs, signatures=signatures, metadata=metadata,
                     description=desc, version=fb.Version(), format=self.fmt)

    def buffer(self, b: Any, i: int) -> Any:
        offset, size = b.Offset(), b.Size()
        if offset > 1:  # data stored after the flatbuffer (models over 2 GB)
            if offset + size > self.size:
                raise self.fail(f"buffer {i}: offset {offset} + size {size} is past the end of the "
                                f"{self.size}-byte file")
            return memoryview(self.buf)[offset:offset + size]
        n = self.count(b.DataLength(), 1, f"buffer {i} data")
        if n == 0:
            return None
        data = b.DataAsNumpy()
        return data if isinstance(data, np.ndarray) else None

    def opcode(self, c: Any, i: int) -> tuple[str, int, str | None]:
        deprecated, builtin = c.DeprecatedBuiltinCode(), c.BuiltinCode()
        if builtin < 0 or deprecated < 0:  # Circle-only ops have negative codes
            code = min(builtin, deprecated)
        else:
            code = max(builtin, deprecated)  # as TFLite resolves the two fields
        custom = c.CustomCode()
        return op_name(code), c.Version(), custom.decode("utf-8", errors="replace") if custom else None

    def subgraph(self, sg: Any, si: int, buffers: list, opcodes: list) -> Subgraph:
        self.where = f"subgraph {si} tensors"
        tensors = [self.tensor(t, si, ti, buffers)
                   for ti, t in enumerate(self.items(sg, "Tensors", f"subgraph {si} tensors"))]
        nt = len(tensors)

        def check(indices: tuple[int, ...], what: str, allow_optional: bool = False) -> tuple[int, ...]:
            for t in indices:
                if not (-1 if allow_optional else 0) <= t < nt:
                    raise self.fail(f"{what} refers to tensor {t}, but the subgraph has {nt} tensors")
            return indices

        self.where = f"subgraph {si} inputs/outputs"
        inputs = check(self.ints(sg, "Inputs", f"subgraph {si} inputs"), f"subgraph {si} input")
        outputs = check(self.ints(sg, "Outputs", f"subgraph {si} outputs"), f"subgraph {si} output")
        ops = []
        n_ops = self.count(sg.OperatorsLength(), 4, f"subgraph {si} operators")
        for oi in range(n_ops):
            self.where = f"subgraph {si} operator {oi}"
            op = self.operation(sg.Operators(oi), oi, opcodes)
            where = f"subgraph {si} operator {oi} ({op.kernel_name})"
            check(op.inputs, f"{where} input", allow_optional=True)
            check(op.outputs, f"{where} output")
            check(op.intermediates, f"{where} intermediate", allow_optional=True)
            ops.append(op)
        _fill_empty_constants(tensors, inputs, ops)
        name = (sg.Name() or b"").decode("utf-8", errors="replace")
        return Subgraph(index=si, name=name, tensors=tensors, inputs=inputs, outputs=outputs, operations=ops)

    def tensor(self, t: Any, si: int, ti: int, buffers: list) -> Tensor:
        where = f"subgraph {si} tensor {ti}"
        self.where = where
        type_code = t.Type()
        type_name = _TYPE_NAMES.get(type_code)
        if type_name is None:
            raise self.fail(f"{where}: unknown tensor type {type_code}")
        dtype = DTYPE_BY_TYPE_NAME.get(type_name)
        if dtype is None:   # Circle's block-quantized and 4-bit unsigned types (UINT4, GGML_*, MX*)
            raise self.fail(f"{where}: tensor type {type_name} is not supported by onert-py")
        shape = self.ints(t, "Shape", f"{where} shape")
        if any(d < 0 for d in shape):
            raise self.fail(f"{where}: negative dimension in shape {list(shape)}")
        sig = self.ints(t, "ShapeSignature", f"{where} shape signature") or None
        name = (t.Name() or b"").decode("utf-8", errors="replace")
        q = t.Quantization()
        quant = self.quantization(q, where, shape) if q is not None else None
        sparsity = self.sparsity(t.Sparsity(), where) if t.Sparsity() is not None else None
        bi = t.Buffer()
        if not 0 <= bi < max(len(buffers), 1):
            raise self.fail(f"{where} ({name!r}) refers to buffer {bi}, but the model has {len(buffers)}")
        raw = buffers[bi] if buffers else None
        data = None
        if raw is not None and bi != 0:
            data = self.constant(raw, dtype, type_name, shape, sparsity, f"{where} ({name!r})")
        # The schema's has_rank (false by default, so false in every file of an older converter) only
        # tells a rank-0 shape [] from an unknown rank: a tensor with dims, or a constant, has its rank.
        has_rank = bool(t.HasRank()) if hasattr(t, "HasRank") else True
        has_rank = has_rank or bool(shape) or data is not None
        return Tensor(index=ti, name=name, shape=shape, dtype=dtype, type_name=type_name,
                      shape_signature=sig, data=data, quantization=quant, is_variable=bool(t.IsVariable()),
                      sparsity=sparsity, has_rank=has_rank)

    def constant(self, raw: Any, dtype: np.dtype, type_name: str, shape: tuple[int, ...],
                 sparsity: Any, where: str) -> np.ndarray:
        raw_u8 = np.frombuffer(raw, dtype=np.uint8) if not isinstance(raw, np.ndarray) else raw
        n = int(np.prod(shape, dtype=np.int64))
        if sparsity is None:   # (a sparse one is expanded by DENSIFY, which checks its size)
            check_alloc(shape, np.int8 if type_name == "INT4" else dtype, f"{where}: constant", self.max_memory)
        if type_name == "STRING":
            # Python bytes objects: up to ~12x the 4-byte offsets that make them
            count = int(np.frombuffer(raw_u8[:4].tobytes(), "<i4")[0]) if raw_u8.size >= 4 else 0
            need = max(count, 0) * OBJECT_ITEMSIZE + raw_u8.size
            if need > self.max_memory:
                raise over_budget(f"{where}: string constant of {count} strings", need, self.max_memory)
            return _decode_strings(raw_u8, shape, where, self.fail)
        if type_name == "INT4":
            packed = raw_u8.view(np.int8)
            low = (packed.astype(np.int8) << 4) >> 4
            high = packed >> 4
            both = np.stack([low, high], axis=-1).reshape(-1)
            if both.size < n:
                raise self.fail(f"{where}: INT4 buffer holds {both.size} values, shape needs {n}")
            arr = both[:n].reshape(shape)
            arr.setflags(write=False)
            return arr
        if sparsity is not None:
            if raw_u8.size % dtype.itemsize:
                raise self.fail(f"{where}: sparse buffer size {raw_u8.size} is not a multiple of "
                                f"{dtype.itemsize}")
            arr = raw_u8.view(dtype)
            arr.setflags(write=False)
            return arr  # compressed values; DENSIFY expands them
        expected = n * dtype.itemsize
        if raw_u8.size != expected:
            raise self.fail(f"{where}: buffer has {raw_u8.size} bytes but shape {list(shape)} of "
                            f"{type_name} needs {expected}")
        arr = raw_u8.view(dtype).reshape(shape)
        arr.setflags(write=False)
        return arr

    def quantization(self, q: Any, where: str, shape: tuple[int, ...]) -> Quantization | None:
        scale = q.ScaleAsNumpy()
        if not isinstance(scale, np.ndarray) or scale.size == 0:
            return None
        self.count(scale.size, 4, f"{where} quantization scales")
        zp = q.ZeroPointAsNumpy()
        zp = zp.astype(np.int64) if isinstance(zp, np.ndarray) else np.zeros(scale.size, np.int64)
        # LiteRT's InterpreterBuilder refuses these too; kernels index scales by the quantized dimension
        qdim = q.QuantizedDimension()
        if shape and not 0 <= qdim < len(shape):
            raise self.fail(f"{where}: quantized_dimension {qdim} is not a dimension of shape {list(shape)}")
        if shape and scale.size != 1 and scale.size != shape[qdim]:
            raise self.fail(f"{where}: {scale.size} quantization scales, but dimension {qdim} of shape "
                            f"{list(shape)} has {shape[qdim]} (per-tensor quantization has 1)")
        if zp.size != scale.size:
            raise self.fail(f"{where}: {zp.size} zero points for {scale.size} quantization scales")
        qmin, qmax = q.MinAsNumpy(), q.MaxAsNumpy()
        return Quantization(scale=scale.astype(np.float32), zero_point=zp,
                            quantized_dimension=q.QuantizedDimension(),
                            min=qmin if isinstance(qmin, np.ndarray) else None,
                            max=qmax if isinstance(qmax, np.ndarray) else None)

    def sparsity(self, sp: Any, where: str) -> dict[str, Any]:
        dims = []
        for d in self.items(sp, "DimMetadata", f"{where} sparsity dims"):
            dims.append({
                "format": d.Format(),  # 0 DENSE, 1 SPARSE_CSR
                "dense_size": d.DenseSize(),
                "array_segments": self.index_vector(d.ArraySegmentsType(), d.ArraySegments(), where),
                "array_indices": self.index_vector(d.ArrayIndicesType(), d.ArrayIndices(), where),
            })
        return {
            "traversal_order": self.ints(sp, "TraversalOrder", f"{where} traversal order"),
            "block_map": self.ints(sp, "BlockMap", f"{where} block map"),
            "dim_metadata": dims,
        }

    def index_vector(self, kind: int, table: Any, where: str) -> np.ndarray | None:
        names = {1: "Int32Vector", 2: "Uint16Vector", 3: "Uint8Vector"}
        if table is None or kind not in names:
            return None
        vec = binding_class(self.fmt, names[kind])()
        vec.Init(table.Bytes, table.Pos)
        self.count(vec.ValuesLength(), 1, f"{where} sparsity index vector")
        values = vec.ValuesAsNumpy()
        # keep the stored index type (int32 / uint16 / uint8): the writer writes the same vector type back
        dtype = {1: np.int32, 2: np.uint16, 3: np.uint8}[kind]
        return values.astype(dtype) if isinstance(values, np.ndarray) else np.zeros(0, dtype)

    def operation(self, op: Any, oi: int, opcodes: list) -> Operation:
        ci = op.OpcodeIndex()
        if not 0 <= ci < len(opcodes):
            raise self.fail(f"{self.where}: opcode index {ci} is out of range ({len(opcodes)} operator codes)")
        name, version, custom = opcodes[ci]
        options: dict[str, Any] = {}
        options.update(self.options(op.BuiltinOptionsType(), op.BuiltinOptions(), _OPTIONS_NAMES))
        if hasattr(op, "BuiltinOptions2Type"):
            options.update(self.options(op.BuiltinOptions2Type(), op.BuiltinOptions2(), _OPTIONS2_NAMES))
        custom_options = b""
        n = self.count(op.CustomOptionsLength(), 1, f"{self.where} custom options")
        if n:
            custom_options = op.CustomOptionsAsNumpy().tobytes()
        elif op.LargeCustomOptionsSize():
            off, size = op.LargeCustomOptionsOffset(), op.LargeCustomOptionsSize()
            if off + size > self.size:
                raise self.fail(f"{self.where}: large custom options [{off}, {off + size}) past end of file")
            custom_options = bytes(self.buf[off:off + size])
        own = decode_onert_py_options(custom_options) if custom is not None else None
        if own is not None:
            options.update(own)
        return Operation(index=oi, opcode=name, version=version,
                         inputs=self.ints(op, "Inputs", f"{self.where} inputs"),
                         outputs=self.ints(op, "Outputs", f"{self.where} outputs"),
                         intermediates=self.ints(op, "Intermediates", f"{self.where} intermediates"),
                         options=options, custom_name=custom, custom_options=custom_options)

    def options(self, type_code: int, table: Any, names: dict[int, str]) -> dict[str, Any]:
        if type_code == 0 or table is None:
            return {}
        cls_name = names.get(type_code)
        if cls_name is None:
            raise self.fail(f"{self.where}: unknown builtin options type {type_code}")
        try:
            cls = binding_class(self.fmt, cls_name)
        except (ImportError, AttributeError):  # a table only the other schema has
            cls = binding_class("circle", cls_name)
        obj = cls()
        obj.Init(table.Bytes, table.Pos)
        return decode_table(obj)

    def signature(self, s: Any, i: int, subgraphs: list[Subgraph]) -> Signature:
        si = s.SubgraphIndex()
        key = (s.SignatureKey() or b"").decode("utf-8", errors="replace")
        if not 0 <= si < len(subgraphs):
            raise self.fail(f"signature {key!r} refers to subgraph {si}, but there are {len(subgraphs)}")
        nt = len(subgraphs[si].tensors)

        def tmap(name: str) -> dict[str, int]:
            out = {}
            for m in self.items(s, name, f"signature {key!r} {name.lower()}"):
                tname = (m.Name() or b"").decode("utf-8", errors="replace")
                ti = m.TensorIndex()
                if not 0 <= ti < nt:
                    raise self.fail(f"signature {key!r} {name.lower()[:-1]} {tname!r} refers to tensor {ti}, "
                                    f"but subgraph {si} has {nt} tensors")
                out[tname] = ti
            return out

        return Signature(key=key, subgraph_index=si, inputs=tmap("Inputs"), outputs=tmap("Outputs"))


def _decode_strings(raw: np.ndarray, shape: tuple[int, ...], where: str, fail) -> np.ndarray:
    """TFLite string buffer: int32 count, int32 offsets[count + 1], then the bytes."""
    data = raw.tobytes()
    if len(data) < 4:
        raise fail(f"{where}: string buffer of {len(data)} bytes has no count")
    (count,) = struct.unpack_from("<i", data, 0)
    if count < 0 or 4 * (count + 2) > len(data):
        raise fail(f"{where}: string count {count} does not fit in {len(data)} bytes")
    offsets = struct.unpack_from(f"<{count + 1}i", data, 4)
    if any(not 0 <= o <= len(data) for o in offsets) or list(offsets) != sorted(offsets):
        raise fail(f"{where}: string offsets are out of order or out of range")
    strings = [data[offsets[k]:offsets[k + 1]] for k in range(count)]
    n = int(np.prod(shape, dtype=np.int64))
    if n != count:
        raise fail(f"{where}: {count} strings stored but shape {list(shape)} needs {n}")
    arr = np.empty(count, dtype=object)
    arr[:] = strings
    arr = arr.reshape(shape)
    arr.setflags(write=False)
    return arr


def _fill_empty_constants(tensors: list[Tensor], inputs: tuple[int, ...], ops: list[Operation]) -> None:
    """A zero-element tensor that no op produces is a constant (e.g. tf.zeros([0])); its buffer is
    empty, so it reads as "no data" and is given its (empty) value here."""
    produced = {o for op in ops for o in op.outputs}
    for t in tensors:
        if (t.data is None and not t.is_variable and t.index not in produced and t.index not in inputs
                and 0 in t.shape and t.type_name != "RESOURCE"):
            t.data = np.zeros(t.shape, t.dtype)
            t.data.setflags(write=False)


def subgraph_calls(op: Operation) -> tuple[int, ...]:
    """Subgraph indices an operation calls (IF/WHILE/CALL_ONCE/CALL/StableHLO), read from its options."""
    found: list[int] = []
    for key, value in op.options.items():
        if "subgraph" not in key:
            continue
        if isinstance(value, tuple):
            found.extend(int(v) for v in value)
        elif isinstance(value, int):
            found.append(value)
    return tuple(found)


# Deepest chain of subgraph calls (IF/WHILE/CALL... inside a called subgraph) a model may hold: each
# level runs through a few Python frames, and real models nest a handful; a file nesting 10,000 deep
# is hostile and is refused here rather than by a RecursionError at run time.
MAX_CALL_DEPTH = 64


def _check_subgraph_calls(model: Model, label: str) -> None:
    """Every subgraph an op calls exists, calls form no cycle (self- or mutual recursion), and no chain
    of calls is more than MAX_CALL_DEPTH deep; the error names the cycle or the chain."""
    n = len(model.subgraphs)
    edges: dict[int, list[int]] = {}
    for sg in model.subgraphs:
        callees = []
        for op in sg.operations:
            for target in subgraph_calls(op):
                if not 0 <= target < n:
                    raise LoadError(f"{label}: subgraph {sg.index} operator {op.index} ({op.kernel_name}) "
                                    f"refers to subgraph {target}, but the model has {n} subgraphs")
                callees.append(target)
        edges[sg.index] = callees
    # Iterative DFS with colours: a grey node reached again is a cycle. A node turning black has every
    # callee black, so its depth (longest chain of calls below it) is known from theirs.
    colour = [0] * n
    depth = [0] * n
    deepest: list[int | None] = [None] * n   # the callee the longest chain goes through
    for start in range(n):
        if colour[start]:
            continue
        stack = [(start, iter(edges[start]))]
        path = [start]
        colour[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                colour[node] = 2
                stack.pop()
                path.pop()
                for c in edges[node]:
                    if depth[c] + 1 > depth[node]:
                        depth[node], deepest[node] = depth[c] + 1, c
                if depth[node] > MAX_CALL_DEPTH:
                    chain = [node]
                    while deepest[chain[-1]] is not None:
                        chain.append(deepest[chain[-1]])
                    shown = chain if len(chain) <= 10 else chain[:4] + ["..."] + chain[-4:]
                    raise LoadError(f"{label}: subgraph calls nest {depth[node]} deep (at most {MAX_CALL_DEPTH}): "
                                    + " -> ".join(map(str, shown)))
            elif colour[nxt] == 1:
                cycle = path[path.index(nxt):] + [nxt]
                raise LoadError(f"{label}: subgraph call cycle " + " -> ".join(map(str, cycle)))
            elif colour[nxt] == 0:
                colour[nxt] = 1
                stack.append((nxt, iter(edges[nxt])))
                path.append(nxt)
