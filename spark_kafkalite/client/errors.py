"""Client-side errors that have no Kafka wire code (everything else comes from
``spark_kafkalite.protocol.errors``)."""

from __future__ import annotations

from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    IllegalSaslStateError,
    KafkaError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)

__all__ = [
    "AUTHENTICATION_ERRORS",
    "COORDINATOR_MOVED_ERRORS",
    "COORDINATOR_RETRY_ERRORS",
    "NoOffsetForPartitionError",
    "IllegalStateError",
    "SslAuthenticationError",
    "TransactionAbortedError",
    "is_authentication_error",
]


COORDINATOR_MOVED_ERRORS = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})
"""The coordinator is gone or elsewhere: mark it unknown and look it up again (Java's
``AbstractCoordinator`` / ``TransactionManager`` on NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE)."""

COORDINATOR_RETRY_ERRORS = COORDINATOR_MOVED_ERRORS | {ErrorCode.coordinator_load_in_progress}
"""A request to a coordinator is retried after the backoff (after a new lookup for the moved
ones); COORDINATOR_LOAD_IN_PROGRESS: it is still loading its partition."""


class NoOffsetForPartitionError(KafkaError):
    """A partition has no position and ``auto.offset.reset`` is ``none`` (Java
    ``NoOffsetForPartitionException``). ``partitions`` lists them."""

    error_code = -1
    retriable = False

    def __init__(self, partitions: list[TopicPartition]) -> None:
        self.partitions = list(partitions)
        super().__init__(f"undefined offset with no reset policy for partitions: {self.partitions}")

    def _format(self, message: str | None) -> str:
        return f"NO_OFFSET_FOR_PARTITION: {message}"


class IllegalStateError(KafkaError):
    """The client is used in a state that does not allow the call (Java
    ``IllegalStateException``): closed, or a partition that is not assigned."""

    error_code = -1
    retriable = False

    def _format(self, message: str | None) -> str:
        return f"ILLEGAL_STATE: {message}" if message else "ILLEGAL_STATE"


class SslAuthenticationError(KafkaError):
    """The TLS handshake with a broker failed: its certificate is not trusted or does not match
    the host, the broker refused ours, or the port does not speak TLS (Java
    ``SslAuthenticationException``; not retriable: the configuration must change)."""

    error_code = -1
    retriable = False

    def _format(self, message: str | None) -> str:
        return f"SSL_AUTHENTICATION_FAILED: {message}" if message else "SSL_AUTHENTICATION_FAILED"


AUTHENTICATION_ERRORS: tuple[type[KafkaError], ...] = (
    SslAuthenticationError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    IllegalSaslStateError,
)
"""Errors of a connection's TLS or SASL set-up (Java's ``AuthenticationException`` subclasses):
requests to that node fail with them instead of waiting for a retry that cannot succeed."""


def is_authentication_error(exc: BaseException | None) -> bool:
    """True for one of :data:`AUTHENTICATION_ERRORS`."""
    return isinstance(exc, AUTHENTICATION_ERRORS)


class TransactionAbortedError(KafkaError):
    """A record of a transaction that is being aborted: it was never sent (Java
    ``TransactionAbortedException``, "Failing batch since transaction was aborted")."""

    error_code = -1
    retriable = False

    def _format(self, message: str | None) -> str:
        return f"TRANSACTION_ABORTED: {message}" if message else "TRANSACTION_ABORTED"
