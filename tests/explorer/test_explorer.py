"""The schedule explorer in the suite: a short campaign in ``make test``, a long one
under ``-m soak``, and a self-test that it reports a planted bug.

Each failure message is the explorer's report: the violated invariant, the history of
actor steps (fault points, instants, outcomes) and the command that replays it.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.explorer.explorer import Decision, PrefixChooser, RunReport, exhaustive, run_random, run_schedule
from tests.explorer.scenarios import SCENARIOS

#: make test: random schedules for about this long (seconds), then the scenarios below.
SHORT_BUDGET_S = 20.0
#: Schedules enumerated per scenario in make test (on 6236311, before the fixes, the
#: explorer met item 1 at schedule 30 of lost_delete and item 2 at schedule 5 of revived_key;
#: txn_txn: two writers racing one (app, version), and a replay of an older one;
#: rename_upsert: an upsert racing a rename of a column its rows carry, issue 29;
#: record_index_build: the record index built beside an upsert and a clustering, issue 30).
SHORT_SCENARIOS = {"lost_delete": 32, "revived_key": 10, "txn_txn": 6, "rename_upsert": 9, "record_index_build": 3}


def _fail(bad: list[RunReport], runs: int) -> None:
    if bad:
        pytest.fail(f"{len(bad)} of {runs} schedules broke an invariant; first:\n{bad[0].format()}", pytrace=False)


def _campaign(tmp_path: Path, budget_s: float, start: int = 0) -> tuple[int, list[RunReport]]:
    started = time.perf_counter()
    seed, bad = start, []
    while time.perf_counter() - started < budget_s:
        r = run_random(seed, workdir=str(tmp_path))
        if not r.ok:
            bad.append(r)
        seed += 1
    print(f"random schedules: seeds {start}..{seed - 1} ({seed - start}), violations: {len(bad)}")
    return seed - start, bad


def test_random_schedules_keep_every_invariant(tmp_path: Path) -> None:
    runs, bad = _campaign(tmp_path, SHORT_BUDGET_S)
    assert runs >= 5  # about 2 s a schedule on a loaded 2-core machine
    _fail(bad, runs)


@pytest.mark.parametrize("name", sorted(SHORT_SCENARIOS))
def test_every_small_interleaving_of_a_known_hazard(name: str) -> None:
    """Items 1 and 2 of issue 11 as scenarios: every interleaving with at most one
    preemption (the explorer found both on the code before the fixes)."""
    reports = list(exhaustive(SCENARIOS[name], name, max_preemptions=1, max_runs=SHORT_SCENARIOS[name]))
    print(f"scenario {name}: {len(reports)} schedules")
    assert len(reports) >= 3
    _fail([r for r in reports if not r.ok], len(reports))


def test_explorer_reports_a_planted_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the commit conflict check switched off, two concurrent inserts of one key
    both land: the explorer must say so, with a replay command and the history."""
    import lakeline.table.write.commit as commit

    monkeypatch.setattr(commit, "find_conflict", lambda *a, **k: None)
    spec = SCENARIOS["insert_insert_mor"]
    # A plans and writes, B inserts the same key and completes, A completes.
    chooser = PrefixChooser([])
    first = run_schedule(spec, chooser)
    assert first.ok  # serial: B's insert is refused as a duplicate
    found = [r for r in exhaustive(spec, "insert_insert_mor", max_preemptions=1, max_runs=15) if not r.ok]
    assert found, "the explorer missed two committed inserts of one key"
    text = found[0].format()
    assert "key twice" in text or "duplicate insert committed" in text
    assert "python -m tests.explorer --scenario insert_insert_mor --choices" in text
    assert "insert(30@1:ts" in text


def test_explorer_reports_a_txn_version_landed_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the txn checks switched off (at planning and at completion), a second write
    of one (app, version) lands: the explorer's txn writers must say so."""
    import lakeline.table.write.writer as writer

    monkeypatch.setattr(writer, "landed", lambda *a, **k: False)
    monkeypatch.setattr(writer, "with_txn_check", lambda rule, ctx, metadata: rule)
    found = [r for r in exhaustive(SCENARIOS["txn_txn"], "txn_txn", max_preemptions=1, max_runs=6) if not r.ok]
    assert found, "the explorer missed a txn version landing twice"
    assert "txn landed twice" in found[0].format()


def test_explorer_reports_a_write_landing_under_a_rename(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the schema-conflict check of a write's completion switched off, an upsert
    that read the schema before a rename of a column its rows carry lands after it: the
    explorer must say the write landed on a schema it does not fit. The schedule: the
    upsert runs to right before its completion, the rename runs whole, the upsert ends."""
    import lakeline.table.write.commit as commit

    monkeypatch.setattr(commit, "schema_conflict", lambda *a, **k: None)
    spec = SCENARIOS["rename_upsert"]
    serial = run_schedule(spec, PrefixChooser([]))
    assert serial.ok
    at = next(n for n, h in enumerate(serial.history) if "A -> commit.before_complete" in h)
    raced = run_schedule(spec, PrefixChooser([Decision(0)] * (at + 1) + [Decision(1)]))
    assert not raced.ok, "the explorer missed a write landing under a concurrent rename"
    text = raced.format()
    assert "write landed on a schema it does not fit" in text
    assert "it carried ['s']" in text


@pytest.mark.soak
def test_soak_random_schedules(tmp_path: Path) -> None:
    runs, bad = _campaign(tmp_path, 480.0, start=10_000)
    _fail(bad, runs)


@pytest.mark.soak
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_soak_scenarios_with_a_crash(name: str) -> None:
    reports = list(exhaustive(SCENARIOS[name], name, max_preemptions=2, max_crashes=1, max_runs=100))
    _fail([r for r in reports if not r.ok], len(reports))
