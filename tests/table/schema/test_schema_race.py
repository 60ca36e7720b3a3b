"""Schema changes racing writers and services in other processes (issue 29 item 5).

A child process writes (or compacts, or clusters) and stops right before its
``completed`` event (fault point ``wait``); this process changes the schema meanwhile;
then the child goes on. A write planned against the replaced schema replays and
re-conforms its rows: it lands when they still fit (a widening, an added column) and
fails typed when they do not (an old column name), leaving nothing. A compaction or a
clustering completes with files written under the old schema, and they read right by
field id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.table import Table

from tests.helpers import finish, start_script, wait_for_files

CHILD = Path(__file__).resolve().parents[2] / "children" / "schema_child.py"
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("qty", pa.int32()), ("price", pa.float32())])


def _table(path: Path, table_type: str) -> Table:
    t = Table.create(path, SCHEMA, record_key="id", table_type=table_type)
    t.insert(pa.Table.from_pylist([{"id": i, "qty": i, "price": i / 2} for i in range(4)], schema=SCHEMA))
    t.upsert(pa.Table.from_pylist([{"id": 1, "qty": 10, "price": 5.0}], schema=SCHEMA))
    return t


def _paused(tmp: Path, point: str, args: list[Any]) -> tuple[Any, Path]:
    fault_dir = tmp / f"faults-{point}"
    fault_dir.mkdir()
    proc = start_script(CHILD, args, faults=f"{point}=wait", env={"LAKELINE_FAULT_DIR": str(fault_dir)})
    try:
        wait_for_files([fault_dir / f"{point}.reached"], timeout=120)
    except AssertionError:
        proc.kill()
        raise AssertionError(f"child never reached {point}: {finish(proc)}") from None
    return proc, fault_dir


def _release(paused: tuple[Any, Path], point: str) -> dict[str, Any]:
    proc, fault_dir = paused
    (fault_dir / f"{point}.release").write_text("go")
    rc, out, err = finish(proc)
    assert rc == 0, f"child failed (rc={rc}):\n{err[-3000:]}"
    return json.loads(out.strip().splitlines()[-1])


def _rows(t: Table) -> dict[int, dict[str, Any]]:
    return {r["id"]: r for r in t.to_arrow().to_pylist()}


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_write_with_a_renamed_column_fails_typed_after_the_race(tmp_path: Path, table_type: str) -> None:
    t = _table(tmp_path / "t", table_type)
    before = _rows(t)
    paused = _paused(tmp_path, "commit.before_complete", ["write", str(tmp_path / "t"), "upsert",
                                                          [{"id": 2, "qty": 99, "price": 1.5}]])  # fmt: skip
    with t.update_schema() as u:
        u.rename_column("qty", "quantity")
    out = _release(paused, "commit.before_complete")
    assert out["error"] == "SchemaMismatchError", out
    assert _rows(Table.open(tmp_path / "t")) == {
        k: {"id": r["id"], "quantity": r["qty"], "price": r["price"]} for k, r in before.items()
    }
    assert [i.state for i in t.timeline.instants() if i.action.value in ("commit", "deltacommit")][-1] == "rolled_back"


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_write_whose_rows_still_fit_replays_and_lands_conformed(tmp_path: Path, table_type: str) -> None:
    t = _table(tmp_path / "t", table_type)
    paused = _paused(tmp_path, "commit.before_complete", ["write", str(tmp_path / "t"), "upsert",
                                                          [{"id": 2, "qty": 99, "price": 1.5}]])  # fmt: skip
    with t.update_schema() as u:
        u.update_column("price", pa.float64())
        u.update_column("qty", pa.int64())
        u.add_column("note", pa.string(), after="id")
    out = _release(paused, "commit.before_complete")
    assert out.get("instant") is not None, out
    got = _rows(Table.open(tmp_path / "t"))
    assert got[2] == {"id": 2, "note": None, "qty": 99, "price": 1.5}
    assert got[1] == {"id": 1, "note": None, "qty": 10, "price": 5.0}
    assert Table.open(tmp_path / "t").to_arrow().schema.field("price").type == pa.float64()


@pytest.mark.parametrize("service", ["compaction", "clustering"])
def test_compaction_and_clustering_racing_a_schema_change_read_right_by_id(tmp_path: Path, service: str) -> None:
    t = _table(tmp_path / "t", "mor")
    before = _rows(t)
    point = f"{service}.before_complete"
    paused = _paused(tmp_path, point, ["service", str(tmp_path / "t"), service])
    with t.update_schema() as u:
        u.rename_column("qty", "quantity")
        u.delete_column("price")
        u.add_column("price", pa.float64())  # the old name, a new column: null in every file
        u.update_column("quantity", pa.int64())
    out = _release(paused, point)
    assert out["instant"] is not None, out
    done = Table.open(tmp_path / "t")
    assert done.timeline.get(out["instant"]).state == "completed"
    want = {k: {"id": k, "quantity": r["qty"], "price": None} for k, r in before.items()}
    assert _rows(done) == want
    done.upsert(pa.Table.from_pylist([{"id": 3, "quantity": 2**40, "price": 0.25}], schema=done.schema))
    assert _rows(done)[3] == {"id": 3, "quantity": 2**40, "price": 0.25}
