"""What the tests of bad and good input (``test_records.py``, ``test_record_keys.py``,
``test_create_and_open.py``) share: the rows and the ``table`` fixture they start from, and
:func:`nothing_written`, the strict "no trace" check of a refused call."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from lakeline.table import Table

from tests.table.model import SCHEMA, table_rows, to_arrow

ROWS = [
    {"id": 1, "ts": 1, "day": "2026-01-01", "v": 10, "s": "a"},
    {"id": 2, "ts": 1, "day": "2026-01-01", "v": 20, "s": "b"},
    {"id": 3, "ts": 1, "day": "2026-01-02", "v": 30, "s": None},
]


def disk_files(path: Path) -> dict[str, int]:
    out = {}
    for root, _, names in os.walk(path):
        for n in names:
            p = os.path.join(root, n)
            out[os.path.relpath(p, path)] = os.path.getsize(p)
    return out


@contextmanager
def nothing_written(t: Table, path: Path) -> Iterator[None]:
    """The block must leave the timeline, the files on disk and the rows unchanged."""
    seq, n_instants, files = t.timeline.last_seq, len(t.timeline.instants()), disk_files(path)
    rows = table_rows(t.to_arrow(), t.schema.names)
    yield
    assert t.timeline.last_seq == seq, "a refused call appended events"
    assert len(t.timeline.instants()) == n_instants
    assert disk_files(path) == files, "a refused call changed files on disk"
    assert table_rows(t.to_arrow(), t.schema.names) == rows


@pytest.fixture(params=["cow", "mor"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Table, Path]:
    path = tmp_path / "t"
    t = Table.create(
        path,
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type=request.param,
        properties={"write.target-file-size-bytes": 2048},
    )
    t.insert(to_arrow(ROWS))
    t.upsert(to_arrow([{**ROWS[0], "ts": 2, "v": 11}]))  # mor: a log on top of a base
    return t, path


def write_ops(t: Table) -> dict[str, Callable[[Any], Any]]:
    return {"insert": t.insert, "upsert": t.upsert, "overwrite": t.overwrite}
