"""Typed plans: what every instant's ``requested`` event says, and that reading it back
loses nothing.

Why: plans are on disk for the table's lifetime, so ``from_dict`` must read every plan
an older lakeline wrote (keys it treated as optional stay optional, with the same
defaults), and ``from_dict(d).to_dict() == d`` for every plan written now, or a reader
that re-serialises a plan (the CLI, a dry run) would show something other than the log.
"""

from __future__ import annotations

from typing import Any

import pytest
from lakeline.timeline.instant import Action
from lakeline.timeline.plans import (
    ArchivalPlan,
    CleanPlan,
    ClusteringPlan,
    CompactionPlan,
    IndexCreatePlan,
    IndexDropPlan,
    RollbackPlan,
    SavepointCreatePlan,
    SavepointReleasePlan,
    SchemaChangePlan,
    WriteRequest,
    plan_of,
    service_of,
)

#: One plan of each kind, as this version writes it (without the framework's "service").
WRITTEN_NOW: list[tuple[type, Action, dict[str, Any]]] = [
    (WriteRequest, Action.DELTA_COMMIT, {"operation": "upsert", "snapshot_seq": 7, "writer": True}),
    (
        CompactionPlan,
        Action.COMPACTION,
        {
            "trigger": "num_commits",
            "snapshot_seq": 12,
            "groups": [
                {
                    "partition": "day=1",
                    "file_group": "fg1",
                    "base_instant": 3,
                    "base": "day=1/a.parquet",
                    "logs": ["day=1/a.log.1", "day=1/a.log.2"],
                },
                {"partition": "", "file_group": "fg2", "base_instant": None, "base": None, "logs": ["b.log"]},
            ],
        },
    ),
    (
        ClusteringPlan,
        Action.REPLACE_COMMIT,
        {
            "scope": "small_files",
            "snapshot_seq": 4,
            "sort_by": ["id", "ts"],
            "strategy": "zorder",
            "target_bytes": 1 << 20,
            "clusters": 1,
            "groups": [{"partition": "", "file_group": "g", "cluster": 0, "bytes": 123}],
        },
    ),
    (
        CleanPlan,
        Action.CLEAN,
        {
            "policy": "keep_latest_commits",
            "retain": 2,
            "retain_seq": 9,
            "orphan_age_ms": 0,
            "snapshot_seq": 20,
            "files": {"day=1": ["day=1/x.parquet"]},
            "reasons": {"day=1/x.parquet": "expired"},
            "index_files": [".lakeline/metadata/s@3/f.parquet"],
            "staging": ["1" * 32],
        },
    ),
    (
        ArchivalPlan,
        Action.ARCHIVE,
        {
            "first_seq": 0,
            "through_seq": 41,
            "instants": 10,
            "events": 42,
            "active_completed": 30,
            "min_active": 20,
            "max_active": 30,
        },
    ),
    (
        RollbackPlan,
        Action.ROLLBACK,
        {"targets": [5], "leftovers": [2, 3], "completed_markers": [], "staging": ["0" * 32]},
    ),
    (
        IndexCreatePlan,
        Action.INDEXING,
        {"op": "create", "index": "bf", "kind": "bloom_filters", "columns": ["id"], "options": {"fpp": 0.001}},
    ),
    (IndexDropPlan, Action.INDEXING, {"op": "drop", "index": "bf", "created": 8}),
    (SavepointCreatePlan, Action.SAVEPOINT, {"op": "create", "instant": 6, "seq": 11}),
    (SavepointReleasePlan, Action.SAVEPOINT, {"op": "release", "savepoint": 13}),
    (SchemaChangePlan, Action.SCHEMA, {"change": "create"}),
    (SchemaChangePlan, Action.SCHEMA, {"change": "add-columns", "columns": ["note"]}),
]


@pytest.mark.parametrize(
    ("cls", "action", "raw"), WRITTEN_NOW, ids=[f"{c.__name__}-{n}" for n, (c, _, _) in enumerate(WRITTEN_NOW)]
)
def test_round_trip(cls: Any, action: Action, raw: dict[str, Any]) -> None:
    plan = cls.from_dict(raw)
    assert plan.to_dict() == raw
    stamped = {"service": "clustering", **raw} if cls is ClusteringPlan else raw
    assert plan_of(action, stamped) == plan  # the dispatch on the action finds the same type


def test_the_framework_stamp_is_not_part_of_a_plan() -> None:
    raw = {"service": "compaction", "trigger": "all", "snapshot_seq": 1, "groups": []}
    assert service_of(raw) == "compaction" and service_of({}, "rollback") == "rollback" and service_of({}) is None
    assert CompactionPlan.from_dict(raw).to_dict() == {"trigger": "all", "snapshot_seq": 1, "groups": []}
    # An overwrite is a replacecommit too: without the clustering stamp it is a write.
    assert isinstance(
        plan_of(Action.REPLACE_COMMIT, {"operation": "overwrite", "snapshot_seq": 2, "writer": True}), WriteRequest
    )


def test_older_plans_read_with_the_old_defaults() -> None:
    """Keys older versions did not write (or that readers treated as optional)."""
    assert IndexDropPlan.from_dict({"op": "drop", "index": "s"}) == IndexDropPlan("s", None)
    assert IndexDropPlan("s").to_dict() == {"op": "drop", "index": "s"}  # still written without "created"
    assert IndexCreatePlan.from_dict({"op": "create", "index": "s", "kind": "column_stats"}) == IndexCreatePlan(
        "s", "column_stats", (), {}
    )
    w = WriteRequest.from_dict({"operation": "insert"})
    assert (w.snapshot_seq, w.writer) == (None, False)
    assert WriteRequest.from_dict({}).operation == ""
    c = CleanPlan.from_dict({"files": {"": ["a.parquet"]}})
    assert (c.orphan_age_ms, c.index_files, c.policy, c.retain, c.retain_seq) == (0, (), None, None, None)
    assert c.paths() == ["a.parquet"]
    assert RollbackPlan.from_dict({"targets": [1]}) == RollbackPlan((1,), (), ())
    assert CompactionPlan.from_dict({"groups": [{"partition": "", "file_group": "g"}]}).groups[0].paths() == []
    assert ClusteringPlan.from_dict({"sort_by": ["id"], "strategy": "linear", "target_bytes": 10}).groups == ()
    assert SchemaChangePlan.from_dict({}).change is None
    a = ArchivalPlan.from_dict({"first_seq": 0, "through_seq": 3})
    assert (a.instants, a.events) == (0, 0)


def test_unknown_ops_are_not_guessed() -> None:
    assert plan_of(Action.INDEXING, {"op": "rename", "index": "s"}) is None
    assert plan_of(Action.INDEXING, {"op": "create"}) is None  # names no index: changes nothing
    assert plan_of(Action.SAVEPOINT, {"op": "move"}) is None
