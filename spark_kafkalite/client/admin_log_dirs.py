"""DescribeLogDirs (key 35) for the admin client: request builder and response parsing.
:meth:`~spark_kafkalite.client.admin.KafkaAdminClient.describe_log_dirs` sends it to every broker
(Java ``Admin.describeLogDirs``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested

__all__ = ["LogDirDescription", "describe_log_dirs_builder", "parse_describe_log_dirs"]


class LogDirDescription(NamedTuple):
    """One log dir of one broker (Java ``LogDirDescription``): ``error_code`` 0 or e.g.
    KAFKA_STORAGE_ERROR for an offline dir; ``replica_sizes_bytes`` per partition;
    ``total_bytes`` / ``usable_bytes`` of its volume (-1 before v4)."""

    log_dir: str
    error_code: int
    replica_sizes_bytes: dict[TopicPartition, int]
    total_bytes: int = -1
    usable_bytes: int = -1


def describe_log_dirs_builder(partitions: Mapping[str, Iterable[int]] | None) -> RequestBuilder:
    """A DescribeLogDirs request for ``{topic: partitions}``, or every partition when None."""
    items = (
        None if partitions is None else [(str(t), tuple(int(p) for p in ps)) for t, ps in partitions.items()]
    )

    def build(version: int) -> Any:
        cls = request_class(ApiKey.DESCRIBE_LOG_DIRS, version)
        if items is None:
            return make(cls, topics=None)
        topic_cls = nested(cls, "DescribableLogDirTopic")
        return make(cls, topics=tuple(topic_cls(topic=t, partitions=ps) for t, ps in items))

    return RequestBuilder(ApiKey.DESCRIBE_LOG_DIRS, build)


def parse_describe_log_dirs(response: Any) -> tuple[int, list[LogDirDescription]]:
    """``(top-level error_code (0 before v3), [LogDirDescription per log dir])``."""
    dirs = [
        LogDirDescription(
            log_dir=str(r.log_dir),
            error_code=int(r.error_code),
            replica_sizes_bytes={
                TopicPartition(str(t.name), int(p.partition_index)): int(p.partition_size)
                for t in r.topics
                for p in t.partitions
            },
            total_bytes=int(getattr(r, "total_bytes", -1)),
            usable_bytes=int(getattr(r, "usable_bytes", -1)),
        )
        for r in response.results
    ]
    return int(getattr(response, "error_code", 0)), dirs
