"""``RequestFuture``: the single-threaded future the ``NetworkClient`` completes (Java's
``RequestFuture`` in the consumer internals). Callbacks run on the thread that drives ``poll``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["RequestFuture"]

_PENDING = 0
_SUCCEEDED = 1
_FAILED = 2


class RequestFuture:
    """Result of a request: a decoded response entity, or an exception.

    Not thread-safe: complete and observe it on the thread that owns the ``NetworkClient``.
    """

    __slots__ = ("_state", "value", "exception", "_callbacks")

    def __init__(self) -> None:
        self._state = _PENDING
        self.value: Any = None
        self.exception: BaseException | None = None
        self._callbacks: list[Callable[[RequestFuture], None]] = []

    def is_done(self) -> bool:
        """True once the future succeeded or failed."""
        return self._state != _PENDING

    def succeeded(self) -> bool:
        """True once completed with a value (``value``)."""
        return self._state == _SUCCEEDED

    def failed(self) -> bool:
        """True once completed with an error (``exception``)."""
        return self._state == _FAILED

    def success(self, value: Any) -> None:
        """Complete with ``value`` and run the callbacks (no-op if already done)."""
        if self._state != _PENDING:
            return
        self.value = value
        self._state = _SUCCEEDED
        self._fire()

    def failure(self, exception: BaseException) -> None:
        """Complete with ``exception`` and run the callbacks (no-op if already done)."""
        if self._state != _PENDING:
            return
        self.exception = exception
        self._state = _FAILED
        self._fire()

    def add_callback(self, fn: Callable[[RequestFuture], None]) -> None:
        """Call ``fn(self)`` when done (immediately when already done)."""
        if self._state != _PENDING:
            fn(self)
        else:
            self._callbacks.append(fn)

    def error(self) -> BaseException:
        """The exception of a failed future. Raises ``RuntimeError`` unless the future failed."""
        exc = self.exception
        if self._state != _FAILED or exc is None:
            raise RuntimeError("request future has not failed")
        return exc

    def result(self) -> Any:
        """The value, or raise the exception. Raises ``RuntimeError`` while pending."""
        if self._state == _SUCCEEDED:
            return self.value
        if self._state == _FAILED:
            raise self.error()
        raise RuntimeError("request future is still pending")

    def _fire(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self)
