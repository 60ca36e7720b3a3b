"""The deltas a process wrote answer its lookups from memory (indexes/record_index/delta_hashes.py).

What must hold: the probes a remembered delta is said to hold are exactly those whose
hash it stores, whatever the tiers and evictions; a delta not remembered is left to the
caller; and a table's lookups give the same answers with the memory as without, while
an insert of new keys reads none of the deltas its process wrote.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from lakeline.indexes.record_index import lookup, store
from lakeline.indexes.record_index.delta_hashes import DELTA_HASHES, DeltaHashes
from lakeline.table import Table
from lakeline.timeline.errors import DuplicateKeyError

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.int64())])

pytestmark = pytest.mark.usefixtures("no_faults")


@pytest.mark.parametrize("max_entries", [10**9, 15_000])
def test_a_remembered_delta_holds_exactly_the_probes_it_stores(max_entries: int) -> None:
    rng = np.random.default_rng(5)
    memory = DeltaHashes(max_entries)
    deltas = {}
    for i, n in enumerate([0, 1, 3000, 9000, 20, 12000, 700]):
        deltas[f"d{i}"] = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)
        memory.remember(f"d{i}", deltas[f"d{i}"])
        memory.held(list(deltas), np.zeros(0, np.int64))  # asked as written: tables fill, new ones start
    assert max_entries < 10**9 or len(memory._tiers) > 1  # unbounded, the sizes above start two
    present = np.concatenate([h[: max(1, len(h) // 10)] for h in deltas.values() if len(h)])
    absent = rng.integers(-(2**63), 2**63 - 1, 50_000, dtype=np.int64)
    probes = np.unique(np.concatenate([present, absent, [np.iinfo(np.int64).min, -1, 0]]))
    probes = probes[rng.permutation(len(probes))]  # a lookup's keys come in any order
    asked = [*deltas, "never-written"]
    for _ in range(2):  # the first sorts what was written, the second asks it as kept
        held, unknown = memory.held(asked, probes)
        assert "never-written" in unknown and set(held) | set(unknown) == set(asked)
        for path, got in held.items():
            assert got.tolist() == np.intersect1d(probes, deltas[path]).tolist()
            assert (np.diff(got) > 0).all()
    if max_entries < 10**9:
        assert unknown[:-1], "some deltas were evicted to keep the bound"
        assert sum(len(deltas[p]) for p in held) <= max_entries


def test_a_remembered_delta_is_prepared_on_the_worker_thread_before_anyone_asks() -> None:
    memory = DeltaHashes()
    hashes = np.random.default_rng(6).integers(-(2**63), 2**63 - 1, 200_000, dtype=np.int64)
    memory.remember("d", hashes)
    assert memory._worker is not None
    memory._worker.submit(lambda: None).result(timeout=20)  # the queue is done in order
    assert "d" not in memory._raw and (np.diff(memory._sorted["d"]) >= 0).all()
    held, unknown = memory.held(["d"], hashes[:5])
    assert held["d"].tolist() == sorted(hashes[:5].tolist()) and unknown == []
    lazy = DeltaHashes(prepare_ahead=False)
    lazy.remember("d", hashes)
    assert lazy._worker is None and "d" in lazy._raw  # prepared by the first lookup instead
    assert lazy.held(["d"], hashes[:5])[0]["d"].tolist() == held["d"].tolist()


def _table(tmp_path: Path, kind: str) -> Table:
    return Table.create(
        tmp_path / kind, SCHEMA, record_key="id", table_type=kind, properties={"index.record-index": True}
    )


def _keys(rng: random.Random, n: int) -> list[str]:
    return [f"{rng.getrandbits(128):032x}" for _ in range(n)]


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_a_writer_asks_its_own_deltas_from_memory_and_answers_as_a_reader_that_reads_them(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(8)
    t = _table(tmp_path, kind)
    batches = [_keys(rng, 500) for _ in range(4)]
    for b in batches:
        t.insert(pa.table({"id": b, "v": [0] * len(b)}, schema=SCHEMA))
    reads: list[str] = []
    real = store.read_entries
    monkeypatch.setattr(lookup, "read_entries", lambda st, path, *a, **k: reads.append(path) or real(st, path, *a, **k))
    new = _keys(rng, 300)
    t.insert(pa.table({"id": new, "v": [1] * 300}, schema=SCHEMA))
    assert reads == []  # every delta was this process's and held none of the new keys
    with pytest.raises(DuplicateKeyError):
        t.insert(pa.table({"id": [*_keys(rng, 100), batches[2][7]], "v": [2] * 101}, schema=SCHEMA))
    assert len(reads) >= 1 and all("delta_" in p for p in reads)  # only the delta holding it

    probe = pa.table({"id": pa.array(batches[1][:150] + new[:150] + _keys(rng, 100), pa.string())})

    def answer() -> list[tuple[int, str]]:
        reader = lookup.RecordIndexReader.open(t.storage, t.timeline, SCHEMA, ["id"])
        assert reader is not None and reader.deltas
        found = reader.entries(probe)
        return sorted(zip(found.column(lookup.ROW).to_pylist(), found.column("path").cast(pa.string()).to_pylist()))

    remembered = answer()
    DELTA_HASHES.clear()  # as another process: every delta read
    reads.clear()
    assert answer() == remembered and len(reads) >= len(batches)
    assert [r for r, _ in remembered] == list(range(300))
    t.upsert(pa.table({"id": batches[0][:50] + new[:50], "v": [3] * 100}, schema=SCHEMA))
    assert t.to_arrow().num_rows == 4 * 500 + 300
    assert t.indexes.validate("record_index")["mismatches"] == []


def _ask(paths: list[str], probes: np.ndarray) -> tuple[dict[str, np.ndarray], list[str]]:
    return DELTA_HASHES.held(paths, probes)


def test_a_forked_child_starts_empty_even_when_the_lock_was_held_at_the_fork() -> None:
    import multiprocessing
    import threading

    DELTA_HASHES.remember("/nowhere/delta_1_x.parquet", np.arange(10, dtype=np.int64))
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with DELTA_HASHES._lock:
            taken.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait(10)
    try:
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(1) as pool:  # the child asks while the parent's lock is held
            held, unknown = pool.apply_async(_ask, (["/nowhere/delta_1_x.parquet"], np.arange(3))).get(20)
    finally:
        release.set()
        holder.join()
    assert held == {} and unknown == ["/nowhere/delta_1_x.parquet"]
    DELTA_HASHES.clear()


def test_evicting_past_the_bound_in_any_order_keeps_answering_exactly() -> None:
    """Issue 45: a process that had written more than MAX_ENTRIES died on its next insert
    (a later tier of the same width as an earlier one was compared by value on eviction).
    Deltas of random sizes, asked in random order, evict tiers anywhere in the list."""
    for seed in range(60):
        rng = np.random.default_rng(seed)
        memory = DeltaHashes(max_entries=int(rng.integers(2_000, 20_000)), prepare_ahead=False)
        deltas: dict[str, np.ndarray] = {}
        for i in range(30):
            deltas[f"d{i}"] = rng.integers(-(2**63), 2**63 - 1, int(rng.integers(1, 6_000)), dtype=np.int64)
            memory.remember(f"d{i}", deltas[f"d{i}"])
            asked = [str(p) for p in rng.choice(list(deltas), size=min(len(deltas), 3), replace=False)]
            probes = np.concatenate([deltas[p][:5] for p in asked])
            held, unknown = memory.held(asked, probes)
            assert set(held) | set(unknown) == set(asked)
            for path, got in held.items():
                assert got.tolist() == np.intersect1d(probes, deltas[path]).tolist()
        # The bound holds but for the delta just written, which is always kept.
        assert memory._entries <= max(memory.max_entries, len(deltas["d29"]))
        assert all(tier.live > 0 for tier in memory._tiers)


def test_a_process_writing_past_the_bound_keeps_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end in one process: inserts of random keys and upserts of old ones into an
    indexed table until the process has remembered several times the (lowered) bound and
    evicted tiers of one width; every key is still found, none duplicated."""
    monkeypatch.setattr(DELTA_HASHES, "max_entries", 6_000)
    DELTA_HASHES.clear()
    rng = random.Random(45)
    t = _table(tmp_path, "mor")
    written: list[str] = []
    try:
        for _ in range(12):
            keys = _keys(rng, rng.randint(1_000, 3_000))
            t.insert(pa.table({"id": keys, "v": [0] * len(keys)}, schema=SCHEMA))
            written += keys
            t.upsert(pa.table({"id": rng.sample(written, 50), "v": [1] * 50}, schema=SCHEMA))
            with pytest.raises(DuplicateKeyError):  # every earlier key is still found
                t.insert(pa.table({"id": [rng.choice(written)], "v": [2]}, schema=SCHEMA))
        assert len(DELTA_HASHES._tiers) >= 1 and DELTA_HASHES._entries <= 6_000 + 3_000
    finally:
        DELTA_HASHES.clear()
    assert t.to_arrow().num_rows == len(written) == len(set(written))
    assert t.indexes.validate("record_index")["mismatches"] == []
