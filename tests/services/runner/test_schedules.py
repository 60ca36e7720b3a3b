"""Schedules of the runner's config (lakeline.services.runner.schedules): what parses,
what each prints back, and the typed refusal of everything else."""

from __future__ import annotations

import pytest
from lakeline.services.runner.schedules import Cron, Every, parse_schedule
from lakeline.timeline.errors import RunnerConfigError


@pytest.mark.parametrize(
    ("text", "printed"),
    [("every 90s", "every 90s"), ("every 120s", "every 2m"), ("every 60m", "every 1h"), ("  every 3 M ", "every 3m")],
)
def test_an_interval_prints_in_its_largest_whole_unit(text: str, printed: str) -> None:
    assert str(parse_schedule(text, "x")) == printed


def test_a_cron_expression_is_kept_with_single_spaces() -> None:
    assert parse_schedule(" 5  4 * * sun ", "x") == Cron("5 4 * * sun")
    assert str(Cron("5 4 * * sun")) == "5 4 * * sun"
    assert Every(60) != Cron("* * * * *")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (5, "a schedule is a string"),
        (None, "a schedule is a string"),
        ("every 0s", "no interval"),
        ("every 5d", "is not a schedule"),
        ("* * * *", "is not a schedule"),
        ("* * * * * *", "is not a schedule"),
        ("0 * * * ;", "is not a schedule"),
        ("often", "is not a schedule"),
    ],
)
def test_anything_else_is_refused_naming_the_key(text: object, fragment: str) -> None:
    with pytest.raises(RunnerConfigError, match=fragment) as e:
        parse_schedule(text, "tables[0].compaction")
    assert str(e.value).startswith("tables[0].compaction: ")
