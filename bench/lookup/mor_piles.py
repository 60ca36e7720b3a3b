"""Merge-on-read range reads as logs pile up (issue 30, item 5): ``python -m bench mor-piles``.

Why: a filtered read of a merged slice used to decode the slice's whole base; with
row-group pruning it decodes the groups that may match, and what still grows between
compactions is one log per file group per upsert. This builds the write benchmark's
5M-row merge-on-read table (10 appends, one 500k upsert), piles rounds of a 1% upsert,
a 1,000-key ``delete_where`` and a 5k-row insert on it, and times the 1,000-key range
read (open, scan, ``to_arrow``; the median of N after one warm-up read), printing
``Scan.read_stats`` (row groups, rows and logs decoded):

    python -m bench mor-piles build DIR
    python -m bench mor-piles pile DIR ROUNDS [FIRST_ROUND]
    python -m bench mor-piles read DIR [N]
    python -m bench mor-piles                  # all of it in a temp folder: 0, 1, 5, 20 rounds

Compare code versions by running ``read`` under each on the same table.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import pyarrow.compute as pc

from .. import data

ROWS, APPENDS = 5_000_000, 10


def build(d: Path) -> None:
    from lakeline.table import Table

    t = Table.create(str(d), data.SCHEMA, record_key="key", ordering_field="ts", table_type="mor")
    per = ROWS // APPENDS
    for i in range(APPENDS):
        t.insert(data.append_batch(i, per))
    Table.open(str(d)).upsert(data.upsert_batch(ROWS, ROWS // 10))


def read(d: Path, n: int) -> None:
    from lakeline.table import Table

    a, b = data.read_range(ROWS, 1000)
    flt = (pc.field("key") >= a) & (pc.field("key") < b)
    times, rows, stats = [], 0, None
    for _ in range(n + 1):
        t0 = time.perf_counter()
        scan = Table.open(str(d)).scan(filter=flt)
        got = scan.to_arrow()
        times.append(time.perf_counter() - t0)
        rows = got.num_rows
        stats = getattr(scan, "read_stats", None)
    times = times[1:]  # the first warms the page cache and imports
    slices = Table.open(str(d)).context().view.latest_slices()
    print(
        json.dumps(
            {
                "median_ms": round(statistics.median(times) * 1000, 1),
                "runs_ms": [round(x * 1000, 1) for x in times],
                "rows": rows,
                "slices": len(slices),
                "logs": sum(len(s.logs) for s in slices),
                "read_stats": None if stats is None else vars(stats),
            }
        )
    )


def pile(d: Path, rounds: int, start: int) -> None:
    import numpy as np
    from lakeline.table import Table

    total = ROWS + ROWS // 20  # the upsert's new keys
    for r in range(start, start + rounds):
        t = Table.open(str(d))
        t.upsert(data.update_batch(total, total // 100, r))
        lo = (r * 7919) % (total - 2000)
        t.delete_where((pc.field("key") >= data.key(lo)) & (pc.field("key") < data.key(lo + 1000)))
        fresh = np.arange(total + 100_000 + r * 5000, total + 100_000 + (r + 1) * 5000, dtype=np.int64)
        t.insert(data._rows(fresh, data.APPEND_TS + fresh, np.random.default_rng(r)))


def run_all() -> None:
    """The whole sequence in a temporary folder: build, then a read after 0, 1, 5 and
    20 rounds (about 5 minutes on 2 cores)."""
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="lakeline-mor-piles-")) / "t"
    try:
        build(d)
        done = 0
        for rounds in (0, 1, 5, 20):
            pile(d, rounds - done, done)
            done = rounds
            print(f"after {rounds} rounds: ", end="", flush=True)
            read(d, 5)
    finally:
        shutil.rmtree(d.parent, ignore_errors=True)


def main(argv: list[str]) -> int:
    if not argv:
        run_all()
        return 0
    if len(argv) < 2 or argv[0] not in ("build", "read", "pile"):
        print(__doc__)
        return 2
    cmd, d = argv[0], Path(argv[1])
    if cmd == "build":
        build(d)
    elif cmd == "read":
        read(d, int(argv[2]) if len(argv) > 2 else 5)
    else:
        pile(d, int(argv[2]), int(argv[3]) if len(argv) > 3 else 0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
