"""Fixtures the service tests share: every service is tested on both timeline stores."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["filesystem", pytest.param("postgresql", marks=pytest.mark.postgres)])
def timeline(request: pytest.FixtureRequest) -> str | None:
    """None for the filesystem store, else the URL of the test PostgreSQL server."""
    return request.getfixturevalue("pg_url") if request.param == "postgresql" else None
