"""Request builders and response readers of the transactional producer (KIP-98): FindCoordinator
with key type 1 (TRANSACTION), InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit and EndTxn, in the versions the classic (pre-KIP-890 TV2) flow uses, as Java's
client does without a finalized ``transaction.version`` >= 2: AddPartitionsToTxn v0-3 (v4+ is
broker-to-coordinator only), AddOffsetsToTxn v0-3, TxnOffsetCommit v0-3, EndTxn v0-4 (v5 is TV2).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from spark_kafkalite.client.consumer.group_requests import (
    OffsetAndMetadata,
    find_coordinator_request,
)
from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested

__all__ = [
    "find_coordinator_request",
    "init_producer_id_request",
    "add_partitions_to_txn_request",
    "add_partitions_to_txn_errors",
    "add_offsets_to_txn_request",
    "txn_offset_commit_request",
    "txn_offset_commit_errors",
    "end_txn_request",
]


def init_producer_id_request(
    transactional_id: str | None, transaction_timeout_ms: int, producer_id: int = -1, producer_epoch: int = -1
) -> RequestBuilder:
    """InitProducerId; ``producer_id``/``producer_epoch`` other than -1 (KIP-360, v3+) ask the
    coordinator to bump the epoch of that producer instead of fencing it."""

    def build(version: int) -> Any:
        return make(
            request_class(ApiKey.INIT_PRODUCER_ID, version),
            transactional_id=transactional_id,
            transaction_timeout=transaction_timeout_ms,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        )

    return RequestBuilder(ApiKey.INIT_PRODUCER_ID, build, min_version=3 if producer_id >= 0 else None)


def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in sorted(tps):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def add_partitions_to_txn_request(
    transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
) -> RequestBuilder:
    """AddPartitionsToTxn v0-3 (the client form; field names of kio's v3-and-below layout)."""
    by_topic = _by_topic(partitions)

    def build(version: int) -> Any:
        cls = request_class(ApiKey.ADD_PARTITIONS_TO_TXN, version)
        topic_cls = nested(cls, "AddPartitionsToTxnTopic")
        return make(
            cls,
            v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=producer_id,
            v3_and_below_producer_epoch=producer_epoch,
            v3_and_below_topics=tuple(topic_cls(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        )

    return RequestBuilder(ApiKey.ADD_PARTITIONS_TO_TXN, build, max_version=3)


def add_partitions_to_txn_errors(response: Any) -> dict[TopicPartition, int]:
    """``{partition: error code}`` of an AddPartitionsToTxn v0-3 response."""
    return {
        TopicPartition(str(topic.name), int(p.partition_index)): int(p.partition_error_code)
        for topic in response.results_by_topic_v3_and_below
        for p in topic.results_by_partition
    }


def add_offsets_to_txn_request(
    transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
) -> RequestBuilder:
    """AddOffsetsToTxn: adds the group's ``__consumer_offsets`` partition to the transaction."""

    def build(version: int) -> Any:
        return make(
            request_class(ApiKey.ADD_OFFSETS_TO_TXN, version),
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            group_id=group_id,
        )

    return RequestBuilder(ApiKey.ADD_OFFSETS_TO_TXN, build)


def txn_offset_commit_request(
    transactional_id: str,
    group_id: str,
    producer_id: int,
    producer_epoch: int,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
) -> RequestBuilder:
    """TxnOffsetCommit to the group coordinator; v3+ carries the consumer's generation and
    member (KIP-447) so the coordinator can fence a zombie of a rebalanced group."""
    by_topic: dict[str, list[tuple[int, OffsetAndMetadata]]] = {}
    for tp in sorted(offsets):
        by_topic.setdefault(tp.topic, []).append((tp.partition, offsets[tp]))

    def build(version: int) -> Any:
        cls = request_class(ApiKey.TXN_OFFSET_COMMIT, version)
        topic_cls = nested(cls, "TxnOffsetCommitRequestTopic")
        part_cls = nested(cls, "TxnOffsetCommitRequestPartition")
        topics = tuple(
            topic_cls(
                name=topic,
                partitions=tuple(
                    make(
                        part_cls,
                        partition_index=p,
                        committed_offset=om.offset,
                        committed_leader_epoch=om.leader_epoch,
                        committed_metadata=om.metadata,
                    )
                    for p, om in parts
                ),
            )
            for topic, parts in by_topic.items()
        )
        return make(
            cls,
            transactional_id=transactional_id,
            group_id=group_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            topics=topics,
        )

    return RequestBuilder(ApiKey.TXN_OFFSET_COMMIT, build)


def txn_offset_commit_errors(response: Any) -> dict[TopicPartition, int]:
    """``{partition: error code}`` of a TxnOffsetCommit response."""
    return {
        TopicPartition(str(topic.name), int(p.partition_index)): int(p.error_code)
        for topic in response.topics
        for p in topic.partitions
    }


def end_txn_request(
    transactional_id: str, producer_id: int, producer_epoch: int, committed: bool
) -> RequestBuilder:
    """EndTxn (commit or abort), below v5 (v5 is the KIP-890 TV2 form that bumps the epoch)."""

    def build(version: int) -> Any:
        return make(
            request_class(ApiKey.END_TXN, version),
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            committed=committed,
        )

    return RequestBuilder(ApiKey.END_TXN, build, max_version=4)
