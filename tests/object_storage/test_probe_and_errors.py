"""The conformance probe, and bad input on object stores: each a typed error before
anything is written, with no secret in its message.

The unsafe store is real: an unauthenticated SeaweedFS behind a loopback proxy that
drops the conditional headers (:mod:`tests.object_storage.proxy`), so racing
"create-only" puts all win and a stale ETag overwrites.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.table import Table
from lakeline.timeline.errors import (
    BucketNotFoundError,
    StorageConfigError,
    StoragePermissionError,
    StorageUnreachableError,
    UnsafeStorageError,
)
from lakeline.timeline.storage.filesystem import Storage
from lakeline.timeline.storage.probe import ROUNDS, probe

from tests.object_storage.proxy import FaultProxy
from tests.object_storage.s3_tables import SCHEMA
from tests.seaweedfs import SeaweedServer, start_seaweedfs


@pytest.fixture(scope="module")
def unsafe(s3: SeaweedServer) -> Iterator[dict[str, str]]:
    """Storage options of an unsafe store: an open SeaweedFS behind the header-dropping proxy."""
    server = start_seaweedfs(secured=False)
    proxy = FaultProxy(server.endpoint, drop_conditions=True)
    try:
        yield server.options(AWS_ENDPOINT_URL=proxy.endpoint)
    finally:
        proxy.stop()
        server.stop()


def objects_under(uri: str, options: dict[str, str]) -> list[str]:
    st = Storage.for_uri(uri, options)
    assert st.objects is not None
    return [o.path for o in st.objects.list(st.base)]


def test_the_probe_finds_the_test_server_safe(s3: SeaweedServer) -> None:
    st = Storage.for_uri(s3.uri(), s3.options())
    assert st.objects is not None
    report = probe(st.objects, st.base)
    assert report.safe, report
    assert [c.ok for c in report.checks] == [True] * 4
    assert f"winners per round: {[1] * ROUNDS}" in report.checks[1].detail
    assert objects_under(f"s3://{st.base}", s3.options()) == []  # the probe leaves nothing behind


def test_the_probe_refuses_a_store_that_drops_conditional_headers(unsafe: dict[str, str], s3: SeaweedServer) -> None:
    st = Storage.for_uri(s3.uri(), unsafe)
    assert st.objects is not None
    report = probe(st.objects, st.base)
    assert not report.safe
    failed = {c.name for c in report.checks if not c.ok}
    assert any("existing key" in n for n in failed) and any("stale ETag" in n for n in failed)
    assert any("races" in n for n in failed), report.checks  # more than one winner per round


def test_creating_a_table_on_an_unsafe_store_is_refused_before_anything_is_written(
    unsafe: dict[str, str], s3: SeaweedServer
) -> None:
    uri = s3.uri()
    with pytest.raises(UnsafeStorageError, match="PostgreSQL") as e:
        Table.create(uri, SCHEMA, record_key="id", storage_options=unsafe)
    assert "lakeline storage probe" in str(e.value)
    assert objects_under(uri, unsafe) == []


def test_storage_probe_cli_reports_safe_and_unsafe(
    s3: SeaweedServer, unsafe: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in s3.options().items():
        monkeypatch.setenv(key, value)
    ok = CliRunner().invoke(cli, ["storage", "probe", s3.uri(), "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["safe"] is True
    monkeypatch.setenv("AWS_ENDPOINT_URL", unsafe["AWS_ENDPOINT_URL"])
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    bad = CliRunner().invoke(cli, ["storage", "probe", s3.uri(), "-o", "AWS_SKIP_SIGNATURE=true"])
    assert bad.exit_code == 1, bad.output
    assert "UNSAFE" in bad.output and "NO" in bad.output


def test_wrong_credentials_are_a_typed_error_without_the_secret(s3: SeaweedServer) -> None:
    wrong = "not-the-SECRET-4711"
    with pytest.raises(StoragePermissionError) as e:
        Table.create(s3.uri(), SCHEMA, storage_options=s3.options(AWS_SECRET_ACCESS_KEY=wrong))
    assert wrong not in str(e.value) and s3.secret_key not in str(e.value)


def test_an_unreachable_endpoint_is_a_typed_error(s3: SeaweedServer) -> None:
    t0 = time.monotonic()
    with pytest.raises(StorageUnreachableError):
        Table.create(s3.uri(), SCHEMA, storage_options=s3.options(AWS_ENDPOINT_URL="http://127.0.0.1:9"))
    assert time.monotonic() - t0 < 20  # retries back off, within obstore's retry timeout


def test_a_missing_bucket_is_a_typed_error_and_is_not_created(s3: SeaweedServer) -> None:
    uri = "s3://no-such-bucket-here/t"
    with pytest.raises(BucketNotFoundError):
        Table.create(uri, SCHEMA, storage_options=s3.options())
    with pytest.raises(BucketNotFoundError):
        Table.open(uri, storage_options=s3.options())


def test_unknown_schemes_and_options_are_typed_errors_naming_the_key_not_the_value(s3: SeaweedServer) -> None:
    with pytest.raises(StorageConfigError, match="ftp://"):
        Table.create("ftp://host/t", SCHEMA)
    with pytest.raises(StorageConfigError, match="AWS_SECRET_KEY_TYPO") as e:
        Table.create(s3.uri(), SCHEMA, storage_options=s3.options(AWS_SECRET_KEY_TYPO="hunter2-value"))
    assert "hunter2-value" not in str(e.value)
    with pytest.raises(StorageConfigError, match="true or false"):
        Table.create(s3.uri(), SCHEMA, storage_options=s3.options(AWS_ALLOW_HTTP="maybe"))
