"""What an instant plans to do: the payload of its ``requested`` event, typed.

Every action writes its plan as a JSON object (``Instant.plan`` stays that mapping: it is
the public contract and what is on disk). The classes here are the one place that knows
each plan's keys: the code that makes a plan builds one of them and writes ``to_dict()``,
the code that reads one calls ``from_dict()`` (or :func:`plan_of`). ``from_dict`` reads
every plan an older lakeline wrote (keys that were optional stay optional, with the same
defaults) and ``from_dict(d).to_dict() == d`` for every plan written now.

The table-service framework stamps the name of the service that made a plan under
:data:`SERVICE` (several services may share an action: clustering and overwrite are both
``replacecommit``); the plan classes leave that key to it (:func:`service_of`).

The plans live in one module per family (:mod:`.write`, :mod:`.rewrite`, :mod:`.maintenance`,
:mod:`.indexing`, :mod:`.savepoints`, :mod:`.schema`); this package is their one import surface.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..instant import Action
from .indexing import IndexCreatePlan, IndexDropPlan, IndexPlan, index_plan
from .maintenance import ArchivalPlan, CleanPlan, RollbackPlan
from .plan import OP_CREATE, OP_DROP, OP_RELEASE, SERVICE, Plan, service_of
from .rewrite import ClusteringGroup, ClusteringPlan, CompactionGroup, CompactionPlan, RewritePlan
from .savepoints import SavepointCreatePlan, SavepointPlan, SavepointReleasePlan, savepoint_plan
from .schema import SchemaChangePlan
from .write import WriteRequest


def plan_of(action: Action, raw: Mapping[str, Any]) -> Plan | None:
    """The typed plan of an instant of ``action`` with plan ``raw`` (None: an op this
    version does not know)."""
    if action in (Action.COMMIT, Action.DELTA_COMMIT):
        return WriteRequest.from_dict(raw)
    if action is Action.REPLACE_COMMIT:
        return ClusteringPlan.from_dict(raw) if service_of(raw) == "clustering" else WriteRequest.from_dict(raw)
    if action is Action.CLUSTERING:
        return ClusteringPlan.from_dict(raw)
    if action is Action.COMPACTION:
        return CompactionPlan.from_dict(raw)
    if action is Action.CLEAN:
        return CleanPlan.from_dict(raw)
    if action is Action.ARCHIVE:
        return ArchivalPlan.from_dict(raw)
    if action is Action.ROLLBACK:
        return RollbackPlan.from_dict(raw)
    if action is Action.INDEXING:
        return index_plan(raw)
    if action is Action.SAVEPOINT:
        return savepoint_plan(raw)
    return SchemaChangePlan.from_dict(raw)


__all__ = [
    "ArchivalPlan",
    "CleanPlan",
    "ClusteringGroup",
    "ClusteringPlan",
    "CompactionGroup",
    "CompactionPlan",
    "IndexCreatePlan",
    "IndexDropPlan",
    "IndexPlan",
    "OP_CREATE",
    "OP_DROP",
    "OP_RELEASE",
    "Plan",
    "RewritePlan",
    "RollbackPlan",
    "SERVICE",
    "SavepointCreatePlan",
    "SavepointPlan",
    "SavepointReleasePlan",
    "SchemaChangePlan",
    "WriteRequest",
    "index_plan",
    "plan_of",
    "savepoint_plan",
    "service_of",
]
