"""What an index stores for a data file: its entries, and the tasks that compute them.

Everything an index holds is a pure function of a data file's content and the index's
definition (kind, columns, options), computed by :func:`file_entries`. So a writer's
updates (:mod:`.on_commit`), a bulk build and ``validate`` (:mod:`.build`) all call the
same function, and ``validate`` is simply "recompute and compare".

Every data file is indexed, base and log alike. A slice's live rows are a subset of
its base rows and the upsert records of its logs (an upsert carries the whole row, a
delete only removes), so a reader may skip a merge-on-read slice when the entries of
its base and of every log rule the filter out; a file without entries keeps its slice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..timeline.errors import InvalidIndexError
from ..timeline.storage import Storage
from ..timeline.timeline import Timeline
from .bloom import BLOOM_SCHEMA, DEFAULT_FPP, FileBloom
from .column_stats import STATS_SCHEMA, file_stats
from .hashing import ColumnHashes
from .states import IndexDef, partition_of, written_indexes


@dataclass(frozen=True)
class IndexTarget:
    """What an index covers, resolved against the table's schema and key."""

    name: str
    kind: str
    columns: tuple[str, ...]
    fpp: float
    #: The metadata-table partition of the definition (``<name>@<created>``).
    partition: str = ""


def resolve(idx: IndexDef, schema: pa.Schema, record_key: Sequence[str]) -> IndexTarget:
    """The columns an index covers: its own, or the default of its kind.

    Raises:
        InvalidIndexError: a column is not in the schema, or a bloom filter has no
            columns on a table without a record key.
    """
    cols = tuple(idx.columns)
    if not cols:
        cols = tuple(record_key) if idx.kind == "bloom_filters" else tuple(schema.names)
    if not cols:
        raise InvalidIndexError(f"index {idx.name!r}: a bloom filter on an append-only table needs columns")
    missing = [c for c in cols if c not in schema.names]
    if missing:
        raise InvalidIndexError(f"index {idx.name!r}: unknown columns {missing}")
    return IndexTarget(idx.name, idx.kind, cols, float(idx.options.get("fpp", DEFAULT_FPP)),
                       partition_of(idx.name, idx.instant))


def read_base(storage: Storage, rel_path: str, columns: Sequence[str]) -> pa.Table:
    """The indexed columns of one data file (columns it predates are left out)."""
    path = storage.path(rel_path)
    with storage.fs.open_input_file(path) as f:
        pf = pq.ParquetFile(f)
        present = [c for c in columns if c in pf.schema_arrow.names]
        return pf.read(columns=present)


def files_entries(targets: Sequence[IndexTarget], storage: Storage, schema: pa.Schema, rel_path: str,
                  partition: str) -> list[pa.Table]:
    """The entries of one data file (base or log) for each of ``targets``, from one read
    of the file, hashing each column once for all of them."""
    columns = list(dict.fromkeys(c for t in targets for c in t.columns))
    return rows_entries(targets, read_base(storage, rel_path, columns), schema, rel_path, partition)


def rows_entries(targets: Sequence[IndexTarget], rows: pa.Table, schema: pa.Schema, rel_path: str,
                 partition: str, hashes: ColumnHashes | None = None) -> list[pa.Table]:
    """The entries of the data file ``rel_path`` whose content is ``rows`` (all of it, or
    at least the columns of ``targets`` it has), for each of ``targets``; ``hashes`` of
    ``rows`` may be shared with the caller."""
    hashes = hashes if hashes is not None else ColumnHashes(rows)
    out: dict[int, pa.Table] = {}
    # Bloom filters first: they need a column's hashes in memory, which its NDV sketch
    # then reuses (alone, a sketch hashes in one pass without keeping them).
    order = sorted(range(len(targets)), key=lambda i: targets[i].kind == "column_stats")
    for i in order:
        target = targets[i]
        if target.kind == "column_stats":
            out[i] = file_stats(rel_path, partition, rows, target.columns, hashes=hashes)
        elif any(c not in rows.column_names for c in target.columns):
            out[i] = BLOOM_SCHEMA.empty_table()  # the file predates a bloomed column: no entry
        else:
            fb = FileBloom.build(rows, target.columns, target.fpp, schema, hashes)
            out[i] = pa.Table.from_pylist([fb.to_row(rel_path, partition)], schema=BLOOM_SCHEMA)
    return [out[i] for i in range(len(targets))]


def file_entries(target: IndexTarget, storage: Storage, schema: pa.Schema, rel_path: str,
                 partition: str) -> pa.Table:
    """The entries of one data file (base or log) for one index."""
    return files_entries([target], storage, schema, rel_path, partition)[0]


def entries_schema(kind: str) -> pa.Schema:
    return STATS_SCHEMA if kind == "column_stats" else BLOOM_SCHEMA


#: ``map(fn, items)``: how a batch of per-file entry computations runs. The table's
#: engine fits (its ``map``); the default runs them here, one after the other.
MapFn = Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]


def serial_map(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    return [fn(x) for x in items]


@dataclass(frozen=True)
class EntriesTask:
    """Compute the entries of one data file for some indexes (a picklable engine task)."""

    targets: tuple[IndexTarget, ...]
    storage: Storage
    schema: pa.Schema
    path: str
    partition: str


@dataclass(frozen=True)
class IndexJob:
    """The indexes a write task computes entries for from the rows it just wrote, so
    the writer need not read its files back (:func:`write_commit_updates` takes them)."""

    targets: tuple[IndexTarget, ...]
    schema: pa.Schema

    def entries(self, rows: pa.Table, rel_path: str, partition: str,
                hashes: ColumnHashes | None = None) -> dict[IndexTarget, pa.Table]:
        return dict(zip(self.targets, rows_entries(self.targets, rows, self.schema, rel_path, partition, hashes)))


def index_job(timeline: Timeline, schema: pa.Schema, record_key: Sequence[str]) -> IndexJob | None:
    """The job of every index building or ready in ``timeline`` that resolves (None when
    there is none)."""
    targets = []
    for idx in written_indexes(timeline):
        try:
            targets.append(resolve(idx, schema, record_key))
        except InvalidIndexError:
            continue
    return IndexJob(tuple(dict.fromkeys(targets)), schema) if targets else None


#: Entries a write task computed, by data file path and index target.
Precomputed = Mapping[str, Mapping[IndexTarget, pa.Table]]


def entries_task(task: EntriesTask) -> list[pa.Table]:
    return files_entries(task.targets, task.storage, task.schema, task.path, task.partition)


def entries_for(target: IndexTarget, storage: Storage, schema: pa.Schema,
                files: Iterable[tuple[str, str]], map_fn: MapFn = serial_map) -> pa.Table:
    """Entries of many (path, partition) data files, concatenated."""
    parts = map_fn(entries_task, [EntriesTask((target,), storage, schema, p, part) for p, part in files])
    return pa.concat_tables([p[0] for p in parts]) if parts else entries_schema(target.kind).empty_table()
