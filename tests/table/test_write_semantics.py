"""The semantics of the write and read paths, one deterministic case each (the random
sequences of ``test_model.py`` cover them only by chance): no snapshot before the table
was created, one key in two partitions of one batch, the fold rules that pick the
surviving row, changes in the null partition and on append-only tables."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table

from tests.table.model import SCHEMA, to_arrow


def test_history_datetime_before_creation_has_no_snapshot(tmp_path: Path) -> None:
    from lakeline.timeline.errors import InstantNotFoundError

    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts")
    t.insert(to_arrow([{"id": 1, "ts": 1, "day": "d", "v": 1, "s": "a"}]))
    with pytest.raises(InstantNotFoundError):
        t.to_arrow(as_of=datetime(2000, 1, 1))


def _rows(*specs: tuple[int, int | None, str | None, int]) -> pa.Table:
    return to_arrow([{"id": i, "ts": ts, "day": d, "v": v, "s": None} for i, ts, d, v in specs])


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_one_key_in_two_partitions_of_one_batch_is_two_records(tmp_path: Path, table_type: str) -> None:
    t = Table.create(
        tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts", partition_by=["day"], table_type=table_type
    )
    t.upsert(_rows((1, 1, "a", 10), (1, 1, "b", 20), (1, 0, "b", 30)))
    assert sorted((r["day"], r["v"]) for r in t.to_arrow().to_pylist()) == [("a", 10), ("b", 20)]
    t.insert(_rows((2, 1, "a", 1), (2, 1, "b", 2)))
    assert t.to_arrow(filter=pc.field("id") == 2).num_rows == 2


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_fold_rules(tmp_path: Path, table_type: str) -> None:
    """Strictly larger stored ordering wins; ties and null-vs-null go to the newer
    version; null is the smallest; a delete wins whatever the ordering; re-insert works."""
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts", table_type=table_type)
    t.insert(_rows((1, 5, "d", 1), (2, 5, "d", 1), (3, None, "d", 1), (4, 5, "d", 1)))
    t.upsert(_rows((1, 4, "d", 2), (2, 5, "d", 2), (3, None, "d", 2), (4, None, "d", 2)))
    got = {r["id"]: r["v"] for r in t.to_arrow().to_pylist()}
    assert got == {1: 1, 2: 2, 3: 2, 4: 1}
    t.delete(pa.table({"id": [1, 99]}))
    t.upsert(_rows((1, 0, "d", 3)))  # back after the delete, despite the smaller ordering value
    got = {r["id"]: (r["ts"], r["v"]) for r in t.to_arrow().to_pylist()}
    assert got == {1: (0, 3), 2: (5, 2), 3: (None, 2), 4: (5, 1)}


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_changes_in_the_null_partition_are_updates(tmp_path: Path, table_type: str) -> None:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", partition_by=["day"], table_type=table_type)
    first = t.insert(_rows((1, 1, None, 1), (2, 1, None, 1), (3, 1, "x", 1))).instant
    t.upsert(_rows((1, 1, None, 2), (2, 1, None, 1)))  # 2 is re-upserted unchanged
    got = t.changes(first.id).select(["id", "day", "v", "_op"]).to_pylist()
    assert got == [{"id": 1, "day": None, "v": 2, "_op": "update"}]


def test_append_only_changes_are_the_net_inserted_rows(tmp_path: Path) -> None:
    """Rows inserted and then deleted inside the range are not changes; a group the range
    created and then rewrote is reported once, as it ended."""
    t = Table.create(tmp_path / "t", SCHEMA, partition_by=["day"])
    start = t.insert(_rows((1, 1, "a", 1), (2, 1, "a", 2))).instant
    t.insert(_rows((3, 1, "a", 3), (4, 1, "b", 4), (4, 1, "b", 4)))
    t.delete_where((pc.field("id") == 3) | (pc.field("id") == 1))
    got = sorted((r["id"], r["_op"]) for r in t.changes(start.id).to_pylist())
    assert got == [(4, "insert"), (4, "insert")]
