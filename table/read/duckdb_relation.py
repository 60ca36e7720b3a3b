"""A snapshot as a DuckDB relation that reads every base file by field id, so DuckDB
reaches a table after a rename, a drop or a widening without a file rewritten (issue 29).

A ``pyarrow.dataset.Dataset`` cannot be that: it maps every file's columns to its one
schema by name (:mod:`.dataset`). So the files are grouped by their physical schema
(names, types and field ids, from each footer), each group becomes a Parquet dataset in
that schema, and DuckDB projects it to the table's schema: a column under the name the
file gave its id, ``CAST`` where the table widened it, a typed ``NULL`` where the file
lacks the id, a struct rebuilt with ``struct_pack`` where fields inside it were renamed,
dropped or added (:func:`lakeline.timeline.field_ids.conform` does the same in Arrow).
The groups are joined with ``UNION ALL``. Files a by-name read gets right (every file of
a table without a rename, drop or widening) form one dataset in the table's schema, as
:meth:`Table.to_pyarrow_dataset` gives it.

DuckDB plans over the whole: a filter or projection on a column is pushed through the
projection into each group's dataset scan (under the file's own name: a renamed column
is filtered as the file names it), where the fragments' guarantees (partition values,
key ranges) and the Parquet statistics prune; a filter on a widened column stays above
its scan, on the cast values. Slices with logs are refused as for the dataset.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.dataset as ds

from ...timeline.errors import InvalidConnectionError
from ...timeline.field_ids import field_id, reads_as, reads_by_name, source_of, walk
from ...timeline.storage.data_reads import PARQUET_FORMAT, open_parquet, reading
from ..context import TableContext
from .dataset import fragment, live_bases

if TYPE_CHECKING:
    import duckdb


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class _Types:
    """DuckDB's names of Arrow types (what ``CAST`` and typed nulls need), as DuckDB
    itself maps them, asked once per type."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.known: dict[str, str] = {}

    def __call__(self, f: pa.Field) -> str:
        key = str(f.type)
        if key not in self.known:
            self.known[key] = str(self.con.from_arrow(pa.schema([f]).empty_table()).types[0])
        return self.known[key]


def column_sql(ref: str, src: pa.Field, dst: pa.Field, types: _Types) -> str:
    """The SQL of the table's column ``dst`` from a file's column ``src`` (``ref``)."""
    if reads_as(src, dst):
        return ref
    if not (pa.types.is_struct(src.type) and pa.types.is_struct(dst.type)):
        return f"CAST({ref} AS {types(dst)})"
    kids = [src.type.field(i) for i in range(src.type.num_fields)]
    parts = []
    for i in range(dst.type.num_fields):
        d = dst.type.field(i)
        at = source_of(kids, d)
        if at < 0:
            value = f"CAST(NULL AS {types(d)})"
        else:
            value = column_sql(f"struct_extract({ref}, {_text(kids[at].name)})", kids[at], d, types)
        parts.append(f"{_ident(d.name)} := {value}")
    return f"CAST(CASE WHEN {ref} IS NULL THEN NULL ELSE struct_pack({', '.join(parts)}) END AS {types(dst)})"


def projection_sql(file_schema: pa.Schema, schema: pa.Schema, types: _Types) -> str:
    """The select list that turns rows of ``file_schema`` into rows of ``schema``."""
    file_fields = list(file_schema)
    out = []
    for f in schema:
        at = source_of(file_fields, f)
        value = (
            f"CAST(NULL AS {types(f)})"
            if at < 0
            else column_sql(_ident(file_fields[at].name), file_fields[at], f, types)
        )
        out.append(f"{value} AS {_ident(f.name)}")
    return ", ".join(out)


def _shape(file_schema: pa.Schema) -> tuple[tuple[str, str, tuple[int | None, ...]], ...]:
    """What makes two files read alike: names, types and ids at every depth."""
    return tuple((f.name, str(f.type), tuple(field_id(x) for x in walk([f]))) for f in file_schema)


def duckdb_relation(
    ctx: TableContext, as_of: int | datetime | None = None, connection: duckdb.DuckDBPyConnection | None = None
) -> duckdb.DuckDBPyRelation:
    """The base files of the context's snapshot as one relation of ``connection`` (the
    default connection: ``duckdb.sql`` sees it), read by field id (module docstring).

    Raises:
        InvalidConnectionError: ``connection`` is not a DuckDB connection.
        UnmergedLogsError: a live slice has log files (nothing is read).
        SnapshotExpiredError: a time-travel snapshot's files were cleaned.
    """
    import duckdb

    if connection is not None and not isinstance(connection, duckdb.DuckDBPyConnection):
        raise InvalidConnectionError(
            f"connection must be a DuckDB connection (duckdb.connect()), not {type(connection).__name__}"
        )
    con = connection if connection is not None else duckdb.default_connection()
    schema, storage, fmt = ctx.config.schema, ctx.storage, PARQUET_FORMAT
    plain: list[ds.ParquetFileFragment] = []
    groups: dict[object, tuple[pa.Schema, list[ds.ParquetFileFragment]]] = {}
    for s in live_bases(ctx, as_of):
        assert s.base is not None
        if not ctx.config.moved_names:
            plain.append(fragment(ctx, s))
            continue
        with reading(s.base.path):
            file_schema = open_parquet(storage, s.base.path, s.base.bytes).schema_arrow
        if reads_by_name(file_schema, schema):
            plain.append(fragment(ctx, s))
        else:
            groups.setdefault(_shape(file_schema), (file_schema.remove_metadata(), []))[1].append(fragment(ctx, s))
    parts = [con.from_arrow(ds.FileSystemDataset(plain, schema, fmt, storage.fs))] if plain else []
    types = _Types(con)
    for file_schema, fragments in groups.values():
        group = con.from_arrow(ds.FileSystemDataset(fragments, file_schema, fmt, storage.fs))
        parts.append(group.project(projection_sql(file_schema, schema, types)))
    if not parts:
        return con.from_arrow(schema.empty_table())
    out = parts[0]
    for p in parts[1:]:
        out = out.union(p)  # UNION ALL: rows of different files never merge
    return out
