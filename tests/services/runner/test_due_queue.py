"""The runner's queue of due pairs (lakeline.services.runner.due_queue): a pair is queued
once, never while it runs; missed ticks, then backlog, then age decide who goes next."""

from __future__ import annotations

from lakeline.services.runner.due_queue import DueQueue
from lakeline.services.runner.tables import Target

A, B, C = Target("a", {}), Target("b", {}), Target("c", {})


def _take_all(q: DueQueue) -> list[tuple[str, str]]:
    out = []
    while (due := q.take(wait=False)) is not None:
        out.append(due.key)
    return out


def test_the_oldest_goes_first_on_equal_ticks_and_backlog() -> None:
    q = DueQueue()
    for t in (C, A, B):
        assert q.put(t, "compaction", backlog=0)
    assert _take_all(q) == [("c", "compaction"), ("a", "compaction"), ("b", "compaction")]


def test_a_pair_is_queued_once_and_not_while_it_runs() -> None:
    q = DueQueue()
    assert q.put(A, "cleaning", backlog=0)
    assert not q.put(A, "cleaning", backlog=0)  # a missed tick, not a copy
    assert q.put(A, "compaction", backlog=0)  # another service is another pair
    due = q.take(wait=False)
    assert due is not None and due.key == ("a", "cleaning") and due.missed == 1
    assert q.running() == {("a", "cleaning")}
    assert not q.put(A, "cleaning", backlog=0)
    q.done(due)
    assert q.running() == set()
    assert q.put(A, "cleaning", backlog=0)


def test_close_drops_the_queue_and_refuses_more() -> None:
    q = DueQueue()
    q.put(A, "cleaning", backlog=5)
    q.close()
    assert q.take(wait=True) is None
    assert not q.put(B, "cleaning", backlog=0)
