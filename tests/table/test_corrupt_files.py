"""Damaged data files (issue 25, audit rows C1a, C1c, C6a, C7, C8): a base or log that is
truncated, deleted, or replaced by another Parquet file gives a typed error naming it;
reads of other partitions keep working; services and writes over the damaged slice
fail typed and roll back, and once the file is restored every row is there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table
from lakeline.timeline.errors import (
    CorruptEventError,
    CorruptFileError,
    CorruptLogError,
    InvalidFilterError,
    SnapshotExpiredError,
)

from tests.cli._data import SCHEMA, rows

DAMAGED = "day=2026-01-01"  # odd ids
OTHER = "day=2026-01-02"  # even ids


def make(tmp_path: Path, table_type: str) -> Table:
    """Two partitions, two commits: a mor table's slices have a base and a log."""
    t = Table.create(
        tmp_path / table_type, SCHEMA, record_key="id", ordering_field="ts", partition_by=["day"], table_type=table_type
    )
    t.upsert(rows([1, 2, 3, 4, 5, 6]))
    t.upsert(rows([1, 2], ts=2))
    return t


def file_of(t: Table, kind: str, partition: str = DAMAGED) -> str:
    """The relative path of the live base (or newest log) of ``partition``."""
    (s,) = [s for s in t.view(t.timeline).latest_slices() if s.partition == partition]
    if kind == "log":
        return s.logs[-1].path
    assert s.base is not None
    return s.base.path


class Damage:
    """Damage one file of a table and put it back as it was."""

    def __init__(self, t: Table, rel: str) -> None:
        self.rel, self.path = rel, Path(t.storage.path(rel))
        self.original = self.path.read_bytes()

    def truncate(self) -> Damage:
        self.path.write_bytes(self.original[: len(self.original) // 2])
        return self

    def replace_with(self, other: Damage) -> Damage:
        self.path.write_bytes(other.original)
        return self

    def delete(self) -> Damage:
        os.remove(self.path)
        return self

    def restore(self) -> None:
        self.path.write_bytes(self.original)


def sorted_rows(table: pa.Table) -> list[dict[str, object]]:
    return table.sort_by("id").to_pylist()


def no_pending(t: Table) -> bool:
    return not Table.open(t.path).timeline.pending()


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_truncated_base_names_the_file_and_other_partitions_still_read(tmp_path: Path, table_type: str) -> None:
    t = make(tmp_path, table_type)
    before = sorted_rows(t.to_arrow())
    other = [r for r in before if r["day"] == "2026-01-02"]
    d = Damage(t, file_of(t, "base")).truncate()
    with pytest.raises(CorruptFileError, match=d.rel):
        t.to_arrow()
    with pytest.raises(CorruptFileError, match=d.rel):
        list(t.scan().to_batches())  # the streamed read too
    assert sorted_rows(t.to_arrow(filter=pc.field("day") == "2026-01-02")) == other
    d.restore()
    assert sorted_rows(t.to_arrow()) == before


def test_a_truncated_log_names_the_file(tmp_path: Path) -> None:
    t = make(tmp_path, "mor")
    d = Damage(t, file_of(t, "log")).truncate()
    with pytest.raises(CorruptFileError, match=d.rel):
        t.to_arrow()
    assert t.to_arrow(filter=pc.field("day") == "2026-01-02").num_rows == 3


def test_a_base_copied_over_a_log_is_a_corrupt_log_error(tmp_path: Path) -> None:
    t = make(tmp_path, "mor")
    before = sorted_rows(t.to_arrow())
    log = Damage(t, file_of(t, "log")).replace_with(Damage(t, file_of(t, "base")))
    with pytest.raises(CorruptLogError, match=log.rel):
        t.to_arrow()
    with pytest.raises(CorruptLogError, match=log.rel):
        t.upsert(rows([1, 3], ts=3))  # tagging reads the log: refused, never a wrong fold
    assert no_pending(t)
    log.restore()
    assert sorted_rows(t.to_arrow()) == before


def _damage(t: Table, how: str) -> Damage:
    if how == "base over log":
        return Damage(t, file_of(t, "log")).replace_with(Damage(t, file_of(t, "base")))
    return Damage(t, file_of(t, how)).truncate()


@pytest.mark.parametrize("how", ["base", "log", "base over log"])
def test_compaction_over_a_damaged_slice_rolls_back(tmp_path: Path, how: str) -> None:
    t = make(tmp_path, "mor")
    before = sorted_rows(t.to_arrow())
    d = _damage(t, how)
    with pytest.raises(CorruptFileError, match=d.rel):
        t.services.compact()
    assert no_pending(t)
    assert [i.state for i in t.timeline.by_action("compaction")] == ["rolled_back"]
    d.restore()
    assert sorted_rows(Table.open(t.path).to_arrow()) == before
    assert t.services.compact().instant is not None  # and it works again
    assert sorted_rows(Table.open(t.path).to_arrow()) == before


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_clustering_and_writes_over_a_damaged_base_roll_back(tmp_path: Path, table_type: str) -> None:
    t = make(tmp_path, table_type)
    before = sorted_rows(t.to_arrow())
    d = Damage(t, file_of(t, "base")).truncate()
    with pytest.raises(CorruptFileError, match=d.rel):
        t.services.cluster(sort_by=["id"])
    with pytest.raises(CorruptFileError, match=d.rel):
        t.upsert(rows([1, 3], ts=3))
    with pytest.raises(CorruptFileError, match=d.rel):
        t.update(where=pc.field("id") == 3, set={"amount": 0.5})
    assert no_pending(t)
    t.upsert(rows([2], ts=5))  # the other partition still takes writes
    d.restore()
    after = sorted_rows(Table.open(t.path).to_arrow())
    assert after == [{**r, "ts": 5} if r["id"] == 2 else r for r in before]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_deleted_file_is_missing_not_cleaned(tmp_path: Path, table_type: str) -> None:
    t = make(tmp_path, table_type)
    d = Damage(t, file_of(t, "base")).delete()
    for read in (t.to_arrow, lambda: list(t.scan().to_batches())):
        with pytest.raises(SnapshotExpiredError, match="missing") as e:
            read()
        assert d.rel in str(e.value)
        assert "cleaned" not in str(e.value)  # no clean ran: audit C6a
    assert t.to_arrow(filter=pc.field("day") == "2026-01-02").num_rows == 3


@pytest.mark.parametrize("damage", ["truncate", "delete"])
def test_index_validate_over_a_damaged_file_is_typed(tmp_path: Path, damage: str) -> None:
    t = make(tmp_path, "cow")
    t.indexes.create("column_stats", name="cs")
    d = Damage(t, file_of(t, "base"))
    getattr(d, damage)()
    expected = CorruptFileError if damage == "truncate" else SnapshotExpiredError
    with pytest.raises(expected, match=d.rel):
        t.indexes.validate()
    d.restore()
    assert t.indexes.validate()["mismatches"] == []


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_index_create_over_a_damaged_file_is_typed_and_rolled_back(tmp_path: Path, table_type: str) -> None:
    t = make(tmp_path, table_type)
    d = Damage(t, file_of(t, "base")).truncate()
    with pytest.raises(CorruptFileError, match=d.rel):
        t.indexes.create("bloom_filters", name="bf")
    assert no_pending(t) and t.indexes.list() == []
    d.restore()
    t.indexes.create("bloom_filters", name="bf")
    assert t.indexes.validate()["mismatches"] == []


def test_a_log_pointing_past_a_replaced_base_names_the_slice(tmp_path: Path) -> None:
    t = Table.create(
        tmp_path / "mor", SCHEMA, record_key="id", ordering_field="ts", partition_by=["day"], table_type="mor"
    )
    t.upsert(rows([1, 3, 5, 7, 9, 2, 4]))
    t.upsert(rows([9], ts=2))  # a log whose position points at row 4 of its base
    base = Damage(t, file_of(t, "base")).replace_with(Damage(t, file_of(t, "base", OTHER)))  # 2 rows
    # The base's recorded size catches the swap before the log is folded onto it (the
    # log's positions are still checked against the base's rows, CorruptLogError).
    with pytest.raises(CorruptFileError, match=base.rel) as e:
        t.to_arrow()
    assert "its commit recorded" in str(e.value)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_filter_that_cannot_be_evaluated_is_not_blamed_on_a_file(tmp_path: Path, table_type: str) -> None:
    """Every file reads whole: an Arrow error of the filter itself (divide by zero) is an
    InvalidFilterError, never a CorruptFileError, and nothing is written."""
    t = make(tmp_path, table_type)
    before = len(t.timeline.instants())
    bad = pc.divide(pc.field("id"), pc.field("ts") - pc.field("ts")) > 1
    with pytest.raises(InvalidFilterError) as scan_error:
        t.to_arrow(filter=bad)
    with pytest.raises(InvalidFilterError) as update_error:
        t.update(where=bad, set={"region": "x"})
    assert not isinstance(scan_error.value, CorruptFileError) and not isinstance(update_error.value, CorruptFileError)
    assert len(Table.open(t.path).timeline.instants()) == before


def test_a_digit_changed_in_a_committed_event_is_refused_not_trusted(tmp_path: Path) -> None:
    """Issue 45: an event whose payload still parses after a byte changed (here a data
    file's recorded size) was trusted; its checksum now makes it ``CorruptEventError``
    naming the event, on open, and the table reads again once the event is restored."""
    t = make(tmp_path, "cow")
    completed = max((tmp_path / "cow" / ".lakeline" / "timeline").glob("*.json"))
    good = completed.read_bytes()
    size = str(json.loads(good)["payload"]["files"][0]["bytes"]).encode()
    changed = good.replace(b'"bytes":' + size, b'"bytes":' + str(int(size) + 1).encode(), 1)
    assert changed != good and json.loads(changed)["payload"]  # still well-formed JSON
    completed.write_bytes(changed)
    with pytest.raises(CorruptEventError, match=completed.name):
        Table.open(t.path).to_arrow()
    completed.write_bytes(good)
    assert Table.open(t.path).to_arrow().num_rows == t.to_arrow().num_rows > 0
