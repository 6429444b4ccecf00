"""The hostile phases the broker fuzzer runs before its fuzz phase (issue #25), each under a
:class:`~bench.loop_probe.LatencyProbe` so the report has the worst health-probe wait per phase:

- ``bomb``: each connection sends zstd and gzip compression bombs (one record of zeros a little
  over ``kafkalite.message.max.uncompressed.bytes``: a few KB on the wire), answered
  MESSAGE_TOO_LARGE;
- ``max-frame``: each connection sends a produce frame of ``socket.request.max.bytes`` (answered
  MESSAGE_TOO_LARGE), and one more sends a Metadata frame of that size whose body is junk
  (the broker closes it);
- ``slow-loris``: many connections each declare a 1 MiB frame and trickle it a byte at a time
  (the broker closes them after ``kafkalite.socket.request.receive.timeout.ms`` or when they
  give up).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.loop_probe import LatencyProbe, bomb_produce_frame, max_size_produce_frame, recv_frame
from spark_kafkalite.protocol.framing import decode_response

__all__ = ["HostileSettings", "run_hostile_phases"]

_MESSAGE_TOO_LARGE = 10


@dataclass(frozen=True)
class HostileSettings:
    """Sizes of the hostile phases (defaults: the broker's default limits)."""

    connections: int = 4
    bombs_per_connection: int = 4  # half zstd, half gzip
    bomb_inflated_bytes: int = (64 << 20) + 4096
    max_frame_bytes: int = 104857600  # socket.request.max.bytes
    loris_connections: int = 50
    loris_s: float = 3.0


def _in_threads(count: int, target: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)


def run_hostile_phases(
    address: tuple[str, int], topic: str, probe: LatencyProbe, settings: HostileSettings
) -> int:
    """Run the phases against ``address`` (``topic``: an existing one-partition topic); returns
    how many hostile requests got an answer other than the expected one."""
    unexpected = 0
    lock = threading.Lock()

    def produce(frame: bytes) -> None:
        nonlocal unexpected
        code = -1
        try:
            with socket.create_connection(address, timeout=60) as sock:
                sock.sendall(frame)
                _cid, response = decode_response(0, 9, recv_frame(sock))
                code = int(response.responses[0].partition_responses[0].error_code)
        except (OSError, ConnectionError):
            pass
        if code != _MESSAGE_TOO_LARGE:
            with lock:
                unexpected += 1

    probe.phase = "bomb"
    bombs = [bomb_produce_frame(topic, settings.bomb_inflated_bytes, codec) for codec in ("zstd", "gzip")]

    def send_bombs(i: int) -> None:
        for k in range(settings.bombs_per_connection):
            produce(bombs[(i + k) % 2])

    _in_threads(settings.connections, send_bombs)

    probe.phase = "max-frame"
    big = max_size_produce_frame(topic, settings.max_frame_bytes)
    junk_metadata = struct.pack(">ihhih", settings.max_frame_bytes, 3, 12, 99, -1) + b"\xff" * (
        settings.max_frame_bytes - 10
    )

    def max_frame(i: int) -> None:
        if i < settings.connections:
            produce(big)
            return
        with contextlib.suppress(OSError), socket.create_connection(address, timeout=60) as sock:
            sock.sendall(junk_metadata)
            sock.recv(1)  # an answer or the close

    _in_threads(settings.connections + 1, max_frame)

    probe.phase = "slow-loris"
    socks = []
    for _ in range(settings.loris_connections):
        sock = socket.create_connection(address, timeout=10)
        sock.sendall(struct.pack(">i", 1 << 20))
        socks.append(sock)
    deadline = time.monotonic() + settings.loris_s
    while time.monotonic() < deadline:
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.send(b"\0")
        time.sleep(0.1)
    for sock in socks:
        sock.close()
    return unexpected
