"""Pure logic of the socket server's limits: Kafka's non-strict MemoryPool, ConnectionQuotas and
the config checks of their keys."""

from __future__ import annotations

import asyncio

import pytest

from broker.config import ConfigError, KafkaConfig
from broker.network.connection_quotas import ConnectionQuotas, TooManyConnectionsError
from broker.network.memory_pool import MemoryPool


def test_memory_pool_waits_in_order_and_is_non_strict() -> None:
    async def scenario() -> list[str]:
        pool = MemoryPool(100)
        order: list[str] = []
        await pool.allocate(150)  # non-strict: granted while any memory is free
        assert pool.available_bytes == -50

        async def take(name: str, size: int) -> None:
            await pool.allocate(size)
            order.append(name)

        first = asyncio.create_task(take("first", 80))
        second = asyncio.create_task(take("second", 10))
        await asyncio.sleep(0.01)
        assert order == []  # exhausted: both wait
        pool.release(150)  # 100 free: first (80) then second (10) are granted
        await asyncio.gather(first, second)
        assert pool.available_bytes == 10
        return order

    assert asyncio.run(scenario()) == ["first", "second"]


def test_memory_pool_cancelled_waiter_gives_nothing_back_twice() -> None:
    async def scenario() -> int:
        pool = MemoryPool(10)
        await pool.allocate(10)
        waiter = asyncio.create_task(pool.allocate(5))
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        pool.release(10)
        await pool.allocate(4)
        return pool.available_bytes

    assert asyncio.run(scenario()) == 6


def test_unbounded_pool_never_waits() -> None:
    async def scenario() -> None:
        pool = MemoryPool(-1)
        await pool.allocate(1 << 40)
        pool.release(1 << 40)

    asyncio.run(scenario())


def test_connection_quotas_per_ip_and_overrides() -> None:
    quotas = ConnectionQuotas(10, 1, {"10.0.0.9": 2})
    quotas.register("10.0.0.1")
    with pytest.raises(TooManyConnectionsError, match="max.connections.per.ip=1"):
        quotas.register("10.0.0.1")
    for _ in range(2):
        quotas.register("10.0.0.9")
    assert quotas.total == 3
    quotas.release("10.0.0.1")
    assert quotas.per_ip == {"10.0.0.9": 2}
    assert quotas.total == 2


def test_connection_quotas_broker_limit_waits_and_protects_inter_broker_listener() -> None:
    async def scenario() -> None:
        quotas = ConnectionQuotas(1, 100, protected_listener="REPLICATION", listener_count=2)
        await quotas.wait_for_slot("CLIENT")
        quotas.register("10.0.0.1")
        blocked = asyncio.create_task(quotas.wait_for_slot("CLIENT"))
        await asyncio.sleep(0.01)
        assert not blocked.done()
        await quotas.wait_for_slot("REPLICATION")  # protected: never waits
        quotas.register("10.0.0.2")
        assert quotas.over_broker_limit()
        quotas.release("10.0.0.2")
        await asyncio.sleep(0.01)
        assert not blocked.done()  # still 1 of 1
        quotas.release("10.0.0.1")
        await asyncio.wait_for(blocked, 1.0)

    asyncio.run(scenario())


BASE = {"node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": "/tmp/x"}


def test_limit_keys_are_validated() -> None:
    with pytest.raises(ConfigError, match="max.connections.per.ip"):
        KafkaConfig({**BASE, "max.connections.per.ip": "0"})
    config = KafkaConfig(
        {**BASE, "max.connections.per.ip": "0", "max.connections.per.ip.overrides": "127.0.0.1:5"}
    )
    assert config.max_connections_per_ip_overrides == {"127.0.0.1": 5}
    with pytest.raises(ConfigError, match="overrides"):
        KafkaConfig({**BASE, "max.connections.per.ip.overrides": "127.0.0.1"})
    with pytest.raises(ConfigError, match="queued.max.request.bytes"):
        KafkaConfig({**BASE, "queued.max.request.bytes": "-2"})
