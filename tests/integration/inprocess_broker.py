"""A real broker (``broker.server.KafkaServer``) running in this process on its own event-loop
thread, so that tests can look at broker state (e.g. the fetch session cache) directly.
Clients still talk to it over real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from broker.config import KafkaConfig
from broker.controller.scram_control import ScramUpsertion
from broker.server import KafkaServer

T = TypeVar("T")


class InProcessBroker:
    """Start with ``start()``, stop with ``stop()``; ``call(fn)`` runs ``fn()`` on the broker's
    loop (safe access to broker state) and returns its result."""

    def __init__(
        self, log_dir: Path, overrides: dict[str, str] | None = None, add_scram: Sequence[ScramUpsertion] = ()
    ) -> None:
        props = {
            "node.id": "1",
            "process.roles": "broker,controller",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(log_dir),
            "num.partitions": "1",
            "default.replication.factor": "1",
            **(overrides or {}),
        }
        self.config = KafkaConfig(props)
        self.server = KafkaServer(self.config, add_scram=add_scram)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="inprocess-broker", daemon=True)
        self.bootstrap_servers = ""

    def start(self) -> InProcessBroker:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.startup(), self._loop).result(30)
        host, port = next(iter(self.server.advertised.values()))
        self.bootstrap_servers = f"{host}:{port}"
        return self

    def call(self, fn: Callable[[], T], timeout_s: float = 10.0) -> T:
        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout_s)

    @property
    def ctx(self) -> Any:
        return self.server.ctx

    def stop(self) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self.server.shutdown(), self._loop).result(30)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()
