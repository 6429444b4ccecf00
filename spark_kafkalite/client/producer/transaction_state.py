"""The transactional producer's client-side state machine and the result of a transactional call
(Java ``TransactionManager.State`` and ``TransactionalRequestResult``; KIP-98, KIP-360)."""

from __future__ import annotations

import enum
import threading

from spark_kafkalite.protocol.errors import KafkaError, KafkaTimeoutError

__all__ = ["State", "is_transition_valid", "TransactionalRequestResult"]


class State(enum.Enum):
    """Java ``TransactionManager.State``."""

    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


_VALID_SOURCES: dict[State, frozenset[State]] = {
    State.UNINITIALIZED: frozenset({State.READY, State.ABORTABLE_ERROR}),
    State.INITIALIZING: frozenset({State.UNINITIALIZED, State.ABORTING_TRANSACTION}),
    State.READY: frozenset({State.INITIALIZING, State.COMMITTING_TRANSACTION, State.ABORTING_TRANSACTION}),
    State.IN_TRANSACTION: frozenset({State.READY}),
    State.COMMITTING_TRANSACTION: frozenset({State.IN_TRANSACTION}),
    State.ABORTING_TRANSACTION: frozenset({State.IN_TRANSACTION, State.ABORTABLE_ERROR}),
    State.ABORTABLE_ERROR: frozenset(
        {State.IN_TRANSACTION, State.COMMITTING_TRANSACTION, State.ABORTABLE_ERROR, State.INITIALIZING}
    ),
}


def is_transition_valid(source: State, target: State) -> bool:
    """Java ``State.isTransitionValid``: FATAL_ERROR is reachable from anywhere and never left."""
    if target is State.FATAL_ERROR:
        return True
    return source in _VALID_SOURCES[target]


class TransactionalRequestResult:
    """The outcome of ``init_transactions`` / ``send_offsets_to_transaction`` /
    ``commit_transaction`` / ``abort_transaction``, completed by the Sender thread. A call that
    timed out can be repeated: the producer hands back the same result (Java
    ``handleCachedTransactionRequestResult``) until a caller has seen it complete (``is_acked``)."""

    __slots__ = ("operation", "_event", "_error", "is_acked")

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self._event = threading.Event()
        self._error: KafkaError | None = None
        self.is_acked = False

    def done(self) -> None:
        """Complete successfully and wake the waiters."""
        self._event.set()

    def fail(self, error: KafkaError) -> None:
        """Complete with ``error`` and wake the waiters (ignored once completed)."""
        if not self._event.is_set():
            self._error = error
            self._event.set()

    @property
    def is_completed(self) -> bool:
        """True once done or failed (Java ``TransactionalRequestResult.isCompleted``)."""
        return self._event.is_set()

    @property
    def is_successful(self) -> bool:
        """True once done without an error (Java ``isSuccessful``)."""
        return self._event.is_set() and self._error is None

    @property
    def error(self) -> KafkaError | None:
        """The error it failed with, or None."""
        return self._error

    def await_result(self, timeout_ms: float | None) -> None:
        """Wait for completion (``timeout_ms`` None = no limit).

        Raises:
            KafkaTimeoutError: not completed within ``timeout_ms`` (the call may be repeated).
            KafkaError: the operation failed (the error the Sender recorded).
        """
        if not self._event.wait(None if timeout_ms is None else max(0.0, timeout_ms) / 1000.0):
            raise KafkaTimeoutError(
                f"Timeout expired after {timeout_ms:.0f} ms while awaiting {self.operation}"
            )
        self.is_acked = True
        if self._error is not None:
            raise self._error
