"""The read path: snapshots, pruning, merge-on-read, and ``Scan``.

A scan resolves its snapshot (now, an instant id, or a wall-clock time), asks the
file-system view for the latest slice of every live file group, prunes slices whose
partition cannot match the filter, and reads: slices without logs go through one
``pyarrow.dataset`` scan (filter and projection pushed into Parquet, but for a test of
a float column: :mod:`.pushdown`); slices with logs
are merged per group through the engine (base + logs folded by key), then filtered.

Pruning reads the filter once as lakeline's expression tree
(:func:`~lakeline.indexes.expressions.from_arrow`, never its printed text) and asks it
what each slice's rows satisfy: their partition values (:mod:`.partition_pruning`),
the range of record keys its files hold (:mod:`.key_pruning`), then the ready indexes
(:mod:`lakeline.indexes.pruning`); each stage also lets Arrow's own simplification
prove a slice out under the same facts as a guarantee. The key-range stage is counted
with the stats stage in ``explain()``. Pruning can only drop a slice when no row of it
can match. Inside a merged slice the same tree prunes the base's row groups
(:mod:`.row_groups`); ``read_stats`` counts what a read decoded of merged bases.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ...indexes.expressions import columns as tree_columns
from ...indexes.pruning import filter_tree, has_unknown
from ...indexes.pruning import prune as prune_with_indexes
from ...timeline.errors import InvalidFilterError, SnapshotExpiredError
from ...timeline.field_ids import reads_by_name, with_valid_nulls
from ...timeline.instant import instant_id_of
from ...timeline.retention import check_retained
from ...timeline.storage.data_reads import (
    DAMAGED,
    PARQUET_FORMAT,
    check_sizes,
    find_damaged,
    missing_error,
    open_parquet,
    reading,
)
from ...timeline.timeline import Timeline
from ...timeline.view.file_group import FileSlice
from ..context import TableContext
from ..files import FileRead, read_snapshot_file, with_columns_of
from ..merge_engine import MergeEngine
from ..write.records import check_columns, check_filter
from .key_pruning import prune_by_record_index, prune_key_ranges
from .partition_pruning import prune_slices
from .pushdown import filtered_scanner, pushdown
from .row_groups import narrowed_to_rows
from .slice_read import SliceRead, SliceRows, read_merged, read_slice

__all__ = ["ReadStats", "Scan", "SliceRead", "read_slice", "resolve_snapshot", "snapshot_of"]


@dataclass
class ReadStats:
    """What the last read of a scan decoded of its merged slices' base files (a slice
    without logs is read by Arrow's dataset scan, which prunes row groups itself)."""

    merged_slices: int = 0
    base_row_groups: int = 0  # of the merged slices' bases
    base_row_groups_read: int = 0
    base_rows_read: int = 0
    logs: int = 0  # of the merged slices
    logs_read: int = 0

    def add(self, s: FileSlice, part: SliceRows) -> None:
        self.merged_slices += 1
        self.base_row_groups += part.row_groups
        self.base_row_groups_read += part.row_groups_read
        self.base_rows_read += part.base_rows_read
        self.logs += len(s.logs)
        self.logs_read += part.logs_read


def resolve_snapshot(tl: Timeline, as_of: int | datetime | None) -> Timeline:
    """The timeline of the snapshot to read, from the table's current one.

    Raises:
        InstantNotFoundError: ``as_of`` names no completed instant / nothing had completed.
    """
    if as_of is None:
        return tl
    if isinstance(as_of, datetime):
        return tl.as_of_time(as_of)
    return tl.as_of_instant(instant_id_of(as_of))  # '3' as savepoint('3') takes it; True is no id


def snapshot_of(current: Timeline, as_of: int | datetime | None) -> Timeline:
    """The snapshot to read as of ``as_of`` (None: ``current``), refused when it is
    outside retention, before anything is read."""
    snapshot = resolve_snapshot(current, as_of)
    if as_of is not None:
        check_retained(current, snapshot.last_seq, as_of)
    return snapshot


class Scan:
    """A planned read of one snapshot: the context's. Build with ``Table.scan``.

    ``as_of`` is what the caller asked for (an instant id or a datetime), for the
    retention check: the files of a time-travel snapshot must all still be there.
    """

    def __init__(
        self,
        ctx: TableContext,
        filter: pc.Expression | None = None,
        columns: list[str] | None = None,
        as_of: int | datetime | None = None,
    ) -> None:
        cfg = ctx.config
        check_filter(cfg.schema, filter)
        self.columns = check_columns(cfg, columns)
        self.filter = filter
        self.ctx = ctx
        self.snapshot = ctx.snapshot
        every = ctx.view.latest_slices()
        self._total = sum(len(s.files) for s in every)
        self.tree = filter_tree(filter, cfg.schema)  # the filter as data, read once
        # What the Parquet scan of bases without logs is given: no test of a float column,
        # whose row-group statistics leave NaN out (the rest runs on the rows read).
        self._push = pushdown(filter, cfg.schema, self.tree)
        self.slices = prune_slices(ctx, every, filter, self.tree)
        self._after_partition = sum(len(s.files) for s in self.slices)
        self.slices = prune_key_ranges(ctx, self.slices, filter, self.tree)
        pruned = prune_with_indexes(
            ctx.storage,
            self.snapshot,
            cfg.schema,
            cfg.record_key,
            self.slices,
            filter,
            self.tree,
            frozenset(cfg.moved_names),
        )
        kept = {(s.partition, s.file_group) for s in pruned.slices}
        # A sum or count folds into values no file's statistics bound: slices with logs stay.
        adds = MergeEngine.of(cfg).makes_values
        back = sum(len(s.files) for s in self.slices if adds and s.logs and (s.partition, s.file_group) not in kept)
        cap = sum(len(s.files) for s in self.slices)
        self.slices = [s for s in self.slices if (s.partition, s.file_group) in kept or (adds and s.logs)]
        self._after_stats = min(cap, pruned.files_after_stats + back)
        self._after_bloom = min(cap, pruned.files_after_bloom + back)
        held = prune_by_record_index(ctx, self.slices, self.tree)
        self.slices, self._base_rows = held.slices, held.base_rows
        self._after_record = sum(len(s.files) for s in self.slices)
        self.read_stats = ReadStats()  # of the last read (to_arrow, to_reader)
        if as_of is not None:
            gone = ctx.storage.missing(ctx.storage.path(f.path) for s in self.slices for f in s.files)
            if gone:
                raise SnapshotExpiredError(
                    f"snapshot as of {as_of} is outside retention: {len(gone)} of its files were cleaned, "
                    f"e.g. {gone[0]}"
                )

    def files(self) -> list[str]:
        """Absolute paths of every file this scan reads."""
        return [self.ctx.storage.path(f.path) for s in self.slices for f in s.files]

    def explain(self) -> dict[str, object]:
        """File counts after each pruning stage, and the snapshot read."""
        return {
            "snapshot_seq": self.snapshot.last_seq,
            "files_total": self._total,
            "files_after_partition_pruning": self._after_partition,
            "files_after_stats_pruning": self._after_stats,
            "files_after_bloom_pruning": self._after_bloom,
            "files_after_record_index_pruning": self._after_record,
            "file_groups": len(self.slices),
        }

    @property
    def schema(self) -> pa.Schema:
        """The schema of the rows this scan returns (the projection's columns)."""
        schema = self.ctx.config.schema
        return schema if self.columns is None else pa.schema([schema.field(c) for c in self.columns])

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """The rows as record batches, streamed (see :meth:`to_reader`)."""
        yield from self.to_reader()

    def to_reader(self) -> pa.RecordBatchReader:
        """The rows as a stream with bounded memory: slices without logs are read batch by
        batch from their Parquet files, merge-on-read slices are merged one slice at a
        time (never the whole table at once).

        Raises (while streaming):
            SnapshotExpiredError: a file of the snapshot was cleaned meanwhile (or is
                missing: the message says which).
            CorruptFileError: a data file is damaged or unreadable (named); a
                ``CorruptLogError`` when a log is not a log or points past its base.
        """
        return pa.RecordBatchReader.from_batches(self.schema, self._stream())

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The Arrow C stream interface: DuckDB, Polars and pyarrow read a scan directly."""
        return self.to_reader().__arrow_c_stream__(requested_schema)

    def _split(self, plain: list[FileSlice]) -> tuple[list[FileSlice], list[FileSlice]]:
        """Slices without logs: those one Parquet dataset reads right by name, and those
        whose base a rename, drop or widening since makes read by field id (a footer
        read each, only on a table that had such a change: ``moved_names``)."""
        cfg, storage = self.ctx.config, self.ctx.storage
        if not cfg.moved_names:
            return plain, []
        by_name: list[FileSlice] = []
        by_id: list[FileSlice] = []
        for s in plain:
            assert s.base is not None
            with reading(s.base.path):
                file_schema = open_parquet(storage, s.base.path, s.base.bytes).schema_arrow
            (by_name if reads_by_name(file_schema, cfg.schema) else by_id).append(s)
        return by_name, by_id

    def _by_id(self, slices: list[FileSlice]) -> Iterator[pa.Table]:
        """The matching rows of bases read by field id, each in the table's schema."""
        schema = self.ctx.config.schema
        for s in slices:
            assert s.base is not None
            task = FileRead(self.ctx.storage, s.base.path, tuple(schema.names), schema=schema, size=s.base.bytes)
            rows = self._filtered(with_columns_of(read_snapshot_file(task), schema))
            yield rows if self.columns is None else rows.select(self.columns)

    def _plain(self, slices: list[FileSlice]) -> ds.Dataset:
        """The base files of slices without logs, as one Parquet dataset (every page's
        CRC verified; each file's size compared with its commit's first,
        :func:`~lakeline.timeline.storage.data_reads.check_sizes`)."""
        storage = self.ctx.storage
        bases = [s.base for s in slices if s.base is not None]
        check_sizes(storage, [(f.path, f.bytes) for f in bases])
        dataset = ds.dataset(
            [storage.path(f.path) for f in bases],
            schema=self.ctx.config.schema,
            format=PARQUET_FORMAT,
            filesystem=storage.fs,
        )
        return narrowed_to_rows(dataset, {storage.path(p): rows for p, rows in self._base_rows.items()})

    def _stream(self) -> Iterator[pa.RecordBatch]:
        out = self.schema
        plain, by_id = self._split([s for s in self.slices if not s.logs and s.base is not None])
        merged = [s for s in self.slices if s.logs]
        self.read_stats = ReadStats()
        try:
            if plain:
                with self._reading(plain):
                    for batch in filtered_scanner(self._plain(plain), self._push, self.columns).to_batches():
                        yield from pa.Table.from_batches([batch]).cast(out).to_batches()
            for rows in self._by_id(by_id):
                yield from rows.cast(out).to_batches()
            merge_schema = self._merge_schema()
            wanted = self._wanted(merge_schema)
            for s in merged:
                part = read_merged(self._slice_read(s, merge_schema, wanted, True))
                self.read_stats.add(s, part)
                yield from self._filtered(part.rows).select(out.names).cast(out).to_batches()
        except (FileNotFoundError, SnapshotExpiredError) as e:
            raise self._missing(e) from e

    @contextmanager
    def _reading(self, plain: list[FileSlice]) -> Iterator[None]:
        """Read the slices without logs (one dataset) in this block: a damaged or
        unreadable base raises ``CorruptFileError`` naming it."""
        try:
            yield
        except FileNotFoundError:
            raise
        except DAMAGED as e:
            bases = [s.base for s in plain if s.base is not None]
            damaged = find_damaged(self.ctx.storage, [f.path for f in bases], e, {f.path: f.bytes for f in bases})
            if damaged is not None:
                raise damaged from e
            if isinstance(e, OSError):
                raise  # every file reads: the storage's own error
            raise self._unevaluable(e) from e

    def _filtered(self, rows: pa.Table) -> pa.Table:
        """A merged slice's rows (in memory) that match the filter."""
        if self.filter is None:
            return rows
        try:
            return ds.dataset(rows).to_table(filter=self.filter)
        except pa.ArrowInvalid as e:  # no file is read here: the filter's own error
            raise self._unevaluable(e) from e

    def _unevaluable(self, error: Exception) -> InvalidFilterError:
        return InvalidFilterError(f"the filter {self.filter} cannot be evaluated on the rows: {error}")

    def _missing(self, error: FileNotFoundError | SnapshotExpiredError) -> SnapshotExpiredError:
        """The typed error for a file of this scan found missing: which one, and whether
        a clean removed it (the snapshot left retention) or nothing lakeline did."""
        if isinstance(error, SnapshotExpiredError) and not isinstance(error.__cause__, FileNotFoundError):
            return error  # not a file found missing by the read
        paths = [f.path for s in self.slices for f in s.files]
        return missing_error(self.ctx.storage, self.ctx.log, self.snapshot.last_seq, paths, error)

    def _filter_columns(self) -> frozenset[str]:
        """Columns that hold every one the filter references: the tree's, checked by
        binding the filter to an empty table of them (a part the tree folded away, e.g.
        ``x or true``, still names its columns); else every column."""
        cfg = self.ctx.config
        every = frozenset(cfg.schema.names)
        if self.filter is None or self.tree is None:
            return frozenset()
        if has_unknown(self.tree):
            return every
        named = tree_columns(self.tree)
        try:
            pa.schema([f for f in cfg.schema if f.name in named]).empty_table().filter(self.filter)
        except (pa.ArrowException, KeyError, TypeError, ValueError):
            return every
        return named

    def _merge_schema(self) -> pa.Schema:
        """The columns a merged slice is read with: those asked for, the record key and
        the ordering field (the merge needs them), and the columns the filter references
        (:meth:`_filter_columns`), so a read of three columns does not read the other
        twenty of a file with logs."""
        cfg = self.ctx.config
        if self.columns is None:
            return cfg.schema
        needed = {
            *self.columns,
            *cfg.record_key,
            *([cfg.ordering_field] if cfg.ordering_field else []),
            *self._filter_columns(),
        }
        return pa.schema([f for f in cfg.schema if f.name in needed])

    def _wanted(self, merge_schema: pa.Schema) -> tuple[str, ...] | None:
        """The columns of ``merge_schema`` a merged slice must return: those asked for
        and those the filter references (None: every column)."""
        if self.columns is None:
            return None
        named = self._filter_columns()
        return tuple(f.name for f in merge_schema if f.name in self.columns or f.name in named)

    def to_arrow(self) -> pa.Table:
        """The snapshot's rows, filtered and projected, in no guaranteed order (a
        merge-on-read slice's rows leave its base's order where the logs dropped rows).

        Raises:
            SnapshotExpiredError: a file of the snapshot was cleaned meanwhile (it left
                retention while it was read), or is missing: the message says which.
            CorruptFileError: as for :meth:`to_reader`.
        """
        try:
            return self._read()
        except (FileNotFoundError, SnapshotExpiredError) as e:
            raise self._missing(e) from e

    def _slice_read(
        self, s: FileSlice, merge_schema: pa.Schema, wanted: tuple[str, ...] | None, threads: bool
    ) -> SliceRead:
        """The read of a merged slice: its rows in any order, the base's row groups and
        the log rows that cannot match the filter left out (it is applied after)."""
        cfg = self.ctx.config
        return SliceRead(
            self.ctx.storage,
            s,
            merge_schema,
            cfg.record_key,
            cfg.ordering_field,
            wanted,
            threads,
            keep_order=False,
            filter=self.filter,
            tree=self.tree,
            engine=MergeEngine.of(cfg),
            base_rows=self._base_rows.get(s.base.path) if s.base is not None else None,
        )

    def _read(self) -> pa.Table:
        cfg = self.ctx.config
        schema = cfg.schema
        out_schema = schema if self.columns is None else pa.schema([schema.field(c) for c in self.columns])
        plain, by_id = self._split([s for s in self.slices if not s.logs and s.base is not None])
        merged = [s for s in self.slices if s.logs]
        parts: list[pa.Table] = []
        self.read_stats = ReadStats()
        if plain:
            with self._reading(plain):
                parts.append(filtered_scanner(self._plain(plain), self._push, self.columns).to_table())
        parts.extend(self._by_id(by_id))
        if merged:
            merge_schema = self._merge_schema()
            wanted = self._wanted(merge_schema)
            # As many slices as the engine has workers: each worker decodes its own.
            workers = getattr(self.ctx.engine, "parallelism", None)
            threads = workers is None or len(merged) < workers
            tasks = [self._slice_read(s, merge_schema, wanted, threads) for s in merged]
            for s, part in zip(merged, self.ctx.engine.map(read_merged, tasks), strict=True):
                self.read_stats.add(s, part)
                parts.append(self._filtered(part.rows).select(out_schema.names))
        if not parts:
            return out_schema.empty_table()
        return pa.concat_tables([with_valid_nulls(p, out_schema).cast(out_schema) for p in parts])
