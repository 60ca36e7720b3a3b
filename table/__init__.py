"""Tables: the ``Table`` handle, the write path, the read path and the engines."""

from ..timeline.errors import (
    CommitConflictError,
    DuplicateKeyError,
    ImmutableColumnError,
    InvalidFilterError,
    InvalidHookError,
    InvalidPropertyError,
    InvalidUpdateError,
    LakelineError,
    NullKeyError,
    SchemaMismatchError,
    SnapshotExpiredError,
    TableExistsError,
    TableNotFoundError,
    UnknownColumnError,
    UnsupportedOperationError,
    ValidationError,
)
from .catalog import Catalog
from .hooks import Hooks, ValidationContext
from .table import Table

__all__ = [
    "Catalog",
    "CommitConflictError",
    "DuplicateKeyError",
    "Hooks",
    "ImmutableColumnError",
    "InvalidFilterError",
    "InvalidHookError",
    "InvalidPropertyError",
    "InvalidUpdateError",
    "LakelineError",
    "NullKeyError",
    "SchemaMismatchError",
    "SnapshotExpiredError",
    "Table",
    "TableExistsError",
    "TableNotFoundError",
    "UnknownColumnError",
    "UnsupportedOperationError",
    "ValidationContext",
    "ValidationError",
]
