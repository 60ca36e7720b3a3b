"""Spark on a table on object storage (issue 27, item 5), against the test S3 server.

On ``local[2]`` and on a standalone cluster (a master and two workers, loopback only),
the executors open the store themselves from the ``ObjectStore`` their tasks carry:
nothing in their environment names it. What each test proves beyond the rows:

- the write's staging lives on the store and is gone when the write ends, and no
  rename is ever needed (the store's file system refuses one outright);
- the secret key is in none of the table's objects: not in the event log, plans,
  commit metadata, markers or data, and not in the staging folder *while* the write
  runs (a validator lists and reads every object just before the commit);
- what PySpark may write to files (parallelized items, broadcasts) carries no
  credential (:mod:`lakeline.spark.shipping`).
"""

from __future__ import annotations

import importlib
import os
import pickle
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from lakeline.spark import SparkEngine, create_table, read, shipping, write
from lakeline.spark.shipping import pack, unpack
from lakeline.spark.source import storage_options_of
from lakeline.table import Table
from lakeline.table.hooks import Hooks, ValidationContext
from lakeline.timeline.errors import StoragePermissionError
from lakeline.timeline.storage.filesystem import Storage
from lakeline.timeline.storage.staging_folders import STAGING_DIR

from tests.seaweedfs import SeaweedServer
from tests.spark.cluster import PARTS, Cluster, part

# The module, not the function the package exports under the same name.
spark_write = importlib.import_module("lakeline.spark.write")

pytestmark = pytest.mark.s3

DDL = "id long, ts long, day string, v string"
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("day", pa.string()), ("v", pa.string())])
Row = tuple[int, int, str, str]


@pytest.fixture(autouse=True)
def no_aws_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No ``AWS_*`` key in this process (nor in the Spark processes it starts): the store
    is reached through the options alone."""
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    yield


def objects_of(storage: Storage) -> dict[str, bytes]:
    """Every object of the table, by path."""
    objects = storage.objects
    assert objects is not None
    return {o.path: objects.get(o.path) for o in objects.list(storage.base)}


def holding(storage: Storage, secret: str) -> list[str]:
    return sorted(p for p, data in objects_of(storage).items() if secret.encode() in data)


def staged(storage: Storage) -> list[str]:
    return sorted(p for p in objects_of(storage) if f"/{STAGING_DIR}/" in p)


class FilesPySparkWrites:
    """Records, pickled, what PySpark hands the JVM through files on the driver's disk
    (``parallelize``'s items, ``broadcast``'s values) while patched into ``context``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, context: type) -> None:
        self.parallelized: list[bytes] = []
        self.broadcast: list[bytes] = []
        parallelize, broadcast = context.parallelize, context.broadcast

        def spy_parallelize(sc: Any, c: Any, *args: Any, **kwargs: Any) -> Any:
            items = list(c)
            self.parallelized.append(pickle.dumps(items))
            return parallelize(sc, items, *args, **kwargs)

        def spy_broadcast(sc: Any, value: Any) -> Any:
            self.broadcast.append(pickle.dumps(value))
            return broadcast(sc, value)

        monkeypatch.setattr(context, "parallelize", spy_parallelize)
        monkeypatch.setattr(context, "broadcast", spy_broadcast)


def rows_of(df: Any) -> set[Row]:
    return {(r.id, r.ts, r.day, r.v) for r in df.select("id", "ts", "day", "v").collect()}


def spark_rows(spark: Any, rows: list[Row]) -> Any:
    return spark.createDataFrame(rows, DDL)


def make_rows(ids: range, ts: int, v: str | None = None) -> list[Row]:
    return [(i, ts, f"d{i % 3}", v if v is not None else f"v{i}") for i in ids]


def test_writes_reads_and_compaction_on_local_spark(
    spark: Any, s3: SeaweedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, opts = s3.uri(), s3.options()
    empty = spark.createDataFrame([], DDL)
    t = create_table(
        uri, empty, record_key="id", ordering_field="ts", partition_by=["day"], table_type="mor", storage_options=opts
    )
    expected: dict[int, Row] = {}

    def apply(rows: list[Row]) -> None:
        for r in rows:
            if r[0] not in expected or expected[r[0]][1] <= r[1]:
                expected[r[0]] = r

    # A validator reads every object of the table just before each commit: the write's
    # staging is on the store then, and no object holds the secret.
    seen: list[tuple[list[str], list[str]]] = []

    def snoop(vctx: ValidationContext) -> None:
        seen.append((staged(t.storage), holding(t.storage, s3.secret_key)))

    # One planning task, which writes its own plan's files once the driver published
    # the write settings (which hold the storage) to staging.
    first = make_rows(range(0, 3000), 1)
    result = write(spark_rows(spark, first), uri, "insert", hooks=Hooks(validators=[snoop]), storage_options=opts)
    apply(first)
    assert result.stats["inserted"] == 3000
    in_flight, secret = seen.pop()
    assert any(p.endswith("/attempt-0/go") for p in in_flight), in_flight
    assert any(p.endswith("/_owner.json") for p in in_flight), in_flight
    assert secret == []
    assert staged(t.storage) == []

    # Several planning tasks: each touched file group's rows go through staging.
    second = make_rows(range(0, 3000, 2), 2, "up") + make_rows(range(3000, 3200), 2)
    with monkeypatch.context() as m:
        m.setattr(spark_write, "_ROWS_PER_PLAN_TASK", 700)
        result = write(spark_rows(spark, second), uri, "upsert", hooks=Hooks(validators=[snoop]), storage_options=opts)
    apply(second)
    assert (result.stats["updated"], result.stats["inserted"]) == (1500, 200)
    in_flight, secret = seen.pop()
    assert any("/input/" in p for p in in_flight) and any("/attempt-0/" in p for p in in_flight), in_flight
    assert secret == []
    assert staged(t.storage) == []

    # Reads: lakeline.spark.read with a filter (pruned on the driver, read on executors)
    # and the data source with the options as reader options, filtered by Spark.
    got = read(spark, uri, filter="v = 'up' and day = 'd1'", columns=["id", "v"], storage_options=opts)
    assert {(r.id, r.v) for r in got.collect()} == {
        (i, r[3]) for i, r in expected.items() if r[3:] == ("up",) and r[2] == "d1"
    }
    source = spark.read.format("lakeline").options(**opts).load(uri)
    assert rows_of(source.filter("id >= 2990 and ts = 2")) == {
        r for r in expected.values() if r[0] >= 2990 and r[1] == 2
    }
    plan = source._jdf.queryExecution().toString()
    assert s3.secret_key not in plan, "Spark's query plan shows the secret"

    # A data-source write, the options as writer options (any case).
    third = make_rows(range(3100, 3300), 3, "ds")
    writer = spark_rows(spark, third).write.format("lakeline").option("operation", "upsert").mode("append")
    writer.options(**{k.lower(): v for k, v in opts.items()}).save(uri)
    apply(third)
    assert staged(t.storage) == []

    # Compaction on the executors; what PySpark writes to files for it (the parallelized
    # items) and for the last read (its slices, broadcast here) holds no credential.
    with monkeypatch.context() as m:
        files = FilesPySparkWrites(m, type(spark.sparkContext))
        m.setattr(shipping, "INLINE_BYTES", 0)
        t = Table.open(uri, storage_options=opts)
        t.engine = SparkEngine(spark)
        compacted = t.services.compact()
        assert compacted.stats["file_groups_compacted"] > 0
        assert all(not s.logs for s in t.view(t.timeline).latest_slices()), "compaction left logs"
        assert rows_of(read(spark, uri, storage_options=opts)) == set(expected.values())
    assert files.parallelized and files.broadcast
    assert s3.secret_key.encode() not in b"".join(files.parallelized + files.broadcast)

    assert t.timeline.pending() == []
    assert staged(t.storage) == []
    assert holding(t.storage, s3.secret_key) == []


def test_bad_credentials_are_a_typed_error_without_the_secret(spark: Any, s3: SeaweedServer) -> None:
    uri, opts = s3.uri(), s3.options()
    Table.create(uri, SCHEMA, record_key="id", storage_options=opts)
    wrong = f"wrong-{s3.secret_key[::-1]}"
    with pytest.raises(StoragePermissionError) as e:
        read(spark, uri, storage_options=s3.options(AWS_SECRET_ACCESS_KEY=wrong))
    assert wrong not in str(e.value) and s3.secret_key not in str(e.value)


def test_storage_options_among_data_source_options() -> None:
    opts = {
        "path": "s3://b/t",
        "as_of": "3",
        "aws_endpoint_url": "http://x",
        "AWS_REGION": "r",
        "storage.timeout": "5s",
    }
    assert storage_options_of(opts) == {"aws_endpoint_url": "http://x", "aws_region": "r", "timeout": "5s"}


def test_task_payloads_carry_the_store_apart(s3: SeaweedServer) -> None:
    """What PySpark may write to a file holds no credential; the store comes back whole,
    and equal stores come back as one."""
    a = Storage.for_uri(s3.uri(), s3.options())
    b = pickle.loads(pickle.dumps(a))  # an equal store, another object
    blob, stores = pack([a, b, {"nested": a}])
    assert s3.secret_key.encode() not in blob and len(stores) == 1
    x, y, z = unpack(blob, stores)
    assert x.objects is y.objects is z["nested"].objects is stores[0]
    assert x.base == a.base


@pytest.mark.parametrize("name", sorted(PARTS))
def test_issue_46_parts_on_a_standalone_cluster_on_s3(cluster_app: dict[str, Any], name: str) -> None:
    """Nullability of DataFrames as Spark builds them, MERGE, and a stream's staging
    removed after each micro-batch, on the cluster with the tables on S3."""
    importlib.import_module(PARTS[name]).check_cluster_part(part(cluster_app, name))


def test_write_read_and_compaction_on_a_standalone_cluster_on_s3(
    cluster: Cluster, s3: SeaweedServer, cluster_app: dict[str, Any]
) -> None:
    out, uri, opts, logs = cluster_app, cluster_app["uri"], cluster_app["opts"], cluster_app["logs"]
    job_output = cluster_app["printed"]
    assert out["seconds"] < 500  # the whole application, every cluster test's part included
    assert out["master"] == cluster.url
    n = 6000
    assert (out["inserted"], out["updated"], out["updated_rows"], out["total"]) == (n, n // 2, n // 2, n)
    assert out["d1_rows"] == n // 3
    assert out["compacted"] and out["compacted"] > 0
    assert out["executor_pids"] >= 2, "the tasks did not run in the workers' executors"
    assert s3.secret_key not in job_output + logs
    t = Table.open(uri, storage_options=opts)
    assert t.timeline.pending() == []
    rows = t.to_arrow()
    assert rows.num_rows == n and rows.column("v").to_pylist().count("updated") == n // 2
    assert staged(t.storage) == []
    assert holding(t.storage, s3.secret_key) == []
