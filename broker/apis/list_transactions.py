"""ListTransactions (key 66), v0-2 (Kafka's ``KafkaApis.handleListTransactionsRequest`` +
``TransactionStateManager.listTransactionStates``): the transactional ids this broker
coordinates, filtered by state names (unknown names are echoed in ``UnknownStateFilters`` and
otherwise ignored), producer ids, and (v1) ``DurationFilter``: only transactions started more
than that many ms ago (-1 = no filter), and (v2, KIP-1152) ``TransactionalIdPattern``: only ids
that RE2 regular expression matches whole (null or "" = no filter; a pattern RE2 refuses is
INVALID_REGULAR_EXPRESSION). COORDINATOR_LOAD_IN_PROGRESS while a ``__transaction_state``
partition loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.list_transactions.v1.request import ListTransactionsRequest as ListTransactionsRequestV1
from kio.schema.list_transactions.v2.request import ListTransactionsRequest as ListTransactionsRequestV2

from broker.apis.auth_helper import authorized_names
from broker.apis.context import BrokerContext
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import ListTransactionsRequest, ListTransactionsResponse

_DURATION_VERSIONS = (ListTransactionsRequestV1, ListTransactionsRequestV2)

__all__ = ["handle_list_transactions", "list_transactions_error_response"]


async def handle_list_transactions(
    ctx: BrokerContext, rctx: RequestContext, request: ListTransactionsRequest
) -> ListTransactionsResponse:
    """Handle a ListTransactionsRequest; only the ids the principal may DESCRIBE are listed."""
    cls = response_class(ApiKey.LIST_TRANSACTIONS, rctx.api_version)
    coordinator = ctx.transaction_coordinator
    if coordinator is None:
        return list_transactions_error_response(
            request, rctx.api_version, ErrorCode.coordinator_not_available
        )
    error, unknown, states = coordinator.handle_list_transactions(
        list(request.state_filters),
        {int(p) for p in request.producer_id_filters},
        # v1+ filters by duration (KIP-994), v2+ by a transactional id pattern (KIP-1152)
        int(request.duration_filter) if isinstance(request, _DURATION_VERSIONS) else -1,
        request.transactional_id_pattern if isinstance(request, ListTransactionsRequestV2) else None,
    )
    visible = authorized_names(
        ctx, rctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, [t for t, _, _ in states]
    )
    states = [entry for entry in states if entry[0] in visible]
    state_cls = nested(cls, "TransactionState")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        error_code=ErrorCode(error),
        unknown_state_filters=tuple(unknown),
        transaction_states=tuple(
            state_cls(transactional_id=t, producer_id=pid, transaction_state=name) for t, pid, name in states
        ),
    )


def list_transactions_error_response(
    request: ListTransactionsRequest, version: int, code: ErrorCode
) -> ListTransactionsResponse:
    cls = response_class(ApiKey.LIST_TRANSACTIONS, version)
    return build(
        cls, throttle_time=ZERO_DURATION, error_code=code, unknown_state_filters=(), transaction_states=()
    )
