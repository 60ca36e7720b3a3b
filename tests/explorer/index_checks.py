"""The index invariants the explorer checks (issues 11 and 30): every ready index and
the files index's checkpoint validate, and while a record index is ready a read whose
filter pins the key (``==``, ``isin``), answered through it, equals the model.

Why apart from :mod:`.checks`: these run only after a step in which an instant
completed (and at the end), not after every event: validating a record index reads the
table, and what a snapshot's indexes hold changes only with a completion (a write's
deltas count from its completion; a clean or a rollback completes too). A fold of the
metadata table after a completion is checked at the next completion or at the end.
The checks return ``(kind, detail)`` pairs; :class:`.checks.Checker` makes them
violations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow.compute as pc
from lakeline.indexes.states import IndexKind
from lakeline.timeline.errors import LakelineError

from tests.table.model import table_rows

from .ops import EDGES, KEYS
from .schema_model import ExplorerModel, diff_rows

if TYPE_CHECKING:
    from lakeline.table import Table
    from lakeline.timeline.timeline import Timeline

Found = list[tuple[str, str]]


class IndexChecks:
    """The index checks of one run, with what they counted."""

    def __init__(self, table: Table) -> None:
        self.t = table
        self.last_completed: int | None = None
        self.reads = 0  # key-pinned reads checked while a record index was ready
        self.pruned = 0  # of those, reads the index pruned to fewer files

    def check(self, tl: Timeline, model: ExplorerModel, final: bool) -> Found:
        """The broken index invariants, if an instant completed since the last call (or
        ``final``)."""
        last = tl.last_completed()
        seq = last.completed_seq if last is not None else None
        if seq == self.last_completed and not final:
            return []
        self.last_completed = seq
        out: Found = []
        if self._validate(out):
            self._pinned_read(model, out)
        return out

    def _validate(self, out: Found) -> bool:
        """Every ready index validates; whether a record index is ready."""
        record = False
        try:
            report = self.t.indexes.validate("files")
            if report["mismatches"]:
                out.append(("files index invalid", str(report["mismatches"][:3])))
            for d in self.t.indexes.list():
                if d.state != "ready":
                    continue
                record = record or d.kind == IndexKind.RECORD_INDEX
                report = self.t.indexes.validate(d.name)
                if report["mismatches"]:
                    out.append(("ready index invalid", f"{d.name}: {report['mismatches'][:3]}"))
        except LakelineError as e:
            out.append(("index validation failed", repr(e)))
        return record

    def _pinned_read(self, model: ExplorerModel, out: Found) -> None:
        """By turns one key by ``==`` (the next of the key space each time), and
        ``isin`` of every edge key, another key and one never written."""
        self.reads += 1
        if self.reads % 2:
            one = (self.reads // 2) % KEYS
            expr, keys = pc.field("id") == one, {one}
        else:
            some = sorted({*EDGES, (self.reads * 5 + 3) % KEYS, KEYS + 16})
            expr, keys = pc.field("id").isin(some), set(some)
        try:
            scan = self.t.scan(filter=expr)
            plan = scan.explain()
            actual = scan.to_arrow()
        except LakelineError as e:
            out.append(("key-pinned read failed", f"{expr}: {e!r}"))
            return
        if plan["files_after_record_index_pruning"] < plan["files_after_bloom_pruning"]:  # type: ignore[operator]
            self.pruned += 1
        names, expected = model.names(), model.render(keys)
        if actual.schema.names != names:
            out.append(("key-pinned read differs from model", f"{expr}: columns {actual.schema.names}, model {names}"))
        elif (rows := table_rows(actual, names)) != expected:
            out.append(("key-pinned read differs from model", f"{expr} ({plan}): {diff_rows(rows, expected)}"))
