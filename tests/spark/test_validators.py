"""Hooks on ``lakeline.spark.write`` (docs/hooks.md, issue 15): the SQL
validators (Hudi's query equality, inequality and single result) refuse or pass a
DataFrame write exactly as an Arrow validator refuses a local one (nothing visible, no
file left); callbacks see the landed commit; an inline compaction runs on the Spark
engine after the trigger's delta commits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.services import inline
from lakeline.spark import write
from lakeline.spark.validators import sql_equality, sql_inequality, sql_single_result
from lakeline.table import Hooks, InvalidFilterError, Table, ValidationError
from lakeline.timeline.instant import Action, State

from tests.children.table_workers import check_files_on_disk, data_files_on_disk

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("amount", pa.float64())])


def _df(spark: Any, rows: dict[str, list[Any]]) -> Any:
    return spark.createDataFrame(pa.table(rows, schema=SCHEMA).to_pandas())


def _table(tmp_path: Path, table_type: str, **props: Any) -> Table:
    t = Table.create(
        str(tmp_path / table_type),
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        table_type=table_type,
        properties={"engine.parallelism": 1, **props},
    )
    t.insert(pa.table({"id": [1, 2], "ts": [1, 1], "amount": [10.0, 20.0]}, schema=SCHEMA))
    return t


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_sql_validators_refuse_or_pass_a_spark_write(spark: Any, tmp_path: Path, table_type: str) -> None:
    t = _table(tmp_path, table_type)
    files, rows = data_files_on_disk(t), t.to_arrow()
    no_negatives = sql_equality("SELECT count(*) FROM <TABLE_NAME> WHERE amount < 0")
    with pytest.raises(ValidationError, match="sql_equality"):
        write(
            _df(spark, {"id": [3], "ts": [1], "amount": [-1.0]}),
            t.path,
            "upsert",
            hooks=Hooks(validators=[no_negatives]),
        )
    assert data_files_on_disk(t) == files and Table.open(t.path).to_arrow().equals(rows)
    assert t.timeline.instants()[-1].state is State.ROLLED_BACK
    check_files_on_disk(t)

    grows = sql_inequality("SELECT count(*) FROM <TABLE_NAME>")
    three = sql_single_result("SELECT count(*) FROM <TABLE_NAME>", 3)
    r = write(
        _df(spark, {"id": [3], "ts": [1], "amount": [30.0]}),
        t.path,
        "upsert",
        hooks=Hooks(validators=[no_negatives, grows, three]),
    )
    assert r.instant is not None and sorted(t.to_arrow().column("id").to_pylist()) == [1, 2, 3]
    with pytest.raises(ValidationError, match="sql_inequality"):  # an update leaves the count as it is
        write(_df(spark, {"id": [3], "ts": [2], "amount": [31.0]}), t.path, "upsert", hooks=Hooks(validators=[grows]))
    with pytest.raises(InvalidFilterError):
        sql_equality("SELECT 1")


def test_spark_write_callbacks_and_inline_compaction(spark: Any, tmp_path: Path) -> None:
    t = _table(tmp_path, "mor", **{"compaction.delta-commits": 2})
    seen: list[int] = []
    hooks = Hooks(callbacks=[lambda r: seen.append(r.instant.id)], services=[inline("compaction")])
    results = [
        write(_df(spark, {"id": [1], "ts": [1 + n], "amount": [float(n)]}), t.path, "upsert", hooks=hooks)
        for n in (1, 2)
    ]
    assert seen == [r.instant.id for r in results] and all(r.hook_errors == [] for r in results)
    done = [i for i in t.timeline.completed() if i.action is Action.COMPACTION]
    assert len(done) == 1 and done[0].requested_us > results[1].instant.completed_us
    assert all(not s.logs for s in t.view(t.timeline).latest_slices())
    assert sorted(t.to_arrow().column("amount").to_pylist()) == [2.0, 20.0]
