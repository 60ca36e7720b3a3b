"""The metadata table: index entries under ``.lakeline/metadata/<partition>/``.

Each index definition is one partition folder (``<name>@<creating instant>``, see
:func:`lakeline.indexes.states.partition_of`; the ``files`` index's is ``files``) of
Parquet files of two kinds:

* ``delta_<instant>_<token>.parquet``: the entries one data instant added. A writer puts
  them there *before* its instant completes, behind the instant's markers, so a
  rollback deletes them with the data files. A reader sees a delta only when its
  instant is completed in the reader's snapshot: entries of pending or rolled-back
  instants are invisible without anyone having to clean them up first.
* ``base_<seq>_<token>.parquet``: what :meth:`MetadataTable.compact` (or
  :meth:`MetadataTable.rebuild`) folded: the entries of every instant completed at or
  before event ``seq``. It keeps each entry's instant in an ``_instant`` column, so a
  time-travel reader whose snapshot is older than ``seq`` still sees only what its
  snapshot had.

A file's name is its reference, so it carries its seal: the token is 8 random hex
digits, then the file's size and a CRC-32 of its footer, and its pages carry Parquet's
page CRCs (:mod:`.integrity`); a file damaged, truncated or replaced by another is
:class:`~lakeline.timeline.errors.CorruptFileError` naming it. A token of 8 digits alone
names a file written before seals, read as it is.

Readers take the newest base plus the deltas of instants that completed after the
base's ``seq`` and are completed in their snapshot; an entry is identified by its
``path`` (and ``column`` where present) and the latest instant wins. Files are never
rewritten in place, and a base appears under its final name only when complete
(written under a temporary name, then moved), so a reader never sees half a file.
"""

from __future__ import annotations

import posixpath
import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..timeline.errors import MetadataTableError
from ..timeline.instant import State
from ..timeline.markers import write_marker
from ..timeline.storage.filesystem import META_DIR, Storage
from ..timeline.timeline import Timeline
from .integrity import (
    PARQUET_READ,
    PARQUET_WRITE,
    decoding,
    seal_bytes,
    seal_of_name,
    seal_of_written,
    sealed_token,
    verify,
)

#: The column every stored entry carries: the data instant that caused it.
INSTANT = "_instant"

METADATA_DIR = "metadata"

#: A token is 8 random hex digits, then in a sealed file's name its size and checksum
#: (:func:`lakeline.indexes.integrity.sealed_token`); 8 digits alone: before seals.
_DELTA = re.compile(r"^delta_(?P<instant>\d+)_(?P<token>[0-9a-f]{8}(?:[0-9a-f]{20})?)\.parquet$")
_BASE = re.compile(r"^base_(?P<seq>-?\d+)_(?P<token>[0-9a-f]{8}(?:[0-9a-f]{20})?)\.parquet$")
_READ_ATTEMPTS = 5


def _entry_key(table: pa.Table) -> list[str]:
    return [c for c in ("path", "column") if c in table.column_names]


class MetadataTable:
    """The metadata table of one data table (one folder per index)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    # -- layout ------------------------------------------------------------------------

    def rel_dir(self, index: str) -> str:
        """The index partition's folder, relative to the table's base path."""
        if not index or "/" in index or index.startswith("."):
            raise MetadataTableError(f"invalid index name {index!r}")
        return posixpath.join(META_DIR, METADATA_DIR, index)

    def _listing(self, index: str) -> tuple[list[tuple[int, str]], dict[int, list[str]]]:
        """(bases as (seq, path), deltas by instant) of one index partition."""
        bases: list[tuple[int, str]] = []
        deltas: dict[int, list[str]] = {}
        for info in self.storage.list_files(self.storage.path(self.rel_dir(index))):
            name = posixpath.basename(info.path)
            if m := _DELTA.match(name):
                deltas.setdefault(int(m.group("instant")), []).append(info.path)
            elif m := _BASE.match(name):
                bases.append((int(m.group("seq")), info.path))
        return sorted(bases), deltas

    def indexes_on_storage(self) -> list[str]:
        """Index partitions that have a folder (whatever the timeline says of them)."""
        from pyarrow.fs import FileType

        infos = self.storage.list_entries(self.storage.path(META_DIR, METADATA_DIR))
        return sorted(posixpath.basename(i.path) for i in infos if i.type == FileType.Directory)

    def bases(self, index: str) -> list[tuple[int, str]]:
        """The bases of one index partition as (seq, path), oldest first."""
        return self._listing(index)[0]

    def deltas(self, index: str) -> dict[int, list[str]]:
        """The delta files of one index partition (absolute paths), by data instant."""
        return self._listing(index)[1]

    def delta_count(self, index: str) -> int:
        """How many delta files the partition holds (what automatic compaction watches)."""
        return sum(len(ps) for ps in self._listing(index)[1].values())

    def has_updates(self, index: str, instant: int) -> bool:
        """Whether ``instant`` wrote entries for ``index`` (the indexer's catch-up skips it)."""
        return instant in self._listing(index)[1]

    # -- writing -----------------------------------------------------------------------

    def write_updates(
        self,
        index: str,
        instant: int,
        rows: pa.Table,
        marker: bool = True,
        row_group_rows: int | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> str:
        """Write the entries ``instant`` adds to ``index``, before the instant completes.

        The marker goes first (like data files), so a crash at any point leaves nothing
        a rollback cannot find. ``marker=False`` is for an indexer catching up on an
        instant that already completed: it can no longer be rolled back, and a marker
        folder would outlive it. ``row_group_rows`` caps a row group (a record index's
        deltas are read bucket by bucket); ``options`` are the Parquet writer's. Returns
        the delta's path relative to the base path.
        """
        if INSTANT in rows.column_names:
            rows = rows.drop_columns([INSTANT])  # a delta's instant is its name
        folder, random8 = self.rel_dir(index), uuid.uuid4().hex[:8]
        self.storage.mkdirs(self.storage.path(folder))
        if self.storage.is_local:
            # Written as it is encoded, aside, then renamed to the name its seal makes
            # (:mod:`.integrity`): encoded whole in memory first, a 500k-entry delta cost
            # an insert 60 ms more (the delta is written beside the data file, and the
            # insert waited for it). Both names are marked before they can exist.
            aside = posixpath.join(folder, f"delta_{instant}_{random8}.parquet.partial")
            if marker:
                write_marker(self.storage, instant, aside)
            _write(rows, self.storage.path(aside), self.storage, row_group_rows, options or {})
            token = sealed_token(random8, seal_of_written(self.storage, self.storage.path(aside)))
            rel = posixpath.join(folder, f"delta_{instant}_{token}.parquet")
            if marker:
                write_marker(self.storage, instant, rel)
            self.storage.fs.move(self.storage.path(aside), self.storage.path(rel))
            return rel
        # An object store renames nothing: encoded first, then put under its sealed name.
        data = _encode(rows, row_group_rows, options or {})
        rel = posixpath.join(folder, f"delta_{instant}_{sealed_token(random8, seal_bytes('.parquet', data))}.parquet")
        if marker:
            write_marker(self.storage, instant, rel)
        with self.storage.fs.open_output_stream(self.storage.path(rel)) as sink:
            sink.write(data)
        return rel

    def write_base(self, index: str, seq: int, rows: pa.Table) -> str:
        """Write a base whole (readers pick the newest base, so it must never be visible
        half-written: :meth:`Storage.written_whole`); returns its relative path."""
        data = _encode(rows, None, {})
        token = sealed_token(uuid.uuid4().hex[:8], seal_bytes(".parquet", data))
        final = posixpath.join(self.rel_dir(index), f"base_{seq}_{token}.parquet")
        self.storage.mkdirs(self.storage.path(self.rel_dir(index)))
        with self.storage.written_whole(self.storage.path(final)) as target:
            with self.storage.fs.open_output_stream(target) as sink:
                sink.write(data)
        return final

    # -- reading -----------------------------------------------------------------------

    def read(self, index: str, snapshot: Timeline) -> pa.Table | None:
        """The entries of ``index`` visible in ``snapshot`` (with ``_instant``), one per
        entry key, the latest instant winning; None when the index has no files.

        Files can vanish under a reader (a compaction removes what it folded): the
        listing is then read again, a bounded number of times.

        Raises:
            MetadataTableError: the files kept vanishing.
        """
        for _ in range(_READ_ATTEMPTS):
            try:
                return self._read_once(index, snapshot)
            except FileNotFoundError:
                continue
        raise MetadataTableError(f"metadata table partition {index!r} kept changing while being read")

    def _read_once(self, index: str, snapshot: Timeline) -> pa.Table | None:
        bases, deltas = self._listing(index)
        base_seq = -1
        parts: list[pa.Table] = []
        if bases:
            base_seq, base_path = bases[-1]
            base = self.read_file(base_path)
            parts.append(base)
        for instant, paths in deltas.items():
            inst = snapshot.find(instant)
            if inst is None or inst.state is not State.COMPLETED:
                continue  # pending or rolled back in this snapshot: not there yet (or ever)
            if (inst.completed_seq or 0) <= base_seq:
                continue  # folded into the base
            for p in paths:
                t = self.read_file(p)
                parts.append(t.append_column(INSTANT, pa.array([instant] * t.num_rows, pa.int64())))
        if not parts:
            return None
        rows = pa.concat_tables(parts, promote_options="permissive")
        return _visible_latest(rows, snapshot)

    def read_file(self, path: str) -> pa.Table:
        """One file of a partition (absolute path), checked against the seal its name
        carries and its page checksums (:mod:`.integrity`).

        Raises:
            CorruptFileError: the file is damaged, naming it.
            FileNotFoundError: it is gone (a compaction removed it meanwhile).
        """
        verify(self.storage, path, seal_of_name(path))
        with decoding(self.storage, path), self.storage.fs.open_input_file(path) as f:
            return pq.read_table(f, **PARQUET_READ)

    # -- maintenance -------------------------------------------------------------------

    def compact(self, index: str, timeline: Timeline) -> str | None:
        """Fold the deltas of every instant completed in ``timeline`` into a new base.

        Old bases and the folded deltas are removed after the new base is in place;
        deltas of rolled-back instants are removed too (their rollback may have died
        before reaching them). Returns the new base's relative path, None when there
        was nothing to fold.
        """
        bases, deltas = self._listing(index)
        folded = [
            p
            for i, ps in deltas.items()
            if (inst := timeline.find(i)) is not None and inst.state is State.COMPLETED
            for p in ps
        ]
        dead = [
            p
            for i, ps in deltas.items()
            if (inst := timeline.find(i)) is not None and inst.state is State.ROLLED_BACK
            for p in ps
        ]
        if not folded and len(bases) <= 1:
            for p in dead:
                self.storage.delete(p)
            return None
        rows = self.read(index, timeline)
        if rows is None:
            return None
        rel = self.write_base(index, timeline.last_seq, rows)
        keep = self.storage.path(rel)
        for _, p in bases:
            if p != keep:
                self.storage.delete(p)
        for p in folded + dead:
            self.storage.delete(p)
        return rel

    def rebuild(self, index: str, timeline: Timeline, rows: pa.Table) -> str:
        """Replace the partition by ``rows`` (computed from the data files of the
        snapshot ``timeline``; ``_instant`` names each entry's data instant).

        Deltas of instants completed in ``timeline`` are superseded; deltas of
        instants still pending stay and become visible when those complete. Only bases
        at or before ``timeline``'s position are replaced: a newer base (a fold done
        since, by a process that knew more) stays and keeps winning, so a rebuild by a
        stale builder that wakes up late can never take entries away.

        Raises:
            MetadataTableError: ``rows`` lacks the ``_instant`` column.
        """
        if INSTANT not in rows.column_names:
            raise MetadataTableError(f"rebuild rows of {index!r} need an {INSTANT!r} column")
        bases, deltas = self._listing(index)
        rel = self.write_base(index, timeline.last_seq, rows)
        keep = self.storage.path(rel)
        for seq, p in bases:
            if p != keep and seq <= timeline.last_seq:
                self.storage.delete(p)
        for i, ps in deltas.items():
            inst = timeline.find(i)
            if inst is not None and inst.state in (State.COMPLETED, State.ROLLED_BACK):
                for p in ps:
                    self.storage.delete(p)
        return rel

    def drop(self, index: str) -> None:
        """Remove the index partition's files (idempotent)."""
        self.storage.delete_dir(self.storage.path(self.rel_dir(index)))


def _write(rows: pa.Table, path: str, storage: Storage, row_group_rows: int | None, options: Mapping[str, Any]) -> None:
    """``rows`` as a Parquet file with page checksums at ``path``, written as encoded."""
    pq.write_table(rows, path, filesystem=storage.fs, row_group_size=row_group_rows, **{**options, **PARQUET_WRITE})


def _encode(rows: pa.Table, row_group_rows: int | None, options: Mapping[str, Any]) -> pa.Buffer:
    """``rows`` as a Parquet file with page checksums."""
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink, row_group_size=row_group_rows, **{**options, **PARQUET_WRITE})
    return sink.getvalue()


def _visible_latest(rows: pa.Table, snapshot: Timeline) -> pa.Table:
    """Entries whose instant is completed in ``snapshot``, the latest per entry key."""
    instants = pc.unique(rows.column(INSTANT)).to_pylist()
    order: dict[int, int] = {}
    for i in instants:
        inst = snapshot.find(int(i))
        if inst is not None and inst.state is State.COMPLETED:
            order[int(i)] = inst.completed_seq or 0
    rows = rows.filter(pc.is_in(rows.column(INSTANT), pa.array(list(order), pa.int64())))
    if rows.num_rows == 0:
        return rows
    seqs = pa.array([order[i] for i in rows.column(INSTANT).to_pylist()], pa.int64())
    rows = rows.append_column("__seq", seqs)
    keys = _entry_key(rows)
    # Latest completion wins: sort by it descending, keep the first row of each key.
    rows = rows.append_column("__row", pa.array(range(rows.num_rows), pa.int64()))
    ranked = rows.sort_by([("__seq", "descending"), ("__row", "descending")])
    firsts = ranked.group_by(keys, use_threads=False).aggregate([("__row", "first")])
    keep = firsts.column("__row_first")
    out = rows.filter(pc.is_in(rows.column("__row"), keep))
    return out.drop_columns(["__seq", "__row"])


def visible_paths(rows: pa.Table | None, paths: Iterable[str]) -> pa.Table | None:
    """Entries of ``rows`` for the given data-file paths only (e.g. a snapshot's live files)."""
    if rows is None:
        return None
    return rows.filter(pc.is_in(rows.column("path"), pa.array(list(paths), pa.string())))
