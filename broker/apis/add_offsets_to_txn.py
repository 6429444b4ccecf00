"""AddOffsetsToTxn (key 25), v0-4 (Kafka's ``KafkaApis.handleAddOffsetsToTxnRequest``): adds
partition ``abs(groupId.hashCode) % offsets.topic.num.partitions`` of ``__consumer_offsets`` to
the transaction, exactly like AddPartitionsToTxn, so the TxnOffsetCommit that follows is
committed or aborted with it. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2; v4 only adds
TRANSACTION_ABORTABLE (never sent here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.apis.auth_helper import authorize
from broker.apis.context import BrokerContext
from broker.apis.txn_support import fenced_error_for_version, transaction_coordinator_of
from broker.coordinator.group.api_support import coordinator_of
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.internal_topics import GROUP_METADATA_TOPIC_NAME

if TYPE_CHECKING:
    from broker.apis.kio_types import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

__all__ = ["handle_add_offsets_to_txn", "add_offsets_to_txn_error_response"]

_FIRST_FENCED_VERSION = 2


def _response(version: int, code: ErrorCode) -> AddOffsetsToTxnResponse:
    return build(
        response_class(ApiKey.ADD_OFFSETS_TO_TXN, version), throttle_time=ZERO_DURATION, error_code=code
    )


async def handle_add_offsets_to_txn(
    ctx: BrokerContext, rctx: RequestContext, request: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    """Handle an AddOffsetsToTxnRequest: WRITE on the transactional id (else
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group (else GROUP_AUTHORIZATION_FAILED)."""
    version = rctx.api_version
    if not authorize(ctx, rctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return _response(version, ErrorCode.transactional_id_authorization_failed)
    if not authorize(ctx, rctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(version, ErrorCode.group_authorization_failed)
    coordinator = transaction_coordinator_of(ctx)
    offsets_partition = coordinator_of(ctx).manager.partition_for(request.group_id)
    code = await coordinator.handle_add_partitions_to_transaction(
        request.transactional_id,
        int(request.producer_id),
        int(request.producer_epoch),
        {(GROUP_METADATA_TOPIC_NAME, offsets_partition)},
    )
    return _response(version, fenced_error_for_version(code, version, _FIRST_FENCED_VERSION))


def add_offsets_to_txn_error_response(
    request: AddOffsetsToTxnRequest, version: int, code: ErrorCode
) -> AddOffsetsToTxnResponse:
    return _response(version, code)
