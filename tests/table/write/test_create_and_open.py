"""Creating and opening a table: bad properties and arguments are refused and create
nothing, the message of an unknown property lists the valid keys, valid properties may come
as strings, and creating an existing or opening a missing table raise typed errors (split out
of ``test_records.py``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from lakeline.table import (
    InvalidPropertyError,
    LakelineError,
    Table,
    TableExistsError,
    TableNotFoundError,
    UnknownColumnError,
)
from lakeline.timeline.storage.event_log.filesystem import FileSystemStore

from tests.table.model import SCHEMA
from tests.table.write.records_helpers import disk_files, nothing_written, table  # noqa: F401 (table: a fixture)


@pytest.mark.parametrize(
    "props,needle",
    [
        ({"write.target-file-size": 1024}, "write.target-file-size"),
        ({"write.target-file-size-bytes": "big"}, "write.target-file-size-bytes"),
        ({"write.target-file-size-bytes": 10}, "write.target-file-size-bytes"),
        ({"write.target-file-size-bytes": 1.5}, "write.target-file-size-bytes"),
        ({"write.parquet-compression": "brotli"}, "write.parquet-compression"),
        ({"write.parquet-compression-min-saving": 1.5}, "write.parquet-compression-min-saving"),
        ({"write.insert-key-check": "maybe"}, "write.insert-key-check"),
        ({"commit.max-retries": -1}, "commit.max-retries"),
        ({"clean.policy": "keep_everything"}, "clean.policy"),
    ],
    ids=[
        "unknown-key",
        "not-an-int",
        "below-min",
        "fractional",
        "bad-choice",
        "saving-above-one",
        "not-a-bool",
        "negative",
        "bad-policy",
    ],
)
def test_bad_property_at_create_is_refused_and_creates_nothing(tmp_path: Path, props: dict, needle: str) -> None:
    path = tmp_path / "t"
    with pytest.raises(InvalidPropertyError) as exc:
        Table.create(path, SCHEMA, record_key="id", properties=props)
    assert isinstance(exc.value, ValueError) and isinstance(exc.value, LakelineError)
    assert needle in str(exc.value)
    assert not path.exists() or disk_files(path) == {}
    with pytest.raises(TableNotFoundError):
        Table.open(path)
    Table.create(path, SCHEMA, record_key="id")  # the location is still free


def test_unknown_property_message_lists_the_valid_keys(tmp_path: Path) -> None:
    with pytest.raises(InvalidPropertyError) as exc:
        Table.create(tmp_path / "t", SCHEMA, properties={"write.target-filesize-bytes": 4096})
    msg = str(exc.value)
    for key in (
        "write.target-file-size-bytes",
        "commit.max-retries",
        "heartbeat.interval-ms",
        "heartbeat.tolerable-misses",
        "lock.lease-ms",
        "clean.policy",
        "clean.retain",
        "compaction.delta-commits",
    ):
        assert key in msg


def test_valid_properties_are_accepted_in_string_form(tmp_path: Path) -> None:
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        properties={"write.target-file-size-bytes": "4096", "write.insert-key-check": "false", "user.owner": "me"},
    )
    props = t.config.props
    assert props.write_target_file_size_bytes == 4096 and props.write_insert_key_check is False


@pytest.mark.parametrize(
    "kwargs,error",
    [
        ({"record_key": "nope"}, UnknownColumnError),
        ({"record_key": "id", "ordering_field": "nope"}, UnknownColumnError),
        ({"record_key": "id", "partition_by": ["nope"]}, UnknownColumnError),
        ({"record_key": "id", "table_type": "hybrid"}, InvalidPropertyError),
        ({"table_type": "mor"}, InvalidPropertyError),
    ],
    ids=["key", "ordering", "partition", "table-type", "mor-without-key"],
)
def test_bad_create_arguments_create_nothing(tmp_path: Path, kwargs: dict, error: type) -> None:
    path = tmp_path / "t"
    with pytest.raises(error):
        Table.create(path, SCHEMA, **kwargs)
    assert not path.exists() or disk_files(path) == {}


def test_table_exists(table: tuple[Table, Path]) -> None:
    t, path = table
    with nothing_written(t, path):
        with pytest.raises(TableExistsError) as exc:
            Table.create(path, SCHEMA, record_key="id")
        with pytest.raises(TableExistsError):
            Table.create(str(path), pa.schema([("x", pa.int32())]))
    assert isinstance(exc.value, LakelineError) and isinstance(exc.value, FileExistsError)


def test_table_not_found(tmp_path: Path) -> None:
    for where in (tmp_path / "missing", tmp_path):
        with pytest.raises(TableNotFoundError) as exc:
            Table.open(where)
        assert isinstance(exc.value, LookupError) and isinstance(exc.value, LakelineError)
    assert not (tmp_path / "missing").exists()


def test_a_create_puts_its_schema_instant_at_slot_0_before_reading_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A location the create just claimed has an empty log: the schema instant goes to
    slot 0 unread (on an object store a first read is some 20 requests); winning the
    slot proves the log was empty (a lost slot costs a read and the emptiness check:
    tests/timeline/storage/test_ownership.py races creators). A second create is
    refused before any event."""
    order: list[str] = []
    real_put, real_read = FileSystemStore.put_if_absent, FileSystemStore.read_from
    monkeypatch.setattr(FileSystemStore, "put_if_absent", lambda s, e: order.append("put") or real_put(s, e))
    monkeypatch.setattr(FileSystemStore, "read_from", lambda s, seq: order.append("read") or real_read(s, seq))
    t = Table.create(str(tmp_path / "t"), SCHEMA, record_key="id")
    assert order[:3] == ["put", "put", "put"], order  # requested, inflight, completed
    assert [i.action for i in Table.open(t.path).timeline.instants()] == ["schema"]
    order.clear()
    with pytest.raises(TableExistsError):
        Table.create(str(tmp_path / "t"), SCHEMA, record_key="id")
    assert "put" not in order  # refused before any event


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_index_record_index_creates_a_ready_record_index_with_the_table(tmp_path: Path, kind: str) -> None:
    from lakeline.table import DuplicateKeyError

    t = Table.create(
        tmp_path / kind, SCHEMA, record_key="id", table_type=kind, properties={"index.record-index": "true"}
    )
    assert [(i.name, i.kind, i.state) for i in t.indexes.list()] == [("record_index", "record_index", "ready")]

    def rows(ids: list[int]) -> pa.Table:
        return pa.table({"id": ids, "ts": ids, "day": ["d"] * len(ids), "v": ids, "s": ["s"] * len(ids)}, schema=SCHEMA)

    t.insert(rows([1, 2]))
    with pytest.raises(DuplicateKeyError):
        t.insert(rows([2, 3]))
    assert t.indexes.validate("record_index")["mismatches"] == []
    # Off by default: a keyed table has no index unless asked.
    assert Table.create(tmp_path / f"{kind}-plain", SCHEMA, record_key="id", table_type=kind).indexes.list() == []


def test_index_record_index_without_a_record_key_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t"
    with pytest.raises(InvalidPropertyError, match="record key"):
        Table.create(path, SCHEMA, properties={"index.record-index": True})
    assert not path.exists() or disk_files(path) == {}
