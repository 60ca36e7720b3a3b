"""Reading and writing data files: the picklable task functions engines run.

Every function here is module-level and takes one frozen task description, so a
``LocalEngine`` thread, a worker process or a Spark executor can run it unchanged.
Writers record a marker before creating a file, so rollback can always find it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..indexes.entries import IndexJob, IndexTarget
from ..indexes.hashing import ColumnHashes, min_max_values
from ..indexes.on_commit import write_beside, written_delta
from ..timeline.commit_metadata import WriteStat
from ..timeline.errors import InvalidTransitionError, SnapshotExpiredError
from ..timeline.field_ids import conform, field_id, has_ids, ids_by_position, name_without_ids, reads_as, typed_nulls
from ..timeline.markers import marker_path, write_marker
from ..timeline.storage.data_reads import (
    DAMAGED,
    PARQUET_FORMAT,
    PARQUET_READ,
    check_log,
    check_size,
    open_data_file,
    reading,
)
from ..timeline.storage.filesystem import Storage
from ..timeline.table_config import RESERVED_COLUMNS
from ..timeline.view.file_group import FileKind
from .encoding import MIN_SAVING, parquet_options
from .write.records import OP, OP_DELETE, SEQ

_JSON_KEY_TYPES = (int, str, float, bool)


#: Rows from which a file's description is computed alongside its write (:func:`write_indexed`).
DESCRIBE_ALONGSIDE_ROWS = 100_000


@dataclass(frozen=True)
class FileWrite:
    """One data file to write."""

    storage: Storage
    instant: int
    rel_path: str
    partition: str
    file_group: str
    kind: FileKind
    rows: pa.Table
    key: tuple[str, ...]
    compression: str
    row_group_rows: int
    inserts: bool = False
    known_range: tuple[object, object] | None = None  # key range when the caller knows it
    indexes: IndexJob | None = None  # index entries to compute from ``rows`` as well
    #: The commit's only file: its record-index entries are the commit's delta, which a
    #: large file's task writes beside the file (:func:`lakeline.indexes.on_commit.write_beside`).
    sole: bool = False
    #: A column takes ``compression`` only if it saves this share of it (``write.parquet-compression-min-saving``).
    min_saving: float = MIN_SAVING


@dataclass(frozen=True)
class Written:
    """A data file a task wrote, with the index entries it computed from the rows
    (:attr:`FileWrite.indexes`; empty without)."""

    stat: WriteStat
    entries: Mapping[IndexTarget, pa.Table] = field(default_factory=dict)


def key_range(table: pa.Table, key: tuple[str, ...], facts: ColumnHashes | None = None) -> tuple[object, object]:
    """(min, max) of a single-column key as JSON values; (None, None) when unknown.
    ``facts``: the per-column memo of ``table`` that index entries share."""
    if len(key) != 1 or table.num_rows == 0:
        return None, None
    col = table.column(key[0])
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        # The C loop when built (Arrow's string min/max is slow), computed once for the
        # key range and the file's index entries.
        lo, hi = (facts or ColumnHashes(table)).bounds(key[0])
    else:
        lo, hi = min_max_values(col)
    if not isinstance(lo, _JSON_KEY_TYPES) or not isinstance(hi, _JSON_KEY_TYPES):
        return None, None
    return lo, hi


def write_file(task: FileWrite) -> WriteStat:
    """Write one Parquet file (marker first) and describe it."""
    return write_indexed(task).stat


def write_indexed(task: FileWrite) -> Written:
    """Write one Parquet file (marker first), describe it, and compute its index entries
    from the rows in memory when the task asks for them.

    The description (key range, delete count, index entries) of a large file is computed
    on a thread of its own while the file is encoded and uploaded: it needs only the
    rows, and its C loops release the GIL, so an append's key range (7 ms for 500k string
    keys) costs no time on the write's path. A small file's is computed after it, as two
    threads contending for the GIL cost a small write more than they save (a merge-on-read
    upsert's 14 logs: 70 ms of writing took 120 ms)."""
    write_marker(task.storage, task.instant, task.rel_path)
    path = task.storage.path(task.rel_path)
    task.storage.mkdirs(path.rsplit("/", 1)[0])
    alongside = task.rows.num_rows >= DESCRIBE_ALONGSIDE_ROWS
    with ThreadPoolExecutor(1, thread_name_prefix="lakeline-describe") if alongside else nullcontext() as pool:
        # Beside the write, a record index's entries are sorted by bucket too, which the
        # commit's delta otherwise does after every file was written (a 500k-row file's
        # entries: 30-70 ms of gathering 32-character keys).
        described = pool.submit(_describe, task, True, task.sole) if pool is not None else None
        with task.storage.fs.open_output_stream(path) as sink:
            options = parquet_options(task.rows, task.compression, task.row_group_rows, task.min_saving)
            pq.write_table(task.rows, sink, **options)
            size = sink.tell()
        if not task.storage.exists(marker_path(task.storage, task.instant, task.rel_path)):
            # The instant was rolled back while this (stalled) task wrote: the rollback
            # removed the marker, maybe before this file existed, so nobody else will delete
            # it, nor the delta written beside it.
            task.storage.delete(path)
            if described is not None and described.exception() is None:
                for rows in described.result()[2].values():
                    if (delta := written_delta(rows)) is not None:  # and its marker, written late
                        task.storage.delete(task.storage.path(delta))
                        task.storage.delete(marker_path(task.storage, task.instant, delta))
            raise InvalidTransitionError(f"instant {task.instant} was rolled back while it wrote {task.rel_path}")
        deletes, (lo, hi), entries = described.result() if described is not None else _describe(task)
    return Written(
        WriteStat(
            path=task.rel_path,
            partition=task.partition,
            file_group=task.file_group,
            kind=task.kind,
            rows=task.rows.num_rows,
            bytes=size,
            deletes=deletes,
            key_min=lo,
            key_max=hi,
            inserts=task.inserts,
        ),
        entries,
    )


def _describe(
    task: FileWrite, sort_records: bool = False, write_deltas: bool = False
) -> tuple[int, tuple[object, object], Mapping[IndexTarget, pa.Table]]:
    """(delete records, key range, index entries) of the rows ``task`` writes (a record
    index's sorted by bucket with ``sort_records``, and written as the commit's delta
    with ``write_deltas``)."""
    deletes = 0
    if task.kind == FileKind.LOG:
        deletes = pc.sum(pc.equal(task.rows.column(OP), OP_DELETE).cast(pa.int64())).as_py() or 0
    facts = ColumnHashes(task.rows)
    bounds = task.known_range if task.known_range is not None else key_range(task.rows, task.key, facts)
    entries = (
        {}
        if task.indexes is None
        else task.indexes.entries(task.rows, task.rel_path, task.partition, facts, sort_records)
    )
    if write_deltas:
        entries = write_beside(task.storage, task.instant, entries)
    return deletes, bounds, entries


@dataclass(frozen=True)
class FileRead:
    """Columns of one data file."""

    storage: Storage
    rel_path: str
    columns: tuple[str, ...] | None = None
    # Decode on Arrow's threads. Off when the caller reads several files on threads of
    # its own that already fill the cores (two pools on two cores only contend:
    # store_sales' three bases, 71 ms against 78 ms), and for small files (a log read
    # on the pool waited behind another thread's base decode: 18 ms instead of 1).
    threads: bool = True
    # Only these row groups, in this order (None: all): a merge-on-read read skips the
    # base's row groups whose statistics rule out its filter (:mod:`.read.row_groups`).
    row_groups: tuple[int, ...] | None = None
    # The table schema (with field ids) ``columns`` name columns of: a file with ids is
    # then read by id, so a column renamed since reads under its new name and a dropped
    # one is not read (None: by name, as for the record key, which never changes).
    schema: pa.Schema | None = None
    # The size the file's commit recorded (``DataFile.bytes``; None: not known): a file of
    # another size was swapped or cut short, and is refused on open.
    size: int | None = None


def read_file(task: FileRead) -> pa.Table:
    """Read one Parquet file (all row groups or :attr:`FileRead.row_groups`, the given
    columns those of them it has: a column the schema gained after the file was written
    is left to :func:`with_columns_of`).

    A file of several row groups is read as a one-file dataset: it decodes row groups in
    parallel and pre-buffers, where ``ParquetFile.read`` decodes a column at a time
    (three columns of store_sales' base files: 74 ms against 97 ms). A file of one row
    group (a log, a small base) is read with ``ParquetFile.read``, which skips the
    dataset's setup: 0.9 ms against 1.6 ms for a store_sales log, and a read of a
    merge-on-read slice reads every log. The file's schema metadata is kept. Every page's
    CRC is verified, and the file's size compared with :attr:`FileRead.size`
    (:func:`~lakeline.timeline.storage.data_reads.open_data_file`).

    Raises:
        CorruptFileError: the file is damaged, unreadable, or not the size its commit
            recorded (named in the message); a ``CorruptLogError`` when a log file is
            not a log.
        FileNotFoundError: the file is missing.
    """
    with reading(task.rel_path):
        source = open_data_file(task.storage, task.rel_path)
        try:
            parquet = pq.ParquetFile(source, **PARQUET_READ)
        except DAMAGED:
            check_size(task.rel_path, source.size(), task.size)  # cut short: say so
            raise
        file_schema = parquet.schema_arrow
        names = file_schema.names
        # A base copied over a log is a CorruptLogError (more telling than its size).
        check_log(task.rel_path, names, (OP, SEQ))
        check_size(task.rel_path, source.size(), task.size)  # swapped or cut short
        columns = file_columns(file_schema, task.columns, task.schema)
        if task.row_groups is not None and len(task.row_groups) <= 1:
            return parquet.read_row_groups(list(task.row_groups), columns=columns, use_threads=task.threads)
        if task.row_groups is None and parquet.metadata.num_row_groups <= 1:
            return parquet.read(columns=columns, use_threads=task.threads)
        # The file already open (its size checked, and on an object store no second
        # HEAD), as a fragment that decodes row groups in parallel.
        groups = list(task.row_groups) if task.row_groups is not None else None
        fragment = PARQUET_FORMAT.make_fragment(source, row_groups=groups)
        return fragment.to_table(columns=columns, use_threads=task.threads)


def file_columns(file_schema: pa.Schema, wanted: tuple[str, ...] | None, schema: pa.Schema | None) -> list[str] | None:
    """The file's columns to decode for the table columns ``wanted`` (None: all).

    By id when both the file and ``schema`` have ids (a table column found under the
    name the file gave it; a column without an id, ``_op`` say, by name). Without
    ``schema``, a file with ids whose names lack a wanted column is read whole, so
    :func:`with_columns_of` still finds a renamed column by its id."""
    if not wanted:
        return None
    file_ids = ids_by_position(file_schema)
    if schema is not None and file_ids:
        ours = {f.name: field_id(f) for f in schema}
        out = []
        for c in wanted:
            fid = ours.get(c)
            at = file_ids.get(fid) if fid is not None else file_schema.get_field_index(c)
            if at is not None and at >= 0:
                out.append(file_schema.names[at])
        return out
    if schema is not None and has_ids(schema):  # a file from before ids: the names it used
        ours_then = {f.name: name_without_ids(f) for f in schema}
        wanted = tuple(ours_then.get(c, c) for c in wanted)
        return [c for c in wanted if c and c in file_schema.names]
    names = set(file_schema.names)
    if file_ids and any(c not in names and c not in RESERVED_COLUMNS for c in wanted):
        return None  # a user column missing by name: maybe renamed since (rare; reads more)
    return [c for c in wanted if c in names]


def read_snapshot_file(task: FileRead) -> pa.Table:
    """:func:`read_file` for a file of a snapshot being read or planned on.

    Raises:
        SnapshotExpiredError: the file is gone (see :func:`snapshot_file_reading`).
        CorruptFileError: the file is damaged or unreadable.
    """
    with snapshot_file_reading(task.rel_path):
        return read_file(task)


@contextmanager
def snapshot_file_reading(rel_path: str) -> Iterator[None]:
    """Read the data file ``rel_path`` of a snapshot in this block: a damaged one raises
    ``CorruptFileError`` naming it (:func:`reading`), a missing one
    ``SnapshotExpiredError`` (a clean removed it, so the snapshot left retention while it
    was read, or it was deleted outside lakeline): a writer plans again on a fresh
    snapshot; a reader gets the typed error, never an untyped ``FileNotFoundError``."""
    try:
        with reading(rel_path):
            yield
    except FileNotFoundError as e:
        # Only the caller's timeline can tell a clean from a deletion outside lakeline
        # (lakeline.timeline.storage.data_reads.missing_message): no guess here.
        raise SnapshotExpiredError(f"{rel_path} of the snapshot being read is missing") from e


def with_columns_of(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` (rows as read from a file) with exactly ``schema``'s columns in its
    order and types.

    A column is found by its field id when both carry ids (so a file written before a
    rename reads under the new name, and a column dropped, or dropped and added again,
    is not taken from it), else by name (:func:`name_without_ids`: files from before
    ids); so are the fields inside struct columns (:func:`conform`). A column the file
    lacks (added since) reads as nulls; one a schema change widened is cast to the wider
    type, column by column, never row by row."""
    src = table.schema
    if src.names == schema.names and all(field_id(a) == field_id(b) and reads_as(a, b) for a, b in zip(src, schema)):
        return table
    by_id = ids_by_position(src)
    cols, fields = [], []
    for f in schema:
        fid = field_id(f)
        if fid is not None and by_id:
            at = by_id.get(fid, -1)
        else:
            name = name_without_ids(f) if fid is not None else f.name
            at = src.get_field_index(name) if name else -1
        if at < 0:
            cols.append(typed_nulls(table.num_rows, f.type))
            fields.append(f)
            continue
        col = table.column(at)
        if not reads_as(src.field(at), f):
            cols.append(conform(col, src.field(at), f))
            fields.append(f)
        else:  # the file's own field (its nullability), under the table's name
            cols.append(col)
            fields.append(src.field(at).with_name(f.name))
    return pa.Table.from_arrays(cols, schema=pa.schema(fields))
