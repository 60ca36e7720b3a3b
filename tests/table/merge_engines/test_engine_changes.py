"""``changes()`` of a table with another merge engine shows the rows as the engine
folded them, not the upserts as written (docs/merge-engines.md)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from lakeline.table import Table

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("price", pa.int64()), ("stock", pa.int64())])


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_changes_of_a_partial_update_table_show_the_merged_row(tmp_path: Path, table_type: str) -> None:
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        table_type=table_type,
        properties={"merge.engine": "partial-update"},
    )
    first = t.upsert(pa.table({"id": [1, 2], "ts": [1, 1], "price": [10, 20], "stock": [5, 6]}, schema=SCHEMA))
    t.upsert(pa.table({"id": [1], "ts": [2], "price": [11], "stock": [None]}, schema=SCHEMA))
    t.upsert(pa.table({"id": [2], "ts": [2], "price": [None], "stock": [0]}, schema=SCHEMA))
    net = t.changes(first.instant.id).sort_by("id").to_pylist()
    assert net == [
        {"id": 1, "ts": 2, "price": 11, "stock": 5, "_op": "update"},
        {"id": 2, "ts": 2, "price": 20, "stock": 0, "_op": "update"},
    ]
    feed = t.changes(first.instant.id, images=True).to_pylist()
    assert [(r["id"], r["_op"], r["price"], r["stock"]) for r in feed] == [
        (1, "update_before", 10, 5),
        (1, "update_after", 11, 5),
        (2, "update_before", 20, 6),
        (2, "update_after", 20, 0),
    ]
    if table_type == "mor":
        t.services.compact()  # a compaction changes no row
        assert t.changes(first.instant.id).sort_by("id").to_pylist() == net


def summing_table(tmp_path: Path) -> Table:
    """A merge-on-read aggregation table whose ``stock`` folds as a sum."""
    return Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        table_type="mor",
        properties={"merge.engine": "aggregation", "merge.stock.aggregate": "sum"},
    )


def test_changes_of_an_aggregation_table_show_the_running_total(tmp_path: Path) -> None:
    t = summing_table(tmp_path)
    first = t.upsert(pa.table({"id": [1], "ts": [1], "price": [1], "stock": [5]}, schema=SCHEMA))
    t.upsert(pa.table({"id": [1], "ts": [2], "price": [None], "stock": [-2]}, schema=SCHEMA))
    assert t.changes(first.instant.id).to_pylist() == [{"id": 1, "ts": 2, "price": 1, "stock": 3, "_op": "update"}]


def test_a_sum_above_every_file_statistic_is_still_found(tmp_path: Path) -> None:
    """Column statistics bound each file's values, not a sum of them: a filtered scan
    keeps every slice with logs of an aggregation table that sums."""
    import pyarrow.compute as pc

    t = summing_table(tmp_path)
    t.indexes.create("column_stats", wait=True)
    t.upsert(pa.table({"id": [1, 2], "ts": [1, 1], "price": [1, 1], "stock": [3, 1]}, schema=SCHEMA))
    t.upsert(pa.table({"id": [1], "ts": [2], "price": [1], "stock": [3]}, schema=SCHEMA))
    assert t.to_arrow(filter=pc.field("stock") > 5).to_pylist() == [{"id": 1, "ts": 2, "price": 1, "stock": 6}]
    plan = t.scan(filter=pc.field("stock") > 5).explain()
    assert plan["files_after_bloom_pruning"] == plan["files_after_stats_pruning"] == plan["files_total"] == 2
