"""Table services on one schedule/execute framework: the async indexer and rollback now;
compaction, clustering, cleaning and archival are built on the same framework."""

from ..timeline.errors import (
           ServiceAbortedError,
           ServiceBusyError,
           ServiceStateError,
           UnknownServiceError,
)
from .plugin import ServiceResult, TableService
from .table_services import TableServices

__all__ = ["ServiceAbortedError", "ServiceBusyError", "ServiceResult", "ServiceStateError", "TableService",
           "TableServices", "UnknownServiceError"]
