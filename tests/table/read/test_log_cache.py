"""The process's cache of decoded logs and prepared merges (table/read/log_cache.py):
reads served from it equal reads without it, a read after a write decodes only the new
logs, a log changed or removed on disk is never served from memory, and the budget holds.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table
from lakeline.table.files import FileRead
from lakeline.table.read import log_cache
from lakeline.table.read.log_cache import LOGS, LogCache
from lakeline.timeline.errors import CorruptFileError, SnapshotExpiredError

from tests.helpers import forked_status

SCHEMA = pa.schema([("k", pa.int64()), ("day", pa.int64()), ("v", pa.string())])


def batch(keys: list[int], tag: str) -> pa.Table:
    return pa.table({"k": keys, "day": [k % 30 for k in keys], "v": [f"{tag}{k}" for k in keys]}, schema=SCHEMA)


def rows_of(t: Table) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in Table.open(t.path).to_arrow().to_pylist())


def decoded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The log files the cache decodes from here on (every miss reads the file)."""
    seen: list[str] = []
    real = log_cache.read_snapshot_file

    def spy(task: FileRead) -> pa.Table:
        seen.append(task.rel_path)
        return real(task)

    monkeypatch.setattr(log_cache, "read_snapshot_file", spy)
    return seen


@pytest.mark.parametrize("ordering", [None, "day"])
def test_cached_reads_equal_uncached_ones_through_random_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ordering: str | None
) -> None:
    """Random upserts, deletes and delete_where on merge-on-read: after each, a read
    (twice, the second from the cache) equals a read with the cache off and a
    copy-on-write table given the same writes."""
    rng = random.Random(11)
    mor = Table.create(str(tmp_path / "mor"), SCHEMA, record_key="k", ordering_field=ordering, table_type="mor")
    cow = Table.create(str(tmp_path / "cow"), SCHEMA, record_key="k", ordering_field=ordering, table_type="cow")
    for t in (mor, cow):
        t.insert(batch(list(range(3000)), "a"))
    for step in range(10):
        op = rng.choice(["upsert", "insert", "delete", "delete_where"])
        if op == "upsert":
            data = batch(rng.sample(range(4000), 300), f"s{step}-")
            for t in (mor, cow):
                t.upsert(data)
        elif op == "insert":
            data = batch(list(range(10_000 + step * 100, 10_000 + step * 100 + 100)), f"i{step}-")
            for t in (mor, cow):
                t.insert(data)
        elif op == "delete":
            keys = pa.table({"k": rng.sample(range(4000), 200)})
            for t in (mor, cow):
                t.delete(keys)
        else:
            lo = rng.randrange(28)
            for t in (mor, cow):
                t.delete_where((pc.field("day") >= lo) & (pc.field("day") < lo + 2))
        first, second = rows_of(mor), rows_of(mor)
        with monkeypatch.context() as m:
            m.setattr(LOGS, "max_bytes", 0)
            uncached = rows_of(mor)
        assert first == second == uncached == rows_of(cow), f"after {op} #{step}"
    assert LOGS.hits > 0, "no read was served from the cache"


def test_a_read_after_a_write_decodes_only_the_new_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, record_key="k", table_type="mor")
    t.insert(batch(list(range(2000)), "a"))
    t.delete(pa.table({"k": [1, 2, 3]}))
    seen = decoded(monkeypatch)
    rows_of(t)
    assert len(seen) == 1
    rows_of(t)
    assert len(seen) == 1, "a second read decoded its log again"
    t.delete(pa.table({"k": [4, 5]}))
    got = rows_of(t)
    assert len(seen) == 2, f"the read after the second delete decoded {seen[1:]}, not only the new log"
    assert [r[0] for r in got] == [k for k in range(2000) if k not in (1, 2, 3, 4, 5)]


def test_a_log_replaced_or_removed_on_disk_is_not_served_from_memory(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, record_key="k", table_type="mor")
    t.insert(batch(list(range(2000)), "a"))
    t.upsert(batch([1, 2], "b"))
    rows_of(t)
    (s,) = [s for s in t.view(t.timeline).latest_slices() if s.logs]
    path = Path(t.storage.path(s.logs[-1].path))
    original = path.read_bytes()
    path.write_bytes(original[: len(original) // 2])  # damaged in place
    with pytest.raises(CorruptFileError):
        rows_of(t)
    path.write_bytes(original)  # restored: read again, right
    assert ("b1" in {r[2] for r in rows_of(t)}) and len(rows_of(t)) == 2000
    os.remove(path)
    with pytest.raises(SnapshotExpiredError):
        rows_of(t)


def test_the_budget_holds_and_the_least_recently_used_go_first() -> None:
    cache = LogCache(max_bytes=4000)
    for i in range(3):
        cache.keep(("v", i), i, 900)
    assert cache.get(("v", 0)) == 0  # now the most recently used
    cache.keep(("v", 3), 3, 900)
    cache.keep(("v", 4), 4, 900)  # 4,500 bytes: the least recently used (1) goes
    assert cache.get(("v", 1)) is None and cache.get(("v", 0)) == 0
    assert cache.bytes <= 4000 and len(cache) == 4
    cache.keep(("big",), "x", 1001)  # over a quarter of the budget: not kept
    assert cache.get(("big",)) is None
    off = LogCache(max_bytes=0)
    off.keep(("v",), 1, 1)
    assert off.get(("v",)) is None and len(off) == 0


def test_the_budget_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKELINE_LOG_CACHE_BYTES", "1048576")
    assert log_cache._budget() == 1048576
    monkeypatch.setenv("LAKELINE_LOG_CACHE_BYTES", "0")
    assert log_cache._budget() == 0
    monkeypatch.setenv("LAKELINE_LOG_CACHE_BYTES", "lots")
    with pytest.warns(UserWarning, match="not a byte count"):
        assert log_cache._budget() == log_cache.DEFAULT_BYTES


def test_a_forked_child_starts_with_an_empty_cache_and_a_free_lock() -> None:
    """A fork while another thread holds the lock must not leave the child waiting."""
    LOGS.keep(("v",), 1, 10)
    r, w = os.pipe()
    with LOGS._lock:  # held, as by a reading thread, when the fork happens
        pid = os.fork()
        if pid == 0:  # the child: it must get the lock and find nothing
            try:
                LOGS.keep(("w",), 2, 10)
                os.write(w, b"ok" if LOGS.get(("v",)) is None and LOGS.get(("w",)) == 2 else b"no")
            finally:
                os._exit(0)
    os.close(w)
    status = forked_status(pid, "the cache's lock", timeout=20)
    assert os.read(r, 2) == b"ok" and status == 0
    assert LOGS.get(("v",)) == 1
