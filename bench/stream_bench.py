"""Streaming benchmark: peak memory of a merge-on-read snapshot read into DuckDB.

Builds a merge-on-read table of ``--rows`` rows (appends of the write benchmark's data)
with log files on every slice (an upsert of a tenth of the keys), then, each in a fresh
child process so the peak resident memory is that read's alone, reads the whole
snapshot into DuckDB (``SELECT count(*), sum(value)``) two ways: through
``Scan.to_reader()`` (streamed, a merged slice at a time) and through ``t.to_arrow()``
(the whole table materialised first). Prints both peaks, the table's size on disk and in
Arrow, and checks that both reads agree.

Command: ``python -m bench stream [--rows 20000000]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import data

_CHILD = r"""
import json, resource, sys, time
import duckdb
from lakeline.table import Table
path, how = sys.argv[1], sys.argv[2]
t = Table.open(path)
t0 = time.perf_counter()
src = t.scan().to_reader() if how == "reader" else t.to_arrow()
count, total = duckdb.sql("SELECT count(*), sum(value) FROM src").fetchone()
print(json.dumps({"how": how, "rows": count, "sum": round(total, 3), "s": time.perf_counter() - t0,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def build(path: Path, rows: int) -> tuple[int, int]:
    """The table; returns (bytes on disk, bytes of its rows in Arrow)."""
    from lakeline.table import Table

    t = Table.create(path, data.SCHEMA, record_key="key", ordering_field="ts", table_type="mor")
    per = rows // 10
    arrow_bytes = 0
    for i in range(10):
        batch = data.append_batch(i, per)
        arrow_bytes += batch.nbytes
        t.insert(batch)
    t.upsert(data.upsert_batch(per * 10, rows // 10))
    assert any(s.logs for s in t.scan().slices)
    disk = sum(f.stat().st_size for f in path.rglob("*.parquet"))
    return disk, arrow_bytes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench stream", description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=20_000_000, help="rows in the table (default 20,000,000)")
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="lakeline-stream-"))
    try:
        t0 = time.perf_counter()
        disk, arrow_bytes = build(root / "t", args.rows)
        print(
            f"built {args.rows:,} rows (mor, logs on every slice) in {time.perf_counter() - t0:.1f} s: "
            f"{disk / 2**20:.0f} MiB on disk, {arrow_bytes / 2**20:.0f} MiB in Arrow"
        )
        results = {}
        for how in ("reader", "to_arrow"):
            out = subprocess.run(
                [sys.executable, "-c", _CHILD, str(root / "t"), how], check=True, capture_output=True, text=True
            ).stdout
            results[how] = json.loads(out.strip().splitlines()[-1])
            r = results[how]
            print(f"{how:>9}: {r['rows']:,} rows in {r['s']:.1f} s, peak memory {r['peak_mib']:.0f} MiB")
        a, b = results["reader"], results["to_arrow"]
        if (a["rows"], a["sum"]) != (b["rows"], b["sum"]):
            print(f"MISMATCH: {a} vs {b}")
            return 1
        print(
            f"streamed peak / materialised peak: {a['peak_mib'] / b['peak_mib']:.2f}x; "
            f"streamed peak {'<' if a['peak_mib'] < 1024 else '>='} 1 GiB"
        )
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
