"""The entries data files give the record index, and how a key picks its bucket.

An entry: the key's bucket, its 64-bit hash, the file's path, the key itself (one
column per record-key column, ``key_0`` ..., in the table's types, so a match is always
confirmed on the key, never by hash alone), a row position, and whether it is a delete.
The hash lets a lookup read 8 bytes per entry first: a key whose hash is not there is
proven absent without reading a stored key (an insert of new keys reads no key at all).

A file written whole gives one entry per row (:func:`record_entries`, ``pos`` its row):
a *full listing*, a pure function of the file, which the build, catch-up and
``validate`` compute the same way. A copy-on-write rewrite keeps its file group and the
keys no change touches, so its writer gives entries for its changes only
(:func:`change_entries`), chained onto the base it rewrote (:func:`chain_of`): a random
upsert that rewrites most files of a table then costs the index its batch, not the
table. A key is in a file group when the last entry naming it along the group's chain
(oldest first), then among its slice's logs in completion order, is not a delete; that
is the fold :func:`lakeline.table.write.tagging.tag` does on the data, here done on
entries (:mod:`.lookup`).

The bucket of a key is its 64-bit record-key hash (the one record-key bloom filters
use, :func:`lakeline.indexes.bloom.key_hashes`) modulo the bucket count the index's
definition records, so every writer and reader agrees on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...timeline.errors import InvalidIndexOptionsError
from ..bloom import key_hashes
from ..hashing import ColumnHashes

BUCKET = "bucket"
HASH = "hash"
PATH = "path"
POS = "pos"
DELETED = "deleted"
#: Schema metadata of a writer's entries for a partial rewrite (:func:`change_entries`):
#: the base the file rewrote.
REPLACES_META = "lakeline.replaces"
#: Schema metadata of a delta: JSON ``{rewrite path: base path it rewrote}`` of the
#: partial rewrites whose entries it holds (:func:`chain_of`).
PARTIAL_META = "lakeline.partial"

#: The operation column of log files and its delete value (``table/write/records.py``'s
#: ``OP`` and ``OP_DELETE``; indexes/ may not import table/, a test checks they agree).
OP = "_op"
OP_DELETE = "D"

#: Bucket counts a definition may record.
MIN_BUCKETS, MAX_BUCKETS = 1, 65536
#: Paths are dictionary-encoded in memory too: a file's entries repeat one path.
PATH_TYPE = pa.dictionary(pa.int32(), pa.string())
#: Keys a bucket is sized for when the index is created (a fold, a build step and a
#: lookup of a random batch hold about one bucket at a time).
KEYS_PER_BUCKET = 250_000
#: The bucket count of an index created on a small or empty table: room to grow to
#: about 4M keys before buckets exceed their size.
MIN_DEFAULT_BUCKETS = 16


def key_columns(record_key: Sequence[str]) -> list[str]:
    """The entry columns holding the record key (``key_0`` ...): entry column names
    never clash with a user column named ``path`` or ``bucket``."""
    return [f"key_{i}" for i in range(len(record_key))]


def entry_schema(schema: pa.Schema, record_key: Sequence[str]) -> pa.Schema:
    """The schema of the record index's entries for a table."""
    keys = [pa.field(k, schema.field(c).type, nullable=False) for k, c in zip(key_columns(record_key), record_key)]
    return pa.schema(
        [
            pa.field(BUCKET, pa.int32(), nullable=False),
            pa.field(HASH, pa.int64(), nullable=False),
            pa.field(PATH, PATH_TYPE, nullable=False),
        ]
        + keys
        + [pa.field(POS, pa.int32(), nullable=False), pa.field(DELETED, pa.bool_(), nullable=False)]
    )


def check_buckets(value: object) -> int:
    """A bucket count from an index's options.

    Raises:
        InvalidIndexOptionsError: not an integer in [:data:`MIN_BUCKETS`, :data:`MAX_BUCKETS`].
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not MIN_BUCKETS <= value <= MAX_BUCKETS:
        raise InvalidIndexOptionsError(
            f"record_index: buckets must be an integer in [{MIN_BUCKETS}, {MAX_BUCKETS}], not {value!r}"
        )
    return int(value)


def default_buckets(keys: int) -> int:
    """The bucket count for a table of about ``keys`` keys, at creation: one bucket per
    :data:`KEYS_PER_BUCKET` keys, at least :data:`MIN_DEFAULT_BUCKETS`."""
    return max(MIN_DEFAULT_BUCKETS, min(MAX_BUCKETS, -(-keys // KEYS_PER_BUCKET)))


def buckets_of(
    keys: pa.Table, record_key: Sequence[str], schema: pa.Schema, buckets: int, hashes: ColumnHashes | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The bucket (int32) and the hash (int64: the uint64's bits) of each row's key;
    ``keys`` holds the record-key columns."""
    h = key_hashes(keys, record_key, schema, hashes)
    return (h % np.uint64(buckets)).astype(np.int32), h.view(np.int64)


def bucket_order(buckets: np.ndarray) -> np.ndarray:
    """The rows ordered by bucket, stably: a radix sort of the buckets as 16 bits
    (:data:`MAX_BUCKETS` fits), 5 ms for 500k rows where one of the int32s takes 24."""
    return np.argsort(buckets.astype(np.uint16), kind="stable")


def bucket_hash_order(buckets: np.ndarray, hashes: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """``rows`` (default: all) ordered by bucket, then hash, stably: a sort of the hashes
    (which merges runs already sorted by hash cheaply), then a stable radix sort of the
    buckets as 16 bits (:data:`MAX_BUCKETS` fits): about a third of a lexsort."""
    order = np.arange(len(hashes)) if rows is None else rows
    order = order[np.argsort(hashes[order], kind="stable")]
    return order[bucket_order(buckets[order])]


def key_table(keys: pa.Table, record_key: Sequence[str], schema: pa.Schema) -> dict[str, pa.ChunkedArray]:
    """The record-key columns of ``keys`` as entry key columns, in the table's types."""
    out = {}
    for name, col in zip(key_columns(record_key), record_key):
        values = keys.column(col)
        typ = schema.field(col).type
        out[name] = values if values.type == typ else pc.cast(values, typ)
    return out


def record_entries(
    rows: pa.Table,
    rel_path: str,
    record_key: Sequence[str],
    schema: pa.Schema,
    buckets: int,
    hashes: ColumnHashes | None = None,
    offset: int = 0,
    sort: bool = True,
) -> pa.Table:
    """The entries of the data file ``rel_path`` whose rows are ``rows`` (in file order,
    from row ``offset`` of the file; the key columns, and ``_op`` for a log), sorted by
    bucket (a stable sort: within a bucket, file order); ``sort=False`` for a writer's
    entries, which :func:`lakeline.indexes.entries.write_delta` sorts once for all files
    of the commit (a sort of 32-character keys per file took a third of the index's
    cost of a copy-on-write upsert)."""
    n = rows.num_rows
    bucket, key_hash = buckets_of(rows, record_key, schema, buckets, hashes)
    if OP in rows.column_names:
        deleted = pc.fill_null(pc.equal(rows.column(OP), OP_DELETE), False)
    else:
        deleted = pa.array(np.zeros(n, dtype=bool))
    path = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([rel_path], pa.string()))
    cols: dict[str, object] = {BUCKET: pa.array(bucket), HASH: pa.array(key_hash), PATH: path}
    cols.update(key_table(rows, record_key, schema))
    cols[POS] = pa.array(np.arange(offset, offset + n, dtype=np.int32))
    cols[DELETED] = deleted
    table = pa.table(cols, schema=entry_schema(schema, record_key))
    if not sort:
        return table
    return table.take(pa.array(bucket_order(bucket)))


def change_entries(
    changes: pa.Table, rel_path: str, replaces: str, record_key: Sequence[str], schema: pa.Schema, buckets: int
) -> pa.Table:
    """The entries of a copy-on-write rewrite ``rel_path`` of the base ``replaces`` (same
    file group) whose ``changes`` (key columns and ``_op``, in commit order) were merged
    onto it: one per change, not per row, as the keys of the group that no change
    touches stay where they were. An upsert is an entry, a delete a ``deleted`` one;
    ``pos`` is negative (no row of the file: ``-n`` .. ``-1`` in commit order, so the
    last change of a key wins). The table carries :data:`REPLACES_META`, which the
    commit's delta records (:data:`PARTIAL_META`) so readers chain the file's entries
    onto those of ``replaces`` (:func:`chain_of`)."""
    n = changes.num_rows
    table = record_entries(changes, rel_path, record_key, schema, buckets, sort=False)
    at = table.schema.get_field_index(POS)
    table = table.set_column(at, table.schema.field(at), pa.array(np.arange(-n, 0, dtype=np.int32)))
    return table.replace_schema_metadata({REPLACES_META: replaces})


def partial_of(entries: pa.Table) -> str | None:
    """The base a writer's entries of a partial rewrite chain onto (:func:`change_entries`)."""
    meta = entries.schema.metadata or {}
    value = meta.get(REPLACES_META.encode())
    return value.decode() if value is not None else None


def chain_of(head: str, partial: Mapping[str, str]) -> list[str]:
    """The files whose entries make up the keys of the file group of ``head`` (a live
    base): ``head`` alone when it is a full listing, else ``head``, the base it
    rewrote, and so on back to the last full listing (newest first)."""
    out = [head]
    while out[-1] in partial and len(out) <= len(partial):
        out.append(partial[out[-1]])
    return out
