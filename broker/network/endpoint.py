"""A listener's address (Kafka's ``org.apache.kafka.common.Endpoint``): parsed from
``listeners`` / ``advertised.listeners`` by :mod:`broker.config`, bound by the socket server."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Endpoint"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A listener ``NAME://host:port``. ``host`` "" means all interfaces; port 0 = pick a free one."""

    listener_name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def with_port(self, port: int) -> Endpoint:
        return Endpoint(self.listener_name, self.host, port, self.security_protocol)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"
