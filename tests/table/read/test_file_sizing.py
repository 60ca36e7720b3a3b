"""The file sizing the writers promise, read back: a large write is cut into files of the
target size, and copy-on-write inserts and upserts fill small files first (split out of
``test_scan.py``)."""

from __future__ import annotations

import math
import os
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table

from tests.table.model import SCHEMA, to_arrow


def _rows(rng: random.Random, ids: range, day: str = "d") -> pa.Table:
    return to_arrow(
        [{"id": i, "ts": 1, "day": day, "v": rng.randint(0, 10**9), "s": "x" * rng.randint(0, 20)} for i in ids]
    )


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_target_file_size_cuts_a_large_write_into_several_files(tmp_path: Path, table_type: str) -> None:
    target = 4096
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        table_type=table_type,
        properties={"write.target-file-size-bytes": target},
    )
    r = t.insert(_rows(random.Random(1), range(2000)))
    sizes = [os.path.getsize(f) for f in t.scan().files()]
    assert r.stats["files_added"] == len(sizes) >= 5
    assert sum(sizes) == r.stats["bytes_written"]
    assert max(sizes) <= 1.5 * target, sizes
    assert t.to_arrow().num_rows == 2000


@pytest.mark.parametrize("op", ["insert", "upsert"])
def test_cow_writes_fill_small_files_first(tmp_path: Path, op: str) -> None:
    target = 4096
    rng = random.Random(2)
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        partition_by=["day"],
        table_type="cow",
        properties={"write.target-file-size-bytes": target},
    )
    write = t.insert if op == "insert" else t.upsert
    for k in range(30):
        write(
            pa.concat_tables(
                [_rows(rng, range(k * 10, k * 10 + 10), "d1"), _rows(rng, range(k * 10, k * 10 + 10), "d2")]
            )
        )
    assert t.to_arrow().num_rows == 600
    for day in ("d1", "d2"):
        files = t.scan(filter=pc.field("day") == day).files()
        total = sum(os.path.getsize(f) for f in files)
        assert len(files) <= math.ceil(total / target) + 2, (day, [os.path.getsize(f) for f in files])
        assert max(os.path.getsize(f) for f in files) <= 1.5 * target
    # Each file is its own group: the count of file groups is the count of files.
    assert t.scan().explain()["file_groups"] == len(t.scan().files())
