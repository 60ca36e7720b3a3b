"""Looking keys up in the record index: which live file holds each key, and in which group.

A reader opens the index for its snapshot (:meth:`RecordIndexReader.open`): the index
must be ``ready`` there and its newest generation no newer than the snapshot (a
generation keeps only the entries of files live at its position). It then reads, for
the buckets of the keys asked, the generation's bucket files and the deltas of instants
completed after the generation (only the row groups of those buckets and keys), and
joins them with the keys exactly.

:func:`tag` folds the entries of each slice's files the way
:func:`lakeline.table.write.tagging.tag` folds their rows (base first, then logs in
completion order; the last record of a key wins, a delete record removes it), the base
preceded by the chain of bases a partial rewrite's entries lean on (oldest first,
:func:`.rows.chain_of`), so tagging with the index gives what tagging by reading the
data gives, without reading a data file. :func:`slices_holding` keeps the slices any of
whose files (or chain) names a key, for scans whose filter pins the key.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...timeline.errors import CorruptFileError, InvalidIndexError, LakelineError, MetadataTableError
from ...timeline.storage.filesystem import Storage
from ...timeline.timeline import Timeline
from ...timeline.view.file_group import FileSlice
from ..entries import IndexTarget, resolve
from ..file_checks import check_deltas_present
from ..integrity import PARQUET_READ, Seal, decoding, missing, seal_of_name, verify
from ..states import IndexKind, readable_indexes
from . import hash_bits
from .delta_hashes import DELTA_HASHES
from .hash_join import ROW, equal_hashes, exact_pairs, no_entries, pairs_at
from .live_entries import partial_rewrites
from .rows import BUCKET, DELETED, HASH, PATH, POS, bucket_hash_order, buckets_of, chain_of, key_columns, key_table
from .store import MAPPED_SUFFIX, Generation, folder_of, mapped_entries, newest_generation, read_entries, visible_deltas

#: Keys probed in one file up to which its entries are read through an ``isin`` filter
#: on the hash straight away (row groups of a hash-sorted file pruned by their
#: statistics); above it the file's hashes are read first, then the entries they match.
_FILTER_KEYS = 64
_OPEN_ATTEMPTS = 3


@dataclass(frozen=True)
class RecordIndexReader:
    """The record index as one snapshot sees it."""

    storage: Storage
    target: IndexTarget
    schema: pa.Schema
    generation: Generation
    deltas: tuple[str, ...]
    #: ``{rewrite: base it rewrote}`` of the partial rewrites in ``deltas``.
    partial: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def open(
        cls, storage: Storage, snapshot: Timeline, schema: pa.Schema, record_key: Sequence[str]
    ) -> RecordIndexReader | None:
        """The ready record index of ``snapshot``, or None when there is none or its
        generation is newer than the snapshot (then read the data: never wrong).

        Raises:
            CorruptFileError: its manifest or a delta's footer is damaged, or a data
                instant's delta is missing (naming them).
        """
        if not record_key:
            return None
        for idx in readable_indexes(snapshot, IndexKind.RECORD_INDEX):
            try:
                target = resolve(idx, schema, record_key)
            except InvalidIndexError:
                continue
            gen = newest_generation(storage, target.partition)
            if gen is None or gen.seq > snapshot.last_seq or gen.buckets != target.buckets:
                return None
            deltas = visible_deltas(storage, target.partition, snapshot, gen.seq)
            check_deltas_present(storage, target.partition, snapshot, gen.seq, deltas)
            try:
                partial = partial_rewrites(storage, deltas)
            except FileNotFoundError:
                return None  # folded away meanwhile: read the data (never wrong)
            return cls(storage, target, schema, gen, tuple(deltas), partial)
        return None

    @property
    def key(self) -> tuple[str, ...]:
        return self.target.columns

    def entries(self, keys: pa.Table) -> pa.Table:
        """The entries naming each row of ``keys`` (record-key columns): :data:`ROW` (the
        row in ``keys``), ``path`` (dictionary-encoded), ``pos``, ``deleted``; files of every
        snapshot since the generation, so the caller keeps those it reads.

        Raises:
            MetadataTableError: the index's files kept vanishing (folds replacing them).
            CorruptFileError: a file of the index is damaged or missing, naming it.
        """
        bucket, key_hash = buckets_of(keys, self.key, self.schema, self.target.buckets)
        probe = pa.table(key_table(keys, self.key, self.schema))
        by_hash = _HashOrder(key_hash)
        # A job is a file and the rows of ``keys`` it may hold, by their hashes: only the
        # entries whose hash a probe has are read, and only those pairs compare keys.
        jobs: list[tuple[str, np.ndarray, np.ndarray | _HashOrder, ProbeSet | None, Seal | None]] = []
        # A file whose hashes this process keeps answers from memory, and is read only
        # when it holds a probe (:mod:`.delta_hashes`); the others are read and asked.
        kept = self._kept_generation(key_hash)
        asked = [*kept, *self.deltas]
        held, unknown = DELTA_HASHES.held(asked, key_hash) if asked else ({}, [])
        if self.generation.files and (not kept or any(p in unknown or len(held[p]) for p in kept)):
            # By bucket, then hash: each file's probes binary-search in ascending order,
            # which walks a mapped file's pages forward instead of at random.
            order = bucket_hash_order(bucket, key_hash, by_hash())
            sorted_b = bucket[order]
            starts = np.flatnonzero(np.r_[True, sorted_b[1:] != sorted_b[:-1]]) if len(order) else np.zeros(0, np.int64)
            ends = np.r_[starts[1:], len(order)]
            for s, e in zip(starts, ends):
                file = self.generation.files.get(int(sorted_b[s]))
                if file is not None:
                    rows = order[s:e]
                    seal = self.generation.seals.get(file[0])
                    jobs.append((self.storage.path(file[0]), key_hash[rows], rows, None, seal))
        if self.deltas:  # a delta holds every bucket
            deltas = set(self.deltas)
            held = {path: h for path, h in held.items() if len(h) and path in deltas}
            unknown = [path for path in unknown if path in deltas]
            if held or unknown:
                # The hashes sorted without their rows (which row each is, is sorted out
                # only when a delta holds one of them); an insert of new keys whose every
                # delta is remembered sorts nothing (28 ms for 500k keys).
                sorted_hashes = np.sort(key_hash)
                jobs.extend((path, sorted_hashes, by_hash, ProbeSet.of(h), None) for path, h in held.items())
                probes = ProbeSet.of(sorted_hashes) if unknown and len(key_hash) > _FILTER_KEYS else None
                jobs.extend((path, sorted_hashes, by_hash, probes, None) for path in unknown)
        try:
            # Files are read in parallel (Parquet decoding releases the GIL).
            with ThreadPoolExecutor(max_workers=max(1, min(len(jobs), os.cpu_count() or 1, 8))) as pool:
                found = list(pool.map(lambda job: self._join(probe, *job), jobs))
        except FileNotFoundError as e:
            raise self._vanished(e) from e
        return pa.concat_tables(found) if found else no_entries()

    def _vanished(self, error: FileNotFoundError) -> LakelineError:
        """The error for a file of the index found missing: a fold replaced the
        generation meanwhile (read the data instead), or, while the generation that names
        it is still the newest, it was deleted (damage, naming the file)."""
        newer = newest_generation(self.storage, self.target.partition)
        if newer is not None and (newer.seq, newer.token) == (self.generation.seq, self.generation.token):
            gone = error.filename or str(error)
            return missing(self.storage, str(gone), f"record index {self.target.name!r} of the snapshot")
        return MetadataTableError(f"record index {self.target.name!r} changed while read: {error}")

    def _kept_generation(self, key_hash: np.ndarray) -> list[str]:
        """The generation, by its folder, its hashes kept by this process from now on
        (read on first use, :mod:`.delta_hashes`), for a lookup of many keys: an insert
        of new keys then reads none of its bucket files. Not for a generation of more
        than a quarter of what is kept, so the deltas this process wrote stay."""
        gen = self.generation
        if not gen.files or len(key_hash) <= _FILTER_KEYS or gen.rows > DELTA_HASHES.max_entries // 4:
            return []
        folder = self.storage.path(folder_of(self.target.partition, gen.seq, gen.token))
        try:
            DELTA_HASHES.keep(folder, lambda: np.concatenate([self._hashes_of(f) for f, _ in gen.files.values()]))
        except FileNotFoundError as e:
            error = self._vanished(e)
            if isinstance(error, CorruptFileError):
                raise error from e
            return []  # folded away meanwhile: the reads that follow say so
        return [folder]

    def _hashes_of(self, file: str) -> np.ndarray:
        """The hashes of a generation's bucket file (a copy: a mapped file may go)."""
        path = self.storage.path(file)
        seal = self.generation.seals.get(file)
        if path.endswith(MAPPED_SUFFIX):
            stored = mapped_entries(self.storage, path, seal)
        else:
            stored = read_entries(self.storage, path, columns=[HASH], seal=seal)
        return stored.column(HASH).to_numpy().copy()

    def _join(
        self,
        probe: pa.Table,
        path: str,
        hashes: np.ndarray,
        rows: np.ndarray | _HashOrder,
        probes: ProbeSet | None,
        seal: Seal | None,
    ) -> pa.Table:
        """The entries of one file naming a key of ``probe`` (entry key columns) at
        ``rows`` (whose hashes are ``hashes``), exactly: the stored hashes narrow (a
        mapped bucket file's binary-searched, a delta's 8 bytes an entry decoded and
        asked of ``probes``), then only the pairs of equal hashes compare keys. The file
        is checked against ``seal`` (a bucket file's) or its name's (a delta's) first,
        and whatever its bytes make Arrow or numpy raise names it
        (:mod:`..integrity`)."""
        with decoding(self.storage, path):
            needed = [HASH, *key_columns(self.key), PATH, POS, DELETED]
            mapped = path.endswith(MAPPED_SUFFIX)
            if mapped:
                stored = mapped_entries(self.storage, path, seal).select(needed)
            elif len(rows) <= _FILTER_KEYS:
                # A point lookup: row groups whose bucket or hash range misses every probe are
                # skipped (a delta is sorted by bucket; within one its hashes are not sorted,
                # so the bucket is what prunes: one row group of a 500k-entry delta, not 16).
                buckets = np.unique(hashes.view(np.uint64) % np.uint64(self.target.buckets)).astype(np.int32)
                stored = _entries_with(self.storage, path, buckets, hashes, needed, seal)
            else:
                # A delta shares the lookup's set; a bucket file's probes are its own.
                probes = probes if probes is not None else ProbeSet.of(hashes)
                stored_hashes = read_entries(self.storage, path, columns=[HASH], seal=seal).column(HASH).to_numpy()
                found, at = probes.find(stored_hashes)
                if not len(found):
                    return no_entries()  # every key proven absent from this file, no key read
                stored = read_entries(self.storage, path, columns=needed, seal=seal).take(pa.array(found))
                rows = rows() if isinstance(rows, _HashOrder) else rows
                if probes.sorted_hashes is hashes:  # where each entry's probe is, the search found
                    return exact_pairs(stored, probe, *pairs_at(hashes, stored_hashes[found], at, rows))
            rows = rows() if isinstance(rows, _HashOrder) else rows
            return exact_pairs(stored, probe, *equal_hashes(stored, hashes, rows, sorted_by_hash=mapped))


def _entries_with(
    storage: Storage, path: str, buckets: np.ndarray, hashes: np.ndarray, columns: list[str], seal: Seal | None = None
) -> pa.Table:
    """The entries of the Parquet file ``path`` whose hash is one of ``hashes`` (of keys
    in ``buckets``): only the row groups whose bucket and hash statistics admit one are
    read, straight from the footer. A point lookup asks every unfolded delta this, and
    a dataset scan with a filter cost about 6 ms of setup a file against 1 ms this way
    (a fresh process's lookup of one uuid key among nine deltas: 60 -> 15 ms)."""
    verify(storage, path, seal or seal_of_name(path))
    parquet = pq.ParquetFile(path, filesystem=storage.fs, **PARQUET_READ)
    meta, names = parquet.metadata, parquet.schema_arrow.names
    at_bucket, at_hash = names.index(BUCKET), names.index(HASH)
    groups = [
        i
        for i in range(meta.num_row_groups)
        if _admits(meta.row_group(i).column(at_bucket).statistics, buckets)
        and _admits(meta.row_group(i).column(at_hash).statistics, hashes)
    ]
    if not groups:
        return parquet.schema_arrow.empty_table().select(columns)
    rows = parquet.read_row_groups(groups, columns=columns, use_threads=False)
    return rows.filter(pc.is_in(rows.column(HASH), value_set=pa.array(hashes, pa.int64())))


def _admits(stats: pq.Statistics | None, values: np.ndarray) -> bool:
    """Whether a row group whose column has ``stats`` may hold one of ``values``."""
    if stats is None or not stats.has_min_max:
        return True
    lo, hi = stats.min, stats.max
    return bool(((values >= lo) & (values <= hi)).any())


class _HashOrder:
    """The rows of a lookup's keys in the order of their hashes, sorted on first use (by
    whichever reading thread needs it first): a lookup whose keys only deltas may hold,
    none of which does (an insert of new keys), never needs it (18 ms for 500k keys)."""

    def __init__(self, key_hash: np.ndarray) -> None:
        self.key_hash = key_hash
        self._order: np.ndarray | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.key_hash)

    def __call__(self) -> np.ndarray:
        with self._lock:
            if self._order is None:
                self._order = np.argsort(self.key_hash)
            return self._order


@dataclass(frozen=True)
class ProbeSet:
    """The hashes of a lookup's keys, asked once per entry of every delta: a bit table
    (:mod:`.hash_bits`) narrows, then a binary search among the sorted probes decides.
    Built once a lookup; Arrow's ``is_in`` built its hash set again for every delta (a
    500k-key insert against a 500k-entry delta: 60 ms a delta, against 13 ms)."""

    sorted_hashes: np.ndarray
    width: int
    bits: np.ndarray

    @classmethod
    def of(cls, sorted_hashes: np.ndarray) -> ProbeSet:
        width = hash_bits.width_for(len(sorted_hashes))
        bits = hash_bits.empty_table(width)
        hash_bits.set_bits(bits, width, sorted_hashes)
        return cls(sorted_hashes, width, bits)

    def find(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The indices of ``hashes`` (int64) that are a probe's, exactly (ascending), and
        where each first occurs among :attr:`sorted_hashes`."""
        return hash_bits.find_sorted(self.bits, self.width, self.sorted_hashes, hashes)

    def holds(self, hashes: np.ndarray) -> np.ndarray:
        """Whether each of ``hashes`` (int64) is a probe's, exactly."""
        out = np.zeros(len(hashes), dtype=bool)
        out[self.find(hashes)[0]] = True
        return out


def _file_order(slices: Sequence[FileSlice], partial: Mapping[str, str]) -> dict[str, tuple[int, int]]:
    """(slice number, order in the slice: base 0, then logs) of every file of ``slices``,
    and of the older files a partial rewrite's entries chain onto (:func:`.rows.chain_of`:
    below 0, the oldest lowest)."""
    out = {f.path: (i, j) for i, s in enumerate(slices) for j, f in enumerate(s.files)}
    for i, s in enumerate(slices):
        if s.base is not None and s.base.path in partial:
            for k, f in enumerate(chain_of(s.base.path, partial)[1:], start=1):
                out[f] = (i, -k)
    return out


def tag(
    reader: RecordIndexReader, slices: Sequence[FileSlice], keys: pa.Table, positions: bool = False
) -> tuple[pa.Array, pa.Array]:
    """:func:`lakeline.table.write.tagging.tag` answered from the index: for each row of
    ``keys``, the group of ``slices`` holding it or null, and with ``positions`` its row
    in that group's base when its live version is that row (else null).

    Raises:
        MetadataTableError: ``positions`` asked where a slice's base is a partial
            rewrite, whose entries name no row (the caller reads the data instead).
    """
    n = keys.num_rows
    if n == 0:
        return pa.array([], pa.string()), pa.array([], pa.int64())
    if positions and any(s.base is not None and s.base.path in reader.partial for s in slices):
        # A partial rewrite's entries name no row (copy-on-write only, whose writes
        # never ask): the data answers instead, never a wrong position.
        raise MetadataTableError("record index: base positions asked of a partial rewrite's slice")
    found = reader.entries(keys)
    where = _file_order(slices, reader.partial)
    # Per distinct path, not per entry: a file's entries share its dictionary value.
    paths = found.column(PATH).combine_chunks()
    names_in = paths.dictionary.to_pylist()
    codes = paths.indices.to_numpy()
    slot = np.array([where.get(p, (-1, -1))[0] for p in names_in] + [-1], dtype=np.int64)[codes]
    order = np.array([where.get(p, (-1, -1))[1] for p in names_in] + [-1], dtype=np.int64)[codes]
    row = found.column(ROW).to_numpy()
    pos = found.column(POS).to_numpy().astype(np.int64)
    deleted = found.column(DELETED).to_numpy(zero_copy_only=False)
    live = slot >= 0
    row, slot, order, pos, deleted = row[live], slot[live], order[live], pos[live], deleted[live]
    # The last record of each key in each slice: by file order, then row in the file.
    idx = np.lexsort((pos, order, slot, row))
    row, slot, order, pos, deleted = row[idx], slot[idx], order[idx], pos[idx], deleted[idx]
    last = np.r_[(row[1:] != row[:-1]) | (slot[1:] != slot[:-1]), True] if len(row) else np.zeros(0, bool)
    keep = last & ~deleted
    out_slot = np.full(n, -1, dtype=np.int64)
    out_pos = np.full(n, -1, dtype=np.int64)
    out_slot[row[keep]] = slot[keep]
    if positions:
        has_base = np.array([s.base is not None for s in slices], dtype=bool)
        in_base = keep & (order == 0) & has_base[np.maximum(slot, 0)]
        out_pos[row[in_base]] = pos[in_base]
    names = pa.array([s.file_group for s in slices], pa.string())
    groups = pa.DictionaryArray.from_arrays(pa.array(out_slot.astype(np.int32), mask=out_slot < 0), names)
    return groups.cast(pa.string()), pa.array(out_pos, mask=out_pos < 0)


@dataclass(frozen=True)
class Holding:
    """What the index says of the records of some keys: the slices holding one, and in
    the bases of those whose entries name rows, at which rows (ascending)."""

    slices: list[FileSlice]
    base_rows: Mapping[str, np.ndarray]


def slices_holding(reader: RecordIndexReader, slices: Sequence[FileSlice], values: Iterable[object]) -> Holding:
    """The slices any of whose files holds a record (an upsert or a delete) of one of
    ``values`` of a single-column key: every other slice holds no row with such a key.
    And for each such slice's base, the rows holding those records: every other row of
    the base has another key, so a read may skip the row groups without one. Not for a
    partial rewrite's base, whose entries name no row (:func:`.rows.chain_of`)."""
    typ = reader.schema.field(reader.key[0]).type
    keys = pa.table({reader.key[0]: pa.array(list(values), typ)})
    found = reader.entries(keys)
    paths = found.column(PATH).cast(pa.string()).to_numpy(zero_copy_only=False)
    pos = found.column(POS).to_numpy()
    where = _file_order(slices, reader.partial)
    held = {where[p][0] for p in set(paths.tolist()) if p in where}
    kept = [s for i, s in enumerate(slices) if i in held]
    bases = [s.base.path for s in kept if s.base is not None and s.base.path not in reader.partial]
    return Holding(kept, {b: np.unique(pos[paths == b]).astype(np.int64) for b in bases})
