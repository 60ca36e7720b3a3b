"""The schedule explorer on a table on S3: random interleavings of every actor (writers
and services, all of which run against the store) at their fault points, with the
explorer's invariants checked after each step (tests/explorer/README.md)."""

from __future__ import annotations

import time

import pytest

from tests.explorer.explorer import RunReport, run_random
from tests.seaweedfs import SeaweedServer

#: Random schedules on the store for about this long (seconds) in make test.
BUDGET_S = 20.0


def test_random_schedules_on_s3_keep_every_invariant(s3: SeaweedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in s3.options().items():
        monkeypatch.setenv(key, value)
    started, seed, bad = time.perf_counter(), 50_000, []  # seeds apart from the local campaign's
    reports: list[RunReport] = []
    while time.perf_counter() - started < BUDGET_S:
        r = run_random(seed, location=s3.uri("explore"))
        reports.append(r)
        if not r.ok:
            bad.append(r)
        seed += 1
    print(f"random schedules on s3: {len(reports)}, steps {sum(r.steps for r in reports)}, violations {len(bad)}")
    assert len(reports) >= 3
    assert not bad, f"{len(bad)} of {len(reports)} schedules broke an invariant; first:\n{bad[0].format()}"
