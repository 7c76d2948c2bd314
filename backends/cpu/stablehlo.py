"""StableHLO ops that LiteRT runs (STABLEHLO_* builtins, options in BuiltinOptions2).

Semantics follow the StableHLO spec as LiteRT's kernels implement it (tflite/kernels/stablehlo_*.cc):
scatter ignores updates whose target index is out of bounds and applies duplicates in order; the region
subgraphs of SCATTER and REDUCE_WINDOW are not executed but recognised by their single op, as LiteRT
does, so the reduction runs as a numpy ufunc.
"""
from __future__ import annotations

import numpy as np

from onert_py.backends.cpu.shape import check_dtype, check_same_types
from onert_py.backends.cpu.elementwise import add_grad, maximum_grad, minimum_grad, mul_grad
from onert_py.backends.registry import CPU, KernelContext, Run, grad_rule, no_gradient, shape_rule
from onert_py.backends.shape_rules import Node, Shape, broadcasting, same_shape

_INT_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_NUM_TYPES = ("float32", "float64", "float16") + _INT_TYPES
# LiteRT's elementwise StableHLO kernels also run bool, with C++ semantics: add/max = OR, mul/min = AND
# (numpy's bool ufuncs agree).
_ARITH_TYPES = _NUM_TYPES + ("bool",)


def _binary(ctx: KernelContext, fn) -> Run:
    ctx.expect_inputs(2)
    dt = check_same_types(ctx, 0, 1)
    a, b = ctx.inputs
    (o,) = ctx.outputs
    v = ctx.values
    dtype = ctx.output_dtype()

    def run() -> None:
        r = fn(v[a], v[b])                 # numpy scalars in, numpy scalar out (rank-0 convention)
        v[o] = r if r.dtype == dtype else r.astype(dtype)
    return run


@CPU.register("STABLEHLO_ADD", dtypes=_ARITH_TYPES)
def stablehlo_add(ctx: KernelContext) -> Run:
    return _binary(ctx, np.add)


@CPU.register("STABLEHLO_MULTIPLY", dtypes=_ARITH_TYPES)
def stablehlo_multiply(ctx: KernelContext) -> Run:
    return _binary(ctx, np.multiply)


@CPU.register("STABLEHLO_MAXIMUM", dtypes=_ARITH_TYPES)
def stablehlo_maximum(ctx: KernelContext) -> Run:
    return _binary(ctx, np.maximum)


@CPU.register("STABLEHLO_MINIMUM", dtypes=_ARITH_TYPES)
def stablehlo_minimum(ctx: KernelContext) -> Run:
    return _binary(ctx, np.minimum)


@CPU.register("STABLEHLO_AND", dtypes=("bool",) + _INT_TYPES)
def stablehlo_and(ctx: KernelContext) -> Run:
    # Logical AND on booleans, bitwise AND on integers (np.bitwise_and does both).
    return _binary(ctx, np.bitwise_and)


@CPU.register("STABLEHLO_SHIFT_LEFT", dtypes=("int8", "int16", "int32"))
def stablehlo_shift_left(ctx: KernelContext) -> Run:
    return _binary(ctx, np.left_shift)


def _opt_ints(options: dict, key: str, n: int | None = None, default: int = 0) -> tuple[int, ...] | None:
    """Integer-list option `key`: `n` times `default` when absent, None when it has not `n` entries."""
    value = options.get(key)
    if value is None or len(value) == 0:
        if n is None:
            return ()
        return (default,) * n
    out = tuple(int(x) for x in value)
    return None if n is not None and len(out) != n else out


def _ints(ctx: KernelContext, key: str, n: int | None = None, default: int = 0) -> tuple[int, ...]:
    out = _opt_ints(ctx.options, key, n, default)
    if out is None:
        raise ctx.fail(f"{key} has {len(ctx.options[key])} entries, the operand has rank {n}")
    return out


def window_output_size(size: int, window: int, stride: int, dilation: int) -> int:
    """Positions of a dilated window sliding by `stride` over `size` elements (0 when it does not fit;
    -1 for an unknown size)."""
    if size < 0:
        return -1
    span = (window - 1) * dilation + 1
    return 0 if size < span else (size - span) // stride + 1


@CPU.register("STABLEHLO_PAD", dtypes=_ARITH_TYPES + ("complex64", "complex128"))
def stablehlo_pad(ctx: KernelContext) -> Run:
    """Edge padding (negative values crop) and interior padding between elements."""
    ctx.expect_inputs(2)
    check_dtype(ctx)
    x_i, pv_i = ctx.inputs
    (o,) = ctx.outputs
    rank = len(ctx.input_tensor(0).shape)
    low = _ints(ctx, "edge_padding_low", rank)
    high = _ints(ctx, "edge_padding_high", rank)
    interior = _ints(ctx, "interior_padding", rank)
    if any(p < 0 for p in interior):
        raise ctx.fail(f"interior_padding must be non-negative, got {list(interior)}")
    dtype = ctx.output_dtype()
    v = ctx.values

    def run() -> None:
        x = v[x_i]
        pad_value = np.asarray(v[pv_i], dtype=dtype).reshape(-1)[0]
        # Size of each dim with interior and positive edge padding; negative edges are cropped after.
        full = [max(lo, 0) + (d + (d - 1) * it if d > 0 else 0) + max(hi, 0)
                for d, lo, hi, it in zip(x.shape, low, high, interior)]
        out = np.full(full, pad_value, dtype=dtype)
        place = tuple(slice(max(lo, 0), max(lo, 0) + (d - 1) * (it + 1) + 1 if d > 0 else max(lo, 0), it + 1)
                      for d, lo, it in zip(x.shape, low, interior))
        out[place] = x
        crop = tuple(slice(-min(lo, 0), f + min(hi, 0)) for f, lo, hi in zip(full, low, high))
        out = out[crop]
        if any(s < 0 for s in out.shape):
            raise ValueError("STABLEHLO_PAD: negative result dimension")
        v[o] = np.require(out, requirements="C")   # (ascontiguousarray makes 0-d 1-d)
    return run


@shape_rule("STABLEHLO_PAD")
def stablehlo_pad_shape(n: Node):
    s = n.shape(0)
    if s is None:
        return [None]
    r = len(s)

    def opt(key: str) -> tuple[int, ...]:
        v = n.opts.get(key)
        return tuple(int(x) for x in v) if v is not None and len(v) else (0,) * r
    lo, hi, it = opt("edge_padding_low"), opt("edge_padding_high"), opt("interior_padding")
    return [tuple(-1 if d < 0 else lo[k] + hi[k] + d + max(d - 1, 0) * it[k] for k, d in enumerate(s))]


def _gather_perm(out_rank: int, offset_dims: tuple[int, ...], n_batch: int) -> list[int]:
    """The output axes of a gather as axes of [*batch, *kept slice dims]: offset_dims are slice dims,
    the others batch dims, in order."""
    perm, batch_axis = [], 0
    for r in range(out_rank):
        if r in offset_dims:
            perm.append(n_batch + offset_dims.index(r))
        else:
            perm.append(batch_axis)
            batch_axis += 1
    return perm


def _index_vectors(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """Indices with the index vector moved to the last axis ([..., K])."""
    if index_vector_dim == indices.ndim:
        return indices[..., None]
    return np.moveaxis(indices, index_vector_dim, -1)


@CPU.register("STABLEHLO_GATHER", dtypes=_ARITH_TYPES + ("complex64",))
def stablehlo_gather(ctx: KernelContext) -> Run:
    ctx.expect_inputs(2)
    check_dtype(ctx)
    x_i, idx_i = ctx.inputs
    (o,) = ctx.outputs
    rank = len(ctx.input_tensor(0).shape)
    offset_dims = _ints(ctx, "offset_dims")
    collapsed = _ints(ctx, "collapsed_slice_dims")
    start_index_map = _ints(ctx, "start_index_map")
    index_vector_dim = int(ctx.options.get("index_vector_dim", 0))
    slice_sizes = _ints(ctx, "slice_sizes", rank)
    if any(slice_sizes[d] != 1 for d in collapsed):
        raise ctx.fail("collapsed_slice_dims must have slice size 1")
    out_rank = len(ctx.output_tensor(0).shape)
    kept = [d for d in range(rank) if d not in collapsed]        # operand dims that become offset dims
    v = ctx.values

    def run() -> None:
        x = v[x_i]
        starts = _index_vectors(np.asarray(v[idx_i]), index_vector_dim).astype(np.int64)
        batch_shape = starts.shape[:-1]
        nb = len(batch_shape)
        full = np.zeros(batch_shape + (rank,), dtype=np.int64)
        for k, d in enumerate(start_index_map):
            full[..., d] = np.clip(starts[..., k], 0, x.shape[d] - slice_sizes[d])
        index = []
        for d in range(rank):
            shape = [1] * (nb + rank)
            shape[nb + d] = slice_sizes[d]
            window = np.arange(slice_sizes[d]).reshape(shape)
            index.append(full[..., d].reshape(batch_shape + (1,) * rank) + window)
        sliced = x[tuple(index)]                                     # [*batch, *slice_sizes]
        sliced = sliced.reshape(batch_shape + tuple(slice_sizes[d] for d in kept))
        v[o] = np.require(sliced.transpose(_gather_perm(out_rank, offset_dims, nb)), requirements="C")
    return run


@shape_rule("STABLEHLO_GATHER")
def stablehlo_gather_shape(n: Node) -> list[Shape | None]:
    """The indices' batch dims (all but index_vector_dim) and the kept slice sizes, placed by offset_dims."""
    x, idx, opts = n.shape(0), n.shape(1), n.opts
    if x is None or idx is None:
        return [None]
    offset_dims, collapsed = _opt_ints(opts, "offset_dims"), _opt_ints(opts, "collapsed_slice_dims")
    slice_sizes = _opt_ints(opts, "slice_sizes", len(x))
    ivd = int(opts.get("index_vector_dim", 0))
    if slice_sizes is None or not 0 <= ivd <= len(idx):
        return [None]
    batch = idx[:ivd] + idx[ivd + 1:]
    dims = batch + tuple(slice_sizes[d] for d in range(len(x)) if d not in collapsed)
    perm = _gather_perm(len(batch) + len(offset_dims), offset_dims, len(batch))
    if len(perm) != len(dims) or not all(0 <= p < len(dims) for p in perm):
        return [None]
    return [tuple(dims[p] for p in perm)]


def _region_op(ctx: KernelContext, key: str) -> str | None:
    """The single op of a region subgraph (None for an empty region), as LiteRT inspects it."""
    index = ctx.options.get(key)
    if index is None or not 0 <= index < len(ctx.model.subgraphs):
        raise ctx.fail(f"{key} {index} is not a subgraph of this model")
    ops = ctx.model.subgraphs[index].operations
    if not ops:
        return None
    if len(ops) != 1:
        raise ctx.fail(f"the region subgraph {index} must hold one op, holds {len(ops)}")
    return ops[0].opcode


_SCATTER_UFUNCS = {"STABLEHLO_ADD": np.add, "STABLEHLO_MULTIPLY": np.multiply,
                   "STABLEHLO_MAXIMUM": np.maximum, "STABLEHLO_MINIMUM": np.minimum}


@CPU.register("STABLEHLO_SCATTER", dtypes=_NUM_TYPES + ("bool",))
def stablehlo_scatter(ctx: KernelContext) -> Run:
    ctx.expect_inputs(3)
    check_dtype(ctx)
    x_i, idx_i, upd_i = ctx.inputs
    (o,) = ctx.outputs
    body = _region_op(ctx, "update_computation_subgraph_index")
    if body is not None and body not in _SCATTER_UFUNCS:
        raise ctx.fail(f"scatter region op {body} is not supported (LiteRT: update, add, multiply, "
                       f"maximum, minimum)")
    ufunc = _SCATTER_UFUNCS.get(body)
    rank = len(ctx.input_tensor(0).shape)
    upd_rank = len(ctx.input_tensor(2).shape)
    window_dims = _ints(ctx, "update_window_dims")
    inserted = _ints(ctx, "inserted_window_dims")
    to_operand = _ints(ctx, "scatter_dims_to_operand_dims")
    index_vector_dim = int(ctx.options.get("index_vector_dim", 0))
    scatter_dims = [d for d in range(upd_rank) if d not in window_dims]
    window_operand_dims = [d for d in range(rank) if d not in inserted]
    if len(window_operand_dims) != len(window_dims):
        raise ctx.fail("update_window_dims and inserted_window_dims do not cover the operand rank")
    v = ctx.values

    def run() -> None:
        x = v[x_i]
        upd = v[upd_i]
        out = np.array(x, copy=True)
        if upd.size == 0 or out.size == 0:
            v[o] = out
            return
        starts = _index_vectors(np.asarray(v[idx_i]), index_vector_dim).astype(np.int64)
        # Every update element, in row-major order (LiteRT's iteration order).
        grid = np.indices(upd.shape).reshape(upd_rank, -1)
        start_vec = starts[tuple(grid[d] for d in scatter_dims)]          # [N, K]
        target = np.zeros((rank, grid.shape[1]), dtype=np.int64)
        for k, d in enumerate(to_operand):
            target[d] += start_vec[:, k]
        for wd, od in zip(window_dims, window_operand_dims):
            target[od] += grid[wd]
        ok = np.all((target >= 0) & (target < np.asarray(x.shape)[:, None]), axis=0)
        where = tuple(t[ok] for t in target)
        values = upd.reshape(-1)[ok]
        if ufunc is None:
            out[where] = values            # duplicates: the last update wins, as in LiteRT's loop
        else:
            ufunc.at(out, where, values)
        v[o] = out
    return run


_WINDOW_UFUNCS = {"ADD": np.add, "STABLEHLO_ADD": np.add, "MUL": np.multiply,
                  "STABLEHLO_MULTIPLY": np.multiply, "MAXIMUM": np.maximum, "STABLEHLO_MAXIMUM": np.maximum,
                  "MINIMUM": np.minimum, "STABLEHLO_MINIMUM": np.minimum, "LOGICAL_AND": np.logical_and,
                  "STABLEHLO_AND": np.logical_and, "LOGICAL_OR": np.logical_or, "STABLEHLO_OR": np.logical_or}


def _reduce_window_shape(shape: Shape, window: tuple[int, ...], strides: tuple[int, ...],
                         base_dil: tuple[int, ...], win_dil: tuple[int, ...], padding: tuple[int, ...]) -> Shape:
    """Window positions per dim of the base-dilated operand with edge padding (negative padding crops, as
    a numpy slice of the padded buffer does); -1 for an unknown dim."""
    out = []
    for d, s in enumerate(shape):
        if s < 0:
            out.append(-1)
            continue
        lo, hi = padding[2 * d], padding[2 * d + 1]
        full = (s - 1) * base_dil[d] + 1 + max(lo, 0) + max(hi, 0) if s else 0
        size = len(range(full)[-min(lo, 0):full + min(hi, 0)])
        out.append(window_output_size(size, window[d], strides[d], win_dil[d]))
    return tuple(out)


@CPU.register("STABLEHLO_REDUCE_WINDOW", dtypes=_NUM_TYPES + ("bool",))
def stablehlo_reduce_window(ctx: KernelContext) -> Run:
    ctx.expect_inputs(2)
    check_dtype(ctx)
    x_i, init_i = ctx.inputs
    (o,) = ctx.outputs
    body = _region_op(ctx, "body_subgraph_index")
    if body not in _WINDOW_UFUNCS:
        raise ctx.fail(f"reduce_window body op {body} is not supported")
    ufunc = _WINDOW_UFUNCS[body]
    rank = len(ctx.input_tensor(0).shape)
    window = _ints(ctx, "window_dimensions", rank, 1)
    strides = _ints(ctx, "window_strides", rank, 1)
    base_dil = _ints(ctx, "base_dilations", rank, 1)
    win_dil = _ints(ctx, "window_dilations", rank, 1)
    padding = _ints(ctx, "padding", 2 * rank, 0)
    if ctx.output_dtype() == np.bool_ and ufunc in (np.add, np.multiply, np.maximum, np.minimum):
        ufunc = {np.add: np.logical_or, np.multiply: np.logical_and, np.maximum: np.logical_or,
                 np.minimum: np.logical_and}[ufunc]
    dtype = ctx.output_dtype()
    v = ctx.values

    def run() -> None:
        x = v[x_i]
        init = np.asarray(v[init_i], dtype=dtype).reshape(-1)[0]
        # Base dilation and padding, both filled with the init value; negative padding crops.
        full = [(x.shape[d] - 1) * base_dil[d] + 1 + max(padding[2 * d], 0) + max(padding[2 * d + 1], 0)
                if x.shape[d] else 0 for d in range(rank)]
        buf = np.full(full, init, dtype=dtype)
        buf[tuple(slice(max(padding[2 * d], 0), max(padding[2 * d], 0) + (x.shape[d] - 1) * base_dil[d] + 1,
                        base_dil[d]) for d in range(rank))] = x
        crop = tuple(slice(-min(padding[2 * d], 0), full[d] + min(padding[2 * d + 1], 0)) for d in range(rank))
        buf = buf[crop]
        out_shape = _reduce_window_shape(x.shape, window, strides, base_dil, win_dil, padding)
        acc = np.full(out_shape, init, dtype=dtype)
        if acc.size == 0:
            v[o] = acc
            return
        for w in np.ndindex(*window):
            sl = tuple(slice(w[d] * win_dil[d], w[d] * win_dil[d] + (out_shape[d] - 1) * strides[d] + 1,
                             strides[d]) for d in range(rank))
            acc = ufunc(acc, buf[sl]).astype(dtype, copy=False)
        v[o] = acc
    return run


@shape_rule("STABLEHLO_REDUCE_WINDOW")
def stablehlo_reduce_window_shape(n: Node) -> list[Shape | None]:
    x = n.shape(0)
    if x is None:
        return [None]
    r, opts = len(x), n.opts
    params = [_opt_ints(opts, key, k * r, 0 if key == "padding" else 1) for key, k in (
        ("window_dimensions", 1), ("window_strides", 1), ("base_dilations", 1), ("window_dilations", 1),
        ("padding", 2))]
    if any(p is None for p in params) or min(params[1] + params[2] + params[3], default=1) < 1:
        return [(-1,) * r]
    return [_reduce_window_shape(x, *params)]


# RngAlgorithm of the schema.
_RNG_DEFAULT, _RNG_PHILOX, _RNG_THREEFRY = 0, 1, 2


def _rotl32(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _threefry2x32(k0: np.uint32, k1: np.uint32, c0: np.ndarray, c1: np.ndarray) -> tuple:
    """Threefry-2x32 with 20 rounds on counter blocks (c0[j], c1[j]) (Salmon et al. 2011)."""
    k2 = np.uint32(k0 ^ k1 ^ np.uint32(0x1BD11BDA))
    x0, x1 = c0 + k0, c1 + k1
    rotations = ((13, 15, 26, 6), (17, 29, 16, 24))
    schedule = ((0, k1, k2, 1), (1, k2, k0, 2), (0, k0, k1, 3), (1, k1, k2, 4), (0, k2, k0, 5))
    for r, ks0, ks1, b in schedule:
        for rot in rotations[r]:
            x0 = x0 + x1
            x1 = _rotl32(x1, rot) ^ x0
        x0 = x0 + ks0
        x1 = x1 + np.uint32(ks1 + np.uint32(b))
    return x0, x1


def _philox4x32(k0: np.uint32, k1: np.uint32, c: list) -> tuple:
    """Philox-4x32 with 10 rounds on counter blocks c = [c0, c1, c2, c3] (arrays of uint32)."""
    m_a, m_b = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    c0, c1, c2, c3 = c
    for _ in range(10):
        p0 = c0.astype(np.uint64) * m_a
        p1 = c2.astype(np.uint64) * m_b
        hi0, lo0 = (p0 >> np.uint64(32)).astype(np.uint32), p0.astype(np.uint32)
        hi1, lo1 = (p1 >> np.uint64(32)).astype(np.uint32), p1.astype(np.uint32)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = np.uint32(k0 + np.uint32(0x9E3779B9))
        k1 = np.uint32(k1 + np.uint32(0xBB67AE85))
    return c0, c1, c2, c3


@CPU.register("STABLEHLO_RNG_BIT_GENERATOR", dtypes=("int32", "int64", "uint32", "uint64"), foldable=False)
def stablehlo_rng_bit_generator(ctx: KernelContext) -> Run:
    """Counter-based random bits, exactly as LiteRT's rng_bit_generator.cc lays them out.

    The uint64 state is read as 32-bit words w: key = (w0, w1); the 64-bit block counter is (w2, w3).
    THREEFRY needs u64[2] and yields 2 words per block; PHILOX/DEFAULT takes u64[2] or u64[3] and
    yields 4 words per block, its counter words 2-3 being (w4, w5) for u64[3], else the key words.
    Blocks fill the output's 32-bit words in order (64-bit outputs take two words each, little
    endian); the new state is the input state with words 0-3 = key, counter + number of blocks.
    """
    ctx.expect_inputs(1)
    (s_i,) = ctx.inputs
    if len(ctx.outputs) != 2:
        raise ctx.fail(f"STABLEHLO_RNG_BIT_GENERATOR has 2 outputs, not {len(ctx.outputs)}")
    so_i, o_i = ctx.outputs
    state_t = ctx.input_tensor(0)
    if state_t.dtype != np.uint64 or len(state_t.shape) != 1:
        raise ctx.fail("the initial state must be a 1-D uint64 tensor")
    n_state = state_t.shape[0]
    algorithm = int(ctx.options.get("algorithm", _RNG_DEFAULT))
    if algorithm == _RNG_THREEFRY:
        if n_state != 2:
            raise ctx.fail(f"THREEFRY needs a u64[2] state, got u64[{n_state}]")
    elif algorithm in (_RNG_DEFAULT, _RNG_PHILOX):
        if n_state not in (2, 3):
            raise ctx.fail(f"PHILOX needs a u64[2] or u64[3] state, got u64[{n_state}]")
    else:
        raise ctx.fail(f"unknown RNG algorithm {algorithm}")
    out_dtype = ctx.output_dtype(1)
    out_shape = tuple(ctx.output_tensor(1).shape)
    n_words = int(np.prod(out_shape, dtype=np.int64)) * (out_dtype.itemsize // 4)
    per_block = 2 if algorithm == _RNG_THREEFRY else 4
    n_blocks = -(-n_words // per_block)
    v = ctx.values

    def run() -> None:
        state = np.ascontiguousarray(v[s_i], dtype=np.uint64)
        w = state.view(np.uint32)
        k0, k1 = w[0], w[1]
        start = np.uint64(w[2]) | (np.uint64(w[3]) << np.uint64(32))
        counters = start + np.arange(n_blocks, dtype=np.uint64)      # wraps modulo 2^64
        lo, hi = counters.astype(np.uint32), (counters >> np.uint64(32)).astype(np.uint32)
        with np.errstate(over="ignore"):               # 32-bit wrap-around is the algorithm
            if algorithm == _RNG_THREEFRY:
                words = _threefry2x32(k0, k1, lo, hi)
            else:
                c2, c3 = (w[4], w[5]) if n_state == 3 else (w[0], w[1])
                words = _philox4x32(k0, k1, [lo, hi, np.full(n_blocks, c2, np.uint32),
                                             np.full(n_blocks, c3, np.uint32)])
        bits = np.stack(words, axis=-1).reshape(-1)[:n_words]
        v[o_i] = bits.view(out_dtype).reshape(out_shape) if n_words else np.zeros(out_shape, out_dtype)
        new_state = state.copy()
        with np.errstate(over="ignore"):
            end = start + np.uint64(n_blocks)
        nw = new_state.view(np.uint32)
        nw[0], nw[1] = k0, k1
        nw[2], nw[3] = np.uint32(end & np.uint64(0xFFFFFFFF)), np.uint32(end >> np.uint64(32))
        v[so_i] = new_state
    return run


@shape_rule("STABLEHLO_RNG_BIT_GENERATOR")
def stablehlo_rng_bit_generator_shape(n: Node) -> list[Shape | None]:
    """The new state has the state's shape; the bits fill the output's declared shape (StableHLO gives
    the result type statically)."""
    declared = [tuple(n.sg.tensors[o].shape) for o in n.op.outputs]
    return [n.shape(0)] + declared[1:] if declared else []


# Shape rules: every output has input 0's shape.
shape_rule("STABLEHLO_SCATTER")(same_shape)

# Shape rules: the inputs' broadcast shape.
shape_rule("STABLEHLO_ADD", "STABLEHLO_MULTIPLY", "STABLEHLO_MAXIMUM", "STABLEHLO_MINIMUM",
           "STABLEHLO_AND", "STABLEHLO_SHIFT_LEFT")(broadcasting)


# StableHLO's elementwise ops have the builtin ones' gradients (same shapes, no broadcasting)
grad_rule("STABLEHLO_ADD")(add_grad)
grad_rule("STABLEHLO_MULTIPLY")(mul_grad)
grad_rule("STABLEHLO_MAXIMUM")(maximum_grad)
grad_rule("STABLEHLO_MINIMUM")(minimum_grad)


# bitwise and random-bit ops: integer results
no_gradient("STABLEHLO_AND", "STABLEHLO_SHIFT_LEFT", "STABLEHLO_RNG_BIT_GENERATOR")
