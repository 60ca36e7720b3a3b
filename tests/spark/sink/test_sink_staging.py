"""The streaming sink removes each micro-batch's staged input once its commit landed
(issue 46, item 4), on a local disk and on S3, and a killed query's at the next cleaning.

Why it was left: Spark runs a stream's ``commit`` and ``abort`` on a writer it makes
anew (``streamWriter`` in pyspark's ``python_streaming_sink_runner``), not on the one
the tasks staged with, so the commit removed a folder of its own that no task wrote
into, on every store alike (20 folders after 20 batches). These tests fail on that code.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.spark.source_writer import LakelineStreamWriter, Staged
from lakeline.table import Table
from lakeline.timeline.storage.staging_folders import OWNER_FILE, write_ids

from tests.seaweedfs import SeaweedServer
from tests.spark.sink.stream_cluster import SCHEMA, check_cluster_part, cluster_part


@pytest.fixture
def no_aws_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The store is reached through the options alone, as on the cluster."""
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    yield


def test_a_stream_leaves_no_staging_on_a_local_disk(spark: Any, tmp_path: Path) -> None:
    out = cluster_part(spark, str(tmp_path / "t"), {})
    check_cluster_part(out)


@pytest.mark.s3
def test_a_stream_leaves_no_staging_on_s3(spark: Any, s3: SeaweedServer, no_aws_environment: None) -> None:
    out = cluster_part(spark, s3.uri(), s3.options())
    check_cluster_part(out)


def stage(writer: LakelineStreamWriter, ids: list[int]) -> Staged:
    """What one task of a micro-batch does: stage its rows."""
    batch = pa.record_batch({"id": ids, "ts": [1] * len(ids), "v": [f"v{i}" for i in ids]}, schema=SCHEMA)
    return writer.write(iter([batch]))


def test_commit_and_abort_on_a_fresh_writer_remove_the_tasks_folder(tmp_path: Path) -> None:
    """As Spark does it: the tasks stage with one writer, the commit (or the abort) runs
    on another made from the same options; a killed query's folder (no commit, no abort)
    goes at the next cleaning."""
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts")
    options = {"operation": "upsert", "checkpointlocation": str(tmp_path / "ckpt")}

    planned = LakelineStreamWriter(t.path, options)
    messages: list[Any] = [stage(planned, [1, 2]), None, stage(planned, [3])]  # None: a failed task
    tasks_folder = os.path.basename(planned.staging)
    assert write_ids(t.storage) == [tasks_folder]
    LakelineStreamWriter(t.path, options).commit(messages, 0)
    assert t.to_arrow().num_rows == 3
    assert write_ids(t.storage) == [], "the commit removes the folder its tasks staged in"

    planned = LakelineStreamWriter(t.path, options)
    messages = [stage(planned, [4]), None]
    LakelineStreamWriter(t.path, options).abort(messages, 1)
    assert write_ids(t.storage) == [] and t.to_arrow().num_rows == 3

    # A killed query: staged, never committed nor aborted; no owner file, so its age decides.
    killed = LakelineStreamWriter(t.path, options)
    stage(killed, [5])
    left = os.path.basename(killed.staging)
    assert not (Path(t.storage.path(killed.staging)) / OWNER_FILE).exists()
    kept = t.services.clean(retain=10, dry_run=False)  # younger than clean.orphan-age-ms: kept
    assert left not in kept.stats.get("staging_removed", []) and write_ids(t.storage) == [left]
    cleaned = t.services.clean(retain=10, dry_run=False, orphan_age_ms=0)
    assert left in cleaned.stats["staging_removed"] and write_ids(t.storage) == []
