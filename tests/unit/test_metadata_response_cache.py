"""Metadata responses from pre-encoded parts (issue #19): byte-identical to kio's encoder for
every version, and the broker's cache encodes a partition once per change, not per request."""

from __future__ import annotations

import uuid

import pytest

from broker.apis.metadata_cache import MetadataResponseCache
from broker.controller.metadata_image import (
    MetadataImage,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.framing import decode_response, encode_response
from spark_kafkalite.protocol.metadata_response import (
    MetadataResponseParts,
    encode_metadata_response,
    encode_struct,
    metadata_topic_bytes,
    with_topic_authorized_operations,
)


def image_with(partitions: dict[str, int]) -> MetadataImage:
    records: list = [RegisterBrokerRecord(b, {"PLAINTEXT": ("127.0.0.1", 9000 + b)}, None, b) for b in (1, 2)]
    for name, count in partitions.items():
        tid = uuid.uuid4()
        records.append(TopicRecord(name, tid))
        records.extend(PartitionRecord(tid, p, (1, 2, 3), (1, 2), 1 + p % 2, p, p) for p in range(count))
    return MetadataImage("cluster", 1).apply(records)[0]


def partition_entity(cls: type, index: int) -> object:
    return build(
        nested(cls, "MetadataResponsePartition"),
        error_code=ErrorCode.none,
        partition_index=index,
        leader_id=index % 3,
        leader_epoch=7,
        replica_nodes=(1, 2, 3),
        isr_nodes=(1, 2),
        offline_replicas=(3,),
    )


def topic_entity(cls: type, name: str, partitions: tuple, operations: int = -2147483648) -> object:
    return build(
        nested(cls, "MetadataResponseTopic"),
        error_code=ErrorCode.none,
        name=name,
        topic_id=uuid.UUID(int=5),
        is_internal=False,
        partitions=partitions,
        topic_authorized_operations=operations,
    )


def response(cls: type, topics: tuple) -> object:
    broker = build(nested(cls, "MetadataResponseBroker"), node_id=1, host="h", port=9092, rack=None)
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        brokers=(broker,),
        cluster_id="c",
        controller_id=1,
        topics=topics,
        cluster_authorized_operations=-2147483648,
    )


@pytest.mark.parametrize("version", range(13))
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 200)])  # 200 > 127: a two-byte compact count
def test_spliced_response_is_byte_identical_to_kio(version: int, shape: tuple[int, ...]) -> None:
    cls = response_class(ApiKey.METADATA, version)
    topics = [
        topic_entity(cls, f"t{i}", tuple(partition_entity(cls, p) for p in range(n)))
        for i, n in enumerate(shape)
    ]
    expected = encode_response(response(cls, tuple(topics)), 42)
    parts = [
        metadata_topic_bytes(
            topic_entity(cls, f"t{i}", ()), [encode_struct(partition_entity(cls, p)) for p in range(n)]
        )
        for i, n in enumerate(shape)
    ]
    assert encode_metadata_response(MetadataResponseParts(response(cls, ()), parts), 42) == expected
    # a plain entity (an error response) is encoded as usual
    assert encode_metadata_response(response(cls, tuple(topics)), 42) == expected


@pytest.mark.parametrize("version", range(8, 13))
def test_authorized_operations_patch_matches_kio(version: int) -> None:
    """KIP-430: replacing the closing int32 of a cached topic entry gives kio's bytes."""
    cls = response_class(ApiKey.METADATA, version)
    partitions = tuple(partition_entity(cls, p) for p in range(3))
    cached = metadata_topic_bytes(topic_entity(cls, "t", ()), [encode_struct(p) for p in partitions])
    flexible = bool(nested(cls, "MetadataResponseTopic").__flexible__)
    expected = encode_struct(topic_entity(cls, "t", partitions, operations=0b1000_1000))
    assert with_topic_authorized_operations(cached, flexible, 0b1000_1000) == expected


def test_cache_encodes_each_partition_once_per_change() -> None:
    cls = response_class(ApiKey.METADATA, 12)
    cache = MetadataResponseCache()
    image = image_with({"big": 300, "small": 2})
    first = cache.all_topics(cls, image, image.topics)
    assert cache.partitions_encoded == 302
    for _ in range(5):  # repeated full requests: nothing encoded again, the same chunks
        assert cache.all_topics(cls, image, image.topics) is first
    assert cache.partitions_encoded == 302
    # one partition changes: one partition entry encoded again, the other topic untouched
    reg = image.partition("big", 9)
    assert reg is not None
    tid = image.topics["big"].topic_id
    image2, _ = image.apply(
        [PartitionRecord(tid, 9, reg.replicas, (1,), 1, reg.leader_epoch + 1, reg.partition_epoch + 1)]
    )
    second = cache.all_topics(cls, image2, image2.topics)
    assert cache.partitions_encoded == 303 and cache.topics_assembled == 3
    assert second[1] is first[1]  # "small"
    frame = encode_metadata_response(MetadataResponseParts(response(cls, ()), second), 1)
    _, decoded = decode_response(ApiKey.METADATA, 12, frame[4:])
    by_index = {p.partition_index: p for p in decoded.topics[0].partitions}
    assert by_index[9].isr_nodes == (1,) and by_index[9].leader_id == 1 and len(by_index) == 300
    # broker 3 is not registered: offline in every entry
    assert by_index[0].offline_replicas == (3,)
    # a request naming one topic costs that topic only
    assert cache.topic_bytes(cls, image2.topics["small"], image2) is second[1]
    assert cache.partitions_encoded == 303
