"""Per-file-group write tasks: copy-on-write rewrites and merge-on-read log files.

Module-level functions over frozen task descriptions, run through an engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...indexes.entries import IndexJob
from ...timeline.commit_metadata import WriteStat
from ...timeline.storage.filesystem import Storage
from ...timeline.table_config import TableConfig
from ...timeline.view.file_group import FileKind, FileSlice, data_file_name, table_tag
from ..encoding import MIN_SAVING
from ..files import FileRead, FileWrite, Written, key_range, read_snapshot_file, with_columns_of, write_indexed
from ..merge import merge_onto
from ..merge_engine import DEFAULT_ENGINE, MergeEngine
from .records import BASE_FILE_KEY, BASE_POS, OP, SEQ


@dataclass(frozen=True)
class WriteSettings:
    storage: Storage
    instant: int
    schema: pa.Schema
    key: tuple[str, ...]
    ordering: str | None
    compression: str
    row_group_rows: int
    indexes: IndexJob | None = None  # entries each written file computes from its rows
    tag: str = ""  # the table's tag in data file names (file_group.table_tag)
    merge: MergeEngine = DEFAULT_ENGINE  # how a key's versions fold (``merge.engine``)
    min_saving: float = MIN_SAVING  # ``write.parquet-compression-min-saving``

    @classmethod
    def of(cls, storage: Storage, config: TableConfig, instant: int, indexes: IndexJob | None = None) -> WriteSettings:
        """The settings of files ``instant`` writes under ``config``."""
        return cls(
            storage=storage,
            instant=instant,
            schema=config.schema,
            key=config.record_key,
            ordering=config.ordering_field,
            compression=config.props.write_parquet_compression,
            row_group_rows=config.props.write_row_group_rows,
            indexes=indexes,
            tag=table_tag(config.table_uuid),
            merge=MergeEngine.of(config),
            min_saving=config.props.write_parquet_compression_min_saving,
        )


def rel_path(partition: str, name: str) -> str:
    return f"{partition}/{name}" if partition else name


def log_schema(schema: pa.Schema) -> pa.Schema:
    """Schema of log files: every column nullable (delete records carry only keys),
    plus the operation and the sequence within the file."""
    fields = [f.with_nullable(True) for f in schema]
    return pa.schema(fields + [pa.field(OP, pa.string(), False), pa.field(SEQ, pa.int64(), False)])


@dataclass(frozen=True)
class RewriteTask:
    settings: WriteSettings
    slice: FileSlice
    incoming: pa.Table | None
    predicate: pc.Expression | None
    inserts: bool
    new_keys_only: bool = False
    assign: tuple[tuple[str, pc.Expression], ...] | None = None  # an append-only update


def rewrite_group(task: RewriteTask) -> Written | None:
    """New base for the group; None when no row survives (the group is retired)."""
    st = task.settings
    s = task.slice
    assert s.base is not None
    # A clean may have removed the base since the plan (it was replaced meanwhile): a
    # typed SnapshotExpiredError, and the writer replays on a fresh snapshot.
    base = with_columns_of(read_snapshot_file(FileRead(st.storage, s.base.path, size=s.base.bytes)), st.schema)
    if task.predicate is not None and task.assign is not None:
        from .assign import apply_where

        result, hits_n = apply_where(base, task.predicate, task.assign, st.schema)
        if hits_n == 0:
            return _unchanged(s)
    elif task.predicate is not None:
        # Keep rows where the predicate is false or null: delete only what matches.
        hits = _evaluate(base, task.predicate)
        if not pc.any(hits).as_py():
            return _unchanged(s)
        result = base.filter(pc.invert(hits))
    elif task.new_keys_only and task.incoming is not None:
        # Small-file filling with keys the planner proved new: nothing to merge.
        result = pa.concat_tables([base, task.incoming.drop_columns([OP]).cast(base.schema)])
    else:
        result = merge_onto(base, task.incoming, st.key, st.ordering, st.merge)
    if result.num_rows == 0:
        return None
    known = None
    if task.new_keys_only and s.base.key_min is not None:
        lo, hi = key_range(task.incoming, st.key)
        if lo is not None:
            bounds: list[Any] = [lo, hi, s.base.key_min, s.base.key_max]  # one key type, compared as is
            known = (min(bounds[0], bounds[2]), max(bounds[1], bounds[3]))
    name = data_file_name(s.file_group, st.instant, FileKind.BASE, st.tag)
    indexes = st.indexes
    changes = task.incoming if task.predicate is None else None
    if indexes is not None and changes is not None and OP in changes.column_names:
        # Keys no change touches stay in the group: a record index takes the changes only.
        indexes = indexes.rewriting(changes.select([*st.key, OP]), s.base.path)
    return write_indexed(
        FileWrite(
            st.storage,
            st.instant,
            rel_path(s.partition, name),
            s.partition,
            s.file_group,
            FileKind.BASE,
            result.cast(st.schema),
            st.key,
            st.compression,
            st.row_group_rows,
            task.inserts,
            known,
            indexes,
            min_saving=st.min_saving,
        )
    )


_UNCHANGED = "__unchanged__"


def _unchanged(s: FileSlice) -> Written:
    """Marker result: the predicate matched nothing, the group is untouched."""
    return Written(
        WriteStat(path=_UNCHANGED, partition=s.partition, file_group=s.file_group, kind=FileKind.BASE, rows=0, bytes=0)
    )


def is_unchanged(res: Written | None) -> bool:
    return res is not None and res.stat.path == _UNCHANGED


def _evaluate(table: pa.Table, expr: pc.Expression) -> pa.ChunkedArray:
    import pyarrow.dataset as ds

    row = "__lakeline_row"  # under the reserved prefix: never a user column
    marked = table.append_column(row, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    hit = ds.dataset(marked).to_table(filter=expr, columns=[row]).column(row)
    mask = np.zeros(table.num_rows, dtype=bool)
    mask[hit.to_numpy()] = True
    return pa.chunked_array([pa.array(mask)])


@dataclass(frozen=True)
class LogTask:
    settings: WriteSettings
    partition: str
    file_group: str
    incoming: pa.Table
    base_file: str | None = None  # the group's base file, where ``_base_pos`` positions point
    inserts: bool = False  # some rows are keys new to the table (the key check's rule 2)


def write_log(task: LogTask) -> Written:
    """Write one log file. With the rows' base positions (``_base_pos``) and the base
    file they point into, the log keeps them and names that file in its metadata, so a
    reader of a slice on that base drops the rows by position (see
    :func:`lakeline.table.read.scan.read_slice`)."""
    st = task.settings
    rows = task.incoming
    schema = log_schema(st.schema)
    if task.base_file is not None and BASE_POS in rows.column_names:
        schema = schema.append(pa.field(BASE_POS, pa.int64())).with_metadata({BASE_FILE_KEY: task.base_file.encode()})
    rows = rows.append_column(SEQ, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    rows = rows.select(schema.names).cast(schema)
    name = data_file_name(task.file_group, st.instant, FileKind.LOG, st.tag)
    return write_indexed(
        FileWrite(
            st.storage,
            st.instant,
            rel_path(task.partition, name),
            task.partition,
            task.file_group,
            FileKind.LOG,
            rows,
            st.key,
            st.compression,
            st.row_group_rows,
            task.inserts,
            indexes=st.indexes,
            min_saving=st.min_saving,
        )
    )


def write_task(task: FileWrite | RewriteTask | LogTask) -> Written | None:
    """Run any of a write's file tasks: one engine call then takes them all, so the
    workers stay busy to the end instead of waiting at the end of each kind."""
    if isinstance(task, RewriteTask):
        return rewrite_group(task)
    if isinstance(task, LogTask):
        return write_log(task)
    return write_indexed(task)
