"""InitProducerId (key 22, v0-v5): producer ids for idempotent producers (KIP-98, KIP-360).

Idempotent producers (``transactional_id`` null) always get a fresh producer id with epoch 0
from the broker's :class:`~broker.coordinator.producer_id_manager.ProducerIdManager`, whatever
``producer_id``/``producer_epoch`` they send (Kafka's ``TransactionCoordinator.handleInitProducerId``
"blindly accepts" them); a half-set pair (one of them -1) is ``INVALID_REQUEST`` as in Kafka's
``KafkaApis``. While no id block can be obtained from the controller the answer is
``COORDINATOR_LOAD_IN_PROGRESS`` (retriable), as Kafka's ``RPCProducerIdManager`` does.

A non-null ``transactional_id`` goes to the transaction coordinator
(:meth:`~broker.coordinator.transaction.transaction_coordinator.TransactionCoordinator.handle_init_producer_id`):
a new producer id or an epoch bump that fences the previous producer (an open transaction of
the previous epoch is aborted first and the answer is CONCURRENT_TRANSACTIONS until it is),
KIP-360 checks of the sent (producer id, epoch), INVALID_TRANSACTION_TIMEOUT outside
``(0, transaction.max.timeout.ms]``, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as Kafka.
An empty transactional id is ``INVALID_REQUEST``. PRODUCER_FENCED is answered as
INVALID_PRODUCER_EPOCH below v4 (``KafkaApis.handleInitProducerIdRequest``).
"""

from __future__ import annotations

import datetime
import logging
import weakref
from typing import TYPE_CHECKING

from kio.schema.init_producer_id.v3.request import InitProducerIdRequest as InitProducerIdRequestV3
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest as InitProducerIdRequestV4
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest as InitProducerIdRequestV5

from broker.apis.auth_helper import authorize, authorize_any, authorize_cluster
from broker.apis.context import BrokerContext
from broker.coordinator.producer_id_manager import ProducerIdManager
from broker.errors import error_code_for
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import InitProducerIdRequest, InitProducerIdResponse

_EPOCH_BUMP_VERSIONS = (InitProducerIdRequestV3, InitProducerIdRequestV4, InitProducerIdRequestV5)

__all__ = ["handle_init_producer_id", "init_producer_id_error_response", "producer_id_manager"]

logger = logging.getLogger(__name__)

_ONE_MS = datetime.timedelta(milliseconds=1)
_MANAGERS: weakref.WeakKeyDictionary[BrokerContext, ProducerIdManager] = weakref.WeakKeyDictionary()


def producer_id_manager(ctx: BrokerContext) -> ProducerIdManager:
    """The broker's ProducerIdManager (created on first use)."""
    manager = _MANAGERS.get(ctx)
    if manager is None:
        controller = ctx.controller

        def broker_epoch() -> int:
            registration = ctx.image.brokers.get(ctx.node_id)
            return -1 if registration is None else registration.epoch

        manager = _MANAGERS[ctx] = ProducerIdManager(controller, ctx.node_id, broker_epoch)
    return manager


def _response(
    version: int, code: ErrorCode, producer_id: int = -1, producer_epoch: int = -1
) -> InitProducerIdResponse:
    cls = response_class(ApiKey.INIT_PRODUCER_ID, version)
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        error_code=code,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )


async def handle_init_producer_id(
    ctx: BrokerContext, rctx: RequestContext, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    """Handle an InitProducerIdRequest (v0-v5); see the module docstring."""
    version = rctx.api_version
    transactional_id = request.transactional_id
    # Authorization (KafkaApis.handleInitProducerIdRequest): WRITE on the transactional id; an
    # idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
    if transactional_id is not None and not authorize(
        ctx, rctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        return _response(version, ErrorCode.transactional_id_authorization_failed)
    if (
        transactional_id is None
        and not authorize_cluster(ctx, rctx, AclOperation.IDEMPOTENT_WRITE)
        and not authorize_any(ctx, rctx, AclOperation.WRITE, ResourceType.TOPIC)
    ):
        return _response(version, ErrorCode.cluster_authorization_failed)
    if transactional_id == "":
        return _response(version, ErrorCode.invalid_request)
    producer_id = producer_epoch = -1
    if isinstance(request, _EPOCH_BUMP_VERSIONS):  # v3+ names the producer to bump (KIP-360)
        producer_id, producer_epoch = int(request.producer_id), int(request.producer_epoch)
    if (producer_id == -1) != (producer_epoch == -1):
        return _response(version, ErrorCode.invalid_request)
    if transactional_id is not None:
        coordinator = ctx.transaction_coordinator
        if coordinator is None or not coordinator.active:
            return _response(version, ErrorCode.coordinator_not_available)
        timeout_ms = request.transaction_timeout // _ONE_MS
        result = await coordinator.handle_init_producer_id(
            transactional_id, timeout_ms, None if producer_id == -1 else (producer_id, producer_epoch)
        )
        code = ErrorCode(result.error)
        if code == ErrorCode.producer_fenced and version < 4:
            code = ErrorCode.invalid_producer_epoch
        return _response(version, code, result.producer_id, result.producer_epoch)
    try:
        new_id = await producer_id_manager(ctx).generate_producer_id()
    except Exception as exc:  # noqa: BLE001 - mapped to a wire error code
        return _response(version, error_code_for(exc, f"InitProducerId v{version} from {rctx.connection_id}"))
    logger.debug("InitProducerId from %s: producer id %d epoch 0", rctx.connection_id, new_id)
    return _response(version, ErrorCode.none, new_id, 0)


def init_producer_id_error_response(
    request: InitProducerIdRequest, version: int, code: ErrorCode
) -> InitProducerIdResponse:
    """The error response for ``request`` (``InitProducerIdRequest.getErrorResponse``)."""
    return _response(version, code)
