"""kill -9 torture: a writer, and separately each table service, killed at random moments.

Why: the fault-point crash tests (``test_crash.py``) kill a process at the steps we
named; a SIGKILL after a random delay also lands between them, inside a Parquet write,
a store round trip or a marker write (issue 11, item 5 is such a wedge). docs/concurrency.md
section 4 promises that after any crash ``rollback_failed`` brings the table back: the
interrupted operation either happened entirely or not at all.

Each round starts a child (``tests/children/table_workers.py torture`` for the writer,
``tests/children/service_workers.py torture`` for a service), lets it start working
(a GO file; the child imported and opened the table while the test checked the round
before), sleeps a random delay and sends SIGKILL. A writer's delay is up to 1 s (it
writes in a loop); a service's is up to 1.3 x the median time its first run took in
earlier rounds, so most kills land inside a run rather than in the idle loop after
it (each service test requires that some kill left an instant of it pending). Then, like an operator would, it
waits for the heartbeat to expire (the tables beat every 100 ms and tolerate 1 miss),
runs ``t.services.rollback_failed()`` and, after a killed service, runs that service
again so it finishes or aborts its pending instant. Then:

* nothing is pending;
* the table equals one all-or-nothing outcome of the interrupted operation: the
  completion-order model of every committed write (``test_concurrency.py``), with the
  interrupted write applied if and only if its instant completed (the timeline
  decides); services never change what the table reads;
* no file of a rolled-back instant remains, every data file on disk belongs to a
  completed instant, no marker is left (``check_files_on_disk``);
* every ``ready`` index validates; after a killed cleaner, every snapshot inside
  retention still has its files and reads the model as of it;
* the table accepts the next write (the parent's own upsert, checked at once).

A failing round prints its seed and kill moment; ``LAKELINE_TORTURE_SEED`` replays the
same writes (the kill moment is wall-clock, so a replay is likely, not certain, to hit
the same step). ``make test`` kills 5 times per case, ``-m soak`` 100 times.

This module holds the writer's rounds; each service's are in ``test_service_torture.py``,
the harness both use (:class:`Torture`) in ``torture_harness.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.children.table_workers import WORKERS_PY
from tests.table.concurrency.torture_harness import (
    KEYS,
    SHORT_KILLS,
    SOAK_KILLS,
    Child,
    Torture,
    base_seed,
    failed_round,
    parse_log,
    parse_tail,
)

# -- the writer ---------------------------------------------------------------------------


def writer_round(tt: Torture, child: Child, last: bool) -> Child | None:
    """Kill round ``child.n``'s writer, recover, check; returns the next round's child."""
    n, log = child.n, child.log
    delay = tt.kill(child)
    nxt = None if last else tt.spawn(n + 1)
    what = f"writer round {n} (seed {tt.seed * 1000 + n}, killed {delay:.3f} s after its start)"
    completed_before = tt.counts["interrupted_completed"]
    try:
        pending_at_kill = [i for i in tt.t.log.refresh().pending() if i.action.writes_data]
        tt.recover()
        committed, interrupted, lines = parse_log(log)
        for inst in tt.new_data_instants():
            spec = committed.pop(inst.id, None)
            if spec is None:
                assert interrupted is not None, f"instant {inst.id} completed, yet no write was interrupted"
                spec, interrupted = interrupted, None  # it happened: all of it
                tt.counts["interrupted_completed"] += 1
            tt.model.apply(inst, spec)
            tt.applied.add(inst.id)
        assert not committed, f"writes reported committed but not completed on the timeline: {sorted(committed)}"
        if interrupted is not None:
            tt.counts["interrupted_rolled_back" if pending_at_kill else "interrupted_before_requested"] += 1
        elif not pending_at_kill and tt.counts["interrupted_completed"] == completed_before:
            tt.counts["between_writes"] += 1
        tt.counts["writes_committed"] += sum(1 for rec in lines if rec.get("outcome") == "committed")
        tt.check(what)
    except AssertionError as e:
        print(f"FAILED {what}; log tail:\n" + "\n".join(line[:300] for line in parse_tail(log)))
        raise failed_round(what, e, nxt) from e
    tt.counts["kills"] += 1
    return nxt


def run_writer_torture(tmp_path: Path, table_type: str, timeline: str | None, kills: int) -> None:
    seed = base_seed()
    print(f"torture seed {seed} (LAKELINE_TORTURE_SEED={seed} replays it)")
    path = str(tmp_path / f"table-{table_type}")
    tt = Torture(
        tmp_path,
        table_type,
        timeline,
        seed,
        "writer",
        WORKERS_PY,
        lambda n, ready, go, log: ["torture", path, timeline, seed * 1000 + n, str(log), str(ready), str(go), KEYS],
    )
    child: Child | None = tt.spawn(0)
    for n in range(kills):
        assert child is not None
        child = writer_round(tt, child, last=n == kills - 1)
    print(f"writer {table_type} {'pg' if timeline else 'fs'} seed {seed}: {dict(tt.counts)}")
    assert tt.counts["kills"] == kills


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_writer_killed_at_random_moments(tmp_path: Path, table_type: str) -> None:
    run_writer_torture(tmp_path, table_type, None, SHORT_KILLS)


@pytest.mark.soak
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_soak_writer_killed_at_random_moments(tmp_path: Path, table_type: str, timeline: str | None) -> None:
    run_writer_torture(tmp_path, table_type, timeline, SOAK_KILLS)
