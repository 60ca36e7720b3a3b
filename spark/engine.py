"""``SparkEngine``: the engine protocol (:mod:`lakeline.table.engine`) on a Spark cluster.

The same module-level task functions and picklable task descriptions the local engine
runs go to executors, one Spark task per item (items are file-sized units of work:
a file group to compact, a file to index, a slice to validate), and the results come
back to the driver in input order. Each call is one Spark job whose description names
the function, so the Spark UI and logs say what lakeline ran. An executor's lakeline
error (``SnapshotExpiredError``, ``IndexBuildError``...) is raised on the driver as
itself (:mod:`.errors`), so callers handle it as with the local engine; a refusal
(bad input: no attempt would pass) is returned by its task rather than raised, so Spark
never retries it, and a failure of pyarrow or the store that lakeline can tell arrives
as lakeline's error too (:func:`.errors.run_task`).

On a table on an object store each task opens the store itself from the
``ObjectStore`` its item carries; items are pickled without the store (whose pickle
holds the storage options), which travels in the job's function instead, since PySpark
hands parallelized items to the JVM through a file on the driver's disk (:mod:`.shipping`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

from pyspark.sql import SparkSession

from ..timeline.errors import UnsupportedOperationError
from .errors import Refused, raise_refused, reraise_typed, run_task
from .shipping import Packer, unpack

T = TypeVar("T")
R = TypeVar("R")


class SparkEngine:
    """Runs ``map(fn, items)`` as one Spark job, one task per item.

    Args:
        spark: the session whose cluster runs the tasks.
        max_tasks: at most this many tasks per job (items are then batched per task, in
            order); None: one task per item.
    """

    def __init__(self, spark: SparkSession, max_tasks: int | None = None) -> None:
        self.spark = spark
        self.max_tasks = max_tasks

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        items = list(items)
        if not items:
            return []
        sc = self.spark.sparkContext
        name = getattr(fn, "__qualname__", repr(fn))
        slices = len(items) if self.max_tasks is None else max(1, min(len(items), self.max_tasks))
        previous = sc.getLocalProperty("spark.job.description")
        sc.setJobDescription(f"lakeline {getattr(fn, '__module__', '')}.{name} over {len(items)} item(s)")
        try:
            packer = Packer()
            blobs = [packer.dumps(item) for item in items]
            run = partial(_run_packed, fn, tuple(packer.stores))
            results: list[Any] = sc.parallelize(blobs, slices).map(run).collect()
        except Exception as e:  # noqa: BLE001 - an executor's typed error is re-raised as itself
            reraise_typed(e)
            raise
        finally:
            sc.setJobDescription(previous)  # type: ignore[arg-type]
        raise_refused(results)  # a task's refusal, returned so that Spark did not retry it
        return results

    def __reduce__(self) -> Any:
        # A task that captured the engine would try to ship the SparkSession to executors.
        raise UnsupportedOperationError("a SparkEngine lives on the driver; tasks must not carry it")

    def __repr__(self) -> str:
        return f"SparkEngine({self.spark.sparkContext.master})"


def _run_packed(fn: Callable[[Any], R], stores: tuple[Any, ...], blob: bytes) -> R | Refused:
    """An executor's call of ``fn`` on one item, its object stores put back; a failure
    lakeline can tell is its error, a refusal returned (:func:`.errors.run_task`)."""
    return run_task(fn, unpack(blob, stores))
