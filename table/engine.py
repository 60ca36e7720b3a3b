"""Engines: how data work runs.

The protocol is deliberately narrow, ``map(fn, items)`` over picklable task
descriptions with the results returned to the caller, so the same module-level task
functions run on this machine (:class:`LocalEngine`) or on a Spark cluster
(``lakeline.spark.SparkEngine``). Nothing in the write path, the services or the
indexes knows which engine runs it.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Callable, Protocol, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Engine(Protocol):
    """Runs one function over many work units."""

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(i) for i in items]``, possibly in parallel, results in input order."""
        ...


class LocalEngine:
    """Threads (default: pyarrow releases the GIL for I/O and compute) or processes.

    Args:
        parallelism: workers; 0 or None means one per core.
        processes: use a process pool (tasks and results must pickle).
    """

    def __init__(self, parallelism: int | None = None, processes: bool = False) -> None:
        self.parallelism = parallelism or os.cpu_count() or 1
        self.processes = processes

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        items = list(items)
        if len(items) <= 1 or self.parallelism == 1:
            return [fn(i) for i in items]
        pool_cls = ProcessPoolExecutor if self.processes else ThreadPoolExecutor
        with pool_cls(max_workers=min(self.parallelism, len(items))) as pool:
            return list(pool.map(fn, items))

    def __repr__(self) -> str:
        kind = "processes" if self.processes else "threads"
        return f"LocalEngine({self.parallelism} {kind})"
