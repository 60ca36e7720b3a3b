"""lakeline's typed errors across the Spark boundary.

A task that raises on an executor reaches the driver as pyspark's ``PythonException``
(or a Py4J error wrapping it), whose text holds the executor's traceback. Callers of
lakeline on Spark must see the same typed error the local engine raises
(``DuplicateKeyError``, ``SchemaMismatchError``, ...), so :func:`typed_error` finds the
last ``<module>.<Name>Error: message`` line of that traceback naming a class of
:mod:`lakeline.timeline.errors` and rebuilds it.
"""

from __future__ import annotations

import re

from ..timeline import errors as lakeline_errors
from ..timeline.errors import LakelineError

_LINE = re.compile(r"^(?:[\w.]+\.)?(?P<name>\w+(?:Error|Exception)): (?P<message>.*)$")


def typed_error(error: BaseException) -> LakelineError | None:
    """The lakeline error an executor raised inside ``error``, or None if it was not one."""
    text = str(error)
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        m = _LINE.match(lines[i].strip())
        if m is None:
            continue
        cls = getattr(lakeline_errors, m.group("name"), None)
        if isinstance(cls, type) and issubclass(cls, LakelineError):
            message = m.group("message")
            # A multi-line message continues until the JVM's own stack trace starts.
            for more in lines[i + 1 :]:
                if more.startswith(("\tat ", "\n", "org.apache.", "py4j.")) or not more.strip():
                    break
                message += "\n" + more
            return cls(message)
    return None


def reraise_typed(error: BaseException) -> None:
    """Raise the lakeline error inside ``error`` if there is one (from ``error``)."""
    typed = typed_error(error)
    if typed is not None:
        raise typed from error
