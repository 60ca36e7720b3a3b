"""Several writer processes on one table, checked against a model afterwards.

Why: safety never depends on a lock (docs/concurrency.md): every completion is a
put-if-absent after the conflict rules ran against everything that completed after the
writer's snapshot. Only real processes racing on a real store show that this holds:
four processes upsert and delete random keys of a 64-key space, on a merge-on-read and
a copy-on-write table, on both timeline stores. Each worker logs every batch it wrote
and how it ended (committed with its instant id, CommitConflictError, or nothing to do).

The model is strictly completion order (docs/concurrency.md section 2, "serializable in
completion order"): the committed instants, in ``t.timeline.completed()`` order, applied with
the data their workers logged to a plain ``key -> value`` dict. An upsert sets the values of
its keys (the last completed wins); a delete removes every key it names, whether or not
its snapshot held the key. What a write's snapshot showed plays no part: a merge-on-read
delete that completes after a concurrent re-insert of its key must not leave the
re-inserted row behind (the library retries such a delete). Every mismatch fails, with
the write history of each differing key.

Then: no key appears twice, no row of an aborted batch is visible, no instant is left
pending, every ``rolled_back`` instant's files are gone, and every data file on disk
belongs to a completed instant.
"""

from __future__ import annotations

import bisect
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.table import Table
from lakeline.timeline.instant import Instant

from tests.children.table_workers import WORKERS_PY, check_files_on_disk, data_instants
from tests.helpers import finish, start_script, wait_for_files

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
KEYS = 64
MAX_RETRIES = 5


# -- the model ---------------------------------------------------------------------------


class CompletionOrderModel:
    """The table as a plain ``key -> value`` dict, built from the committed writes applied
    one after another in completion order (docs/concurrency.md section 2, "serializable
    in completion order").

    An upsert or insert sets the values of its keys (the ordering value is constant, so
    the last completed write wins); a delete removes every key it names, whether or not
    its snapshot held the key; ``delete_where`` removes every key in its range
    ``[lo, hi)``; an overwrite (unpartitioned) replaces the whole table. Nothing depends
    on what a write's snapshot showed: a write that completed is ordered by its
    ``completed`` event alone. The state after each write is kept for time-travel checks.
    """

    def __init__(self) -> None:
        self.state: dict[int, str] = {}
        self._seqs: list[int] = []  # completed_seq of each applied instant
        self._states: list[dict[int, str]] = []  # the state right after it
        self._writes: list[tuple[Instant, dict[str, Any]]] = []

    def apply(self, inst: Instant, rec: dict[str, Any]) -> None:
        op = rec["op"]
        if op in ("upsert", "insert"):
            for row in rec["rows"]:
                self.state[row["id"]] = row["v"]
        elif op == "delete":
            for k in rec["keys"]:
                self.state.pop(k["id"], None)
        elif op == "delete_where":
            lo, hi = rec["range"]
            for k in [k for k in self.state if lo <= k < hi]:
                del self.state[k]
        elif op == "overwrite":
            self.state = {row["id"]: row["v"] for row in rec["rows"]}
        else:
            raise AssertionError(f"unexpected op {op}")
        assert inst.completed_seq is not None, f"instant {inst.id} is not completed"
        assert not self._seqs or inst.completed_seq > self._seqs[-1], "instants not in completion order"
        self._seqs.append(inst.completed_seq)
        self._states.append(dict(self.state))
        self._writes.append((inst, rec))

    def rows(self) -> list[tuple[int, str]]:
        return sorted(self.state.items())

    def rows_at(self, seq: int) -> list[tuple[int, str]]:
        """The rows of the snapshot right after event ``seq`` (for time-travel checks)."""
        n = bisect.bisect_right(self._seqs, seq)
        return sorted(self._states[n - 1].items()) if n else []

    def history(self, key: int) -> list[str]:
        """Every committed write that named ``key``, in completion order."""
        out = []
        for inst, rec in self._writes:
            named = (
                any(r["id"] == key for r in rec.get("rows", ()))
                or any(k["id"] == key for k in rec.get("keys", ()))
                or ("range" in rec and rec["range"][0] <= key < rec["range"][1])
                or rec["op"] == "overwrite"
            )
            if named:
                snap = inst.metadata.get("snapshot_seq", inst.plan.get("snapshot_seq"))
                out.append(
                    f"{rec['op']} {rec.get('tag', '?')} instant {inst.id} snapshot_seq {snap} "
                    f"completed_seq {inst.completed_seq}"
                )
        return out

    def check(self, actual: list[tuple[int, str]], seq: int | None = None, what: str = "the table") -> None:
        """Fail unless ``actual`` (sorted ``(key, value)`` rows) equals the model (as of
        event ``seq``), printing each differing key's write history."""
        want = dict(self.rows() if seq is None else self.rows_at(seq))
        ids = [k for k, _ in actual]
        twice = sorted(k for k, n in Counter(ids).items() if n > 1)
        got = dict(actual)
        diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
        if not twice and not diff:
            return
        lines = [
            f"{what} differs from the completion-order model"
            + (f" as of seq {seq}" if seq is not None else "")
            + (f"; keys twice: {twice}" if twice else "")
        ]
        for k in sorted(set(diff) | set(twice)):
            lines.append(f"  key {k}: read {[v for kk, v in actual if kk == k]}, model {want.get(k)!r}; writes:")
            lines.extend(f"      {h}" for h in self.history(k))
        raise AssertionError("\n".join(lines))


# -- the run -----------------------------------------------------------------------------


def run_workers(
    tmp_path: Path,
    table_type: str,
    timeline: str | None,
    workers: int,
    commits: int | list[int],
    properties: dict[str, Any] | None = None,
    seed: int = 0,
    timeout: float = 600.0,
    options: list[dict[str, Any]] | None = None,
    keys: int = KEYS,
    location: str | None = None,
) -> tuple[Table, list[dict[str, Any]]]:
    """Create a table, race ``workers`` processes on it, return it and their records
    (``options``: the stress options of each worker, see tests/children/table_workers.py;
    ``commits`` may then be a list, one per worker; ``location``: where the table lives,
    default a folder under ``tmp_path``; the workers find an object store's options in
    the environment)."""
    path = location or str(tmp_path / f"table-{table_type}")
    props = {"commit.max-retries": MAX_RETRIES, "engine.parallelism": 1, **(properties or {})}
    Table.create(path, SCHEMA, record_key="id", table_type=table_type, properties=props, timeline=timeline)
    go = tmp_path / "go"
    procs, ready, logs = [], [], []
    for w in range(workers):
        ready.append(tmp_path / f"ready-{w}")
        logs.append(tmp_path / f"worker-{w}.jsonl")
        n = commits[w] if isinstance(commits, list) else commits
        procs.append(
            start_script(
                WORKERS_PY,
                [
                    "stress",
                    path,
                    timeline,
                    w,
                    n,
                    seed * 1000 + w,
                    str(logs[-1]),
                    str(ready[-1]),
                    str(go),
                    keys,
                    (options or [{}] * workers)[w],
                ],
            )
        )
    try:
        wait_for_files(ready, timeout=120)
    except AssertionError:
        for p in procs:
            p.kill()
        raise
    go.write_text("go")
    deadline = time.monotonic() + timeout
    for w, p in enumerate(procs):
        rc, _, err = finish(p, timeout=max(1.0, deadline - time.monotonic()))
        assert rc == 0, f"worker {w} failed (rc={rc}):\n{err[-4000:]}"
    records = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
    assert len(records) == (sum(commits) if isinstance(commits, list) else workers * commits)
    return Table.open(path, timeline=timeline), records


def check_against_model(t: Table, records: list[dict[str, Any]]) -> Counter[str]:
    """Every check of the module docstring; returns counts for the failure message."""
    outcomes = Counter(r["outcome"] for r in records)
    errors = [r for r in records if r["outcome"] not in ("committed", "conflict", "noop")]
    assert not errors, f"workers hit unexpected errors: {errors[:3]}"
    committed = {r["instant"]: r for r in records if r["outcome"] == "committed"}
    assert len(committed) == outcomes["committed"], "two writes reported the same instant"

    tl = t.timeline
    assert tl.pending() == [], f"instants left pending: {tl.pending()}"
    done = [i for i in tl.completed() if i.action.writes_data]
    assert [i.id for i in done if i.id not in committed] == [], "completed instants no worker reported"
    assert sorted(committed) == sorted(i.id for i in done), "reported commits missing from the timeline"
    rolled_back = [i for i in data_instants(tl) if i.state == "rolled_back"]
    retries = t.config.props.commit_max_retries
    assert len(rolled_back) >= (retries + 1) * outcomes["conflict"], (
        "each CommitConflictError ends max-retries + 1 attempts, each rolled back"
    )
    assert len(done) + len(rolled_back) == len(data_instants(tl))

    model = CompletionOrderModel()
    for inst in done:
        model.apply(inst, committed[inst.id])

    table = t.to_arrow()
    ids = table.column("id").to_pylist()
    actual = sorted(zip(ids, table.column("v").to_pylist()))
    model.check(actual)  # also fails on a key twice

    visible = set(table.column("v").to_pylist())
    written = {r["tag"] for r in committed.values() if r["op"] == "upsert"}
    assert visible <= written, f"rows of batches that never committed: {sorted(visible - written)}"

    check_files_on_disk(t)
    overlapped = sum(
        1
        for i in done
        if any(
            j.completed_seq is not None and int(i.metadata["snapshot_seq"]) < j.completed_seq < (i.completed_seq or 0)
            for j in done
        )
    )
    assert overlapped > 0, "no commit completed while another was in flight: the run proved nothing"
    outcomes["rolled_back"] = len(rolled_back)
    outcomes["overlapped"] = overlapped
    return outcomes


@pytest.mark.sampled_matrix
@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_four_writers_match_the_model(tmp_path: Path, table_type: str, timeline: str | None) -> None:
    t, records = run_workers(tmp_path, table_type, timeline, workers=4, commits=50)
    counts = check_against_model(t, records)
    print(f"{table_type} {'pg' if timeline else 'fs'}: {dict(counts)}")


@pytest.mark.soak
@pytest.mark.parametrize("table_type", ["mor", "cow"])
@pytest.mark.parametrize("seed", [1, 2])
def test_soak_many_writers_match_the_model(tmp_path: Path, table_type: str, timeline: str | None, seed: int) -> None:
    t, records = run_workers(
        tmp_path,
        table_type,
        timeline,
        workers=6,
        commits=150,
        seed=seed,
        properties={"commit.max-retries": 8},
        timeout=1800,
    )
    counts = check_against_model(t, records)
    print(f"{table_type} {'pg' if timeline else 'fs'} seed {seed}: {dict(counts)}")
