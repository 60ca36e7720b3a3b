"""Writer processes racing on a table on S3, checked against the completion-order model.

The same run as tests/table/concurrency/test_concurrency.py (four processes upserting
and deleting random keys of a 64-key space; the model applies the committed writes in
completion order), on the SeaweedFS test server with the event log on the store: the
create-only put of each event is the only thing that orders the writers. Then no
instant is pending and no file of a rolled-back attempt is left on the store. A writer
killed (kill -9) at each commit fault point, and each service killed at random moments,
are recovered from on the store as on a local disk.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.seaweedfs import SeaweedServer
from tests.table.concurrency.crash_helpers import COMMIT_POINTS, kill_writer_and_recover, make_table
from tests.table.concurrency.test_concurrency import check_against_model, run_workers
from tests.table.concurrency.test_service_torture import run_service_torture
from tests.table.concurrency.torture_harness import SERVICES

#: Kills per service on the store (the local torture's short run kills more; each round
#: here pays the store's latency on every request of a recovery and a check).
S3_KILLS = 3


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_four_writer_processes_on_s3_match_the_model(
    s3: SeaweedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table_type: str
) -> None:
    for key, value in s3.options().items():
        monkeypatch.setenv(key, value)  # the worker processes open the table from the environment
    t, records = run_workers(tmp_path, table_type, None, workers=4, commits=25, location=s3.uri(table_type))
    assert t.log.store.kind == "object_store"
    counts = check_against_model(t, records)
    print(f"{table_type} s3: {dict(counts)}")


@pytest.mark.parametrize("service", SERVICES)
def test_each_service_killed_at_random_moments_on_s3(
    s3: SeaweedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, service: str
) -> None:
    """kill -9 of each service's process at random moments, recovery, and the torture's
    checks (the model, nothing pending, no file of a rolled-back attempt on the store)."""
    for key, value in s3.options().items():
        monkeypatch.setenv(key, value)
    table_type = "mor" if service in ("compaction", "indexing") else "cow"
    run_service_torture(tmp_path, service, table_type, None, S3_KILLS, location=s3.uri(service))


@pytest.mark.parametrize("point", COMMIT_POINTS)
@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_writer_killed_at_each_commit_point_is_rolled_back_off_the_store(
    s3: SeaweedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table_type: str, point: str
) -> None:
    for key, value in s3.options().items():
        monkeypatch.setenv(key, value)
    kill_writer_and_recover(make_table(tmp_path, table_type, None, location=s3.uri()), point)
