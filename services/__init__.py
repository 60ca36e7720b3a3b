"""Table services on one schedule/execute framework: the async indexer and rollback now;
compaction, clustering, cleaning and archival are built on the same framework."""

from ..timeline.errors import ServiceBusyError, ServiceStateError, UnknownServiceError
from .facade import TableServices
from .service import ServiceAbort, ServiceResult, TableService

__all__ = ["ServiceAbort", "ServiceBusyError", "ServiceResult", "ServiceStateError", "TableService",
           "TableServices", "UnknownServiceError"]
