"""``python -m lakeline.spark.demo [DIRECTORY]``: the Spark step of ``make demo``.

A ``local[2]`` Spark application writes the demo table (``lakeline demo``'s, or a new
one in DIRECTORY) through ``lakeline.spark.write`` and the ``lakeline`` data source,
compacts it on executors and reads it back, printing what ran where.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from rich.console import Console

from ..table.table import Table
from ..timeline.commit_metadata import Operation
from ..timeline.errors import TableNotFoundError
from ..timeline.table_config import TableType
from .engine import SparkEngine
from .session import session
from .write import write

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.int64()),
        pa.field("day", pa.string()),
        pa.field("name", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)


def main(argv: list[str]) -> int:
    con = Console()
    base = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="lakeline-spark-demo-"))
    path = str(base / "demo_table")
    try:
        Table.open(path)
    except TableNotFoundError:
        Table.create(path, SCHEMA, record_key="id", ordering_field="ts", partition_by=["day"], table_type=TableType.MOR)
    con.print(f"[bold]Spark step[/bold] on [bold]{path}[/bold]: starting a local[2] Spark application")
    t0 = time.perf_counter()
    spark = session("local[2]", "lakeline-demo")
    con.print(f"  session ready in {time.perf_counter() - t0:.1f} s (loopback, UI off, executors run {sys.executable})")
    try:
        rows = spark.range(1000, 101_000).selectExpr(
            "id",
            "cast(50 as long) as ts",
            "concat('2026-01-0', cast(1 + id % 2 as string)) as day",
            "concat('spark-', cast(id as string)) as name",
            "cast(id as double) * 0.5 as amount",
        )
        r = write(rows, path, Operation.UPSERT)
        inst = r.instant.id if r.instant else None
        con.print(
            f"[green]lakeline.spark.write upsert of 100,000 rows[/green] -> instant {inst} "
            f"{dict((k, v) for k, v in r.stats.items() if v)}; rows tagged, routed and written by executors"
        )
        keys = spark.range(1000, 1100).selectExpr("id")
        keys.write.format("lakeline").option("operation", Operation.DELETE.value).mode("append").save(path)
        con.print("[green]df.write.format('lakeline').option('operation', 'delete')[/green] -> 100 keys deleted")
        t = Table.open(path)
        t.engine = SparkEngine(spark)
        c = t.services.compact()
        con.print(
            f"[green]t.engine = SparkEngine(spark); t.services.compact()[/green] -> "
            f"{c.stats}; file groups merged on executors"
        )
        if _can_read(spark):
            n = spark.read.format("lakeline").load(path).count()
        else:
            n = Table.open(path).to_arrow(columns=["id"]).num_rows
        con.print(f"[green]spark.read.format('lakeline')[/green] -> {n:,} rows")
    finally:
        spark.stop()
    return 0


def _can_read(spark: object) -> bool:
    from .source import LakelineDataSource

    return hasattr(LakelineDataSource, "reader")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
