"""The HTTP commit callback against hostile or broken receivers (issue 25 "Safety",
audit bad-input-2026-11-25 rows H1-H6 and B1b).

Every receiver is a real ``ThreadingHTTPServer`` on 127.0.0.1 in a thread, stopped by
the fixture; handlers stop on their own (a dripping one after a few seconds or when the
client goes away). What is checked:

* a 3xx answer is a failed delivery: the other server receives nothing, and the error
  names the redirect (H3a, H3b);
* ``timeout`` bounds an attempt as a whole: a server that answers and then drips (its
  body or its headers) releases the writer within about ``timeout`` and the commit
  stands (H2a, H2b);
* bad ``url`` / ``retries`` / ``timeout`` / ``headers`` are refused, typed, before
  anything is written, by ``http_post`` and by the ``commit.callback-url`` property
  (H1a, H1b, H1c, B1b);
* a password in the URL and header values never show in ``hook_errors``, logs or reprs
  (H6);
* 5xx is retried, 4xx is not, and a normal delivery carries the summary and its
  ``Idempotency-Key`` (H5 and the existing contract).
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.table import Hooks, InvalidPropertyError, Table
from lakeline.table.callbacks import http_post
from lakeline.timeline.instant import State

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.float64())])
ROW = pa.table({"id": [7], "v": [7.0]}, schema=SCHEMA)

#: ``respond(handler, body)`` answers one request (``body``: the request's bytes).
Respond = Callable[[BaseHTTPRequestHandler, bytes], None]


class _Server:
    """A loopback server recording every request (method, path, headers, body)."""

    def __init__(self, respond: Respond) -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    outer.requests.append((self.command, self.path, dict(self.headers), body))
                try:
                    respond(self, body)
                except OSError:
                    pass  # the client hung up (a deadline): nothing to answer

            do_GET = do_POST = do_PUT = do_HEAD = _any  # noqa: N815 - the http.server API

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/cb"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)


@pytest.fixture
def serve() -> Iterator[Callable[[Respond], _Server]]:
    servers: list[_Server] = []

    def start(respond: Respond) -> _Server:
        servers.append(_Server(respond))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def _answer(code: int, body: bytes = b"", **headers: str) -> Respond:
    def respond(h: BaseHTTPRequestHandler, _: bytes) -> None:
        h.send_response(code)
        for k, v in headers.items():
            h.send_header(k.replace("_", "-"), v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return respond


@pytest.fixture
def table(tmp_path: Path) -> Table:
    t = Table.create(str(tmp_path / "t"), SCHEMA, record_key="id", properties={"engine.parallelism": 1})
    t.insert(pa.table({"id": [1], "v": [1.0]}, schema=SCHEMA))
    return t


def _landed(t: Table, r: Any) -> bool:
    """The write's commit is completed, seen by a fresh handle, with its row."""
    fresh = Table.open(t.path)
    return (
        r.instant is not None
        and fresh.timeline.get(r.instant.id).state is State.COMPLETED
        and 7 in fresh.to_arrow().column("id").to_pylist()
    )


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_redirect_is_a_failed_delivery_and_is_never_followed(table: Table, serve: Any, code: int) -> None:
    other = serve(_answer(200))
    redirector = serve(_answer(code, Location=f"http://localhost:{other.port}/stolen"))
    hook = http_post(redirector.url, timeout=2, retries=2, headers={"Authorization": "Bearer TOPSECRET"})
    r = table.upsert(ROW, hooks=Hooks(callbacks=[hook]))
    assert _landed(table, r)
    assert other.requests == [], "a request went to the redirect's target"
    assert len(redirector.requests) == 1, "a redirect is not retried"
    [(name, text)] = r.hook_errors
    assert name == f"http_post({redirector.url})"
    assert str(code) in text and "redirect" in text and f"localhost:{other.port}" in text
    assert "TOPSECRET" not in text


def _drip_body(h: BaseHTTPRequestHandler, _: bytes) -> None:
    h.send_response(200)
    h.send_header("Content-Length", "1000")
    h.end_headers()
    for _ in range(12):
        h.wfile.write(b"x")
        h.wfile.flush()
        time.sleep(0.5)


def _drip_headers(h: BaseHTTPRequestHandler, _: bytes) -> None:
    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"y" * 100:
        h.wfile.write(bytes([byte]))
        h.wfile.flush()
        time.sleep(0.5)


@pytest.mark.parametrize("respond", [_drip_body, _drip_headers], ids=["body", "headers"])
def test_a_dripping_server_releases_the_writer_within_the_timeout(table: Table, serve: Any, respond: Respond) -> None:
    server = serve(respond)
    start = time.monotonic()
    r = table.upsert(ROW, hooks=Hooks(callbacks=[http_post(server.url, timeout=1, retries=0)]))
    assert time.monotonic() - start < 4, "the writer was held past its callback's timeout"
    [(_, text)] = r.hook_errors
    assert text.startswith("TimeoutError(") and "within 1 s" in text
    assert _landed(table, r)


def test_retries_and_timeouts_bound_the_writer_on_a_silent_server(table: Table, serve: Any) -> None:
    server = serve(lambda h, _: time.sleep(3))
    start = time.monotonic()
    r = table.upsert(ROW, hooks=Hooks(callbacks=[http_post(server.url, timeout=0.5, retries=1)]))
    assert time.monotonic() - start < 3  # 2 attempts of 0.5 s and one 0.2 s backoff, plus the write
    assert len(server.requests) == 2 and "TimeoutError" in r.hook_errors[0][1]
    assert _landed(table, r)


BAD_ARGUMENTS: list[dict[str, Any]] = [
    {"url": 12345},
    {"url": None},
    {"url": "http://"},
    {"url": "http://:80/cb"},
    {"url": "ftp://x"},
    {"url": "file:///etc/passwd"},
    {"url": "HTTP://127.0.0.1/cb"},
    {"url": " http://127.0.0.1/cb"},
    {"url": "http://127.0.0.1/c b"},
    {"url": "http://127.0.0.1:99999/cb"},
    {"url": "http://127.0.0.1:0/cb"},
    {"url": "http://exämple.org/cb"},
    {"retries": -1},
    {"retries": True},
    {"retries": "x"},
    {"retries": 1.0},
    {"retries": 11},
    {"retries": 10**400},
    {"timeout": -1},
    {"timeout": 0},
    {"timeout": float("nan")},
    {"timeout": float("inf")},
    {"timeout": "5"},
    {"timeout": False},
    {"timeout": 301},
    {"timeout": 10**400},
    {"headers": "Authorization: x"},
    {"headers": {"X-Token": 5}},
    {"headers": {5: "x"}},
    {"headers": {"Bad Name": "x"}},
    {"headers": {"X-Inject": "a\r\nHost: evil"}},
]


@pytest.mark.parametrize("kwargs", BAD_ARGUMENTS, ids=[repr(k)[:40] for k in BAD_ARGUMENTS])
def test_bad_arguments_are_refused_typed_before_anything_is_written(table: Table, kwargs: dict[str, Any]) -> None:
    before = len(table.timeline.instants())
    args: dict[str, Any] = {"url": "http://127.0.0.1:9/cb", **kwargs}
    with pytest.raises(InvalidPropertyError) as refused:
        table.upsert(ROW, hooks=Hooks(callbacks=[http_post(**args)]))
    assert len(Table.open(table.path).timeline.instants()) == before, "a refused callback wrote an instant"
    name = next(iter(kwargs))
    assert (f"callback url {args['url']!r}" if name == "url" else f"http_post {name}") in str(refused.value)
    assert "Host: evil" not in str(refused.value)  # header values never show


@pytest.mark.parametrize("url", ["http://", "https://:443/", "ftp://x", "HTTP://x/cb"])
def test_the_callback_url_property_is_checked_like_http_post(tmp_path: Path, url: str) -> None:
    with pytest.raises(InvalidPropertyError, match="commit.callback-url") as refused:
        Table.create(str(tmp_path / "t"), SCHEMA, record_key="id", properties={"commit.callback-url": url})
    with pytest.raises(InvalidPropertyError) as direct:
        http_post(url)
    assert str(direct.value) in str(refused.value), "the two doors disagree"
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())


def test_secrets_never_show_in_hook_errors_logs_or_reprs(
    table: Table, serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    refusing = serve(_answer(500))
    hooks = Hooks(
        callbacks=[
            http_post("http://admin:HUNTER2@127.0.0.1:1/cb", retries=0, headers={"Authorization": "Bearer TOPSECRET"}),
            http_post(refusing.url.replace("://", "://admin:HUNTER2@"), retries=0, headers={"X-Api-Key": "TOPSECRET"}),
        ]
    )
    r = table.upsert(ROW, hooks=hooks)
    assert _landed(table, r) and len(r.hook_errors) == 2
    shown = f"{r.hook_errors} {caplog.text} {hooks.callbacks}"
    assert "HUNTER2" not in shown and "TOPSECRET" not in shown
    assert r.hook_errors[0][0] == "http_post(http://admin:***@127.0.0.1:1/cb)"
    assert "hook http_post(http://admin:***@127.0.0.1:1/cb)" in caplog.text
    # The receiver itself got the credentials it was given, as basic authentication.
    [(_, _, headers, _)] = refusing.requests
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"admin:HUNTER2").decode()
    assert headers["X-Api-Key"] == "TOPSECRET"


@pytest.mark.parametrize(("code", "attempts"), [(500, 3), (503, 3), (404, 1), (400, 1)])
def test_a_5xx_is_retried_and_a_4xx_is_not(table: Table, serve: Any, code: int, attempts: int) -> None:
    server = serve(_answer(code, b"no"))
    r = table.upsert(ROW, hooks=Hooks(callbacks=[http_post(server.url, timeout=2, retries=2)]))
    assert len(server.requests) == attempts and _landed(table, r)
    [(_, text)] = r.hook_errors
    assert text.startswith(f"<HTTPError {code}")


def test_a_200_delivery_posts_the_summary_with_its_idempotency_key(table: Table, serve: Any) -> None:
    server = serve(_answer(200, b'{"ok": true}' * 1000))
    hook = http_post(server.url + "?tenant=a", headers={"X-Tenant": "a"})
    r = table.upsert(ROW, hooks=Hooks(callbacks=[hook]))
    assert r.hook_errors == [] and _landed(table, r)
    [(method, path, headers, body)] = server.requests
    assert method == "POST" and path == "/cb?tenant=a"
    assert headers["Idempotency-Key"] == f"{table.config.table_uuid}/{r.instant.id}"
    assert headers["Content-Type"] == "application/json" and headers["X-Tenant"] == "a"
    assert "Authorization" not in headers
    summary = json.loads(body)
    assert summary["instant"] == r.instant.id and summary["operation"] == "upsert" and summary["table"] == table.path
