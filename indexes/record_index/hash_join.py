"""Pairing a lookup's keys with the record-index entries that name them: by hash, then
by key (a 64-bit hash only narrows; two keys may share one).

The probes come sorted by hash with their rows in the caller's table; a file's entries
come sorted by hash (a generation's bucket file) or not (a delta). Whichever side is
smaller is searched in the other, and only the pairs of equal hashes compare keys.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .rows import DELETED, HASH, PATH, PATH_TYPE, POS

#: Row number of a looked-up key in the caller's table (in memory only).
ROW = "__lakeline_row"


def equal_hashes(
    stored: pa.Table, hashes: np.ndarray, rows: np.ndarray, sorted_by_hash: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(entry of ``stored``, probe row) of every pair whose hashes are equal, the probes
    being ``hashes`` (ascending) at ``rows``: a binary search of each probe among the
    entries' hashes (already sorted in a generation's bucket file,
    :func:`.spill.range_rows`, whose mapped pages are then touched only where a probe
    lands)."""
    column = stored.column(HASH)
    stored_hashes = column.chunk(0).to_numpy() if column.num_chunks == 1 else column.to_numpy()
    if not sorted_by_hash and len(stored_hashes) < len(hashes):
        return equal_hashes_by_entry(stored_hashes, hashes, rows)
    order = None if sorted_by_hash else np.argsort(stored_hashes, kind="stable")
    ordered = stored_hashes if order is None else stored_hashes[order]
    lo = np.searchsorted(ordered, hashes, side="left")
    count = np.searchsorted(ordered, hashes, side="right") - lo
    hit = count > 0
    if not hit.any():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    lo, count = lo[hit], count[hit]
    # Every entry of each probe's run of equal hashes (almost always one entry).
    at = np.repeat(lo, count) + np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    return (at if order is None else order[at]), np.repeat(rows[hit], count)


def equal_hashes_by_entry(
    stored_hashes: np.ndarray, hashes: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`equal_hashes` for fewer entries than probes (a delta's candidates against
    an upsert's keys): each entry is searched among the probes, not each probe among
    the entries (a 500k-key upsert against ten deltas: 20M binary searches, a fifth of
    its tagging, against 0.5M). The pairs come in the same order: by probe, then entry."""
    lo = np.searchsorted(hashes, stored_hashes, side="left")
    count = np.searchsorted(hashes, stored_hashes, side="right") - lo
    hit = np.flatnonzero(count > 0)
    if not len(hit):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    lo, count = lo[hit], count[hit]
    probe = np.repeat(lo, count) + np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    entry = np.repeat(hit, count)
    by_probe = np.argsort(probe, kind="stable")  # entries of one probe stay in file order
    return entry[by_probe], rows[probe[by_probe]]


def pairs_at(hashes: np.ndarray, found: np.ndarray, at: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`equal_hashes_by_entry` for entries whose hashes ``found`` a search already
    placed: the first probe of each is at ``at`` among ``hashes`` (ascending, at
    ``rows``). Pairs come in the same order, by probe, then entry. Only when a probe
    after one of them shares its hash (two keys of the lookup with one hash) is the
    general search run again."""
    nxt = np.minimum(at + 1, len(hashes) - 1)
    if ((at + 1 < len(hashes)) & (hashes[nxt] == found)).any():
        return equal_hashes_by_entry(found, hashes, rows)
    by_probe = np.argsort(at, kind="stable")  # entries of one probe stay in file order
    return by_probe.astype(np.int64), rows[at[by_probe]]


def exact_pairs(stored: pa.Table, probe: pa.Table, entry: np.ndarray, row: np.ndarray) -> pa.Table:
    """The pairs (``entry`` of ``stored``, ``row`` of ``probe``) whose keys are equal,
    as :data:`ROW`, ``path``, ``pos``, ``deleted`` (a hash only narrows)."""
    if len(entry) == 0:
        return no_entries()
    picked = stored.take(pa.array(entry))
    same = pa.array(np.ones(len(entry), dtype=bool))
    for name in probe.column_names:
        mine = picked.column(name)
        theirs = probe.column(name).take(pa.array(row))
        if mine.type != theirs.type:  # written before a key type was widened
            mine = mine.cast(theirs.type)
        same = pc.and_(same, pc.equal(mine, theirs))
    if not pc.all(same).as_py():
        picked, row = picked.filter(same), row[same.to_numpy(zero_copy_only=False)]
    return pa.table(
        {
            ROW: pa.array(row, pa.int64()),
            PATH: picked.column(PATH),
            POS: picked.column(POS),
            DELETED: picked.column(DELETED),
        }
    )


def no_entries() -> pa.Table:
    return pa.table(
        {
            ROW: pa.array([], pa.int64()),
            PATH: pa.array([], PATH_TYPE),
            POS: pa.array([], pa.int32()),
            DELETED: pa.array([], pa.bool_()),
        }
    )
