"""The cleaning service: delete file versions no retained snapshot needs.

docs/services.md, "Cleaning": the cleaner never deletes a file of a snapshot inside retention,
of a savepoint, of a snapshot at or after a change-feed consumer's bookmark, of a pending
plan or of an inflight writer, and nothing younger than ``clean.orphan-age-ms``. Hudi's
cleaner deletes files a reader still needs; here every protection is derived from the
timeline, read again right before deleting.

*Retention* (``clean.policy``, ``clean.retain``), giving the *retain point*: the
earliest snapshot sequence number every later snapshot of which stays readable.

* ``keep_latest_commits`` (N): the snapshots of the last N completed write instants.
* ``keep_latest_hours`` (N): every snapshot completed in the last N hours, and the one
  a read ``as_of`` N hours ago resolves to.
* ``keep_latest_file_versions`` (N): the latest N versions (slices) of each file group;
  a retired group (overwrite, clustering) counts its retirement as one version.

For the first two the files retained are those of the snapshot at the retain point
plus every file added after it: a file live in any later snapshot was either live at
the retain point or added after it (bases only start newer slices, logs only join the
slice they are read with), so nothing needs a replay per snapshot.

*Plan* (the ``requested`` payload): ``{"policy", "retain", "retain_seq",
"orphan_age_ms", "snapshot_seq", "files": {partition: [path]}, "reasons": {path:
"expired"|"orphan"|"rolled_back"}, "index_files": [path]}``. Candidates come from
listing the table's own tree (``.lakeline/``, symbolic links and nested tables' folders
excluded: :mod:`lakeline.timeline.storage.ownership`), so files of rolled-back instants and
orphans (written by an instant that completed without them, e.g. a retried attempt) are
found too; a file the timeline does not name is deleted only when its name carries this
table's tag (docs/safety.md). ``index_files`` are leftovers of dropped indexes in the
metadata table; ``staging`` the write ids of dead Spark writes' staging folders
(:mod:`lakeline.timeline.storage.staging_folders`), removed by execute only if still dead.
*Execute* re-reads the timeline and skips every file that became
protected meanwhile (a savepoint made after the plan, a new pending plan), deletes
the rest (a missing file is fine: a re-run after a crash finds some gone) with the
fault point ``clean.mid_delete`` after each, and completes with counts.

The plan is fixed in the ``requested`` event and execute deletes nothing else; it
reads the timeline once, *after* its claiming ``inflight`` event landed. A savepoint
whose event lands before that claim is therefore honoured; one that would land after
it and pin a planned file is refused by the savepoint's own append check
(:mod:`lakeline.services.savepoints`), so there is no window between the re-check and
the deletes.
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from ..indexes.states import FILES, index_states
from ..table.rollback import remove_dead_staging
from ..timeline.commit_metadata import CommitMetadata, file_paths
from ..timeline.diagnostics import faults
from ..timeline.errors import InvalidPropertyError
from ..timeline.instant import Action, Instant, State
from ..timeline.plans import CleanPlan, ClusteringPlan, CompactionPlan, WriteRequest, plan_of
from ..timeline.retention import bookmark_seqs, pinned_seqs
from ..timeline.retention import last_retain_seq as last_retain_seq  # re-exported: the cleaner's retain point
from ..timeline.storage.filesystem import Storage
from ..timeline.storage.ownership import is_own_orphan
from ..timeline.storage.staging_folders import Rules, dead_writes
from ..timeline.timeline import Timeline
from ..timeline.view.file_group import FileSlice, parse_data_file_name, table_tag
from .orphans import data_files_on_storage, dropped_index_files, index_of, instant_alive, is_young
from .plugin import Progress, Service

if TYPE_CHECKING:
    from ..table.table import Table

POLICIES = ("keep_latest_commits", "keep_latest_file_versions", "keep_latest_hours")
#: The N of each policy when neither the call nor the table sets ``clean.retain``
#: (Hudi's defaults: 10 commits, 3 file versions, 24 hours).
POLICY_RETAIN = {"keep_latest_commits": 10, "keep_latest_file_versions": 3, "keep_latest_hours": 24}
#: Pending instants that read no data files: their snapshots need no protection.
_NO_READS = (Action.CLEAN, Action.ARCHIVE, Action.ROLLBACK, Action.SAVEPOINT)
_HOUR_US = 3_600_000_000


#: Files one delete task removes.
_DELETES_PER_TASK = 500


@dataclass(frozen=True)
class DeleteFiles:
    """Delete some planned files (a picklable engine task)."""

    storage: Storage
    paths: tuple[str, ...]


def delete_files(task: DeleteFiles) -> list[bool]:
    """Whether each file was deleted (False: it was already gone)."""
    out = []
    for path in task.paths:
        ok = task.storage.delete(task.storage.path(path))
        out.append(ok)
        if ok:
            faults.point("clean.mid_delete")
    return out


def _now_ns() -> int:
    """The wall clock (a function, so tests of ``keep_latest_hours`` can move it)."""
    return time.time_ns()


def _files(slices: Iterable[FileSlice]) -> set[str]:
    return {f.path for s in slices for f in s.files}


def snapshot_files(table: Table, timeline: Timeline, seq: int) -> set[str]:
    """Relative paths of every file a read of the snapshot at event ``seq`` opens."""
    return {f.path for f in table.view(timeline.as_of_seq(seq)).files()}


def files_from(table: Table, timeline: Timeline, seq: int) -> set[str]:
    """Relative paths of every file a read of any snapshot from event ``seq`` on opens:
    the snapshot's files and every file a data instant completed after it added (a file
    live in a later snapshot was live at ``seq`` or added since: bases only start newer
    slices, logs only join the slice they are read with)."""
    return snapshot_files(table, timeline, seq) | {
        p for i in timeline.completed_after(seq) if i.action.writes_data for p in file_paths(i.metadata)
    }


def protected_files(table: Table, timeline: Timeline) -> set[str]:
    """Files no policy may delete in ``timeline``: the latest snapshot's, every active
    savepoint's, every snapshot's from an active bookmark on, and every pending
    instant's (the snapshot it planned or reads against, the groups its plan names at
    its requested event, the paths its plan lists)."""
    out = {f.path for f in table.view(timeline).files()}
    for seq in pinned_seqs(timeline):
        out |= snapshot_files(table, timeline, seq)
    if marks := bookmark_seqs(timeline):
        out |= files_from(table, timeline, marks[0])  # the earliest covers the others
    for inst in timeline.pending():
        if inst.action in _NO_READS:
            continue
        plan = plan_of(inst.action, inst.plan)
        groups = plan.groups if isinstance(plan, (CompactionPlan, ClusteringPlan)) else ()
        seqs = {inst.id}
        if isinstance(plan, (WriteRequest, CompactionPlan, ClusteringPlan)) and plan.snapshot_seq is not None:
            seqs.add(plan.snapshot_seq)
        for seq in seqs:
            view = table.view(timeline.as_of_seq(seq))
            out |= {f.path for f in view.files()}
            for g in groups:
                grp = view.group(g.partition, g.file_group)
                if grp is not None:
                    out |= _files(grp.slices)
        for g in groups:
            out |= set(g.paths())
    return out


def resolve_retain(table: Table, policy: str, retain: int | None) -> int:
    """The N a clean under ``policy`` keeps: the call's, else the table's
    ``clean.retain`` when it sets one, else the policy's own default."""
    if retain is not None:
        return int(retain)
    if "clean.retain" in table.config.properties:
        return table.config.props.clean_retain
    return POLICY_RETAIN[policy]


def _data_instants(timeline: Timeline) -> list[Instant]:
    return [i for i in timeline.completed() if i.action.writes_data]


def retain_seq(policy: str, retain: int, timeline: Timeline, now_us: int) -> int:
    """The retain point of a snapshot-based policy: the earliest snapshot kept."""
    data = _data_instants(timeline)
    if not data:
        return timeline.last_seq
    if policy == "keep_latest_commits":
        return int(data[max(0, len(data) - retain)].completed_seq or 0)
    cutoff = now_us - retain * _HOUR_US
    before = [i for i in data if (i.completed_us or 0) <= cutoff]
    return int((before[-1] if before else data[0]).completed_seq or 0)


def _versions(slices: tuple[FileSlice, ...]) -> list[tuple[set[str], int]]:
    """(files, seq it became visible) of each version of a group, oldest first; the logs
    of a trailing base-less slice (a pending compaction's) are read with the one before."""
    out: list[tuple[set[str], int]] = []
    for s in slices:
        if s.base is None and out:
            out[-1][0].update(f.path for f in s.logs)
            continue
        out.append(({f.path for f in s.files}, s.base.completed_seq if s.base is not None else 0))
    return out


def _old_versions(table: Table, timeline: Timeline, retain: int, on_disk: Mapping[str, Any]) -> dict[str, int]:
    """keep_latest_file_versions: path -> the seq from which no snapshot needs it, for
    every file outside the latest ``retain`` versions of its group."""
    old: dict[str, int] = {}

    def drop(versions: list[tuple[set[str], int]], keep: int, end_seq: int | None) -> None:
        cut = max(0, len(versions) - keep)
        for n, (files, _) in enumerate(versions[:cut]):
            until = versions[n + 1][1] if n + 1 < len(versions) else end_seq
            for p in files:
                if until is not None:
                    old[p] = max(old.get(p, until), until)

    view = table.view(timeline)
    for grp in view.file_groups():
        drop(_versions(grp.slices), retain, None)
    groups_on_disk = {
        (posixpath.dirname(p), parsed.file_group) for p in on_disk if (parsed := parse_data_file_name(p)) is not None
    }
    for inst in _data_instants(timeline):
        md = CommitMetadata.from_dict(inst.metadata)
        gone = md.groups_replaced() & groups_on_disk
        if not gone:
            continue  # nothing of the retired groups is left: no replay needed
        before = table.view(timeline.as_of_seq(int(inst.completed_seq or 0) - 1))
        for p, fg in gone:
            retired = before.group(p, fg)
            if retired is not None:
                drop(_versions(retired.slices), retain - 1, int(inst.completed_seq or 0))
    return old


class CleaningService(Service):
    """Delete file versions outside retention (``t.services.clean()``, ``run("cleaning")``)."""

    name = "cleaning"
    action = Action.CLEAN

    def plan(
        self,
        table: Table,
        snapshot: Timeline,
        policy: str | None = None,
        retain: int | None = None,
        orphan_age_ms: int | None = None,
        **options: Any,
    ) -> CleanPlan | None:
        """The files to delete; None when there are none (or another clean is pending).

        Raises:
            InvalidPropertyError: an unknown policy or option, or retain below 1.
        """
        if options:
            raise InvalidPropertyError(
                f"cleaning takes no options {sorted(options)}; it takes policy=, retain=, orphan_age_ms="
            )
        props = table.config.props
        policy = policy or props.clean_policy
        if policy not in POLICIES:
            raise InvalidPropertyError(f"clean policy {policy!r} is not one of {', '.join(POLICIES)}")
        retain = resolve_retain(table, policy, retain)
        age_ms = int(orphan_age_ms) if orphan_age_ms is not None else props.clean_orphan_age_ms
        if retain < 1 or age_ms < 0:
            raise InvalidPropertyError(
                f"clean retain must be at least 1 and the orphan age not negative (got {retain}, {age_ms})"
            )
        if self.pending(snapshot):
            return None  # finished first by run(); two plans would only list the same files
        on_disk = data_files_on_storage(table)
        # Read after listing: a writer that started since is then known (and protected).
        tl = table.log.refresh()
        now_ns = _now_ns()
        # file_paths checks each record's shape: a damaged one is CorruptEventError, not a TypeError.
        referenced = {p for i in _data_instants(tl) for p in file_paths(i.metadata)}
        if policy == "keep_latest_file_versions":
            old = _old_versions(table, tl, retain, on_disk)
            expired = set(old)
        else:
            seq = retain_seq(policy, retain, tl, now_ns // 1000)
            needed = files_from(table, tl, seq)
            expired = referenced - needed
        guard = protected_files(table, tl)
        tag = table_tag(table.config.table_uuid)
        reasons: dict[str, str] = {}
        for path, info in sorted(on_disk.items()):
            if path in guard or instant_alive(tl, path) or is_young(info, now_ns, age_ms):
                continue
            if path in expired:
                reasons[path] = "expired"
            elif path not in referenced and is_own_orphan(path, tag):
                # Unnamed by the timeline: deleted only when its name says this table wrote it.
                state = tl.get(parse_data_file_name(path).instant).state  # type: ignore[union-attr]
                reasons[path] = "rolled_back" if state is State.ROLLED_BACK else "orphan"
        index_files = dropped_index_files(table, tl, now_ns, age_ms)
        # The timeline is read after the owner files (staging_folders.verdicts); execute judges again.
        staging = dead_writes(
            table.storage, lambda: (table.log.refresh(), table.log.store.last_beats()), Rules.of(props, age_ms)
        )
        if not reasons and not index_files and not staging:
            return None
        if policy == "keep_latest_file_versions":
            seq = max((old[p] for p in reasons if p in old), default=-1)
            seq = seq if seq >= 0 else (_data_instants(tl)[0].completed_seq or 0)
        files: dict[str, list[str]] = {}
        for path in reasons:
            files.setdefault(posixpath.dirname(path), []).append(path)
        return CleanPlan(
            policy,
            retain,
            int(seq),
            age_ms,
            tl.last_seq,
            {d: tuple(ps) for d, ps in files.items()},
            reasons,
            tuple(index_files),
            tuple(staging),
        )

    def execute(self, table: Table, instant: Instant, progress: Progress | None = None) -> dict[str, Any]:
        plan = CleanPlan.from_dict(instant.plan)
        storage = table.storage
        paths = plan.paths()
        # Re-checked now, after this attempt's claim landed: whatever became protected
        # since the plan (a savepoint, a pending plan) is skipped. A savepoint landing
        # from here on that pins a planned file is refused (see the module docstring).
        tl = table.log.refresh()
        guard = protected_files(table, tl)
        age_ms = plan.orphan_age_ms
        now_ns = _now_ns()
        infos = dict(zip(paths, storage.fs.get_file_info([storage.path(p) for p in paths]))) if paths else {}
        deleted, skipped, doomed, missing, freed = [], [], [], 0, 0
        tag = table_tag(table.config.table_uuid)
        for path in paths:
            info = infos[path]
            if info.type == pafs.FileType.NotFound:
                missing += 1
            elif path in guard or instant_alive(tl, path) or is_young(info, now_ns, age_ms):
                skipped.append(path)
            elif plan.reasons.get(path, "expired") != "expired" and not is_own_orphan(path, tag):
                skipped.append(path)  # a plan made before orphans had to carry the table's tag
            else:
                doomed.append(path)
        # The deletes go through the engine in batches (on Spark, executors delete).
        batches = [tuple(doomed[i : i + _DELETES_PER_TASK]) for i in range(0, len(doomed), _DELETES_PER_TASK)]
        done = 0
        for batch, gone in zip(
            batches, table.service_engine.map(delete_files, [DeleteFiles(storage, b) for b in batches])
        ):
            for path, ok in zip(batch, gone):
                if ok:
                    deleted.append(path)
                    freed += infos[path].size or 0
                else:
                    missing += 1
            done += len(batch)
            if progress is not None:
                progress(done, len(doomed))
        live_indexes = {d.partition for d in index_states(tl).values()} | {FILES}
        index_deleted = 0
        for rel in plan.index_files:
            if index_of(rel) in live_indexes:
                continue  # re-created under the same name since the plan
            index_deleted += storage.delete(storage.path(rel))
        return {
            "policy": plan.policy,
            "retain": plan.retain,
            "retain_seq": plan.retain_seq,
            "files_deleted": len(deleted),
            "files_missing": missing,
            "files_skipped": len(skipped),
            "bytes_deleted": freed,
            "index_files_deleted": index_deleted,
            "deleted": deleted,
            "skipped": skipped,
            # Dead Spark writes' staging folders, judged again now (one may have begun since).
            "staging_removed": remove_dead_staging(
                table.log, storage, Rules.of(table.config.props, age_ms), only=plan.staging
            ),
        }
