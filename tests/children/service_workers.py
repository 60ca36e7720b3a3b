"""Child processes of the services concurrency test: one table service looping, or a
reader pinned to a snapshot, each in its own process.

Why a script: issue 6's proof races real processes (each with its own ``Table``
handle, heartbeat thread and store connection) on one table: writers (the ``stress``
command of ``tests/children/table_workers.py``), one process per service, and a slow reader.
Each child appends one JSON line per step to its LOG, which the test reads afterwards
(and prints when a check fails). Arguments are JSON; the first is the command.

Commands:
  service PATH TIMELINE NAME STOP LOG READY GO PAUSE_S SEED
      Loop service NAME (compaction, clustering, cleaning, archival) until STOP
      exists, sleeping up to PAUSE_S between runs: mostly the scheduled run
      (``t.services.run(NAME)``, the table's triggers), every third run the explicit
      call (``compact()``, ``cluster()`` (linear or zorder), ``clean()``,
      ``archive()``). One line per result: {"service", "call", "instant", "state",
      "action", "aborted", "stats"}; a LakelineError is logged as {"error": class name,
      "message"} and the loop goes on (the test decides which are acceptable); any
      other exception is logged with its traceback and ends the process with an error.
  reader PATH TIMELINE STOP LOG READY GO PAUSE_S
      Until STOP exists: savepoint the latest completed write, read that snapshot
      slowly (``t.scan(as_of=...)``, then one file slice at a time with a sleep in
      between) several times while cleaning runs, then release the savepoint. One
      line per round: {"instant", "seq", "savepoint", "rows" (its first read),
      "reads", "mismatches"}; a read error is logged as {"error", "message"} too.
  torture PATH TIMELINE NAME READY GO LOG SEED
      For the kill -9 torture (``tests/table/concurrency/test_service_torture.py``): warms up, writes
      READY, waits for GO (the kill's clock starts there), then runs service NAME
      over and over until the test kills it: the explicit call of compaction,
      clustering, cleaning or archival; for "indexing", drop the index
      "torture_stats" if it is there, then create it (a column_stats build); for
      "rollback", ``rollback_failed()``. Appends {"call": n, "end_s": seconds since
      GO} to LOG after each call (the test sizes its kill delays by them). Any error
      ends the process.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa
from lakeline.services.plugin import ServiceResult
from lakeline.table import Table
from lakeline.table.read.scan import SliceRead, read_slice
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.errors import LakelineError

SERVICE_WORKERS_PY = Path(__file__).resolve()
#: Rounds of slow reads of one pinned snapshot before the reader moves on to a newer one.
READS_PER_SNAPSHOT = 3


def _start(path: str, timeline: str | None, ready: str, go: str) -> Table:
    t = Table.open(path, timeline=timeline)
    t.to_arrow()  # connect and warm up before the start line, not after it
    Path(ready).write_text(str(os.getpid()))
    while not os.path.exists(go):
        time.sleep(0.005)
    return t


def _write(out: TextIO, rec: dict[str, Any]) -> None:
    out.write(json.dumps(rec, default=str) + "\n")
    out.flush()


def _call(t: Table, name: str, explicit: bool, rng: random.Random) -> tuple[str, list[ServiceResult]]:
    """One run of service ``name``: the scheduled run, or the explicit call."""
    if not explicit:
        return "run", t.services.run(name)
    if name == "compaction":
        return "compact", [t.services.compact()]
    if name == "clustering":
        strategy = rng.choice(["linear", "zorder"])
        return f"cluster-{strategy}", [t.services.cluster(strategy=strategy)]
    if name == "cleaning":
        return "clean", [t.services.clean(dry_run=False)]
    if name == "archival":
        return "archive", [t.services.archive()]
    raise ValueError(f"unknown service {name!r}")


def service(
    path: str, timeline: str | None, name: str, stop: str, log: str, ready: str, go: str, pause_s: float, seed: int
) -> None:
    rng = random.Random(seed)
    t = _start(path, timeline, ready, go)
    with open(log, "a", encoding="utf-8") as out:
        n = 0
        while not os.path.exists(stop):
            n += 1
            explicit = n % 3 == 0
            rec: dict[str, Any] = {"service": name, "n": n, "explicit": explicit}
            try:
                call, results = _call(t, name, explicit, rng)
            except LakelineError as e:
                _write(out, {**rec, "error": type(e).__name__, "message": str(e)})
            except BaseException as e:
                _write(
                    out,
                    {
                        **rec,
                        "error": type(e).__name__,
                        "message": repr(e),
                        "trace": traceback.format_exc(),
                        "fatal": True,
                    },
                )
                raise
            else:
                for r in results:
                    inst = r.instant
                    stats = {k: v for k, v in r.stats.items() if not isinstance(v, (list, dict))}
                    _write(
                        out,
                        {
                            **rec,
                            "call": call,
                            "instant": inst.id if inst else None,
                            "state": inst.state if inst else None,
                            "action": inst.action if inst else None,
                            "aborted": r.aborted,
                            "stats": stats,
                        },
                    )
            time.sleep(rng.random() * pause_s)


def read_slowly(t: Table, instant: int, pause_s: float) -> list[tuple[int, str]]:
    """The rows of the snapshot as of ``instant``, read one file slice at a time with a
    sleep after each, so cleaning has time to run in the middle of the read."""
    scan = t.scan(as_of=instant)
    cfg = t.config
    parts = []
    for s in scan.slices:
        parts.append(read_slice(SliceRead(t.storage, s, cfg.schema, cfg.record_key, cfg.ordering_field)))
        time.sleep(pause_s)
    rows = pa.concat_tables(parts) if parts else cfg.schema.empty_table()
    return sorted(zip(rows.column("id").to_pylist(), rows.column("v").to_pylist()))


def reader(path: str, timeline: str | None, stop: str, log: str, ready: str, go: str, pause_s: float) -> None:
    t = _start(path, timeline, ready, go)
    with open(log, "a", encoding="utf-8") as out:
        while not os.path.exists(stop):
            writes = [i for i in t.timeline.completed() if i.action.writes_data]
            if not writes:
                time.sleep(0.05)
                continue
            target = writes[-1]
            rec: dict[str, Any] = {"instant": target.id, "seq": target.completed_seq}
            try:
                sp = t.services.savepoint(target.id)
            except LakelineError as e:
                # Creating a savepoint of a snapshot cleaned meanwhile fails by design.
                _write(out, {**rec, "savepoint_error": type(e).__name__, "message": str(e)})
                continue
            rec["savepoint"] = sp.id
            try:
                first = read_slowly(t, target.id, pause_s)
                mismatches = 0
                for _ in range(READS_PER_SNAPSHOT - 1):
                    mismatches += read_slowly(t, target.id, pause_s) != first
                    mismatches += (
                        sorted(zip(*(t.to_arrow(as_of=target.id).column(c).to_pylist() for c in ("id", "v")))) != first
                    )
                _write(out, {**rec, "rows": first, "reads": 2 * READS_PER_SNAPSHOT - 1, "mismatches": mismatches})
            except (LakelineError, OSError, pa.ArrowException) as e:
                _write(out, {**rec, "error": type(e).__name__, "message": str(e), "trace": traceback.format_exc()})
            finally:
                t.services.release_savepoint(sp.id)


def torture(path: str, timeline: str | None, name: str, ready: str, go: str, log: str, seed: int) -> None:
    rng = random.Random(seed)
    if name == "rollback":
        # The child's one rollback instant is a small part of its run (on the object
        # store, under CI's load, 13 kills at random moments all missed it once): held
        # open a moment after it went inflight, before it deletes anything, a random
        # kill lands inside it far more often; the kill still falls anywhere in it.
        faults.arm("rollback.after_inflight", "pause:0.05")
    t = _start(path, timeline, ready, go)
    t0 = time.monotonic()
    with open(log, "a", encoding="utf-8") as out:
        n = 0
        while True:
            if name == "indexing":
                if any(d.name == "torture_stats" for d in t.indexes.list()):
                    t.indexes.drop("torture_stats")
                t.indexes.create("column_stats", name="torture_stats")
            elif name == "rollback":
                t.services.rollback_failed()
            else:
                _call(t, name, True, rng)
            _write(out, {"call": n, "end_s": time.monotonic() - t0})
            n += 1


COMMANDS = {"service": service, "reader": reader, "torture": torture}

if __name__ == "__main__":
    name, *args = (json.loads(a) for a in sys.argv[1:])
    COMMANDS[name](*args)  # type: ignore[operator]
