"""Row-group pruning inside a merged slice: a merge-on-read read decodes only the base's
row groups whose Parquet statistics may hold a row matching the filter.

A filtered read of a slice with logs used to decode the whole base before merging (a
1,000-key range read of a 1.25M-row base decoded ten 128Ki-row groups for one). The
filter's tree (:mod:`lakeline.indexes.expressions`) is asked of each row group's
min/max and null counts, as files are pruned on their column stats
(:func:`~lakeline.indexes.expressions.might_match`); a row group it rules out holds no
row that can match, so leaving it out changes no row of the result once the filter
has run on the merged rows (it always does: pruning only saves work).

Positions stay those of the whole base file: the logs' ``_base_pos`` and position
deletes count rows from the file's start, and a row group's first row is the sum of
the earlier groups' rows. The logs' positions are mapped onto the rows decoded; a log
row pointing into a group left out keeps its version but loses its pointer, since the
base row it replaces is not there to drop. The base row can only matter when it would
win the fold (its ordering value larger) over a log version that matches the filter:
for the keys of such log rows the base rows are read from their groups too, so the
fold sees every version it would have seen (:func:`pruned_base`). Of those rows only the
columns the filter names, the key, the ordering field and the columns that cannot be
null are decoded: such a row can never pass the filter, so when it wins the fold it is dropped
by the filter whatever its other columns hold.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from ...indexes.column_stats import has_bounds
from ...indexes.expressions import ColumnBounds, Expr, columns, might_match
from ...indexes.hashing import row_hashes
from ...indexes.pruning import has_unknown
from ...timeline.errors import CorruptLogError
from ...timeline.field_ids import field_id
from ...timeline.storage.data_reads import check_log, open_parquet
from ...timeline.storage.filesystem import Storage
from ..files import FileRead, file_columns, read_snapshot_file, snapshot_file_reading, with_columns_of
from ..write.records import BASE_POS, OP, OP_DELETE, SEQ


@dataclass(frozen=True)
class Layout:
    """A base file's row groups: ``starts[g]`` is group ``g``'s first row number
    (``starts[-1]``: the file's rows), ``keep[g]`` whether it may hold a match."""

    starts: np.ndarray
    keep: np.ndarray

    @property
    def rows(self) -> int:
        return int(self.starts[-1])

    @property
    def kept(self) -> tuple[int, ...]:
        return tuple(int(g) for g in np.flatnonzero(self.keep))

    def sizes(self, groups: Sequence[int] | np.ndarray) -> np.ndarray:
        ids = np.asarray(groups, dtype=np.int64)
        return (self.starts[ids + 1] - self.starts[ids]) if len(ids) else np.zeros(0, np.int64)


def _bounded(typ: pa.DataType) -> bool:
    """Types whose Parquet min/max Python orders as Arrow does (those the column stats
    index bounds). Not floats: a NaN is in no statistic, yet ``x != 1`` holds for it in
    a group whose min and max are 1."""
    return has_bounds(typ) and not pa.types.is_floating(typ)


def _leaves(md: pq.FileMetaData, file_schema: pa.Schema, schema: pa.Schema, named: set[str]) -> dict[str, int]:
    """The Parquet column index of each top-level column the filter names whose type
    the file and the table agree on, and whose field id when the file has one (a path
    two leaves share is left out)."""
    paths = [md.schema.column(i).path for i in range(md.num_columns)]
    out: dict[str, int] = {}
    for i, path in enumerate(paths):
        if path not in named or path not in schema.names or path not in file_schema.names or paths.count(path) > 1:
            continue
        typ, theirs = schema.field(path).type, file_schema.field(path)
        if field_id(theirs) is not None and field_id(theirs) != field_id(schema.field(path)):
            continue  # the file's column of that name is another column (dropped, renamed since)
        if _bounded(typ) and theirs.type == typ:
            out[path] = i
    return out


def _bounds(chunk: pq.ColumnChunkMetaData, rows: int) -> ColumnBounds:
    st = chunk.statistics
    if st is None:
        return ColumnBounds(None, None, None, rows)
    nulls = st.null_count if st.has_null_count else None
    if not st.has_min_max:
        return ColumnBounds(None, None, nulls, rows)
    return ColumnBounds(st.min, st.max, nulls, rows)


def groups_holding(starts: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each row group of a file (``starts``: each group's first row, then the file's
    rows), whether it holds one of ``rows``; every group when a row lies outside the file
    (an index naming rows the file does not have is not trusted to narrow)."""
    keep = np.zeros(len(starts) - 1, dtype=bool)
    if len(rows) and (rows.min() < 0 or rows.max() >= starts[-1]):
        return ~keep
    keep[np.searchsorted(starts, rows, side="right") - 1] = True
    return keep


def narrowed_to_rows(dataset: ds.FileSystemDataset, rows_of: Mapping[str, np.ndarray]) -> ds.FileSystemDataset:
    """``dataset`` with each file ``rows_of`` names (by the dataset's path) read only in
    the row groups holding those rows: a record index's point lookup decodes one 128Ki-row
    group of a 500k-row base, not four (:func:`.key_pruning.prune_by_record_index`)."""
    if not rows_of:
        return dataset
    fragments = []
    for fragment in dataset.get_fragments():
        rows = rows_of.get(fragment.path)
        if rows is not None:
            fragment.ensure_complete_metadata()
            sizes = [rg.num_rows for rg in fragment.row_groups]
            starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
            fragment = fragment.subset(row_group_ids=np.flatnonzero(groups_holding(starts, rows)).tolist())
        fragments.append(fragment)
    return ds.FileSystemDataset(fragments, dataset.schema, dataset.format, dataset.filesystem)


def row_group_keep(md: pq.FileMetaData, file_schema: pa.Schema, schema: pa.Schema, tree: Expr) -> np.ndarray:
    """For each row group: False only when its statistics prove no row can match."""
    keep = np.ones(md.num_row_groups, dtype=bool)
    named = set(schema.names) if has_unknown(tree) else set(columns(tree))
    leaves = _leaves(md, file_schema, schema, named)
    if not leaves:
        return keep  # no statistic to ask: a filter on floats, say
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        keep[g] = might_match(tree, {name: _bounds(rg.column(i), rg.num_rows) for name, i in leaves.items()})
    return keep


def layout(storage: Storage, rel_path: str, schema: pa.Schema, tree: Expr | None, size: int | None = None) -> Layout:
    """The row groups of a base file and which of them may hold a row matching
    ``tree`` (all of them without one). ``size``: the one its commit recorded (None: not
    known), compared on open.

    Raises:
        SnapshotExpiredError: the file is gone (as :func:`read_snapshot_file`).
        CorruptFileError: its footer is damaged, or it is not the size recorded.
    """
    with snapshot_file_reading(rel_path):
        parquet = open_parquet(storage, rel_path, size)
        md, file_schema = parquet.metadata, parquet.schema_arrow
    sizes = [md.row_group(g).num_rows for g in range(md.num_row_groups)]
    starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
    if tree is None:
        return Layout(starts, np.ones(len(sizes), dtype=bool))
    return Layout(starts, row_group_keep(md, file_schema, schema, tree))


def read_groups(
    storage: Storage,
    rel_path: str,
    names: Sequence[str],
    schema: pa.Schema,
    groups: Sequence[int],
    threads: bool,
    size: int | None = None,
) -> pa.Table:
    """The ``names`` columns of the given row groups, in order, as ``schema`` types them
    (``size``: the file's recorded size, as for :class:`FileRead`)."""
    out = pa.schema([schema.field(n) for n in names])
    if not groups:
        return out.empty_table()
    rows = read_snapshot_file(FileRead(storage, rel_path, tuple(names), threads, tuple(groups), schema=out, size=size))
    return with_columns_of(rows, out)


#: Rows a batch of :func:`read_matching` decodes: one default row group of a base.
MATCHING_BATCH_ROWS = 131_072
#: A row's position in its file, while :func:`read_matching` filters (in memory only).
_ROW = "__lakeline_row"


def read_matching(
    storage: Storage,
    rel_path: str,
    names: Sequence[str],
    schema: pa.Schema,
    layout: Layout,
    threads: bool,
    filter: pc.Expression,
    size: int | None = None,
) -> tuple[pa.Table, np.ndarray]:
    """The rows ``filter`` keeps of the ``names`` columns of the row groups ``layout``
    keeps, and their positions in the file (ascending); decoded a batch at a time and
    filtered as they come, so only the rows kept are held.

    For a key range over random keys, where no row group can be left out: decoded
    whole, the 2.5M rows of a base took 260-480 ms in a fresh process against 160-175
    ms a batch at a time (first touches of the whole table's memory are what differ;
    they showed as up to 2 s of system time), and every row then moved again through
    the merge and the filter. The batches go through one filtering plan (a plan per
    batch cost a third of the read).

    Raises:
        SnapshotExpiredError: the file is gone.
        CorruptFileError: the file is damaged or unreadable.
    """
    out = pa.schema([schema.field(n) for n in names])
    numbered = out.append(pa.field(_ROW, pa.int64()))
    try:
        numbered.empty_table().filter(filter)
    except pa.ArrowException:
        # Not evaluable on these columns: every row (the caller filters, and says why).
        filter = pc.scalar(True)
    groups = list(layout.kept)
    with snapshot_file_reading(rel_path):
        parquet = open_parquet(storage, rel_path, size)
        check_log(rel_path, parquet.schema_arrow.names, (OP, SEQ))
        columns = file_columns(parquet.schema_arrow, tuple(names), out)
        batches = parquet.iter_batches(MATCHING_BATCH_ROWS, groups, columns, use_threads=threads) if groups else ()

        def rows() -> Iterator[pa.RecordBatch]:
            at = 0  # row number among the kept groups' rows
            for batch in batches:
                conformed = with_columns_of(pa.Table.from_batches([batch]), out)
                yield from conformed.append_column(
                    _ROW, pa.array(np.arange(at, at + batch.num_rows, dtype=np.int64))
                ).to_batches()
                at += batch.num_rows

        kept = ds.Scanner.from_batches(rows(), schema=numbered, filter=filter, use_threads=False).to_table()
    positions = kept.column(_ROW).to_numpy()
    if len(positions):  # row numbers among the kept groups' rows -> row numbers in the file
        sizes = layout.sizes(groups)
        ends = np.cumsum(sizes)
        slot = np.searchsorted(ends, positions, side="right")
        positions = positions - (ends - sizes)[slot] + layout.starts[np.asarray(groups)[slot]]
    return kept.drop_columns([_ROW]), positions


@dataclass(frozen=True)
class PrunedBase:
    """What a merge by position reads of a base whose row groups were pruned: the rows
    decoded (the kept groups' rows, then the extra rows), the changes with their
    positions into those rows, and how many rows of how many groups were decoded."""

    rows: pa.Table
    changes: pa.Table
    groups_read: int
    rows_read: int


def _matching_keys(changes: pa.Table, key: tuple[str, ...], filter: pc.Expression) -> np.ndarray | None:
    """The key hashes of the change rows the filter keeps (None: it cannot be evaluated
    on them, so every key counts)."""
    numbered = changes.append_column("__lakeline_row", pa.array(np.arange(changes.num_rows, dtype=np.int64)))
    try:
        rows = numbered.filter(filter).column("__lakeline_row").to_numpy()
    except (pa.ArrowException, KeyError, TypeError, ValueError):
        return None
    return row_hashes([changes.column(k).take(pa.array(rows)) for k in key])


def _extra_positions(
    changes: pa.Table, positions: np.ndarray, outside: np.ndarray, key: tuple[str, ...], filter: pc.Expression | None
) -> np.ndarray:
    """The positions (ascending, unique) in left-out groups whose base row may win the
    fold for a key with a log version matching the filter: those rows are read too."""
    if filter is None or not outside.any():
        return np.unique(positions[outside])
    matching = _matching_keys(changes, key, filter)
    if matching is None:
        return np.unique(positions[outside])
    pointing = np.flatnonzero(changes.column(BASE_POS).is_valid().to_numpy(zero_copy_only=False))
    hashes = row_hashes([changes.column(k).take(pa.array(pointing)) for k in key])
    # A hash collision only reads a base row the fold then decides on by its real key.
    return np.unique(positions[outside & np.isin(hashes, matching)])


def pruned_base(
    storage: Storage,
    rel_path: str,
    layout: Layout,
    names: Sequence[str],
    schema: pa.Schema,
    changes: pa.Table,
    key: tuple[str, ...],
    ordering: str | None,
    filter: pc.Expression | None,
    filter_columns: frozenset[str],
    threads: bool,
    size: int | None = None,
) -> PrunedBase:
    """The base rows a merge by position needs under ``layout``'s pruning, and
    ``changes`` (with ``_op`` and ``_base_pos``, positions into the whole file) pointing
    into them. The rows of left-out groups among them hold only ``filter_columns``, the
    key, the ordering field and the columns that cannot be null (the others are null):
    the caller must filter the merged rows.

    Raises:
        CorruptLogError: a change points past the base's rows.
    """
    valid = changes.column(BASE_POS).is_valid().to_numpy(zero_copy_only=False)
    positions = changes.column(BASE_POS).drop_null().to_numpy().astype(np.int64, copy=False)
    if len(positions) and (positions.min() < 0 or positions.max() >= layout.rows):
        bad = int(positions.max() if positions.max() >= layout.rows else positions.min())
        raise CorruptLogError(f"a log points at base row {bad} (or below 0) of a base file of {layout.rows} rows")
    group = np.searchsorted(layout.starts, positions, side="right") - 1
    inside = layout.keep[group]
    kept = layout.kept
    upserts = changes.num_rows > 0 and not bool(pc.all(pc.equal(changes.column(OP), OP_DELETE)).as_py())
    # Without an ordering field a change always wins over the base row it points at, and
    # deletes only remove rows: then no row of a left-out group is ever needed.
    needs_rows = upserts and ordering is not None
    outside = ~inside if needs_rows else np.zeros(len(positions), dtype=bool)
    extra = _extra_positions(changes, positions, outside, key, filter) if needs_rows else np.zeros(0, np.int64)
    rows = read_groups(storage, rel_path, names, schema, kept, threads, size)
    extra_groups = np.unique(np.searchsorted(layout.starts, extra, side="right") - 1)
    if len(extra):
        kept_too = {*filter_columns, *key, ordering}  # the key: the fold groups by it
        needed = [n for n in names if n in kept_too or not schema.field(n).nullable]
        decoded = read_groups(storage, rel_path, needed, schema, tuple(int(g) for g in extra_groups), threads, size)
        at = pa.array(_local(extra, layout, extra_groups))
        rows = pa.concat_tables([rows, with_columns_of(decoded.take(at), rows.schema)])
    local = np.full(len(positions), -1, dtype=np.int64)
    local[inside] = _local(positions[inside], layout, np.asarray(kept, dtype=np.int64))
    n_kept = int(layout.sizes(kept).sum())
    in_extra = ~inside & np.isin(positions, extra)
    local[in_extra] = n_kept + np.searchsorted(extra, positions[in_extra])
    mapped = np.full(changes.num_rows, 0, dtype=np.int64)
    mapped[valid] = local
    present = np.zeros(changes.num_rows, dtype=bool)
    present[valid] = local >= 0
    column = pa.array(mapped, type=pa.int64(), mask=~present)
    changes = changes.set_column(changes.schema.get_field_index(BASE_POS), BASE_POS, column)
    groups = len(kept) + len(extra_groups)
    return PrunedBase(rows, changes, groups, n_kept + int(layout.sizes(extra_groups).sum()))


def _local(positions: np.ndarray, layout: Layout, groups: np.ndarray) -> np.ndarray:
    """Each position (of a row in one of ``groups``) as a row number of those groups'
    rows read one after the other."""
    groups = np.asarray(groups, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(layout.sizes(groups))]).astype(np.int64)
    group = np.searchsorted(layout.starts, positions, side="right") - 1
    slot = np.searchsorted(groups, group)
    return positions - layout.starts[group] + offsets[slot]
