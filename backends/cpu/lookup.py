"""Table lookups and hashing: HASHTABLE_LOOKUP, EMBEDDING_LOOKUP_SPARSE, LSH_PROJECTION and SKIP_GRAM
(LiteRT's hashtable_lookup.cc, embedding_lookup_sparse.cc, lsh_projection.cc and skip_gram.cc)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from onert_py.backends.cpu._farmhash import fingerprint64_rows
from onert_py.backends.cpu.shape import check_dtype
from onert_py.backends.registry import CPU, KernelContext, Run, no_gradient, shape_rule
from onert_py.backends.shape_rules import Node, Shape, is_static, numel

_SUM, _MEAN, _SQRTN = 0, 1, 2


def _hashtable_lookup_shapes(lookup: Sequence[int] | None, values: Sequence[int] | None) -> list:
    """(found values, hits) shapes: one row per key looked up (read flat) of values' rows; -1 for a dim
    that is not known, None for an unknown rank."""
    if lookup is None:
        rows = -1
    elif is_static(lookup):
        rows = numel(lookup)
    else:
        rows = lookup[0] if len(lookup) == 1 else -1
    found = None if values is None or len(values) < 1 else (rows,) + tuple(values[1:])
    return [found, (rows,)]


@CPU.register("HASHTABLE_LOOKUP", dtypes=("float32", "float16", "float64", "int8", "uint8", "int16", "uint16",
                                          "int32", "uint32", "int64", "uint64", "bool", "complex64", "complex128",
                                          "string"))
def hashtable_lookup(ctx: KernelContext) -> Run:
    """inputs (lookup int32 [N], keys int32 [K] sorted ascending, values [K, ...]);
    outputs (values of the found keys, zero / empty rows for misses; hits uint8 [N])."""
    ctx.expect_inputs(3)
    if len(ctx.outputs) != 2:
        raise ctx.fail(f"expects 2 outputs, has {len(ctx.outputs)}")
    if ctx.input_tensor(0).dtype != np.int32 or ctx.input_tensor(1).dtype != np.int32:
        raise ctx.fail("lookup and keys must be int32")
    check_dtype(ctx, 2)
    q_i, k_i, val_i = ctx.inputs
    o_i, h_i = ctx.outputs
    dt = ctx.output_dtype(0)
    v = ctx.values

    def run() -> None:
        q, keys, vals = np.ravel(v[q_i]), np.ravel(v[k_i]), np.asarray(v[val_i])
        if vals.ndim < 1 or vals.shape[0] != keys.size:
            raise ValueError(f"{keys.size} keys for values of shape {list(vals.shape)}")
        out_shape = _hashtable_lookup_shapes(q.shape, vals.shape)[0]
        pos = np.searchsorted(keys, q)
        posc = np.minimum(pos, max(keys.size - 1, 0))
        hit = (pos < keys.size) & (keys[posc] == q) if keys.size else np.zeros(q.shape, bool)
        if dt == object:
            out = np.full(out_shape, b"", dtype=object)
        else:
            out = np.zeros(out_shape, dt)
        out[hit] = vals[posc[hit]]
        v[o_i] = out
        v[h_i] = hit.astype(np.uint8)
    return run


@shape_rule("HASHTABLE_LOOKUP")
def hashtable_lookup_shape(n: Node) -> list[Shape | None]:
    return _hashtable_lookup_shapes(n.shape(0), n.shape(2))


def _sparse_output_shape(dense_shape: Sequence[int], params: Sequence[int]) -> tuple[int, ...]:
    """dense_shape[:-1] (the rows the entries combine into) + params.shape[1:] (one embedding each)."""
    return tuple(dense_shape[:-1]) + tuple(params[1:])


@CPU.register("EMBEDDING_LOOKUP_SPARSE", dtypes=("float32",))
def embedding_lookup_sparse(ctx: KernelContext) -> Run:
    """inputs (ids int32 [N], indices int32 [N, R], dense_shape int32 [R], weights float32 [N],
    params float32 [V, ...]) -> dense_shape[:-1] + params.shape[1:].

    Row r of the output combines params[ids[i]] * weights[i] over the entries i whose indices[i, :-1]
    is r: SUM, MEAN (divided by the weight total) or SQRTN (by sqrt of the squared-weight total)."""
    ctx.expect_inputs(5)
    combiner = int(ctx.options.get("combiner", _SUM))
    if combiner not in (_SUM, _MEAN, _SQRTN):
        raise ctx.fail(f"unknown combiner {combiner}")
    ids_i, ind_i, shp_i, w_i, p_i = ctx.inputs
    (o_i,) = ctx.outputs
    v = ctx.values

    def run() -> None:
        ids, ind = np.ravel(v[ids_i]).astype(np.int64), np.asarray(v[ind_i]).astype(np.int64)
        dense = [int(d) for d in np.ravel(v[shp_i])]
        w, params = np.ravel(v[w_i]).astype(np.float32), np.asarray(v[p_i], dtype=np.float32)
        n = ids.size
        if ind.ndim != 2 or ind.shape[0] != n or ind.shape[1] != len(dense) or w.size != n or len(dense) < 1:
            raise ValueError(f"ids {n}, indices {list(ind.shape)}, dense_shape {dense}, weights {w.size} "
                             "do not agree")
        if n and (ids.min() < 0 or ids.max() >= params.shape[0]):
            raise IndexError(f"embedding id out of range [0, {params.shape[0]})")
        rows_shape = dense[:-1]
        out_shape = _sparse_output_shape(dense, params.shape)
        n_rows = int(np.prod(rows_shape, dtype=np.int64))
        emb = int(np.prod(params.shape[1:], dtype=np.int64))
        flat = params.reshape(params.shape[0], emb)
        bucket = np.ravel_multi_index(tuple(ind[:, k] for k in range(len(dense) - 1)), rows_shape) \
            if len(dense) > 1 else np.zeros(n, np.int64)
        out = np.zeros((n_rows, emb), np.float32)
        for i in range(n):                   # sequential float32 accumulation, as LiteRT
            out[bucket[i]] += flat[ids[i]] * w[i]
        if combiner != _SUM and n:
            tot = np.zeros(n_rows, np.float32)
            if combiner == _MEAN:
                np.add.at(tot, bucket, w)
            else:
                np.add.at(tot, bucket, w * w)
                tot = np.sqrt(tot)
            used = np.zeros(n_rows, bool)
            used[bucket] = True
            with np.errstate(divide="ignore", invalid="ignore"):
                scale = np.where(used, np.float32(1.0) / tot, np.float32(1.0)).astype(np.float32)
            out *= scale[:, None]
        v[o_i] = out.reshape(out_shape)
    return run


@shape_rule("EMBEDDING_LOOKUP_SPARSE")
def embedding_lookup_sparse_shape(n: Node) -> list[Shape | None]:
    params, dense, ind, shp = n.shape(4), n.ints(2), n.shape(1), n.shape(2)
    if params is None or len(params) < 1:
        return [None]
    if dense is not None and len(dense) >= 1 and not n.litert_quirks:   # LiteRT sizes it at run time
        return [_sparse_output_shape(dense, params)]
    # dense_shape's length (= indices' dim 1) gives the rank even when its values are not known.
    r = -1
    if dense is not None:
        r = len(dense)
    elif shp is not None and len(shp) == 1:
        r = shp[0]
    elif ind is not None and len(ind) == 2:
        r = ind[1]
    return [_sparse_output_shape((-1,) * r, params) if r >= 1 else None]


_LSH_SPARSE, _LSH_DENSE = 1, 2


def _lsh_output_shape(kind: int, hash_shape: Sequence[int]) -> tuple[int]:
    """SPARSE: one signature per hash function [num_hash]; DENSE: every bit [num_hash * num_bits]."""
    num_hash, num_bits = hash_shape
    if kind == _LSH_DENSE:
        return (num_hash * num_bits if num_hash >= 0 and num_bits >= 0 else -1,)
    return (num_hash,)


def _wrap_i32(x: int) -> int:
    """Two's-complement int32 wrap-around, as LiteRT's int32 arithmetic does on overflow."""
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


@CPU.register("LSH_PROJECTION", dtypes=("float32", "float16", "float64", "int32", "int64", "int16", "int8",
                                         "uint8", "uint16", "uint32", "uint64", "bool"))
def lsh_projection(ctx: KernelContext) -> Run:
    """inputs (hash float32 [num_hash, num_bits], input [N, ...] of any numeric dtype,
    optional weight float32 [N]) -> int32 signatures.

    Bit (i, j) is the sign of sum_r weight[r] * Fingerprint64(bytes(hash[i, j]) + bytes(input[r])),
    the fingerprint read as int64 and summed in double. DENSE outputs the num_hash * num_bits bits;
    SPARSE packs each hash function's bits (first bit most significant) into one int32 and adds
    i << num_bits so the hash functions' buckets do not collide."""
    ctx.expect_inputs(2, 3)
    if len(ctx.outputs) != 1:
        raise ctx.fail(f"expects 1 output, has {len(ctx.outputs)}")
    kind = int(ctx.options.get("type", 0))
    if kind not in (_LSH_SPARSE, _LSH_DENSE):
        raise ctx.fail(f"projection type {kind} is neither SPARSE (1) nor DENSE (2)")
    hash_t, in_t, w_t = ctx.input_tensor(0), ctx.input_tensor(1), ctx.input_tensor(2)
    if hash_t is None or in_t is None:
        raise ctx.fail("the hash and input tensors are required")
    if hash_t.dtype != np.float32:
        raise ctx.fail(f"hash tensor must be float32, is {hash_t.dtype}")
    if len(hash_t.shape) != 2:
        raise ctx.fail(f"hash tensor must have rank 2 [num_hash, num_bits], has shape {list(hash_t.shape)}")
    if not hash_t.is_dynamic and hash_t.shape[1] > 32:
        raise ctx.fail(f"num_bits {hash_t.shape[1]} exceeds 32 (hash tensor {list(hash_t.shape)})")
    if in_t.dtype == np.dtype(object):
        raise ctx.fail("string input is not supported (its rows have no fixed byte layout)")
    if len(in_t.shape) < 1:
        raise ctx.fail("input must have rank >= 1")
    if not in_t.is_dynamic and in_t.shape[0] < 1:
        raise ctx.fail(f"input must have at least one row, has shape {list(in_t.shape)}")
    if w_t is not None:
        if w_t.dtype != np.float32:
            raise ctx.fail(f"weight must be float32, is {w_t.dtype}")
        if len(w_t.shape) != 1:
            raise ctx.fail(f"weight must have rank 1, has shape {list(w_t.shape)}")
        if not w_t.is_dynamic and not in_t.is_dynamic and w_t.shape[0] != in_t.shape[0]:
            raise ctx.fail(f"weight has {w_t.shape[0]} entries for {in_t.shape[0]} input rows")
    if ctx.output_dtype(0) != np.int32:
        raise ctx.fail(f"output must be int32, is {ctx.output_dtype(0)}")
    h_i, x_i = ctx.inputs[0], ctx.inputs[1]
    w_i = ctx.inputs[2] if w_t is not None else -1
    (o_i,) = ctx.outputs
    v = ctx.values

    def run() -> None:
        seeds = np.asarray(v[h_i], dtype=np.float32)
        x = np.ascontiguousarray(v[x_i])
        if seeds.ndim != 2 or seeds.shape[1] > 32:
            raise ValueError(f"hash tensor of shape {list(seeds.shape)} is not [num_hash, num_bits <= 32]")
        if x.ndim < 1 or x.shape[0] < 1:
            raise ValueError(f"input of shape {list(x.shape)} has no rows")
        n = x.shape[0]
        rows = x.view(np.uint8).reshape(n, -1) if x.size else np.zeros((n, 0), np.uint8)
        w64 = None
        if w_i >= 0:
            w64 = np.ravel(v[w_i]).astype(np.float64)
            if w64.size != n:
                raise ValueError(f"weight has {w64.size} entries for {n} input rows")
        num_hash, num_bits = seeds.shape
        flat_seeds = seeds.reshape(-1).view(np.uint8).reshape(-1, 4)
        scores = np.empty(flat_seeds.shape[0], np.float64)
        # keys are (seed bytes + row bytes); build them a chunk of seeds at a time to bound memory
        per_seed = n * (4 + rows.shape[1])
        chunk = max(1, (1 << 24) // max(per_seed, 1))
        for c0 in range(0, flat_seeds.shape[0], chunk):
            sd = flat_seeds[c0:c0 + chunk]
            keys = np.empty((sd.shape[0], n, 4 + rows.shape[1]), np.uint8)
            keys[:, :, :4] = sd[:, None, :]
            keys[:, :, 4:] = rows[None]
            h = fingerprint64_rows(keys.reshape(-1, keys.shape[2])).view(np.int64).astype(np.float64)
            h = h.reshape(sd.shape[0], n)
            if w64 is not None:
                h = h * w64                      # float weight * double hash, in double as LiteRT
            # cumsum adds in row order (no pairwise summation), as LiteRT's running double sum
            scores[c0:c0 + chunk] = np.cumsum(h, axis=1)[:, -1]
        bits = (scores > 0).astype(np.int32).reshape(num_hash, num_bits)
        if kind == _LSH_DENSE:
            v[o_i] = bits.reshape(_lsh_output_shape(kind, seeds.shape))
            return
        # LiteRT computes the offset as int32 `i * (1 << num_bits)`; for num_bits == 32 that shift is
        # undefined in C and x86 (LiteRT's reference platform here) masks the count to 5 bits, so the
        # offset is i * 1 there.
        step = 1 << (num_bits & 31)
        out = np.empty(_lsh_output_shape(kind, seeds.shape), np.int32)
        for i in range(num_hash):
            sig = 0
            for b in bits[i]:
                sig = _wrap_i32((sig << 1) | int(b))
            out[i] = _wrap_i32(sig + _wrap_i32(i * step))
        v[o_i] = out
    return run


@shape_rule("LSH_PROJECTION")
def lsh_projection_shape(n: Node) -> list[Shape | None]:
    h = n.shape(0)
    if h is None or len(h) != 2 or n.opts.get("type", 0) not in (_LSH_SPARSE, _LSH_DENSE):
        return [(-1,)]
    return [_lsh_output_shape(int(n.opts.get("type", 0)), h)]


_SPACE = frozenset(b" \t\n\v\f\r")       # C isspace() in the "C" locale


def _skip_gram_words(s: bytes) -> list[bytes]:
    """Split a sentence the way LiteRT's skip_gram.cc does, quirks included: whitespace found at
    position 0 does not split, and a piece is kept only if its first byte is not whitespace — except
    the last piece, kept whenever non-empty (so " a" is one word " a", and " a b" gives just "b")."""
    words, start = [], 0
    for i in range(1, len(s)):
        if s[i] in _SPACE:
            if i > start and s[start] not in _SPACE:
                words.append(s[start:i])
            start = i + 1
    if len(s) > start:
        words.append(s[start:])
    return words


@CPU.register("SKIP_GRAM", dtypes=("string",))
def skip_gram(ctx: KernelContext) -> Run:
    """input: string tensor whose first element is a sentence; output: 1-D string tensor of the
    skip-grams of its words, joined by single spaces.

    A skip-gram picks words in order, at most max_skip_size words skipped between neighbours. With
    include_all_ngrams every size 1..ngram_size is produced, otherwise only ngram_size. Order: word by
    word depth first, a gram emitted after all its longer continuations (LiteRT's order)."""
    ctx.expect_inputs(1)
    if len(ctx.outputs) != 1:
        raise ctx.fail(f"expects 1 output, has {len(ctx.outputs)}")
    if ctx.input_tensor(0).dtype != np.dtype(object) or ctx.output_dtype(0) != np.dtype(object):
        raise ctx.fail("input and output must be string tensors")
    n = int(ctx.options.get("ngram_size", 0))
    max_skip = int(ctx.options.get("max_skip_size", 0))
    all_sizes = bool(ctx.options.get("include_all_ngrams", False))
    (x_i,), (o_i,) = ctx.inputs, ctx.outputs
    v = ctx.values

    def run() -> None:
        x = np.ravel(v[x_i])
        if x.size < 1:
            raise ValueError("input string tensor is empty (expects one sentence)")
        s = x[0]
        words = _skip_gram_words(s.encode("utf-8") if isinstance(s, str) else bytes(s))
        grams: list[bytes] = []
        if n >= 1 and len(words) >= n:
            w = len(words)

            def following(k: int, depth: int) -> range:
                # the words that may come after word k: at most max_skip skipped, none past n
                return range(k + 1, min(w, k + max_skip + 2)) if depth < n else range(0)
            for first in range(w):
                # iterative depth-first walk (an n-gram may be longer than Python's recursion limit)
                path, todo = [first], [iter(following(first, 1))]
                while path:
                    nxt = next(todo[-1], None)
                    if nxt is not None:
                        path.append(nxt)
                        todo.append(iter(following(nxt, len(path))))
                        continue
                    if len(path) == n or all_sizes:
                        grams.append(b" ".join(words[k] for k in path))
                    path.pop()
                    todo.pop()
        out = np.empty(len(grams), dtype=object)
        out[:] = grams
        v[o_i] = out
    return run


# No shape rule: the number of skip-grams depends on the words of the sentence (the input's value).


# hashes, n-grams and table look-ups by key: integer or string results
no_gradient("LSH_PROJECTION", "HASHTABLE_LOOKUP", "SKIP_GRAM")
