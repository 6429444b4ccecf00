"""Encoded Metadata topic entries kept per metadata image change (the response side of Kafka's
``KRaftMetadataCache``).

The metadata image is replaced by copy-on-write deltas
(:meth:`~broker.controller.metadata_image.MetadataImage.apply`): a :class:`TopicImage` or
:class:`PartitionRegistration` object is replaced only when that topic or partition changed, and
the broker map only when a broker registration changed. :class:`MetadataResponseCache` keeps the
wire bytes of each partition entry and each topic entry, per response version, keyed by those
objects' identity, so

* a Metadata request costs in proportion to the topics it asks for (joining cached bytes), not
  to their partitions;
* after a change, only the changed partitions are encoded again (once, by the first request that
  needs them), and the full all-topics answer is assembled once per image change.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from broker.controller.metadata_image import (
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from spark_kafkalite.protocol.entities import build, nested
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.internal_topics import GROUP_METADATA_TOPIC_NAME
from spark_kafkalite.protocol.metadata_response import encode_struct, metadata_topic_bytes

__all__ = ["MetadataResponseCache", "NO_AUTHORIZED_OPERATIONS"]

NO_AUTHORIZED_OPERATIONS = -2147483648
"""``topic_authorized_operations`` / ``cluster_authorized_operations`` when not requested."""

_PartitionEntry = tuple[PartitionRegistration, Mapping[int, BrokerRegistration], bytes]


class MetadataResponseCache:
    """Encoded topic entries of Metadata responses (see the module docstring).

    Attributes:
        partitions_encoded: partition entries encoded so far (a count for tests and benchmarks).
        topics_assembled: topic entries assembled so far.
    """

    def __init__(self) -> None:
        # (response class, topic name) -> index -> (registration, broker map, bytes)
        self._partitions: dict[tuple[type[Any], str], dict[int, _PartitionEntry]] = {}
        # (response class, topic name) -> (topic image, broker map, bytes)
        self._topics: dict[
            tuple[type[Any], str], tuple[TopicImage, Mapping[int, BrokerRegistration], bytes]
        ] = {}
        # response class -> (topic map, broker map, every topic's bytes in name order)
        self._all: dict[
            type[Any], tuple[Mapping[str, TopicImage], Mapping[int, BrokerRegistration], list[bytes]]
        ] = {}
        self.partitions_encoded = 0
        self.topics_assembled = 0

    def topic_bytes(self, cls: type[Any], topic: TopicImage, image: MetadataImage) -> bytes:
        """The encoded ``MetadataResponseTopic`` of ``topic`` for response class ``cls``."""
        key = (cls, topic.name)
        hit = self._topics.get(key)
        brokers = image.brokers
        if hit is not None and hit[0] is topic and hit[1] is brokers:
            return hit[2]
        partition_cls = nested(cls, "MetadataResponsePartition")
        before = self._partitions.get(key, {})
        entries: dict[int, _PartitionEntry] = {}
        chunks: list[bytes] = []
        for p in topic.partitions.values():
            cached = before.get(p.partition)
            if cached is not None and cached[0] is p and cached[1] is brokers:
                data = cached[2]
            else:
                data = encode_struct(
                    build(
                        partition_cls,
                        error_code=ErrorCode.none if p.leader >= 0 else ErrorCode.leader_not_available,
                        partition_index=p.partition,
                        leader_id=p.leader,
                        leader_epoch=p.leader_epoch,
                        replica_nodes=p.replicas,
                        isr_nodes=p.isr,
                        offline_replicas=image.offline_replicas(p),
                    )
                )
                self.partitions_encoded += 1
            entries[p.partition] = (p, brokers, data)
            chunks.append(data)
        entry = build(
            nested(cls, "MetadataResponseTopic"),
            error_code=ErrorCode.none,
            name=topic.name,
            topic_id=topic.topic_id,
            is_internal=topic.name == GROUP_METADATA_TOPIC_NAME,
            partitions=(),
            topic_authorized_operations=NO_AUTHORIZED_OPERATIONS,
        )
        encoded = metadata_topic_bytes(entry, chunks)
        self.topics_assembled += 1
        if len(self._topics) > 4 * len(image.topics) + 32:
            self._forget_deleted(image)
        self._partitions[key] = entries
        self._topics[key] = (topic, brokers, encoded)
        return encoded

    def all_topics(self, cls: type[Any], image: MetadataImage, visible: Collection[str]) -> list[bytes]:
        """Encoded entries of every topic in ``visible`` (the names the principal may describe),
        in name order; assembled once per image change when every topic is visible."""
        if len(visible) < len(image.topics):
            return [
                self.topic_bytes(cls, image.topics[n], image) for n in sorted(image.topics) if n in visible
            ]
        hit = self._all.get(cls)
        if hit is not None and hit[0] is image.topics and hit[1] is image.brokers:
            return hit[2]
        chunks = [self.topic_bytes(cls, image.topics[name], image) for name in sorted(image.topics)]
        self._all[cls] = (image.topics, image.brokers, chunks)
        return chunks

    def _forget_deleted(self, image: MetadataImage) -> None:
        for key in [k for k, v in self._topics.items() if image.topics.get(k[1]) is None]:
            del self._topics[key]
            self._partitions.pop(key, None)
