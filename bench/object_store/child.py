"""One measurement of the object-store benchmark, in a fresh process.

Why a process each: a commit rate or an open time is only honest without the caches,
connections and warm imports of the run before it. ``python -m bench.object_store.child
MODE WORKDIR PARAMS_JSON`` prints its result after :data:`MARK`:

* ``commits``: ``upserts`` one-row upserts into a small table (built by the parent)
  through one table handle, each timed; with ``count``, the same upserts into a twin table
  through the counting proxy (:mod:`.wire`), started only then so it cannot slow the
  timed ones;
* ``open``: ``Table.open`` + ``t.timeline`` (and, apart, planning a full scan) of a
  table built beforehand; with ``count``, through the proxy, counted per phase.

The store comes from ``WORKDIR/store.json`` (:class:`bench.write.object_store.StoreConfig`).
"""

from __future__ import annotations

import json
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any

MARK = "OBJECT_STORE_BENCH_RESULT "


def one_row_batches(existing: int, n: int, round_: int) -> list[Any]:
    """``n`` updates of distinct existing keys (a larger ``ts`` each round), in a fixed
    random order, one row per table."""
    import pyarrow as pa

    from .. import data

    batch = data.shuffled(data.update_batch(existing, n, round_))
    return [batch.take(pa.array([i])) for i in range(batch.num_rows)]


class LakelineCommits:
    def __init__(self, uri: str, table_type: str, properties: dict[str, str]) -> None:
        from lakeline.table import Table

        self.uri, self.table_type, self.properties, self.Table = uri, table_type, properties, Table

    def build(self, rows: Any, options: dict[str, str]) -> None:
        from .. import data

        t = self.Table.create(
            self.uri,
            data.SCHEMA,
            record_key="key",
            ordering_field="ts",
            table_type=self.table_type,
            properties=self.properties,
            storage_options=options,
        )
        t.insert(rows)

    def open(self, options: dict[str, str]) -> Any:
        return self.Table.open(self.uri, storage_options=options)

    def upsert(self, handle: Any, row: Any) -> dict[str, float]:
        res = handle.upsert(row)
        if res.hook_errors:  # an inline service failed after the commit: not a clean run
            raise RuntimeError(f"inline services failed: {res.hook_errors}")
        return dict(res.timings)

    def scan(self, options: dict[str, str]) -> Any:
        return self.Table.open(self.uri, storage_options=options).to_arrow(columns=["key", "ts"])


class DeltaCommits:
    def __init__(self, uri: str) -> None:
        import deltalake

        self.uri, self.dl = uri, deltalake

    def build(self, rows: Any, options: dict[str, str]) -> None:
        self.dl.write_deltalake(self.uri, rows, storage_options=options)

    def open(self, options: dict[str, str]) -> Any:
        return self.dl.DeltaTable(self.uri, storage_options=options)

    def upsert(self, handle: Any, row: Any) -> dict[str, float]:
        # The write benchmark's merge: one handle, which each merge moves to its version.
        (
            handle.merge(source=row, predicate="t.key = s.key", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        return {}

    def scan(self, options: dict[str, str]) -> Any:
        import pyarrow as pa

        t = self.dl.DeltaTable(self.uri, storage_options=options).to_pyarrow_dataset().to_table(columns=["key", "ts"])
        return t.cast(pa.schema([("key", pa.string()), ("ts", pa.int64())]))


#: The systems and how each is built: lakeline's table type and properties, or deltalake.
SYSTEMS: dict[str, tuple[str, dict[str, str]] | None] = {
    "lakeline-cow": ("cow", {}),
    "lakeline-mor": ("mor", {}),
    # Merge-on-read as it is meant to run: compaction inline after a commit whenever a
    # file slice has compaction.delta-commits (5) logs; the default table compacts only
    # when a service runs, so its slice gathers one log per upsert.
    "lakeline-mor-compacting": ("mor", {"inline.services": "compaction"}),
    "deltalake": None,
}


def make(system: str, uri: str) -> LakelineCommits | DeltaCommits:
    if system not in SYSTEMS:
        raise ValueError(f"unknown system {system!r}")
    how = SYSTEMS[system]
    return DeltaCommits(uri) if how is None else LakelineCommits(uri, *how)


def upserted(sys_: LakelineCommits | DeltaCommits, options: dict[str, str], small: int, keys: set[str]) -> bool:
    """Whether every upsert landed as an update: no row added, exactly ``keys`` carry an
    update's ``ts`` (untimed; the same check on every system)."""
    import pyarrow.compute as pc

    from .. import data

    every = sys_.scan(options)
    newer = every.filter(pc.greater_equal(every.column("ts"), data.UPDATE_TS))
    return every.num_rows == small and set(newer.column("key").to_pylist()) == keys


def build(system: str, uri: str, rows: int, options: dict[str, str], count: bool) -> None:
    """The small table a ``commits`` child upserts into (and, with ``count``, its twin):
    built by the parent, so a child's time and memory are its upserts' alone, and a
    lakeline child does not run the store's probe (which only creating a table does)."""
    from .. import data

    batch = data.append_batch(0, rows)
    for at in [uri, twin_uri(uri)] if count else [uri]:
        make(system, at).build(batch, options)


def twin_uri(uri: str) -> str:
    return uri + "-counted"


def commits(p: dict[str, Any], options: dict[str, str]) -> dict[str, Any]:
    """``p['upserts']`` timed one-row upserts into the table :func:`build` made; with
    ``count``, the same upserts into its twin, through the counting proxy."""
    from .. import data
    from .wire import counting_proxy, summarize

    n, small = p["upserts"], p["rows"]
    rows = one_row_batches(small, n, 0)
    keys = set(data.update_batch(small, n, 0).column("key").to_pylist())
    sys_ = make(p["system"], p["uri"])
    handle = sys_.open(options)
    latencies, phases = [], []
    t_loop = time.perf_counter()
    for row in rows:
        t0 = time.perf_counter()
        phases.append(sys_.upsert(handle, row))
        latencies.append(time.perf_counter() - t0)
    out: dict[str, Any] = {"loop_s": time.perf_counter() - t_loop, "latencies": latencies, "phases": phases}
    out["updated_ok"] = upserted(sys_, options, small, keys)
    if p.get("count"):
        # A table of its own, so the counted commits are the timed ones' twins (the
        # same slice state), not the ones after them.
        twin = make(p["system"], twin_uri(p["uri"]))
        proxy, tap = counting_proxy(options["AWS_ENDPOINT_URL"])
        try:
            handle = twin.open(options | {"AWS_ENDPOINT_URL": proxy.endpoint})
            before = tap.snapshot()
            for row in rows:
                twin.upsert(handle, row)
            out["wire"] = summarize(tap.snapshot() - before, n)
        finally:
            proxy.stop()
        out["updated_ok"] = out["updated_ok"] and upserted(twin, options, small, keys)
    return out


def open_table(p: dict[str, Any], options: dict[str, str]) -> dict[str, Any]:
    """``Table.open`` + ``t.timeline``, then planning a full scan, each timed (and counted)."""
    t0 = time.perf_counter()
    from lakeline.table import Table

    t1 = time.perf_counter()
    proxy = tap = None
    if p.get("count"):
        from .wire import counting_proxy

        proxy, tap = counting_proxy(options["AWS_ENDPOINT_URL"])
        options = options | {"AWS_ENDPOINT_URL": proxy.endpoint}
    try:
        t2 = time.perf_counter()
        table = Table.open(p["uri"], storage_options=options)
        timeline = table.timeline
        t3 = time.perf_counter()
        after_open = tap.snapshot() if tap is not None else None
        files = table.scan().files()
        t4 = time.perf_counter()
        out: dict[str, Any] = {
            "import_s": t1 - t0,
            "open_s": t3 - t2,
            "plan_s": t4 - t3,
            "events": timeline.last_seq + 1,
            "files": len(files),
        }
        if tap is not None and after_open is not None:
            from .wire import summarize

            out["wire_open"] = summarize(after_open, 1)
            out["wire_plan"] = summarize(tap.snapshot() - after_open, 1)
    finally:
        if proxy is not None:
            proxy.stop()
    return out


def main(argv: list[str]) -> int:
    from ..write.object_store import StoreConfig

    mode, workdir, params = argv[0], Path(argv[1]), json.loads(argv[2])
    try:
        store = StoreConfig.load(workdir)
        if store is None:
            raise RuntimeError(f"no store.json in {workdir}")
        fn = {"commits": commits, "open": open_table}[mode]
        out = {"ok": True, **fn(params, store.options)}
    except Exception as e:  # noqa: BLE001 - reported to the parent as a failed measurement
        out = {"ok": False, "error": f"{type(e).__name__}: {e}"[:500], "traceback": traceback.format_exc()[-3000:]}
    out["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    sys.stdout.write("\n" + MARK + json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
