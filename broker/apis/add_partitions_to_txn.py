"""AddPartitionsToTxn (key 24), client versions v0-3 (Kafka's
``KafkaApis.handleAddPartitionsToTxnRequest`` + ``TransactionCoordinator.handleAddPartitionsToTransaction``).

Partitions unknown to the metadata fail the whole request: they get UNKNOWN_TOPIC_OR_PARTITION,
the others OPERATION_NOT_ATTEMPTED. Otherwise every partition gets the coordinator's answer:
NONE once the Ongoing state with the union of partitions is durable in ``__transaction_state``
(at once when they are all in the transaction already), INVALID_PRODUCER_ID_MAPPING,
PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below v2), CONCURRENT_TRANSACTIONS while a transition or
the markers of the previous transaction are pending, NOT_COORDINATOR, ... v4+ (the batched
broker-to-coordinator form of KIP-890) is not served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.apis.auth_helper import authorize, authorized_names
from broker.apis.context import BrokerContext
from broker.apis.txn_support import fenced_error_for_version, transaction_coordinator_of
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

__all__ = ["handle_add_partitions_to_txn", "add_partitions_to_txn_error_response"]

_FIRST_FENCED_VERSION = 2


def _response(
    version: int, request: AddPartitionsToTxnRequest, errors: dict[tuple[str, int], ErrorCode]
) -> AddPartitionsToTxnResponse:
    cls = response_class(ApiKey.ADD_PARTITIONS_TO_TXN, version)
    topic_cls = nested(cls, "AddPartitionsToTxnTopicResult")
    partition_cls = nested(cls, "AddPartitionsToTxnPartitionResult")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        results_by_topic_v3_and_below=tuple(
            topic_cls(
                name=t.name,
                results_by_partition=tuple(
                    partition_cls(partition_index=p, partition_error_code=errors[(t.name, int(p))])
                    for p in t.partitions
                ),
            )
            for t in request.v3_and_below_topics
        ),
    )


async def handle_add_partitions_to_txn(
    ctx: BrokerContext, rctx: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    """Handle an AddPartitionsToTxnRequest (v0-3). Authorization: WRITE on the transactional
    id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED everywhere), then WRITE on each topic (else
    TOPIC_AUTHORIZATION_FAILED for its partitions and OPERATION_NOT_ATTEMPTED for the others)."""
    version = rctx.api_version
    if not authorize(
        ctx, rctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.v3_and_below_transactional_id
    ):
        return add_partitions_to_txn_error_response(
            request, version, ErrorCode.transactional_id_authorization_failed
        )
    partitions: set[tuple[str, int]] = {
        (str(t.name), int(p)) for t in request.v3_and_below_topics for p in t.partitions
    }
    writable = authorized_names(ctx, rctx, AclOperation.WRITE, ResourceType.TOPIC, {t for t, _ in partitions})
    denied = {tp for tp in partitions if tp[0] not in writable}
    unknown = {tp for tp in partitions if tp not in denied and ctx.image.partition(*tp) is None}
    if unknown or denied:
        errors = {
            tp: ErrorCode.topic_authorization_failed
            if tp in denied
            else ErrorCode.unknown_topic_or_partition
            if tp in unknown
            else ErrorCode.operation_not_attempted
            for tp in partitions
        }
        return _response(version, request, errors)
    coordinator = transaction_coordinator_of(ctx)
    code = await coordinator.handle_add_partitions_to_transaction(
        request.v3_and_below_transactional_id,
        int(request.v3_and_below_producer_id),
        int(request.v3_and_below_producer_epoch),
        partitions,
    )
    error = fenced_error_for_version(code, version, _FIRST_FENCED_VERSION)
    return _response(version, request, dict.fromkeys(partitions, error))


def add_partitions_to_txn_error_response(
    request: AddPartitionsToTxnRequest, version: int, code: ErrorCode
) -> AddPartitionsToTxnResponse:
    partitions = {(t.name, int(p)) for t in request.v3_and_below_topics for p in t.partitions}
    return _response(version, request, dict.fromkeys(partitions, code))
