"""A loopback HTTP proxy that drops the conditional headers: an S3 store made unsafe.

Why: the conformance probe must be tested against a store whose conditional puts really
do not hold, not a mock. Put in front of an unauthenticated S3 server (a signed request
would fail once a signed header is gone), it forwards every request but strips
``If-None-Match`` and ``If-Match``, so every "create-only" put overwrites and a stale
ETag is accepted: what a look-alike that ignores the headers does.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

DROPPED = {"if-none-match", "if-match"}


class UnsafeProxy:
    """``UnsafeProxy(upstream)``: serving on :attr:`endpoint` until :meth:`stop`."""

    def __init__(self, upstream: str) -> None:
        target = urlsplit(upstream)
        host, port = target.hostname or "127.0.0.1", target.port or 80

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in DROPPED | {"host"}}
                conn = http.client.HTTPConnection(host, port, timeout=30)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
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
