"""Bad input to the change feed and the DuckDB read (audit 2026-12-07: D17, D18, D19)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from lakeline.table import Table
from lakeline.timeline.errors import InstantNotFoundError, InvalidBookmarkError, InvalidConnectionError

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


@pytest.fixture
def table(tmp_path: Path) -> Table:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts")
    t.upsert(pa.table({"id": [1, 2], "ts": [1, 1], "v": ["a", "b"]}, schema=SCHEMA))
    t.upsert(pa.table({"id": [2, 3], "ts": [2, 2], "v": ["B", "c"]}, schema=SCHEMA))
    return t


def test_changes_takes_an_instant_id_as_text_as_as_of_does(table: Table) -> None:
    """D17 (CF2): ``changes("3")`` said "instant 3 is not a completed instant (absent)"."""
    first, second = [i.id for i in table.timeline.instants() if i.action.writes_data]
    assert table.to_arrow(as_of=str(first)).num_rows == 2
    by_text = table.changes(str(first), str(second))
    assert by_text.equals(table.changes(first, second))
    assert sorted(by_text.column("id").to_pylist()) == [2, 3]
    assert table.changes(f" {first} ", images=True).num_rows == table.changes(first, images=True).num_rows


@pytest.mark.parametrize("bad", [True, 1.5, "x", "-1", None, "1e3"])
def test_changes_still_refuses_what_is_no_instant_id(table: Table, bad: object) -> None:
    with pytest.raises(InstantNotFoundError):
        table.changes(bad)  # type: ignore[arg-type]
    with pytest.raises(InstantNotFoundError):
        table.changes(1, bad if bad is not None else "y")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["a\x00\nb", "line\nbreak", "tab\there", "bell\x07", "del\x7f", "c1\x85", "\ud800"])
def test_a_bookmark_consumer_with_control_characters_is_refused(table: Table, name: str) -> None:
    """D18 (CF6): it was accepted and listed by ``bookmarks()`` and ``savepoint list``."""
    before = len(table.timeline.instants())
    with pytest.raises(InvalidBookmarkError, match="control characters"):
        table.services.bookmark(name)
    assert len(table.timeline.instants()) == before
    assert table.services.bookmarks() == {}
    with pytest.raises(InstantNotFoundError):  # releasing looks the name up (one made before stays releasable)
        table.services.release_bookmark(name)


def test_unicode_and_blanks_inside_a_consumer_name_are_still_names(table: Table) -> None:
    for name in ["café ü 流", "a b", "naïve-consumer.v2"]:
        table.services.bookmark(name)
    assert set(table.services.bookmarks()) == {"café ü 流", "a b", "naïve-consumer.v2"}


def test_to_duckdb_refuses_what_is_not_a_duckdb_connection(table: Table) -> None:
    """D19 (CF12): ``AttributeError: 'str' object has no attribute 'from_arrow'``."""
    for bad in ["x", 3, object()]:
        with pytest.raises(InvalidConnectionError, match="DuckDB connection"):
            table.to_duckdb(connection=bad)  # type: ignore[arg-type]
    con = duckdb.connect()
    rel = table.to_duckdb(connection=con)
    assert sorted(r[0] for r in rel.select("id").fetchall()) == [1, 2, 3]
