"""The record-level index on real tables (issue 30, item 1): exact after every kind of write
and service, the same tags and key-check answers as reading the data, key-pinned scans
reading only the files that hold the keys, bad options refused before anything is
written, and ``validate`` finding what is wrong.

Random 32-hex keys (what CDC from a database with UUID keys delivers), small files and
few buckets, so a short run crosses many files, folds and buckets.
"""

from __future__ import annotations

import json
import random
import time
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from lakeline.indexes.integrity import seal_bytes
from lakeline.indexes.metadata_table import MetadataTable
from lakeline.indexes.record_index.live_entries import live_entries
from lakeline.indexes.record_index.lookup import RecordIndexReader
from lakeline.indexes.record_index.lookup import tag as index_tag
from lakeline.indexes.record_index.rows import OP, OP_DELETE, PARTIAL_META, entry_schema
from lakeline.indexes.record_index.store import newest_generation, partition_dir, read_entries, write_entries
from lakeline.table import Table
from lakeline.table.engine import LocalEngine
from lakeline.table.write import records
from lakeline.table.write.tagging import tag as data_tag
from lakeline.timeline.diagnostics.faults import CRASH_EXIT_CODE
from lakeline.timeline.errors import DuplicateKeyError, InvalidIndexError, InvalidIndexOptionsError, MetadataTableError
from lakeline.timeline.instant import Instant

from tests.helpers import CHILDREN, run_script

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
DAYS = ["d0", "d1", "d2"]
HEARTBEAT = {"heartbeat.interval-ms": 100, "heartbeat.tolerable-misses": 1}

pytestmark = pytest.mark.usefixtures("no_faults")


def day_of(key: str) -> str:
    # The partition follows from the key, so (partition, key) identity is the key's.
    return DAYS[int(key[:2], 16) % len(DAYS)]


def rows(keys: list[str], v: int) -> pa.Table:
    return pa.table({"id": keys, "day": [day_of(k) for k in keys], "v": [v] * len(keys)}, schema=SCHEMA)


def new_keys(rng: random.Random, n: int) -> list[str]:
    return [f"{rng.getrandbits(128):032x}" for _ in range(n)]


def make(tmp: Path, kind: str, **props: object) -> Table:
    return Table.create(
        tmp / kind,
        SCHEMA,
        record_key="id",
        ordering_field=None,
        partition_by=["day"],
        table_type=kind,
        properties={"write.target-file-size-bytes": 6000, "metadata.compact.max-deltas": 3, **HEARTBEAT, **props},
    )


def assert_index_exact(t: Table, probe: list[str]) -> None:
    """``validate`` finds nothing, and tagging ``probe`` from the index gives what
    tagging it by reading the data gives, in every partition, with and without
    positions (merge-on-read only: copy-on-write writes never ask them, and a
    rewrite's entries are its changes, which name no row)."""
    report = t.indexes.validate("record_index")
    assert report["mismatches"] == [], report["mismatches"][:5]
    snapshot = t.timeline
    cfg = t.config
    reader = RecordIndexReader.open(t.storage, snapshot, cfg.schema, cfg.record_key)
    assert reader is not None, "a ready record index serves the current snapshot"
    view = t.view(snapshot)
    keys = pa.table({"id": probe})
    for day in DAYS:
        slices = view.latest_slices(f"day={day}")
        for positions in (False, True) if cfg.table_type == "mor" else (False,):
            want = data_tag(t.storage, LocalEngine(1), slices, keys, cfg.record_key, None, positions)
            got = index_tag(reader, slices, keys, positions)
            assert got[0].to_pylist() == want[0].to_pylist(), (day, positions)
            assert got[1].to_pylist() == want[1].to_pylist(), (day, positions)


def failed_write(t: Table, keys: list[str]) -> None:
    """An upsert whose process dies right before its completion (files and index
    deltas written), then rolled back once its heartbeat expired."""
    spec = {"op": "upsert", "rows": rows(keys, -1).to_pylist()}
    rc, _, err = run_script(
        CHILDREN / "table_workers.py", ["op", t.path, None, spec], faults="commit.before_complete=crash"
    )
    assert rc == CRASH_EXIT_CODE, err[-2000:]
    time.sleep(0.3)
    t.services.rollback_failed()


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_exact_through_every_write_and_service(tmp_path: Path, kind: str) -> None:
    rng = random.Random(30 if kind == "cow" else 31)
    t = make(tmp_path, kind)
    model: dict[str, int] = {}
    gone: list[str] = []
    keys = new_keys(rng, 400)
    t.insert(rows(keys, 0))
    model.update(dict.fromkeys(keys, 0))
    t.indexes.create("record_index", options={"buckets": 5})
    steps = ["insert", "upsert", "delete", "upsert", "compact", "delete", "cluster", "clean", "rollback"]
    steps += [rng.choice(steps[:-1]) for _ in range(9)] + ["overwrite", "upsert", "delete"]
    for n, step in enumerate(steps, start=1):
        live = sorted(model)
        if step == "insert":
            fresh = new_keys(rng, rng.randint(20, 120)) + rng.sample(gone, min(len(gone), 5))
            t.insert(rows(fresh, n))
            model.update(dict.fromkeys(fresh, n))
        elif step == "upsert":
            mixed = rng.sample(live, min(len(live), rng.randint(10, 80))) + new_keys(rng, 30)
            t.upsert(rows(mixed, n))
            model.update(dict.fromkeys(mixed, n))
        elif step == "delete":
            doomed = rng.sample(live, min(len(live), rng.randint(5, 60)))
            t.delete(pa.table({"id": doomed + new_keys(rng, 3)}))  # some are not there
            for k in doomed:
                del model[k]
            gone.extend(doomed)
        elif step == "compact":
            t.services.compact()
        elif step == "cluster":
            t.services.cluster(sort_by=["id"])
        elif step == "clean":
            t.services.clean(policy="keep_latest_commits", retain=1, orphan_age_ms=0, dry_run=False)
        elif step == "rollback":
            failed_write(t, rng.sample(live, 5) + new_keys(rng, 5))
        elif step == "overwrite":
            # Replace one partition: its keys are now exactly these.
            fresh = [k for k in new_keys(rng, 90) if day_of(k) == "d1"]
            t.overwrite(rows(fresh, n), partitions=["day=d1"])
            model = {k: v for k, v in model.items() if day_of(k) != "d1"} | dict.fromkeys(fresh, n)
        got = t.to_arrow()
        assert dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist())) == model, step
        probe = rng.sample(sorted(model), min(len(model), 60)) + rng.sample(gone, min(len(gone), 20))
        assert_index_exact(t, probe + new_keys(rng, 10))
    assert newest_generation(t.storage, t.indexes.list()[0].partition).seq > 0, "folds happened"


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_writes_tag_through_the_index_and_read_no_data(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a ready index, the insert key check, upserts and deletes never go through
    the data-reading tagger; a key the table holds is still refused by an insert."""
    rng = random.Random(7)
    t = make(tmp_path, kind)
    keys = new_keys(rng, 300)
    t.insert(rows(keys, 0))
    t.indexes.create("record_index")

    def no_data_tag(*args: object, **kwargs: object) -> None:
        raise AssertionError("tagged by reading data files")

    monkeypatch.setattr("lakeline.table.write.operations.tag", no_data_tag)
    fresh = new_keys(rng, 50)
    t.insert(rows(fresh, 1))
    with pytest.raises(DuplicateKeyError):
        t.insert(rows([keys[3], *new_keys(rng, 2)], 2))
    t.upsert(rows(keys[:40] + new_keys(rng, 5), 3))
    t.delete(pa.table({"id": keys[40:60]}))
    monkeypatch.undo()
    got = t.to_arrow()
    assert got.num_rows == 300 + 50 + 5 - 20
    assert set(keys[40:60]).isdisjoint(got.column("id").to_pylist())
    assert set(got.filter(pc.equal(got.column("v"), 3)).column("id").to_pylist()) >= set(keys[:40])
    assert_index_exact(t, keys[:100] + fresh)


def test_copy_on_write_rewrite_indexes_its_changes_only(tmp_path: Path) -> None:
    """A copy-on-write upsert or delete gives the index one entry per key it changes,
    not one per row of the files it rewrites; the chain its delta names keeps tagging,
    validate and a fold exact, and positions are refused rather than guessed."""
    rng = random.Random(5)
    t = make(tmp_path, "cow", **{"metadata.compact.max-deltas": 100})
    keys = new_keys(rng, 400)
    t.insert(rows(keys, 0))
    t.indexes.create("record_index", options={"buckets": 3})
    partition = t.indexes.list()[0].partition
    mt = MetadataTable(t.storage)

    def delta_of(instant: Instant | None) -> pa.Table:
        assert instant is not None
        [path] = mt.deltas(partition)[instant.id]
        return pq.read_table(path)

    r = t.upsert(rows(keys[:12], 1))
    entries = delta_of(r.instant)
    rewritten = sum(f.rows for f in t.view(t.timeline).files() if r.instant is not None and f.instant == r.instant.id)
    assert entries.num_rows == 12 < rewritten, (entries.num_rows, rewritten)
    partial = json.loads(entries.schema.metadata[PARTIAL_META.encode()])
    assert set(partial) == set(entries.column("path").cast(pa.string()).to_pylist())
    d = t.delete(pa.table({"id": keys[12:20]}))
    assert delta_of(d.instant).column("deleted").to_pylist() == [True] * 8
    assert_index_exact(t, keys[:40] + new_keys(rng, 5))
    cfg = t.config
    reader = RecordIndexReader.open(t.storage, t.timeline, cfg.schema, cfg.record_key)
    assert reader is not None and reader.partial
    slices = t.view(t.timeline).latest_slices()
    with pytest.raises(MetadataTableError):
        index_tag(reader, slices, pa.table({"id": keys[:5]}), positions=True)
    assert t.indexes.compact("record_index"), "folded"
    assert mt.deltas(partition) == {}
    assert_index_exact(t, keys[:40] + new_keys(rng, 5))
    got = t.to_arrow()
    assert got.num_rows == 392 and set(keys[12:20]).isdisjoint(got.column("id").to_pylist())


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_key_pinned_scan_reads_only_the_files_holding_the_keys(tmp_path: Path, kind: str) -> None:
    rng = random.Random(11)
    t = make(tmp_path, kind)
    keys = new_keys(rng, 600)
    for start in range(0, 600, 200):
        t.insert(rows(keys[start : start + 200], 0))
    t.upsert(rows(keys[:30], 1))
    t.delete(pa.table({"id": keys[30:40]}))
    before = {k: t.scan(filter=pc.field("id") == k).explain() for k in keys[:3]}
    assert all("files_after_record_index_pruning" in e for e in before.values())
    t.indexes.create("record_index")
    view = t.view(t.timeline)
    for filt, pinned, wanted in [
        (pc.field("id") == keys[100], [keys[100]], [keys[100]]),
        (pc.field("id").isin([keys[5], keys[300], keys[35]]), [keys[5], keys[300], keys[35]], [keys[5], keys[300]]),
        ((pc.field("id") == keys[450]) & (pc.field("v") == 0), [keys[450]], [keys[450]]),
        (pc.field("id") == "not-a-key", [], []),
    ]:
        s = t.scan(filter=filt)
        assert sorted(s.to_arrow().column("id").to_pylist()) == sorted(wanted)
        # Exactly the groups a file of which holds a record of a pinned key (a merge-on-
        # read delete record of keys[35] included): every file of those, no other.
        holders = {s2.file_group for s2 in view.latest_slices() for k in pinned if _holds(t, s2, k)}
        assert {_group_of(view, p) for p in s.files()} == holders
        e = s.explain()
        assert e["files_after_record_index_pruning"] == len(s.files()) <= e["files_after_bloom_pruning"]
    # Unpinned filters are not pruned by it.
    e = t.scan(filter=pc.field("v") == 1).explain()
    assert e["files_after_record_index_pruning"] == e["files_after_bloom_pruning"]


def _group_of(view: object, abs_path: str) -> str:
    for s in view.latest_slices():  # type: ignore[attr-defined]
        if any(abs_path.endswith(f.path) for f in s.files):
            return str(s.file_group)
    raise AssertionError(abs_path)


def _holds(t: Table, s: object, key: str) -> bool:
    """Whether a file of slice ``s`` holds a record (upsert or delete) of ``key``."""
    import pyarrow.parquet as pq

    for f in s.files:  # type: ignore[attr-defined]
        ids = pq.read_table(t.storage.path(f.path), columns=["id"]).column("id").to_pylist()
        if key in ids:
            return True
    return False


def test_time_travel_before_a_fold_reads_the_data(tmp_path: Path) -> None:
    rng = random.Random(5)
    t = make(tmp_path, "mor")
    keys = new_keys(rng, 200)
    t.insert(rows(keys, 0))
    t.indexes.create("record_index")
    old = t.timeline.last_completed().id
    for i in range(5):  # past metadata.compact.max-deltas: a fold moves the generation on
        t.upsert(rows(keys[i * 10 : i * 10 + 10], i + 1))
    t.delete(pa.table({"id": keys[:5]}))
    assert newest_generation(t.storage, t.indexes.list()[0].partition).seq > t.timeline.get(old).completed_seq
    then = t.to_arrow(filter=pc.field("id") == keys[0], as_of=old)
    assert then.column("v").to_pylist() == [0]
    assert t.to_arrow(filter=pc.field("id") == keys[0]).num_rows == 0
    assert t.to_arrow(filter=pc.field("id") == keys[6]).column("v").to_pylist() == [1]


def test_a_compaction_rewriting_most_of_the_table_folds_the_index_at_once(tmp_path: Path) -> None:
    """A compaction's delta names every row it rewrote; when that is at least half of
    the index it is folded right after the compaction (lookups would decode it whole),
    while a write's small deltas wait for ``metadata.compact.max-deltas``."""
    rng = random.Random(5)
    t = make(tmp_path, "mor", **{"write.target-file-size-bytes": 128 << 20, "metadata.compact.max-deltas": 20})
    keys = new_keys(rng, 60_000)
    t.insert(rows(keys, 0))
    t.indexes.create("record_index", wait=True)
    t.upsert(rows(rng.sample(keys, 300), 1))
    gen = newest_generation(t.storage, t.indexes.list()[0].partition)
    assert gen is not None and MetadataTable(t.storage).delta_count(t.indexes.list()[0].partition) == 1
    done = t.services.compact()
    assert done.instant is not None and done.instant.state == "completed"
    folded = newest_generation(t.storage, t.indexes.list()[0].partition)
    assert folded is not None and folded.seq > gen.seq, "the compaction's delta was folded"
    assert MetadataTable(t.storage).delta_count(t.indexes.list()[0].partition) == 0
    assert_index_exact(t, rng.sample(keys, 50) + new_keys(rng, 5))


def test_bad_definitions_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    t = make(tmp_path, "cow")
    t.insert(rows(new_keys(random.Random(1), 10), 0))
    events = t.timeline.last_seq
    for options in ({"buckets": 0}, {"buckets": -3}, {"buckets": 70000}, {"buckets": "8"}, {"buckets": True}):
        with pytest.raises(InvalidIndexOptionsError):
            t.indexes.create("record_index", options=options)
    with pytest.raises(InvalidIndexOptionsError):
        t.indexes.create("record_index", options={"fpp": 0.01})
    with pytest.raises(InvalidIndexError):
        t.indexes.create("record_index", columns=["v"])
    append_only = Table.create(tmp_path / "append", SCHEMA)
    with pytest.raises(InvalidIndexError):
        append_only.indexes.create("record_index")
    assert t.timeline.last_seq == events and t.indexes.list() == []
    assert not t.storage.exists(t.storage.path(".lakeline", "metadata", "record_index"))


def test_validate_reports_what_is_wrong(tmp_path: Path) -> None:
    rng = random.Random(3)
    t = make(tmp_path, "mor")
    keys = new_keys(rng, 300)
    t.insert(rows(keys, 0))
    t.indexes.create("record_index", options={"buckets": 4})
    t.upsert(rows(keys[:10], 1))
    assert t.indexes.validate("record_index")["mismatches"] == []
    d = t.indexes.list()[0]
    gen = newest_generation(t.storage, d.partition)
    assert gen is not None
    bucket, (rel, n) = sorted(gen.files.items())[0]
    path = t.storage.path(rel)
    stored = read_entries(t.storage, path)
    # One entry lost, one key changed: both reported, naming file and key.
    broken = stored.slice(1).set_column(
        stored.schema.get_field_index("key_0"),
        "key_0",
        pa.concat_arrays([pa.array(["tampered"]), stored.slice(2).column("key_0").combine_chunks()]),
    )
    write_entries(t.storage, rel, broken)
    # The rewritten file no longer matches the seal its manifest recorded: named as damaged.
    problems = [(m["problem"], m["path"]) for m in t.indexes.validate("record_index")["mismatches"]]
    assert problems == [("damaged", rel)], problems
    # Sealed as the manifest records it (as a build would have written it): the entries
    # themselves are compared, and both changes reported, naming file and key.
    (manifest,) = Path(t.storage.path(partition_dir(d.partition))).glob(f"gen_{gen.seq}_{gen.token}.json")
    body = {k: v for k, v in json.loads(manifest.read_text()).items() if k != "checksum"}
    body["files"][str(bucket)][2] = seal_bytes(rel, Path(path).read_bytes()).to_json()
    manifest.write_text(json.dumps({**body, "checksum": zlib.crc32(json.dumps(body, sort_keys=True).encode())}))
    problems = sorted(m["problem"] for m in Table.open(t.path).indexes.validate("record_index")["mismatches"])
    assert problems == ["differs", "missing"], problems
    t.indexes.rebuild("record_index")
    assert t.indexes.validate("record_index")["mismatches"] == []


def test_constants_match_the_write_path() -> None:
    # indexes/ may not import table/: the log's operation column is named twice.
    assert (OP, OP_DELETE) == (records.OP, records.OP_DELETE)


def test_drop_removes_the_partition(tmp_path: Path) -> None:
    t = make(tmp_path, "cow")
    t.insert(rows(new_keys(random.Random(2), 50), 0))
    d = t.indexes.create("record_index")
    assert t.storage.exists(t.storage.path(partition_dir(d.partition)))
    t.indexes.drop("record_index")
    assert not t.storage.exists(t.storage.path(partition_dir(d.partition)))
    t.upsert(rows(new_keys(random.Random(3), 5), 1))  # writers go on without it
    assert t.indexes.list() == []


def test_chain_resolution_tells_keys_apart_when_hashes_meet() -> None:
    """Two keys of one file group sharing a 64-bit hash stay two keys: a delete of one
    in a partial rewrite leaves the other (resolution falls back to the keys)."""
    schema = pa.schema([("id", pa.string())])
    old, new = "g_1_old.parquet", "g_2_new.parquet"

    def entry(path: str, key: str, pos: int, deleted: bool) -> dict[str, object]:
        return {"bucket": 0, "hash": 7, "path": path, "key_0": key, "pos": pos, "deleted": deleted}

    rows_ = pa.Table.from_pylist(
        [entry(old, "k1", 0, False), entry(old, "k2", 1, False), entry(new, "k1", -1, True)],
        schema=entry_schema(schema, ["id"]),
    )
    got = live_entries(rows_, pa.array([new]), {new: old})
    assert got.select(["path", "key_0", "pos"]).to_pylist() == [{"path": new, "key_0": "k2", "pos": -1}]


def test_pairs_of_equal_hashes_are_the_same_searched_either_way() -> None:
    # A delta's few candidate entries are searched among many probes; a bucket file's
    # many entries have each probe searched among them. Both give every pair of equal
    # hashes, by probe and then in file order (a key's later entry in a file wins).
    import numpy as np
    import pyarrow as pa
    from lakeline.indexes.record_index import hash_join

    rng = np.random.default_rng(3)
    for entries, probes in ((40, 500), (500, 40), (300, 300)):
        stored = rng.integers(0, 60, entries).astype(np.int64)  # small range: many repeats
        hashes = np.sort(rng.integers(0, 60, probes).astype(np.int64))
        rows = rng.permutation(probes)
        table = pa.table({"hash": stored})
        by_entry = hash_join.equal_hashes_by_entry(stored, hashes, rows)
        order = np.argsort(stored, kind="stable")
        expected = [(int(e), int(rows[p])) for p in range(probes) for e in order if stored[e] == hashes[p]]
        assert list(zip(*(a.tolist() for a in by_entry))) == expected
        either = hash_join.equal_hashes(table, hashes, rows, sorted_by_hash=False)
        assert list(zip(*(a.tolist() for a in either))) == expected


@pytest.mark.parametrize("distinct", [True, False])
def test_pairs_at_the_positions_the_probe_set_found_equal_the_searched_pairs(distinct: bool) -> None:
    # A lookup's probe set finds a delta's entries and where each one's probe is; the
    # pairs taken from those positions must equal the general search's, also when two
    # probes share a hash (then it falls back to the search).
    import numpy as np
    from lakeline.indexes.record_index import hash_join
    from lakeline.indexes.record_index.lookup import ProbeSet

    rng = np.random.default_rng(5)
    space = 10**12 if distinct else 60
    hashes = np.sort(rng.choice(space, 400, replace=not distinct)).astype(np.int64) - space // 2
    stored = np.r_[rng.choice(hashes, 50), rng.integers(-space // 2, space // 2, 200)].astype(np.int64)
    rng.shuffle(stored)
    rows = rng.permutation(400)
    found, at = ProbeSet.of(hashes).find(stored)
    assert found.tolist() == np.flatnonzero(np.isin(stored, hashes)).tolist()
    assert (at == np.searchsorted(hashes, stored[found])).all()
    got = hash_join.pairs_at(hashes, stored[found], at, rows)
    expected = hash_join.equal_hashes_by_entry(stored[found], hashes, rows)
    assert len(got[0]) >= len(found) > 0
    assert [a.tolist() for a in got] == [a.tolist() for a in expected]
