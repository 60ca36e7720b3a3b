"""Index lifecycle from timeline events only: create, complete, abort, drop, re-create."""

from __future__ import annotations

import pytest
from lakeline.indexes.states import (
    check_can_create,
    check_can_drop,
    create_plan,
    drop_plan,
    list_indexes,
    readable_indexes,
    written_indexes,
)
from lakeline.timeline.errors import IndexExistsError, IndexNotFoundError, InvalidIndexError
from lakeline.timeline.instant import Action, State

from tests.indexes._timeline import Events

IX = Action.INDEXING


def _states(ev: Events) -> dict[str, str]:
    return {d.name: d.state for d in list_indexes(ev.timeline())}


def test_create_is_building_then_ready() -> None:
    ev = Events()
    c = ev.request(IX, create_plan("bloom_filters", "bloom_filters", ["id"], {"fpp": 0.001}).to_dict())
    assert _states(ev) == {"bloom_filters": "building"}
    d = list_indexes(ev.timeline())[0]
    assert d.kind == "bloom_filters" and d.columns == ("id",) and d.instant == c and d.options == {"fpp": 0.001}
    assert [x.name for x in written_indexes(ev.timeline())] == ["bloom_filters"]
    assert readable_indexes(ev.timeline()) == []
    ev.move(c, State.INFLIGHT, IX)
    assert _states(ev) == {"bloom_filters": "building"}
    ev.complete(c, IX)
    assert _states(ev) == {"bloom_filters": "ready"}
    assert [x.name for x in readable_indexes(ev.timeline(), "bloom_filters")] == ["bloom_filters"]
    assert readable_indexes(ev.timeline(), "column_stats") == []


def test_aborted_build_is_absent_and_can_be_created_again() -> None:
    ev = Events()
    c = ev.request(IX, create_plan("s", "column_stats").to_dict())
    ev.roll_back(c, IX)
    assert _states(ev) == {}
    check_can_create(ev.timeline(), "s")
    ev.request(IX, create_plan("s", "column_stats").to_dict())
    assert _states(ev) == {"s": "building"}


def test_drop_is_dropping_until_completed_and_wins_over_a_later_completion() -> None:
    ev = Events()
    c = ev.request(IX, create_plan("s", "column_stats").to_dict())
    d = ev.request(IX, drop_plan("s").to_dict())
    assert _states(ev) == {"s": "dropping"}
    ev.complete(c, IX)  # the build completes after the drop was requested: still dropping
    assert _states(ev) == {"s": "dropping"}
    assert written_indexes(ev.timeline()) == [] and readable_indexes(ev.timeline()) == []
    ev.complete(d, IX)
    assert _states(ev) == {}


def test_rolled_back_drop_changes_nothing() -> None:
    ev = Events()
    c = ev.request(IX, create_plan("s", "column_stats").to_dict())
    ev.complete(c, IX)
    d = ev.request(IX, drop_plan("s").to_dict())
    ev.roll_back(d, IX)
    assert _states(ev) == {"s": "ready"}


def test_checks_and_time_travel() -> None:
    ev = Events()
    c = ev.request(IX, create_plan("s", "column_stats").to_dict())
    done = ev.complete(c, IX)
    with pytest.raises(IndexExistsError):
        check_can_create(ev.timeline(), "s")
    with pytest.raises(IndexNotFoundError):
        check_can_drop(ev.timeline(), "nope")
    assert check_can_drop(ev.timeline(), "s").state == "ready"
    ev.request(IX, drop_plan("s").to_dict())
    with pytest.raises(IndexNotFoundError):
        check_can_drop(ev.timeline(), "s")
    # An older snapshot sees the index as it was then.
    assert {x.name: x.state for x in list_indexes(ev.timeline().as_of_seq(done))} == {"s": "ready"}
    assert list_indexes(ev.timeline().as_of_seq(c - 1)) == []


def test_drop_of_unknown_index_and_invalid_plans() -> None:
    ev = Events()
    ev.request(IX, drop_plan("ghost").to_dict())
    assert _states(ev) == {}
    with pytest.raises(InvalidIndexError):
        create_plan("x", "no_such_kind")
    with pytest.raises(InvalidIndexError):
        create_plan("", "column_stats")
    with pytest.raises(InvalidIndexError):
        create_plan("x", "column_stats", [])
