"""The conflict rules (the table of docs/concurrency.md §2), unit: file group.

A commit is checked, right before its completion event is put, against every
data-writing instant that completed after the writer's snapshot. This module decides
only from commit metadata; the same-new-key check, which needs to read keys, is a
callback supplied by the write path. Writes beat services: conflicts here make the
*writer* retry only when the rules say so (its log append survives a compaction).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .commit_metadata import CommitMetadata
from .instant import Action, Instant
from .view.file_group import FileKind

#: (our commit, a concurrent one) -> True when the two collide on a key (the write
#: path's key check, :mod:`lakeline.table.write.key_check`).
KeyCheck = Callable[[CommitMetadata, CommitMetadata], bool]


def find_conflict(
    ours: CommitMetadata,
    concurrent: Iterable[Instant],
    key_check: KeyCheck | None = None,
) -> str | None:
    """Why ``ours`` cannot complete after ``concurrent``, or None when it can.

    Args:
        ours: what this commit wrote (files with kinds, rewritten and replaced groups,
            replaced partitions).
        concurrent: instants completed after our snapshot.
        key_check: tells whether the two commits collide on a key across file groups
            (both made it live, or ours deletes a key theirs made live), so that the
            outcome would differ from applying them in completion order.
    """
    log_groups = {(f.partition, f.file_group) for f in ours.files if f.kind == FileKind.LOG}
    rewritten = set(ours.rewritten)
    replaced = ours.groups_replaced()
    for inst in concurrent:
        if not inst.action.writes_data:
            continue
        theirs = CommitMetadata.from_dict(inst.metadata)
        touched = theirs.groups_written() | theirs.groups_replaced()
        where = f"{inst.action} {inst.id}"
        if log_groups & theirs.groups_replaced():
            return f"{where} replaced file groups this commit appends to"
        if rewritten & touched:
            return f"{where} wrote file groups this commit rewrites"
        # A compaction only wrote a new version of rows the replacement retires anyway.
        if replaced & touched and inst.action is not Action.COMPACTION:
            return f"{where} wrote file groups this commit replaces"
        if ours.replaced_partitions and inst.action is not Action.COMPACTION:
            hit = set(ours.replaced_partitions) & theirs.partitions_written()
            if hit:
                return f"{where} wrote partitions this commit overwrites: {sorted(hit)}"
        if key_check is not None and theirs.files and key_check(ours, theirs):
            return f"{where} made a key live that this commit inserts, revives or deletes"
    return None


def find_input_conflict(
    groups: set[tuple[str, str]],
    concurrent: Iterable[Instant],
    what: str,
    logs_ok: bool = False,
) -> str | None:
    """Why a table service that rewrites the file groups ``groups`` can no longer
    complete after ``concurrent`` (instants completed after its ``requested`` event),
    or None when it can. Writes beat services: the service gives up, never the writer.

    A concurrent instant that replaced one of the groups, or added any file to one,
    changed the service's inputs. ``logs_ok``: a log appended to a group is fine (a
    compaction: the log joins the slice it writes). A clustering takes ``logs_ok=False``:
    it retires its input groups, so a log landing in one would be lost with it
    (docs/concurrency.md §2: "clustering (execute)" vs "upsert/delete same group": the
    service aborts).
    """
    for inst in concurrent:
        if not inst.action.writes_data:
            continue
        theirs = CommitMetadata.from_dict(inst.metadata)
        written = {(f.partition, f.file_group) for f in theirs.files if not (logs_ok and f.kind == FileKind.LOG)}
        hit = groups & (theirs.groups_replaced() | written)
        if hit:
            p, fg = sorted(hit)[0]
            return (f"{inst.action} {inst.id} replaced or wrote {len(hit)} file group(s) this {what} rewrites "
                    f"(e.g. {fg} in {p or '/'})")
    return None
