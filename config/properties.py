"""Typed table properties, with their defaults and documentation in ``defaults.toml``.

The TOML file is the single source of truth: each key's default fixes its type, and
``choices``/``min``/``max`` constrain it. Every number has both bounds (issue 25, audit
B1c): a value past any sane use (``heartbeat.interval-ms = 10**30``, ``service.nice =
100``) is refused where it is set, before anything is written, instead of failing a
heartbeat thread or a ``sleep`` later; floats must be finite, and a bool is no number.
:func:`resolve` merges user properties over the defaults and reports every problem by
name, so a typo fails loudly at create/open time instead of being silently ignored like
Hudi's configs are.

This module is the bottom of the import graph and raises :class:`PropertyProblem`
(a ``ValueError``); the timeline layer turns it into ``InvalidPropertyError``.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

USER_PREFIX = "user."
#: ``merge.<column>.aggregate``: the aggregate function of a column of an ``aggregation``
#: table (docs/merge-engines.md); the column and its type are checked against the schema
#: where the table is created (``lakeline.table.merge_engine``).
AGGREGATE_PREFIX, AGGREGATE_SUFFIX = "merge.", ".aggregate"
AGGREGATES = ("sum", "min", "max", "count", "last_non_null", "first_non_null", "bool_and", "bool_or")


def aggregate_column(key: str) -> str | None:
    """The column a ``merge.<column>.aggregate`` key names, or None for another key."""
    if key.startswith(AGGREGATE_PREFIX) and key.endswith(AGGREGATE_SUFFIX):
        column = key[len(AGGREGATE_PREFIX) : -len(AGGREGATE_SUFFIX)]
        return column or None
    return None


def _aggregate(key: str, raw: Any) -> str:
    if raw not in AGGREGATES:
        raise PropertyProblem(f"property {key!r}: {_short(raw)} is not one of {', '.join(AGGREGATES)}")
    return str(raw)


class PropertyProblem(ValueError):
    """An unknown or malformed property (re-raised as InvalidPropertyError upstream)."""


@dataclass(frozen=True)
class PropertySpec:
    """One documented property."""

    key: str
    default: Any
    doc: str
    choices: tuple[Any, ...] | None = None
    min: float | None = None
    max: float | None = None

    @property
    def type(self) -> type:
        return type(self.default)

    def coerce(self, raw: Any, stored: bool = False) -> Any:
        """Convert a user value (possibly a string) to this property's type.

        ``stored``: the value comes from a table's log, where an earlier version, which had
        no upper bounds and took any float, may have put one above :attr:`max`, an
        infinity, NaN or a bool for a float; it is read as the nearest bound (NaN as the
        default, a bool as 0 or 1), so the table stays readable.

        Raises:
            PropertyProblem: the value cannot be converted or is out of range.
        """
        t = self.type
        try:
            if t is bool:
                if isinstance(raw, str):
                    if raw.lower() not in ("true", "false"):
                        raise ValueError(raw)
                    value: Any = raw.lower() == "true"
                elif isinstance(raw, bool):
                    value = raw
                else:
                    raise ValueError(raw)
            elif t is int:
                if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                    raise ValueError(raw)
                value = int(raw)
            elif t is float:
                if isinstance(raw, bool) and not stored:
                    raise ValueError(raw)
                value = float(raw)
                if not math.isfinite(value):
                    if not stored:
                        raise ValueError(raw)
                    # Stored by a version that took any float: infinity as the bound on
                    # its side, NaN (which compared as nothing) as the default.
                    bound = self.max if value > 0 else self.min if value < 0 else None
                    value = float(self.default if bound is None else bound)
            else:
                value = str(raw)
        except (TypeError, ValueError, OverflowError):
            raise PropertyProblem(f"property {self.key!r}: {_short(raw)} is not a valid {t.__name__}") from None
        if self.choices is not None and value not in self.choices:
            raise PropertyProblem(f"property {self.key!r}: {value!r} is not one of {', '.join(map(str, self.choices))}")
        if self.min is not None and value < self.min:
            raise PropertyProblem(f"property {self.key!r}: {_short(value)} is below the minimum {self.min}")
        if self.max is not None and value > self.max and stored:
            return type(value)(self.max)
        if self.max is not None and value > self.max:
            raise PropertyProblem(f"property {self.key!r}: {_short(value)} is above the maximum {self.max}")
        return value


def _short(value: Any) -> str:
    """A value for a message, cut short (``10**10000`` has ten thousand digits, more
    than ``repr`` prints)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        sign = "a negative" if value < 0 else "an"
        return f"{sign} integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@lru_cache(maxsize=1)
def specs() -> Mapping[str, PropertySpec]:
    """Every documented property, by key."""
    text = resources.files(__package__).joinpath("defaults.toml").read_text()
    raw = tomllib.loads(text)
    out: dict[str, PropertySpec] = {}
    for key, entry in raw.items():
        choices = entry.get("choices")
        out[key] = PropertySpec(
            key=key,
            default=entry["default"],
            doc=entry["doc"],
            choices=tuple(choices) if choices is not None else None,
            min=entry.get("min"),
            max=entry.get("max"),
        )
    return out


def resolve(user: Mapping[str, Any] | None, stored: bool = False) -> dict[str, Any]:
    """Validate ``user`` properties and merge them over the defaults (``stored``: they
    come from a table's log, see :meth:`PropertySpec.coerce`).

    Returns:
        Every documented key with its typed value, plus the ``user.*`` keys as given.

    Raises:
        PropertyProblem: a key is unknown (the message lists the valid keys) or a value
            is malformed.
    """
    known = specs()
    merged = {k: s.default for k, s in known.items()}
    for key, raw in (user or {}).items():
        if key.startswith(USER_PREFIX):
            merged[key] = raw
            continue
        if aggregate_column(key) is not None:
            merged[key] = _aggregate(key, raw)
            continue
        spec = known.get(key)
        if spec is None:
            raise PropertyProblem(
                f"unknown table property {key!r}; valid keys are: {', '.join(sorted(known))} "
                f"(and any key under {USER_PREFIX!r}, and {AGGREGATE_PREFIX}<column>{AGGREGATE_SUFFIX})"
            )
        merged[key] = spec.coerce(raw, stored)
    return merged


def explicit(user: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate ``user`` and return only the keys it sets, typed (what a table stores)."""
    resolve(user)
    known = specs()
    return {
        k: (v if k.startswith(USER_PREFIX) else _aggregate(k, v) if aggregate_column(k) else known[k].coerce(v))
        for k, v in (user or {}).items()
    }
