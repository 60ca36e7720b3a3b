"""Tables on the test S3 server (SeaweedFS, the session fixture ``s3``): a fresh
location per table; ``open_s3``, a second server without credentials, for the tests
whose proxy strips the conditional headers (signed headers cannot be stripped)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from lakeline.table import Table

from tests.object_storage.s3_tables import SCHEMA
from tests.seaweedfs import SeaweedServer, SeaweedUnavailable, start_seaweedfs


@pytest.fixture(scope="session")
def open_s3(s3: SeaweedServer) -> Iterator[SeaweedServer]:
    """An unauthenticated SeaweedFS (started once a session, after ``s3``, which fails
    or skips the run when there is no server)."""
    try:
        server = start_seaweedfs(secured=False)
    except SeaweedUnavailable as e:
        pytest.fail(f"the S3 server started once but not twice: {e}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def make_table(s3: SeaweedServer) -> Callable[..., Table]:
    """``make_table(table_type="cow", **create_kwargs)``: a new keyed table on the server."""

    def make(table_type: str = "cow", **kwargs: object) -> Table:
        return Table.create(
            s3.uri(), SCHEMA, record_key="id", ordering_field="ts", table_type=table_type,
            storage_options=s3.options(), **kwargs,  # type: ignore[arg-type]
        )  # fmt: skip

    return make
