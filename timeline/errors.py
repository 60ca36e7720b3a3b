"""The one error hierarchy of lakeline.

Every error lakeline raises on purpose is a :class:`LakelineError`. Where a builtin
exception says the same thing (a missing table is a ``LookupError``, a bad schema a
``ValueError``) the lakeline error subclasses it too, so callers can catch either.
The module sits at the bottom of the import graph so every subsystem can raise
these without importing anything else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .conflicts import Conflict


class LakelineError(Exception):
    """Root of every error lakeline raises on purpose."""


# --- tables and configuration -------------------------------------------------


class TableNotFoundError(LakelineError, LookupError):
    """No lakeline table exists at the given location."""


class TableExistsError(LakelineError, FileExistsError):
    """A table already exists where one was to be created."""


class InvalidPropertyError(LakelineError, ValueError):
    """A table property is unknown or its value is malformed."""


class InvalidOptionError(InvalidPropertyError):
    """An option of the ``lakeline`` Spark data source is unknown where it was given (a
    misspelt or misplaced option would otherwise be silently ignored, and a read would
    return another snapshot than the one asked for), conflicts with another, or has a
    malformed value."""


class InvalidMergeEngineError(InvalidPropertyError):
    """The merge settings do not fit the schema (docs/merge-engines.md): an aggregate for a
    column the table lacks, for a key, partition or ordering column, of a type the function
    does not take (``sum`` on a string), or set on a table whose engine is not ``aggregation``."""


class ImmutablePropertyError(InvalidPropertyError):
    """A property fixed at creation (``merge.engine``, ``merge.<column>.aggregate``) was to
    change: the rows already folded under the old rule cannot be folded again."""


class UnsafeLocationError(LakelineError, ValueError):
    """A table may not live at this location: the empty path, a file system root, the
    home directory, a non-empty folder that is not a table, a folder inside another
    table, or a regular file (docs/safety.md: a table owns its folder)."""


class TableIdentityError(LakelineError, ValueError):
    """The folder opened is not the table its pointer or catalog entry names: a copy of a
    table whose timeline is shared by uuid (PostgreSQL), or a location that now holds
    another table. Refused so that two folders never write one event log."""


class SchemaMismatchError(LakelineError, ValueError):
    """Data does not match the table's schema."""


class ReservedColumnError(SchemaMismatchError):
    """A column name is reserved for lakeline's internal columns, or one Arrow would
    read as a field path (it starts with ``.``)."""


class NullKeyError(LakelineError, ValueError):
    """A record-key column holds a null."""


class DuplicateKeyError(LakelineError, ValueError):
    """An insert carries a record key the table already holds."""


class UnknownColumnError(LakelineError, ValueError):
    """A filter or column list names a column the table does not have."""


class InvalidFilterError(LakelineError, ValueError):
    """A filter expression cannot be evaluated against the table's schema."""


class UnsupportedOperationError(LakelineError, ValueError):
    """The operation does not apply to this table (e.g. upsert on an append-only table)."""


class InvalidUpdateError(LakelineError, ValueError):
    """An update's ``set`` is malformed: empty, not a mapping of column names, or a value
    that is neither an Arrow expression nor a literal, or cannot be evaluated."""


class InvalidMergeError(LakelineError, ValueError):
    """A MERGE's clauses are malformed: none at all, a clause after an unconditional one
    of its kind (it could never apply), or a condition that is not a boolean Arrow
    expression over the columns its kind may read."""


class InvalidTxnError(LakelineError, ValueError):
    """A write's ``txn`` is not an ``(app_id, version)`` pair: a non-empty text and a
    whole number from 0 on."""


class InvalidBookmarkError(LakelineError, ValueError):
    """A change-feed bookmark's consumer is not a non-empty name of at most 200 characters
    without control characters."""


class ImmutableColumnError(InvalidUpdateError, UnsupportedOperationError):
    """An update sets a record-key or partition column (a row's identity and place are
    fixed; delete and insert the row instead)."""


class AggregateOverflowError(LakelineError, ValueError):
    """An aggregation table's ``sum`` or ``count`` of a key's versions does not fit its
    column's type (an integer width, a decimal's precision): the write is refused before
    it commits; a read of versions written before that refusal names the column and key."""


# --- the timeline ---------------------------------------------------------------


class TimelineError(LakelineError):
    """Base for errors about the event log."""


class CorruptEventError(TimelineError, ValueError):
    """An event in the log is empty, truncated, unparsable or of an unknown version."""


class TimelineGapError(TimelineError):
    """The event log has a hole: an event is missing between two present ones."""


class SlotTakenError(TimelineError):
    """Another appender won the sequence number (internal; the log retries)."""


class EventsArchivedError(TimelineError):
    """Events asked of the active log were moved to the archive (internal: the event log
    reads them from the archive and goes on)."""


class CorruptArchiveError(TimelineError, ValueError):
    """A file of the timeline archive is unreadable, of an unknown version, or its
    events disagree with its name."""


class InvalidTransitionError(TimelineError, ValueError):
    """An instant cannot move from its current state to the requested one."""


class InstantNotFoundError(TimelineError, LookupError):
    """No instant with that id is on the timeline (or it is not completed)."""


class StorageNotSupportedError(TimelineError):
    """The storage cannot put-if-absent, so it cannot hold an event log."""


class UnsafeStorageError(StorageNotSupportedError):
    """The object store's conditional writes are not atomic (the conformance probe saw
    two racing create-only puts both succeed, or a stale ETag overwrite accepted), so it
    cannot hold an event log; keep the timeline in PostgreSQL (``timeline="postgresql://..."``)."""


class StorageAccessError(LakelineError, ConnectionError):
    """The object store cannot be used as configured: unreachable, refused the
    credentials, or the bucket does not exist (subclasses say which)."""


class StorageUnreachableError(StorageAccessError):
    """No answer from the object store's endpoint (wrong address, server down)."""


class StoragePermissionError(StorageAccessError, PermissionError):
    """The object store refused the request: wrong or missing credentials, or no right."""


class BucketNotFoundError(StorageAccessError, LookupError):
    """The bucket (or container) named by the location does not exist."""


class ObjectChangedError(LakelineError):
    """A conditional put found the object changed (or removed) since it was read: another
    process moved a lock, a mark or a claim first."""


class StorageConfigError(LakelineError, ValueError):
    """A storage option is unknown or malformed, or the location's scheme is not one
    lakeline reaches (``s3``, ``gs``, ``az``/``abfs``, local paths)."""


class ForkedStoreError(LakelineError, RuntimeError):
    """An object store was used in a process forked from one that had used it: its
    client cannot run there (see :mod:`lakeline.timeline.storage.fork_guard`)."""


class TimelineConfigError(TimelineError, ValueError):
    """The timeline argument does not fit the table (e.g. missing PostgreSQL URL)."""


class StoreUnavailableError(TimelineError, ConnectionError):
    """The PostgreSQL server cannot be reached, or a statement failed on it."""


class CommitOutcomeUnknownError(TimelineError):
    """The store failed while an event was being appended and re-reading could not tell
    whether it landed. Nothing is deleted while the outcome is unknown."""


# --- locks and heartbeats --------------------------------------------------------


class LockTimeoutError(LakelineError, TimeoutError):
    """The table lock could not be acquired in time."""


class LockLostError(LakelineError):
    """A lease expired and another owner took the lock."""


# --- commits and reads ------------------------------------------------------------


class CommitConflictError(LakelineError):
    """A concurrent commit conflicts with this one and retries ran out (or the
    operation cannot be replayed)."""


class DriverGoneError(LakelineError, TimeoutError):
    """A Spark planning task waited too long for its driver to begin the write's instant
    (the driver died or hung after planning): it gives up without writing anything."""


class SnapshotExpiredError(LakelineError, LookupError):
    """The requested snapshot is outside retention: its files are no longer kept."""


class UnmergedLogsError(UnsupportedOperationError):
    """A read that only sees base files (``Table.to_pyarrow_dataset``) met a file slice
    with log files not yet merged into its base: compact first, or read with ``scan``."""


class InvalidConnectionError(LakelineError, TypeError):
    """The ``connection`` given to a read (``Table.to_duckdb``) is not a connection of
    that engine; refused before anything is read."""


class CorruptFileError(LakelineError, ValueError):
    """A data file the timeline names is damaged (truncated, not Parquet, or of the
    wrong layout) or unreadable; the path is in the message. Nothing else is harmed."""


class CorruptLogError(CorruptFileError):
    """A merge-on-read log's records point at rows its base file does not have: the
    log or the base was damaged (or replaced outside lakeline); nothing is read."""


class FaultInjectedError(LakelineError):
    """A fault point armed with ``raise`` was reached (tests only)."""


# --- indexes and the metadata table -------------------------------------------------


class AttemptConflictError(LakelineError):
    """Internal: this write attempt conflicts with a concurrent commit; the writer rolls
    the attempt back and replays it (users see :class:`CommitConflictError` once the
    retries ran out). ``conflict`` is the typed reason
    (:class:`~lakeline.timeline.conflicts.Conflict`)."""

    def __init__(self, message: str, conflict: Conflict | None = None) -> None:
        super().__init__(message)
        self.conflict = conflict


class LakelineIndexError(LakelineError):
    """Base for errors about indexes (not ``IndexError``: that builtin means a bad
    sequence position)."""


class IndexExistsError(LakelineIndexError, ValueError):
    """An index of that name is already building, ready or being dropped."""


class IndexNotFoundError(LakelineIndexError, LookupError):
    """No index of that name exists (or it is already being dropped)."""


class InvalidIndexError(LakelineIndexError, ValueError):
    """An index definition is malformed: unknown kind, unknown or empty columns."""


class IndexesBehindError(LakelineIndexError):
    """Internal: an index became building after this writer wrote its entries; the
    completion writes them and tries again."""


class UnindexedCommitError(LakelineIndexError):
    """Internal: a data instant completed without entries for the index being built;
    the builder catches up and tries again."""


class IndexBuildError(LakelineIndexError):
    """An index build failed or was aborted; its instant was rolled back (the index is absent)."""


class InvalidIndexOptionsError(InvalidIndexError):
    """An index option is unknown or out of range (checked before the indexing instant)."""


class MetadataTableError(LakelineError):
    """The metadata table cannot be read or written as asked."""


# -- table services ------------------------------------------------------------------


class ServiceError(LakelineError):
    """Base of table-service errors."""


class ServiceAbortedError(ServiceError):
    """Raised by a service's ``execute`` when it must give up: its instant is ended as
    rolled back, :meth:`Service.abort` cleans up, and nothing else fails. ``conflict`` is
    the typed reason when a concurrent instant changed the service's inputs."""

    def __init__(self, message: str, conflict: Conflict | None = None) -> None:
        super().__init__(message)
        self.conflict = conflict


class UnknownServiceError(ServiceError, ValueError):
    """No service of that name (or not in this version)."""


class ServiceBusyError(ServiceError):
    """Another live process is executing this service instant (its heartbeat is fresh)."""


class ServiceStateError(ServiceError, ValueError):
    """The instant cannot be executed: it was rolled back, or it is not a service instant."""


class StaleAttemptError(ServiceError):
    """An execution attempt of a service instant is no longer the one the timeline says
    holds it (another attempt re-claimed it, or it ended): the log refuses its effects."""


class SavepointConflictError(SnapshotExpiredError):
    """A savepoint would pin files that an inflight clean is deleting: its snapshot is
    being expired right now (the clean's plan, fixed when it was requested, names them)."""


# --- hooks, catalog and runner --------------------------------------------------


class InvalidHookError(LakelineError, TypeError):
    """A write's ``hooks`` hold something that is not a hook (not callable, not an
    inline service); refused before anything is written."""


class ValidationError(LakelineError, ValueError):
    """A pre-commit validator refused a write (the message names the validator); the
    write's files were rolled back and nothing became visible."""


class CatalogError(LakelineError):
    """A catalog operation was refused (see the subclasses)."""


class InvalidTableNameError(CatalogError, ValueError):
    """A catalog table name is malformed (``namespace.name``, each part ``[A-Za-z0-9_]+``)."""


class LocationInUseError(CatalogError, FileExistsError):
    """The location already belongs to another table of the catalog."""


class RunnerConfigError(LakelineError, ValueError):
    """A runner configuration is malformed (unknown key, bad schedule, missing table)."""


class OutputPathError(LakelineError, ValueError):
    """A file a command was asked to write cannot be written there: its folder does not
    exist, or it cannot be created (checked before the work that fills it)."""
