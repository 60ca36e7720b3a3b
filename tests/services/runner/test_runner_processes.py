"""The runner's proof (issue 15): runner processes keep five tables healthy while writers
write, safely beside each other, through a kill -9 and a SIGTERM.

Why real processes: the promises are about processes (two runners over the same tables,
a runner killed mid-compaction, a runner stopped by a signal), each with its own
handles, heartbeats, leases and store connections. The run:

* five small tables (thousands of rows): copy-on-write, merge-on-read and append-only
  with filesystem timelines, a merge-on-read table with its timeline in PostgreSQL
  listed by path, and one found through a PostgreSQL catalog (``[[catalogs]]``); each
  with its own service schedules (``every 1s``/``every 2s``, one cron) and aggressive
  triggers, so every scheduled service has work;
* three writer processes (``tests/children/runner_workers.py``) write random batches to all five for
  the duration, logging every write and how it ended;
* runner A starts first with a fault point that parks its first compaction right after
  the compaction claimed its instant; runner B starts beside it; A is killed with
  SIGKILL mid-compaction and a fresh runner A2 takes its place; B and A2 run the rest;
* the writers stop, and B and A2 get SIGTERM.

Checks: both runners exit 0 within the grace period; every (table, service) of the
config ran, none failed, and each table's maintenance happened (compactions,
clusterings, cleans, archives completed); no service instant was claimed twice except
those the killed runner held, and none completed twice; the compaction A held was
finished by another runner or rolled back; nothing is pending; the files on disk agree
with the timeline; every table equals its model (the committed writes in completion
order for keyed tables, the committed inserts for the append-only one). 35 s of
writing in ``make test``, 2 minutes under ``-m soak``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pytest
from lakeline.table import Catalog, Table
from lakeline.timeline.instant import Action, Event, State
from lakeline.timeline.plans import SERVICE

from tests.children.runner_workers import RUNNER_WORKERS_PY, SCHEMA
from tests.children.table_workers import check_files_on_disk
from tests.helpers import child_env, finish, start_script, wait_for_files
from tests.table.concurrency.test_concurrency import CompletionOrderModel

#: Keys of the keyed tables (seeded with all of them) and writer processes.
KEYS, WRITERS = 2000, 3
#: Seconds of writing: 35 in ``make test`` (LAKELINE_RUNNER_PROOF_S changes a developer's run), 120
#: under soak. 25 s already showed every service completing on every table on a loaded
#: 2-core machine (the slowest, mor_pg's cleaning, once); 35 s leaves a margin for it.
SHORT_S, SOAK_S = float(os.environ.get("LAKELINE_RUNNER_PROOF_S", "35")), 120.0
GRACE_S = 10
#: Small files and aggressive triggers: every service has work within seconds. Heartbeats
#: and leases short enough that the killed runner's work is taken over in ~3 s, long
#: enough that a loaded machine does not expire a live executor's heartbeat.
PROPERTIES: dict[str, Any] = {
    "engine.parallelism": 1,
    "commit.max-retries": 10,
    "write.target-file-size-bytes": 16 * 1024,
    "write.small-file-limit-bytes": 0,
    "compaction.delta-commits": 3,
    "clean.retain": 3,
    "clean.orphan-age-ms": 0,
    "archive.min-active-instants": 10,
    "archive.max-active-instants": 20,
    "heartbeat.interval-ms": 300,
    "heartbeat.tolerable-misses": 10,
    "lock.lease-ms": 3000,
}
COMMON = {"cleaning": "every 2s", "archival": "every 2s", "rollback": "every 1s"}
#: name -> (table type or None for append-only, timeline "fs" or "pg", schedules)
TABLES: dict[str, tuple[str | None, str, dict[str, str]]] = {
    "cow_fs": ("cow", "fs", {**COMMON, "clustering": "every 2s"}),
    "mor_fs": ("mor", "fs", {**COMMON, "compaction": "every 1s", "indexing": "every 2s"}),
    "append_fs": (None, "fs", {**COMMON, "clustering": "every 1s"}),
    "mor_pg": ("mor", "pg", {**COMMON, "compaction": "every 1s"}),
    # Found through a [[catalogs]] entry (its namespace: a fresh one per run).
    "mor_catalog": ("mor", "catalog", {**COMMON, "compaction": "*/1 * * * *", "clustering": "every 2s"}),
}
#: Completed services each table must show by the end (its maintenance happened).
MUST_COMPLETE = {
    "cow_fs": ("cleaning", "archival"),
    "mor_fs": ("compaction", "cleaning", "archival"),
    "append_fs": ("clustering", "cleaning", "archival"),
    "mor_pg": ("compaction", "cleaning", "archival"),
    "mor_catalog": ("cleaning", "archival"),
}
FAULT = "compaction.after_inflight"


def make_tables(tmp_path: Path, pg_url: str, namespace: str) -> dict[str, dict[str, Any]]:
    """Create and seed each table; returns name -> {"name", "path", "timeline", "keyed",
    "label"} (the label: how the runner names it, its path or its catalog name)."""
    specs = {}
    for name, (kind, store, _) in TABLES.items():
        path = str(tmp_path / name)
        timeline = pg_url if store in ("pg", "catalog") else None
        if store == "catalog":
            with Catalog(pg_url) as cat:
                t = cat.create_table(
                    f"{namespace}.{name}",
                    path,
                    SCHEMA,
                    record_key="id" if kind else None,
                    table_type=kind or "cow",
                    properties=PROPERTIES,
                )
        else:
            t = Table.create(
                path,
                SCHEMA,
                record_key="id" if kind else None,
                table_type=kind or "cow",
                properties=PROPERTIES,
                timeline=timeline,
            )
        seed = t.insert(pa.table({"id": list(range(KEYS)), "v": ["seed"] * KEYS}, schema=SCHEMA))
        assert seed.instant is not None
        if kind == "mor":
            # Delta commits on every slice, so compaction is due as soon as a runner starts.
            for n in range(3):
                r = t.upsert(
                    pa.table({"id": list(range(0, KEYS, 7)), "v": [f"pre{n}"] * len(range(0, KEYS, 7))}, schema=SCHEMA)
                )
                assert r.instant is not None
        t.log.store.close()
        specs[name] = {
            "name": name,
            "path": t.path,
            "timeline": timeline,
            "keyed": kind is not None,
            "label": f"{namespace}.{name}" if store == "catalog" else t.path,
        }
    return specs


def write_config(tmp_path: Path, specs: dict[str, dict[str, Any]], pg_url: str, namespace: str) -> Path:
    lines = [f"[runner]\nthreads = 2\ngrace_seconds = {GRACE_S}\n"]
    for name, (_, store, schedules) in TABLES.items():
        spec = specs[name]
        if store == "catalog":
            lines.append(f"[[catalogs]]\ntimeline = {json.dumps(pg_url)}\nnamespace = {json.dumps(namespace)}")
        else:
            lines.append(f"[[tables]]\npath = {json.dumps(spec['path'])}")
            if spec["timeline"]:
                lines.append(f"timeline = {json.dumps(spec['timeline'])}")
        lines.extend(f"{service} = {json.dumps(sched)}" for service, sched in schedules.items())
        lines.append("")
    path = tmp_path / "runner.toml"
    path.write_text("\n".join(lines))
    return path


class RunnerProc:
    """A ``lakeline runner --config FILE --json`` process; output goes to files (a pipe
    nobody reads would fill up and block the runner's logging)."""

    def __init__(self, name: str, config: Path, out: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.stdout_path, self.stderr_path = out / f"runner-{name}.out", out / f"runner-{name}.err"
        self._out: IO[bytes] = open(self.stdout_path, "wb")  # noqa: SIM115 - closed in wait()
        self._err: IO[bytes] = open(self.stderr_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lakeline.cli", "runner", "--config", str(config), "--json"],
            stdout=self._out,
            stderr=self._err,
            env=child_env(extra=env),
        )

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is not None:
                self._out.close()
                self._err.close()

    def summary(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.stdout_path.read_text())
        return result

    def tail(self, lines: int = 40) -> str:
        text = self.stderr_path.read_text() if self.stderr_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def service_instants(events: tuple[Event, ...]) -> dict[int, dict[str, Any]]:
    """Per service instant (its requested event names a service): its service, claims
    (inflight events) and completions."""
    out: dict[int, dict[str, Any]] = {}
    for ev in events:
        if ev.state is State.REQUESTED and SERVICE in ev.payload:
            out[ev.instant] = {"service": ev.payload[SERVICE], "claims": 0, "completed": 0, "rolled_back": 0}
        elif ev.instant in out:
            rec = out[ev.instant]
            if ev.state is State.INFLIGHT:
                rec["claims"] += 1
            elif ev.state is State.COMPLETED:
                rec["completed"] += 1
            elif ev.state is State.ROLLED_BACK:
                rec["rolled_back"] += 1
    return out


def check_model(t: Table, kind: str | None, writes: list[dict[str, Any]]) -> int:
    """The table equals its model; returns the number of committed writes applied.

    The first completed data instants are the test's own (the seed insert, and on a
    merge-on-read table three upserts of every 7th key); every later one is a writer's
    reported commit or a service's (compaction, clustering)."""
    committed = {r["instant"]: r for r in writes if r["outcome"] == "committed"}
    assert len(committed) == sum(1 for r in writes if r["outcome"] == "committed"), "two writes, one instant"
    done = [i for i in t.log.refresh().completed() if i.action.writes_data]
    ours = 4 if kind == "mor" else 1
    setup, rest = done[:ours], done[ours:]
    assert not any(i.id in committed or SERVICE in i.plan for i in setup)
    strangers = [i.id for i in rest if i.id not in committed and SERVICE not in i.plan]
    assert not strangers, f"completed data instants no writer reported: {strangers}"
    assert sorted(i.id for i in rest if i.id in committed) == sorted(committed), "a reported commit is missing"
    rows = t.to_arrow(columns=["id", "v"])
    actual = sorted(zip(rows.column("id").to_pylist(), rows.column("v").to_pylist()))
    if kind is None:
        want = sorted(
            [(k, "seed") for k in range(KEYS)]
            + [(row["id"], row["v"]) for r in committed.values() for row in r["rows"]]
        )
        missing, extra = sorted(set(want) - set(actual))[:5], sorted(set(actual) - set(want))[:5]
        assert actual == want, (
            f"the append-only table has {len(actual)} rows, its model {len(want)}; missing {missing}, extra {extra}"
        )
        return len(committed)
    model = CompletionOrderModel()
    model.apply(setup[0], {"op": "insert", "rows": [{"id": k, "v": "seed"} for k in range(KEYS)]})
    for n, inst in enumerate(setup[1:]):
        model.apply(inst, {"op": "upsert", "rows": [{"id": k, "v": f"pre{n}"} for k in range(0, KEYS, 7)]})
    for inst in rest:
        if inst.id in committed:
            model.apply(inst, committed[inst.id])
    model.check(actual)
    return len(committed)


def run_proof(tmp_path: Path, pg_url: str, duration_s: float) -> None:
    t_start = time.monotonic()
    namespace = f"runner_{uuid.uuid4().hex[:8]}"
    specs = make_tables(tmp_path, pg_url, namespace)
    config = write_config(tmp_path, specs, pg_url, namespace)
    watchers = {name: Table.open(s["path"], timeline=s["timeline"]) for name, s in specs.items()}
    go, stop = tmp_path / "go", tmp_path / "stop-writers"
    fault_dir = tmp_path / "faults"
    fault_dir.mkdir()
    writers = []
    for w in range(WRITERS):
        log, ready = tmp_path / f"writer-{w}.jsonl", tmp_path / f"ready-writer-{w}"
        writers.append(
            (
                log,
                start_script(
                    RUNNER_WORKERS_PY,
                    ["writer", list(specs.values()), w, 1000 + w, str(log), str(ready), str(go), str(stop), KEYS, 0.05],
                ),
            )
        )
    runners: dict[str, RunnerProc] = {}
    phases: dict[str, float] = {}
    try:
        wait_for_files([tmp_path / f"ready-writer-{w}" for w in range(WRITERS)], timeout=120)
        go.write_text("go")
        t_go = time.monotonic()
        phases["setup_s"] = t_go - t_start
        # Runner A parks its first compaction right after claiming it; B starts beside it.
        runners["A"] = RunnerProc(
            "A", config, tmp_path, {"LAKELINE_FAULTS": f"{FAULT}=wait", "LAKELINE_FAULT_DIR": str(fault_dir)}
        )
        reached = fault_dir / f"{FAULT}.reached"
        deadline = time.monotonic() + 60
        while not reached.exists():
            assert runners["A"].proc.poll() is None, f"runner A died:\n{runners['A'].tail()}"
            assert time.monotonic() < deadline, f"runner A never compacted:\n{runners['A'].tail()}"
            time.sleep(0.05)
        runners["B"] = RunnerProc("B", config, tmp_path)
        time.sleep(1.5)
        for w in watchers.values():
            w.log.refresh()
        # Everything pending when A dies may be taken over (claimed again) by B or A2.
        held = {(name, i.id): i for name, w in watchers.items() for i in w.log.timeline.pending()}
        held_compactions = [(n, i) for (n, i), inst in held.items() if inst.action is Action.COMPACTION]
        assert held_compactions, "runner A holds no compaction: nothing to kill it in the middle of"
        runners["A"].proc.send_signal(signal.SIGKILL)
        assert runners["A"].wait(30) == -signal.SIGKILL
        runners["A2"] = RunnerProc("A2", config, tmp_path)
        while time.monotonic() < t_go + duration_s:
            for name, r in runners.items():
                assert name == "A" or r.proc.poll() is None, f"runner {name} died:\n{r.tail()}"
            for _, p in writers:
                assert p.poll() is None, f"a writer died: {p.communicate()[1][-3000:]}"
            for w in watchers.values():
                w.log.refresh()  # read every event before archival moves it
            time.sleep(0.5)
        stop.write_text("stop")
        for _, p in writers:
            rc, _, err = finish(p, timeout=60)
            assert rc == 0, f"writer failed:\n{err[-3000:]}"
        phases["race_s"] = time.monotonic() - t_go
        time.sleep(3)  # the runners act on the last writes (a compaction due, a clean)
        for w in watchers.values():
            w.log.refresh()
        t_term = time.monotonic()
        for name in ("B", "A2"):
            runners[name].proc.send_signal(signal.SIGTERM)
        took = {}
        for name in ("B", "A2"):
            rc = runners[name].wait(GRACE_S + 20)
            took[name] = time.monotonic() - t_term
            assert rc == 0, f"runner {name} exited with {rc}:\n{runners[name].tail()}"
        assert all(s <= GRACE_S + 5 for s in took.values()), f"runners took {took}s to stop (grace {GRACE_S}s)"
        phases["stop_s"] = time.monotonic() - t_term
    finally:
        stop.write_text("stop")
        go.write_text("go")
        for r in runners.values():
            if r.proc.poll() is None:
                r.proc.kill()
                r.wait(30)
        for _, p in writers:
            if p.poll() is None:
                p.kill()
                p.communicate()
    t_check = time.monotonic()

    # Every (table, service) of the config ran, none failed; A2 and B both worked.
    ran: Counter[tuple[str, str]] = Counter()
    failed = []
    for name in ("B", "A2"):
        summary = runners[name].summary()
        assert summary["finished_in_grace"] is True, f"runner {name} left services running at exit"
        assert summary["runs"], f"runner {name} ran nothing"
        for row in summary["runs"]:
            ran[(row["table"], row["service"])] += row["runs"]
            if row.get("failed"):
                failed.append((name, row))
    assert not failed, f"runs failed: {failed}\n{runners['B'].tail()}\n{runners['A2'].tail()}"
    for name, (_, _, schedules) in TABLES.items():
        for service in schedules:
            if schedules[service].startswith("every"):
                assert ran[(specs[name]["label"], service)] > 0, f"{service} never ran on {name}"

    writes = [json.loads(line) for log, _ in writers for line in log.read_text().splitlines()]
    bad = [r for r in writes if r["outcome"] not in ("committed", "conflict", "noop")]
    assert not bad, f"writes failed: {bad[:3]}"
    counts: dict[str, Any] = {"writes": Counter(r["outcome"] for r in writes)}
    for name, spec in specs.items():
        watcher = watchers[name]
        tl = watcher.log.refresh()
        assert tl.pending() == [], f"{name}: instants left pending: {tl.pending()}"
        per = service_instants(tl.events)
        twice = {i: r for i, r in per.items() if r["completed"] > 1 or r["completed"] + r["rolled_back"] > 1}
        assert not twice, f"{name}: service instants ended twice: {twice}"
        reclaimed = {i: r for i, r in per.items() if r["claims"] > 1 and (name, i) not in held}
        assert not reclaimed, (
            f"{name}: service instants executed twice (claimed again) though no runner died: {reclaimed}"
        )
        done_by = Counter(r["service"] for r in per.values() if r["completed"])
        for service in MUST_COMPLETE[name]:
            assert done_by[service] > 0, f"{name}: no {service} completed ({dict(done_by)})"
        counts[name] = dict(done_by)
        t = Table.open(spec["path"], timeline=spec["timeline"])
        counts[name]["writes"] = check_model(t, TABLES[name][0], [r for r in writes if r["table"] == name])
        check_files_on_disk(t)
        t.log.store.close()
    # The compaction A held: finished by another runner (claimed again), or rolled back;
    # or finished by A itself between the watchers' last read and the kill (claimed once:
    # only A claimed it, so A completed it before it died). Never left pending (above).
    for name, inst_id in held_compactions:
        tl = watchers[name].log.timeline
        rec = service_instants(tl.events)[inst_id]
        assert rec["completed"] + rec["rolled_back"] == 1, f"{name}: the compaction {inst_id} runner A held: {rec}"
    for w in watchers.values():
        w.log.store.close()
    phases["check_s"] = time.monotonic() - t_check
    print(
        f"runner proof {duration_s:.0f}s: {counts}; killed A holding {sorted(held)}; stop took {took}; "
        f"phases { ({k: round(v, 1) for k, v in phases.items()}) }"
    )


def test_two_runners_keep_five_tables_healthy_while_writers_write(tmp_path: Path, pg_url: str) -> None:
    run_proof(tmp_path, pg_url, SHORT_S)


@pytest.mark.soak
def test_soak_two_runners_keep_five_tables_healthy(tmp_path: Path, pg_url: str) -> None:
    run_proof(tmp_path, pg_url, SOAK_S)
