"""The metadata table: visibility by the reader's snapshot, latest entry wins,
compaction and rebuild, and rollback of a real write instant removing its deltas."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from lakeline.indexes.metadata_table import INSTANT, MetadataTable
from lakeline.table import Table
from lakeline.table.rollback import rollback_instant
from lakeline.timeline.errors import MetadataTableError
from lakeline.timeline.instant import Action, State
from lakeline.timeline.markers import list_markers
from lakeline.timeline.storage.filesystem import Storage

from tests.indexes._timeline import Events


def _rows(*pairs: tuple[str, int]) -> pa.Table:
    return pa.table(
        {
            "path": [p for p, _ in pairs],
            "partition": [""] * len(pairs),
            "v": pa.array([v for _, v in pairs], pa.int64()),
        }
    )


def _as_dict(t: pa.Table | None) -> dict[str, int]:
    return {} if t is None else dict(zip(t.column("path").to_pylist(), t.column("v").to_pylist()))


@pytest.fixture
def mt(tmp_path: Path) -> MetadataTable:
    return MetadataTable(Storage.for_uri(tmp_path))


def test_deltas_visible_only_when_their_instant_completed(mt: MetadataTable) -> None:
    ev = Events()
    a = ev.request()
    b = ev.request()
    mt.write_updates("ix", a, _rows(("f1", 1)))
    mt.write_updates("ix", b, _rows(("f2", 2)))
    assert mt.read("ix", ev.timeline()) is None or _as_dict(mt.read("ix", ev.timeline())) == {}
    done_a = ev.complete(a)
    assert _as_dict(mt.read("ix", ev.timeline())) == {"f1": 1}
    ev.roll_back(b)
    assert _as_dict(mt.read("ix", ev.timeline())) == {"f1": 1}
    c = ev.request()
    mt.write_updates("ix", c, _rows(("f1", 10), ("f3", 3)))
    ev.complete(c)
    now = ev.timeline()
    assert _as_dict(mt.read("ix", now)) == {"f1": 10, "f3": 3}
    # Time travel: the snapshot right after a completed sees only a's entries.
    assert _as_dict(mt.read("ix", now.as_of_seq(done_a))) == {"f1": 1}
    assert mt.has_updates("ix", c) and not mt.has_updates("ix", 999)
    assert mt.read("other", now) is None


def test_compaction_folds_deltas_and_keeps_every_snapshot_right(mt: MetadataTable) -> None:
    ev = Events()
    a = ev.request()
    mt.write_updates("ix", a, _rows(("f1", 1), ("f2", 2)))
    done_a = ev.complete(a)
    b = ev.request()
    mt.write_updates("ix", b, _rows(("f2", 20)))
    ev.complete(b)
    dead = ev.request()
    mt.write_updates("ix", dead, _rows(("f9", 9)))
    ev.roll_back(dead)
    pending = ev.request()
    mt.write_updates("ix", pending, _rows(("f4", 4)))
    tl = ev.timeline()
    before = _as_dict(mt.read("ix", tl))
    rel = mt.compact("ix", tl)
    assert rel is not None and "/base_" in rel
    names = sorted(p.name for p in Path(mt.storage.path(mt.rel_dir("ix"))).iterdir())
    assert len([n for n in names if n.startswith("base_")]) == 1
    assert [n for n in names if n.startswith("delta_")] == [n for n in names if n.startswith(f"delta_{pending}_")]
    assert _as_dict(mt.read("ix", tl)) == before == {"f1": 1, "f2": 20}
    # An older snapshot never sees a newer entry; an entry a later instant superseded is
    # gone after folding (data files are immutable, so that only happens on a re-index,
    # and a file without an entry is never pruned).
    old = _as_dict(mt.read("ix", tl.as_of_seq(done_a)))
    assert old.items() <= {"f1": 1, "f2": 2}.items() and old["f1"] == 1
    ev.complete(pending)
    assert _as_dict(mt.read("ix", ev.timeline())) == {"f1": 1, "f2": 20, "f4": 4}
    # A second compaction supersedes the first base.
    mt.compact("ix", ev.timeline())
    names = [p.name for p in Path(mt.storage.path(mt.rel_dir("ix"))).iterdir()]
    assert len(names) == 1 and names[0].startswith("base_")
    assert _as_dict(mt.read("ix", ev.timeline())) == {"f1": 1, "f2": 20, "f4": 4}


def test_rebuild_replaces_completed_entries_and_keeps_pending_deltas(mt: MetadataTable) -> None:
    ev = Events()
    a = ev.request()
    mt.write_updates("ix", a, _rows(("stale", 1)))
    ev.complete(a)
    p = ev.request()
    mt.write_updates("ix", p, _rows(("later", 5)))
    tl = ev.timeline()
    rebuilt = _rows(("f1", 7)).append_column(INSTANT, pa.array([a], pa.int64()))
    mt.rebuild("ix", tl, rebuilt)
    assert _as_dict(mt.read("ix", tl)) == {"f1": 7}
    ev.complete(p)
    assert _as_dict(mt.read("ix", ev.timeline())) == {"f1": 7, "later": 5}
    with pytest.raises(MetadataTableError):
        mt.rebuild("ix", tl, _rows(("x", 1)))
    mt.drop("ix")
    assert mt.read("ix", ev.timeline()) is None
    with pytest.raises(MetadataTableError):
        mt.rel_dir("../escape")


def test_rollback_of_a_write_instant_deletes_its_deltas(tmp_path: Path) -> None:
    t = Table.create(tmp_path / "t", pa.schema([("id", pa.int64())]), record_key="id")
    ev = t.log.append(Action.COMMIT, State.REQUESTED, {"operation": "insert", "writer": True})
    mt = MetadataTable(t.storage)
    rel = mt.write_updates("ix", ev.instant, _rows(("f", 1)))
    assert rel in list_markers(t.storage, ev.instant)
    assert Path(t.storage.path(rel)).exists()
    rollback_instant(t.log, t.storage, ev.instant, "test")
    assert not Path(t.storage.path(rel)).exists()
    assert mt.read("ix", t.timeline) is None
