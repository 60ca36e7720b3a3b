"""A lakeline snapshot as a Polars ``LazyFrame``: an IO plugin whose projection,
predicate and row limit reach lakeline's pruning.

Polars hands an IO source (``polars.io.plugins.register_io_source``) the columns it
needs, its predicate as a Polars expression, and a row limit, and then trusts the
source's output: it does not filter again. So the source here

1. translates what it can of the predicate into a pyarrow expression that every
   matching row satisfies (:func:`to_arrow_filter`): comparisons of a column with a
   literal, ``is_in``, ``is_between``, null checks, ``&``/``|``/``~``. A conjunct it
   cannot translate is dropped, which only weakens the filter, and a negation is
   translated only when its operand is exact;
2. reads a :class:`~.scan.Scan` with that filter and the needed columns: partition,
   key-range, column-stats and bloom-filter pruning, and merge-on-read of slices with
   logs, exactly as ``Table.scan``;
3. applies the *full* Polars predicate to the rows with Polars itself (Polars semantics
   for NaN, casts, anything untranslated), then the projection and the row limit.

Comparisons on floating-point columns are never pushed down: Polars orders NaN above
every number (``NaN > 5`` is true) while Arrow compares NaN false, so an Arrow filter
would drop rows Polars keeps. Every scan's ``explain()`` (plus the pushed filter) is
recorded on :attr:`PolarsSource.explains`, for tests and for users asking what pruned.
The snapshot is pinned when the frame is built: collecting twice reads the same rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ..context import TableContext
from .scan import Scan

if TYPE_CHECKING:
    import polars as pl

_COMPARE = {"Eq": "==", "NotEq": "!=", "Lt": "<", "LtEq": "<=", "Gt": ">", "GtEq": ">="}
_FLIP = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NO_LITERAL = object()

# A translation: the Arrow expression (None: nothing usable) and whether it is exact.
# Always: where the Polars predicate is true, the Arrow one is true (so filtering by it
# keeps every matching row). Exact: also, where the Polars predicate is false, the Arrow
# one is false, which is what a negation needs (null rows may differ: ``~is_in`` is true
# on a null in Arrow, null in Polars; Polars' own filter afterwards drops them).
Translation = tuple[pc.Expression | None, bool]


def _literal(node: Any) -> Any:
    """The Python value of a Polars literal node, or ``_NO_LITERAL``."""
    if not isinstance(node, dict) or "Literal" not in node:
        return _NO_LITERAL
    lit = node["Literal"]
    if not isinstance(lit, dict) or len(lit) != 1:
        return _NO_LITERAL
    ((kind, body),) = lit.items()
    if not isinstance(body, dict) or len(body) != 1:
        return _NO_LITERAL
    ((typ, value),) = body.items()
    if kind == "Dyn" and typ in ("Int", "Float", "Str"):
        return value
    if kind != "Scalar":
        return _NO_LITERAL
    if typ in ("String", "Boolean") or typ.startswith(("Int", "UInt", "Float")):
        return value if not isinstance(value, list) else _NO_LITERAL
    if typ == "Date" and isinstance(value, int):
        return date(1970, 1, 1) + timedelta(days=value)
    if typ == "List" and isinstance(value, list):
        try:  # an Arrow IPC stream of the list's values
            values = pa.ipc.open_stream(bytes(value)).read_all()
            return values.column(0).to_pylist() if values.num_columns == 1 else _NO_LITERAL
        except (pa.ArrowInvalid, ValueError, TypeError):
            return _NO_LITERAL
    return _NO_LITERAL


def _pushable(typ: pa.DataType, value: Any) -> bool:
    """Whether comparing a column of ``typ`` with ``value`` means the same in Arrow as in
    Polars (no NaN ordering, no implicit parsing of strings into dates...)."""
    if value is None or isinstance(value, list):
        return False
    if pa.types.is_integer(typ):
        return isinstance(value, int | float) and not isinstance(value, bool) and value == value
    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_string_view(typ):
        return isinstance(value, str)
    if pa.types.is_boolean(typ):
        return isinstance(value, bool)
    if pa.types.is_date32(typ):
        return isinstance(value, date) and not isinstance(value, datetime)
    return False


def _scalar(typ: pa.DataType, value: Any) -> pa.Scalar:
    if pa.types.is_integer(typ) and isinstance(value, float):
        return pa.scalar(value, pa.float64())
    return pa.scalar(value, typ)


class _Translator:
    """Polars expression JSON -> pyarrow expression, against one Arrow schema."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema

    def column(self, node: Any) -> str | None:
        if isinstance(node, dict) and isinstance(node.get("Column"), str) and node["Column"] in self.schema.names:
            return str(node["Column"])
        return None

    def compare(self, left: Any, op: str, right: Any) -> Translation:
        col, value = self.column(left), _literal(right)
        if col is None:
            col, value, op = self.column(right), _literal(left), _FLIP[op]
        if col is None or value is _NO_LITERAL:
            return None, False
        typ = self.schema.field(col).type
        if not _pushable(typ, value):
            return None, False
        try:
            field, lit = pc.field(col), _scalar(typ, value)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            return None, False  # e.g. a literal out of the column type's range: left to Polars
        expr = {
            "==": field == lit,
            "!=": field != lit,
            "<": field < lit,
            "<=": field <= lit,
            ">": field > lit,
            ">=": field >= lit,
        }[op]
        return expr, True

    def function(self, fn: Any, inputs: list[Any]) -> Translation:
        boolean = fn.get("Boolean") if isinstance(fn, dict) else None
        if boolean == "Not" and len(inputs) == 1:
            inner, exact = self.translate(inputs[0])
            return (~inner, True) if inner is not None and exact else (None, False)
        if boolean in ("IsNull", "IsNotNull") and len(inputs) == 1:
            col = self.column(inputs[0])
            if col is None:
                return None, False
            return (pc.field(col).is_null() if boolean == "IsNull" else pc.field(col).is_valid()), True
        if isinstance(boolean, dict) and "IsIn" in boolean and len(inputs) == 2:
            col, values = self.column(inputs[0]), _literal(inputs[1])
            if col is None or not isinstance(values, list):
                return None, False
            typ = self.schema.field(col).type
            if not values or not all(_pushable(typ, v) for v in values):
                return None, False  # nulls in the list: Polars' nulls_equal rules, leave them to Polars
            try:
                return pc.field(col).isin(pa.array(values, typ)), True
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                return None, False
        if isinstance(boolean, dict) and "IsBetween" in boolean and len(inputs) == 3:
            closed = boolean["IsBetween"].get("closed") if isinstance(boolean["IsBetween"], dict) else None
            if closed not in ("Both", "Left", "Right", "None"):
                return None, False
            lo = self.compare(inputs[0], "GtEq" if closed in ("Both", "Left") else "Gt", inputs[1])
            hi = self.compare(inputs[0], "LtEq" if closed in ("Both", "Right") else "Lt", inputs[2])
            return self.conjunction(lo, hi)
        return None, False

    @staticmethod
    def conjunction(a: Translation, b: Translation) -> Translation:
        exprs = [e for e, _ in (a, b) if e is not None]
        expr = None if not exprs else exprs[0] if len(exprs) == 1 else exprs[0] & exprs[1]
        return expr, a[1] and b[1]

    def translate(self, node: Any) -> Translation:
        if not isinstance(node, dict) or len(node) != 1:
            return None, False
        ((kind, body),) = node.items()
        if kind == "Column":
            col = self.column(node)
            if col is not None and pa.types.is_boolean(self.schema.field(col).type):
                return pc.field(col), True
            return None, False
        if kind == "BinaryExpr" and isinstance(body, dict):
            op, left, right = body.get("op"), body.get("left"), body.get("right")
            if op in ("And", "LogicalAnd"):
                return self.conjunction(self.translate(left), self.translate(right))
            if op in ("Or", "LogicalOr"):
                (a, ea), (b, eb) = self.translate(left), self.translate(right)
                # (A or B) implies (A' or B') when A implies A' and B implies B'.
                return (a | b, ea and eb) if a is not None and b is not None else (None, False)
            if op in _COMPARE:
                return self.compare(left, _COMPARE[op], right)
            return None, False
        if kind == "Function" and isinstance(body, dict) and isinstance(body.get("input"), list):
            return self.function(body.get("function"), body["input"])
        return None, False


def to_arrow_filter(predicate: pl.Expr, schema: pa.Schema) -> Translation:
    """A pyarrow filter every row matching the Polars ``predicate`` satisfies (None: no
    usable part), and whether it is exact. Never raises: an expression Polars cannot
    serialize, or a result Arrow cannot bind to ``schema``, translates to nothing."""
    try:
        tree = json.loads(predicate.meta.serialize(format="json"))
    except Exception:  # noqa: BLE001 - any failure to serialize only means "no pushdown"
        return None, False
    expr, exact = _Translator(schema).translate(tree)
    if expr is None:
        return None, False
    try:
        ds.dataset(schema.empty_table()).to_table(filter=expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None, False
    return expr, exact


class PolarsSource:
    """The Polars IO source of one snapshot. ``lazy_frame()`` builds the frame;
    ``explains`` collects one record per read: ``Scan.explain()`` plus the pushed-down
    ``filter`` (its string, or None), whether it was ``exact``, and the ``columns`` read."""

    def __init__(self, ctx: TableContext, as_of: int | datetime | None = None) -> None:
        import polars as pl

        self.ctx = ctx
        self.as_of = as_of
        self.arrow_schema: pa.Schema = ctx.config.schema
        self.schema: pl.Schema = pl.DataFrame(self.arrow_schema.empty_table()).schema
        self.explains: list[dict[str, object]] = []

    def lazy_frame(self) -> pl.LazyFrame:
        from polars.io.plugins import register_io_source

        return register_io_source(
            self.read,
            schema=self.schema,
            is_pure=True,
            explain_name="lakeline",
            explain_detail=f"{self.ctx.storage.uri} snapshot {self.ctx.snapshot.last_seq}",
        )

    def read(
        self, with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None, batch_size: int | None
    ) -> Iterator[pl.DataFrame]:
        """The IO source function: yields the snapshot's rows that match ``predicate``,
        projected to ``with_columns``, at most ``n_rows`` of them."""
        import polars as pl

        names = self.arrow_schema.names
        arrow_filter, exact = to_arrow_filter(predicate, self.arrow_schema) if predicate is not None else (None, True)
        columns = None
        if with_columns is not None:
            needed = set(with_columns) | (set(predicate.meta.root_names()) if predicate is not None else set())
            columns = [c for c in names if c in needed]
        scan = Scan(self.ctx, filter=arrow_filter, columns=columns, as_of=self.as_of)
        self.explains.append(
            {
                **scan.explain(),
                "filter": None if arrow_filter is None else str(arrow_filter),
                "exact": exact,
                "columns": columns,
            }
        )
        if n_rows == 0:
            return
        # Streamed (Scan.to_reader: a merge-on-read slice at a time), so memory stays
        # bounded by a slice, not the snapshot.
        left = n_rows
        empty = True
        for batch in scan.to_batches():
            frame = pl.DataFrame(pa.Table.from_batches([batch], schema=scan.schema))
            if predicate is not None:
                frame = frame.filter(predicate)
            if with_columns is not None:
                frame = frame.select(with_columns)
            if left is not None:
                frame = frame.head(left)
                left -= frame.height
            step = batch_size or max(frame.height, 1)
            for start in range(0, frame.height, step):
                empty = False
                yield frame.slice(start, step)
            if left == 0:
                return
        if empty:  # no row: still one (empty) frame of the right columns
            frame = pl.DataFrame(scan.schema.empty_table())
            yield frame.select(with_columns) if with_columns is not None else frame
