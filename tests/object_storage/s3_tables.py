"""Rows and a schema for the tables the object-storage tests put on the S3 server."""

from __future__ import annotations

import pyarrow as pa

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.float64()), ("day", pa.string())])


def rows(start: int, stop: int, ts: int = 1, v: float = 1.0, day: str = "d1") -> pa.Table:
    """Keys ``k<start>`` .. ``k<stop - 1>`` with one ordering value, value and day."""
    ids = [f"k{i:07d}" for i in range(start, stop)]
    n = len(ids)
    return pa.table({"id": ids, "ts": [ts] * n, "v": [v] * n, "day": [day] * n}, schema=SCHEMA)
