"""Bad input over raw sockets. After each case the broker must still serve other clients
(confluent-kafka produces and consumes) and the data stored before must be intact."""

from __future__ import annotations

import datetime
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.list_offsets.v7 import request as list_offsets_v7
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.produce.v9 import request as produce_v9

from spark_kafkalite.protocol.framing import decode_response, encode_request
from spark_kafkalite.protocol.record_batch_writer import encode_batch

pytestmark = pytest.mark.timeout(60)

MS = datetime.timedelta(milliseconds=1)
SEED_TOPIC = "bad-input-seed-" + uuid.uuid4().hex[:8]
SEED_VALUES = [f"seed-{i}".encode() for i in range(20)]


# -- raw wire helpers -------------------------------------------------------------------------------
class Wire:
    """One raw TCP connection to the broker."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.correlation_id = 0

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, entity: Any) -> int:
        self.correlation_id += 1
        self.sock.sendall(encode_request(entity, self.correlation_id, "raw-test"))
        return self.correlation_id

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exactly(4))[0]
        return self._recv_exactly(size)

    def request(self, entity: Any) -> Any:
        correlation_id = self.send(entity)
        got, response = decode_response(entity.__api_key__, entity.__version__, self.recv_frame())
        assert got == correlation_id
        return response

    def _recv_exactly(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by broker")
            buf += chunk
        return buf

    def is_closed_by_peer(self, timeout_s: float = 5.0) -> bool:
        """True if the broker closes the connection (EOF or reset) within ``timeout_s``."""
        self.sock.settimeout(timeout_s)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture
def wire(bootstrap_servers: str) -> Iterator[Wire]:
    w = Wire(bootstrap_servers)
    yield w
    w.close()


def header_frame(api_key: int, version: int, correlation_id: int = 1, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhih", api_key, version, correlation_id, 3) + b"raw" + body
    return struct.pack(">i", len(payload)) + payload


def produce_request(topic: str, records: bytes, acks: int = 1, partition: int = 0) -> Any:
    return produce_v9.ProduceRequest(
        acks=acks,
        timeout=1000 * MS,
        topic_data=(
            produce_v9.TopicProduceData(
                name=topic,
                partition_data=(produce_v9.PartitionProduceData(index=partition, records=records),),
            ),
        ),
    )


def fetch_request(
    topic: str,
    offset: int,
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    session_id: int = 0,
    session_epoch: int = -1,
) -> Any:
    return fetch_v12.FetchRequest(
        max_wait=max_wait_ms * MS,
        min_bytes=min_bytes,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=(
            fetch_v12.FetchTopic(
                topic=topic,
                partitions=(
                    fetch_v12.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )


def partition_error(response: Any) -> int:
    return int(response.responses[0].partition_responses[0].error_code)


def a_batch(n: int = 3) -> bytes:
    now = int(time.time() * 1000)
    return encode_batch([(b"k%d" % i, b"v%d" % i, now, [("h", b"x")]) for i in range(n)])


# -- the shared seed topic and the health check ----------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def seed_topic(bootstrap_servers: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    admin.create_topics([NewTopic(SEED_TOPIC, 1, 1)])[SEED_TOPIC].result(timeout=15)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap_servers, "acks": "all"})
    for v in SEED_VALUES:
        producer.produce(SEED_TOPIC, value=v, partition=0)
    assert producer.flush(15) == 0
    return SEED_TOPIC


@pytest.fixture(autouse=True)
def broker_still_healthy(bootstrap_servers: str) -> Iterator[None]:
    """After the test: a fresh librdkafka client appends and reads everything back intact."""
    yield
    marker = f"after-{uuid.uuid4().hex}".encode()
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap_servers, "acks": "1"})
    producer.produce(SEED_TOPIC, value=marker, partition=0)
    assert producer.flush(15) == 0
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap_servers, "group.id": "health", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition(SEED_TOPIC, 0, confluent_kafka.OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + 15
    while marker not in values and time.monotonic() < deadline:
        for m in consumer.consume(1000, timeout=0.1):
            assert m.error() is None
            values.append(m.value())
    consumer.close()
    assert values[: len(SEED_VALUES)] == SEED_VALUES
    assert values[-1] == marker


# -- framing-level errors: the connection is closed -------------------------------------------------
def test_truncated_frame_closes_connection(wire: Wire) -> None:
    frame = header_frame(3, 1)
    wire.send_raw(frame[:-2])  # the size says 2 more bytes than we send
    wire.sock.shutdown(socket.SHUT_WR)
    assert wire.is_closed_by_peer()


def test_garbage_frame_closes_connection(wire: Wire) -> None:
    garbage = bytes(range(256)) * 4
    wire.send_raw(struct.pack(">i", len(garbage)) + garbage)
    assert wire.is_closed_by_peer()


def test_short_header_closes_connection(wire: Wire) -> None:
    wire.send_raw(struct.pack(">i", 3) + b"\x00\x03\x00")
    assert wire.is_closed_by_peer()


def test_malformed_body_closes_connection(wire: Wire) -> None:
    # Produce v9 header followed by a body that ends in the middle of the topic array.
    wire.send_raw(header_frame(0, 9, body=b"\x00" + b"\x00\x01" + b"\x00\x00\x03\xe8" + b"\x05\x02t"))
    assert wire.is_closed_by_peer()


@pytest.mark.parametrize("api_key", [999, 50, -1])
def test_unknown_api_key_closes_connection(wire: Wire, api_key: int) -> None:
    wire.send_raw(header_frame(api_key, 0))
    assert wire.is_closed_by_peer()


@pytest.mark.parametrize(("api_key", "version"), [(3, 99), (1, 3), (0, 2), (0, 13), (19, 1)])
def test_unsupported_api_version_closes_connection(wire: Wire, api_key: int, version: int) -> None:
    """Metadata v99, Fetch v3 (below 4), Produce v2 (advertised for librdkafka but refused, as
    Kafka 4.0 does), Produce v13, CreateTopics v1."""
    wire.send_raw(header_frame(api_key, version, body=b"\x00" * 16))
    assert wire.is_closed_by_peer()


def test_oversized_request_closed_without_reading_body(wire: Wire) -> None:
    wire.send_raw(struct.pack(">i", 200 * 1024 * 1024) + b"\x00\x03\x00\x0c")
    assert wire.is_closed_by_peer()


def test_negative_size_closes_connection(wire: Wire) -> None:
    wire.send_raw(struct.pack(">i", -5))
    assert wire.is_closed_by_peer()


# -- ApiVersions ---------------------------------------------------------------------------------
def test_api_versions_unknown_version_answers_v0(wire: Wire) -> None:
    wire.send_raw(header_frame(18, 99, correlation_id=77))
    frame = wire.recv_frame()
    correlation_id, error_code, count = struct.unpack_from(">ihi", frame, 0)
    assert (correlation_id, error_code, count) == (77, 35, 1)
    assert struct.unpack_from(">hhh", frame, 10) == (18, 0, 3)
    assert len(frame) == 16
    # the connection stays usable
    response = wire.request(ApiVersionsV3(client_software_name="raw", client_software_version="1"))
    assert response.error_code == 0


def test_api_versions_table(wire: Wire) -> None:
    response = wire.request(ApiVersionsV3(client_software_name="raw-test", client_software_version="1.0"))
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[0] == (0, 9)  # Produce advertised from 0 (librdkafka feature checks)
    assert ranges[1] == (4, 12)
    assert ranges[2] == (0, 7)
    assert ranges[3] == (0, 12)
    assert ranges[18] == (0, 3)
    assert ranges[19] == (2, 7) and ranges[20] == (1, 6)


def test_api_versions_invalid_software_name(wire: Wire) -> None:
    response = wire.request(ApiVersionsV3(client_software_name="bad name!", client_software_version="1"))
    assert response.error_code == 42  # INVALID_REQUEST


def test_unknown_tagged_field_in_api_versions(wire: Wire) -> None:
    # ApiVersions v3 body: compact strings "a", "1", then a tagged-field section with tag 7.
    body = b"\x02a\x021" + b"\x01\x07\x02hi"
    payload = struct.pack(">hhih", 18, 3, 9, 3) + b"raw" + b"\x00" + body
    wire.send_raw(struct.pack(">i", len(payload)) + payload)
    frame = wire.recv_frame()
    correlation_id, error_code = struct.unpack_from(">ih", frame, 0)
    assert correlation_id == 9
    assert error_code in (0, 42)  # skipped or INVALID_REQUEST, never a crash


def test_pipelined_requests_answered_in_order(wire: Wire) -> None:
    entities = [
        ApiVersionsV3(client_software_name="a", client_software_version="1"),
        metadata_v12.MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        ),
        ApiVersionsV3(client_software_name="b", client_software_version="2"),
    ]
    ids = [wire.send(e) for e in entities]
    got = [decode_response(e.__api_key__, e.__version__, wire.recv_frame())[0] for e in entities]
    assert got == ids


# -- Produce errors: answered, connection kept ---------------------------------------------------
def test_crc_mismatch_is_corrupt_message(wire: Wire, seed_topic: str) -> None:
    batch = bytearray(a_batch())
    batch[-1] ^= 0xFF
    assert partition_error(wire.request(produce_request(seed_topic, bytes(batch)))) == 2
    # same connection still works
    assert partition_error(wire.request(produce_request(seed_topic, a_batch()))) == 0


def test_produce_to_missing_topic(wire: Wire) -> None:
    missing = "missing-" + uuid.uuid4().hex
    assert partition_error(wire.request(produce_request(missing, a_batch()))) == 3
    assert partition_error(wire.request(produce_request(SEED_TOPIC, a_batch(), partition=7))) == 3


def test_produce_validation_errors(wire: Wire, seed_topic: str) -> None:
    two_batches = a_batch() + a_batch()
    nonzero_base = bytearray(a_batch())
    nonzero_base[7] = 5  # base offset 5 (not under the CRC)
    huge = encode_batch([(None, b"x" * 1_100_000, int(time.time() * 1000), [])])
    assert partition_error(wire.request(produce_request(seed_topic, two_batches))) == 87  # INVALID_RECORD
    assert partition_error(wire.request(produce_request(seed_topic, bytes(nonzero_base)))) == 87
    assert partition_error(wire.request(produce_request(seed_topic, a_batch()[:40]))) == 2  # CORRUPT_MESSAGE
    assert partition_error(wire.request(produce_request(seed_topic, huge))) == 10  # MESSAGE_TOO_LARGE
    assert (
        partition_error(wire.request(produce_request(seed_topic, a_batch(), acks=2))) == 21
    )  # INVALID_REQUIRED_ACKS


def test_acks_zero_failure_closes_connection(wire: Wire, seed_topic: str) -> None:
    wire.send(produce_request(seed_topic, a_batch(), acks=0))  # fine: no response, stays open
    response = wire.request(ApiVersionsV3(client_software_name="a", client_software_version="1"))
    assert response.error_code == 0
    wire.send(produce_request("missing-" + uuid.uuid4().hex, a_batch(), acks=0))
    assert wire.is_closed_by_peer()


# -- Fetch ------------------------------------------------------------------------------------------
def test_fetch_offset_out_of_range_and_sessions(wire: Wire, seed_topic: str) -> None:
    response = wire.request(fetch_request(seed_topic, 10**9))
    part = response.responses[0].partitions[0]
    assert part.error_code == 1 and part.high_watermark >= len(SEED_VALUES)
    response = wire.request(fetch_request(seed_topic, 0, session_id=1234, session_epoch=3))
    assert response.error_code == 70 and response.responses == () and response.session_id == 0
    response = wire.request(fetch_request(seed_topic, 0, session_id=0, session_epoch=0))
    assert response.error_code == 0 and response.session_id != 0  # a KIP-227 session was created
    assert response.responses[0].partitions[0].records  # data from offset 0


def test_fetch_long_poll_wakes_on_append(bootstrap_servers: str, wire: Wire) -> None:
    topic = "longpoll-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    start = time.monotonic()
    empty = wire.request(fetch_request(topic, 0, max_wait_ms=300))
    assert 0.25 <= time.monotonic() - start < 3
    assert empty.responses[0].partitions[0].records in (b"", None)

    def produce_later() -> None:
        time.sleep(0.3)
        with Wire(bootstrap_servers) as other:
            assert partition_error(other.request(produce_request(topic, a_batch()))) == 0

    thread = threading.Thread(target=produce_later)
    start = time.monotonic()
    thread.start()
    response = wire.request(fetch_request(topic, 0, max_wait_ms=10_000))
    elapsed = time.monotonic() - start
    thread.join()
    assert 0.2 < elapsed < 5, elapsed
    assert response.responses[0].partitions[0].records


# -- Metadata / ListOffsets -----------------------------------------------------------------------
def test_metadata_errors_and_auto_create(wire: Wire) -> None:
    name = "auto-" + uuid.uuid4().hex[:8]

    def metadata(*names: str, auto: bool) -> dict[str, int]:
        response = wire.request(
            metadata_v12.MetadataRequest(
                topics=tuple(metadata_v12.MetadataRequestTopic(topic_id=None, name=n) for n in names),
                allow_auto_topic_creation=auto,
                include_topic_authorized_operations=False,
            )
        )
        return {t.name: int(t.error_code) for t in response.topics}

    assert metadata(name, "bad/name", "x" * 250, "..", auto=False) == {
        name: 3,
        "bad/name": 17,
        "x" * 250: 17,
        "..": 17,
    }
    assert metadata(name, auto=True) == {name: 5}  # LEADER_NOT_AVAILABLE while being created
    assert metadata(name, auto=True) == {name: 0}


def test_list_offsets_v0_and_v7(wire: Wire, seed_topic: str) -> None:
    # v0, hand-written: replica_id, [topic, [partition, timestamp, max_num_offsets]]
    name = seed_topic.encode()
    body = struct.pack(">ii", -1, 1) + struct.pack(">h", len(name)) + name + struct.pack(">iiqi", 1, 0, -2, 1)
    wire.send_raw(header_frame(2, 0, correlation_id=5, body=body))
    frame = wire.recv_frame()
    pos = 4 + 4 + 2 + len(name) + 4
    correlation_id = struct.unpack_from(">i", frame, 0)[0]
    partition, error_code, count, offset = struct.unpack_from(">ihiq", frame, pos)
    assert (correlation_id, partition, error_code, count, offset) == (5, 0, 0, 1, 0)

    def list_offsets(ts: int) -> tuple[int, int]:
        response = wire.request(
            list_offsets_v7.ListOffsetsRequest(
                replica_id=-1,
                isolation_level=0,
                topics=(
                    list_offsets_v7.ListOffsetsTopic(
                        name=seed_topic,
                        partitions=(list_offsets_v7.ListOffsetsPartition(partition_index=0, timestamp=ts),),
                    ),
                ),
            )
        )
        p = response.topics[0].partitions[0]
        assert p.error_code == 0
        return p.offset, p.timestamp

    latest, _ = list_offsets(-1)
    assert latest >= len(SEED_VALUES)
    assert list_offsets(-2) == (0, -1)
    max_offset, max_ts = list_offsets(-3)
    assert 0 <= max_offset < latest and max_ts > 0


def _recrc(batch: bytearray) -> bytes:
    import crc32c

    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


@pytest.mark.parametrize("damage", ["garbage_records", "unknown_codec", "count_too_high"])
def test_crc_valid_but_malformed_batch_is_rejected(wire: Wire, seed_topic: str, damage: str) -> None:
    """A batch whose CRC is right but whose records cannot be decoded must not be stored: it
    would make the partition unreadable for every consumer (the health check reads it all)."""
    batch = bytearray(a_batch(2))
    if damage == "garbage_records":
        batch[61:] = b"\xff" * (len(batch) - 61)
    elif damage == "unknown_codec":
        struct.pack_into(">h", batch, 21, 7)
    else:  # header says 3 records (lastOffsetDelta 2) but the section holds 2
        struct.pack_into(">i", batch, 23, 2)
        struct.pack_into(">i", batch, 57, 3)
    assert partition_error(wire.request(produce_request(seed_topic, _recrc(batch)))) == 2  # CORRUPT_MESSAGE
    assert partition_error(wire.request(produce_request(seed_topic, a_batch()))) == 0


# -- hostile counts and nulls (issue #14): answered or closed, never a crash -------------------------
# Sizes without the 4-byte prefix. Each made kio's native decoder abort the broker (Rust OOM,
# SIGABRT, exit -6): Fetch v12 with a partitions count of 0xFFFFFFFE, ListOffsets v7 and
# Metadata v12 with the compact count ffffffff0f.
CRASH_FRAMES = {
    "fetch-v12": bytes.fromhex(
        "0001000c6af2eb35000772646b61666b6100ffffffff000001f400000001032000000100000000ffffffff02"
        "0766757a7a6d65ffffffff0f"
    ).ljust(0x5D, b"\0"),
    "list-offsets-v7": bytes.fromhex("0002000700000007000772646b61666b6100ffffffff00ffffffff0f").ljust(
        54, b"\0"
    ),
    "metadata-v12": bytes.fromhex("0003000c00000007000772646b61666b6100ffffffff0f").ljust(54, b"\0"),
}


@pytest.mark.parametrize("name", sorted(CRASH_FRAMES))
def test_huge_array_count_closes_connection_and_broker_survives(
    name: str, wire: Wire, bootstrap_servers: str
) -> None:
    frame = CRASH_FRAMES[name]
    wire.send_raw(struct.pack(">i", len(frame)) + frame)
    assert wire.is_closed_by_peer()  # an unparsable body closes the connection, as in Kafka
    with Wire(bootstrap_servers) as other:  # the broker process is alive and serving
        response = other.request(ApiVersionsV3(client_software_name="after", client_software_version="1"))
        assert response.error_code == 0


def _null_array_frame(api_key: int, version: int, body: bytes) -> bytes:
    payload = struct.pack(">hhih", api_key, version, 31, 3) + b"raw" + b"\x00" + body
    return struct.pack(">i", len(payload)) + payload


def test_null_arrays_in_non_nullable_fields_answer_invalid_request(wire: Wire) -> None:
    """ListOffsets v7 / OffsetCommit v9 / Produce v9 / JoinGroup v5 with a null where the schema
    has a non-nullable array: answered (INVALID_REQUEST where the response has a code), the
    connection stays open; these raised TypeError in handlers before."""
    null = b"\x00"  # compact array length 0 = null
    cases = {
        # replica_id, isolation_level, topics=null, tags
        (2, 7): struct.pack(">ib", -1, 0) + null + b"\x00",
        # group_id "g", generation, member_id "m", group_instance_id null, topics=null, tags
        (8, 9): b"\x02g" + struct.pack(">i", -1) + b"\x02m" + b"\x00" + null + b"\x00",
        # transactional_id null, acks 1, timeout, topic_data=[{name "t", partition_data=null}]
        (0, 9): b"\x00" + struct.pack(">hi", 1, 1000) + b"\x02" + b"\x02t" + null + b"\x00" + b"\x00",
    }
    for (api_key, version), body in cases.items():
        wire.send_raw(_null_array_frame(api_key, version, body))
        frame = wire.recv_frame()
        assert struct.unpack_from(">i", frame, 0)[0] == 31
    # JoinGroup v5 (not flexible): group "g", session, rebalance, member "", instance null,
    # protocol type "consumer", protocols = null (-1)
    body = (
        struct.pack(">h", 1)
        + b"g"
        + struct.pack(">iih", 10000, 10000, 0)
        + struct.pack(">h", -1)
        + struct.pack(">h", 8)
        + b"consumer"
        + struct.pack(">i", -1)
    )
    payload = struct.pack(">hhih", 11, 5, 32, 3) + b"raw" + body
    wire.send_raw(struct.pack(">i", len(payload)) + payload)
    frame = wire.recv_frame()
    correlation_id, _throttle, error_code = struct.unpack_from(">iih", frame, 0)
    assert (correlation_id, error_code) == (32, 42)  # INVALID_REQUEST
    response = wire.request(ApiVersionsV3(client_software_name="a", client_software_version="1"))
    assert response.error_code == 0


def test_excessive_partition_counts_are_policy_violations(wire: Wire) -> None:
    """CreateTopics / CreatePartitions asking for 2**31-1 partitions stalled the broker (found by
    the wire fuzzer); Kafka refuses more than 10,000 per request with POLICY_VIOLATION."""
    from kio.schema.create_partitions.v3 import request as create_partitions_v3
    from kio.schema.create_topics.v5 import request as create_topics_v5

    name = "big-" + uuid.uuid4().hex[:8]
    topic = create_topics_v5.CreatableTopic(
        name=name, num_partitions=2**31 - 1, replication_factor=1, assignments=(), configs=()
    )
    response = wire.request(
        create_topics_v5.CreateTopicsRequest(topics=(topic,), timeout=1000 * MS, validate_only=False)
    )
    assert int(response.topics[0].error_code) == 44  # POLICY_VIOLATION
    grow = create_partitions_v3.CreatePartitionsTopic(name=SEED_TOPIC, count=2**31 - 1, assignments=None)
    response = wire.request(
        create_partitions_v3.CreatePartitionsRequest(topics=(grow,), timeout=1000 * MS, validate_only=False)
    )
    assert int(response.results[0].error_code) == 44
