"""How an insert cuts its new rows into files: at the target size, and into one file
per engine worker when that would leave workers idle (``write.parallel-file-min-bytes``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from lakeline.table import Table
from lakeline.table.engine import LocalEngine

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def rows(n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "ts": pa.array([1] * n, pa.int64()),
            "v": [f"value-{i:08d}" for i in range(n)],
        }
    )


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize(
    "workers,min_bytes,files", [(2, 1024, 2), (4, 1024, 4), (1, 1024, 1), (2, 0, 1), (2, 1 << 30, 1)]
)
def test_an_insert_writes_a_file_per_worker_when_each_is_big_enough(
    tmp_path: Path, table_type: str, workers: int, min_bytes: int, files: int
) -> None:
    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        table_type=table_type,
        properties={"write.parallel-file-min-bytes": min_bytes},
    )
    t.engine = LocalEngine(workers)
    data = rows(20_000)
    r = t.insert(data)
    assert r.stats["files_added"] == files
    bases = [s.base for s in Table.open(t.path).context().view.latest_slices() if s.base is not None]
    assert len(bases) == files and sum(b.rows for b in bases) == data.num_rows
    if files > 1:  # about equal shares, each a key range of its own
        assert max(b.rows for b in bases) - min(b.rows for b in bases) <= 1
    assert Table.open(t.path).to_arrow().sort_by("id").equals(data)
