"""Idempotent writes (``txn=(app_id, version)``): a replayed batch lands once.

Why: a pipeline that crashes after its write landed but before it recorded its progress
replays the batch. Every write takes ``txn``; a version at or below the application's
newest committed one lands nothing, whatever the write would have done (even an insert
whose keys are now in the table). Two writer *processes* that race with the same pair
both reach the completion with files written: the completion check on the exact log
lets exactly one land, and the other's replay finds the version committed. The versions
live on the timeline, so archival keeps them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table
from lakeline.timeline.errors import InvalidTxnError
from lakeline.timeline.instant import State

from tests.children.table_workers import WORKERS_PY
from tests.helpers import finish, start_script, wait_for_files

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def rows(ids: range, v: str = "x") -> pa.Table:
    return pa.table({"id": list(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def keyed(tmp_path: Path, table_type: str = "cow", **props: Any) -> Table:
    return Table.create(tmp_path / "t", SCHEMA, record_key="id", table_type=table_type, properties=props)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_version_at_or_below_the_newest_lands_nothing_on_every_write(tmp_path: Path, table_type: str) -> None:
    t = keyed(tmp_path, table_type)
    assert t.txn_version("ingest") is None
    first = t.insert(rows(range(10)), txn=("ingest", 1))
    assert first.instant is not None and t.txn_version("ingest") == 1
    events = t.timeline.last_seq
    again = t.insert(rows(range(10)), txn=("ingest", 1))  # would be DuplicateKeyError
    older = t.upsert(rows(range(5), "old"), txn=("ingest", 0))
    assert again.instant is None and again.stats == {"txn_skipped": 1}
    assert older.instant is None and older.stats == {"txn_skipped": 1}
    assert t.timeline.last_seq == events  # nothing was appended
    # Each write kind carries a version; each replay of it lands nothing.
    writes = [
        lambda txn: t.upsert(rows(range(5, 15), "u"), txn=txn),
        lambda txn: t.delete(pa.table({"id": pa.array([0, 1], pa.int64())}), txn=txn),
        lambda txn: t.delete_where(pc.field("id") == 2, txn=txn),
        lambda txn: t.update(pc.field("id") == 3, {"v": "set"}, txn=txn),
        lambda txn: t.overwrite(rows(range(20, 25), "o"), txn=txn),
    ]
    for version, write in enumerate(writes, start=2):
        assert write(("ingest", version)).instant is not None
        expected = t.to_arrow().sort_by("id")
        assert write(("ingest", version)).stats == {"txn_skipped": 1}
        assert t.to_arrow().sort_by("id").equals(expected)
    assert t.txn_version("ingest") == 6
    # Applications are independent; a plain write carries none.
    assert t.insert(rows(range(30, 31)), txn=("other", 1)).instant is not None
    assert t.insert(rows(range(31, 32))).instant is not None
    assert (t.txn_version("ingest"), t.txn_version("other")) == (6, 1)
    assert Table.open(t.path).txn_version("ingest") == 6


@pytest.mark.parametrize(
    "bad", [("", 1), (" ", 1), ("a", -1), ("a", True), ("a", "1"), ("a", 1.0), "a", ("a", 1, 2), ["a"], ("x" * 257, 1)]
)
def test_a_malformed_txn_is_refused_before_anything_is_written(tmp_path: Path, bad: Any) -> None:
    t = keyed(tmp_path)
    events = t.timeline.last_seq
    with pytest.raises(InvalidTxnError):
        t.insert(rows(range(3)), txn=bad)
    assert t.timeline.last_seq == events and t.to_arrow().num_rows == 0


def test_the_version_survives_archival(tmp_path: Path) -> None:
    t = keyed(tmp_path, **{"archive.max-active-instants": 3, "archive.min-active-instants": 1})
    t.insert(rows(range(3)), txn=("ingest", 4))
    for i in range(6):
        t.upsert(rows(range(3), f"v{i}"))
    t.services.archive()
    fresh = Table.open(t.path)
    assert fresh.log.store.archived_through() >= 2  # the txn's instant left the active log
    assert fresh.txn_version("ingest") == 4
    assert fresh.insert(rows(range(3)), txn=("ingest", 4)).stats == {"txn_skipped": 1}


def test_writer_processes_racing_with_one_version_land_it_once(tmp_path: Path) -> None:
    """Four processes each insert their own rows with the same ``txn``; each pauses with
    its files written right before ``completed``, then all go at once: exactly one lands,
    the others are rolled back and their replays land nothing."""
    t = keyed(tmp_path)
    procs, dirs = [], []
    for n in range(4):
        fault_dir = tmp_path / f"faults-{n}"
        fault_dir.mkdir()
        spec = {"op": "insert", "rows": [{"id": 100 * n + i, "v": f"w{n}"} for i in range(5)], "txn": ["race", 7]}
        procs.append(
            start_script(
                WORKERS_PY,
                ["op", t.path, None, spec],
                faults="commit.before_complete=wait",
                env={"LAKELINE_FAULT_DIR": str(fault_dir)},
            )
        )
        dirs.append(fault_dir)
    try:
        wait_for_files([d / "commit.before_complete.reached" for d in dirs], timeout=120)
    finally:
        for d in dirs:
            (d / "commit.before_complete.release").write_text("go")
    outcomes = []
    for proc in procs:
        rc, out, err = finish(proc)
        assert rc == 0, err[-3000:]
        outcomes.append(json.loads(out.strip().splitlines()[-1]))
    landed = [o for o in outcomes if o["instant"] is not None]
    assert len(landed) == 1, outcomes
    assert all(o["stats"] == {"txn_skipped": 1} for o in outcomes if o["instant"] is None)
    got = t.to_arrow()
    assert got.num_rows == 5 and len(set(got["v"].to_pylist())) == 1
    assert t.txn_version("race") == 7
    writes = [i for i in t.timeline.instants() if i.action.writes_data]
    assert sum(1 for i in writes if i.state is State.COMPLETED and "txn" in i.metadata) == 1
    assert sum(1 for i in writes if i.state is State.ROLLED_BACK) == 3  # the losers' attempts
