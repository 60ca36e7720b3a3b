"""What the lookup benchmark does inside one child process: build indexes, read, upsert.

:mod:`bench.lookup.bench` runs every system/step in a fresh interpreter (the pattern of
:mod:`bench.write.bench`, whose ``append`` child builds the tables) and calls
:func:`run_child` there. Steps:

* ``index`` (lakeline only): ``t.indexes.create`` of each index in :data:`INDEXES`,
  each timed alone; deltalake has nothing to build (its min/max statistics are in its log).
* ``range@PHASE`` / ``key@PHASE`` / ``ts@PHASE``: one query of :func:`queries` on the table as it is after
  the appends (``appended``) or after the upsert (``upserted``). Timed: opening the table,
  planning (pruning) and reading the matching rows. Untimed: which files were read, the
  pruning stages, and a digest of the rows so the systems can be checked to agree.
* ``upsert``: the 500k upsert with the indexes ready; lakeline's ``WriteResult.timings``
  say where the time went (``tag_s`` is the issue-4 target). Afterwards, untimed, the
  table's row count, distinct keys and sum of ``ts`` for the consistency check.

Queries are described as JSON (they travel to the child in ``spec.json``) and turned into
Arrow expressions here, the same expression for every system.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..write.child import _digest, _files, _maxrss
from ..write.systems import BASELINE, LAKELINE, make_system

SYSTEMS = (*LAKELINE, BASELINE)
#: ``-ri``: the table created with ``index.record-index`` (not in the default run).
ALL_SYSTEMS = (*SYSTEMS, "lakeline-cow-ri", "lakeline-mor-ri")
PHASES = ("appended", "upserted")
QUERIES = ("range", "key", "ts")

#: (kind, keyword arguments of ``t.indexes.create``): data skipping on the key for
#: range reads (column stats, every column), key bloom filters for upsert tagging, and a
#: bloom filter on ``ts`` for point lookups on a column that is not the key.
INDEXES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("column_stats", {}),
    ("bloom_filters", {}),
    ("bloom_filters", {"columns": ["ts"], "name": "bloom_ts"}),
)


def queries(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The benchmark's queries, as JSON-able descriptions: a range of keys, one key (the
    point lookup of issue 30), one ``ts`` (a column that is not the key)."""
    key = spec["lookup_key"]
    return {
        "range": {
            "kind": "range",
            "column": "key",
            "a": spec["read_a"],
            "b": spec["read_b"],
            "text": f"key >= '{spec['read_a']}' AND key < '{spec['read_b']}'",
        },
        "key": {"kind": "eq", "column": "key", "value": key, "text": f"key == '{key}'"},
        "ts": {"kind": "eq", "column": "ts", "value": spec["lookup_ts"], "text": f"ts == {spec['lookup_ts']}"},
    }


def sql(query: dict[str, Any]) -> str:
    """``query`` as the SQL predicate of deltalake's ``DeltaTable.scan(predicate=...)``."""
    if query["kind"] == "and":
        return " AND ".join(f"({sql(q)})" for q in query["parts"])

    def lit(v: Any) -> str:
        return f"'{v}'" if isinstance(v, str) else str(v)

    col = query["column"]
    if query["kind"] == "range":
        return f"{col} >= {lit(query['a'])} AND {col} < {lit(query['b'])}"
    if query["kind"] == "eq":
        return f"{col} = {lit(query['value'])}"
    raise ValueError(f"unknown query kind {query['kind']!r}")


def expression(query: dict[str, Any], cast_strings: bool = False) -> Any:
    """The Arrow filter of ``query``. ``cast_strings``: compare a string column cast to
    ``string`` (deltalake's merge writes ``string_view``, which pyarrow cannot compare;
    see :meth:`bench.write.systems.Delta.read`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if query["kind"] == "and":  # every part holds: e.g. a range on each of two columns
        parts = [expression(q, cast_strings) for q in query["parts"]]
        out = parts[0]
        for part in parts[1:]:
            out = out & part
        return out
    field = pc.field(query["column"])
    if cast_strings and query["column"] in ("key", "category"):
        field = field.cast(pa.string())
    if query["kind"] == "range":
        return (field >= query["a"]) & (field < query["b"])
    if query["kind"] == "eq":
        return field == query["value"]
    raise ValueError(f"unknown query kind {query['kind']!r}")


# --------------------------------------------------------------------------------------
# The timed operations. Each returns the rows and a function describing the read,
# called after the timer stops.


def lakeline_query(path: Path, query: dict[str, Any]) -> tuple[Any, Callable[[], dict[str, Any]]]:
    """``Table.open(path).scan(filter).to_arrow()``: stats and bloom pruning apply."""
    from lakeline.table import Table

    scan = Table.open(str(path)).scan(filter=expression(query))
    rows = scan.to_arrow()
    return rows, lambda: {
        "files_read": len(scan.files()),
        "bytes_read": _sizes(scan.files()),
        "explain": scan.explain(),
    }


def delta_query(path: Path, query: dict[str, Any]) -> tuple[Any, Callable[[], dict[str, Any]]]:
    """deltalake's own fastest read, ``DeltaTable(p).scan(predicate=...)`` (DataFusion:
    files skipped by the log's per-file statistics, rows filtered in Rust). Which files
    it opens is not reported by the scan: the files counted are the ones whose min/max
    admit a match (the fragments left after filtering ``to_pyarrow_dataset``), and the
    dataset path itself is timed after the step for comparison."""
    import deltalake
    import pyarrow as pa

    stream = deltalake.DeltaTable(str(path)).scan(predicate=sql(query))
    rows = pa.RecordBatchReader.from_stream(stream).read_all()

    def describe() -> dict[str, Any]:
        dataset_rows, dataset_s = _timed(lambda: delta_dataset_query(path, query))
        dset = deltalake.DeltaTable(str(path)).to_pyarrow_dataset()
        frags = list(dset.get_fragments(filter=expression(query)))
        # Fragment paths are relative to the table (deltalake's own filesystem handler).
        return {
            "files_read": len(frags),
            "files_total": len(dset.files),
            "bytes_read": _sizes(str(path / f.path) for f in frags),
            "dataset_s": dataset_s,
            "dataset_rows": dataset_rows.num_rows,
        }

    return rows, describe


def delta_dataset_query(path: Path, query: dict[str, Any]) -> Any:
    """The read this benchmark made before issue 30: ``to_pyarrow_dataset``, whose
    fragments carry each file's min/max, pruned by the filter, rows filtered by pyarrow on
    string columns cast to ``string`` (pyarrow has no ``string_view`` comparison,
    delta-io/delta-rs#4579; the cast is left out of the pruning filter, which it would
    disable)."""
    import deltalake
    import pyarrow.dataset as pds

    dset = deltalake.DeltaTable(str(path)).to_pyarrow_dataset()
    frags = list(dset.get_fragments(filter=expression(query)))
    pruned = pds.FileSystemDataset(frags, dset.schema, dset.format, dset.filesystem)
    return pruned.to_table(filter=expression(query, cast_strings=True))


def _sizes(paths: Iterable[str]) -> int:
    """Bytes in the files a read opens: what a file count hides when one system keeps
    the table in one big file and the other in many."""
    return sum(os.path.getsize(p) for p in paths)


def _timed(fn: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _build_indexes(path: Path) -> dict[str, Any]:
    from lakeline.table import Table

    each: dict[str, float] = {}
    for kind, kwargs in INDEXES:
        # Opened again for each index, as a user creating them one by one would.
        idx, each[kwargs.get("name", kind)] = _timed(
            lambda kind=kind, kwargs=kwargs: Table.open(str(path)).indexes.create(kind, **kwargs)
        )
        if idx.state != "ready":
            raise RuntimeError(f"index {idx.name} is {idx.state} after create")
    return {"seconds": sum(each.values()), "detail": {"indexes_s": each}}


def _query(system: str, path: Path, query: dict[str, Any]) -> dict[str, Any]:
    fn = delta_query if system == BASELINE else lakeline_query
    (rows, describe), seconds = _timed(lambda: fn(path, query))
    facts = describe()  # after the timer: which files, how big, the pruning stages
    explain = facts.get("explain") or {}
    return {
        "seconds": seconds,
        "files_read": facts["files_read"],
        "rows_read": rows.num_rows,
        "read_digest": _digest(rows),
        "detail": {
            "explain": explain,
            "files_total": facts.get("files_total", explain.get("files_total")),
            "bytes_read": facts["bytes_read"],
            **{k: facts[k] for k in ("dataset_s", "dataset_rows") if k in facts},
        },
    }


def _upsert(system: str, workdir: Path) -> dict[str, Any]:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    sys_ = make_system(system, workdir)
    sys_.load()
    batch = pq.read_table(workdir / "input" / "upsert.parquet")
    if system == BASELINE:
        stats, seconds = _timed(lambda: sys_.upsert(batch))  # the write benchmark's merge
        detail: dict[str, Any] = {"stats": stats}
    else:
        from lakeline.table import Table

        res, seconds = _timed(lambda: Table.open(str(sys_.path)).upsert(batch))
        detail = {"stats": dict(res.stats), "timings": dict(res.timings)}
    out = {"seconds": seconds, "peak_rss": _maxrss(), "detail": detail}
    every = sys_.scan_all(["key", "ts"])  # untimed, for the consistency check
    out.update(
        rows_total=every.num_rows,
        distinct_keys=pc.count_distinct(every.column("key")).as_py(),
        sum_ts=pc.sum(every.column("ts")).as_py(),
    )
    return out


def run_child(system: str, step: str, workdir: Path) -> dict[str, Any]:
    """Run one step of one system and describe it (a child process's whole job)."""
    spec = json.loads((workdir / "spec.json").read_text())
    path = make_system(system, workdir).path
    # Import the libraries before any timer starts, as the write benchmark does.
    if system == BASELINE:
        import deltalake  # noqa: F401
    else:
        import lakeline.table  # noqa: F401
    import pyarrow.dataset  # noqa: F401

    out: dict[str, Any] = {"system": system, "step": step, "ok": False, "base_rss": _maxrss()}
    before = _files(path)
    if step == "index":
        if system == BASELINE:
            raise ValueError("deltalake has no index to build")
        out.update(_build_indexes(path))
    elif step == "upsert":
        out.update(_upsert(system, workdir))
    elif "@" in step and step.split("@")[0] in QUERIES and step.split("@")[1] in PHASES:
        out.update(_query(system, path, queries(spec)[step.split("@")[0]]))
    else:
        raise ValueError(f"unknown step {step!r}")
    out.setdefault("peak_rss", _maxrss())
    after = _files(path)
    changed = [p for p, st in after.items() if before.get(p) != st]
    out["bytes_written"] = sum(after[p][0] for p in changed)
    out["files_written"] = len(changed)
    out["table_bytes"] = sum(st[0] for st in after.values())
    out["ok"] = True
    return out
