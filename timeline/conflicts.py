"""The conflict rules (the table of docs/concurrency.md §2), unit: file group.

A commit is checked, right before its completion event is put, against every
data-writing instant that completed after the writer's snapshot. This module decides
only from commit metadata; the same-new-key check, which needs to read keys, is a
callback supplied by the write path. Writes beat services: conflicts here make the
*writer* retry only when the rules say so (its log append survives a compaction).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from .commit_metadata import CommitMetadata
from .instant import Action, Instant
from .view.file_group import FileKind

#: (our commit, a concurrent one) -> True when the two collide on a key (the write
#: path's key check, :mod:`lakeline.table.write.key_check`).
KeyCheck = Callable[[CommitMetadata, CommitMetadata], bool]


class ConflictKind(StrEnum):
    """Which rule of docs/concurrency.md §2 a concurrent instant broke."""

    #: it replaced file groups this commit appends logs to
    REPLACED_APPENDED_GROUPS = "replaced-appended-groups"
    #: it wrote file groups this commit rewrites (copy-on-write)
    WROTE_REWRITTEN_GROUPS = "wrote-rewritten-groups"
    #: it wrote file groups this commit replaces
    WROTE_REPLACED_GROUPS = "wrote-replaced-groups"
    #: it wrote partitions this commit overwrites
    WROTE_OVERWRITTEN_PARTITIONS = "wrote-overwritten-partitions"
    #: it made a key live that this commit inserts, revives or deletes
    SAME_KEY = "same-key"
    #: it replaced or wrote file groups a table service rewrites (the service gives up)
    CHANGED_SERVICE_INPUTS = "changed-service-inputs"
    #: it committed this write's ``txn`` version, or a later one, of the same application
    SAME_TXN = "same-txn"
    #: it changed the schema this write conformed its rows to (the write re-conforms)
    SCHEMA_CHANGED = "schema-changed"


_TEXT = {
    ConflictKind.REPLACED_APPENDED_GROUPS: "replaced file groups this commit appends to",
    ConflictKind.WROTE_REWRITTEN_GROUPS: "wrote file groups this commit rewrites",
    ConflictKind.WROTE_REPLACED_GROUPS: "wrote file groups this commit replaces",
    ConflictKind.WROTE_OVERWRITTEN_PARTITIONS: "wrote partitions this commit overwrites",
    ConflictKind.SAME_KEY: "made a key live that this commit inserts, revives or deletes",
    ConflictKind.CHANGED_SERVICE_INPUTS: "replaced or wrote file groups this service rewrites",
    ConflictKind.SAME_TXN: "committed the application version this commit carries (txn)",
    ConflictKind.SCHEMA_CHANGED: "changed the schema this commit's rows were conformed to",
}


@dataclass(frozen=True)
class Conflict:
    """Why a commit cannot complete: the rule, the concurrent instant that broke it, and
    what it hit (file groups as ``(partition, file group)``, or partitions). ``str()`` is
    the message errors carry."""

    kind: ConflictKind
    instant: int
    action: Action
    groups: tuple[tuple[str, str], ...] = ()
    partitions: tuple[str, ...] = ()
    #: what the committing instant is called in the message (``"clustering"``)
    what: str = "commit"

    def __str__(self) -> str:
        text = _TEXT[self.kind].replace("this commit", f"this {self.what}").replace("this service", f"this {self.what}")
        if self.partitions:
            text += f": {list(self.partitions)}"
        if self.groups:
            p, fg = self.groups[0]
            text += f" ({len(self.groups)} file group(s), e.g. {fg} in {p or '/'})"
        return f"{self.action} {self.instant} {text}"


def find_conflict(
    ours: CommitMetadata, concurrent: Iterable[Instant], key_check: KeyCheck | None = None
) -> Conflict | None:
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

        def conflict(
            kind: ConflictKind,
            groups: Iterable[tuple[str, str]] = (),
            partitions: Iterable[str] = (),
            at: Instant = inst,
        ) -> Conflict:
            return Conflict(kind, at.id, at.action, tuple(sorted(groups)), tuple(sorted(partitions)))

        if log_groups & theirs.groups_replaced():
            return conflict(ConflictKind.REPLACED_APPENDED_GROUPS, log_groups & theirs.groups_replaced())
        if rewritten & touched:
            return conflict(ConflictKind.WROTE_REWRITTEN_GROUPS, rewritten & touched)
        # A compaction only wrote a new version of rows the replacement retires anyway.
        if replaced & touched and inst.action is not Action.COMPACTION:
            return conflict(ConflictKind.WROTE_REPLACED_GROUPS, replaced & touched)
        if ours.replaced_partitions and inst.action is not Action.COMPACTION:
            hit = set(ours.replaced_partitions) & theirs.partitions_written()
            if hit:
                return conflict(ConflictKind.WROTE_OVERWRITTEN_PARTITIONS, partitions=hit)
        if key_check is not None and theirs.files and key_check(ours, theirs):
            return conflict(ConflictKind.SAME_KEY)
    return None


def find_input_conflict(
    groups: set[tuple[str, str]], concurrent: Iterable[Instant], what: str, logs_ok: bool = False
) -> Conflict | None:
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
            return Conflict(ConflictKind.CHANGED_SERVICE_INPUTS, inst.id, inst.action, tuple(sorted(hit)), what=what)
    return None
