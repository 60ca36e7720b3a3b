"""Idempotent writes: the ``(app_id, version)`` a write commits, and the newest version
each application committed.

Why: a pipeline that crashes after its write landed but before it recorded its progress
writes the same batch again when it restarts (a Structured Streaming ``foreachBatch``
replays the batch, a scheduler re-runs the task). Delta answers with its
``SetTransaction`` (``txnAppId``, ``txnVersion``); lakeline keeps the same pair in the
commit metadata of the write that carried it:

* a write given ``txn=(app_id, version)`` whose version is at or below the newest one
  ``app_id`` committed lands nothing (checked on the snapshot the write plans on);
* two writers racing with the same pair: the completion check (the write's rule, on the
  exact log the ``completed`` event lands on) refuses the one that comes second as a
  conflict (:data:`~.conflicts.ConflictKind.SAME_TXN`), and its replay finds the
  version committed and lands nothing;
* the versions live on the timeline, which merges archived events back in, so they
  survive archival and need no other store.

Only data writes carry a pair; the services' rewrites (compaction, clustering) keep
rows, not progress, and carry none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import CorruptEventError, InvalidTxnError

if TYPE_CHECKING:
    from .timeline import Timeline

_MAX_APP_ID = 256


@dataclass(frozen=True)
class Txn:
    """One application's version, as a write commits it."""

    app_id: str
    version: int

    @classmethod
    def of(cls, value: object) -> Txn | None:
        """The pair ``value`` names (None stays None).

        Raises:
            InvalidTxnError: not a pair of a non-empty text (at most 256 characters) and
                a whole number from 0 on; nothing is written.
        """
        if value is None or isinstance(value, Txn):
            return value
        if not isinstance(value, tuple | list) or len(value) != 2:
            raise InvalidTxnError(f"txn must be (app_id, version), not {value!r:.80}")
        app_id, version = value
        if not isinstance(app_id, str) or not app_id.strip() or len(app_id) > _MAX_APP_ID:
            raise InvalidTxnError(f"txn app_id must be a non-empty text of at most {_MAX_APP_ID} characters")
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise InvalidTxnError(f"txn version must be a whole number from 0 on, not {version!r:.40}")
        return cls(app_id, version)

    def to_dict(self) -> dict[str, Any]:
        return {"app_id": self.app_id, "version": self.version}

    @classmethod
    def from_dict(cls, raw: object) -> Txn:
        """The pair a commit recorded.

        Raises:
            CorruptEventError: the record is not ``{"app_id": text, "version": number}``.
        """
        try:
            txn = cls.of((raw["app_id"], raw["version"])) if isinstance(raw, Mapping) else None
        except (KeyError, InvalidTxnError):
            txn = None
        if txn is None:
            raise CorruptEventError(f"commit metadata: txn is not an (app_id, version) record: {raw!r:.80}")
        return txn


def committed_version(timeline: Timeline, app_id: str, after: int = -1) -> tuple[int, int] | None:
    """``(version, instant id)`` of the newest version ``app_id`` committed among the
    instants completed after event ``after`` (all of them by default), or None."""
    best: tuple[int, int] | None = None
    for inst in timeline.completed_after(after):
        raw = inst.metadata.get("txn") if inst.action.writes_data else None
        if raw is None:
            continue
        txn = Txn.from_dict(raw)
        if txn.app_id == app_id and (best is None or txn.version > best[0]):
            best = (txn.version, inst.id)
    return best


def landed(timeline: Timeline, txn: Txn) -> bool:
    """Whether ``txn``'s application already committed this version or a later one."""
    done = committed_version(timeline, txn.app_id)
    return done is not None and done[0] >= txn.version


__all__ = ["Txn", "committed_version", "landed"]
