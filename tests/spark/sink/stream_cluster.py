"""The streaming sink's part of the standalone-cluster run on S3 (issue 46, item 4): a
real ``df.writeStream.format("lakeline")`` query of a few micro-batches into the table
at ``uri``, after which no micro-batch's staged input may remain under
``.lakeline/staging/``.

Why a file source with ``maxFilesPerTrigger=1`` and ``trigger(availableNow=True)``: it
makes exactly one micro-batch per file and then stops, so the count of commits is known
(a rate source's batches depend on the clock). The source files and the checkpoint are
in a local temporary folder: the cluster's processes share this machine's disk.

:func:`cluster_part` runs in the driver (``local[2]`` or the cluster's) and returns
JSON-able facts; :func:`check_cluster_part` asserts them.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from lakeline.table import Table
from lakeline.timeline.storage.staging_folders import STAGING_DIR, write_ids

#: Micro-batches the query runs, and rows in each (ids do not repeat across batches).
BATCHES, ROWS = 3, 25
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def cluster_part(spark: Any, uri: str, options: dict[str, str]) -> dict[str, Any]:
    """Create a table at ``uri``, stream :data:`BATCHES` micro-batches of upserts into it
    through the data source, and report what landed and what staging is left."""
    t = Table.create(uri, SCHEMA, record_key="id", ordering_field="ts", storage_options=options or None)
    work = Path(tempfile.mkdtemp(prefix="lakeline-sink-"))
    try:
        source = work / "in"
        source.mkdir()
        for b in range(BATCHES):
            ids = list(range(b * ROWS, (b + 1) * ROWS))
            rows = pa.table({"id": ids, "ts": [b] * ROWS, "v": [f"v{i}" for i in ids]}, schema=SCHEMA)
            pq.write_table(rows, source / f"b{b:03d}.parquet")
        writer = (
            spark.readStream.schema("id long, ts long, v string")
            .option("maxFilesPerTrigger", 1)
            .parquet(str(source))
            .writeStream.format("lakeline")
            .options(**options)
            .option("operation", "upsert")
            .option("checkpointLocation", str(work / "checkpoint"))
            .trigger(availableNow=True)
        )
        query = writer.start(uri)
        query.awaitTermination(300)
        failure = query.exception()
        t = Table.open(uri, storage_options=options or None)
        landed = [i for i in t.timeline.completed() if i.action.writes_data]
        return {
            "error": None if failure is None else str(failure)[:2000],
            "batches": BATCHES,
            "commits": len(landed),
            "rows": t.to_arrow().num_rows,
            "staging_folders": len(write_ids(t.storage)),
            "staged_files": len(t.storage.list_files(t.storage.path(STAGING_DIR), recursive=True)),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check_cluster_part(out: dict[str, Any]) -> None:
    """Every micro-batch landed as one commit, and none left staged input behind."""
    assert out["error"] is None, out["error"]
    assert out["commits"] == out["batches"] == BATCHES, out
    assert out["rows"] == BATCHES * ROWS, out
    assert out["staging_folders"] == 0 and out["staged_files"] == 0, out
