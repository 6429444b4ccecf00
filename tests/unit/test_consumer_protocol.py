"""Java ConsumerProtocol subscription / assignment bytes: hand-computed encodings, kio's generated
schemas and kafka-python's encoder as independent checks, round trips, malformed input."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription
from kio.schema.consumer_protocol_assignment.v3 import ConsumerProtocolAssignment as KioAssignment
from kio.schema.consumer_protocol_assignment.v3.data import TopicPartition as KioAssignedTp
from kio.schema.consumer_protocol_subscription.v3 import ConsumerProtocolSubscription as KioSubscription
from kio.schema.consumer_protocol_subscription.v3.data import TopicPartition as KioOwnedTp
from kio.serial import entity_reader, entity_writer

from spark_kafkalite.client.types import TopicPartition as TP
from spark_kafkalite.protocol.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    group_by_topic,
)


def test_subscription_v0_known_bytes() -> None:
    # version 0, one topic "t", null user data
    assert encode_subscription(Subscription(("t",)), 0) == bytes.fromhex("000000000001000174ffffffff")


def test_subscription_v3_known_bytes() -> None:
    sub = Subscription(("a", "b"), b"xy", (TP("a", 0), TP("a", 1)), 5, "r1")
    expected = (
        b"\x00\x03"  # version
        + b"\x00\x00\x00\x02"
        + b"\x00\x01a"
        + b"\x00\x01b"  # topics
        + b"\x00\x00\x00\x02xy"  # user data
        + b"\x00\x00\x00\x01"
        + b"\x00\x01a"
        + b"\x00\x00\x00\x02"
        + b"\x00\x00\x00\x00"
        + b"\x00\x00\x00\x01"
        + b"\x00\x00\x00\x05"  # generation
        + b"\x00\x02r1"  # rack
    )
    assert encode_subscription(sub) == expected


def test_assignment_known_bytes() -> None:
    data = encode_assignment(Assignment((TP("a", 0), TP("a", 1))))
    assert data == bytes.fromhex("000300000001000161000000020000000000000001ffffffff")


def _kio_subscription_bytes(sub: Subscription) -> bytes:
    entity = KioSubscription(
        topics=sub.topics,
        user_data=sub.user_data,
        owned_partitions=tuple(
            KioOwnedTp(topic=t, partitions=tuple(ps)) for t, ps in group_by_topic(sub.owned_partitions)
        ),
        generation_id=sub.generation_id,
        rack_id=sub.rack_id,
    )
    buf = io.BytesIO()
    entity_writer(KioSubscription)(buf, entity)
    return struct.pack(">h", 3) + buf.getvalue()


topic_names = st.text(alphabet="abcxyz-._0123", min_size=1, max_size=8)
owned = st.dictionaries(
    topic_names, st.lists(st.integers(0, 1000), min_size=1, max_size=5, unique=True), max_size=4
)
subscriptions = st.builds(
    lambda topics, user_data, owned, generation, rack: Subscription(
        tuple(topics), user_data, tuple(TP(t, p) for t, ps in owned.items() for p in ps), generation, rack
    ),
    st.lists(topic_names, max_size=5, unique=True),
    st.none() | st.binary(max_size=20),
    owned,
    st.integers(-1, 2**31 - 1),
    st.none() | st.text(alphabet="abc-1", min_size=1, max_size=5),
)


@given(subscriptions)
def test_subscription_matches_kio_and_round_trips(sub: Subscription) -> None:
    data = encode_subscription(sub)
    assert data == _kio_subscription_bytes(sub)
    assert decode_subscription(data) == sub
    # kio reads ours back field by field
    parsed, size = entity_reader(KioSubscription)(data[2:], 0)
    assert size == len(data) - 2
    assert parsed.topics == sub.topics
    assert parsed.generation_id == sub.generation_id
    assert parsed.rack_id == sub.rack_id


@given(subscriptions, st.integers(0, 3))
def test_subscription_every_version_matches_kafka_python(sub: Subscription, version: int) -> None:
    ours = encode_subscription(sub, version)
    theirs = KpSubscription(
        version=version,
        topics=list(sub.topics),
        user_data=sub.user_data,
        owned_partitions=[(t, ps) for t, ps in group_by_topic(sub.owned_partitions)],
        generation_id=sub.generation_id,
        rack_id=sub.rack_id,
    ).encode(version=version)
    assert ours == theirs
    decoded = decode_subscription(theirs)
    assert decoded.topics == sub.topics
    assert decoded.user_data == sub.user_data
    if version >= 1:
        assert decoded.owned_partitions == sub.owned_partitions
    if version >= 2:
        assert decoded.generation_id == sub.generation_id
    if version >= 3:
        assert decoded.rack_id == sub.rack_id


@given(owned, st.none() | st.binary(max_size=10), st.integers(0, 3))
def test_assignment_matches_kio_and_kafka_python(
    parts: dict[str, list[int]], user_data: bytes | None, version: int
) -> None:
    assignment = Assignment(tuple(TP(t, p) for t, ps in parts.items() for p in ps), user_data)
    data = encode_assignment(assignment, version)
    buf = io.BytesIO()
    entity_writer(KioAssignment)(
        buf,
        KioAssignment(
            assigned_partitions=tuple(
                KioAssignedTp(topic=t, partitions=tuple(ps)) for t, ps in parts.items()
            ),
            user_data=user_data,
        ),
    )
    assert data == struct.pack(">h", version) + buf.getvalue()
    theirs = KpAssignment(
        version=version, assigned_partitions=list(parts.items()), user_data=user_data
    ).encode(version=version)
    assert data == theirs
    assert decode_assignment(data) == assignment


def test_newer_version_reads_as_v3_ignoring_trailing_fields() -> None:
    sub = Subscription(("t",), None, (TP("t", 1),), 7, None)
    data = bytearray(encode_subscription(sub))
    data[0:2] = struct.pack(">h", 9)
    data += b"\x00\x00\x00\x2a"  # a field some future version appended
    assert decode_subscription(bytes(data)) == sub


def test_empty_assignment_bytes() -> None:
    assert decode_assignment(b"") == Assignment(())
    assert decode_assignment(None) == Assignment(())


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xff",  # negative version
        b"\x00",  # truncated version
        b"\x00\x00\x00\x00\x00\x05\x00\x01a",  # 5 topics announced, one present
        b"\x00\x00\x00\x00\x00\x01\x00\x09ab",  # string longer than the data
        b"\x00\x00\x00\x00\x00\x01\xff\xff\xff\xff\xff\xff",  # null topic name
    ],
)
def test_malformed_subscription_raises(data: bytes) -> None:
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(data)


def test_malformed_assignment_raises() -> None:
    with pytest.raises(ConsumerProtocolError):
        decode_assignment(b"\x00\x00\x00\x00\x00\x01\x00\x01a\x00\x00\x00\x03\x00\x00")


def test_encode_rejects_unknown_version() -> None:
    with pytest.raises(ValueError):
        encode_subscription(Subscription(()), 4)
    with pytest.raises(ValueError):
        encode_assignment(Assignment(()), -1)
