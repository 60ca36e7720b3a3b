"""The clustering service: gather small file groups into fewer, sorted ones.

As docs/services.md ("Clustering") describes it (issue 6, point 2):

* *Action.* A clustering instant is a ``replacecommit`` (:attr:`Action.REPLACE_COMMIT`),
  as the public contract says ("write actions are ... ``replacecommit`` (overwrite,
  clustering)") and as Hudi records it: its completion adds new file groups and
  retires its input groups in ``replaced``, which the file-system view, the conflict
  rules, incremental reads and index upkeep already handle for overwrites. An instant's
  action is fixed from its ``requested`` event, so Hudi 1.x's ``clustering`` requested
  / ``replacecommit`` completed pair cannot be had; the plan's ``"service":
  "clustering"`` tells a clustering from an overwrite (writers' plans carry
  ``"writer"`` instead), and :meth:`ClusteringService.owns` claims only those. The
  ``clustering`` action stays reserved; compaction's planner already treats pending
  ``replacecommit`` and ``clustering`` plans alike (their ``groups`` are taken).
* *Plan* (under the table lock, through the framework). Scheduled and inline runs are
  size-based: per partition, the file groups whose latest slice (base plus logs) is
  below ``clustering.small-file-ratio`` of ``write.target-file-size-bytes``, packed
  into clustering groups of about the target size; a lone small group is left alone.
  ``t.services.cluster()`` takes every file group (like delta-rs ``z_order``), packed
  per partition into tasks of at most ``clustering.max-bytes-per-group``. Groups named
  by a pending plan (compaction, another clustering) are skipped either way. Sort
  columns and strategy (``linear``, ``zorder``) are checked before anything is appended.
* *Execute* through the engine (:mod:`lakeline.services.clustering`): the slices are
  taken from the view at the ``requested`` event (so a write that completed while the
  plan was made is included), read merged, sorted, written as new file groups cut at
  the target size, behind markers.
* *Complete*: index entries for every index building or ready, through the writers'
  own completion (the commit protocol, :mod:`lakeline.table.write.commit`), then the
  ``completed`` event with ``replaced`` naming the input groups, checked against the
  exact log it lands on: if any instant completed after the ``requested`` event wrote
  into or replaced an input group, the service aborts (writes beat services:
  docs/concurrency.md §2) and its files are deleted. Inserts and appends land in new
  groups and are never touched. Writers that planned before the clustering completed
  and target a replaced group retry by the writers' own rules
  (:func:`lakeline.timeline.conflicts.find_conflict`).
  Re-running an interrupted execution is safe the way every rewriting service's is
  (:mod:`.rewrite`): fresh files, and the dead attempt's files are deleted once the
  re-run completed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..table.encoding import encoded_bytes_per_row, file_overhead_bytes
from ..table.files import FileWrite, write_file
from ..table.read.scan import SliceRead, read_slice
from ..table.write.group_tasks import WriteSettings, log_schema, rel_path
from ..table.write.records import BASE_POS
from ..table.zorder import STRATEGIES, sort_rows
from ..timeline.commit_metadata import CommitMetadata, Operation, WriteStat
from ..timeline.conflicts import Conflict, find_input_conflict
from ..timeline.errors import InvalidPropertyError, UnknownColumnError
from ..timeline.instant import Action, Instant
from ..timeline.plans import ClusteringGroup, ClusteringPlan, service_of
from ..timeline.timeline import Timeline
from ..timeline.view.file_group import FileKind, FileSlice, data_file_name, new_file_group_id
from .plugin import Progress, map_in_batches
from .rewrite import Group, RewriteService, planned_groups

if TYPE_CHECKING:
    from ..table.table import Table

#: Plan scopes: ``small-files`` (scheduled runs) or ``all`` (``t.services.cluster()``).
SMALL_FILES, ALL = "small-files", "all"
#: Clustering tasks per engine call: progress is reported, and the mid-write fault
#: point reached, between calls.
_BATCH = 4


def check_options(
    table: Table, sort_by: Sequence[str] | str | None, strategy: str | None
) -> tuple[tuple[str, ...], str]:
    """The sort columns and strategy a run uses: the given ones, else the table's
    ``clustering.sort-columns`` (empty: the record key) and ``clustering.strategy``.

    Raises:
        InvalidPropertyError: an unknown strategy, a column that cannot be sorted, or
            ``zorder`` without a column.
        UnknownColumnError: a sort column the table does not have.
    """
    cfg = table.config
    props = cfg.props
    strategy = strategy or props.clustering_strategy
    if strategy not in STRATEGIES:
        raise InvalidPropertyError(f"clustering strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
    if sort_by is None:
        configured = [c.strip() for c in props.clustering_sort_columns.split(",") if c.strip()]
        sort_by = configured or list(cfg.record_key)
    cols = (sort_by,) if isinstance(sort_by, str) else tuple(sort_by)
    unknown = [c for c in cols if c not in cfg.schema.names]
    if unknown:
        raise UnknownColumnError(
            f"clustering sort columns {unknown} are not columns of the table ({', '.join(cfg.schema.names)})"
        )
    nested = [c for c in cols if pa.types.is_nested(cfg.schema.field(c).type)]
    if nested:
        raise InvalidPropertyError(f"clustering cannot sort by nested columns {nested}")
    if strategy == "zorder" and not cols:
        raise InvalidPropertyError("a zorder clustering needs at least one sort column (sort_by=)")
    return cols, strategy


def pack(
    slices: list[FileSlice],
    cap: int,
    min_members: int,
    weigh: Callable[[FileSlice], int] = lambda s: s.bytes,
    hard_cap: bool = False,
) -> list[list[FileSlice]]:
    """Slices into as few bins of about ``cap`` bytes (by ``weigh``; 0.75 to 1.5 x cap,
    or at most cap with ``hard_cap``) as their total needs, balanced (largest first,
    each into the lightest bin): eight inputs of 0.2 x cap make two bins of 0.8, not one
    of 1.0 and a small one of 0.6 that the next run would gather again. Bins with fewer
    than ``min_members`` slices are dropped."""
    if not slices:
        return []
    # Rounded, not rounded up (unless ``hard_cap``: a bound on a task's memory): a bin
    # of up to 1.5 x cap makes files the writer cuts in 0.75 to 1.5 times the target,
    # where rounding up made two half-full ones.
    total, cap = sum(weigh(s) for s in slices), max(cap, 1)
    bins: list[list[FileSlice]] = [[] for _ in range(max(1, -(-total // cap) if hard_cap else round(total / cap)))]
    load = [0] * len(bins)
    for s in sorted(slices, key=lambda s: (-weigh(s), s.file_group)):
        i = load.index(min(load))
        bins[i].append(s)
        load[i] += weigh(s)
    return [b for b in bins if len(b) >= min_members]


def row_bytes(schema: pa.Schema, compression: str) -> Callable[[FileSlice], int]:
    """A slice's bytes less each file's fixed overhead (magic and footer, a base's or a
    log's: :func:`lakeline.table.encoding.file_overhead_bytes`): what its rows take, which
    is what an output file holds. Small inputs are mostly footer: thirty files of 2 KB,
    packed by their size, made outputs of a third of the target."""
    base = file_overhead_bytes(schema, compression)
    log = file_overhead_bytes(log_schema(schema).append(pa.field(BASE_POS, pa.int64())), compression)

    def weigh(s: FileSlice) -> int:
        return max(sum(f.bytes - (base if f.kind is FileKind.BASE else log) for f in s.files), 1)

    return weigh


class ClusteringService(RewriteService):
    """Cluster file groups (``t.services.cluster()``, ``run("clustering")``)."""

    name = "clustering"
    action = Action.REPLACE_COMMIT

    def conflict(self, timeline: Timeline, instant: int, groups: set[Group]) -> Conflict | None:
        concurrent = [i for i in timeline.completed_after(instant) if i.id != instant]
        return find_input_conflict(groups, concurrent, "clustering")

    def rewritten_groups(self, instant: Instant, metadata: CommitMetadata) -> set[Group]:
        return metadata.groups_replaced()

    def owns(self, instant: Instant) -> bool:
        """Only clustering's ``replacecommit`` instants: overwrites share the action."""
        return service_of(instant.plan) == self.name

    def plan(
        self,
        table: Table,
        snapshot: Timeline,
        scope: str = SMALL_FILES,
        sort_by: Sequence[str] | str | None = None,
        strategy: str | None = None,
        **options: Any,
    ) -> ClusteringPlan | None:
        """Clustering groups (see the module docstring); None when nothing is worth it.

        Raises:
            InvalidPropertyError, UnknownColumnError: bad options (nothing is appended).
        """
        if options:
            raise InvalidPropertyError(
                f"clustering takes no options {sorted(options)}; it takes sort_by=, strategy=, scope="
            )
        if scope not in (SMALL_FILES, ALL):
            raise InvalidPropertyError(f"clustering scope {scope!r} is not one of {SMALL_FILES}, {ALL}")
        cols, strategy = check_options(table, sort_by, strategy)
        props = table.config.props
        target = props.write_target_file_size_bytes
        busy = planned_groups(snapshot)
        view = table.view(snapshot)
        clusters: list[list[FileSlice]] = []
        weigh = row_bytes(table.config.schema, props.write_parquet_compression)
        for p in view.partitions():
            free = [s for s in view.latest_slices(p) if (s.partition, s.file_group) not in busy]
            if scope == ALL:
                clusters.extend(pack(free, props.clustering_max_bytes_per_group, 1, weigh, hard_cap=True))
            else:
                limit = props.clustering_small_file_ratio * target
                clusters.extend(pack([s for s in free if s.bytes < limit], target, 2, weigh))
        if not clusters:
            return None
        groups = tuple(
            ClusteringGroup(s.partition, s.file_group, n, s.bytes)
            for n, c in enumerate(clusters)
            for s in sorted(c, key=lambda s: s.file_group)
        )
        return ClusteringPlan(scope, snapshot.last_seq, tuple(cols), strategy, target, len(clusters), groups)

    def execute(self, table: Table, instant: Instant, progress: Progress | None = None) -> dict[str, Any]:
        plan = ClusteringPlan.from_dict(instant.plan)
        self.start_attempt(table, instant)
        # The view at the requested event: what the plan's groups held when it landed.
        view = table.view(table.log.refresh().as_of_seq(instant.id))
        live = {(s.partition, s.file_group): s for s in view.latest_slices()}
        members: dict[int, list[FileSlice]] = {}
        for g in plan.groups:
            s = live.get((g.partition, g.file_group))
            if s is not None:  # gone if replaced between the plan's snapshot and its event
                members.setdefault(g.cluster, []).append(s)
        st = WriteSettings.of(table.storage, table.config, instant.id)
        sort_by, strategy, target = plan.sort_by, plan.strategy, plan.target_bytes
        tasks = [
            ClusterTask(st, ss[0].partition, tuple(ss), sort_by, strategy, target) for _, ss in sorted(members.items())
        ]
        written: list[WriteStat] = [
            f
            for files in map_in_batches(
                table.service_engine, cluster_slices, tasks, _BATCH, progress, "clustering.mid_write"
            )
            for f in files
        ]
        inputs = [s for t in tasks for s in t.slices]
        replaced: dict[str, list[str]] = {}
        for s in inputs:
            replaced.setdefault(s.partition, []).append(s.file_group)
        stats = {
            "file_groups_clustered": len(inputs),
            "files_read": sum(len(s.files) for s in inputs),
            "bytes_read": sum(s.bytes for s in inputs),
            "rows": sum(w.rows for w in written),
            "files_added": len(written),
            "bytes_written": sum(w.bytes for w in written),
            "file_groups_replaced": len(inputs),
        }
        return CommitMetadata(
            operation=Operation.CLUSTER,
            snapshot_seq=instant.id,
            files=tuple(written),
            replaced={p: tuple(g) for p, g in replaced.items()},
            stats=stats,
        ).to_dict()


# -- the engine task (runs on a LocalEngine thread, a worker process or a Spark executor) --


@dataclass(frozen=True)
class ClusterTask:
    """Rewrite ``slices`` (all of one partition) as new file groups named for
    ``settings.instant``, sorted by ``sort_by`` under ``strategy``, cut at
    ``target_bytes`` on disk."""

    settings: WriteSettings
    partition: str
    slices: tuple[FileSlice, ...]
    sort_by: tuple[str, ...]
    strategy: str
    target_bytes: int


def _rows_per_file(task: ClusterTask, rows: pa.Table) -> int:
    """Rows in one output file, so that files come out between 0.75 and 1.5 times the
    target: never small (a small output would be clustered again and again), and
    spread evenly instead of leaving a stub at the end.

    The size of a row is measured on the output itself: a sample of the sorted rows
    encoded as the files will be, less a footer
    (:func:`lakeline.table.encoding.encoded_bytes_per_row`). The inputs' bytes per row
    overstate it: small inputs are mostly footer (thirty 2 KB files of a few rows made
    output files of a third of the target).
    """
    if rows.num_rows == 0:
        return 1
    st = task.settings
    per_row = encoded_bytes_per_row(rows, st.compression, st.row_group_rows)
    per_file = max(1.0, task.target_bytes / per_row)
    files = max(1, round(rows.num_rows / per_file))
    return -(-rows.num_rows // files)


def cluster_slices(task: ClusterTask) -> list[WriteStat]:
    """Write the merged, sorted rows of the slices as new file groups; [] when no row
    is left (every row of the inputs was deleted: the groups are retired all the same)."""
    st = task.settings
    read = [read_slice(SliceRead(st.storage, s, st.schema, st.key, st.ordering, engine=st.merge)) for s in task.slices]
    rows = pa.concat_tables([t.cast(st.schema) for t in read]) if read else st.schema.empty_table()
    rows = sort_rows(rows, task.sort_by, task.strategy)
    out: list[WriteStat] = []
    step = _rows_per_file(task, rows)
    for start in range(0, rows.num_rows, step):
        fg = new_file_group_id()
        name = data_file_name(fg, st.instant, FileKind.BASE, st.tag)
        out.append(
            write_file(
                FileWrite(
                    st.storage,
                    st.instant,
                    rel_path(task.partition, name),
                    task.partition,
                    fg,
                    FileKind.BASE,
                    rows.slice(start, step).combine_chunks(),
                    st.key,
                    st.compression,
                    st.row_group_rows,
                    inserts=False,
                    min_saving=st.min_saving,
                )
            )
        )
    return out
