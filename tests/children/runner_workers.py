"""Writer processes of the runner proof (``tests/services/runner/test_runner_processes.py``): each writes to
every table of the run, in its own process, until a stop file appears.

Why a script of its own: ``tests/children/table_workers.py``'s ``stress`` writes one keyed table;
the runner's proof needs writers that spread over five tables at once, one of them
append-only (inserts only, no key). Arguments are JSON; the first is the command.

Commands:
  writer TABLES WORKER SEED LOG READY GO STOP KEYS PAUSE_S
      TABLES: [{"name", "path", "timeline", "keyed"}]. Until STOP exists: pick a table
      at random and write one batch: on a keyed table an upsert (70%) or a delete of
      1-8 random keys of range(KEYS); on an append-only table an insert of 1-8 rows
      with ids no other write uses. Each write appends one JSON line to LOG: {"table",
      "op", "rows"|"keys", "tag", "outcome": "committed" (with "instant") | "conflict"
      | "noop" | "error" (with "error", "message")}. Rows are {"id", "v"}; "v" is the
      batch's tag, so the test can tell which batch a row came from. A LakelineError
      other than a conflict is logged and the loop goes on (the test fails on it); any
      other exception ends the process with a traceback.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import pyarrow as pa
from lakeline.table import Table
from lakeline.timeline.errors import CommitConflictError, LakelineError

RUNNER_WORKERS_PY = Path(__file__).resolve()
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])


def _write(t: Table, keyed: bool, rec: dict[str, Any]) -> Any:
    if rec["op"] == "upsert":
        return t.upsert(pa.Table.from_pylist(rec["rows"], schema=SCHEMA))
    if rec["op"] == "insert":
        return t.insert(pa.Table.from_pylist(rec["rows"], schema=SCHEMA))
    return t.delete(pa.Table.from_pylist(rec["keys"], schema=pa.schema([SCHEMA.field("id")])))


def writer(
    tables: list[dict[str, Any]],
    worker: int,
    seed: int,
    log: str,
    ready: str,
    go: str,
    stop: str,
    keys: int,
    pause_s: float,
) -> None:
    rng = random.Random(seed)
    handles = [Table.open(spec["path"], timeline=spec["timeline"]) for spec in tables]
    for t in handles:
        t.to_arrow()  # connect and warm up before the start line
    Path(ready).write_text(str(os.getpid()))
    while not os.path.exists(go):
        time.sleep(0.005)
    next_id = 10_000_000 * (worker + 1)  # append-only ids: disjoint per worker
    with open(log, "a", encoding="utf-8") as out:
        n = 0
        while not os.path.exists(stop):
            time.sleep(rng.random() * pause_s)
            k = rng.randrange(len(tables))
            spec, t = tables[k], handles[k]
            tag = f"w{worker}-{n}"
            size = rng.randint(1, 8)
            if not spec["keyed"]:
                rows = [{"id": next_id + i, "v": tag} for i in range(size)]
                next_id += size
                rec: dict[str, Any] = {"op": "insert", "rows": rows}
            elif rng.random() < 0.7:
                rec = {"op": "upsert", "rows": [{"id": i, "v": tag} for i in rng.sample(range(keys), size)]}
            else:
                rec = {"op": "delete", "keys": [{"id": i} for i in rng.sample(range(keys), size)]}
            rec.update(table=spec["name"], tag=tag, worker=worker, n=n)
            try:
                r = _write(t, spec["keyed"], rec)
            except CommitConflictError as e:
                rec.update(outcome="conflict", message=str(e))
            except LakelineError as e:
                rec.update(outcome="error", error=type(e).__name__, message=str(e), trace=traceback.format_exc())
            except BaseException as e:
                rec.update(outcome="error", error=type(e).__name__, message=repr(e), trace=traceback.format_exc())
                out.write(json.dumps(rec) + "\n")
                raise
            else:
                rec.update(
                    outcome="noop" if r.instant is None else "committed",
                    instant=None if r.instant is None else r.instant.id,
                )
            out.write(json.dumps(rec) + "\n")
            out.flush()
            n += 1


COMMANDS = {"writer": writer}

if __name__ == "__main__":
    name, *args = (json.loads(a) for a in sys.argv[1:])
    COMMANDS[name](*args)  # type: ignore[operator]
