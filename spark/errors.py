"""lakeline's typed errors across the Spark boundary.

A task that raises on an executor reaches the driver as pyspark's ``PythonException``
(or a Py4J error wrapping it), whose text holds the executor's traceback; an error of
the ``lakeline`` data source (planning a read, making a writer, its ``commit``, which
Spark runs in Python workers) reaches it as an ``AnalysisException``
``[PYTHON_DATA_SOURCE_ERROR] Failed to ...: Traceback ...``, the lakeline error's name
on its last lines. Callers of lakeline on Spark must see the same typed error the local
engine raises (``DuplicateKeyError``, ``SchemaMismatchError``, ...), name and message
first, so :func:`typed_error` finds the last ``<module>.<Name>Error: message`` line of
that text naming a class of :mod:`lakeline.timeline.errors` and rebuilds it.

``lakeline.spark.write``, ``read`` and ``SparkEngine`` re-raise it where they call
Spark (:func:`reraise_typed`). Spark's own entry points (``df.write...save()``,
``spark.read...load()``, ``collect()``) are pyspark's code: :func:`install`, run by
``register``, makes pyspark's conversion of a JVM exception return the lakeline error
instead of the pyspark exception that carries it, so those raise it too.

**Inside a task** (:func:`run_task`, around every ``SparkEngine`` task: the writes'
planning and file tasks, compaction, index builds): a failure that is not lakeline's
but whose kind lakeline can tell becomes its error (:func:`as_lakeline`: pyarrow failing
to cast or convert a value is ``SchemaMismatchError``, an ``OSError`` of the store a
``StorageAccessError``), and a *refusal* (:func:`is_refusal`: bad input or a bad table,
which no retry changes) is returned to the driver instead of raised (:class:`Refused`),
so the task attempt does not fail and Spark never runs it again: on a cluster it ran a
failed task ``spark.task.maxFailures`` = 4 times, and the driver saw a raw traceback.
A failure that another attempt may not meet (the store, a lost file) is raised, typed,
and retried as before; one lakeline cannot tell is left to Spark as it is.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa

from ..timeline import errors as lakeline_errors
from ..timeline.errors import (
    LakelineError,
    SchemaMismatchError,
    StorageAccessError,
    StoragePermissionError,
    StorageUnreachableError,
)

T = TypeVar("T")
R = TypeVar("R")

_LINE = re.compile(r"^(?:(?P<module>[\w.]+)\.)?(?P<name>\w+(?:Error|Exception)): (?P<message>.*)$")
#: Where a lakeline error's message ends in the text Spark wraps around it: the JVM's
#: stack trace, Py4J's, or the SQL state Spark appends to an error class's message.
_AFTER = re.compile(r"^(\tat |org\.apache\.|py4j\.|\s*SQLSTATE: |JVM stacktrace:)")
_MODULE = lakeline_errors.__name__


def typed_error(error: BaseException, qualified: bool = False) -> LakelineError | None:
    """The lakeline error an executor raised inside ``error``, or None if it was not one.

    Args:
        qualified: only an error line naming lakeline's module
            (``lakeline.timeline.errors.DuplicateKeyError: ...``), as a Python traceback
            does; a bare ``DuplicateKeyError: ...`` may be anyone's.
    """
    lines = str(error).splitlines()
    for i in range(len(lines) - 1, -1, -1):
        m = _LINE.match(lines[i].strip())
        if m is None or (qualified and m.group("module") != _MODULE):
            continue
        cls = getattr(lakeline_errors, m.group("name"), None)
        if isinstance(cls, type) and issubclass(cls, LakelineError):
            message = m.group("message")
            # A multi-line message continues until Spark's or the JVM's text starts.
            for more in lines[i + 1 :]:
                if not more.strip() or _AFTER.match(more):
                    break
                message += "\n" + more
            return cls(message)
    return None


def reraise_typed(error: BaseException) -> None:
    """Raise the lakeline error inside ``error`` if there is one (from ``error``)."""
    typed = typed_error(error)
    if typed is not None:
        raise typed from error


def install() -> None:
    """Make pyspark raise the lakeline error a JVM exception carries, as itself.

    pyspark turns each exception of a JVM call into a Python one in
    ``pyspark.errors.exceptions.captured.convert_exception`` (classic sessions); this
    wraps it so that an ``AnalysisException`` or ``PythonException`` whose Python
    traceback ends in an error of :mod:`lakeline.timeline.errors` comes out as that
    error: ``except DuplicateKeyError`` works around ``df.write.format("lakeline")``
    as around ``lakeline.spark.write``, and the text starts with lakeline's name and
    message. Spark's first line (``[PYTHON_DATA_SOURCE_ERROR] Failed to commit ...``)
    is kept as a note. Every other exception is left as pyspark makes it. Idempotent;
    a pyspark without that function (Spark Connect only) is left alone.
    """
    try:
        from pyspark.errors.exceptions import captured
    except ImportError:  # pragma: no cover - pyspark is this package's dependency
        return
    convert = getattr(captured, "convert_exception", None)
    if convert is None or getattr(convert, "lakeline", False):
        return

    def convert_exception(e: Any) -> Any:
        converted = convert(e)
        if isinstance(converted, captured.UnknownException) or not isinstance(converted, captured.CapturedException):
            return converted
        typed = typed_error(converted, qualified=True)
        if typed is None:
            return converted
        spark_line = str(converted).split(": Traceback", 1)[0].splitlines()[0]
        typed.add_note(f"raised through Spark: {type(converted).__name__}: {spark_line[:300]}")
        return typed

    convert_exception.lakeline = True  # type: ignore[attr-defined]
    captured.convert_exception = convert_exception


# -- inside a task -------------------------------------------------------------------------

#: What pyarrow says when a value does not fit a type: a cast, a conversion, a null in a
#: non-nullable field. Other ``ArrowInvalid``s (a damaged file, a bug) are not the data's type.
_CAST = re.compile(
    r"cast|nullable|failed to parse|convert|overflow|truncat|not in range|does not fit|data loss|precision",
    re.IGNORECASE,
)
#: pyarrow's own ``ValueError``s (not ``ArrowInvalid``) of ``Table.cast``.
_TABLE_CAST = re.compile(r"^(Casting field |Target schema's field names are not matching)")


def as_lakeline(error: BaseException) -> LakelineError | None:
    """The lakeline error a failure that is not lakeline's amounts to, or None when
    lakeline cannot tell (left as it is). The message starts with the original's
    qualified class name and text."""
    if isinstance(error, LakelineError):
        return error
    name = f"{type(error).__module__}.{type(error).__qualname__}".removeprefix("builtins.")
    text = f"{name}: {error}"
    if isinstance(error, pa.ArrowTypeError | pa.ArrowNotImplementedError):
        return SchemaMismatchError(f"the rows do not fit the table's types ({text})")
    if (isinstance(error, pa.ArrowInvalid) and _CAST.search(str(error))) or (
        type(error) is ValueError and _TABLE_CAST.match(str(error))
    ):
        return SchemaMismatchError(f"the rows do not fit the table's types ({text})")
    if isinstance(error, FileNotFoundError | FileExistsError | IsADirectoryError | NotADirectoryError):
        return None  # a path's state: lakeline's callers handle these where they mean something
    if isinstance(error, PermissionError):
        return StoragePermissionError(f"the store refused access ({text})")
    if isinstance(error, ConnectionError | TimeoutError):
        return StorageUnreachableError(f"the store does not answer ({text})")
    if isinstance(error, OSError):
        return StorageAccessError(f"the store failed ({text})")
    return None


def is_refusal(error: LakelineError) -> bool:
    """Whether running the task again would meet ``error`` again: bad input or a bad
    table (lakeline's ``ValueError``s and ``TypeError``s: a schema mismatch, a duplicate
    or null key, a damaged file, a bad option). Not the store's failures, a snapshot
    cleaned under a read, a lost driver or lock: another attempt may pass."""
    return isinstance(error, ValueError | TypeError) and not isinstance(error, StorageAccessError)


@dataclass(frozen=True)
class Refused:
    """A task's refusal, returned in place of its result (:func:`run_task`)."""

    error: LakelineError
    task: str  # the task function's name
    where: str  # the innermost frames of the task's traceback

    def raise_it(self) -> None:
        self.error.add_note(
            f"refused in a Spark task ({self.task}), so Spark did not run it again; where:\n{self.where}"
        )
        raise self.error


def run_task(fn: Callable[[T], R], item: T) -> R | Refused:
    """Run ``fn(item)`` in an executor: a failure lakeline can tell is raised as its
    error, and a refusal is returned as :class:`Refused` (see the module docstring)."""
    try:
        return fn(item)
    except Exception as e:
        typed = as_lakeline(e)
        if typed is None:
            raise
        if is_refusal(typed):
            where = "".join(traceback.format_tb(e.__traceback__)[-3:]).rstrip()
            return Refused(typed, getattr(fn, "__qualname__", repr(fn)), where)
        if typed is e:
            raise
        raise typed from e


def raise_refused(results: Sequence[Any]) -> None:
    """Raise the first refusal among a job's results (:func:`run_task`), if any."""
    for r in results:
        if isinstance(r, Refused):
            r.raise_it()
