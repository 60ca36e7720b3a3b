"""Where the record index's entries live: per-instant deltas and bucketed generations.

In the index's metadata-table partition (``.lakeline/metadata/<name>@<instant>/``):

* ``delta_<instant>_<token>.parquet``: the entries one data instant added, written
  before it completed and behind its markers like every index's deltas
  (:meth:`lakeline.indexes.metadata_table.MetadataTable.write_updates`), sorted by bucket
  in small row groups, so a reader of some buckets reads only their row groups.
* ``gen_<seq>/<token>``: a *generation*, the entries of every file live right after
  event ``seq``, one file per bucket sorted by key hash, and a manifest
  ``gen_<seq>_<token>.json`` written last, whole: a generation exists only once
  complete, so a build or fold killed half-way leaves files no reader looks at, which
  the next build or fold removes. On a local disk a bucket file is uncompressed Arrow
  IPC (``b00042.arrow``), memory-mapped by a lookup, which binary-searches the sorted
  hashes and touches only the pages of the entries it finds: a batch's tagging costs
  its keys, not the index's size (Parquet must decode every row group a probe lands
  in, and a few thousand random keys land in all of them). It takes about twice the
  bytes of Parquet. On an object store, where nothing maps, a bucket file is Parquet
  (``b00042.parquet``) in small row groups, so a point lookup downloads one row group.

A reader of snapshot S takes the newest generation (seq g) and the deltas of instants
completed in S after g. A generation keeps the entries of live files only (a fold drops
those of retired files, keeping the index the size of the table), so it serves only
snapshots at or after its seq; an older snapshot (time travel, or a writer whose
snapshot a fold overtook) falls back to reading data files, which is never wrong.
"""

from __future__ import annotations

import json
import posixpath
import re
import uuid
import zlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from ...timeline.errors import CorruptFileError
from ...timeline.instant import State
from ...timeline.storage.filesystem import META_DIR, Storage
from ...timeline.timeline import Timeline
from ..integrity import PARQUET_READ, PARQUET_WRITE, Seal, decoding, seal_bytes, seal_of_name, verify
from ..metadata_table import METADATA_DIR, MetadataTable
from .rows import BUCKET, HASH, PATH

_GEN = re.compile(r"^gen_(?P<seq>-?\d+)_(?P<token>[0-9a-f]{8})\.json$")
_GEN_FOLDER = re.compile(r"^gen_(?P<seq>-?\d+)_(?P<token>[0-9a-f]{8})$")
#: Folders of a build's spill files (a validation's are ``check_``: a build removes
#: earlier attempts' spills, never a validation's).
SPILL_PREFIX = "spill_"
CHECK_PREFIX = "check_"
#: Rows per row group of a bucket file: a point lookup reads about one.
BUCKET_ROW_GROUP_ROWS = 16_384
#: How entries are written as Parquet (deltas, spills, an object store's bucket files):
#: dictionaries for the few paths and buckets only, and statistics only where readers
#: prune (bucket ranges, hashes). Dictionaries and min/max of random keys cost 70% of a
#: 500k-entry delta's write (262 -> 77 ms) for nothing: keys are never pruned by.
ENTRY_PARQUET: Mapping[str, Any] = {"use_dictionary": [PATH, BUCKET], "write_statistics": [BUCKET, HASH]}


def entry_parquet(storage: Storage) -> Mapping[str, Any]:
    """:data:`ENTRY_PARQUET` for files on ``storage``: uncompressed on a local disk.
    Snappy took 66 of a 500k-entry delta's 82 ms and kept 21 of 22 MB (hashes and
    random keys do not compress), and the generation a fold makes of the deltas is
    uncompressed there anyway (:data:`MAPPED_SUFFIX`). An object store keeps Snappy:
    there bytes are uploads."""
    return {**ENTRY_PARQUET, "compression": "none"} if storage.is_local else ENTRY_PARQUET


@dataclass(frozen=True)
class Generation:
    """One complete generation of a record index partition."""

    seq: int
    token: str
    buckets: int
    #: bucket -> (path relative to the table, rows); buckets without entries are absent.
    files: Mapping[int, tuple[str, int]]
    #: path relative to the table -> its seal (:mod:`..integrity`); a manifest of before
    #: seals records none, and its files are read as they are.
    seals: Mapping[str, Seal] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(n for _, n in self.files.values())


def partition_dir(partition: str) -> str:
    """The partition's folder, relative to the table."""
    return posixpath.join(META_DIR, METADATA_DIR, partition)


def folder_of(partition: str, seq: int, token: str) -> str:
    """The folder (relative to the table) of a generation's bucket files."""
    return posixpath.join(partition_dir(partition), f"gen_{seq}_{token}")


#: The suffix of a memory-mappable bucket file (Arrow IPC, uncompressed, one batch).
MAPPED_SUFFIX = ".arrow"


def bucket_path(folder: str, bucket: int, mapped: bool) -> str:
    """A bucket file's path: Arrow IPC where it can be memory-mapped (``mapped``: a
    local disk), else Parquet."""
    return posixpath.join(folder, f"b{bucket:05d}{MAPPED_SUFFIX if mapped else '.parquet'}")


def new_token() -> str:
    return uuid.uuid4().hex[:8]


def _manifests(storage: Storage, partition: str) -> list[tuple[int, str, str]]:
    """(seq, token, absolute path) of every generation manifest, oldest first."""
    out = []
    for info in storage.list_files(storage.path(partition_dir(partition))):
        if m := _GEN.match(posixpath.basename(info.path)):
            out.append((int(m.group("seq")), m.group("token"), info.path))
    return sorted(out)


def newest_generation(storage: Storage, partition: str) -> Generation | None:
    """The newest complete generation, None when there is none (not built yet).

    Raises:
        CorruptFileError: its manifest is damaged (or its checksum is not its content's).
    """
    for seq, token, path in reversed(_manifests(storage, partition)):
        try:
            raw = storage.read_bytes(path)
        except FileNotFoundError:
            continue  # replaced by a newer one meanwhile
        return _generation(storage, path, seq, token, raw)
    return None


def _generation(storage: Storage, path: str, seq: int, token: str, raw: bytes) -> Generation:
    """The generation a manifest's bytes describe, checked against its own checksum."""
    try:
        doc = json.loads(raw)
        body = {k: v for k, v in doc.items() if k != "checksum"}
        if "checksum" in doc and doc["checksum"] != _checksum(body):
            raise ValueError("its checksum is not its content's")
        files: dict[int, tuple[str, int]] = {}
        seals: dict[str, Seal] = {}
        folder = folder_of(posixpath.basename(posixpath.dirname(path)), seq, token)
        for b, entry in doc["files"].items():
            files[int(b)] = (str(entry[0]), int(entry[1]))
            if len(entry) > 2:
                seals[str(entry[0])] = Seal.from_json(entry[2])
                if posixpath.dirname(str(entry[0])) != folder:  # another generation's manifest
                    raise ValueError(f"it names {entry[0]}, not a file of {folder}")
        return Generation(seq, token, int(doc["buckets"]), files, seals)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
        raise CorruptFileError(f"record index manifest {storage.relative(path)} is damaged: {e}") from e


def _checksum(body: Mapping[str, Any]) -> int:
    """A manifest's checksum: the CRC-32 of its content without it, keys sorted."""
    return zlib.crc32(json.dumps(body, sort_keys=True).encode())


def publish(
    storage: Storage, partition: str, seq: int, token: str, buckets: int, written: Mapping[int, tuple[int, Seal]]
) -> Generation:
    """Write a generation's manifest (its bucket files are written: ``written`` holds
    each one's entries and seal): from now on it is the newest generation of every
    reader that lists after this."""
    folder = folder_of(partition, seq, token)
    files = {b: (bucket_path(folder, b, storage.is_local), n) for b, (n, _) in sorted(written.items()) if n}
    seals = {p: written[b][1] for b, (p, _) in files.items()}
    body = {
        "seq": seq,
        "buckets": buckets,
        "files": {str(b): [p, n, seals[p].to_json()] for b, (p, n) in files.items()},
    }
    doc = {**body, "checksum": _checksum(body)}
    final = storage.path(partition_dir(partition), f"gen_{seq}_{token}.json")
    with storage.written_whole(final) as target:
        storage.write_bytes(target, json.dumps(doc).encode())
    return Generation(seq, token, buckets, files, seals)


def remove_older(storage: Storage, partition: str, keep: Generation) -> None:
    """Remove the generations older than ``keep`` and others of its position (manifest
    first, so no reader finds a manifest whose files are gone), and the folders up to
    its position no manifest names."""
    named = {keep.token}
    for seq, token, path in _manifests(storage, partition):
        if seq < keep.seq or (seq == keep.seq and token != keep.token):
            storage.delete(path)
        else:
            named.add(token)
    remove_unnamed(storage, partition, named, keep.seq)


def remove_unnamed(
    storage: Storage, partition: str, named: Collection[str], upto_seq: int, spills: bool = False
) -> None:
    """Remove generation folders at or before ``upto_seq`` whose token no manifest names
    (killed builds and folds; a newer one may be a fold still writing), and with
    ``spills`` the spill folders of earlier build attempts."""
    from pyarrow.fs import FileType

    for info in storage.list_entries(storage.path(partition_dir(partition))):
        name = posixpath.basename(info.path)
        if info.type != FileType.Directory:
            continue
        m = _GEN_FOLDER.match(name)
        if m and m.group("token") not in named and int(m.group("seq")) <= upto_seq:
            storage.delete_dir(info.path)
        elif spills and name.startswith(SPILL_PREFIX):
            storage.delete_dir(info.path)


def spill_folder(partition: str, token: str, prefix: str = SPILL_PREFIX) -> str:
    return posixpath.join(partition_dir(partition), f"{prefix}{token}")


def visible_deltas(storage: Storage, partition: str, snapshot: Timeline, after_seq: int) -> list[str]:
    """Delta files (absolute paths) of instants completed in ``snapshot`` after event
    ``after_seq``, in completion order."""
    out: list[tuple[int, str]] = []
    for instant, paths in MetadataTable(storage).deltas(partition).items():
        inst = snapshot.find(instant)
        if inst is None or inst.state is not State.COMPLETED or (inst.completed_seq or 0) <= after_seq:
            continue
        out.extend((inst.completed_seq or 0, p) for p in paths)
    return [p for _, p in sorted(out)]


def settled_deltas(storage: Storage, partition: str, timeline: Timeline) -> list[str]:
    """Delta files of instants completed or rolled back in ``timeline``: what a
    generation at ``timeline``'s position has folded (or never needs)."""
    out = []
    for instant, paths in MetadataTable(storage).deltas(partition).items():
        inst = timeline.find(instant)
        if inst is not None and inst.state in (State.COMPLETED, State.ROLLED_BACK):
            out.extend(paths)
    return out


#: How entry files are read as a dataset fragment: Parquet page checksums checked.
_PARQUET_FORMAT = ds.ParquetFileFormat(default_fragment_scan_options=ds.ParquetFragmentScanOptions(**PARQUET_READ))


def read_entries(
    storage: Storage,
    path: str,
    filter: pc.Expression | None = None,
    columns: list[str] | None = None,
    seal: Seal | None = None,
) -> pa.Table:
    """Entries of one file of the partition (a bucket file, a delta, a spill), only the
    rows ``filter`` keeps (and ``columns``); Parquet row groups whose statistics rule it
    out are skipped. The file is checked first against ``seal`` (a bucket file's, from
    its manifest) or the one its name carries (a delta's, :mod:`..integrity`).

    Raises:
        CorruptFileError: the file is damaged, naming it.
    """
    verify(storage, path, seal or seal_of_name(path))
    fmt = ds.IpcFileFormat() if path.endswith(MAPPED_SUFFIX) else _PARQUET_FORMAT
    with decoding(storage, path):
        fragment = fmt.make_fragment(path, storage.fs)
        # One batch ahead, on the calling thread: callers read many files in parallel
        # already, and Arrow's default readahead (16 batches of 128k rows, each decoded
        # on its own threads) held over 100 MB per read of a spill file.
        return fragment.to_table(
            filter=filter, columns=columns, batch_readahead=1, fragment_readahead=1, use_threads=False
        )


def bucket_range(lo: int, hi: int) -> pc.Expression:
    """The filter of the buckets ``[lo, hi)``."""
    return (pc.field(BUCKET) >= lo) & (pc.field(BUCKET) < hi)


def write_entries(storage: Storage, rel: str, rows: pa.Table, row_group_rows: int = BUCKET_ROW_GROUP_ROWS) -> Seal:
    """Write entries to ``rel``: Arrow IPC in one uncompressed batch when it names a
    mapped file (:func:`mapped_entries` reads it without a copy), else Parquet with
    page checksums; returns its seal (encoded first, so the seal is of what is written)."""
    path = storage.path(rel)
    storage.mkdirs(posixpath.dirname(path))
    encoded = pa.BufferOutputStream()
    if rel.endswith(MAPPED_SUFFIX):
        rows = rows.combine_chunks()
        with pa.ipc.new_file(encoded, rows.schema) as writer:
            writer.write_table(rows, max_chunksize=max(1, rows.num_rows))
    else:
        pq.write_table(rows, encoded, row_group_size=row_group_rows, **{**entry_parquet(storage), **PARQUET_WRITE})
    data = encoded.getvalue()
    with storage.fs.open_output_stream(path) as sink:
        sink.write(data)
    return seal_bytes(rel, data)


def mapped_entries(storage: Storage, path: str, seal: Seal | None = None) -> pa.Table:
    """Every entry of a mapped bucket file, without a copy where the disk is local (the
    table's buffers are the file's pages, read as a lookup touches them), checked
    against ``seal`` first (its manifest's).

    Raises:
        CorruptFileError: the file is damaged, naming it.
    """
    verify(storage, path, seal)
    with decoding(storage, path):
        if storage.is_local:
            return pa.ipc.open_file(pa.memory_map(path)).read_all()
        with storage.fs.open_input_file(path) as f:
            return pa.ipc.open_file(f).read_all()


def ranges(buckets: int, rows: int, per_range: int) -> list[tuple[int, int]]:
    """Contiguous bucket ranges holding about ``per_range`` entries each (at least one
    bucket), for ``rows`` entries spread evenly over ``buckets``."""
    per_bucket = max(1, rows // max(buckets, 1))
    width = max(1, per_range // per_bucket)
    return [(lo, min(lo + width, buckets)) for lo in range(0, buckets, width)]


def row_count(storage: Storage, paths: Iterable[str]) -> int:
    """Rows of Parquet files, from their footers."""
    n = 0
    for p in paths:
        verify(storage, p, seal_of_name(p))
        with decoding(storage, p), storage.fs.open_input_file(p) as f:
            n += pq.ParquetFile(f).metadata.num_rows
    return n
