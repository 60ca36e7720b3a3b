"""What every plan shares: the ``Plan`` protocol, the key naming a plan's service, the
ops of ``indexing`` and ``savepoint`` plans."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

#: The key under which the service framework names the service that scheduled a plan.
SERVICE = "service"

#: ``op`` of an ``indexing`` or ``savepoint`` plan.
OP_CREATE = "create"
OP_DROP = "drop"
OP_RELEASE = "release"


class Plan(Protocol):
    """A typed plan: what a table service's ``plan()`` returns and the framework writes."""

    def to_dict(self) -> dict[str, Any]: ...


def service_of(raw: Mapping[str, Any], default: str | None = None) -> str | None:
    """The service that scheduled a plan (``default`` for plans no service made)."""
    name = raw.get(SERVICE, default)
    return None if name is None else str(name)


def optional_int(v: Any) -> int | None:
    """An optional integer field of a stored plan."""
    return None if v is None else int(v)
