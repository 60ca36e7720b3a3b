"""The Spark <-> Arrow type mapping, ``create_table`` from a Spark schema,
and ``check_columns``: a write's or a stream's Spark schema against the table's, on the
driver (where ``mergeSchema`` adds the new columns, before any task stages a row).

lakeline tables have Arrow schemas; Spark sees them through this mapping (built on
pyspark's own Arrow conversion, the one ``mapInArrow`` and the Python data source use,
so what lakeline declares is what Spark converts):

==============================  =======================================================
Spark                           Arrow (in a lakeline table)
==============================  =======================================================
Boolean, Byte, Short, Int, Long bool, int8, int16, int32, int64
Float, Double                   float32, float64
Decimal(p, s)                   decimal128(p, s)
String (also Char/Varchar)      string (large_string and dictionary<string> read as String)
Binary                          binary (large_binary reads as Binary)
Date                            date32
Timestamp (with time zone)      timestamp[us, tz=UTC]: an instant; shown in the session
                                time zone (``session()`` sets UTC)
TimestampNTZ                    timestamp[us] without time zone: a wall-clock value
Array, Struct, Map              list, struct, map (nested types map element-wise)
==============================  =======================================================

Nullability (``create_table``): the record-key columns keep Spark's nullability (a
write refuses a null key either way); every other column is created nullable, and every
field nested in it too: struct fields, list items (``containsNull``) and map values
(``valueContainsNull``); map keys are never null. Spark marks most computed columns
non-nullable (``lit``, ``concat``, ``F.struct``, ``F.array``, ``create_map``,
``collect_list``, ``timestamp_seconds``), which describes one DataFrame, not the rows
later writes bring. ``create_table(..., keep_not_null=True)`` keeps Spark's nullability
everywhere instead, nested fields included; a write then refuses a null where the table
declares none, and deletes, updates, compaction and clustering work on such a table as
on any other. The same mapping (Spark's nullability at every depth) types the rows a
write sends.

Arrow timestamps of other units (s, ms, ns) read as Spark microseconds (ns values are
truncated to microseconds on the way). Not supported, refused with a
``SchemaMismatchError`` naming the column: unsigned integers and float16 (Spark has no
such types), Spark's intervals (Parquet has no duration type), Variant and Null
columns, and Arrow types Spark has no equivalent for (unions, ...).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    CalendarIntervalType,
    CharType,
    DataType,
    DayTimeIntervalType,
    MapType,
    NullType,
    StructField,
    StructType,
    VarcharType,
    VariantType,
    YearMonthIntervalType,
)

from ..table.table import Table
from ..timeline.errors import InvalidOptionError, SchemaMismatchError
from ..timeline.table_config import TableConfig, TableType

_UTC = "UTC"


def to_spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of an Arrow schema.

    Raises:
        SchemaMismatchError: a column has a type Spark cannot hold (named).
    """
    return StructType([to_spark_field(f) for f in schema])


def to_spark_field(field: pa.Field) -> StructField:
    try:
        return StructField(field.name, from_arrow_type(field.type), field.nullable)
    except (TypeError, ValueError, AssertionError) as e:
        raise SchemaMismatchError(
            f"column {field.name!r} has type {field.type}, which Spark cannot hold: {_short(e)}"
        ) from None


def to_arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema of a Spark schema (timestamps with time zone as UTC instants).

    Raises:
        SchemaMismatchError: a column has a type lakeline cannot store (named).
    """
    return pa.schema([to_arrow_field(f) for f in schema.fields])


def to_arrow_field(field: StructField) -> pa.Field:
    try:
        typ = _to_arrow_type(field.dataType)
    except (TypeError, ValueError, AssertionError) as e:
        raise SchemaMismatchError(
            f"column {field.name!r} has Spark type {field.dataType.simpleString()}, "
            f"which lakeline cannot store: {_short(e)}"
        ) from None
    return pa.field(field.name, _large_to_plain(typ), field.nullable)


def _to_arrow_type(typ: DataType) -> pa.DataType:
    if isinstance(typ, (CharType, VarcharType)):
        return pa.string()
    if isinstance(typ, _REFUSED):
        # Parquet has no duration or interval type; a variant or null column holds nothing
        # lakeline can index, compare or merge.
        raise TypeError(f"{typ.simpleString()} is not supported")
    # Nested nullability as Spark declares it, at every depth (containsNull,
    # valueContainsNull, a struct field's nullable); create_table applies its rule after.
    if isinstance(typ, ArrayType):
        return pa.list_(pa.field("item", _to_arrow_type(typ.elementType), typ.containsNull))
    if isinstance(typ, MapType):
        value = pa.field("value", _to_arrow_type(typ.valueType), typ.valueContainsNull)
        return pa.map_(_to_arrow_type(typ.keyType), value)
    if isinstance(typ, StructType):
        return pa.struct([pa.field(f.name, _to_arrow_type(f.dataType), f.nullable) for f in typ.fields])
    return to_arrow_type(typ, timezone=_UTC)


_REFUSED = (DayTimeIntervalType, YearMonthIntervalType, CalendarIntervalType, VariantType, NullType)


def spark_readable(schema: pa.Schema) -> pa.Schema:
    """``schema`` as Spark reads it back from Arrow: what a slice's rows are cast to
    before they cross into Spark (timestamps in microseconds, no unsigned types)."""
    return to_arrow_schema(to_spark_schema(schema))


def _large_to_plain(typ: pa.DataType) -> pa.DataType:
    """pyspark may map to large types; lakeline tables use the plain ones."""
    if pa.types.is_large_string(typ):
        return pa.string()
    if pa.types.is_large_binary(typ):
        return pa.binary()
    if pa.types.is_large_list(typ) or pa.types.is_list(typ):
        return pa.list_(typ.value_field.with_type(_large_to_plain(typ.value_type)))
    if pa.types.is_struct(typ):
        return pa.struct([f.with_type(_large_to_plain(f.type)) for f in typ])
    if pa.types.is_map(typ):
        return pa.map_(_large_to_plain(typ.key_type), typ.item_field.with_type(_large_to_plain(typ.item_type)))
    return typ


def _nullable_type(typ: pa.DataType) -> pa.DataType:
    """``typ`` with every nested field nullable: struct fields, list items, map values
    (a map's keys never are, in Arrow as in Spark)."""
    if pa.types.is_list(typ):
        return pa.list_(typ.value_field.with_type(_nullable_type(typ.value_type)).with_nullable(True))
    if pa.types.is_struct(typ):
        return pa.struct([f.with_type(_nullable_type(f.type)).with_nullable(True) for f in typ])
    if pa.types.is_map(typ):
        value = typ.item_field.with_type(_nullable_type(typ.item_type)).with_nullable(True)
        return pa.map_(typ.key_field.with_type(_nullable_type(typ.key_type)), value)
    return typ


def table_schema(struct: StructType, record_key: Any = None, keep_not_null: bool = False) -> pa.Schema:
    """The Arrow schema :func:`create_table` gives a table from a Spark schema: the
    record-key columns as Spark declares them; every other column nullable, and every
    nested field in it too (struct fields, list items, map values), unless
    ``keep_not_null``: then Spark's nullability is kept everywhere.

    Raises:
        SchemaMismatchError: a column's type cannot be stored (named).
    """
    keys = (
        {record_key}
        if isinstance(record_key, str)
        else set(record_key)
        if isinstance(record_key, list | tuple)
        else set()
    )
    fields = [to_arrow_field(f) for f in struct.fields]
    if keep_not_null:
        return pa.schema(fields)
    return pa.schema([f if f.name in keys else f.with_type(_nullable_type(f.type)).with_nullable(True) for f in fields])


def _short(error: BaseException) -> str:
    return str(error).splitlines()[0][:200]


def create_table(
    path: str | os.PathLike[str],
    df_or_schema: DataFrame | StructType,
    record_key: Any = "id",
    ordering_field: str | None = None,
    partition_by: list[str] | None = None,
    table_type: str = TableType.COW,
    properties: dict[str, Any] | None = None,
    timeline: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    keep_not_null: bool = False,
) -> Table:
    """``Table.create`` from a Spark schema (or a DataFrame's): the table's Arrow schema
    follows the mapping of this module. Nothing is written from a DataFrame; write its
    rows with :func:`lakeline.spark.write`.

    Columns other than the record key are created nullable, nested fields included
    (:func:`table_schema`): Spark declares most computed columns non-nullable
    (``lit``, ``concat``, ``F.struct``, ...), which says nothing about the rows a later
    write brings. ``keep_not_null=True`` keeps Spark's nullability everywhere; a write
    of a null there is then refused (``SchemaMismatchError``).

    Raises:
        SchemaMismatchError: a column's type cannot be stored (named).
        InvalidOptionError: ``keep_not_null`` is not a bool.
        whatever ``Table.create`` raises (TableExistsError, UnknownColumnError, ...).
    """
    struct = df_or_schema.schema if isinstance(df_or_schema, DataFrame) else df_or_schema
    if not isinstance(struct, StructType):
        raise SchemaMismatchError(f"create_table needs a DataFrame or a StructType, not {type(struct).__name__}")
    if not isinstance(keep_not_null, bool):  # "false" would keep them
        raise InvalidOptionError(f"keep_not_null is True or False, not {keep_not_null!r:.40}")
    return Table.create(
        path,
        table_schema(struct, record_key, keep_not_null),
        record_key=record_key,
        ordering_field=ordering_field,
        partition_by=partition_by,
        table_type=table_type,
        properties=properties,
        timeline=timeline,
        storage_options=storage_options,
    )


def check_columns(
    table: Table, schema: StructType, operation: str, merge_schema: bool | None = None, changes: bool = True
) -> TableConfig:
    """The columns a write or a stream brings, against the table, on the driver before
    any task runs: the same rules as the rows of a local write (``prepare_rows``: every
    table column, castable types; ``prepare_keys`` for a delete), applied to no rows. A
    stream whose columns do not fit would otherwise fail at its first commit, after its
    tasks ran.

    Columns the table lacks are added when ``merge_schema`` (Delta's ``mergeSchema``;
    None: the table's ``write.schema-evolution``) says so, here, before a row is staged,
    through the local writes' own step (``add_columns``: nullable, at the end, fresh
    field ids, one ``add-columns`` schema instant), so every task conforms its rows to a
    schema that already has them; new fields inside struct columns likewise, through
    ``update_schema``'s nested ``add_column`` (:func:`new_struct_fields`, a schema
    instant of their own). A type the table holds narrower is never widened here
    (``update_column`` does that, on purpose: a DataFrame's types are often incidental,
    Python ints become ``long``). ``changes``: an upsert may carry a CDC batch's ``_op``
    column (the data source's sink).

    Returns:
        The configuration the write's rows are conformed to: the table's, with the
        columns added.

    Raises:
        InvalidOptionError: ``merge_schema`` is not a bool (nor None).
        SchemaMismatchError: naming the column; a new column whose name differs from
            another's only in case (Spark resolves names case-insensitively). Nothing is
            written, no schema instant either.
        CommitConflictError: another schema instant landed while the columns were being
            added; nothing was written.
    """
    from ..table.schema.change import add_columns
    from ..table.write.records import prepare_keys, prepare_rows
    from .source_writer import CHANGE_COLUMN

    if merge_schema is not None and not isinstance(merge_schema, bool):  # "false" would be true
        raise InvalidOptionError(f"merge_schema is True, False or None, not {merge_schema!r:.40}")
    cfg = table.config
    rows = to_arrow_schema(schema).empty_table()
    if operation == "delete":
        prepare_keys(rows, cfg)
        return cfg
    if changes and operation == "upsert" and CHANGE_COLUMN in rows.column_names:
        rows = rows.drop_columns([CHANGE_COLUMN])  # a CDC batch's change column
    evolve = cfg.props.write_schema_evolution == "add-columns" if merge_schema is None else merge_schema
    new = [n for n in rows.column_names if n not in cfg.schema.names]
    nested = new_struct_fields(cfg.schema, rows.schema)
    if (new or nested) and not evolve:
        raise SchemaMismatchError(
            f"columns {new + [p for p, _ in nested]} are not in the table's schema {cfg.schema.names}; "
            "option('mergeSchema', 'true') (lakeline.spark.write(..., merge_schema=True)) adds them"
        )
    if nested:
        # Fields inside struct columns go through the nested add_column step (fresh ids,
        # nullable, at the end of their struct), one schema instant of their own.
        with table.update_schema() as u:
            for path, typ in nested:
                u.add_column(path, typ)
        cfg = table.config
    _, new_fields = prepare_rows(rows, cfg, evolve=evolve)
    if not new_fields:
        return cfg
    _refuse_case_twins(cfg.schema.names + [f.name for f in new_fields], [f.name for f in new_fields])
    return add_columns(table.log, cfg, new_fields)


def new_struct_fields(
    table: pa.Schema | pa.DataType, rows: pa.Schema | pa.DataType, at: str = ""
) -> list[tuple[str, pa.DataType]]:
    """The fields a DataFrame's struct columns hold that the table's struct columns of
    the same name lack, as (dotted path, type), through structs at any depth (not
    inside lists or maps, which :func:`~lakeline.table.schema.nested.struct_path` does
    not address: such a DataFrame stays ``SchemaMismatchError`` in the conforming).

    Raises:
        SchemaMismatchError: a new field differs from a sibling only in case.
    """
    mine = list(table) if isinstance(table, pa.Schema) else [table.field(i) for i in range(table.num_fields)]
    theirs = list(rows) if isinstance(rows, pa.Schema) else [rows.field(i) for i in range(rows.num_fields)]
    by_name = {f.name: f for f in mine}
    out: list[tuple[str, pa.DataType]] = []
    for f in theirs:
        have = by_name.get(f.name)
        if have is None:
            if at:  # a top-level column the table lacks is add_columns' (check_columns)
                _refuse_case_twins([*by_name, f.name], [f.name])
                out.append((at + f.name, f.type))
            continue
        if pa.types.is_struct(have.type) and pa.types.is_struct(f.type):
            out += new_struct_fields(have.type, f.type, f"{at}{f.name}.")
    return out


def _refuse_case_twins(names: list[str], new: list[str]) -> None:
    """Spark resolves column names case-insensitively (``spark.sql.caseSensitive`` is off
    by default): a table with ``id`` and ``ID`` could be written but no query could name
    either, so a new column may not differ from another only in case."""
    for name in new:
        twins = [n for n in names if n != name and n.lower() == name.lower()]
        if twins:
            raise SchemaMismatchError(
                f"new column {name!r} differs from column {twins[0]!r} only in case; Spark could not tell them apart"
            )
