"""Tables for the integrity-check tests, and the damage they do to one file of them.

The damage goes through the table's own ``Storage`` (``fs`` streams, ``delete``), so the
same helpers damage a table on a local disk and one on S3.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from lakeline.table import Table
from lakeline.timeline.view.file_group import FileKind

from tests.cli._data import SCHEMA, rows

DAY = "day=2026-01-01"  # odd ids
OTHER_DAY = "day=2026-01-02"  # even ids


def make(
    path: str, table_type: str, timeline: str | None = None, storage_options: Mapping[str, str] | None = None
) -> Table:
    """Two partitions; an upsert of every key, an update of two, then (mor) a compaction
    and (both) one more update. Nothing is cleaned, so the slices the compaction or the
    copy-on-write rewrites retired stay readable by time travel: old bases (and, on mor,
    the logs before the compaction) are files of retained snapshots only; the current
    snapshot of a mor table has a log on top of each compacted base."""
    t = Table.create(
        path,
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type=table_type,
        timeline=timeline,
        storage_options=storage_options,
    )
    t.upsert(rows([1, 2, 3, 4, 5, 6]))
    t.upsert(rows([1, 2], ts=2))
    if table_type == "mor":
        assert t.services.compact().instant is not None
    t.upsert(rows([1, 2], ts=3))
    return t


def current_file(t: Table, kind: FileKind, partition: str = DAY) -> str:
    """The relative path of the live base (or newest log) of ``partition``."""
    (s,) = [s for s in t.view(t.timeline).latest_slices() if s.partition == partition]
    if kind == FileKind.LOG:
        assert s.logs, "the current slice has no log"
        return s.logs[-1].path
    assert s.base is not None
    return s.base.path


def retained_only(t: Table, partition: str = DAY) -> str:
    """A base file only an older snapshot reads (a slice a rewrite or compaction retired)."""
    (grp,) = [g for g in t.view(t.timeline).file_groups(partition)]
    old = [s.base.path for s in grp.slices[:-1] if s.base is not None]
    assert old, "no retired slice"
    return old[0]


def _read(t: Table, rel: str) -> bytes:
    return t.storage.read_bytes(t.storage.path(rel))


def _write(t: Table, rel: str, data: bytes) -> None:
    with t.storage.fs.open_output_stream(t.storage.path(rel)) as out:
        out.write(data)


def delete(t: Table, rel: str) -> None:
    assert t.storage.delete(t.storage.path(rel))


def truncate(t: Table, rel: str) -> None:
    data = _read(t, rel)
    _write(t, rel, data[: len(data) // 2])


def flip_footer(t: Table, rel: str) -> None:
    """Invert 16 bytes at the start of the Parquet footer (the file metadata's first
    fields): the size stays, the footer no longer decodes."""
    data = bytearray(_read(t, rel))
    (length,) = struct.unpack("<i", data[-8:-4])
    start = len(data) - 8 - length
    data[start : start + 16] = bytes(b ^ 0xFF for b in data[start : start + 16])
    _write(t, rel, bytes(data))
