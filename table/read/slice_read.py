"""Reading one file slice merged: its base folded with its logs (merge-on-read).

Scans, services (compaction, clustering), updates and Spark tasks read a slice through
:func:`read_slice`; a scan with a filter hands it the filter too, and then only the
base's row groups whose statistics may hold a match are decoded (:mod:`.row_groups`),
and, when the filter names only record-key columns, only the log rows it keeps are
folded and logs whose recorded key range it rules out are not read (a key's versions
all share its key, so a key the filter rules out has no version that could match).
Either way the caller still filters the merged rows: all of this only saves work.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...indexes.expressions import Expr, columns
from ...indexes.pruning import has_unknown
from ...timeline.errors import CorruptLogError
from ...timeline.storage.filesystem import Storage
from ...timeline.view.file_group import DataFile, FileSlice
from ..files import FileRead, read_snapshot_file, with_columns_of
from ..merge import PositionMerge, merge_at_positions, merge_onto
from ..merge_engine import DEFAULT_ENGINE, MergeEngine
from ..write.records import BASE_POS, OP, SEQ, points_into
from .key_pruning import file_might_match
from .log_cache import LOGS, identity
from .row_groups import Layout, groups_holding, layout, pruned_base, read_groups, read_matching

#: The number of a row's log among the slice's, in fold order (in memory only).
_LOG = "__lakeline_log"


@dataclass(frozen=True)
class SliceRead:
    """Read one slice merged: base folded with its logs."""

    storage: Storage
    slice: FileSlice
    schema: pa.Schema
    key: tuple[str, ...]
    ordering: str | None
    # The columns the caller needs back (of ``schema``); None: all of them. With
    # position deletes the key columns are then only read from the logs.
    wanted: tuple[str, ...] | None = None
    threads: bool = True  # decode the base on Arrow's threads (:attr:`FileRead.threads`)
    # Return the base's rows in file order. A read need not: then dropping the rows the
    # logs touch moves only as many rows as it drops (:func:`drop_positions`).
    keep_order: bool = True
    # The filter the caller applies to the merged rows, and its tree: rows that surely
    # fail it may be left out (the base's row groups, log rows of other keys) or come
    # back with nulls in the columns it does not name. None: every row, exactly.
    filter: pc.Expression | None = None
    tree: Expr | None = None
    engine: MergeEngine = DEFAULT_ENGINE  # how a key's versions fold (``merge.engine``)
    # The base's rows that hold a key the filter pins, from a record index (None: not
    # known): the row groups without one are left out like those the statistics rule out.
    base_rows: np.ndarray | None = None


@dataclass(frozen=True)
class SliceRows:
    """A slice's merged rows, and what was decoded: of the base, row groups of how many
    and rows; how many of its logs (a scan's :attr:`~.scan.Scan.read_stats`)."""

    rows: pa.Table
    row_groups: int = 0
    row_groups_read: int = 0
    base_rows_read: int = 0
    logs_read: int = 0


def read_slice(task: SliceRead) -> pa.Table:
    """The live rows of a slice: the columns of ``task.schema``, which must hold the
    record key and the ordering field (only those columns are read); or only the
    ``task.wanted`` ones, when the slice's logs hold positions. With ``task.filter``,
    only the rows that match it are exact (see :func:`read_merged`).

    Position deletes: when every log names this slice's base as the file its positions
    point into, the base rows the logs touch are exactly those positions (a writer
    records the position of every key it finds live in the base; a key it finds in a
    log, or deleted, was touched there by an earlier log). Else (a log from before
    positions, or written on an older base that a compaction replaced meanwhile) the
    merge compares keys."""
    return read_merged(task).rows


def read_merged(task: SliceRead) -> SliceRows:
    """:func:`read_slice`, with what it decoded of the base. Rows that cannot match
    ``task.filter`` may be left out (the base's row groups its statistics rule out; for
    a filter on key columns alone the log rows of keys it rules out) or be returned
    with nulls in columns the filter does not name: the caller filters the rows."""
    s = task.slice
    plan = (
        layout(task.storage, s.base.path, task.schema, task.tree, s.base.bytes)
        if s.base is not None and task.tree
        else None
    )
    if plan is not None and task.base_rows is not None:
        plan = replace(plan, keep=plan.keep & groups_holding(plan.starts, task.base_rows))
    logs = _logs_to_read(task)
    return replace(_merged(task, plan, logs), logs_read=len(logs))


def _merged(task: SliceRead, plan: Layout | None, logs: tuple[DataFile, ...]) -> SliceRows:
    names = tuple(task.schema.names)
    if not logs:
        return _plain(task, names, plan)
    key = _merge_key(task, logs) if plan is None else None
    kept = LOGS.get(key) if key is not None else None
    if kept is not None:  # the logs' part of the merge, worked out by an earlier read
        with _files_named(task):
            base_rows = _read_base(task, _position_columns(task)[1])
            return _counted(kept.onto(base_rows, owned=True, keep_order=task.keep_order), base_rows, plan)
    log_rows, positional = _read_logs(task, logs)
    if positional:
        with _files_named(task):
            return _by_position(task, log_rows, plan, key)
    if plan is not None and not plan.keep.all() and (not task.engine.keeps_base_rows(task.ordering) or _key_only(task)):
        # A merge by key with the base pruned: a base row left out cannot match, and it
        # only wins a deduplicate fold over a log version through its ordering value;
        # without an ordering field it never does, and under a filter on the key alone
        # its key's versions cannot match either.
        return _plain(task, names, plan, log_rows)
    base_rows = _read_base(task, names)
    merged = merge_onto(base_rows, log_rows, task.key, task.ordering, task.engine)
    return _counted(merged.cast(task.schema), base_rows, plan)


def _plain(task: SliceRead, names: tuple[str, ...], plan: Layout | None, logs: pa.Table | None = None) -> SliceRows:
    """The base's rows in the groups ``plan`` keeps (all without one), merged by key
    with ``logs`` when given (only with a plan)."""
    s = task.slice
    if plan is None or s.base is None:
        rows = _read_base(task, names)
        return _counted(rows, rows, plan)
    base = read_groups(task.storage, s.base.path, names, task.schema, plan.kept, task.threads, s.base.bytes)
    rows = base if logs is None else merge_onto(base, logs, task.key, task.ordering, task.engine).cast(task.schema)
    return SliceRows(rows, len(plan.keep), len(plan.kept), base.num_rows)


def _counted(rows: pa.Table, base: pa.Table, plan: Layout | None) -> SliceRows:
    groups = len(plan.keep) if plan is not None else 0
    return SliceRows(rows, groups, groups, base.num_rows)


def _by_position(task: SliceRead, log_rows: pa.Table, plan: Layout | None, key: Hashable | None) -> SliceRows:
    """The merge of a slice whose logs all point into its base (``plan``: which of the
    base's row groups may match the filter). The logs' part of the merge is kept in
    :data:`~.log_cache.LOGS` under ``key`` (None: not kept)."""
    s = task.slice
    wanted, read = _position_columns(task)
    if plan is not None and s.base is not None and _key_only(task) and set(task.key) <= set(read):
        return _by_position_matching(task, log_rows, plan, wanted, read)
    # Row-group pruning keeps only what a deduplicate fold needs of a left-out base row
    # (rows_groups.pruned_base); another engine takes columns from it: the whole base.
    if plan is None or s.base is None or plan.keep.all() or not task.engine.is_deduplicate:
        base_rows = _read_base(task, read)
        merge = PositionMerge.of(log_rows, task.key, task.ordering, wanted, task.engine)
        if key is not None:
            LOGS.keep(key, merge, merge.nbytes)
        return _counted(merge.onto(base_rows, owned=True, keep_order=task.keep_order), base_rows, plan)
    tree = task.tree
    named = frozenset(task.schema.names) if tree is None or has_unknown(tree) else columns(tree)
    base = pruned_base(
        task.storage,
        s.base.path,
        plan,
        read,
        task.schema,
        log_rows,
        task.key,
        task.ordering,
        task.filter,
        named,
        task.threads,
        s.base.bytes,
    )
    rows = _merge_decoded(task, base.rows, base.changes, wanted)
    return SliceRows(rows, len(plan.keep), base.groups_read, base.rows_read)


def _by_position_matching(
    task: SliceRead, log_rows: pa.Table, plan: Layout, wanted: tuple[str, ...], read: tuple[str, ...]
) -> SliceRows:
    """:func:`_by_position` under a filter on the key alone: of the row groups whose
    statistics admit it, only the base rows it keeps are kept as they are decoded, and
    only the changes pointing at them are merged. A key's versions share its key, so
    no other row, and no change to one, can match, under any merge engine."""
    assert task.slice.base is not None and task.filter is not None
    base = task.slice.base
    base_rows, positions = read_matching(
        task.storage, base.path, read, task.schema, plan, task.threads, task.filter, base.bytes
    )
    rows = _merge_decoded(task, base_rows, _onto_rows(log_rows, positions, plan.rows), wanted)
    return SliceRows(rows, len(plan.keep), len(plan.kept), int(plan.sizes(plan.kept).sum()))


def _merge_key(task: SliceRead, logs: tuple[DataFile, ...]) -> Hashable | None:
    """What a slice's merge by position of ``logs`` onto its whole base depends on, when
    :data:`~.log_cache.LOGS` may keep it (None: it may not, or a log is gone: the read
    then says so)."""
    base = task.slice.base
    if base is None or LOGS.max_bytes <= 0:
        return None
    try:
        files = tuple(identity(task.storage, f.path, f.bytes) for f in logs)
    except OSError:
        return None
    wanted = _position_columns(task)[0]
    return ("merge", task.storage.uri, base.path, files, wanted, task.key, task.ordering, task.engine, task.schema)


def _merge_decoded(task: SliceRead, base_rows: pa.Table, changes: pa.Table, wanted: tuple[str, ...]) -> pa.Table:
    """The merge by position of ``changes`` onto ``base_rows``, which were decoded for
    this merge alone: their rows may be dropped in place."""
    return merge_at_positions(
        base_rows,
        changes,
        task.key,
        task.ordering,
        list(wanted),
        owned=True,
        keep_order=task.keep_order,
        engine=task.engine,
    )


@contextmanager
def _files_named(task: SliceRead) -> Iterator[None]:
    """A merge in this block that finds a log pointing past its base says which files:
    the merge knows rows, not files."""
    try:
        yield
    except CorruptLogError as e:
        s = task.slice
        raise CorruptLogError(
            f"{e}: base {s.base.path if s.base else '(none)'}, logs {', '.join(f.path for f in s.logs)}"
        ) from e


def _key_only(task: SliceRead) -> bool:
    """Whether the filter names record-key columns alone (every part understood)."""
    tree = task.tree
    return task.filter is not None and tree is not None and not has_unknown(tree) and columns(tree) <= set(task.key)


def _matching_keys_only(task: SliceRead, log_rows: pa.Table) -> pa.Table:
    """The log rows whose key the filter keeps, when it names key columns alone: every
    version of another key fails it too, and the base row a dropped change points at
    then stays as it is and fails it as well. Delete-only logs read without their keys
    are left whole (their rows are cheap)."""
    if not _key_only(task) or any(k not in log_rows.column_names for k in task.key):
        return log_rows
    try:
        return log_rows.filter(task.filter)
    except (pa.ArrowException, KeyError, TypeError, ValueError):
        return log_rows  # the scan's own filtering reports what is wrong with it


def _onto_rows(changes: pa.Table, kept: np.ndarray, base_rows: int) -> pa.Table:
    """``changes`` with their ``_base_pos`` made positions among the base rows ``kept``
    (ascending), and those pointing at a row not kept left out.

    Raises:
        CorruptLogError: a change points past the base's ``base_rows`` rows.
    """
    column = changes.column(BASE_POS)
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    pos = column.fill_null(0).to_numpy().astype(np.int64, copy=False)
    if valid.any() and (pos[valid].min() < 0 or pos[valid].max() >= base_rows):
        raise CorruptLogError(
            f"a log points at base row {int(pos[valid].max())} (or below 0) of a base file of {base_rows} rows"
        )
    local = np.minimum(np.searchsorted(kept, pos), len(kept) - 1) if len(kept) else np.zeros(len(pos), np.int64)
    onto = valid & (kept[local] == pos) if len(kept) else np.zeros(len(pos), dtype=bool)
    column = pa.array(np.where(onto, local, 0), type=pa.int64(), mask=~onto)
    changes = changes.set_column(changes.schema.get_field_index(BASE_POS), BASE_POS, column)
    return changes.filter(pa.array(onto | ~valid))


def _logs_to_read(task: SliceRead) -> tuple[DataFile, ...]:
    """The slice's logs, but those whose range of record keys a filter on the (single
    column) key alone rules out: none of their keys can match, so every row they touch
    or add fails the filter, as does the base row left in its place."""
    logs, tree = task.slice.logs, task.tree
    if len(task.key) != 1 or tree is None or not _key_only(task):
        return logs
    typ = task.schema.field(task.key[0]).type
    return tuple(f for f in logs if file_might_match(tree, task.key[0], typ, f))


def _read_logs(task: SliceRead, files: tuple[DataFile, ...]) -> tuple[pa.Table, bool]:
    """The rows of the slice's logs ``files`` in fold order (``task.schema``'s columns
    and ``_op``), and whether they all hold positions into the slice's base (then with
    ``_base_pos``).

    When every log holds deletes only (as their commits recorded) and they point into
    the base, their rows only say which base rows go: then only ``_op`` and
    ``_base_pos`` are read, in no particular order."""
    s = task.slice
    names = tuple(task.schema.names)
    every_column = (*names, OP, SEQ, BASE_POS)
    deletes_only = s.base is not None and all(f.deletes == f.rows for f in files)
    logs = [
        LOGS.read(
            FileRead(
                task.storage,
                f.path,
                (OP, BASE_POS) if deletes_only else every_column,
                threads=False,
                schema=task.schema,
                size=f.bytes,
            ),
            f.bytes,
        )
        for f in files
    ]
    positional = s.base is not None and all(points_into(lg, s.base.path) for lg in logs)
    if deletes_only and positional:
        return pa.concat_tables(logs), True
    if deletes_only:  # logs from before positions: the merge compares keys
        logs = [
            LOGS.read(
                FileRead(task.storage, f.path, every_column, threads=False, schema=task.schema, size=f.bytes), f.bytes
            )
            for f in files
        ]
    log_schema = task.schema.append(pa.field(OP, pa.string()))
    if positional:
        log_schema = log_schema.append(pa.field(BASE_POS, pa.int64()))
    if _key_only(task):
        # Rows of keys the filter rules out go before the sort into fold order (by log,
        # then sequence): one filter over every log, and only the rows kept move.
        numbered = pa.concat_tables(
            [
                with_columns_of(lg, log_schema.append(pa.field(SEQ, pa.int64()))).append_column(
                    _LOG, pa.array(np.full(lg.num_rows, i, dtype=np.int64))
                )
                for i, lg in enumerate(logs)
            ]
        )
        kept = _matching_keys_only(task, numbered).sort_by([(_LOG, "ascending"), (SEQ, "ascending")])
        return kept.drop_columns([_LOG, SEQ]), positional
    logs = [with_columns_of(lg.sort_by(SEQ).drop_columns([SEQ]), log_schema) for lg in logs]
    return pa.concat_tables(logs, promote_options="permissive"), positional


def _position_columns(task: SliceRead) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(wanted, read)`` of a merge by position: the columns returned, and the base
    columns decoded (those and the ordering field; the key comes from the logs)."""
    wanted = task.wanted if task.wanted is not None else tuple(task.schema.names)
    read = (*wanted, task.ordering) if task.ordering and task.ordering not in wanted else wanted
    return wanted, read


def _read_base(task: SliceRead, names: tuple[str, ...]) -> pa.Table:
    schema = pa.schema([task.schema.field(n) for n in names])
    s = task.slice
    if s.base is None:
        return schema.empty_table()
    return with_columns_of(
        read_snapshot_file(FileRead(task.storage, s.base.path, names, task.threads, schema=schema, size=s.base.bytes)),
        schema,
    )
