"""Vectorized 64-bit hashes of Arrow columns, for bloom filters and NDV sketches.

Index entries are computed for every base file a writer or a build produces, so hashing
is on the write path: one Python call per value (what pybloom-live and the datasketches
bindings need) costs seconds per million rows (``docs/decisions.md``). These hashes
run over whole Arrow buffers instead: in C when the extension is built (:mod:`.native`,
one pass per column without the GIL), else with numpy; the ``*_numpy`` functions are
the reference both must equal.

Two kinds of input, each hashed the same way on every platform and in every version of
the on-disk format (entries written by one process are probed by another):

* **fixed-width values**: integers (any width) as a 64-bit two's-complement word,
  dates, times, timestamps and durations as the integer of their unit, floats as the
  bits of their float64 value (-0.0 and NaN normalized), mixed by the murmur3
  ``fmix64`` finalizer with a seed;
* **text** (strings and binaries by their bytes, anything else through its Arrow cast
  to string): a polynomial hash of the bytes, taken as 8-byte words, modulo 2^64 (Horner's rule, one
  vector pass per word position over the strings that long), then mixed with the
  length and ``fmix64``.

The polynomial hash is linear, so crafted inputs can collide; for the filters and
sketches built on it a collision is a false positive or a slightly low estimate, never
a wrong answer.

Bounds (:func:`min_max_text`) are text so one Parquet string column holds those of every
type. Binary values need not be UTF-8, so they are stored as their text when they are
valid UTF-8 (what every entry written before binary bounds were encoded holds) and as
:data:`BINARY_HEX_TAG` plus their hex digits otherwise (:func:`binary_bound_text`;
issue 25, audit D2g: a non-UTF-8 key used to fail every write with ``ArrowInvalid``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .native import NATIVE, SPLIT_ROWS, in_halves

#: Odd multiplier of the polynomial text hash (any odd 64-bit constant works; this one is
#: the 64-bit golden ratio).
_TEXT_BASE = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xFF51AFD7ED558CCD)
_MIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_LEN_MUL = np.uint64(0xD6E8FEB86659FD93)
_S33 = np.uint64(33)
_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)

#: Starts the text of a binary bound stored as hex digits. A NUL starts no text a
#: readable key starts with, so the plain UTF-8 text of old entries stays as it was.
BINARY_HEX_TAG = "\x00hex:"


def is_binary_like(typ: pa.DataType) -> bool:
    """Whether values of ``typ`` are raw bytes (any of Arrow's binary types)."""
    return (
        pa.types.is_binary(typ)
        or pa.types.is_large_binary(typ)
        or pa.types.is_fixed_size_binary(typ)
        or pa.types.is_binary_view(typ)
    )


def as_plain_binary(array: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A fixed-size or view binary column as ``binary`` (the same bytes: hashes and
    bounds see the bytes, never an Arrow cast to string, which refuses non-UTF-8)."""
    typ = array.type
    if pa.types.is_fixed_size_binary(typ) or pa.types.is_binary_view(typ):
        return pc.cast(array, pa.binary())
    return array


def binary_bound_text(value: bytes) -> str:
    """The stored text of a binary bound: its UTF-8 text when it is valid UTF-8 (and
    does not start with the tag), else :data:`BINARY_HEX_TAG` and its hex digits."""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return BINARY_HEX_TAG + value.hex()
    return BINARY_HEX_TAG + value.hex() if text.startswith(BINARY_HEX_TAG) else text


def binary_bound_value(text: str) -> bytes:
    """The bytes of a binary bound's stored text (:func:`binary_bound_text`).

    Raises:
        ValueError: a tagged text whose digits are not hex (a corrupt entry).
    """
    if text.startswith(BINARY_HEX_TAG):
        return bytes.fromhex(text[len(BINARY_HEX_TAG) :])
    return text.encode("utf-8")


def fmix64(h: np.ndarray) -> np.ndarray:
    """murmur3's 64-bit finalizer, in place: every input bit affects every output bit."""
    tmp = np.empty_like(h)
    with np.errstate(over="ignore"):
        for mul in (_MIX1, _MIX2, None):
            np.right_shift(h, _S33, out=tmp)
            h ^= tmp
            if mul is not None:
                h *= mul
    return h


def _horner(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``sum(w_i * BASE^(W-1-i))`` over each string's little-endian 8-byte words ``w_i``
    (the last one zero-padded), one vector pass per word position.

    Strings are visited longest first, so the strings still active at word ``j`` are a
    prefix of that order and the passes touch each word once.
    """
    n = len(lengths)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    longest = int(lengths.max())
    uniform = bool((lengths == longest).all())
    if uniform:
        order = None
        s, sorted_len = starts, lengths
    else:
        # Longest first; as 16-bit keys a stable argsort is a radix sort, O(n).
        keys = (longest - lengths).astype(np.uint16 if longest < 1 << 16 else np.int64)
        order = np.argsort(keys, kind="stable")
        s, sorted_len = starts[order], lengths[order]
    # words[i] is the (unaligned) 8-byte word starting at byte i; 8 zero bytes of padding
    # keep the last word of the last string inside the buffer.
    padded = np.zeros(len(data) + 8, dtype=np.uint8)
    padded[: len(data)] = data
    words = np.ndarray((len(data) + 1,), dtype="<u8", buffer=padded, strides=(1,))
    passes = (longest + 7) // 8
    h = np.zeros(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(passes):
            k = n if uniform else int(np.searchsorted(-sorted_len, -8 * j, side="left"))
            w = words[s[:k] + 8 * j] if j else words[s[:k]]
            if int(sorted_len[k - 1]) - 8 * j < 8:  # the shortest ends in this word
                # Keep only each string's own bytes of its last word.
                left = np.minimum(sorted_len[:k] - 8 * j, 8).astype(np.uint64)
                w &= _ALL_ONES >> (np.uint64(64) - left * np.uint64(8))
            hk = h[:k]
            hk *= _TEXT_BASE
            hk += w
    if order is None:
        return h
    out = np.empty(n, dtype=np.uint64)
    out[order] = h
    return out


def hash_text_buffers(
    data: np.ndarray, offsets: np.ndarray, seed: int = 0, out: np.ndarray | None = None
) -> np.ndarray:
    """64-bit hashes of the strings ``data[offsets[i]:offsets[i+1]]`` (``offsets``: int32
    or int64), into ``out`` when given (a contiguous uint64 array of their count)."""
    n = max(len(offsets) - 1, 0)
    if out is None:
        out = np.empty(n, dtype=np.uint64)
    if NATIVE is None:
        out[:] = hash_text_buffers_numpy(data, offsets, seed)
    elif n > 0:
        wide = offsets.dtype == np.int64
        offs = np.ascontiguousarray(offsets, dtype=np.int64 if wide else np.int32)
        NATIVE.hash_text(np.ascontiguousarray(data, dtype=np.uint8), offs, wide, n, seed & 0xFFFFFFFFFFFFFFFF, out)
    return out


def hash_text_buffers_numpy(data: np.ndarray, offsets: np.ndarray, seed: int = 0) -> np.ndarray:
    """:func:`hash_text_buffers` in numpy (the reference the C loop must equal)."""
    starts = offsets[:-1].astype(np.int64)
    lengths = (offsets[1:] - offsets[:-1]).astype(np.int64)
    h = _horner(data, starts, lengths)
    with np.errstate(over="ignore"):
        h = h ^ (lengths.astype(np.uint64) * _LEN_MUL) ^ np.uint64(seed & 0xFFFFFFFFFFFFFFFF)
    return fmix64(h)


def hash_text(array: pa.Array | pa.ChunkedArray, seed: int = 0, out: np.ndarray | None = None) -> np.ndarray:
    """64-bit hashes of the bytes of a string (UTF-8) or binary column (nulls hash as
    empty), into ``out`` when given."""
    if out is None:
        out = np.empty(len(array), dtype=np.uint64)
    if len(array) >= SPLIT_ROWS:
        in_halves(lambda a, b: _hash_text(array.slice(a, b - a), seed, out[a:b]), len(array))
        return out
    return _hash_text(array, seed, out)


def _hash_text(array: pa.Array | pa.ChunkedArray, seed: int, out: np.ndarray) -> np.ndarray:
    """:func:`hash_text` in this thread."""
    if isinstance(array, pa.ChunkedArray):
        # Each chunk straight into its slice: no concatenation pass (5M keys: 14 ms).
        at = 0
        for chunk in array.chunks:
            _hash_text(chunk, seed, out[at : at + len(chunk)])
            at += len(chunk)
        return out
    array = as_plain_binary(array)
    typ = array.type
    binary = pa.types.is_binary(typ) or pa.types.is_large_binary(typ)
    if not (binary or pa.types.is_string(typ) or pa.types.is_large_string(typ)):
        array = pc.cast(array, pa.large_string())
    if array.null_count:
        array = pc.fill_null(array, b"" if binary else "")
    if len(array) == 0:
        return out
    data, offsets = _text_buffers(array)
    return hash_text_buffers(data, offsets, seed, out)


def _as_words(array: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """The column as 64-bit words (read-only) when its values have a fixed-width identity: integers
    and temporal types by their integer value, floats by their IEEE bits (with -0.0 and
    every NaN made one value, as they compare equal or all unordered); None otherwise."""
    typ = array.type
    if pa.types.is_temporal(typ) and not pa.types.is_interval(typ):
        # Dates, times, timestamps and durations are integers under their unit.
        width = pa.int32() if typ.bit_width == 32 else pa.int64()
        array = (
            array.view(width)
            if isinstance(array, pa.Array)
            else pa.chunked_array([c.view(width) for c in array.chunks], width)
        )
        typ = width
    if not (pa.types.is_integer(typ) or pa.types.is_floating(typ)):
        return None  # before combining the chunks: a copy of a text column costs what hashing it does
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_integer(typ):
        if array.null_count:
            array = pc.fill_null(array, 0)
        # Zero-copy for int64 without nulls: the words are only read.
        return array.to_numpy(zero_copy_only=False).astype(np.int64, copy=False).view(np.uint64)
    if array.null_count:
        array = pc.fill_null(array, 0.0)
    values = array.to_numpy(zero_copy_only=False).astype(np.float64)
    values[values == 0.0] = 0.0  # -0.0 == 0.0
    values[np.isnan(values)] = np.nan
    return values.view(np.uint64)


def hash_words_numpy(words: np.ndarray, seed: int = 0) -> np.ndarray:
    """The hashes of fixed-width values' words in numpy (the reference the C loop must
    equal)."""
    return fmix64(words ^ np.uint64(seed & 0xFFFFFFFFFFFFFFFF))


def hash_array(array: pa.Array | pa.ChunkedArray, seed: int = 0) -> np.ndarray:
    """64-bit hashes of a column: integers, temporal values and floats by value, binary
    by its bytes, everything else by its Arrow text.

    Nulls hash like 0 or the empty text; callers that must not count nulls drop them
    first.
    """
    words = _as_words(array)
    if words is not None:
        if NATIVE is not None:
            out = np.empty(len(words), dtype=np.uint64)
            NATIVE.hash_words(np.ascontiguousarray(words), seed & 0xFFFFFFFFFFFFFFFF, out)
            return out
        return hash_words_numpy(words, seed)
    typ = array.type
    if not (pa.types.is_string(typ) or pa.types.is_large_string(typ) or is_binary_like(typ)):
        array = pc.cast(array, pa.string())
    return hash_text(array, seed)


def row_hashes(columns: list[pa.Array | pa.ChunkedArray]) -> np.ndarray:
    """One 64-bit hash per row over several columns: each column hashed on its own
    (:func:`hash_array`, integers by value, no text) and the hashes mixed in order. For
    grouping or matching rows in memory only: the key hash stored on disk is
    :func:`lakeline.indexes.bloom.key_hashes`, which this need not equal."""
    out = hash_array(columns[0], seed=1)
    out *= _TEXT_BASE
    for i, col in enumerate(columns[1:], start=2):
        out ^= hash_array(col, seed=i)
        out *= _TEXT_BASE  # spread before the next column (order matters)
    return out


def _text_buffers(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The data bytes and the (int32 or int64) offsets of a string or binary array."""
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    _, offsets_buf, data_buf = array.buffers()
    n = len(array)
    offsets = np.frombuffer(offsets_buf, dtype=np.int64 if large else np.int32)[array.offset : array.offset + n + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
    return data, offsets


def min_max_text(column: pa.Array | pa.ChunkedArray) -> tuple[str | None, str | None]:
    """The smallest and largest value of a column as text (Arrow's cast to string;
    binaries by :func:`binary_bound_text`), or None for a column without non-null
    values."""
    typ = column.type
    if is_binary_like(typ):
        mm = pc.min_max(as_plain_binary(column))
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        return (None, None) if lo is None else (binary_bound_text(lo), binary_bound_text(hi))
    if (
        NATIVE is not None
        and len(column)
        and not column.null_count
        and (pa.types.is_string(typ) or pa.types.is_large_string(typ))
    ):
        # Chunk by chunk (no copy into one array): 4x faster than Arrow's min_max on 5M
        # keys, and in two halves on two threads for long columns. UTF-8's byte order
        # is code-point order, so Python's comparison of the chunks' bounds agrees with
        # the loop's.
        def chunk_bounds(start: int, stop: int) -> list[tuple[str, str]]:
            part = column.slice(start, stop - start)
            out = []
            for arr in part.chunks if isinstance(part, pa.ChunkedArray) else [part]:
                if len(arr):
                    data, offsets = _text_buffers(arr)
                    lo, hi = NATIVE.text_min_max(data, offsets, offsets.dtype == np.int64, len(arr))
                    out.append((arr[lo].as_py(), arr[hi].as_py()))
            return out

        bounds = [b for half in in_halves(chunk_bounds, len(column)) for b in half]
        return min(b[0] for b in bounds), max(b[1] for b in bounds)
    mm = pc.min_max(column)
    if pa.types.is_integer(typ):
        # Python's text of an int is Arrow's (a cast per bound costs more than the
        # min/max of a small file).
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        return (None, None) if lo is None else (str(lo), str(hi))
    return _as_text(mm["min"]), _as_text(mm["max"])


def min_max_values(column: pa.Array | pa.ChunkedArray) -> tuple[Any, Any]:
    """The smallest and largest value of a column as Python values (None for no
    non-null value): strings through the C loop of :func:`min_max_text` (Arrow's string
    min/max is 4x slower), everything else through Arrow."""
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return min_max_text(column)
    mm = pc.min_max(column)
    return mm["min"].as_py(), mm["max"].as_py()


def _as_text(value: pa.Scalar) -> str | None:
    if not value.is_valid:
        return None
    return pc.cast(value, pa.string()).as_py()


class ColumnHashes:
    """What the indexes of one data file compute from its columns, each once: the
    hashes (its NDV sketches and a bloom filter on the same column share them) and the
    min/max (column stats and a bloom filter's key range share them).

    ``of(name)`` hashes every row (nulls like 0 or the empty text, as
    :func:`hash_array`); ``of_valid(name)`` only the non-null rows; ``bounds(name)`` is
    :func:`min_max_text`.
    """

    def __init__(self, rows: pa.Table) -> None:
        self.rows = rows
        self._memo: dict[str, np.ndarray] = {}
        self._bounds: dict[str, tuple[str | None, str | None]] = {}

    def of(self, name: str) -> np.ndarray:
        if name not in self._memo:
            self._memo[name] = hash_array(self.rows.column(name))
        return self._memo[name]

    def of_valid(self, name: str) -> np.ndarray:
        col = self.rows.column(name)
        if col.null_count == 0:
            return self.of(name)
        return self.of(name)[pc.is_valid(col).to_numpy(zero_copy_only=False)]

    def bounds(self, name: str) -> tuple[str | None, str | None]:
        if name not in self._bounds:
            self._bounds[name] = min_max_text(self.rows.column(name))
        return self._bounds[name]
