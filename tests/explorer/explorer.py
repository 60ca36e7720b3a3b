"""Run one schedule, and generate schedules: seeded random ones and exhaustive small ones.

A *spec* (:class:`RunSpec`) says what the actors do: the table type and each actor's
operations. A *chooser* says, step by step, which enabled actor runs next or which
parked actor crashes. :func:`run_schedule` creates a fresh table, starts the actors
parked before their first operation, and loops: choose, step, check every invariant
(:mod:`.checks`); at the end it recovers the table (``rollback_failed``, pending
services finished, one more write) and checks again. It stops at the first violation
and returns the history, which prints with the command that replays it.

Random schedules (:func:`random_spec`, :class:`RandomChooser`) are a function of one
seed. Exhaustive enumeration (:func:`exhaustive`) is stateless model checking: every run
re-executes from scratch with a forced prefix of choices, records the enabled actors at
each later step, and pushes the alternatives as new prefixes, within a bound on
preemptions (switches away from an actor that could have gone on) and crashes.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakeline.services.phases import run_pending
from lakeline.services.table_services import service_named
from lakeline.table import Table

from tests.table.model import SCHEMA

from .checks import Checker, Violation
from .choosers import Chooser, Decision, PCTChooser, PrefixChooser, RandomChooser, actor_name
from .ops import DAYS, EDGES, Op, hot_keys, initial_rows, random_op
from .scheduler import OP_START, Scheduler, StepTimeout
from .schema_model import check_base_ids, last_schema_instant

#: The harness's own writes (setup and recovery): instant -> (op, what it read).
Seeded = dict[int, tuple[Op, dict[str, Any]]]

HEARTBEAT_MS = 50
MISSES = 0
#: Wall time after a crash before the dead actor's beat counts as expired.
EXPIRY_S = HEARTBEAT_MS * (MISSES + 1) / 1000 + 0.03

PROPERTIES = {
    "heartbeat.interval-ms": HEARTBEAT_MS,
    "heartbeat.tolerable-misses": MISSES,
    "engine.parallelism": 1,
    "service.nice": 0,
    "write.target-file-size-bytes": 1024,
    "lock.lease-ms": 10_000,
    "lock.acquire-timeout-ms": 30_000,
    "archive.min-active-instants": 3,
    "archive.max-active-instants": 6,
}


def coarse(point: str) -> bool:
    """The points exhaustive runs stop at: protocol steps, not the store's inner ones."""
    return not point.startswith("log.store.")


def every(point: str) -> bool:
    return True


@dataclass(frozen=True)
class RunSpec:
    """What a run does: table type, each actor's operations, where actors yield."""

    table_type: str
    actors: tuple[tuple[Op, ...], ...]
    granularity: str = "every"  # every | coarse
    setup_commits: int = 2
    max_steps: int = 400
    setup_schema: tuple[str, ...] = ()  # schema steps landed after the setup commits ("add": x exists)
    setup_indexes: tuple[str, ...] = ()  # indexes built before the actors start ("record")

    def describe(self) -> str:
        setup = "".join(
            f", set up with {what} {', '.join(v)}"
            for what, v in (("schema", self.setup_schema), ("index", self.setup_indexes))
            if v
        )
        lines = [f"table {self.table_type}, yields at {self.granularity} point{setup}"]
        for n, ops in enumerate(self.actors):
            lines.append(f"  {actor_name(n)}: " + "; ".join(o.label() for o in ops))
        return "\n".join(lines)


@dataclass
class RunReport:
    spec: RunSpec
    decisions: list[Decision] = field(default_factory=list)
    history: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    steps: int = 0
    seconds: float = 0.0
    replay: str = ""
    #: How operations ended ("schema(rename): SchemaMismatchError", "upsert: ok", ...) and
    #: the key-pinned reads checked ("pinned reads", "pinned reads the index pruned").
    tally: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not self.violations

    def format(self) -> str:
        out = [
            "VIOLATION" if self.violations else "ok",
            f"replay: {self.replay}",
            self.spec.describe(),
            f"decisions: {','.join(map(str, self.decisions))}",
            "history:",
        ]
        out += [f"  {h}" for h in self.history]
        out += [f"  !! {v}" for v in self.violations]
        return "\n".join(out)


def _setup(path: str, spec: RunSpec) -> tuple[Table, Seeded]:
    t = Table.create(
        path,
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type=spec.table_type,
        properties=PROPERTIES,
    )
    check_base_ids(t.schema)
    setup: Seeded = {}
    rows = initial_rows()
    for n in range(spec.setup_commits):
        part = rows[n :: spec.setup_commits]
        op = Op("upsert", rows=tuple((r["id"], r["ts"], r["day"], r["v"]) for r in part))
        seen: dict[str, Any] = {}
        res = op.run(t, seen)
        setup[res.instant.id] = (op, seen)
    for step in spec.setup_schema:
        op, seen = Op("schema", name=step), {}
        op.run(t, seen)
        setup[last_schema_instant(t.timeline) or -1] = (op, seen)
    for name in spec.setup_indexes:
        Op("index_create", name=name).run(t, {})
    return t, setup


def run_schedule(
    spec: RunSpec,
    chooser: Chooser,
    replay: str = "",
    workdir: str | None = None,
    recover: bool = True,
    location: str | None = None,
) -> RunReport:
    """Run ``spec`` under ``chooser`` on a fresh table; see the module docstring.
    ``location``: an object-store folder to put the table under (options from the
    environment) instead of a temporary folder."""
    started = time.perf_counter()
    report = RunReport(spec, replay=replay)
    tmp = None if location else tempfile.mkdtemp(prefix="explore-", dir=workdir)
    path = f"{location.rstrip('/')}/{uuid.uuid4().hex[:12]}" if location else str(Path(str(tmp)) / "t")
    try:
        harness, setup = _setup(path, spec)
        sched = Scheduler(coarse if spec.granularity == "coarse" else every)
        for n, ops in enumerate(spec.actors):
            sched.add(actor_name(n), Table.open(path), list(ops))
        checker = Checker(harness, path, sched, setup)
        with sched.installed():
            _loop(spec, sched, chooser, checker, report)
            if report.ok and recover:
                _recover(harness, setup, checker, report)
        report.steps = len(report.decisions)
        report.tally = checker.tally()
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        report.seconds = time.perf_counter() - started
    return report


def _loop(spec: RunSpec, sched: Scheduler, chooser: Chooser, checker: Checker, report: RunReport) -> None:
    last: int | None = None
    crashed_at = 0.0
    for step in range(spec.max_steps):
        enabled = [a.index for a in sched.actors if a.enabled]
        if not enabled:
            return
        crashable = [a.index for a in sched.actors if a.state == "parked" and a.point != OP_START]
        crashed = tuple(a.index for a in sched.actors if a.state == "crashed" and not a.killed)
        d = chooser.choose(step, enabled, crashable, last, crashed)
        report.decisions.append(d)
        actor = sched.actors[d.actor]
        if d.crash:
            actor.crash()
            crashed_at = time.monotonic()
            report.history.append(f"{step:3d} {actor.name} CRASHES at {actor.point}")
            continue
        if d.revive:
            actor.revive()
            report.history.append(f"{step:3d} {actor.name} WAKES UP at {actor.point} (stale process)")
        wait = crashed_at + EXPIRY_S - time.monotonic()
        if wait > 0:
            time.sleep(wait)  # the dead actor's beat has expired before anyone looks
        outcomes_before = len(actor.outcomes)
        try:
            actor.give_turn(sched.step_timeout_s)
        except StepTimeout as e:
            report.violations.append(Violation("hang", str(e)))
            return
        last = d.actor
        what = ",".join(actor.events)
        line = f"{step:3d} {actor.name} -> {actor.point if actor.state == 'parked' else actor.state}"
        if what:
            line += f"  [{what}]"
        for o in actor.outcomes[outcomes_before:]:
            line += f"  <{o.label}: {'ok ' + _result(o.result) if o.ok else repr(o.error)[:200]}>"
        report.history.append(line)
        report.violations.extend(checker.check())
        for o in actor.outcomes[outcomes_before:]:
            if o.instants:
                report.history[-1] += f" instants {o.instants}"
        if report.violations:
            return
    # Step bound reached: let the rest run to the end, one at a time.
    for a in sched.actors:
        while a.enabled:
            a.give_turn(sched.step_timeout_s)
    report.violations.extend(checker.check())


def _result(result: Any) -> str:
    inst = getattr(result, "instant", None)
    if inst is not None and hasattr(inst, "id"):
        return f"#{inst.id}"
    if hasattr(result, "id"):
        return f"#{result.id}"
    return "" if result is None else type(result).__name__


def _recover(harness: Table, setup: Seeded, checker: Checker, report: RunReport) -> None:
    """No live actor is left (each finished or crashed): roll back and finish what the
    dead left, then check nothing is pending and the table takes the next write."""
    time.sleep(EXPIRY_S)
    try:
        res = harness.services.rollback_failed()
        report.history.append(f"recovery: rollback_failed -> {_result(res)} {res.stats}")
        for name in ("indexing", "compaction", "clustering", "cleaning", "archival"):
            for r in run_pending(harness, service_named(name)):
                report.history.append(f"recovery: finished pending {name} -> {_result(r)} {r.aborted or ''}")
    except Exception as e:  # noqa: BLE001 - a recovery that fails is the finding
        report.violations.append(Violation("recovery failed", repr(e)))
        return
    report.violations.extend(checker.recovered())
    # Every edge key in both partitions: a key some group lost track of shows up twice.
    op = Op("upsert", rows=tuple((k, 9, d, 999) for d in DAYS for k in (*EDGES, 23)))
    seen: dict[str, Any] = {}
    try:
        r = op.run(harness, seen)
        setup[r.instant.id] = (op, seen)
        report.history.append(f"recovery: next write {op.label()} -> #{r.instant.id}")
    except Exception as e:  # noqa: BLE001
        report.violations.append(Violation("table refuses the next write", repr(e)))
    report.violations.extend(checker.check(final=True))


# -- generating schedules ------------------------------------------------------------------


def random_spec(
    seed: int,
    actors: int | None = None,
    ops: int | None = None,
    kinds: tuple[str, ...] | None = None,
    table_type: str | None = None,
) -> RunSpec:
    """The actors and operations of random schedule ``seed`` (optionally only operations
    of ``kinds``, on a table of ``table_type``)."""
    rng = random.Random(seed)
    tt = "mor" if rng.random() < 0.6 else "cow"
    tt = table_type or tt
    n = actors or rng.randint(2, 4)
    hot = hot_keys(rng)
    acts = tuple(tuple(random_op(rng, tt, hot, kinds) for _ in range(ops or rng.randint(1, 4))) for _ in range(n))
    # Half the tables start with the added column, so drops and widenings have
    # something to change (and writes something to carry) from the first step.
    setup = ("add",) if rng.random() < 0.5 else ()
    # A quarter start with a ready record index: every write and service of the run
    # keeps it exact, and key-pinned reads go through it from the first check.
    indexes = ("record",) if rng.random() < 0.25 else ()
    return RunSpec(tt, acts, setup_schema=setup, setup_indexes=indexes)


#: Fault points a write passes (about): spreads PCT's priority changes over a run.
STEPS_PER_OP = 25


def random_chooser(seed: int, spec: RunSpec) -> Chooser:
    """Seeds alternate: odd ones a sticky random walk, even ones PCT."""
    if seed % 2:
        return RandomChooser(seed)
    return PCTChooser(seed, len(spec.actors), STEPS_PER_OP * sum(len(a) for a in spec.actors))


def run_random(
    seed: int,
    actors: int | None = None,
    ops: int | None = None,
    kinds: tuple[str, ...] | None = None,
    table_type: str | None = None,
    **kw: Any,
) -> RunReport:
    spec = random_spec(seed, actors, ops, kinds, table_type)
    extra = "".join(
        f" --{k.replace('_', '-')} {v}"
        for k, v in (("actors", actors), ("ops", ops), ("kinds", ",".join(kinds or ())), ("table-type", table_type))
        if v
    )
    return run_schedule(spec, random_chooser(seed, spec), replay=f"python -m tests.explorer --seed {seed}{extra}", **kw)


def _preemptions(decisions: list[Decision], options: list[tuple[list[int], list[int], int | None]]) -> int:
    n = 0
    for d, (enabled, _, last) in zip(decisions, options):
        if not d.crash and last is not None and last in enabled and d.actor != last:
            n += 1
    return n


def exhaustive(
    spec: RunSpec,
    name: str,
    max_preemptions: int = 1,
    max_crashes: int = 0,
    max_runs: int = 200,
    stop_on_violation: bool = True,
) -> Iterator[RunReport]:
    """Every schedule of ``spec`` within the bounds (depth first), one report each."""
    stack: list[list[Decision]] = [[]]
    seen: set[tuple[Decision, ...]] = set()
    runs = 0
    while stack and runs < max_runs:
        prefix = stack.pop()
        chooser = PrefixChooser(prefix)
        report = run_schedule(spec, chooser, replay="")
        runs += 1
        taken = chooser.taken
        report.replay = f"python -m tests.explorer --scenario {name} --choices {','.join(map(str, taken)) or '-'}"
        yield report
        if not report.ok and stop_on_violation:
            return
        seen.add(tuple(taken))
        for i in range(len(prefix), len(taken)):
            enabled, crashable, last = chooser.options[i]
            alts = [Decision(a) for a in enabled if a != taken[i].actor]
            if sum(d.crash for d in taken[:i]) < max_crashes:
                alts += [Decision(a, crash=True) for a in crashable]
            for alt in alts:
                cand = taken[:i] + [alt]
                if _preemptions(cand, chooser.options[: i + 1]) > max_preemptions:
                    continue
                if tuple(cand) not in seen:
                    stack.append(cand)


def parse_choices(text: str) -> list[Decision]:
    out = []
    for c in filter(None, text.split(",")):
        if c == "-":
            continue
        out.append(Decision("ABCDEFGHIJ".index(c[-1]), crash=c.startswith("x"), revive=c.startswith("r")))
    return out


Scenario = Callable[[], RunSpec]

__all__ = [
    "Chooser",
    "Decision",
    "PCTChooser",
    "PrefixChooser",
    "RandomChooser",
    "RunReport",
    "RunSpec",
    "exhaustive",
    "parse_choices",
    "random_spec",
    "run_random",
    "run_schedule",
]
