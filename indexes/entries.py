"""What an index stores for a data file: its entries, and the tasks that compute them.

Everything an index holds is a pure function of a data file's content and the index's
definition (kind, columns, options), computed by :func:`entries_for_file`. So a writer's
updates (:mod:`.on_commit`), a bulk build and ``validate`` (:mod:`.build`) all call the
same function, and ``validate`` is simply "recompute and compare".

Every data file is indexed, base and log alike. A slice's live rows are a subset of
its base rows and the upsert records of its logs (an upsert carries the whole row, a
delete only removes), so a reader may skip a merge-on-read slice when the entries of
its base and of every log rule the filter out; a file without entries keeps its slice.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from numbers import Real
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..timeline.errors import InvalidIndexError, InvalidIndexOptionsError
from ..timeline.field_ids import field_id, has_ids, source_of
from ..timeline.storage.data_reads import PARQUET_READ, reading
from ..timeline.storage.filesystem import Storage
from ..timeline.timeline import Timeline
from .bloom import BLOOM_SCHEMA, DEFAULT_FPP, FileBloom
from .column_stats import STATS_SCHEMA, file_stats
from .hashing import ColumnHashes
from .metadata_table import MetadataTable
from .record_index.delta_hashes import DELTA_HASHES
from .record_index.rows import HASH, OP, bucket_order, change_entries, check_buckets, entry_schema, record_entries
from .record_index.store import entry_parquet
from .states import IndexDef, IndexKind, index_kind, partition_of, written_indexes


@dataclass(frozen=True)
class IndexTarget:
    """What an index covers, resolved against the table's schema and key."""

    name: str
    kind: IndexKind
    columns: tuple[str, ...]
    fpp: float
    #: The metadata-table partition of the definition (``<name>@<created>``).
    partition: str = ""
    #: The bucket count of a record index (0 for the other kinds).
    buckets: int = 0
    #: The field ids of ``columns`` in the schema it was resolved against (empty
    #: unless each has one): entries are computed for the file's columns of these ids.
    field_ids: tuple[int, ...] = ()


#: What an index name may hold: it names a metadata-table folder (``<name>@<instant>``),
#: so letters, digits, ``_`` and ``-`` only (no separator, dot, NUL or ``@``), and at
#: most :data:`MAX_NAME_CHARS` of them (a folder name's limit is 255 bytes).
NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]+")
MAX_NAME_CHARS = 100

#: The options each kind takes.
KNOWN_OPTIONS: Mapping[IndexKind, tuple[str, ...]] = {
    IndexKind.BLOOM_FILTERS: ("fpp",),
    IndexKind.COLUMN_STATS: (),
    IndexKind.RECORD_INDEX: ("buckets",),
}

#: The smallest false-positive rate a bloom filter takes: below it a filter costs over
#: 43 bits and 30 probes per key for a difference no read measures.
MIN_FPP = 1e-9


def check_definition(
    name: object, kind: object, columns: object = None, options: object = None
) -> tuple[str, IndexKind, list[str] | None, dict[str, Any]]:
    """Check what ``t.indexes.create`` (and ``lakeline index create``) asks for, before
    anything is scheduled; returns (name, kind, columns or None, options).

    Only new definitions are checked this strictly: :func:`resolve` keeps accepting what
    the timeline already holds, so an index created by an older version keeps being
    written.

    Raises:
        InvalidIndexError: unknown kind; a name that is empty, too long or holds other
            than letters, digits, ``_`` and ``-``; columns that are not a list of
            distinct non-empty names.
        InvalidIndexOptionsError: an option the kind does not take, ``fpp`` not a
            number in [:data:`MIN_FPP`, 1), or ``buckets`` not an integer in [1, 65536].
    """
    kind = index_kind(kind)
    if name is None:
        name = kind.value
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name) or len(name) > MAX_NAME_CHARS:
        raise InvalidIndexError(
            f"invalid index name {str(name)[: MAX_NAME_CHARS + 20]!r}: 1 to {MAX_NAME_CHARS} "
            "letters, digits, '_' or '-'"
        )
    cols: list[str] | None = None
    if columns is not None:
        if isinstance(columns, (str, bytes)) or not isinstance(columns, Sequence):
            raise InvalidIndexError(f"index {name!r}: columns must be a list of column names, not {columns!r}")
        cols = list(columns)
        bad = [c for c in cols if not isinstance(c, str) or not c]
        if bad:
            raise InvalidIndexError(f"index {name!r}: column names must be non-empty strings, not {bad}")
        dupes = sorted({c for c in cols if cols.count(c) > 1})
        if dupes:
            raise InvalidIndexError(f"index {name!r}: columns named twice: {dupes}")
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise InvalidIndexOptionsError(f"index {name!r}: options must be a dict, not {options!r}")
    known = KNOWN_OPTIONS[kind]
    unknown = sorted(str(k) for k in options if k not in known)
    if unknown:
        raise InvalidIndexOptionsError(
            f"index {name!r}: unknown options {unknown} for {kind}; known: {', '.join(known) or 'none'}"
        )
    if "fpp" in options:
        fpp = options["fpp"]
        value = float(fpp) if isinstance(fpp, Real) and not isinstance(fpp, bool) else math.nan
        if not math.isfinite(value) or not MIN_FPP <= value < 1:
            raise InvalidIndexOptionsError(f"index {name!r}: fpp must be a number in [{MIN_FPP}, 1), not {fpp!r}")
    if "buckets" in options:
        check_buckets(options["buckets"])
    return name, kind, cols, {k: (float(v) if k == "fpp" else v) for k, v in options.items()}


def resolve(idx: IndexDef, schema: pa.Schema, record_key: Sequence[str]) -> IndexTarget:
    """The columns an index covers: its own, or the default of its kind. A definition
    that recorded its columns' field ids covers them under their present names
    (:func:`_named_now`); one from before ids, by the names it recorded.

    Raises:
        InvalidIndexError: a column is not in the schema (or was dropped), or a bloom
            filter has no columns on a table without a record key.
    """
    cols = tuple(idx.columns)
    if idx.kind == IndexKind.RECORD_INDEX:
        # Always exactly the record key: the index maps keys, nothing else.
        if not record_key:
            raise InvalidIndexError(f"index {idx.name!r}: a record index needs a table with a record key")
        if cols and cols != tuple(record_key):
            raise InvalidIndexError(f"index {idx.name!r}: a record index covers the record key {list(record_key)}")
        if any(c not in schema.names for c in record_key):
            raise InvalidIndexError(f"index {idx.name!r}: record key {list(record_key)} not in the schema")
        buckets = check_buckets(idx.options.get("buckets", 1))
        return IndexTarget(idx.name, idx.kind, tuple(record_key), 0.0, partition_of(idx.name, idx.instant), buckets)
    if not cols:
        cols = tuple(record_key) if idx.kind == IndexKind.BLOOM_FILTERS else tuple(schema.names)
    if not cols:
        raise InvalidIndexError(f"index {idx.name!r}: a bloom filter on an append-only table needs columns")
    if idx.field_ids and len(idx.field_ids) == len(cols):
        cols = _named_now(idx, schema)
    missing = [c for c in cols if c not in schema.names]
    if missing:
        raise InvalidIndexError(f"index {idx.name!r}: unknown columns {missing}")
    return IndexTarget(
        idx.name,
        idx.kind,
        cols,
        float(idx.options.get("fpp", DEFAULT_FPP)),
        partition_of(idx.name, idx.instant),
        field_ids=column_ids(schema, cols),
    )


def _named_now(idx: IndexDef, schema: pa.Schema) -> tuple[str, ...]:
    """The present names of the columns a definition recorded the field ids of: a
    renamed column is followed; a dropped one leaves a column-stats index (as Delta and
    Iceberg stop keeping a dropped column's stats) but not a bloom filter, whose hashes
    cover all its columns together (dropping one is refused while the index exists).

    Raises:
        InvalidIndexError: a column of a bloom filter, or every column, was dropped.
    """
    by_id = {fid: f.name for f in schema if (fid := field_id(f)) is not None}
    names = [by_id.get(i) for i in idx.field_ids]
    kept = tuple(n for n in names if n is not None)
    if not kept or (idx.kind == IndexKind.BLOOM_FILTERS and len(kept) < len(names)):
        raise InvalidIndexError(f"index {idx.name!r}: columns {list(idx.columns)} were dropped from the schema")
    return kept


def column_ids(schema: pa.Schema, columns: Sequence[str]) -> tuple[int, ...]:
    """The field ids of ``columns`` in ``schema`` (empty unless each has one)."""
    ids = []
    for c in columns:
        at = schema.get_field_index(c)
        fid = field_id(schema.field(at)) if at >= 0 else None
        if fid is None:
            return ()
        ids.append(fid)
    return tuple(ids)


def in_rows(rows: pa.Schema, schema: pa.Schema, columns: Sequence[str]) -> list[str | None]:
    """The names a data file's ``rows`` hold the table's ``columns`` under (None: not
    in the file): by field id, so a file written before a rename gives the column under
    the name it had then, and one dropped and added again under its name is not found
    in files older than the add (:func:`~lakeline.timeline.field_ids.source_of`)."""
    kids = list(rows)
    out: list[str | None] = []
    for c in columns:
        if c not in schema.names:  # no table column (a log's ``_op``): by name
            out.append(c if c in rows.names else None)
            continue
        at = source_of(kids, schema.field(c))
        out.append(kids[at].name if at >= 0 else None)
    return out


def read_base(storage: Storage, rel_path: str, columns: Sequence[str], schema: pa.Schema | None = None) -> pa.Table:
    """The indexed columns of one data file under the names the file holds them
    (columns it predates are left out); with ``schema``, found by field id
    (:func:`in_rows`: a column renamed since is read under its old name)."""
    path = storage.path(rel_path)
    with reading(rel_path), storage.fs.open_input_file(path) as f:  # damaged: CorruptFileError naming it
        pf = pq.ParquetFile(f, **PARQUET_READ)  # page CRCs: never hash a flipped key
        names = pf.schema_arrow.names
        found = in_rows(pf.schema_arrow, schema, columns) if schema is not None else list(columns)
        present = [c for c in dict.fromkeys(n for n in found if n is not None) if c in names]
        return pf.read(columns=present)


def entries_for_file(
    targets: Sequence[IndexTarget], storage: Storage, schema: pa.Schema, rel_path: str, partition: str
) -> list[pa.Table]:
    """The entries of one data file (base or log) for each of ``targets``, from one read
    of the file, hashing each column once for all of them."""
    columns = list(dict.fromkeys(c for t in targets for c in t.columns))
    if any(t.kind == IndexKind.RECORD_INDEX for t in targets):
        columns.append(OP)  # a log's delete records are entries too (absent from bases)
    return entries_for_rows(targets, read_base(storage, rel_path, columns, schema), schema, rel_path, partition)


def entries_for_rows(
    targets: Sequence[IndexTarget],
    rows: pa.Table,
    schema: pa.Schema,
    rel_path: str,
    partition: str,
    hashes: ColumnHashes | None = None,
    sort_records: bool = False,
) -> list[pa.Table]:
    """The entries of the data file ``rel_path`` whose content is ``rows`` (all of it, or
    at least the columns of ``targets`` it has), for each of ``targets``; ``hashes`` of
    ``rows`` may be shared with the caller. ``sort_records``: a record index's sorted by
    bucket here (:func:`write_delta` then need not, when it is the commit's only file)."""
    hashes = hashes if hashes is not None else ColumnHashes(rows)
    out: dict[int, pa.Table] = {}
    # Bloom filters first: they need a column's hashes in memory, which its NDV sketch
    # then reuses (alone, a sketch hashes in one pass without keeping them).
    order = sorted(range(len(targets)), key=lambda i: targets[i].kind == IndexKind.COLUMN_STATS)
    for i in order:
        target = targets[i]
        if target.kind == IndexKind.RECORD_INDEX:
            out[i] = record_entries(rows, rel_path, target.columns, schema, target.buckets, hashes, sort=sort_records)
            continue
        # Entries name a column as the file holds it, with its field id and type there:
        # a pure function of the file, which pruning asks by id (issue 29).
        found = in_rows(rows.schema, schema, target.columns)
        if target.kind == IndexKind.COLUMN_STATS:
            out[i] = file_stats(rel_path, partition, rows, [n for n in found if n is not None], hashes=hashes)
        elif None in found:
            out[i] = BLOOM_SCHEMA.empty_table()  # the file predates a bloomed column: no entry
        else:
            names = [n for n in found if n is not None]
            # A file with ids is hashed in its own types (recorded with the entry); one
            # from before ids as its columns were cast to the table's types.
            fb = FileBloom.build(rows, names, target.fpp, None if has_ids(rows.schema) else schema, hashes)
            out[i] = pa.Table.from_pylist([fb.to_row(rel_path, partition)], schema=BLOOM_SCHEMA)
    return [out[i] for i in range(len(targets))]


#: Rows per row group of a record index's delta: a reader of a few buckets reads the
#: row groups of those buckets only (a delta is sorted by bucket).
DELTA_ROW_GROUP_ROWS = 32_768


def write_delta(storage: Storage, target: IndexTarget, instant: int, rows: pa.Table, marker: bool = True) -> str:
    """Write the entries ``instant`` adds to ``target`` as one delta of its partition
    (:meth:`MetadataTable.write_updates`); a record index's sorted by bucket."""
    if target.kind != IndexKind.RECORD_INDEX:
        return MetadataTable(storage).write_updates(target.partition, instant, rows, marker)
    bucket = rows.column("bucket").to_numpy()
    # Sorted already when its only file's write task sorted them (beside the file's write).
    if len(bucket) and not (bucket[1:] >= bucket[:-1]).all():
        rows = rows.take(bucket_order(bucket))  # stable: each file's rows stay in order
    rel = MetadataTable(storage).write_updates(
        target.partition, instant, rows, marker, DELTA_ROW_GROUP_ROWS, entry_parquet(storage)
    )
    DELTA_HASHES.remember(storage.path(rel), rows.column(HASH).to_numpy())  # for this process's lookups
    return rel


def entries_schema(kind: IndexKind, schema: pa.Schema | None = None, record_key: Sequence[str] = ()) -> pa.Schema:
    """The schema of an index's entries (a record index's depends on the table's key)."""
    if kind == IndexKind.RECORD_INDEX:
        assert schema is not None, "a record index's entries need the table's schema"
        return entry_schema(schema, record_key)
    return STATS_SCHEMA if kind == IndexKind.COLUMN_STATS else BLOOM_SCHEMA


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
    #: A copy-on-write rewrite's changes (key columns and ``_op``) and the base it
    #: rewrote: a record index then takes entries of the changes only
    #: (:func:`lakeline.indexes.record_index.rows.change_entries`), not of every row.
    changes: pa.Table | None = None
    replaces: str | None = None

    def rewriting(self, changes: pa.Table, replaces: str) -> IndexJob:
        """This job for a rewrite of ``replaces`` that merged ``changes`` onto it."""
        return replace(self, changes=changes, replaces=replaces)

    def entries(
        self,
        rows: pa.Table,
        rel_path: str,
        partition: str,
        hashes: ColumnHashes | None = None,
        sort_records: bool = False,
    ) -> dict[IndexTarget, pa.Table]:
        """Entries of the file ``rel_path`` holding ``rows`` for every target
        (``sort_records``: :func:`entries_for_rows`)."""
        partial = self.changes is not None and self.replaces is not None
        full = [t for t in self.targets if not (partial and t.kind == IndexKind.RECORD_INDEX)]
        out = dict(zip(full, entries_for_rows(full, rows, self.schema, rel_path, partition, hashes, sort_records)))
        for t in self.targets:
            if t not in out and self.changes is not None and self.replaces is not None:
                out[t] = change_entries(self.changes, rel_path, self.replaces, t.columns, self.schema, t.buckets)
        return {t: out[t] for t in self.targets}


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
    return entries_for_file(task.targets, task.storage, task.schema, task.path, task.partition)


def entries_for(
    target: IndexTarget,
    storage: Storage,
    schema: pa.Schema,
    files: Iterable[tuple[str, str]],
    map_fn: MapFn = serial_map,
) -> pa.Table:
    """Entries of many (path, partition) data files, concatenated."""
    parts = map_fn(entries_task, [EntriesTask((target,), storage, schema, p, part) for p, part in files])
    if not parts:
        return entries_schema(target.kind, schema, target.columns).empty_table()
    return pa.concat_tables([p[0] for p in parts])
