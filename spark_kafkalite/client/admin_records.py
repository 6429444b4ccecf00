"""DeleteRecords (key 21) for the admin client: request builder and response parsing.
:meth:`~spark_kafkalite.client.admin.KafkaAdminClient.delete_records` sends one request per
partition leader (Java ``Admin.deleteRecords``, ``DeleteRecordsHandler``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError, error_for_code

__all__ = ["delete_records", "delete_records_builder", "parse_delete_records"]


def delete_records_builder(before: Mapping[TopicPartition, int], timeout_ms: int) -> RequestBuilder:
    """A DeleteRecords request: for each partition, delete the records below ``before[tp]``
    (-1: below the high watermark); ``timeout_ms`` is how long the leader waits for its
    followers to move their log start offsets."""
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for tp, offset in before.items():
        by_topic.setdefault(tp.topic, []).append((tp.partition, int(offset)))

    def build(version: int) -> Any:
        cls = request_class(ApiKey.DELETE_RECORDS, version)
        topic_cls = nested(cls, "DeleteRecordsTopic")
        partition_cls = nested(cls, "DeleteRecordsPartition")
        return make(
            cls,
            topics=tuple(
                topic_cls(
                    name=topic,
                    partitions=tuple(partition_cls(partition_index=p, offset=o) for p, o in parts),
                )
                for topic, parts in by_topic.items()
            ),
            timeout=int(timeout_ms),
        )

    return RequestBuilder(ApiKey.DELETE_RECORDS, build)


def parse_delete_records(response: Any) -> dict[TopicPartition, tuple[int, int]]:
    """``{TopicPartition: (error_code, low_watermark)}`` of a DeleteRecords response."""
    return {
        TopicPartition(str(t.name), int(p.partition_index)): (int(p.error_code), int(p.low_watermark))
        for t in response.topics
        for p in t.partitions
    }


def delete_records(
    send: Callable[[RequestBuilder, int | None, float | None], Any],
    describe_topics: Callable[[Iterable[str], float | None], Mapping[str, Any]],
    before: Mapping[TopicPartition, int],
    wait_ms: int,
    timeout_ms: float | None,
) -> dict[TopicPartition, int | KafkaError]:
    """The body of ``KafkaAdminClient.delete_records``: find each partition's leader with
    ``describe_topics``, ``send`` one DeleteRecords per leader (``wait_ms`` for followers).
    Returns the new low watermark per partition, or its error.

    Raises:
        UnknownTopicOrPartitionError: a topic does not exist. KafkaTimeoutError.
    """
    query = {TopicPartition(str(tp[0]), int(tp[1])): int(o) for tp, o in before.items()}
    leaders = {
        TopicPartition(topic, p.partition): p.leader
        for topic, parts in describe_topics(sorted({tp.topic for tp in query}), timeout_ms).items()
        for p in parts
    }
    by_leader: dict[int, dict[TopicPartition, int]] = {}
    out: dict[TopicPartition, int | KafkaError] = {}
    for tp, offset in query.items():
        leader = leaders.get(tp, -1)
        if tp not in leaders:
            out[tp] = error_for_code(ErrorCode.unknown_topic_or_partition, f"{tp.topic}-{tp.partition}")
        elif leader < 0:
            out[tp] = error_for_code(ErrorCode.leader_not_available, f"{tp.topic}-{tp.partition}")
        else:
            by_leader.setdefault(leader, {})[tp] = offset
    for leader, offsets in by_leader.items():
        for tp, (code, low_watermark) in parse_delete_records(
            send(delete_records_builder(offsets, wait_ms), leader, timeout_ms)
        ).items():
            ok = code == ErrorCode.none
            out[tp] = low_watermark if ok else error_for_code(code, f"{tp.topic}-{tp.partition}")
    return out
