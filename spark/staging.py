"""The staging folder of a Spark write, and stage 1: the user's rows copied into it.

A Spark write keeps what moves between its stages on the table's own storage
(``.lakeline/staging/<write id>/``), not in Spark: no shuffle, no cache, and the driver
never holds rows. Every attempt of the write replays from the staged input, even when
the DataFrame's source is not repeatable. Storage every executor can reach is what a
lakeline table needs anyway, since executors write its data files.
"""

from __future__ import annotations

import pickle
import posixpath
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..indexes.bloom import key_hashes
from ..timeline.storage import META_DIR, Storage


@dataclass(frozen=True)
class Staging:
    """The staging folder of one Spark write, on the table's storage."""

    storage: Storage
    folder: str  # relative to the table

    @classmethod
    def new(cls, storage: Storage) -> Staging:
        return cls(storage, posixpath.join(META_DIR, "staging", uuid.uuid4().hex))

    def put(self, kind: str, data: bytes) -> str:
        """Store ``data`` under a fresh name; returns its relative path."""
        rel = posixpath.join(self.folder, kind, uuid.uuid4().hex)
        self.storage.write_bytes(self.storage.path(rel), data)
        return rel

    def get(self, rel: str) -> bytes:
        return self.storage.read_bytes(self.storage.path(rel))

    def publish(self, name: str, value: Any) -> None:
        """Store ``value`` (pickled) under ``name`` in the folder, for a reader that
        polls for it with :meth:`peek`: the name appears only once the whole value is
        there (written aside, then renamed), so a reader never sees half of it."""
        final = self.storage.path(posixpath.join(self.folder, name))
        aside = self.storage.path(posixpath.join(self.folder, f"{name}.{uuid.uuid4().hex}.tmp"))
        self.storage.write_bytes(aside, pickle.dumps(value))
        self.storage.fs.move(aside, final)

    def peek(self, name: str) -> tuple[bool, Any]:
        """(True, the value) once :meth:`publish` stored ``name``; (False, None) before."""
        path = self.storage.path(posixpath.join(self.folder, name))
        if not self.storage.exists(path):
            return False, None
        return True, pickle.loads(self.storage.read_bytes(path))

    def remove(self, kind: str | None = None) -> None:
        self.storage.delete_dir(self.storage.path(self.folder if kind is None else posixpath.join(self.folder, kind)))


def _ipc_options() -> pa.ipc.IpcWriteOptions:
    # A function, not a module constant: stage 1's closure is pickled by value with the
    # globals it names, and IpcWriteOptions does not pickle.
    return pa.ipc.IpcWriteOptions(compression="lz4")


def to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_ipc_options()) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


# -- 1. split ----------------------------------------------------------------------------------

STAGED_SCHEMA = "path string, rows long"
#: The staged input's bucket column: a hash of the record identity modulo
#: :data:`BUCKETS`; planning task ``i`` of ``n`` takes the rows whose bucket is ``i`` modulo ``n``.
BUCKET = "_bucket"
BUCKETS = 4096


def split_input(staging: Staging, identity: list[str]
                ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of stage 1: the input as IPC files, each row with its
    bucket, so every copy of a record goes to one planning task.

    Rows stay in input order (no sort by bucket): a planning task that takes every
    bucket, the common case, reads the files as they are, and a sorted input stays
    sorted. A task writes a file every :data:`_FLUSH_ROWS` rows, so its memory is
    bounded."""

    def split(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        sink: pa.BufferOutputStream | None = None
        writer: pa.ipc.RecordBatchStreamWriter | None = None
        held = 0

        def flush() -> pa.RecordBatch:
            assert sink is not None and writer is not None
            writer.close()
            path = staging.put("input", sink.getvalue().to_pybytes())
            return pa.RecordBatch.from_pydict({"path": [path], "rows": pa.array([held], pa.int64())})

        for i, batch in enumerate(batches):
            if not batch.num_rows:
                continue
            if identity:
                bucket = key_hashes(pa.Table.from_batches([batch]), identity) % np.uint64(BUCKETS)
            else:  # nothing to keep together: spread the batches
                bucket = np.full(batch.num_rows, (i + uuid.uuid4().int) % BUCKETS)
            batch = batch.append_column(BUCKET, pa.array(bucket.astype(np.int16)))
            if writer is None:
                sink = pa.BufferOutputStream()
                writer = pa.ipc.new_stream(sink, batch.schema, options=_ipc_options())
            writer.write_batch(batch)
            held += batch.num_rows
            if held >= _FLUSH_ROWS:
                yield flush()
                sink, writer, held = None, None, 0
        if writer is not None:
            yield flush()

    return split


def staged_rows(staging: Staging, paths: tuple[str, ...], task: int, tasks: int, pool: Executor) -> pa.Table:
    """Planning task ``task`` of ``tasks``: its rows of the staged input, in input order."""

    def share(path: str) -> pa.Table:
        rows = from_ipc(staging.get(path))
        if tasks > 1:
            bucket = rows.column(BUCKET).to_numpy()
            rows = rows.filter(pa.array(bucket % tasks == task))
        return rows.drop_columns([BUCKET])

    return pa.concat_tables(pool.map(share, paths))


#: Rows a stage-1 task writes per staged file.
_FLUSH_ROWS = 1_000_000
