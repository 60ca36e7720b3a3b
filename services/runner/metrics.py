"""The runner's Prometheus metrics, in a registry of its own, served on loopback.

Why a private :class:`~prometheus_client.CollectorRegistry`: the global one is shared by
the whole process, so two runners in one process (tests, an application embedding
one) would clash on metric names; each runner owns its registry and its HTTP server.
Why loopback by default: the endpoint has no authentication; exposing it further is a
deployment decision (a reverse proxy, a sidecar), not a default.

Metrics (labels ``table`` = the table's path or catalog name, ``service``):

* ``lakeline_runner_runs_total`` - service runs the runner attempted;
* ``lakeline_runner_failures_total`` - runs that raised (logged; retried next tick);
* ``lakeline_runner_aborts_total`` - service instants that gave up (rolled back);
* ``lakeline_runner_skips_total`` - runs left to another runner (its lease, or its
  claim of the instant: :class:`~lakeline.timeline.errors.ServiceBusyError`);
* ``lakeline_runner_instants_total`` - service instants a run completed;
* ``lakeline_runner_duration_seconds`` - histogram of run durations;
* ``lakeline_runner_last_success_timestamp_seconds`` - when a run last ended without error;
* ``lakeline_table_pending_instants`` - pending instants of the service;
* ``lakeline_table_files``, ``lakeline_table_small_file_share``,
  ``lakeline_table_log_files_per_slice`` - per table (label ``table`` only);
* ``lakeline_runner_catalog_errors_total`` - failed listings of a catalog (label ``catalog``).
"""

from __future__ import annotations

import threading
import time
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from ...timeline.errors import RunnerConfigError
from .stats import TableStats

#: Loopback only (see the module docstring).
METRICS_HOST = "127.0.0.1"
_TS = ("table", "service")


class RunnerMetrics:
    """The runner's counters and gauges, and the HTTP server that serves them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.runs = Counter("lakeline_runner_runs", "Service runs attempted", _TS, registry=r)
        self.failures = Counter("lakeline_runner_failures", "Service runs that failed with an error", _TS, registry=r)
        self.aborts = Counter(
            "lakeline_runner_aborts", "Service instants that gave up and were rolled back", _TS, registry=r
        )
        self.skips = Counter(
            "lakeline_runner_skips", "Service runs left to another runner (lease or claim held)", _TS, registry=r
        )
        self.instants = Counter("lakeline_runner_instants", "Service instants completed by runs", _TS, registry=r)
        self.duration = Histogram(
            "lakeline_runner_duration_seconds",
            "Duration of service runs",
            _TS,
            registry=r,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
        )
        self.last_success = Gauge(
            "lakeline_runner_last_success_timestamp_seconds",
            "Unix time a service run last ended without error",
            _TS,
            registry=r,
        )
        self.pending = Gauge("lakeline_table_pending_instants", "Pending instants of the service", _TS, registry=r)
        self.files = Gauge(
            "lakeline_table_files", "Data files (base and log) of the latest snapshot", ["table"], registry=r
        )
        self.small_share = Gauge(
            "lakeline_table_small_file_share",
            "Share of file slices below clustering.small-file-ratio of the target size",
            ["table"],
            registry=r,
        )
        self.logs_per_slice = Gauge(
            "lakeline_table_log_files_per_slice", "Log files per file slice on average", ["table"], registry=r
        )
        self.catalog_errors = Counter(
            "lakeline_runner_catalog_errors", "Failed listings of a catalog's tables", ["catalog"], registry=r
        )
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    def record_run(
        self,
        table: str,
        service: str,
        seconds: float,
        *,
        failed: bool = False,
        skipped: bool = False,
        aborted: int = 0,
        completed: int = 0,
    ) -> None:
        """Count one run of ``service`` on ``table``."""
        self.runs.labels(table, service).inc()
        self.duration.labels(table, service).observe(seconds)
        if aborted:
            self.aborts.labels(table, service).inc(aborted)
        if completed:
            self.instants.labels(table, service).inc(completed)
        if failed:
            self.failures.labels(table, service).inc()
        elif skipped:
            self.skips.labels(table, service).inc()
        else:
            self.last_success.labels(table, service).set(time.time())

    def record_stats(self, table: str, stats: TableStats) -> None:
        """Set the table's gauges from a fresh :class:`TableStats`."""
        for service, n in stats.pending.items():
            self.pending.labels(table, service).set(n)
        self.files.labels(table).set(stats.files)
        self.small_share.labels(table).set(stats.small_file_share)
        self.logs_per_slice.labels(table).set(stats.logs_per_slice)

    def serve(self, port: int) -> int:
        """Serve the registry on ``127.0.0.1:port`` in a daemon thread; returns the port.

        Raises:
            RunnerConfigError: the port cannot be bound (in use, or privileged): the config
                (or ``--metrics-port``) names a port this runner cannot have.
        """
        try:
            self._server, self._thread = start_http_server(port, addr=METRICS_HOST, registry=self.registry)
        except OSError as e:
            # Typically another runner (or a second copy of this one) holds the port: a
            # config problem the operator fixes, so one typed line, not a traceback.
            raise RunnerConfigError(
                f"metrics port {METRICS_HOST}:{port} cannot be served: "
                f"{e.strerror or e}; set [runner] metrics_port (or --metrics-port) "
                "to a free port, or 0 for no metrics"
            ) from e
        self.port = int(self._server.server_port)
        return self.port

    def close(self) -> None:
        """Stop serving (idempotent)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
