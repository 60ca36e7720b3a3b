"""Fixtures every test folder shares: the PostgreSQL server and a store per backend.

``pg_url`` is the URL of a real PostgreSQL database. ``make test`` starts one with
``scripts/with-postgres.sh`` and passes it in ``LAKELINE_TEST_PG_URL``. Without it, a
developer run starts a throwaway server through the same script, or skips the
PostgreSQL tests saying why; under CI (``CI`` set to any truthy value, :mod:`tests.ci`)
a missing server fails the run, because a CI run that silently skipped the PostgreSQL
backend would prove nothing about it (docs/design.md, "How it is checked").

``store_factory`` runs a test once per timeline backend: it makes a fresh, empty store
for a new table (a new folder for the filesystem, a new table uuid for PostgreSQL).
``timeline`` runs a test once per backend of a table's timeline: None for the
filesystem store, else the PostgreSQL URL (what ``Table.create(..., timeline=)`` takes).
``cat`` is a catalog on that server. ``no_faults`` disarms every fault point around a test,
for the modules that ask for it.
Tests that use PostgreSQL are marked ``postgres`` automatically.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.ci import under_ci
from tests.helpers import PostgresUnavailable, StoreFactory, ThrowawayPostgres, start_throwaway_postgres
from tests.seaweedfs import SeaweedServer, SeaweedUnavailable, start_seaweedfs

if TYPE_CHECKING:
    from lakeline.table import Catalog

# Remembered store verdicts (timeline/storage/probe.py) go to a folder of this run, so a
# run starts with none and leaves nothing in the user's cache; child processes inherit it.
os.environ["LAKELINE_CACHE_DIR"] = tempfile.mkdtemp(prefix="lakeline-test-cache-")

# Every JVM of a run (the local Spark session, the child drivers, a standalone cluster's
# master, workers and executors) compiles with C1 only and collects with the serial
# collector: the tests' JVMs live seconds to minutes on small data, where C2's compiler
# threads and the parallel collector cost CPU that never pays back (a local write and
# read took 22 s of JVM and worker CPU instead of 32-35 s, measured on 2 cores). What a
# developer set is kept.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

PG_URL_VAR = "LAKELINE_TEST_PG_URL"
STORE_KINDS = ["filesystem", "postgresql", "object_store"]


def _check_reachable(url: str) -> str | None:
    """None if a store can talk to ``url``, else why not."""
    from lakeline.timeline.errors import TimelineError
    from lakeline.timeline.storage.event_log.postgresql import PostgresStore

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
        if under_ci():
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


@pytest.fixture(scope="session")
def s3() -> Iterator[SeaweedServer]:
    """A real S3-compatible server (SeaweedFS ``weed mini`` on loopback) with credentials;
    tests put their tables under fresh folders of its bucket (``s3.uri()``). Under
    ``CI=true`` a missing server fails the run, as PostgreSQL's does."""
    try:
        server = start_seaweedfs()
    except SeaweedUnavailable as e:
        if under_ci():
            pytest.fail(f"no S3 server under CI=true: {e}", pytrace=False)
        pytest.skip(f"no S3 server: {e}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=STORE_KINDS)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A :class:`StoreFactory` for each backend; PostgreSQL comes from ``pg_url``, the
    object store from ``s3``."""
    kind: str = request.param
    url = request.getfixturevalue("pg_url") if kind == "postgresql" else None
    server = request.getfixturevalue("s3") if kind == "object_store" else None
    factory = StoreFactory(kind, tmp_path, url, server)
    try:
        yield factory
    finally:
        factory.close_all()


@pytest.fixture(params=["filesystem", pytest.param("postgresql", marks=pytest.mark.postgres)])
def timeline(request: pytest.FixtureRequest) -> str | None:
    """None for the filesystem store, else the URL of the test PostgreSQL server."""
    return request.getfixturevalue("pg_url") if request.param == "postgresql" else None


@pytest.fixture
def cat(pg_url: str) -> Iterator[Catalog]:
    """A :class:`~lakeline.table.Catalog` on the test server, closed after the test
    (the catalog tests of tests/table and tests/cli)."""
    from lakeline.table import Catalog

    with Catalog(pg_url) as c:
        yield c


@pytest.fixture(autouse=True)
def _fresh_log_cache() -> Iterator[None]:
    """Each test starts with an empty cache of decoded logs: no test sees another's."""
    from lakeline.table.read.log_cache import LOGS

    LOGS.clear()
    yield


@pytest.fixture
def no_faults() -> Iterator[None]:
    """No fault point armed in this process before or after the test, whatever the last
    test left armed. A module opts in with ``pytestmark = pytest.mark.usefixtures("no_faults")``."""
    from lakeline.timeline.diagnostics import faults

    faults.disarm_all()
    yield
    faults.disarm_all()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that needs the server ``postgres`` (``-m "not postgres"`` works)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        uses_pg = "pg_url" in getattr(item, "fixturenames", ()) or (
            callspec is not None and callspec.params.get("store_factory") == "postgresql"
        )
        if uses_pg:
            item.add_marker(pytest.mark.postgres)
        uses_s3 = "s3" in getattr(item, "fixturenames", ()) or (
            callspec is not None and callspec.params.get("store_factory") == "object_store"
        )
        if uses_s3:
            item.add_marker(pytest.mark.s3)
    sample_matrices(items)


def sample_matrices(items: list[pytest.Item]) -> None:
    """Of each test marked ``sampled_matrix``, keep in ``make test`` a few cases that
    together cover every combination of all but one of its parameters' values (a greedy
    set cover) and mark the rest ``soak``: store x table type keeps two cases, each store
    and each type once; store x table type x fault point keeps each fault point on each
    store and on each type. ``make soak`` runs the cases left out."""
    matrices: dict[str, dict[pytest.Item, set[tuple[tuple[str, str], ...]]]] = {}
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or item.get_closest_marker("sampled_matrix") is None:
            continue
        values = sorted((name, repr(value)) for name, value in callspec.params.items())
        combos = set(itertools.combinations(values, max(1, len(values) - 1)))
        matrices.setdefault(item.nodeid.split("[")[0], {})[item] = combos
    for cases in matrices.values():
        uncovered = set().union(*cases.values())
        while uncovered:
            best = max(cases, key=lambda case: len(cases[case] & uncovered))  # the first of equals
            uncovered -= cases.pop(best)
        for left_out in cases:
            left_out.add_marker(pytest.mark.soak)
