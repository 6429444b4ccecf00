"""Transactions across a partition leader failover (issue #12), real broker processes: followers
rebuild the producer state, open transactions and ``.txnindex`` from replicated batches, so the
follower promoted after the leader is SIGKILLed answers read_committed with the same last stable
offset and aborted transactions, accepts the pending marker, and confluent-kafka's read_committed
consumer sees exactly the committed records."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fault.replication_helpers import create_topic, start_cluster
from interop.txn_wire import (
    READ_COMMITTED,
    aborted_of,
    confluent_values,
    fetch,
    raw_client,
    write_markers,
    write_scenario,
)

pytestmark = pytest.mark.timeout(90)


def test_promoted_follower_keeps_lso_and_aborted_transactions(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path)
    try:
        topic = create_topic(cluster)
        leader = cluster.wait_for_leader(topic, 0)
        pid1, _pid2 = write_scenario(cluster.broker_address(leader), topic)  # acks=all: on every replica
        cluster.kill(leader)
        new_leader = cluster.wait_for_leader(topic, 0, not_in=[leader])
        client = raw_client(cluster.broker_address(new_leader))
        try:
            deadline = time.monotonic() + 20
            while True:  # the new leader's HW reaches the old one's once the other follower fetched
                data = fetch(client, topic, READ_COMMITTED)
                if data.high_watermark == 8 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert (data.last_stable_offset, data.high_watermark) == (6, 8)
            assert aborted_of(data) == [(pid1, 0)]
            assert write_markers(client, [(pid1, 0, True, {topic: [0]})]) == [{(topic, 0): 0}]
        finally:
            client.close()
        assert confluent_values(cluster.bootstrap_servers, topic, "read_committed", 4) == [
            b"b1",
            b"c1",
            b"a3",
            b"d1",
        ]
    finally:
        cluster.stop()
