"""Commit callbacks that leave the process: an HTTP POST of the commit's summary.

Hudi's ``HoodieWriteCommitHttpCallback``: after a commit landed, a JSON summary of it
is POSTed to a URL, with a timeout and a few retries. The standard library does the
job (no HTTP client dependency). Delivery is at least once: a POST whose response was
lost is sent again, so every POST carries an ``Idempotency-Key`` header (the table's
uuid and the instant id) that lets a receiver keep each commit once.

A callback runs on the writer's thread after its commit landed, and the table property
``commit.callback-url`` gives one to every writer of a table, so a receiver must never
be able to hold writers or learn what it should not (issue 25):

* ``http.client`` directly, never ``urlopen``: a redirect (any 3xx) is a failed delivery,
  never followed, so no request (with its ``Authorization`` and body) goes elsewhere;
* ``timeout`` bounds a whole attempt (name lookup, connect, send, the full answer), not
  each socket read: the attempt runs on a helper thread the writer waits for at most
  ``timeout``, whose socket is shut down when the time is up;
* arguments are checked when the callback is made (:func:`check_callback_url` is the one
  URL check of both doors, ``http_post`` and the ``commit.callback-url`` property);
* the URL is shown redacted (:func:`~lakeline.timeline.diagnostics.redact.redact`) in names, errors
  and reprs, and header values are never shown.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import numbers
import re
import ssl
import threading
import time
import urllib.error
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from ..timeline.diagnostics.redact import redact
from ..timeline.errors import InvalidPropertyError

if TYPE_CHECKING:
    from .write.writer import WriteResult

#: Upper bounds of the arguments: a callback may hold its writer for at most
#: ``(retries + 1) * timeout`` plus the backoff sleeps, so neither may be unbounded.
MAX_RETRIES = 10
MAX_TIMEOUT = 300.0
MAX_BACKOFF = 60.0
#: Longest single backoff sleep (the delay doubles from ``backoff`` up to this).
MAX_BACKOFF_SLEEP = 5.0

_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")  # an RFC 9110 token
_HEADER_VALUE_BAD = re.compile(r"[\r\n\x00]")  # would split or end the header block


def _url_error(url: object, why: str) -> InvalidPropertyError:
    shown = repr(redact(url)) if isinstance(url, str) else repr(url)
    return InvalidPropertyError(f"callback url {shown} {why}")


def check_callback_url(url: object) -> str:
    """``url`` if it is an http(s) URL a callback may POST to, the one check of
    ``http_post`` and of the ``commit.callback-url`` property.

    The scheme is lower case as written (``HTTP://`` is refused, as is leading space):
    the URL is used as given, with nothing normalised behind the user's back.

    Raises:
        InvalidPropertyError: not a str, not http(s), no host, a bad port, or
            whitespace, control or non-ASCII characters.
    """
    if not isinstance(url, str):
        raise _url_error(url, f"must be a str, not {type(url).__name__}")
    if not url.startswith(("http://", "https://")):
        raise _url_error(url, "is not an http(s) URL (http:// or https://, lower case)")
    if not url.isascii() or any(c.isspace() or not c.isprintable() for c in url):
        raise _url_error(
            url, "has whitespace, control or non-ASCII characters (percent-encode them; punycode an international host)"
        )
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise _url_error(url, "has a bad port") from None
    if not parts.hostname:
        raise _url_error(url, "has no host")
    if port == 0:
        raise _url_error(url, "has port 0")
    return url


def _check_number(name: str, value: object, low: float, high: float, integral: bool) -> None:
    """Refuse ``value`` unless a (finite, integral if asked) number in ``[low, high]``."""
    kind = numbers.Integral if integral else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        raise InvalidPropertyError(
            f"http_post {name}={value!r}: must be {'an int' if integral else 'a number'}, not {type(value).__name__}"
        )
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float is out of range all the same
        number = math.inf
    if not math.isfinite(number) or not low <= number <= high:
        raise InvalidPropertyError(f"http_post {name}={value!r}: must be between {low:g} and {high:g}")


def _check_headers(headers: object) -> dict[str, str]:
    """``headers`` as a dict of str to str fit for an HTTP request. Messages name
    headers, never their values (they are often credentials)."""
    if not isinstance(headers, Mapping):
        raise InvalidPropertyError(f"http_post headers: must be a mapping of str to str, not {type(headers).__name__}")
    out: dict[str, str] = {}
    for key, value in headers.items():
        if not isinstance(key, str) or not _HEADER_NAME.match(key):
            raise InvalidPropertyError(f"http_post headers: {key!r} is not a header name")
        if not isinstance(value, str):
            raise InvalidPropertyError(
                f"http_post headers: the value of {key!r} must be a str, not {type(value).__name__}"
            )
        if _HEADER_VALUE_BAD.search(value):
            raise InvalidPropertyError(f"http_post headers: the value of {key!r} has a line break or NUL")
        out[key] = value
    return out


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


class _Attempt:
    """One POST, run on a helper thread so that the writer waits for it at most until
    ``deadline`` (a monotonic time), whatever the server does.

    The helper sets every socket timeout to the time left, so it ends on its own soon
    after the deadline; :meth:`abandon` shuts its socket down so it ends at once, and
    stops it from sending once the deadline has passed.
    """

    def __init__(self, url: str, body: bytes, headers: Mapping[str, str], deadline: float) -> None:
        self.url, self.body, self.headers, self.deadline = url, body, headers, deadline
        self._lock = threading.Lock()
        self._conn: http.client.HTTPConnection | None = None
        self._abandoned = False
        self.status = 0
        self.location = ""
        self.error: BaseException | None = None

    def _time_left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("deadline passed")
        return left

    def _limit(self, conn: http.client.HTTPConnection) -> None:
        """The socket's timeout shrinks to the time left before each blocking step."""
        left = self._time_left()
        if conn.sock is not None:
            conn.sock.settimeout(left)

    def run(self) -> None:
        try:
            self._exchange()
        except Exception as e:  # noqa: BLE001 - carried to the writer's thread, which raises it
            self.error = e

    def _exchange(self) -> None:
        parts = urlsplit(self.url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(
                parts.hostname or "", parts.port, timeout=self._time_left(), context=ssl.create_default_context()
            )
        else:
            conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=self._time_left())
        with self._lock:
            if self._abandoned:
                return
            self._conn = conn
        try:
            conn.connect()
            with self._lock:  # the writer gave up during the connect: send nothing
                if self._abandoned:
                    return
            self._limit(conn)
            conn.request("POST", target, body=self.body, headers=dict(self.headers))
            self._limit(conn)
            response = conn.getresponse()
            self.status, self.location = response.status, response.getheader("Location") or ""
            if not 200 <= response.status < 300:
                return  # a refusal or a redirect: its body does not matter
            # The answer is read to its end (an incomplete one is a failed delivery), one
            # socket read at a time, each bounded by the time left.
            while True:
                self._limit(conn)
                if not response.read1(65536):
                    break
            if response.length:  # the server closed before the promised length
                raise http.client.IncompleteRead(b"", response.length)
        finally:
            conn.close()

    def abandon(self) -> None:
        """The writer stops waiting: shut the socket down so the helper ends now."""
        with self._lock:
            self._abandoned = True
            conn = self._conn
        sock = conn.sock if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(2)  # SHUT_RDWR: wakes a read blocked on another thread
            except OSError:
                pass  # already closed by the helper


@dataclass(frozen=True, repr=False)
class HttpPost:
    """A callback that POSTs :func:`commit_summary` as JSON to ``url``.

    ``timeout`` bounds each attempt as a whole: from name lookup and connect to the end
    of the answer. ``retries`` more attempts follow a failure (a connection error, a
    timeout or a 5xx answer; a 4xx is the receiver refusing and is not retried, and a
    3xx is never followed nor retried), ``backoff`` seconds apart, doubling up to
    ``MAX_BACKOFF_SLEEP``. A writer is thus held at most ``(retries + 1) * timeout``
    plus the sleeps. A URL with userinfo (``https://user:pw@host/``) is sent as basic
    authentication unless ``headers`` has an ``Authorization``.
    """

    url: str
    table_path: str = ""
    table_uuid: str = ""
    timeout: float = 5.0
    retries: int = 2
    backoff: float = 0.2
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_callback_url(self.url)
        _check_number("timeout", self.timeout, 0, MAX_TIMEOUT, integral=False)
        if self.timeout <= 0:
            raise InvalidPropertyError(f"http_post timeout={self.timeout!r}: must be more than 0 s")
        _check_number("retries", self.retries, 0, MAX_RETRIES, integral=True)
        _check_number("backoff", self.backoff, 0, MAX_BACKOFF, integral=False)
        # Frozen: normalised copies through object.__setattr__ (a caller's dict may change).
        object.__setattr__(self, "headers", _check_headers(self.headers))
        object.__setattr__(self, "timeout", float(self.timeout))
        object.__setattr__(self, "retries", int(self.retries))

    @property
    def name(self) -> str:
        return f"http_post({redact(self.url)})"

    def __repr__(self) -> str:
        # Header values are credentials more often than not: only their names show.
        return (
            f"HttpPost({redact(self.url)!r}, timeout={self.timeout:g}, retries={self.retries}, "
            f"headers={sorted(self.headers)})"
        )

    def for_table(self, path: str, uuid: str) -> HttpPost:
        """The same callback naming the table it reports on."""
        return replace(self, table_path=path, table_uuid=uuid)

    def _headers(self, instant: int) -> dict[str, str]:
        out = {
            "Content-Type": "application/json",
            "User-Agent": "lakeline-callback",
            "Connection": "close",
            "Idempotency-Key": f"{self.table_uuid}/{instant}",
        }
        parts = urlsplit(self.url)
        if parts.username is not None:
            userinfo = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            out["Authorization"] = "Basic " + base64.b64encode(userinfo.encode()).decode("ascii")
        if any(k.lower() == "authorization" for k in self.headers):
            out.pop("Authorization", None)  # the caller's own wins over the URL's
        return {**out, **self.headers}

    def _attempt(self, body: bytes, headers: Mapping[str, str]) -> None:
        """One POST within ``timeout``.

        Raises:
            urllib.error.HTTPError: a non-2xx answer (a 3xx says where it would go).
            TimeoutError: no complete answer within ``timeout``.
            OSError, http.client.HTTPException: the connection failed.
        """
        shown = redact(self.url)
        attempt = _Attempt(self.url, body, headers, time.monotonic() + self.timeout)
        helper = threading.Thread(target=attempt.run, name="lakeline-http-post", daemon=True)
        helper.start()
        helper.join(self.timeout)
        if helper.is_alive():
            attempt.abandon()
            raise TimeoutError(f"{shown}: no complete answer within {self.timeout:g} s")
        if isinstance(attempt.error, TimeoutError):  # a socket timeout or the deadline check
            raise TimeoutError(f"{shown}: no complete answer within {self.timeout:g} s") from None
        if attempt.error is not None:
            raise attempt.error
        status = attempt.status
        if 300 <= status < 400:
            where = redact(attempt.location)[:200] or "nowhere"
            raise urllib.error.HTTPError(
                shown,
                status,
                f"redirect to {where} not followed: a callback POSTs to its own URL only",
                http.client.HTTPMessage(),
                None,
            )
        if not 200 <= status < 300:
            raise urllib.error.HTTPError(
                shown, status, http.client.responses.get(status, "error"), http.client.HTTPMessage(), None
            )

    def __call__(self, result: WriteResult) -> None:
        """POST the summary; raises the last error when every attempt failed."""
        body = json.dumps(commit_summary(self.table_path, self.table_uuid, result)).encode()
        assert result.instant is not None
        headers = self._headers(result.instant.id)
        delay = self.backoff
        for attempt in range(self.retries + 1):
            try:
                self._attempt(body, headers)
                return
            except urllib.error.HTTPError as e:
                if e.code < 500 or attempt == self.retries:
                    raise
            except (OSError, http.client.HTTPException):
                if attempt == self.retries:
                    raise
            time.sleep(min(delay, MAX_BACKOFF_SLEEP))
            delay *= 2


def http_post(url: str, timeout: float = 5.0, retries: int = 2, headers: Mapping[str, str] | None = None) -> HttpPost:
    """A callback POSTing each commit's summary to ``url`` (see :class:`HttpPost`).

    Args:
        url: an http(s) URL with a host (lower-case scheme).
        timeout: seconds one attempt may take as a whole, in ``(0, 300]``.
        retries: attempts after a failed one, an int in ``[0, 10]``.
        headers: extra request headers (str to str), e.g. ``Authorization``.

    Raises:
        InvalidPropertyError: a bad argument, before anything is written.
    """
    return HttpPost(url, timeout=timeout, retries=retries, headers={} if headers is None else headers)
