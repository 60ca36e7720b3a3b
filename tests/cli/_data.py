"""Rows the CLI tests write: one schema, and a builder of batches in it."""

from __future__ import annotations

import pyarrow as pa

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.int64()),
        pa.field("day", pa.string()),
        pa.field("region", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)


def rows(ids: list[int], ts: int = 1) -> pa.Table:
    return pa.table(
        {
            "id": ids,
            "ts": [ts] * len(ids),
            "day": ["2026-01-01" if i % 2 else "2026-01-02" for i in ids],
            "region": ["eu"] * len(ids),
            "amount": [float(i) for i in ids],
        },
        schema=SCHEMA,
    )
