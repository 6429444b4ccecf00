"""Exceptions -> Kafka wire error codes: the one place the broker makes that mapping (used by the
API handlers, the replica manager and the group coordinator alike, so it sits below all of them).

``KafkaError`` subclasses carry their code; ``OSError`` from the log layer becomes
``KAFKA_STORAGE_ERROR``; anything else is ``UNKNOWN_SERVER_ERROR`` and is logged with the request
that caused it (Kafka's ``Errors.forException`` + ``RequestHandlerHelper``).
"""

from __future__ import annotations

import logging

from spark_kafkalite.protocol.errors import ErrorCode, KafkaError

__all__ = ["error_code_for", "error_message_for"]

logger = logging.getLogger("broker.apis")


def error_code_for(exc: BaseException, context: object = None) -> ErrorCode:
    """The wire error code for ``exc``. Unexpected exceptions are logged (with ``context``,
    e.g. the request or the topic-partition) and mapped to UNKNOWN_SERVER_ERROR."""
    if isinstance(exc, KafkaError):
        try:
            return ErrorCode(exc.error_code)
        except ValueError:
            logger.error("error code %s unknown to kio for %r", exc.error_code, exc)
            return ErrorCode.unknown_server_error
    if isinstance(exc, OSError):
        logger.error("storage error while handling %s: %s", context, exc, exc_info=exc)
        return ErrorCode.kafka_storage_error
    logger.error("unexpected error while handling %s", context, exc_info=exc)
    return ErrorCode.unknown_server_error


def error_message_for(exc: BaseException) -> str | None:
    """A short message for responses that carry one (never a traceback)."""
    if isinstance(exc, KafkaError):
        return exc.message or exc.name
    return type(exc).__name__
