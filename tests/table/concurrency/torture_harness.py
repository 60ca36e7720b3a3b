"""The kill -9 torture harness shared by ``test_torture.py`` (a writer) and
``test_service_torture.py`` (each table service): the table properties, the child process
of a round and :class:`Torture`, which starts children, kills them and checks the table
after each kill (what it checks: the docstring of ``test_torture.py``)."""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from lakeline.table import Table
from lakeline.timeline.instant import Instant
from lakeline.timeline.retention import last_retain_seq

from tests.children.table_workers import check_files_on_disk, run_op
from tests.helpers import finish, start_script, wait_for_files
from tests.table.concurrency.test_concurrency import CompletionOrderModel

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
KEYS = 64
HEARTBEAT = {"heartbeat.interval-ms": 100, "heartbeat.tolerable-misses": 1}
#: Seconds after a kill before the heartbeat is surely expired (2 x 100 ms, plus margin).
EXPIRY_S = 0.35
#: Kills per case in ``make test`` and under ``-m soak``. A round is a child's start, its
#: kill, the recovery and every check (1-3 s; 10 of them made the eight cases ~2 minutes
#: of ``make test``): 5 in ``make test`` check every kind of recovery a few times per
#: case, and a service's torture still goes on until a kill interrupted its instant
#: (EXTRA_KILLS); the rare moments are the soak's 100.
SHORT_KILLS, SOAK_KILLS = 5, 100
#: Most rounds a service torture adds when none of its kills interrupted an instant.
EXTRA_KILLS = 10
#: Most seconds a child works before its kill, per role (about one to a few of its runs).
MAX_DELAY_S = {
    "writer": 1.0,
    "compaction": 0.8,
    "clustering": 0.8,
    "cleaning": 0.5,
    "archival": 0.5,
    "indexing": 0.8,
    "rollback": 0.4,
}
SERVICES = ["compaction", "clustering", "cleaning", "archival", "indexing", "rollback"]
PROPERTIES: dict[str, Any] = {
    **HEARTBEAT,
    "commit.max-retries": 3,
    # A killed holder of the table lock blocks planners until its lease ends: keep it
    # short; and fail fast (not after 2 minutes) if a kill wedges the lock for good.
    "lock.lease-ms": 1000,
    "lock.acquire-timeout-ms": 15000,
    "engine.parallelism": 1,
    "write.target-file-size-bytes": 8 * 1024,
    "write.small-file-limit-bytes": 0,
    "compaction.delta-commits": 1,
    "clean.retain": 3,
    "clean.orphan-age-ms": 0,
    "archive.min-active-instants": 6,
    "archive.max-active-instants": 10,
}


def base_seed() -> int:
    env = os.environ.get("LAKELINE_TORTURE_SEED")
    return int(env) if env else random.randrange(10**6)


@dataclass
class Child:
    """A child process of one round, started ahead and held at its GO file."""

    n: int
    proc: subprocess.Popen[str]
    ready: Path
    go: Path
    log: Path
    go_us: int = 0  # wall-clock microseconds when its GO file was written


class Torture:
    """One table, its model, and the bookkeeping of the rounds run on it."""

    def __init__(
        self,
        tmp_path: Path,
        table_type: str,
        timeline: str | None,
        seed: int,
        role: str,
        script: Path,
        args: Callable[[int, Path, Path, Path], list[Any]],
        location: str | None = None,
    ) -> None:
        self.tmp = tmp_path
        self.seed = seed
        self.role, self.script, self.args = role, script, args
        self.first_runs_s: list[float] = []  # seconds each service child's first run took
        #: (start, end) seconds after GO of the instants service children completed: the
        #: moments a kill must hit to interrupt one (see ``kill``'s ``aim``).
        self.instant_windows_s: list[tuple[float, float]] = []
        self.rng = random.Random(seed)
        path = location or str(tmp_path / f"table-{table_type}")  # an object store's: options from the env
        self.t = Table.create(
            path, SCHEMA, record_key="id", table_type=table_type, properties=PROPERTIES, timeline=timeline
        )
        self.model = CompletionOrderModel()
        self.applied: set[int] = set()  # data instants the model has, or services' instants
        self.counts: Counter[str] = Counter()
        self.write({"op": "upsert", "rows": [{"id": k, "v": "seed"} for k in range(KEYS)]}, "seed")
        self.t.indexes.create("bloom_filters")
        self.t.indexes.create("column_stats")

    # -- the parent's own writes -------------------------------------------------------

    def write(self, spec: dict[str, Any], tag: str) -> None:
        """A write by the test itself, applied to the model."""
        r = run_op(self.t, spec)
        if r.instant is not None:
            inst = self.t.log.refresh().get(r.instant.id)
            assert inst.is_completed, f"the parent's write {inst.id} is {inst.state}"
            self.model.apply(inst, {**spec, "tag": tag})
            self.applied.add(inst.id)

    def random_writes(self, n: int, tag: str) -> None:
        """``n`` upserts of a few random keys and a delete, so services have work."""
        for i in range(n):
            ids = self.rng.sample(range(KEYS), self.rng.randint(2, 10))
            self.write({"op": "upsert", "rows": [{"id": k, "v": f"{tag}-{i}"} for k in ids]}, f"{tag}-{i}")
        keys = self.rng.sample(range(KEYS), 2)
        self.write({"op": "delete", "keys": [{"id": k} for k in keys]}, f"{tag}-del")

    # -- children ----------------------------------------------------------------------

    def spawn(self, n: int) -> Child:
        """Start round ``n``'s child; it warms up (imports, opens the table) while the
        test still checks the previous round, and waits for its GO file."""
        ready, go, log = (self.tmp / f"{self.role}-{n}.{x}" for x in ("ready", "go", "jsonl"))
        return Child(n, start_script(self.script, self.args(n, ready, go, log)), ready, go, log)

    def kill(self, child: Child, aim: bool = False) -> float:
        """Let ``child`` work for a random delay from GO, then SIGKILL it; the delay.

        With ``aim``, the delay falls inside one of the windows in which earlier rounds'
        children held an instant open (``note_instant_windows``): still a random moment,
        but one that can interrupt an instant however short it is against the run."""
        try:
            wait_for_files([child.ready], timeout=120)
        except AssertionError:
            child.proc.kill()
            _, _, err = finish(child.proc)
            raise AssertionError(f"the {self.role} child {child.n} never started:\n{err[-3000:]}") from None
        if aim and self.instant_windows_s:
            delay = self.rng.uniform(*self.rng.choice(self.instant_windows_s))
        else:
            delay = self.rng.uniform(0, self.max_delay())
        child.go_us = time.time_ns() // 1000
        child.go.write_text("go")
        time.sleep(delay)
        if child.proc.poll() is None:
            os.kill(child.proc.pid, signal.SIGKILL)
        rc, _, err = finish(child.proc)
        assert rc == -signal.SIGKILL, (
            f"the {self.role} child {child.n} ended by itself before its kill (rc={rc}):\n{err[-4000:]}"
        )
        return delay

    def note_instant_windows(self, child: Child, before: set[int]) -> None:
        """Record when, after GO, ``child`` held each instant it completed open."""
        for inst in self.t.log.refresh().completed():
            if inst.id in before or inst.requested_us < child.go_us or inst.completed_us is None:
                continue
            start, end = ((us - child.go_us) / 1e6 for us in (inst.requested_us, inst.completed_us))
            self.instant_windows_s.append((start, end))

    def max_delay(self) -> float:
        """Kills fall in [0, this): 1.3 x the median time a service child took for its
        first run (measured in earlier rounds), so most land inside a run."""
        if not self.first_runs_s:
            return MAX_DELAY_S[self.role]
        return max(0.02, 1.3 * statistics.median(self.first_runs_s))

    def recover(self, service: str | None = None) -> None:
        """What an operator does after a crash: wait for the heartbeat, roll back, rerun."""
        time.sleep(EXPIRY_S)
        self.t.services.rollback_failed()
        if service == "rollback":
            self.t.services.rollback_failed()
        elif service is not None:
            self.t.services.run(service)

    def new_data_instants(self) -> list[Instant]:
        tl = self.t.log.refresh()
        return [i for i in tl.completed() if i.action.writes_data and i.id not in self.applied]

    def check(self, what: str, retained: bool = False) -> None:
        """Every post-recovery check of the module docstring, then the next write."""
        tl = self.t.log.refresh()
        pending = [(i.id, i.action, i.state) for i in tl.pending()]
        assert pending == [], f"{what}: left pending after recovery: {pending}"
        rows = read(self.t)
        self.model.check(rows, what=what)
        check_files_on_disk(self.t)
        report = self.t.indexes.validate()
        assert report["mismatches"] == [], f"{what}: ready indexes disagree with the data: {report['mismatches'][:5]}"
        if retained and (retain := last_retain_seq(tl)) is not None:
            for inst in tl.completed():
                if inst.action.writes_data and (inst.completed_seq or 0) >= retain:
                    missing = self.t.storage.missing(self.t.scan(as_of=inst.id).files())
                    assert not missing, f"{what}: snapshot as of {inst.id} (retained from {retain}) lost {missing[:3]}"
                    self.model.check(
                        read(self.t, inst.id), inst.completed_seq or 0, f"{what}: snapshot as of {inst.id}"
                    )
        # The table accepts the next write.
        key = self.rng.randrange(KEYS)
        self.write({"op": "upsert", "rows": [{"id": key, "v": f"next-{what}"}]}, f"next-{what}")
        self.model.check(read(self.t), what=f"{what}, after the next write")


def read(t: Table, as_of: int | None = None) -> list[tuple[int, str]]:
    table = t.to_arrow(as_of=as_of)
    return sorted(zip(table.column("id").to_pylist(), table.column("v").to_pylist()))


def parse_log(log: Path) -> tuple[dict[int, dict[str, Any]], dict[str, Any] | None, list[dict[str, Any]]]:
    """The torture writer's log: committed writes by instant, the write the kill
    interrupted (begun, not ended; None if the kill fell between writes), all lines."""
    lines = []
    for text in log.read_text().splitlines() if log.exists() else []:
        try:
            lines.append(json.loads(text))
        except json.JSONDecodeError:  # a line cut by the kill (one write call: unlikely)
            continue
    begun = {rec["begin"]: rec for rec in lines if "begin" in rec}
    ended = {rec["end"]: rec for rec in lines if "end" in rec}
    errors = [rec for rec in ended.values() if rec["outcome"] == "error"]
    assert not errors, f"the torture writer failed: {errors[0].get('trace', errors[0])}"
    committed = {ended[n]["instant"]: begun[n] for n in sorted(ended) if ended[n]["outcome"] == "committed"}
    open_ = [begun[n] for n in begun if n not in ended]
    assert len(open_) <= 1, f"more than one write begun and not ended: {open_}"
    return committed, (open_[0] if open_ else None), lines


def failed_round(what: str, error: AssertionError, nxt: Any) -> AssertionError:
    """Stop the child started ahead for the next round; the error to raise for this one."""
    if nxt is not None:
        nxt.proc.kill()
        finish(nxt.proc)
    return AssertionError(f"{what}: {error}")


def parse_tail(log: Path, n: int = 8) -> list[str]:
    return (log.read_text().splitlines() if log.exists() else [])[-n:]
