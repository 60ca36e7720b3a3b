"""Tables on the test S3 server (SeaweedFS, the session fixture ``s3``): a fresh
location per table."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from lakeline.table import Table

from tests.object_storage.s3_tables import SCHEMA
from tests.seaweedfs import SeaweedServer


@pytest.fixture
def make_table(s3: SeaweedServer) -> Callable[..., Table]:
    """``make_table(table_type="cow", **create_kwargs)``: a new keyed table on the server."""

    def make(table_type: str = "cow", **kwargs: object) -> Table:
        return Table.create(
            s3.uri(), SCHEMA, record_key="id", ordering_field="ts", table_type=table_type,
            storage_options=s3.options(), **kwargs,  # type: ignore[arg-type]
        )  # fmt: skip

    return make
