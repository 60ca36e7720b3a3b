"""Memory does not grow with the table (issue 16): a step's peak depends on its input and
on the size of a file slice, not on how many slices the table has.

The same steps run on a table of 300k rows and on one of 1.2M rows, both made of file
slices of 50k rows (a 1% upsert spread over the table gives every slice a log): a
1,000-key range read, a streaming read of the whole table (``scan().to_reader()``), an
upsert of 20k keys spread over the table, a ``delete_where`` of a key range and, on
merge-on-read, a compaction of every slice. Each step runs in a fresh process that
reports the peak of Arrow's memory pool during the step (``max_memory``: every column
buffer of a read or write is allocated there, and unlike the process's resident peak it
does not carry the interpreter's and the imports' memory). With four times the slices,
no peak may exceed the small table's by more than a quarter plus 8 MiB; a step that
held the table (or its keys) at once would grow about fourfold. Both tables have more
slices than a streaming read keeps in flight (Arrow's scanner reads up to four files
ahead), so that constant is reached by both.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from lakeline.table import Table

from tests.helpers import child_env

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.float64()), ("s", pa.string())])
SLICE_ROWS = 50_000
SIZES = (300_000, 1_200_000)
STEPS = ("range", "stream", "upsert", "delete_where", "compact")

CHILD = r"""
import json, sys
import numpy as np, pyarrow as pa, pyarrow.compute as pc
from lakeline.table import Table
path, step, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = Table.open(path)
t.to_arrow(filter=pc.field("id") < 0)  # open, read the view, warm the imports; no slice is read
pool = pa.default_memory_pool()
floor = pool.max_memory()
if step == "range":
    assert t.to_arrow(filter=(pc.field("id") >= n // 2) & (pc.field("id") < n // 2 + 1000)).num_rows == 1000
elif step == "stream":
    assert sum(b.num_rows for b in t.scan().to_reader()) == n
elif step == "upsert":
    rng = np.random.default_rng(1)
    ids = np.sort(rng.choice(n, 20_000, replace=False))
    t.upsert(pa.table({"id": ids, "ts": np.full(len(ids), 5), "v": rng.random(len(ids)),
                       "s": pa.array(["u" * 20] * len(ids))}))
elif step == "delete_where":
    assert t.delete_where((pc.field("id") >= n // 3) & (pc.field("id") < n // 3 + 5000)).stats["deleted"] == 5000
elif step == "compact":
    assert t.services.compact().instant is not None
print(json.dumps({"peak": max(pool.max_memory() - floor, 0)}))
"""


def _build(path: str, n: int, table_type: str) -> None:
    t = Table.create(
        path,
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        table_type=table_type,
        properties={
            "write.target-file-size-bytes": 64 << 20,
            "write.small-file-limit-bytes": 0,
            "engine.parallelism": 2,
        },
    )
    for start in range(0, n, SLICE_ROWS):
        ids = np.arange(start, start + SLICE_ROWS)
        t.insert(
            pa.table(
                {
                    "id": ids,
                    "ts": np.ones(SLICE_ROWS, np.int64),
                    "v": np.random.default_rng(start).random(SLICE_ROWS),
                    "s": pa.array(["i" * 20] * SLICE_ROWS),
                },
                schema=SCHEMA,
            )
        )
    rng = np.random.default_rng(2)
    ids = np.sort(rng.choice(n, n // 100, replace=False))
    t.upsert(
        pa.table(
            {"id": ids, "ts": np.full(len(ids), 3), "v": rng.random(len(ids)), "s": pa.array(["z" * 20] * len(ids))},
            schema=SCHEMA,
        )
    )
    slices = t.view(t.timeline).latest_slices()
    assert len(slices) == n // SLICE_ROWS and max(s.base.rows for s in slices if s.base) == SLICE_ROWS


def _peak(path: str, step: str, n: int) -> int:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, path, step, str(n)], capture_output=True, text=True, env=child_env(), timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return int(json.loads(out.stdout.strip().splitlines()[-1])["peak"])


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_no_step_peak_grows_with_the_number_of_slices(tmp_path: Path, table_type: str) -> None:
    peaks: dict[str, list[int]] = {}
    for n in SIZES:
        path = str(tmp_path / f"{table_type}-{n}")
        _build(path, n, table_type)
        for step in STEPS:
            if step == "compact" and table_type == "cow":
                continue
            peaks.setdefault(step, []).append(_peak(path, step, n))
    mib = {step: [round(p / 2**20, 1) for p in ps] for step, ps in peaks.items()}
    print(f"{table_type} peak MiB at {SIZES} rows: {mib}")
    grown = {step: v for step, v in mib.items() if v[1] > v[0] * 1.25 + 8}
    assert not grown, f"peaks that grew with the table ({SIZES[0]} -> {SIZES[1]} rows), MiB: {grown}"
