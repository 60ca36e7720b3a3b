"""What the services that rewrite file groups (compaction, clustering) share.

Both plan a set of file groups, write new data files for them through the engine behind
markers, and complete like a writer: index entries for every index building or ready
(the commit protocol, :mod:`lakeline.table.write.commit`), then the ``completed`` event with a
check against the exact log it lands on, which is where each applies its own conflict
rule (writes beat services: a service whose inputs changed aborts). Re-running an
interrupted execution writes fresh files under new names; the dead attempt's files,
named by the markers there were when the re-run started, are deleted only once the
re-run completed, because an executor presumed dead may still wake up and complete
with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ..table.rollback import delete_instant_files
from ..table.write.commit import Commit
from ..timeline.commit_metadata import CommitMetadata
from ..timeline.conflicts import Conflict
from ..timeline.diagnostics import faults
from ..timeline.errors import ServiceAbortedError, ServiceBusyError
from ..timeline.instant import Action, Instant, State
from ..timeline.markers import list_markers
from ..timeline.plans import ClusteringPlan, CompactionPlan, Plan, RewritePlan, plan_of
from ..timeline.timeline import Timeline
from .plugin import Service, fence

if TYPE_CHECKING:
    from ..table.table import Table

Group = tuple[str, str]  # (partition, file group id)

#: Actions whose pending plans reserve file groups (their plans list ``groups``).
_PLANNING_ACTIONS = (Action.COMPACTION, Action.CLUSTERING, Action.REPLACE_COMMIT)


def plan_groups(plan: RewritePlan) -> set[Group]:
    """The file groups a compaction or clustering plan names."""
    return {(g.partition, g.file_group) for g in plan.groups}


def planned_groups(timeline: Timeline) -> set[Group]:
    """File groups named by a pending plan (compaction, clustering): not to be planned again."""
    out: set[Group] = set()
    for inst in timeline.pending():
        if inst.action in _PLANNING_ACTIONS:
            plan = plan_of(inst.action, inst.plan)
            if isinstance(plan, (CompactionPlan, ClusteringPlan)):
                out |= plan_groups(plan)
    return out


class RewriteService(Service):
    """A service that rewrites file groups: the plan check, the completion with index
    upkeep and the conflict rule, and the abort, shared by compaction and clustering."""

    #: What the service is called in messages and fault points (``<name>.before_complete``).
    name: ClassVar[str]

    def __init__(self) -> None:
        # instant -> files of earlier attempts, seen when this execution started.
        self._earlier: dict[int, list[str]] = {}

    def conflict(self, timeline: Timeline, instant: int, groups: set[Group]) -> Conflict | None:
        """Why ``instant`` can no longer complete on ``timeline`` (None: it can)."""
        raise NotImplementedError

    def rewritten_groups(self, instant: Instant, metadata: CommitMetadata) -> set[Group]:
        """The groups whose concurrent changes the conflict rule checks."""
        return plan_groups(CompactionPlan.from_dict(instant.plan))

    def check_plan(self, timeline: Timeline, plan: Plan) -> None:
        """Refuse a plan whose groups another pending plan took meanwhile (the lock makes
        it rare; this makes it impossible)."""
        assert isinstance(plan, (CompactionPlan, ClusteringPlan))
        taken = plan_groups(plan) & planned_groups(timeline)
        if taken:
            raise ServiceBusyError(f"{len(taken)} file group(s) of this {self.name} plan are in another pending plan")

    def start_attempt(self, table: Table, instant: Instant) -> None:
        """Remember the files earlier attempts of ``instant`` left (call first in execute)."""
        self._earlier[instant.id] = list_markers(table.storage, instant.id)

    def complete(self, table: Table, instant: Instant, metadata: dict[str, Any]) -> Instant:
        """Complete through the commit protocol (:mod:`lakeline.table.write.commit`: index
        entries for the new files, then ``completed``), with this service's conflict rule
        as the completion rule: a stale attempt is refused, and an instant whose inputs
        changed gives up (:class:`ServiceAbortedError`)."""
        md = CommitMetadata.from_dict(metadata)
        commit = Commit.resume(
            table.context(engine=table.service_engine), instant, leftovers=self._earlier.pop(instant.id, [])
        )
        commit.write_index_updates(md)
        faults.point(f"{self.name}.before_complete")
        groups = self.rewritten_groups(instant, md)
        stale = fence(instant.id)  # the attempt this thread runs, taken now

        def rule(tl: Timeline) -> None:
            stale(tl)
            reason = self.conflict(tl, instant.id, groups)
            if reason is not None:
                raise ServiceAbortedError(str(reason), reason)

        done = commit.complete(md, rule)
        commit.after_commit_upkeep(sum(f.rows for f in md.files))
        return done

    def abort(self, table: Table, instant: Instant, reason: str) -> None:
        """Delete what every attempt wrote (data files and index entries, all behind the
        markers). The framework calls this only after this attempt's own
        ``rolled_back`` event landed (a stale attempt, whose instant another executor
        re-claimed or completed, never gets here), so no attempt can complete with those
        files any more; the state check stays as a second guard."""
        self._earlier.pop(instant.id, None)
        if table.log.refresh().get(instant.id).state is not State.COMPLETED:
            delete_instant_files(table.storage, instant.id)
