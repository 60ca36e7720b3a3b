"""Write hooks (docs/hooks.md, issue 15): validators before the commit,
callbacks and inline services after it.

* A refusing validator leaves nothing: the write raises ValidationError naming the
  validator, its instant is rolled back, no row of it is visible and no file of it is on
  disk, for every write operation on both table types.
* Validators see the table before and after (counts, changed rows), and bad validator
  input is refused before anything is written.
* Callbacks run once per landed commit and never fail it; an HTTP callback on a loopback
  server receives every commit of three writer processes exactly once.
* Inline compaction runs on the write after the trigger's N delta commits, also with a
  runner process compacting the same table beside three writer processes: no
  compaction instant completes twice, nothing is left pending, the runner exits 0 on
  SIGTERM, and the table equals its model.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.services import inline
from lakeline.table import Hooks, InvalidPropertyError, Table, UnknownColumnError, ValidationContext, ValidationError
from lakeline.table.callbacks import http_post
from lakeline.table.validators import no_nulls, row_count_change, rows_satisfy
from lakeline.timeline.errors import InvalidHookError, UnknownServiceError
from lakeline.timeline.instant import Action, State

from tests.children.table_workers import WORKERS_PY, check_files_on_disk, data_files_on_disk
from tests.helpers import child_env, finish, start_script, wait_for_files
from tests.table.concurrency.test_concurrency import CompletionOrderModel

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.float64())])


def _table(tmp_path: Path, table_type: str, **props: Any) -> Table:
    t = Table.create(
        str(tmp_path / table_type),
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        table_type=table_type,
        properties={"engine.parallelism": 1, **props},
    )
    t.insert(pa.table({"id": [1, 2, 3], "ts": [1, 1, 1], "v": [1.0, 2.0, 3.0]}))
    return t


def _rows(t: Table) -> list[tuple[int, float]]:
    out = t.to_arrow()
    return sorted(zip(out.column("id").to_pylist(), out.column("v").to_pylist()))


def refuse(ctx: ValidationContext) -> None:
    raise ValidationError("never")


WRITES = {
    "insert": lambda t, h: t.insert(pa.table({"id": [9], "ts": [1], "v": [9.0]}), hooks=h),
    "upsert": lambda t, h: t.upsert(pa.table({"id": [1, 9], "ts": [2, 2], "v": [10.0, 9.0]}), hooks=h),
    "delete": lambda t, h: t.delete(pa.table({"id": [2]}), hooks=h),
    "delete_where": lambda t, h: t.delete_where(pc.field("id") >= 2, hooks=h),
    "overwrite": lambda t, h: t.overwrite(pa.table({"id": [7], "ts": [1], "v": [7.0]}), hooks=h),
    "update": lambda t, h: t.update(where=pc.field("id") == 3, set={"v": pc.field("v") + 1}, hooks=h),
}


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("op", list(WRITES))
def test_a_refusing_validator_leaves_no_row_and_no_file(tmp_path: Path, table_type: str, op: str) -> None:
    t = _table(tmp_path, table_type)
    rows, files = _rows(t), data_files_on_disk(t)
    with pytest.raises(ValidationError, match="validator refuse refused"):
        WRITES[op](t, Hooks(validators=[refuse]))
    assert _rows(Table.open(t.path)) == rows
    assert data_files_on_disk(t) == files, "the refused write left data files behind"
    last = t.timeline.instants()[-1]
    assert last.action.writes_data and last.state is State.ROLLED_BACK
    assert t.timeline.pending() == []
    check_files_on_disk(t)
    # The same write without the validator goes through: the refusal was the validator's.
    assert WRITES[op](t, None).instant is not None


def test_validators_see_before_and_after(tmp_path: Path) -> None:
    t = _table(tmp_path, "mor")
    seen: dict[str, Any] = {}

    def look(ctx: ValidationContext) -> None:
        seen.update(
            before=ctx.before.count_rows(),
            after=ctx.after.count_rows(),
            op=ctx.operation,
            after_rows=sorted(ctx.after.to_arrow().column("id").to_pylist()),
            changes=sorted(zip(ctx.changes.column("id").to_pylist(), ctx.changes.column("_op").to_pylist())),
            new=sorted(ctx.new_rows.column("id").to_pylist()),
            stats=ctx.stats,
        )

    t.upsert(pa.table({"id": [2, 4], "ts": [2, 2], "v": [20.0, 4.0]}), hooks=Hooks(validators=[look]))
    assert seen["before"] == 3 and seen["after"] == 4 and seen["op"] == "upsert"
    assert seen["after_rows"] == [1, 2, 3, 4]
    assert seen["changes"] == [(2, "update"), (4, "insert")] and seen["new"] == [2, 4]
    assert seen["stats"]["inserted"] == 1
    t.delete(pa.table({"id": [1]}), hooks=Hooks(validators=[look]))
    assert (seen["before"], seen["after"], seen["changes"], seen["new"]) == (4, 3, [(1, "delete")], [])


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_builtin_validators(tmp_path: Path, table_type: str) -> None:
    t = _table(tmp_path, table_type)
    checks = Hooks(validators=[rows_satisfy(pc.field("v") >= 0), no_nulls(["v"]), row_count_change(min=0, max=2)])
    t.upsert(pa.table({"id": [3, 4], "ts": [2, 2], "v": [30.0, 4.0]}), hooks=checks)
    with pytest.raises(ValidationError, match=r"rows_satisfy.*1 of 2 new rows"):
        t.upsert(pa.table({"id": [5, 6], "ts": [2, 2], "v": [5.0, -1.0]}), hooks=checks)
    with pytest.raises(ValidationError, match="no_nulls"):
        t.upsert(pa.table({"id": [5], "ts": [2], "v": pa.array([None], pa.float64())}), hooks=checks)
    with pytest.raises(ValidationError, match="row_count_change"):
        t.delete(pa.table({"id": [1]}), hooks=checks)
    with pytest.raises(ValidationError, match="row_count_change"):
        t.insert(pa.table({"id": [10, 11, 12], "ts": [1, 1, 1], "v": [1.0, 1.0, 1.0]}), hooks=checks)
    # An existing row that breaks the rule is not the write's: only new rows are checked.
    t.upsert(pa.table({"id": [1], "ts": [5], "v": [-5.0]}))
    t.upsert(pa.table({"id": [2], "ts": [5], "v": [2.5]}), hooks=checks)
    assert _rows(t) == [(1, -5.0), (2, 2.5), (3, 30.0), (4, 4.0)]


def test_a_broken_validator_refuses_and_bad_validators_are_refused_before_writing(tmp_path: Path) -> None:
    t = _table(tmp_path, "cow")
    before = len(t.timeline.instants())

    def broken(ctx: ValidationContext) -> None:
        raise KeyError("oops")

    with pytest.raises(ValidationError, match="validator broken failed"):
        t.upsert(pa.table({"id": [5], "ts": [1], "v": [1.0]}), hooks=Hooks(validators=[broken]))
    assert len(t.timeline.instants()) == before + 1  # the refused attempt, rolled back
    n = len(t.timeline.instants())
    with pytest.raises(UnknownColumnError):
        t.upsert(pa.table({"id": [5], "ts": [1], "v": [1.0]}), hooks=Hooks(validators=[no_nulls("nope")]))
    with pytest.raises(UnknownColumnError):
        t.upsert(
            pa.table({"id": [5], "ts": [1], "v": [1.0]}), hooks=Hooks(validators=[rows_satisfy(pc.field("nope") > 1)])
        )
    with pytest.raises(InvalidHookError):
        t.upsert(pa.table({"id": [5], "ts": [1], "v": [1.0]}), hooks=Hooks(validators=["not callable"]))  # type: ignore[list-item]
    with pytest.raises(UnknownServiceError):
        inline("rollback")
    assert len(t.timeline.instants()) == n, "a refused hook wrote an instant"
    with pytest.raises(InvalidPropertyError):
        Table.create(str(tmp_path / "bad"), SCHEMA, record_key="id", properties={"inline.services": "vacuum"})
    with pytest.raises(InvalidPropertyError):
        Table.create(str(tmp_path / "bad2"), SCHEMA, record_key="id", properties={"commit.callback-url": "ftp://x"})
    assert not (tmp_path / "bad").exists() or not any((tmp_path / "bad").rglob("*.parquet"))


def test_callbacks_run_once_after_the_commit_and_never_fail_it(tmp_path: Path) -> None:
    t = _table(tmp_path, "mor")
    seen: list[tuple[int, str]] = []

    def notify(result: Any) -> None:
        # After the commit: a fresh handle already sees it.
        assert Table.open(t.path).timeline.get(result.instant.id).state is State.COMPLETED
        seen.append((result.instant.id, result.instant.action.value))

    def broken(result: Any) -> None:
        raise RuntimeError("callback down")

    r = t.upsert(pa.table({"id": [4], "ts": [1], "v": [4.0]}), hooks=Hooks(callbacks=[notify, broken]))
    assert seen == [(r.instant.id, "deltacommit")]
    assert r.hook_errors == [("broken", "RuntimeError('callback down')")]
    assert _rows(t)[-1] == (4, 4.0)
    # Nothing to write, nothing committed: no callback.
    assert t.delete(pa.table({"id": [99]}), hooks=Hooks(callbacks=[notify])).instant is None
    assert len(seen) == 1
    # An unreachable URL is reported, after its retries, and the write stands.
    r = t.upsert(
        pa.table({"id": [5], "ts": [1], "v": [5.0]}),
        hooks=Hooks(callbacks=[http_post("http://127.0.0.1:9/", timeout=0.5, retries=1)]),
    )
    assert r.instant is not None and len(r.hook_errors) == 1 and r.hook_errors[0][0].startswith("http_post(")


class _Receiver:
    """A loopback HTTP server that records every POST (body and idempotency key)."""

    def __init__(self, fail_first: int = 0) -> None:
        self.posts: list[dict[str, Any]] = []
        self.keys: list[str] = []
        self.fail_first = fail_first
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with lock:
                    if outer.fail_first > 0:
                        outer.fail_first -= 1
                        self.send_response(503)
                        self.end_headers()
                        return
                    outer.posts.append(json.loads(body))
                    outer.keys.append(self.headers["Idempotency-Key"])
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/commits"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    r = _Receiver()
    yield r
    r.close()


def test_http_callback_retries_a_5xx_and_posts_the_summary(tmp_path: Path, receiver: _Receiver) -> None:
    t = _table(tmp_path, "cow")
    receiver.fail_first = 1
    r = t.upsert(pa.table({"id": [4], "ts": [1], "v": [4.0]}), hooks=Hooks(callbacks=[http_post(receiver.url)]))
    assert r.hook_errors == []
    assert len(receiver.posts) == 1
    post = receiver.posts[0]
    assert post["instant"] == r.instant.id and post["action"] == "commit" and post["operation"] == "upsert"
    assert post["stats"]["inserted"] == 1 and post["table"] == t.path
    assert receiver.keys == [f"{t.config.table_uuid}/{r.instant.id}"]


def test_inline_compaction_runs_on_the_write_after_n_delta_commits(tmp_path: Path) -> None:
    t = _table(tmp_path, "mor", **{"compaction.delta-commits": 3})
    hooks = Hooks(services=[inline("compaction")])
    compactions = lambda: [i for i in t.timeline.completed() if i.action is Action.COMPACTION]  # noqa: E731
    for n in range(1, 4):
        r = t.upsert(pa.table({"id": [1], "ts": [1 + n], "v": [float(n)]}), hooks=hooks)
        assert r.hook_errors == []
        assert len(compactions()) == (1 if n == 3 else 0), f"after delta commit {n}"
    done = compactions()[0]
    assert done.requested_us > r.instant.completed_us  # after the third commit landed
    assert _rows(t)[0] == (1, 3.0)
    slices = t.view(t.timeline).latest_slices()
    assert all(not s.logs for s in slices), "the compaction left logs"


def test_table_properties_give_every_writer_hooks(tmp_path: Path, receiver: _Receiver) -> None:
    t = _table(
        tmp_path,
        "mor",
        **{"compaction.delta-commits": 2, "inline.services": "compaction", "commit.callback-url": receiver.url},
    )
    w1 = t.upsert(pa.table({"id": [1], "ts": [2], "v": [1.5]}))
    w2 = Table.open(t.path).upsert(pa.table({"id": [1], "ts": [3], "v": [1.75]}))
    first = [i.id for i in t.timeline.completed() if i.action is Action.DELTA_COMMIT][0]  # _table's insert
    assert [p["instant"] for p in receiver.posts] == [first, w1.instant.id, w2.instant.id]
    assert [i for i in t.timeline.completed() if i.action is Action.COMPACTION], "no inline compaction ran"


def test_three_writers_with_inline_compaction_and_a_runner_beside(tmp_path: Path, receiver: _Receiver) -> None:
    """Every commit reaches the HTTP callback exactly once; inline compactions (of two
    of the writers) and a runner process compacting the same table never execute one
    instant twice; the runner stops cleanly; the table equals the completion-order model."""
    path = str(tmp_path / "t")
    Table.create(
        path,
        pa.schema([("id", pa.int64()), ("v", pa.string())]),
        record_key="id",
        table_type="mor",
        properties={
            "commit.max-retries": 8,
            "engine.parallelism": 1,
            "compaction.delta-commits": 2,
            "commit.callback-url": receiver.url,
            "heartbeat.interval-ms": 500,
        },
    )
    go = tmp_path / "go"
    config = tmp_path / "runner.toml"
    config.write_text(
        f'[runner]\nthreads = 1\ngrace_seconds = 20\n\n[[tables]]\npath = "{path}"\n'
        'compaction = "every 1s"\nrollback = "every 2s"\n'
    )
    runner = subprocess.Popen(
        [sys.executable, "-m", "lakeline.cli", "runner", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    procs, ready, logs = [], [], []
    for w in range(3):
        ready.append(tmp_path / f"ready-{w}")
        logs.append(tmp_path / f"w{w}.jsonl")
        procs.append(
            start_script(
                WORKERS_PY,
                [
                    "stress",
                    path,
                    None,
                    w,
                    40,
                    w,
                    str(logs[w]),
                    str(ready[w]),
                    str(go),
                    16,
                    {"pause_s": 0.05, "inline": ["compaction"] if w < 2 else []},
                ],
            )
        )
    wait_for_files(ready, timeout=120)
    go.write_text("go")
    for w, p in enumerate(procs):
        rc, _, err = finish(p, timeout=300)
        assert rc == 0, f"writer {w}: {err[-3000:]}"
    time.sleep(2)  # a tick of the runner after the last write
    runner.send_signal(signal.SIGTERM)
    rc, _, err = finish(runner, timeout=60)
    assert rc == 0, f"the runner did not stop cleanly on SIGTERM: {err[-3000:]}"
    # The compactions the runner completed (its log line per run that did something).
    by_runner = [
        int(i) for m in re.finditer(r"compaction done, instant\(s\) (\d+(?:,\d+)*)", err) for i in m.group(1).split(",")
    ]

    t = Table.open(path)
    tl = t.timeline
    records = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
    committed = {r["instant"]: r for r in records if r["outcome"] == "committed"}
    assert not [r for r in records if r["outcome"] not in ("committed", "conflict", "noop")]
    assert not [r for r in records if r.get("hook_errors")], "an inline compaction failed"
    writes = [i for i in tl.completed() if i.action is Action.DELTA_COMMIT]
    assert sorted(committed) == sorted(i.id for i in writes)
    # Callbacks: each landed commit once, none for an attempt that did not land.
    time.sleep(0.2)
    assert Counter(p["instant"] for p in receiver.posts) == Counter(list(committed))
    # Compaction: inline and beside; every instant completed at most once, none pending.
    compactions = [i for i in tl.completed() if i.action is Action.COMPACTION]
    assert compactions, "no compaction ran"
    assert set(by_runner) <= {i.id for i in compactions} and len(set(by_runner)) == len(by_runner)
    completed_events = Counter(ev.instant for ev in tl.events if ev.state is State.COMPLETED)
    assert all(n == 1 for n in completed_events.values())
    assert tl.pending() == []
    model = CompletionOrderModel()
    for inst in writes:
        model.apply(inst, committed[inst.id])
    out_rows = t.to_arrow()
    model.check(sorted(zip(out_rows.column("id").to_pylist(), out_rows.column("v").to_pylist())))
    check_files_on_disk(t)
    print(f"commits {len(writes)}, compactions {len(compactions)} ({len(by_runner)} by the runner)")
