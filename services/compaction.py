"""The compaction service: fold the logs of merge-on-read file slices into new bases.

As docs/services.md ("Compaction") describes it:

* *Plan* (under the table lock, through the framework): the latest slices that have
  logs, minus the file groups named by a pending plan (another compaction, a
  clustering), so two plans never race for a group. Scheduled and inline runs apply a
  trigger strategy (``compaction.trigger``): delta commits on the slice since its base,
  the log-to-base size ratio, or the age of the base; ``t.services.compact()`` acts on
  every slice with logs (``trigger="all"``).
* *Execute*: the slices are taken from the view at the ``requested`` event, not from
  the plan's snapshot. That is exactly what the view's rule makes the new base replace
  (a log joins the newest slice whose base instant was requested before the log
  completed), so a log that completed while the plan was being made is folded in, and
  a log completing after the event joins the new slice: writers never stop. Each slice
  is read merged and written as a base of the same group through the engine
  (:mod:`lakeline.services.compaction`), behind markers.
* *Complete*: entries for every index building or ready (the writers' own completion,
  the commit protocol, :mod:`lakeline.table.write.commit`), then the ``completed`` event,
  carrying commit metadata in the writers' shape, with a check against the exact log it
  lands on: if a clustering or overwrite replaced one of the groups (or a base landed
  in one) after the ``requested`` event, the service aborts (writes beat services) and
  its files are deleted. Re-runs and aborts are :mod:`.rewrite`'s, shared with
  clustering.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config import TableProperties
from ..table.files import FileWrite, write_file
from ..table.read.scan import SliceRead, read_slice
from ..table.write.group_tasks import WriteSettings, rel_path
from ..timeline.commit_metadata import CommitMetadata, Operation, WriteStat
from ..timeline.conflicts import Conflict, find_input_conflict
from ..timeline.errors import InvalidPropertyError
from ..timeline.instant import Action, Instant
from ..timeline.plans import CompactionGroup, CompactionPlan
from ..timeline.table_config import TableType
from ..timeline.timeline import Timeline
from ..timeline.view.file_group import FileKind, FileSlice, data_file_name
from .plugin import Progress, map_in_batches
from .rewrite import Group, RewriteService, plan_groups, planned_groups

if TYPE_CHECKING:
    from ..table.table import Table

#: Trigger strategies of ``compaction.trigger``; ``all`` (the explicit call) ignores them.
TRIGGERS = ("delta-commits", "log-ratio", "time", "any")
ALL = "all"
#: Slices compacted per engine call: progress is reported, and the mid-write fault
#: point reached, between calls.
_BATCH = 8


def _completed_us(timeline: Timeline, instant: int) -> int | None:
    inst = timeline.find(instant)
    return None if inst is None else inst.completed_us


def is_due(s: FileSlice, trigger: str, props: TableProperties, timeline: Timeline, now_us: int) -> bool:
    """Whether a slice with logs should be compacted under ``trigger``."""
    if trigger == ALL:
        return True
    checks: dict[str, Callable[[], bool]] = {
        # Delta commits, not log files: one commit writes one log per group it touches.
        "delta-commits": lambda: len({f.instant for f in s.logs}) >= props.compaction_delta_commits,
        "log-ratio": lambda: (
            sum(f.bytes for f in s.logs) >= props.compaction_log_ratio * (s.base.bytes if s.base is not None else 0)
        ),
        "time": lambda: (
            s.base is None
            or now_us - (_completed_us(timeline, s.base.instant) or now_us) >= props.compaction_interval_ms * 1000
        ),
    }
    if trigger == "any":
        return any(check() for check in checks.values())
    return checks[trigger]()


def _slice_plan(s: FileSlice) -> CompactionGroup:
    return CompactionGroup(
        s.partition,
        s.file_group,
        s.base_instant,
        s.base.path if s.base is not None else None,
        tuple(f.path for f in s.logs),
    )


class CompactionService(RewriteService):
    """Compact merge-on-read file slices (``t.services.compact()``, ``run("compaction")``)."""

    name = "compaction"
    action = Action.COMPACTION

    def conflict(self, timeline: Timeline, instant: int, groups: set[Group]) -> Conflict | None:
        """An instant completed after the ``requested`` event replaced one of the groups or
        wrote a base into one; log appends are fine (they join the new slice)."""
        concurrent = [i for i in timeline.completed_after(instant) if i.id != instant]
        return find_input_conflict(groups, concurrent, "compaction", logs_ok=True)

    def plan(
        self, table: Table, snapshot: Timeline, trigger: str | None = None, **options: Any
    ) -> CompactionPlan | None:
        """Slices with logs that are due under ``trigger`` (default: the table's
        ``compaction.trigger``; ``"all"``: every one); None on other table types.

        Raises:
            InvalidPropertyError: an unknown trigger or option.
        """
        if options:
            raise InvalidPropertyError(f"compaction takes no options {sorted(options)}; it takes trigger=")
        props = table.config.props
        trigger = trigger or props.compaction_trigger
        if trigger not in TRIGGERS + (ALL,):
            raise InvalidPropertyError(f"compaction trigger {trigger!r} is not one of {', '.join(TRIGGERS + (ALL,))}")
        if table.config.table_type != TableType.MOR:
            return None  # copy-on-write and append-only tables have no logs
        busy = planned_groups(snapshot)
        now_us = time.time_ns() // 1000
        slices = [
            s
            for s in table.view(snapshot).latest_slices()
            if s.logs and (s.partition, s.file_group) not in busy and is_due(s, trigger, props, snapshot, now_us)
        ]
        if not slices:
            return None
        return CompactionPlan(
            trigger,
            snapshot.last_seq,
            tuple(_slice_plan(s) for s in sorted(slices, key=lambda s: (s.partition, s.file_group))),
        )

    def execute(self, table: Table, instant: Instant, progress: Progress | None = None) -> dict[str, Any]:
        wanted = plan_groups(CompactionPlan.from_dict(instant.plan))
        self.start_attempt(table, instant)
        # The view at the requested event: what the new bases supersede (module docstring).
        view = table.view(table.log.refresh().as_of_seq(instant.id))
        slices = [
            s
            for p in sorted({p for p, _ in wanted})
            for s in view.latest_slices(p)
            if (s.partition, s.file_group) in wanted and s.logs
        ]
        st = WriteSettings.of(table.storage, table.config, instant.id)
        tasks = [CompactTask(st, s) for s in slices]
        written: list[WriteStat] = map_in_batches(
            table.service_engine, compact_slice, tasks, _BATCH, progress, "compaction.mid_write"
        )
        stats = {
            "file_groups_compacted": len(written),
            "logs_compacted": sum(len(s.logs) for s in slices),
            "bytes_read": sum(s.bytes for s in slices),
            "rows": sum(w.rows for w in written),
            "files_added": len(written),
            "bytes_written": sum(w.bytes for w in written),
        }
        return CommitMetadata(
            operation=Operation.COMPACT, snapshot_seq=instant.id, files=tuple(written), stats=stats
        ).to_dict()


# -- the engine task (runs on a LocalEngine thread, a worker process or a Spark executor) --


@dataclass(frozen=True)
class CompactTask:
    """Compact one slice into a base file of the same group, named for ``settings.instant``."""

    settings: WriteSettings
    slice: FileSlice


def compact_slice(task: CompactTask) -> WriteStat:
    """Write the merged rows of the slice as the group's new base file.

    A slice whose every row was deleted still gets a base, an empty one: retiring the
    group instead would also drop the logs that writers append to it while the
    compaction runs (they join the new slice).
    """
    st, s = task.settings, task.slice
    rows = read_slice(SliceRead(st.storage, s, st.schema, st.key, st.ordering, engine=st.merge))
    name = data_file_name(s.file_group, st.instant, FileKind.BASE, st.tag)
    return write_file(
        FileWrite(
            st.storage,
            st.instant,
            rel_path(s.partition, name),
            s.partition,
            s.file_group,
            FileKind.BASE,
            rows.cast(st.schema),
            st.key,
            st.compression,
            st.row_group_rows,
            inserts=False,
            min_saving=st.min_saving,
        )
    )
