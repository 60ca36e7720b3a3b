"""SQL pre-commit validators on Spark, after Hudi's ``SqlQueryEqualityPreCommitValidator``,
``SqlQueryInequalityPreCommitValidator`` and ``SqlQuerySingleResultPreCommitValidator``.

Each runs a Spark SQL query in which ``<TABLE_NAME>`` stands for the table: on the
table before the write and after it (equality, inequality), or after it only (single
result). The two states are the validator context's snapshots, registered as temporary
views for the query's run and dropped after it; they are read whole on the driver and
handed to Spark as Arrow, so these validators suit tables that fit a driver (a query
over a big table is better written as an Arrow validator over ``ctx.new_rows``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from ..table.hooks import Snapshot, ValidationContext
from ..timeline.errors import InvalidFilterError, ValidationError

#: What a query names the table by, as in Hudi's validators.
TABLE_NAME = "<TABLE_NAME>"


def _session() -> SparkSession:
    spark = SparkSession.getActiveSession()
    if spark is None:
        raise ValidationError("a SQL validator needs an active Spark session")
    return spark


@contextmanager
def _as_view(spark: SparkSession, snapshot: Snapshot) -> Iterator[str]:
    name = f"lakeline_validate_{uuid.uuid4().hex[:12]}"
    spark.createDataFrame(snapshot.to_arrow()).createOrReplaceTempView(name)
    try:
        yield name
    finally:
        spark.catalog.dropTempView(name)


def _rows(spark: SparkSession, query: str, snapshot: Snapshot) -> list[tuple[Any, ...]]:
    """The query's result on ``snapshot``, as sorted tuples (a multiset: order-free)."""
    with _as_view(spark, snapshot) as view:
        rows = [tuple(r) for r in spark.sql(query.replace(TABLE_NAME, view)).collect()]
    return sorted(rows, key=repr)


def _check_query(query: str) -> None:
    if TABLE_NAME not in query:
        raise InvalidFilterError(f"the query must name the table as {TABLE_NAME}: {query!r}")


@dataclass(frozen=True)
class SqlQueryEquality:
    """The query returns the same rows before and after the write."""

    query: str

    @property
    def name(self) -> str:
        return f"sql_equality({self.query})"

    def __call__(self, ctx: ValidationContext) -> None:
        spark = _session()
        before, after = _rows(spark, self.query, ctx.before), _rows(spark, self.query, ctx.after)
        if before != after:
            raise ValidationError(f"the result changed: before {before[:5]}, after {after[:5]}")


@dataclass(frozen=True)
class SqlQueryInequality:
    """The query returns other rows after the write than before it."""

    query: str

    @property
    def name(self) -> str:
        return f"sql_inequality({self.query})"

    def __call__(self, ctx: ValidationContext) -> None:
        spark = _session()
        before, after = _rows(spark, self.query, ctx.before), _rows(spark, self.query, ctx.after)
        if before == after:
            raise ValidationError(f"the result did not change: {after[:5]}")


@dataclass(frozen=True)
class SqlQuerySingleResult:
    """The query returns exactly one row of one value, equal to ``expected``, after the write."""

    query: str
    expected: Any

    @property
    def name(self) -> str:
        return f"sql_single_result({self.query} = {self.expected!r})"

    def __call__(self, ctx: ValidationContext) -> None:
        rows = _rows(_session(), self.query, ctx.after)
        if len(rows) != 1 or len(rows[0]) != 1:
            raise ValidationError(f"expected one row of one value, got {rows[:5]}")
        if rows[0][0] != self.expected:
            raise ValidationError(f"the result is {rows[0][0]!r}, not {self.expected!r}")


def sql_equality(query: str) -> SqlQueryEquality:
    """Refuse a write that changes the result of ``query`` (``<TABLE_NAME>`` is the table),
    e.g. ``"SELECT count(*) FROM <TABLE_NAME> WHERE amount < 0"``.

    Raises:
        InvalidFilterError: the query does not name ``<TABLE_NAME>`` (before anything is written).
    """
    _check_query(query)
    return SqlQueryEquality(query)


def sql_inequality(query: str) -> SqlQueryInequality:
    """Refuse a write that leaves the result of ``query`` unchanged."""
    _check_query(query)
    return SqlQueryInequality(query)


def sql_single_result(query: str, expected: Any) -> SqlQuerySingleResult:
    """Refuse a write after which ``query`` does not return the single value ``expected``."""
    _check_query(query)
    return SqlQuerySingleResult(query, expected)
