"""A table owns its folder and only its own files (issue 25; docs/safety.md).

Where a table may be created, what its pointer must look like, that a copy of a
PostgreSQL-timeline table cannot write the original's log, and the deletion test: files
planted outside the table (siblings, parents, symbolic-link targets, nested tables,
another table's files, user files inside the folder) survive every service and purge.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from lakeline.table import Catalog, Table, TableExistsError, TableIdentityError, TableNotFoundError
from lakeline.timeline.errors import UnsafeLocationError
from lakeline.timeline.instant import State
from lakeline.timeline.storage.filesystem import Storage
from lakeline.timeline.storage.ownership import walk_files
from lakeline.timeline.view.file_group import table_tag

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("day", pa.string())])


def _rows(ids: list[int], ts: int = 1, day: str = "d1") -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "day": [day] * len(ids)}, schema=SCHEMA)


def _create(path: Path | str, **kw: object) -> Table:
    args: dict[str, object] = {"record_key": "id", "ordering_field": "ts", "partition_by": ["day"]}
    args.update(kw)
    return Table.create(path, SCHEMA, **args)  # type: ignore[arg-type]


# -- where a table may live -----------------------------------------------------------


@pytest.mark.parametrize("where", ["", "   ", "/", "~", "home-parent", "tmp-root"])
def test_create_refuses_places_a_table_may_not_own(where: str) -> None:
    home = os.path.realpath(os.path.expanduser("~"))
    path = {
        "~": home,
        "home-parent": os.path.dirname(home) if home.count("/") > 1 else "/",
        "tmp-root": __import__("tempfile").gettempdir(),
    }.get(where, where)
    with pytest.raises(UnsafeLocationError):
        Table.create(path, SCHEMA, record_key="id")
    if path.strip():
        assert not os.path.exists(os.path.join(path, ".lakeline", "table.json"))


def test_create_refuses_files_non_empty_folders_and_nesting(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    for path in (tmp_path / "file", tmp_path / "file" / "below"):
        with pytest.raises(UnsafeLocationError, match="file"):
            Table.create(path, SCHEMA, record_key="id")
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.txt").write_text("irreplaceable")
    with pytest.raises(UnsafeLocationError, match="not empty"):
        Table.create(home, SCHEMA, record_key="id")
    assert sorted(os.listdir(home)) == ["thesis.txt"]
    outer = _create(tmp_path / "outer")
    for inner in (tmp_path / "outer" / "inner", tmp_path / "outer" / "day=d1" / "deep" / "inner"):
        with pytest.raises(UnsafeLocationError, match="inside the table"):
            Table.create(inner, SCHEMA, record_key="id")
        assert not inner.exists()
    assert outer.to_arrow().num_rows == 0
    with pytest.raises(TableExistsError):  # a table there stays TableExistsError (contract)
        Table.create(tmp_path / "outer", SCHEMA, record_key="id")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _create(empty).to_arrow().num_rows == 0  # an existing empty folder is fine


def test_cli_demo_refuses_a_table_folder(tmp_path: Path) -> None:
    _create(tmp_path / "t")
    from click.testing import CliRunner
    from lakeline.cli.main import cli

    r = CliRunner().invoke(cli, ["demo", str(tmp_path / "t")])
    assert r.exit_code == 2, r.output
    assert not (tmp_path / "t" / "demo_table").exists()


def test_open_refuses_pointers_it_does_not_know(tmp_path: Path) -> None:
    t = _create(tmp_path / "t")
    t.upsert(_rows([1]))
    pointer = tmp_path / "t" / ".lakeline" / "table.json"
    good = json.loads(pointer.read_text())
    for bad in (
        [],
        {},
        {**good, "format": 2},
        {**good, "format": True},
        {**good, "table_uuid": "x"},
        {**good, "timeline": "cassandra"},
    ):
        pointer.write_text(json.dumps(bad))
        with pytest.raises(TableNotFoundError):
            Table.open(tmp_path / "t")
    pointer.write_text(json.dumps(good))
    assert Table.open(tmp_path / "t").to_arrow().num_rows == 1
    with pytest.raises(TableNotFoundError):
        Table.open(pointer)  # a regular file is not a table


def _pointer_only(path: Path) -> None:
    (path / ".lakeline").mkdir(parents=True)
    pointer = {"format": 1, "table_uuid": "ab" * 16, "timeline": "filesystem", "location": str(path)}
    (path / ".lakeline" / "table.json").write_text(json.dumps(pointer))


def test_a_create_that_died_after_its_pointer_is_completed_by_creating_again(tmp_path: Path) -> None:
    _pointer_only(tmp_path / "t")
    with pytest.raises(TableNotFoundError, match="did not finish"):
        Table.open(tmp_path / "t")
    t = _create(tmp_path / "t")
    t.upsert(_rows([1, 2]))
    assert t.config.table_uuid == "ab" * 16
    assert Table.open(tmp_path / "t").to_arrow().num_rows == 2


_RACER = """
import sys, pyarrow as pa
from lakeline.table import Table, TableExistsError
s = pa.schema([("id", pa.int64()), ("who", pa.string())])
try:
    t = Table.create(sys.argv[1], s, record_key="id")
    t.upsert(pa.table({"id": [1], "who": [sys.argv[2]]}, schema=s))
    print("won")
except TableExistsError:
    print("lost")
"""


def test_racing_creators_over_an_abandoned_pointer_make_one_table(tmp_path: Path) -> None:
    """Several processes finish the same abandoned create: exactly one wins (put-if-absent
    at the log's first slot), the others get TableExistsError, and the winner's row is there."""
    for round_ in range(3):
        path = tmp_path / f"t{round_}"
        _pointer_only(path)
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _RACER, str(path), f"p{i}"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(4)
        ]
        outs = [p.communicate(timeout=120) for p in procs]
        said = sorted(o.strip() for o, _ in outs)
        assert said == ["lost", "lost", "lost", "won"], outs
        winner = f"p{[o.strip() for o, _ in outs].index('won')}"
        assert Table.open(path).to_arrow().to_pylist() == [{"id": 1, "who": winner}]


# -- a copy of a PostgreSQL-timeline table --------------------------------------------


def test_a_copy_of_a_postgresql_table_cannot_write_the_original_log(tmp_path: Path, pg_url: str) -> None:
    a = _create(tmp_path / "a", timeline=pg_url)
    a.upsert(_rows([1]))
    shutil.copytree(tmp_path / "a", tmp_path / "backup")
    with pytest.raises(TableIdentityError, match="copy"):
        Table.open(tmp_path / "backup", timeline=pg_url)
    assert Table.open(tmp_path / "a", timeline=pg_url).to_arrow().num_rows == 1
    # A filesystem-timeline copy carries its own log: it is a table of its own.
    b = _create(tmp_path / "b")
    b.upsert(_rows([1]))
    shutil.copytree(tmp_path / "b", tmp_path / "b2")
    Table.open(tmp_path / "b2").upsert(_rows([2]))
    assert Table.open(tmp_path / "b").to_arrow().num_rows == 1
    assert Table.open(tmp_path / "b2").to_arrow().num_rows == 2


# -- the deletion test ----------------------------------------------------------------


class Planted:
    """Files outside what a table owns, each with its content, to check after every step."""

    def __init__(self) -> None:
        self.files: dict[Path, bytes] = {}

    def add(self, path: Path, content: bytes | None = None, age_s: float = 7200.0) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content if content is not None else f"planted {path.name} {uuid.uuid4().hex}".encode()
        path.write_bytes(data)
        past = time.time() - age_s  # old enough for any orphan age
        os.utime(path, (past, past))
        self.files[path] = data
        return path

    def check(self, step: str) -> None:
        gone = [str(p) for p, data in self.files.items() if not p.exists() or p.read_bytes() != data]
        assert not gone, f"after {step}: deleted or changed {gone}"


def _tagged_name(tag: str, instant: int = 3, log: bool = False) -> str:
    return f"{uuid.uuid4().hex}_{instant}_{uuid.uuid4().hex[:8]}_{tag}{'.log' if log else ''}.parquet"


def _age_everything(root: Path) -> None:
    past = time.time() - 7200
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            os.utime(os.path.join(dirpath, f), (past, past), follow_symlinks=False)


def _plant_around(root: Path, t: Table, other: Table, planted: Planted) -> Table:
    """Plant files outside ``t``'s ownership around and inside its folder; returns the
    table moved into ``t``'s folder by hand (a nested table)."""
    base = Path(t.path)
    tag = table_tag(t.config.table_uuid)
    # Next to and above the table, even with names that look like the table's own files.
    planted.add(root / "sibling.parquet")
    planted.add(root / _tagged_name(tag))
    planted.add(base.parent / f"{base.name}-backup" / "day=d1" / _tagged_name(tag))
    # Inside the folder: user files, another table's file names, names from before tags.
    planted.add(base / "notes.txt")
    planted.add(base / "day=d1" / "README.md")
    planted.add(base / "day=d1" / _tagged_name("0123456789ab"))
    planted.add(base / "day=d1" / f"{uuid.uuid4().hex}_3_{uuid.uuid4().hex[:8]}.parquet")
    # Symbolic links into another table and to a file outside, under tagged names.
    os.symlink(other.path, base / "link")
    victim = planted.add(root / "victim" / _tagged_name(tag))
    os.symlink(victim, base / "day=d1" / _tagged_name(tag))
    os.symlink(victim.parent, base / "day=d2")  # a partition folder that is a link
    for dirpath, _dirs, files in os.walk(other.path):
        for f in files:
            p = Path(dirpath) / f
            planted.files[p] = p.read_bytes()
    # A table moved into this one's folder by hand (creating it there is refused).
    inner = _create(root / "inner-src")
    inner.upsert(_rows([100, 101]))
    inner.upsert(_rows([100], ts=2))
    shutil.move(str(root / "inner-src"), str(base / "inner"))
    for dirpath, _dirs, files in os.walk(base / "inner"):
        for f in files:
            p = Path(dirpath) / f
            planted.files[p] = p.read_bytes()
    return Table.open(base / "inner")


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_nothing_outside_the_table_is_deleted_by_any_service(tmp_path: Path, table_type: str) -> None:
    props = {"heartbeat.interval-ms": 200, "heartbeat.tolerable-misses": 0, "clean.retain": 1}
    t = _create(tmp_path / "t", table_type=table_type, properties=props)
    other = _create(tmp_path / "other")
    other.upsert(_rows([7, 8]))
    t.upsert(_rows([1, 2, 3]))
    planted = Planted()
    inner = _plant_around(tmp_path, t, other, planted)
    t.indexes.create("bloom_filters", wait=True)
    t.indexes.create("column_stats", wait=True)
    for ts in (2, 3, 4):
        t.upsert(_rows([1, 2], ts=ts))
        t.upsert(_rows([50 + ts], ts=ts, day="d3"))
    t.delete(pa.table({"id": [3]}))
    planted.check("writes")
    # A writer that died: its instant is rolled back by the service.
    dead = t.log.append(t.config.write_action, State.REQUESTED, {"operation": "upsert", "writer": True}).instant
    t.log.append(t.config.write_action, State.INFLIGHT, {}, instant=dead)
    time.sleep(0.5)
    steps = [
        ("rollback", lambda: t.services.rollback_failed()),
        ("compaction", lambda: t.services.compact()),
        ("clustering", lambda: t.services.cluster(sort_by=["id"])),
        ("index drop", lambda: t.indexes.drop(t.indexes.list()[0].name)),
        ("cleaning", lambda: t.services.clean(retain=1, orphan_age_ms=0, dry_run=False)),
        ("archival", lambda: t.services.archive()),
        ("cleaning again", lambda: t.services.clean(retain=1, orphan_age_ms=0, dry_run=False)),
    ]
    done = {}
    for name, step in steps:
        _age_everything(tmp_path / "t")
        done[name] = step()
        planted.check(name)
    assert done["cleaning"].stats["files_deleted"] > 0  # the cleaner did delete: its own old versions
    assert t.timeline.get(dead).state is State.ROLLED_BACK
    assert sorted(t.to_arrow().column("id").to_pylist()) == [1, 2, 52, 53, 54]
    assert sorted(other.to_arrow().column("id").to_pylist()) == [7, 8]
    assert sorted(inner.to_arrow().column("id").to_pylist()) == [100, 101]
    # The walk the cleaner uses stays in the table's own tree: no link, no nested table.
    base = Path(t.path)
    seen = {Path(i.path) for i in walk_files(t.storage)}
    assert seen and all(p.is_relative_to(base) and Path(os.path.realpath(p)) == p for p in seen)
    assert not any({"inner", "link", ".lakeline"} & set(p.relative_to(base).parts) for p in seen)
    assert base / "notes.txt" in seen  # user files are seen, and left alone


def test_purge_deletes_only_the_table_and_checks_whose_folder_it_is(tmp_path: Path, pg_url: str) -> None:
    ns = f"o{uuid.uuid4().hex[:10]}"
    with Catalog(pg_url) as cat:
        t = cat.create_table(f"{ns}.t", tmp_path / "t", SCHEMA, record_key="id", partition_by=["day"], table_type="mor")
        t.upsert(_rows([1, 2]))
        t.upsert(_rows([1], ts=2))
        other = _create(tmp_path / "other")
        other.upsert(_rows([7]))
        planted = Planted()
        inner = _plant_around(tmp_path, t, other, planted)
        cat.drop_table(f"{ns}.t", purge=True)
        planted.check("purge")
        assert not (tmp_path / "t" / ".lakeline").exists()
        left = {
            str(p.relative_to(tmp_path / "t"))
            for p in (tmp_path / "t").rglob("*")
            if p.is_file() and not p.is_symlink() and "inner" not in p.parts
        }
        assert left == {"notes.txt", "day=d1/README.md"} | {
            str(p.relative_to(tmp_path / "t"))
            for p in planted.files
            if p.parent == tmp_path / "t" / "day=d1" and p.name.endswith(".parquet")
        }
        assert sorted(inner.to_arrow().column("id").to_pylist()) == [100, 101]
        assert other.to_arrow().num_rows == 1
        # A name whose location now holds another table: refused, nothing dropped.
        stale = cat.create_table(f"{ns}.stale", tmp_path / "s", SCHEMA, record_key="id")
        stale.upsert(pa.table({"id": [1], "ts": [1], "day": ["x"]}, schema=SCHEMA))
        shutil.rmtree(tmp_path / "s")
        newcomer = Table.create(tmp_path / "s", SCHEMA, record_key="id")
        newcomer.upsert(pa.table({"id": [9], "ts": [1], "day": ["x"]}, schema=SCHEMA))
        with pytest.raises(TableIdentityError):
            cat.drop_table(f"{ns}.stale", purge=True)
        assert f"{ns}.stale" in cat.list_tables(ns)
        assert Table.open(tmp_path / "s").to_arrow().column("id").to_pylist() == [9]
        # Catalog tables cannot nest either.
        with pytest.raises(UnsafeLocationError):
            cat.create_table(f"{ns}.nested", tmp_path / "s" / "inner", SCHEMA, record_key="id")


def test_storage_never_deletes_above_its_base_or_through_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("x")
    base = tmp_path / "t"
    base.mkdir()
    os.symlink(outside, base / "link")
    (outside / "sub").mkdir()
    os.symlink(outside / "sub", base / "deep")  # base/deep/.. is outside, though its text is not
    st = Storage.for_uri(base)
    for path in (
        str(outside / "f"),
        str(base / "link" / "f"),
        str(base / ".." / "outside" / "f"),
        str(base),
        f"{base}/deep/../f",
        f"{base}//link/f",
        f"{base}/./link/f",
    ):
        assert st.delete(path) is False, path
    st.delete_dir(str(base / "link"))  # removes the link itself, never what it points to
    st.delete_dir(str(outside))
    st.delete_dir(str(base))
    assert (outside / "f").read_text() == "x" and base.exists()


def test_a_clean_planned_by_an_older_version_deletes_no_foreign_orphan(tmp_path: Path) -> None:
    """A pending clean whose plan (made before orphans had to carry the table's tag) lists
    another table's file and an untagged one as orphans: execute skips both."""
    from lakeline.timeline.instant import Action
    from lakeline.timeline.plans import CleanPlan

    t = _create(tmp_path / "t")
    t.upsert(_rows([1]))
    planted = Planted()
    foreign = planted.add(tmp_path / "t" / "day=d1" / _tagged_name("0123456789ab"))
    untagged = planted.add(tmp_path / "t" / "day=d1" / f"{uuid.uuid4().hex}_3_{uuid.uuid4().hex[:8]}.parquet")
    rels = [f"day=d1/{foreign.name}", f"day=d1/{untagged.name}"]
    plan = CleanPlan(
        "keep_latest_commits", 10, 0, 0, t.timeline.last_seq, {"day=d1": tuple(rels)}, {r: "orphan" for r in rels}
    )
    inst = t.log.append(Action.CLEAN, State.REQUESTED, {"service": "cleaning", **plan.to_dict()}).instant
    result = t.services.execute(t.timeline.get(inst))
    planted.check("an old plan's execute")
    assert result.stats["files_deleted"] == 0 and sorted(result.stats["skipped"]) == sorted(rels)
    assert t.to_arrow().num_rows == 1
