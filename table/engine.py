"""Engines: how data work runs.

The protocol is deliberately narrow, ``map(fn, items)`` over picklable task
descriptions with the results returned to the caller, so the same module-level task
functions run on this machine (:class:`LocalEngine`) or on a Spark cluster
(``lakeline.spark.SparkEngine``). Nothing in the write path, the services or the
indexes knows which engine runs it.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Engine(Protocol):
    """Runs one function over many work units."""

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(i) for i in items]``, possibly in parallel, results in input order."""
        ...


def lower_priority(nice: int) -> None:
    """Raise the niceness of the calling thread by ``nice`` (Linux; elsewhere, or without
    the right to, it is left as it is: a priority is a courtesy, not a guarantee).

    Background services run their work in fresh pool threads niced this way, so the
    writers sharing the machine keep their latency.
    """
    if nice <= 0 or not hasattr(os, "setpriority"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except OSError:
        pass


class LocalEngine:
    """Threads (default: pyarrow releases the GIL for I/O and compute) or processes.

    Args:
        parallelism: workers; 0 or None means one per core.
        processes: use a process pool (tasks and results must pickle).
    """

    def __init__(self, parallelism: int | None = None, processes: bool = False, nice: int = 0) -> None:
        self.parallelism = parallelism or os.cpu_count() or 1
        self.processes = processes
        self.nice = nice

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        items = list(items)
        if self.nice == 0 and (len(items) <= 1 or self.parallelism == 1):
            return [fn(i) for i in items]
        workers = max(1, min(self.parallelism, len(items)))
        pool: ProcessPoolExecutor | ThreadPoolExecutor
        if self.processes:
            # Workers start from a fresh server process, never forked from this one: the
            # object store's client (obstore's runtime) does not survive a fork, and a
            # forked worker's first request to S3 would hang for good.
            ctx = multiprocessing.get_context("forkserver")
            pool = ProcessPoolExecutor(workers, ctx, initializer=lower_priority, initargs=(self.nice,))
        else:
            pool = ThreadPoolExecutor(workers, initializer=lower_priority, initargs=(self.nice,))
        with pool:
            return list(pool.map(fn, items))

    def __repr__(self) -> str:
        kind = "processes" if self.processes else "threads"
        nice = f", nice {self.nice}" if self.nice else ""
        return f"LocalEngine({self.parallelism} {kind}{nice})"
