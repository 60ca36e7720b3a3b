"""A service whose completion's answer was lost (audit 2026-12-07, AC11/AC12, D6).

When the ``completed`` event's put fails and the log cannot be read back, the outcome is
unknown; the service then tries to abort (safe: the ``rolled_back`` append is
conditional). The store that lost the answer usually fails the abort too, and the error
read ``store failed while appending compaction.rolled_back``: the abort, not the
ambiguous completion. It must name the unknown completion and say the abort failed too;
and when the abort finds the instant completed, the run succeeded.

The store is the real file-system event log with its put and read failing on cue, as in
tests/table/write/test_outcomes.py (a put that lands and then loses its answer).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from lakeline.table import Table
from lakeline.timeline.errors import CommitOutcomeUnknownError, StoreUnavailableError
from lakeline.timeline.instant import Event, State

pytestmark = pytest.mark.usefixtures("no_faults")

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


class LostAnswer:
    """The completed put of ``action`` lands, then its answer is lost and the next
    ``failed_reads`` reads of the log fail (every put fails while reads do)."""

    def __init__(self, t: Table, action: str, failed_reads: int) -> None:
        self.store = store = t.log.store
        self.action = action
        self.failed_reads = failed_reads
        self.reads_failed = 0
        self.broken = False
        self._put, self._read = store.put_if_absent, store.read_from
        store.put_if_absent = self.put  # type: ignore[method-assign]
        store.read_from = self.read  # type: ignore[method-assign]

    def put(self, event: Event) -> None:
        if self.broken:
            raise StoreUnavailableError("the server went away")
        self._put(event)
        if event.state is State.COMPLETED and event.action.value == self.action and not self.reads_failed:
            self.broken = True
            raise StoreUnavailableError("the answer to the put was lost")

    def read(self, seq: int) -> list[Event]:
        if self.broken:
            self.reads_failed += 1
            self.broken = self.reads_failed < self.failed_reads
            raise StoreUnavailableError("reading the log failed: the server went away")
        return self._read(seq)

    def heal(self) -> None:
        self.broken = False
        self.store.put_if_absent, self.store.read_from = self._put, self._read  # type: ignore[method-assign]


def table(tmp: Path) -> Table:
    t = Table.create(tmp / "t", SCHEMA, record_key="id", ordering_field="ts", table_type="mor")
    t.upsert(pa.table({"id": [1, 2, 3], "ts": [1, 1, 1], "v": ["a", "b", "c"]}, schema=SCHEMA))
    t.upsert(pa.table({"id": [2], "ts": [2], "v": ["B"]}, schema=SCHEMA))
    return t


def run(t: Table, service: str) -> object:
    return t.services.compact() if service == "compaction" else t.services.cluster()


ACTIONS = {"compaction": "compaction", "clustering": "replacecommit"}


@pytest.mark.parametrize("service", ["compaction", "clustering"])
def test_an_unknown_completion_whose_abort_fails_names_both(tmp_path: Path, service: str) -> None:
    t = table(tmp_path)
    lost = LostAnswer(t, ACTIONS[service], failed_reads=1000)
    with pytest.raises(CommitOutcomeUnknownError) as e:
        run(t, service)
    text = str(e.value)
    assert f"{service} instant" in text and "whether it completed is unknown" in text, text
    assert "rolling it back failed too" in text and "nothing was deleted" in text, text
    assert not text.startswith("store failed while appending"), text
    lost.heal()
    again = Table.open(t.storage.uri)
    assert again.timeline.instants()[-1].state == "completed"  # it had landed; nothing lost
    assert dict(zip(*again.to_arrow(columns=["id", "v"]).to_pydict().values(), strict=True)) == {1: "a", 2: "B", 3: "c"}


@pytest.mark.parametrize("service", ["compaction", "clustering"])
def test_an_abort_that_finds_the_instant_completed_reports_success(tmp_path: Path, service: str) -> None:
    """The log is readable again by the time of the abort: its conditional append finds
    the instant completed, so the run succeeded (it was a false failure)."""
    t = table(tmp_path)
    LostAnswer(t, ACTIONS[service], failed_reads=3)  # the completion's own read-back gives up after 3
    result = run(t, service)
    assert result.instant is not None and result.instant.state == "completed"  # type: ignore[attr-defined]
    assert result.aborted is None  # type: ignore[attr-defined]
