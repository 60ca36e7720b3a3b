"""Tables written before field ids (issue 29) keep reading, and take schema changes.

A table of the previous format is made by creating it with id assignment switched off:
its recorded schema and every file it writes then carry no ``PARQUET:field_id``, exactly
as before this version. It must read and write as before; its first ``update_schema``
gives every column an id and records the name its old files hold it under, so a rename,
a drop and an add of the dropped name read the old files right (checked against a
rewrite of the same data), and files written afterwards carry ids.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lakeline.table import Table
from lakeline.timeline import table_config
from lakeline.timeline.field_ids import FIELD_ID_KEY, field_id

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("qty", pa.int32()), ("gone", pa.string())])


def _data_files(path: Path) -> list[Path]:
    return [p for p in path.rglob("*.parquet") if ".lakeline" not in p.parts]


def _old_table(path: Path, table_type: str, monkeypatch: pytest.MonkeyPatch) -> Table:
    with monkeypatch.context() as m:
        m.setattr(table_config, "assign_ids", lambda fields, last, keep=True: (list(fields), 0))
        t = Table.create(path, SCHEMA, record_key="id", table_type=table_type)
    t = Table.open(path)
    t.insert(pa.Table.from_pylist([{"id": i, "qty": i, "gone": f"g{i}"} for i in range(5)], schema=SCHEMA))
    t.upsert(pa.Table.from_pylist([{"id": i, "qty": 10 * i, "gone": "u"} for i in (1, 2)], schema=SCHEMA))
    return t


def _ids_in(path: Path) -> set[bytes | None]:
    return {(f.metadata or {}).get(FIELD_ID_KEY) for p in _data_files(path) for f in pq.read_schema(p)}


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_table_from_before_ids_reads_writes_and_evolves(
    tmp_path: Path, table_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t"
    t = _old_table(path, table_type, monkeypatch)
    assert all(field_id(f) is None for f in t.schema) and _ids_in(path) == {None}
    rows = sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [r["qty"] for r in rows] == [0, 10, 20, 3, 4]
    with t.update_schema() as u:
        u.rename_column("qty", "quantity")
        u.delete_column("gone")
        u.add_column("gone", pa.string())  # a new column: null in the old files
        u.update_column("quantity", pa.int64())
    assert [field_id(f) for f in t.schema] == [1, 2, 4]
    want: list[dict[str, Any]] = [{"id": r["id"], "quantity": r["qty"], "gone": None} for r in rows]
    rewrite = Table.create(tmp_path / "rw", t.schema, record_key="id", table_type=table_type)
    rewrite.insert(pa.Table.from_pylist(want, schema=t.schema))
    assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"]) == want
    assert sorted(rewrite.to_arrow().to_pylist(), key=lambda r: r["id"]) == want
    t.upsert(pa.Table.from_pylist([{"id": 9, "quantity": 99, "gone": "new"}], schema=t.schema))
    assert b"1" in _ids_in(path), "files written after the change carry ids"
    t.services.compact() if table_type == "mor" else t.services.cluster(sort_by=["id"])
    got = {r["id"]: r for r in Table.open(path).to_arrow().to_pylist()}
    assert got == {**{r["id"]: r for r in want}, 9: {"id": 9, "quantity": 99, "gone": "new"}}
