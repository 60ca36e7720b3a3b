"""Merge engines: how the versions of one key fold into one row (``merge.engine``).

A keyed table meets a key's versions in a batch's own duplicates, copy-on-write
rewrites, merge-on-read reads, compaction, clustering and ``changes()``; all of them
fold through :mod:`lakeline.table.merge`, which hands the fold of live versions to the
table's :class:`MergeEngine` (docs/merge-engines.md, after Paimon's merge engines):

* ``deduplicate`` (the default): the version with the largest ordering value wins,
  the later one on a tie, the whole row replaced (``merge.fold``'s vectorised path);
* ``partial-update``: per column, the latest non-null value; a null means "no change";
* ``aggregation``: per column, its ``merge.<column>.aggregate`` function;
* ``first-row``: the first version (smallest ordering value, the earlier on a tie) stays.

Deletes are the caller's, the same for every engine: a delete removes the key and the
versions before it; the next upsert starts the key again.

The rows one write brings for a key fold first, in (ordering, arrival) order, into the
one version the write stores. The versions of the writes then fold in commit order,
comparing ordering values: a version whose ordering value is at least the row's (nulls
smallest) is *newer* and its non-null values win; one with a smaller value arrived late
and only fills columns still null. That is one left fold over whole rows in commit
order, so a compaction (which folds a prefix of the versions into one row, keeping the
largest ordering value) never changes the result, whenever it runs. (Folding every
version in ordering order would need, per column, the ordering value of the version that
set it, which a stored row does not keep: Paimon's sequence groups.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config.properties import AGGREGATES
from ..timeline.errors import AggregateOverflowError, ImmutablePropertyError, InvalidMergeEngineError
from ..timeline.field_ids import field_id, has_ids, name_without_ids
from ..timeline.table_config import TableConfig
from .checked_sums import checks, exact_sum, run_sums

DEDUPLICATE, PARTIAL_UPDATE, AGGREGATION, FIRST_ROW = "deduplicate", "partial-update", "aggregation", "first-row"
#: A column of an aggregation table without a setting (as Paimon does).
DEFAULT_AGGREGATE = "last_non_null"


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _ordered(t: pa.DataType) -> bool:
    return (
        _numeric(t)
        or pa.types.is_temporal(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_boolean(t)
    )


#: The column types each aggregate function takes.
ACCEPTS: dict[str, Callable[[pa.DataType], bool]] = {
    "sum": _numeric,
    "min": _ordered,
    "max": _ordered,
    "count": pa.types.is_integer,
    "last_non_null": lambda t: True,
    "first_non_null": lambda t: True,
    "bool_and": pa.types.is_boolean,
    "bool_or": pa.types.is_boolean,
}
assert set(ACCEPTS) == set(AGGREGATES)
#: The functions that add values up, so their fold may not fit the column's type.
_SUMS = ("sum", "count")
#: Arrow's hash aggregation of the commutative functions (count folds its 0/1 marks).
_HASH = {"sum": "sum", "min": "min", "max": "max", "count": "sum", "bool_and": "all", "bool_or": "any"}


@dataclass(frozen=True)
class MergeEngine:
    """A table's merge engine and, for ``aggregation``, each non-key column's function."""

    name: str = DEDUPLICATE
    aggregates: tuple[tuple[str, str], ...] = ()  # (column, function), every value column

    @classmethod
    def of(cls, config: TableConfig) -> MergeEngine:
        """The engine ``config``'s properties set, checked against its schema.

        Raises:
            InvalidMergeEngineError: an aggregate for a column the table lacks, for a key,
                partition or ordering column, of a type its function does not take, or
                set while the engine is not ``aggregation``; an engine on an append-only table.
        """
        props = config.props
        name, explicit = props.merge_engine, dict(props.merge_aggregates)
        if name != DEDUPLICATE and not config.has_key:
            raise InvalidMergeEngineError(f"merge.engine {name!r} needs a record key; this table is append-only")
        if explicit and name != AGGREGATION:
            raise InvalidMergeEngineError(
                f"merge.<column>.aggregate is set for {sorted(explicit)} but merge.engine is {name!r}, "
                "not 'aggregation'"
            )
        fixed = set(config.record_key) | set(config.partition_by) | {config.ordering_field}
        for column, fn in explicit.items():
            if column not in config.schema.names:
                raise InvalidMergeEngineError(f"merge.{column}.aggregate: the table has no column {column!r}")
            if column in fixed:
                raise InvalidMergeEngineError(
                    f"merge.{column}.aggregate: {column!r} is a key, partition or ordering column, "
                    "which every version shares or which orders them; it takes no aggregate"
                )
            typ = config.schema.field(column).type
            if not ACCEPTS[fn](typ):
                raise InvalidMergeEngineError(f"merge.{column}.aggregate: {fn} does not take column type {typ}")
        if name != AGGREGATION:
            return cls(name)
        values = [f.name for f in config.schema if f.name not in fixed or f.name == config.ordering_field]
        return cls(name, tuple((c, explicit.get(c, DEFAULT_AGGREGATE)) for c in values))

    @property
    def is_deduplicate(self) -> bool:
        return self.name == DEDUPLICATE

    @property
    def makes_values(self) -> bool:
        """Whether a folded row may hold a value no version held (a ``sum``, a ``count``):
        then a file's column statistics say nothing about a slice's merged rows."""
        return any(fn in ("sum", "count") for _, fn in self.aggregates)

    def keeps_base_rows(self, ordering: str | None) -> bool:
        """Whether a base row a newer version points at can still matter to the fold: for
        ``deduplicate`` only through a larger ordering value."""
        return not self.is_deduplicate or ordering is not None

    def check_unchanged(
        self, other: MergeEngine, mine: pa.Schema | None = None, theirs: pa.Schema | None = None
    ) -> None:
        """Raises ImmutablePropertyError when ``other`` folds differently (the engine, or an
        aggregate of a column both have).

        ``mine`` and ``theirs``: the schemas of this engine's and ``other``'s
        configurations; with them a column is the same column by field id, not by name
        (:func:`_identities`), so a rename that carried its ``merge.<column>.aggregate``
        along changes nothing, while a column dropped and added again under its old name
        is another column (its old values are no longer read)."""
        ids, their_ids = _identities(mine, theirs), _identities(theirs, mine)
        before = {ids.get(c, c): fn for c, fn in self.aggregates}
        after = {their_ids.get(c, c): fn for c, fn in other.aggregates}
        changed = [c for c in before if c in after and before[c] != after[c]]
        if self.name != other.name or changed:
            raise ImmutablePropertyError(
                f"merge.engine and merge.<column>.aggregate are fixed at creation ({self.name!r}, "
                f"{dict(self.aggregates) or 'no aggregates'}); the rows already folded cannot be folded again"
            )

    def prepare(self, rows: pa.Table) -> pa.Table:
        """Incoming rows as versions: a ``count`` column holds 1 for a value, 0 for a null
        (the count then folds as a sum, also over rows that already hold counts)."""
        for column, fn in self.aggregates:
            if fn == "count" and column in rows.column_names:
                col = rows.column(column)
                marks = pc.if_else(pc.is_valid(col), pa.scalar(1, col.type), pa.scalar(0, col.type))
                rows = rows.set_column(rows.schema.get_field_index(column), rows.schema.field(column), marks)
        return rows

    def fold(
        self, versions: pa.Table, key: tuple[str, ...], ordering: str | None, arrival: str, one_write: bool = False
    ) -> pa.Table:
        """One row per key of ``versions`` (upserts only, ``arrival`` numbering them in
        arrival order), without ``arrival``; for engines other than ``deduplicate``.

        ``one_write``: the versions are the rows of one write, which fold in (ordering,
        arrival) order into the one version the write stores of a key."""
        if versions.num_rows == 0:
            return versions.drop_columns([arrival])
        if self.name == FIRST_ROW:
            return _first_rows(versions, key, ordering, arrival)
        by_key = [(k, "ascending", "at_end") for k in key]
        if one_write and ordering is not None:
            by_key.append((ordering, "ascending", "at_start"))
        rows = versions.take(pc.sort_indices(versions, sort_keys=by_key + [(arrival, "ascending", "at_end")]))
        rows = rows.drop_columns([arrival])
        starts = _group_starts(rows, key)
        newer = _newer(rows, ordering, starts)
        functions = dict(self.aggregates)
        out = []
        for name in rows.column_names:
            col = rows.column(name)
            if name in key:
                out.append(col.take(pa.array(starts)))
            elif self.name == PARTIAL_UPDATE or name == ordering:
                out.append(_last_non_null(col, starts, newer))
            elif functions.get(name) in _SUMS and checks(col.type):
                out.append(_checked_sum(rows, key, name, functions[name], starts))
            else:
                out.append(_aggregate(col, functions.get(name, DEFAULT_AGGREGATE), starts, newer))
        return pa.Table.from_arrays(out, schema=rows.schema)

    def checked_columns(self) -> tuple[tuple[str, str], ...]:
        """The (column, function) pairs whose fold adds values up (``sum``, ``count``):
        the columns a write must prove its fold fits (:mod:`.checked_sums`)."""
        return tuple((c, fn) for c, fn in self.aggregates if fn in _SUMS)


#: ``merge.engine = deduplicate``, the default.
DEFAULT_ENGINE = MergeEngine()


def _identities(schema: pa.Schema | None, other: pa.Schema | None) -> dict[str, object]:
    """What each top-level column of ``schema`` is across it and ``other``: its field id
    when both have ids; on a table that got ids by this change (``other`` has none), the
    name ``other`` knows it by (``name_without_ids``; a column added since: its id). No
    schemas, or neither with ids: names (empty, every column stands for itself)."""
    if schema is None or other is None or not has_ids(schema):
        return {}
    if has_ids(other):
        return {f.name: field_id(f) for f in schema}
    return {f.name: name_without_ids(f) or ("added", field_id(f)) for f in schema}


def _first_rows(versions: pa.Table, key: tuple[str, ...], ordering: str | None, arrival: str) -> pa.Table:
    """Each key's first version: the smallest ordering value (nulls smallest), the earlier
    on a tie."""
    sort_keys = [(ordering, "ascending", "at_start")] if ordering else []
    ordered = versions.take(pc.sort_indices(versions, sort_keys=sort_keys + [(arrival, "ascending", "at_end")]))
    winners = ordered.group_by(list(key), use_threads=False).aggregate([(arrival, "first")])
    mask = pc.is_in(versions.column(arrival), value_set=winners.column(f"{arrival}_first").combine_chunks())
    return versions.filter(mask).drop_columns([arrival])


def _group_starts(rows: pa.Table, key: tuple[str, ...]) -> np.ndarray:
    """Where each key's run starts in ``rows`` (sorted by key)."""
    n = rows.num_rows
    same = np.ones(max(n - 1, 0), dtype=bool)
    for k in key:
        flat = rows.column(k).combine_chunks()
        same &= pc.fill_null(pc.equal(flat[1:], flat[:-1]), False).to_numpy(zero_copy_only=False)
    return np.flatnonzero(np.append(True, ~same))


def _group_ids(starts: np.ndarray, n: int) -> np.ndarray:
    """Each row's key number (0, 1, ...), from where the keys' runs start."""
    marks = np.zeros(n, dtype=np.int64)
    marks[starts] = 1
    return np.cumsum(marks) - 1


def _newer(rows: pa.Table, ordering: str | None, starts: np.ndarray) -> np.ndarray:
    """Per row: whether its ordering value is at least every earlier one of its key's
    (nulls smallest); every row without an ordering field."""
    n = rows.num_rows
    if ordering is None:
        return np.ones(n, dtype=bool)
    rank = pc.rank(rows.column(ordering), sort_keys=[("", "ascending", "at_start")], tiebreaker="dense")
    r = rank.to_numpy().astype(np.uint64)
    group = _group_ids(starts, n)
    # Offsetting each key's ranks above the previous key's lets one running maximum
    # serve every key (they are sorted by key).
    v = group.astype(np.uint64) * np.uint64(n + 1) + r
    before = np.concatenate([np.zeros(1, np.uint64), np.maximum.accumulate(v)[:-1]])
    return v >= before


def _last_non_null(col: pa.ChunkedArray, starts: np.ndarray, newer: np.ndarray) -> pa.Array:
    """Per key, the last non-null value of a newer version, or of the first version with
    a value (a late version fills a column no earlier version set)."""
    n = len(col)
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    index = np.arange(n)
    first = np.minimum.reduceat(np.where(valid, index, n), starts)
    eligible = newer.copy()
    eligible[first[first < n]] = True
    last = np.maximum.reduceat(np.where(eligible & valid, index, -1), starts)
    return col.take(pa.array(last, mask=last < 0))


def _aggregate(col: pa.ChunkedArray, fn: str, starts: np.ndarray, newer: np.ndarray) -> pa.Array:
    """Per key, ``fn`` over its versions' values (nulls skipped; all null: null)."""
    if fn == "last_non_null":
        return _last_non_null(col, starts, newer)
    n = len(col)
    if fn == "first_non_null":
        valid = col.is_valid().to_numpy(zero_copy_only=False)
        first = np.minimum.reduceat(np.where(valid, np.arange(n), n), starts)
        return col.take(pa.array(first, mask=first >= n))
    group = _group_ids(starts, n)
    t = pa.table({"g": pa.array(group, pa.int64()), "v": col})
    opts = pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)
    done = t.group_by("g", use_threads=False).aggregate([("v", _HASH[fn], opts)]).sort_by("g")
    return done.column(f"v_{_HASH[fn]}").cast(col.type)


def _checked_sum(rows: pa.Table, key: tuple[str, ...], name: str, fn: str, starts: np.ndarray) -> pa.Array:
    """Per key, the ``sum``/``count`` of column ``name`` over its versions, exactly.

    Raises:
        AggregateOverflowError: a key's total does not fit the column's type (a write
            checks its fold before it commits, so only versions written before that
            check reach a read this way); it names the column, the key and the total.
    """
    col = rows.column(name)
    sums, over = run_sums(col, starts)
    if over.size == 0:
        return sums
    run = int(over[0])
    start = int(starts[run])
    end = int(starts[run + 1]) if run + 1 < len(starts) else rows.num_rows
    ident = {k: rows.column(k)[start].as_py() for k in key}
    raise AggregateOverflowError(
        f"merge.{name}.aggregate={fn}: the {fn} over the versions of key {ident} is "
        f"{exact_sum(col, start, end)}, which column {name!r} of type {col.type} cannot hold "
        f"({len(over)} key(s) overflow); widen the column (update_schema().update_column) "
        "or delete the key to start it over"
    )
