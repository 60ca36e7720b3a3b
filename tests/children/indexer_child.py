"""Child process for the async-indexer tests: one index action in its own process, so a
fault point (``LAKELINE_FAULTS``) can kill it at any step, or two of them can race.

Commands (arguments are JSON):
  create PATH KIND WAIT_FOR_FILE [IN_MEMORY_BYTES]
                                   wait until WAIT_FOR_FILE exists (a start barrier; null:
                                   no wait), then ``t.indexes.create(KIND)``; prints
                                   {"ok": true, "state": ...} or {"ok": false, "error": ...};
                                   IN_MEMORY_BYTES replaces the record index's small-build
                                   limit (0: every build spills)
  run PATH                         ``t.services.run("indexing")``; prints the instants' states
  upsert PATH IDS                  upsert rows of IDS (ts 1, v "child"); prints the instant
  write PATH WORKER KEYS STOP LOG  upsert batches until STOP exists: each batch updates
                                   random keys of range(KEYS) and inserts new keys of
                                   this worker's own range, with ts = time.time_ns();
                                   appends one JSON line per commit to LOG
                                   ({"instant", "rows"} or {"error"})
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

from lakeline.indexes.record_index import spill
from lakeline.table import Table
from lakeline.timeline.errors import LakelineError


def main(argv: list[str]) -> None:
    cmd, *args = [json.loads(a) for a in argv]
    t = Table.open(args[0])
    if cmd == "create":
        barrier = args[2]
        if len(args) > 3 and args[3] is not None:
            spill.IN_MEMORY_BYTES = int(args[3])
        while barrier is not None and not Path(barrier).exists():
            time.sleep(0.001)
        try:
            d = t.indexes.create(args[1])
            print(json.dumps({"ok": True, "state": d.state}), flush=True)
        except LakelineError as e:
            print(json.dumps({"ok": False, "error": type(e).__name__, "message": str(e)}), flush=True)
    elif cmd == "run":
        results = t.services.run("indexing")
        print(json.dumps([r.instant.state if r.instant else None for r in results]), flush=True)
    elif cmd == "upsert":
        import pyarrow as pa

        ids = args[1]
        r = t.upsert(pa.table({"id": ids, "ts": [1] * len(ids), "v": ["child"] * len(ids)}, schema=t.schema))
        print(json.dumps({"instant": r.instant.id if r.instant else None}), flush=True)
    elif cmd == "write":
        write(t, *args[1:])
    else:
        raise SystemExit(f"unknown command {cmd!r}")


def write(t: Table, worker: int, keys: int, stop: str, log_path: str) -> None:
    import pyarrow as pa

    rng = random.Random(worker)
    fresh = 1_000_000_000 * (worker + 1)
    with open(log_path, "a") as log:
        while not Path(stop).exists():
            ids = rng.sample(range(keys), 40) + list(range(fresh, fresh + 10))
            fresh += 10
            ts = time.time_ns()
            batch = pa.table({"id": ids, "ts": [ts] * len(ids), "v": [f"w{worker}-{ts}"] * len(ids)}, schema=t.schema)
            try:
                r = t.upsert(batch)
                log.write(
                    json.dumps(
                        {
                            "instant": r.instant.id,
                            "ids": ids,
                            "ts": ts,
                            "v": f"w{worker}-{ts}",
                            "total_s": r.timings["total_s"],
                        }
                    )
                    + "\n"
                )
            except LakelineError as e:
                log.write(json.dumps({"error": type(e).__name__, "message": str(e)}) + "\n")
            log.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
