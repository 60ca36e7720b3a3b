"""The ``sampled_matrix`` marker (tests/conftest.py::sample_matrices): the cases kept in
``make test`` cover every combination of all but one parameter, and only the others are
left to ``make soak``."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.conftest import sample_matrices


@dataclass(frozen=True)
class CallSpec:
    params: dict[str, Any]


@dataclass(eq=False)
class Case:
    """The parts of a ``pytest.Item`` the sampling reads and writes."""

    nodeid: str
    callspec: CallSpec
    marks: list[str] = field(default_factory=list)

    def get_closest_marker(self, name: str) -> object | None:
        return True if name == "sampled_matrix" else None

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.marks.append(mark.name)


@pytest.mark.parametrize(
    "axes",
    [
        {"store": ["fs", "pg"], "table_type": ["mor", "cow"]},
        {"store": ["fs", "pg"], "table_type": ["mor", "cow"], "fault": ["a", "b", "c", "d"]},
        {"engine": ["e1", "e2", "e3", "e4"], "table_type": ["mor", "cow"], "ordering": ["ts", None]},
        {"point": ["a", "b", "c"]},
    ],
)
def test_kept_cases_cover_every_combination_of_all_but_one_parameter(axes: dict[str, list[Any]]) -> None:
    names = list(axes)
    cases = [
        Case(f"t.py::test[{'-'.join(map(str, v))}]", CallSpec(dict(zip(names, v))))
        for v in itertools.product(*axes.values())
    ]
    sample_matrices(cases)  # type: ignore[arg-type]
    kept = [c for c in cases if "soak" not in c.marks]
    width = max(1, len(names) - 1)
    for subset in itertools.combinations(names, width):
        for values in itertools.product(*(axes[n] for n in subset)):
            assert any(all(c.callspec.params[n] == v for n, v in zip(subset, values)) for c in kept), (subset, values)
    if len(names) > 1:
        assert len(kept) < len(cases)  # something is left to make soak
    else:
        assert kept == cases  # one parameter: every case is its own combination
