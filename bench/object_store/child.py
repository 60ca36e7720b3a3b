"""One measurement of the object-store benchmark, in a fresh process.

Why a process each: a commit rate or an open time is only honest without the caches,
connections and warm imports of the run before it. ``python -m bench.object_store.child
MODE WORKDIR PARAMS_JSON`` prints its result after :data:`MARK`:

* ``commits``: build a small table (untimed), then ``upserts`` one-row upserts through
  one table handle, each timed; with ``count``, as many again through the counting proxy
  (:mod:`.wire`), started only then so it cannot slow the timed ones;
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
    def __init__(self, uri: str, table_type: str) -> None:
        from lakeline.table import Table

        self.uri, self.table_type, self.Table = uri, table_type, Table

    def build(self, rows: Any, options: dict[str, str]) -> None:
        from .. import data

        t = self.Table.create(
            self.uri,
            data.SCHEMA,
            record_key="key",
            ordering_field="ts",
            table_type=self.table_type,
            storage_options=options,
        )
        t.insert(rows)

    def open(self, options: dict[str, str]) -> Any:
        return self.Table.open(self.uri, storage_options=options)

    def upsert(self, handle: Any, row: Any) -> dict[str, float]:
        return dict(handle.upsert(row).timings)

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


def make(system: str, uri: str) -> LakelineCommits | DeltaCommits:
    if system in ("lakeline-cow", "lakeline-mor"):
        return LakelineCommits(uri, system.rsplit("-", 1)[1])
    if system == "deltalake":
        return DeltaCommits(uri)
    raise ValueError(f"unknown system {system!r}")


def commits(p: dict[str, Any], options: dict[str, str]) -> dict[str, Any]:
    """Build, then ``p['upserts']`` timed one-row upserts (and as many counted ones)."""
    import pyarrow.compute as pc

    from .. import data
    from .wire import counting_proxy, summarize

    n, small = p["upserts"], p["rows"]
    sys_ = make(p["system"], p["uri"])
    sys_.build(data.append_batch(0, small), options)
    handle = sys_.open(options)
    latencies, phases = [], []
    t_loop = time.perf_counter()
    for row in one_row_batches(small, n, 0):
        t0 = time.perf_counter()
        phases.append(sys_.upsert(handle, row))
        latencies.append(time.perf_counter() - t0)
    out: dict[str, Any] = {"loop_s": time.perf_counter() - t_loop, "latencies": latencies, "phases": phases}
    updated = set(one_row_batches_keys(small, n, 0))
    if p.get("count"):
        proxy, tap = counting_proxy(options["AWS_ENDPOINT_URL"])
        try:
            handle = sys_.open(options | {"AWS_ENDPOINT_URL": proxy.endpoint})
            before = tap.snapshot()
            for row in one_row_batches(small, n, 1):
                sys_.upsert(handle, row)
            out["wire"] = summarize(tap.snapshot() - before, n)
        finally:
            proxy.stop()
        updated |= set(one_row_batches_keys(small, n, 1))
    # Untimed: every upsert landed as an update (no row added, the updated keys carry
    # the new ts), the same on every system.
    every = sys_.scan(options)
    newer = every.filter(pc.greater_equal(every.column("ts"), data.UPDATE_TS))
    out["rows_total"] = every.num_rows
    out["rows_updated"] = newer.num_rows
    out["updated_ok"] = every.num_rows == small and set(newer.column("key").to_pylist()) == updated
    return out


def one_row_batches_keys(existing: int, n: int, round_: int) -> list[str]:
    from .. import data

    return data.update_batch(existing, n, round_).column("key").to_pylist()


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
