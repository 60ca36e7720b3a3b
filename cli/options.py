"""Options shared by several commands, and opening a table for one command.

Kept in one place so ``--timeline`` and ``--json`` mean the same thing everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from ..table import Table

F = TypeVar("F", bound=Callable[..., Any])


def timeline_option(fn: F) -> F:
    """``--timeline URL``: where the table's event log lives (omit for the filesystem)."""
    return click.option(
        "--timeline",
        "timeline_url",
        metavar="URL",
        default=None,
        help="postgresql://... URL when the table keeps its timeline in PostgreSQL; "
        "omit for a timeline stored next to the data.",
    )(fn)


def json_option(fn: F) -> F:
    """``--json``: machine-readable output instead of rich tables."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(fn)


@contextmanager
def opened_table(path: str, timeline_url: str | None) -> Iterator[Table]:
    """Open the table at ``path`` and release its store afterwards (a PostgreSQL
    store holds a connection that a short-lived command should not leak).

    Raises:
        TableNotFoundError: no table at ``path``.
        TimelineConfigError: ``timeline_url`` does not match the table.
    """
    table = Table.open(path, timeline=timeline_url)
    try:
        yield table
    finally:
        table.log.store.close()
