"""Each merge engine on its own, with the rows spelled out: a batch's own duplicates,
copy-on-write and merge-on-read upserts and reads, with and without an ordering field,
deletes, composite keys, and what ``update`` does (docs/merge-engines.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.table import Table
from lakeline.timeline.errors import UnsupportedOperationError

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("ts", pa.int64()),
        pa.field("qty", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("hits", pa.int64()),
        pa.field("seen", pa.bool_()),
    ]
)
AGG = {"qty": "sum", "hits": "count", "seen": "bool_or", "name": "first_non_null"}


def _make(tmp_path: Path, engine: str, table_type: str, ordering: str | None = "ts", **kw: Any) -> Table:
    props: dict[str, Any] = {"merge.engine": engine}
    if engine == "aggregation":
        props.update({f"merge.{c}.aggregate": fn for c, fn in AGG.items()})
    return Table.create(
        tmp_path / f"{engine}-{table_type}",
        kw.pop("schema", SCHEMA),
        record_key=kw.pop("record_key", "id"),
        ordering_field=ordering,
        table_type=table_type,
        properties=props,
    )


def _rows(**cols: list[Any]) -> pa.Table:
    return pa.table({f.name: cols.get(f.name, [None] * len(cols["id"])) for f in SCHEMA}, schema=SCHEMA)


def _by_id(t: Table) -> dict[int, dict[str, Any]]:
    return {r["id"]: r for r in t.to_arrow().to_pylist()}


TYPES = ["cow", "mor"]


@pytest.mark.parametrize("table_type", TYPES)
def test_partial_update_keeps_the_latest_non_null_value_of_each_column(tmp_path: Path, table_type: str) -> None:
    t = _make(tmp_path, "partial-update", table_type)
    # A batch's own duplicates fold in ordering order: ts 2 comes after ts 1 whatever the rows' order.
    t.upsert(_rows(id=[1, 1, 2], ts=[2, 1, 1], qty=[None, 5, 7], name=["b", "a", "x"]))
    assert _by_id(t)[1] | {} == {"id": 1, "ts": 2, "qty": 5, "name": "b", "hits": None, "seen": None}
    t.upsert(_rows(id=[1], ts=[3], qty=[9]))  # name null: no change
    t.upsert(_rows(id=[2], ts=[0], qty=[1], name=["late"], hits=[4]))  # older: fills only nulls
    rows = _by_id(t)
    assert rows[1] == {"id": 1, "ts": 3, "qty": 9, "name": "b", "hits": None, "seen": None}
    assert rows[2] == {"id": 2, "ts": 1, "qty": 7, "name": "x", "hits": 4, "seen": None}
    if table_type == "mor":
        t.services.compact()
        assert _by_id(t) == rows


@pytest.mark.parametrize("table_type", TYPES)
def test_partial_update_without_an_ordering_field_follows_arrival(tmp_path: Path, table_type: str) -> None:
    t = _make(tmp_path, "partial-update", table_type, ordering=None)
    t.upsert(_rows(id=[1, 1], ts=[5, 1], qty=[1, None], name=[None, "a"]))
    t.upsert(_rows(id=[1], qty=[2], seen=[True]))
    assert _by_id(t)[1] == {"id": 1, "ts": 1, "qty": 2, "name": "a", "hits": None, "seen": True}


@pytest.mark.parametrize("ordering", ["ts", None])
@pytest.mark.parametrize("table_type", TYPES)
def test_aggregation_folds_each_column_by_its_function(tmp_path: Path, table_type: str, ordering: str | None) -> None:
    t = _make(tmp_path, "aggregation", table_type, ordering)
    t.upsert(_rows(id=[1, 1, 2], ts=[1, 2, 1], qty=[3, 4, 10], name=["a", "b", None], hits=[7, None, 0]))
    t.upsert(_rows(id=[1, 2], ts=[3, 2], qty=[None, 5], name=["c", "z"], hits=[1, 1], seen=[False, None]))
    if table_type == "mor":
        t.services.compact()
    t.upsert(_rows(id=[1], ts=[0], qty=[100], seen=[True]))
    rows = _by_id(t)
    assert rows[1] == {"id": 1, "ts": 3 if ordering else 0, "qty": 107, "name": "a", "hits": 2, "seen": True}
    assert rows[2] == {"id": 2, "ts": 2, "qty": 15, "name": "z", "hits": 2, "seen": None}


@pytest.mark.parametrize("ordering", ["ts", None])
@pytest.mark.parametrize("table_type", TYPES)
def test_first_row_keeps_the_first_version(tmp_path: Path, table_type: str, ordering: str | None) -> None:
    t = _make(tmp_path, "first-row", table_type, ordering)
    t.upsert(_rows(id=[1, 1, 2], ts=[5, 3, 1], qty=[1, 2, 3]))
    t.upsert(_rows(id=[1, 2], ts=[4, 9], qty=[10, 20]))
    rows = _by_id(t)
    if ordering:  # the smallest ordering value stays, wherever it arrived
        assert (rows[1]["ts"], rows[1]["qty"], rows[2]["qty"]) == (3, 2, 3)
    else:  # the first to arrive
        assert (rows[1]["ts"], rows[1]["qty"], rows[2]["qty"]) == (5, 1, 3)


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update", "aggregation", "first-row"])
@pytest.mark.parametrize("table_type", TYPES)
def test_a_delete_removes_the_key_and_the_next_upsert_starts_it_again(
    tmp_path: Path, engine: str, table_type: str
) -> None:
    t = _make(tmp_path, engine, table_type)
    t.upsert(_rows(id=[1, 2], ts=[5, 5], qty=[1, 2], name=["a", "b"]))
    t.upsert(_rows(id=[1], ts=[6], qty=[10]))
    r = t.delete(pa.table({"id": [1]}))
    assert r.stats["deleted"] == 1
    assert sorted(_by_id(t)) == [2]
    t.upsert(_rows(id=[1], ts=[1], qty=[7]))  # a smaller ordering value: still a fresh start
    assert _by_id(t)[1] == {"id": 1, "ts": 1, "qty": 7, "name": None, "hits": 0 if engine == "aggregation" else None,
                            "seen": None}  # fmt: skip
    if table_type == "mor":
        t.services.compact()
        assert _by_id(t)[1]["qty"] == 7


@pytest.mark.parametrize("engine", ["partial-update", "aggregation", "first-row"])
@pytest.mark.parametrize("table_type", TYPES)
def test_composite_keys_fold_per_whole_key(tmp_path: Path, engine: str, table_type: str) -> None:
    schema = pa.schema([("a", pa.string()), ("b", pa.int32()), ("ts", pa.int64()), ("qty", pa.int64())])
    props: dict[str, Any] = {"merge.engine": engine}
    if engine == "aggregation":
        props["merge.qty.aggregate"] = "sum"
    t = Table.create(
        tmp_path / "t", schema, record_key=["a", "b"], ordering_field="ts", table_type=table_type, properties=props
    )
    t.upsert(pa.table({"a": ["x", "x", "y"], "b": [1, 1, 1], "ts": [1, 2, 1], "qty": [1, 2, 4]}, schema=schema))
    t.upsert(pa.table({"a": ["x", "y"], "b": [1, 2], "ts": [3, 1], "qty": [None, 8]}, schema=schema))
    got = {(r["a"], r["b"]): r["qty"] for r in t.to_arrow().to_pylist()}
    expected = {
        "partial-update": {("x", 1): 2, ("y", 1): 4, ("y", 2): 8},
        "aggregation": {("x", 1): 3, ("y", 1): 4, ("y", 2): 8},
        "first-row": {("x", 1): 1, ("y", 1): 4, ("y", 2): 8},
    }[engine]
    assert got == expected
    t.delete(pa.table({"a": ["x"], "b": pa.array([1], pa.int32())}))
    assert {(r["a"], r["b"]) for r in t.to_arrow().to_pylist()} == {("y", 1), ("y", 2)}


@pytest.mark.parametrize("table_type", TYPES)
def test_update_of_a_partial_update_table_assigns_values(tmp_path: Path, table_type: str) -> None:
    import pyarrow.compute as pc

    t = _make(tmp_path, "partial-update", table_type)
    t.upsert(_rows(id=[1, 2], ts=[1, 1], qty=[1, 2], name=["a", "b"]))
    t.update(where=pc.field("id") == 1, set={"qty": pc.field("qty") + 10})
    assert _by_id(t)[1] == {"id": 1, "ts": 1, "qty": 11, "name": "a", "hits": None, "seen": None}


@pytest.mark.parametrize("engine", ["aggregation", "first-row"])
def test_update_is_refused_where_the_new_row_would_be_folded_away(tmp_path: Path, engine: str) -> None:
    t = _make(tmp_path, engine, "mor")
    t.upsert(_rows(id=[1], ts=[1], qty=[1]))
    before = len(t.timeline.instants())
    with pytest.raises(UnsupportedOperationError, match="merge.engine"):
        t.update(set={"qty": 5})
    assert len(t.timeline.instants()) == before


@pytest.mark.parametrize("engine", ["partial-update", "aggregation", "first-row"])
def test_a_filtered_read_of_a_large_base_equals_the_read_filtered(tmp_path: Path, engine: str) -> None:
    """Row-group pruning keeps only what a deduplicate fold needs of a base row; other
    engines take values from the base rows the logs touch, so their filtered reads must
    see them whole (a base of four row groups, logs touching rows in several)."""
    import pyarrow.compute as pc

    props: dict[str, Any] = {"merge.engine": engine, "write.row-group-rows": 1024}
    if engine == "aggregation":
        props["merge.qty.aggregate"] = "sum"
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts", table_type="mor", properties=props)
    n = 4096
    t.insert(_rows(id=list(range(n)), ts=[1] * n, qty=list(range(n)), name=[f"n{i}" for i in range(n)]))
    t.upsert(_rows(id=[5, 3000, 4000], ts=[2, 2, 0], qty=[None, 1, 7], name=["changed", None, "late"]))
    t.delete(pa.table({"id": [6]}))
    whole = t.to_arrow()
    filters = [pc.field("qty") == 3000, pc.field("qty") >= 3001, pc.field("name") == "changed"]
    filters += [pc.field("name") == "n3000", pc.field("id") == 4000, pc.field("qty") == 1]
    matched = 0
    for f in filters:
        want = whole.filter(f).sort_by("id").to_pylist()
        assert t.to_arrow(filter=f).sort_by("id").to_pylist() == want, str(f)
        matched += bool(want)
    assert matched >= 4, "too few filters match a row: the check would prove little"
