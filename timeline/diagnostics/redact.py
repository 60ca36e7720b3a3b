"""Secrets out of everything lakeline prints: the one redaction helper.

Connection strings and URLs reach error messages, log lines, metric labels, ``runner
status``, plans and reports. Each of those goes through :func:`redact`, which masks every
form a secret takes in them, whatever the scheme (a misspelt ``postgresq://`` or a
``mysql://`` URL carries a password as well as a good one):

* the password of a URL's userinfo (``scheme://user:secret@host``, and ``user:secret@host``
  without a scheme);
* ``key=value`` pairs (and ``"key": value`` in JSON or reprs) and URL query parameters whose
  key names a secret (``password``, ``passwd``, ``pwd``, ``secret``, ``token``, ``api_key``,
  ``access_key``, ``PGPASSWORD``, ...), as libpq's ``host=h password=secret`` and
  ``?password=secret`` write them, quoted or not (an unterminated quote masks the rest);
* ``Authorization`` header values.

It works on free text, so a message that embeds a DSN anywhere is safe to redact as a
whole. It is a pure function of the text (no parsing library), so every layer may use it.
Companions apply it where text is not built by hand: :class:`RedactingFilter` (every
record of a logger, see :func:`redacting_logger`), :class:`RedactingFormatter` (every log
line a CLI process writes, tracebacks included) and :func:`redacted_repr` (reprs of
config values that hold a DSN).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable

#: What replaces a secret.
MASK = "***"

# The secret runs to the last ``@`` of its word; or, for a password with blanks (which
# libpq refuses, quoting it), over blank-separated chunks without ``/`` or ``@`` to an ``@``.
_USERINFO = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/?#@\s]*)"
    r":(?P<secret>[^\s]*(?=@)|[^\s/@]*(?:[ \t]+[^\s/@]*)+?(?=@))@"
)
# ``user:secret@host`` with no scheme (a DSN whose ``postgresql://`` was forgotten): a
# token that starts a word, a colon, then an ``@`` before the next blank or quote.
_BARE_USERINFO = re.compile(r"(?P<head>(?:^|(?<=[\s'\"(=]))[A-Za-z0-9_.\-]+):(?P<secret>[^\s/'\"@]+)@(?=[A-Za-z0-9\[])")
# Words that end a secret key, with any prefix (``PGPASSWORD``, ``client_secret``); and
# words that are a secret key only on their own or after ``_``/``-`` (``pass``, ``auth``).
_SUFFIX_KEYS = r"password|passwd|secret|token|api[_-]?key|apikey|access[_-]?key|credentials?"
_WORD_KEYS = r"pwd|pass|auth"
_KEY_VALUE = re.compile(
    rf"(?P<key>(?<![A-Za-z0-9])(?:[A-Za-z0-9_\-]*(?:{_SUFFIX_KEYS})|(?:[A-Za-z0-9_\-]*[_\-])?(?:{_WORD_KEYS})))"
    r"(?P<sep>[\"']?\s*(?:=|%3D|:(?=[\s\"']))\s*)"
    r"(?P<value>'(?:[^'\\]|\\.)*(?:'|$)|\"(?:[^\"\\]|\\.)*(?:\"|$)|[^\s&;,'\"]+)",
    re.IGNORECASE,
)
_AUTHORIZATION = re.compile(
    r"(?P<key>\bauthorization[\"']?\s*[:=]\s*[\"']?)(?P<scheme>(?:bearer|basic|token|digest)\s+)?"
    r"(?P<value>[^\s'\",}]+)",
    re.IGNORECASE,
)


#: Secret values this process was given outside any DSN (an object store's credentials,
#: :func:`register_secret`): masked wherever they appear, with or without a key.
_REGISTERED: set[str] = set()


def register_secret(value: str) -> None:
    """Mask ``value`` in everything :func:`redact` sees from now on in this process: for
    credentials that reach lakeline as bare values (``storage_options``, the environment),
    which an error of a library lakeline calls may quote without a key."""
    if len(value) >= 3:
        _REGISTERED.add(value)


def secrets_in(text: str) -> list[str]:
    """The secret values :func:`redact` finds in ``text`` (a DSN or URL), unquoted, so
    they can be masked where they reappear without their key: libpq quotes a password
    back on its own in some errors ("unexpected spaces found in ...")."""
    found = [m.group("secret") for m in _USERINFO.finditer(text)]
    found += [m.group("secret") for m in _BARE_USERINFO.finditer(text)]
    found += [m.group("value").strip("'\"") for m in _KEY_VALUE.finditer(text)]
    return [f for f in found if len(f) >= 3]  # a one-letter "secret" would mask half the text


def redact(text: object, known: Iterable[str] = ()) -> str:
    """``text`` (any object, through ``str``) with every secret replaced by ``***``; the
    strings in ``known`` (from :func:`secrets_in`) are masked wherever they appear.

    >>> redact("postgresql://app:S3cret@db:5432/lake?sslmode=require")
    'postgresql://app:***@db:5432/lake?sslmode=require'
    >>> redact("host=db password='a b' dbname=lake")
    'host=db password=*** dbname=lake'
    >>> redact("postgresql://app@db/lake?password=S3cret&sslmode=require")
    'postgresql://app@db/lake?password=***&sslmode=require'
    """
    out = str(text)
    for secret in sorted(set(known) | _REGISTERED, key=len, reverse=True):
        out = out.replace(secret, MASK)
    out = _USERINFO.sub(lambda m: f"{m.group('head')}:{MASK}@", out)
    out = _BARE_USERINFO.sub(lambda m: f"{m.group('head')}:{MASK}@", out)
    out = _KEY_VALUE.sub(lambda m: f"{m.group('key')}{m.group('sep')}{MASK}", out)
    return _AUTHORIZATION.sub(lambda m: f"{m.group('key')}{m.group('scheme') or ''}{MASK}", out)


def redacted_repr(obj: object) -> str:
    """The dataclass-style repr of ``obj`` (a dataclass) with its secrets masked: for values
    that keep a DSN, whose default repr would print its password in any log or traceback."""
    assert dataclasses.is_dataclass(obj)
    fields = ", ".join(f"{f.name}={getattr(obj, f.name)!r}" for f in dataclasses.fields(obj) if f.repr)
    return redact(f"{type(obj).__name__}({fields})")


class RedactingFilter(logging.Filter):
    """A logger filter that redacts each record before any handler sees it: its message
    (arguments merged in) and its traceback text. Attached to a logger whose lines name
    DSNs (the runner's), it keeps them clean whatever handlers an application installs."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # arguments that do not fit the format: keep both, redacted
            message = f"{record.msg} {record.args!r}"
        record.msg, record.args = redact(message), None
        # Formatters reuse exc_text once set: make it the redacted text.
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        elif record.exc_info:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def redacting_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with a :class:`RedactingFilter` (added once)."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, RedactingFilter) for f in logger.filters):
        logger.addFilter(RedactingFilter())
    return logger


class RedactingFormatter(logging.Formatter):
    """A log formatter whose every line (message, arguments, traceback) went through
    :func:`redact`: a log line is built from reprs of exceptions and objects lakeline does
    not control (a driver's error may quote the connection string it refused)."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


__all__ = [
    "MASK",
    "RedactingFilter",
    "RedactingFormatter",
    "redact",
    "redacted_repr",
    "redacting_logger",
    "register_secret",
    "secrets_in",
]
