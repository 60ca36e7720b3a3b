"""Instants and the events that move them.

An *event* is the unit of the log: it moves one instant to one state and is appended
at the next sequence number with put-if-absent. An *instant* is what the events of one
action add up to. Its id is the sequence number of its ``requested`` event, so ids are
unique and monotonic without any clock (Hudi's timestamp collisions cannot happen).

Both are frozen dataclasses: they are values read from disk, never mutated.
"""

from __future__ import annotations

import enum
import json
import operator
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, SupportsIndex

from .errors import CorruptEventError, InstantNotFoundError, InvalidTransitionError

#: Version of the event encoding; readers refuse versions they do not know.
EVENT_FORMAT_VERSION = 1

#: The last field of an event's JSON: the CRC-32 of the JSON before it (issue 45). A
#: byte changed in an event after it was written (a digit of a file's size, a path in
#: its metadata) still parses, and would be trusted; with the checksum it is
#: :class:`CorruptEventError`. The CRC covers the bytes as written, so a reader checks
#: it without encoding the event again. Readers before it ignore the field; events
#: without it (older ones, PostgreSQL's rows, rebuilt from columns) are not checked.
_CRC_FIELD = ',"crc":"'


class Action(enum.StrEnum):
    """What an instant does. Values are Hudi's wire names; ``str()`` is the value."""

    COMMIT = "commit"
    DELTA_COMMIT = "deltacommit"
    REPLACE_COMMIT = "replacecommit"
    COMPACTION = "compaction"
    CLUSTERING = "clustering"
    CLEAN = "clean"
    ROLLBACK = "rollback"
    INDEXING = "indexing"
    ARCHIVE = "archive"
    SAVEPOINT = "savepoint"
    SCHEMA = "schema"

    @property
    def writes_data(self) -> bool:
        """Whether instants of this action add or replace data files."""
        return self in _DATA_ACTIONS


_DATA_ACTIONS = frozenset(
    {Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.COMPACTION, Action.CLUSTERING}
)


class State(enum.StrEnum):
    """Where an instant is in its life. Values are Hudi's wire names; ``str()`` is the value."""

    REQUESTED = "requested"
    INFLIGHT = "inflight"
    COMPLETED = "completed"
    ROLLED_BACK = "rolled_back"

    @property
    def is_pending(self) -> bool:
        return self in (State.REQUESTED, State.INFLIGHT)

    @property
    def is_terminal(self) -> bool:
        return self in (State.COMPLETED, State.ROLLED_BACK)


# Decoding runs once per event on every load: plain dict lookups beat Enum(value).
_ACTION_BY_NAME = {a.value: a for a in Action}
_STATE_BY_NAME = {s.value: s for s in State}


#: Legal moves. ``None`` is "not on the timeline yet".
TRANSITIONS: Mapping[State | None, frozenset[State]] = {
    None: frozenset({State.REQUESTED}),
    State.REQUESTED: frozenset({State.INFLIGHT, State.ROLLED_BACK}),
    # ``inflight -> inflight`` is a service's re-claim of an instant whose executor
    # stopped beating: the event names the new attempt (services.phases fences the
    # old one with append checks against it).
    State.INFLIGHT: frozenset({State.INFLIGHT, State.COMPLETED, State.ROLLED_BACK}),
    State.COMPLETED: frozenset(),
    State.ROLLED_BACK: frozenset(),
}


def check_transition(instant_id: int | None, current: State | None, target: State) -> None:
    """Refuse an illegal move.

    Raises:
        InvalidTransitionError: ``target`` is not reachable from ``current``.
    """
    if target not in TRANSITIONS[current]:
        where = "absent" if current is None else current.value
        raise InvalidTransitionError(f"instant {instant_id} cannot move from {where} to {target.value}")


def micros_to_datetime(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, tz=UTC)


def datetime_to_micros(dt: datetime) -> int:
    if dt.tzinfo is None:
        # A naive datetime is taken as local time, the way datetime.timestamp() does.
        return int(dt.timestamp() * 1_000_000)
    return int(dt.timestamp() * 1_000_000)


def _check_crc(text: str | bytes, crc: object, where: str) -> None:
    """Refuse an event whose bytes before its ``crc`` field are not those it was written
    with. The field is the top-level object's last but ones appended after it (the
    object-store log's ``prev``), so its last occurrence is the one to split at: a
    payload's own ``crc`` key, if any, stands before it."""
    raw = text.encode() if isinstance(text, str) else text
    at = raw.rfind(_CRC_FIELD.encode())
    try:
        written = int(crc, 16) if isinstance(crc, str) and len(crc) == 8 else -1
    except ValueError:
        written = -1
    if at < 0 or zlib.crc32(raw[:at] + b"}") != written:
        raise CorruptEventError(
            f"event {where} is damaged: its bytes are not those it was written with (checksum mismatch)"
        )


@dataclass(frozen=True)
class Event:
    """One entry of the event log.

    Attributes:
        seq: position in the log; gapless from the first event.
        ts_us: wall-clock time in microseconds since the epoch, never smaller than the
            previous event's even when the clock steps back.
        instant: id of the instant the event moves (its requested event's ``seq``).
        action: the instant's action.
        state: the state the instant moves to.
        payload: the plan (requested), progress (inflight) or metadata (completed).
        token: random id of the append attempt, used to learn whether an append whose
            outcome was lost actually landed.
    """

    seq: int
    ts_us: int
    instant: int
    action: Action
    state: State
    payload: Mapping[str, Any] = field(default_factory=dict)
    token: str = ""

    @property
    def timestamp(self) -> datetime:
        return micros_to_datetime(self.ts_us)

    def to_json(self) -> str:
        body = self._body_json()
        return f'{body[:-1]}{_CRC_FIELD}{zlib.crc32(body.encode()):08x}"}}'

    def _body_json(self) -> str:
        return json.dumps(
            {
                "format": EVENT_FORMAT_VERSION,
                "seq": self.seq,
                "ts_us": self.ts_us,
                "instant": self.instant,
                "action": self.action.value,
                "state": self.state.value,
                "token": self.token,
                "payload": self.payload,
            },
            separators=(",", ":"),
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str | bytes, where: str) -> Event:
        """Decode one event.

        Args:
            text: the encoded event.
            where: a name for the event (file path or row) used in error messages.

        Raises:
            CorruptEventError: empty, truncated, unparsable, or of an unknown format.
        """
        if not text:
            raise CorruptEventError(f"event {where} is empty (0 bytes)")
        try:
            raw = json.loads(text)
        except ValueError as e:
            raise CorruptEventError(f"event {where} is truncated or not JSON: {e}") from None
        if not isinstance(raw, dict):
            raise CorruptEventError(f"event {where} is not a JSON object")
        if "crc" in raw:
            _check_crc(text, raw["crc"], where)
        version = raw.get("format")
        if version != EVENT_FORMAT_VERSION:
            raise CorruptEventError(
                f"event {where} has unknown format {version!r} (this reader knows {EVENT_FORMAT_VERSION})"
            )
        payload = raw.get("payload")
        if payload is not None and not isinstance(payload, dict):
            # Plans and metadata are mappings everywhere downstream; refuse here, naming
            # the event, rather than fail later far from the damage.
            raise CorruptEventError(f"event {where} has a payload that is not a JSON object")
        try:
            event = cls(
                int(raw["seq"]),
                int(raw["ts_us"]),
                int(raw["instant"]),
                _ACTION_BY_NAME[raw["action"]],
                _STATE_BY_NAME[raw["state"]],
                payload or {},
                str(raw.get("token", "")),
            )
        except (KeyError, ValueError, TypeError) as e:
            raise CorruptEventError(f"event {where} has a missing or unknown field: {e!r}") from None
        if event.state is State.REQUESTED and event.instant != event.seq:
            raise CorruptEventError(
                f"event {where}: a requested event must have instant == seq ({event.instant} != {event.seq})"
            )
        return event


@dataclass(frozen=True)
class Instant:
    """One action on the table, as its events add up so far.

    ``requested_at``/``completed_at`` are datetimes (UTC); ``plan`` is the payload of the
    requested event, ``metadata`` that of the completed one. ``completed_seq`` is the
    sequence number of the completing event (snapshots are named by it). Times are kept
    as epoch microseconds and turned into datetimes on access: a load builds thousands
    of instants and reads few of their times.
    """

    id: int
    action: Action
    state: State
    requested_us: int
    completed_us: int | None = None
    plan: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    completed_seq: int | None = None
    last_seq: int = 0

    @property
    def requested_at(self) -> datetime:
        """When the requested event was appended (UTC)."""
        return micros_to_datetime(self.requested_us)

    @property
    def completed_at(self) -> datetime | None:
        """When the completed event was appended (UTC), None while not completed."""
        return None if self.completed_us is None else micros_to_datetime(self.completed_us)

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def is_pending(self) -> bool:
        return self.state.is_pending

    def __str__(self) -> str:
        return f"Instant({self.id} {self.action.value} {self.state.value})"

    __repr__ = __str__

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view, as the CLI prints it."""
        return {
            "id": self.id,
            "action": self.action.value,
            "state": self.state.value,
            "requested_at": self.requested_at.isoformat(),
            "completed_at": self.completed_at.isoformat() if self.completed_at else None,
            "completed_seq": self.completed_seq,
            "plan": dict(self.plan),
            "metadata": dict(self.metadata),
        }


def instant_id_of(value: object) -> int:
    """An instant id as a caller gives it: an int, or an int-like string (``"3"``, as a
    shell or a config file spells it). Every API that takes an instant id parses it
    here, so ``as_of``, ``savepoint`` and ``release_savepoint`` accept the same forms
    (issue 25, audit A6c); a bool, a float or other text is no id.

    Raises:
        InstantNotFoundError: ``value`` is not an instant id.
    """
    if isinstance(value, bool):
        raise InstantNotFoundError(f"{value!r} is not an instant id")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip())
    if isinstance(value, SupportsIndex) and not isinstance(value, float):
        return operator.index(value)  # numpy integers
    raise InstantNotFoundError(f"{str(value)[:40]!r} is not an instant id")
