"""The schedule explorer on a table on S3: random interleavings of every actor (writers
and services, all of which run against the store) at their fault points, with the
explorer's invariants checked after each step (tests/explorer/README.md)."""

from __future__ import annotations

import time

import pytest

from tests.explorer.explorer import RunReport, run_random
from tests.seaweedfs import SeaweedServer

#: Random schedules on the store: in make test, the first three seeds (a schedule is a
#: hundred-odd steps, 3-10 s on the store, so a time budget ran fewer than three on a
#: loaded machine and failed); under soak, as many as start within two minutes.
SCHEDULES, SOAK_BUDGET_S = 3, 120.0


@pytest.mark.parametrize("budget_s", [0.0, pytest.param(SOAK_BUDGET_S, marks=pytest.mark.soak)], ids=["short", "soak"])
def test_random_schedules_on_s3_keep_every_invariant(
    s3: SeaweedServer, monkeypatch: pytest.MonkeyPatch, budget_s: float
) -> None:
    for key, value in s3.options().items():
        monkeypatch.setenv(key, value)
    started, seed, bad = time.perf_counter(), 50_000, []  # seeds apart from the local campaign's
    reports: list[RunReport] = []
    while len(reports) < SCHEDULES or time.perf_counter() - started < budget_s:
        r = run_random(seed, location=s3.uri("explore"))
        reports.append(r)
        if not r.ok:
            bad.append(r)
        seed += 1
    print(f"random schedules on s3: {len(reports)}, steps {sum(r.steps for r in reports)}, violations {len(bad)}")
    assert len(reports) >= SCHEDULES
    assert not bad, f"{len(bad)} of {len(reports)} schedules broke an invariant; first:\n{bad[0].format()}"
