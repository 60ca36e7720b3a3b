"""A process forked from one that reached an object store is refused the store, typed.

obstore runs every request on a Rust (tokio) runtime that it starts once per process, on
threads of its own. A fork copies the runtime's state but none of its threads, so in the
child the first request waits for a thread that does not exist: the process hangs for
good, with no error and no timeout (seen here: a child opening an S3 table after its
parent had read one never returned; tokio-rs/tokio#4301). Nothing in the child can
restart that runtime, since a Rust extension cannot be loaded twice.

So the hang becomes an error that says what to do: a child forked after this process
reached a store raises :class:`~lakeline.timeline.errors.ForkedStoreError` on its first
request, and one forked before it, or started with ``spawn`` / ``forkserver`` (what
``LocalEngine(processes=True)`` uses), reaches the store as usual.
"""

from __future__ import annotations

import os

from ..errors import ForkedStoreError

#: Whether this process has built an object-store client (its runtime may be running).
_reached = False
#: Whether this process was forked from one that had (at any depth).
_inherited = False


def reach(what: str) -> None:
    """Called before every use of an object-store client: refuses it in a forked child."""
    global _reached
    if _inherited:
        raise ForkedStoreError(
            f"{what}: this process was forked from one that had already used an object store, "
            "and the store's client does not survive a fork (its requests would wait forever); "
            "start worker processes with multiprocessing's 'spawn' or 'forkserver' method, "
            "or fork them before the first access to the store"
        )
    _reached = True


def _after_fork_in_child() -> None:
    global _inherited
    _inherited = _inherited or _reached


os.register_at_fork(after_in_child=_after_fork_in_child)
