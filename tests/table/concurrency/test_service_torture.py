"""kill -9 torture of each table service (compaction, clustering, cleaning, archival,
indexing, rollback): a service child killed at random moments, then the table checked as
``test_torture.py`` describes; each service's torture requires that some kill left an
instant of it pending, and after a killed cleaner every snapshot inside retention still
reads the model as of it."""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from pathlib import Path

import pytest
from lakeline.timeline.diagnostics.faults import CRASH_EXIT_CODE
from lakeline.timeline.instant import Action, Instant

from tests.children.service_workers import SERVICE_WORKERS_PY
from tests.children.table_workers import WORKERS_PY
from tests.helpers import finish, start_script
from tests.table.concurrency.torture_harness import (
    EXPIRY_S,
    EXTRA_KILLS,
    KEYS,
    SERVICES,
    SHORT_KILLS,
    SOAK_KILLS,
    Child,
    Torture,
    base_seed,
    failed_round,
)

# -- each service -------------------------------------------------------------------------


def _service_instant(inst: Instant) -> bool:
    return inst.action is Action.COMPACTION or inst.plan.get("service") == "clustering"


def start_crash_write(tt: Torture, n: int) -> subprocess.Popen[str]:
    """A writer that dies before completing, so the rollback service has work (started
    while the test writes; ``finish`` it before the round's kill)."""
    ids = tt.rng.sample(range(KEYS), 4)
    spec = {"op": "upsert", "rows": [{"id": k, "v": f"crashed-{n}"} for k in ids]}
    return start_script(WORKERS_PY, ["op", tt.t.path, tt.t.timeline_url, spec], faults="commit.before_complete=crash")


def service_round(tt: Torture, service: str, child: Child, last: bool, aim: bool = False) -> Child | None:
    """Give the service work, kill round ``child.n``'s service child (inside a window an
    earlier child held an instant open, with ``aim``), recover, check; returns the next
    round's child."""
    n = child.n
    crasher = start_crash_write(tt, n) if service == "rollback" else None
    tt.random_writes(3, f"r{n}")
    if crasher is not None:
        rc, _, err = finish(crasher)
        assert rc == CRASH_EXIT_CODE, f"the write meant to crash did not (rc={rc}):\n{err[-2000:]}"
        time.sleep(EXPIRY_S)  # so the rollback child has an expired write to roll back
    before = {i.id for i in tt.t.log.refresh().instants()}
    delay = tt.kill(child, aim)
    nxt = None if last else tt.spawn(n + 1)
    what = f"{service} round {n} (seed {tt.seed}, killed {delay:.3f} s after its start)"
    runs = [json.loads(line) for line in child.log.read_text().splitlines()] if child.log.exists() else []
    if runs:
        tt.first_runs_s.append(runs[0]["end_s"])
    tt.note_instant_windows(child, before)
    tl = tt.t.log.refresh()
    interrupted = [i.id for i in tl.pending() if i.id not in before or i.action == Action.ROLLBACK.value]
    tt.counts["kills_with_an_instant_pending" if interrupted else "kills_between_instants"] += 1
    try:
        tt.recover(service)
        for inst in tt.new_data_instants():
            assert _service_instant(inst), f"a data instant that no writer made: {inst.id} {inst.action}"
            tt.applied.add(inst.id)
        ended = [tt.t.log.refresh().get(i).state for i in interrupted]
        tt.counts.update(f"interrupted_then_{s}" for s in ended)
        tt.check(what, retained=True)
    except AssertionError as e:
        raise failed_round(what, e, nxt) from e
    tt.counts["kills"] += 1
    return nxt


def run_service_torture(
    tmp_path: Path, service: str, table_type: str, timeline: str | None, kills: int, location: str | None = None
) -> None:
    seed = base_seed()
    print(f"torture seed {seed} (LAKELINE_TORTURE_SEED={seed} replays it)")
    path = location or str(tmp_path / f"table-{table_type}")
    tt = Torture(
        tmp_path,
        table_type,
        timeline,
        seed,
        service,
        SERVICE_WORKERS_PY,
        lambda n, ready, go, log: ["torture", path, timeline, service, str(ready), str(go), str(log), seed * 1000 + n],
        location=path,
    )
    # A kill lands inside an instant by chance; cleaning's instant is too short to
    # require one (below). For the others, rounds go on past ``kills`` (at most
    # EXTRA_KILLS more) until one has, so a run of unlucky delays cannot pass a torture
    # that proved nothing, nor fail one that did not get its chance. Those extra rounds
    # aim: each kill falls at a random moment inside a window in which an earlier
    # round's child held an instant open (a rollback's instant on the object store is
    # about a fifth of its run, and 13 uniform kills once all missed it).
    must_hit = service != "cleaning"
    child: Child | None = tt.spawn(0)
    n = 0
    while child is not None:
        hit = tt.counts["kills_with_an_instant_pending"] > 0
        more = n + 1 < kills or (must_hit and not hit and n + 1 < kills + EXTRA_KILLS)
        child = service_round(tt, service, child, last=not more, aim=must_hit and not hit and n >= kills)
        n += 1
    median = statistics.median(tt.first_runs_s) if tt.first_runs_s else None
    print(
        f"{service} {table_type} {'pg' if timeline else ('s3' if path.startswith('s3:') else 'fs')} seed {seed}: "
        f"{dict(tt.counts)}, "
        f"median first run {median} s"
    )
    assert tt.counts["kills"] >= kills
    # A clean's instant lives a few milliseconds after a long plan: random kills hit it
    # in about 4 of 100 rounds on the filesystem and 0 of 100 on PostgreSQL (measured),
    # so for cleaning a round that hits it is reported, not required (the fault-point
    # tests of test_cleaning.py kill a clean inside its instant deterministically).
    assert service == "cleaning" or tt.counts["kills_with_an_instant_pending"] > 0, (
        f"no kill interrupted a {service} instant: the torture proved nothing ({dict(tt.counts)})"
    )


def _table_type(service: str, store: str = "filesystem") -> str:
    """The table type a service's torture runs on: compaction needs merge-on-read; the
    others take copy-on-write on one store and merge-on-read on the other, so the soak
    covers both types for each without running every combination."""
    if service == "compaction":
        return "mor"
    first = "cow" if service in ("clustering", "cleaning") else "mor"
    return first if store == "filesystem" else ("mor" if first == "cow" else "cow")


@pytest.mark.parametrize("service", SERVICES)
def test_service_killed_at_random_moments(tmp_path: Path, service: str) -> None:
    run_service_torture(tmp_path, service, _table_type(service), None, SHORT_KILLS)


@pytest.mark.soak
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("service", SERVICES)
def test_soak_service_killed_at_random_moments(tmp_path: Path, service: str, timeline: str | None) -> None:
    table_type = _table_type(service, "postgresql" if timeline else "filesystem")
    run_service_torture(tmp_path, service, table_type, timeline, SOAK_KILLS)
