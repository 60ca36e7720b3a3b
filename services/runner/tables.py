"""The tables a runner keeps: resolving its config into targets, holding their handles,
and keeping a run's lease on a table.

Why apart from the runner: *which* tables (the listed paths plus whatever a catalog
holds now) and *how* they are opened (a path and its timeline, or a catalog name)
change independently of how runs are scheduled. A runner keeps one open
:class:`~lakeline.table.Table` per (table, role), where a role is a service name or
``"stats"``: the runner's queue never runs one (table, service) pair twice at once,
so each handle is used by one thread at a time, and a handle's cached file-system view
and store connection are reused from run to run instead of reopened every tick. A
handle whose run failed is dropped (a broken connection is reopened next time).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...timeline.diagnostics.redact import redact, redacted_repr, redacting_logger
from ...timeline.errors import LakelineError, LockLostError
from ...timeline.lock import Lock
from .config import RunnerConfig
from .metrics import RunnerMetrics
from .schedules import Schedule

if TYPE_CHECKING:
    from ...table.catalog import Catalog
    from ...table.table import Table

# Its lines name tables and catalogs by DSN and quote driver errors: redacted at the source.
log = redacting_logger("lakeline.runner")


@dataclass(frozen=True)
class Target:
    """A table the runner keeps: its label (the path, or the catalog name), how to open
    it, and its schedules."""

    name: str
    schedules: Mapping[str, Schedule]
    path: str | None = None
    timeline: str | None = None
    catalog: str | None = None  # the catalog's DSN when the table comes from a catalog

    def __repr__(self) -> str:
        # timeline and catalog are DSNs: a target in a log line or traceback must not print a password.
        return redacted_repr(self)


def close_table(table: Table) -> None:
    """Release a handle's store (a PostgreSQL connection); best effort."""
    try:
        table.log.store.close()
    except Exception as e:  # noqa: BLE001 - closing is best effort, a failure changes nothing
        log.debug("closing %r: %r", table, e)


@contextmanager
def held_lease(lease: Lock) -> Iterator[None]:
    """Renew ``lease`` every third of its length while the body runs; release it after.

    A lost lease (this process paused past it) is only logged: the lease is a liveness
    aid, the framework's claims keep the work exactly-once without it.
    """
    done = threading.Event()

    def renew() -> None:
        while not done.wait(lease.lease_ms / 3000.0):
            try:
                lease.renew()
            except LockLostError:
                log.warning("runner lease %r was lost while its run went on", lease)
                return
            except LakelineError as e:
                log.warning("runner lease %r not renewed: %s", lease, e)

    keeper = threading.Thread(target=renew, name="lakeline-runner-lease", daemon=True)
    keeper.start()
    try:
        yield
    finally:
        done.set()
        keeper.join()
        lease.release()


class TableHandles:
    """Targets of a config and one open handle per (table, role); thread-safe."""

    def __init__(self, config: RunnerConfig, metrics: RunnerMetrics) -> None:
        self.config = config
        self.metrics = metrics
        self._mutex = threading.Lock()
        self._handles: dict[tuple[str, str], Table] = {}
        self._catalogs: dict[str, Catalog] = {}

    def targets(self) -> tuple[list[Target], set[str]]:
        """Every table of the config: the listed ones, then each catalog's, listed now;
        and the DSNs of catalogs that could not be listed (logged and counted in
        ``lakeline_runner_catalog_errors_total``, left out this time)."""
        out = [Target(e.path, e.schedules, path=e.path, timeline=e.timeline) for e in self.config.tables]
        failed = set()
        for entry in self.config.catalogs:
            try:
                names = self._catalog(entry.timeline).list_tables(entry.namespace)
            except Exception as e:  # noqa: BLE001 - one catalog that fails must not stop the others
                # The label and the line name the catalog by its DSN: both are read by
                # people and scrapers that must not see its password, in whatever form.
                self.metrics.catalog_errors.labels(redact(entry.timeline)).inc()
                log.warning("catalog %s not listed: %s", redact(entry.timeline), redact(repr(e)))
                failed.add(entry.timeline)
                continue
            out.extend(Target(name, entry.schedules, catalog=entry.timeline) for name in names)
        return out, failed

    def _catalog(self, dsn: str) -> Catalog:
        with self._mutex:
            if dsn not in self._catalogs:
                from ...table.catalog import Catalog  # psycopg: only for configs with catalogs

                self._catalogs[dsn] = Catalog(dsn)
            return self._catalogs[dsn]

    def _open(self, target: Target) -> Table:
        if target.catalog is not None:
            table: Table = self._catalog(target.catalog).load_table(target.name)
            return table
        from ...table.table import Table

        assert target.path is not None
        return Table.open(target.path, timeline=target.timeline)

    def get(self, target: Target, role: str) -> Table:
        """The open handle of ``target`` for ``role`` (opened on first use).

        Raises:
            LakelineError: the table cannot be opened (not found, store unreachable, ...).
        """
        key = (target.name, role)
        with self._mutex:
            table = self._handles.get(key)
        if table is None:
            table = self._open(target)
            with self._mutex:
                self._handles[key] = table
        return table

    def drop(self, name: str, role: str | None = None) -> None:
        """Close and forget the handles of table ``name`` (of one role, or all)."""
        with self._mutex:
            keys = [k for k in self._handles if k[0] == name and (role is None or k[1] == role)]
            tables = [self._handles.pop(k) for k in keys]
        for table in tables:
            close_table(table)

    def close(self, keep: AbstractSet[tuple[str, str]] = frozenset()) -> None:
        """Close every handle but those in ``keep`` (still in use by a running service)."""
        with self._mutex:
            keys = [k for k in self._handles if k not in keep]
            tables = [self._handles.pop(k) for k in keys]
        for table in tables:
            close_table(table)
        with self._mutex:
            catalogs, self._catalogs = list(self._catalogs.values()), {}
        for cat in catalogs:
            cat.close()
