"""Wire fuzzer against a real ``python -m broker`` process (issue #14 item 5).

Cases (seeded, one ``random.Random`` per connection): structure-aware requests of every API and
every version kio has a schema for (``WireGen``: counts, lengths, nulls, boundary integers,
unknown tags, RecordBatch v2 with valid CRCs and odd header fields), byte mutations of valid
frames, random headers, slow frames (sent in pieces with pauses), frames whose size prefix lies
(sent, then the write side is closed) and pipelined bursts. After each case an ApiVersions v0
probe is pipelined on the same connection, so a case is done when the probe is answered or the
broker closes the connection.

Detection: broker death (process exit: the last frames of every connection are saved for
replay, the broker is restarted and the run goes on), hangs (a fresh connection's ApiVersions
unanswered within ``hang_timeout_s``; checked every second and whenever a connection stalls),
peak RSS (``/proc/<pid>/status`` VmRSS, every 0.25 s), tracebacks in the broker log
(``unexpected_errors``: a handler failed and the request was answered UNKNOWN_SERVER_ERROR;
``escaped_errors``: an error escaped the request pipeline and closed the connection), and stored data: a canary topic written by confluent-kafka before the
run is read back intact after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import struct
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.fuzz.hostile_phases import HostileSettings, run_hostile_phases
from bench.fuzz.wire_gen import TOPICS, WireGen, mutate, request_versions
from bench.loop_probe import LatencyProbe
from spark_kafkalite.local_cluster import LocalCluster

__all__ = ["BrokerFuzzReport", "fuzz_broker"]

# (api key, served versions) for the APIs the broker serves, plus some it does not.
_SERVED = {
    0: (3, 9),
    1: (4, 12),
    2: (0, 7),
    3: (0, 12),
    8: (2, 9),
    9: (1, 9),
    10: (0, 6),
    11: (0, 9),
    12: (0, 4),
    13: (0, 5),
    14: (0, 5),
    15: (0, 5),
    16: (0, 5),
    18: (0, 3),
    19: (2, 7),
    20: (1, 6),
    21: (0, 2),
    22: (0, 5),
    23: (2, 4),
    32: (1, 4),
    33: (0, 2),
    35: (1, 4),
    37: (0, 3),
    42: (0, 2),
    43: (0, 2),
    44: (0, 1),
    47: (0, 0),
    60: (0, 1),
}
_UNSERVED = (4, 5, 6, 7, 17, 24, 25, 26, 36, 50, 57, 68)
_PROBE = struct.pack(">hhih", 18, 0, -7, 5) + b"probe"
_PROBE_FRAME = struct.pack(">i", len(_PROBE)) + _PROBE
_SNIPPET_FRAMES = 8
DEFAULT_HOSTILE = HostileSettings()


@dataclass
class BrokerFuzzReport:
    seed: int
    frames: int = 0
    cases: int = 0
    responses: int = 0
    connections_closed_by_broker: int = 0
    stalls: int = 0
    deaths: int = 0
    hangs: int = 0
    peak_rss_bytes: int = 0
    start_rss_bytes: int = 0
    tracebacks: int = 0
    unexpected_errors: int = 0
    escaped_errors: int = 0
    canary_intact: bool | None = None
    elapsed_s: float = 0.0
    # phase -> worst ApiVersions wait on a fresh connection (s), probes made, probes unanswered
    probe_worst_s: dict[str, float] = field(default_factory=dict)
    probes: dict[str, int] = field(default_factory=dict)
    probe_failures: dict[str, int] = field(default_factory=dict)
    hostile_unexpected: int = 0  # hostile-phase requests not answered as expected
    stall_episodes: int = 0  # the broker's own watchdog ("event loop stalled" in its log)
    stall_sites: list[str] = field(default_factory=list)  # innermost frame of each stall
    crash_files: list[str] = field(default_factory=list)

    @property
    def frames_per_s(self) -> float:
        return self.frames / self.elapsed_s if self.elapsed_s else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "frames_per_s": round(self.frames_per_s, 1)}


def _rss_bytes(pid: int | None) -> int:
    if pid is None:
        return 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class _Case:
    """One fuzz case: the frames to send and how."""

    __slots__ = ("frames", "slow", "close_after", "count")

    def __init__(self, frames: list[bytes], slow: bool = False, close_after: bool = False) -> None:
        self.frames = frames
        self.slow = slow
        self.close_after = close_after
        self.count = len(frames)


class _CaseMaker:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.gen = WireGen(rng, hostility=0.05)
        self.clean = WireGen(rng, hostility=0.0)
        self.correlation_id = 0
        self.versions = {k: request_versions(k) for k in (*_SERVED, *_UNSERVED)}
        self.served_keys = sorted(_SERVED)
        self.unserved_keys = [k for k in _UNSERVED if self.versions[k]]

    def _pick(self) -> tuple[int, int]:
        rng = self.rng
        if rng.random() < 0.05:
            key = rng.choice(self.unserved_keys)
            return key, rng.choice(self.versions[key])
        key = rng.choice(self.served_keys)
        low, high = _SERVED[key]
        versions = self.versions[key]
        served = [v for v in versions if low <= v <= high]
        if served and rng.random() < 0.9:
            return key, rng.choice(served)
        return key, rng.choice(versions)

    def _frame(self, gen: WireGen) -> bytes:
        self.correlation_id += 1
        key, version = self._pick()
        return gen.request_frame(key, version, self.correlation_id)

    def next(self) -> _Case:
        rng = self.rng
        roll = rng.random()
        if roll < 0.45:
            return _Case([self._frame(self.gen)])
        if roll < 0.80:
            return _Case([mutate(rng, self._frame(self.clean))])
        if roll < 0.85:  # a random header and body
            body = rng.randbytes(rng.randint(0, 64))
            head = struct.pack(">hhih", rng.randint(-2, 70), rng.randint(-1, 20), rng.randint(0, 99), -1)
            payload = head + body
            return _Case([struct.pack(">i", len(payload)) + payload])
        if roll < 0.90:
            return _Case([self._frame(self.gen)], slow=True)
        if roll < 0.95:  # the size prefix lies: the broker must wait or close, then see EOF
            frame = mutate(rng, self._frame(self.clean), keep_size_prefix=True)
            return _Case(
                [frame[: rng.randint(1, len(frame))] if rng.random() < 0.3 else frame], close_after=True
            )
        return _Case([self._frame(self.gen) for _ in range(rng.randint(2, 5))])


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
    if size < 0 or size > 200 << 20:
        raise ConnectionError(f"response size {size}")
    return await reader.readexactly(size)


async def _health(host: str, port: int, timeout_s: float) -> bool:
    """A fresh connection gets its ApiVersions v0 answered within ``timeout_s``."""
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(_PROBE_FRAME)
                frame = await _read_frame(reader)
                return frame[:4] == struct.pack(">i", -7)
            finally:
                writer.close()
    except (TimeoutError, OSError, asyncio.IncompleteReadError, ConnectionError):
        return False


class _Run:
    def __init__(
        self,
        cluster: LocalCluster,
        report: BrokerFuzzReport,
        frames: int,
        duration_s: float | None,
        connections: int,
        hang_timeout_s: float,
        crash_dir: Path,
    ) -> None:
        self.cluster = cluster
        self.report = report
        self.target_frames = frames
        self.deadline = time.monotonic() + duration_s if duration_s else None
        self.connections = connections
        self.hang_timeout_s = hang_timeout_s
        self.crash_dir = crash_dir
        self.recent: dict[int, list[bytes]] = {}
        self.broker_ok = asyncio.Event()
        self.broker_ok.set()
        self.restart_lock = asyncio.Lock()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
        return host, int(port)

    def done(self) -> bool:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return True
        return self.report.frames >= self.target_frames

    async def _broker_failed(self, kind: str) -> None:
        """The broker died or hung: save the last frames of every connection, restart it."""
        async with self.restart_lock:
            if not self.broker_ok.is_set():
                return
            self.broker_ok.clear()
            if kind == "death":
                self.report.deaths += 1
            else:
                self.report.hangs += 1
            path = (
                self.crash_dir / f"{kind}-{self.report.seed}-{self.report.deaths + self.report.hangs}.frames"
            )
            with path.open("w") as out:
                for worker, frames in self.recent.items():
                    for frame in frames:
                        out.write(f"{worker} {frame.hex()}\n")
            self.report.crash_files.append(str(path))
            await asyncio.to_thread(self.cluster.restart, 1)
            self.broker_ok.set()

    async def monitor(self) -> None:
        last_health = 0.0
        last_progress = start = time.monotonic()
        while not self.done():
            await asyncio.sleep(0.25)
            if time.monotonic() - last_progress >= 60:
                last_progress = time.monotonic()
                r = self.report
                print(
                    f"[fuzz broker] {last_progress - start:.0f}s frames={r.frames} deaths={r.deaths} "
                    f"hangs={r.hangs} peak_rss_mb={r.peak_rss_bytes >> 20}",
                    file=sys.stderr,
                    flush=True,
                )
            pid = self.cluster.pid(1)
            self.report.peak_rss_bytes = max(self.report.peak_rss_bytes, _rss_bytes(pid))
            if not self.broker_ok.is_set():
                continue
            if not self.cluster.is_running(1):
                await self._broker_failed("death")
                continue
            now = time.monotonic()
            if now - last_health >= 1.0:
                last_health = now
                if not await _health(*self.address, self.hang_timeout_s):
                    if self.cluster.is_running(1):
                        await self._broker_failed("hang")

    async def worker(self, index: int, seed: int) -> None:
        maker = _CaseMaker(random.Random(seed))
        recent = self.recent.setdefault(index, [])
        reader: asyncio.StreamReader | None = None
        writer: asyncio.StreamWriter | None = None
        while not self.done():
            await self.broker_ok.wait()
            case = maker.next()
            recent.extend(case.frames)
            del recent[:-_SNIPPET_FRAMES]
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection(*self.address)
                assert reader is not None
                await self._send(case, writer)
                self.report.frames += case.count
                self.report.cases += 1
                if case.close_after:
                    writer.write_eof()
                    await self._drain_until_eof(reader)
                    raise ConnectionError("closed after a lying size prefix")
                writer.write(_PROBE_FRAME)
                await writer.drain()
                await self._await_probe(reader)
            except (OSError, ConnectionError, asyncio.IncompleteReadError):
                self.report.connections_closed_by_broker += not case.close_after
                if writer is not None:
                    writer.close()
                reader = writer = None
            except TimeoutError:
                self.report.stalls += 1
                if writer is not None:
                    writer.close()
                reader = writer = None
        if writer is not None:
            writer.close()

    async def _send(self, case: _Case, writer: asyncio.StreamWriter) -> None:
        if not case.slow:
            writer.write(b"".join(case.frames))
            await writer.drain()
            return
        for frame in case.frames:
            cuts = sorted(
                random.Random(len(frame)).sample(range(1, max(len(frame), 2)), min(3, len(frame) - 1))
            )
            start = 0
            for cut in [*cuts, len(frame)]:
                writer.write(frame[start:cut])
                await writer.drain()
                start = cut
                await asyncio.sleep(0.005)

    async def _await_probe(self, reader: asyncio.StreamReader) -> None:
        async with asyncio.timeout(self.hang_timeout_s):
            while True:
                frame = await _read_frame(reader)
                self.report.responses += 1
                if frame[:4] == b"\xff\xff\xff\xf9":  # correlation id -7: the probe
                    self.report.responses -= 1
                    return

    async def _drain_until_eof(self, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.hang_timeout_s):
                while await reader.read(65536):
                    pass


def _canary_write(bootstrap: str, topic: str, values: list[bytes]) -> None:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, value=value, partition=0)
    if producer.flush(15) != 0:
        raise RuntimeError("canary records were not acknowledged")


def _canary_read(bootstrap: str, topic: str, count: int) -> list[bytes]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "fuzz-canary-" + uuid.uuid4().hex,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(values) < count and time.monotonic() < deadline:
        for message in consumer.consume(1000, timeout=0.2):
            if message.error() is None:
                values.append(message.value())
    consumer.close()
    return values


def _stall_sites(output: str) -> list[str]:
    """The innermost stack frame of each "event loop stalled" warning in a broker log."""
    sites = []
    for block in output.split("event loop stalled")[1:]:
        frames = [
            line.strip() for line in block.split("\n[", 1)[0].splitlines() if line.strip().startswith("File ")
        ]
        if frames:
            sites.append(frames[-1])
    return sites


def fuzz_broker(
    frames: int = 10_000,
    *,
    seed: int = 1,
    duration_s: float | None = None,
    connections: int = 4,
    hang_timeout_s: float = 10.0,
    work_dir: Path | None = None,
    hostile: HostileSettings | None = DEFAULT_HOSTILE,
) -> BrokerFuzzReport:
    """Fuzz a fresh single broker until ``frames`` frames were sent or ``duration_s`` passed,
    after the ``hostile`` phases (bombs, max-size frames, slow-loris; None = skip them). A probe
    times ApiVersions on a fresh connection every 0.1 s throughout: ``probe_worst_s`` has the
    worst wait per phase (idle, bomb, max-frame, slow-loris, fuzz).

    Crash/hang frame snippets go to ``work_dir`` (default: the broker's data dir, removed at the
    end unless something was found).
    """
    report = BrokerFuzzReport(seed=seed)
    overrides = {"auto.create.topics.enable": "true", "group.initial.rebalance.delay.ms": "0"}
    cluster = LocalCluster(brokers=1, config_overrides=overrides, data_dir=work_dir)
    cluster.start()
    crash_dir = Path(cluster.data_dir)
    keep = False
    try:
        canary = "canary-" + uuid.uuid4().hex[:8]
        canary_values = [f"canary-{i}".encode() * 3 for i in range(50)]
        _canary_write(cluster.bootstrap_servers, canary, canary_values)
        for topic in TOPICS[:2]:
            _canary_write(cluster.bootstrap_servers, topic, [b"x"])
        report.start_rss_bytes = _rss_bytes(cluster.pid(1))
        run = _Run(cluster, report, frames, duration_s, connections, hang_timeout_s, crash_dir)

        async def main() -> None:
            tasks = [asyncio.create_task(run.worker(i, seed * 1000 + i)) for i in range(connections)]
            await run.monitor()
            await asyncio.gather(*tasks)

        with LatencyProbe(run.address, interval_s=0.1, timeout_s=hang_timeout_s) as probe:
            time.sleep(0.5)
            if hostile is not None:
                report.hostile_unexpected = run_hostile_phases(run.address, TOPICS[0], probe, hostile)
            probe.phase = "fuzz"
            start = time.monotonic()
            run.deadline = start + duration_s if duration_s else None  # the fuzz phase's own time
            asyncio.run(main())
            report.elapsed_s = time.monotonic() - start
        report.probe_worst_s = {phase: round(s, 3) for phase, s in probe.worst_s.items()}
        report.probes = dict(probe.probes)
        report.probe_failures = dict(probe.failures)
        report.canary_intact = (
            _canary_read(cluster.bootstrap_servers, canary, len(canary_values)) == canary_values
        )
        output = cluster.output(1)
        report.tracebacks = output.count("Traceback")
        report.unexpected_errors = output.count("unexpected error while handling")
        report.escaped_errors = output.count("unexpected error on connection")
        report.stall_episodes = output.count("event loop stalled")
        report.stall_sites = _stall_sites(output)
        keep = bool(report.deaths or report.hangs or report.tracebacks)
    finally:
        cluster._owns_data_dir = cluster._owns_data_dir and not keep  # keep evidence
        cluster.stop()
    return report
