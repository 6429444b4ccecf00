"""Fuzz our client with hostile responses (issue #14 item 5).

A fuzzing proxy on 127.0.0.1 sits in front of a real broker that advertises the proxy's port (so
Metadata and FindCoordinator answers lead back to the proxy). It reads each request's header and
answers it with, per response (seeded): the broker's real response (about half), a byte mutation
of it, a structure-aware response body written from kio's schema of that API and version
(``WireGen``: huge counts, nulls, odd lengths; hosts are always 127.0.0.1), a wrong correlation
id, a truncated frame, a closed connection, or a delay. The client (``client_driver``: producer,
consumer, admin, short timeouts) runs in a child process so a crash is observed: death = the
child exits, hang = no call finished within ``hang_timeout_s``; every call's outcome must be
success or a documented exception (``unclean`` counts the others).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.fuzz.wire_gen import WireGen, mutate
from spark_kafkalite.local_cluster import LocalCluster, free_port
from spark_kafkalite.protocol.api_keys import response_class
from spark_kafkalite.protocol.errors import KafkaError
from spark_kafkalite.protocol.framing import decode_request_header

__all__ = ["ClientFuzzReport", "fuzz_client"]


@dataclass
class ClientFuzzReport:
    seed: int
    responses: int = 0
    fuzzed_responses: int = 0
    calls: int = 0
    deaths: int = 0
    hangs: int = 0
    unclean: int = 0
    peak_rss_bytes: int = 0
    elapsed_s: float = 0.0
    exceptions: dict[str, int] = field(default_factory=dict)
    unclean_samples: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        rate = self.responses / self.elapsed_s if self.elapsed_s else 0.0
        return {**asdict(self), "responses_per_s": round(rate, 1)}


class _Proxy:
    def __init__(self, port: int, upstream: tuple[str, int], seed: int, report: ClientFuzzReport) -> None:
        self.port = port
        self.upstream = upstream
        self.rng = random.Random(seed)
        self.gen = WireGen(self.rng, hostility=0.1, host="127.0.0.1", port=port)
        self.report = report

    async def serve(self, stop: asyncio.Event) -> None:
        server = await asyncio.start_server(self._client, "127.0.0.1", self.port)
        async with server:
            await stop.wait()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
                request = await reader.readexactly(size)
                header, _ = decode_request_header(request)
                up_writer.write(struct.pack(">i", size) + request)
                await up_writer.drain()
                if header.api_key == 0 and _acks_zero(request):
                    continue
                rsize = int.from_bytes(await up_reader.readexactly(4), "big", signed=True)
                response = struct.pack(">i", rsize) + await up_reader.readexactly(rsize)
                out = self._fuzz(header.api_key, header.api_version, header.correlation_id, response)
                self.report.responses += 1
                if out is None:
                    return  # close the connection
                close = False
                if isinstance(out, tuple):
                    delay_s, out, close = out
                    await asyncio.sleep(delay_s)
                writer.write(out)
                await writer.drain()
                if close:
                    return
        except (OSError, asyncio.IncompleteReadError, KafkaError, ValueError):
            pass
        finally:
            writer.close()
            up_writer.close()

    def _fuzz(self, api_key: int, version: int, correlation_id: int, response: bytes) -> Any:
        rng = self.rng
        roll = rng.random()
        if roll < 0.6:
            return response
        self.report.fuzzed_responses += 1
        if roll < 0.72:
            return mutate(rng, response[:8] + response[8:]) if len(response) > 8 else response
        if roll < 0.92:
            try:
                cls = response_class(api_key, version)
            except KafkaError:
                return response
            head = struct.pack(">i", correlation_id)
            if cls.__flexible__ and api_key != 18:
                head += b"\x00"
            payload = head + self.gen.entity(cls)
            return struct.pack(">i", len(payload)) + payload
        if roll < 0.95:
            return response[:4] + struct.pack(">i", correlation_id + rng.choice((1, -1, 1000))) + response[8:]
        if roll < 0.97:
            return (0.0, response[: rng.randint(0, len(response) - 1)], True)  # truncated, then closed
        if roll < 0.99:
            return None
        return (rng.uniform(0.1, 1.0), response, False)


def _acks_zero(request: bytes) -> bool:
    """Best effort: a Produce request whose acks is 0 gets no response from the broker."""
    try:
        header, offset = decode_request_header(request)
        if header.api_version >= 3:
            if header.header_version == 2:
                n = request[offset]
                offset += 1 + max(n - 1, 0)
            else:
                n = struct.unpack_from(">h", request, offset)[0]
                offset += 2 + max(n, 0)
        return struct.unpack_from(">h", request, offset)[0] == 0
    except (KafkaError, struct.error, IndexError):
        return False


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class _Child:
    """One client driver process and its unread output."""

    def __init__(self, proxy_port: int, seed: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.fuzz.client_driver", "--bootstrap", f"127.0.0.1:{proxy_port}"]
            + ["--seed", str(seed)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        assert self.process.stdout is not None
        os.set_blocking(self.process.stdout.fileno(), False)
        self.buf = b""
        self.last_line_s = time.monotonic() + 10  # startup allowance

    def lines(self) -> list[dict[str, Any]]:
        assert self.process.stdout is not None
        with contextlib.suppress(BlockingIOError, TypeError):
            chunk = self.process.stdout.read()
            if chunk:
                self.buf += chunk
        *raw, self.buf = self.buf.split(b"\n")
        if raw:
            self.last_line_s = time.monotonic()
        return [json.loads(r) for r in raw if r.strip()]

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


def fuzz_client(
    responses: int = 10_000,
    *,
    seed: int = 1,
    duration_s: float | None = None,
    clients: int = 4,
    hang_timeout_s: float = 60.0,
) -> ClientFuzzReport:
    """Run the client driver against the fuzzing proxy until ``responses`` responses were
    served or ``duration_s`` passed."""
    report = ClientFuzzReport(seed=seed)
    proxy_port, broker_port = free_port(), free_port()
    overrides = {
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}",
        "group.initial.rebalance.delay.ms": "0",
    }
    cluster = LocalCluster(brokers=1, config_overrides=overrides, ports={1: (broker_port, 0)})
    proxy = _Proxy(proxy_port, ("127.0.0.1", broker_port), seed, report)
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    thread = threading.Thread(target=lambda: loop.run_until_complete(proxy.serve(stop)), daemon=True)
    thread.start()  # before the broker: its readiness check connects to the advertised (proxy) port
    cluster.start()
    exceptions: Counter[str] = Counter()
    start = time.monotonic()
    deadline = start + duration_s if duration_s else None
    children: dict[int, _Child] = {}
    spawned = 0

    def finished() -> bool:
        return report.responses >= responses or (deadline is not None and time.monotonic() >= deadline)

    try:
        while not finished():
            for slot in range(clients):
                if slot not in children:
                    spawned += 1
                    children[slot] = _Child(proxy_port, seed * 7919 + spawned)
            time.sleep(0.05)
            for slot, child in list(children.items()):
                report.peak_rss_bytes = max(report.peak_rss_bytes, _rss(child.process.pid))
                for line in child.lines():
                    report.calls += 1
                    if line["exc"]:
                        exceptions[line["exc"]] += 1
                    if not line["clean"]:
                        report.unclean += 1
                        if len(report.unclean_samples) < 20:
                            report.unclean_samples.append(f"{line['op']}: {line.get('msg', line['exc'])}")
                if child.process.poll() is not None:
                    report.deaths += 1
                    del children[slot]
                elif time.monotonic() - child.last_line_s > hang_timeout_s:
                    report.hangs += 1
                    child.kill()
                    del children[slot]
        for child in children.values():
            child.kill()
    finally:
        report.elapsed_s = time.monotonic() - start
        report.exceptions = dict(exceptions)
        loop.call_soon_threadsafe(stop.set)
        thread.join(5)
        cluster.stop()
    return report
