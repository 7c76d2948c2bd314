"""FarmHash's Fingerprint64 (Geoff Pike's farmhash: Fingerprint64 is the "na" variant's Hash64).

LSH_PROJECTION hashes every (seed, input row) key with `util::Fingerprint64` from google/farmhash: a
fixed, portable 64-bit function of a byte string. All of one op's keys have the same length, so the
function is written over a batch — a uint8 array [K, L], one key per row — in numpy uint64 arithmetic,
which wraps modulo 2**64 exactly as the C code's uint64_t does. Words are read little-endian, as the
fingerprint is defined independent of the machine.
"""
from __future__ import annotations

import numpy as np

# Three primes between 2**63 and 2**64 that farmhash mixes with.
_K0 = 0xC3A5C85C97CB3127
_K1 = 0xB492B66FBE98F273
_K2 = 0x9AE16A3B2F90404F
_U64 = np.uint64


def _w64(b: np.ndarray, i: int) -> np.ndarray:
    """The little-endian 64-bit word at byte i of every key."""
    return np.ascontiguousarray(b[:, i:i + 8]).view("<u8")[:, 0].astype(_U64)


def _w32(b: np.ndarray, i: int) -> np.ndarray:
    return np.ascontiguousarray(b[:, i:i + 4]).view("<u4")[:, 0].astype(_U64)


def _ror(x: np.ndarray, r: int) -> np.ndarray:
    """Rotate right by r bits, 0 < r < 64."""
    return (x >> _U64(r)) | (x << _U64(64 - r))


def _shift_mix(x: np.ndarray) -> np.ndarray:
    return x ^ (x >> _U64(47))


def _mix16(u: np.ndarray, v: np.ndarray, mul) -> np.ndarray:
    """Murmur-style combination of two 64-bit words under multiplier `mul`."""
    a = _shift_mix((u ^ v) * mul)
    b = _shift_mix((v ^ a) * mul)
    return b * mul


def _short(b: np.ndarray, n: int) -> np.ndarray:
    """Keys of 0 to 16 bytes."""
    if n >= 8:
        mul = _U64(_K2 + 2 * n)
        a = _w64(b, 0) + _U64(_K2)
        last = _w64(b, n - 8)
        return _mix16(_ror(last, 37) * mul + a, (_ror(a, 25) + last) * mul, mul)
    if n >= 4:
        mul = _U64(_K2 + 2 * n)
        return _mix16(_U64(n) + (_w32(b, 0) << _U64(3)), _w32(b, n - 4), mul)
    if n:
        # first, middle and last byte (the 32-bit products of the C code cannot overflow here)
        y = b[:, 0].astype(_U64) + (b[:, n >> 1].astype(_U64) << _U64(8))
        z = _U64(n) + (b[:, n - 1].astype(_U64) << _U64(2))
        return _shift_mix((y * _U64(_K2)) ^ (z * _U64(_K0))) * _U64(_K2)
    return np.full(b.shape[0], _K2, _U64)


def _medium(b: np.ndarray, n: int) -> np.ndarray:
    """Keys of 17 to 32 bytes."""
    mul = _U64(_K2 + 2 * n)
    a = _w64(b, 0) * _U64(_K1)
    second = _w64(b, 8)
    c = _w64(b, n - 8) * mul
    d = _w64(b, n - 16) * _U64(_K2)
    return _mix16(_ror(a + second, 43) + _ror(c, 30) + d, a + _ror(second + _U64(_K2), 18) + c, mul)


def _long(b: np.ndarray, n: int) -> np.ndarray:
    """Keys of 33 to 64 bytes."""
    mul = _U64(_K2 + 2 * n)
    a = _w64(b, 0) * _U64(_K2)
    second = _w64(b, 8)
    c = _w64(b, n - 8) * mul
    d = _w64(b, n - 16) * _U64(_K2)
    y = _ror(a + second, 43) + _ror(c, 30) + d
    z = _mix16(y, a + _ror(second + _U64(_K2), 18) + c, mul)
    e = _w64(b, 16) * mul
    f = _w64(b, 24)
    g = (y + _w64(b, n - 32)) * mul
    h = (z + _w64(b, n - 24)) * mul
    return _mix16(_ror(e + f, 43) + _ror(g, 30) + h, e + _ror(f + a, 18) + g, mul)


def _weak32(b: np.ndarray, i: int, a: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quick 128-bit digest of the 32 bytes at b[:, i:] with two seeds."""
    w, x, y, z = _w64(b, i), _w64(b, i + 8), _w64(b, i + 16), _w64(b, i + 24)
    a = a + w
    c = _ror(c + a + z, 21)
    first = a
    a = a + x + y
    c = c + _ror(a, 44)
    return a + z, c + first


def _over64(b: np.ndarray, n: int) -> np.ndarray:
    """Keys over 64 bytes: a 56-byte state (x, y, z, v, w) absorbs 64-byte blocks; the last block is
    the key's final 64 bytes (overlapping the one before unless n is a multiple of 64)."""
    k1 = _U64(_K1)
    x = np.full(b.shape[0], 81, _U64)
    y = x * k1 + _U64(113)
    z = _shift_mix(y * _U64(_K2) + _U64(113)) * _U64(_K2)
    v0 = v1 = w0 = w1 = np.zeros(b.shape[0], _U64)
    x = x * _U64(_K2) + _w64(b, 0)
    for p in range(0, ((n - 1) // 64) * 64, 64):
        x = _ror(x + y + v0 + _w64(b, p + 8), 37) * k1
        y = _ror(y + v1 + _w64(b, p + 48), 42) * k1
        x = x ^ w1
        y = y + v0 + _w64(b, p + 40)
        z = _ror(z + w0, 33) * k1
        v0, v1 = _weak32(b, p, v1 * k1, x + w0)
        w0, w1 = _weak32(b, p + 32, z + w1, y + _w64(b, p + 16))
        x, z = z, x
    mul = k1 + ((z & _U64(0xFF)) << _U64(1))
    p = n - 64
    w0 = w0 + _U64((n - 1) & 63)
    v0 = v0 + w0
    w0 = w0 + v0
    x = _ror(x + y + v0 + _w64(b, p + 8), 37) * mul
    y = _ror(y + v1 + _w64(b, p + 48), 42) * mul
    x = x ^ (w1 * _U64(9))
    y = y + v0 * _U64(9) + _w64(b, p + 40)
    z = _ror(z + w0, 33) * mul
    v0, v1 = _weak32(b, p, v1 * mul, x + w0)
    w0, w1 = _weak32(b, p + 32, z + w1, y + _w64(b, p + 16))
    x, z = z, x
    return _mix16(_mix16(v0, w0, mul) + _shift_mix(y) * _U64(_K0) + z, _mix16(v1, w1, mul) + x, mul)


def fingerprint64_rows(keys: np.ndarray) -> np.ndarray:
    """Fingerprint64 of every row of a uint8 array [K, L] -> uint64 [K]."""
    b = np.asarray(keys, dtype=np.uint8)
    if b.ndim != 2:
        raise ValueError(f"expected a [keys, bytes] uint8 array, got shape {list(b.shape)}")
    n = b.shape[1]
    if n <= 16:
        return _short(b, n)
    if n <= 32:
        return _medium(b, n)
    if n <= 64:
        return _long(b, n)
    return _over64(b, n)


def fingerprint64(s: bytes) -> int:
    """Fingerprint64 of one byte string, as an unsigned 64-bit int."""
    return int(fingerprint64_rows(np.frombuffer(bytes(s), np.uint8).reshape(1, -1))[0])
