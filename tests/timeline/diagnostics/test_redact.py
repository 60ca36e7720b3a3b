"""The one redaction helper (:mod:`lakeline.timeline.diagnostics.redact`): every form a password
takes in a DSN, URL or log line is masked; ordinary text is left alone."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest
from lakeline.timeline.diagnostics.redact import RedactingFilter, RedactingFormatter, redact, redacted_repr

PW = "S3cretPW"


@pytest.mark.parametrize(
    "text",
    [
        f"postgresql://app:{PW}@db:5432/lake",
        f"postgresq://app:{PW}@db/lake",
        f"postgres-ql://u:{PW}@127.0.0.1/db",
        f"mysql://u:{PW}@h/x",
        f"postgresql://u:p@{PW}@h/x",
        f"postgresql://u:{PW} x@h:1/x",  # a blank in the password (libpq refuses and quotes it)
        f"u:{PW}@127.0.0.1/db",
        f"postgresql://postgres@127.0.0.1:1/x?password={PW}",
        f"postgresql://h/x?sslmode=require&password={PW}&a=b",
        f"host=h password={PW} dbname=x",
        f"host=h password='{PW} and more' dbname=x",
        f"host=h password='{PW}",  # unterminated quote: the rest is the value
        f"PGPASSWORD={PW}",
        f"client_secret={PW}",
        f"{{'password': '{PW}'}}",
        f'{{"token": "{PW}"}}',
        f"password%3D{PW}",
        f"Authorization: Bearer {PW}",
        f'catalog="postgresql://u@h/x?password={PW}"}}',
    ],
)
def test_every_form_is_masked(text: str) -> None:
    out = redact(text)
    assert PW not in out and "***" in out


@pytest.mark.parametrize(
    "text",
    [
        "error: no lakeline table at /data/x [TableNotFoundError]",
        "postgresql://postgres@127.0.0.1:5432/lake",
        "postgresql://h:5432/x then bob@example.org",
        "max_tokens=5 passed=3 author=Bob bypass=1",
        "every 5m",
    ],
)
def test_ordinary_text_is_kept(text: str) -> None:
    assert redact(text) == text


def test_logging_companions_mask_messages_and_tracebacks() -> None:
    try:
        raise ValueError(f"cannot connect to postgresql://u:{PW}@h/x")
    except ValueError as e:
        record = logging.LogRecord(
            "lakeline.x",
            logging.WARNING,
            __file__,
            1,
            "failed on %s: %r",
            (f"host=h password={PW}", e),
            exc_info=(type(e), e, e.__traceback__),
        )
    formatted = RedactingFormatter().format(record)
    assert PW not in formatted and "Traceback" in formatted
    assert RedactingFilter().filter(record)  # also after a formatter cached the raw traceback text
    assert PW not in record.getMessage() and PW not in (record.exc_text or "")
    assert PW not in logging.Formatter().format(record)


def test_redacted_repr_of_a_dataclass() -> None:
    @dataclass
    class Entry:
        path: str
        timeline: str

    assert (
        redacted_repr(Entry("/t", f"postgresql://u:{PW}@h/x")) == "Entry(path='/t', timeline='postgresql://u:***@h/x')"
    )
