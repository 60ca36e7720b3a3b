"""lakeline on Spark: the Spark engine, DataFrame writes and reads, the ``lakeline`` data
source. The only package that imports pyspark (docs/architecture.md, "Import direction")."""

from __future__ import annotations

from .engine import SparkEngine
from .merge import merge
from .ndv import ndv
from .read import read
from .session import register, session
from .types import create_table
from .write import write

__all__ = ["SparkEngine", "create_table", "merge", "ndv", "read", "register", "session", "write"]
