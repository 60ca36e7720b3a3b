"""``merge(df, path)``: MERGE a Spark DataFrame into a lakeline table, Delta's clauses
joined on the record key (:mod:`lakeline.table.write.merger`).

It returns the builder ``Table.merge`` returns, and ``execute()`` runs the MERGE as a
Spark write does (:mod:`.write`): executors stage the source by key, and a planning
task runs the local MERGE planner on its share of the keys against the attempt's
snapshot, then writes its files; the driver commits once, with the local conflict
rules and replays. Rows never pass through the driver.

A MERGE with a ``when_not_matched_by_source_delete`` clause plans in one task, which
sees every source key (a target row is "not matched" only against all of them); its
memory bounds such a MERGE. Without one, each task plans the keys of its buckets.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame

from ..table.hooks import Hooks
from ..table.table import Table
from ..table.write.merger import MergeSpec, TableMerger, prepare_source
from ..table.write.writer import WriteResult
from ..timeline.commit_metadata import Operation
from ..timeline.txn import Txn, landed
from .types import to_arrow_schema
from .write import write_frame


def merge(
    df: DataFrame,
    path: str,
    storage_options: Mapping[str, str] | None = None,
    timeline: str | None = None,
    hooks: Hooks | None = None,
    txn: tuple[str, int] | None = None,
) -> TableMerger:
    """The MERGE builder of ``df`` (the source) into the table at ``path``: add
    ``when_*`` clauses, then ``execute()`` (one commit; ``stats``: ``rows_updated``,
    ``rows_inserted``, ``rows_deleted``).

    Raises:
        UnsupportedOperationError: the table has no record key.
        SchemaMismatchError: ``df`` lacks a record-key column or has one of another type.
        At ``execute()``, as ``Table.merge``'s: DuplicateKeyError, NullKeyError (found
        by the planning tasks, before anything is written), CommitConflictError.
    """
    version = Txn.of(txn)
    table = Table.open(path, timeline, storage_options)
    cfg = table.config
    cfg.require_key(Operation.MERGE)
    source = prepare_source(to_arrow_schema(df.schema).empty_table(), cfg).schema

    def run(spec: MergeSpec) -> WriteResult:
        if version is not None and landed(table.log.timeline, version):
            return WriteResult(None, {"txn_skipped": 1})
        return write_frame(df, table, table.config, Operation.MERGE, hooks, version, spec)

    return TableMerger(cfg, source, run)
