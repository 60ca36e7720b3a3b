"""A failure inside a Spark task arrives on the driver as lakeline's error where lakeline
can tell what it was, and a refusal is never retried (issue 46, item 6).

Why: a key delete on a table with non-nullable columns failed in the write's planning
task with pyarrow's ``ArrowInvalid`` (merge-on-read) or ``ValueError: Casting field``
(copy-on-write): raw tracebacks, each task run four times by Spark on a cluster. That
bug is fixed on its own; these tests make sure the next failure of its kind is
``SchemaMismatchError`` and is not retried, whatever raises it. The tasks here run the
same pyarrow calls that failed, in real Spark tasks (``SparkEngine``, the engine of
every lakeline write and service on Spark).

"Not retried" is measured as Spark sees it: the task attempts that failed, from its
status tracker. On ``local[2]`` a failed attempt fails the job at once (a cluster runs
it ``spark.task.maxFailures`` = 4 times), so a refusal must fail none.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.spark import SparkEngine, write
from lakeline.table import Table
from lakeline.timeline.errors import LakelineError, NullKeyError, SchemaMismatchError, StorageUnreachableError

NOT_NULL = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("ts", pa.int64(), nullable=False)])


def cast_nulls_into_not_null(_: int) -> int:
    """What copy-on-write's rewrite did: ``ValueError: Casting field 'ts' with null values``."""
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "ts": pa.array([1, None], pa.int64())})
    return rows.cast(NOT_NULL).num_rows


def parse_a_string_as_a_number(_: int) -> int:
    """``pyarrow.lib.ArrowInvalid: Failed to parse string``."""
    return len(pa.array(["7", "seven"]).cast(pa.int64()))


def reach_a_closed_port(port: int) -> int:
    """A store that does not answer: ``ConnectionRefusedError``, an ``OSError``."""
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        return port


def attempts(spark: Any, group: str, action: Callable[[], Any]) -> tuple[BaseException | None, int, int]:
    """(what ``action`` raised, task attempts that failed, tasks) of the jobs it ran: those
    of job group ``group`` and the new jobs of no group (a write's planning job runs on a
    thread of its own, which a job group does not reach)."""
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    before = set(tracker.getJobIdsForGroup(None))
    sc.setJobGroup(group, group)
    raised: BaseException | None = None
    try:
        action()
    except Exception as e:  # noqa: BLE001 - the error is the measurement
        raised = e
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    ran = set(tracker.getJobIdsForGroup(group)) | (set(tracker.getJobIdsForGroup(None)) - before)
    jobs = [tracker.getJobInfo(j) for j in ran]
    stages = [tracker.getStageInfo(s) for j in jobs if j is not None for s in j.stageIds]
    failed = sum(s.numFailedTasks for s in stages if s is not None)
    return raised, failed, sum(s.numTasks for s in stages if s is not None)


def test_a_foreign_failure_in_a_task_is_typed_and_a_refusal_is_not_retried(spark: Any) -> None:
    engine = SparkEngine(spark)
    for i, (task, needle) in enumerate(
        [(cast_nulls_into_not_null, "ValueError: Casting field 'ts'"), (parse_a_string_as_a_number, "ArrowInvalid")]
    ):
        raised, failed, tasks = attempts(spark, f"cast-{i}", lambda task=task: engine.map(task, [1, 2]))
        assert isinstance(raised, SchemaMismatchError), raised
        assert needle in str(raised) and tasks == 2 and failed == 0, (raised, failed, tasks)
        assert any("not run it again" in n for n in getattr(raised, "__notes__", [])), raised
    # A store's failure may pass on another attempt: raised (Spark retries it), typed.
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    raised, failed, _ = attempts(spark, "store", lambda: engine.map(reach_a_closed_port, [port]))
    assert isinstance(raised, StorageUnreachableError) and "ConnectionRefusedError" in str(raised), raised
    assert failed == 1


def test_a_refusal_in_a_writes_planning_task_fails_no_attempt(spark: Any, tmp_path: Path) -> None:
    """A null key is found by the planning task (on an executor): refused there, typed,
    no attempt failed, nothing written."""
    t = Table.create(tmp_path / "t", pa.schema([("id", pa.int64()), ("v", pa.string())]), record_key="id")
    before = t.timeline.last_seq
    df = spark.createDataFrame([(1, "a"), (None, "b")], "id long, v string")
    raised, failed, tasks = attempts(spark, "null-key", lambda: write(df, t.path, "upsert"))
    assert isinstance(raised, NullKeyError) and isinstance(raised, LakelineError), raised
    assert tasks >= 1 and failed == 0, (failed, tasks)
    assert Table.open(t.path).timeline.last_seq == before  # refused before any instant
    assert Table.open(t.path).to_arrow().num_rows == 0


@pytest.mark.parametrize("error", [ValueError("a bug"), KeyError("k"), FileNotFoundError("gone")])
def test_what_lakeline_cannot_tell_is_left_as_it_is(error: Exception) -> None:
    from lakeline.spark.errors import as_lakeline

    assert as_lakeline(error) is None
