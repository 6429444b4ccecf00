"""The transactional requests the Sender sends one at a time for the ``TransactionManager``, and
how each response moves its state (Java ``TransactionManager.TxnRequestHandler`` and its
subclasses ``FindCoordinatorHandler``, ``InitProducerIdHandler``, ``AddPartitionsToTxnHandler``,
``AddOffsetsToTxnHandler``, ``TxnOffsetCommitHandler``, ``EndTxnHandler``; KIP-98, KIP-360,
KIP-447, KIP-588).

Error rules, as Java's handlers: NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE look the
coordinator up again and retry; other retriable errors (COORDINATOR_LOAD_IN_PROGRESS,
CONCURRENT_TRANSACTIONS, ...) retry after ``retry.backoff.ms`` (20 ms for CONCURRENT_TRANSACTIONS
while no partition is in the transaction yet); PRODUCER_FENCED and INVALID_PRODUCER_EPOCH are
fatal as ``ProducerFencedError``; TRANSACTIONAL_ID_AUTHORIZATION_FAILED and INVALID_TXN_STATE are
fatal; UNKNOWN_PRODUCER_ID / INVALID_PRODUCER_ID_MAPPING are abortable and ask for an epoch bump
(the abort is followed by InitProducerId with the current id and epoch, KIP-360); group and topic
authorization failures, TRANSACTION_ABORTABLE and a consumer group mismatch are abortable;
anything else is fatal. A disconnect retries (after a new coordinator lookup when the request
goes to a coordinator).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from spark_kafkalite.client.consumer.consumer_offsets import CommitFailedError
from spark_kafkalite.client.consumer.group_requests import OffsetAndMetadata
from spark_kafkalite.client.errors import COORDINATOR_MOVED_ERRORS
from spark_kafkalite.client.producer.transaction_state import State, TransactionalRequestResult
from spark_kafkalite.client.producer.txn_requests import (
    add_offsets_to_txn_request,
    add_partitions_to_txn_errors,
    add_partitions_to_txn_request,
    end_txn_request,
    find_coordinator_request,
    init_producer_id_request,
    txn_offset_commit_errors,
    txn_offset_commit_request,
)
from spark_kafkalite.client.request_future import RequestFuture
from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    GroupAuthorizationFailedError,
    KafkaError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    UnsupportedVersionError,
    error_for_code,
)
from spark_kafkalite.protocol.internal_topics import CoordinatorType

if TYPE_CHECKING:
    from spark_kafkalite.client.producer.transaction_manager import TransactionManager

__all__ = [
    "TxnRequestHandler",
    "FindCoordinatorHandler",
    "InitProducerIdHandler",
    "AddPartitionsToTxnHandler",
    "AddOffsetsToTxnHandler",
    "TxnOffsetCommitHandler",
    "EndTxnHandler",
]

log = logging.getLogger(__name__)

#: Java ``TransactionManager.Priority``: lower is sent first.
PRIORITY_FIND_COORDINATOR = 0
PRIORITY_INIT_PRODUCER_ID = 1
PRIORITY_ADD_PARTITIONS_OR_OFFSETS = 2
PRIORITY_END_TXN = 3
#: Java ``ADD_PARTITIONS_RETRY_BACKOFF_MS``: CONCURRENT_TRANSACTIONS right after the previous
#: transaction ended is retried sooner than ``retry.backoff.ms``.
ADD_PARTITIONS_RETRY_BACKOFF_MS = 20.0

_FENCED = {ErrorCode.invalid_producer_epoch, ErrorCode.producer_fenced}
_NEEDS_EPOCH_BUMP = {ErrorCode.unknown_producer_id, ErrorCode.invalid_producer_id_mapping}


def fenced_error(tm: TransactionManager) -> ProducerFencedError:
    """The ``ProducerFencedError`` for PRODUCER_FENCED / INVALID_PRODUCER_EPOCH: a newer producer
    with the same ``transactional.id`` bumped the epoch (KIP-98; fatal for this producer)."""
    return ProducerFencedError(
        f"there is a newer producer with the same transactional.id {tm.transactional_id!r} "
        f"({tm.producer_id_and_epoch}): this one is fenced"
    )


class TxnRequestHandler:
    """One queued transactional request (Java ``TxnRequestHandler``). ``coordinator_type`` is
    None (least loaded node), ``CoordinatorType.TRANSACTION`` or ``CoordinatorType.GROUP``."""

    priority = PRIORITY_ADD_PARTITIONS_OR_OFFSETS
    coordinator_type: int | None = CoordinatorType.TRANSACTION
    is_end_txn = False

    def __init__(self, tm: TransactionManager, result: TransactionalRequestResult | None = None) -> None:
        self.tm = tm
        self.result = result if result is not None else TransactionalRequestResult(type(self).__name__)
        self.is_retry = False
        self.retry_backoff_ms = tm.retry_backoff_ms
        self.sent_ms = 0.0  # when last sent (ms, Sender clock); a retry waits retry_backoff_ms after it

    @property
    def coordinator_key(self) -> str:
        """The FindCoordinator key of the coordinator this request goes to: the
        ``transactional.id`` (the group id for ``TxnOffsetCommitHandler``)."""
        return self.tm.transactional_id or ""

    def request_builder(self) -> RequestBuilder:
        """The request to send, built per negotiated version (subclasses)."""
        raise NotImplementedError

    def handle_response(self, response: Any) -> None:
        """Move the ``TransactionManager`` on ``response`` (the decoded response entity)
        and complete, fail or re-enqueue this request (subclasses; see the module docstring)."""
        raise NotImplementedError

    # -- outcomes ----------------------------------------------------------------------------

    def fatal_error(self, error: KafkaError) -> None:
        """Fail this request and the producer: every later call raises ``error`` (Java
        ``TxnRequestHandler.fatalError``)."""
        self.tm.transition_to_fatal_error(error)
        self.result.fail(error)

    def abortable_error(self, error: KafkaError) -> None:
        """Fail this request and put the transaction in ABORTABLE_ERROR: the application
        must abort it (Java ``TxnRequestHandler.abortableError``)."""
        self.tm.transition_to_abortable_error(error)
        self.result.fail(error)

    def abortable_error_if_possible(self, error: KafkaError) -> None:
        """Java: abortable with an epoch bump when the coordinator supports KIP-360."""
        self.tm.epoch_bump_required = True
        self.abortable_error(error)

    def reenqueue(self) -> None:
        """Queue this request again (a retry: the Sender waits ``retry_backoff_ms`` after
        ``sent_ms``; Java ``TxnRequestHandler.reenqueue``)."""
        self.is_retry = True
        self.tm.enqueue_request(self)

    def lookup_coordinator_and_retry(self) -> None:
        """Queue a FindCoordinator for this request's coordinator ahead of it, then retry
        it (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a disconnect).

        Raises:
            RuntimeError: called on a request without a coordinator (FindCoordinator itself)."""
        if self.coordinator_type is None:  # FindCoordinator goes to any node: it has none to look up
            raise RuntimeError(f"{type(self).__name__} has no coordinator to look up")
        self.tm.lookup_coordinator(self.coordinator_type, self.coordinator_key)
        self.reenqueue()

    def on_complete(self, future: RequestFuture) -> None:
        """The Sender's callback (Java ``TxnRequestHandler.onComplete``)."""
        with self.tm.lock:
            self.tm.in_flight_request = None
            if future.failed():
                exc = future.exception
                if isinstance(exc, UnsupportedVersionError):
                    self.fatal_error(exc)
                    return
                log.debug("%s failed (%s); will retry", type(self).__name__, exc)
                if self.coordinator_type is not None:
                    self.tm.lookup_coordinator(self.coordinator_type, self.coordinator_key)
                self.reenqueue()
                return
            self.handle_response(future.value)

    def _classic(self, code: int, what: str) -> bool:
        """The rules common to single-error responses; True if ``code`` was handled."""
        if code in COORDINATOR_MOVED_ERRORS:
            self.lookup_coordinator_and_retry()
        elif error_for_code(code).retriable:
            self.reenqueue()
        elif code in _FENCED:
            self.fatal_error(fenced_error(self.tm))
        elif code in _NEEDS_EPOCH_BUMP:
            self.abortable_error_if_possible(error_for_code(code, what))
        elif code == ErrorCode.transaction_abortable:
            self.abortable_error(error_for_code(code, what))
        elif code in (ErrorCode.transactional_id_authorization_failed, ErrorCode.invalid_txn_state):
            self.fatal_error(error_for_code(code, what))
        else:
            return False
        return True


class FindCoordinatorHandler(TxnRequestHandler):
    """FindCoordinator for the transaction (key type 1) or group (key type 0) coordinator of
    ``key`` (Java ``FindCoordinatorHandler``); sent to the least loaded node first of all."""

    priority = PRIORITY_FIND_COORDINATOR
    coordinator_type = None

    def __init__(self, tm: TransactionManager, key_type: int, key: str) -> None:
        super().__init__(tm)
        self.key_type = key_type
        self.key = key

    def request_builder(self) -> RequestBuilder:
        """FindCoordinator for ``key`` of ``key_type`` (``CoordinatorType``)."""
        return find_coordinator_request(self.key, self.key_type)

    def handle_response(self, response: Any) -> None:
        """Record the coordinator; retriable errors retry; TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        is fatal, GROUP_AUTHORIZATION_FAILED abortable, anything else fatal."""
        code = int(response.error_code)
        if code == ErrorCode.none:
            self.tm.set_coordinator(
                self.key_type, int(response.node_id), str(response.host), int(response.port)
            )
            self.result.done()
        elif error_for_code(code).retriable:
            self.reenqueue()
        elif code == ErrorCode.transactional_id_authorization_failed:
            self.fatal_error(error_for_code(code, f"transactional.id {self.key!r}"))
        elif code == ErrorCode.group_authorization_failed:
            self.abortable_error(GroupAuthorizationFailedError(f"group {self.key!r}"))
        else:
            message = getattr(response, "error_message", None)
            self.fatal_error(error_for_code(code, f"FindCoordinator for {self.key!r}: {message or ''}"))


class InitProducerIdHandler(TxnRequestHandler):
    """InitProducerId (Java ``InitProducerIdHandler``): a new producer id and epoch for the
    ``transactional.id``, or with ``producer_id`` >= 0 an epoch bump of the current one after an
    abortable error (KIP-360; the sequence numbers restart)."""

    priority = PRIORITY_INIT_PRODUCER_ID

    def __init__(self, tm: TransactionManager, producer_id: int, producer_epoch: int) -> None:
        super().__init__(tm, TransactionalRequestResult("InitProducerId"))
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.is_epoch_bump = producer_id >= 0

    def request_builder(self) -> RequestBuilder:
        """InitProducerId with ``transaction.timeout.ms`` and the current id / epoch (-1 / -1
        for a new producer)."""
        tm = self.tm
        return init_producer_id_request(
            tm.transactional_id, tm.transaction_timeout_ms, self.producer_id, self.producer_epoch
        )

    def handle_response(self, response: Any) -> None:
        """Install the id and epoch and go READY; authorization failures are fatal, other
        errors as the module docstring says."""
        code = int(response.error_code)
        tm = self.tm
        if code == ErrorCode.none:
            tm.txn_partition_map.set_producer_id_and_epoch(
                int(response.producer_id), int(response.producer_epoch)
            )
            if self.is_epoch_bump:
                tm.txn_partition_map.reset_sequence_numbers()
            tm.transition_to(State.READY)
            self.result.done()
        elif code in (
            ErrorCode.transactional_id_authorization_failed,
            ErrorCode.cluster_authorization_failed,
        ):
            self.fatal_error(error_for_code(code, f"transactional.id {tm.transactional_id!r}"))
        elif not self._classic(code, "InitProducerId"):
            self.fatal_error(error_for_code(code, "unexpected error in InitProducerIdResponse"))


class AddPartitionsToTxnHandler(TxnRequestHandler):
    """AddPartitionsToTxn (Java ``AddPartitionsToTxnHandler``): register ``partitions`` with the
    transaction coordinator before the first batch to each is sent (KIP-98)."""

    def __init__(self, tm: TransactionManager, partitions: set[TopicPartition]) -> None:
        super().__init__(tm, TransactionalRequestResult("AddPartitionsToTxn"))
        self.partitions = partitions

    def request_builder(self) -> RequestBuilder:
        """AddPartitionsToTxn for ``partitions`` with the current producer id and epoch."""
        pie = self.tm.producer_id_and_epoch
        return add_partitions_to_txn_request(
            self.tm.transactional_id or "", pie.producer_id, pie.epoch, self.partitions
        )

    def handle_response(self, response: Any) -> None:
        """Mark the partitions as in the transaction; CONCURRENT_TRANSACTIONS retries (after
        ``ADD_PARTITIONS_RETRY_BACKOFF_MS`` while the transaction holds no partition yet);
        TOPIC_AUTHORIZATION_FAILED and partition errors make the transaction abortable."""
        tm = self.tm
        errors = add_partitions_to_txn_errors(response)
        self.retry_backoff_ms = tm.retry_backoff_ms
        unauthorized: set[str] = set()
        partition_errors = False
        for tp, code in errors.items():
            if code == ErrorCode.none:
                continue
            if code == ErrorCode.concurrent_transactions:
                if not tm.partitions_in_transaction:
                    self.retry_backoff_ms = min(ADD_PARTITIONS_RETRY_BACKOFF_MS, tm.retry_backoff_ms)
                self.reenqueue()
                return
            if code == ErrorCode.topic_authorization_failed:
                unauthorized.add(tp.topic)
            elif code == ErrorCode.operation_not_attempted:
                partition_errors = True
            elif self._classic(code, f"AddPartitionsToTxn {tp.topic}-{tp.partition}"):
                return
            else:
                log.error("could not add %s to the transaction: %s", tp, error_for_code(code))
                partition_errors = True
        tm.pending_partitions_in_transaction.difference_update(errors)
        if unauthorized:
            self.abortable_error(TopicAuthorizationFailedError(f"topics {sorted(unauthorized)}"))
        elif partition_errors:
            self.abortable_error(
                KafkaError(
                    f"could not add partitions to the transaction: { {str(k): v for k, v in errors.items()} }"
                )
            )
        else:
            log.debug("added partitions %s to the transaction", sorted(errors))
            tm.partitions_in_transaction.update(errors)
            tm.transaction_started = True
            self.result.done()


class AddOffsetsToTxnHandler(TxnRequestHandler):
    """AddOffsetsToTxn (Java ``AddOffsetsToTxnHandler``): add the group's ``__consumer_offsets``
    partition to the transaction, then queue the ``TxnOffsetCommitHandler`` that completes
    ``result`` (``sendOffsetsToTransaction``, KIP-98 / KIP-447)."""

    def __init__(
        self,
        tm: TransactionManager,
        result: TransactionalRequestResult,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        group_metadata: Mapping[str, Any],
    ) -> None:
        super().__init__(tm, result)
        self.offsets = dict(offsets)
        self.group_metadata = group_metadata

    def request_builder(self) -> RequestBuilder:
        """AddOffsetsToTxn for the group of ``group_metadata`` with the current id and epoch."""
        pie = self.tm.producer_id_and_epoch
        return add_offsets_to_txn_request(
            self.tm.transactional_id or "", pie.producer_id, pie.epoch, self.group_metadata["group_id"]
        )

    def handle_response(self, response: Any) -> None:
        """On success queue the TxnOffsetCommit; GROUP_AUTHORIZATION_FAILED is abortable,
        other errors as the module docstring says."""
        code = int(response.error_code)
        group_id = self.group_metadata["group_id"]
        if code == ErrorCode.none:
            # the result completes with the TxnOffsetCommit that follows
            self.tm.enqueue_request(
                TxnOffsetCommitHandler(self.tm, self.result, self.offsets, self.group_metadata)
            )
            self.tm.transaction_started = True
        elif code == ErrorCode.group_authorization_failed:
            self.abortable_error(GroupAuthorizationFailedError(f"group {group_id!r}"))
        elif not self._classic(code, f"AddOffsetsToTxn for group {group_id!r}"):
            self.fatal_error(error_for_code(code, "unexpected error in AddOffsetsToTxnResponse"))


class TxnOffsetCommitHandler(TxnRequestHandler):
    """TxnOffsetCommit to the group coordinator (Java ``TxnOffsetCommitHandler``): the offsets,
    committed when the transaction commits; with the group generation and member id (KIP-447) so
    a zombie member is fenced."""

    coordinator_type = CoordinatorType.GROUP

    def __init__(
        self,
        tm: TransactionManager,
        result: TransactionalRequestResult,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        group_metadata: Mapping[str, Any],
    ) -> None:
        super().__init__(tm, result)
        self.pending = dict(offsets)
        self.group_metadata = group_metadata

    @property
    def coordinator_key(self) -> str:
        """The group id: this request goes to the group coordinator."""
        return str(self.group_metadata["group_id"])

    def request_builder(self) -> RequestBuilder:
        """TxnOffsetCommit of the offsets still pending, with the group metadata of KIP-447."""
        pie = self.tm.producer_id_and_epoch
        gm = self.group_metadata
        return txn_offset_commit_request(
            self.tm.transactional_id or "",
            str(gm["group_id"]),
            pie.producer_id,
            pie.epoch,
            self.pending,
            generation_id=int(gm.get("generation_id", -1)),
            member_id=str(gm.get("member_id", "")),
            group_instance_id=gm.get("group_instance_id"),
        )

    def handle_response(self, response: Any) -> None:
        """Drop the committed partitions and retry the rest (a coordinator move looks the
        group coordinator up again); UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION are abortable as
        ``CommitFailedError``, PRODUCER_FENCED / INVALID_PRODUCER_EPOCH fatal."""
        group_id = self.coordinator_key
        reloaded = False
        for tp, code in txn_offset_commit_errors(response).items():
            if code == ErrorCode.none:
                self.pending.pop(tp, None)
            elif code in (*COORDINATOR_MOVED_ERRORS, ErrorCode.request_timed_out):
                if not reloaded:
                    reloaded = True
                    self.tm.lookup_coordinator(CoordinatorType.GROUP, group_id)
            elif code in (ErrorCode.unknown_topic_or_partition, ErrorCode.coordinator_load_in_progress):
                continue
            elif code == ErrorCode.group_authorization_failed:
                self.abortable_error(GroupAuthorizationFailedError(f"group {group_id!r}"))
                break
            elif code in (ErrorCode.fenced_instance_id, ErrorCode.transaction_abortable):
                self.abortable_error(error_for_code(code, f"TxnOffsetCommit for group {group_id!r}"))
                break
            elif code in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
                self.abortable_error(
                    CommitFailedError(
                        "transaction offset commit failed due to consumer group metadata mismatch: "
                        f"{error_for_code(code)}"
                    )
                )
                break
            elif code in _FENCED:
                self.fatal_error(fenced_error(self.tm))
                break
            else:
                self.fatal_error(error_for_code(code, "unexpected error in TxnOffsetCommitResponse"))
                break
        if self.result.is_completed:
            self.pending.clear()
        elif not self.pending:
            self.result.done()
        else:
            self.reenqueue()


class EndTxnHandler(TxnRequestHandler):
    """EndTxn (Java ``EndTxnHandler``): commit (``committed``) or abort the transaction; its
    result completes ``commit_transaction`` / ``abort_transaction``."""

    priority = PRIORITY_END_TXN
    is_end_txn = True

    def __init__(self, tm: TransactionManager, committed: bool) -> None:
        super().__init__(
            tm, TransactionalRequestResult("commitTransaction" if committed else "abortTransaction")
        )
        self.committed = committed

    def request_builder(self) -> RequestBuilder:
        """EndTxn with the current producer id and epoch and the commit / abort flag."""
        pie = self.tm.producer_id_and_epoch
        return end_txn_request(self.tm.transactional_id or "", pie.producer_id, pie.epoch, self.committed)

    def handle_response(self, response: Any) -> None:
        """On success the transaction is complete (READY again); errors as the module
        docstring says."""
        code = int(response.error_code)
        if code == ErrorCode.none:
            self.tm.complete_transaction()
            self.result.done()
        elif not self._classic(code, "EndTxn"):
            self.fatal_error(error_for_code(code, "unhandled error in EndTxnResponse"))
