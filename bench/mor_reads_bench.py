"""Merge-on-read reads under deletes and upserts (issue 16): TPC-DS ``store_sales``.

A merge-on-read table of ``store_sales`` (record key ``ss_item_sk, ss_ticket_number``)
is read, three columns, after each of: the insert; a ``delete_where`` of a 14-day
``ss_sold_date_sk`` window; an upsert of 1% of the rows (half of them changed, half new
tickets). Each of those reads is compared with the same read of a copy of the table
compacted at that point, the two read in turns (so both see the same load), median of
``--repeat`` reads each. Target: every read within 1.3x of the read after compaction.

Data: ``store_sales`` generated offline by DuckDB's ``tpcds`` extension from PyPI
(``duckdb==1.5.5``, ``duckdb-extension-tpcds``), cached as Parquet in the work folder.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .report import command_line, machine, today, update_section

TARGET = 1.3
KEY = ["ss_item_sk", "ss_ticket_number"]
COLUMNS = ["ss_sold_date_sk", "ss_store_sk", "ss_net_paid"]


def store_sales(sf: float, cache: Path) -> Any:
    """``store_sales`` at scale factor ``sf`` as an Arrow table (rows with a null key
    dropped: TPC-DS generates none, but a record key cannot hold one)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = cache / f"store_sales-sf{sf:g}.parquet"
    if not path.exists():
        import duckdb
        import duckdb_extension_tpcds  # type: ignore[import-not-found]

        ext = next(Path(duckdb_extension_tpcds.__file__).parent.rglob("tpcds.duckdb_extension"))
        con = duckdb.connect()
        con.execute(f"LOAD '{ext}'")
        con.execute(f"CALL dsdgen(sf={sf})")
        cache.mkdir(parents=True, exist_ok=True)
        pq.write_table(con.execute("SELECT * FROM store_sales").to_arrow_table(), path)
    rows = pq.read_table(path)
    return rows.filter(pc.and_(pc.is_valid(rows.column(KEY[0])), pc.is_valid(rows.column(KEY[1]))))


def _reader(path: str) -> Callable[[], float]:
    from lakeline.table import Table

    def one() -> float:
        t0 = time.perf_counter()
        Table.open(path).to_arrow(columns=COLUMNS)
        return time.perf_counter() - t0

    return one


def compare(merged: Path, work: Path, repeat: int) -> dict[str, float]:
    """The read of ``merged`` against the same read of a compacted copy, in turns."""
    from lakeline.table import Table

    compacted = work / "compacted"
    shutil.rmtree(compacted, ignore_errors=True)
    shutil.copytree(merged, compacted)
    Table.open(str(compacted)).services.compact()
    read_merged, read_compacted = _reader(str(merged)), _reader(str(compacted))
    read_merged(), read_compacted()  # warm the page cache and the imports
    same = _summary(Table.open(str(merged)).to_arrow()) == _summary(Table.open(str(compacted)).to_arrow())
    a, b = [], []
    for _ in range(repeat):
        a.append(read_merged())
        b.append(read_compacted())
    m, c = statistics.median(a), statistics.median(b)
    return {"merged_s": m, "compacted_s": c, "ratio": m / c, "same_rows": same}


def _summary(rows: Any) -> tuple[int, ...]:
    """Row count, each integer column's sum, and the sum of a hash of each whole row:
    equal for tables with the same rows, in any order (the hash ties each row's values
    together, so rows whose columns were shuffled apart do not pass)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from lakeline.indexes.hashing import hash_array

    sums = [pc.sum(rows.column(f.name)).as_py() or 0 for f in rows.schema if pa.types.is_integer(f.type)]
    row_hash = np.zeros(rows.num_rows, dtype=np.uint64)
    for i, name in enumerate(sorted(rows.column_names)):
        row_hash = (row_hash ^ hash_array(rows.column(name), seed=i + 1)) * np.uint64(0x9E3779B97F4A7C15)
    return (rows.num_rows, *sums, int(row_hash.sum(dtype=np.uint64)))


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.compute as pc
    from lakeline.table import Table

    rows = store_sales(args.sf, args.cache or work)
    path = work / "store_sales"
    t = Table.create(str(path), rows.schema, record_key=KEY, table_type="mor")
    t.insert(rows)
    out: dict[str, Any] = {"rows": rows.num_rows, "steps": {}}
    log_files = lambda: sum(len(s.logs) for s in Table.open(str(path)).context().view.latest_slices())  # noqa: E731
    lo = pc.min(rows.column("ss_sold_date_sk")).as_py() + 300
    window = (pc.field("ss_sold_date_sk") >= lo) & (pc.field("ss_sold_date_sk") < lo + 14)
    t0 = time.perf_counter()
    deleted = t.delete_where(window).stats.get("deleted", 0)
    out["delete_s"] = time.perf_counter() - t0
    out["steps"]["after delete_where"] = {
        **compare(path, work, args.repeat),
        "deleted": deleted,
        "log_files": log_files(),
    }
    # 1% of the rows: half updated in place (ss_quantity + 1), half new tickets.
    n = rows.num_rows // 200
    changed = rows.slice(rows.num_rows // 3, n)
    changed = changed.set_column(
        changed.schema.get_field_index("ss_quantity"), "ss_quantity", pc.add(changed.column("ss_quantity"), 1)
    )
    fresh = rows.slice(rows.num_rows // 2, n)
    top = pc.max(rows.column("ss_ticket_number")).as_py()
    fresh = fresh.set_column(
        fresh.schema.get_field_index("ss_ticket_number"),
        "ss_ticket_number",
        pc.add(fresh.column("ss_ticket_number"), pa.scalar(top, fresh.schema.field("ss_ticket_number").type)),
    )
    t0 = time.perf_counter()
    Table.open(str(path)).upsert(pa.concat_tables([changed, fresh]))
    out["upsert_s"] = time.perf_counter() - t0
    out["steps"]["after upsert"] = {**compare(path, work, args.repeat), "log_files": log_files()}
    return out


def report(result: dict[str, Any], command: str) -> str:
    lines = [
        "## Merge-on-read reads after deletes and upserts (TPC-DS store_sales)",
        "",
        f"{today()}, {machine()}. Command: `{command}`",
        "",
        f"`store_sales` ({result['rows']:,} rows), merge-on-read, record key `ss_item_sk, ss_ticket_number`; "
        f"a read of `{', '.join(COLUMNS)}` against the same read of a compacted copy, read in turns, "
        "median of each. The delete is a 14-day `ss_sold_date_sk` window; the upsert 1% of the rows (half "
        "updates, half new tickets).",
        "",
        "| after | log files | read | read after compaction | ratio | target |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for step, r in result["steps"].items():
        lines.append(
            f"| {step} | {r['log_files']} | {r['merged_s']:.3f} s | {r['compacted_s']:.3f} s | "
            f"{r['ratio']:.2f}x | <= {TARGET}x: {'yes' if r['ratio'] <= TARGET else 'NO'} |"
        )
    same = all(r["same_rows"] for r in result["steps"].values())
    lines += [
        "",
        f"The delete_where took {result['delete_s']:.2f} s, the upsert {result['upsert_s']:.2f} s. "
        f"Each table and its compacted copy hold the same rows: {'yes' if same else 'NO'}.",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench mor-reads", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sf", type=float, default=1.0, help="TPC-DS scale factor (default 1)")
    parser.add_argument("--repeat", type=int, default=15, help="reads of each table per step (median)")
    parser.add_argument("--cache", type=Path, default=None, help="folder for the generated store_sales Parquet")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--no-docs", action="store_true", help="do not update docs/performance.md")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="lakeline-mor-reads-"))
    try:
        result = run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = report(result, command_line("mor-reads", argv, with_postgres=False))
    print(text)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    if not args.no_docs:
        update_section("mor-reads-bench", text)
    return 0 if all(r["same_rows"] for r in result["steps"].values()) else 1
