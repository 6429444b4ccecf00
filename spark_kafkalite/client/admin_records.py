"""DeleteRecords (key 21) for the admin client: request builder and response parsing.
:meth:`~spark_kafkalite.client.admin.KafkaAdminClient.delete_records` sends one request per
partition leader (Java ``Admin.deleteRecords``, ``DeleteRecordsHandler``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spark_kafkalite.client.requests import CLIENT_API_VERSIONS, RequestBuilder
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested

__all__ = ["delete_records_builder", "parse_delete_records"]

CLIENT_API_VERSIONS.setdefault(ApiKey.DELETE_RECORDS, (0, 2))


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
