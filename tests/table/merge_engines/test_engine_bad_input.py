"""Merge settings that cannot work are refused with typed errors before anything is
written, and the engine cannot change after creation (docs/merge-engines.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.table import (
    ImmutablePropertyError,
    InvalidMergeEngineError,
    InvalidPropertyError,
    Table,
    TableNotFoundError,
)
from lakeline.table.schema.change import add_columns, commit_schema
from lakeline.timeline.plans import SchemaChangePlan

SCHEMA = pa.schema(
    [("id", pa.int64()), ("day", pa.string()), ("ts", pa.int64()), ("n", pa.int64()), ("s", pa.string())]
)


@pytest.mark.parametrize(
    ("properties", "error", "match"),
    [
        ({"merge.engine": "newest"}, InvalidPropertyError, "merge.engine"),
        ({"merge.engine": "aggregation", "merge.n.aggregate": "median"}, InvalidPropertyError, "median"),
        ({"merge.engine": "aggregation", "merge.s.aggregate": "sum"}, InvalidMergeEngineError, "sum does not take"),
        ({"merge.engine": "aggregation", "merge.s.aggregate": "bool_or"}, InvalidMergeEngineError, "bool_or"),
        ({"merge.engine": "aggregation", "merge.s.aggregate": "count"}, InvalidMergeEngineError, "count"),
        ({"merge.engine": "aggregation", "merge.nope.aggregate": "sum"}, InvalidMergeEngineError, "no column 'nope'"),
        ({"merge.engine": "aggregation", "merge.id.aggregate": "sum"}, InvalidMergeEngineError, "key"),
        ({"merge.engine": "aggregation", "merge.day.aggregate": "max"}, InvalidMergeEngineError, "partition"),
        ({"merge.engine": "aggregation", "merge.ts.aggregate": "max"}, InvalidMergeEngineError, "ordering"),
        ({"merge.engine": "partial-update", "merge.n.aggregate": "sum"}, InvalidMergeEngineError, "not 'aggregation'"),
        ({"merge.n.aggregate": "sum"}, InvalidMergeEngineError, "not 'aggregation'"),
    ],
)
def test_bad_merge_settings_are_refused_before_anything_is_written(
    tmp_path: Path, properties: dict[str, Any], error: type[Exception], match: str
) -> None:
    path = tmp_path / "t"
    with pytest.raises(error, match=match):
        Table.create(path, SCHEMA, record_key="id", ordering_field="ts", partition_by=["day"], properties=properties)
    assert not path.exists() or not any(path.iterdir())
    with pytest.raises(TableNotFoundError):
        Table.open(path)


def test_an_engine_needs_a_record_key(tmp_path: Path) -> None:
    with pytest.raises(InvalidMergeEngineError, match="record key"):
        Table.create(tmp_path / "t", SCHEMA, properties={"merge.engine": "first-row"})


def test_every_aggregate_takes_its_types(tmp_path: Path) -> None:
    schema = pa.schema(
        [("id", pa.int64()), ("i", pa.int32()), ("f", pa.float64()), ("b", pa.bool_()), ("s", pa.string())]
    )
    props = {
        "merge.engine": "aggregation",
        "merge.i.aggregate": "count",
        "merge.f.aggregate": "sum",
        "merge.b.aggregate": "bool_and",
        "merge.s.aggregate": "max",
    }
    t = Table.create(tmp_path / "t", schema, record_key="id", properties=props)
    assert t.config.props.merge_aggregates == {"i": "count", "f": "sum", "b": "bool_and", "s": "max"}
    assert Table.open(tmp_path / "t").config.props.merge_engine == "aggregation"


@pytest.mark.parametrize(
    "changed",
    [
        {"merge.engine": "deduplicate"},
        {"merge.engine": "partial-update"},
        {"merge.engine": "aggregation", "merge.n.aggregate": "max"},
        {"merge.engine": "aggregation"},  # n back to its default, last_non_null
    ],
)
def test_the_engine_cannot_change_after_creation(tmp_path: Path, changed: dict[str, Any]) -> None:
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        properties={"merge.engine": "aggregation", "merge.n.aggregate": "sum"},
    )
    t.upsert(pa.table({"id": [1], "day": ["d"], "ts": [1], "n": [2], "s": ["a"]}, schema=SCHEMA))
    events = [(i.id, i.state) for i in t.timeline.instants()]
    new_config = dataclasses.replace(t.config, properties=changed)
    with pytest.raises(ImmutablePropertyError, match="fixed at creation"):
        commit_schema(t.log, SchemaChangePlan("properties"), new_config)
    assert [(i.id, i.state) for i in t.timeline.instants()] == events
    assert t.config.props.merge_aggregates == {"n": "sum"}


def test_new_columns_keep_the_engine(tmp_path: Path) -> None:
    t = Table.create(
        tmp_path / "t", SCHEMA, record_key="id", properties={"merge.engine": "aggregation", "merge.n.aggregate": "sum"}
    )
    add_columns(t.log, t.config, [pa.field("extra", pa.int64())])
    assert t.config.props.merge_engine == "aggregation"
    assert "extra" in t.schema.names
