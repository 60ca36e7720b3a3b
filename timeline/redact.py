"""Secrets out of everything lakeline prints: the one redaction helper.

Connection strings and URLs reach error messages, log lines, metric labels, ``runner
status``, plans and reports. Each of those goes through :func:`redact`, which masks every
form a secret takes in them, whatever the scheme (a misspelt ``postgresq://`` or a
``mysql://`` URL carries a password as well as a good one):

* the password of a URL's userinfo (``scheme://user:secret@host``);
* ``key=value`` pairs (and ``"key": value`` in JSON or reprs) and URL query parameters whose key names a secret (``password``,
  ``passwd``, ``pwd``, ``secret``, ``token``, ``api_key``, ``access_key``, ...), as libpq's
  ``host=h password=secret`` and ``?password=secret`` write them, quoted or not;
* ``Authorization`` header values.

It works on free text, so a message that embeds a DSN anywhere is safe to redact as a
whole. It is a pure function of the text (no parsing library), so every layer may use it.
"""

from __future__ import annotations

import re

#: What replaces a secret.
MASK = "***"

_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/?#@\s]*):(?P<secret>[^\s]*)@")
_SECRET_KEYS = (
    r"password|passwd|pwd|pass|secret|token|api[_-]?key|apikey|access[_-]?key|secret[_-]?key"
    r"|aws_secret_access_key|aws_session_token|session[_-]?token|sslpassword|credentials?|auth"
)
_KEY_VALUE = re.compile(
    rf"(?P<key>(?<![A-Za-z0-9])(?:[A-Za-z0-9_\-]*[_\-])?(?:{_SECRET_KEYS}))"
    r"(?P<sep>[\"']?\s*(?:=|:(?=[\s\"']))\s*)"
    r"(?P<value>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s&;,'\"]+)",
    re.IGNORECASE,
)
_AUTHORIZATION = re.compile(
    r"(?P<key>\bauthorization[\"']?\s*[:=]\s*[\"']?)(?P<scheme>(?:bearer|basic|token|digest)\s+)?"
    r"(?P<value>[^\s'\",}]+)",
    re.IGNORECASE,
)


def redact(text: object) -> str:
    """``text`` (any object, through ``str``) with every secret replaced by ``***``.

    >>> redact("postgresql://app:S3cret@db:5432/lake?sslmode=require")
    'postgresql://app:***@db:5432/lake?sslmode=require'
    >>> redact("host=db password='a b' dbname=lake")
    'host=db password=*** dbname=lake'
    """
    out = _USERINFO.sub(lambda m: f"{m.group('head')}:{MASK}@", str(text))
    out = _KEY_VALUE.sub(lambda m: f"{m.group('key')}{m.group('sep')}{MASK}", out)
    return _AUTHORIZATION.sub(lambda m: f"{m.group('key')}{m.group('scheme') or ''}{MASK}", out)


def has_secret(text: str) -> bool:
    """Whether :func:`redact` would change ``text``."""
    return redact(text) != text


__all__ = ["MASK", "has_secret", "redact"]
