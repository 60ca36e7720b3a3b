"""Child process for the timeline's multi-process and crash tests (run as a script).

Why a script: each child must be a real, separate process with its own store and
connection, that a fault point (``LAKELINE_FAULTS``) can kill at any step. Arguments
are JSON; the first is the command, the second a store spec (see tests/helpers.py).

Commands:
  append SPEC COUNT TAG READY GO   append COUNT new instants with payload {"p": TAG, "i": i},
                                   all children starting together (ready/go files)
  lifecycle SPEC                   one instant requested -> inflight -> completed
  lifecycles SPEC COUNT            COUNT instants, each requested -> inflight -> completed
  read SPEC                        print the log as JSON [[seq, instant, state, token], ...]
  counter SPEC NAME LEASE N FILE READY GO
                                   N times: under the lock, read-increment-write FILE
  hold SPEC NAME LEASE READY       take the lock, say so, then wait to be killed
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from lakeline.timeline.instant import Action, State
from lakeline.timeline.log import EventLog

from tests.helpers import open_spec  # the checkout is on PYTHONPATH: tests.helpers.child_env


def _arrive(ready: str, go: str) -> None:
    """Say we are ready, then wait for the common start so all children contend."""
    Path(ready).write_text(str(os.getpid()))
    while not os.path.exists(go):
        time.sleep(0.002)


def append(spec: dict[str, str], count: int, tag: int, ready: str, go: str) -> None:
    log = EventLog(open_spec(spec))
    log.refresh()  # connect and read before the start line, not after it
    _arrive(ready, go)
    for i in range(count):
        log.append(Action.COMMIT, State.REQUESTED, {"p": tag, "i": i})


def lifecycle(spec: dict[str, str]) -> None:
    log = EventLog(open_spec(spec))
    req = log.append(Action.DELTA_COMMIT, State.REQUESTED, {"step": "requested"})
    print(json.dumps(["requested", req.seq]), flush=True)
    ev = log.append(Action.DELTA_COMMIT, State.INFLIGHT, {"step": "inflight"}, instant=req.instant)
    print(json.dumps(["inflight", ev.seq]), flush=True)
    ev = log.append(Action.DELTA_COMMIT, State.COMPLETED, {"step": "completed"}, instant=req.instant)
    print(json.dumps(["completed", ev.seq]), flush=True)


def lifecycles(spec: dict[str, str], count: int) -> None:
    log = EventLog(open_spec(spec))
    for i in range(count):
        req = log.append(Action.COMMIT, State.REQUESTED, {"i": i})
        log.append(Action.COMMIT, State.INFLIGHT, instant=req.instant)
        log.append(Action.COMMIT, State.COMPLETED, {"i": i}, instant=req.instant)


def read(spec: dict[str, str]) -> None:
    events = open_spec(spec).read_from(0)
    print(json.dumps([[e.seq, e.instant, e.state.value, e.token] for e in events]))


def counter(spec: dict[str, str], name: str, lease_ms: int, n: int, file: str, ready: str, go: str) -> None:
    store = open_spec(spec)
    lock = store.lock(name, lease_ms)
    inside = Path(file + ".inside")
    _arrive(ready, go)
    for _ in range(n):
        with lock:
            # Exclusive create: if another holder is inside too, the lock is broken.
            fd = os.open(inside, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            value = int(Path(file).read_text())
            time.sleep(0.001)  # widen the window a lost update would need
            Path(file).write_text(str(value + 1))
            os.close(fd)
            os.unlink(inside)


def hold(spec: dict[str, str], name: str, lease_ms: int, ready: str) -> None:
    lock = open_spec(spec).lock(name, lease_ms)
    lock.acquire(timeout_s=30)
    Path(ready).write_text(str(os.getpid()))
    time.sleep(120)  # the test kills us here, without release


COMMANDS = {
    "append": append,
    "lifecycle": lifecycle,
    "lifecycles": lifecycles,
    "read": read,
    "counter": counter,
    "hold": hold,
}

if __name__ == "__main__":
    name, *args = (json.loads(a) for a in sys.argv[1:])
    COMMANDS[name](*args)  # type: ignore[operator]
