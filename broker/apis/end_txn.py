"""EndTxn (key 26), v0-4 (Kafka's ``KafkaApis.handleEndTxnRequest`` +
``TransactionCoordinator.handleEndTransaction``, transaction version 0/1): answered once the
PrepareCommit / PrepareAbort record is durable in ``__transaction_state``; the markers are then
written in the background and CompleteCommit / CompleteAbort logged. A retry of a finished
commit/abort is NONE, the opposite result or an EndTxn without a transaction INVALID_TXN_STATE,
one while the markers are pending CONCURRENT_TRANSACTIONS. PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH below v2; v4 only adds TRANSACTION_ABORTABLE (never sent here). v5 (the
epoch bump per transaction of KIP-890 part 2) is not served: no ``transaction.version`` 2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.apis.auth_helper import authorize
from broker.apis.context import BrokerContext
from broker.apis.txn_support import fenced_error_for_version, transaction_coordinator_of
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import EndTxnRequest, EndTxnResponse

__all__ = ["handle_end_txn", "end_txn_error_response"]

_FIRST_FENCED_VERSION = 2


def _response(version: int, code: ErrorCode) -> EndTxnResponse:
    return build(response_class(ApiKey.END_TXN, version), throttle_time=ZERO_DURATION, error_code=code)


async def handle_end_txn(ctx: BrokerContext, rctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    """Handle an EndTxnRequest; needs WRITE on the transactional id (else
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""
    version = rctx.api_version
    if not authorize(ctx, rctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return _response(version, ErrorCode.transactional_id_authorization_failed)
    code = await transaction_coordinator_of(ctx).handle_end_transaction(
        request.transactional_id,
        int(request.producer_id),
        int(request.producer_epoch),
        bool(request.committed),
    )
    return _response(version, fenced_error_for_version(code, version, _FIRST_FENCED_VERSION))


def end_txn_error_response(request: EndTxnRequest, version: int, code: ErrorCode) -> EndTxnResponse:
    return _response(version, code)
