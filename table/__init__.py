"""Tables: the ``Table`` handle, the write path, the read path and the engines."""

from ..timeline.errors import (
    CommitConflictError,
    CorruptFileError,
    DuplicateKeyError,
    ImmutableColumnError,
    InvalidFilterError,
    InvalidHookError,
    InvalidPropertyError,
    InvalidUpdateError,
    LakelineError,
    NullKeyError,
    ReservedColumnError,
    SchemaMismatchError,
    SnapshotExpiredError,
    TableExistsError,
    TableIdentityError,
    TableNotFoundError,
    UnknownColumnError,
    UnsafeLocationError,
    UnsupportedOperationError,
    ValidationError,
)
from .catalog import Catalog
from .hooks import Hooks, ValidationContext
from .table import Table

__all__ = [
    "Catalog",
    "CommitConflictError",
    "CorruptFileError",
    "DuplicateKeyError",
    "Hooks",
    "ImmutableColumnError",
    "InvalidFilterError",
    "InvalidHookError",
    "InvalidPropertyError",
    "InvalidUpdateError",
    "LakelineError",
    "NullKeyError",
    "ReservedColumnError",
    "SchemaMismatchError",
    "SnapshotExpiredError",
    "Table",
    "TableExistsError",
    "TableIdentityError",
    "TableNotFoundError",
    "UnknownColumnError",
    "UnsafeLocationError",
    "UnsupportedOperationError",
    "ValidationContext",
    "ValidationError",
]
