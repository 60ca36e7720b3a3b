"""Service schedules of the runner's config: ``every N s|m|h`` or a 5-field cron expression.

Why a module of its own: the config loader (:mod:`.config`) checks schedules
while it reads the TOML, the runner (:mod:`.runner`) turns them into apscheduler
triggers, and the status command prints them; all three need one parsed value.

Only :mod:`.runner` may import apscheduler (docs/architecture.md, "Import direction": the
runner's optional dependency stays in the runner), so this module checks the *shape* of a cron
expression (five fields of cron characters) and the runner turns it into a
``CronTrigger`` when it is built, which checks the ranges (minute 0-59, ...) and
refuses a bad one with :class:`~lakeline.timeline.errors.RunnerConfigError` before
anything runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...timeline.errors import RunnerConfigError

#: Seconds per unit of an ``every`` schedule.
UNITS = {"s": 1, "m": 60, "h": 3600}
#: The longest ``every`` interval: a year and a day. apscheduler turns the interval into a
#: ``timedelta`` and adds it to now, which overflows far below what the digits allow
#: (``every 99999999999999h``); a schedule that rarely fires is a cron expression's job.
MAX_EVERY_SECONDS = 366 * 24 * 3600

_EVERY = re.compile(r"every\s+(\d+)\s*([smh])", re.IGNORECASE)
#: Characters a cron field may hold: numbers, names (jan, mon), ``* , - / ?`` and ``L``/``#``
#: forms apscheduler knows; the ranges are checked when the trigger is built.
_CRON_FIELD = re.compile(r"[0-9A-Za-z*,\-/?#]+")


@dataclass(frozen=True)
class Every:
    """Run every ``seconds`` seconds, first right after the runner starts."""

    seconds: int

    def __str__(self) -> str:
        for unit, size in reversed(UNITS.items()):
            if self.seconds % size == 0:
                return f"every {self.seconds // size}{unit}"
        return f"every {self.seconds}s"  # pragma: no cover - "s" always divides


@dataclass(frozen=True)
class Cron:
    """Run at the times a 5-field cron expression (minute hour day month weekday) names,
    in the runner's local time zone."""

    expression: str

    def __str__(self) -> str:
        return self.expression


Schedule = Every | Cron


def parse_schedule(text: object, where: str) -> Schedule:
    """The schedule ``text`` names (``where`` says which key, for the error).

    Raises:
        RunnerConfigError: not a string, a zero interval or one over 366 days, or neither form.
    """
    if not isinstance(text, str):
        raise RunnerConfigError(f'{where}: a schedule is a string ("every 5m" or a cron expression), not {text!r}')
    spec = text.strip()
    if m := _EVERY.fullmatch(spec):
        digits = m.group(1).lstrip("0") or "0"
        # More digits than any allowed interval has: too long (and int() of thousands of
        # digits is refused by Python itself).
        seconds = int(digits) * UNITS[m.group(2).lower()] if len(digits) <= 12 else MAX_EVERY_SECONDS + 1
        if seconds <= 0:
            raise RunnerConfigError(f'{where}: {text!r} is no interval; use at least "every 1s"')
        if seconds > MAX_EVERY_SECONDS:
            raise RunnerConfigError(
                f'{where}: {text!r} is longer than 366 days ("every 8784h"); use a cron expression for rare runs'
            )
        return Every(seconds)
    fields = spec.split()
    if len(fields) == 5 and all(_CRON_FIELD.fullmatch(f) for f in fields):
        return Cron(" ".join(fields))
    raise RunnerConfigError(
        f'{where}: {text!r} is not a schedule; use "every N s|m|h" (e.g. "every 5m") '
        'or a 5-field cron expression (e.g. "0 * * * *")'
    )
