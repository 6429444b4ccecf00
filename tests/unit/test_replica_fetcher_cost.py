"""The cost of an idle follower fetch does not grow with the partitions followed (issue #19):
a replica fetcher with an incremental fetch session looks only at the partitions that changed
(answered, added, removed, backing off) to build its next request; a count, not a timing.

Real UnifiedLogs and Partitions on tmp_path; the session handler is driven with the answers a
leader would give (no network)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from broker.cluster.partition import Partition
from broker.log.log_config import LogConfig
from broker.log.unified_log import UnifiedLog
from broker.replication.replica_fetcher import FetcherSettings, PartitionFetchState, ReplicaFetcher
from spark_kafkalite.protocol.record_batch_writer import encode_batch

pytestmark = pytest.mark.timeout(60)


def _fetcher(tmp_path: Path, count: int) -> tuple[ReplicaFetcher, dict[tuple[str, int], Partition]]:
    partitions = {
        ("t", i): Partition(
            "t",
            i,
            None,
            2,
            UnifiedLog(tmp_path / f"n{count}" / f"t-{i}", LogConfig()),
            replica_lag_time_max_ms=10_000,
            isr_eligible=lambda b: True,
        )
        for i in range(count)
    }
    fetcher = ReplicaFetcher(2, 1, 0, lambda broker_id: None, partitions.get, FetcherSettings())
    fetcher.add_partitions({key: PartitionFetchState(key[0], key[1], 0) for key in partitions})
    return fetcher, partitions


def _round(fetcher: ReplicaFetcher, answered: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Build one request (as ``_do_work`` does), then take an incremental answer naming
    ``answered``; returns the request's partitions -> fetch offsets."""
    updates, removed = fetcher._refresh_wanted(time.monotonic())
    data = fetcher._session.build_changes(fetcher._wanted, updates, removed)
    session_id = fetcher._session.session_id or 77
    assert fetcher._session.handle_response_keys(
        0, session_id, answered if not data.is_full else data.to_send
    )
    fetcher._changed.update(answered)
    return {key: d.fetch_offset for key, d in data.to_send.items()}


@pytest.mark.parametrize("count", [20, 300])
def test_idle_incremental_fetch_examines_no_partition(tmp_path: Path, count: int) -> None:
    fetcher, partitions = _fetcher(tmp_path, count)
    first = _round(fetcher, [])  # full fetch: opens the session with every partition
    assert len(first) == count and fetcher.partitions_examined == count
    for _ in range(20):
        assert _round(fetcher, []) == {}
    assert fetcher.partitions_examined == count  # 20 idle rounds looked at nothing

    # an answer for one partition (records appended): only it is looked at, and sent again
    key = ("t", count // 2)
    partitions[key].log.append_as_follower(bytearray(encode_batch([(None, b"v", 1000, [])])))
    _round(fetcher, [key])
    assert _round(fetcher, []) == {key: 1}
    assert fetcher.partitions_examined == count + 1

    # removed partitions are forgotten without a pass over the others
    fetcher.remove_partitions([("t", 0)])
    updates, removed = fetcher._refresh_wanted(time.monotonic())
    assert (updates, removed) == ({}, [("t", 0)])
    assert fetcher.partitions_examined == count + 2
