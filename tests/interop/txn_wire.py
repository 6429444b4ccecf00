"""Raw transactional traffic for partition-side tests (issue #12): transactional batches through
Produce, markers through WriteTxnMarkers (what a transaction coordinator sends), and
read_committed ListOffsets / Fetch, all with our protocol encoders over real sockets; plus an
independent confluent-kafka reader."""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka

from spark_kafkalite.client.network_client import NetworkClient
from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.record_batch_writer import encode_batch

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


def raw_client(address: str, node_id: int = 0) -> NetworkClient:
    host, port = address.split(",")[0].rsplit(":", 1)
    client = NetworkClient({"client.id": "txn-partition-test", "request.timeout.ms": 30000})
    client.add_node(node_id, host, int(port))
    return client


def init_pid(client: NetworkClient, node_id: int = 0) -> tuple[int, int]:
    """A fresh (producer id, epoch) from InitProducerId without a transactional id."""
    request = make(
        request_class(ApiKey.INIT_PRODUCER_ID, 4),
        transactional_id=None,
        transaction_timeout=60000,
        producer_id=-1,
        producer_epoch=-1,
    )
    response = client.send_and_wait(node_id, request, timeout_ms=10000)
    assert response.error_code == 0, response
    return int(response.producer_id), int(response.producer_epoch)


def txn_batch(pid: int, epoch: int, seq: int, values: list[bytes], *, transactional: bool = True) -> bytes:
    now = int(time.time() * 1000)
    return encode_batch(
        [(None, v, now, []) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=transactional,
    )


def produce(
    client: NetworkClient,
    topic: str,
    batch: bytes,
    partition: int = 0,
    node_id: int = 0,
    transactional_id: str | None = "txn-test",
) -> int:
    """The error code of an acks=all Produce carrying ``batch``."""

    def build(version: int) -> Any:
        cls = request_class(ApiKey.PRODUCE, version)
        part = nested(cls, "PartitionProduceData")(index=partition, records=batch)
        topic_data = (nested(cls, "TopicProduceData")(name=topic, partition_data=(part,)),)
        return make(cls, transactional_id=transactional_id, acks=-1, timeout=10000, topic_data=topic_data)

    response = client.send_and_wait(node_id, RequestBuilder(ApiKey.PRODUCE, build), timeout_ms=15000)
    return int(response.responses[0].partition_responses[0].error_code)


def write_markers(
    client: NetworkClient,
    markers: list[tuple[int, int, bool, dict[str, list[int]]]],
    coordinator_epoch: int = 0,
    node_id: int = 0,
) -> list[dict[tuple[str, int], int]]:
    """Send WriteTxnMarkers v1 with (producer id, epoch, commit, {topic: partitions}) markers;
    the error code per partition of each marker."""
    cls = request_class(ApiKey.WRITE_TXN_MARKERS, 1)
    marker_cls = nested(cls, "WritableTxnMarker")
    topic_cls = nested(cls, "WritableTxnMarkerTopic")
    request = cls(
        markers=tuple(
            marker_cls(
                producer_id=pid,
                producer_epoch=epoch,
                transaction_result=commit,
                topics=tuple(topic_cls(name=t, partition_indexes=tuple(ps)) for t, ps in topics.items()),
                coordinator_epoch=coordinator_epoch,
            )
            for pid, epoch, commit, topics in markers
        )
    )
    response = client.send_and_wait(node_id, request, timeout_ms=35000)
    return [
        {(t.name, int(p.partition_index)): int(p.error_code) for t in m.topics for p in t.partitions}
        for m in response.markers
    ]


def latest_offset(
    client: NetworkClient, topic: str, isolation_level: int, partition: int = 0, node_id: int = 0
) -> int:
    cls = request_class(ApiKey.LIST_OFFSETS, 5)
    part = nested(cls, "ListOffsetsPartition")(
        partition_index=partition, current_leader_epoch=-1, timestamp=-1
    )
    request = cls(
        replica_id=-1,
        isolation_level=isolation_level,
        topics=(nested(cls, "ListOffsetsTopic")(name=topic, partitions=(part,)),),
    )
    response = client.send_and_wait(node_id, request, timeout_ms=10000)
    p = response.topics[0].partitions[0]
    assert p.error_code == 0, p
    return int(p.offset)


def fetch(
    client: NetworkClient,
    topic: str,
    isolation_level: int,
    offset: int = 0,
    partition: int = 0,
    node_id: int = 0,
) -> Any:
    """The partition data of a sessionless Fetch v11 (records, last_stable_offset,
    aborted_transactions, ...)."""
    cls = request_class(ApiKey.FETCH, 11)
    part = make(
        nested(cls, "FetchPartition"),
        partition=partition,
        current_leader_epoch=-1,
        fetch_offset=offset,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    request = make(
        cls,
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=(nested(cls, "FetchTopic")(topic=topic, partitions=(part,)),),
        forgotten_topics_data=(),
        rack_id="",
    )
    response = client.send_and_wait(node_id, request, timeout_ms=10000)
    data = response.responses[0].partitions[0]
    assert data.error_code == 0, data
    return data


def aborted_of(data: Any) -> list[tuple[int, int]] | None:
    if data.aborted_transactions is None:
        return None
    return [(int(a.producer_id), int(a.first_offset)) for a in data.aborted_transactions]


def confluent_values(
    bootstrap: str, topic: str, isolation: str, expected: int, timeout_s: float = 20.0
) -> list[bytes]:
    """Values read by a confluent-kafka consumer with ``isolation.level`` from the beginning of
    partition 0 until ``expected`` records arrived and the partition's end (EOF) was reached."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"txn-{topic}-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        values: list[bytes] = []
        eof = False
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not (eof and len(values) >= expected):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    eof = True
                    continue
                raise AssertionError(msg.error())
            eof = False
            values.append(msg.value())
        return values
    finally:
        consumer.close()


def write_scenario(address: str, topic: str) -> tuple[int, int]:
    """a1 a2 (pid1, aborted) | b1 (pid2, committed) | c1 (plain) | markers | a3 (pid1, open) |
    d1 (plain), written to the partition leader at ``address``. Committed: b1 c1; LSO 6, HW 8.
    Returns the two producer ids."""
    client = raw_client(address)
    try:
        pid1, e1 = init_pid(client)
        pid2, e2 = init_pid(client)
        assert produce(client, topic, txn_batch(pid1, e1, 0, [b"a1", b"a2"])) == 0  # 0-1
        assert produce(client, topic, txn_batch(pid2, e2, 0, [b"b1"])) == 0  # 2
        assert produce(client, topic, txn_batch(-1, -1, -1, [b"c1"], transactional=False)) == 0  # 3
        codes = write_markers(client, [(pid1, e1, False, {topic: [0]}), (pid2, e2, True, {topic: [0]})])
        assert codes == [{(topic, 0): 0}, {(topic, 0): 0}]  # markers at 4 and 5
        assert produce(client, topic, txn_batch(pid1, e1, 2, [b"a3"])) == 0  # 6, left open
        assert produce(client, topic, txn_batch(-1, -1, -1, [b"d1"], transactional=False)) == 0  # 7
        return pid1, pid2
    finally:
        client.close()
