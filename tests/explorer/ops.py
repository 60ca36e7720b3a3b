"""The operations actors perform: every kind of instant, through the public API only.

An :class:`Op` is a frozen value (so a schedule is data that prints and replays): its
``run`` calls lakeline on an actor's handle, and for the writes ``apply`` is what the
same write does to the model (:class:`.schema_model.ExplorerModel`) when it lands, in
completion order. Rows and predicates are over *slots* (the columns' names at
creation): ``run`` puts them under the names and types the table has when the write
starts and records what it carried in ``seen`` (the schema actor renames, adds, drops
and widens columns meanwhile, :mod:`.schema_model`). Random operations come from
:func:`random_op` over a small key space with a few hot keys, so concurrent actors keep
meeting on the same records.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tests.table.model import SCHEMA, Pred, random_pred

from .schema_model import (
    ADDED,
    SCHEMA_STEPS,
    ExplorerModel,
    last_schema_instant,
    renamed,
    run_schema_step,
    slot_of,
    write_rows,
)

if TYPE_CHECKING:
    from lakeline.table import Table

Row = dict[str, Any]
#: The two partitions of every explorer table.
DAYS = ("2026-01-01", "2026-01-02")
#: Keys 0..KEYS-1. Each random schedule picks one or two hot keys among EDGES (the
#: lowest and highest keys of the setup's file groups, where a compaction that drops a
#: key moves the group's key range) and uses them three times in four.
KEYS = 24
EDGES = (0, 1, 9, 11, 14, 15)

WRITES = ("insert", "upsert", "delete", "delete_where", "overwrite", "txn_upsert")
#: The application of every ``txn_upsert`` (its versions come from a small range, so
#: actors race on one (app, version) and replay versions already landed).
TXN_APP = "explorer"
SERVICES = (
    "compact",
    "cluster",
    "clean",
    "archive",
    "rollback",
    "savepoint",
    "release",
    "index_create",
    "index_drop",
    "index_run",
    "schema",
)
INDEX_KINDS = {"bloom": "bloom_filters", "stats": "column_stats", "record": "record_index"}
#: Record index buckets: a few, so that the explorer's small tables span several.
RECORD_BUCKETS = 3


@dataclass(frozen=True)
class Op:
    """One public call: a write (with its rows, keys or predicate) or a service call."""

    kind: str
    rows: tuple[tuple[int, int, str, int], ...] = ()  # (id, ts, day, v)
    keys: tuple[int, ...] = ()
    pred: Pred | None = None
    name: str = ""
    version: int = 0  # a txn_upsert's txn version
    extra: bool = False  # rows carry a value in the added column (when the table has it)

    @property
    def is_write(self) -> bool:
        return self.kind in WRITES

    @property
    def is_schema(self) -> bool:
        return self.kind == "schema"

    def row_dicts(self) -> list[Row]:
        """The rows over slots (the added column: ``v`` when ``extra``, else null)."""
        return [
            {"id": i, "ts": ts, "day": d, "v": v, "s": f"s{v % 3}", ADDED: v if self.extra else None}
            for i, ts, d, v in self.rows
        ]

    def label(self) -> str:
        plus = "+x" if self.extra else ""
        if self.kind == "txn_upsert":
            return (
                f"{self.kind}{plus}(v{self.version}: {', '.join(f'{i}@{d[-1]}:ts{ts}' for i, ts, d, _ in self.rows)})"
            )
        if self.rows:
            return f"{self.kind}{plus}({', '.join(f'{i}@{d[-1]}:ts{ts}' for i, ts, d, _ in self.rows)})"
        if self.keys:
            return f"{self.kind}({', '.join(map(str, self.keys))})"
        if self.pred is not None:
            return f"{self.kind}({pred_text(self.pred)})"
        return f"{self.kind}({self.name})" if self.name else self.kind

    def run(self, t: Table, seen: dict[str, Any]) -> Any:
        """Do it on ``t``, recording in ``seen`` what it read of the schema (the columns
        its rows carried, the steps of a schema change); whatever lakeline raises
        propagates."""
        k = self.kind
        if k == "insert":
            return t.insert(write_rows(t, self.row_dicts(), seen))
        if k == "upsert":
            return t.upsert(write_rows(t, self.row_dicts(), seen))
        if k == "txn_upsert":
            return t.upsert(write_rows(t, self.row_dicts(), seen), txn=(TXN_APP, self.version))
        if k == "overwrite":
            return t.overwrite(write_rows(t, self.row_dicts(), seen))
        if k == "delete":
            return t.delete(pa.table({"id": pa.array(list(self.keys), pa.int64())}))
        if k == "delete_where":
            assert self.pred is not None
            seen["schema_at"] = last_schema_instant(t.log.refresh())
            names = {slot_of(f): f.name for f in t.config.schema}  # the names the table has now
            return t.delete_where(renamed(self.pred, names).expr())
        if k == "schema":
            return run_schema_step(t, self.name, seen)
        if k == "compact":
            return t.services.compact()
        if k == "cluster":
            return t.services.cluster()
        if k == "clean":
            return t.services.clean(policy="keep_latest_commits", retain=2, orphan_age_ms=0, dry_run=False)
        if k == "archive":
            return t.services.archive()
        if k == "rollback":
            return t.services.rollback_failed()
        if k == "savepoint":
            return t.services.savepoint()
        if k == "release":
            active = t.services.savepoints()
            return t.services.release_savepoint(active[0].id) if active else None
        if k == "index_create":
            kind = INDEX_KINDS[self.name]
            options = {"buckets": RECORD_BUCKETS} if kind == "record_index" else None
            return t.indexes.create(kind, wait=True, name=self.name, options=options)
        if k == "index_drop":
            return t.indexes.drop(self.name)
        if k == "index_run":
            return t.services.run("indexing")
        raise ValueError(f"unknown op {k!r}")

    def apply(self, model: ExplorerModel, seen: dict[str, Any]) -> str | None:
        """What this write does to the model when it lands (ModelDuplicateKey for an
        insert of a held record); the reason it could not have landed, else None."""
        k = self.kind
        if k == "delete":
            model.rows.delete([{"id": i} for i in self.keys], with_partition=False)
            return None
        if k == "delete_where":
            assert self.pred is not None
            model.rows.delete_where(self.pred)
            return None
        rows, why = model.landed(self.row_dicts(), seen.get("carried", {}))
        if why is not None:
            return why
        if k == "insert":
            model.rows.insert(rows)
        elif k in ("upsert", "txn_upsert"):  # a txn_upsert that lands at all lands as an upsert
            model.rows.upsert(rows)
        elif k == "overwrite":
            model.rows.overwrite(rows)
        return None


def pred_text(p: Pred) -> str:
    """A predicate on one line (Arrow prints value sets over several)."""
    if p.kind == "cmp":
        return f"{p.col} {p.op} {p.value!r}"
    if p.kind == "isin":
        return f"{p.col} in {list(p.values)}"
    if p.kind == "isnull":
        return f"{p.col} is null"
    if p.kind == "not":
        return f"not ({pred_text(p.args[0])})"
    return f"({pred_text(p.args[0])} {p.kind} {pred_text(p.args[1])})"


def hot_keys(rng: random.Random) -> tuple[int, ...]:
    return tuple(rng.sample(EDGES, rng.randint(1, 2)))


def _key(rng: random.Random, hot: tuple[int, ...]) -> int:
    return rng.choice(hot) if rng.random() < 0.75 else rng.randrange(KEYS)


def _rows(
    rng: random.Random, hot: tuple[int, ...], n: int, day: str | None = None
) -> tuple[tuple[int, int, str, int], ...]:
    out: dict[tuple[int, str], tuple[int, int, str, int]] = {}
    for _ in range(n):
        d = day or (DAYS[0] if rng.random() < 0.7 else DAYS[1])
        i = _key(rng, hot)
        out[(i, d)] = (i, rng.randint(0, 3), d, rng.randint(0, 99))
    return tuple(out.values())


def random_write(rng: random.Random, kind: str, hot: tuple[int, ...]) -> Op:
    extra = rng.random() < 0.5
    if kind in ("insert", "upsert"):
        return Op(kind, rows=_rows(rng, hot, rng.randint(1, 3)), extra=extra)
    if kind == "txn_upsert":
        return Op(kind, rows=_rows(rng, hot, rng.randint(1, 3)), version=rng.randint(0, 3), extra=extra)
    if kind == "overwrite":
        return Op(kind, rows=_rows(rng, hot, rng.randint(2, 6), day=rng.choice(DAYS)), extra=extra)
    if kind == "delete":
        return Op(kind, keys=tuple(sorted({_key(rng, hot) for _ in range(rng.randint(1, 2))})))
    if kind == "delete_where":
        if rng.random() < 0.6:
            return Op(kind, pred=Pred("isin", col="id", values=tuple(sorted({_key(rng, hot) for _ in range(2)}))))
        return Op(kind, pred=random_pred(rng, list(DAYS), depth=1))
    raise ValueError(kind)


#: Relative weights of random operations (merge-on-read tables add compaction).
WEIGHTS = {
    "upsert": 8,
    "txn_upsert": 2,
    "delete": 6,
    "insert": 3,
    "delete_where": 2,
    "overwrite": 1,
    "compact": 5,
    "cluster": 2,
    "clean": 2,
    "archive": 1,
    "rollback": 2,
    "savepoint": 1.5,
    "release": 1,
    "index_create": 1.5,
    "index_drop": 0.6,
    "index_run": 0.4,
    "schema": 2.5,
}
#: Relative weights of the schema actor's steps (adds first: drops and widenings need
#: the added column, and are refused typed without it).
SCHEMA_WEIGHTS = {"add": 3, "rename": 3, "drop": 2, "widen": 2.5}
assert tuple(SCHEMA_WEIGHTS) == SCHEMA_STEPS


def random_op(rng: random.Random, table_type: str, hot: tuple[int, ...], only: tuple[str, ...] | None = None) -> Op:
    """A random operation (of the kinds in ``only``, if given)."""
    kinds = [k for k in WEIGHTS if (table_type == "mor" or k != "compact") and (only is None or k in only)]
    kind = rng.choices(kinds, weights=[WEIGHTS[k] for k in kinds])[0]
    if kind in WRITES:
        return random_write(rng, kind, hot)
    if kind.startswith("index_") and kind != "index_run":
        return Op(kind, name=rng.choices(sorted(INDEX_KINDS), weights=[1, 2, 1])[0])  # bloom, record, stats
    if kind == "schema":
        return Op(kind, name=rng.choices(SCHEMA_STEPS, weights=list(SCHEMA_WEIGHTS.values()))[0])
    return Op(kind)


def initial_rows(rng: random.Random | None = None, n: int = 16) -> list[Row]:
    """The rows a run's table starts with (both partitions, every hot key)."""
    out = []
    for d in DAYS:
        for i in range(n):
            out.append({"id": i, "ts": 0, "day": d, "v": i, "s": "s0" if rng is None else f"s{rng.randint(0, 2)}"})
    return out


__all__ = [
    "DAYS",
    "SCHEMA",
    "SERVICES",
    "TXN_APP",
    "WRITES",
    "Op",
    "hot_keys",
    "initial_rows",
    "random_op",
    "random_write",
]
