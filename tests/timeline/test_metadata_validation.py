"""Damaged records on the timeline are ``CorruptEventError`` where they are parsed, and
instant ids are taken in one form everywhere (issue 25, audit C4c, C4d, A6c).

C4c: a schema instant whose configuration has a format this version does not know was
read as if it were format 1. C4d: completed commit metadata whose ``files`` is not a
list of file records was a ``TypeError`` on open and a traceback (exit 1) in cleaning.
Both must be refused on open, read and cleaning, by the CLI with exit 2, and nothing
may be written by the refused command. A6c: ``as_of='3'`` worked while
``savepoint('3')`` said instant 3 was absent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.table import Table
from lakeline.timeline.commit_metadata import CommitMetadata, WriteStat, file_paths
from lakeline.timeline.errors import CorruptEventError, InstantNotFoundError
from lakeline.timeline.instant import instant_id_of
from lakeline.timeline.table_config import TableConfig

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
#: Sequence numbers of a fresh table's events: the schema instant completes at 2, the
#: first upsert at 5 and the second at 8.
CONFIG_SEQ, COMMIT_SEQ = 2, 5


def _table(path: Path) -> Table:
    t = Table.create(path, SCHEMA, record_key="id")
    t.upsert(pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA))
    t.upsert(pa.table({"id": [2], "v": ["b"]}, schema=SCHEMA))
    return t


def _events(path: Path) -> list[str]:
    return sorted(p.name for p in (path / ".lakeline" / "timeline").iterdir())


def _edit(path: Path, seq: int, change: Callable[[dict[str, Any]], None]) -> None:
    f = path / ".lakeline" / "timeline" / f"{seq:020d}.json"
    ev = json.loads(f.read_text())
    # Without its checksum, as a writer before checksums (or a buggy one) left it: the
    # payload itself must be refused, not only the edit noticed.
    ev.pop("crc", None)
    change(ev["payload"])
    f.write_text(json.dumps(ev))


def _set(key: str, value: Any, under: str | None = None) -> Callable[[dict[str, Any]], None]:
    def change(payload: dict[str, Any]) -> None:
        (payload[under] if under else payload)[key] = value

    return change


def _first_file(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(payload: dict[str, Any]) -> None:
        payload["files"][0][key] = value

    return change


def _drop_first_file_key(key: str) -> Callable[[dict[str, Any]], None]:
    def change(payload: dict[str, Any]) -> None:
        del payload["files"][0][key]

    return change


DAMAGE: list[tuple[str, int, Callable[[dict[str, Any]], None]]] = [
    ("C4c-format-99", CONFIG_SEQ, _set("format", 99, "config")),
    ("config-format-text", CONFIG_SEQ, _set("format", "1", "config")),
    ("config-format-true", CONFIG_SEQ, _set("format", True, "config")),
    ("config-schema-garbage", CONFIG_SEQ, _set("schema", "!!not base64!!", "config")),
    ("config-schema-missing", CONFIG_SEQ, _set("schema", None, "config")),
    ("config-key-text", CONFIG_SEQ, _set("record_key", "id", "config")),
    ("config-type-unknown", CONFIG_SEQ, _set("table_type", "hash", "config")),
    ("config-not-object", CONFIG_SEQ, _set("config", "x")),
    ("C4d-files-string", COMMIT_SEQ, _set("files", "notalist")),
    ("C4d-files-numbers", COMMIT_SEQ, _set("files", [1, 2])),
    ("files-object", COMMIT_SEQ, _set("files", {"path": "x"})),
    ("file-rows-text", COMMIT_SEQ, _first_file("rows", "many")),
    ("file-path-number", COMMIT_SEQ, _first_file("path", 5)),
    ("file-without-path", COMMIT_SEQ, _drop_first_file_key("path")),
    ("file-key-range-list", COMMIT_SEQ, _first_file("key_min", [1])),
    ("replaced-string", COMMIT_SEQ, _set("replaced", "x")),
    ("rewritten-numbers", COMMIT_SEQ, _set("rewritten", [1])),
    ("snapshot-seq-text", COMMIT_SEQ, _set("snapshot_seq", "two")),
]


@pytest.mark.parametrize(("case", "seq", "change"), DAMAGE, ids=[d[0] for d in DAMAGE])
def test_damaged_record_is_corrupt_on_open_read_and_cleaning(
    tmp_path: Path, case: str, seq: int, change: Callable[[dict[str, Any]], None]
) -> None:
    path = tmp_path / "t"
    _table(path)
    _edit(path, seq, change)
    before = _events(path)
    with pytest.raises(CorruptEventError):
        t = Table.open(path)
        t.to_arrow()
    runner = CliRunner()
    # (``timeline show`` lists a damaged record as it is: inspecting one must work.)
    for args in (
        ["service", "run", str(path), "cleaning"],
        ["index", "create", str(path), "column_stats"],
        ["index", "validate", str(path)],
    ):
        res = runner.invoke(cli, args)
        lines = res.stderr.strip().splitlines()
        assert res.exit_code == 2 and len(lines) == 1 and "[CorruptEventError]" in lines[0], (args, res.output)
    assert _events(path) == before  # nothing was written by any refused command
    assert not (path / ".lakeline" / "metadata").exists()


def test_cleaning_reads_paths_through_the_checked_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Cleaning lists raw paths of every data instant (not only through the view): a
    # damaged record it reaches that way is typed too.
    path = tmp_path / "t"
    t = _table(path)
    import lakeline.services.cleaning as cleaning

    real = cleaning.file_paths
    calls: list[int] = []

    def counting(raw: Any) -> list[str]:
        calls.append(1)
        return real(raw)

    monkeypatch.setattr(cleaning, "file_paths", counting)
    t.services.run("cleaning")
    assert calls


def test_well_formed_metadata_round_trips() -> None:
    stat = WriteStat("p/f.parquet", "p", "fg", "base", 3, 100, 0, "a", "z", True)
    md = CommitMetadata("upsert", 2, (stat,), {"p": ("g1",)}, (("p", "g2"),), ("q",), {"inserted": 3})
    raw = json.loads(json.dumps(md.to_dict()))
    assert CommitMetadata.from_dict(raw) == md
    assert file_paths(raw) == ["p/f.parquet"]
    assert CommitMetadata.from_dict({}).files == ()  # an instant that added nothing
    assert CommitMetadata.from_dict({"files": [{**stat.to_dict(), "deletes": 1}]}).files[0].deletes == 1


@pytest.mark.parametrize(
    "raw",
    [
        "x",
        [],
        {"files": "notalist"},
        {"files": [None]},
        {"files": [{"path": "a"}]},
        {"files": [{**WriteStat("a", "", "g", "base", 1, 2).to_dict(), "inserts": 1}]},
        {"stats": [1]},
        {"replaced_partitions": "p"},
        {"operation": 5},
    ],
)
def test_malformed_metadata_is_corrupt_event_error(raw: Any) -> None:
    with pytest.raises(CorruptEventError):
        CommitMetadata.from_dict(raw)


def test_config_of_the_current_format_round_trips(tmp_path: Path) -> None:
    t = _table(tmp_path / "t")
    raw = json.loads(json.dumps(t.config.to_dict()))
    assert TableConfig.from_dict(raw) == t.config
    legacy = {k: v for k, v in raw.items() if k != "format"}  # written before the field: format 1
    assert TableConfig.from_dict(legacy) == t.config


# --- A6c: instant ids ------------------------------------------------------------------


def test_instant_ids_are_ints_or_int_like_text() -> None:
    assert [instant_id_of(v) for v in (3, "3", " 12 ", np.int64(4))] == [3, 3, 12, 4]
    for bad in (True, False, 3.0, "3.0", "abc", "", "-1", None, b"3", [3]):
        with pytest.raises(InstantNotFoundError):
            instant_id_of(bad)


def test_savepoint_takes_the_ids_as_of_takes(tmp_path: Path) -> None:
    t = _table(tmp_path / "t")
    first = t.timeline.completed()[1].id  # the first upsert
    assert t.to_arrow(as_of=str(first)).num_rows == 1
    sp = t.services.savepoint(str(first))
    assert sp.plan["instant"] == first
    t.services.release_savepoint(str(sp.id))
    sp2 = t.services.savepoint(first)
    t.services.release_savepoint(str(first))  # by the pinned instant, as text
    assert sp2.id > sp.id


@pytest.mark.parametrize("bad", [True, 1.5, "one", "3.0"])
def test_as_of_refuses_what_savepoint_refuses(tmp_path: Path, bad: Any) -> None:
    t = _table(tmp_path / "t")
    with pytest.raises(InstantNotFoundError, match="is not an instant id"):
        t.to_arrow(as_of=bad)
    with pytest.raises(InstantNotFoundError, match="is not an instant id"):
        t.services.savepoint(bad)


@pytest.mark.parametrize("bad", [True, 1.0, "one", "1.5", None])
def test_savepoint_refuses_what_is_no_id_and_writes_nothing(tmp_path: Path, bad: Any) -> None:
    path = tmp_path / "t"
    t = _table(path)
    before = _events(path)
    if bad is not None:  # None is "the latest" for savepoint
        with pytest.raises(InstantNotFoundError):
            t.services.savepoint(bad)
    with pytest.raises(InstantNotFoundError):
        t.services.release_savepoint(bad)
    assert _events(path) == before
