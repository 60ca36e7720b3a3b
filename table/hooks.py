"""Write hooks: validators before a commit, callbacks and inline services after it.

A write runs its hooks at two points of the commit protocol (:mod:`.commit`):

* **validators** run once the attempt's data files and index entries are written and
  before ``completed`` is appended, on every attempt (a replay after a conflict writes
  other files, so it is validated again). Each gets a :class:`ValidationContext`: the
  table *before* (the snapshot the attempt planned on) and *after* (that snapshot plus
  this instant as if it had completed), both readable like any snapshot, so a validator
  is ordinary read code. A validator refuses by raising; the write then raises
  :class:`~lakeline.timeline.errors.ValidationError` naming it and the attempt is rolled
  back like any failed attempt, so nothing of it is ever visible.
* **callbacks** and **inline services** run after ``completed`` landed. They never fail
  the write (a caller told otherwise would retry it and write the rows twice): their
  errors are collected on the result's ``hook_errors``.

Hooks come from the call (``t.upsert(data, hooks=Hooks(...))``) and from the table's
properties (``inline.services``, ``commit.callback-url``), which give every writer of
the table the same hooks; :func:`effective_hooks` joins the two. Built-in validators
are in :mod:`.validators`, the HTTP callback in :mod:`.callbacks`; users make inline
services with ``lakeline.services.inline(name)``. An :class:`Inline` service runs
through ``t.services.run``, the handle's door to the services, so this module imports
nothing of the services layer above it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from ..config.table_properties import TableProperties
from ..timeline.commit_metadata import CommitMetadata
from ..timeline.diagnostics.redact import redact
from ..timeline.errors import InvalidHookError, InvalidPropertyError, ValidationError
from ..timeline.instant import Action, Event, State
from ..timeline.log import now_us
from ..timeline.timeline import Timeline
from .callbacks import HttpPost, http_post
from .context import TableContext
from .engine import LocalEngine
from .read.changes import CHANGE_OP, changes
from .read.scan import Scan

if TYPE_CHECKING:
    from .table import Table
    from .write.writer import WriteResult

_log = logging.getLogger(__name__)


class InlineService(Protocol):
    """A table service a writer runs after its commit when its trigger says it is due."""

    @property
    def name(self) -> str: ...

    def run(self, table: Table) -> Sequence[Any]:
        """Run the service on ``table`` if due; its results (``ServiceResult``s)."""
        ...


#: The services a writer may run inline (rollback and indexing belong to runners and
#: the indexer: a writer never waits on another writer's failure or an index build).
INLINE_SERVICES = ("compaction", "clustering", "cleaning", "archival")


@dataclass(frozen=True)
class Inline:
    """Service ``name`` run after a commit when due, through ``t.services.run`` (the
    schedule/execute framework); ``options`` go to its planner. Made by
    ``lakeline.services.inline(name)`` and by the ``inline.services`` property."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def run(self, table: Table) -> Sequence[Any]:
        return table.services.run(self.name, **self.options)


#: ``check(ctx)``: raise (``ValidationError`` or anything) to refuse the write.
Validator = Callable[["ValidationContext"], None]
#: ``notify(result)``: told of a landed commit; what it raises is reported, never raised.
Callback = Callable[["WriteResult"], None]


def hook_name(hook: object) -> str:
    """How results and errors name a hook: its ``name`` attribute, else its function name."""
    name = getattr(hook, "name", None) or getattr(hook, "__name__", None)
    return str(name) if name else repr(hook)


@dataclass(frozen=True)
class Hooks:
    """What a write runs around its commit (see the module docstring)."""

    validators: Sequence[Validator] = ()
    callbacks: Sequence[Callback] = ()
    services: Sequence[InlineService] = ()

    def __post_init__(self) -> None:
        for kind, hooks in (("validators", self.validators), ("callbacks", self.callbacks)):
            bad = [h for h in hooks if not callable(h)]
            if bad:
                raise InvalidHookError(f"Hooks({kind}=...): {bad[0]!r} is not callable")
        bad_services = [s for s in self.services if not hasattr(s, "run")]
        if bad_services:
            raise InvalidHookError(
                f"Hooks(services=...): {bad_services[0]!r} is not an inline service "
                "(use lakeline.services.inline(name))"
            )

    def check_schema(self, schema: pa.Schema) -> None:
        """Refuse validators that name what the table does not have, before the write
        writes anything (a validator may offer ``check_schema(schema)``).

        Raises:
            UnknownColumnError, InvalidFilterError: as the validator says.
        """
        for check in self.validators:
            if (checker := getattr(check, "check_schema", None)) is not None:
                checker(schema)

    def joined(self, other: Hooks) -> Hooks:
        """These hooks then ``other``'s (an inline service named in both runs once)."""
        names = {s.name for s in self.services}
        return Hooks(
            [*self.validators, *other.validators],
            [*self.callbacks, *other.callbacks],
            [*self.services, *(s for s in other.services if s.name not in names)],
        )


# -- before the commit ----------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """A table state a validator reads: ``.scan()``, ``.to_arrow()``, ``.count_rows()``."""

    ctx: TableContext

    def scan(self, filter: pc.Expression | None = None, columns: list[str] | None = None) -> Scan:
        return Scan(self.ctx, filter=filter, columns=columns)

    def to_arrow(self, filter: pc.Expression | None = None, columns: list[str] | None = None) -> pa.Table:
        return self.scan(filter=filter, columns=columns).to_arrow()

    def count_rows(self) -> int:
        """Live rows (merge-on-read logs merged)."""
        key = list(self.ctx.config.record_key) or self.ctx.config.schema.names[:1]
        return self.to_arrow(columns=key).num_rows


@dataclass(frozen=True)
class ValidationContext:
    """What a validator sees: the table ``before`` and ``after`` the write, the write's
    ``operation``, ``instant`` id and commit ``metadata`` (its files and ``stats``)."""

    before: Snapshot
    after: Snapshot
    operation: str
    instant: int
    metadata: dict[str, Any]

    @property
    def stats(self) -> dict[str, Any]:
        return dict(self.metadata.get("stats", {}))

    @cached_property
    def changes(self) -> pa.Table:
        """The rows this write changes, with ``_op`` (``insert``/``update``/``delete``),
        as ``Table.changes`` would report its instant."""
        before, after = self.before.ctx, self.after.ctx
        start = before.snapshot.last_completed()
        assert start is not None  # every table has its completed schema instant
        return changes(
            after, lambda tl: after.view if tl.last_seq == after.snapshot.last_seq else before.view, start.id
        )

    @cached_property
    def new_rows(self) -> pa.Table:
        """The rows this write inserts or updates, as they will read after it."""
        ch = self.changes
        return ch.filter(pc.not_equal(ch.column(CHANGE_OP), "delete")).drop_columns([CHANGE_OP])


def validation_context(
    ctx: TableContext, action: Action, instant: int, operation: str, metadata: CommitMetadata
) -> ValidationContext:
    """The before/after pair of an attempt about to complete: ``after`` is the attempt's
    snapshot with its ``completed`` event applied in memory (no other process sees it).
    Snapshots read on a local engine: a validator runs on the driver."""
    local = replace(ctx, engine=LocalEngine())
    snap = ctx.snapshot
    done = Event(
        seq=snap.last_seq + 1,
        ts_us=max(now_us(), snap.last_ts_us + 1),
        instant=instant,
        action=action,
        state=State.COMPLETED,
        payload=metadata.to_dict(),
    )
    after_tl: Timeline = snap.extended([done])
    after = replace(local, snapshot=after_tl, view=ctx.view.extended(after_tl))
    return ValidationContext(Snapshot(local), Snapshot(after), operation, instant, metadata.to_dict())


def run_validators(validators: Sequence[Validator], vctx: ValidationContext) -> None:
    """Run every validator in order; the first refusal aborts.

    Raises:
        ValidationError: naming the validator that refused (and why).
    """
    for check in validators:
        try:
            check(vctx)
        except ValidationError as e:
            raise ValidationError(
                f"validator {hook_name(check)} refused instant {vctx.instant} ({vctx.operation}): {e}"
            ) from e
        except Exception as e:  # noqa: BLE001 - a broken validator refuses too: never commit unchecked
            raise ValidationError(
                f"validator {hook_name(check)} failed on instant {vctx.instant} ({vctx.operation}): {e!r}"
            ) from e


# -- after the commit ------------------------------------------------------------------


@dataclass
class _Errors:
    items: list[tuple[str, str]] = field(default_factory=list)

    def add(self, name: str, text: str) -> None:
        # Hooks report what they hit, which may quote a URL or DSN with its password.
        name, text = redact(name), redact(text)
        _log.warning("hook %s after a landed commit: %s", name, text)
        self.items.append((name, text))


def after_commit_hooks(table: Table, result: WriteResult, hooks: Hooks) -> WriteResult:
    """Callbacks, then inline services, of a landed commit; returns ``result`` with
    their errors in ``hook_errors``. Never raises (but ``KeyboardInterrupt`` and
    friends): the commit has landed."""
    if result.instant is None or (not hooks.callbacks and not hooks.services):
        return result
    errors = _Errors(list(result.hook_errors))
    for notify in hooks.callbacks:
        # A callback that reports outside the process names the table it reports on.
        if isinstance(notify, HttpPost):
            notify = notify.for_table(table.path, table.config.table_uuid)
        try:
            notify(result)
        except Exception as e:  # noqa: BLE001 - callbacks never fail a landed write
            errors.add(hook_name(notify), repr(e))
    for service in hooks.services:
        name = f"inline({service.name})"
        try:
            for res in service.run(table):
                if getattr(res, "aborted", None):
                    errors.add(name, f"aborted: {res.aborted}")
        except Exception as e:  # noqa: BLE001 - inline services never fail a landed write
            errors.add(name, repr(e))
    return replace(result, hook_errors=errors.items)


def property_hooks(props: TableProperties) -> Hooks:
    """The hooks the table's properties give every writer (``inline.services``,
    ``commit.callback-url``).

    Raises:
        InvalidPropertyError: an unknown service name or a bad callback URL (as
            :func:`~.callbacks.check_callback_url` says).
    """
    names = [n.strip() for n in props.inline_services.split(",") if n.strip()]
    unknown = [n for n in names if n not in INLINE_SERVICES]
    if unknown:
        raise InvalidPropertyError(
            f"property 'inline.services': {unknown} cannot run inline; known: {', '.join(INLINE_SERVICES)}"
        )
    url = props.commit_callback_url
    try:
        callbacks = [http_post(url)] if url else []
    except InvalidPropertyError as e:
        raise InvalidPropertyError(f"property 'commit.callback-url': {e}") from None
    return Hooks(callbacks=callbacks, services=[Inline(n) for n in names])


def effective_hooks(hooks: Hooks | None, props: TableProperties, schema: pa.Schema) -> Hooks:
    """The call's hooks joined with the properties' (:func:`property_hooks`), checked
    against ``schema``, before the write writes anything.

    Raises:
        InvalidHookError: ``hooks`` is not a :class:`Hooks`.
        InvalidPropertyError, UnknownColumnError, InvalidFilterError: as the checks say.
    """
    out = hooks if hooks is not None else Hooks()
    if not isinstance(out, Hooks):
        raise InvalidHookError(f"hooks must be a lakeline.table.Hooks, not {type(out).__name__}")
    out = out.joined(property_hooks(props))
    out.check_schema(schema)
    return out
