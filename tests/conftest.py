"""Shared pytest fixtures.

- ``cluster`` (session scope): a started single-broker :class:`spark_kafkalite.LocalCluster`
  (temporary data dir, default config: auto topic creation on, num.partitions=1). Shared by
  every test in the session, so create your own topics with unique names (``unique_topic``) and
  never stop or restart it; tests that kill or restart brokers start their own LocalCluster.
- ``bootstrap_servers`` (session scope): ``cluster.bootstrap_servers``, e.g. ``"127.0.0.1:41317"``.
- ``unique_topic`` (function scope): a fresh topic name (not created), e.g. ``"t-test-foo-1a2b3c4d"``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

from spark_kafkalite.local_cluster import LocalCluster


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
