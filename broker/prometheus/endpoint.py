"""``MetricsEndpoint``: the broker's ``/metrics`` HTTP listener (``kafkalite.metrics.listener``).

Served by ``prometheus_client.start_http_server`` on its own daemon thread (a scrape never runs
on the event loop; the collectors read the broker's state from that thread, see
``broker.prometheus.broker_collector``), from a ``CollectorRegistry`` of this broker only (not
the process-wide default registry: several brokers may share a process in tests).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

__all__ = ["MetricsEndpoint", "parse_listener"]

logger = logging.getLogger(__name__)


def parse_listener(value: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:9404`` for IPv6; empty host = every interface) -> (host, port).

    Raises:
        ValueError: not ``host:port`` with a port in 0-65535.
    """
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"kafkalite.metrics.listener must be host:port, got {value!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port_text)


class MetricsEndpoint:
    """One broker's Prometheus endpoint.

    Args:
        collectors: the broker's collectors (registered in this endpoint's own registry, with
            the process collector: ``process_cpu_seconds_total``, ``process_resident_memory_bytes``...).
    """

    def __init__(self, collectors: list[Collector]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        for collector in collectors:
            self.registry.register(collector)
        ProcessCollector(registry=self.registry)
        self._server: Any = None
        self.bound: tuple[str, int] | None = None

    def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen on ``host:port`` (0 = a free port); returns the bound (host, port).

        Raises:
            OSError: the address cannot be bound.
        """
        self._server, _serving_thread = start_http_server(port, addr=host, registry=self.registry)
        bound_host, bound_port = self._server.server_address[:2]
        self.bound = (host if host not in ("0.0.0.0", "::") else bound_host, int(bound_port))
        logger.info("serving Prometheus metrics on http://%s:%d/metrics", host, bound_port)
        return self.bound

    def stop(self) -> None:
        """Stop serving, without waiting: the serving thread notices within its 0.5 s poll
        interval (``socketserver``'s ``serve_forever``) and then closes the listening socket, on
        a daemon thread, so that a broker's shutdown never waits for it."""
        server, self._server = self._server, None
        if server is not None:
            threading.Thread(target=_close, args=(server,), name="metrics-endpoint-stop", daemon=True).start()


def _close(server: Any) -> None:
    server.shutdown()
    server.server_close()
