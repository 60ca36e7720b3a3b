"""What the services benchmark does inside one child process.

:mod:`bench.services.bench` runs every step in a fresh interpreter (the write
benchmark's :func:`bench.write.bench.run_step` / :func:`~bench.write.child.child_main`)
and calls :func:`run_child` there. Steps, by system:

* ``lakeline-mor``: ``build`` (untimed setup: appends, then update rounds that each write
  one log to every file group; the slices are saved to ``mor_slices.json`` for the plain
  job), ``compact`` (``Table.open`` + ``t.services.compact()``), and the reads
  ``full@PHASE`` / ``point@PHASE`` on the table with its logs (``logs``) or after the
  compaction (``compacted``).
* ``pyarrow``: ``plain@before`` / ``plain@after``: the I/O floor of a compaction, a
  plain pyarrow job reading the same base and log files, group by group, and writing as
  many rows as the compaction wrote, as Snappy Parquet, one file per group.
* ``lakeline-cow`` and ``deltalake``: ``zbuild`` (the same shuffled rows appended to
  both; lakeline builds a ``column_stats`` index then ``t.services.cluster(sort_by,
  strategy="zorder")``, deltalake ``optimize.z_order``; the timed part is the z-order)
  and the queries ``zrange`` / ``zkeys``, through the lookup benchmark's
  :func:`bench.lookup.systems._query` (files after pruning, rows, digest).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any

from .. import data
from ..lookup.systems import _query
from ..write.child import _files, _maxrss

MOR, PLAIN, COW, DELTA = "lakeline-mor", "pyarrow", "lakeline-cow", "deltalake"
ZSYSTEMS = (COW, DELTA)
PHASES = ("logs", "compacted")
MOR_READS = ("full", "point")
ZQUERIES = ("zrange", "zkeys")
Z_COLUMNS = ("key", "value")
#: The writers' row group size (``write.row-group-rows``), used by the plain job too.
ROW_GROUP_ROWS = 131_072

#: Table properties of the merge-on-read table. ``service.nice`` 0: by default services
#: run at niceness 10 so writers keep their latency, which on a shared machine measures
#: the neighbours' load, not compaction; the plain job it is compared with runs at 0 too.
#: ``write.small-file-limit-bytes`` 0: each append starts its own group, the layout the
#: benchmark measures (its smoke test's small appends would otherwise fill one group
#: through logs).
MOR_PROPERTIES: dict[str, Any] = {"service.nice": 0, "write.small-file-limit-bytes": 0}


def table_path(workdir: Path, system: str) -> Path:
    return workdir / "tables" / system


def zorder_properties(target_bytes: int) -> dict[str, Any]:
    """The copy-on-write table's properties: files cut at the same target as deltalake's
    ``z_order(target_size=...)``. Setup only: no small-file filling and no insert key
    check while appending the shuffled rows (unique by construction), which would
    rewrite or read every earlier file on every append without changing the result."""
    return {
        "write.target-file-size-bytes": target_bytes,
        "write.small-file-limit-bytes": 0,
        "write.insert-key-check": False,
        "service.nice": 0,
    }


def fingerprint(table: Any) -> str:
    """Exact, order-independent digest of a whole table of :mod:`bench.data` rows,
    fast enough for millions of rows (``_digest`` goes through Python objects): the
    rows sorted by key, each column as numbers (``k000000042`` -> 42, ``cat_07`` -> 7)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = table.select(["key", "ts", "value", "category"]).sort_by("key")
    cols = [
        pc.cast(pc.utf8_slice_codeunits(t.column("key").cast(pa.string()), 1), pa.int64()),
        t.column("ts"),
        t.column("value"),
        pc.cast(pc.utf8_slice_codeunits(t.column("category").cast(pa.string()), 4), pa.int64()),
    ]
    h = hashlib.sha256(str(t.num_rows).encode())
    for c in cols:
        h.update(c.to_numpy().tobytes())
    return h.hexdigest()[:16]


def _timed(fn: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


# --------------------------------------------------------------------------------------
# Merge-on-read: build, plain job, compaction, reads.


def _build_mor(workdir: Path, spec: dict[str, Any]) -> dict[str, Any]:
    import pyarrow.parquet as pq
    from lakeline.table import Table

    path, inputs = table_path(workdir, MOR), workdir / "input"
    t0 = time.perf_counter()
    t = Table.create(
        str(path), data.SCHEMA, record_key="key", ordering_field="ts", table_type="mor", properties=MOR_PROPERTIES
    )
    for i in range(spec["appends"]):
        t.insert(pq.read_table(inputs / f"append_{i:02d}.parquet"))
    for r in range(spec["update_rounds"]):
        Table.open(str(path)).upsert(pq.read_table(inputs / f"update_{r}.parquet"))
    seconds = time.perf_counter() - t0
    t = Table.open(str(path))
    slices = t.view(t.timeline).latest_slices()
    groups = [
        {"base": t.storage.path(s.base.path), "logs": [t.storage.path(f.path) for f in s.logs], "rows": s.base.rows}
        for s in slices
        if s.base is not None
    ]
    (workdir / "mor_slices.json").write_text(json.dumps(groups, indent=1))
    logs = [len(g["logs"]) for g in groups]
    return {
        "seconds": seconds,
        "detail": {
            "file_groups": len(groups),
            "logs_per_group": [min(logs), max(logs)],
            "log_files": sum(logs),
            "base_bytes": sum(s.base.bytes for s in slices if s.base is not None),
            "log_bytes": sum(f.bytes for s in slices for f in s.logs),
            "log_rows": sum(f.rows for s in slices for f in s.logs),
        },
    }


def _plain(workdir: Path) -> dict[str, Any]:
    """Read every base and log file of every slice the compaction folds, and write each
    group's rows back as one Snappy Parquet file: what compaction cannot avoid doing.
    No merge: the rows written are the first ``rows`` of the group's base and logs, as
    many as the merged slice has (updates only: the base's count)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # The writers' choice of dictionary-encoded columns, so both write the same encoding:
    # pyarrow's default (every column) writes larger files, slower.
    from lakeline.table.encoding import dictionary_columns

    groups = json.loads((workdir / "mor_slices.json").read_text())
    out_dir = workdir / "plain"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    names = data.SCHEMA.names

    def job() -> tuple[int, int]:
        rows = read = 0
        for i, g in enumerate(groups):
            parts = [pq.read_table(p) for p in (g["base"], *g["logs"])]
            read += sum(p.nbytes for p in parts)
            both = pa.concat_tables([p.select(names) for p in parts], promote_options="permissive")
            rows_out = both.slice(0, g["rows"])
            pq.write_table(
                rows_out,
                out_dir / f"group_{i:04d}.parquet",
                compression="snappy",
                row_group_size=ROW_GROUP_ROWS,
                use_dictionary=dictionary_columns(rows_out),
            )
            rows += g["rows"]
        return rows, read

    (rows, arrow_bytes), seconds = _timed(job)
    written = _files(out_dir)
    return {
        "seconds": seconds,
        "rows_total": rows,
        "bytes_written": sum(st[0] for st in written.values()),
        "files_written": len(written),
        "files_read": sum(1 + len(g["logs"]) for g in groups),
        "detail": {
            "bytes_read": sum(Path(p).stat().st_size for g in groups for p in (g["base"], *g["logs"])),
            "arrow_bytes_read": arrow_bytes,
        },
    }


def _compact(workdir: Path) -> dict[str, Any]:
    from lakeline.table import Table

    res, seconds = _timed(lambda: Table.open(str(table_path(workdir, MOR))).services.compact())
    if res.aborted:
        raise RuntimeError(f"compaction aborted: {res.aborted}")
    stats = dict(res.stats)
    return {
        "seconds": seconds,
        "rows_total": stats.get("rows"),
        "bytes_written": stats.get("bytes_written"),
        "files_written": stats.get("files_added"),
        "files_read": stats.get("file_groups_compacted", 0) + stats.get("logs_compacted", 0),
        "detail": {"stats": stats, "bytes_read": stats.get("bytes_read")},
    }


def _mor_read(workdir: Path, spec: dict[str, Any], read: str) -> dict[str, Any]:
    from lakeline.table import Table

    path = table_path(workdir, MOR)
    if read == "point":
        return _query(MOR, path, spec["point_query"])
    scan, seconds = _timed(lambda: Table.open(str(path)).scan())
    rows, read_s = _timed(scan.to_arrow)
    return {
        "seconds": seconds + read_s,
        "files_read": len(scan.files()),
        "rows_read": rows.num_rows,
        "read_digest": fingerprint(rows),
        "rows_total": rows.num_rows,
        "distinct_keys": len(rows.column("key").unique()),
    }


# --------------------------------------------------------------------------------------
# Z-order: lakeline clustering against deltalake's optimize.z_order.


def _zbuild(system: str, workdir: Path, spec: dict[str, Any]) -> dict[str, Any]:
    import pyarrow.parquet as pq

    path, target = table_path(workdir, system), int(spec["z_target_bytes"])
    batches = [workdir / "input" / f"z_{i:02d}.parquet" for i in range(spec["appends"])]
    detail: dict[str, Any] = {"target_bytes": target}
    if system == DELTA:
        import deltalake

        t0 = time.perf_counter()
        for b in batches:
            deltalake.write_deltalake(str(path), pq.read_table(b), mode="append")
        detail["append_s"] = time.perf_counter() - t0
        detail["files_before"] = len(deltalake.DeltaTable(str(path)).file_uris())
        metrics, seconds = _timed(
            lambda: deltalake.DeltaTable(str(path)).optimize.z_order(list(Z_COLUMNS), target_size=target)
        )
        detail["metrics"] = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str))}
        detail["files_after"] = len(deltalake.DeltaTable(str(path)).file_uris())
    else:
        from lakeline.table import Table

        t0 = time.perf_counter()
        t = Table.create(
            str(path),
            data.SCHEMA,
            record_key="key",
            ordering_field="ts",
            table_type="cow",
            properties=zorder_properties(target),
        )
        for b in batches:
            t.insert(pq.read_table(b))
        detail["append_s"] = time.perf_counter() - t0
        detail["files_before"] = len(Table.open(str(path)).scan().files())
        idx, detail["index_s"] = _timed(lambda: Table.open(str(path)).indexes.create("column_stats"))
        if idx.state != "ready":
            raise RuntimeError(f"index {idx.name} is {idx.state} after create")
        res, seconds = _timed(
            lambda: Table.open(str(path)).services.cluster(sort_by=list(Z_COLUMNS), strategy="zorder")
        )
        if res.aborted:
            raise RuntimeError(f"clustering aborted: {res.aborted}")
        detail["stats"] = dict(res.stats)
        detail["files_after"] = len(Table.open(str(path)).scan().files())
    return {"seconds": seconds, "detail": detail}


def run_child(system: str, step: str, workdir: Path, profile: Path | None = None) -> dict[str, Any]:
    """Run one step of one system and describe it (a child process's whole job).
    ``profile`` is :func:`bench.write.child.child_main`'s option, unused here: cProfile
    sees only the calling thread, and compaction runs in the engine's threads."""
    spec = json.loads((workdir / "spec.json").read_text())
    # Libraries are imported before any timer starts, as the other benchmarks do.
    if system == DELTA:
        import deltalake  # noqa: F401
    else:
        import lakeline.table  # noqa: F401
    import pyarrow.dataset  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    out: dict[str, Any] = {"system": system, "step": step, "ok": False, "base_rss": _maxrss()}
    name, _, phase = step.partition("@")
    if (system, step) == (MOR, "build"):
        out.update(_build_mor(workdir, spec))
    elif (system, name) == (PLAIN, "plain"):
        out.update(_plain(workdir))
    elif (system, step) == (MOR, "compact"):
        out.update(_compact(workdir))
    elif system == MOR and name in MOR_READS and phase in PHASES:
        out.update(_mor_read(workdir, spec, name))
    elif system in ZSYSTEMS and step == "zbuild":
        out.update(_zbuild(system, workdir, spec))
    elif system in ZSYSTEMS and step in ZQUERIES:
        out.update(_query(system, table_path(workdir, system), spec["z_queries"][step]))
    else:
        raise ValueError(f"unknown step {system}/{step}")
    out["peak_rss"] = _maxrss()
    out["ok"] = True
    return out
