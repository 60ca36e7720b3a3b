"""One row per record key in a batch: the deduplication of incoming rows.

A batch may repeat a key (a change feed replays updates); the table holds one version,
so before anything is planned a batch keeps, per key, the row with the largest ordering
value (``merge.engine = deduplicate``), or folds the key's rows by the table's other
merge engine (:mod:`lakeline.table.merge_engine`). This runs on every write, most often
over batches with no repeat at all, so it hashes the keys instead of sorting the batch
(issue 30: a sort-based check cost 2 s on 5M random string keys) and folds only the rows
whose keys may repeat.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...indexes.hashing import row_hashes
from ...indexes.native import NATIVE
from ...timeline.table_config import INTERNAL_PREFIX
from ..merge_engine import DEDUPLICATE, DEFAULT_ENGINE, MergeEngine

#: Each row's position in the batch, in memory only (under the reserved prefix).
POS = INTERNAL_PREFIX + "pos"


def deduplicate(
    table: pa.Table, key: tuple[str, ...], ordering: str | None, engine: MergeEngine = DEFAULT_ENGINE
) -> pa.Table:
    """Keep one row per key: the largest ordering value (nulls lose), on a tie the last
    row; the rows kept stay in their order. Another ``engine`` folds the rows of each
    repeated key into one, put after the rows of keys that do not repeat.

    By hashing, not sorting the batch (issue 30): the keys' 64-bit hashes, sorted, show
    which rows may share a key; a batch without such rows is returned as it is, and
    only those rows are compared and folded. Rows whose hashes meet but whose keys
    differ (a collision) are folded by Arrow on their exact values, so a collision
    never merges two keys.
    """
    n = table.num_rows
    if n <= 1 or not key:
        return table
    cols = [table.column(k) for k in key]
    if len(key) == 1 and _increasing(cols[0]):
        return table  # already one row per key (common for generated keys)
    if engine.name != DEDUPLICATE:
        rows, _ = _hash_groups(cols, n)
        return table if rows.size == 0 else _fold_by_engine(table, key, ordering, engine, rows)
    if any(pa.types.is_floating(c.type) for c in cols):
        # Not a key type (table_config refuses it), and NaN != NaN: Arrow's exact fold.
        return _keep(table, np.arange(n), _fold_exact(table, key, ordering, np.arange(n)))
    rows, starts = _hash_groups(cols, n)
    if rows.size == 0:
        return table
    try:
        same = _same_as_previous([c.take(rows) for c in cols])
        winners = _fold_groups(table, ordering, rows, starts)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        # A key without equality or an ordering without ranks (a view or dictionary
        # type): the rows that may repeat go through Arrow's sort and group_by.
        return _keep(table, rows, _fold_exact(table, key, ordering, rows))
    first = np.zeros(rows.size, dtype=bool)
    first[starts] = True
    # A group (one hash) holds one key when every row equals the one before it.
    one_key = np.logical_and.reduceat(same | first, starts)
    winners = winners[one_key]
    if not one_key.all():
        sizes = np.diff(np.append(starts, rows.size))
        mixed = rows[np.repeat(~one_key, sizes)]
        winners = np.concatenate([winners, _fold_exact(table, key, ordering, mixed)])
    return _keep(table, rows, winners)


def _increasing(col: pa.ChunkedArray) -> bool:
    """Whether a key column is strictly increasing (so has no repeats). The first rows
    are tried alone first: a random-order batch is told in microseconds, not a full
    comparison pass."""
    for part in (col.slice(0, 64), col):
        flat = part.combine_chunks()
        if len(flat) > 1 and pc.any(pc.less_equal(flat[1:], flat[:-1])).as_py():
            return False
    return len(col) > 1


def _hash_groups(cols: list[pa.ChunkedArray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows whose key hash another row shares, grouped by hash (rows ascending in a
    group), and where each group starts; empty when every hash is unique.

    The common batch has no repeat, so that is asked first: of the C extension's
    partitioned hash set where it is built (33-35 ms for 5M hashes here, where numpy's sort
    of the same words takes 0.3 s, a sixth of a 5M-row insert), else of that sort. Only
    a batch with a repeated hash sorts the hashes with the row number in their low bits
    (plain 64-bit words, numpy's fastest sort; an argsort takes three times as long),
    which both groups them and says whose they are. Those keep ``64 - bits`` bits of
    hash, and rows that meet on those only are told apart by the exact comparison after.
    """
    packed = row_hashes(list(cols))
    if _distinct(packed):
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    bits = max(1, (n - 1).bit_length())
    low = np.uint64((1 << bits) - 1)
    packed &= ~low
    packed |= np.arange(n, dtype=np.uint64)
    packed.sort()
    prefix = packed >> np.uint64(bits)
    meets = prefix[1:] == prefix[:-1]
    if not meets.any():
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    shared = np.zeros(n, dtype=bool)
    shared[1:] = meets
    shared[:-1] |= meets
    chosen = packed[shared]
    prefix = prefix[shared]
    starts = np.flatnonzero(np.append(True, prefix[1:] != prefix[:-1]))
    return (chosen & low).astype(np.int64), starts


def _distinct(hashes: np.ndarray) -> bool:
    """Whether no two of ``hashes`` (uint64) are equal."""
    if NATIVE is not None:
        return bool(NATIVE.words_distinct(hashes))
    ordered = np.sort(hashes)
    return not (ordered[1:] == ordered[:-1]).any()


def _same_as_previous(keys: list[pa.ChunkedArray]) -> np.ndarray:
    """For each row, whether its key equals the previous row's (nulls equal nulls, as
    Arrow's group_by has them); the first row: False."""
    same = np.ones(len(keys[0]) - 1, dtype=bool)
    for col in keys:
        flat = col.combine_chunks()
        a, b = flat[1:], flat[:-1]
        eq = pc.fill_null(pc.equal(a, b), False)
        if flat.null_count:
            eq = pc.or_(eq, pc.and_(a.is_null(), b.is_null()))
        same &= eq.to_numpy(zero_copy_only=False)
    return np.append(False, same)


def _fold_groups(table: pa.Table, ordering: str | None, rows: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The winning row of each group of ``rows`` (one key a group, rows ascending): the
    largest ordering value, nulls smallest, on a tie the last row."""
    m = rows.size
    if ordering is None:
        rank = np.zeros(m, dtype=np.uint64)
    else:
        values = table.column(ordering).take(rows)
        rank = pc.rank(values, sort_keys=[("", "ascending", "at_start")], tiebreaker="dense").to_numpy()
    sizes = np.diff(np.append(starts, m))
    best = rank == np.repeat(np.maximum.reduceat(rank, starts), sizes)
    last = np.maximum.reduceat(np.where(best, np.arange(m), -1), starts)
    return rows[last]


def _fold_exact(table: pa.Table, key: tuple[str, ...], ordering: str | None, rows: np.ndarray) -> np.ndarray:
    """The winning row of each key among ``rows``, by Arrow's sort and group_by on the
    exact key values."""
    names = list(dict.fromkeys(key + ((ordering,) if ordering else ())))
    t = table.select(names).take(rows).append_column(POS, pa.array(rows, pa.int64()))
    sort_keys = [(ordering, "ascending", "at_start")] if ordering else []
    t = t.take(pc.sort_indices(t, sort_keys=sort_keys + [(POS, "ascending", "at_end")]))
    winners = t.group_by(list(key), use_threads=False).aggregate([(POS, "last")])
    return winners.column(f"{POS}_last").to_numpy()


def _fold_by_engine(
    table: pa.Table, key: tuple[str, ...], ordering: str | None, engine: MergeEngine, rows: np.ndarray
) -> pa.Table:
    """The rows of ``table`` that are not in ``rows`` (whose keys may repeat), then
    ``rows`` folded by ``engine`` on their exact keys."""
    alone = np.ones(table.num_rows, dtype=bool)
    alone[rows] = False
    versions = table.take(pa.array(rows)).append_column(POS, pa.array(rows, pa.int64()))
    folded = engine.fold(versions, key, ordering, POS, one_write=True)
    return pa.concat_tables([table.filter(pa.array(alone)), folded])


def _keep(table: pa.Table, folded: np.ndarray, winners: np.ndarray) -> pa.Table:
    """``table`` without the ``folded`` rows but their ``winners``, in row order."""
    keep = np.ones(table.num_rows, dtype=bool)
    keep[folded] = False
    keep[winners] = True
    return table if keep.all() else table.filter(pa.array(keep))
