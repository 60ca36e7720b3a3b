"""The record-level index at scale (issue 30, item 1): ``python -m bench record-index``.

Data shape: random keys, 32 hex digits like UUIDs without dashes (``bench.data``'s
``uuid`` keys), every batch in random row order.

Two measurements:

* ``build``: a table of ``--rows`` keys (default 50M; written as inserts of 5M with the
  insert key check off, so the setup does not cost the size of the table per insert),
  then ``t.indexes.create("record_index")`` in a fresh child process, which reports the
  build's wall time and its peak RSS (``VmHWM``, the whole process: Python, Arrow, the
  engine's two threads). Then ``validate`` in another child (time and peak RSS).
* ``writes``: a table of ``--rows`` keys (default 5M, 10 inserts of 500k), copied twice:
  one without an index (the default: the insert key check and tagging read the key
  columns of every file whose key range overlaps, i.e. every file), one with a record
  index. On each, an insert of ``--batch`` new keys (500k) and then an upsert of
  ``--batch`` (half updates of random existing keys, half new), timed, with the
  tagging and index-writing times the write reports (``timings["tag_s"]``,
  ``["index_s"]``). ``--repeats N`` runs the pair N times on fresh copies (the index
  built once, copied with its table), alternating, and prints the medians.

    python -m bench record-index build [--rows N] [--dir DIR]
    python -m bench record-index writes [--rows N] [--batch N] [--types mor,cow] [--repeats N] [--dir DIR]
    python -m bench record-index build-child DIR/big      # build again on a table built before
    python -m bench record-index validate-child DIR/big
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import data

SHAPE = data.Shape("uuid", "random")
SETUP_BATCH = 5_000_000


def _table(path: Path, rows: int, per: int, table_type: str, key_check: bool = True) -> None:
    from lakeline.table import Table

    t = Table.create(
        str(path),
        data.SCHEMA,
        record_key="key",
        ordering_field="ts",
        table_type=table_type,
        properties={"write.insert-key-check": key_check},
    )
    for i in range(rows // per):
        t.insert(data.append_batch(i, per, SHAPE))


def _peak_mib() -> float:
    """This process's peak RSS. ``VmHWM``, not ``ru_maxrss``: a child started by fork
    and exec inherits its parent's ``ru_maxrss`` (the 50M-row setup's), ``VmHWM``
    belongs to the new image."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(args: list[str]) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.lookup.record_index", *args], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"child {args} failed: {out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def child_build(path: str) -> dict[str, object]:
    from lakeline.table import Table

    t = Table.open(path)
    if any(d.name == "record_index" for d in t.indexes.list()):
        t.indexes.drop("record_index")  # measuring again on the same table
    start = time.perf_counter()
    d = t.indexes.create("record_index")
    seconds = time.perf_counter() - start
    built = next(i for i in t.timeline.completed() if i.id == d.instant).metadata
    return {
        "step": "build",
        "seconds": round(seconds, 2),
        "peak_rss_mib": round(_peak_mib()),
        "buckets": d.options["buckets"],
        "entries": built.get("entries"),
        "files": built.get("files_built"),
    }


def child_validate(path: str) -> dict[str, object]:
    from lakeline.table import Table

    t = Table.open(path)
    start = time.perf_counter()
    report = t.indexes.validate("record_index")
    return {
        "step": "validate",
        "seconds": round(time.perf_counter() - start, 2),
        "peak_rss_mib": round(_peak_mib()),
        "files_checked": report["files_checked"],
        "mismatches": len(report["mismatches"]),
    }


def build(rows: int, folder: Path) -> list[dict[str, object]]:
    path = folder / "big"
    start = time.perf_counter()
    _table(path, rows, min(rows, SETUP_BATCH), "mor", key_check=False)
    setup = {"step": "setup", "rows": rows, "seconds": round(time.perf_counter() - start, 1)}
    print(json.dumps(setup), flush=True)
    out = [setup, _child(["build-child", str(path)])]
    print(json.dumps(out[-1]), flush=True)
    out.append(_child(["validate-child", str(path)]))
    print(json.dumps(out[-1]), flush=True)
    return out


def writes(rows: int, batch: int, table_type: str, folder: Path, repeats: int = 1) -> list[dict[str, object]]:
    from lakeline.table import Table

    base = folder / f"base-{table_type}"
    _table(base, rows, batch, table_type)
    indexed_base = folder / f"base-{table_type}-record_index"
    shutil.copytree(base, indexed_base)
    Table.open(str(indexed_base)).indexes.create("record_index")
    out = []
    for repeat in range(repeats):
        for indexed in (False, True):
            path = folder / f"{table_type}-{'record_index' if indexed else 'no_index'}-{repeat}"
            shutil.copytree(indexed_base if indexed else base, path)
            t = Table.open(str(path))
            for op, rows_of in (
                ("insert", data.append_batch(rows // batch, batch, SHAPE)),
                ("upsert", data.upsert_batch(rows + batch, batch, SHAPE)),
            ):
                start = time.perf_counter()
                r = t.insert(rows_of) if op == "insert" else t.upsert(rows_of)
                line = {
                    "type": table_type,
                    "index": "record_index" if indexed else "none",
                    "op": op,
                    "repeat": repeat,
                    "rows_before": rows + (batch if op == "upsert" else 0),
                    "batch": batch,
                    "seconds": round(time.perf_counter() - start, 3),
                    "tag_s": round(r.timings.get("tag_s", 0.0), 3),
                    "index_s": round(r.timings.get("index_s", 0.0), 3),
                    "stats": r.stats,
                }
                print(json.dumps(line), flush=True)
                out.append(line)
            shutil.rmtree(path, ignore_errors=True)
    for op in ("insert", "upsert"):
        med = {
            ix: round(statistics.median(float(str(x["seconds"])) for x in out if x["op"] == op and x["index"] == ix), 3)
            for ix in ("none", "record_index")
        }
        summary = {"type": table_type, "op": op, "repeats": repeats, "median_s": med}
        summary["record_index_vs_none"] = round(med["record_index"] / med["none"], 2)
        print(json.dumps(summary), flush=True)
    return out


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("build-child", "validate-child"):
        fn = child_build if argv[0] == "build-child" else child_validate
        print(json.dumps(fn(argv[1])), flush=True)
        return 0
    p = argparse.ArgumentParser(prog="python -m bench record-index", description=__doc__.split("\n\n")[0])
    p.add_argument("what", nargs="?", choices=["build", "writes"], default="writes")
    p.add_argument("--rows", type=int, default=None)
    p.add_argument("--batch", type=int, default=500_000)
    p.add_argument("--types", default="mor,cow")
    p.add_argument("--repeats", type=int, default=1, help="writes: each table type's pair of runs, medians printed")
    p.add_argument("--dir", default=None, help="work folder (default: a temporary one, removed after)")
    a = p.parse_args(argv)
    folder = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="lakeline-record-index-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        print(json.dumps({"shape": SHAPE.describe()}), flush=True)
        if a.what == "build":
            build(a.rows or 50_000_000, folder)
        else:
            for table_type in a.types.split(","):
                writes(a.rows or 5_000_000, a.batch, table_type, folder, a.repeats)
    finally:
        if not a.dir:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
