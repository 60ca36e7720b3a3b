"""Whether the tests run under CI: the one reading of the ``CI`` variable.

Under CI a missing dependency (PostgreSQL, S3, Spark, chromium, a C extension that did
not build) fails the run instead of skipping, because a CI run that silently skipped a
backend would prove nothing about it (docs/design.md, "How it is checked"). CI systems
set ``CI`` to ``true``, ``1``, ``yes`` or another non-empty word, so any value but an
empty one or a false word (``0``, ``false``, ``no``, ``off``) counts.
"""

from __future__ import annotations

import os

#: Values of ``CI`` that mean "not under CI" (compared lower-case, stripped).
FALSE_WORDS = frozenset({"", "0", "false", "no", "off"})


def under_ci() -> bool:
    """True when ``CI`` is set to any truthy value."""
    return os.environ.get("CI", "").strip().lower() not in FALSE_WORDS
