"""Child-process entry points for the table's concurrency, crash and conflict tests.

Why a script: every writer in these tests must be a real, separate process with its own
``Table`` handle, heartbeat thread and store connection, that a fault point
(``LAKELINE_FAULTS``) can kill or pause at any step of the commit protocol, or that the
test can freeze with SIGSTOP. Arguments are JSON; the first is the command.

Commands:
  stress PATH TIMELINE WORKER COMMITS SEED LOG READY GO [KEYS] [OPTIONS]
      COMMITS random upserts and deletes of keys in range(KEYS) (default 64), after all
      workers are ready (READY file written, GO file awaited). Every write appends one
      JSON line to LOG: its rows or keys, and its outcome: "committed" (with the
      instant id), "conflict" (CommitConflictError) or "noop" (nothing to write).
      OPTIONS: {"upsert_share": 0.7, "max_rows": 4, "stop": null, "ts": null,
      "pause_s": 0, "spark": false, "inline": []}: "inline" names services every write
      runs inline after its commit (``lakeline.services.inline``), "spark" writes through
      ``lakeline.spark.write`` from a Spark application of its own (``local[1]``),
      "stop" names a file whose existence ends the run early (COMMITS is then an
      upper bound; for runs of a set duration), "ts" a constant value of an
      ordering column "ts" in every row (a constant keeps the completion-order model
      exact: on equal ordering values the later commit wins), "pause_s" the most a
      worker sleeps (at random) between writes, so services get turns.
  op PATH TIMELINE SPEC
      One write, SPEC = {"op": "insert"|"upsert"|"overwrite", "rows": [{...}, ...],
      "partitions": [...]}, {"op": "delete", "keys": [{...}, ...]} or {"op":
      "delete_where", "range": [lo, hi]} (``lo <= id < hi``), each with an optional
      "txn": [app_id, version]. Prints one JSON
      line: {"ok": true, "instant": id, "stats": {...}} or {"ok": false, "error":
      "<ErrorClassName>", "message": "..."}.
  spark_op PATH TIMELINE SPEC [MASTER]
      ``op`` through ``lakeline.spark.write`` from a Spark application of its own.
  rollback PATH TIMELINE
      ``t.services.rollback_failed()``; prints {"instant": id or null, "stats": {...}}.
  torture PATH TIMELINE SEED LOG READY GO [KEYS]
      The only writer of a table (``id`` int64, ``v`` string), killed with SIGKILL by
      the test at a random moment: warms up, writes READY, waits for GO (the kill's
      clock starts there), reads the live keys, then loops forever over random
      upserts, deletes, inserts (of keys it knows are absent), ``delete_where`` of a
      key range and (rarely) overwrites, of keys in range(KEYS). Before each write it
      appends {"begin": n, **spec} to LOG, after it {"end": n, "outcome":
      "committed"|"noop", "instant": id}, so the test knows every committed write and
      the one the kill interrupted. Any error ends the process (after an
      {"end": n, "outcome": "error"} line).

TIMELINE is null (filesystem store) or a ``postgresql://`` URL.
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
import pyarrow.compute as pc
from lakeline.services import inline
from lakeline.table import Hooks, Table
from lakeline.timeline.errors import CommitConflictError, LakelineError


def _rows(t: Table, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=t.schema)


def _keys(t: Table, keys: list[dict[str, Any]]) -> pa.Table:
    names = list(keys[0]) if keys else list(t.config.record_key)
    return pa.Table.from_pylist(keys, schema=pa.schema([t.schema.field(n) for n in names]))


def run_op(t: Table, spec: dict[str, Any], hooks: Hooks | None = None) -> Any:
    """Run one write described by ``spec`` (see the module docstring), with ``hooks``."""
    op = spec["op"]
    txn = tuple(spec["txn"]) if spec.get("txn") is not None else None
    if op == "insert":
        return t.insert(_rows(t, spec["rows"]), hooks=hooks, txn=txn)
    if op == "upsert":
        return t.upsert(_rows(t, spec["rows"]), hooks=hooks, txn=txn)
    if op == "delete":
        return t.delete(_keys(t, spec["keys"]), hooks=hooks, txn=txn)
    if op == "overwrite":
        return t.overwrite(_rows(t, spec["rows"]), partitions=spec.get("partitions"), hooks=hooks, txn=txn)
    if op == "delete_where":
        lo, hi = spec["range"]
        return t.delete_where((pc.field("id") >= lo) & (pc.field("id") < hi), hooks=hooks, txn=txn)
    raise ValueError(f"unknown op {op!r}")


def spark_runner(timeline: str | None, master: str = "local[1]") -> Any:
    """``run_op`` through ``lakeline.spark.write`` from a Spark application of this
    process (started, and its Python workers warmed up, here)."""
    from lakeline.spark import session, write

    spark = session(master, f"lakeline-worker-{os.getpid()}")
    spark.range(1).collect()

    def run(t: Table, spec: dict[str, Any]) -> Any:
        data = _rows(t, spec["rows"]) if "rows" in spec else _keys(t, spec["keys"])
        return write(spark.createDataFrame(data.to_pandas()), t.path, spec["op"], timeline=timeline)

    return run


def op(path: str, timeline: str | None, spec: dict[str, Any]) -> None:
    t = Table.open(path, timeline=timeline)
    try:
        r = run_op(t, spec)
    except LakelineError as e:
        print(json.dumps({"ok": False, "error": type(e).__name__, "message": str(e)}), flush=True)
        return
    inst = r.instant.id if r.instant is not None else None
    print(json.dumps({"ok": True, "instant": inst, "stats": dict(r.stats)}), flush=True)


def spark_op(path: str, timeline: str | None, spec: dict[str, Any], master: str = "local[1]") -> None:
    """``op`` through ``lakeline.spark.write`` (fault points arm the driver and, through the
    environment the JVM passes on, the executors' Python workers)."""
    t = Table.open(path, timeline=timeline)
    run = spark_runner(timeline, master)
    r = run(t, spec)
    inst = r.instant.id if r.instant is not None else None
    print(json.dumps({"ok": True, "instant": inst, "stats": dict(r.stats)}), flush=True)


def rollback(path: str, timeline: str | None) -> None:
    t = Table.open(path, timeline=timeline)
    r = t.services.rollback_failed()
    inst = r.instant.id if r.instant is not None else None
    print(json.dumps({"instant": inst, "stats": r.stats}), flush=True)


def stress(
    path: str,
    timeline: str | None,
    worker: int,
    commits: int,
    seed: int,
    log: str,
    ready: str,
    go: str,
    keys: int = 64,
    options: dict[str, Any] | None = None,
) -> None:
    opts = {
        "upsert_share": 0.7,
        "max_rows": 4,
        "stop": None,
        "ts": None,
        "pause_s": 0.0,
        "spark": False,
        "inline": [],
        **(options or {}),
    }
    extra = {} if opts["ts"] is None else {"ts": opts["ts"]}
    rng = random.Random(seed)
    t = Table.open(path, timeline=timeline)
    t.to_arrow()  # connect and warm up before the start line, not after it
    run = spark_runner(timeline) if opts["spark"] else run_op
    if opts["inline"]:
        hooks = Hooks(services=[inline(name) for name in opts["inline"]])
        run = lambda t, rec: run_op(t, rec, hooks)  # noqa: E731
    Path(ready).write_text(str(os.getpid()))
    while not os.path.exists(go):
        time.sleep(0.005)
    with open(log, "a", encoding="utf-8") as out:
        for n in range(commits):
            if opts["stop"] is not None and os.path.exists(opts["stop"]):
                break
            if opts["pause_s"]:
                time.sleep(rng.random() * opts["pause_s"])
            ids = rng.sample(range(keys), rng.randint(1, opts["max_rows"]))
            tag = f"w{worker}-{n}"  # names the batch a row came from
            if rng.random() < opts["upsert_share"]:
                rec: dict[str, Any] = {"op": "upsert", "rows": [{"id": i, "v": tag, **extra} for i in ids]}
            else:
                rec = {"op": "delete", "keys": [{"id": i} for i in ids]}
            rec.update(worker=worker, n=n, tag=tag)
            try:
                r = run(t, rec)
            except CommitConflictError as e:
                rec.update(outcome="conflict", message=str(e))
            except BaseException as e:
                rec.update(outcome="error", message=repr(e), trace=traceback.format_exc())
                out.write(json.dumps(rec) + "\n")
                raise
            else:
                if r.instant is None:
                    rec.update(outcome="noop", stats=dict(r.stats))
                else:
                    rec.update(
                        outcome="committed", instant=r.instant.id, stats=dict(r.stats), hook_errors=r.hook_errors
                    )
            out.write(json.dumps(rec) + "\n")
            out.flush()


def torture_spec(rng: random.Random, live: set[int], keys: int, tag: str) -> dict[str, Any]:
    """One random write of the torture writer, given the keys it knows are live."""
    roll = rng.random()
    absent = sorted(set(range(keys)) - live)
    if roll < 0.35 or (roll < 0.55 and not absent):
        ids = rng.sample(range(keys), rng.randint(1, 8))
        return {"op": "upsert", "rows": [{"id": i, "v": tag} for i in ids]}
    if roll < 0.55:
        ids = rng.sample(absent, rng.randint(1, min(8, len(absent))))
        return {"op": "insert", "rows": [{"id": i, "v": tag} for i in ids]}
    if roll < 0.75:
        return {"op": "delete", "keys": [{"id": i} for i in rng.sample(range(keys), rng.randint(1, 6))]}
    if roll < 0.92:
        lo = rng.randrange(keys)
        return {"op": "delete_where", "range": [lo, lo + rng.randint(1, 6)]}
    ids = rng.sample(range(keys), rng.randint(keys // 4, keys // 2))
    return {"op": "overwrite", "rows": [{"id": i, "v": tag} for i in ids]}


def apply_spec(live: set[int], spec: dict[str, Any]) -> None:
    """The keys live after ``spec`` committed."""
    if spec["op"] in ("upsert", "insert"):
        live.update(r["id"] for r in spec["rows"])
    elif spec["op"] == "delete":
        live.difference_update(k["id"] for k in spec["keys"])
    elif spec["op"] == "delete_where":
        live.difference_update(range(*spec["range"]))
    else:
        live.clear()
        live.update(r["id"] for r in spec["rows"])


def torture(path: str, timeline: str | None, seed: int, log: str, ready: str, go: str, keys: int = 64) -> None:
    rng = random.Random(seed)
    t = Table.open(path, timeline=timeline)
    t.to_arrow()  # connect and warm up before the kill's clock starts
    Path(ready).write_text(str(os.getpid()))
    while not os.path.exists(go):
        time.sleep(0.002)
    live = set(t.to_arrow(columns=["id"]).column("id").to_pylist())
    with open(log, "a", encoding="utf-8") as out:
        n = 0
        while True:
            spec = torture_spec(rng, live, keys, f"s{seed}-{n}")
            out.write(json.dumps({"begin": n, "tag": f"s{seed}-{n}", **spec}) + "\n")
            out.flush()
            try:
                r = run_op(t, spec)
            except BaseException as e:
                out.write(
                    json.dumps({"end": n, "outcome": "error", "message": repr(e), "trace": traceback.format_exc()})
                    + "\n"
                )
                out.flush()
                raise
            apply_spec(live, spec)
            inst = r.instant.id if r.instant is not None else None
            out.write(
                json.dumps({"end": n, "outcome": "noop" if inst is None else "committed", "instant": inst}) + "\n"
            )
            out.flush()
            n += 1


COMMANDS = {"stress": stress, "op": op, "spark_op": spark_op, "rollback": rollback, "torture": torture}


# -- checks the parent (the test) runs ---------------------------------------------------

WORKERS_PY = Path(__file__).resolve()


def data_instants(tl: Any) -> list[Any]:
    """Every data-writing instant on a timeline, by id."""
    return [i for i in tl.instants() if i.action.writes_data]


def data_files_on_disk(t: Table) -> set[str]:
    """Relative paths of every Parquet file under the table, outside ``.lakeline/``
    (a local folder or an object store alike)."""
    from lakeline.timeline.storage.ownership import walk_files

    return {rel for i in walk_files(t.storage) if (rel := t.storage.relative(i.path)).endswith(".parquet")}


def referenced_files(t: Table) -> set[str]:
    """Every file any completed data instant added (all versions, not only the live)."""
    out: set[str] = set()
    for inst in t.timeline.completed():
        if inst.action.writes_data:
            out.update(f["path"] for f in inst.metadata.get("files", ()))
    return out


def check_files_on_disk(t: Table) -> None:
    """What is on disk agrees with the timeline.

    Every file the view reads exists; every data file on disk was added by a completed
    instant or belongs to a still pending one (no orphans); no file and no marker of a
    rolled-back instant is left; markers exist only for pending instants.
    """
    from lakeline.timeline.markers import instants_with_markers
    from lakeline.timeline.view.file_group import parse_data_file_name

    tl = t.timeline
    disk = data_files_on_disk(t)
    live = {f.path for f in t.view(tl).files()}
    assert live <= disk, f"files the view reads are missing on disk: {sorted(live - disk)[:5]}"
    states = {i.id: i.state for i in tl.instants()}
    owner = {}
    for rel in disk:
        parsed = parse_data_file_name(rel)
        assert parsed is not None, f"a data file lakeline did not name: {rel}"
        owner[rel] = parsed.instant
    left = sorted(rel for rel, i in owner.items() if states.get(i) == "rolled_back")
    assert not left, f"files of rolled-back instants are still on disk: {left[:5]}"
    orphans = sorted(
        rel for rel in disk - referenced_files(t) if states.get(owner[rel]) not in ("requested", "inflight")
    )
    assert not orphans, f"files on disk no completed instant added: {orphans[:5]}"
    pending = {i.id for i in tl.pending()}
    stray = [i for i in instants_with_markers(t.storage) if i not in pending]
    assert not stray, f"markers of finished instants left: {stray} ({[states.get(i) for i in stray]})"


if __name__ == "__main__":
    name, *args = (json.loads(a) for a in sys.argv[1:])
    COMMANDS[name](*args)  # type: ignore[operator]
