"""A loopback HTTP proxy in front of the S3 test server that misbehaves on purpose.

Why: what a store or a network does wrong must be tested against the real server, not a
mock, so the faults are injected on the wire between obstore and SeaweedFS:

* ``drop_conditions``: strip ``If-None-Match`` and ``If-Match``, so every "create-only"
  put overwrites and a stale ETag is accepted (a look-alike that ignores the headers;
  used in front of an unauthenticated server, as the headers are signed);
* ``throttle_every``: answer every n-th request ``503 SlowDown`` without forwarding it
  (S3's request-rate limit), which the client must retry with backoff;
* ``lose_response``: a predicate on (method, path); a matching request is forwarded and
  done on the server, then the connection is closed without an answer (a response lost
  in the network), so the client cannot tell whether it landed;
* ``fault``: a function of (method, path) giving a :class:`Fault` for that one request
  (or None): any of the above, or the answer delayed (past the client's timeout, so it
  retries a request that landed), the request done twice (a retransmission; the second
  answer is sent), or a ``409``/``412`` in place of the ``2xx`` of a conditional put
  that landed. :class:`SeededFaults` picks them at random from a seed (the same seed
  gives the same sequence of picks; which request gets which depends on timing when
  several clients share the proxy).

Every fault but throttling and stripping acts after the server did the request: the
proxy never holds a request back to land later, so once the client has its answer (or
gave up on one), nothing it sent is still on the way.

Other headers, ``Host`` included, pass unchanged, so signed requests stay valid.
"""

from __future__ import annotations

import http.client
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

CONDITIONS = {"if-none-match", "if-match"}
SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
#: What S3 answers with each status a conditional put may be refused with.
REFUSALS = {
    409: b"<Error><Code>ConditionalRequestConflict</Code><Message>conflict</Message></Error>",
    412: b"<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold"
    b"</Message></Error>",
}
Headers = list[tuple[str, str]]
KINDS = ("lose", "status", "throttle", "delay", "duplicate", "strip")


@dataclass(frozen=True)
class Fault:
    """What the proxy does to one request: ``kind`` is one of :data:`KINDS`."""

    kind: str
    status: int = 412
    delay_s: float = 0.0


class SeededFaults:
    """A fault for each request at random from ``seed``: each kind with its rate
    (``{"lose": 0.02, ...}``); ``status`` rewrites only conditional puts (a refusal in
    place of a 2xx is what a conditional put can get), ``delay`` waits ``delay_s``."""

    def __init__(self, seed: int, rates: Mapping[str, float], delay_s: float = 0.0) -> None:
        assert set(rates) <= set(KINDS), rates
        self.rates = dict(rates)
        self.delay_s = delay_s
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def __call__(self, method: str, path: str, conditional: bool) -> Fault | None:
        with self._lock:
            roll = self._random.random()
            status = self._random.choice((409, 412))
        for kind, rate in self.rates.items():
            if roll < rate:
                if kind == "status" and not (method == "PUT" and conditional):
                    return None
                return Fault(kind, status, self.delay_s)
            roll -= rate
        return None


class FaultProxy:
    """Serving on :attr:`endpoint` until :meth:`stop`; :attr:`counts` says what it did."""

    def __init__(
        self,
        upstream: str,
        drop_conditions: bool = False,
        throttle_every: int = 0,
        lose_response: Callable[[str, str], bool] | None = None,
        fault: Callable[[str, str, bool], Fault | None] | None = None,
    ) -> None:
        target = urlsplit(upstream)
        host, port = target.hostname or "127.0.0.1", target.port or 80
        self.counts: Counter[str] = Counter()
        lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # an answer goes out in two writes: no 40 ms wait between

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                conditional = any(k.lower() in CONDITIONS for k in self.headers)
                chosen = fault(self.command, self.path, conditional) if fault is not None else None
                kind = chosen.kind if chosen is not None else ""
                with lock:
                    proxy.counts["requests"] += 1
                    if throttle_every > 0 and proxy.counts["requests"] % throttle_every == 0:
                        kind = "throttle"
                    if kind:
                        proxy.counts[{"throttle": "throttled", "lose": "lost"}.get(kind, kind)] += 1
                if kind == "throttle":
                    self._answer(503, [("Content-Type", "application/xml")], SLOW_DOWN)
                    return
                drop = CONDITIONS if drop_conditions or kind == "strip" else set()
                headers = {k: v for k, v in self.headers.items() if k.lower() not in drop}
                status, kept, data = self._upstream(headers, body)
                if kind == "duplicate":  # a retransmission: the server does it twice
                    status, kept, data = self._upstream(headers, body)
                lost = kind == "lose"
                if not lost and lose_response is not None and lose_response(self.command, self.path):
                    with lock:
                        proxy.counts["lost"] += 1
                    lost = True
                if lost:
                    self.close_connection = True  # done upstream; the client never hears of it
                    return
                if kind == "status" and chosen is not None and 200 <= status < 300:
                    status, kept, data = chosen.status, [("Content-Type", "application/xml")], REFUSALS[chosen.status]
                if kind == "delay" and chosen is not None:
                    time.sleep(chosen.delay_s)  # done upstream; the answer comes late (maybe too late)
                try:
                    self._answer(status, kept, data)
                except OSError:
                    self.close_connection = True  # the client gave up waiting and hung up

            def _upstream(self, headers: dict[str, str], body: bytes | None) -> tuple[int, Headers, bytes]:
                conn = http.client.HTTPConnection(host, port, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                kept = [(k, v) for k, v in resp.getheaders() if k.lower() not in ("transfer-encoding", "connection")]
                return resp.status, kept, data

            def _answer(self, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
                self.send_response(status)
                head = self.command == "HEAD"  # its Content-Length is the object's: keep it
                for k, v in headers:
                    if k.lower() != "content-length" or head:
                        self.send_header(k, v)
                if not head or not any(k.lower() == "content-length" for k, _ in headers):
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
