"""Hypothesis example budgets that follow the loaded profile.

A test's own ``@settings(max_examples=N)`` overrides any profile, so the unit modules write
``@settings(max_examples=examples(N))`` instead: exactly N under hypothesis's ``default`` profile
(and its ``ci`` profile; both 100 examples, so ``pytest`` and .ci/run keep the full budgets),
about N/10 under the ``quick`` profile (10 examples) registered in tests/conftest.py, e.g.
``pytest -m unit --hypothesis-profile=quick``.
"""

from __future__ import annotations

from hypothesis import settings

DEFAULT_MAX_EXAMPLES = 100
"""hypothesis's default ``settings.max_examples``: the profile value at which N stays N."""
MIN_EXAMPLES = 3
"""The fewest examples a scaled-down budget keeps (or N itself when smaller)."""


def examples(n: int) -> int:
    """``n`` scaled by the loaded profile's ``max_examples / 100``, at least ``min(n, 3)``.

    Called in the ``@settings`` decorator, i.e. when pytest imports the test module, which is
    after hypothesis's pytest plugin has loaded ``--hypothesis-profile``."""
    scaled = round(n * settings.default.max_examples / DEFAULT_MAX_EXAMPLES)
    return max(min(n, MIN_EXAMPLES), scaled)
