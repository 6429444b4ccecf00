"""WriteTxnMarkers (key 27), v1 (KIP-98): the transaction coordinator asks partition leaders to
end a transaction (Kafka's ``KafkaApis.handleWriteTxnMarkersRequest``).

* Authorization: ALTER or CLUSTER_ACTION on the cluster, else the whole request fails with
  ``CLUSTER_AUTHORIZATION_FAILED``.
* For each marker (producer id / epoch, COMMIT or ABORT, coordinator epoch) the leader appends one
  control batch (``control_records.end_txn_marker_batch``) to every listed partition, as the
  broker's coordinator (``ReplicaManager.append_records(internal=True)``: internal topics such as
  ``__consumer_offsets`` allowed, no sequence checks) with acks=all, waiting up to Kafka's default
  ``request.timeout.ms`` (30 s) for the ISR. The markers of one request are appended concurrently.
* Per-partition errors, as the coordinator's ``TransactionMarkerRequestCompletionHandler``
  expects them: ``UNKNOWN_TOPIC_OR_PARTITION``, ``NOT_LEADER_OR_FOLLOWER`` (retried against the
  new leader), ``NOT_ENOUGH_REPLICAS`` / ``NOT_ENOUGH_REPLICAS_AFTER_APPEND`` /
  ``REQUEST_TIMED_OUT`` (retried), ``INVALID_PRODUCER_EPOCH`` (a marker older than the producer's
  epoch) and ``TRANSACTION_COORDINATOR_FENCED`` (an older coordinator epoch) (both end the
  coordinator's attempt), ``KAFKA_STORAGE_ERROR``.
* A marker written to a ``__consumer_offsets`` partition completes the transaction's pending
  TxnOffsetCommit offsets there (``GroupCoordinator.complete_transaction``, Kafka's
  ``onTransactionCompleted``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.apis.auth_helper import authorize_cluster
from broker.apis.context import BrokerContext
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.control_records import end_txn_marker_batch
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.errors import ClusterAuthorizationFailedError, ErrorCode
from spark_kafkalite.protocol.internal_topics import GROUP_METADATA_TOPIC_NAME
from spark_kafkalite.protocol.types import TopicPartitionKey

if TYPE_CHECKING:
    from kio.schema.write_txn_markers.v1.request import WritableTxnMarker

    from broker.apis.kio_types import WriteTxnMarkersRequest, WriteTxnMarkersResponse

__all__ = ["handle_write_txn_markers", "write_txn_markers_error_response", "MARKER_APPEND_TIMEOUT_MS"]

logger = logging.getLogger(__name__)

#: How long a marker append waits for the ISR (Kafka appends with ``request.timeout.ms``,
#: default 30000).
MARKER_APPEND_TIMEOUT_MS = 30_000


async def _write_marker(ctx: BrokerContext, marker: WritableTxnMarker) -> dict[TopicPartitionKey, ErrorCode]:
    """Append one marker to each of its partitions; the error code per partition."""
    batch = end_txn_marker_batch(
        marker.producer_id,
        marker.producer_epoch,
        bool(marker.transaction_result),
        marker.coordinator_epoch,
        int(time.time() * 1000),
    )
    entries: dict[TopicPartitionKey, bytearray | memoryview] = {
        (topic.name, int(index)): bytearray(batch)  # each copy is patched in place by its log
        for topic in marker.topics
        for index in topic.partition_indexes
    }
    results = await ctx.replica_manager.append_records(entries, -1, MARKER_APPEND_TIMEOUT_MS, internal=True)
    codes = {key: result.error_code for key, result in results.items()}
    group_coordinator = ctx.group_coordinator
    if group_coordinator is not None:  # Kafka's GroupCoordinator.onTransactionCompleted
        for (topic, partition), code in codes.items():
            if topic == GROUP_METADATA_TOPIC_NAME and code == ErrorCode.none:
                group_coordinator.complete_transaction(
                    partition, marker.producer_id, marker.producer_epoch, bool(marker.transaction_result)
                )
    failed = {key: code for key, code in codes.items() if code != ErrorCode.none}
    if failed:
        logger.info(
            "%s marker of producer %d (epoch %d, coordinator epoch %d) failed: %s",
            "COMMIT" if marker.transaction_result else "ABORT",
            marker.producer_id,
            marker.producer_epoch,
            marker.coordinator_epoch,
            {f"{t}-{p}": ErrorCode(c).name for (t, p), c in failed.items()},
        )
    return codes


async def handle_write_txn_markers(
    ctx: BrokerContext, rctx: RequestContext, request: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    """Handle a WriteTxnMarkersRequest v1.

    Raises:
        ClusterAuthorizationFailedError: neither ALTER nor CLUSTER_ACTION on the cluster (the
            pipeline answers it for every partition).
    """
    if not (
        authorize_cluster(ctx, rctx, AclOperation.ALTER)
        or authorize_cluster(ctx, rctx, AclOperation.CLUSTER_ACTION)
    ):
        raise ClusterAuthorizationFailedError("WriteTxnMarkers needs CLUSTER_ACTION on the cluster")
    outcomes = await asyncio.gather(*(_write_marker(ctx, marker) for marker in request.markers))
    return _response(request, rctx.api_version, lambda i, key: outcomes[i][key])


def _response(
    request: WriteTxnMarkersRequest, version: int, code_of: Callable[[int, TopicPartitionKey], ErrorCode]
) -> WriteTxnMarkersResponse:
    cls = response_class(ApiKey.WRITE_TXN_MARKERS, version)
    marker_cls = nested(cls, "WritableTxnMarkerResult")
    topic_cls = nested(marker_cls, "WritableTxnMarkerTopicResult")
    partition_cls = nested(topic_cls, "WritableTxnMarkerPartitionResult")
    return cls(
        markers=tuple(
            marker_cls(
                producer_id=marker.producer_id,
                topics=tuple(
                    topic_cls(
                        name=topic.name,
                        partitions=tuple(
                            partition_cls(
                                partition_index=index, error_code=code_of(i, (topic.name, int(index)))
                            )
                            for index in topic.partition_indexes
                        ),
                    )
                    for topic in marker.topics
                ),
            )
            for i, marker in enumerate(request.markers)
        )
    )


def write_txn_markers_error_response(
    request: WriteTxnMarkersRequest, version: int, code: ErrorCode
) -> WriteTxnMarkersResponse:
    """``code`` for every partition of every marker (``WriteTxnMarkersRequest.getErrorResponse``)."""
    return _response(request, version, lambda _i, _key: code)
