"""Glue between the group API handlers (``broker/apis/*group*``, ``offset_*``) and the
coordinator: where the coordinator lives on the BrokerContext, timedelta -> ms, and awaiting a
coordinator callback."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from spark_kafkalite.protocol.errors import ErrorCode, error_for_code

if TYPE_CHECKING:
    from broker.coordinator.group.group_coordinator import GroupCoordinator

__all__ = ["coordinator_of", "to_ms", "await_callback", "INT32_MIN"]

T = TypeVar("T")
INT32_MIN = -(2**31)


class _GroupCoordinatorHolder(Protocol):
    @property
    def group_coordinator(self) -> GroupCoordinator | None: ...


def coordinator_of(ctx: _GroupCoordinatorHolder) -> GroupCoordinator:
    """``ctx.group_coordinator`` (set by ``KafkaServer.startup``).

    Raises:
        CoordinatorNotAvailableError: the broker has no group coordinator (yet).
    """
    coordinator = ctx.group_coordinator
    if coordinator is None:
        raise error_for_code(int(ErrorCode.coordinator_not_available), "the group coordinator is not running")
    return coordinator


def to_ms(value: datetime.timedelta | int) -> int:
    """kio's i32Timedelta / i64Timedelta -> int ms."""
    if isinstance(value, datetime.timedelta):
        return int(round(value / datetime.timedelta(milliseconds=1)))
    return int(value)


async def await_callback(start: Callable[[Callable[[T], None]], None]) -> T:
    """Run ``start(callback)`` and wait until the coordinator calls ``callback(result)``."""
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

    def callback(result: T) -> None:
        if not future.done():
            future.set_result(result)

    start(callback)
    return await future
