"""TPC-DS data and query texts for the benchmarks, generated offline and cached as Parquet.

DuckDB's ``tpcds`` extension from PyPI (``duckdb==1.5.5``, ``duckdb-extension-tpcds``)
is loaded from its package folder (no network), ``CALL dsdgen(sf=…)`` generates every
table once, and the tables a benchmark needs are written as ``<table>-sf<sf>.parquet``
in a cache folder, so a second run (or another benchmark) reads Parquet instead of
generating again. ``store_sales`` goes to the same file name as
:func:`bench.mor_reads_bench.store_sales` uses, which then reads it from the cache.
The query texts are the extension's own (``tpcds_queries()``), the official ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def extension_path() -> Path:
    """The ``tpcds.duckdb_extension`` file shipped in the ``duckdb-extension-tpcds`` package."""
    import duckdb_extension_tpcds  # type: ignore[import-not-found]

    return next(Path(duckdb_extension_tpcds.__file__).parent.rglob("tpcds.duckdb_extension"))


def connect() -> Any:
    """A DuckDB connection with the tpcds extension loaded from the package folder."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"LOAD '{extension_path()}'")
    con.execute("SET enable_progress_bar = false")
    return con


def cached_path(cache: Path, table: str, sf: float) -> Path:
    return cache / f"{table}-sf{sf:g}.parquet"


def ensure_tables(tables: list[str], sf: float, cache: Path) -> dict[str, Path]:
    """The Parquet files of ``tables`` at scale factor ``sf`` in ``cache``, generating all
    of those missing in one ``dsdgen`` run."""
    import pyarrow.parquet as pq

    paths = {t: cached_path(cache, t, sf) for t in tables}
    missing = [t for t, p in paths.items() if not p.exists()]
    if missing:
        con = connect()
        con.execute(f"CALL dsdgen(sf={sf})")
        cache.mkdir(parents=True, exist_ok=True)
        for t in missing:
            tmp = paths[t].with_suffix(".parquet.tmp")
            pq.write_table(con.execute(f"SELECT * FROM {t}").to_arrow_table(), tmp)
            tmp.replace(paths[t])  # a run killed mid-write leaves no half file under the real name
        con.close()
    return paths


def query_texts(numbers: list[int]) -> dict[int, str]:
    """The official texts of TPC-DS queries ``numbers``, as DuckDB's extension ships them."""
    con = connect()
    try:
        rows = con.execute("SELECT query_nr, query FROM tpcds_queries()").fetchall()
    finally:
        con.close()
    texts = {int(n): str(q) for n, q in rows}
    return {n: texts[n] for n in numbers}
