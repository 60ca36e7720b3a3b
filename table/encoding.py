"""How lakeline encodes a data file as Parquet: which columns take a dictionary, which
delta encoding, which the table's codec, which keep statistics; and what a row costs on
disk (file sizing).

Every choice is made per file from the rows themselves (a sample), so a table whose
data changes shape (a key that turns from sequential to uuid, a measure that turns
from a few codes to floats) is written the way that suits it. Every reader lakeline
names (pyarrow, DuckDB, Polars, Spark) reads any mix of these per column.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..timeline.storage.data_reads import PARQUET_WRITE

#: A column keeps the table's codec only if it saves at least this share of the
#: column's bytes on a sample (:func:`column_compression`): the default of
#: ``write.parquet-compression-min-saving``.
MIN_SAVING = 0.2
#: Rows of the sample the codec is tried on; a file of fewer than twice this keeps it.
SAMPLE_ROWS = 16_384


def dictionary_columns(table: pa.Table, sample_rows: int = 10_000) -> list[str]:
    """Columns worth dictionary encoding: strings and binaries that repeat in a sample.

    Dictionary-encoding unique keys, timestamps or measures only costs time (it was
    over half of an append's write time) and makes files no smaller.
    """
    sample = table.slice(0, sample_rows)
    out = []
    for name, col in zip(sample.column_names, sample.columns):
        t = col.type
        if not (
            pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_dictionary(t)
        ):
            continue
        if sample.num_rows and pc.count_distinct(col).as_py() <= sample.num_rows // 2:
            out.append(name)
    return out


#: Arrow types stored as Parquet INT32/INT64 (and not as a dictionary).
_INTEGER_STORED = (pa.types.is_integer, pa.types.is_timestamp, pa.types.is_date, pa.types.is_time, pa.types.is_duration)


def delta_columns(schema: pa.Schema) -> dict[str, str]:
    """Top-level columns stored as integers, to be written DELTA_BINARY_PACKED.

    Parquet's delta encoding stores an integer column as the differences of its values,
    bit-packed: timestamps, counters and row positions (the ``ts`` of the write
    benchmark: 2.33 MiB in 500k rows as PLAIN, 1.21 MiB as delta; a log's positions)
    shrink by half or more, and the column decodes faster (13.5 ms -> 2.6 ms); uniformly
    random 64-bit values grow by under 1%. It is what Parquet's V2 writers use for
    integers, and every reader lakeline names (pyarrow, DuckDB, Polars, Spark 3.3 and
    later) reads it. Columns that a dictionary suits are strings
    (:func:`dictionary_columns`), so the two never meet.
    """
    return {f.name: "DELTA_BINARY_PACKED" for f in schema if any(is_(f.type) for is_ in _INTEGER_STORED)}


def parquet_options(
    rows: pa.Table, compression: str, row_group_rows: int, min_saving: float = MIN_SAVING
) -> dict[str, Any]:
    """``pq.write_table``'s options for a data file of ``rows``: the table's codec where
    it saves ``min_saving`` (:func:`column_compression`) and row-group size,
    dictionaries where values repeat, delta encoding for integers, and a CRC in every
    page (:data:`~lakeline.timeline.storage.data_reads.PARQUET_WRITE`: a damaged page is
    an error on read, never wrong values)."""
    options: dict[str, Any] = {
        **PARQUET_WRITE,
        "row_group_size": row_group_rows,
        "use_dictionary": dictionary_columns(rows),
        "column_encoding": delta_columns(rows.schema),
        "write_statistics": statistics_columns(rows),
    }
    options["compression"] = column_compression(rows, compression, options, min_saving)
    return options


def leaf_paths(typ: pa.DataType, path: str) -> Iterator[tuple[str, pa.DataType]]:
    """Each Parquet leaf column of a column ``path`` of type ``typ``: its path as the
    footer and ``pq.write_table``'s per-column options name it (``s.f`` in a struct,
    ``l.list.element`` in a list, ``m.key_value.key``/``.value`` in a map) and its type
    (a dictionary's values)."""
    for leaf, values in _leaves(path, typ, None):
        yield leaf, values if isinstance(values, pa.DataType) else values.type


def _leaves(path: str, typ: pa.DataType, values: pa.Array | None) -> Iterator[tuple[str, pa.DataType | pa.Array]]:
    """The leaves under ``path``: with ``values``, each with its values (those under a
    null parent may be included: a test over them errs towards the safe side)."""
    if isinstance(typ, pa.ExtensionType):
        yield from _leaves(path, typ.storage_type, None if values is None else values.storage)
    elif pa.types.is_struct(typ):
        for i in range(typ.num_fields):
            yield from _leaves(f"{path}.{typ.field(i).name}", typ.field(i).type, _child(values, i))
    elif pa.types.is_map(typ):
        yield from _leaves(f"{path}.key_value.key", typ.key_type, None if values is None else values.keys)
        yield from _leaves(f"{path}.key_value.value", typ.item_type, None if values is None else values.items)
    elif pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        yield from _leaves(f"{path}.list.element", typ.value_type, None if values is None else values.flatten())
    elif pa.types.is_dictionary(typ):
        yield from _leaves(path, typ.value_type, None if values is None else values.dictionary)
    else:
        yield path, typ if values is None else values


def _child(values: pa.Array | None, i: int) -> pa.Array | None:
    return None if values is None else values.field(i)


def statistics_columns(rows: pa.Table) -> bool | list[str]:
    """``pq.write_table``'s ``write_statistics`` for a data file of ``rows``: every column
    (True), except, when a floating-point leaf (float16/32/64, in a struct, list or map
    too) holds a NaN, that leaf: then the paths of the others.

    Why: Parquet's float min/max leave NaN out, so a row group holding ``1.0`` and a NaN
    says min = max = 1.0, and a reader that prunes on statistics (pyarrow's dataset scan,
    DuckDB through :meth:`Table.to_duckdb` or :meth:`Table.to_pyarrow_dataset`, which
    push their own filters to it) skips that group for ``x != 1.0`` or ``isnan(x)`` and
    loses the NaN rows. Without statistics no reader can skip a group on that column.
    lakeline's own pruning never reads float statistics (:mod:`.read.row_groups`; the
    column stats index bounds floats from the rows). The test is one ``is_nan`` pass
    over each float leaf (about 0.6 ms for a million float64 values); columns without
    floats are not read.
    """
    nan: dict[str, bool] = {}  # each leaf path: whether it holds a NaN
    for name, column in zip(rows.column_names, rows.columns):
        leaves = list(leaf_paths(column.type, name))
        nan.update((path, False) for path, _ in leaves)
        if not any(pa.types.is_floating(typ) for _, typ in leaves):
            continue
        for chunk in column.chunks:
            for path, values in _leaves(name, column.type, chunk):
                if isinstance(values, pa.Array) and pa.types.is_floating(values.type) and not nan[path]:
                    nan[path] = bool(pc.any(pc.is_nan(values)).as_py())
    return True if not any(nan.values()) else [path for path, held in nan.items() if not held]


def column_compression(
    rows: pa.Table, codec: str, options: Mapping[str, Any], min_saving: float = MIN_SAVING
) -> str | dict[str, str] | None:
    """The codec of each column of a data file of ``rows``: ``codec``, except for columns
    it shrinks by less than ``min_saving`` (``write.parquet-compression-min-saving``) on
    a sample of :data:`SAMPLE_ROWS` rows (encoded with ``options`` as the file will be),
    which are stored uncompressed.

    Why: a codec costs time on every write and read of a column, and on random values
    (uuid keys, hashes, measures) it saves next to nothing. Snappy on the write
    benchmark's 32-character uuid keys saved 10.5% (only the 4-byte length before each
    value repeats) and took 51 of a 500k-row file's 78 ms of encoding; on random doubles
    it saved nothing. Sequential keys, repeated text and dictionary pages still shrink
    by far more and keep the codec. Files of few rows keep it everywhere: the choice
    would cost more than it saves.
    """
    if codec == "none":
        return None
    if rows.num_rows < 2 * SAMPLE_ROWS or min_saving <= 0:
        return codec
    sink = pa.BufferOutputStream()
    pq.write_table(rows.slice(0, SAMPLE_ROWS), sink, **{**options, "compression": codec})
    group = pq.read_metadata(pa.BufferReader(sink.getvalue())).row_group(0)
    chosen: dict[str, str] = {}
    for i in range(group.num_columns):
        chunk = group.column(i)
        saving = 1 - chunk.total_compressed_size / max(1, chunk.total_uncompressed_size)
        chosen[chunk.path_in_schema] = codec if saving >= min_saving else "none"
    # Every leaf must be named: pyarrow leaves a column missing from the map uncompressed.
    return codec if all(c == codec for c in chosen.values()) else chosen


def _encoded_size(rows: pa.Table, compression: str, row_group_rows: int) -> int:
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink, **parquet_options(rows, compression, row_group_rows))
    return int(sink.tell())


def file_overhead_bytes(schema: pa.Schema, compression: str) -> int:
    """The bytes a data file of ``schema`` holds however few its rows: a file of none
    (magic numbers, and the footer with the schema and its key-value metadata)."""
    return _encoded_size(schema.empty_table(), compression, 1024)


def encoded_bytes_per_row(rows: pa.Table, compression: str, row_group_rows: int, sample_rows: int = 10_000) -> float:
    """What a row of ``rows`` costs in a data file of them: the first ``sample_rows``
    encoded in memory as :func:`write_indexed` writes them, less a file's fixed
    overhead (:func:`file_overhead_bytes`), so that does not count per row."""
    sample = rows.slice(0, sample_rows)
    if sample.num_rows == 0:
        return 1.0
    data = _encoded_size(sample, compression, row_group_rows) - file_overhead_bytes(rows.schema, compression)
    return max(data, 1) / sample.num_rows
