"""Incoming rows: conforming them to the table, checking them, deduplicating them.

Everything here runs before anything is written, so bad input (a schema that does not
match, a null record key, an unknown column) is refused with a typed error and leaves
no trace on the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ...timeline.errors import InvalidFilterError, LakelineError, NullKeyError, SchemaMismatchError, UnknownColumnError
from ...timeline.field_ids import field_id, typed_nulls, valid_nulls
from ...timeline.table_config import TableConfig, check_column_names, refuse_duplicates
from ...timeline.view.file_group import MAX_FOLDER_BYTES, partition_path
from ..merge_engine import MergeEngine
from .dedupe import POS, deduplicate

# Column names lakeline adds to user rows. The ones on disk in log files (``_op``,
# ``_seq``, ``_base_pos``) are reserved (table_config.RESERVED_COLUMNS); the ones only
# used in memory carry the reserved prefix (table_config.INTERNAL_PREFIX), so a user
# column can never collide with either (POS, a row's position in memory, is dedupe's).
OP = "_op"
SEQ = "_seq"
#: A log row's position in its slice's base file: the row its key had there, when the
#: writer's tagging found the key live in that base (null otherwise). The log file names
#: that base in its metadata (:data:`BASE_FILE_KEY`); readers drop those rows by position.
BASE_POS = "_base_pos"
BASE_FILE_KEY = b"lakeline.base-file"


def points_into(log: pa.Table, base_file: str) -> bool:
    """Whether the rows of a log file (as read, with its schema metadata) hold base
    positions into ``base_file`` (:data:`BASE_POS`, :data:`BASE_FILE_KEY`)."""
    return BASE_POS in log.column_names and (log.schema.metadata or {}).get(BASE_FILE_KEY) == base_file.encode()


OP_UPSERT = "U"
OP_DELETE = "D"


def to_arrow_table(data: Any) -> pa.Table:
    """Accept a pa.Table, RecordBatch(Reader), pandas.DataFrame, or any Arrow C stream or
    array (``__arrow_c_stream__`` / ``__arrow_c_array__``).

    Raises:
        SchemaMismatchError: something else, or a column name that appears twice (which
            column would be the table's?).
    """
    table = _as_table(data)
    refuse_duplicates(table.column_names, "data")
    return table


def _as_table(data: Any) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if type(data).__module__.startswith("pandas"):
        return pa.Table.from_pandas(data, preserve_index=False)
    # Anything that speaks the Arrow PyCapsule interface (Polars, DuckDB, a lakeline Scan...).
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data)
    if hasattr(data, "__arrow_c_array__"):
        return pa.Table.from_batches([pa.record_batch(data)])
    raise SchemaMismatchError(
        "data must be a pyarrow Table, RecordBatchReader, pandas DataFrame or an object with "
        f"__arrow_c_stream__ / __arrow_c_array__, not {type(data).__name__}"
    )


def castable(src: pa.DataType, dst: pa.DataType) -> bool:
    """Whether values of ``src`` become ``dst`` without loss: the same family, never
    narrower; nested types (struct, list, map) when every part is castable.

    Nullability never refuses here: a field declared non-nullable in ``src`` where ``dst``
    allows nulls loses nothing (Spark declares ``collect_list`` items, ``F.struct(lit(..))``
    fields and map values so), and a nullable ``src`` field where ``dst`` is not is
    checked on the values (:func:`nulls_where_required`), as a top-level column is.
    """
    if src == dst:
        return True
    if pa.types.is_struct(src) or pa.types.is_struct(dst):
        return _struct_castable(src, dst)
    if pa.types.is_map(src) or pa.types.is_map(dst):
        return (
            pa.types.is_map(src)
            and pa.types.is_map(dst)
            and castable(src.key_type, dst.key_type)
            and castable(src.item_type, dst.item_type)
        )
    if _is_list(src) or _is_list(dst):
        return _is_list(src) and _is_list(dst) and castable(src.value_type, dst.value_type)
    same_family = (
        (
            pa.types.is_integer(src)
            and pa.types.is_integer(dst)
            and src.bit_width <= dst.bit_width
            and (pa.types.is_signed_integer(dst) or not pa.types.is_signed_integer(src))
        )
        or (pa.types.is_floating(src) and pa.types.is_floating(dst) and src.bit_width <= dst.bit_width)
        or (pa.types.is_integer(src) and pa.types.is_floating(dst))
        or ({str(src), str(dst)} <= {"string", "large_string", "string_view"})
        or ({str(src), str(dst)} <= {"binary", "large_binary"})
        or (pa.types.is_dictionary(src) and castable(src.value_type, dst))
        or (pa.types.is_null(src))
    )
    return same_family


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t)


def _struct_castable(src: pa.DataType, dst: pa.DataType) -> bool:
    """Structs match by field name (Arrow's struct cast does): each ``src`` field must
    be castable to the ``dst`` field of its name; a ``dst`` field ``src`` lacks must be
    nullable (it reads null); a ``src`` field ``dst`` lacks is refused (it would be lost)."""
    if not (pa.types.is_struct(src) and pa.types.is_struct(dst)):
        return False
    theirs = {src.field(i).name: src.field(i) for i in range(src.num_fields)}
    ours = {dst.field(i).name: dst.field(i) for i in range(dst.num_fields)}
    if len(theirs) != src.num_fields or len(ours) != dst.num_fields or set(theirs) - set(ours):
        return False
    return all(castable(theirs[n].type, f.type) if n in theirs else f.nullable for n, f in ours.items())


def nulls_where_required(arr: pa.Array, t: pa.DataType, path: str) -> str | None:
    """The path of a nested field that ``t`` declares non-nullable but ``arr`` holds a
    null in (a null under a null parent is no value and does not count), or None.
    Vectorised per nested level: a null count, a filter where a parent has nulls."""
    for f, child, where in _children(arr, t, path):
        if not f.nullable and child.null_count:
            return where
        found = nulls_where_required(child, f.type, where)
        if found:
            return found
    return None


def _children(arr: pa.Array, t: pa.DataType, path: str) -> list[tuple[pa.Field, pa.Array, str]]:
    """The child arrays of a nested array of type ``t``, each with its field and path,
    holding only the values under valid parents (none for a type that does not nest)."""
    if pa.types.is_struct(t):
        valid = arr.is_valid() if arr.null_count else None
        fields = [t.field(i) for i in range(t.num_fields)]
        children = [arr.field(i) if valid is None else arr.field(i).filter(valid) for i in range(t.num_fields)]
        return [(f, child, f"{path}.{f.name}") for f, child in zip(fields, children)]
    if pa.types.is_map(t):
        # Only the entries this (maybe sliced) array's slots hold; Arrow builds null map
        # slots empty, so the offsets' range is exactly the live entries.
        start, end = arr.offsets[0].as_py(), arr.offsets[-1].as_py()
        keys, items = arr.keys.slice(start, end - start), arr.items.slice(start, end - start)
        return [(f, child, f"{path}.{f.name}") for f, child in ((t.key_field, keys), (t.item_field, items))]
    if _is_list(t):
        return [(t.value_field, arr.flatten(), f"{path}[]")]
    return []


def _requires_non_null(t: pa.DataType) -> bool:
    """Whether a nested field anywhere in ``t`` is declared non-nullable (then the
    values are checked, :func:`nulls_where_required`)."""
    if pa.types.is_struct(t):
        return any(not t.field(i).nullable or _requires_non_null(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return any(not f.nullable or _requires_non_null(f.type) for f in (t.key_field, t.item_field))
    if _is_list(t):
        return not t.value_field.nullable or _requires_non_null(t.value_type)
    return False


def same_columns(a: pa.Schema, b: pa.Schema) -> bool:
    """Whether two table schemas have the same columns: names, types and field ids in
    order (rows conformed to one are conformed to the other)."""
    return len(a) == len(b) and all(
        x.name == y.name and x.type == y.type and field_id(x) == field_id(y) for x, y in zip(a, b)
    )


def conform(data: Any, config: TableConfig, allow_new_columns: bool = False) -> tuple[pa.Table, list[pa.Field]]:
    """Cast ``data`` to the table's schema.

    Columns may come in any order; each must be losslessly castable to the table's type.

    Returns:
        The conformed table and the new (nullable, trailing) fields it carried, which are
        only accepted when ``allow_new_columns`` is true.

    Raises:
        SchemaMismatchError: a column is missing, has an incompatible type, appears twice,
            or is new while schema evolution is off.
        ReservedColumnError: a new column has a reserved name (as at ``Table.create``).
    """
    table = to_arrow_table(data)
    schema = config.schema
    names = set(table.column_names)
    missing = [f.name for f in schema if f.name not in names]
    if missing:
        raise SchemaMismatchError(f"data lacks columns {missing} of the table schema {schema.names}")
    extra = [table.schema.field(n) for n in table.column_names if n not in set(schema.names)]
    if extra and not allow_new_columns:
        raise SchemaMismatchError(
            f"data has columns {[f.name for f in extra]} that the table does not "
            "(set write.schema-evolution=add-columns to accept new nullable columns)"
        )
    if extra:
        check_column_names(schema.names + [f.name for f in extra], "the schema with the new columns")
    cols = [conform_column(table.column(f.name), f) for f in schema]
    for f in extra:
        cols.append(table.column(f.name))
    out = pa.Table.from_arrays(cols, schema=pa.schema(list(schema) + [f.with_nullable(True) for f in extra]))
    return out, [f.with_nullable(True) for f in extra]


def conform_column(col: pa.ChunkedArray, f: pa.Field) -> pa.ChunkedArray:
    """``col`` cast to the field's type, when that is lossless.

    Raises:
        SchemaMismatchError: another type family (strings for integer keys, say), a
            narrowing cast, a value the cast refuses, or nulls in a non-nullable field.
    """
    if not castable(col.type, f.type):
        raise SchemaMismatchError(f"column {f.name!r} has type {col.type}, the table needs {f.type}")
    col = valid_nulls(col, col.type)  # a null Spark put under a null struct, where none may be
    try:
        col = col.cast(f.type) if col.type != f.type else col
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaMismatchError(f"column {f.name!r} cannot be cast to {f.type}: {e}") from None
    if not f.nullable and col.null_count:
        raise SchemaMismatchError(f"column {f.name!r} is not nullable but holds nulls")
    if _requires_non_null(f.type):
        for chunk in col.chunks:
            where = nulls_where_required(chunk, f.type, f.name)
            if where:
                raise SchemaMismatchError(f"field {where!r} is not nullable in the table but holds nulls")
    return col


def constant(value: str, n: int) -> pa.Array:
    """A string column of ``n`` copies of ``value``, built from raw buffers: no per-row
    Python objects (this runs for every row written or merged)."""
    data = value.encode()
    if data:
        offsets = np.arange(0, (n + 1) * len(data), len(data), dtype=np.int32)[: n + 1]
    else:
        offsets = np.zeros(n + 1, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])


def delete_records(keys: pa.Table, schema: pa.Schema, record_key: tuple[str, ...]) -> pa.Table:
    """The records that delete ``keys`` (checked: :func:`prepare_keys`) from a table of
    ``schema``: every column of the schema, the key columns from ``keys``, the others
    null. Those are declared nullable here, so a table that keeps non-nullable columns
    never needs a null written into one: a log file or a rewrite's merge takes these
    rows under their own schema, and they are gone once merged. Nested fields keep
    their types, their non-nullable slots filled under each null
    (:func:`~lakeline.timeline.field_ids.typed_nulls`), so every cast to the table's
    types accepts them. One builder for every planner (delete, a change batch's
    deletes, MERGE's)."""
    fields = [f if f.name in record_key else f.with_nullable(True) for f in schema]
    cols = [
        keys.column(f.name).cast(f.type) if f.name in record_key else typed_nulls(keys.num_rows, f.type) for f in schema
    ]
    return pa.Table.from_arrays(cols, schema=pa.schema(fields))


def check_keys(table: pa.Table, key: tuple[str, ...]) -> None:
    """Raises NullKeyError when a record-key column holds a null."""
    for k in key:
        n = table.column(k).null_count
        if n:
            raise NullKeyError(f"record key column {k!r} holds {n} null value(s)")


def split_by_partition(table: pa.Table, columns: tuple[str, ...]) -> dict[str, pa.Table]:
    """Rows grouped by their Hive partition folder ("" for an unpartitioned table).

    Rows are grouped by their partition values; each distinct value tuple gets its own
    folder (:func:`partition_path` is one-to-one), and two tuples meeting in one folder
    would be refused rather than merged, so no group can ever replace another.

    Raises:
        SchemaMismatchError: a partition folder name would be longer than
            :data:`MAX_FOLDER_BYTES` (the file system would refuse it mid-write).
    """
    if not columns:
        return {"": table}
    if table.num_rows == 0:
        return {}
    t = table.select(list(columns)).append_column(POS, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    groups = t.group_by(list(columns), use_threads=False).aggregate([(POS, "list")])
    out: dict[str, pa.Table] = {}
    owner: dict[str, tuple[object, ...]] = {}
    values = [groups.column(c).to_pylist() for c in columns]
    rows = groups.column(f"{POS}_list")
    for i in range(groups.num_rows):
        tup = tuple(v[i] for v in values)
        path = partition_path(columns, tup)
        if path in owner:
            raise SchemaMismatchError(
                f"partition values {owner[path]!r} and {tup!r} both map to folder {path!r}; nothing was written"
            )
        long = [p for p in path.split("/") if len(p.encode()) > MAX_FOLDER_BYTES]
        if long:
            raise SchemaMismatchError(
                f"partition folder {long[0][:60]!r}... would be {len(long[0].encode())} bytes long (at most "
                f"{MAX_FOLDER_BYTES}: a file system limit); shorten the partition value, nothing was written"
            )
        owner[path] = tup
        out[path] = table.take(rows[i].values)
    return out


def check_columns(config: TableConfig, columns: Iterable[str] | None) -> list[str] | None:
    """Raises UnknownColumnError for a column the table does not have."""
    if columns is None:
        return None
    cols = list(columns)
    unknown = [c for c in cols if c not in config.schema.names]
    if unknown:
        raise UnknownColumnError(f"unknown column(s) {unknown}; the table has {config.schema.names}")
    return cols


def check_filter(schema: pa.Schema, expr: pc.Expression | None) -> None:
    """Refuse a filter that names unknown columns or cannot be evaluated.

    Raises:
        UnknownColumnError: a field reference is not in the schema.
        InvalidFilterError: not an Expression, or a type error (e.g. string vs int).
    """
    if expr is None:
        return
    if not isinstance(expr, pc.Expression):
        raise InvalidFilterError(f"filter must be a pyarrow.compute.Expression, not {type(expr).__name__}")
    with evaluation_errors(f"filter {expr}", InvalidFilterError):
        ds.dataset(schema.empty_table()).to_table(filter=expr)


@contextmanager
def evaluation_errors(what: str, error: type[LakelineError]) -> Iterator[None]:
    """Arrow's errors evaluating an expression (``what``) over the table's schema, as
    typed ones: a column the table lacks is UnknownColumnError, anything else ``error``."""
    try:
        yield
    except pa.ArrowInvalid as e:
        if "No match for FieldRef" in str(e):
            raise UnknownColumnError(f"{what} names a column the table does not have: {e}") from None
        raise error(f"{what} cannot be evaluated: {e}") from None
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise error(f"{what} cannot be evaluated: {e}") from None


def prepare_rows(
    data: Any, cfg: TableConfig, dedupe: bool = True, evolve: bool | None = None
) -> tuple[pa.Table, list[pa.Field]]:
    """Rows of a write, conformed to the table, keys checked, made versions of the table's
    merge engine and folded by record identity (``dedupe``), and the new columns they
    bring (``write.schema-evolution``, unless ``evolve`` says otherwise: a replay after
    a concurrent schema change adds no column).

    Raises:
        SchemaMismatchError, NullKeyError: bad input (nothing is written).
    """
    if evolve is None:
        evolve = cfg.props.write_schema_evolution == "add-columns"
    rows, new_fields = conform(data, cfg, allow_new_columns=evolve)
    check_keys(rows, cfg.record_key)
    engine = MergeEngine.of(cfg)
    rows = engine.prepare(rows)
    # Record identity is (partition values, key): one key in two partitions is two records.
    ident = tuple(dict.fromkeys(cfg.partition_by + cfg.record_key)) if cfg.has_key else ()
    rows = deduplicate(rows, ident, cfg.ordering_field, engine) if dedupe else rows
    return rows, new_fields


def prepare_keys(keys: Any, cfg: TableConfig) -> pa.Table:
    """The keys of a delete: the record-key columns (and the partition columns given),
    in the table's types.

    Raises:
        SchemaMismatchError, NullKeyError: key columns missing, of another type than the
            table's (no cast across types: ``1`` never deletes ``"1"``) or null.
    """
    table = to_arrow_table(keys)
    missing = [k for k in cfg.record_key if k not in table.column_names]
    if missing:
        raise SchemaMismatchError(f"delete needs the record-key columns {missing}")
    cols = [c for c in table.column_names if c in cfg.record_key or c in cfg.partition_by]
    # Same typing rule as upserts: keys of another type are refused, never cast
    # (an int key cast to a string column would silently delete nothing).
    table = pa.Table.from_arrays(
        [conform_column(table.column(c), cfg.schema.field(c).with_nullable(True)) for c in cols], names=cols
    )
    check_keys(table, cfg.record_key)
    return table
