"""Index lifecycle: which indexes exist and in what state, from timeline events only.

An index is created and dropped by ``indexing`` instants whose plan says what to do:
``{"op": "create", "index": name, "kind": kind, "columns": [...], "options": {...}}`` or
``{"op": "drop", "index": name}``. Its state follows from those instants alone:

============================  ==========================================
latest instant naming it      state
============================  ==========================================
create requested/inflight     ``building`` (writers write entries for it)
create completed              ``ready`` (readers may use it)
create rolled back            absent (an aborted build)
drop requested/inflight       ``dropping`` (nobody reads or writes it)
drop completed                absent (its files are gone)
============================  ==========================================

"Latest" is by instant id, i.e. by the position of the requested event, so a drop
requested while a create is still building wins even if the create completes after
it. A rolled-back drop changes nothing.

Each definition has its own metadata-table partition, named by the instant that created
it (:func:`partition_of`: ``<name>@<instant>``), so two definitions of one name (create,
drop, create again) never share files: a stale builder or dropper of the first can only
touch the first's partition, whatever it does and whenever it wakes up. Readers and
writers find the partition of the live definition through :attr:`IndexDef.partition`.
Nothing here reads local configuration: every writer and reader that asks the same
timeline gets the same answer, which is what makes Hudi's "writers trust their own config" failure impossible.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..timeline.errors import CorruptEventError, IndexExistsError, IndexNotFoundError, InvalidIndexError
from ..timeline.instant import Action, Instant, State
from ..timeline.plans import IndexCreatePlan, IndexDropPlan, index_plan
from ..timeline.timeline import Timeline


class IndexKind(enum.StrEnum):
    """What an index holds; the value is what ``indexing`` plans store."""

    #: The always-on index of the file-system view's checkpoints (:data:`FILES`).
    FILES = "files"
    COLUMN_STATS = "column_stats"
    BLOOM_FILTERS = "bloom_filters"
    #: Record key -> data file (and row), hash-partitioned into buckets (:mod:`.record_index`).
    RECORD_INDEX = "record_index"


#: The index kinds this version builds (through the API).
KINDS = (IndexKind.COLUMN_STATS, IndexKind.BLOOM_FILTERS, IndexKind.RECORD_INDEX)

#: The name and metadata-table partition of the always-on ``files`` index (the file-system
#: view's checkpoints): created with the table, never created or dropped through the API.
FILES = IndexKind.FILES.value


def index_kind(kind: object) -> IndexKind:
    """The kind an index may be created as, from its name (``"column_stats"``...).

    Raises:
        InvalidIndexError: not one of :data:`KINDS` (the message lists them).
    """
    if not isinstance(kind, str) or kind not in KINDS:
        raise InvalidIndexError(f"unknown index kind {kind!r}; known: {', '.join(KINDS)}")
    return IndexKind(kind)


def stored_kind(plan: IndexCreatePlan) -> IndexKind:
    """The kind of the index an ``indexing`` create plan on the timeline defines.

    Raises:
        CorruptEventError: the plan names no kind this version builds.
    """
    if plan.kind not in KINDS:
        raise CorruptEventError(
            f"indexing plan of {plan.index!r}: index kind {plan.kind!r} is not one of {', '.join(KINDS)}"
        )
    return IndexKind(plan.kind)


def partition_of(name: str, created: int) -> str:
    """The metadata-table partition of the definition of ``name`` created by the
    ``indexing`` instant ``created`` (the always-on ``files`` index has one, by name)."""
    return FILES if name == FILES else f"{name}@{created}"


class IndexState(str, enum.Enum):
    BUILDING = "building"
    READY = "ready"
    DROPPING = "dropping"
    ABSENT = "absent"


@dataclass(frozen=True)
class IndexDef:
    """One index as the timeline defines it.

    Attributes:
        name: the index's name (its metadata-table partition).
        kind: :attr:`IndexKind.COLUMN_STATS` or :attr:`IndexKind.BLOOM_FILTERS`.
        columns: the indexed columns; empty means the default (every column for
            stats, the record key for bloom filters), resolved by the caller.
        state: building, ready or dropping.
        instant: id of the ``indexing`` instant that created it; every data instant
            completed before that instant's requested event is built in bulk.
        options: kind-specific settings (e.g. ``fpp`` for bloom filters).
        field_ids: the field ids of ``columns`` at creation (empty: a definition from
            before 2026-11-27, or a table without ids, named by column names only);
            :func:`lakeline.indexes.entries.resolve` finds them under their names now.
        automatic: the table built it by itself, not a user (a record index, once the
            table's keys showed random: :mod:`lakeline.indexes.record_index.auto`).
    """

    name: str
    kind: IndexKind
    columns: tuple[str, ...]
    state: str
    instant: int
    options: Mapping[str, Any] = field(default_factory=dict)
    field_ids: tuple[int, ...] = ()
    automatic: bool = False

    @property
    def state_kind(self) -> IndexState:
        return IndexState(self.state)

    @property
    def partition(self) -> str:
        """Its metadata-table partition (of this definition only)."""
        return partition_of(self.name, self.instant)

    @property
    def is_written(self) -> bool:
        """Whether writers must write entries for it (building or ready)."""
        return self.state in (IndexState.BUILDING.value, IndexState.READY.value)

    @property
    def is_readable(self) -> bool:
        """Whether readers may prune with it (ready only)."""
        return self.state == IndexState.READY.value


def create_plan(
    name: str,
    kind: str,
    columns: Sequence[str] | None = None,
    options: Mapping[str, Any] | None = None,
    field_ids: Sequence[int] = (),
    automatic: bool = False,
) -> IndexCreatePlan:
    """The plan of an ``indexing`` instant that creates an index (``field_ids``: those
    of ``columns`` in the table's schema, when every one has an id).

    Raises:
        InvalidIndexError: unknown kind, empty name, or an empty column list.
    """
    kind = index_kind(kind).value
    if not name or "/" in name or name.startswith("."):
        raise InvalidIndexError(f"invalid index name {name!r}")
    if name == FILES:
        raise InvalidIndexError(f"{FILES!r} is the always-on files index; choose another name")
    if columns is not None and not list(columns):
        raise InvalidIndexError("an index needs at least one column (None means the default)")
    return IndexCreatePlan(name, kind, tuple(columns or ()), dict(options or {}), tuple(field_ids), automatic)


def drop_plan(name: str, created: int | None = None) -> IndexDropPlan:
    """The plan of an ``indexing`` instant that drops an index; ``created`` names the
    definition it drops (the instant that created it), so its execution removes that
    definition's partition and no other.

    Raises:
        InvalidIndexError: ``name`` is the always-on files index.
    """
    if name == FILES:
        raise InvalidIndexError(f"the {FILES!r} index is always on and cannot be dropped")
    return IndexDropPlan(name, created)


def dropped_partition(timeline: Timeline, drop: Instant) -> str:
    """The partition a drop instant removes: that of the definition its plan names, or
    (a plan without ``created``) the latest create of the name requested before it."""
    plan = IndexDropPlan.from_dict(drop.plan)
    name, created = plan.index, plan.created
    if created is None:
        creates = [
            i.id
            for i in timeline.by_action(Action.INDEXING)
            if i.id < drop.id and isinstance(p := index_plan(i.plan), IndexCreatePlan) and p.index == name
        ]
        created = creates[-1] if creates else -1
    return partition_of(name, int(created))


def _state_of(inst: Instant) -> IndexState | None:
    """The state an indexing instant gives its index; None when it changes nothing."""
    plan = index_plan(inst.plan)
    s = inst.state
    if isinstance(plan, IndexCreatePlan):
        if s is State.COMPLETED:
            return IndexState.READY
        if s is State.ROLLED_BACK:
            return IndexState.ABSENT
        return IndexState.BUILDING
    if isinstance(plan, IndexDropPlan):
        if s is State.ROLLED_BACK:
            return None
        return IndexState.ABSENT if s is State.COMPLETED else IndexState.DROPPING
    return None


def index_states(timeline: Timeline) -> dict[str, IndexDef]:
    """Every index that is building, ready or dropping in ``timeline``, by name."""
    out: dict[str, IndexDef] = {}
    for inst in timeline.by_action(Action.INDEXING):  # by id
        plan = index_plan(inst.plan)
        if plan is None:
            continue
        name = plan.index
        state = _state_of(inst)
        if state is None:
            continue
        if state is IndexState.ABSENT:
            out.pop(name, None)
            continue
        if isinstance(plan, IndexDropPlan):
            prev = out.get(name)
            if prev is None:
                continue  # dropping what does not exist: nothing to stop using
            out[name] = replace(prev, state=state.value)
            continue
        out[name] = IndexDef(
            name,
            stored_kind(plan),
            plan.columns,
            state.value,
            inst.id,
            dict(plan.options),
            plan.field_ids,
            plan.automatic,
        )
    return out


def list_indexes(timeline: Timeline) -> list[IndexDef]:
    """Indexes that are building, ready or dropping, by name."""
    return sorted(index_states(timeline).values(), key=lambda d: d.name)


def written_indexes(timeline: Timeline) -> list[IndexDef]:
    """Indexes a writer completing against ``timeline`` must write entries for."""
    return [d for d in list_indexes(timeline) if d.is_written]


def readable_indexes(timeline: Timeline, kind: IndexKind | None = None) -> list[IndexDef]:
    """Ready indexes (of one kind) a reader of ``timeline`` may prune with."""
    return [d for d in list_indexes(timeline) if d.is_readable and (kind is None or d.kind == kind)]


def check_can_create(timeline: Timeline, name: str) -> None:
    """Refuse to create an index whose name is taken.

    Raises:
        IndexExistsError: ``name`` is building, ready or being dropped.
    """
    cur = index_states(timeline).get(name)
    if cur is not None:
        raise IndexExistsError(f"index {name!r} already exists ({cur.state})")


def check_can_drop(timeline: Timeline, name: str) -> IndexDef:
    """The index to drop.

    Raises:
        IndexNotFoundError: no such index, or it is already being dropped.
    """
    cur = index_states(timeline).get(name)
    if cur is None or cur.state == IndexState.DROPPING.value:
        raise IndexNotFoundError(f"no index {name!r} to drop" + (" (already dropping)" if cur else ""))
    return cur
