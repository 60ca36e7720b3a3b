"""Child-process entry points for the update tests (tests/table/write/test_update.py).

Why a script: the concurrency tests of ``t.update`` race real, separate processes, each
with its own ``Table`` handle, that a fault point (``LAKELINE_FAULTS``) can pause right
before it completes. Arguments are JSON; the first is the command. The table has columns
``id`` (key), ``ts`` (ordering, kept at 0 by every writer) and ``n`` (int64).

Commands:
  one PATH SPEC
      One write: {"op": "update", "id": K} (``n = n + 1`` where ``id == K``, and
      ``n < B`` with "below": B) or
      {"op": "upsert", "id": K, "n": V}. Prints {"ok": true, "instant": id, "stats": {...}}
      or {"ok": false, "error": "<ErrorClassName>", "message": "..."}.
  loop PATH ROLE COUNT READY GO LOG
      COUNT writes of ROLE ("update" of key 0, or "upsert" of key 0 with n = 1000 * (i + 1)),
      started together with the other workers (READY written, GO awaited); one JSON line
      per write in LOG: the spec, and "committed" (with the instant id) or "conflict".
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from lakeline.table import Table
from lakeline.table.write.writer import WriteResult
from lakeline.timeline.errors import CommitConflictError, LakelineError


def run(t: Table, spec: dict[str, Any]) -> WriteResult:
    if spec["op"] == "update":
        where = pc.field("id") == spec["id"]
        if "below" in spec:
            where = where & (pc.field("n") < spec["below"])
        return t.update(where=where, set={"n": pc.field("n") + 1})
    rows = pa.Table.from_pylist([{"id": spec["id"], "ts": 0, "n": spec["n"]}], schema=t.schema)
    return t.upsert(rows)


def one(path: str, spec: dict[str, Any]) -> None:
    t = Table.open(path)
    try:
        r = run(t, spec)
    except LakelineError as e:
        print(json.dumps({"ok": False, "error": type(e).__name__, "message": str(e)}), flush=True)
        return
    print(json.dumps({"ok": True, "instant": r.instant.id if r.instant else None, "stats": dict(r.stats)}), flush=True)


def loop(path: str, role: str, count: int, ready: str, go: str, log: str) -> None:
    t = Table.open(path)
    t.to_arrow()  # warm up before the start line
    Path(ready).write_text(str(os.getpid()))
    while not os.path.exists(go):
        time.sleep(0.005)
    with open(log, "a", encoding="utf-8") as out:
        for i in range(count):
            spec: dict[str, Any] = (
                {"op": "update", "id": 0} if role == "update" else {"op": "upsert", "id": 0, "n": 1000 * (i + 1)}
            )
            try:
                r = run(t, spec)
            except CommitConflictError as e:
                spec.update(outcome="conflict", message=str(e))
            else:
                assert r.instant is not None
                spec.update(outcome="committed", instant=r.instant.id)
            out.write(json.dumps(spec) + "\n")
            out.flush()


WORKER_PY = Path(__file__).resolve()

if __name__ == "__main__":
    name, *args = (json.loads(a) for a in sys.argv[1:])
    {"one": one, "loop": loop}[name](*args)  # type: ignore[operator]
