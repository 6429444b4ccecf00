"""DescribeTransactions (key 65), v0 (Kafka's ``KafkaApis.handleDescribeTransactionsRequest`` +
``TransactionCoordinator.handleDescribeTransactions``): per transactional id its state name
(``Empty``, ``Ongoing``, ``PrepareCommit``, ...), timeout, start time (-1 when no transaction
is open), producer id and epoch, and the partitions of the open transaction.
TRANSACTIONAL_ID_NOT_FOUND for ids this coordinator does not know; NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE as for the other transaction APIs.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from broker.apis.auth_helper import authorize
from broker.apis.context import BrokerContext
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, ms_duration, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import DescribeTransactionsRequest, DescribeTransactionsResponse

__all__ = ["handle_describe_transactions", "describe_transactions_error_response"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _state(cls: type[Any], topic_cls: type[Any], transactional_id: str, code: int, d: Any = None) -> Any:
    by_topic: dict[str, list[int]] = {}
    if d is not None:
        for topic, partition in d.partitions:
            by_topic.setdefault(topic, []).append(partition)
    return cls(
        error_code=ErrorCode(code),
        transactional_id=transactional_id,
        transaction_state="" if d is None else d.state,
        transaction_timeout=ms_duration(0 if d is None else d.timeout_ms),
        # -1 (no open transaction) is written as the instant 1 ms before the epoch
        transaction_start_time=_EPOCH + ms_duration(-1 if d is None else d.start_timestamp_ms),
        producer_id=-1 if d is None else d.producer_id,
        producer_epoch=-1 if d is None else d.producer_epoch,
        topics=tuple(topic_cls(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
    )


async def handle_describe_transactions(
    ctx: BrokerContext, rctx: RequestContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    """Handle a DescribeTransactionsRequest; each id needs DESCRIBE (else
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""
    cls = response_class(ApiKey.DESCRIBE_TRANSACTIONS, rctx.api_version)
    state_cls, topic_cls = nested(cls, "TransactionState"), nested(cls, "TopicData")
    coordinator = ctx.transaction_coordinator
    states = []
    for transactional_id in request.transactional_ids:
        if not authorize(ctx, rctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            states.append(
                _state(
                    state_cls, topic_cls, transactional_id, ErrorCode.transactional_id_authorization_failed
                )
            )
            continue
        if coordinator is None:
            states.append(_state(state_cls, topic_cls, transactional_id, ErrorCode.coordinator_not_available))
            continue
        d = coordinator.handle_describe_transactions(transactional_id)
        states.append(_state(state_cls, topic_cls, transactional_id, d.error, None if d.error else d))
    return build(cls, throttle_time=ZERO_DURATION, transaction_states=tuple(states))


def describe_transactions_error_response(
    request: DescribeTransactionsRequest, version: int, code: ErrorCode
) -> DescribeTransactionsResponse:
    cls = response_class(ApiKey.DESCRIBE_TRANSACTIONS, version)
    state_cls, topic_cls = nested(cls, "TransactionState"), nested(cls, "TopicData")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        transaction_states=tuple(_state(state_cls, topic_cls, t, code) for t in request.transactional_ids),
    )
