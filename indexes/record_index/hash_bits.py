"""A bit table over the top bits of 64-bit key hashes: the record index's cheap "maybe".

A lookup asks hundreds of thousands of hashes whether a set holds them. A bit per value of
the hashes' top ``width`` bits, sized at about 32 bits per hash in the set, answers "no"
for about 97% of absent hashes with two vector operations, so the exact binary search
runs on the few that pass. Used for a lookup's own keys (:class:`.lookup.ProbeSet`) and for
the deltas a process remembers (:mod:`.delta_hashes`).
"""

from __future__ import annotations

import numpy as np

from ..native import NATIVE

#: Bits of a table per hash it is sized for.
BITS_PER_HASH = 32


def width_for(hashes: int, lo: int = 10, hi: int = 27) -> int:
    """The top bits a table for ``hashes`` hashes indexes: about :data:`BITS_PER_HASH`
    bits each, within ``[lo, hi]``."""
    return max(lo, min(hi, int(np.ceil(np.log2(max(hashes, 1) * BITS_PER_HASH)))))


def empty_table(width: int) -> np.ndarray:
    return np.zeros(1 << max(width - 3, 0), dtype=np.uint8)


def _top(hashes: np.ndarray, width: int) -> np.ndarray:
    return hashes.view(np.uint64) >> np.uint64(64 - width)


def set_bits(bits: np.ndarray, width: int, sorted_hashes: np.ndarray) -> None:
    """Set in ``bits`` the bit of each of ``sorted_hashes`` (int64, ascending)."""
    if not len(sorted_hashes):
        return
    # Sorted as int64, the negative hashes come first; as unsigned they come last.
    split = int(np.searchsorted(sorted_hashes, 0))
    top = _top(np.r_[sorted_hashes[split:], sorted_hashes[:split]], width)
    top = top[np.r_[True, top[1:] != top[:-1]]]
    byte, bit = top >> np.uint64(3), (np.uint64(1) << (top & np.uint64(7))).astype(np.uint8)
    starts = np.flatnonzero(np.r_[True, byte[1:] != byte[:-1]])
    # Each byte's bits are distinct, so their sum is their union; the bytes are distinct.
    bits[byte[starts]] |= np.add.reduceat(bit, starts).astype(np.uint8)


def maybe(bits: np.ndarray, width: int, hashes: np.ndarray) -> np.ndarray:
    """Whether each of ``hashes`` (int64) may be in the set: its bit is set (false for
    about 3% of absent hashes, never for a present one)."""
    top = _top(hashes, width)
    return ((bits[top >> np.uint64(3)] >> (top & np.uint64(7)).astype(np.uint8)) & 1).astype(bool)


def in_sorted(sorted_hashes: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """Whether each of ``hashes`` is one of ``sorted_hashes`` (ascending), exactly."""
    if not len(sorted_hashes):
        return np.zeros(len(hashes), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_hashes, hashes), len(sorted_hashes) - 1)
    return sorted_hashes[at] == hashes


def find_sorted(
    bits: np.ndarray, width: int, sorted_hashes: np.ndarray, hashes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Of ``hashes`` (int64), those in ``sorted_hashes`` (ascending) whose bit ``bits``
    sets (every one of them, when ``bits`` was set from ``sorted_hashes``): their indices
    (ascending) and where each first occurs in ``sorted_hashes``.

    One pass without the GIL in the C extension (a 500k-key upsert asks it of every
    delta's 500k hashes, and reading threads then run side by side); numpy otherwise."""
    if NATIVE is not None and len(hashes):
        entry, at = np.empty(len(hashes), np.int64), np.empty(len(hashes), np.int64)
        found = NATIVE.probe_sorted(
            bits,
            width,
            np.ascontiguousarray(sorted_hashes, np.int64),
            np.ascontiguousarray(hashes, np.int64),
            entry,
            at,
        )
        return entry[:found], at[:found]
    passed = np.flatnonzero(maybe(bits, width, hashes))
    if not len(sorted_hashes) or not len(passed):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    at = np.searchsorted(sorted_hashes, hashes[passed])
    hit = sorted_hashes[np.minimum(at, len(sorted_hashes) - 1)] == hashes[passed]
    return passed[hit].astype(np.int64), at[hit].astype(np.int64)
