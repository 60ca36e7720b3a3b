"""The invariants the explorer checks after every step, and after recovery at the end.

* Every completed snapshot (``to_arrow(as_of=id)`` of each completed data or schema
  instant) equals the model of the committed writes and schema changes folded in
  *completion order* (``timeline.completed()``), rows and column names and types (the
  schema of then, :mod:`.schema_model`); a write that raised did not happen, a write
  whose instant completed did, whatever its caller saw, and it must fit the schema at
  its completion (a write racing a rename lands conformed or fails typed).
* No record (partition, key) twice in any snapshot.
* While a record index is ready, reads that pin the key (``==``, ``isin``) equal the
  model (and the checker counts how many the index pruned).
* Every snapshot inside retention or under a savepoint reads; one outside is refused
  with ``SnapshotExpiredError`` (the rule of :mod:`lakeline.timeline.retention`).
* Every ``ready`` index, and the files index's checkpoint, validate.
* Operations end in a typed error (``LakelineError``) or a result that matches the
  timeline: a write or schema change reported as failed did not complete, a write
  reported as done did; a write refused for its schema had a schema change land after
  it read the schema.
* After recovery (:meth:`Checker.recovered`): nothing pending, no file or marker of a
  rolled-back instant on disk.

Reading every snapshot after every step would be slow, so a snapshot whose rows were
verified is read again only when a data file disappeared from disk since (a clean, a
rollback), when its retention status changed, or at the end.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakeline.timeline.errors import LakelineError, SchemaMismatchError, SnapshotExpiredError, UnknownColumnError
from lakeline.timeline.instant import Action, State
from lakeline.timeline.markers import instants_with_markers
from lakeline.timeline.retention import furthest_retain_seq, pinned_seqs
from lakeline.timeline.storage.ownership import walk_files
from lakeline.timeline.view.file_group import parse_data_file_name

from tests.table.model import ModelDuplicateKey, table_rows

from .index_checks import IndexChecks
from .ops import TXN_APP, Op
from .schema_model import ExplorerModel, diff_rows, last_schema_instant

if TYPE_CHECKING:
    from lakeline.table import Table
    from lakeline.timeline.storage.filesystem import Storage

    from .scheduler import Scheduler


@dataclass(frozen=True)
class Violation:
    """One broken invariant, with enough detail to see why."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


def data_files(storage: Storage) -> set[str]:
    """Relative paths of the table's data files (``.lakeline/`` excluded), on a local
    disk or an object store."""
    return {rel for i in walk_files(storage) if (rel := storage.relative(i.path)).endswith(".parquet")}


def _pending_retain(tl: Any) -> int | None:
    """The furthest retain point of a clean still pending: reads before it may meet
    files it already deleted (and are then refused with ``SnapshotExpiredError``) or may
    still read in full; both are accepted until the clean completes."""
    seqs = [
        int(i.plan["retain_seq"])
        for i in tl.pending()
        if i.action is Action.CLEAN and i.plan.get("retain_seq") is not None
    ]
    return max(seqs) if seqs else None


#: What one snapshot must read: column names, their types, the rows in canonical order.
Expected = tuple[list[str], list[str], list[tuple[Any, ...]]]


class Checker:
    """Checks one run's table; reads through its own handle (a thread the scheduler
    never parks)."""

    def __init__(
        self, table: Table, root: str, sched: Scheduler, setup_ops: dict[int, tuple[Op, dict[str, Any]]]
    ) -> None:
        self.t = table
        self.root = root
        self.sched = sched
        self.setup_ops = setup_ops
        self.verified: dict[int, tuple[bool, int]] = {}
        self.files_seen: set[str] = set()
        self.fingerprint: tuple[int, int] | None = None
        self.outcomes_seen: dict[int, int] = {}
        self.checks = 0
        self.index_checks = IndexChecks(table)

    def op_of(self, instant: int) -> tuple[Op, dict[str, Any]] | None:
        """The operation that requested ``instant``, and what it read of the schema."""
        if instant in self.setup_ops:
            return self.setup_ops[instant]
        where = self.sched.instant_op.get(instant)
        if where is None:
            return None
        actor, op = where
        return self.sched.actors[actor].ops[op], self.sched.seen.get(where, {})

    def instants_of(self, actor: int, op: int) -> list[int]:
        return sorted(i for i, where in self.sched.instant_op.items() if where == (actor, op))

    # -- the model ---------------------------------------------------------------------

    def snapshots(self, out: list[Violation]) -> tuple[list[tuple[Any, Expected]], ExplorerModel]:
        """(instant, what it reads) of each completed data or schema instant, in
        completion order, and the model after the last."""
        model = ExplorerModel()
        snaps: list[tuple[Any, Expected]] = []
        txn_version = -1  # the newest version of TXN_APP landed so far, in completion order
        for n, inst in enumerate(self.t.timeline.completed()):
            found = self.op_of(inst.id)
            op, seen = found if found is not None else (None, {})
            if inst.action is Action.SCHEMA:
                if op is None and n == 0:
                    continue  # the table's creation
                if op is None or not op.is_schema or "steps" not in seen:
                    out.append(Violation("unknown schema change", f"completed schema instant {inst.id} of {op}"))
                    continue
                why = model.apply_schema(seen["steps"])
                if why is not None:
                    out.append(Violation("schema change landed where it does not fit", f"instant {inst.id}: {why}"))
                snaps.append((inst, model.expected()))
                continue
            if not inst.action.writes_data:
                continue
            raw = inst.metadata.get("txn")
            if raw is not None or (op is not None and op.kind == "txn_upsert"):
                got = (raw or {}).get("version")
                if op is None or op.kind != "txn_upsert" or got != op.version or raw.get("app_id") != TXN_APP:
                    out.append(Violation("txn recorded wrong", f"instant {inst.id} records txn {raw} for {op}"))
                elif got <= txn_version:
                    out.append(
                        Violation(
                            "txn landed twice",
                            f"instant {inst.id} {op.label()} landed version {got} after version {txn_version}",
                        )
                    )
                else:
                    txn_version = got
            if op is not None and op.is_write:
                try:
                    why = op.apply(model, seen)
                    if why is not None:
                        out.append(
                            Violation(
                                "write landed on a schema it does not fit", f"instant {inst.id} {op.label()}: {why}"
                            )
                        )
                except ModelDuplicateKey:
                    out.append(
                        Violation(
                            "duplicate insert committed",
                            f"instant {inst.id} {op.label()} inserted a record the table held in completion order",
                        )
                    )
            elif inst.plan.get("writer"):
                out.append(Violation("unknown writer", f"completed write instant {inst.id} of no actor"))
            snaps.append((inst, model.expected()))
        return snaps, model

    # -- after every step --------------------------------------------------------------

    def check(self, final: bool = False) -> list[Violation]:
        out: list[Violation] = []
        self._outcomes(out)
        tl = self.t.timeline
        files = data_files(self.t.storage)
        fingerprint = (tl.last_seq, hash(frozenset(files)))
        if fingerprint == self.fingerprint and not final:
            return out
        self.fingerprint = fingerprint
        self.checks += 1
        recheck = bool(self.files_seen - files) or final
        self.files_seen = files
        snaps, model = self.snapshots(out)
        retain = furthest_retain_seq(tl)
        cleaning = _pending_retain(tl)
        pinned = set(pinned_seqs(tl))
        for inst, expected in snaps:
            seq = inst.completed_seq
            retained = retain is None or seq >= retain or seq in pinned
            limbo = retained and cleaning is not None and seq < cleaning and seq not in pinned
            stamp = (retained, hash((tuple(expected[0]), tuple(expected[1]), tuple(expected[2]))))
            if not recheck and self.verified.get(inst.id) == stamp:
                continue
            try:
                actual = self.t.to_arrow(as_of=inst.id)
            except SnapshotExpiredError as e:
                if retained and not limbo:
                    out.append(
                        Violation(
                            "retained snapshot unreadable",
                            f"as_of={inst.id} (seq {seq}, retain point {retain}, pinned {sorted(pinned)}): {e}",
                        )
                    )
                else:
                    self.verified[inst.id] = stamp
                continue
            except Exception as e:  # noqa: BLE001 - any failed read of a snapshot is a finding
                out.append(Violation("snapshot read failed", f"as_of={inst.id} (retained={retained}): {e!r}"))
                continue
            if not retained:
                out.append(
                    Violation(
                        "expired snapshot read",
                        f"as_of={inst.id} (seq {seq}) is before retain point {retain} and unpinned, yet it read",
                    )
                )
            before = len(out)
            self._compare(actual, expected, f"as_of={inst.id} ({inst.action})", out)
            if len(out) == before:
                self.verified[inst.id] = stamp
        if snaps:
            try:
                self._compare(self.t.to_arrow(), snaps[-1][1], "current read", out)
            except LakelineError as e:
                out.append(Violation("current read failed", repr(e)))
        out.extend(Violation(kind, detail) for kind, detail in self.index_checks.check(tl, model, final))
        return out

    def _compare(self, actual: Any, expected: Expected, what: str, out: list[Violation]) -> None:
        """``actual`` (an Arrow table) reads ``expected``: names, types, rows, no record twice."""
        names, types, rows_expected = expected
        got_types = [str(f.type) for f in actual.schema]
        if actual.schema.names != names or got_types != types:
            out.append(
                Violation(
                    "snapshot schema differs from completion-order model",
                    f"{what}: reads {list(zip(actual.schema.names, got_types))}, model {list(zip(names, types))}",
                )
            )
            return
        rows = table_rows(actual, names)
        i, d = names.index("id"), names.index("day")
        twice = [k for k, n in Counter((r[d], r[i]) for r in rows).items() if n > 1]
        if twice:
            out.append(Violation("key twice", f"{what}: records {sorted(twice)} appear twice"))
        if rows != rows_expected:
            out.append(
                Violation("snapshot differs from completion-order model", f"{what}: {diff_rows(rows, rows_expected)}")
            )

    def _outcomes(self, out: list[Violation]) -> None:
        tl = None
        for a in self.sched.actors:
            seen = self.outcomes_seen.get(a.index, 0)
            for n, o in enumerate(a.outcomes[seen:], start=seen):
                tl = tl or self.t.timeline
                op = a.ops[n]
                mine = self.instants_of(a.index, n)
                done = [
                    i
                    for i in mine
                    if (x := tl.find(i)) is not None
                    and x.is_completed
                    and (x.action.writes_data or x.action is Action.SCHEMA)
                ]
                o.instants = mine
                if o.error is not None and not isinstance(o.error, LakelineError):
                    out.append(Violation("untyped error", f"{a.name} {o.label}: {o.error!r}"))
                if (op.is_write or op.is_schema) and o.error is not None and done:
                    out.append(
                        Violation(
                            "committed write reported as failed",
                            f"{a.name} {o.label} raised {o.error!r} but instant(s) {done} completed",
                        )
                    )
                read_at = self.sched.seen.get((a.index, n), {}).get("schema_at", -1)
                if (
                    op.is_write
                    and isinstance(o.error, (SchemaMismatchError, UnknownColumnError))
                    and read_at == last_schema_instant(tl)
                ):
                    out.append(
                        Violation(
                            "write refused for its schema with no schema change since it read it",
                            f"{a.name} {o.label} raised {o.error!r}; last schema instant {read_at}",
                        )
                    )
                if op.is_write and o.ok and o.result is not None and o.result.instant is not None:
                    if o.result.instant.id not in done:
                        out.append(
                            Violation(
                                "reported write not completed",
                                f"{a.name} {o.label} returned instant {o.result.instant.id}",
                            )
                        )
            self.outcomes_seen[a.index] = len(a.outcomes)

    def tally(self) -> Counter[str]:
        """How the actors' operations ended ("schema(rename): SchemaMismatchError",
        "upsert: ok", ...) and the key-pinned reads checked and pruned."""
        out: Counter[str] = Counter()
        for a in self.sched.actors:
            for op, o in zip(a.ops, a.outcomes):
                kind = f"{op.kind}({op.name})" if op.kind in ("schema", "index_create") else op.kind
                out[f"{kind}: {'ok' if o.ok else type(o.error).__name__}"] += 1
        out["pinned reads"] += self.index_checks.reads
        out["pinned reads the index pruned"] += self.index_checks.pruned
        return out

    # -- after recovery ----------------------------------------------------------------

    def recovered(self) -> list[Violation]:
        """Nothing pending, and nothing of a rolled-back instant left on disk."""
        out: list[Violation] = []
        tl = self.t.timeline
        pending = [f"{i.id} {i.action} {i.state} {dict(i.plan)}"[:160] for i in tl.pending()]
        if pending:
            out.append(Violation("pending after recovery", "; ".join(pending)))
        rolled = {i.id for i in tl.instants() if i.state is State.ROLLED_BACK}
        left = sorted(
            f for f in data_files(self.t.storage) if (p := parse_data_file_name(f)) is not None and p.instant in rolled
        )
        if left:
            out.append(Violation("file of a rolled-back instant remains", str(left[:5])))
        marked = sorted(set(instants_with_markers(self.t.storage)) & rolled)
        if marked:
            out.append(Violation("markers of a rolled-back instant remain", str(marked)))
        return out
