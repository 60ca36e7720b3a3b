"""Table services on one schedule/execute framework: the async indexer, rollback,
compaction, clustering, cleaning and archival; ``inline(name)`` runs one after a write's
commit (a write hook)."""

from ..timeline.errors import ServiceAbortedError, ServiceBusyError, ServiceStateError, UnknownServiceError
from .inline import inline
from .plugin import Service, ServiceResult
from .table_services import TableServices

__all__ = [
    "ServiceAbortedError",
    "ServiceBusyError",
    "ServiceResult",
    "ServiceStateError",
    "Service",
    "TableServices",
    "UnknownServiceError",
    "inline",
]
