"""Pruning on real tables, checked by brute force (issue 26 item 2, filters as data).

A table partitioned by a date (copy-on-write) or a string (merge-on-read) column, with
an int record key, int, string and date columns with nulls, ``column_stats`` and
``bloom_filters`` indexes and many small files from inserts, upserts and deletes. For
each of 300 seeded random filters (100 in ``make test``, all under ``-m soak``; ``and``,
``or``, ``not``, the six comparisons with the literal on either side, ``isin`` with and
without a null, ``is_null``, ``is_valid``, over every column, partition and key columns
included):

* ``t.scan(filter).files()`` holds every live file (a slice's base and logs) with a row
  that matches, each file read and the filter evaluated by pyarrow;
* ``t.to_arrow(filter)`` equals the whole snapshot filtered by pyarrow;
* and pruning happens: a good share of the files are never read, so a pruner that
  keeps everything fails.

The table and the filters are built by :func:`build_table` and :func:`random_filters`
from the public API only, so ``compare_pruning.py`` (next to this file) can run the same
cases under an older lakeline and count the files each reads.
"""

from __future__ import annotations

import random
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from lakeline.table import Table

SEED = 2026
#: Seeded filters per table: all of them under the soak marker; ``make test`` runs the
#: first 100 (the merge-on-read run of 300 took 58 s of a CI run).
FILTERS, QUICK_FILTERS = 300, 100
DAY0 = date(2024, 3, 1)
DAYS = [DAY0 + timedelta(days=k) for k in range(5)]
REGIONS = ["ap", "eu", "sa", "us"]
STRINGS = ["a", "b", "bb", "c", "k1", "k2", "k3", "q", "z"]
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("day", pa.date32()),
        pa.field("region", pa.string()),
        pa.field("v", pa.int64()),
        pa.field("s", pa.string()),
        pa.field("d", pa.date32()),
    ]
)
PARTITION = {"cow": "day", "mor": "region"}


def _rows(rng: random.Random, ids: list[int]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "id": i,
                "day": rng.choice(DAYS),
                "region": rng.choice(REGIONS),
                "v": None if rng.random() < 0.1 else rng.randint(0, 1000),
                "s": None if rng.random() < 0.1 else rng.choice(STRINGS),
                "d": None if rng.random() < 0.1 else DAY0 + timedelta(days=rng.randint(0, 60) + i // 20),
            }
            for i in ids
        ],
        schema=SCHEMA,
    )


def build_table(path: Path, kind: str, seed: int = SEED) -> tuple[Table, int]:
    """The table of the test, and one past its highest record key. Inserts take ids in
    runs (so files have narrow key ranges), with upserts and deletes between them."""
    rng = random.Random(seed)
    t = Table.create(
        path,
        SCHEMA,
        record_key="id",
        ordering_field=None,
        partition_by=[PARTITION[kind]],
        table_type=kind,
        properties={"write.target-file-size-bytes": 4096, "write.small-file-limit-bytes": 0},
    )
    t.indexes.create("column_stats")
    t.indexes.create("bloom_filters", options={"fpp": 0.05})
    next_id = 0
    for step in range(14):
        op = rng.random()
        if step < 3 or op < 0.5:
            ids = list(range(next_id, next_id + rng.randint(60, 160)))
            next_id += len(ids)
            t.insert(_rows(rng, ids))
        elif op < 0.85:
            t.upsert(_rows(rng, rng.sample(range(next_id), rng.randint(5, 40))))
        else:
            t.delete(pa.table({"id": pa.array(rng.sample(range(next_id), rng.randint(1, 15)), pa.int64())}))
    return t, next_id


def _literal(rng: random.Random, col: str, max_id: int) -> Any:
    if col == "id":
        return rng.randint(-5, max_id + 5)
    if col == "v":
        return rng.randint(-10, 1010)
    if col in ("s",):
        return rng.choice(STRINGS + ["", "bz", "zz"])
    if col == "region":
        return rng.choice(REGIONS + ["aa", "zz"])
    if col == "day":
        return DAY0 + timedelta(days=rng.randint(-1, len(DAYS)))
    return DAY0 + timedelta(days=rng.randint(-2, 60 + max_id // 20 + 2))


def _leaf(rng: random.Random, max_id: int) -> pc.Expression:
    col = rng.choice(["id", "id", "day", "region", "v", "s", "d"])
    f = pc.field(col)
    kind = rng.random()
    if kind < 0.12:
        return f.is_null() if rng.random() < 0.5 else f.is_valid()
    if kind < 0.3:
        values = [_literal(rng, col, max_id) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.15:
            values.append(None)
        typ = SCHEMA.field(col).type
        return f.isin(pa.array(values, typ))
    x = pa.scalar(_literal(rng, col, max_id), SCHEMA.field(col).type)
    op = rng.choice(["==", "!=", "<", "<=", ">", ">="])
    if rng.random() < 0.2:  # the literal on the left
        lit = pc.scalar(x)
        return {"==": lit == f, "!=": lit != f, "<": lit < f, "<=": lit <= f, ">": lit > f, ">=": lit >= f}[op]
    return {"==": f == x, "!=": f != x, "<": f < x, "<=": f <= x, ">": f > x, ">=": f >= x}[op]


def _filter(rng: random.Random, max_id: int, depth: int = 0) -> pc.Expression:
    r = rng.random()
    if depth < 3 and r < 0.3:
        return _filter(rng, max_id, depth + 1) & _filter(rng, max_id, depth + 1)
    if depth < 3 and r < 0.45:
        return _filter(rng, max_id, depth + 1) | _filter(rng, max_id, depth + 1)
    if depth < 3 and r < 0.52:
        return ~_filter(rng, max_id, depth + 1)
    return _leaf(rng, max_id)


def random_filters(max_id: int, n: int = FILTERS, seed: int = SEED) -> list[pc.Expression]:
    rng = random.Random(seed + 1)
    return [_filter(rng, max_id) for _ in range(n)]


def _file_rows(t: Table) -> tuple[pa.Table, list[str]]:
    """Every row of every live file (a slice's base and logs), with the index of its
    file in ``__file``, and the files' absolute paths."""
    scan = t.scan()
    paths: list[str] = []
    parts: list[pa.Table] = []
    for s in scan.slices:
        for f in s.files:
            path = scan.ctx.storage.path(f.path)
            raw = pq.read_table(path)
            cols = [
                raw.column(n).cast(SCHEMA.field(n).type)
                if n in raw.column_names
                else pa.nulls(raw.num_rows, SCHEMA.field(n).type)
                for n in SCHEMA.names
            ]
            rows = pa.Table.from_arrays(cols, schema=SCHEMA)
            parts.append(rows.append_column("__file", pa.array([len(paths)] * rows.num_rows, pa.int64())))
            paths.append(path)
    return pa.concat_tables(parts), paths


def _sorted(t: pa.Table) -> list[dict[str, Any]]:
    return sorted(t.to_pylist(), key=lambda r: r["id"])


@pytest.mark.parametrize(
    "kind,n",
    [
        ("cow", QUICK_FILTERS),
        ("mor", QUICK_FILTERS),
        pytest.param("cow", FILTERS, marks=pytest.mark.soak),
        pytest.param("mor", FILTERS, marks=pytest.mark.soak),
    ],
)
def test_random_filters_prune_soundly_on_real_tables(tmp_path: Path, kind: str, n: int) -> None:
    t, max_id = build_table(tmp_path / kind, kind)
    rows, paths = _file_rows(t)
    whole = t.to_arrow()
    filters = random_filters(max_id, n)
    assert len(paths) >= 30, len(paths)  # many small files to prune
    start = time.perf_counter()
    read = matched = 0
    for flt in filters:
        scan = t.scan(filter=flt)
        files = set(scan.files())
        holding = {paths[i] for i in pc.unique(ds.dataset(rows).to_table(filter=flt).column("__file")).to_pylist()}
        assert holding <= files, (str(flt), sorted(holding - files))
        assert _sorted(scan.to_arrow()) == _sorted(whole.filter(flt)), str(flt)
        read += len(files)
        matched += len(holding)
    total = len(paths) * len(filters)
    elapsed = time.perf_counter() - start
    print(
        f"{kind}: {len(paths)} files, {len(filters)} filters: read {read} of {total} file reads "
        f"({total - read} pruned), {matched} held a match; {elapsed:.1f} s"
    )
    # Pruning happens: a good share of the files without a match are never read.
    assert total - read > 0.4 * (total - matched), (read, matched, total)
