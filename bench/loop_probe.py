"""Health probes of a broker's event loop, and the hostile requests that used to stall it.

:class:`LatencyProbe` opens a fresh TCP connection every ``interval_s`` and times one
ApiVersions v0 round trip (connect + request + response), recording the worst figure per named
phase: the time any client, follower or controller heartbeat would have waited for the broker.
The builders make compression bombs (a zstd or gzip RecordBatch of zeros: a few KB on the wire,
inflating to ``kafkalite.message.max.uncompressed.bytes`` or more) and produce frames of the
largest size the broker reads. Used by ``bench/loop_latency.py``, the fuzz harness's phases
(``bench/fuzz/broker_fuzz.py``) and tests/integration/test_broker_loop_latency.py.
"""

from __future__ import annotations

import datetime
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

from kio.schema.produce.v9 import request as produce_v9

from spark_kafkalite.protocol.framing import encode_request
from spark_kafkalite.protocol.record_batch import COMPRESSION_GZIP, COMPRESSION_ZSTD
from spark_kafkalite.protocol.record_batch_writer import encode_batch

__all__ = ["LatencyProbe", "bomb_produce_frame", "max_size_produce_frame", "produce_frame", "recv_frame"]

_PROBE = struct.pack(">hhih", 18, 0, -7, 5) + b"probe"
_PROBE_FRAME = struct.pack(">i", len(_PROBE)) + _PROBE
_MS = datetime.timedelta(milliseconds=1)


def recv_frame(sock: socket.socket) -> bytes:
    """One size-prefixed frame from ``sock`` (raises ConnectionError on EOF)."""

    def exactly(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise ConnectionError("closed by the broker")
            buf += chunk
        return bytes(buf)

    return exactly(struct.unpack(">i", exactly(4))[0])


def produce_frame(topic: str, records: bytes, correlation_id: int = 1, acks: int = 1) -> bytes:
    """A size-prefixed ProduceRequest v9 with one batch for partition 0 of ``topic``."""
    request = produce_v9.ProduceRequest(
        acks=acks,
        timeout=30000 * _MS,
        topic_data=(
            produce_v9.TopicProduceData(
                name=topic, partition_data=(produce_v9.PartitionProduceData(index=0, records=records),)
            ),
        ),
    )
    return encode_request(request, correlation_id, "loop-probe")


def bomb_produce_frame(topic: str, inflated_bytes: int, codec: str = "zstd") -> bytes:
    """A produce frame whose single record's value is ``inflated_bytes`` zeros, compressed with
    ``codec`` (zstd or gzip): a few KB to a few hundred KB on the wire."""
    compression = {"zstd": COMPRESSION_ZSTD, "gzip": COMPRESSION_GZIP}[codec]
    now = int(time.time() * 1000)
    return produce_frame(
        topic, encode_batch([(None, bytes(inflated_bytes), now, [])], compression_type=compression)
    )


def max_size_produce_frame(topic: str, frame_bytes: int) -> bytes:
    """An uncompressed produce frame of about ``frame_bytes`` (e.g. ``socket.request.max.bytes``
    minus a little): read whole, then answered MESSAGE_TOO_LARGE when above ``message.max.bytes``."""
    now = int(time.time() * 1000)
    return produce_frame(topic, encode_batch([(None, b"x" * (frame_bytes - 4096), now, [])]))


@dataclass
class LatencyProbe:
    """Probes ``address`` from a background thread; ``phase`` names what the load is doing now.

    Attributes:
        worst_s: phase -> the slowest probe answer (seconds; a probe that got no answer within
            ``timeout_s`` counts as ``timeout_s``).
        probes: phase -> probes made.
        failures: phase -> probes without an answer (timeout, refused, closed).
        answered_s: phase -> the answered probes' round trips (seconds).
    """

    address: tuple[str, int]
    interval_s: float = 0.1
    timeout_s: float = 10.0
    phase: str = "idle"
    worst_s: dict[str, float] = field(default_factory=dict)
    probes: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    answered_s: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="loop-probe", daemon=True)

    def __enter__(self) -> LatencyProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.timeout_s + 1)

    def probe_once(self) -> float | None:
        """Seconds for one ApiVersions round trip on a fresh connection, None without an answer."""
        started = time.monotonic()
        try:
            with socket.create_connection(self.address, timeout=self.timeout_s) as sock:
                sock.sendall(_PROBE_FRAME)
                ok = recv_frame(sock)[:4] == struct.pack(">i", -7)
        except (OSError, ConnectionError):
            return None
        return time.monotonic() - started if ok else None

    def _run(self) -> None:
        while not self._stop.is_set():
            phase = self.phase
            took = self.probe_once()
            self.probes[phase] = self.probes.get(phase, 0) + 1
            if took is None:
                self.failures[phase] = self.failures.get(phase, 0) + 1
                took = self.timeout_s
            else:
                self.answered_s.setdefault(phase, []).append(took)
            self.worst_s[phase] = max(self.worst_s.get(phase, 0.0), took)
            self._stop.wait(self.interval_s)
