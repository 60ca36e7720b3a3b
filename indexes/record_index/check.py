"""``validate`` of a record index: recompute it from the data files, compare entry by entry.

The data files' entries are recomputed the way a build computes them (spilled file by
file, :mod:`.spill`) and compared with what a reader of the snapshot gets (the
generation and the deltas, entries of live files only), one range of buckets at a time,
so validation holds no more in memory than a build. An entry is identified by its file
and its key's hash (and which of the file's entries of that hash, by row): each row of
a data file has one, and a key a partial rewrite's chain resolved to
(:func:`.live_entries.live_entries`) names its file but no row. A mismatch is an entry
``missing`` from the index, one the index holds that the data does not (``extra``),
one whose key, bucket, delete flag or row (where the index names one) ``differs``, or
one held twice (``duplicate``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...timeline.errors import SnapshotExpiredError
from ...timeline.storage.filesystem import Storage
from ..entries import IndexTarget, MapFn, serial_map
from .live_entries import partial_rewrites
from .rows import BUCKET, DELETED, HASH, PATH, POS, key_columns
from .spill import RANGE_ROWS, RangeTask, range_rows, remove_spill, spill
from .store import CHECK_PREFIX, Generation, new_token, ranges

#: Mismatches reported per range of buckets (a broken index would otherwise list
#: every entry of the table).
MAX_REPORTED = 1000


@dataclass(frozen=True)
class CompareTask:
    """Compare the recomputed and the stored entries of buckets ``[lo, hi)``."""

    expected: RangeTask
    stored: RangeTask
    name: str


def _codes(rows: pa.Table, live: pa.Array) -> np.ndarray:
    """Each entry's file as its number in ``live`` (paths): a string join on paths
    costs far more."""
    codes = []
    for chunk in rows.column(PATH).chunks:
        if pa.types.is_dictionary(chunk.type):
            per_value = pc.index_in(chunk.dictionary, value_set=live).fill_null(-1).to_numpy()
            codes.append(per_value[chunk.indices.to_numpy()])
        else:
            codes.append(pc.index_in(chunk, value_set=live).fill_null(-1).to_numpy())
    return np.concatenate(codes).astype(np.int64) if codes else np.zeros(0, np.int64)


def _identify(rows: pa.Table, live: pa.Array) -> tuple[np.ndarray, tuple[np.ndarray, ...], np.ndarray]:
    """The rows of ``rows`` in identity order, their identities (file, the key's hash,
    and which of the file's entries of that hash it is, by row) and which repeat the
    entry before with the same row (a duplicate). Not the row alone: the keys a partial
    rewrite's chain resolved to name no row (``pos`` -1)."""
    code, h = _codes(rows, live), rows.column(HASH).to_numpy()
    pos = rows.column(POS).to_numpy().astype(np.int64)
    order = np.lexsort((pos, h, code))
    code, h, pos = code[order], h[order], pos[order]
    run = np.r_[True, (code[1:] != code[:-1]) | (h[1:] != h[:-1])] if len(order) else np.zeros(0, bool)
    starts = np.flatnonzero(run)
    nth = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    dup = np.r_[False, ~run[1:] & (pos[1:] == pos[:-1]) & (pos[1:] >= 0)] if len(order) else np.zeros(0, bool)
    return order, (code, h, nth), dup


def _ranks(e: tuple[np.ndarray, ...], g: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The identities of both sides as one integer each, equal exactly when the
    identities are and ordered as they are (so each side stays sorted)."""
    cols = [np.r_[a, b] for a, b in zip(e, g)]
    order = np.lexsort(cols[::-1])
    if not len(order):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    new = np.zeros(len(order), dtype=bool)
    new[0] = True
    for c in cols:
        s = c[order]
        new[1:] |= s[1:] != s[:-1]
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.cumsum(new) - 1
    return rank[: len(e[0])], rank[len(e[0]) :]


def compare_task(task: CompareTask) -> list[dict[str, Any]]:
    live = task.stored.live
    assert live is not None
    key = key_columns(task.expected.key)
    exp, got = range_rows(task.expected, sort=False), range_rows(task.stored, sort=False)
    e_order, e_id, _ = _identify(exp, live)
    g_order, g_id, dup = _identify(got, live)
    e_ids, g_ids = _ranks(e_id, g_id)
    out: list[dict[str, Any]] = []

    def report(rows: pa.Table, picked_rows: np.ndarray, problem: str) -> None:
        if not len(picked_rows) or len(out) >= MAX_REPORTED:
            return
        picked = rows.take(pa.array(picked_rows[: MAX_REPORTED - len(out)]))
        for r in picked.select([PATH, POS, *key]).to_pylist():
            out.append(
                {"index": task.name, "path": r[PATH], "pos": r[POS], "key": [r[k] for k in key], "problem": problem}
            )

    report(got, g_order[dup], "duplicate")
    in_got = _member(e_ids, g_ids)
    report(exp, e_order[~in_got], "missing")
    report(got, g_order[~_member(g_ids, e_ids) & ~dup], "extra")
    # The entries both hold, side by side (rows of ``exp`` and ``got``).
    e_rows, g_rows = e_order[in_got], g_order[np.searchsorted(g_ids, e_ids[in_got])]
    both_e, both_g = exp.take(pa.array(e_rows)), got.take(pa.array(g_rows))
    same = np.ones(both_e.num_rows, dtype=bool)
    for c in [BUCKET, DELETED, *key]:
        eq = pc.fill_null(pc.equal(both_e.column(c), both_g.column(c)), False)
        same &= eq.to_numpy(zero_copy_only=False)
    stored_pos = both_g.column(POS).to_numpy()
    same &= (stored_pos < 0) | (stored_pos == both_e.column(POS).to_numpy())
    report(exp, e_rows[~same], "differs")
    return out[:MAX_REPORTED]


def _member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Which of ``values`` are in ``sorted_set`` (sorted)."""
    if len(sorted_set) == 0:
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[at] == values


def validate(
    storage: Storage,
    files: Sequence[tuple[str, int]],
    generation: Generation | None,
    deltas: Sequence[str],
    target: IndexTarget,
    schema: pa.Schema,
    map_fn: MapFn = serial_map,
) -> list[dict[str, Any]]:
    """Every mismatch between the entries of the live data ``files`` (path, bytes) and
    what the index holds for them: ``generation`` plus ``deltas`` (absolute paths; the
    deltas a reader of the snapshot reads).

    Raises:
        SnapshotExpiredError: a live data file is missing.
    """
    spilled = spill(storage, files, target, schema, new_token(), map_fn, prefix=CHECK_PREFIX)
    try:
        if spilled.gone:
            raise SnapshotExpiredError(f"data file {spilled.gone[0]} of the snapshot being validated is missing")
        live = pa.array(sorted(p for p, _ in files), pa.string())
        # The expected side resolves the same chains, so both name those keys alike.
        partial = tuple(sorted(partial_rewrites(storage, deltas).items()))
        own = {b: storage.path(p) for b, (p, _) in generation.files.items()} if generation is not None else {}
        stored_rows = generation.rows if generation is not None else 0
        key = target.columns
        tasks = []
        for lo, hi in ranges(target.buckets, max(spilled.rows, stored_rows), RANGE_ROWS):
            mine = tuple(p for b, p in sorted(own.items()) if lo <= b < hi)
            tasks.append(
                CompareTask(
                    RangeTask(storage, spilled.files, lo, hi, "", key, schema, live, partial),
                    RangeTask(storage, tuple(deltas) + mine, lo, hi, "", key, schema, live, partial),
                    target.name,
                )
            )
        return [m for part in map_fn(compare_task, tasks) for m in part]
    finally:
        remove_spill(storage, spilled)
