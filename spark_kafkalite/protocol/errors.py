"""Kafka error codes and the exception tree shared by broker and client.

``ErrorCode`` is kio's IntEnum generated from Kafka's ``Errors.java`` (members are lower-case,
e.g. ``ErrorCode.not_leader_or_follower``; each has ``.retriable``). ``KafkaError`` subclasses are
named like the Java exceptions (``NotLeaderOrFollowerException`` -> ``NotLeaderOrFollowerError``)
and declared below, one per code, so type checkers and readers see them. ``error_for_code`` maps a
wire error code to an exception instance; the broker maps exceptions back with
``KafkaError.error_code``. ``needs_metadata_refresh`` is the one rule for "the cached leader is
probably wrong" used by the producer, the consumer and the broker's replica fetchers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

from kio.schema.errors import ErrorCode

from spark_kafkalite.protocol.types import TopicPartition

__all__ = [
    "ErrorCode",
    "KafkaError",
    "KafkaConnectionError",
    "KafkaTimeoutError",
    "RecordError",
    "CorruptRecordError",
    "METADATA_REFRESH_ERRORS",
    "needs_metadata_refresh",
    "error_for_code",
    "raise_for_error_code",
]


class RecordError(NamedTuple):
    """One record a broker rejected inside a produced batch (KIP-467; Kafka's
    ``ProduceResponse.RecordError``, on the wire ``ProduceResponseData.BatchIndexAndErrorMessage``
    of ProduceResponse v8+): the record's index in its batch (0-based) and why (None: see the
    partition's ``error_message``)."""

    batch_index: int
    batch_index_error_message: str | None = None

    def __str__(self) -> str:
        """Kafka's ``RecordError.toString``: ``RecordError(batchIndex=3, message='...')``."""
        message = self.batch_index_error_message
        shown = "null" if message is None else f"'{message}'"
        return f"RecordError(batchIndex={self.batch_index}, message={shown})"


class KafkaError(Exception):
    """Base of every Kafka error.

    A subclass declared with ``code=`` (``class X(KafkaError, code=ErrorCode.x)``) takes that wire
    code, Kafka's retriable flag for it, and is what :func:`error_for_code` returns for the code.

    Attributes:
        error_code: the Kafka wire error code (``-1`` for client-side errors without one).
        retriable: whether Kafka classifies the error as retriable (``RetriableException``).
        record_errors: the records of a produced batch that caused the error (KIP-467, Kafka's
            ``RecordValidationException.recordErrors``); empty for any other error.
    """

    error_code: int = ErrorCode.unknown_server_error.value
    retriable: bool = False
    _by_code: ClassVar[dict[int, type[KafkaError]]] = {}

    def __init_subclass__(cls, code: ErrorCode | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if code is None:
            return
        cls.error_code = int(code)
        cls.retriable = bool(code.retriable)
        if cls.__doc__ is None:
            cls.__doc__ = f"Kafka error {code.name.upper()} ({int(code)})."
        KafkaError._by_code[int(code)] = cls

    record_errors: tuple[RecordError, ...] = ()

    def __init__(self, message: str | None = None, *, record_errors: tuple[RecordError, ...] = ()) -> None:
        self.message = message
        if record_errors:
            self.record_errors = record_errors
        super().__init__(self._format(message))

    def _format(self, message: str | None) -> str:
        name = _code_name(self.error_code)
        if message:
            return f"{name}: {message}"
        return name

    @property
    def name(self) -> str:
        """Kafka's upper-case name of the error code, e.g. ``NOT_LEADER_OR_FOLLOWER``."""
        return _code_name(self.error_code)


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"ERROR_CODE_{code}"


class KafkaConnectionError(KafkaError):
    """The connection to a broker failed or was closed (client side; retriable)."""

    error_code = -1
    retriable = True

    def _format(self, message: str | None) -> str:
        return f"KAFKA_CONNECTION_ERROR: {message}" if message else "KAFKA_CONNECTION_ERROR"


class KafkaTimeoutError(KafkaError):
    """An operation did not complete within its timeout (client side; retriable)."""

    error_code = -1
    retriable = True

    def _format(self, message: str | None) -> str:
        return f"KAFKA_TIMEOUT: {message}" if message else "KAFKA_TIMEOUT"


# One class per wire code of Kafka's ``Errors.java`` (as kio 0.6.5 lists them), in code order.
# Names follow the Java exceptions: ``unknown_topic_or_partition`` -> UnknownTopicOrPartitionError,
# ``invalid_topic_exception`` -> InvalidTopicError, ``kafka_storage_error`` -> KafkaStorageError.


class UnknownServerError(KafkaError, code=ErrorCode.unknown_server_error): ...


class OffsetOutOfRangeError(KafkaError, code=ErrorCode.offset_out_of_range):
    """Kafka error OFFSET_OUT_OF_RANGE (1); Kafka's ``OffsetOutOfRangeException``.

    Attributes:
        partitions: on the consumer, each partition whose fetch position was out of range with
            ``auto.offset.reset=none``, mapped to that position (Kafka's
            ``offsetOutOfRangePartitions()``); empty when raised elsewhere.
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        partitions: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        super().__init__(message)
        self.partitions: dict[TopicPartition, int] = dict(partitions or {})


class CorruptMessageError(KafkaError, code=ErrorCode.corrupt_message): ...


class UnknownTopicOrPartitionError(KafkaError, code=ErrorCode.unknown_topic_or_partition): ...


class InvalidFetchSizeError(KafkaError, code=ErrorCode.invalid_fetch_size): ...


class LeaderNotAvailableError(KafkaError, code=ErrorCode.leader_not_available): ...


class NotLeaderOrFollowerError(KafkaError, code=ErrorCode.not_leader_or_follower): ...


class RequestTimedOutError(KafkaError, code=ErrorCode.request_timed_out): ...


class BrokerNotAvailableError(KafkaError, code=ErrorCode.broker_not_available): ...


class ReplicaNotAvailableError(KafkaError, code=ErrorCode.replica_not_available): ...


class MessageTooLargeError(KafkaError, code=ErrorCode.message_too_large): ...


class StaleControllerEpochError(KafkaError, code=ErrorCode.stale_controller_epoch): ...


class OffsetMetadataTooLargeError(KafkaError, code=ErrorCode.offset_metadata_too_large): ...


class NetworkError(KafkaError, code=ErrorCode.network_exception): ...


class CoordinatorLoadInProgressError(KafkaError, code=ErrorCode.coordinator_load_in_progress): ...


class CoordinatorNotAvailableError(KafkaError, code=ErrorCode.coordinator_not_available): ...


class NotCoordinatorError(KafkaError, code=ErrorCode.not_coordinator): ...


class InvalidTopicError(KafkaError, code=ErrorCode.invalid_topic_exception): ...


class RecordListTooLargeError(KafkaError, code=ErrorCode.record_list_too_large): ...


class NotEnoughReplicasError(KafkaError, code=ErrorCode.not_enough_replicas): ...


class NotEnoughReplicasAfterAppendError(KafkaError, code=ErrorCode.not_enough_replicas_after_append): ...


class InvalidRequiredAcksError(KafkaError, code=ErrorCode.invalid_required_acks): ...


class IllegalGenerationError(KafkaError, code=ErrorCode.illegal_generation): ...


class InconsistentGroupProtocolError(KafkaError, code=ErrorCode.inconsistent_group_protocol): ...


class InvalidGroupIdError(KafkaError, code=ErrorCode.invalid_group_id): ...


class UnknownMemberIdError(KafkaError, code=ErrorCode.unknown_member_id): ...


class InvalidSessionTimeoutError(KafkaError, code=ErrorCode.invalid_session_timeout): ...


class RebalanceInProgressError(KafkaError, code=ErrorCode.rebalance_in_progress): ...


class InvalidCommitOffsetSizeError(KafkaError, code=ErrorCode.invalid_commit_offset_size): ...


class TopicAuthorizationFailedError(KafkaError, code=ErrorCode.topic_authorization_failed): ...


class GroupAuthorizationFailedError(KafkaError, code=ErrorCode.group_authorization_failed): ...


class ClusterAuthorizationFailedError(KafkaError, code=ErrorCode.cluster_authorization_failed): ...


class InvalidTimestampError(KafkaError, code=ErrorCode.invalid_timestamp): ...


class UnsupportedSaslMechanismError(KafkaError, code=ErrorCode.unsupported_sasl_mechanism): ...


class IllegalSaslStateError(KafkaError, code=ErrorCode.illegal_sasl_state): ...


class UnsupportedVersionError(KafkaError, code=ErrorCode.unsupported_version): ...


class TopicAlreadyExistsError(KafkaError, code=ErrorCode.topic_already_exists): ...


class InvalidPartitionsError(KafkaError, code=ErrorCode.invalid_partitions): ...


class InvalidReplicationFactorError(KafkaError, code=ErrorCode.invalid_replication_factor): ...


class InvalidReplicaAssignmentError(KafkaError, code=ErrorCode.invalid_replica_assignment): ...


class InvalidConfigError(KafkaError, code=ErrorCode.invalid_config): ...


class NotControllerError(KafkaError, code=ErrorCode.not_controller): ...


class InvalidRequestError(KafkaError, code=ErrorCode.invalid_request): ...


class UnsupportedForMessageFormatError(KafkaError, code=ErrorCode.unsupported_for_message_format): ...


class PolicyViolationError(KafkaError, code=ErrorCode.policy_violation): ...


class OutOfOrderSequenceNumberError(KafkaError, code=ErrorCode.out_of_order_sequence_number): ...


class DuplicateSequenceNumberError(KafkaError, code=ErrorCode.duplicate_sequence_number): ...


class InvalidProducerEpochError(KafkaError, code=ErrorCode.invalid_producer_epoch): ...


class InvalidTxnStateError(KafkaError, code=ErrorCode.invalid_txn_state): ...


class InvalidProducerIdMappingError(KafkaError, code=ErrorCode.invalid_producer_id_mapping): ...


class InvalidTransactionTimeoutError(KafkaError, code=ErrorCode.invalid_transaction_timeout): ...


class ConcurrentTransactionsError(KafkaError, code=ErrorCode.concurrent_transactions): ...


class TransactionCoordinatorFencedError(KafkaError, code=ErrorCode.transaction_coordinator_fenced): ...


class TransactionalIdAuthorizationFailedError(
    KafkaError, code=ErrorCode.transactional_id_authorization_failed
): ...


class SecurityDisabledError(KafkaError, code=ErrorCode.security_disabled): ...


class OperationNotAttemptedError(KafkaError, code=ErrorCode.operation_not_attempted): ...


class KafkaStorageError(KafkaError, code=ErrorCode.kafka_storage_error): ...


class LogDirNotFoundError(KafkaError, code=ErrorCode.log_dir_not_found): ...


class SaslAuthenticationFailedError(KafkaError, code=ErrorCode.sasl_authentication_failed): ...


class UnknownProducerIdError(KafkaError, code=ErrorCode.unknown_producer_id): ...


class ReassignmentInProgressError(KafkaError, code=ErrorCode.reassignment_in_progress): ...


class DelegationTokenAuthDisabledError(KafkaError, code=ErrorCode.delegation_token_auth_disabled): ...


class DelegationTokenNotFoundError(KafkaError, code=ErrorCode.delegation_token_not_found): ...


class DelegationTokenOwnerMismatchError(KafkaError, code=ErrorCode.delegation_token_owner_mismatch): ...


class DelegationTokenRequestNotAllowedError(
    KafkaError, code=ErrorCode.delegation_token_request_not_allowed
): ...


class DelegationTokenAuthorizationFailedError(
    KafkaError, code=ErrorCode.delegation_token_authorization_failed
): ...


class DelegationTokenExpiredError(KafkaError, code=ErrorCode.delegation_token_expired): ...


class InvalidPrincipalTypeError(KafkaError, code=ErrorCode.invalid_principal_type): ...


class NonEmptyGroupError(KafkaError, code=ErrorCode.non_empty_group): ...


class GroupIdNotFoundError(KafkaError, code=ErrorCode.group_id_not_found): ...


class FetchSessionIdNotFoundError(KafkaError, code=ErrorCode.fetch_session_id_not_found): ...


class InvalidFetchSessionEpochError(KafkaError, code=ErrorCode.invalid_fetch_session_epoch): ...


class ListenerNotFoundError(KafkaError, code=ErrorCode.listener_not_found): ...


class TopicDeletionDisabledError(KafkaError, code=ErrorCode.topic_deletion_disabled): ...


class FencedLeaderEpochError(KafkaError, code=ErrorCode.fenced_leader_epoch): ...


class UnknownLeaderEpochError(KafkaError, code=ErrorCode.unknown_leader_epoch): ...


class UnsupportedCompressionTypeError(KafkaError, code=ErrorCode.unsupported_compression_type): ...


class StaleBrokerEpochError(KafkaError, code=ErrorCode.stale_broker_epoch): ...


class OffsetNotAvailableError(KafkaError, code=ErrorCode.offset_not_available): ...


class MemberIdRequiredError(KafkaError, code=ErrorCode.member_id_required): ...


class PreferredLeaderNotAvailableError(KafkaError, code=ErrorCode.preferred_leader_not_available): ...


class GroupMaxSizeReachedError(KafkaError, code=ErrorCode.group_max_size_reached): ...


class FencedInstanceIdError(KafkaError, code=ErrorCode.fenced_instance_id): ...


class EligibleLeadersNotAvailableError(KafkaError, code=ErrorCode.eligible_leaders_not_available): ...


class ElectionNotNeededError(KafkaError, code=ErrorCode.election_not_needed): ...


class NoReassignmentInProgressError(KafkaError, code=ErrorCode.no_reassignment_in_progress): ...


class GroupSubscribedToTopicError(KafkaError, code=ErrorCode.group_subscribed_to_topic): ...


class InvalidRecordError(KafkaError, code=ErrorCode.invalid_record): ...


class UnstableOffsetCommitError(KafkaError, code=ErrorCode.unstable_offset_commit): ...


class ThrottlingQuotaExceededError(KafkaError, code=ErrorCode.throttling_quota_exceeded): ...


class ProducerFencedError(KafkaError, code=ErrorCode.producer_fenced): ...


class ResourceNotFoundError(KafkaError, code=ErrorCode.resource_not_found): ...


class DuplicateResourceError(KafkaError, code=ErrorCode.duplicate_resource): ...


class UnacceptableCredentialError(KafkaError, code=ErrorCode.unacceptable_credential): ...


class InconsistentVoterSetError(KafkaError, code=ErrorCode.inconsistent_voter_set): ...


class InvalidUpdateVersionError(KafkaError, code=ErrorCode.invalid_update_version): ...


class FeatureUpdateFailedError(KafkaError, code=ErrorCode.feature_update_failed): ...


class PrincipalDeserializationFailureError(KafkaError, code=ErrorCode.principal_deserialization_failure): ...


class SnapshotNotFoundError(KafkaError, code=ErrorCode.snapshot_not_found): ...


class PositionOutOfRangeError(KafkaError, code=ErrorCode.position_out_of_range): ...


class UnknownTopicIdError(KafkaError, code=ErrorCode.unknown_topic_id): ...


class DuplicateBrokerRegistrationError(KafkaError, code=ErrorCode.duplicate_broker_registration): ...


class BrokerIdNotRegisteredError(KafkaError, code=ErrorCode.broker_id_not_registered): ...


class InconsistentTopicIdError(KafkaError, code=ErrorCode.inconsistent_topic_id): ...


class InconsistentClusterIdError(KafkaError, code=ErrorCode.inconsistent_cluster_id): ...


class TransactionalIdNotFoundError(KafkaError, code=ErrorCode.transactional_id_not_found): ...


class FetchSessionTopicIdError(KafkaError, code=ErrorCode.fetch_session_topic_id_error): ...


class IneligibleReplicaError(KafkaError, code=ErrorCode.ineligible_replica): ...


class NewLeaderElectedError(KafkaError, code=ErrorCode.new_leader_elected): ...


class OffsetMovedToTieredStorageError(KafkaError, code=ErrorCode.offset_moved_to_tiered_storage): ...


class FencedMemberEpochError(KafkaError, code=ErrorCode.fenced_member_epoch): ...


class UnreleasedInstanceIdError(KafkaError, code=ErrorCode.unreleased_instance_id): ...


class UnsupportedAssignorError(KafkaError, code=ErrorCode.unsupported_assignor): ...


class StaleMemberEpochError(KafkaError, code=ErrorCode.stale_member_epoch): ...


class MismatchedEndpointTypeError(KafkaError, code=ErrorCode.mismatched_endpoint_type): ...


class UnsupportedEndpointTypeError(KafkaError, code=ErrorCode.unsupported_endpoint_type): ...


class UnknownControllerIdError(KafkaError, code=ErrorCode.unknown_controller_id): ...


class UnknownSubscriptionIdError(KafkaError, code=ErrorCode.unknown_subscription_id): ...


class TelemetryTooLargeError(KafkaError, code=ErrorCode.telemetry_too_large): ...


class InvalidRegistrationError(KafkaError, code=ErrorCode.invalid_registration): ...


class TransactionAbortableError(KafkaError, code=ErrorCode.transaction_abortable): ...


class InvalidRecordStateError(KafkaError, code=ErrorCode.invalid_record_state): ...


class ShareSessionNotFoundError(KafkaError, code=ErrorCode.share_session_not_found): ...


class InvalidShareSessionEpochError(KafkaError, code=ErrorCode.invalid_share_session_epoch): ...


class FencedStateEpochError(KafkaError, code=ErrorCode.fenced_state_epoch): ...


class InvalidVoterKeyError(KafkaError, code=ErrorCode.invalid_voter_key): ...


class DuplicateVoterError(KafkaError, code=ErrorCode.duplicate_voter): ...


class VoterNotFoundError(KafkaError, code=ErrorCode.voter_not_found): ...


class InvalidRegularExpressionError(KafkaError, code=ErrorCode.invalid_regular_expression): ...


class RebootstrapRequiredError(KafkaError, code=ErrorCode.rebootstrap_required): ...


class StreamsInvalidTopologyError(KafkaError, code=ErrorCode.streams_invalid_topology): ...


class StreamsInvalidTopologyEpochError(KafkaError, code=ErrorCode.streams_invalid_topology_epoch): ...


class StreamsTopologyFencedError(KafkaError, code=ErrorCode.streams_topology_fenced): ...


class ShareSessionLimitReachedError(KafkaError, code=ErrorCode.share_session_limit_reached): ...


CorruptRecordError = CorruptMessageError  # Java's CorruptRecordException (CORRUPT_MESSAGE, 2)

__all__ += [cls.__name__ for cls in KafkaError._by_code.values()]

#: Codes after which a client's (or follower's) cached leader is probably wrong, so it refreshes
#: metadata before retrying. These are the codes whose Java exception extends
#: ``InvalidMetadataException`` (``NotLeaderOrFollowerException``,
#: ``UnknownTopicOrPartitionException``, ``LeaderNotAvailableException``,
#: ``FencedLeaderEpochException``, ``KafkaStorageException``, ``ReplicaNotAvailableException``,
#: ``UnknownTopicIdException``, ``InconsistentTopicIdException``, ``NetworkException``,
#: ``ListenerNotFoundException``; the producer's ``Sender`` requests an update on them), plus the two
#: retriable codes after which Kafka's consumer ``FetchCollector`` also refreshes or our metadata
#: may simply lag the broker's: OFFSET_NOT_AVAILABLE and UNKNOWN_LEADER_EPOCH (a refresh is harmless).
METADATA_REFRESH_ERRORS: frozenset[int] = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.leader_not_available,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.kafka_storage_error,
        ErrorCode.replica_not_available,
        ErrorCode.unknown_topic_id,
        ErrorCode.inconsistent_topic_id,
        ErrorCode.network_exception,
        ErrorCode.listener_not_found,
        ErrorCode.offset_not_available,
        ErrorCode.unknown_leader_epoch,
    }
)


def needs_metadata_refresh(code: int) -> bool:
    """Whether wire error ``code`` means "refresh metadata, then retry" (Kafka's
    ``InvalidMetadataException`` family; see :data:`METADATA_REFRESH_ERRORS`)."""
    return code in METADATA_REFRESH_ERRORS


def error_for_code(code: int, message: str | None = None) -> KafkaError:
    """Return an exception instance for a wire error ``code`` (a generic ``KafkaError`` when the
    code is unknown to this kio build). ``code`` must not be 0."""
    cls = KafkaError._by_code.get(int(code))
    if cls is None:
        err = KafkaError(message or f"unknown error code {code}")
        err.error_code = int(code)
        return err
    return cls(message)


def raise_for_error_code(code: int, context: str = "") -> None:
    """Raise the exception for ``code`` with ``context`` as its message; no-op for 0 (NONE)."""
    if code:
        raise error_for_code(code, context or None)
