"""A snapshot as a ``pyarrow.dataset.Dataset``: lakeline tables for DuckDB, Polars and
any Arrow-dataset consumer, with their pruning intact.

When every live slice of a snapshot is a base file alone (copy-on-write and append-only
tables, merge-on-read tables after compaction), the snapshot *is* a set of Parquet files,
and a ``FileSystemDataset`` over them is an exact view of it. Each file becomes a Parquet
fragment whose partition expression is what lakeline knows about all its rows without
opening it: its Hive partition values and, for a single-column record key, the range of
keys the commit metadata records. A consumer's filter therefore drops whole files on
those guarantees (no I/O), then row groups on the Parquet statistics of the files it
opens: DuckDB and Polars push their filters and projections into the dataset scan.

A slice with log files is refused with :class:`UnmergedLogsError`: its rows are the
base merged with the logs by key, which a plain Parquet scan cannot express. Compact
first, or read through :meth:`Table.scan` / :meth:`Table.to_polars`, which merge. So is
a base file that a rename, drop or widening since makes read by field id
(:class:`UnsupportedOperationError`): a dataset maps each file's columns to its schema by
name, and neither a fragment nor a union of datasets can rename a file's columns (a
union's children must have its schema; pyarrow's Parquet scan options have no field-id
matching). :mod:`.duckdb_relation` reads such a snapshot in DuckDB instead.
"""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ...timeline.errors import UnmergedLogsError, UnsupportedOperationError
from ...timeline.field_ids import reads_by_name
from ...timeline.storage.data_reads import PARQUET_FORMAT, check_sizes, open_parquet
from ...timeline.view.file_group import FileSlice
from ..context import TableContext
from .partition_pruning import partition_guarantee
from .scan import Scan


def key_range_guarantee(ctx: TableContext, s: FileSlice) -> pc.Expression | None:
    """``key BETWEEN lo AND hi`` for the slice's recorded key range; None when unknown
    (no single-column key, no range recorded, or bounds that do not cast)."""
    key = ctx.config.record_key
    bounds = s.key_bounds()
    if len(key) != 1 or bounds is None:
        return None
    typ = ctx.config.schema.field(key[0]).type
    try:
        lo, hi = (pa.scalar(b).cast(typ) for b in bounds)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
        return None
    return (pc.field(key[0]) >= lo) & (pc.field(key[0]) <= hi)


def fragment_guarantee(ctx: TableContext, s: FileSlice) -> pc.Expression:
    """What every row of the slice's base file satisfies: partition values, key range."""
    expr = partition_guarantee(ctx.config.schema, s.partition)
    keys = key_range_guarantee(ctx, s)
    return expr if keys is None else expr & keys


def live_bases(ctx: TableContext, as_of: int | datetime | None = None) -> list[FileSlice]:
    """The live slices of the context's snapshot that have a base, none with logs.

    ``as_of`` is what the caller asked for (for the retention check, as in ``Scan``).

    Raises:
        UnmergedLogsError: a live slice has log files (nothing is read).
        SnapshotExpiredError: a time-travel snapshot's files were cleaned.
    """
    slices = Scan(ctx, as_of=as_of).slices  # the snapshot's live slices, retention checked
    with_logs = [s for s in slices if s.logs]
    if with_logs:
        n_logs = sum(len(s.logs) for s in with_logs)
        raise UnmergedLogsError(
            f"{len(with_logs)} file slice(s) of snapshot {ctx.snapshot.last_seq} have {n_logs} unmerged log "
            f"file(s) (e.g. in partition {with_logs[0].partition or '<root>'!r}, file group "
            f"{with_logs[0].file_group}): a dataset only sees base files; compact first "
            "(t.services.compact()) or read with t.scan() / t.to_polars(), which merge the logs"
        )
    bases = [s for s in slices if s.base is not None]
    # A file swapped or cut short is refused by its recorded size: stat'ed now on a local
    # disk, compared when Arrow, DuckDB or Polars opens it on an object store.
    check_sizes(ctx.storage, [(s.base.path, s.base.bytes) for s in bases if s.base is not None])
    return bases


def fragment(ctx: TableContext, s: FileSlice) -> ds.ParquetFileFragment:
    """The slice's base file as a Parquet fragment with its guarantee (its pages' CRCs
    verified as it is read)."""
    assert s.base is not None
    return PARQUET_FORMAT.make_fragment(
        ctx.storage.path(s.base.path), ctx.storage.fs, partition_expression=fragment_guarantee(ctx, s)
    )


def snapshot_dataset(ctx: TableContext, as_of: int | datetime | None = None) -> ds.FileSystemDataset:
    """The base files of the context's snapshot as one Parquet dataset.

    Raises:
        UnmergedLogsError: a live slice has log files (nothing is read).
        UnsupportedOperationError: a base file must be read by field id (see above).
        SnapshotExpiredError: a time-travel snapshot's files were cleaned.
    """
    slices = live_bases(ctx, as_of)
    schema, storage = ctx.config.schema, ctx.storage
    if ctx.config.moved_names:
        for s in slices:
            if s.base is not None and not reads_by_name(
                open_parquet(storage, s.base.path, s.base.bytes).schema_arrow, schema
            ):
                raise UnsupportedOperationError(
                    f"{s.base.path} was written before a rename, drop or widening of its columns, and a pyarrow "
                    "dataset maps every file's columns to its schema by name (it has no per-file renaming): read "
                    "by field id with t.to_duckdb() (DuckDB), t.to_polars() (Polars) or t.scan(filter=..., "
                    "columns=...).to_reader() (any Arrow consumer), or rewrite the old files first "
                    "(t.services.cluster(...) rewrites every file group)"
                )
    return ds.FileSystemDataset([fragment(ctx, s) for s in slices], schema, PARQUET_FORMAT, storage.fs)
