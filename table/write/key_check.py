"""The key check at completion: the conflict rules that need keys, not just file groups.

Per file group, :func:`lakeline.timeline.conflicts.find_conflict` decides from commit
metadata alone. Across file groups only keys tell whether two commits collide, so a
write describes what it asserts about keys (:class:`KeyClaims`) and, right before its
``completed`` event, compares that with what each concurrent commit (completed after its
snapshot) wrote. A hit is a conflict: the attempt is rolled back and the write replayed
from a fresh snapshot, where tagging sees the concurrent commit.

This is what makes every snapshot equal the committed writes applied one after another
in completion order (docs/concurrency.md §2, "serializable in completion order"), with
no key twice:

1. *Keys we insert as new* (new file groups, small files filled, a small group's log)
   against keys they inserted or upserted through a log: both would hold the key, in
   two groups.
2. *Keys we upsert through a log* against keys they inserted as new (their files
   marked ``inserts``, merge-on-read logs that filled a small group included): our log
   revives the key in a group it was deleted from while they started it anew in another.
3. *Keys we delete*, every key the delete names whether our snapshot held it or not,
   against keys they inserted or upserted through a log. In completion order our delete
   comes last and must remove their copy, which our snapshot did not see (or saw in
   another group). One case is not a hit: their log upsert of a key into the very group
   our log deletes it from, since logs of one group merge in completion order anyway.
4. *A delete by predicate* (``delete_where``) against every row they wrote (inserted,
   upserted, rewritten): a row matching the predicate now is one our delete, applied
   last, would remove; and a key we delete that they upserted may no longer match, so
   rule 3 applies without its exception.
5. *Keys we update* (``update``: read, then rewritten with new values) against every
   record they wrote for those keys, upserts and deletes alike: our new values were
   computed from a version their commit replaced, so applied last they would undo it
   (a lost update, or a deleted row revived). ``update`` also carries its ``where`` as
   the predicate of rule 4: a row they wrote that matches it is a row it must change.

Compaction and clustering outputs are never hits: they move no key that a concurrent
write could see differently (a write into their input groups aborts them, and a write
into a group they replaced conflicts by file group). A file that a clean removed before
we could read it is a hit too: the commit that replaced it is concurrent as well, and
the replay sees the table as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ...timeline.commit_metadata import CommitMetadata, Operation, WriteStat
from ...timeline.conflicts import KeyCheck
from ...timeline.storage.filesystem import Storage
from ...timeline.view.file_group import FileKind
from ..files import FileRead, read_file, with_columns_of
from .plan import PARTITION, WritePlan
from .records import OP, OP_DELETE, OP_UPSERT, constant

#: Column of ``KeyClaims.deleted_in_group`` naming the file group a delete record goes to.
GROUP = "__lakeline_fg"  # in memory only, under the reserved prefix
#: Operations whose files move no key a concurrent writer could see differently.
_SERVICE_OPERATIONS = frozenset({Operation.COMPACT, Operation.CLUSTER})


@dataclass(frozen=True)
class KeyClaims:
    """What one write attempt asserts about keys, for the key check at completion.

    Each table holds the record-key columns and :data:`PARTITION` (null in ``deleted``: the
    delete named the key in every partition).
    """

    key: tuple[str, ...]
    inserted: pa.Table | None = None
    log_upserted: pa.Table | None = None
    deleted: pa.Table | None = None
    #: Delete records this attempt writes into merge-on-read logs, with :data:`GROUP`.
    deleted_in_group: pa.Table | None = None
    #: ``delete_where``'s predicate (rule 4), also for tables without a record key.
    predicate: pc.Expression | None = None
    #: Keys an update read and rewrote (rule 5), with :data:`PARTITION`.
    updated: pa.Table | None = None

    @property
    def empty(self) -> bool:
        return self.predicate is None and not any(
            t is not None and t.num_rows for t in (self.inserted, self.log_upserted, self.deleted, self.updated)
        )

    @classmethod
    def of(cls, plan: WritePlan, key: tuple[str, ...]) -> KeyClaims:
        """The claims of a planned attempt."""
        upserts: list[pa.Table] = []
        deletes: list[pa.Table] = []
        for lg in plan.logs:
            ops = lg.incoming.column(OP)
            for op, out in ((OP_UPSERT, upserts), (OP_DELETE, deletes)):
                rows = lg.incoming.filter(pc.equal(ops, op))
                if rows.num_rows:
                    keys = rows.select(list(key)).append_column(PARTITION, constant(lg.partition, rows.num_rows))
                    if op == OP_DELETE:
                        keys = keys.append_column(GROUP, constant(lg.slice.file_group, rows.num_rows))
                    out.append(keys)
        return cls(
            key=key,
            inserted=plan.new_keys,
            log_upserted=pa.concat_tables(upserts) if upserts else None,
            deleted=plan.deleted_keys,
            deleted_in_group=pa.concat_tables(deletes) if deletes else None,
            predicate=plan.delete_predicate,
            updated=plan.updated_keys,
        )


def _in_partition(
    keys: pa.Table | None, partition: str, key: tuple[str, ...], any_partition: bool = False
) -> pa.Table | None:
    """The key columns of ``keys`` in ``partition`` (and, with ``any_partition``, those
    named for every partition), None when there are none."""
    if keys is None or keys.num_rows == 0 or not key:
        return None
    col = keys.column(PARTITION)
    mask = pc.equal(col, partition)
    if any_partition:
        mask = pc.or_kleene(mask, pc.is_null(col))
    hit = keys.filter(pc.fill_null(mask, False))
    return hit.select(list(key)) if hit.num_rows else None


def _outside_range(f: WriteStat, keys: list[pa.Table], key: tuple[str, ...]) -> bool:
    """Whether every key of ``keys`` lies outside the file's recorded key range."""
    if len(key) != 1 or f.key_min is None or f.key_max is None:
        return False
    for t in keys:
        col = t.column(key[0])
        try:
            inside = pc.and_(
                pc.greater_equal(col, pa.scalar(f.key_min, col.type)),
                pc.less_equal(col, pa.scalar(f.key_max, col.type)),
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return False
        if pc.any(inside).as_py():
            return False
    return True


def _meets(rows: pa.Table, mine: pa.Table | None, key: tuple[str, ...]) -> bool:
    if mine is None or rows.num_rows == 0:
        return False
    return rows.select(list(key)).join(mine, list(key), join_type="inner", use_threads=False).num_rows > 0


def key_check(storage: Storage, schema: pa.Schema, claims: KeyClaims) -> KeyCheck | None:
    """The check :func:`~lakeline.timeline.conflicts.find_conflict` runs against each
    concurrent commit (True: a conflict), or None when the attempt claims nothing."""
    if claims.empty:
        return None
    key = claims.key

    def check(ours: CommitMetadata, theirs: CommitMetadata) -> bool:
        if theirs.operation in _SERVICE_OPERATIONS:
            return False
        for f in theirs.files:
            new_rows = f.inserts or f.kind == FileKind.LOG  # rows whose keys they made live
            if new_rows and _updated_meets(storage, f, claims, key):
                return True
            if not new_rows and claims.predicate is None:
                continue
            p = f.partition
            mine_new = _in_partition(claims.inserted, p, key)
            mine_log = _in_partition(claims.log_upserted, p, key) if f.inserts else None
            mine_del = _in_partition(claims.deleted, p, key, any_partition=True)
            relevant = [t for t in (mine_new, mine_log, mine_del) if t is not None]
            if claims.predicate is None and (not relevant or _outside_range(f, relevant, key)):
                continue
            try:
                rows = _their_rows(storage, schema, f, key, claims.predicate is not None)
            except FileNotFoundError:
                return True  # cleaned meanwhile: a later commit replaced it; replay
            if claims.predicate is not None and rows.filter(claims.predicate).num_rows:
                return True
            if not new_rows:
                continue
            if _meets(rows, mine_new, key) or _meets(rows, mine_log, key):
                return True
            if mine_del is not None and f.kind == FileKind.LOG and claims.predicate is None:
                # Logs of one group merge in completion order: our delete record in this
                # group already follows their upsert there.
                ours_here = _in_partition(_in_group(claims.deleted_in_group, f.file_group), p, key)
                if ours_here is not None:
                    rows = rows.select(list(key)).join(ours_here, list(key), join_type="left anti", use_threads=False)
            if _meets(rows, mine_del, key):
                return True
        return False

    return check


def _updated_meets(storage: Storage, f: WriteStat, claims: KeyClaims, key: tuple[str, ...]) -> bool:
    """Rule 5: whether their file holds a record (upsert or delete) of a key we updated."""
    mine = _in_partition(claims.updated, f.partition, key)
    if mine is None or _outside_range(f, [mine], key):
        return False
    try:
        keys = read_file(FileRead(storage, f.path, key, size=f.bytes))
    except FileNotFoundError:
        return True  # cleaned meanwhile: a later commit replaced it; replay
    return _meets(keys, mine, key)


def _in_group(keys: pa.Table | None, group: str) -> pa.Table | None:
    if keys is None:
        return None
    hit = keys.filter(pc.equal(keys.column(GROUP), group))
    return hit if hit.num_rows else None


def _their_rows(storage: Storage, schema: pa.Schema, f: WriteStat, key: tuple[str, ...], whole_rows: bool) -> pa.Table:
    """The rows a concurrent commit's file makes live: every row of a base file, the
    upsert records of a log. Only the key columns unless ``whole_rows`` (a predicate
    needs the others; columns added to the schema later read as nulls)."""
    columns = None if whole_rows else key + ((OP,) if f.kind == FileKind.LOG else ())
    rows = read_file(FileRead(storage, f.path, columns, size=f.bytes))
    if f.kind == FileKind.LOG:
        rows = rows.filter(pc.equal(rows.column(OP), OP_UPSERT)).drop_columns([OP])
    return with_columns_of(rows, schema) if whole_rows else rows
