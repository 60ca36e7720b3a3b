"""The lease locks (:class:`FileLock`, :class:`PostgresLock`), through each store's ``lock()``.

Why: the table lock keeps planners apart (docs/design.md, "Concepts": backends). Safety
never depends on it, but it must still be exclusive while a lease lasts, let a new owner
in once a crashed holder's lease runs out, and tell a holder that lost its lease.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from lakeline.timeline.errors import LockLostError, LockTimeoutError
from lakeline.timeline.lock import FileLock

from tests.helpers import CHILDREN, StoreFactory, finish, start_script, store_spec, wait_for_files

CHILD = CHILDREN / "timeline_child.py"


def test_exclusive_between_processes(store_factory: StoreFactory, tmp_path: Path) -> None:
    """4 processes x 25 read-increment-write under the lock: no lost update, no overlap."""
    spec = store_spec(store_factory())
    counter = tmp_path / "counter"
    counter.write_text("0")
    go = tmp_path / "go"
    procs, n = 4, 25
    ready = [tmp_path / f"ready-{k}" for k in range(procs)]
    args = ["counter", spec, "table", 30_000, n, str(counter)]
    children = [start_script(CHILD, [*args, str(r), str(go)]) for r in ready]
    try:
        wait_for_files(ready)
        go.write_text("go")
        results = [finish(c, timeout=120) for c in children]
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
    for rc, _, err in results:
        assert rc == 0, err  # FileExistsError on the ".inside" marker means two holders
    assert int(counter.read_text()) == procs * n


def test_held_lock_excludes_others_until_released(store_factory: StoreFactory) -> None:
    store = store_factory()
    a = store.lock("table", 30_000)
    b = store_factory.reopen(store).lock("table", 30_000)
    assert a.try_acquire()
    assert a.try_acquire()  # already ours
    assert not b.try_acquire()
    b.release()  # not ours: must not free a's lock
    assert not b.try_acquire()
    a.renew()
    a.release()
    assert b.try_acquire()
    assert not a.try_acquire()
    b.release()


def test_locks_are_per_name_and_per_table(store_factory: StoreFactory) -> None:
    store, other_table = store_factory(), store_factory()
    assert store.lock("table", 30_000).try_acquire()
    assert store.lock("indexer", 30_000).try_acquire()
    assert other_table.lock("table", 30_000).try_acquire()


def test_context_manager(store_factory: StoreFactory) -> None:
    store = store_factory()
    with store.lock("table", 30_000):
        assert not store.lock("table", 30_000).try_acquire()
    assert store.lock("table", 30_000).try_acquire()


def test_expired_lease_lets_another_owner_in(store_factory: StoreFactory) -> None:
    store = store_factory()
    a = store.lock("table", 300)
    b = store_factory.reopen(store).lock("table", 300)
    assert a.try_acquire()
    assert not b.try_acquire()
    time.sleep(0.45)  # a stops renewing: its lease runs out
    b.acquire(timeout_s=5)
    with pytest.raises(LockLostError):
        a.renew()
    a.release()  # a's release after the loss must not free b's lock
    assert not a.try_acquire()
    b.renew()


def test_renewing_keeps_the_lease(store_factory: StoreFactory) -> None:
    store = store_factory()
    # A lease of 2 s renewed every 0.6 s: a stall of over a second between two renewals
    # (a loaded machine: 0.2 s against 0.4 s once failed a CI run) is what it takes to
    # lose it, while 2.4 s in all still outlast the first lease.
    a = store.lock("table", 2000)
    b = store_factory.reopen(store).lock("table", 2000)
    a.acquire()
    for _ in range(4):
        time.sleep(0.6)
        a.renew()
        assert not b.try_acquire()  # 2.4 s in all, more than the lease, still a's


def test_timeout(store_factory: StoreFactory) -> None:
    store = store_factory()
    assert store.lock("table", 30_000).try_acquire()
    waiter = store_factory.reopen(store).lock("table", 30_000)
    started = time.monotonic()
    with pytest.raises(LockTimeoutError) as info:
        waiter.acquire(timeout_s=0.3)
    assert 0.3 <= time.monotonic() - started < 2
    assert isinstance(info.value, TimeoutError)


def test_crashed_holder_is_replaced_after_its_lease(store_factory: StoreFactory, tmp_path: Path) -> None:
    store = store_factory()
    ready = tmp_path / "ready"
    holder = start_script(CHILD, ["hold", store_spec(store), "table", 600, str(ready)])
    try:
        wait_for_files([ready])
        me = store.lock("table", 600)
        assert not me.try_acquire()
        os.kill(holder.pid, signal.SIGKILL)  # dies holding the lock, no release
        holder.wait(timeout=10)
        started = time.monotonic()
        me.acquire(timeout_s=5)
        assert time.monotonic() - started < 2
    finally:
        if holder.poll() is None:
            holder.kill()
        finish(holder)


def test_file_lock_does_not_break_a_lease_taken_after_it_read_the_expired_one(tmp_path: Path) -> None:
    """Breaking an expired lease races with others doing the same: only the expired
    lease may be broken, never a fresh one that another breaker put in its place."""
    path = tmp_path / "table.lock"
    dead = FileLock(path, lease_ms=1)
    assert dead.try_acquire()
    time.sleep(0.01)  # dead's lease is over
    a, b = FileLock(path, 30_000), FileLock(path, 30_000)
    real_read = a._read

    def read_then_b_moves_first() -> dict[str, object] | None:
        held = real_read()  # a sees dead's expired lease ...
        assert not b.try_acquire()  # ... b breaks it ...
        assert b.try_acquire()  # ... and takes the lock, before a acts on what it saw
        return held

    a._read = read_then_b_moves_first  # type: ignore[method-assign]
    assert not a.try_acquire()
    a._read = real_read  # type: ignore[method-assign]
    assert not a.try_acquire()
    b.renew()  # still b's
    assert json.loads(path.read_bytes())["owner"] == b.owner


@pytest.mark.parametrize("content", [b"", b'{"owner": "x", "exp'], ids=["empty", "half-written"])
def test_file_lock_left_empty_by_a_killed_holder_expires_after_a_lease(tmp_path: Path, content: bytes) -> None:
    """kill -9 between creating the lock file and writing its lease left an empty file
    that read as "no lease" forever, so every later acquire timed out (found by the
    kill -9 torture of the table services). Such a file's lease ends a lease after it
    was made; before that it is held (its creator may be writing it right now)."""
    from lakeline.timeline.lock import FileLock

    path = tmp_path / "table.lock"
    path.write_bytes(content)
    me = FileLock(path, lease_ms=300)
    assert not me.try_acquire()  # young: its creator may still be writing it
    me.acquire(timeout_s=5)
    assert me.try_acquire()  # ours now
    me.release()
    assert not path.exists()
