"""Arrow everywhere: a scan is an Arrow C stream and a bounded-memory reader, and writes
take any Arrow C stream or array (issue 14, item 1). DuckDB and Polars run for real."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("n", pa.int64())])


def _mor_with_logs(tmp_path: Path) -> Table:
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        partition_by=["day"],
        table_type="mor",
        properties={"write.target-file-size-bytes": 4096},
    )
    t.upsert(pa.table({"id": list(range(2000)), "day": ["a", "b"] * 1000, "n": [0] * 2000}, schema=SCHEMA))
    t.upsert(pa.table({"id": list(range(0, 2000, 7)), "day": ["a", "b"] * 143, "n": [1] * 286}, schema=SCHEMA))
    t.delete(pa.table({"id": list(range(0, 2000, 10))}))
    assert any(s.logs for s in t.scan().slices), "the table must have unmerged logs"
    return t


def _sorted(table: pa.Table) -> list[dict[str, object]]:
    return sorted(table.to_pylist(), key=lambda r: r["id"])  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize("filter", [None, pc.field("n") == 1, (pc.field("day") == "a") & (pc.field("id") < 500)])
def test_to_reader_streams_what_to_arrow_returns(tmp_path: Path, filter: pc.Expression | None) -> None:
    t = _mor_with_logs(tmp_path)
    s = t.scan(filter=filter, columns=["id", "n"])
    reader = s.to_reader()
    assert reader.schema == pa.schema([SCHEMA.field("id"), SCHEMA.field("n")])
    streamed = reader.read_all()
    assert _sorted(streamed) == _sorted(s.to_arrow())
    assert _sorted(pa.Table.from_batches(list(s.to_batches()), schema=s.schema)) == _sorted(s.to_arrow())


def test_the_merged_slices_stream_one_at_a_time(tmp_path: Path) -> None:
    """Bounded memory: no batch is larger than the largest slice's rows."""
    t = _mor_with_logs(tmp_path)
    s = t.scan()
    largest = max(sum(f.rows for f in sl.files) for sl in s.slices)
    batches = list(s.to_reader())
    assert len(batches) > 1
    assert max(b.num_rows for b in batches) <= largest


def test_duckdb_and_polars_read_a_scan_as_a_c_stream(tmp_path: Path) -> None:
    t = _mor_with_logs(tmp_path)
    expected = t.to_arrow(filter=pc.field("day") == "b")
    s = t.scan(filter=pc.field("day") == "b")  # noqa: F841 - DuckDB finds the local ``s`` by name
    got = duckdb.sql("SELECT id, day, n FROM s").arrow()
    got = got.read_all() if isinstance(got, pa.RecordBatchReader) else got
    assert _sorted(got) == _sorted(expected)
    assert _sorted(pa.RecordBatchReader.from_stream(t.scan(filter=pc.field("day") == "b")).read_all()) == _sorted(
        expected
    )
    frame = polars.DataFrame(pa.table(t.scan(filter=pc.field("day") == "b")))
    assert frame.height == expected.num_rows


def test_writes_take_any_arrow_c_stream_or_array(tmp_path: Path) -> None:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", partition_by=["day"], table_type="cow")
    t.insert(polars.DataFrame({"id": [1, 2], "day": ["a", "b"], "n": [1, 2]}))
    t.upsert(duckdb.sql("SELECT 3::BIGINT AS id, 'a' AS day, 3::BIGINT AS n"))
    t.upsert(_ArrayOnly(pa.record_batch({"id": [4], "day": ["b"], "n": [4]}, schema=SCHEMA)))
    assert _sorted(t.to_arrow()) == [{"id": i, "day": d, "n": i} for i, d in [(1, "a"), (2, "b"), (3, "a"), (4, "b")]]
    df = t.to_pandas(filter=pc.field("day") == "a", columns=["id"])
    assert sorted(df["id"].tolist()) == [1, 3]


class _ArrayOnly:
    """An object that offers only ``__arrow_c_array__`` (like a foreign record batch)."""

    def __init__(self, batch: pa.RecordBatch) -> None:
        self._batch = batch

    def __arrow_c_array__(self, requested_schema: object | None = None) -> object:
        return self._batch.__arrow_c_array__(requested_schema)
