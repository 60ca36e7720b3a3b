"""The apscheduler triggers of the runner's schedules, and the check that every schedule of
a config has one before anything runs (apscheduler refuses some cron fields that the
config's own parser accepts, such as a day out of range)."""

from __future__ import annotations

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from ...timeline.errors import RunnerConfigError
from .config import RunnerConfig
from .schedules import Cron, Every, Schedule


def trigger_of(schedule: Schedule, where: str) -> BaseTrigger:
    """The apscheduler trigger of a schedule.

    Raises:
        RunnerConfigError: a cron expression apscheduler refuses (a field out of range).
    """
    if isinstance(schedule, Every):
        return IntervalTrigger(seconds=schedule.seconds)
    assert isinstance(schedule, Cron)
    try:
        return CronTrigger.from_crontab(schedule.expression)
    except ValueError as e:
        raise RunnerConfigError(f"{where}: cron expression {schedule.expression!r}: {e}") from None


def check_triggers(config: RunnerConfig) -> None:
    """Build the trigger of every schedule of ``config`` once.

    Raises:
        RunnerConfigError: a cron expression out of range, named by where it is.
    """
    for what, schedules in (
        ("tables", [e.schedules for e in config.tables]),
        ("catalogs", [c.schedules for c in config.catalogs]),
    ):
        for n, entry in enumerate(schedules):
            for name, sched in entry.items():
                trigger_of(sched, f"{config.source} [[{what}]] #{n + 1} {name}")
