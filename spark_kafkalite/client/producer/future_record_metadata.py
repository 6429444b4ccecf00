"""``FutureRecordMetadata``: the ``concurrent.futures.Future`` returned by ``KafkaProducer.send``.

As in Java (``FutureRecordMetadata`` over the batch's ``ProduceRequestResult``), a record's future
holds only its batch, its index in the batch and its CreateTime: the batch carries the outcome
(base offset, LogAppendTime or error) and one condition shared by all its records. Completing a
batch is one assignment under that condition, whatever the number of records; the
``RecordMetadata`` is built when ``result()`` asks for it. Only futures that got a done-callback or
a ``concurrent.futures.wait`` / ``as_completed`` waiter are registered with their batch (in that
order, so callbacks run in send order per partition) and visited on completion.

``wait`` and ``as_completed`` read a future's private ``_condition``, ``_state`` and ``_waiters``;
they are properties here, backed by the batch. If ``concurrent.futures.Future``'s private
attributes ever differ from what this module expects (checked at import), plain futures completed
one by one are used instead. As in Java, ``cancel()`` is not supported (returns False).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import _base as futures_base
from typing import TYPE_CHECKING, Any

from spark_kafkalite.client.producer.native_extensions import BATCH_STATE
from spark_kafkalite.client.types import RecordMetadata
from spark_kafkalite.protocol.native import load_twin

if TYPE_CHECKING:
    from spark_kafkalite.client.producer.batch_state import FutureState
    from spark_kafkalite.client.producer.producer_batch import ProducerBatch
else:
    FutureState = load_twin(BATCH_STATE).FutureState

__all__ = ["FutureRecordMetadata", "FAST_FUTURES", "complete_watchers"]

log = logging.getLogger(__name__)

_PENDING = getattr(futures_base, "PENDING", None)
_FINISHED = getattr(futures_base, "FINISHED", None)
_EXPECTED_ATTRS = {"_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks"}
FAST_FUTURES = (
    _PENDING is not None
    and _FINISHED is not None
    and set(vars(Future())) == _EXPECTED_ATTRS
    and hasattr(futures_base, "_AcquireFutures")
)

_new_metadata = tuple.__new__


class FutureRecordMetadata(FutureState, Future):  # type: ignore[type-arg]
    """A ``Future[RecordMetadata]`` of record ``index`` of ``batch`` (see module docstring);
    those three fields live in ``FutureState`` (C members when compiled)."""

    __slots__ = ()

    # set on the instance only for the few futures that get waiters or callbacks
    _w: list[Any] | None = None
    _callbacks: list[Callable[[Future[RecordMetadata]], object]] | None = None

    def __init__(self, batch: ProducerBatch, index: int, timestamp_ms: int) -> None:  # no Future.__init__
        self._batch = batch
        self._index = index
        self._timestamp_ms = timestamp_ms
        self._record_callback = None

    # -- what concurrent.futures.wait / as_completed read ------------------------------------

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        return self._batch.condition

    @property
    def _state(self) -> str:  # type: ignore[override]
        return _FINISHED if self._batch.done else _PENDING  # type: ignore[return-value]

    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]
        """Called under the batch condition by ``wait``/``as_completed``."""
        if self._w is None:
            self._w = []
            if self._callbacks is None and self._record_callback is None:
                self._batch.watchers.append(self)
        return self._w

    # -- the Future API ----------------------------------------------------------------------

    def cancel(self) -> bool:
        """Records cannot be cancelled once handed to the producer (as in Java)."""
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return False

    def done(self) -> bool:
        return self._batch.done

    def _metadata(self) -> RecordMetadata:
        batch = self._batch
        error = batch.error_of(self._index)
        if error is not None:
            raise error
        base = batch.base_offset
        ts = batch.log_append_time_ms
        topic, partition = batch.tp
        return _new_metadata(  # type: ignore[no-any-return]
            RecordMetadata,
            (
                topic,
                partition,
                base + self._index if base >= 0 else -1,
                ts if ts >= 0 else self._timestamp_ms,
            ),
        )

    def _wait(self, timeout: float | None) -> None:
        batch = self._batch
        if not batch.done:
            with batch.condition:
                if not batch.condition.wait_for(lambda: batch.done, timeout):
                    raise TimeoutError()

    def result(self, timeout: float | None = None) -> RecordMetadata:
        self._wait(timeout)
        return self._metadata()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._batch.error_of(self._index)  # type: ignore[no-any-return]

    def add_done_callback(self, fn: Callable[[Future[RecordMetadata]], object]) -> None:
        batch = self._batch
        if not batch.done:
            with batch.condition:
                if not batch.done:
                    if self._callbacks is None:
                        self._callbacks = []
                        if self._w is None and self._record_callback is None:
                            batch.watchers.append(self)
                    self._callbacks.append(fn)
                    return
        _call(fn, self)

    def set_running_or_notify_cancel(self) -> bool:
        return True

    def set_result(self, result: Any) -> None:
        raise InvalidStateError("the producer completes record futures")

    def set_exception(self, exception: BaseException | None) -> None:
        raise InvalidStateError("the producer completes record futures")

    def __repr__(self) -> str:
        return f"<FutureRecordMetadata {self._batch.tp} #{self._index} {'done' if self._batch.done else 'pending'}>"


def _call(fn: Callable[[Any], object], future: Any) -> None:
    try:
        fn(future)
    except Exception:
        log.exception("exception calling callback for %r", future)


def complete_watchers(watchers: list[Any], error: BaseException | None) -> None:
    """Wake the ``wait``/``as_completed`` waiters of ``watchers``. Called under the batch
    condition, right after the batch was marked done."""
    for future in watchers:
        for waiter in future._w or ():
            if error is None:
                waiter.add_result(future)
            else:
                waiter.add_exception(future)


def run_callbacks(watchers: list[Any]) -> None:
    """Run the callbacks of ``watchers`` in registration order (outside the condition): each
    future's ``send`` callback (``_record_callback``, set by the compiled send path while the
    batch was open: no closure, list or dict per record), then its done-callbacks."""
    for future in watchers:
        record_callback = future._record_callback
        if record_callback is not None:
            error = future._batch.error_of(future._index)
            try:
                record_callback(None if error is not None else future._metadata(), error)
            except Exception:  # a user callback must not break the I/O thread
                log.exception("producer callback failed")
        for fn in future._callbacks or ():
            _call(fn, future)


def complete_plain(
    futures: list[Future[RecordMetadata]],
    results: list[RecordMetadata] | None,
    error: BaseException | None,
    error_of: Callable[[int], BaseException | None],
) -> None:
    """The fallback when ``FAST_FUTURES`` is False: resolve plain futures one by one (record
    ``i`` failing with ``error_of(i)``)."""
    for i, future in enumerate(futures):
        try:
            if error is None:
                future.set_result(results[i])  # type: ignore[index]
            else:
                future.set_exception(error_of(i))
        except InvalidStateError:
            pass
