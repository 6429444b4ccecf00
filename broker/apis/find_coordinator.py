"""FindCoordinator (key 10), v0-6 (Kafka's ``KafkaApis.handleFindCoordinatorRequest``).

Key type 0 (GROUP): the coordinator of a group is the leader of partition
``abs(groupId.hashCode) % offsets.topic.num.partitions`` of ``__consumer_offsets``. Key type 1
(TRANSACTION): the leader of partition ``abs(transactionalId.hashCode) %
transaction.state.log.num.partitions`` of ``__transaction_state`` (Kafka's
``TransactionStateManager.partitionFor``). Both topics are created on first use;
COORDINATOR_NOT_AVAILABLE when that fails or the partition has no live leader
(``KafkaApis.getCoordinator``). Key type 2 (SHARE, v6) gets INVALID_REQUEST. v4+ batch keys
(KIP-699): one ``Coordinator`` entry per key; v5 only adds an error code clients may see
(TRANSACTION_ABORTABLE, never sent here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.find_coordinator.v0.request import FindCoordinatorRequest as FindCoordinatorRequestV0
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest as FindCoordinatorRequestV4
from kio.schema.find_coordinator.v5.request import FindCoordinatorRequest as FindCoordinatorRequestV5
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest as FindCoordinatorRequestV6

from broker.apis.auth_helper import authorize
from broker.apis.context import BrokerContext
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.internal_topics import (
    GROUP_METADATA_TOPIC_NAME,
    TRANSACTION_STATE_TOPIC_NAME,
    CoordinatorType,
)

if TYPE_CHECKING:
    from broker.apis.kio_types import FindCoordinatorRequest, FindCoordinatorResponse

_BATCHED_VERSIONS = (FindCoordinatorRequestV4, FindCoordinatorRequestV5, FindCoordinatorRequestV6)

__all__ = ["handle_find_coordinator", "find_coordinator_error_response"]

_NO_NODE = (-1, "", -1)


async def _find(
    ctx: BrokerContext, rctx: RequestContext, key_type: int, key: str, listener: str
) -> tuple[int, str | None, tuple[int, str, int]]:
    # Authorization first (KafkaApis.getCoordinator): DESCRIBE on the group / transactional id.
    if key_type == CoordinatorType.GROUP and not authorize(
        ctx, rctx, AclOperation.DESCRIBE, ResourceType.GROUP, key
    ):
        return int(ErrorCode.group_authorization_failed), None, _NO_NODE
    if key_type == CoordinatorType.TRANSACTION and not authorize(
        ctx, rctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        return int(ErrorCode.transactional_id_authorization_failed), None, _NO_NODE
    if key_type == CoordinatorType.GROUP:
        service = ctx.group_coordinator_service
        if service is None or not service.coordinator.active:
            return int(ErrorCode.coordinator_not_available), "the group coordinator is not running", _NO_NODE
        error, message = await service.ensure_offsets_topic()
        topic, partition = GROUP_METADATA_TOPIC_NAME, service.coordinator.manager.partition_for(key)
    elif key_type == CoordinatorType.TRANSACTION:
        txn_service = ctx.transaction_coordinator_service
        if txn_service is None or not txn_service.coordinator.active:
            return (
                int(ErrorCode.coordinator_not_available),
                "the transaction coordinator is not running",
                _NO_NODE,
            )
        error, message = await txn_service.ensure_transaction_state_topic()
        topic, partition = TRANSACTION_STATE_TOPIC_NAME, txn_service.state_manager.partition_for(key)
    elif key_type == CoordinatorType.SHARE:
        return int(ErrorCode.invalid_request), "share groups are not supported by this broker", _NO_NODE
    else:
        return int(ErrorCode.invalid_request), f"unknown coordinator key type {key_type}", _NO_NODE
    if error:
        return error, message, _NO_NODE
    registration = ctx.image.partition(topic, partition)
    if registration is None or registration.leader < 0:
        return int(ErrorCode.coordinator_not_available), f"{topic}-{partition} has no leader", _NO_NODE
    broker = ctx.image.brokers.get(registration.leader)
    if broker is None or broker.fenced:
        return (
            int(ErrorCode.coordinator_not_available),
            f"coordinator {registration.leader} is not alive",
            _NO_NODE,
        )
    endpoint = broker.endpoints.get(listener)
    if endpoint is None:
        return int(ErrorCode.coordinator_not_available), f"coordinator has no {listener} listener", _NO_NODE
    return 0, None, (registration.leader, endpoint[0], endpoint[1])


async def handle_find_coordinator(
    ctx: BrokerContext, rctx: RequestContext, request: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    """Handle a FindCoordinatorRequest."""
    version = rctx.api_version
    cls = response_class(ApiKey.FIND_COORDINATOR, version)
    # v0 finds a group coordinator; v1+ names the key type (KIP-98)
    key_type = (
        int(request.key_type) if not isinstance(request, FindCoordinatorRequestV0) else CoordinatorType.GROUP
    )
    if isinstance(request, _BATCHED_VERSIONS):  # v4+: many keys per request (KIP-699)
        coordinator_cls = nested(cls, "Coordinator")
        entries = []
        for key in request.coordinator_keys:
            error, message, (node_id, host, port) = await _find(ctx, rctx, key_type, key, rctx.listener_name)
            entries.append(
                coordinator_cls(
                    key=key,
                    node_id=node_id,
                    host=host,
                    port=port,
                    error_code=ErrorCode(error),
                    error_message=message,
                )
            )
        return build(cls, throttle_time=ZERO_DURATION, coordinators=tuple(entries))
    key = request.key
    error, message, (node_id, host, port) = await _find(ctx, rctx, key_type, key, rctx.listener_name)
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        error_code=ErrorCode(error),
        error_message=message,
        node_id=node_id,
        host=host,
        port=port,
    )


def find_coordinator_error_response(
    request: FindCoordinatorRequest, version: int, code: ErrorCode
) -> FindCoordinatorResponse:
    cls = response_class(ApiKey.FIND_COORDINATOR, version)
    if isinstance(request, _BATCHED_VERSIONS):
        coordinator_cls = nested(cls, "Coordinator")
        return build(
            cls,
            throttle_time=ZERO_DURATION,
            coordinators=tuple(
                coordinator_cls(key=k, node_id=-1, host="", port=-1, error_code=code, error_message=None)
                for k in request.coordinator_keys
            ),
        )
    return build(
        cls, throttle_time=ZERO_DURATION, error_code=code, error_message=None, node_id=-1, host="", port=-1
    )
