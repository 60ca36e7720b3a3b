"""How data files are encoded (table/encoding.py): the table's codec only on the columns
it shrinks, chosen per file from a sample; every file reads back as written."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lakeline.table import Table
from lakeline.table.encoding import SAMPLE_ROWS, column_compression, parquet_options

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
