"""The conflict rules return a typed reason (timeline/conflicts.py): which rule, which
concurrent instant, and what it hit; its text is the message errors carry."""

from __future__ import annotations

from lakeline.timeline.commit_metadata import CommitMetadata, WriteStat
from lakeline.timeline.conflicts import Conflict, ConflictKind, find_conflict, find_input_conflict
from lakeline.timeline.instant import Action, Instant, State


def _stat(group: str, kind: str, partition: str = "day=1") -> WriteStat:
    return WriteStat(f"{partition}/{group}_{kind}.parquet", partition, group, kind, rows=1, bytes=1)  # type: ignore[arg-type]


def _completed(instant: int, action: Action, metadata: CommitMetadata) -> Instant:
    return Instant(instant, action, State.COMPLETED, 0, 1, metadata=metadata.to_dict(), completed_seq=instant)


def test_a_rewrite_of_a_group_written_meanwhile_is_a_typed_conflict() -> None:
    ours = CommitMetadata("upsert", 1, files=(_stat("fg1", "base"),), rewritten=(("day=1", "fg1"),))
    theirs = _completed(
        7, Action.COMMIT, CommitMetadata("upsert", 1, files=(_stat("fg1", "base"),), rewritten=(("day=1", "fg1"),))
    )
    reason = find_conflict(ours, [theirs])
    assert reason == Conflict(ConflictKind.WROTE_REWRITTEN_GROUPS, 7, Action.COMMIT, (("day=1", "fg1"),))
    assert str(reason).startswith("commit 7 wrote file groups this commit rewrites")


def test_disjoint_groups_do_not_conflict() -> None:
    ours = CommitMetadata("upsert", 1, files=(_stat("fg1", "base"),), rewritten=(("day=1", "fg1"),))
    theirs = _completed(
        7, Action.COMMIT, CommitMetadata("upsert", 1, files=(_stat("fg2", "base"),), rewritten=(("day=1", "fg2"),))
    )
    assert find_conflict(ours, [theirs]) is None


def test_an_overwrite_names_the_partitions_it_lost() -> None:
    ours = CommitMetadata("overwrite", 1, replaced_partitions=("day=1", "day=2"))
    theirs = _completed(9, Action.DELTA_COMMIT, CommitMetadata("insert", 1, files=(_stat("fg3", "log", "day=2"),)))
    reason = find_conflict(ours, [theirs])
    assert reason is not None and reason.kind is ConflictKind.WROTE_OVERWRITTEN_PARTITIONS
    assert reason.partitions == ("day=2",) and reason.instant == 9


def test_a_service_input_conflict_says_which_service_and_log_appends_pass_compaction() -> None:
    log_append = _completed(5, Action.DELTA_COMMIT, CommitMetadata("upsert", 1, files=(_stat("fg1", "log"),)))
    assert find_input_conflict({("day=1", "fg1")}, [log_append], "compaction", logs_ok=True) is None
    reason = find_input_conflict({("day=1", "fg1")}, [log_append], "clustering")
    assert reason is not None and reason.kind is ConflictKind.CHANGED_SERVICE_INPUTS
    assert "this clustering rewrites" in str(reason) and reason.groups == (("day=1", "fg1"),)
