"""Fixtures every test folder shares: the PostgreSQL server and a store per backend.

``pg_url`` is the URL of a real PostgreSQL database. ``make test`` starts one with
``scripts/with-postgres.sh`` and passes it in ``LAKELINE_TEST_PG_URL``. Without it, a
developer run starts a throwaway server through the same script, or skips the
PostgreSQL tests saying why; under ``CI=true`` a missing server fails the run, because
a CI run that silently skipped the PostgreSQL backend would prove nothing about it
(DESIGN.md section 6).

``store_factory`` runs a test once per timeline backend: it makes a fresh, empty store
for a new table (a new folder for the filesystem, a new table uuid for PostgreSQL).
Tests that use PostgreSQL are marked ``postgres`` automatically.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from lakeline.timeline.store import TimelineStore
from tests.helpers import PostgresUnavailable, ThrowawayPostgres, start_throwaway_postgres

PG_URL_VAR = "LAKELINE_TEST_PG_URL"
STORE_KINDS = ["filesystem", "postgresql"]


def _under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _check_reachable(url: str) -> str | None:
    """None if a store can talk to ``url``, else why not."""
    from lakeline.timeline.errors import TimelineError
    from lakeline.timeline.pg_store import PostgresStore

    store = PostgresStore(url, "__probe__", "")
    try:
        store.has_events()  # also creates the schema once, before tests race to it
    except TimelineError as e:
        return str(e)
    finally:
        store.close()
    return None


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """URL of a PostgreSQL database the tests may freely write to."""
    url = os.environ.get(PG_URL_VAR)
    server: ThrowawayPostgres | None = None
    if not url:
        if _under_ci():
            pytest.fail(
                f"{PG_URL_VAR} is not set under CI=true: run the suite through `make test` "
                "(scripts/with-postgres.sh); PostgreSQL tests must not be skipped in CI",
                pytrace=False,
            )
        try:
            server = start_throwaway_postgres()
        except PostgresUnavailable as e:
            pytest.skip(f"no PostgreSQL: {PG_URL_VAR} unset and no throwaway server ({e}); use `make test`")
        url = server.url
    problem = _check_reachable(url)
    if problem is not None:
        if server is not None:
            server.stop()
        pytest.fail(f"PostgreSQL at {PG_URL_VAR} is not usable: {problem}", pytrace=False)
    try:
        yield url
    finally:
        if server is not None:
            server.stop()


class StoreFactory:
    """Makes fresh stores of one kind; closes every store it made at teardown."""

    def __init__(self, kind: str, base: Path, pg_url: str | None) -> None:
        self.kind = kind
        self._base = base
        self._pg_url = pg_url
        self._made: list[TimelineStore] = []

    def __call__(self) -> TimelineStore:
        """A store for a new, empty table."""
        location = self._base / f"table-{uuid.uuid4().hex[:8]}"
        if self.kind == "filesystem":
            from lakeline.timeline.fs_store import FileSystemStore

            store: TimelineStore = FileSystemStore(location / ".lakeline")
        else:
            from lakeline.timeline.pg_store import PostgresStore

            assert self._pg_url is not None
            store = PostgresStore(self._pg_url, uuid.uuid4().hex, str(location))
        self._made.append(store)
        return store

    def reopen(self, store: TimelineStore) -> TimelineStore:
        """Another store object on the same table (as a second process would open it)."""
        from tests.helpers import open_spec, store_spec

        other = open_spec(store_spec(store))
        self._made.append(other)
        return other

    def close_all(self) -> None:
        for store in self._made:
            store.close()


@pytest.fixture(params=STORE_KINDS)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A :class:`StoreFactory` for each backend; PostgreSQL comes from ``pg_url``."""
    kind: str = request.param
    url = request.getfixturevalue("pg_url") if kind == "postgresql" else None
    factory = StoreFactory(kind, tmp_path, url)
    try:
        yield factory
    finally:
        factory.close_all()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that needs the server ``postgres`` (``-m "not postgres"`` works)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        uses_pg = "pg_url" in getattr(item, "fixturenames", ()) or (
            callspec is not None and callspec.params.get("store_factory") == "postgresql"
        )
        if uses_pg:
            item.add_marker(pytest.mark.postgres)
