"""Every advertised version of every API answers a well-formed request correctly (raw sockets,
kio entities built per version), so version-specific fields never break a response."""

from __future__ import annotations

import datetime
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build, nested
from spark_kafkalite.protocol.framing import decode_response, encode_request
from spark_kafkalite.protocol.record_batch import decode_batches
from spark_kafkalite.protocol.record_batch_writer import encode_batch

pytestmark = pytest.mark.timeout(60)

MS = datetime.timedelta(milliseconds=1)


class Conn:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.cid = 0

    def request(self, entity: Any) -> Any:
        self.cid += 1
        self.sock.sendall(encode_request(entity, self.cid, "versions-test"))
        size = struct.unpack(">i", self._exactly(4))[0]
        cid, response = decode_response(entity.__api_key__, entity.__version__, self._exactly(size))
        assert cid == self.cid
        return response

    def _exactly(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by broker")
            buf += chunk
        return buf


@pytest.fixture(scope="module")
def conn(bootstrap_servers: str) -> Iterator[Conn]:
    c = Conn(bootstrap_servers)
    yield c
    c.sock.close()


@pytest.fixture(scope="module")
def topic(conn: Conn) -> str:
    name = "versions-" + uuid.uuid4().hex[:8]
    assert create_topics(conn, 7, [name], partitions=2).topics[0].error_code == 0
    return name


def create_topics(
    conn: Conn, version: int, names: list[str], partitions: int = 1, validate_only: bool = False
) -> Any:
    cls = request_class(ApiKey.CREATE_TOPICS, version)
    topic_cls = nested(cls, "CreatableTopic")
    topics = tuple(
        topic_cls(name=n, num_partitions=partitions, replication_factor=-1, assignments=(), configs=())
        for n in names
    )
    return conn.request(build(cls, topics=topics, timeout=5000 * MS, validate_only=validate_only))


def produce(conn: Conn, version: int, topic: str, value: bytes) -> Any:
    cls = request_class(ApiKey.PRODUCE, version)
    batch = encode_batch([(b"key", value, int(time.time() * 1000), [("v", b"%d" % version)])])
    partition = nested(cls, "PartitionProduceData")(index=1, records=batch)
    data = nested(cls, "TopicProduceData")(name=topic, partition_data=(partition,))
    return conn.request(build(cls, acks=-1, timeout=1000 * MS, topic_data=(data,)))


@pytest.mark.parametrize("version", range(3, 10))
def test_produce_then_fetch_every_version(conn: Conn, topic: str, version: int) -> None:
    value = f"produced-with-v{version}".encode()
    response = produce(conn, version, topic, value)
    part = response.responses[0].partition_responses[0]
    assert (part.index, part.error_code) == (1, 0)
    assert part.base_offset >= 0
    if version >= 5:
        assert part.log_start_offset == 0
    fetched = fetch(conn, 12, topic, part.base_offset)
    records = [v for b in decode_batches(fetched.records) for v in b.values]
    assert records[0] == value


def fetch(conn: Conn, version: int, topic: str, offset: int) -> Any:
    cls = request_class(ApiKey.FETCH, version)
    partition = build(
        nested(cls, "FetchPartition"),
        partition=1,
        fetch_offset=offset,
        partition_max_bytes=1 << 20,
        current_leader_epoch=-1,
        log_start_offset=-1,
        last_fetched_epoch=-1,
    )
    request = build(
        cls,
        replica_id=-1,
        max_wait=10 * MS,
        min_bytes=1,
        max_bytes=1 << 24,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(nested(cls, "FetchTopic")(topic=topic, partitions=(partition,)),),
        forgotten_topics_data=(),
        rack_id="",
    )
    response = conn.request(request)
    part = response.responses[0].partitions[0]
    assert part.error_code == 0
    assert part.high_watermark > offset
    if version >= 7:
        assert response.session_id == 0 and response.error_code == 0
    return part


@pytest.mark.parametrize("version", range(4, 13))
def test_fetch_every_version(conn: Conn, topic: str, version: int) -> None:
    produce(conn, 9, topic, b"for-fetch")
    part = fetch(conn, version, topic, 0)
    assert list(decode_batches(part.records))


@pytest.mark.parametrize("version", range(0, 13))
def test_metadata_every_version(conn: Conn, topic: str, version: int) -> None:
    cls = request_class(ApiKey.METADATA, version)
    topic_cls = nested(cls, "MetadataRequestTopic")
    request = build(
        cls,
        topics=(build(topic_cls, name=topic, topic_id=None),),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    response = conn.request(request)
    assert [(b.node_id, b.port) for b in response.brokers] == [(1, conn.sock.getpeername()[1])]
    (t,) = response.topics
    assert (t.name, t.error_code) == (topic, 0)
    assert sorted(p.partition_index for p in t.partitions) == [0, 1]
    assert all(p.leader_id == 1 and tuple(p.replica_nodes) == (1,) for p in t.partitions)
    if version >= 2:
        assert response.cluster_id
    if version >= 1:
        assert response.controller_id == 1
    if version >= 7:
        assert all(p.leader_epoch == 0 for p in t.partitions)
    if version >= 10:
        assert t.topic_id != uuid.UUID(int=0)
        if version >= 12:  # look the topic up by id
            by_id = conn.request(
                build(
                    cls,
                    topics=(build(topic_cls, name=None, topic_id=t.topic_id),),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
            )
            assert by_id.topics[0].name == topic


@pytest.mark.parametrize("version", range(1, 8))
def test_list_offsets_every_version(conn: Conn, topic: str, version: int) -> None:
    produce(conn, 9, topic, b"for-list-offsets")
    cls = request_class(ApiKey.LIST_OFFSETS, version)
    partitions = tuple(
        build(
            nested(cls, "ListOffsetsPartition"),
            partition_index=1,
            timestamp=ts,
            current_leader_epoch=-1,
            max_num_offsets=1,
        )
        for ts in (-2, -1)
    )
    request = build(
        cls,
        replica_id=-1,
        isolation_level=0,
        topics=(nested(cls, "ListOffsetsTopic")(name=topic, partitions=partitions[:1]),),
    )
    earliest = conn.request(request).topics[0].partitions[0]
    request = build(
        cls,
        replica_id=-1,
        isolation_level=0,
        topics=(nested(cls, "ListOffsetsTopic")(name=topic, partitions=partitions[1:]),),
    )
    latest = conn.request(request).topics[0].partitions[0]
    assert (earliest.error_code, earliest.offset) == (0, 0)
    assert latest.error_code == 0 and latest.offset >= 1


@pytest.mark.parametrize("version", range(2, 8))
def test_create_and_delete_topics_every_version(conn: Conn, version: int) -> None:
    name = f"cv{version}-" + uuid.uuid4().hex[:8]
    checked = create_topics(conn, version, [name], partitions=3, validate_only=True).topics[0]
    assert checked.error_code == 0
    created = create_topics(conn, version, [name], partitions=3).topics[0]
    assert (created.name, created.error_code) == (name, 0)
    if version >= 5:
        assert (created.num_partitions, created.replication_factor) == (3, 1)
    again = create_topics(conn, version, [name]).topics[0]
    assert again.error_code == 36  # TOPIC_ALREADY_EXISTS
    delete_version = min(max(version - 1, 1), 6)
    cls = request_class(ApiKey.DELETE_TOPICS, delete_version)
    if delete_version >= 6:
        request = cls(topics=(nested(cls, "DeleteTopicState")(name=name, topic_id=None),), timeout=5000 * MS)
    else:
        request = cls(topic_names=(name,), timeout=5000 * MS)
    result = conn.request(request).responses[0]
    assert (result.name, result.error_code) == (name, 0)
    assert conn.request(request).responses[0].error_code == 3  # already gone


def test_delete_topics_v6_by_id(conn: Conn) -> None:
    name = "byid-" + uuid.uuid4().hex[:8]
    created = create_topics(conn, 7, [name]).topics[0]
    cls = request_class(ApiKey.DELETE_TOPICS, 6)
    state = nested(cls, "DeleteTopicState")
    result = conn.request(cls(topics=(state(name=None, topic_id=created.topic_id),), timeout=5000 * MS))
    assert (result.responses[0].name, result.responses[0].error_code) == (name, 0)
    result = conn.request(cls(topics=(state(name=None, topic_id=created.topic_id),), timeout=5000 * MS))
    assert result.responses[0].error_code == 100  # UNKNOWN_TOPIC_ID


@pytest.mark.parametrize("version", range(2, 5))
def test_offset_for_leader_epoch_every_version(conn: Conn, topic: str, version: int) -> None:
    cls = request_class(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
    partitions = (
        nested(cls, "OffsetForLeaderPartition")(partition=1, current_leader_epoch=0, leader_epoch=0),
        nested(cls, "OffsetForLeaderPartition")(partition=0, current_leader_epoch=5, leader_epoch=0),
    )
    request = build(
        cls, replica_id=-1, topics=(nested(cls, "OffsetForLeaderTopic")(topic=topic, partitions=partitions),)
    )
    first, second = conn.request(request).topics[0].partitions
    assert (first.error_code, first.leader_epoch) == (0, 0) and first.end_offset >= 1
    assert second.error_code == 75  # UNKNOWN_LEADER_EPOCH: the client's epoch is newer than ours


def test_fetch_size_limits_kip74(conn: Conn) -> None:
    """Per-partition and total MaxBytes: whole batches only; the first partition with data always
    gets its first batch even when it is larger than the limits (KIP-74); later partitions only
    get what fits in the remaining budget."""
    name = "limits-" + uuid.uuid4().hex[:8]
    assert create_topics(conn, 7, [name], partitions=2).topics[0].error_code == 0
    batch_sizes: list[int] = []
    for partition in (0, 1):
        for i in range(3):
            batch = encode_batch([(None, bytes([i]) * 1000, int(time.time() * 1000), [])])
            batch_sizes.append(len(batch))
            cls = request_class(ApiKey.PRODUCE, 9)
            data = nested(cls, "TopicProduceData")(
                name=name,
                partition_data=(nested(cls, "PartitionProduceData")(index=partition, records=batch),),
            )
            response = conn.request(cls(acks=1, timeout=1000 * MS, topic_data=(data,)))
            assert response.responses[0].partition_responses[0].error_code == 0
    size = batch_sizes[0]
    assert len(set(batch_sizes)) == 1

    def fetch_sizes(partition_max: int, total_max: int) -> list[int]:
        cls = request_class(ApiKey.FETCH, 12)
        partitions = tuple(
            nested(cls, "FetchPartition")(partition=p, fetch_offset=0, partition_max_bytes=partition_max)
            for p in (0, 1)
        )
        response = conn.request(
            cls(
                max_wait=0 * MS,
                min_bytes=1,
                max_bytes=total_max,
                session_id=0,
                session_epoch=-1,
                topics=(nested(cls, "FetchTopic")(topic=name, partitions=partitions),),
                forgotten_topics_data=(),
            )
        )
        return [len(p.records or b"") for p in response.responses[0].partitions]

    assert fetch_sizes(10, 1 << 20) == [size, 0]  # first batch whole despite 10 bytes; none for p1
    assert fetch_sizes(1 << 20, 10) == [size, 0]  # same for the total limit
    assert fetch_sizes(2 * size, 1 << 20) == [2 * size, 2 * size]
    assert fetch_sizes(1 << 20, 2 * size + size // 2) == [2 * size, 0]  # no partial batches
    assert fetch_sizes(1 << 20, 4 * size) == [3 * size, size]
