"""``FutureRecordMetadata``: the ``concurrent.futures.Future`` returned by ``KafkaProducer.send``.

A plain ``Future`` allocates a ``threading.Condition`` (and its lock) per record, which costs more
than the rest of ``send``. Like Java's ``FutureRecordMetadata`` (which waits on the batch's
``ProduceRequestResult``), these futures share their batch's condition, and the Sender completes
a whole batch under one lock acquisition: every state is set first, then waiters are notified
once, so a waiter never wakes to a sibling's completion while its own is still pending. As in
Java, ``cancel()`` is not supported (returns False), which keeps that invariant.

This relies on ``concurrent.futures.Future``'s private attributes; they are checked at import
and, if they ever differ, plain futures with ``set_result`` / ``set_exception`` are used instead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import _base as futures_base
from typing import Any

from spark_kafkalite.client.types import RecordMetadata

__all__ = ["FutureRecordMetadata", "new_future", "complete_futures", "fail_futures"]

log = logging.getLogger(__name__)

_PENDING = getattr(futures_base, "PENDING", None)
_FINISHED = getattr(futures_base, "FINISHED", None)
_EXPECTED_ATTRS = {"_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks"}
_FAST = (
    _PENDING is not None
    and _FINISHED is not None
    and set(vars(Future())) == _EXPECTED_ATTRS
    and hasattr(Future, "_invoke_callbacks")
)


class FutureRecordMetadata(Future):  # type: ignore[type-arg]
    """A ``Future[RecordMetadata]`` sharing its batch's condition (see module docstring)."""

    def __init__(self, condition: threading.Condition) -> None:  # no super().__init__: no own Condition
        self._condition = condition
        self._state = _PENDING  # type: ignore[assignment]
        self._result: Any = None
        self._exception: BaseException | None = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Any] = []

    def cancel(self) -> bool:
        """Records cannot be cancelled once handed to the producer (as in Java)."""
        return False


def new_future(condition: threading.Condition) -> Future[RecordMetadata]:
    """A future for one record of the batch owning ``condition``."""
    if _FAST:
        return FutureRecordMetadata(condition)
    return Future()


def complete_futures(
    condition: threading.Condition,
    futures: Sequence[Future[RecordMetadata]],
    results: Sequence[RecordMetadata],
) -> None:
    """Resolve ``futures[i]`` with ``results[i]``, notifying waiters once."""
    if not _FAST:
        for future, result in zip(futures, results, strict=True):
            try:
                future.set_result(result)
            except InvalidStateError:
                pass
        return
    finished = []
    with condition:
        for future, result in zip(futures, results, strict=True):
            if future._state == _PENDING:  # type: ignore[attr-defined]
                future._result = result  # type: ignore[attr-defined]
                future._state = _FINISHED  # type: ignore[attr-defined,assignment]
                for waiter in future._waiters:  # type: ignore[attr-defined]
                    waiter.add_result(future)
                finished.append(future)
        condition.notify_all()
    for future in finished:
        if future._done_callbacks:  # type: ignore[attr-defined]
            future._invoke_callbacks()  # type: ignore[attr-defined]


def fail_futures(
    condition: threading.Condition, futures: Sequence[Future[RecordMetadata]], exc: BaseException
) -> None:
    """Fail every future with ``exc``, notifying waiters once."""
    if not _FAST:
        for future in futures:
            try:
                future.set_exception(exc)
            except InvalidStateError:
                pass
        return
    finished = []
    with condition:
        for future in futures:
            if future._state == _PENDING:  # type: ignore[attr-defined]
                future._exception = exc  # type: ignore[attr-defined]
                future._state = _FINISHED  # type: ignore[attr-defined,assignment]
                for waiter in future._waiters:  # type: ignore[attr-defined]
                    waiter.add_exception(future)
                finished.append(future)
        condition.notify_all()
    for future in finished:
        if future._done_callbacks:  # type: ignore[attr-defined]
            future._invoke_callbacks()  # type: ignore[attr-defined]
