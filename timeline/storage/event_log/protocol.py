"""The plug-in point for where a table's event log lives.

A store does four things: append an event at a sequence number only if that slot is
free (put-if-absent, the single atomic step the whole protocol relies on), read events
from a sequence number on, remove an archived prefix of the log (archival), and keep
heartbeats of inflight instants. Everything else
(retries, transitions, conflict checks) is built on top in :mod:`.log`, once, for every
store. Two stores ship: :class:`~lakeline.timeline.storage.event_log.filesystem.FileSystemStore` and
:class:`~lakeline.timeline.storage.event_log.postgresql.PostgresStore`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from ...instant import Event

if TYPE_CHECKING:
    from ...lock import Lock


class TimelineStore(ABC):
    """Where the events and heartbeats of one table are kept."""

    #: ``"filesystem"`` or ``"postgresql"``; recorded in the table's pointer file.
    kind: str

    @abstractmethod
    def put_if_absent(self, event: Event) -> None:
        """Write ``event`` at ``event.seq`` unless that slot is already taken.

        Raises:
            SlotTakenError: another event holds the slot.
        """

    @abstractmethod
    def read_from(self, seq: int) -> list[Event]:
        """Every active event with a sequence number ``>= seq``, in order.

        ``read_from(0)`` returns the whole active log, which starts right after
        :meth:`archived_through` once archival removed a prefix.

        Raises:
            CorruptEventError: an event cannot be decoded.
            TimelineGapError: an event is missing between two present ones.
            EventsArchivedError: ``0 < seq <= archived_through()``: the events asked for
                were removed from the active log (read them from the archive).
        """

    @abstractmethod
    def archived_through(self) -> int:
        """The last sequence number removed from the active log by archival; -1 if none."""

    @abstractmethod
    def delete_through(self, seq: int) -> None:
        """Remove the events ``<= seq`` from the active log (archival, once they are
        durable in the archive). Idempotent; the mark only moves forward.

        The mark is recorded before any event is removed, and a put at a slot at or
        below it is refused afterwards (:class:`SlotTakenError`), so a removed slot can
        never be won again by an appender that read the log before the removal.
        """

    @abstractmethod
    def has_events(self) -> bool:
        """Whether any event was ever written (the table exists)."""

    @abstractmethod
    def beat(self, instant: int, ts_us: int, attempt: str = "") -> None:
        """Record that ``attempt`` of ``instant`` was alive at ``ts_us``.

        Beats are kept per (instant, attempt): a writer beats with the empty attempt, a
        service executor with the attempt id its claiming event names, so two executors
        of one instant never overwrite (or clear) each other's beat.
        """

    @abstractmethod
    def beats(self) -> dict[tuple[int, str], int]:
        """The last beat (micros) of every (instant, attempt) that has one."""

    def last_beats(self) -> dict[int, int]:
        """The newest beat (micros) of every instant that has one, whatever the attempt."""
        out: dict[int, int] = {}
        for (instant, _), ts in self.beats().items():
            out[instant] = max(ts, out.get(instant, ts))
        return out

    @abstractmethod
    def clear_beat(self, instant: int, attempt: str = "") -> None:
        """Forget the heartbeat of one attempt of a finished instant (idempotent)."""

    @abstractmethod
    def lock(self, name: str, lease_ms: int) -> Lock:
        """A lease-based lock named ``name`` for this table, of this store's kind."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default holds none."""
