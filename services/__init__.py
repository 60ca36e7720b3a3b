"""Table services: rollback now; compaction, clustering, cleaning, archival and the
async indexer are built on the same schedule/execute framework."""

from .facade import ServiceResult, TableServices

__all__ = ["ServiceResult", "TableServices"]
