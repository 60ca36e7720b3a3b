"""``df.write.format("lakeline")``: append with the ``operation`` option, overwrite mode,
staged output committed once, and an abort that never undoes a landed commit; Spark as
its users write it: unknown options refused, SQL through a temporary view (a catalog
table is refused, never a raw ``KeyError``), and lakeline's error raised as itself."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.spark.source import LakelineDataSource
from lakeline.spark.source_writer import LakelineWriter, Staged
from lakeline.table import Table
from lakeline.timeline.errors import (
    DuplicateKeyError,
    InvalidOptionError,
    SchemaMismatchError,
    TableNotFoundError,
    UnsupportedOperationError,
)

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def rows_of(path: str) -> list[tuple[int, str]]:
    t = Table.open(path).to_arrow()
    return sorted(zip(t.column("id").to_pylist(), t.column("v").to_pylist()))


def test_dataframe_writer_operations(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    Table.create(path, SCHEMA, record_key="id", table_type="mor")
    spark.createDataFrame([(i, "a") for i in range(100)], "id long, v string").write.format("lakeline").mode(
        "append"
    ).save(path)
    assert rows_of(path) == [(i, "a") for i in range(100)]
    spark.createDataFrame([(i, "b") for i in range(50, 150)], "id long, v string").write.format("lakeline").option(
        "operation", "upsert"
    ).mode("append").save(path)
    assert rows_of(path) == [(i, "a") for i in range(50)] + [(i, "b") for i in range(50, 150)]
    spark.createDataFrame([(i,) for i in range(0, 150, 2)], "id long").write.format("lakeline").option(
        "operation", "delete"
    ).mode("append").save(path)
    assert [k for k, _ in rows_of(path)] == list(range(1, 150, 2))
    spark.createDataFrame([(7, "z")], "id long, v string").write.format("lakeline").mode("overwrite").save(path)
    assert rows_of(path) == [(7, "z")]
    t = Table.open(path)
    assert [i.metadata["operation"] for i in t.timeline.completed() if i.action.writes_data] == [
        "insert",
        "upsert",
        "delete",
        "overwrite",
    ]
    # A failing commit (a key the table holds) leaves the table and no staged file behind.
    with pytest.raises(DuplicateKeyError):
        spark.createDataFrame([(7, "again")], "id long, v string").write.format("lakeline").mode("append").save(path)
    assert rows_of(path) == [(7, "z")]
    staging = tmp_path / "t" / ".lakeline" / "staging"
    assert not staging.exists() or not any(p.is_file() for p in staging.rglob("*"))
    with pytest.raises(UnsupportedOperationError):
        spark.createDataFrame([(1, "x")], "id long, v string").write.format("lakeline").option(
            "operation", "merge"
        ).mode("append").save(path)


def test_abort_after_a_landed_commit_never_undoes_it(tmp_path: Path) -> None:
    """Spark may call abort after commit raised late: only staged input goes away."""
    path = str(tmp_path / "t")
    Table.create(path, SCHEMA, record_key="id")
    writer = LakelineWriter(path, {"operation": "upsert"}, overwrite=False)
    messages: list[Any] = [
        writer.write(iter([pa.record_batch({"id": [1, 2], "v": ["a", "b"]})])),
        writer.write(iter([])),
        writer.write(iter([pa.record_batch({"id": [3], "v": ["c"]})])),
    ]
    assert messages[1] == Staged(None, 0)
    # A staged file no message names (a failed attempt) is never read.
    stray = LakelineWriter.__new__(LakelineWriter)
    stray.__dict__.update(writer.__dict__)
    stray.write(iter([pa.record_batch({"id": [99], "v": ["failed attempt"]})]))
    writer.commit(messages)
    writer.abort(messages)
    assert rows_of(path) == [(1, "a"), (2, "b"), (3, "c")]
    assert not (tmp_path / "t" / writer.staging).exists()


def test_operation_option_is_checked() -> None:
    from lakeline.spark.source_writer import write_operation

    assert write_operation({}, False) == "insert"
    assert write_operation({"operation": "delete"}, False) == "delete"
    assert write_operation({}, True) == "overwrite"
    with pytest.raises(UnsupportedOperationError):
        write_operation({"operation": "upsert"}, True)
    with pytest.raises(UnsupportedOperationError):
        write_operation({"operation": "overwrite"}, False)


def last_event(path: str) -> int:
    """The timeline's newest event: a refused write appends none (not even ``requested``)."""
    return Table.open(path).timeline.last_seq


def test_a_refused_write_raises_lakelines_error_first_and_writes_nothing(spark: Any, tmp_path: Path) -> None:
    """The error of the data source's commit (a Python worker of Spark's) reached the
    caller as ``AnalysisException: [PYTHON_DATA_SOURCE_ERROR] ... Traceback``, its name
    on the last lines; now it is the lakeline error, name and message first."""
    path = str(tmp_path / "t")
    Table.create(path, SCHEMA, record_key="id").insert(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    before = last_event(path)
    with pytest.raises(DuplicateKeyError) as e:
        spark.createDataFrame([(2, "again")], "id long, v string").write.format("lakeline").mode("append").save(path)
    text = "".join(traceback.format_exception_only(e.value))
    assert text.startswith("lakeline.timeline.errors.DuplicateKeyError: insert carries 1 key(s)"), text
    assert "SQLSTATE" not in str(e.value) and "Traceback" not in str(e.value)
    assert any("PYTHON_DATA_SOURCE_ERROR" in n for n in e.value.__notes__)  # Spark's line, kept as a note
    assert last_event(path) == before


def test_unknown_write_options_are_refused_before_anything_is_written(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    Table.create(path, SCHEMA, record_key="id").insert(pa.table({"id": [1], "v": ["a"]}))
    before = last_event(path)
    df = spark.createDataFrame([(5, "x")], "id long, v string")
    for name in ("versionAsOf", "as_of", "overwriteSchema", "operaton"):  # a read's, Delta's, a typo
        with pytest.raises(InvalidOptionError) as e:
            df.write.format("lakeline").option(name, "1").mode("append").save(path)
        assert name.lower() in str(e.value) and "operation" in str(e.value)
    assert last_event(path) == before
    assert not (tmp_path / "t" / ".lakeline" / "staging").exists() or not any(
        p.is_file() for p in (tmp_path / "t" / ".lakeline" / "staging").rglob("*")
    )
    # Options a write takes, in Spark's lower case: the write lands.
    df.write.format("lakeline").options(OPERATION="upsert").mode("append").save(path)
    assert rows_of(path) == [(1, "a"), (5, "x")]
    # Streams: the sink takes Spark's checkpointLocation and txn_app_id, nothing else.
    schema = spark.createDataFrame([], "id long, v string").schema
    sink = {"path": path, "checkpointlocation": str(tmp_path / "ck")}
    LakelineDataSource({**sink, "txn_app_id": "a"}).streamWriter(schema, False)
    with pytest.raises(InvalidOptionError, match="maxfilespertrigger"):
        LakelineDataSource({**sink, "maxfilespertrigger": "1"}).streamWriter(schema, False)


def test_sql_through_a_temporary_view_and_catalog_tables_refused(spark: Any, tmp_path: Path) -> None:
    """pyspark 4.3 hands a Python data source the options of a temporary view on every
    read and write, but a catalog table's none: ``CREATE TABLE ... USING lakeline``
    "succeeded", then reads failed and ``INSERT`` raised ``KeyError: 'path'``."""
    path = str(tmp_path / "t")
    Table.create(path, SCHEMA, record_key="id").insert(pa.table({"id": [1], "v": ["a"]}))
    view = "lakeline_sql_view"
    spark.sql(f"CREATE TEMPORARY VIEW {view} USING lakeline OPTIONS (path '{path}')")
    try:
        spark.sql(f"INSERT INTO {view} VALUES (2, 'b'), (3, 'c')")
        assert rows_of(path) == [(1, "a"), (2, "b"), (3, "c")]
        got = spark.sql(f"SELECT id, v FROM {view} WHERE id > 1 ORDER BY id").collect()
        assert [(r.id, r.v) for r in got] == [(2, "b"), (3, "c")]
        with pytest.raises(DuplicateKeyError):
            spark.sql(f"INSERT INTO {view} VALUES (3, 'again')")
        spark.sql(f"INSERT OVERWRITE {view} VALUES (9, 'z')")
        assert rows_of(path) == [(9, "z")]
    finally:
        spark.sql(f"DROP VIEW IF EXISTS {view}")
    before = last_event(path)
    # Without a column list Spark asks the data source for the schema: refused there.
    with pytest.raises(UnsupportedOperationError, match="CREATE TEMPORARY VIEW"):
        spark.sql(f"CREATE TABLE lakeline_sql_t USING lakeline LOCATION '{path}'")
    assert not spark.catalog.tableExists("lakeline_sql_t")
    # With one it asks nothing: the table is recorded, and its reads and writes, which
    # Spark hands no path, are refused saying what to use instead.
    spark.sql(f"CREATE TABLE lakeline_sql_t2 (id long, v string) USING lakeline LOCATION '{path}'")
    try:
        with pytest.raises(TableNotFoundError, match="CREATE TEMPORARY VIEW"):
            spark.table("lakeline_sql_t2").collect()
        with pytest.raises(TableNotFoundError, match="create_table"):
            spark.sql("INSERT INTO lakeline_sql_t2 VALUES (4, 'd')")
    finally:
        spark.sql("DROP TABLE IF EXISTS lakeline_sql_t2")
    assert last_event(path) == before and rows_of(path) == [(9, "z")]


def test_hadoop_file_uris_and_no_path(tmp_path: Path) -> None:
    """Spark spells a local location ``file:/data/t`` (a catalog's, a view's); no path at
    all is what a catalog table hands the data source, refused saying what to use."""
    from lakeline.spark.source import open_table

    path = str(tmp_path / "t")
    Table.create(path, SCHEMA, record_key="id")
    assert open_table(f"file:{path}", {}).path == Table.open(path).path
    with pytest.raises(TableNotFoundError, match="CREATE TEMPORARY VIEW"):
        open_table(None, {})


def test_columns_that_do_not_fit_are_refused_before_any_task_runs(spark: Any, tmp_path: Path) -> None:
    """A write or a stream whose columns do not fit the table (a type of another family,
    a column missing, a column the table lacks) is ``SchemaMismatchError`` when Spark
    asks for the writer, on the driver: no task stages a row, no event is appended, and
    a stream fails at its start rather than at its first commit."""
    path = str(tmp_path / "t")
    Table.create(path, SCHEMA, record_key="id").insert(pa.table({"id": [1], "v": ["a"]}))
    before = last_event(path)
    bad = {
        "v long": "id long, v long",  # string column given numbers
        "no v": "id long",
        "extra": "id long, v string, w string",
    }
    source = {"path": path, "checkpointlocation": str(tmp_path / "ck")}
    for what, ddl in bad.items():
        schema = spark.createDataFrame([], ddl).schema
        with pytest.raises(SchemaMismatchError):
            LakelineDataSource(source).streamWriter(schema, False)
        with pytest.raises(SchemaMismatchError):
            LakelineDataSource({"path": path}).writer(schema, False)
        print(f"{what}: refused")
    # Through Spark: the batch write is refused as itself, nothing staged or appended.
    with pytest.raises(SchemaMismatchError, match="'v'"):
        spark.createDataFrame([(2, 3)], "id long, v long").write.format("lakeline").mode("append").save(path)
    # A delete needs only the key; an upsert stream may carry a CDC batch's _op column.
    keys_only = spark.createDataFrame([], "id long").schema
    LakelineDataSource({**source, "operation": "delete"}).streamWriter(keys_only, False)
    with_op = spark.createDataFrame([], "id long, v string, _op string").schema
    LakelineDataSource({**source, "operation": "upsert"}).streamWriter(with_op, False)
    with pytest.raises(SchemaMismatchError):
        LakelineDataSource({**source, "operation": "delete"}).streamWriter(
            spark.createDataFrame([], "v string").schema, False
        )
    assert last_event(path) == before
    staging = tmp_path / "t" / ".lakeline" / "staging"
    assert not staging.exists() or not any(p.is_file() for p in staging.rglob("*"))


def _struct(**columns: Any) -> Any:
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(name, typ) for name, typ in columns.items()])


def test_merge_schema_adds_a_dataframes_new_columns(spark: Any, tmp_path: Path) -> None:
    """``option("mergeSchema", "true")`` (any case) adds the DataFrame's new columns when
    Spark asks for the writer, before any task stages a row (batch and stream); a value
    other than true/false is ``InvalidOptionError``; ``false`` refuses new columns even
    where the table's ``write.schema-evolution = add-columns`` would add them."""
    from pyspark.sql.types import IntegerType, LongType, StringType

    path = str(tmp_path / "t")
    Table.create(path, SCHEMA, record_key="id").insert(pa.table({"id": [1], "v": ["a"]}))
    before = last_event(path)
    wider = _struct(id=LongType(), v=StringType(), w=IntegerType())
    for value in ("yes", "1"):
        with pytest.raises(InvalidOptionError, match="mergeSchema"):
            LakelineDataSource({"path": path, "mergeSchema": value}).writer(wider, False)
    assert last_event(path) == before
    spark.createDataFrame([(2, "b", 7)], "id long, v string, w int").write.format("lakeline").option(
        "mergeSchema", "TRUE"
    ).mode("append").save(path)
    t = Table.open(path)
    assert t.config.schema.names == ["id", "v", "w"] and t.config.schema.field("w").type == pa.int32()
    assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": "a", "w": None},
        {"id": 2, "v": "b", "w": 7},
    ]
    # A stream adds its new columns at its start, and its batches land with them.
    ddl = "id long, v string, w int, x string"
    spark.createDataFrame([(3, "c", 1, "new")], ddl).write.parquet(str(tmp_path / "in" / "a"))
    query = (
        spark.readStream.schema(ddl)
        .parquet(str(tmp_path / "in" / "*"))
        .writeStream.format("lakeline")
        .option("mergeSchema", "true")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start(path)
    )
    query.awaitTermination(300)
    assert query.exception() is None
    t = Table.open(path)
    assert t.config.schema.names == ["id", "v", "w", "x"]
    assert [(r["id"], r["x"]) for r in sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"])] == [
        (1, None),
        (2, None),
        (3, "new"),
    ]
    # The table property adds too, unless the write says false.
    other = str(tmp_path / "evolving")
    Table.create(other, SCHEMA, record_key="id", properties={"write.schema-evolution": "add-columns"})
    with pytest.raises(SchemaMismatchError, match="mergeSchema"):
        LakelineDataSource({"path": other, "mergeSchema": "False"}).writer(wider, False)
    LakelineDataSource({"path": other}).writer(wider, False)
    assert Table.open(other).config.schema.names == ["id", "v", "w"]


def test_a_commit_after_a_concurrent_schema_change_conforms_or_fails_typed(tmp_path: Path) -> None:
    """A schema instant lands between the writer's check (on the driver) and its commit:
    a column it added reads null in the staged rows, which land; a rename of a column
    the rows carry is ``SchemaMismatchError``, and nothing of the write landed."""
    from pyspark.sql.types import LongType, StringType

    path = str(tmp_path / "t")
    Table.create(path, SCHEMA, record_key="id").insert(pa.table({"id": [1], "v": ["a"]}))
    source = LakelineDataSource({"path": path, "operation": "upsert"})
    writer = source.writer(_struct(id=LongType(), v=StringType()), False)
    staged = [writer.write(iter([pa.record_batch({"id": [1, 2], "v": ["a2", "b"]})]))]
    with Table.open(path).update_schema() as u:
        u.add_column("note", pa.string())
    writer.commit(staged)
    assert sorted(Table.open(path).to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": "a2", "note": None},
        {"id": 2, "v": "b", "note": None},
    ]
    writer = source.writer(_struct(id=LongType(), v=StringType(), note=StringType()), False)
    staged = [writer.write(iter([pa.record_batch({"id": [3], "v": ["c"], "note": ["n"]})]))]
    with Table.open(path).update_schema() as u:
        u.rename_column("v", "label")
    before = last_event(path)
    with pytest.raises(SchemaMismatchError, match="label"):
        writer.commit(staged)
    t = Table.open(path)
    assert last_event(path) == before and t.timeline.pending() == []
    assert sorted(r["id"] for r in t.to_arrow().to_pylist()) == [1, 2]


def test_merge_schema_adds_a_new_field_inside_a_struct(spark: Any, tmp_path: Path) -> None:
    """A DataFrame whose struct column holds a field the table's struct lacks: with
    ``mergeSchema`` the field is added through the nested ``add_column`` step (fresh
    id, nullable; old rows read it null); without, ``SchemaMismatchError`` naming
    ``s.x`` and mergeSchema, nothing written."""
    path = str(tmp_path / "t")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", pa.struct([("a", pa.int64())]))])
    Table.create(path, schema, record_key="id").insert(pa.Table.from_pylist([{"id": 1, "s": {"a": 1}}], schema=schema))
    before = last_event(path)
    df = spark.createDataFrame([(2, (2, "two"))], "id long, s struct<a: long, x: string>")
    with pytest.raises(SchemaMismatchError, match=r"s\.x.*mergeSchema"):
        df.write.format("lakeline").mode("append").save(path)
    assert last_event(path) == before
    df.write.format("lakeline").option("mergeSchema", "true").mode("append").save(path)
    t = Table.open(path)
    assert t.config.schema.field("s").type.names == ["a", "x"]
    assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "s": {"a": 1, "x": None}},
        {"id": 2, "s": {"a": 2, "x": "two"}},
    ]


def test_a_kept_handle_reads_on_where_it_stopped_and_a_table_created_anew_is_opened_anew(tmp_path: Path) -> None:
    # Spark reuses the Python worker that runs a stream's commits: the handle it keeps
    # must see other writers' commits, and never write a log that is no longer the table's.
    import shutil

    from lakeline.spark.source_writer import kept_table

    path = str(tmp_path / "t")
    Table.create(path, SCHEMA, record_key="id", table_type="mor")
    kept = kept_table(path, {"operation": "upsert"})
    assert kept_table(path, {"operation": "upsert"}) is kept
    Table.open(path).insert(pa.table({"id": [1], "v": ["other process"]}, schema=SCHEMA))
    again = kept_table(path, {"operation": "upsert"})
    assert again is kept and again.config.schema == Table.open(path).config.schema
    assert again.log.timeline.last_seq == Table.open(path).timeline.last_seq  # read on, not stale
    again.upsert(pa.table({"id": [2], "v": ["kept"]}, schema=SCHEMA))
    assert rows_of(path) == [(1, "other process"), (2, "kept")]
    shutil.rmtree(path)
    Table.create(path, SCHEMA, record_key="id", table_type="mor")
    fresh = kept_table(path, {"operation": "upsert"})
    assert fresh is not kept
    fresh.upsert(pa.table({"id": [3], "v": ["new table"]}, schema=SCHEMA))
    assert rows_of(path) == [(3, "new table")]
