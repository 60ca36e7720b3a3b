"""What the tests of indexes on real tables (``test_table_indexes.py``,
``test_on_commit.py``) share: the schema, and a partitioned table of small files."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
from lakeline.table import Table

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("day", pa.string()),
        pa.field("v", pa.int64()),
        pa.field("s", pa.string()),
        pa.field("f", pa.float64()),
    ]
)
DAYS = ["d1", "d2", "d3"]


def index_rows(rng: random.Random, ids: list[int]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "id": i,
                "day": rng.choice(DAYS),
                "v": rng.choice([None, rng.randint(0, 1000)]),
                "s": rng.choice([None, "a", "b", "c", f"k{rng.randint(0, 50)}"]),
                "f": rng.choice([None, rng.uniform(-5, 5)]),
            }
            for i in ids
        ],
        schema=SCHEMA,
    )


def index_table(tmp: Path, kind: str) -> Table:
    # Small files, so a table of a few thousand rows has many files to prune.
    return Table.create(
        tmp / kind,
        SCHEMA,
        record_key="id",
        ordering_field=None,
        partition_by=["day"],
        table_type=kind,
        properties={"write.target-file-size-bytes": 4096},
    )
