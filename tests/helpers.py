"""Shared test helpers: stores that cross process boundaries, child processes, and a
throwaway PostgreSQL server.

Why: concurrency and crash tests run real processes (docs/design.md, "How it is checked"). A child
cannot receive a store object (it holds a connection or is tied to our process), so
tests describe a store with a small JSON-able *spec* and the child opens its own store
from it. Children are plain scripts started with ``subprocess`` rather than
``multiprocessing`` so they need nothing from pytest's import machinery and can be
killed at fault points (``LAKELINE_FAULTS``) like any other process.

Import as ``from tests.helpers import ...``: the pytest settings put the checkout on
``sys.path`` (``pythonpath``), and :func:`child_env` puts it on a child's ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pytest
from lakeline.timeline.storage.event_log.protocol import TimelineStore

if TYPE_CHECKING:
    from tests.seaweedfs import SeaweedServer

REPO = Path(__file__).resolve().parents[1]
WITH_POSTGRES = REPO / "scripts" / "with-postgres.sh"
#: The child-process scripts of every subsystem's tests (``*_child.py``, ``*_workers.py``, ...):
#: one folder, started by path (``start_script(CHILDREN / "timeline_child.py", ...)``) or,
#: for ``multiprocessing``, imported as ``tests.children.<module>``.
CHILDREN = REPO / "tests" / "children"

#: A store described in JSON: ``{"kind": "filesystem", "meta_dir": ...}`` or
#: ``{"kind": "postgresql", "dsn": ..., "table_id": ..., "location": ...}``.
StoreSpec = dict[str, str]


def store_spec(store: TimelineStore) -> StoreSpec:
    """The spec another process uses to open the same table's store."""
    if store.kind == "filesystem":
        return {"kind": "filesystem", "meta_dir": str(store.meta_dir)}  # type: ignore[attr-defined]
    if store.kind == "postgresql":
        return {
            "kind": "postgresql",
            "dsn": store.dsn,  # type: ignore[attr-defined]
            "table_id": store.table_id,  # type: ignore[attr-defined]
            "location": store.location,  # type: ignore[attr-defined]
        }
    if store.kind == "object_store":
        return {"kind": "object_store", "uri": store.uri, "options": json.dumps(store.options)}  # type: ignore[attr-defined]
    raise ValueError(f"unknown store kind {store.kind!r}")


def open_spec(spec: Mapping[str, str]) -> TimelineStore:
    """A new store object for the table a spec describes (imports psycopg only for PG)."""
    if spec["kind"] == "filesystem":
        from lakeline.timeline.storage.event_log.filesystem import FileSystemStore

        return FileSystemStore(spec["meta_dir"])
    if spec["kind"] == "object_store":
        return new_object_store(spec["uri"], json.loads(spec["options"]))
    from lakeline.timeline.storage.event_log.postgresql import PostgresStore

    return PostgresStore(spec["dsn"], spec["table_id"], spec["location"])


def new_object_store(uri: str, options: Mapping[str, str]) -> TimelineStore:
    """The event log on the object store at ``uri`` (its ``.lakeline`` folder); the store
    object remembers ``uri`` and ``options`` so :func:`store_spec` can describe it."""
    from lakeline.timeline.storage.event_log.object_store import ObjectStoreLog
    from lakeline.timeline.storage.filesystem import META_DIR, Storage

    storage = Storage.for_uri(uri, options)
    store = ObjectStoreLog(storage, storage.path(META_DIR))
    store.uri, store.options = uri, dict(options)  # type: ignore[attr-defined]
    return store


def new_pg_store(pg_url: str, location: str | os.PathLike[str]) -> TimelineStore:
    """A PostgreSQL store for a brand-new table (a fresh uuid)."""
    from lakeline.timeline.storage.event_log.postgresql import PostgresStore

    return PostgresStore(pg_url, uuid.uuid4().hex, str(location))


class StoreFactory:
    """Makes fresh stores of one kind; closes every store it made at teardown."""

    def __init__(self, kind: str, base: Path, pg_url: str | None, s3: SeaweedServer | None = None) -> None:
        self.kind = kind
        self._base = base
        self._pg_url = pg_url
        self._s3 = s3
        self._made: list[TimelineStore] = []

    def __call__(self) -> TimelineStore:
        """A store for a new, empty table."""
        location = self._base / f"table-{uuid.uuid4().hex[:8]}"
        if self.kind == "filesystem":
            from lakeline.timeline.storage.event_log.filesystem import FileSystemStore

            store: TimelineStore = FileSystemStore(location / ".lakeline")
        elif self.kind == "object_store":
            assert self._s3 is not None
            store = new_object_store(self._s3.uri(), self._s3.options())
        else:
            from lakeline.timeline.storage.event_log.postgresql import PostgresStore

            assert self._pg_url is not None
            store = PostgresStore(self._pg_url, uuid.uuid4().hex, str(location))
        self._made.append(store)
        return store

    def reopen(self, store: TimelineStore) -> TimelineStore:
        """Another store object on the same table (as a second process would open it)."""
        other = open_spec(store_spec(store))
        self._made.append(other)
        return other

    def close_all(self) -> None:
        for store in self._made:
            store.close()


# -- child processes ---------------------------------------------------------------------


def child_env(faults: str | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child: ours, with fault points armed or cleared, and the
    checkout on ``PYTHONPATH`` so a child script imports ``tests.<module>`` as the tests
    do (pytest's ``pythonpath`` setting reaches only pytest's own process)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.pop("LAKELINE_FAULTS", None)
    if faults:
        env["LAKELINE_FAULTS"] = faults
    env.update(extra or {})
    return env


def start_script(
    script: str | os.PathLike[str],
    args: Sequence[Any],
    faults: str | None = None,
    env: Mapping[str, str] | None = None,
    new_session: bool = False,
) -> subprocess.Popen[str]:
    """Start ``python script args...``, each argument JSON-encoded; with
    ``new_session``, as the leader of its own process group (``os.killpg`` then kills
    it with everything it started, as a Spark driver's JVM and workers)."""
    argv = [sys.executable, str(script)] + [json.dumps(a) for a in args]
    return subprocess.Popen(
        argv,
        env=child_env(faults, env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=new_session,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 120.0) -> tuple[int, str, str]:
    """Wait for a child; returns ``(returncode, stdout, stderr)``. Kills it on timeout."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"child {proc.args!r} timed out after {timeout}s; stderr:\n{err}") from None
    return proc.returncode, out, err


def run_script(
    script: str | os.PathLike[str], args: Sequence[Any], faults: str | None = None, timeout: float = 120.0
) -> tuple[int, str, str]:
    """Run a child to its end; returns ``(returncode, stdout, stderr)``."""
    return finish(start_script(script, args, faults), timeout)


def forked_status(pid: int, what: str, timeout: float = 20.0) -> int:
    """The exit status of the forked child ``pid``; a child still running after
    ``timeout`` seconds is killed and the test fails with "the forked child hung on
    ``what``" (a fork-safety test's failure is a hang, never an error)."""
    deadline = time.monotonic() + timeout
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail(f"the forked child hung on {what}")
    return done[1]


def wait_for_files(paths: Sequence[Path], timeout: float = 60.0) -> None:
    """Block until every path exists (children announce readiness with a file)."""
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        if time.monotonic() > deadline:
            missing = [str(p) for p in paths if not p.exists()]
            raise AssertionError(f"children not ready after {timeout}s: {missing}")
        time.sleep(0.01)


# -- a throwaway PostgreSQL server -------------------------------------------------------


@dataclass
class ThrowawayPostgres:
    """A server started by ``scripts/with-postgres.sh`` that lives while ``proc`` does.

    The script runs a tiny Python command that prints the URL and then blocks reading
    its stdin; closing stdin (or our death, which closes it too) ends the command, and
    the script's trap stops the server and removes its folder.
    """

    url: str
    proc: subprocess.Popen[str]

    def stop(self) -> None:
        stdin: IO[str] | None = self.proc.stdin
        if stdin is not None and not stdin.closed:
            stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class PostgresUnavailable(RuntimeError):
    """No throwaway server could be started (the reason is the message)."""


def start_throwaway_postgres(timeout: float = 120.0) -> ThrowawayPostgres:
    """Start a private server the way ``make test`` does.

    Raises:
        PostgresUnavailable: the binaries are missing or the server did not come up.
    """
    waiter = "import os, sys; print(os.environ['LAKELINE_TEST_PG_URL'], flush=True); sys.stdin.read()"
    try:
        proc = subprocess.Popen(
            [str(WITH_POSTGRES), sys.executable, "-c", waiter],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    except OSError as e:
        raise PostgresUnavailable(f"cannot run {WITH_POSTGRES}: {e}") from e
    assert proc.stdout is not None
    # The script prints nothing on stdout before the URL; a dead script gives EOF.
    line = proc.stdout.readline().strip()
    if not line.startswith("postgresql://"):
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        raise PostgresUnavailable(f"{WITH_POSTGRES.name} exited with {proc.returncode}: {err.strip()[-800:]}")
    return ThrowawayPostgres(line, proc)
