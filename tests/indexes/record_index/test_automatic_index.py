"""The record index a keyed table builds by itself once its keys show random (issue 30,
item 2; :mod:`lakeline.indexes.record_index.auto`, :mod:`lakeline.services.indexing.automatic`):
built before the write that finds them so, never for keys that arrive in order, never
against the user's choice, adopted by the user's ``create``, finished after its builder
died, built once when two writer processes find it due together, and exact throughout."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.indexes.record_index.auto import keys_look_random, ranges_overlap
from lakeline.table import Table
from lakeline.timeline.diagnostics.faults import CRASH_EXIT_CODE
from lakeline.timeline.errors import DuplicateKeyError, IndexExistsError
from lakeline.timeline.instant import Action
from lakeline.timeline.view.file_group import DataFile, FileKind, FileSlice

from tests.helpers import CHILDREN, finish, run_script, start_script

CHILD = CHILDREN / "indexer_child.py"
SCHEMA = pa.schema([("id", pa.string()), ("v", pa.int64())])
INT_SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
HEARTBEAT = {"heartbeat.interval-ms": 100, "heartbeat.tolerable-misses": 1}
EXPIRY_S = 0.2
#: Small enough that a test's tables reach it in a few thousand rows.
AUTO = {"index.record-index.auto-rows": 1000}

pytestmark = pytest.mark.usefixtures("no_faults")


def random_keys(rng: random.Random, n: int) -> list[str]:
    return [f"{rng.getrandbits(128):032x}" for _ in range(n)]


def batch(keys: list[str], v: int = 0) -> pa.Table:
    return pa.table({"id": keys, "v": [v] * len(keys)}, schema=SCHEMA)


def automatic(t: Table) -> list[tuple[str, str, bool]]:
    return [(d.name, d.state, d.automatic) for d in t.indexes.list()]


def indexing_instants(t: Table) -> int:
    return len(t.timeline.by_action(Action.INDEXING))


def assert_sound(t: Table, expected: dict[str, int]) -> None:
    """The index validates, and the table holds exactly ``expected`` (key -> v)."""
    assert t.indexes.validate("record_index")["mismatches"] == []
    got = t.to_arrow()
    assert dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist())) == expected


def data_file(lo: object, hi: object, rows: int = 1000, instant: int = 1) -> FileSlice:
    f = DataFile(f"p/{lo}-{hi}-{instant}.parquet", FileKind.BASE, instant, rows, 1, 1, lo, hi)
    return FileSlice(f"fg-{lo}-{hi}-{instant}", "", instant, f)


# -- the rule --------------------------------------------------------------------------


def test_ranges_overlap_tells_random_files_from_files_in_key_order() -> None:
    side_by_side = [(i * 100, i * 100 + 99) for i in range(10)]
    assert not ranges_overlap(side_by_side)
    # A batch of keys in order but rows in random order: its few files overlap each other.
    batches = [(b * 1000, b * 1000 + 999) for b in range(10) for _ in range(3)]
    assert not ranges_overlap(batches)
    spanning = [(i, 10_000 - i) for i in range(10)]
    assert ranges_overlap(spanning)
    assert not ranges_overlap([(0, 100)])  # one file says nothing
    # Touching at one key: they share it.
    assert ranges_overlap([(0, 5), (5, 9)])


def test_keys_look_random_needs_enough_rows_and_keys_inside_the_tables_range() -> None:
    one = [data_file(0, 1_000_000)]
    inside = pa.array(list(range(1000, 900_000, 997)))
    past = pa.array(list(range(2_000_000, 2_100_000, 97)))
    assert keys_look_random(one, inside, 1000)
    assert not keys_look_random(one, past, 1000)  # keys in order: past every range
    assert not keys_look_random(one, inside, 1001)  # too small to pay
    assert not keys_look_random(one, inside, 0)  # never
    assert not keys_look_random(one, None, 1000)  # an upsert: one file says nothing
    # A few late arrivals among new keys past the range: in order, mostly.
    late = pa.concat_arrays([past, pa.array(list(range(10, 100, 10)))])
    assert not keys_look_random(one, late, 1000)
    overlapping = [data_file(0, 1_000_000), data_file(5, 999_999, instant=2)]
    assert keys_look_random(overlapping, None, 1000)
    # One write's files overlap whenever its rows came in random order: one range.
    assert not keys_look_random([data_file(0, 1_000_000), data_file(5, 999_999)], None, 1000)
    # A file without a recorded range (written before ranges were) says nothing either way.
    assert keys_look_random([*overlapping, data_file(None, None)], None, 1000)
    assert not keys_look_random([data_file("a", "b")], pa.array([1, 2]), 1)  # types that do not compare


# -- a table ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_random_keys_build_the_index_before_the_insert_that_shows_them(tmp_path: Path, kind: str) -> None:
    rng = random.Random(1)
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", table_type=kind, properties=AUTO)
    first = random_keys(rng, 1200)
    t.insert(batch(first))
    assert automatic(t) == []  # one batch says nothing of the next
    second = random_keys(rng, 800)
    r = t.insert(batch(second, 1))
    assert automatic(t) == [("record_index", "ready", True)]
    # Built before the insert, so the insert's own key check used it.
    [idx] = t.timeline.by_action(Action.INDEXING)
    assert idx.id < r.instant.id
    expected = {k: 0 for k in first} | {k: 1 for k in second}
    assert_sound(t, expected)
    # The index answers the key checks from now on, and answers them right.
    with pytest.raises(DuplicateKeyError):
        t.insert(batch(rng.sample(first, 3) + random_keys(rng, 2)))
    updates = rng.sample(first + second, 300)
    t.upsert(batch(updates + random_keys(rng, 100), 2))
    expected |= {k: 2 for k in updates}
    t.delete(pa.table({"id": updates[:50]}))
    for k in updates[:50]:
        del expected[k]
    got = t.to_arrow()
    assert len(expected) + 100 == got.num_rows
    assert t.indexes.validate("record_index")["mismatches"] == []
    assert indexing_instants(t) == 1


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_keys_in_order_never_build_one(tmp_path: Path, kind: str) -> None:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", table_type=kind, properties=AUTO)
    rng = random.Random(2)
    for b in range(5):
        keys = [f"k{i:09d}" for i in range(b * 1000, (b + 1) * 1000)]
        rng.shuffle(keys)  # rows in random order, keys in order batch after batch
        t.insert(batch(keys, b))
    t.upsert(batch([f"k{i:09d}" for i in range(0, 5000, 7)], 9))
    assert automatic(t) == [] and indexing_instants(t) == 0


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_a_large_batch_of_keys_in_order_split_over_files_builds_none(tmp_path: Path, kind: str) -> None:
    """Rows in random order, keys in order batch after batch: each batch's files span
    its whole range and overlap one another, but not another batch's."""
    props = {**AUTO, "write.target-file-size-bytes": 16 * 1024, "write.small-file-limit-bytes": 0}
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", table_type=kind, properties=props)
    rng = random.Random(10)
    for b in range(3):
        keys = [f"k{i:09d}" for i in range(b * 3000, (b + 1) * 3000)]
        rng.shuffle(keys)
        t.insert(batch(keys, b))
    assert len(t.view(t.timeline).latest_slices()) >= 6  # a batch split over several files
    t.upsert(batch([f"k{i:09d}" for i in range(0, 9000, 11)], 9))
    assert automatic(t) == [] and indexing_instants(t) == 0


def test_upserts_of_random_keys_build_it_once_files_overlap(tmp_path: Path) -> None:
    rng = random.Random(3)
    # No small-file filling: a batch of new keys starts a file group, as a large one does.
    props = {**AUTO, "write.small-file-limit-bytes": 0}
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", table_type="mor", properties=props)
    keys = random_keys(rng, 1500)
    t.upsert(batch(keys))
    t.upsert(batch(rng.sample(keys, 200), 1))  # updates only: the one file still says nothing
    assert automatic(t) == []
    more = random_keys(rng, 600)
    t.upsert(batch(more, 2))  # a second file, over the same key range
    assert automatic(t) == []
    t.upsert(batch(rng.sample(keys, 10), 3))
    assert automatic(t) == [("record_index", "ready", True)]
    assert t.indexes.validate("record_index")["mismatches"] == []


@pytest.mark.parametrize(
    "properties",
    [{"index.record-index": False}, {"index.record-index.auto-rows": 0}],
    ids=["index-false", "auto-rows-0"],
)
def test_the_users_choice_stands(tmp_path: Path, properties: dict[str, object]) -> None:
    rng = random.Random(4)
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", properties={**AUTO, **properties})
    for _ in range(3):
        t.insert(batch(random_keys(rng, 1000)))
    assert automatic(t) == []


def test_inserts_that_check_no_key_build_none(tmp_path: Path) -> None:
    rng = random.Random(9)
    props = {**AUTO, "write.insert-key-check": False, "write.small-file-limit-bytes": 0}
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", properties=props)
    for _ in range(3):
        t.insert(batch(random_keys(rng, 1000)))
    assert automatic(t) == []
    t.upsert(batch(random_keys(rng, 10)))  # an upsert reads keys: now it pays
    assert automatic(t) == [("record_index", "ready", True)]


def test_a_dropped_index_stays_dropped(tmp_path: Path) -> None:
    rng = random.Random(5)
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", properties=AUTO)
    t.insert(batch(random_keys(rng, 1200)))
    t.insert(batch(random_keys(rng, 500)))
    assert automatic(t) == [("record_index", "ready", True)]
    t.indexes.drop("record_index")
    t.insert(batch(random_keys(rng, 500)))
    assert automatic(t) == []


def test_create_adopts_the_index_the_table_built(tmp_path: Path) -> None:
    rng = random.Random(6)
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", properties=AUTO)
    t.insert(batch(random_keys(rng, 1200)))
    t.insert(batch(random_keys(rng, 500)))
    [built] = t.indexes.list()
    d = t.indexes.create("record_index", wait=True)
    assert (d.name, d.state, d.instant) == ("record_index", "ready", built.instant)
    assert t.indexes.create("record_index", wait=False).instant == built.instant
    assert t.indexes.create("record_index", options={"buckets": built.options["buckets"]}).instant == built.instant
    with pytest.raises(IndexExistsError):
        t.indexes.create("record_index", options={"buckets": built.options["buckets"] + 1})
    assert indexing_instants(t) == 1


def test_a_user_index_is_never_adopted(tmp_path: Path) -> None:
    rng = random.Random(7)
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", properties=AUTO)
    t.insert(batch(random_keys(rng, 1200)))
    t.indexes.create("record_index")
    with pytest.raises(IndexExistsError):
        t.indexes.create("record_index")
    t.insert(batch(random_keys(rng, 500)))
    assert automatic(t) == [("record_index", "ready", False)] and indexing_instants(t) == 1


# -- across processes ------------------------------------------------------------------


def random_int_table(path: Path, n: int) -> Table:
    """A table of keys ``range(n)`` upserted in three batches, each a random third of
    them (the files' key ranges overlap, as random keys' do); under ``AUTO`` rows
    until the last batch, so the next write is the first to find the index due."""
    props = {**AUTO, **HEARTBEAT, "write.small-file-limit-bytes": 0}  # a file group a batch
    t = Table.create(path, INT_SCHEMA, record_key="id", ordering_field="ts", properties=props)
    ids = list(range(n))
    random.Random(8).shuffle(ids)
    for i in range(3):
        part = ids[i * n // 3 : (i + 1) * n // 3]
        t.upsert(pa.table({"id": part, "ts": [0] * len(part), "v": ["seed"] * len(part)}, schema=INT_SCHEMA))
    assert automatic(t) == []
    return t


def test_a_build_whose_writer_died_is_finished_by_the_next_write(tmp_path: Path) -> None:
    t = random_int_table(tmp_path / "t", 1200)
    # The child's upsert finds the index due, builds it and dies in the build.
    rc, out, err = run_script(CHILD, ["upsert", t.path, [5, 6, 10**9]], faults="record_index.before_publish=crash")
    assert rc == CRASH_EXIT_CODE, (out, err[-2000:])
    assert [(d.state, d.automatic) for d in t.indexes.list()] == [("building", True)]
    time.sleep(EXPIRY_S + 0.1)
    t.upsert(pa.table({"id": [7, 10**9 + 1], "ts": [1, 1], "v": ["after", "after"]}, schema=INT_SCHEMA))
    assert [(d.state, d.automatic) for d in t.indexes.list()] == [("ready", True)]
    assert t.indexes.validate("record_index")["mismatches"] == []
    got = t.to_arrow()
    assert got.num_rows == 1201 and set(got.column("id").to_pylist()) == set(range(1200)) | {10**9 + 1}
    assert indexing_instants(t) == 1


def test_two_writer_processes_finding_it_due_build_it_once(tmp_path: Path) -> None:
    t = random_int_table(tmp_path / "t", 1200)
    stop = tmp_path / "stop"
    logs = [tmp_path / f"w{i}.jsonl" for i in range(2)]
    procs = [start_script(CHILD, ["write", t.path, i, 1200, str(stop), str(logs[i])]) for i in range(2)]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            lines = [p.read_text().splitlines() if p.exists() else [] for p in logs]
            if all(sum('"instant"' in x for x in ls) >= 3 for ls in lines):
                break
            time.sleep(0.05)
    finally:
        stop.write_text("")
        outs = [finish(p) for p in procs]
    assert all(rc == 0 for rc, _, _ in outs), [e[-2000:] for _, _, e in outs]
    records = [json.loads(line) for p in logs for line in p.read_text().splitlines()]
    assert all(r.get("error") in (None, "CommitConflictError") for r in records)
    assert sum("instant" in r for r in records) >= 6
    assert automatic(t) == [("record_index", "ready", True)]
    assert indexing_instants(t) == 1
    assert t.indexes.validate("record_index")["mismatches"] == []
    got = t.to_arrow()
    assert pc.count_distinct(got.column("id")).as_py() == got.num_rows
