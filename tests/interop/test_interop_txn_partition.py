"""Partition side of transactions on a real broker (issue #12): transactional batches through
Produce and COMMIT/ABORT markers through WriteTxnMarkers (raw requests, as a transaction
coordinator sends them), then independent readers: confluent-kafka with
``isolation.level=read_committed`` / ``read_uncommitted`` and kcat must see exactly what Kafka
would. Also ListOffsets/Fetch under read_committed (LSO, AbortedTransactions), the marker and
control-batch errors, and the LSO / aborted list surviving a clean restart and a SIGKILL."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from txn_wire import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    aborted_of,
    confluent_values,
    fetch,
    latest_offset,
    produce,
    raw_client,
    txn_batch,
    write_markers,
    write_scenario,
)

from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.control_records import end_txn_marker_batch
from spark_kafkalite.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(90)

KCAT = shutil.which("kcat")


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result arrives
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)


def test_read_committed_readers_see_exactly_the_committed_records(
    bootstrap_servers: str, unique_topic: str
) -> None:
    topic = unique_topic
    create_topic(bootstrap_servers, topic)
    pid1, pid2 = write_scenario(bootstrap_servers, topic)
    client = raw_client(bootstrap_servers)
    try:
        assert latest_offset(client, topic, READ_COMMITTED) == 6  # the LSO: pid1's open transaction
        assert latest_offset(client, topic, READ_UNCOMMITTED) == 8
        committed = fetch(client, topic, READ_COMMITTED)
        assert (committed.last_stable_offset, committed.high_watermark) == (6, 8)
        assert aborted_of(committed) == [(pid1, 0)]
        assert aborted_of(fetch(client, topic, READ_UNCOMMITTED)) is None
        assert aborted_of(fetch(client, topic, READ_COMMITTED, offset=5)) == []

        assert confluent_values(bootstrap_servers, topic, "read_committed", 2) == [b"b1", b"c1"]
        assert confluent_values(bootstrap_servers, topic, "read_uncommitted", 6) == [
            b"a1",
            b"a2",
            b"b1",
            b"c1",
            b"a3",
            b"d1",
        ]

        # errors: an old epoch, an unknown partition, a client writing a control batch
        stale = write_markers(client, [(pid1, -1, True, {topic: [0], "no-such-topic": [0]})])
        assert stale == [
            {
                (topic, 0): ErrorCode.invalid_producer_epoch,
                ("no-such-topic", 0): ErrorCode.unknown_topic_or_partition,
            }
        ]
        assert produce(client, topic, end_txn_marker_batch(pid1, 0, True, 0, 0)) == ErrorCode.invalid_record
        no_id = produce(client, topic, txn_batch(pid1, 0, 3, [b"x"]), transactional_id=None)
        assert no_id == ErrorCode.transactional_id_authorization_failed

        assert write_markers(client, [(pid1, 0, True, {topic: [0]})]) == [{(topic, 0): 0}]  # commit a3: 8
        assert latest_offset(client, topic, READ_COMMITTED) == 9
    finally:
        client.close()
    assert confluent_values(bootstrap_servers, topic, "read_committed", 4) == [b"b1", b"c1", b"a3", b"d1"]
    if KCAT is not None:  # librdkafka's default isolation.level is read_committed
        out = subprocess.run(
            [KCAT, "-C", "-b", bootstrap_servers, "-t", topic, "-o", "beginning", "-e", "-f", "%s\\n"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        assert out.split() == ["b1", "c1", "a3", "d1"]


def test_lso_open_transaction_and_aborted_index_survive_restart_and_crash() -> None:
    topic = "txn-restart"
    with LocalCluster(brokers=1, config_overrides={"log.segment.bytes": "300"}) as cluster:
        create_topic(cluster.bootstrap_servers, topic)
        pid1, _pid2 = write_scenario(cluster.bootstrap_servers, topic)
        for crash in (False, True):  # a clean restart (snapshot), then SIGKILL (recovery, replay)
            if crash:
                cluster.kill(1)
                cluster.start_nodes(1)
            else:
                cluster.restart(1)
            cluster.wait_for_leader(topic, 0)
            client = raw_client(cluster.bootstrap_servers)
            try:
                committed = fetch(client, topic, READ_COMMITTED)
                assert committed.last_stable_offset == 6, crash
                assert aborted_of(committed) == [(pid1, 0)], crash
                assert latest_offset(client, topic, READ_COMMITTED) == 6, crash
            finally:
                client.close()
        client = raw_client(cluster.bootstrap_servers)
        try:
            assert write_markers(client, [(pid1, 0, True, {topic: [0]})]) == [{(topic, 0): 0}]
            assert latest_offset(client, topic, READ_COMMITTED) == 9
        finally:
            client.close()
        assert confluent_values(cluster.bootstrap_servers, topic, "read_committed", 4) == [
            b"b1",
            b"c1",
            b"a3",
            b"d1",
        ]
