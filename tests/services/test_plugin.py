"""One result type for every service (services/plugin.py::ServiceResult): the same fields,
stats flat and of the same keys whether the service ran, had nothing to do or planned
a dry run."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from lakeline.table import Table

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("ts", pa.int64())])


def _table(tmp_path: Path) -> Table:
    t = Table.create(str(tmp_path / "t"), SCHEMA, record_key="id", ordering_field="ts", table_type="mor")
    t.insert(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"], "ts": [1, 1, 1]}, schema=SCHEMA))
    t.upsert(pa.table({"id": [2], "v": ["B"], "ts": [2]}, schema=SCHEMA))
    return t


def test_compaction_stats_are_flat_and_keep_their_keys_when_there_is_nothing_to_do(tmp_path: Path) -> None:
    t = _table(tmp_path)
    done = t.services.compact()
    assert done.service == "compaction" and done.instant is not None and not done.dry_run
    assert done.stats["file_groups_compacted"] == 1
    nothing = t.services.compact()
    assert nothing.instant is None and nothing.service == "compaction"
    assert nothing.stats == {"file_groups_compacted": 0}


def test_a_dry_run_carries_its_plan_and_pending_instants_as_fields(tmp_path: Path) -> None:
    t = _table(tmp_path)
    [dry] = t.services.run("compaction", dry_run=True, trigger="all")
    assert dry.dry_run and dry.instant is None and dry.service == "compaction"
    assert dry.plan is not None and len(dry.plan["groups"]) == 1 and dry.pending == ()
    clean = t.services.clean(dry_run=True)
    assert (
        clean.dry_run
        and clean.service == "cleaning"
        and set(clean.stats) == {"files", "files_deleted", "files_to_delete"}
    )
