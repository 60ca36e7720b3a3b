"""Indexes on real tables: the index API, and scans pruned by stats and bloom filters
returning exactly what an unpruned read returns. Writers keeping indexes current (a failed
write, a create racing a writer) are in ``test_on_commit.py``."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.indexes.metadata_table import MetadataTable
from lakeline.table import Table
from lakeline.timeline.errors import DuplicateKeyError, IndexExistsError, IndexNotFoundError, InvalidIndexError

from tests.indexes.table_index_helpers import DAYS, index_rows, index_table


def _leaf(rng: random.Random, max_id: int) -> pc.Expression:
    col = rng.choice(["id", "id", "v", "s", "f", "day"])
    f = pc.field(col)
    if col == "id":
        x = rng.randint(0, max_id)
        return rng.choice([f == x, f < x, f >= x, f != x, f.isin(rng.sample(range(max_id + 1), 3)), f > x])
    if col == "v":
        x = rng.randint(0, 1000)
        return rng.choice([f == x, f <= x, f > x, f.is_null(), ~f.is_null(), f.isin([x, x + 1])])
    if col == "s":
        x = rng.choice(["a", "b", "k7", "zz"])
        return rng.choice([f == x, f < x, f.is_null(), f != x, f.isin([x, "c"])])
    if col == "f":
        return rng.choice([f > rng.uniform(-6, 6), f.is_null(), f <= 0.0])
    return f == rng.choice(DAYS)


def _pred(rng: random.Random, max_id: int, depth: int = 0) -> pc.Expression:
    r = rng.random()
    if depth < 2 and r < 0.2:
        return _pred(rng, max_id, depth + 1) & _pred(rng, max_id, depth + 1)
    if depth < 2 and r < 0.3:
        return _pred(rng, max_id, depth + 1) | _pred(rng, max_id, depth + 1)
    if depth < 2 and r < 0.35:
        return ~_pred(rng, max_id, depth + 1)
    return _leaf(rng, max_id)


def _sorted(t: pa.Table) -> list[dict[str, Any]]:
    return sorted(t.to_pylist(), key=lambda r: r["id"])


def _random_history(t: Table, rng: random.Random, steps: int, next_id: int = 0) -> int:
    for _ in range(steps):
        op = rng.random()
        if op < 0.45 or next_id < 50:
            ids = list(range(next_id, next_id + rng.randint(20, 120)))
            next_id += len(ids)
            t.insert(index_rows(rng, ids))
        elif op < 0.75:
            t.upsert(index_rows(rng, rng.sample(range(next_id), rng.randint(1, 40))))
        elif op < 0.9:
            t.delete(pa.table({"id": pa.array(rng.sample(range(next_id), rng.randint(1, 20)), pa.int64())}))
        else:
            t.delete_where(pc.field("v") < rng.randint(0, 100))
    return next_id


@pytest.mark.parametrize(
    "kind,scans",
    [
        # 100 random filters: both pruning kinds happen within them (the seeds are fixed);
        # a merge-on-read scan merges logs, so 250 of them took 38 s in make test and
        # 1,000 of them 210 s: the long runs are soak.
        ("cow", 100),
        ("mor", 100),
        pytest.param("cow", 1000, marks=pytest.mark.soak),
        pytest.param("mor", 1000, marks=pytest.mark.soak),
    ],
)
def test_pruned_scans_equal_unpruned_and_validate_is_clean(tmp_path: Path, kind: str, scans: int) -> None:
    rng = random.Random(42 if kind == "cow" else 43)
    t = index_table(tmp_path, kind)
    start = _random_history(t, rng, 6)
    # One index built over existing files, one kept current by writers from the start
    # of its life, then more writes for both.
    t.indexes.create("column_stats")
    t.indexes.create("bloom_filters", options={"fpp": 0.05})
    t.indexes.create("bloom_filters", columns=["s"], name="bloom_s")  # a non-key column
    assert {(d.name, d.state) for d in t.indexes.list()} == {
        ("column_stats", "ready"),
        ("bloom_filters", "ready"),
        ("bloom_s", "ready"),
    }
    max_id = _random_history(t, rng, 14, start) + 200
    report = t.indexes.validate()
    assert report["mismatches"] == [] and report["files_checked"] > 0
    whole = t.to_arrow()
    pruned_stats = pruned_bloom = 0
    for _ in range(scans):
        flt = _pred(rng, max_id)
        s = t.scan(filter=flt)
        got = s.to_arrow()
        want = whole.filter(flt)
        assert _sorted(got) == _sorted(want), str(flt)
        ex = s.explain()
        assert (
            ex["files_total"]
            >= ex["files_after_partition_pruning"]
            >= ex["files_after_stats_pruning"]
            >= ex["files_after_bloom_pruning"]
            == len(s.files())
        )
        pruned_stats += ex["files_after_partition_pruning"] > ex["files_after_stats_pruning"]
        pruned_bloom += ex["files_after_stats_pruning"] > ex["files_after_bloom_pruning"]
    assert pruned_stats > 0  # merge-on-read too: key ranges bound slices with logs
    if kind == "cow":
        assert pruned_bloom > 0  # merge-on-read slices with logs are never bloom-pruned


def test_point_lookup_reads_one_file_and_time_travel_ignores_later_indexes(tmp_path: Path) -> None:
    rng = random.Random(5)
    t = index_table(tmp_path, "cow")
    first = t.insert(index_rows(rng, list(range(400)))).instant
    t.insert(index_rows(rng, list(range(400, 800))))
    t.indexes.create("bloom_filters")
    s = t.scan(filter=pc.field("id") == 123)
    ex = s.explain()
    assert ex["files_after_bloom_pruning"] <= 2 < ex["files_total"]
    assert s.to_arrow().column("id").to_pylist() == [123]
    old = t.scan(filter=pc.field("id") == 123, as_of=first.id).explain()
    assert old["files_after_bloom_pruning"] == old["files_after_partition_pruning"]


def test_index_api_errors_drop_and_recreate(tmp_path: Path) -> None:
    rng = random.Random(9)
    t = index_table(tmp_path, "mor")
    t.insert(index_rows(rng, list(range(100))))
    with pytest.raises(InvalidIndexError):
        t.indexes.create("record_index", columns=["v"])  # the key only
    with pytest.raises(InvalidIndexError):
        t.indexes.create("column_stats", columns=["nope"])
    t.indexes.create("column_stats", columns=["v", "s"])
    with pytest.raises(IndexExistsError):
        t.indexes.create("column_stats")
    mt = MetadataTable(t.storage)
    [part] = [d.partition for d in t.indexes.list()]  # <name>@<creating instant>
    assert part in mt.indexes_on_storage()
    t.indexes.drop("column_stats")
    assert t.indexes.list() == []
    assert part not in mt.indexes_on_storage()
    with pytest.raises(IndexNotFoundError):
        t.indexes.drop("column_stats")
    with pytest.raises(IndexNotFoundError):
        t.indexes.validate("column_stats")
    # Writers stop writing a dropped index; a re-created one is complete again.
    t.upsert(index_rows(rng, list(range(50, 150))))
    assert part not in mt.indexes_on_storage()
    t.indexes.create("column_stats")
    t.upsert(index_rows(rng, list(range(30))))
    assert t.indexes.validate()["mismatches"] == []
    actions = [i.action for i in t.timeline.instants()]
    assert actions.count("indexing") == 3


def test_validate_reports_a_damaged_entry(tmp_path: Path) -> None:
    rng = random.Random(11)
    t = index_table(tmp_path, "cow")
    t.insert(index_rows(rng, list(range(300))))
    t.indexes.create("bloom_filters")
    t.insert(index_rows(rng, list(range(300, 400))))
    # Simulate a lost delta: the newest instant's entries vanish.
    mt = MetadataTable(t.storage)
    last = t.timeline.last_completed()
    [part] = [d.partition for d in t.indexes.list()]
    assert last is not None and mt.has_updates(part, last.id)
    for info in t.storage.list_files(t.storage.path(mt.rel_dir(part))):
        if f"delta_{last.id}_" in info.path:
            t.storage.delete(info.path)
    report = t.indexes.validate("bloom_filters")
    assert report["mismatches"] and all(m["problem"] == "missing" for m in report["mismatches"])


def test_ndv_per_table_and_partition_and_metadata_compaction(tmp_path: Path) -> None:
    rng = random.Random(3)
    t = index_table(tmp_path, "cow")
    with pytest.raises(IndexNotFoundError):
        t.indexes.ndv("id")
    t.indexes.create("column_stats")
    for start in range(0, 3000, 500):
        t.insert(index_rows(rng, list(range(start, start + 500))))
    whole = t.to_arrow()
    assert t.indexes.ndv("id").estimate == pytest.approx(3000, rel=0.03)
    d1 = whole.filter(pc.field("day") == "d1")
    exact = len(set(d1.column("s").to_pylist()) - {None})
    assert t.indexes.ndv("s", partition="day=d1").estimate == pytest.approx(exact, rel=0.03)
    before = t.scan(filter=pc.field("id") < 100).explain()
    assert t.indexes.compact()
    mt = MetadataTable(t.storage)
    [part] = [d.partition for d in t.indexes.list()]
    names = [i.path.rsplit("/", 1)[-1] for i in t.storage.list_files(t.storage.path(mt.rel_dir(part)))]
    assert len(names) == 1 and names[0].startswith("base_")
    assert t.scan(filter=pc.field("id") < 100).explain() == before
    assert t.indexes.validate()["mismatches"] == []


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_tagging_probes_key_blooms_before_reading_keys(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakeline.table.write import tagging

    schema = pa.schema([("id", pa.int64()), ("v", pa.int64())])
    tables = {}
    for name in ("indexed", "plain"):
        t = Table.create(
            tmp_path / name, schema, record_key="id", table_type=kind, properties={"write.small-file-limit-bytes": 0}
        )  # one file per insert
        for b in range(4):  # interleaved keys: every file spans the whole key range
            t.insert(pa.table({"id": list(range(b, 4000, 4)), "v": [0] * 1000}, schema=schema))
        tables[name] = t
    tables["indexed"].indexes.create("bloom_filters", options={"fpp": 1e-6})
    read: list[str] = []
    real = tagging.slice_live_keys

    def counting(task: tagging.SliceKeys) -> pa.Table:
        read.append(task.slice.file_group)
        return real(task)

    monkeypatch.setattr(tagging, "slice_live_keys", counting)
    ups = pa.table({"id": [8, 12, 400], "v": [1, 1, 1]}, schema=schema)  # all in the first file
    fresh = pa.table({"id": [5001, 6002], "v": [2, 2]}, schema=schema)
    for name, t in tables.items():
        read.clear()
        t.upsert(ups)
        upsert_reads = len(read)
        read.clear()
        t.insert(fresh)  # the key check of an insert tags too
        insert_reads = len(read)
        if name == "indexed":
            assert upsert_reads == 1 and insert_reads == 0
        else:
            assert upsert_reads == 4 and insert_reads == 0  # new keys lie outside every key range
    want, got = _sorted(tables["plain"].to_arrow()), _sorted(tables["indexed"].to_arrow())
    assert got == want and len(got) == 4002
    read.clear()
    inside = pa.table({"id": [1, 3999], "v": [3, 3]}, schema=schema)  # both exist, in two files
    with pytest.raises(DuplicateKeyError):
        tables["indexed"].insert(inside)
    # mor: the first group has a log since the upsert, and a slice with logs is always read
    assert len(read) == (2 if kind == "cow" else 3)
    assert tables["indexed"].indexes.validate()["mismatches"] == []


def test_merge_on_read_slices_with_logs_are_pruned_by_their_files_entries(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("ts", pa.int64())])
    # Four groups, one per insert (merge-on-read fills small groups through logs otherwise).
    t = Table.create(
        tmp_path / "t", schema, record_key="id", table_type="mor", properties={"write.small-file-limit-bytes": 0}
    )
    for b in range(4):
        t.insert(
            pa.table(
                {"id": list(range(b * 100, b * 100 + 100)), "ts": list(range(b * 100, b * 100 + 100))}, schema=schema
            )
        )
    t.indexes.create("column_stats")
    t.indexes.create("bloom_filters", columns=["ts"], name="bloom_ts")
    # Every group gets a log: updated rows move to ts >= 10,000; one row of group 2 is deleted.
    t.upsert(pa.table({"id": [5, 105, 205, 305], "ts": [10_005, 10_105, 10_205, 10_305]}, schema=schema))
    t.delete(pa.table({"id": [250]}))
    slices = t.view(t.timeline).latest_slices()
    assert len(slices) == 4 and all(s.logs for s in slices)
    for ts, rows in [(150, [{"id": 150, "ts": 150}]), (10_205, [{"id": 205, "ts": 10_205}]), (250, []), (205, [])]:
        scan = t.scan(filter=pc.field("ts") == ts)
        assert scan.to_arrow().to_pylist() == rows
        ex = scan.explain()
        assert ex["file_groups"] <= 1 and ex["files_after_bloom_pruning"] <= 3, (ts, ex)  # a base and its logs
    assert t.indexes.validate()["mismatches"] == []
