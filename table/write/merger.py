"""MERGE, Delta's clauses joined on the record key: the builder users call and the spec it builds.

``t.merge(source)`` (and ``lakeline.spark.merge(df, path)``) return a :class:`TableMerger`;
its ``when_*`` methods add clauses and ``execute()`` makes one write of them
(:mod:`.merge_plan` plans it). The clauses mean what Delta's mean:

* a source row and a target row **match** when their record keys are equal;
* each matched pair takes the first ``when_matched_update`` / ``when_matched_delete``
  clause, in the order given, whose condition holds; none: the target row stays;
* each source row no target row matches takes the first ``when_not_matched_insert``
  whose condition holds; none: it is dropped;
* each target row no source row matches takes the first
  ``when_not_matched_by_source_delete`` whose condition holds; none: it stays.

Conditions and ``set`` values are Arrow expressions over ``source.<column>`` and
``target.<column>`` (``pc.field("source.n") > pc.field("target.n")``); a null condition
is false. A condition of an insert clause may read only source columns, one of a
by-source clause only target columns (the other side has no row).

Everything that needs no data is checked when a clause is added, before anything is
read or written, with typed errors: a clause after an unconditional clause of its kind
(Delta refuses it: it could never apply) is :class:`InvalidMergeError`, as is a
condition that is not a boolean expression; an unknown column is
:class:`UnknownColumnError`; ``set`` follows ``Table.update``'s rules (no record-key or
partition column, values of the column's type family). The source itself is checked by
:func:`prepare_source`.

Why a spec of frozen values apart from the builder: Spark ships it to the executors
that plan a share of the source each (pickled: Arrow expressions pickle), and a replay
after a conflict plans it again on a fresh snapshot.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ...timeline.errors import DuplicateKeyError, InvalidMergeError, SchemaMismatchError, UnsupportedOperationError
from ...timeline.table_config import TableConfig
from ..merge_engine import AGGREGATION, FIRST_ROW, MergeEngine
from .assign import Assignments, check_assignments, evaluate
from .records import check_keys, conform_column, evaluation_errors

if TYPE_CHECKING:
    from .writer import WriteResult

SOURCE, TARGET = "source.", "target."


class ClauseKind(enum.StrEnum):
    MATCHED_UPDATE = "when_matched_update"
    MATCHED_DELETE = "when_matched_delete"
    NOT_MATCHED_INSERT = "when_not_matched_insert"
    NOT_MATCHED_BY_SOURCE_DELETE = "when_not_matched_by_source_delete"


#: The clause kinds that compete for one row, in the three groups Delta orders apart.
MATCHED = (ClauseKind.MATCHED_UPDATE, ClauseKind.MATCHED_DELETE)
NOT_MATCHED = (ClauseKind.NOT_MATCHED_INSERT,)
BY_SOURCE = (ClauseKind.NOT_MATCHED_BY_SOURCE_DELETE,)


@dataclass(frozen=True)
class Clause:
    """One ``when_*`` clause: its kind, its condition (None: always), and for an update
    the checked ``set`` (None: every column from the source)."""

    kind: ClauseKind
    condition: pc.Expression | None = None
    assignments: Assignments | None = None


@dataclass(frozen=True)
class MergeSpec:
    """A MERGE's clauses in the order given."""

    clauses: tuple[Clause, ...] = ()

    def of(self, kinds: tuple[ClauseKind, ...]) -> tuple[Clause, ...]:
        return tuple(c for c in self.clauses if c.kind in kinds)

    @property
    def takes_source_rows(self) -> bool:
        """Whether a clause writes the source's columns whole (an update without ``set``,
        an insert): the source must then carry every column of the table."""
        return any(
            c.kind == ClauseKind.NOT_MATCHED_INSERT or (c.kind == ClauseKind.MATCHED_UPDATE and c.assignments is None)
            for c in self.clauses
        )


def prefixed(schema: pa.Schema, prefix: str) -> pa.Schema:
    return pa.schema([f.with_name(prefix + f.name) for f in schema])


def joined_schema(kinds: tuple[ClauseKind, ...], source: pa.Schema, table: pa.Schema) -> pa.Schema:
    """The columns a clause of ``kinds`` may read: both sides for matched rows, the
    source's for an insert, the target's for a by-source delete."""
    fields = [] if kinds == BY_SOURCE else list(prefixed(source, SOURCE))
    if kinds != NOT_MATCHED:
        fields += list(prefixed(table, TARGET))
    return pa.schema(fields)


def check_condition(condition: Any, over: pa.Schema, kind: ClauseKind) -> pc.Expression | None:
    """Raises InvalidMergeError (not a boolean expression) or UnknownColumnError."""
    if condition is None:
        return None
    if not isinstance(condition, pc.Expression):
        raise InvalidMergeError(
            f"{kind}'s condition must be a pyarrow.compute.Expression, not {type(condition).__name__}"
        )
    with evaluation_errors(f"{kind}'s condition {condition}", InvalidMergeError):
        typ = evaluate(over.empty_table(), {"c": condition}).schema.field("c").type
    if not (pa.types.is_boolean(typ) or pa.types.is_null(typ)):
        raise InvalidMergeError(f"{kind}'s condition {condition} is of type {typ}, not a boolean")
    return condition


class TableMerger:
    """The MERGE builder: ``when_*`` clauses, then ``execute()`` (one commit).

    Built by ``Table.merge`` and ``lakeline.spark.merge`` with the source's (Arrow)
    schema and what runs the write of a finished spec.
    """

    def __init__(self, config: TableConfig, source: pa.Schema, run: Callable[[MergeSpec], WriteResult]) -> None:
        config.require_key("merge")
        self._config, self._source, self._run = config, source, run
        self._clauses: list[Clause] = []

    def _add(self, kind: ClauseKind, condition: Any, assignments: Assignments | None = None) -> TableMerger:
        group = next(g for g in (MATCHED, NOT_MATCHED, BY_SOURCE) if kind in g)
        before = [c for c in self._clauses if c.kind in group]
        if before and before[-1].condition is None:
            raise InvalidMergeError(
                f"{kind} after an unconditional {before[-1].kind}: it could never apply "
                "(only the last clause of a kind may omit its condition, as in Delta)"
            )
        cond = check_condition(condition, joined_schema(group, self._source, self._config.schema), kind)
        self._clauses.append(Clause(kind, cond, assignments))
        return self

    def when_matched_update(self, set: Mapping[str, Any] | None = None, condition: Any = None) -> TableMerger:
        """Update matched target rows: ``set`` maps columns to expressions over
        ``source.`` / ``target.`` columns or literals (None: every column from the source)."""
        assignments = None
        if set is not None:
            engine = MergeEngine.of(self._config).name
            if engine in (AGGREGATION, FIRST_ROW):
                raise UnsupportedOperationError(
                    f"when_matched_update(set=...) on a table whose merge.engine is {engine!r}: the new row "
                    "would be folded as another version of the key (aggregated, or dropped), so values "
                    "computed from target.* would count twice; when_matched_update() without set= upserts "
                    "the source row, folded as an upsert's"
                )
            over = joined_schema(MATCHED, self._source, self._config.schema)
            assignments = check_assignments(self._config, set, over)
        return self._add(ClauseKind.MATCHED_UPDATE, condition, assignments)

    def when_matched_delete(self, condition: Any = None) -> TableMerger:
        """Delete matched target rows."""
        return self._add(ClauseKind.MATCHED_DELETE, condition)

    def when_not_matched_insert(self, condition: Any = None) -> TableMerger:
        """Insert source rows no target row matches (every column from the source)."""
        return self._add(ClauseKind.NOT_MATCHED_INSERT, condition)

    def when_not_matched_by_source_delete(self, condition: Any = None) -> TableMerger:
        """Delete target rows no source row matches."""
        return self._add(ClauseKind.NOT_MATCHED_BY_SOURCE_DELETE, condition)

    def execute(self) -> WriteResult:
        """Run the MERGE as one write; ``stats``: ``rows_updated``, ``rows_inserted``,
        ``rows_deleted``.

        Raises:
            InvalidMergeError: no clause.
            SchemaMismatchError: an insert or an update without ``set`` needs a table
                column the source lacks, or a value does not fit its column.
            DuplicateKeyError: two source rows share a key (Delta's "multiple source
                rows matched"). ImmutableColumnError: an update without ``set`` would
                move a row to another partition.
            CommitConflictError: concurrent commits kept conflicting.
            Nothing is written when any of these but the last is raised.
        """
        if not self._clauses:
            raise InvalidMergeError("merge needs at least one when_* clause")
        spec = MergeSpec(tuple(self._clauses))
        check_source_columns(self._config, self._source, spec)
        return self._run(spec)


def check_source_columns(config: TableConfig, source: pa.Schema, spec: MergeSpec) -> None:
    """Raises SchemaMismatchError: the source lacks a record-key column, or a table
    column a clause that takes source rows whole needs."""
    needed = config.schema.names if spec.takes_source_rows else list(config.record_key)
    missing = [c for c in needed if c not in source.names]
    if missing:
        why = "the record key" if not spec.takes_source_rows else "an insert or an update without set="
        raise SchemaMismatchError(f"the merge source lacks columns {missing}, which {why} needs")


def prepare_source(source: pa.Table, config: TableConfig) -> pa.Table:
    """The source with its table columns cast to the table's types (no cast across type
    families: an int key never matches a string one), keys checked.

    Raises:
        SchemaMismatchError: a key column is missing, or a column does not cast.
        NullKeyError: a key is null.
        DuplicateKeyError: two rows share a key.
    """
    missing = [k for k in config.record_key if k not in source.column_names]
    if missing:
        raise SchemaMismatchError(f"the merge source lacks the record-key columns {missing}")
    schema = config.schema
    cols = [
        conform_column(source.column(c), schema.field(c).with_nullable(True)) if c in schema.names else source.column(c)
        for c in source.column_names
    ]
    fields = [
        schema.field(c).with_nullable(True) if c in schema.names else source.schema.field(c)
        for c in source.column_names
    ]
    out = pa.Table.from_arrays(cols, schema=pa.schema(fields))
    key = list(config.record_key)
    check_keys(out, config.record_key)
    counts = out.select(key).group_by(key, use_threads=False).aggregate([([], "count_all")])
    dupes = counts.filter(pc.greater(counts.column("count_all"), 1))
    if dupes.num_rows:
        raise DuplicateKeyError(
            f"the merge source has {dupes.num_rows} key(s) on more than one row, e.g. "
            f"{dupes.select(key).slice(0, 5).to_pylist()}: a target row would match several source rows "
            "(Delta's 'multiple source rows matched'); deduplicate the source first"
        )
    return out
