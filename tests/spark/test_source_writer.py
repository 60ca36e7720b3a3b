"""``df.write.format("lakeline")``: append with the ``operation`` option, overwrite mode,
staged output committed once, and an abort that never undoes a landed commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.spark.source_writer import LakelineWriter, Staged
from lakeline.table import Table
from lakeline.timeline.errors import DuplicateKeyError, UnsupportedOperationError

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
