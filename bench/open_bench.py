"""Open benchmark: opening a long-lived table and planning a full scan.

Why: the file-system view is a replay of every commit; the ``files`` index checkpoints
it so a new process does not pay for the table's whole history (issue 4: 10,000 files
written by 1,000 commits, open + plan a full scan under 1 s). The table is built with
real inserts (``--commits`` commits of ``--files`` rows, one per partition, so one file
per partition per commit) exactly as writers leave it, checkpoints included. Then, each
in a fresh process, ``Table.open`` + ``scan()`` + ``files()`` is timed (median of
``--repeat``): as written, and with the checkpoints removed (a full replay), for
comparison. Import time of the library is reported apart.

    python -m bench open [--commits 1000] [--files 10] [--repeat 5] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .report import command_line, machine, today, update_section

SECTION = "open-bench"
TARGET_S = 1.0

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from lakeline.table import Table
t1 = time.perf_counter()
t = Table.open(sys.argv[1])
t2 = time.perf_counter()
files = t.scan().files()
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "plan_s": t3 - t2, "files": len(files),
                  "commits": sum(1 for i in t.timeline.completed() if i.action.writes_data)}))
"""


def build(path: Path, commits: int, files: int) -> float:
    """Write the table; returns seconds taken."""
    import pyarrow as pa
    from lakeline.table import Table

    schema = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("p", pa.int32())])
    t = Table.create(path, schema, record_key="id", ordering_field="ts", partition_by=["p"], table_type="mor")
    t0 = time.perf_counter()
    for c in range(commits):
        ids = list(range(c * files, (c + 1) * files))
        t.insert(pa.table({"id": ids, "ts": ids, "p": [i % files for i in ids]}, schema=schema))
    return time.perf_counter() - t0


def measure(path: Path, repeat: int) -> dict[str, Any]:
    """Median (and min/max) of ``repeat`` fresh-process opens."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout))
    totals = [r["open_s"] + r["plan_s"] for r in runs]
    return {
        "median_s": statistics.median(totals),
        "min_s": min(totals),
        "max_s": max(totals),
        "import_s": statistics.median(r["import_s"] for r in runs),
        "files": runs[0]["files"],
        "commits": runs[0]["commits"],
    }


def run(commits: int, files: int, repeat: int) -> dict[str, Any]:
    """Build, measure with and without checkpoints; the smoke test calls this small."""
    from lakeline.indexes.files_index import FILES
    from lakeline.indexes.metadata_table import MetadataTable
    from lakeline.timeline.storage.filesystem import Storage

    root = Path(tempfile.mkdtemp(prefix="lakeline-open-bench-"))
    try:
        table = root / "t"
        built = build(table, commits, files)
        with_cp = measure(table, repeat)
        storage = Storage.for_uri(str(table))
        checkpoints = len(MetadataTable(storage).bases(FILES))
        for _, p in MetadataTable(storage).bases(FILES):
            storage.delete(p)
        replay = measure(table, repeat)
        return {
            "commits": commits,
            "files_per_commit": files,
            "build_s": built,
            "checkpoints": checkpoints,
            "with_checkpoint": with_cp,
            "full_replay": replay,
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def markdown(res: dict[str, Any], cmd: str) -> str:
    cp, rp = res["with_checkpoint"], res["full_replay"]
    verdict = "**PASS**" if cp["median_s"] < TARGET_S else "**FAIL**"
    return "\n".join(
        [
            "## Open a long-lived table and plan a full scan",
            "",
            f"Measured {today()} on {machine()}.",
            "",
            f"Command: `{cmd}`",
            "",
            f"Table: {res['commits']:,} merge-on-read insert commits of {res['files_per_commit']} partitions each "
            f"({cp['files']:,} files), written in {res['build_s']:.1f} s with the default checkpoint interval "
            f"({res['checkpoints']} checkpoints kept). Each number is the median (min-max) of fresh processes "
            "timing `Table.open(path)` + `t.scan().files()`; importing lakeline is apart.",
            "",
            "| view built from | open + plan | target | result |",
            "|---|---:|---:|---|",
            f"| files-index checkpoint + commits after it | {cp['median_s'] * 1000:.0f} ms "
            f"({cp['min_s'] * 1000:.0f}-{cp['max_s'] * 1000:.0f}) | < {TARGET_S:.0f} s | {verdict} |",
            f"| full replay of the timeline (checkpoints removed) | {rp['median_s'] * 1000:.0f} ms "
            f"({rp['min_s'] * 1000:.0f}-{rp['max_s'] * 1000:.0f}) | - | - |",
            "",
            f"Import of `lakeline.table`: {cp['import_s'] * 1000:.0f} ms.",
        ]
    )


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench open", description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/performance.md alone")
    args = ap.parse_args(argv)
    res = run(args.commits, args.files, args.repeat)
    text = markdown(res, command_line("open", argv, with_postgres=False))
    print(text)
    if not args.no_write:
        update_section(SECTION, text)
    return 0 if res["with_checkpoint"]["median_s"] < TARGET_S else 1
