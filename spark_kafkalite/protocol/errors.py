"""Kafka error codes and the exception tree shared by broker and client.

``ErrorCode`` is kio's IntEnum generated from Kafka's ``Errors.java`` (members are lower-case,
e.g. ``ErrorCode.not_leader_or_follower``; each has ``.retriable``). ``KafkaError`` subclasses are
named like the Java exceptions (``NotLeaderOrFollowerException`` -> ``NotLeaderOrFollowerError``).
``error_for_code`` maps a wire error code to an exception instance; the broker maps exceptions back
with ``KafkaError.error_code``.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = [
    "ErrorCode",
    "KafkaError",
    "KafkaConnectionError",
    "KafkaTimeoutError",
    "error_for_code",
    "raise_for_error_code",
]


class KafkaError(Exception):
    """Base of every Kafka error.

    Attributes:
        error_code: the Kafka wire error code (``-1`` for client-side errors without one).
        retriable: whether Kafka classifies the error as retriable (``RetriableException``).
    """

    error_code: int = ErrorCode.unknown_server_error.value
    retriable: bool = False

    def __init__(self, message: str | None = None) -> None:
        self.message = message
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


_BY_CODE: dict[int, type[KafkaError]] = {}


def _define(class_name: str, code: ErrorCode) -> type[KafkaError]:
    cls = type(
        class_name,
        (KafkaError,),
        {
            "error_code": int(code),
            "retriable": bool(code.retriable),
            "__doc__": f"Kafka error {code.name.upper()} ({int(code)}).",
            "__module__": __name__,
        },
    )
    _BY_CODE[int(code)] = cls
    globals()[class_name] = cls
    __all__.append(class_name)
    return cls


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


# Every kio error code gets a class: ``unknown_topic_or_partition`` -> UnknownTopicOrPartitionError.
for _code in ErrorCode:
    if _code is ErrorCode.none:
        continue
    _name = _camel(_code.name)
    if not _name.endswith("Exception"):
        _name += "Error"
    else:  # e.g. invalid_topic_exception -> InvalidTopicError
        _name = _name[: -len("Exception")] + "Error"
    _define(_name, _code)

# Names other modules use explicitly (declared for type checkers; created by the loop above).
UnknownServerError: type[KafkaError] = _BY_CODE[-1]
OffsetOutOfRangeError: type[KafkaError] = _BY_CODE[1]
CorruptMessageError: type[KafkaError] = _BY_CODE[2]
CorruptRecordError: type[KafkaError] = CorruptMessageError  # Java's CorruptRecordException
UnknownTopicOrPartitionError: type[KafkaError] = _BY_CODE[3]
LeaderNotAvailableError: type[KafkaError] = _BY_CODE[5]
NotLeaderOrFollowerError: type[KafkaError] = _BY_CODE[6]
RequestTimedOutError: type[KafkaError] = _BY_CODE[7]
MessageTooLargeError: type[KafkaError] = _BY_CODE[10]
InvalidTopicError: type[KafkaError] = _BY_CODE[17]
RecordListTooLargeError: type[KafkaError] = _BY_CODE[18]
NotEnoughReplicasError: type[KafkaError] = _BY_CODE[19]
NotEnoughReplicasAfterAppendError: type[KafkaError] = _BY_CODE[20]
InvalidRequiredAcksError: type[KafkaError] = _BY_CODE[21]
InvalidTimestampError: type[KafkaError] = _BY_CODE[32]
UnsupportedVersionError: type[KafkaError] = _BY_CODE[35]
TopicAlreadyExistsError: type[KafkaError] = _BY_CODE[36]
InvalidPartitionsError: type[KafkaError] = _BY_CODE[37]
InvalidReplicationFactorError: type[KafkaError] = _BY_CODE[38]
InvalidRequestError: type[KafkaError] = _BY_CODE[42]
PolicyViolationError: type[KafkaError] = _BY_CODE[44]
InvalidConfigError: type[KafkaError] = _BY_CODE[40]
KafkaStorageError: type[KafkaError] = _BY_CODE[56]
UnsupportedCompressionTypeError: type[KafkaError] = _BY_CODE[76]
InvalidRecordError: type[KafkaError] = _BY_CODE[87]
__all__ += ["CorruptRecordError"]


def error_for_code(code: int, message: str | None = None) -> KafkaError:
    """Return an exception instance for a wire error ``code`` (a generic ``KafkaError`` when the
    code is unknown to this kio build). ``code`` must not be 0."""
    cls = _BY_CODE.get(int(code))
    if cls is None:
        err = KafkaError(message or f"unknown error code {code}")
        err.error_code = int(code)
        return err
    return cls(message)


def raise_for_error_code(code: int, context: str = "") -> None:
    """Raise the exception for ``code`` with ``context`` as its message; no-op for 0 (NONE)."""
    if code:
        raise error_for_code(code, context or None)
