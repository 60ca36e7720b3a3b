"""The object store's module-level thread pools work in a forked child (issue 45 item 6).

A fork copies a ``ThreadPoolExecutor`` without its threads; the copy still counts them
as idle, so it queues work that no thread runs and the child waits forever. The event
log on an object store probes slots on such a pool, and the pyarrow file system over
obstore takes many HEADs at once on another; each module makes a fresh pool in a child.

The child uses the pools directly, not through obstore: obstore's own runtime does not
survive a fork once the parent used it (tokio-rs/tokio#4301), so a forked child must not
reach an object store the parent reached either way; these pools must not be a second
reason, for the work lakeline runs on them without the store.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

from lakeline.timeline.storage import object_files
from lakeline.timeline.storage.event_log import object_store as event_log

from tests.helpers import forked_status


def _pools() -> list[ThreadPoolExecutor]:
    return [event_log._POOL, object_files._POOL]


def test_a_forked_child_gets_pools_that_run_its_work() -> None:
    for pool in _pools():  # threads started and idle in the parent, as after a read
        assert list(pool.map(lambda i: i * 2, range(20))) == list(range(0, 40, 2))
    time.sleep(0.1)  # each thread marks itself idle just after its last item
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: every pool must run what it is given
        ok = False
        try:
            # One item each: more than the idle count would make the copy start threads.
            ok = all(pool.submit(lambda: 41).result(timeout=5) == 41 for pool in _pools())
        finally:
            os.write(w, b"ok" if ok else b"no")
            os._exit(0)
    os.close(w)
    status = forked_status(pid, "a pool copied from its parent", timeout=10)
    assert os.read(r, 2) == b"ok", "a pool copied into the forked child never ran its work"
    assert status == 0
    assert event_log._POOL.submit(lambda: 7).result(timeout=5) == 7  # the parent's pool is untouched
