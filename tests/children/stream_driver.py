"""Child process for the streaming-sink tests: a Spark driver (``local[1]``) whose query
streams the Parquet files of a folder into a lakeline table, one file per micro-batch,
until none is left, so a test can SIGKILL the whole driver (its process group: the
Python driver, the JVM and the Python workers) at a moment of its choosing and start
another on the same checkpoint.

Arguments (JSON): PATH SOURCE CHECKPOINT OPERATION SCHEMA. SCHEMA is Spark's DDL of the
source files (``"id long, ts long, v string"``). Runs the query with
``trigger(availableNow=True)`` and prints {"batches": n} (the micro-batches Spark ran)
once it ended. Fault points arm through ``LAKELINE_FAULTS`` as for every child: the JVM
passes the environment on, so they reach the Python worker that runs the sink's commit.

Start it with ``tests.helpers.start_script(STREAM_DRIVER, [...], new_session=True)``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lakeline.spark import session

STREAM_DRIVER = Path(__file__).resolve()


def main(argv: list[str]) -> None:
    path, source, checkpoint, operation, schema = (json.loads(a) for a in argv)
    spark = session("local[1]")
    query = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(source)
        .writeStream.format("lakeline")
        .option("operation", operation)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(path)
    )
    query.awaitTermination(600)
    if query.exception() is not None:
        raise SystemExit(f"the query failed: {query.exception()}")
    print(json.dumps({"batches": len(query.recentProgress)}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
