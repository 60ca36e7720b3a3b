"""Writers keeping indexes current: a write that fails after writing its index entries
is rolled back with them, an index created while another writer commits misses none of its
keys, and a writer that read the index states before a create still writes the new index's
entries (split out of ``test_table_indexes.py``)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow.compute as pc
import pytest
from lakeline.indexes.metadata_table import MetadataTable
from lakeline.table import Table

from tests.indexes.table_index_helpers import index_rows, index_table


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_failed_write_leaves_no_index_entries(tmp_path: Path, kind: str) -> None:
    """A write that fails after writing its entries is rolled back with them."""
    from lakeline.timeline.diagnostics import faults
    from lakeline.timeline.errors import FaultInjectedError

    rng = random.Random(13)
    t = index_table(tmp_path, kind)
    t.insert(index_rows(rng, list(range(200))))
    t.indexes.create("column_stats")
    t.indexes.create("bloom_filters")
    mt = MetadataTable(t.storage)
    faults.arm("commit.before_complete", "raise")
    try:
        with pytest.raises(FaultInjectedError):
            t.insert(index_rows(rng, list(range(200, 400))))
    finally:
        faults.disarm_all()
    failed = [i for i in t.timeline.instants() if i.state == "rolled_back"]
    assert len(failed) == 1
    for ix in (d.partition for d in t.indexes.list()):
        assert not mt.has_updates(ix, failed[0].id)
    assert t.indexes.validate()["mismatches"] == []
    assert t.to_arrow(filter=pc.field("id") >= 200).num_rows == 0
    t.upsert(index_rows(rng, list(range(150, 300))))
    assert t.indexes.validate()["mismatches"] == []
    assert sorted(t.to_arrow(filter=pc.field("id") == 250).column("id").to_pylist()) == [250]


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_create_while_another_writer_commits_misses_nothing(tmp_path: Path, kind: str) -> None:
    """Writes that complete while an index builds are either written by the writer
    (it saw the index building) or caught up by the builder; none is left out."""
    import threading

    rng = random.Random(17)
    t = index_table(tmp_path, kind)
    t.insert(index_rows(rng, list(range(300))))
    other = Table.open(t.path)
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        wrng = random.Random(18)
        n = 1000
        try:
            while not stop.is_set() and n < 1000 + 40 * 60:
                other.insert(index_rows(wrng, list(range(n, n + 40))))
                n += 40
        except BaseException as e:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(e)

    from lakeline.timeline.diagnostics import faults

    th = threading.Thread(target=writer)
    th.start()
    try:
        for ix in ("column_stats", "bloom_filters"):
            # Pause after the index is building and again mid catch-up, so writes
            # complete both before the build's snapshot and during the catch-up.
            faults.arm("indexing.after_requested", "pause:0.4")
            faults.arm("indexing.mid_catchup", "pause:0.4")
            t.indexes.create(ix)
            faults.disarm_all()
    finally:
        faults.disarm_all()
        stop.set()
        th.join()
    assert not errors
    report = t.indexes.validate()
    assert report["mismatches"] == [] and report["files_checked"] > 0
    tl = t.timeline
    overlap = sum(
        1
        for ix in tl.by_action("indexing")
        for i in tl.completed()
        if i.action != "indexing" and ix.id < (i.completed_seq or 0) < (ix.completed_seq or 0)
    )
    assert overlap >= 2  # the pauses below make writers land mid-build


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_a_writer_that_read_the_index_states_before_a_create_still_writes_entries(tmp_path: Path, kind: str) -> None:
    """The writer plans and writes its entries with no index in sight; the index is
    requested (building) right before the writer completes: the writer must notice at
    completion and write the entries, since the indexer may already have caught up."""
    from lakeline.indexes.states import create_plan
    from lakeline.timeline.diagnostics import faults
    from lakeline.timeline.instant import Action, State

    rng = random.Random(5)
    t = index_table(tmp_path, kind)
    t.insert(index_rows(rng, list(range(100))))
    other = Table.open(t.path)
    faults.on(
        "commit.before_complete",
        lambda: (
            other.log.append(Action.INDEXING, State.REQUESTED, create_plan("column_stats", "column_stats").to_dict())
            and None
        ),
    )
    try:
        r = t.insert(index_rows(rng, list(range(100, 200))))
    finally:
        faults.disarm_all()
    [part] = [d.partition for d in t.indexes.list() if d.name == "column_stats"]
    written = MetadataTable(t.storage).has_updates(part, r.instant.id)  # type: ignore[union-attr]
    assert written, "the writer completed after the index became building without writing its entries"
