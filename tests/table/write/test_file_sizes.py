"""How an insert cuts its new rows into files: at the target size, and into one file
per engine worker when that would leave workers idle (``write.parallel-file-min-bytes``);
and how a file is encoded (table/encoding.py): the table's codec only on the columns it
shrinks, chosen per file from a sample; every file reads back as written."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lakeline.table import Table
from lakeline.table.encoding import SAMPLE_ROWS, column_compression, parquet_options
from lakeline.table.engine import LocalEngine

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def rows(n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "ts": pa.array([1] * n, pa.int64()),
            "v": [f"value-{i:08d}" for i in range(n)],
        }
    )


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize(
    "workers,min_bytes,files", [(2, 1024, 2), (4, 1024, 4), (1, 1024, 1), (2, 0, 1), (2, 1 << 30, 1)]
)
def test_an_insert_writes_a_file_per_worker_when_each_is_big_enough(
    tmp_path: Path, table_type: str, workers: int, min_bytes: int, files: int
) -> None:
    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        table_type=table_type,
        properties={"write.parallel-file-min-bytes": min_bytes},
    )
    t.engine = LocalEngine(workers)
    data = rows(20_000)
    r = t.insert(data)
    assert r.stats["files_added"] == files
    bases = [s.base for s in Table.open(t.path).context().view.latest_slices() if s.base is not None]
    assert len(bases) == files and sum(b.rows for b in bases) == data.num_rows
    if files > 1:  # about equal shares, each a key range of its own
        assert max(b.rows for b in bases) - min(b.rows for b in bases) <= 1
    assert Table.open(t.path).to_arrow().sort_by("id").equals(data)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_integer_columns_are_delta_encoded_and_repeating_strings_dictionary_encoded(
    tmp_path: Path, table_type: str
) -> None:
    """Every file a write makes (a base, and a merge-on-read log with its ``_op`` and
    positions) stores integer-typed columns DELTA_BINARY_PACKED, repeating strings as a
    dictionary and unique strings plain; and a rising ``ts`` is far smaller than PLAIN."""
    t = Table.create(str(tmp_path / "t"), SCHEMA, record_key="id", ordering_field="ts", table_type=table_type)
    n = 50_000
    t.insert(rows(n).set_column(1, "ts", pa.array(range(10**12, 10**12 + n), pa.int64())))
    t.upsert(rows(10).set_column(2, "v", pa.array(["x"] * 10)))
    seen = 0
    for f in (tmp_path / "t").rglob("*.parquet"):
        if ".lakeline" in f.parts:
            continue
        meta = pq.ParquetFile(f).metadata
        for i in range(meta.num_columns):
            col = meta.row_group(0).column(i)
            name, encodings = col.path_in_schema, set(col.encodings)
            if meta.schema.to_arrow_schema().field(name).type in (pa.int64(), pa.int32(), pa.int8()):
                assert "DELTA_BINARY_PACKED" in encodings, (f.name, name, encodings)
                seen += 1
            elif name == "v" and meta.num_rows == n:
                assert "RLE_DICTIONARY" not in encodings, (f.name, name, encodings)  # unique values
            elif name == "v":
                assert "RLE_DICTIONARY" in encodings, (f.name, name, encodings)  # one repeated value
        if meta.num_rows == n:
            ts = meta.row_group(0).column(1)
            assert ts.total_compressed_size < n * 8 / 20, ts  # PLAIN would be 8 bytes a row
    assert seen >= 4


ROWS = 3 * SAMPLE_ROWS


def data(n: int = ROWS) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table(
        {
            "key": [uuid.UUID(bytes=rng.bytes(16)).hex for _ in range(n)],  # random hex
            "seq": [f"k{i:09d}" for i in range(n)],  # sequential text: shrinks
            "value": rng.random(n),  # random doubles
            "nested": pa.array([{"id": uuid.UUID(bytes=rng.bytes(16)).hex, "note": "same text"} for _ in range(n)]),
        }
    )


def codecs(path: str | Path) -> dict[str, str]:
    group = pq.read_metadata(path).row_group(0)
    return {group.column(i).path_in_schema: group.column(i).compression for i in range(group.num_columns)}


def test_random_columns_are_stored_uncompressed_and_the_others_keep_the_codec(tmp_path: Path) -> None:
    rows = data()
    path = tmp_path / "f.parquet"
    pq.write_table(rows, path, **parquet_options(rows, "snappy", 131072))
    got = codecs(path)
    assert got["key"] == got["value"] == got["nested.id"] == "UNCOMPRESSED"
    assert got["seq"] == got["nested.note"] == "SNAPPY"
    assert pq.read_table(path).equals(rows)


def test_a_codec_that_shrinks_random_text_keeps_it() -> None:
    """zstd's entropy coding halves hex keys: the rule is the saving, not the column's kind."""
    chosen = column_compression(data(), "zstd", {"use_dictionary": False})
    assert isinstance(chosen, dict)
    assert chosen["key"] == "zstd" and chosen["value"] == "none"


@pytest.mark.parametrize("codec", ["snappy", "none"])
def test_small_files_and_no_codec_are_not_sampled(codec: str) -> None:
    small = data(2 * SAMPLE_ROWS - 1)
    assert column_compression(small, codec, {}) == (None if codec == "none" else codec)
    assert column_compression(data(), "none", {}) is None


def test_a_tables_files_follow_the_rule_and_read_back(tmp_path: Path) -> None:
    rows = data().drop_columns(["nested"])
    t = Table.create(str(tmp_path / "t"), rows.schema, record_key="key")
    t.insert(rows)
    (f,) = [s.base for s in t.view(t.timeline).latest_slices()]
    assert f is not None
    got = codecs(t.storage.path(f.path))
    assert got["key"] == "UNCOMPRESSED" and got["seq"] == "SNAPPY"
    assert Table.open(t.path).to_arrow().sort_by("seq").equals(rows.sort_by("seq"))


def test_a_min_saving_of_zero_keeps_the_codec_on_every_column(tmp_path: Path) -> None:
    """``write.parquet-compression-min-saving = 0``: the codec everywhere, as before the rule."""
    rows = data().drop_columns(["nested"])
    t = Table.create(
        str(tmp_path / "t"), rows.schema, record_key="key", properties={"write.parquet-compression-min-saving": 0}
    )
    t.insert(rows)
    (f,) = [s.base for s in t.view(t.timeline).latest_slices()]
    assert f is not None
    assert set(codecs(t.storage.path(f.path)).values()) == {"SNAPPY"}
