"""The conformance probe, and bad input on object stores: each a typed error before
anything is written, with no secret in its message.

The unsafe store is real: an unauthenticated SeaweedFS behind a loopback proxy that
drops the conditional headers (:mod:`tests.object_storage.proxy`), so racing
"create-only" puts all win and a stale ETag overwrites.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

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
from lakeline.timeline.storage import probe as store_probe
from lakeline.timeline.storage.filesystem import Storage
from lakeline.timeline.storage.probe import ROUNDS, VERDICT_FILE, VERDICT_TTL_S, probe

from tests.object_storage.proxy import FaultProxy
from tests.object_storage.s3_tables import SCHEMA
from tests.seaweedfs import SeaweedServer


@pytest.fixture(scope="module")
def unsafe(open_s3: SeaweedServer) -> Iterator[dict[str, str]]:
    """Storage options of an unsafe store: the session's open SeaweedFS (the headers are
    signed on the other one) behind the header-dropping proxy."""
    proxy = FaultProxy(open_s3.endpoint, drop_conditions=True)
    try:
        yield open_s3.options(AWS_ENDPOINT_URL=proxy.endpoint)
    finally:
        proxy.stop()


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


_REQUIRE_SAFE = """
import json, sys
from lakeline.timeline.storage import probe as store_probe
from lakeline.timeline.storage.filesystem import Storage
from lakeline.timeline.storage.probe import require_safe
st = Storage.for_uri(sys.argv[1], json.loads(sys.argv[2]))
report = require_safe(st.objects, st.base)
print(json.dumps({"requests": report.requests, "checks": [c.name for c in report.checks]}))
"""


def _require_safe_in_a_new_process(uri: str, options: dict[str, str], cache: Path) -> dict[str, object]:
    env = dict(os.environ, LAKELINE_CACHE_DIR=str(cache))
    out = subprocess.run(
        [sys.executable, "-c", _REQUIRE_SAFE, uri, json.dumps(options)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_a_safe_verdict_is_remembered_for_a_day_across_processes(
    s3: SeaweedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    first = _require_safe_in_a_new_process(s3.uri(), s3.options(), cache)
    assert first["requests"] and len(first["checks"]) == 4  # probed
    saved = json.loads((cache / VERDICT_FILE).read_text())
    assert list(saved) == [f"s3 {s3.endpoint} {s3.bucket}"] and saved[f"s3 {s3.endpoint} {s3.bucket}"]["safe"]
    assert s3.options()["AWS_SECRET_ACCESS_KEY"] not in (cache / VERDICT_FILE).read_text()
    assert (cache / VERDICT_FILE).stat().st_mode & 0o077 == 0
    second = _require_safe_in_a_new_process(s3.uri(), s3.options(), cache)
    assert second["requests"] == 0 and "less than a day old" in str(second["checks"])  # not probed again
    # What the next process would find (require_safe probes when it finds nothing): read
    # here, as the process-level memory of verdicts is not involved, without a probe's
    # 10-15 s per process on this server.
    monkeypatch.setenv("LAKELINE_CACHE_DIR", str(cache))
    st = Storage.for_uri(s3.uri(), s3.options())
    assert store_probe._remembered(store_probe._key(st.objects), st.objects, st.base) is not None
    # A verdict older than the TTL is not trusted.
    saved[f"s3 {s3.endpoint} {s3.bucket}"]["checked_at"] = time.time() - VERDICT_TTL_S - 1
    (cache / VERDICT_FILE).write_text(json.dumps(saved))
    assert store_probe._remembered(store_probe._key(st.objects), st.objects, st.base) is None
    # A hand-edited or torn file is no verdict either, and nothing fails.
    (cache / VERDICT_FILE).write_text(
        json.dumps({f"s3 {s3.endpoint} {s3.bucket}": {"safe": True, "checked_at": "x"}, "junk": 5})
    )
    assert store_probe._remembered(store_probe._key(st.objects), st.objects, st.base) is None
    (cache / VERDICT_FILE).write_text('{"torn": ')
    assert store_probe._remembered(store_probe._key(st.objects), st.objects, st.base) is None


def test_an_unsafe_verdict_is_never_remembered_and_replaces_a_safe_one(
    unsafe: dict[str, str], s3: SeaweedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAKELINE_CACHE_DIR", str(tmp_path))
    entry = f"s3 {unsafe['AWS_ENDPOINT_URL']} {s3.uri().split('/')[2]}"
    # A safe verdict from when the store was fine (planted): the CLI probes afresh and
    # drops it, so the next Table.create probes and refuses.
    (tmp_path / VERDICT_FILE).write_text(json.dumps({entry: {"safe": True, "checked_at": time.time()}}))
    out = CliRunner().invoke(
        cli, ["storage", "probe", s3.uri(), *sum((["-o", f"{k}={v}"] for k, v in unsafe.items()), [])]
    )
    assert out.exit_code == 1, out.output
    assert entry not in json.loads((tmp_path / VERDICT_FILE).read_text())
    with pytest.raises(subprocess.CalledProcessError) as e:
        _ = _require_safe_in_a_new_process(s3.uri(), unsafe, tmp_path)
    assert "UnsafeStorageError" in e.value.stderr
