"""LSH_PROJECTION (with its farmhash Fingerprint64) and SKIP_GRAM against LiteRT's builtin kernels."""
import numpy as np
import pytest

import onert_py
from helpers import FORMATS, check_builtin, rng, run_litert_builtin, run_onert, single_op_model
from onert_py.backends.cpu._farmhash import fingerprint64, fingerprint64_rows

F32 = np.float32
SPARSE, DENSE = 1, 2


# ----------------------------------------------------------------------------- Fingerprint64

# Documented FARM_FINGERPRINT / farmFingerprint64 examples (BigQuery's hash-function reference, Amazon
# Redshift's farmFingerprint64 page, a public FarmHash gist): signed int64 Fingerprint64 of short strings.
@pytest.mark.parametrize("text,expected", [
    (b"1footrue", -1541654101129638711), (b"2applefalse", 2794438866806483259),
    (b"3true", -4880158226897771312), (b"alphabet", -2427165924636348523),
    (b"Amazon Redshift", 8085098817162212970)])
def test_fingerprint64_documented(text, expected):
    assert fingerprint64(text) == expected % (1 << 64)


# Values of Google's C++ farmhash (the pyfarmhash 0.5.1 binding's `farmhash.fingerprint64`) for the bytes
# (131 * i + 7) % 256, i < length: every length branch (0, 1-3, 4-7, 8-16, 17-32, 33-64, the 64-byte loop
# with a full and a partial last block).
@pytest.mark.parametrize("length,expected", [
    (0, 0x9ae16a3b2f90404f), (1, 0x57821efdee1b7472), (3, 0xbeedf37b20babe01), (4, 0x78e5c39592d63067),
    (7, 0x04dd505220c44e7e), (8, 0xc19f34cbc54f4865), (15, 0x390ab3fd476b7830), (16, 0x08b48f7ec30e084e),
    (17, 0xe8255d05f537d5f5), (31, 0x27c23ea18dbddfc4), (32, 0xeff8e4a51615d6df), (33, 0x73ddd0098c2d6111),
    (63, 0xad805636300d1112), (64, 0xe21627d5817d4f6f), (65, 0x97cc91b3a8f4e680), (127, 0xea9c203d31e7d08b),
    (128, 0x1c164782a87793e4), (129, 0x986a5ebcf9b59191), (200, 0x4b80af1326209a04),
    (1000, 0xed05b63329b7b737)])
def test_fingerprint64_farmhash_values(length, expected):
    assert fingerprint64(bytes((131 * i + 7) % 256 for i in range(length))) == expected


# A batch of equal-length keys (how the kernel calls it), bytes (31 * i + 17 * k) % 256 for key k; the
# values are again Google's C++ farmhash (pyfarmhash 0.5.1).
@pytest.mark.parametrize("length,expected", [
    (5, [0x1cee58618ce62cb2, 0xbf4ab44650912dde, 0xc60aee383bfaf219]),
    (20, [0x72941a988b1ef450, 0x7bdc05a325c3f361, 0xaf09e4785876d16b]),
    (40, [0x8c9cece274d65b52, 0x3ff59ca5a3826a2d, 0xf1c620624cbd5bab]),
    (100, [0xfcf8245173ddf362, 0x1ef928e8124a2512, 0xc4dd7a6b496f5198])])
def test_fingerprint64_batch(length, expected):
    keys = np.array([[(31 * i + 17 * k) % 256 for i in range(length)] for k in range(3)], np.uint8)
    got = fingerprint64_rows(keys)
    assert got.dtype == np.uint64 and [int(h) for h in got] == expected


# ----------------------------------------------------------------------------- LSH_PROJECTION

def _lsh_model(hashes, x_shape, x_dtype, kind, weighted, const_hash=True):
    num_hash, num_bits = hashes.shape
    ins = [("const", hashes) if const_hash else ("h", list(hashes.shape), F32), ("x", list(x_shape), x_dtype)]
    if weighted:
        ins.append(("w", [x_shape[0]], F32))
    out = [num_hash] if kind == SPARSE else [num_hash * num_bits]
    return single_op_model("LSH_PROJECTION", ins, [("o", out, np.int32)], type=kind)


def _values(r, shape, dtype):
    if np.dtype(dtype).kind == "f":
        return (r.standard_normal(shape) * 100).astype(dtype)
    if dtype == np.bool_:
        return r.integers(0, 2, shape).astype(bool)
    info = np.iinfo(dtype)
    return r.integers(max(info.min, -10 ** 6), min(info.max, 10 ** 6), shape, endpoint=True).astype(dtype)


@pytest.mark.parametrize("kind", [SPARSE, DENSE])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [np.int32, F32])
@pytest.mark.parametrize("shape", [(5,), (3, 2), (2, 3, 4), (4, 1, 2, 3)])
def test_lsh_projection(kind, weighted, dtype, shape):
    r = rng(100 * kind + 10 * weighted + len(shape))
    hashes = r.standard_normal((3, 32 if kind == SPARSE else 8)).astype(F32)
    feeds = [_values(r, shape, dtype)] + ([r.standard_normal(shape[0]).astype(F32)] if weighted else [])
    check_builtin(_lsh_model(hashes, shape, dtype, kind, weighted), feeds)


_DTYPES = [np.int32, F32, np.int64, np.int16, np.int8, np.uint8, np.uint16, np.uint32, np.uint64,
           np.float16, np.float64, np.bool_]


@pytest.mark.parametrize("seed", range(48))
def test_lsh_projection_random(seed):
    """Random dtype, rank, row size (incl. empty rows and rows over 64 bytes, the hash's loop), hash
    scale, num_bits (incl. 31 and 32, where the sparse packing and offset overflow int32), weights."""
    r = rng(1000 + seed)
    dtype = _DTYPES[seed % len(_DTYPES)]
    rank = int(r.integers(1, 5))
    shape = [int(r.integers(1, 6))] + [int(r.integers(0 if seed % 11 == 0 else 1, 6)) for _ in range(rank - 1)]
    num_bits = int(r.choice([1, 2, 5, 8, 16, 31, 32]))
    hashes = (r.standard_normal((int(r.integers(1, 5)), num_bits)) * 10 ** r.uniform(-3, 3)).astype(F32)
    kind, weighted, const_hash = int(r.integers(1, 3)), bool(seed % 2), bool(seed % 3)
    feeds = ([] if const_hash else [hashes]) + [_values(r, shape, dtype)]
    if weighted:
        feeds.append(r.standard_normal(shape[0]).astype(F32))
    check_builtin(_lsh_model(hashes, shape, dtype, kind, weighted, const_hash), feeds)


def test_lsh_projection_sparse_offsets():
    """Sparse signatures are offset by i << num_bits per hash function (pinned independently of LiteRT:
    every signature lands in its own bucket [i << num_bits, (i + 1) << num_bits))."""
    r = rng(7)
    hashes = r.standard_normal((4, 6)).astype(F32)
    x = r.integers(-50, 50, (3, 2)).astype(np.int32)
    got = check_builtin(_lsh_model(hashes, x.shape, np.int32, SPARSE, False), [x])[0]
    dense = run_onert(_lsh_model(hashes, x.shape, np.int32, DENSE, False), [x])[0].reshape(4, 6)
    packed = [int("".join(map(str, bits)), 2) + (i << 6) for i, bits in enumerate(dense)]
    assert got.tolist() == packed


def test_lsh_projection_omitted_weight_is_unweighted():
    """An omitted optional weight (input index -1) means weight 1 per row. LiteRT refuses this slot at
    prepare time instead, so the reference is LiteRT's two-input model."""
    r = rng(8)
    hashes = r.standard_normal((2, 16)).astype(F32)
    x = r.integers(-9, 9, (4, 3)).astype(np.int32)
    expected = run_litert_builtin(_lsh_model(hashes, x.shape, np.int32, SPARSE, False), [x])
    mb = single_op_model("LSH_PROJECTION", [("const", hashes), ("x", [4, 3], np.int32), None],
                         [("o", [2], np.int32)], type=SPARSE)
    for fmt in FORMATS:
        np.testing.assert_array_equal(run_onert(mb, [x], fmt)[0], expected[0])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("hash_shape,x_shape,w_shape,kind,msg", [
    ((2, 33), (3, 2), None, SPARSE, "num_bits 33 exceeds 32"),
    ((2, 40), (3, 2), None, DENSE, "num_bits 40 exceeds 32"),
    ((8,), (3, 2), None, SPARSE, "rank 2"),
    ((2, 2, 2), (3, 2), None, DENSE, "rank 2"),
    ((2, 4), (), None, SPARSE, "rank >= 1"),
    ((2, 4), (0, 2), None, SPARSE, "at least one row"),
    ((2, 4), (3, 2), (3, 1), SPARSE, "weight must have rank 1"),
    ((2, 4), (3, 2), (2,), DENSE, "2 entries for 3 input rows"),
    ((2, 4), (3, 2), None, 0, "projection type 0"),
])
def test_lsh_projection_bad(fmt, hash_shape, x_shape, w_shape, kind, msg):
    ins = [("const", np.ones(hash_shape, F32)), ("x", list(x_shape), np.int32)]
    if w_shape is not None:
        ins.append(("w", list(w_shape), F32))
    mb = single_op_model("LSH_PROJECTION", ins, [("o", [2], np.int32)], type=kind)
    with pytest.raises(onert_py.PrepareError, match=msg):
        onert_py.infer.session(mb.to_bytes(fmt))


@pytest.mark.parametrize("hash_dtype,x_dtype,w_dtype,msg", [
    (np.int32, np.int32, None, "hash tensor must be float32"),
    (F32, np.int32, np.int32, "weight must be float32"),
    (F32, "O", None, "string input"),
])
def test_lsh_projection_bad_dtypes(hash_dtype, x_dtype, w_dtype, msg):
    """LiteRT reinterprets a non-float hash or weight tensor's bytes as float; onert-py refuses them."""
    ins = [("const", np.ones((2, 4), hash_dtype)), ("x", [3], x_dtype)]
    if w_dtype is not None:
        ins.append(("w", [3], w_dtype))
    mb = single_op_model("LSH_PROJECTION", ins, [("o", [2], np.int32)], type=SPARSE)
    with pytest.raises(onert_py.PrepareError, match=msg):
        onert_py.infer.session(mb.to_bytes("tflite"))


# ----------------------------------------------------------------------------- SKIP_GRAM

def _sg_model(n, skip, all_ngrams, in_shape=(1,)):
    return single_op_model("SKIP_GRAM", [("x", list(in_shape), "O")], [("o", [0], "O")], ngram_size=n,
                           max_skip_size=skip, include_all_ngrams=all_ngrams)


def _sentence(text):
    return np.array([text.encode("utf-8") if isinstance(text, str) else text], dtype=object)


# Includes LiteRT's splitting quirks: whitespace at position 0 never splits (" abc" is one word " abc"),
# and a piece starting with whitespace is dropped unless it is the last (" a b" gives just "b").
_SENTENCES = ["", " ", "  ", "a", " a", "a ", " a b", "a  b", "  a b  c ", "\ta\tb\n", "x\x00y z",
              "the quick brown fox jumps", "one two three four five six seven eight nine ten", "über ß ç"]


@pytest.mark.parametrize("text", _SENTENCES)
@pytest.mark.parametrize("n,skip,all_ngrams", [(1, 0, False), (2, 0, False), (2, 1, True), (3, 2, False),
                                               (3, 1, True), (4, 0, True), (12, 3, True), (0, 1, True),
                                               (2, -1, True)])
def test_skip_gram(text, n, skip, all_ngrams):
    check_builtin(_sg_model(n, skip, all_ngrams), [_sentence(text)])


@pytest.mark.parametrize("seed", range(40))
def test_skip_gram_random(seed):
    r = rng(2000 + seed)
    vocab = ["a", "bb", "ccc", "the", "fox", "über", "x1", "!"]
    seps = [" ", " ", "  ", "\t", "\n", " \t ", "\r\n", "\v", "\f"]
    text = ""
    for i in range(int(r.integers(0, 10))):
        text += (seps[int(r.integers(len(seps)))] if i or r.integers(0, 4) == 0 else "") + \
            vocab[int(r.integers(len(vocab)))]
    if r.integers(0, 3) == 0:
        text += seps[int(r.integers(len(seps)))]
    n, skip, all_ngrams = int(r.integers(0, 6)), int(r.integers(-1, 4)), bool(r.integers(0, 2))
    check_builtin(_sg_model(n, skip, all_ngrams), [_sentence(text)])


def test_skip_gram_documented_example():
    """Independent of LiteRT: bigrams with up to one skipped word, in LiteRT's depth-first order."""
    got = run_onert(_sg_model(2, 1, False), [_sentence("the quick brown fox")])[0]
    assert got.tolist() == [b"the quick", b"the brown", b"quick brown", b"quick fox", b"brown fox"]


def test_skip_gram_only_first_string_and_str_input():
    mb = _sg_model(2, 0, False, in_shape=(2,))
    x = np.array([b"a b c", b"d e"], dtype=object)
    check_builtin(mb, [x])
    assert run_onert(mb, [np.array(["a b c", "d e"])])[0].tolist() == [b"a b", b"b c"]


def test_skip_gram_long_ngram():
    """A 1500-word n-gram (deeper than Python's default recursion limit)."""
    text = " ".join(f"w{i}" for i in range(1500))
    check_builtin(_sg_model(1500, 0, False), [_sentence(text)])


def test_skip_gram_bad():
    mb = single_op_model("SKIP_GRAM", [("x", [1], np.int32)], [("o", [0], "O")], ngram_size=2,
                         max_skip_size=0, include_all_ngrams=False)
    with pytest.raises(onert_py.PrepareError, match="string tensors"):
        onert_py.infer.session(mb.to_bytes("circle"))
    with pytest.raises(onert_py.ExecutionError, match="empty"):
        run_onert(_sg_model(2, 0, False, in_shape=(0,)), [np.array([], dtype=object)])
