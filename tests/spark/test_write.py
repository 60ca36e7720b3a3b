"""``lakeline.spark.write``: the same table as the local API, typed errors before anything
is written, replays on conflict, and no file of a failed task attempt left behind.

The equality tests run random sequences of inserts, upserts, deletes and overwrites
through both paths with the same inputs (cow and mor, partitioned or not) and compare the
tables after every step: what a Spark write does to a table must be exactly what the
local write does.
"""

from __future__ import annotations

import importlib
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.spark import write
from lakeline.table import Table
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.errors import (
    DuplicateKeyError,
    InvalidOptionError,
    InvalidTxnError,
    NullKeyError,
    SchemaMismatchError,
    UnsupportedOperationError,
)

from tests.table.model import table_rows

# The module, not the function the package exports under the same name.
spark_write = importlib.import_module("lakeline.spark.write")

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("day", pa.string()), ("v", pa.string())])
DAYS = ["d0", "d1", "d2"]
COLUMNS = ["day", "id", "ts", "v"]


def df_of(spark: Any, rows: pa.Table) -> Any:
    return spark.createDataFrame(rows.to_pandas())


def make(tmp: Path, name: str, table_type: str, partitioned: bool, **props: Any) -> Table:
    return Table.create(
        str(tmp / name),
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"] if partitioned else None,
        table_type=table_type,
        properties=props or None,
    )


def random_rows(rng: random.Random, keys: list[int], ts: int, partitioned: bool) -> pa.Table:
    days = [DAYS[k % 3] if partitioned else rng.choice(DAYS) for k in keys]
    return pa.table(
        {
            "id": pa.array(keys, pa.int64()),
            "ts": pa.array([ts] * len(keys), pa.int64()),
            "day": days,
            "v": [f"v{ts}-{rng.randrange(1000)}" for _ in keys],
        }
    )


def state(t: Table) -> list[tuple[Any, ...]]:
    return table_rows(Table.open(t.path).to_arrow(), COLUMNS)


@pytest.mark.parametrize(
    "table_type,partitioned,path",
    [
        ("mor", True, "fused"),
        ("cow", False, "fused"),
        ("cow", True, "staged"),
        pytest.param("mor", False, "staged", marks=pytest.mark.soak),
    ],
)
def test_random_writes_equal_the_local_api(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table_type: str, partitioned: bool, path: str
) -> None:
    """``path``: "fused" (one planning task, which writes its plan's files) or "staged"
    (several planning tasks: each file group is written by a task of its own from the
    parts the planning tasks staged for it)."""
    if path == "staged":
        monkeypatch.setattr(spark_write, "_ROWS_PER_PLAN_TASK", 70)  # 3 to 5 tasks for 200-300 rows
    rng = random.Random(f"{table_type}{partitioned}")
    local = make(tmp_path, "local", table_type, partitioned)
    remote = make(tmp_path, "spark", table_type, partitioned)
    live: set[int] = set()
    ops = ["insert", "upsert", "delete", "upsert", "overwrite", "upsert"]
    for ts, op in enumerate(ops, start=1):
        if op == "insert":
            keys = rng.sample(sorted(set(range(600)) - live), 300)
            data = random_rows(rng, keys, ts, partitioned)
        elif op == "upsert":
            keys = rng.sample(range(600), 200)
            data = random_rows(rng, keys, ts, partitioned)
        elif op == "delete":
            keys = rng.sample(range(600), 120)  # some absent: nothing to delete there
            data = pa.table({"id": pa.array(keys, pa.int64())})
        else:
            keys = rng.sample(range(600), 40)
            data = random_rows(rng, keys, ts, partitioned)
        getattr(local, op)(data)
        result = write(df_of(spark, data), remote.path, op)
        assert result.instant is not None
        assert result.instant.action == (local.timeline.completed()[-1].action)
        got, want = state(remote), state(local)
        assert got == want, f"after {op} #{ts}: {len(got)} rows through Spark, {len(want)} through the local API"
        live = {r[1] for r in want}


@pytest.mark.parametrize("table_type,plan_tasks", [("mor", 1), ("cow", 1), ("mor", 2), ("mor", 8)])
def test_copies_of_a_key_across_input_partitions_fold_like_the_local_write(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table_type: str, plan_tasks: int
) -> None:
    """Three copies of every key, each in another DataFrame partition (so in another
    staged file): the upsert keeps the largest ordering value, as the local write does,
    also when eight planning tasks share the buckets."""
    if plan_tasks > 1:
        monkeypatch.setattr(spark_write, "_ROWS_PER_PLAN_TASK", 1200 // plan_tasks)
    rng = random.Random(7)
    local = make(tmp_path, "local", table_type, True)
    remote = make(tmp_path, "spark", table_type, True)
    first = random_rows(rng, list(range(300)), 1, True)
    local.insert(first)
    write(df_of(spark, first), remote.path, "insert")
    copies = [random_rows(rng, rng.sample(range(400), 400), ts, True) for ts in rng.sample([5, 6, 7], 3)]
    local.upsert(pa.concat_tables(copies))
    # One copy per partition, in an order unrelated to the ordering values.
    rows = [tuple(r.values()) for c in copies for r in c.to_pylist()]  # parallelize slices evenly, in order
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 3), "id long, ts long, day string, v string")
    assert df.rdd.glom().map(lambda part: len({r.ts for r in part})).collect() == [1, 1, 1]
    write(df, remote.path, "upsert")
    assert state(remote) == state(local)


@pytest.mark.parametrize("engine", ["partial-update", "aggregation", "first-row"])
def test_a_merge_engine_folds_a_spark_write_like_the_local_write(spark: Any, tmp_path: Path, engine: str) -> None:
    """A key's copies in three DataFrame partitions, some with a null value: Spark's
    tasks fold them by the table's merge engine (docs/merge-engines.md), as the local
    write does, and the logs then fold onto the rows the insert wrote."""
    rng = random.Random(11)
    props = {"merge.engine": engine} | ({"merge.v.aggregate": "max"} if engine == "aggregation" else {})
    local = make(tmp_path, "local", "mor", True, **props)
    remote = make(tmp_path, "spark", "mor", True, **props)
    first = random_rows(rng, list(range(100)), 4, True)
    local.insert(first)
    write(df_of(spark, first), remote.path, "insert")
    copies = []
    for ts in [6, 3, 5]:
        c = random_rows(rng, rng.sample(range(150), 150), ts, True)
        copies.append(
            c.set_column(3, "v", pa.array([None if rng.random() < 0.3 else v for v in c.column("v").to_pylist()]))
        )
    local.upsert(pa.concat_tables(copies))
    rows = [tuple(r.values()) for c in copies for r in c.to_pylist()]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 3), "id long, ts long, day string, v string")
    write(df, remote.path, "upsert")
    assert state(remote) == state(local)


@pytest.mark.parametrize("op", ["insert", "upsert", "delete", "overwrite"])
def test_an_empty_dataframe_writes_what_the_local_api_writes(spark: Any, tmp_path: Path, op: str) -> None:
    """No rows: no planning task runs; an overwrite of an unpartitioned table still
    replaces everything, as the local overwrite of no rows does."""
    local = make(tmp_path, "local", "mor", False)
    remote = make(tmp_path, "spark", "mor", False)
    first = random_rows(random.Random(3), list(range(50)), 1, False)
    local.insert(first)
    write(df_of(spark, first), remote.path, "insert")
    empty = SCHEMA.empty_table() if op != "delete" else pa.table({"id": pa.array([], pa.int64())})
    getattr(local, op)(empty)
    write(
        spark.createDataFrame([], "id long" if op == "delete" else "id long, ts long, day string, v string"),
        remote.path,
        op,
    )
    assert state(remote) == state(local)
    assert (op == "overwrite") == (state(local) == [])


def test_bad_input_fails_typed_before_anything_is_written(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = make(tmp_path, "t", "mor", True)
    write(df_of(spark, random_rows(random.Random(1), list(range(10)), 1, True)), t.path, "insert")
    before = len(Table.open(t.path).timeline.instants())
    with pytest.raises(DuplicateKeyError):
        write(df_of(spark, random_rows(random.Random(2), [3, 50], 2, True)), t.path, "insert")
    # The same with two planning tasks (the staged path): one plans key 50, the other
    # is refused for key 3; the write raises without beginning.
    with monkeypatch.context() as m:
        m.setattr(spark_write, "_ROWS_PER_PLAN_TASK", 1)
        rows = random_rows(random.Random(2), [3, 50], 2, True)
        with pytest.raises(DuplicateKeyError):
            write(spark.createDataFrame(rows.to_pandas()).repartition(2), t.path, "insert")
    nulls = spark.createDataFrame([(None, 1, "d0", "x")], "id long, ts long, day string, v string")
    with pytest.raises(NullKeyError):
        write(nulls, t.path, "upsert")
    with pytest.raises(SchemaMismatchError):
        write(
            spark.createDataFrame([(1, 1, "d0", "x", 5)], "id long, ts long, day string, v string, extra int"),
            t.path,
            "upsert",
        )
    with pytest.raises(SchemaMismatchError):
        write(
            spark.createDataFrame([("a", 1, "d0", "x")], "id string, ts long, day string, v string"), t.path, "upsert"
        )
    with pytest.raises(SchemaMismatchError):
        write(spark.createDataFrame([(1,)], "ts long"), t.path, "delete")
    with pytest.raises(SchemaMismatchError, match="more than once"):  # refused on the driver, before staging
        write(
            spark.createDataFrame([(1, 1, "d0", "x", 2)], "id long, ts long, day string, v string, id long"),
            t.path,
            "upsert",
        )
    assert not list(Path(t.path, ".lakeline", "staging").glob("*")), "refused input was staged"
    with pytest.raises(UnsupportedOperationError):
        write(nulls, t.path, "merge")
    after = Table.open(t.path)
    assert len(after.timeline.instants()) == before, "a refused write left an instant on the timeline"
    assert after.to_arrow().num_rows == 10


def test_a_write_that_fails_to_begin_releases_its_waiting_planning_task(spark: Any, tmp_path: Path) -> None:
    """The fused planning task planned and waits for ``go``; the driver fails before the
    instant begins: the write raises that error promptly, the task ends without writing
    (no Spark job left running), and nothing is on the timeline or in the table's folders."""
    t = make(tmp_path, "t", "cow", False)
    write(df_of(spark, random_rows(random.Random(1), list(range(10)), 1, False)), t.path, "insert")
    before = Table.open(t.path).timeline.instants()
    files_before = sorted(p.name for p in (tmp_path / "t").rglob("*.parquet"))

    def refuse() -> None:
        raise OSError("the timeline store went away")

    faults.on("commit.before_requested", refuse)
    try:
        with pytest.raises(OSError, match="went away"):
            write(df_of(spark, random_rows(random.Random(2), list(range(5, 15)), 2, False)), t.path, "upsert")
    finally:
        faults.disarm_all()
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == []
    assert Table.open(t.path).timeline.instants() == before
    assert sorted(p.name for p in (tmp_path / "t").rglob("*.parquet")) == files_before
    assert (
        write(df_of(spark, random_rows(random.Random(2), list(range(5, 15)), 2, False)), t.path, "upsert").instant
        is not None
    )


def test_a_concurrent_commit_makes_the_spark_write_replay(spark: Any, tmp_path: Path) -> None:
    """A local insert of the same new key lands while the Spark upsert completes: the
    key check finds it (claims fetched from the executors), the Spark write replays on
    the fresh snapshot and updates the key instead of inserting it twice."""
    t = make(tmp_path, "t", "mor", False)
    other = Table.open(t.path)

    def land() -> None:
        other.insert(
            pa.table({"id": pa.array([7], pa.int64()), "ts": pa.array([1], pa.int64()), "day": ["d0"], "v": ["local"]})
        )

    faults.on("commit.before_complete", land)
    try:
        r = write(
            df_of(
                spark,
                pa.table(
                    {
                        "id": pa.array([7, 8], pa.int64()),
                        "ts": pa.array([2, 2], pa.int64()),
                        "day": ["d0", "d0"],
                        "v": ["spark", "spark"],
                    }
                ),
            ),
            t.path,
            "upsert",
        )
    finally:
        faults.disarm_all()
    rows = Table.open(t.path).to_arrow().sort_by("id").to_pylist()
    assert [(r["id"], r["v"]) for r in rows] == [(7, "spark"), (8, "spark")]
    rolled_back = [i for i in Table.open(t.path).timeline.instants() if i.state == "rolled_back"]
    assert len(rolled_back) == 1 and r.instant is not None and r.stats["updated"] == 1


def test_files_of_failed_task_attempts_are_removed_before_completion(spark: Any, tmp_path: Path) -> None:
    """A file written behind a marker of the instant by a task attempt whose result no
    one collected (a speculative or failed attempt) is deleted before ``completed``."""
    from lakeline.timeline.markers import list_markers, write_marker

    t = make(tmp_path, "t", "cow", False)
    orphan: list[str] = []

    def stray_attempt() -> None:
        inst = Table.open(t.path).timeline.pending()[0].id
        rel = f"{'0' * 32}_{inst}_deadbeef.parquet"
        write_marker(t.storage, inst, rel)
        (tmp_path / "t" / rel).write_bytes(b"half a file")
        orphan.append(rel)

    faults.on("commit.after_inflight", stray_attempt)
    try:
        r = write(df_of(spark, random_rows(random.Random(3), list(range(20)), 1, False)), t.path, "upsert")
    finally:
        faults.disarm_all()
    assert orphan and not (tmp_path / "t" / orphan[0]).exists()
    assert r.instant is not None and list_markers(t.storage, r.instant.id) == []
    assert Table.open(t.path).to_arrow().num_rows == 20


def test_a_replayed_txn_lands_once_and_stages_nothing(spark: Any, tmp_path: Path) -> None:
    """``txn=`` as for the local write: the second write of one application version lands
    nothing (checked before any stage runs), a later version lands, the local API sees
    the versions, and a malformed pair is refused before anything is written."""
    t = make(tmp_path, "t", "mor", False)
    batch = random_rows(random.Random(5), list(range(20)), 1, False)
    first = write(df_of(spark, batch), t.path, "upsert", txn=("stream", 3))
    assert first.instant is not None and t.txn_version("stream") == 3
    events = t.timeline.last_seq
    again = write(df_of(spark, batch), t.path, "insert", txn=("stream", 3))
    assert again.instant is None and again.stats == {"txn_skipped": 1} and t.timeline.last_seq == events
    later = random_rows(random.Random(6), list(range(10, 30)), 2, False)
    assert write(df_of(spark, later), t.path, "upsert", txn=("stream", 4)).instant is not None
    assert t.txn_version("stream") == 4 and Table.open(t.path).to_arrow().num_rows == 30
    with pytest.raises(InvalidTxnError):
        write(df_of(spark, later), t.path, "upsert", txn=("stream", -1))


@pytest.mark.parametrize("table_type", ["cow", pytest.param("mor", marks=pytest.mark.soak)])
def test_spark_upserts_and_deletes_keep_a_record_index_exact(spark: Any, tmp_path: Path, table_type: str) -> None:
    """A record index is kept in the same commit by every writer (issue 30): Spark's
    upserts (copy-on-write rewrites give the index their changes only) and deletes
    leave it exact, ``validate`` empty, and a key-pinned read finds the rows."""
    rng = random.Random(7)
    t = make(tmp_path, "t", table_type, partitioned=True)
    local = make(tmp_path, "local", table_type, partitioned=True)
    first = random_rows(rng, list(range(60)), 0, partitioned=True)
    for table in (t, local):
        table.insert(first)
    t.indexes.create("record_index")
    for step in range(1, 4):
        rows = random_rows(rng, rng.sample(range(90), 30), step, partitioned=True)
        write(df_of(spark, rows), t.path, operation="upsert")
        local.upsert(rows)
    gone = first.select(["id", "day"]).slice(0, 10)
    write(df_of(spark, gone), t.path, operation="delete")
    local.delete(gone)
    t = Table.open(t.path)
    assert t.indexes.validate("record_index")["mismatches"] == []
    assert state(t) == state(local)
    pinned = pc.field("id").isin([11, 12, 70])
    assert table_rows(t.scan(filter=pinned).to_arrow(), COLUMNS) == table_rows(
        local.scan(filter=pinned).to_arrow(), COLUMNS
    )


# -- schema evolution (issue 29): mergeSchema, and a write racing a schema instant ----------

EVOLVING = pa.schema([pa.field("id", pa.int64(), nullable=False), ("qty", pa.int32()), ("v", pa.string())])


def _evolving(tmp: Path, table_type: str, **props: Any) -> Table:
    t = Table.create(str(tmp / "t"), EVOLVING, record_key="id", table_type=table_type, properties=props or None)
    t.insert(pa.table({"id": [1, 2], "qty": pa.array([1, 2], pa.int32()), "v": ["a", "b"]}, schema=EVOLVING))
    return t


def _schema_instants(t: Table) -> list[Any]:
    return [i for i in Table.open(t.path).timeline.instants() if i.action.value == "schema"]


def test_merge_schema_adds_the_new_columns_before_staging(spark: Any, tmp_path: Path) -> None:
    """``merge_schema=True`` (Delta's ``mergeSchema``): the DataFrame's new columns join
    the table (nullable, at the end, fresh field ids, one ``add-columns`` instant) and its
    rows land; bad input (a name that differs from a column's only in case, a narrowing
    next to a new column) is refused on the driver with no schema instant and no row."""
    from lakeline.timeline.field_ids import field_id

    t = _evolving(tmp_path, "mor")
    before = len(_schema_instants(t))
    staging = Path(t.path, ".lakeline", "staging")
    for ddl in ("id long, qty int, v string, V string", "id long, qty long, v string, extra string"):
        with pytest.raises(SchemaMismatchError, match="only in case|the table needs int32"):
            write(spark.createDataFrame([], ddl), t.path, "upsert", merge_schema=True)
    assert len(_schema_instants(t)) == before and not any(p.is_file() for p in staging.rglob("*"))
    df = spark.createDataFrame(
        [(2, 20, "b2", 2.5, "x"), (3, 30, "c", None, "y")], "id long, qty int, v string, score double, tag string"
    )
    with pytest.raises(SchemaMismatchError, match="mergeSchema"):
        write(df, t.path, "upsert")
    with pytest.raises(InvalidOptionError):
        write(df, t.path, "upsert", merge_schema="false")  # type: ignore[arg-type]
    r = write(df, t.path, "upsert", merge_schema=True)
    assert r.instant is not None
    t = Table.open(t.path)
    added = _schema_instants(t)[before:]
    assert [(i.plan.get("change"), i.state) for i in added] == [("add-columns", "completed")]
    schema = t.config.schema
    assert schema.names == ["id", "qty", "v", "score", "tag"] and schema.field("score").nullable
    assert [field_id(schema.field(c)) for c in ("score", "tag")] == [4, 5]
    got = sorted(t.to_arrow().to_pylist(), key=lambda row: row["id"])
    assert [(g["id"], g["qty"], g["score"], g["tag"]) for g in got] == [
        (1, 1, None, None),
        (2, 20, 2.5, "x"),
        (3, 30, None, "y"),
    ]
    # The columns exist now: the same DataFrame writes without the option, adding nothing.
    assert write(df, t.path, "upsert").instant is not None and len(_schema_instants(t)) == before + 1


@pytest.mark.parametrize("table_type,plan_tasks", [("cow", 1), ("mor", 2)])
def test_a_spark_write_racing_a_schema_change_replays_or_fails_typed(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table_type: str, plan_tasks: int
) -> None:
    """A schema instant completes while a Spark upsert is between planning and its
    ``completed`` (``commit.before_complete``, on the driver). Widen+add: the write
    conflicts (``schema-changed``), replays with its staged rows conformed to the new
    schema (the added column null) and lands. A rename of a column the DataFrame
    carries: the replay is ``SchemaMismatchError``, nothing of it landed, nothing pending.
    ``plan_tasks`` 1 is the fused path, 2 the staged one."""
    if plan_tasks > 1:
        monkeypatch.setattr(spark_write, "_ROWS_PER_PLAN_TASK", 1)
    t = _evolving(tmp_path, table_type)
    df = spark.createDataFrame([(2, 20, "b2"), (3, 30, "c")], "id long, qty int, v string").repartition(plan_tasks)

    def change(*steps: tuple[str, Any, Any]) -> None:
        with Table.open(t.path).update_schema() as u:
            for op, name, arg in steps:
                getattr(u, op)(name, arg)

    faults.on(
        "commit.before_complete",
        lambda: change(("update_column", "qty", pa.int64()), ("add_column", "note", pa.string())),
    )
    try:
        r = write(df, t.path, "upsert")
    finally:
        faults.disarm_all()
    now = Table.open(t.path)
    assert r.instant is not None and now.timeline.pending() == []
    assert [i.state for i in now.timeline.instants() if i.action.writes_data][-2:] == ["rolled_back", "completed"]
    got = sorted(now.to_arrow().to_pylist(), key=lambda row: row["id"])
    assert got == [
        {"id": 1, "qty": 1, "v": "a", "note": None},
        {"id": 2, "qty": 20, "v": "b2", "note": None},
        {"id": 3, "qty": 30, "v": "c", "note": None},
    ]
    assert now.to_arrow().schema.field("qty").type == pa.int64()
    faults.on("commit.before_complete", lambda: change(("rename_column", "v", "label")))
    try:
        with pytest.raises(SchemaMismatchError, match="label"):
            write(
                spark.createDataFrame([(1, 5, "z", "n")], "id long, qty int, v string, note string"), t.path, "upsert"
            )
    finally:
        faults.disarm_all()
    now = Table.open(t.path)
    assert now.timeline.pending() == []
    assert [i.state for i in now.timeline.instants() if i.action.writes_data][-1] == "rolled_back"
    assert [(g["id"], g["qty"], g["label"]) for g in sorted(now.to_arrow().to_pylist(), key=lambda row: row["id"])] == [
        (1, 1, "a"),
        (2, 20, "b2"),
        (3, 30, "c"),
    ]
    assert not any(p.is_file() for p in Path(t.path, ".lakeline", "staging").rglob("*"))


# -- stage 1 of a bare Parquet scan (issue 30): the files, not the rows ---------------------

SCANNED = "id long, ts long, at timestamp, v string"


def test_a_bare_parquet_scan_is_staged_as_its_files_and_writes_what_the_local_api_writes(
    spark: Any, tmp_path: Path
) -> None:
    """``spark.read.parquet(folder).select(...)`` of files Spark wrote (INT96 instants, one before
    1677, out of nanoseconds' range; copies of keys across files): the write stages the
    files themselves (no row crosses into Python), replays from them although the source
    folder is gone by then, and lands what the local upsert of the same rows lands."""
    import datetime as dt

    from lakeline.spark import create_table

    at = [dt.datetime(1500, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 11, 27, 8, 0, 0, 123456, tzinfo=dt.UTC)]
    rows = [(k % 40, ts, at[k % 2], f"v{ts}-{k}") for ts in (3, 1, 2) for k in range(ts * 10, ts * 10 + 30)]
    src = str(tmp_path / "src")
    spark.createDataFrame(rows, SCANNED).repartition(3).write.parquet(src)
    scan = spark.read.parquet(src)
    local, remote = (create_table(str(tmp_path / n), scan, "id", "ts", table_type="mor") for n in ("local", "spark"))
    df = scan.select("v", "at", "ts", "id")  # columns chosen by name, in another order: still the files
    first = spark.createDataFrame([(k, 0, at[1], "first") for k in range(0, 50, 2)], SCANNED)
    local.insert(pa.Table.from_pylist(first.toArrow().to_pylist(), local.schema))
    write(first, remote.path, "insert")
    staged: list[str] = []

    def look_and_remove_the_source() -> None:
        staged.extend(p.name for p in Path(remote.path, ".lakeline", "staging").rglob("*") if p.is_file())
        for p in Path(src).iterdir():
            p.unlink()

    faults.on("spark.after_stage", look_and_remove_the_source)
    try:
        assert write(df, remote.path, "upsert").instant is not None
    finally:
        faults.disarm_all()
    assert sum(n.endswith(".parquet") for n in staged) == 3, staged
    cols = ["id", "ts", "at", "v"]
    local.upsert(pa.Table.from_pylist([dict(zip(cols, r)) for r in rows], local.schema))
    assert table_rows(Table.open(remote.path).to_arrow(), cols) == table_rows(Table.open(local.path).to_arrow(), cols)


def test_only_a_bare_scan_pyarrow_reads_as_spark_does_skips_the_crossing(spark: Any, tmp_path: Path) -> None:
    """Columns chosen by name keep the scan route; a filter, a computed column, a read
    option, more rows than one planning task takes, or a column Spark converts (uint32
    reads as long) leave the files to the crossing."""
    import pyarrow.parquet as pq
    from lakeline.spark.staging import _scanned_files

    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"id": pa.array([1], pa.uint32()), "v": ["a"]}), tmp_path / "u.parquet")
    df = spark.read.parquet(str(tmp_path / "a.parquet"))
    assert _scanned_files(df, 3) == [(str(tmp_path / "a.parquet"), 3)]
    assert _scanned_files(df, 2) is None
    assert _scanned_files(df.filter("id > 1"), 3) is None
    assert _scanned_files(df.select("v", "id"), 3) == [(str(tmp_path / "a.parquet"), 3)]
    assert _scanned_files(df.selectExpr("id + 1 AS id", "v"), 3) is None
    assert _scanned_files(spark.read.option("mergeSchema", "true").parquet(str(tmp_path / "a.parquet")), 3) is None
    assert _scanned_files(spark.read.parquet(str(tmp_path / "u.parquet")), 3) is None
    assert _scanned_files(df_of(spark, pa.table({"id": [1]})), 3) is None


def test_a_scanned_file_on_another_disk_is_copied_into_staging(spark: Any, tmp_path: Path) -> None:
    """No hard link across disks: the file is copied, and the rows land all the same."""
    import tempfile

    import pyarrow.parquet as pq

    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second disk to read from")
    t = make(tmp_path, "t", "cow", False)
    rows = random_rows(random.Random(9), list(range(30)), 1, False)
    with tempfile.TemporaryDirectory(dir=shm) as src:
        pq.write_table(rows, Path(src, "rows.parquet"))
        copied: list[int] = []
        faults.on(
            "spark.after_stage",
            lambda: copied.extend(p.stat().st_nlink for p in Path(t.path, ".lakeline", "staging").rglob("*.parquet")),
        )
        try:
            write(spark.read.parquet(src), t.path, "insert")
        finally:
            faults.disarm_all()
    assert copied == [1]
    assert state(t) == table_rows(rows, COLUMNS)
