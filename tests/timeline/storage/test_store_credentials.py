"""A table on S3 with no endpoint or credentials configured says which option is
missing (issue 46, item 6), through ``Table.open``/``create`` and the CLI, quickly and
without any network.

Before, obstore asked the EC2 instance metadata service (``169.254.169.254``) for the
credentials no option gave, and its answer off EC2 came out as
``StoragePermissionError ... 169.254.169.254 ... 403`` (or, where nothing answers, as an
unreachable store after retries), which reads as wrong credentials.

No test here reaches the real metadata service: each points ``AWS_METADATA_ENDPOINT`` at
a socket of its own that listens and never answers, to see whether anything connected,
or at a closed port, where the service is what is tried.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator

import pyarrow as pa
import pytest
from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.table import Table
from lakeline.timeline.errors import StorageConfigError

from tests.spark.cluster import free_ports

SCHEMA = pa.schema([("id", pa.int64())])


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A local port that accepts connections into its backlog and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    s.setblocking(False)
    try:
        yield s
    finally:
        s.close()


def connected(s: socket.socket) -> bool:
    try:
        s.accept()[0].close()
    except BlockingIOError:
        return False
    return True


@pytest.fixture(autouse=True)
def nothing_configured(monkeypatch: pytest.MonkeyPatch, listener: socket.socket) -> None:
    """No ``AWS_*`` in the environment but an instance metadata service that is the
    listener (a request to it would hang there, and is seen)."""
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", f"http://127.0.0.1:{listener.getsockname()[1]}")


def test_an_endpoint_without_credentials_is_refused_before_any_request(listener: socket.socket) -> None:
    endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}"
    opts = {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true"}
    os.environ.pop("AWS_METADATA_ENDPOINT")  # set, the service would be meant: not refused up front
    t0 = time.monotonic()
    for call in (lambda: Table.open("s3://lake/t", storage_options=opts), lambda: Table.create("s3://lake/t", SCHEMA)):
        with pytest.raises(StorageConfigError, match="AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") as e:
            os.environ["AWS_ENDPOINT_URL"] = endpoint  # the second call: from the environment
            call()
        assert "AWS_SKIP_SIGNATURE" in str(e.value)
    assert time.monotonic() - t0 < 2 and not connected(listener)


@pytest.mark.parametrize("given", ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"])
def test_half_a_key_pair_names_the_other_half(given: str, listener: socket.socket) -> None:
    other = ({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} - {given}).pop()
    with pytest.raises(StorageConfigError, match=f"{other} is missing") as e:
        Table.open("s3://lake/t", storage_options={given: "value-4711"})
    assert "value-4711" not in str(e.value) and not connected(listener)


def test_nothing_configured_names_the_options_once_the_metadata_service_gave_nothing(
    monkeypatch: pytest.MonkeyPatch, listener: socket.socket
) -> None:
    # Where the service cannot be reached (a closed port: no network, not on EC2).
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", f"http://127.0.0.1:{free_ports(1)[0]}")
    t0 = time.monotonic()
    with pytest.raises(StorageConfigError) as e:
        Table.open("s3://lake/t")
    assert time.monotonic() - t0 < 15
    for option in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_EC2_METADATA_DISABLED"):
        assert option in str(e.value)
    # Turned off, the service is never asked: the same options, at once.
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", f"http://127.0.0.1:{listener.getsockname()[1]}")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    t0 = time.monotonic()
    with pytest.raises(StorageConfigError, match="AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.*AWS_ENDPOINT_URL"):
        Table.create("s3://lake/t", SCHEMA)
    assert time.monotonic() - t0 < 2 and not connected(listener)


def test_the_cli_says_it_in_one_line() -> None:
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"  # monkeypatch restores the environment
    res = CliRunner().invoke(cli, ["schema", "show", "s3://lake/t"])
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and lines[0].endswith("[StorageConfigError]"), lines
    assert "AWS_ACCESS_KEY_ID" in lines[0] and "AWS_ENDPOINT_URL" in lines[0]
