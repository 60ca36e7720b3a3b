"""Structured Streaming in and out of lakeline.

Why: pipelines are streams. A source stream (``spark.readStream.format("lakeline")``)
must hold in each micro-batch exactly the changes of the instants completed since the
last one (completion order, offsets are instant ids), bounded by
``max_instants_per_batch``, and a query restarted on its checkpoint must go on where it
stopped. A sink stream (``df.writeStream.format("lakeline")``) must land every row once
even when Spark runs a micro-batch again after a crash between the lakeline commit and
its own checkpoint: simulated as Spark itself sees it (the batch's entry of the
checkpoint's commit log removed, so the restarted query runs that batch again), and for
real, the driver's whole process group killed with SIGKILL right after the lakeline commit
of a micro-batch, while another process compacts the table. And a change stream (upserts
and deletes) into a merge-on-read table must never stop while a runner process compacts
and cleans the same table (issue 28's proof: Iceberg users stop their streams to compact).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lakeline.table import Table
from lakeline.timeline.errors import LakelineError

from bench.cdc_bench import SCHEMA as CDC_SCHEMA
from bench.cdc_bench import SPARK_SCHEMA as CDC_SPARK_SCHEMA
from bench.cdc_bench import generate, model_of, runner_process, table_rows
from tests.children.stream_driver import STREAM_DRIVER
from tests.helpers import finish, start_script, wait_for_files

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def rows(ids: list[int], ts: int) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "v": [f"v{ts}"] * len(ids)}, schema=SCHEMA)


def changes_of(t: Table, start: int, end: int) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["ts"], r["v"], r["_op"]) for r in t.changes(start, end).to_pylist())


def run(
    spark: Any, path: str, checkpoint: Path, seen: list[tuple[int, list[tuple[Any, ...]]]], consumer: str = "cdc"
) -> None:
    """Read every change available now, one instant per micro-batch, then stop (with a
    bookmark named ``consumer``)."""

    def collect(df: Any, batch_id: int) -> None:
        got = sorted((r["id"], r["ts"], r["v"], r["_op"]) for r in df.collect())
        if got:
            seen.append((batch_id, got))

    query = (
        spark.readStream.format("lakeline")
        .option("starting_instant", "earliest")
        .option("max_instants_per_batch", "1")
        .option("consumer", consumer)
        .load(path)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()


@pytest.mark.parametrize("table_type", ["mor"])
def test_a_stream_reads_each_instant_once_across_a_restart(spark: Any, tmp_path: Path, table_type: str) -> None:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts", table_type=table_type)
    created = t.timeline.completed()[0].id
    ids = [t.insert(rows([1, 2, 3], 1)).instant, t.upsert(rows([2, 4], 2)).instant]
    ids.append(t.delete(pa.table({"id": pa.array([1], pa.int64())})).instant)
    assert all(i is not None for i in ids)
    seen: list[tuple[int, list[tuple[Any, ...]]]] = []
    run(spark, t.path, tmp_path / "ckpt", seen)
    bounds = [created] + [i.id for i in ids if i is not None]
    assert [got for _, got in seen] == [changes_of(t, a, b) for a, b in zip(bounds, bounds[1:])]
    # The stream's bookmark followed its commits (Spark commits a batch's end when it
    # plans the next, so it may lag by one batch: it pins more, never less): a clean that
    # keeps one version keeps what the stream has yet to read, so a restart reads on.
    assert t.services.bookmarks()["cdc"].instant in bounds[-2:]
    more = [t.upsert(rows([3, 5], 3)).instant, t.upsert(rows([3], 4)).instant, t.services.compact().instant]
    assert all(i is not None for i in more)
    t.services.clean(retain=1, dry_run=False)  # without the bookmark: the compacted slice's files go
    # A restart on the same checkpoint reads only what completed since.
    again: list[tuple[int, list[tuple[Any, ...]]]] = []
    run(spark, t.path, tmp_path / "ckpt", again)
    later = [bounds[-1]] + [i.id for i in more if i is not None]
    assert [got for _, got in again] == [changes_of(t, a, b) for a, b in zip(later, later[1:]) if changes_of(t, a, b)]
    assert again[0][0] > seen[-1][0]  # the batch ids go on
    assert t.services.bookmarks()["cdc"].instant in later[-2:]
    # The same options make a batch read of the changes since the start.
    batch = spark.read.format("lakeline").option("starting_instant", str(later[0])).load(t.path)
    assert sorted((r["id"], r["ts"], r["v"], r["_op"]) for r in batch.collect()) == changes_of(t, later[0], later[-1])


def test_a_sink_stream_lands_each_micro_batch_once_even_when_spark_runs_it_again(spark: Any, tmp_path: Path) -> None:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts", table_type="mor")
    source, ckpt = tmp_path / "in", tmp_path / "ckpt"
    spark_schema = "id long, ts long, v string"

    def drop_in(name: str, batch: pa.Table) -> None:
        spark.createDataFrame(batch.to_pandas()).write.mode("overwrite").parquet(str(source / name))

    def run_sink() -> None:
        query = (
            spark.readStream.schema(spark_schema)
            .parquet(str(source / "*"))
            .writeStream.format("lakeline")
            .option("operation", "upsert")
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start(t.path)
        )
        query.awaitTermination(300)
        assert query.exception() is None

    drop_in("a", rows([1, 2, 3], 1))
    run_sink()
    assert t.txn_version(f"spark-stream:{ckpt}") == 0
    drop_in("b", rows([3, 4], 2))
    run_sink()
    landed = [i for i in t.timeline.completed() if i.action.writes_data]
    assert t.txn_version(f"spark-stream:{ckpt}") == 1 and len(landed) == 2
    # Spark forgets it committed batch 1 (as after a driver killed right after the
    # lakeline commit): the restarted query runs batch 1 again, which lands nothing.
    for name in ("1", ".1.crc"):  # the entry and Hadoop's checksum beside it
        (ckpt / "commits" / name).unlink(missing_ok=True)
    run_sink()
    assert (ckpt / "commits" / "1").exists()  # Spark ran batch 1 again and committed it
    assert [i for i in t.timeline.completed() if i.action.writes_data] == landed
    got = sorted((r["id"], r["ts"]) for r in t.to_arrow().to_pylist())
    assert got == [(1, 1), (2, 1), (3, 2), (4, 2)]


def test_a_driver_killed_between_the_lakeline_commit_and_spark_s_lands_each_batch_once(tmp_path: Path) -> None:
    """A real crash, not a simulated one: the sink's commit of the first micro-batch is
    held right after the lakeline instant completed (``commit.after_complete=wait``, in
    the Python worker that runs it), and the whole driver (its process group: Python,
    the JVM, its workers) is killed with SIGKILL there, before Spark wrote that batch to
    its checkpoint. A new driver on the same checkpoint runs the batch again, which
    lands nothing (``txn``), then the rest, while another process compacts the table
    (``inline.services`` compacts in the stream as well): every batch lands exactly
    once, the stream never stops, and nothing is left pending."""
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        table_type="mor",
        properties={"inline.services": "compaction", "compaction.delta-commits": 2},
    )
    source, ckpt, fault_dir = tmp_path / "in", tmp_path / "ckpt", tmp_path / "faults"
    source.mkdir()
    fault_dir.mkdir()
    batches = [rows(list(range(5 * n, 5 * n + 10)), n) for n in range(4)]  # half updates: logs to compact
    for n, batch in enumerate(batches):
        pq.write_table(batch, source / f"part-{n}.parquet")
    args = [t.path, str(source), str(ckpt), "upsert", "id long, ts long, v string"]
    env = {"LAKELINE_FAULT_DIR": str(fault_dir)}
    driver = start_script(STREAM_DRIVER, args, faults="commit.after_complete=wait", env=env, new_session=True)
    try:
        wait_for_files([fault_dir / "commit.after_complete.reached"], timeout=240)
        os.killpg(driver.pid, signal.SIGKILL)
        waiting = int((fault_dir / "commit.after_complete.reached").read_text())
        with contextlib.suppress(ProcessLookupError):
            os.kill(waiting, signal.SIGKILL)  # the worker, if Spark gave it a group of its own
    finally:
        finish(driver)
    app = f"spark-stream:{ckpt}"
    assert t.txn_version(app) == 0, "the kill should come after batch 0's lakeline commit"
    assert not (ckpt / "commits" / "0").exists(), "the kill should come before Spark's commit of batch 0"

    stop = threading.Event()
    compactions: list[Any] = []

    def compact_meanwhile() -> None:  # another process's handle: the runner's part
        other = Table.open(t.path)
        while not stop.wait(0.3):
            with contextlib.suppress(LakelineError):
                compactions.append(other.services.compact().instant)

    helper = threading.Thread(target=compact_meanwhile)
    helper.start()
    try:
        rc, out, err = finish(start_script(STREAM_DRIVER, args, env=env), timeout=300)
    finally:
        stop.set()
        helper.join()
    assert rc == 0, err[-4000:]
    assert json.loads(out)["batches"] >= len(batches)
    assert t.txn_version(app) == len(batches) - 1
    writes = [i for i in t.timeline.completed() if i.action == "deltacommit"]
    assert len(writes) == len(batches), [i.id for i in writes]  # batch 0 once, though it ran twice
    latest = {r["id"]: (r["id"], r["ts"], r["v"]) for b in batches for r in b.to_pylist()}
    assert sorted((r["id"], r["ts"], r["v"]) for r in t.to_arrow().to_pylist()) == sorted(latest.values())
    assert any(i.action == "compaction" for i in t.timeline.completed())
    assert t.timeline.pending() == []


def test_a_stream_reads_across_archival_and_its_bookmark_holds_archival_back(tmp_path: Path) -> None:
    """The stream reader's offsets and reads run on the driver and workers without a
    session, so they are driven here directly: events the stream has not read yet that
    archival moved to the archive are read through it (the timeline merges it back), in
    the same micro-batches; and a consumer's bookmark keeps archival from passing it."""
    from lakeline.spark.source import ChangesStreamReader
    from pyspark.sql.streaming.datasource import ReadMaxFiles

    props = {"archive.min-active-instants": 1, "archive.max-active-instants": 2}
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts", table_type="cow", properties=props)
    for n in range(6):
        assert t.upsert(rows([n, n + 1], n)).instant is not None
    reader = ChangesStreamReader(lambda: Table.open(t.path), {"starting_instant": "earliest"})
    start = reader.initialOffset()
    assert t.services.archive().instant is not None
    assert Table.open(t.path).log.store.archived_through() > 0  # the range to read was archived
    batches, offset = [], start["instant"]
    while True:
        end = reader.latestOffset({"instant": offset}, ReadMaxFiles(2))["instant"]
        if end == offset:
            break
        got = [
            r
            for part in reader.partitions({"instant": offset}, {"instant": end})
            for b in reader.read(part)
            for r in b.to_pylist()
        ]
        batches.append(((offset, end), sorted((r["id"], r["ts"], r["v"], r["_op"]) for r in got)))
        reader.commit({"instant": end})
        offset = end
    written = [i.id for i in t.timeline.completed() if i.action.writes_data]
    bounds = [start["instant"], *written[1::2]]  # two data instants a batch
    assert [b for b, _ in batches] == list(zip(bounds, bounds[1:]))
    assert [rows_ for _, rows_ in batches] == [changes_of(t, a, b) for (a, b), _ in batches]
    # A consumer's bookmark: archival keeps every event from it on.
    bookmarked = ChangesStreamReader(lambda: Table.open(t.path), {"starting_instant": "latest", "consumer": "c"})
    at = bookmarked.initialOffset()["instant"]
    assert t.services.bookmarks()["c"].instant == at
    for n in range(6, 10):
        t.upsert(rows([n], n))
    t.services.archive()
    tl = Table.open(t.path).timeline
    assert Table.open(t.path).log.store.archived_through() < tl.get(at).completed_seq


#: Seconds of streaming beside the runner: short in the suite, a minute under soak.
SHORT_STREAM_S, SOAK_STREAM_S = 15.0, 60.0


@pytest.mark.parametrize(
    "stream_s", [SHORT_STREAM_S, pytest.param(SOAK_STREAM_S, marks=pytest.mark.soak)], ids=["short", "soak"]
)
def test_a_change_stream_never_stops_beside_a_runner_that_compacts_and_cleans(
    spark: Any, tmp_path: Path, stream_s: float
) -> None:
    """A change stream (300-row batches: 20% updates, 5% deletes, new keys, random key
    order; ``operation=upsert`` with ``_op``) runs for ``stream_s`` seconds, fed a file
    at a time as it keeps up, into a merge-on-read table that a ``lakeline runner``
    process (its own OS process) compacts every second and cleans every two. Checks
    while it runs: the query is active and has no error, and compactions complete; after
    it: every batch landed exactly once, as one commit (by its txn), no key twice, the
    table equals the model (the batches folded in order), the runner exited 0 having run
    compactions and cleans, and nothing is pending."""
    # Files the compactions replaced are cleanable 10 s after they were written (the default,
    # an hour, would leave the cleaner nothing to do here); staged micro-batches are
    # committed well within that, so the cleaner never takes a batch's staging folder.
    props = {
        "compaction.delta-commits": 2,
        "clean.retain": 2,
        "clean.orphan-age-ms": 10_000,
        "heartbeat.interval-ms": 500,
    }
    t = Table.create(
        tmp_path / "t", CDC_SCHEMA, record_key="key", ordering_field="ts", table_type="mor", properties=props
    )
    source, staging, ckpt = tmp_path / "in", tmp_path / "drop", tmp_path / "ckpt"
    source.mkdir()
    staging.mkdir()
    feed = generate(10_000, 300, 0.2, 0.05, "random")
    fed: list[pa.Table] = []

    def drop_next() -> None:  # written aside, then renamed in: the stream never sees half a file
        fed.append(next(feed))
        pq.write_table(fed[-1], staging / "next.parquet")
        os.replace(staging / "next.parquet", source / f"batch-{len(fed):06d}.parquet")

    drop_next()
    app = f"spark-stream:{ckpt}"
    compactions_while_streaming = cleans_while_streaming = 0
    with runner_process(t.path, tmp_path, "every 1s", "every 2s") as runner:
        query = (
            spark.readStream.schema(CDC_SPARK_SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .parquet(str(source))
            .writeStream.format("lakeline")
            .option("operation", "upsert")
            .option("checkpointLocation", str(ckpt))
            .start(t.path)
        )
        try:
            end = None  # the clock starts once the first batch landed (the workers started)
            while end is None or time.monotonic() < end:
                assert query.isActive and query.exception() is None, query.exception()
                landed = t.txn_version(app)
                if landed is not None and landed >= len(fed) - 2:  # at most two files ahead
                    end = end or time.monotonic() + stream_s
                    drop_next()
                time.sleep(0.2)
            query.processAllAvailable()
            assert query.isActive and query.exception() is None, query.exception()
            done = Table.open(t.path).timeline.completed()
            compactions_while_streaming = sum(1 for i in done if i.action == "compaction")
            cleans_while_streaming = sum(1 for i in done if i.action == "clean")
        finally:
            query.stop()
    assert runner["rc"] == 0 and runner["alive_at_end"], runner["stderr_tail"]
    ran = {row["service"]: row["runs"] for row in runner["summary"]["runs"]}
    assert ran.get("compaction", 0) > 0 and ran.get("cleaning", 0) > 0, runner["summary"]
    assert compactions_while_streaming > 0, "no compaction completed while the stream ran"
    assert cleans_while_streaming > 0 or stream_s < SOAK_STREAM_S, "no clean completed while the stream ran"
    versions = []
    for inst in Table.open(t.path).timeline.completed():
        txn = inst.metadata.get("txn") if inst.action.writes_data else None
        if txn is not None:
            assert txn["app_id"] == app, txn  # no batch fell back to two writes
            versions.append(txn["version"])
    assert sorted(versions) == list(range(len(fed))), "each batch lands as one commit, once"
    got = table_rows(t.path)
    assert len(set(got.column("key").to_pylist())) == got.num_rows, "a key is in the table twice"
    assert got.equals(model_of(fed))
    assert Table.open(t.path).timeline.pending() == []
    print(
        f"stream beside a runner {stream_s:.0f}s: {len(fed)} batches, {compactions_while_streaming} compactions, "
        f"{cleans_while_streaming} cleans, {ran}"
    )


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_a_change_batch_is_one_write_that_equals_its_deletes_then_its_upserts(tmp_path: Path, table_type: str) -> None:
    """The sink's change rows (``_op``): a key whose rows hold a delete goes, only its rows
    after the last delete are upserted, ``update_before`` rows are dropped; a batch with
    disjoint deletes and upserts is one write (one tag) leaving what the delete and then
    the upsert leave; one that re-inserts a deleted key is not combined."""
    from lakeline.spark.source_writer import split_changes
    from lakeline.table.write.changes import can_combine, write_changes

    batch = rows([1, 2, 3, 1, 4, 2, 5], 2).append_column(
        "_op", pa.array(["insert", "update", "delete", "delete"] + ["update_before", "insert", None])
    )
    deletes, upserts = split_changes(batch, ["id"])
    assert sorted(deletes.column("id").to_pylist()) == [1, 3] and upserts.column("id").to_pylist() == [2, 2, 5]
    made = []
    for name in ("one", "two"):
        t = Table.create(tmp_path / name, SCHEMA, record_key="id", ordering_field="ts", table_type=table_type)
        t.insert(rows([1, 2, 3, 4], 1))
        made.append(t)
    assert can_combine(made[0], upserts, deletes)
    assert write_changes(made[0], upserts, deletes, ("app", 0)).stats["deleted"] == 2
    made[1].delete(deletes)
    made[1].upsert(upserts)
    got = [sorted((r["id"], r["ts"]) for r in t.to_arrow().to_pylist()) for t in made]
    assert got[0] == got[1] == [(2, 2), (4, 1), (5, 2)]
    assert len([i for i in made[0].timeline.completed() if i.action.writes_data]) == 2  # the insert, then one write
    assert made[0].txn_version("app") == 0
    again = rows([4], 3).append_column("_op", pa.array(["delete"]))
    assert not can_combine(made[0], rows([4], 4), split_changes(again, ["id"])[0])  # deleted and upserted: two writes
