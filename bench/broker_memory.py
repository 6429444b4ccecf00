"""Peak broker RSS under hostile load for a given configuration (issue #14 item 2).

Starts one broker process (``LocalCluster``) with ``--override`` keys, then, all at once:

- ``--idle`` connections that each did one ApiVersions and stay open;
- ``--big`` connections each sending one produce request of ``socket.request.max.bytes``
  (a batch far above ``message.max.bytes``: buffered, decoded, answered MESSAGE_TOO_LARGE);
- ``--bombs`` produce requests of ~8 KB zstd batches that inflate to 256 MB;
- ``--loris`` connections that declare a ``--loris-kb`` frame and send 1 KB of it, then stall
  (each holds its declared size of ``queued.max.request.bytes`` until
  ``kafkalite.socket.request.receive.timeout.ms``, as Kafka's pool would).

and reports the broker's VmRSS before, its peak (VmHWM) and VmRSS after, from /proc. The
broker is a real process on 127.0.0.1; nothing here is mocked. Run:

    python -m bench.broker_memory --override queued.max.request.bytes=104857600
"""

from __future__ import annotations

import argparse
import datetime
import socket
import struct
import threading
import time
import uuid

from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.produce.v9 import request as produce_v9

from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.framing import encode_request
from spark_kafkalite.protocol.record_batch_writer import encode_batch

MS = datetime.timedelta(milliseconds=1)
API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 7, 3) + b"raw"


def vm_mb(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(field)


def produce_wire(topic: str, records: bytes) -> bytes:
    request = produce_v9.ProduceRequest(
        acks=1,
        timeout=5000 * MS,
        topic_data=(
            produce_v9.TopicProduceData(
                name=topic, partition_data=(produce_v9.PartitionProduceData(index=0, records=records),)
            ),
        ),
    )
    return encode_request(request, 1, "bench-memory")


def recv_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return bytes(buf)

    return exactly(struct.unpack(">i", exactly(4))[0])


def connect(address: tuple[str, int]) -> socket.socket:
    return socket.create_connection(address, timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--override", action="append", default=[], help="broker key=value")
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--big", type=int, default=8)
    parser.add_argument("--bombs", type=int, default=8)
    parser.add_argument("--loris", type=int, default=100)
    parser.add_argument("--loris-kb", type=int, default=1024, help="frame size the stalled senders declare")
    parser.add_argument("--request-mb", type=int, default=100, help="size of the big requests")
    args = parser.parse_args()
    overrides = dict(item.split("=", 1) for item in args.override)
    with LocalCluster(config_overrides=overrides) as cluster:
        host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
        address = (host, int(port))
        pid = cluster.pid(1)
        assert pid is not None
        topic = "mem-" + uuid.uuid4().hex[:8]
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)
        del admin
        now = int(time.time() * 1000)
        big_wire = produce_wire(
            topic, encode_batch([(None, b"x" * ((args.request_mb << 20) - 4096), now, [])])
        )
        bomb_wire = produce_wire(topic, encode_batch([(None, bytes(256 << 20), now, [])], compression_type=4))
        time.sleep(0.5)
        baseline = vm_mb(pid, "VmRSS")
        idle = []
        for _ in range(args.idle):
            sock = connect(address)
            sock.sendall(struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0)
            recv_frame(sock)
            idle.append(sock)
        after_idle = vm_mb(pid, "VmRSS")
        loris = []
        for _ in range(args.loris):
            sock = connect(address)
            sock.sendall(struct.pack(">i", args.loris_kb << 10) + b"\0" * 1024)
            loris.append(sock)
        errors: list[str] = []

        def send(wire: bytes) -> None:
            try:
                with connect(address) as sock:
                    sock.sendall(wire)
                    recv_frame(sock)
            except OSError as exc:
                errors.append(repr(exc))

        started = time.monotonic()
        threads = [threading.Thread(target=send, args=(big_wire,)) for _ in range(args.big)]
        threads += [threading.Thread(target=send, args=(bomb_wire,)) for _ in range(args.bombs)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
        peak = vm_mb(pid, "VmHWM")
        for sock in idle + loris:
            sock.close()
        time.sleep(1.0)
        print(f"config overrides: {overrides or '(Kafka defaults)'}")
        print(
            f"load: {args.idle} idle connections, {args.loris} stalled {args.loris_kb} KB frames, "
            f"{args.big} x {len(big_wire) >> 20} MB produce requests and {args.bombs} x "
            f"{len(bomb_wire) >> 10} KB zstd bombs (256 MB inflated) at once; answered in {elapsed:.1f} s"
        )
        print(
            f"broker RSS: baseline {baseline:.0f} MB, with idle connections {after_idle:.0f} MB, "
            f"peak (VmHWM) {peak:.0f} MB, after {vm_mb(pid, 'VmRSS'):.0f} MB; client errors: {len(errors)}"
        )
        for error in errors[:5]:
            print("  ", error)


if __name__ == "__main__":
    main()
