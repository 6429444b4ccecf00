"""tests/unit/_hypothesis_budget.py: ``examples(N)`` is N under the default and ci profiles (the
full budgets of ``pytest`` and .ci/run) and about N/10 under ``--hypothesis-profile=quick``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import settings

from tests.unit._hypothesis_budget import examples


@contextmanager
def loaded_profile(name: str) -> Iterator[None]:
    previous = settings.get_current_profile_name()
    settings.load_profile(name)
    try:
        yield
    finally:
        settings.load_profile(previous)


@pytest.mark.parametrize("profile", ["default", "ci"])
def test_full_budget_is_unchanged(profile: str) -> None:
    with loaded_profile(profile):
        assert [examples(n) for n in (1, 30, 40, 60, 150, 400)] == [1, 30, 40, 60, 150, 400]


def test_quick_profile_keeps_a_tenth_and_at_least_three() -> None:
    with loaded_profile("quick"):
        assert settings.default.deadline is None
        assert [examples(n) for n in (1, 2, 5, 30, 44, 60, 150, 400)] == [1, 2, 3, 3, 4, 6, 15, 40]
