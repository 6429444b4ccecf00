"""Glue between the transaction API handlers and the transaction coordinator: where it lives
on the BrokerContext and the error-code downgrade for request versions older than an error."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_kafkalite.protocol.errors import ErrorCode, error_for_code

if TYPE_CHECKING:
    from broker.apis.context import BrokerContext
    from broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator

__all__ = ["transaction_coordinator_of", "fenced_error_for_version"]


def transaction_coordinator_of(ctx: BrokerContext) -> TransactionCoordinator:
    """``ctx.transaction_coordinator`` when it runs.

    Raises:
        CoordinatorNotAvailableError: the broker has no running transaction coordinator (yet).
    """
    coordinator = ctx.transaction_coordinator
    if coordinator is None or not coordinator.active:
        raise error_for_code(
            int(ErrorCode.coordinator_not_available), "the transaction coordinator is not running"
        )
    return coordinator


def fenced_error_for_version(code: int, version: int, first_version: int) -> ErrorCode:
    """PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH below ``first_version`` (the request version
    that added it: InitProducerId 4, AddPartitionsToTxn / AddOffsetsToTxn / EndTxn 2), as Kafka's
    ``KafkaApis`` does for older clients."""
    if code == ErrorCode.producer_fenced and version < first_version:
        return ErrorCode.invalid_producer_epoch
    return ErrorCode(code)
