"""Creating a coordinator's internal topic (``__consumer_offsets``, ``__transaction_state``) on
first need, as Kafka's ``AutoTopicCreationManager.createTopics`` does for an internal topic a
FindCoordinator names: while it cannot be created (e.g. fewer live brokers than its replication
factor) the coordinator is COORDINATOR_NOT_AVAILABLE (``KafkaApis.getCoordinator``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from broker.controller.controller import CreatableTopicSpec
from spark_kafkalite.protocol.errors import ErrorCode

__all__ = ["InternalTopicCreator"]


class InternalTopicCreator:
    """Creates one internal topic once; concurrent callers wait for the one creation.

    ``ctx`` gives the metadata image (``ctx.image.topic(name)``) and the controller
    (``ctx.controller.create_topics``); ``make_spec`` builds topic ``name`` (partitions,
    replication factor, configs) when it is missing; ``log`` is the coordinator's logger."""

    def __init__(
        self, ctx: Any, name: str, make_spec: Callable[[], CreatableTopicSpec], log: logging.Logger
    ) -> None:
        self._ctx = ctx
        self.name = name
        self._make_spec = make_spec
        self._log = log
        self._lock = asyncio.Lock()

    async def ensure(self) -> tuple[int, str | None]:
        """Create the topic if missing -> (error code, message):
        (0, None) when it exists or was created (TOPIC_ALREADY_EXISTS counts as created),
        COORDINATOR_NOT_AVAILABLE with the reason otherwise."""
        name = self.name
        if self._ctx.image.topic(name) is not None:
            return 0, None
        async with self._lock:
            if self._ctx.image.topic(name) is not None:
                return 0, None
            spec = self._make_spec()
            try:
                outcomes = await self._ctx.controller.create_topics([spec])
            except Exception as exc:  # noqa: BLE001 - reported as COORDINATOR_NOT_AVAILABLE
                self._log.warning("cannot create %s: %s", name, exc)
                return int(ErrorCode.coordinator_not_available), f"cannot create {name}: {exc}"
            error = outcomes[0].error
            if error is not None and error.error_code != ErrorCode.topic_already_exists:
                self._log.warning("cannot create %s: %s", name, error)
                return int(ErrorCode.coordinator_not_available), f"cannot create {name}: {error}"
            self._log.info(
                "created %s with %d partition(s), replication factor %d",
                name,
                spec.num_partitions,
                spec.replication_factor,
            )
            return 0, None
