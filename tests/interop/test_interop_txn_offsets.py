"""OffsetFetch with RequireStable (KIP-447) from our admin client while confluent-kafka's
transactional producer holds offsets pending in a transaction (``send_offsets_to_transaction``):
the pending offsets are invisible, a RequireStable fetch waits for the transaction's end, then
returns them with their metadata. This is how the exactly-once sink reads its batch markers."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from peers import ck_create_topic

from spark_kafkalite.client import KafkaAdminClient
from spark_kafkalite.client.types import TopicPartition as TP
from spark_kafkalite.protocol.errors import KafkaTimeoutError

pytestmark = pytest.mark.timeout(60)


def test_require_stable_waits_for_a_pending_transactional_commit(
    bootstrap_servers: str, unique_topic: str
) -> None:
    ck_create_topic(bootstrap_servers, unique_topic, 1)
    group = "stable-" + uuid.uuid4().hex[:8]
    producer = Producer({"bootstrap.servers": bootstrap_servers, "transactional.id": group + "-txn"})
    member = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": group})
    group_metadata = member.consumer_group_metadata()  # generation -1: no membership needed
    member.close()
    producer.init_transactions(30)

    def transaction(offset: int, metadata: str) -> None:
        producer.begin_transaction()
        producer.produce(unique_topic, b"x", partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition(unique_topic, 0, offset, metadata=metadata)], group_metadata, 30
        )

    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:

        def fetch(**kwargs: object) -> dict[TP, tuple[int, str]]:
            found = admin.list_consumer_group_offsets_and_metadata(group, **kwargs)  # type: ignore[arg-type]
            # confluent-kafka 2.16 sends the metadata string with its C terminator (NUL)
            return {tp: (om.offset, om.metadata.rstrip("\x00")) for tp, om in found.items()}

        transaction(5, "batch 5")
        producer.commit_transaction(30)  # returns before the markers are written (Kafka's EndTxn)
        # a partition with no committed offset yet is not reported unstable when every partition
        # is fetched (Kafka's fetchAllOffsets only looks at committed ones): wait for the marker
        deadline = time.monotonic() + 30
        while not fetch() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fetch(require_stable=True) == {TP(unique_topic, 0): (5, "batch 5")}
        transaction(6, "batch 6")  # pending until its commit
        assert fetch() == {TP(unique_topic, 0): (5, "batch 5")}  # the pending commit is invisible
        with pytest.raises(KafkaTimeoutError, match="unstable"):
            fetch(timeout_ms=1500, require_stable=True)
        producer.commit_transaction(30)
        assert fetch(require_stable=True) == {TP(unique_topic, 0): (6, "batch 6")}
