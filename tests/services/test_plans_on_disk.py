"""Every plan the table and its services write reads back through its typed plan unchanged.

Why: the typed plans (``lakeline.timeline.plans``) are the only readers of plans in the
package; a key a writer adds that its plan class does not know would be silently dropped
by every reader. This runs each service once on a real table and compares every
``requested`` payload with ``to_dict()`` of what it reads as (plus the framework's stamp).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from lakeline.table import Table
from lakeline.timeline.plans import SERVICE, plan_of

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("day", pa.string())])


def _rows(ids: range, ts: int) -> pa.Table:
    return pa.table(
        {"id": list(ids), "ts": [ts] * len(ids), "day": ["d1" if i % 2 else "d2" for i in ids]}, schema=SCHEMA
    )


def test_every_written_plan_round_trips(tmp_path: Path) -> None:
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type="mor",
        properties={"archive.min-active-instants": 2, "archive.max-active-instants": 4},
    )
    t.insert(_rows(range(10), 1))
    t.upsert(_rows(range(5), 2))
    t.upsert(_rows(range(3, 8), 3))
    t.services.compact()
    t.services.cluster(sort_by=["id"])
    t.indexes.create("column_stats", columns=["ts"], wait=True)
    t.indexes.drop("column_stats")
    sp = t.services.savepoint()
    t.services.release_savepoint(sp.id)
    t.overwrite(_rows(range(2), 4))
    t.services.clean(policy="keep_latest_commits", retain=1, dry_run=False, orphan_age_ms=0)
    t.services.rollback_failed()
    t.services.archive()
    seen = set()
    for inst in t.timeline.instants():
        plan = plan_of(inst.action, inst.plan)
        assert plan is not None, inst
        stamp = {SERVICE: inst.plan[SERVICE]} if SERVICE in inst.plan else {}
        assert {**stamp, **plan.to_dict()} == dict(inst.plan), inst
        seen.add(type(plan).__name__)
    assert {
        "CleanPlan",
        "ArchivalPlan",
        "WriteRequest",
        "CompactionPlan",
        "ClusteringPlan",
        "IndexCreatePlan",
        "IndexDropPlan",
        "SavepointCreatePlan",
        "SavepointReleasePlan",
        "SchemaChangePlan",
    } <= seen, seen
