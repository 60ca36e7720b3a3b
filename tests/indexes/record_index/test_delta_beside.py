"""A commit of one large file writes its record-index delta beside the file (indexes/on_commit.py
``write_beside``, table/files.py ``write_indexed``).

What must hold: the delta is written once, by the write task's describe thread, and is
the commit's delta (one per instant, lookups and ``validate`` exact); a commit of
several files still writes one delta from the commit; a delta written beside for an
index that is gone by the commit is deleted; and a stale writer whose instant was rolled
back while it wrote leaves neither its file nor its delta nor the delta's marker.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from lakeline.indexes import on_commit
from lakeline.indexes.metadata_table import MetadataTable
from lakeline.table import Table
from lakeline.table.files import DESCRIBE_ALONGSIDE_ROWS
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.errors import DuplicateKeyError, InvalidTransitionError
from lakeline.timeline.markers import list_markers

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.int64())])
ROWS = DESCRIBE_ALONGSIDE_ROWS + 20_000  # a file large enough to be described beside its write

pytestmark = pytest.mark.usefixtures("no_faults")


def _batch(rng: random.Random, n: int) -> pa.Table:
    return pa.table({"id": [f"{rng.getrandbits(128):032x}" for _ in range(n)], "v": [0] * n}, schema=SCHEMA)


def _deltas(t: Table) -> dict[int, list[str]]:
    return MetadataTable(t.storage).deltas(t.indexes.list()[0].partition)


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_a_one_file_insert_writes_its_delta_beside_the_file_and_a_many_file_one_from_the_commit(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(11)
    t = Table.create(tmp_path / kind, SCHEMA, record_key="id", table_type=kind, properties={"index.record-index": True})
    writers: list[str] = []
    real = on_commit.write_delta
    monkeypatch.setattr(
        on_commit, "write_delta", lambda *a, **k: writers.append(threading.current_thread().name) or real(*a, **k)
    )
    first = _batch(rng, ROWS)
    r = t.insert(first)
    assert len(writers) == 1 and writers[0].startswith("lakeline-describe")  # beside, not after
    assert len(_deltas(t)[r.instant.id]) == 1
    # Several files (a small target size): the commit concatenates their entries, once.
    many = Table.create(
        tmp_path / f"{kind}-many",
        SCHEMA,
        record_key="id",
        table_type=kind,
        properties={"index.record-index": True, "write.target-file-size-bytes": 1 << 20},
    )
    writers.clear()
    r2 = many.insert(_batch(rng, 2 * ROWS))
    assert len(many.timeline.last_completed().metadata["files"]) > 1
    assert writers == [threading.main_thread().name] and len(_deltas(many)[r2.instant.id]) == 1
    assert many.indexes.validate("record_index")["mismatches"] == []
    with pytest.raises(DuplicateKeyError):
        t.insert(pa.table({"id": [first.column("id")[5].as_py()], "v": [1]}, schema=SCHEMA))
    t.upsert(pa.table({"id": [first.column("id")[7].as_py()], "v": [2]}, schema=SCHEMA))
    assert t.to_arrow().num_rows == ROWS and many.to_arrow().num_rows == 2 * ROWS
    assert t.indexes.validate("record_index")["mismatches"] == []


def test_a_delta_written_beside_for_an_index_dropped_before_the_commit_is_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(12)
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", properties={"index.record-index": True})
    partition = t.indexes.list()[0].partition
    written: list[str] = []
    real = on_commit.write_beside

    def then_drop(*a: object, **k: object) -> object:
        out = real(*a, **k)  # type: ignore[arg-type]
        written.extend(p for rows in out.values() if (p := on_commit.written_delta(rows)) is not None)
        Table.open(tmp_path / "t").indexes.drop("record_index")  # while the file is still being written
        return out

    monkeypatch.setattr("lakeline.table.files.write_beside", then_drop)
    t.insert(_batch(rng, ROWS))
    assert len(written) == 1
    assert not t.storage.exists(t.storage.path(written[0]))
    assert MetadataTable(t.storage).deltas(partition) == {}
    assert t.indexes.list() == [] and t.to_arrow().num_rows == ROWS


def test_a_stale_writer_rolled_back_while_it_wrote_leaves_no_delta(tmp_path: Path) -> None:
    from lakeline.table.rollback import rollback_instant

    rng = random.Random(13)
    path = tmp_path / "t"
    t = Table.create(path, SCHEMA, record_key="id", properties={"index.record-index": True})
    partition = t.indexes.list()[0].partition

    def roll_it_back() -> None:
        faults.disarm_all()
        other = Table.open(path)
        (pending,) = other.timeline.pending()
        assert rollback_instant(other.log, other.storage, pending.id, "as rollback_failed would") is not None

    # At the data file's marker: the rollback runs before the describe thread writes the
    # delta and its marker, so nobody but the writer can remove them.
    faults.on("marker.after_create", roll_it_back)
    with pytest.raises(InvalidTransitionError):
        t.insert(_batch(rng, ROWS))
    t = Table.open(path)
    (gone,) = [i.id for i in t.timeline.instants() if i.state == "rolled_back"]
    assert MetadataTable(t.storage).deltas(partition) == {}
    assert list_markers(t.storage, gone) == []
    assert t.to_arrow().num_rows == 0 and t.indexes.validate("record_index")["mismatches"] == []
