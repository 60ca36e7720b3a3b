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
"""

from __future__ import annotations

import re
from typing import Any

from ..timeline import errors as lakeline_errors
from ..timeline.errors import LakelineError

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
