"""Requests on the wire, counted by kind: what each commit or open costs the store.

Why on the wire: the client libraries (obstore for lakeline, delta-rs's object_store)
retry, list and read ahead on their own, so only the server side of the socket says how
many requests a commit really made. The tests' loopback proxy
(:class:`tests.object_storage.proxy.FaultProxy`) forwards every request unchanged and
counts it; its ``lose_response`` hook is asked about every request it forwarded (method
and path), so a hook that always answers "no" is a tap that sees each request without
changing it. The proxy is a Python server, which adds latency, so commits are timed
without it and counted with it in a run of their own.

Its handler answers with two writes (headers, then body); with Nagle's algorithm on, the
second waits for the client's delayed ACK, 40 ms at worst, about 15 ms a request here.
:func:`counting_proxy` turns Nagle off for the proxy's connections (the handler's own
``disable_nagle_algorithm`` switch), which brings a request through it to about 1 ms
(0.6 ms straight to the server).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from typing import Any

#: Object areas by path fragment, first match wins: lakeline's event log (its event
#: slots, the archival mark, checkpoints and their hint), the table pointer, its other
#: metadata (metadata table, markers, heartbeats, locks); deltalake's log; else data.
AREAS = (
    ("/.lakeline/timeline/checkpoints/", "log checkpoint"),
    ("/.lakeline/timeline/archived_through", "archival mark"),
    ("/.lakeline/timeline/", "event slots"),
    ("/.lakeline/table.json", "pointer"),
    ("/.lakeline/", "metadata"),
    ("/_delta_log/", "log"),
)


def kind(method: str, path: str) -> tuple[str, str]:
    """(method, area) of one request; a bucket listing is ``LIST``."""
    query = path.partition("?")[2]
    if method == "GET" and ("list-type=" in query or "prefix=" in query):
        return "LIST", "listing"
    area = next((name for frag, name in AREAS if frag in path.partition("?")[0]), "data")
    return method, area


def listed(path: str) -> str:
    """What a listing asked for, from the table's folder on, numbers as ``N``:
    ``.lakeline/markers/N/``, ``_delta_log/``, or ``(table folder)``."""
    from urllib.parse import parse_qs

    prefix = (parse_qs(path.partition("?")[2]).get("prefix") or [""])[0]
    for mark in (".lakeline/", "_delta_log/"):
        if mark in prefix:
            return re.sub(r"\d+", "N", mark + prefix.split(mark, 1)[1])
    return "(table folder)"


class Tap:
    """Counts every request through a :class:`FaultProxy`, by (method, area)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def __call__(self, method: str, path: str) -> bool:
        what = kind(method, path)
        with self._lock:
            self.counts[what] += 1
            if what[0] == "LIST":
                self.counts[("LISTED", listed(path))] += 1  # not a request: what it listed
        return False  # never lose a response: only look

    def snapshot(self) -> Counter[tuple[str, str]]:
        with self._lock:
            return Counter(self.counts)


def counting_proxy(endpoint: str) -> tuple[Any, Tap]:
    """A proxy in front of ``endpoint`` and the tap counting what passes it."""
    from tests.object_storage.proxy import FaultProxy

    tap = Tap()
    proxy = FaultProxy(endpoint, lose_response=tap)
    handler: Any = proxy.server.RequestHandlerClass  # this proxy's own handler class
    handler.disable_nagle_algorithm = True
    return proxy, tap


def summarize(delta: Counter[tuple[str, str]], per: int) -> dict[str, Any]:
    """Totals of a counted stretch, per unit (commit or open), by method and by area."""
    total = sum(n for (method, _), n in delta.items() if method != "LISTED")
    by_method: Counter[str] = Counter()
    by_area: Counter[str] = Counter()
    lists: Counter[str] = Counter()
    for (method, area), n in delta.items():
        if method == "LISTED":
            lists[area] += n
            continue
        by_method[method] += n
        by_area[area] += n
    per = max(per, 1)
    return {
        "requests": total,
        "per": per,
        "per_unit": total / per,
        "by_method": {k: v / per for k, v in sorted(by_method.items())},
        "by_area": {k: v / per for k, v in sorted(by_area.items())},
        "listed": {k: v / per for k, v in sorted(lists.items())},
    }


__all__ = ["Tap", "counting_proxy", "kind", "summarize"]
