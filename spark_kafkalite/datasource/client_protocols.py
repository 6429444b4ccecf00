"""What the ``kafkalite`` data source calls on its Kafka clients, as protocols.

The source imports :mod:`spark_kafkalite.client` only where a client is made (a Python worker
that never reads or writes does not load it), so its code holds clients through these
protocols: each lists exactly the methods the source calls, with the client's signatures, and
mypy checks every call against them and checks that ``KafkaConsumer``, ``KafkaProducer`` and
``KafkaAdminClient`` satisfy them where the source makes one (``partition_reader._new_consumer``,
``writer._new_producer``, ...). Test fakes satisfy them structurally.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from _typeshed import SupportsLenAndGetItem

    from spark_kafkalite.client.types import OffsetAndTimestamp, PartitionInfo, TopicPartition
    from spark_kafkalite.protocol.group_records import OffsetAndMetadata

__all__ = [
    "Closeable",
    "SourceConsumer",
    "SinkProducer",
    "TransactionalSinkProducer",
    "SourceAdmin",
]


class Closeable(Protocol):
    """A pooled client (:class:`~spark_kafkalite.datasource.client_pool.ClientPool`)."""

    def close(self) -> None: ...


class SourceConsumer(Protocol):
    """The reads of the source: a partition reader's range (``partition_reader``) and the
    driver's offset queries (``offset_reader``), on ``KafkaConsumer``."""

    def assign(self, partitions: Iterable[TopicPartition]) -> None: ...

    def seek(self, partition: TopicPartition, offset: int) -> None: ...

    def position(self, partition: TopicPartition) -> int: ...

    def poll_columns(
        self, timeout_ms: float = 0, max_records: int | None = None, include_headers: bool = False
    ) -> dict[TopicPartition, dict[str, Any]]: ...

    def highwater(self, partition: TopicPartition) -> int | None: ...

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]: ...

    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]: ...

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]: ...

    def list_topics(self, timeout_ms: float | None = None) -> dict[str, set[int]]: ...

    def partitions_for_topic(self, topic: str, timeout_ms: float | None = None) -> set[int] | None: ...

    def close(self) -> None: ...


class SinkProducer(Protocol):
    """The writes of the sink (``writer``, ``arrow_sink``), on ``KafkaProducer``: whole record
    batches per partition, then a flush. ``config`` is the parsed producer configuration."""

    @property
    def config(self) -> Mapping[str, Any]: ...

    def partitions_for(self, topic: str) -> set[int]: ...

    def sticky_partition_runs(
        self, topic: str, cumulative_sizes: SupportsLenAndGetItem[int]
    ) -> list[tuple[int, int]]: ...

    def send_batch(self, topic: str, partition: int, builder: Any, size_bytes: int) -> Future[int]: ...

    def flush(self, timeout_s: float | None = None) -> None: ...

    def close(self, timeout_s: float | None = None) -> None: ...


class TransactionalSinkProducer(SinkProducer, Protocol):
    """The exactly-once sink's producer (``exactly_once.write_task``): one transaction per task
    with its batch marker committed through ``send_offsets_to_transaction`` (KIP-98)."""

    def init_transactions(self, timeout_s: float | None = None) -> None: ...

    def begin_transaction(self) -> None: ...

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_metadata: Mapping[str, Any] | str,
        timeout_s: float | None = None,
    ) -> None: ...

    def commit_transaction(self, timeout_s: float | None = None) -> None: ...

    def abort_transaction(self, timeout_s: float | None = None) -> None: ...


class SourceAdmin(Protocol):
    """The driver's size estimate (``offset_reader``) and the exactly-once marker read
    (``writer``), on ``KafkaAdminClient``."""

    def describe_topics(
        self, topics: Iterable[str], timeout_ms: float | None = None
    ) -> dict[str, list[PartitionInfo]]: ...

    def describe_log_dirs(
        self, topics: list[str] | None = None, timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]: ...

    def list_consumer_group_offsets_and_metadata(
        self, group_id: str, timeout_ms: float | None = None, *, require_stable: bool = False
    ) -> dict[TopicPartition, OffsetAndMetadata]: ...

    def close(self) -> None: ...
