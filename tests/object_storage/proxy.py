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
  in the network), so the client cannot tell whether it landed.

Other headers, ``Host`` included, pass unchanged, so signed requests stay valid.
"""

from __future__ import annotations

import http.client
import threading
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

CONDITIONS = {"if-none-match", "if-match"}
SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


class FaultProxy:
    """Serving on :attr:`endpoint` until :meth:`stop`; :attr:`counts` says what it did."""

    def __init__(
        self,
        upstream: str,
        drop_conditions: bool = False,
        throttle_every: int = 0,
        lose_response: Callable[[str, str], bool] | None = None,
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
                with lock:
                    proxy.counts["requests"] += 1
                    throttled = throttle_every > 0 and proxy.counts["requests"] % throttle_every == 0
                    if throttled:
                        proxy.counts["throttled"] += 1
                if throttled:
                    self._answer(503, [("Content-Type", "application/xml")], SLOW_DOWN)
                    return
                drop = CONDITIONS if drop_conditions else set()
                headers = {k: v for k, v in self.headers.items() if k.lower() not in drop}
                conn = http.client.HTTPConnection(host, port, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                if lose_response is not None and lose_response(self.command, self.path):
                    with lock:
                        proxy.counts["lost"] += 1
                    self.close_connection = True  # done upstream; the client never hears of it
                    return
                kept = [(k, v) for k, v in resp.getheaders() if k.lower() not in ("transfer-encoding", "connection")]
                self._answer(resp.status, kept, data)

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
