"""Kafka's ``ConnectionQuotas`` (``kafka.network.ConnectionQuotas``): ``max.connections`` and
``max.connections.per.ip`` (with ``max.connections.per.ip.overrides``).

- Broker-wide ``max.connections``: when it is reached the acceptor stops accepting
  (``waitForConnectionSlot``) until a connection closes; new clients wait in the kernel's
  listen backlog (``socket.listen.backlog.size``), as in Kafka. With more than one listener the
  inter-broker listener is *protected* (KIP-402): it keeps accepting, and the least recently active
  connection of another listener is closed to make room.
- ``max.connections.per.ip``: a connection from an address that already has that many is
  accepted and closed at once (Kafka's ``TooManyConnectionsException``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Mapping

__all__ = ["ConnectionQuotas", "TooManyConnectionsError", "parse_per_ip_overrides"]

logger = logging.getLogger(__name__)


class TooManyConnectionsError(Exception):
    """Kafka's ``TooManyConnectionsException``: ``address`` already has ``limit`` connections."""

    def __init__(self, address: str, limit: int) -> None:
        self.address = address
        self.limit = limit
        super().__init__(f"too many connections from {address} (max.connections.per.ip={limit})")


def parse_per_ip_overrides(items: list[str]) -> dict[str, int]:
    """Parse ``max.connections.per.ip.overrides`` (``host:count,ip:count``); host names are
    resolved to addresses once, as Kafka does when the config is loaded.

    Raises:
        ValueError: an entry that is not ``host:count`` with a count >= 0, or an unknown host.
    """
    result: dict[str, int] = {}
    for item in items:
        if not item:
            continue
        host, sep, count_text = item.rpartition(":")
        host = host.strip().strip("[]")
        try:
            count = int(count_text)
        except ValueError:
            count = -1
        if not sep or not host or count < 0:
            raise ValueError(f"invalid entry {item!r}; expected host:count with count >= 0")
        try:
            address = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0]
        except OSError as exc:
            raise ValueError(f"cannot resolve {host!r}: {exc}") from None
        result[str(address)] = count
    return result


class ConnectionQuotas:
    """Counts open connections per listener and per client address.

    Args:
        max_connections: ``max.connections`` (broker-wide).
        max_connections_per_ip: ``max.connections.per.ip``.
        per_ip_overrides: address -> limit (``max.connections.per.ip.overrides``).
        protected_listener: the inter-broker listener name; protected only when the broker
            serves more than one listener (Kafka's ``protectedListener``).
        listener_count: how many listeners the socket server serves.
    """

    def __init__(
        self,
        max_connections: int,
        max_connections_per_ip: int,
        per_ip_overrides: Mapping[str, int] | None = None,
        *,
        protected_listener: str | None = None,
        listener_count: int = 1,
    ) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides = dict(per_ip_overrides or {})
        self.protected_listener = protected_listener if listener_count > 1 else None
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self._slot_freed = asyncio.Event()

    def reconfigure(
        self, max_connections: int, max_connections_per_ip: int, per_ip_overrides: Mapping[str, int]
    ) -> None:
        """New limits from a dynamic broker config change (Kafka's ``ConnectionQuotas.updateMaxConnections``
        / ``updateIpConnectionRateQuota``): open connections stay; an acceptor waiting for a slot
        re-checks at once (a raised ``max.connections`` frees it)."""
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides = dict(per_ip_overrides)
        self._slot_freed.set()

    def is_protected(self, listener_name: str) -> bool:
        return listener_name == self.protected_listener

    def slot_available(self, listener_name: str) -> bool:
        """Kafka's ``connectionSlotAvailable``."""
        return self.is_protected(listener_name) or self.total < self.max_connections

    async def wait_for_slot(self, listener_name: str) -> None:
        """Wait until a broker-wide slot is free (Kafka's ``waitForConnectionSlot``, called by
        the acceptor before it accepts; :meth:`register` then counts the connection). Acceptors
        of several listeners may each pass it for the last slot, so the total can exceed the
        limit by the number of listeners minus one, as in Kafka."""
        while not self.slot_available(listener_name):
            self._slot_freed.clear()
            await self._slot_freed.wait()

    def over_broker_limit(self) -> bool:
        """True when protected-listener connections pushed the total above ``max.connections``
        (Kafka's ``maxConnectionsExceeded``): an unprotected connection should be closed."""
        return self.total > self.max_connections

    def register(self, address: str) -> None:
        """Count a new connection from ``address`` (Kafka's ``ConnectionQuotas.inc``).

        Raises:
            TooManyConnectionsError: ``address`` is at its limit; nothing was counted and the
                caller closes the socket.
        """
        limit = self.per_ip_overrides.get(address, self.max_connections_per_ip)
        count = self.per_ip.get(address, 0)
        if count >= limit:
            raise TooManyConnectionsError(address, limit)
        self.per_ip[address] = count + 1
        self.total += 1

    def release(self, address: str) -> None:
        """A connection from ``address`` closed: free its slots (Kafka's ``ConnectionQuotas.dec``)."""
        count = self.per_ip.get(address, 0) - 1
        if count > 0:
            self.per_ip[address] = count
        else:
            self.per_ip.pop(address, None)
        self.total -= 1
        self._slot_freed.set()
