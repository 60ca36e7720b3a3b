"""Task of ``tests/object_storage/test_forked_processes.py``: count a table's rows in a
worker process of ``LocalEngine(processes=True)`` (importable, so it pickles by name)."""

from __future__ import annotations

from typing import Any


def count_rows(args: tuple[str, dict[str, Any]]) -> int:
    from lakeline.table import Table

    uri, options = args
    return Table.open(uri, storage_options=options).to_arrow().num_rows
