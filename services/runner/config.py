"""The runner's TOML config, read and checked into frozen values before anything runs.

Why up front: a runner is a daemon; a typo found at 3 a.m. when a cron line first
fires, or a service name that silently never runs, is worse than refusing to start.
So every key is known (an unknown one is refused with the keys that are allowed),
every schedule parses, and every number is in range, or
:class:`~lakeline.timeline.errors.RunnerConfigError` says where. The shape is
that of docs/runner.md, "The config"::

    [runner]
    threads = 2                 # services run at once
    metrics_port = 0            # Prometheus text on 127.0.0.1; 0 = off
    grace_seconds = 30          # on SIGTERM: let running services finish this long

    [[tables]]
    path = "/data/events"       # timeline = "postgresql://..." if it has one
    compaction = "every 5m"     # a service name = a schedule; absent: never

    [[catalogs]]
    timeline = "postgresql://..."   # every table of this catalog (namespace = "..." narrows)
    cleaning = "every 1h"
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ...timeline.diagnostics.redact import redact, redacted_repr
from ...timeline.errors import RunnerConfigError
from ..table_services import SERVICES
from .schedules import Schedule, parse_schedule

#: Defaults of ``[runner]``.
DEFAULT_THREADS, DEFAULT_METRICS_PORT, DEFAULT_GRACE_SECONDS = 2, 0, 30.0
RUNNER_KEYS = ("threads", "metrics_port", "grace_seconds")
TABLE_KEYS = ("path", "timeline")
CATALOG_KEYS = ("timeline", "namespace")
SECTIONS = ("runner", "tables", "catalogs")


@dataclass(frozen=True)
class RunnerSettings:
    """``[runner]``: how many services run at once, where metrics are served, how long a
    stopping runner lets running services finish."""

    threads: int = DEFAULT_THREADS
    metrics_port: int = DEFAULT_METRICS_PORT  # 0: no metrics server
    grace_seconds: float = DEFAULT_GRACE_SECONDS


@dataclass(frozen=True)
class TableEntry:
    """One ``[[tables]]`` entry: a table by location and its service schedules."""

    path: str
    timeline: str | None = None
    schedules: Mapping[str, Schedule] = field(default_factory=lambda: MappingProxyType({}))

    def __repr__(self) -> str:
        return redacted_repr(self)  # timeline is a DSN: no password in a log or traceback


@dataclass(frozen=True)
class CatalogEntry:
    """One ``[[catalogs]]`` entry: every table of a PostgreSQL catalog (of one namespace
    when ``namespace`` is set), each with the same schedules."""

    timeline: str
    namespace: str | None = None
    schedules: Mapping[str, Schedule] = field(default_factory=lambda: MappingProxyType({}))

    def __repr__(self) -> str:
        return redacted_repr(self)  # timeline is a DSN: no password in a log or traceback


@dataclass(frozen=True)
class RunnerConfig:
    """A whole runner config; :meth:`from_toml` or :meth:`from_dict` check it."""

    runner: RunnerSettings = RunnerSettings()
    tables: tuple[TableEntry, ...] = ()
    catalogs: tuple[CatalogEntry, ...] = ()
    source: str = "<dict>"  # the file it came from, for messages

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> RunnerConfig:
        """Read and check the config file at ``path``.

        Raises:
            RunnerConfigError: no such file, not TOML, or any check below fails.
        """
        try:
            raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as e:
            raise RunnerConfigError(f"runner config {os.fspath(path)!r}: {e.strerror or e}") from e
        except tomllib.TOMLDecodeError as e:
            raise RunnerConfigError(f"runner config {os.fspath(path)!r} is not TOML: {e}") from e
        return cls.from_dict(raw, os.fspath(path))

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], source: str = "<dict>") -> RunnerConfig:
        """Check a parsed config (as ``tomllib`` returns it).

        Raises:
            RunnerConfigError: an unknown section or key, a key of the wrong type or out of
                range, a bad schedule, a table without ``path``, a catalog without a
                ``postgresql://`` timeline, or nothing to run at all.
        """
        _known(raw, SECTIONS, source)
        settings = _settings(raw.get("runner", {}), f"{source} [runner]")
        tables = tuple(_table(t, f"{source} [[tables]] #{n + 1}") for n, t in enumerate(_list(raw, "tables", source)))
        catalogs = tuple(
            _catalog(c, f"{source} [[catalogs]] #{n + 1}") for n, c in enumerate(_list(raw, "catalogs", source))
        )
        if not tables and not catalogs:
            raise RunnerConfigError(f"{source}: no [[tables]] and no [[catalogs]]: the runner would have nothing to do")
        return cls(settings, tables, catalogs, source)

    def with_metrics_port(self, port: int | None) -> RunnerConfig:
        """This config with ``[runner] metrics_port`` replaced (``--metrics-port``); None
        keeps it."""
        if port is None:
            return self
        settings = _settings({**_as_dict(self.runner), "metrics_port": port}, "--metrics-port")
        return RunnerConfig(settings, self.tables, self.catalogs, self.source)


def _as_dict(s: RunnerSettings) -> dict[str, Any]:
    return {"threads": s.threads, "metrics_port": s.metrics_port, "grace_seconds": s.grace_seconds}


def _known(raw: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise RunnerConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; known: {', '.join(allowed)}")


def _list(raw: Mapping[str, Any], key: str, source: str) -> list[Mapping[str, Any]]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise RunnerConfigError(f"{source}: {key} must be an array of tables ([[{key}]])")
    return value


def _int(raw: Mapping[str, Any], key: str, default: int, lo: int, hi: int, where: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise RunnerConfigError(f"{where}: {key} must be a whole number from {lo} to {hi}, not {value!r}")
    return value


def _settings(raw: object, where: str) -> RunnerSettings:
    if not isinstance(raw, dict):
        raise RunnerConfigError(f"{where}: must be a table of {', '.join(RUNNER_KEYS)}")
    _known(raw, RUNNER_KEYS, where)
    grace = raw.get("grace_seconds", DEFAULT_GRACE_SECONDS)
    if isinstance(grace, bool) or not isinstance(grace, int | float) or not 0 <= grace <= 24 * 3600:
        raise RunnerConfigError(f"{where}: grace_seconds must be a number of seconds from 0 to 86400, not {grace!r}")
    return RunnerSettings(
        threads=_int(raw, "threads", DEFAULT_THREADS, 1, 256, where),
        metrics_port=_int(raw, "metrics_port", DEFAULT_METRICS_PORT, 0, 65535, where),
        grace_seconds=float(grace),
    )


def _string(raw: Mapping[str, Any], key: str, where: str, required: bool) -> str | None:
    value = raw.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise RunnerConfigError(f"{where}: {key} must be a non-empty string" + ("" if required else " when given"))
    return value


def _schedules(raw: Mapping[str, Any], fixed: tuple[str, ...], where: str) -> Mapping[str, Schedule]:
    """The ``service = schedule`` keys of an entry; everything else is unknown."""
    _known(raw, fixed + tuple(SERVICES), where)
    return MappingProxyType({name: parse_schedule(raw[name], f"{where} {name}") for name in SERVICES if name in raw})


def _timeline(value: str | None, where: str, required: bool) -> str | None:
    if value is None:
        return None
    if not value.startswith(("postgresql://", "postgres://")):
        # The refused value is most likely a DSN with a typo, password included: shown redacted.
        raise RunnerConfigError(
            f"{where}: timeline must be a postgresql:// URL"
            + ("" if required else " (omit it for a timeline stored with the table)")
            + f", not {redact(repr(value))}"
        )
    return value


def _table(raw: Mapping[str, Any], where: str) -> TableEntry:
    schedules = _schedules(raw, TABLE_KEYS, where)
    path = _string(raw, "path", where, required=True)
    assert path is not None
    return TableEntry(path, _timeline(_string(raw, "timeline", where, False), where, False), schedules)


def _catalog(raw: Mapping[str, Any], where: str) -> CatalogEntry:
    schedules = _schedules(raw, CATALOG_KEYS, where)
    dsn = _timeline(_string(raw, "timeline", where, required=True), where, True)
    assert dsn is not None
    return CatalogEntry(dsn, _string(raw, "namespace", where, False), schedules)
