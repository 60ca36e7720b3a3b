"""The record index's bucket files: memory-mapped Arrow IPC on a local disk, Parquet where
nothing maps, and a lookup answering the same from either.

A lookup of a mapped file binary-searches its sorted hashes instead of decoding the
file, so these tests pin what that search relies on: the file is sorted by hash, and
every probe (present, absent, repeated, more than the point-lookup limit) finds what the
Parquet route finds.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from lakeline.indexes.record_index.lookup import _FILTER_KEYS, ROW, RecordIndexReader
from lakeline.indexes.record_index.rows import HASH, PATH
from lakeline.indexes.record_index.store import (
    MAPPED_SUFFIX,
    Generation,
    mapped_entries,
    newest_generation,
    read_entries,
    write_entries,
)
from lakeline.table import Table

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.int64())])

pytestmark = pytest.mark.usefixtures("no_faults")


def keys(rng: random.Random, n: int) -> list[str]:
    return [f"{rng.getrandbits(128):032x}" for _ in range(n)]


def indexed(tmp_path: Path, kind: str, stored: list[str]) -> Table:
    t = Table.create(tmp_path / kind, SCHEMA, record_key="id", table_type=kind)
    for part in (stored[: len(stored) // 2], stored[len(stored) // 2 :]):
        t.insert(pa.table({"id": part, "v": list(range(len(part)))}, schema=SCHEMA))
    t.indexes.create("record_index", options={"buckets": 4}, wait=True)
    return t


def answers(reader: RecordIndexReader, probe: list[str]) -> list[tuple[str, str]]:
    found = reader.entries(pa.table({"id": pa.array(probe, pa.string())}))
    rows = found.column(ROW).to_pylist()
    paths = found.column(PATH).cast(pa.string()).to_pylist()
    return sorted((probe[r], p) for r, p in zip(rows, paths))


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_local_bucket_files_are_mapped_sorted_by_hash_and_answer_as_parquet_does(tmp_path: Path, kind: str) -> None:
    rng = random.Random(7)
    stored = keys(rng, 3000)
    t = indexed(tmp_path, kind, stored)
    gen = newest_generation(t.storage, t.indexes.list()[0].partition)
    assert gen is not None and len(gen.files) == 4
    for rel, _ in gen.files.values():
        assert rel.endswith(MAPPED_SUFFIX)
        hashes = mapped_entries(t.storage, t.storage.path(rel)).column(HASH).to_numpy()
        assert np.all(hashes[1:] >= hashes[:-1]), rel  # the binary search's premise
    # The same entries as Parquet files: the route an object store's lookups take.
    parquet = {}
    for bucket, (rel, n) in gen.files.items():
        copy = rel.removesuffix(MAPPED_SUFFIX) + ".parquet"
        write_entries(t.storage, copy, read_entries(t.storage, t.storage.path(rel)))
        parquet[bucket] = (copy, n)
    mapped = RecordIndexReader.open(t.storage, t.timeline, t.schema, ["id"])
    assert mapped is not None and mapped.generation == gen
    by_parquet = dataclasses.replace(mapped, generation=Generation(gen.seq, gen.token, gen.buckets, parquet))
    # Present, absent and repeated keys; a point lookup and a batch above its limit.
    for probe in (
        stored[:1],
        stored[:5] + keys(rng, 5),
        stored[100 : 100 + 4 * _FILTER_KEYS] + keys(rng, 200) + stored[100:120],
    ):
        got = answers(mapped, probe)
        assert got == answers(by_parquet, probe)
        assert [k for k, _ in got] == sorted(k for k in probe if k in set(stored))


def test_equal_hashes_of_different_keys_are_no_match() -> None:
    # A hash only narrows: two keys whose 64-bit hashes collide must not answer for
    # each other (the pairs' keys are compared; with real hashes this never happens in
    # a test, so the pairs are made here).
    from lakeline.indexes.record_index.hash_join import equal_hashes as _equal_hashes
    from lakeline.indexes.record_index.hash_join import exact_pairs as _exact

    stored = pa.table(
        {
            HASH: pa.array([5, 5, 9], pa.int64()),
            "key_0": ["a", "b", "c"],
            PATH: pa.array(["f1", "f2", "f3"]).dictionary_encode(),
            "pos": pa.array([0, 1, 2], pa.int32()),
            "deleted": [False, False, False],
        }
    )
    probe = pa.table({"key_0": ["b", "z"]})
    entry, row = _equal_hashes(stored, np.array([5, 9], np.int64), np.array([0, 1]), sorted_by_hash=True)
    assert sorted(zip(entry.tolist(), row.tolist())) == [(0, 0), (1, 0), (2, 1)]
    found = _exact(stored, probe, entry, row)
    assert found.column(ROW).to_pylist() == [0]
    assert found.column(PATH).cast(pa.string()).to_pylist() == ["f2"]


@pytest.mark.parametrize("n", [0, 1, 70, 20_000])
def test_the_probe_set_holds_its_hashes_and_no_other(n: int) -> None:
    # A delta's entries are asked of the lookup's probe set: its bits narrow, a binary
    # search decides. Hashes of both signs (sorted as int64, the bits are indexed as
    # unsigned), and absent hashes sharing a probe's top bits, must come out exact.
    from lakeline.indexes.record_index.lookup import ProbeSet

    rng = np.random.default_rng(n)
    probes = np.sort(rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64))
    probe_set = ProbeSet.of(probes)
    assert probe_set.holds(probes).all()
    neighbours = np.r_[probes + 1, probes - 1, rng.integers(-(2**63), 2**63 - 1, 5000, dtype=np.int64)]
    absent = neighbours[~np.isin(neighbours, probes)]
    assert not probe_set.holds(absent).any()
    mixed = np.r_[absent[:100], probes[:100]]
    assert probe_set.holds(mixed).tolist() == [False] * len(absent[:100]) + [True] * len(probes[:100])


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_keys_past_every_range_are_new_without_a_lookup_and_overlapping_ones_are_looked_up(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakeline.indexes.record_index import lookup
    from lakeline.timeline.errors import DuplicateKeyError

    stored = [f"k{i:06d}" for i in range(1000)]
    t = indexed(tmp_path, kind, stored)
    asked = []
    real = lookup.RecordIndexReader.entries
    monkeypatch.setattr(lookup.RecordIndexReader, "entries", lambda self, k: asked.append(k.num_rows) or real(self, k))
    newer = [f"k{i:06d}" for i in range(1000, 1500)]
    t.insert(pa.table({"id": newer, "v": list(range(500))}, schema=SCHEMA))
    assert asked == []  # above every file's key range: new, the index not read
    # A batch reaching into a range is looked up, and its one old key refused.
    with pytest.raises(DuplicateKeyError):
        t.insert(pa.table({"id": ["k001499", "k009999"], "v": [1, 2]}, schema=SCHEMA))
    assert asked == [2]
    t.upsert(pa.table({"id": ["k000005", "k002000"], "v": [7, 8]}, schema=SCHEMA))
    got = t.scan(filter=pa.compute.field("id").isin(["k000005", "k002000", "k001200"])).to_arrow()
    assert sorted(zip(got.column("id").to_pylist(), got.column("v").to_pylist())) == [
        ("k000005", 7),
        ("k001200", 200),
        ("k002000", 8),
    ]
    assert t.indexes.validate("record_index")["mismatches"] == []


def test_a_fold_that_loses_its_deltas_to_a_newer_fold_gives_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A service folds beside a writer: the one publishing first deletes the deltas it
    # took, and the other, reading them, must give way (no warning, no generation of
    # its own) while the index stays exact.
    from lakeline.indexes.on_commit import fold_record_index
    from lakeline.indexes.record_index import generation

    rng = random.Random(3)
    t = indexed(tmp_path, "mor", keys(rng, 400))
    for _ in range(3):
        t.insert(pa.table({"id": keys(rng, 50), "v": [0] * 50}, schema=SCHEMA))
    idx = t.indexes.list()[0]
    slow_view = t.timeline
    real = generation.partial_rewrites
    raced = []

    def first_another_fold(storage, deltas):  # type: ignore[no-untyped-def]
        if not raced:
            raced.append(True)
            t.insert(pa.table({"id": keys(rng, 5), "v": [1] * 5}, schema=SCHEMA))
            assert fold_record_index(t.storage, t.timeline, t.view(t.timeline), idx)  # publishes, deletes
        return real(storage, deltas)

    monkeypatch.setattr(generation, "partial_rewrites", first_another_fold)
    assert fold_record_index(t.storage, slow_view, t.view(slow_view), idx) == []
    gen = newest_generation(t.storage, idx.partition)
    assert gen is not None and gen.seq > slow_view.last_seq
    assert t.indexes.validate("record_index")["mismatches"] == []


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_a_delta_is_sorted_by_bucket_whether_its_file_tasks_or_the_commit_sorted_it(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A large file's write task sorts its entries beside the write, and the commit's
    # delta keeps them as they are when that file is its only one; a commit of several
    # sorted (or unsorted) parts sorts the whole. Either way the delta is by bucket, each
    # file's entries in file order within a bucket: what a point lookup's row-group
    # pruning and a fold's bucket ranges rely on.
    from lakeline.indexes.record_index.rows import BUCKET, POS
    from lakeline.indexes.record_index.store import visible_deltas
    from lakeline.table import files
    from lakeline.timeline.errors import DuplicateKeyError

    monkeypatch.setattr(files, "DESCRIBE_ALONGSIDE_ROWS", 50)  # every file here sorts its own
    rng = random.Random(11)
    for name, props, n in (("one", {}, 400), ("many", {"write.target-file-size-bytes": 4096}, 1200)):
        t = Table.create(tmp_path / name, SCHEMA, record_key="id", table_type=kind, properties=props)
        t.insert(pa.table({"id": keys(rng, 100), "v": [0] * 100}, schema=SCHEMA))
        t.indexes.create("record_index", options={"buckets": 4}, wait=True)
        added = keys(rng, n)
        r = t.insert(pa.table({"id": added, "v": list(range(n))}, schema=SCHEMA))
        written = r.instant.metadata["files"]
        assert (len(written) == 1) if name == "one" else (len(written) > 2)
        partition = t.indexes.list()[0].partition
        gen = newest_generation(t.storage, partition)
        assert gen is not None
        (delta,) = visible_deltas(t.storage, partition, t.timeline, gen.seq)
        rows = read_entries(t.storage, delta, columns=[BUCKET, PATH, POS])
        bucket = rows.column(BUCKET).to_numpy()
        assert rows.num_rows == n and (np.diff(bucket) >= 0).all()
        paths, pos = rows.column(PATH).cast(pa.string()).to_pylist(), rows.column(POS).to_pylist()
        for b in set(bucket.tolist()):
            at = np.flatnonzero(bucket == b).tolist()
            for p in {paths[i] for i in at}:
                mine = [pos[i] for i in at if paths[i] == p]
                assert mine == sorted(mine)
        reader = RecordIndexReader.open(t.storage, t.timeline, SCHEMA, ["id"])
        assert reader is not None and [k for k, _ in answers(reader, added[:5])] == sorted(added[:5])
        with pytest.raises(DuplicateKeyError):
            t.insert(pa.table({"id": [added[7]], "v": [0]}, schema=SCHEMA))
        assert t.indexes.validate("record_index")["mismatches"] == []


@pytest.mark.parametrize("statistics", [True, False])
def test_a_point_lookup_reads_a_delta_s_row_groups_from_its_footer_as_a_filtered_scan_would(
    tmp_path: Path, statistics: bool
) -> None:
    """``_entries_with`` (a few keys against a Parquet delta) returns what the dataset
    filter it replaced returns, for hashes present, absent and shared by two entries,
    and reads every row group when the file has no statistics."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from lakeline.indexes.record_index.lookup import _entries_with
    from lakeline.indexes.record_index.rows import BUCKET
    from lakeline.timeline.storage.filesystem import Storage

    rng = np.random.default_rng(3)
    n, buckets = 20_000, 16
    hashes = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)
    hashes[1] = hashes[0]  # two entries, one hash (two keys colliding)
    bucket = (hashes.view(np.uint64) % np.uint64(buckets)).astype(np.int32)
    order = np.argsort(bucket, kind="stable")
    rows = pa.table({BUCKET: bucket[order], HASH: hashes[order], "v": np.arange(n)[order]})
    path = str(tmp_path / "delta.parquet")
    pq.write_table(rows, path, row_group_size=1024, write_statistics=[BUCKET, HASH] if statistics else False)
    storage = Storage.for_uri(str(tmp_path))
    absent = np.array([12345, -999], dtype=np.int64)
    for probe in (hashes[:1], hashes[[5, 700, 19_999]], absent, np.r_[hashes[42], absent]):
        asked = np.unique(probe.view(np.uint64) % np.uint64(buckets)).astype(np.int32)
        got = _entries_with(storage, path, asked, probe, [HASH, "v"])
        wanted = pc.field(BUCKET).isin(pa.array(asked)) & pc.field(HASH).isin(pa.array(probe))
        expected = read_entries(storage, path, wanted, [HASH, "v"])
        assert sorted(got.column("v").to_pylist()) == sorted(expected.column("v").to_pylist())
        assert got.num_rows == int(np.isin(hashes, probe).sum())
