"""DataSketches coupons of a column: what a value contributes to an NDV sketch.

A DataSketches HLL sketch (:mod:`.hll`) sees a value as a *coupon* of its
MurmurHash3_x64_128 with seed 9001: the low 26 bits of the first 64-bit half, and above
them 1 + the number of leading zeros of the second half (at most 63). Hashing a value
the way DataSketches (and Spark's ``hll_sketch_agg``) does is what makes lakeline's
sketches merge with theirs:

* integers (ints widened to 64 bits, as Spark does for IntegerType), dates, times and
  timestamps (their integer value) and floats (their IEEE bits, -0.0 and NaN made one)
  as 8 little-endian bytes;
* strings as their UTF-8 bytes, binaries as their bytes; an empty one is no value;
* anything else by its Arrow text.

The C loops (``_native.ds_coupons_*``) do it in one pass; numpy (fixed-width values)
and plain Python (text) are the fallbacks and the reference the tests hold them to.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .hashing import _as_words, _text_buffers, as_plain_binary
from .native import NATIVE

SEED = 9001
_C1, _C2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
_M64 = (1 << 64) - 1


def column_coupons(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The coupons (uint32) of a column's non-null values; 0 for values DataSketches
    skips (empty strings)."""
    if array.null_count:
        array = array.drop_null()
    words = _as_words(array)
    if words is not None:
        return word_coupons(words)
    array = as_plain_binary(array)  # fixed-size binaries by their bytes: need not be UTF-8
    typ = array.type
    if not (
        pa.types.is_string(typ)
        or pa.types.is_large_string(typ)
        or pa.types.is_binary(typ)
        or pa.types.is_large_binary(typ)
    ):
        array = pc.cast(array, pa.string())
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    parts = [text_coupons(c) for c in chunks if len(c)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint32)


def word_coupons(words: np.ndarray) -> np.ndarray:
    """Coupons of 64-bit words, each hashed as its 8 little-endian bytes."""
    w = np.ascontiguousarray(words, dtype=np.uint64)
    if NATIVE is not None:
        out = np.empty(len(w), dtype=np.uint32)
        NATIVE.ds_coupons_words(w, out)
        return out
    return word_coupons_numpy(w)


def text_coupons(chunk: pa.Array) -> np.ndarray:
    """Coupons of the values of one string or binary array (0 for empty values)."""
    data, offsets = _text_buffers(chunk)
    n = len(chunk)
    if NATIVE is not None:
        out = np.empty(n, dtype=np.uint32)
        NATIVE.ds_coupons_text(data, offsets, offsets.dtype == np.int64, n, out)
        return out
    raw = data.tobytes()
    return np.array(
        [
            coupon(*murmur3_128(raw[offsets[i] : offsets[i + 1]])) if offsets[i + 1] > offsets[i] else 0
            for i in range(n)
        ],
        dtype=np.uint32,
    )


# -- references ---------------------------------------------------------------------------


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _M64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _M64
    return h ^ (h >> 33)


def murmur3_128(key: bytes, seed: int = SEED) -> tuple[int, int]:
    """MurmurHash3_x64_128 of ``key`` (the plain-Python reference)."""
    h1 = h2 = seed
    n = len(key) // 16
    for i in range(n):
        k1 = int.from_bytes(key[16 * i : 16 * i + 8], "little")
        k2 = int.from_bytes(key[16 * i + 8 : 16 * i + 16], "little")
        h1 ^= (_rotl((k1 * _C1) & _M64, 31) * _C2) & _M64
        h1 = (_rotl(h1, 27) + h2) & _M64
        h1 = (h1 * 5 + 0x52DCE729) & _M64
        h2 ^= (_rotl((k2 * _C2) & _M64, 33) * _C1) & _M64
        h2 = (_rotl(h2, 31) + h1) & _M64
        h2 = (h2 * 5 + 0x38495AB5) & _M64
    tail = key[16 * n :]
    if len(tail) > 8:
        h2 ^= (_rotl((int.from_bytes(tail[8:], "little") * _C2) & _M64, 33) * _C1) & _M64
    if tail:
        h1 ^= (_rotl((int.from_bytes(tail[:8], "little") * _C1) & _M64, 31) * _C2) & _M64
    h1 ^= len(key)
    h2 ^= len(key)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _M64
    return h1, (h2 + h1) & _M64


def coupon(h1: int, h2: int) -> int:
    lz = 64 - h2.bit_length()
    return ((min(lz, 62) + 1) << 26) | (h1 & ((1 << 26) - 1))


def word_coupons_numpy(w: np.ndarray) -> np.ndarray:
    """:func:`word_coupons` in numpy: MurmurHash3_x64_128 of one 8-byte block (the tail
    path: ``k1`` only), vectorised over the words."""
    with np.errstate(over="ignore"):
        seed = np.uint64(SEED)
        k1 = w * np.uint64(_C1)
        k1 = (k1 << np.uint64(31)) | (k1 >> np.uint64(33))
        k1 = k1 * np.uint64(_C2)
        h1 = seed ^ k1
        h2 = np.full_like(w, seed)
        h1 ^= np.uint64(8)
        h2 ^= np.uint64(8)
        h1 = h1 + h2
        h2 = h2 + h1
        h1, h2 = _fmix_np(h1), _fmix_np(h2)
        h1 = h1 + h2
        h2 = h2 + h1
    # Leading zeros of h2 through the float exponent of its top 53 bits (exact for the
    # count we need: a value below 2^11 has >= 53 zeros, capped at 62 below).
    top = (h2 >> np.uint64(11)).astype(np.float64)
    exponent = (top.view(np.uint64) >> np.uint64(52)).astype(np.int64)
    lz = np.where(top == 0, 53 + _lz_small(h2 & np.uint64(0x7FF)), 1023 + 52 - exponent)
    value = (np.minimum(lz, 62) + 1).astype(np.uint32)
    return (value << np.uint32(26)) | (h1 & np.uint64((1 << 26) - 1)).astype(np.uint32)


def _lz_small(x: np.ndarray) -> np.ndarray:
    """Leading zeros, within 11 bits, of values below 2^11 (11 for zero)."""
    return 11 - np.ceil(np.log2(x.astype(np.float64) + 1)).astype(np.int64)


def _fmix_np(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> np.uint64(33))
