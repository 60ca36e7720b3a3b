"""Soak runs of the event log (``make soak``): longer races and random crashes.

Why: the quick suite proves each crash point and one race once; these runs repeat them
with random interleavings long enough to shake out rare orderings, and check the
model after every round: a gapless log, each instant's events a legal path, every
append that reported success present exactly once.
"""

from __future__ import annotations

import collections
import random
from pathlib import Path

import pytest
from lakeline.timeline.diagnostics.faults import CRASH_EXIT_CODE
from lakeline.timeline.errors import InvalidTransitionError
from lakeline.timeline.instant import TRANSITIONS, Event, State
from lakeline.timeline.storage.event_log.protocol import TimelineStore

from tests.helpers import CHILDREN, StoreFactory, finish, start_script, store_spec, wait_for_files

pytestmark = pytest.mark.soak

CHILD = CHILDREN / "timeline_child.py"


def check_model(events: list[Event]) -> None:
    """A gapless log whose instants each moved along legal transitions only."""
    assert [e.seq for e in events] == list(range(len(events)))
    state: dict[int, State | None] = collections.defaultdict(lambda: None)
    for e in events:
        if e.state not in TRANSITIONS[state[e.instant]]:
            raise InvalidTransitionError(f"event {e.seq} moves {e.instant} from {state[e.instant]} to {e.state}")
        state[e.instant] = e.state
    assert all(a.ts_us < b.ts_us for a, b in zip(events, events[1:], strict=False))


def test_long_race(store_factory: StoreFactory, tmp_path: Path) -> None:
    store = store_factory()
    spec, procs, per = store_spec(store), 8, 1500
    go = tmp_path / "go"
    ready = [tmp_path / f"ready-{k}" for k in range(procs)]
    children = [start_script(CHILD, ["append", spec, per, k, str(r), str(go)]) for k, r in enumerate(ready)]
    wait_for_files(ready)
    go.write_text("go")
    for child in children:
        rc, _, err = finish(child, timeout=1800)
        assert rc == 0, err
    events = store.read_from(0)
    check_model(events)
    seen = collections.Counter((e.payload["p"], e.payload["i"]) for e in events)
    assert len(seen) == procs * per and max(seen.values()) == 1


def _points(store: TimelineStore) -> list[str]:
    common = [f"log.{w}_append.{s}" for w in ("before", "after") for s in ("requested", "inflight", "completed")]
    if store.kind == "filesystem":
        return common + ["log.store.before_write", "log.store.before_link", "log.store.before_dir_fsync"]
    return common + ["log.store.before_write", "log.store.after_write"]


def test_random_crashes_among_concurrent_writers(store_factory: StoreFactory) -> None:
    rng = random.Random(20260101)
    store = store_factory()
    spec = store_spec(store)
    points = _points(store)
    for _ in range(25):
        children = []
        for _ in range(4):
            # Half the children die at a random point of a random append; the rest live.
            faults = None
            if rng.random() < 0.5:
                faults = f"{rng.choice(points)}=crash@{rng.randint(1, 6)}"
            children.append((faults, start_script(CHILD, ["lifecycles", spec, 5], faults=faults)))
        for faults, child in children:
            rc, _, err = finish(child, timeout=300)
            assert rc == 0 or (faults and rc == CRASH_EXIT_CODE), f"{faults}: rc={rc}\n{err}"
        check_model(store.read_from(0))
    done = [e for e in store.read_from(0) if e.state is State.COMPLETED]
    assert done, "no instant completed in 25 rounds"
