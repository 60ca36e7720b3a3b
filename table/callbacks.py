"""Commit callbacks that leave the process: an HTTP POST of the commit's summary.

Hudi's ``HoodieWriteCommitHttpCallback``: after a commit landed, a JSON summary of it
is POSTed to a URL, with a timeout and a few retries. The standard library does the
job (no HTTP client dependency). Delivery is at least once: a POST whose response was
lost is sent again, so every POST carries an ``Idempotency-Key`` header (the table's
uuid and the instant id) that lets a receiver keep each commit once.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..timeline.errors import InvalidPropertyError

if TYPE_CHECKING:
    from .writer import WriteResult


def commit_summary(table_path: str, table_uuid: str, result: WriteResult) -> dict[str, Any]:
    """The JSON a callback receives for one landed commit."""
    inst = result.instant
    assert inst is not None  # callbacks run for landed commits only
    completed = inst.completed_at
    return {
        "table": table_path,
        "table_uuid": table_uuid,
        "instant": inst.id,
        "action": inst.action.value,
        "operation": inst.metadata.get("operation"),
        "completed_at": completed.isoformat() if completed else None,
        "stats": dict(result.stats),
    }


@dataclass(frozen=True)
class HttpPost:
    """A callback that POSTs :func:`commit_summary` as JSON to ``url``.

    ``timeout`` is per attempt; ``retries`` more attempts follow a failure (a connection
    error, a timeout or a 5xx answer; a 4xx is the receiver refusing and is not retried),
    ``backoff`` seconds apart, doubling.
    """

    url: str
    table_path: str = ""
    table_uuid: str = ""
    timeout: float = 5.0
    retries: int = 2
    backoff: float = 0.2
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise InvalidPropertyError(f"callback url {self.url!r} is not an http(s) URL")

    @property
    def name(self) -> str:
        return f"http_post({self.url})"

    def for_table(self, path: str, uuid: str) -> HttpPost:
        """The same callback naming the table it reports on."""
        return HttpPost(self.url, path, uuid, self.timeout, self.retries, self.backoff, self.headers)

    def __call__(self, result: WriteResult) -> None:
        """POST the summary; raises the last error when every attempt failed."""
        body = json.dumps(commit_summary(self.table_path, self.table_uuid, result)).encode()
        assert result.instant is not None
        headers = {"Content-Type": "application/json",
                   "Idempotency-Key": f"{self.table_uuid}/{result.instant.id}", **self.headers}
        delay = self.backoff
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    response.read()
                return
            except urllib.error.HTTPError as e:
                if e.code < 500 or attempt == self.retries:
                    raise
            except (urllib.error.URLError, TimeoutError, ConnectionError):
                if attempt == self.retries:
                    raise
            time.sleep(delay)
            delay *= 2


def http_post(url: str, timeout: float = 5.0, retries: int = 2, headers: Mapping[str, str] | None = None) -> HttpPost:
    """A callback POSTing each commit's summary to ``url`` (see :class:`HttpPost`).

    Raises:
        InvalidPropertyError: ``url`` is not an http(s) URL.
    """
    return HttpPost(url, timeout=timeout, retries=retries, headers=dict(headers or {}))
