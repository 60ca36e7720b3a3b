"""The archival service (issue 6, point 4), on both timeline stores.

Why: archival moves old events out of the active log into the Parquet archive so that
opening a table stays fast, and docs/services.md ("Archival") says it never changes the result of
a read. So after archiving: ``t.timeline`` lists exactly the instants it listed before
(ids, actions, states, times, plans, metadata), every read (now, as of every instant,
incremental) returns what it returned before, new writes get the next ids, and the
active log is shorter. It never passes a pending instant, a savepoint or the cleaner's
retain point, and a process killed at any of its fault points leaves a timeline with
every event exactly once that the next run finishes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.table import Table
from lakeline.timeline.archive import EventArchive
from lakeline.timeline.diagnostics.faults import CRASH_EXIT_CODE
from lakeline.timeline.errors import InvalidPropertyError

from tests.children.service_child import SERVICE_CHILD
from tests.helpers import run_script
from tests.table.model import DAYS, SCHEMA, table_rows, to_arrow

HEARTBEAT = {"heartbeat.interval-ms": 100, "heartbeat.tolerable-misses": 1}
BOUNDS = {"archive.min-active-instants": 4, "archive.max-active-instants": 8}
COLUMNS = SCHEMA.names


pytestmark = pytest.mark.usefixtures("no_faults")  # no fault point armed before or after a test


def make_table(tmp: Path, timeline: str | None, table_type: str = "mor", **props: Any) -> Table:
    path = str(tmp / "t")
    Table.create(
        path,
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type=table_type,
        properties={**HEARTBEAT, **BOUNDS, "engine.parallelism": 2, "metadata.files.checkpoint-commits": 4, **props},
        timeline=timeline,
    )
    return Table.open(path, timeline=timeline)


def row(i: int, ts: int) -> dict[str, Any]:
    return {"id": i, "ts": ts, "day": DAYS[i % 2], "v": i * ts, "s": f"s{i}-{ts}"}


def commits(t: Table, n: int, start: int = 0) -> None:
    """Upserts touching overlapping keys, and a delete every fifth commit."""
    for c in range(start, start + n):
        if c % 5 == 4:
            ids = [c % 7, (c + 3) % 11]
            t.delete(pa.table({"id": pa.array(ids, pa.int64()), "day": [DAYS[i % 2] for i in ids]}))
        else:
            t.upsert(to_arrow([row(i, c) for i in (c % 7, c % 11 + 20, 100 + c)]))


def instants(t: Table) -> list[dict[str, Any]]:
    return [i.to_dict() for i in t.timeline.instants()]


def reads(t: Table) -> dict[str, Any]:
    """Everything a reader can ask: the table now, as of every completed instant, and
    what changed after every third data instant."""
    tl = t.timeline
    data = [i.id for i in tl.completed() if i.action.writes_data]
    return {
        "now": table_rows(t.to_arrow(), COLUMNS),
        "as_of": {i: table_rows(t.to_arrow(as_of=i), COLUMNS) for i in data},
        "as_of_time": table_rows(t.to_arrow(as_of=tl.get(data[3]).completed_at), COLUMNS),
        "changes": {i: table_rows(t.changes(i), COLUMNS + ["_op"]) for i in data[::3]},
        "changes_range": table_rows(t.changes(data[1], data[6]), COLUMNS + ["_op"]),
        "config": t.config,
    }


def active_events(t: Table) -> int:
    return len(t.log.store.read_from(0))


def fresh(t: Table) -> Table:
    return Table.open(t.path, timeline=t.timeline_url)


def test_archival_keeps_the_timeline_and_every_read(tmp_path: Path, timeline: str | None) -> None:
    t = make_table(tmp_path, timeline)
    commits(t, 24)
    before, seen = instants(t), reads(t)
    events_before = active_events(t)
    r = t.services.archive()
    assert r.aborted is None and r.instant is not None and r.instant.action == "archive"
    assert r.instant.state == "completed"
    st = r.stats
    assert st["first_seq"] == 0 and st["events_archived"] == st["through_seq"] + 1 > 0
    # The active log kept the minimum of completed instants (plus the archive instant).
    reopened = fresh(t)
    assert active_events(reopened) == events_before - st["events_archived"] + 3
    active = [i for i in reopened.timeline.instants() if i.id > st["through_seq"]]
    assert sum(i.is_completed and i.action != "archive" for i in active) == BOUNDS["archive.min-active-instants"]
    assert EventArchive(t.storage).last_seq() == st["through_seq"]
    for handle in (t, reopened):
        after = instants(handle)
        assert after[:-1] == before and after[-1]["id"] == r.instant.id
        assert reads(handle) == seen
        tl = handle.timeline
        assert [e.seq for e in tl.events] == list(range(tl.last_seq + 1))
    # Nothing more to do; new writes get the next ids; the schema can still evolve.
    assert t.services.archive().instant is None
    last = reopened.timeline.last_seq
    w = reopened.upsert(to_arrow([row(500, 1)]))
    assert w.instant.id == last + 1
    assert fresh(t).timeline.get(w.instant.id).state == "completed"
    assert reads(fresh(t))["as_of"] == {**seen["as_of"], w.instant.id: reads(fresh(t))["as_of"][w.instant.id]}


def test_scheduled_runs_wait_for_the_maximum(tmp_path: Path, timeline: str | None) -> None:
    t = make_table(tmp_path, timeline)
    commits(t, 6)  # 7 completed instants with the schema: not above the maximum (8)
    assert t.services.run("archival") == []
    assert t.services.run("archival", dry_run=True)[0].plan is None
    commits(t, 4, start=6)
    due = len(t.timeline.completed())
    assert due > BOUNDS["archive.max-active-instants"]
    (res,) = t.services.run("archival")
    assert res.instant is not None and res.stats["instants_archived"] == due - BOUNDS["archive.min-active-instants"]
    # The explicit call goes down to the minimum whenever more are active.
    commits(t, 2, start=10)
    assert t.services.run("archival") == []
    assert t.services.archive().stats["instants_archived"] >= 2


def test_bounds_are_checked(tmp_path: Path) -> None:
    t = make_table(tmp_path, None, **{"archive.min-active-instants": 9, "archive.max-active-instants": 8})
    commits(t, 3)
    with pytest.raises(InvalidPropertyError):
        t.services.archive()
    with pytest.raises(InvalidPropertyError):
        t.services.schedule("archival", nope=1)


def test_never_passes_a_pending_instant(tmp_path: Path, timeline: str | None) -> None:
    t = make_table(tmp_path, timeline)
    commits(t, 12)  # keys come back from the eighth commit on: slices with logs
    pending = t.services.schedule("compaction", trigger="all")  # planned, not executed: stays requested
    assert pending is not None and pending.state == "requested"
    commits(t, 15, start=12)
    r = t.services.archive()
    assert r.instant is not None and r.stats["through_seq"] < pending.id
    active = {e.seq for e in t.log.store.read_from(0)}
    assert pending.id in active
    assert fresh(t).timeline.get(pending.id).state == "requested"
    assert t.services.execute(pending.id).instant.state == "completed"


def test_never_passes_a_savepoint(tmp_path: Path, timeline: str | None) -> None:
    t = make_table(tmp_path, timeline)
    commits(t, 6)
    pinned = t.timeline.last_completed()
    t.services.savepoint(pinned.id)
    commits(t, 14, start=6)
    r = t.services.archive()
    assert r.instant is not None and r.stats["through_seq"] < pinned.id
    assert pinned.id in {e.instant for e in t.log.store.read_from(0)}
    # Released, the next archival may pass it.
    t.services.release_savepoint(pinned.id)
    commits(t, 6, start=20)
    assert t.services.archive().stats["through_seq"] > pinned.id


def test_never_passes_the_cleaners_retain_point(tmp_path: Path) -> None:
    t = make_table(tmp_path, None, table_type="cow")
    commits(t, 16)
    c = t.services.clean(policy="keep_latest_commits", retain=12, orphan_age_ms=0, dry_run=False)
    assert c.instant is not None
    retain_seq = int(c.instant.metadata["retain_seq"])
    r = t.services.archive()
    assert r.instant is not None and r.stats["through_seq"] < retain_seq
    assert retain_seq in {e.seq for e in t.log.store.read_from(0)}


def test_a_stale_handle_reads_across_the_archive_and_appends_at_the_tail(tmp_path: Path, timeline: str | None) -> None:
    t = make_table(tmp_path, timeline)
    old = fresh(t)
    commits(old, 2)
    commits(t, 20, start=2)
    r = t.services.archive()
    assert r.stats["through_seq"] > old.log.timeline.last_seq  # it read only archived events
    w = old.upsert(to_arrow([row(7, 999)]))
    assert w.instant.id == t.timeline.last_seq - 2  # requested right after the archive instant
    assert instants(old) == instants(t)
    assert table_rows(old.to_arrow(), COLUMNS) == table_rows(t.to_arrow(), COLUMNS)


@pytest.mark.sampled_matrix
@pytest.mark.parametrize("point", ["archival.after_inflight", "archival.after_write", "archival.mid_delete"])
def test_killed_at_a_fault_point_then_run_again(tmp_path: Path, timeline: str | None, point: str) -> None:
    t = make_table(tmp_path, timeline)
    commits(t, 20)
    before, seen = instants(t), reads(t)
    rc, out, err = run_script(SERVICE_CHILD, [t.path, timeline, "archive", {}], faults=f"{point}=crash")
    assert rc == CRASH_EXIT_CODE, err
    crashed = fresh(t)
    tl = crashed.timeline
    assert [e.seq for e in tl.events] == list(range(tl.last_seq + 1))  # no event twice, none missing
    after = instants(crashed)
    assert after[:-1] == before and after[-1]["action"] == "archive" and after[-1]["state"] == "inflight"
    assert reads(crashed) == seen
    time.sleep(0.4)  # the dead executor's heartbeat expires
    r = crashed.services.archive()
    assert r.instant is not None and r.instant.id == after[-1]["id"] and r.instant.state == "completed"
    done = fresh(t)
    tl = done.timeline
    assert [e.seq for e in tl.events] == list(range(tl.last_seq + 1))
    assert instants(done)[:-1] == before and reads(done) == seen
    assert active_events(done) < len(tl.events) - r.stats["events_archived"] + 4
    assert done.log.store.archived_through() == r.stats["through_seq"]


def test_open_reads_a_short_active_log(tmp_path: Path) -> None:
    """What bench/open_bench.py times, by count: a fresh open reads the active log event
    by event, and archival leaves it at the minimum."""
    t = make_table(tmp_path, None, **{"archive.min-active-instants": 10, "archive.max-active-instants": 20})
    commits(t, 60)
    total = len(t.timeline.events)
    assert active_events(t) == total
    t.services.archive()
    reopened = fresh(t)
    assert len(reopened.timeline.events) == total + 3
    assert active_events(reopened) < total // 4
    assert len(list((Path(t.path) / ".lakeline" / "timeline").glob("*.json"))) == active_events(reopened)


def test_cli_show_lists_archived_instants_with_all(tmp_path: Path) -> None:
    t = make_table(tmp_path, None)
    commits(t, 12)
    r = t.services.archive()
    runner = CliRunner()

    def show(*args: str) -> list[dict[str, Any]]:
        res = runner.invoke(cli, ["timeline", "show", t.path, "--json", *args])
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)

    everything = show("--all")
    assert everything == instants(t)
    active = show()
    assert active == [i for i in everything if i["id"] > r.stats["through_seq"]]
    assert len(active) < len(everything)
    text = runner.invoke(cli, ["timeline", "show", t.path])
    assert text.exit_code == 0 and "archived (--all shows them)" in text.stdout
    res = runner.invoke(cli, ["timeline", "inspect", t.path, "0", "--json"])  # the archived schema instant
    assert res.exit_code == 0 and json.loads(res.stdout)["action"] == "schema"
