"""A merge engine's per-column setting follows a rename (issue 29 item 3): the schema
instant that renames an aggregated column records ``merge.<new>.aggregate`` in place
of ``merge.<old>.aggregate``, and writes, merge-on-read reads, compaction, ``changes()``
and time travel keep folding the column by its function (docs/merge-engines.md)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from lakeline.table import ImmutablePropertyError, SchemaMismatchError, Table
from lakeline.table.schema.change import commit_schema
from lakeline.table.schema.update import Step, apply_step
from lakeline.timeline import table_config
from lakeline.timeline.plans import SchemaChangePlan

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64()), ("total", pa.int64())])
NEW = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64()), ("amount", pa.int64())])


def _rows(t: Table, **kw: object) -> list[dict[str, object]]:
    return t.to_arrow(**kw).sort_by("id").to_pylist()  # type: ignore[arg-type]


def _table(path: Path, table_type: str) -> Table:
    return Table.create(
        path, SCHEMA, record_key="id", ordering_field="ts", table_type=table_type,
        properties={"merge.engine": "aggregation", "merge.total.aggregate": "sum"},
    )  # fmt: skip


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_renamed_aggregated_column_keeps_its_aggregate(tmp_path: Path, table_type: str) -> None:
    path = tmp_path / "t"
    t = _table(path, table_type)
    first = t.upsert(pa.table({"id": [1, 2], "ts": [1, 1], "total": [10, 5]}, schema=SCHEMA))
    t.upsert(pa.table({"id": [1], "ts": [2], "total": [3]}, schema=SCHEMA))
    before = t.timeline.last_completed().id
    with t.update_schema() as u:
        u.rename_column("total", "amount")
    # The schema instant recorded the setting under the new name, and only there.
    for cfg in (t.config, Table.open(path).config):
        assert dict(cfg.props.merge_aggregates) == {"amount": "sum"}
        assert "merge.total.aggregate" not in cfg.properties
    t.upsert(pa.table({"id": [1, 3], "ts": [3, 1], "amount": [100, 7]}, schema=NEW))
    t.upsert(pa.table({"id": [2], "ts": [2], "amount": [1]}, schema=NEW))
    want = [{"id": 1, "ts": 3, "amount": 113}, {"id": 2, "ts": 2, "amount": 6}, {"id": 3, "ts": 1, "amount": 7}]
    assert _rows(t) == want
    net = t.changes(first.instant.id).sort_by("id").to_pylist()
    assert [(r["id"], r["amount"], r["_op"]) for r in net] == [(1, 113, "update"), (2, 6, "update"), (3, 7, "insert")]
    t.services.compact() if table_type == "mor" else t.services.cluster(sort_by=["id"])
    assert _rows(t) == want
    t.upsert(pa.table({"id": [3], "ts": [2], "amount": [1]}, schema=NEW))
    assert _rows(Table.open(path))[2] == {"id": 3, "ts": 2, "amount": 8}
    # Before the rename: the old name, folded by the old setting.
    assert _rows(t, as_of=before) == [{"id": 1, "ts": 2, "total": 13}, {"id": 2, "ts": 1, "total": 5}]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_dropped_aggregated_column_takes_its_setting_along(tmp_path: Path, table_type: str) -> None:
    """A drop removes ``merge.<column>.aggregate``; a column added again under that
    name is a new column (a new field id) and folds by default, ``last_non_null``."""
    path = tmp_path / "t"
    t = _table(path, table_type)
    t.upsert(pa.table({"id": [1, 1], "ts": [1, 2], "total": [10, 5]}, schema=SCHEMA))
    with t.update_schema() as u:
        u.delete_column("total")
        u.add_column("total", pa.int64())
    assert dict(t.config.props.merge_aggregates) == {}
    t.upsert(pa.table({"id": [1], "ts": [3], "total": [4]}, schema=SCHEMA))
    t.upsert(pa.table({"id": [1], "ts": [4], "total": [6]}, schema=SCHEMA))
    assert _rows(t) == [{"id": 1, "ts": 4, "total": 6}]


def test_the_aggregate_still_cannot_change_and_key_columns_still_cannot_move(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = _table(path, "mor")
    t.upsert(pa.table({"id": [1], "ts": [1], "total": [10]}, schema=SCHEMA))
    with t.update_schema() as u:
        u.rename_column("total", "amount")
    n = len(t.timeline.completed())
    changed = replace(t.config, properties={**t.config.properties, "merge.amount.aggregate": "max"})
    with pytest.raises(ImmutablePropertyError, match="fixed at creation"):
        commit_schema(t.log, SchemaChangePlan("update", ("amount",)), changed)
    for column, why in (("ts", "the ordering field"), ("id", "record-key column")):
        with pytest.raises(SchemaMismatchError, match=f"{why}.*cannot be renamed"):
            with t.update_schema() as u:
                u.rename_column(column, "other")
    assert len(Table.open(path).timeline.completed()) == n


def test_columns_that_swap_names_keep_their_own_aggregates(tmp_path: Path) -> None:
    """The setting is the column's, matched by field id: ``a`` (summed) and ``b`` (the
    default) swapping names in one block changes no column's fold (by name it read as
    ``a``: sum -> last_non_null, ImmutablePropertyError)."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("a", pa.int64()), ("b", pa.int64())])
    t = Table.create(
        tmp_path / "t", schema, record_key="id", table_type="mor",
        properties={"merge.engine": "aggregation", "merge.a.aggregate": "sum"},
    )  # fmt: skip
    t.upsert(pa.table({"id": [1, 1], "a": [1, 2], "b": [10, 20]}, schema=schema))
    with t.update_schema() as u:
        u.rename_column("a", "tmp").rename_column("b", "a").rename_column("tmp", "b")
    assert dict(t.config.props.merge_aggregates) == {"b": "sum"}
    t.upsert(pa.table({"id": [1], "a": [30], "b": [4]}, schema=schema))
    assert _rows(t) == [{"id": 1, "a": 30, "b": 7}]


def test_a_table_from_before_ids_renames_an_aggregated_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its first schema change gives it ids; the column is matched to its old name by
    the name its files hold it under, so a changed function is still refused."""
    path = tmp_path / "t"
    with monkeypatch.context() as m:  # a table of the format before ids (tests/table/schema/test_old_tables.py)
        m.setattr(table_config, "assign_ids", lambda fields, last, keep=True: (list(fields), 0))
        t = _table(path, "mor")
    t = Table.open(path)
    t.upsert(pa.table({"id": [1, 1], "ts": [1, 2], "total": [10, 5]}, schema=SCHEMA))
    renamed = apply_step(t.config, Step("rename", "total", new_name="amount"), {})
    changed = replace(renamed, properties={**renamed.properties, "merge.amount.aggregate": "max"})
    with pytest.raises(ImmutablePropertyError):
        commit_schema(t.log, SchemaChangePlan("update", ("total",)), changed)
    with t.update_schema() as u:
        u.rename_column("total", "amount")
    t.upsert(pa.table({"id": [1], "ts": [3], "amount": [1]}, schema=NEW))
    assert _rows(Table.open(path)) == [{"id": 1, "ts": 3, "amount": 16}]
