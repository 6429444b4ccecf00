"""Shared pytest fixtures.

- ``cluster`` (session scope): a started single-broker :class:`spark_kafkalite.LocalCluster`
  (temporary data dir, default config: auto topic creation on, num.partitions=1). Shared by
  every test in the session, so create your own topics with unique names (``unique_topic``) and
  never stop or restart it; tests that kill or restart brokers start their own LocalCluster.
- ``bootstrap_servers`` (session scope): ``cluster.bootstrap_servers``, e.g. ``"127.0.0.1:41317"``.
- ``unique_topic`` (function scope): a fresh topic name (not created), e.g. ``"t-test-foo-1a2b3c4d"``.

Tiers: every test gets the marker of its directory (``unit``, ``integration``, ``interop``,
``spark``, ``fault``; registered in pyproject.toml, ``--strict-markers``). Top-level
``tests/test_*.py`` files are ``spark`` when they use a SparkSession, else ``integration``.
``pytest -m unit`` runs the fast tier (pure logic, no sockets or processes): ~50 s on 2 cores
with the full property-test budgets, ~25 s with ``--hypothesis-profile=quick`` (registered below:
each property test runs ~1/10 of its examples, see tests/unit/_hypothesis_budget.py).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from spark_kafkalite.local_cluster import LocalCluster

TIERS = ("unit", "integration", "interop", "spark", "fault")

# `--hypothesis-profile=quick`: property tests run ~1/10 of their examples (tests/unit scales its
# `@settings(max_examples=examples(N))` by this profile, tests/unit/_hypothesis_budget.py).
# Registered here, in a conftest pytest imports before hypothesis's plugin loads the profile
# (pytest_configure); tests/unit/conftest.py is imported later, at collection.
settings.register_profile("quick", max_examples=10, deadline=None)

_TESTS_DIR = Path(__file__).parent

# Every Spark JVM the suite starts (the shared session, and the subprocesses' drivers, executors
# and Connect server, which inherit the environment) is short-lived and runs small jobs: the C1
# compiler alone and the serial collector about halve the JVM's CPU time (measured on the
# tests/spark batch, streaming and exactly-once modules: 100 s -> 64 s), which on a 2-core
# machine competes with the brokers and Python workers. The java launcher reads
# JDK_JAVA_OPTIONS (JDK 9+) and prints a "Picked up" note on stderr; options already set win.
_JVM_TEST_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ["JDK_JAVA_OPTIONS"] = f"{_JVM_TEST_OPTIONS} {os.environ.get('JDK_JAVA_OPTIONS', '')}".strip()


def tier_of(item: pytest.Item) -> str:
    """The tier marker for ``item``: its directory under tests/, or for a top-level file
    ``spark`` when the test uses the ``spark_session`` fixture and ``integration`` otherwise."""
    parts = item.path.relative_to(_TESTS_DIR).parts
    if len(parts) > 1:
        if parts[0] not in TIERS:
            raise pytest.UsageError(f"{item.nodeid}: tests/{parts[0]}/ is not a tier directory {TIERS}")
        return parts[0]
    return "spark" if "spark_session" in getattr(item, "fixturenames", ()) else "integration"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``-m <one tier>`` (e.g. ``pytest -m unit``), skip the other tiers' directories instead
    of importing their modules (pyspark, the independent clients...) only to deselect every test
    in them. Top-level files (spark or integration) are skipped for the other three tiers."""
    tier = config.getoption("markexpr", "").strip()
    if tier not in TIERS or collection_path.parent != _TESTS_DIR:
        return None
    if collection_path.is_dir():
        return True if collection_path.name in TIERS and collection_path.name != tier else None
    if collection_path.name.startswith("test_") and tier not in ("spark", "integration"):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(tier_of(item))


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    """A started single-broker LocalCluster shared by the whole test session."""
    local = LocalCluster(brokers=1)
    local.start()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="session")
def bootstrap_servers(cluster: LocalCluster) -> str:
    """``host:port`` of the session cluster."""
    return cluster.bootstrap_servers


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test (legal Kafka characters, <= 249 chars); not created."""
    base = re.sub(r"[^a-zA-Z0-9._-]", "-", request.node.name)[:80]
    return f"t-{base}-{uuid.uuid4().hex[:8]}"
