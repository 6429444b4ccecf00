"""The client side of the client fuzzer: our producer, consumer and admin client in a loop
against ``--bootstrap`` (the fuzzing proxy), each call bounded by short timeouts. One JSON line
per call on stdout: ``{"op": ..., "exc": <exception class or null>, "clean": bool}``; a clean
outcome is success or one of our documented exceptions (``KafkaError`` and the client's own
errors, ``TimeoutError``). Runs as a child process so a crash is seen, not suffered.

Name resolution is limited to 127.0.0.1: a fuzzed host name must never reach a resolver.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import sys
import time
from typing import Any

_real_getaddrinfo = socket.getaddrinfo


def _local_only(host: Any, *args: Any, **kwargs: Any) -> Any:
    if host not in ("127.0.0.1", "localhost", b"127.0.0.1"):
        raise socket.gaierror(socket.EAI_NONAME, f"fuzz guard: {host!r} is not 127.0.0.1")
    return _real_getaddrinfo("127.0.0.1", *args, **kwargs)


socket.getaddrinfo = _local_only  # type: ignore[assignment]

from spark_kafkalite.client import KafkaAdminClient, KafkaConsumer, KafkaProducer  # noqa: E402
from spark_kafkalite.protocol.errors import KafkaError  # noqa: E402

_CLEAN_NAMES = {"TimeoutError", "KafkaTimeoutError", "IllegalStateError", "NoOffsetForPartitionError"}


def _clean(exc: BaseException) -> bool:
    return isinstance(exc, KafkaError | TimeoutError) or type(exc).__name__ in _CLEAN_NAMES


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    common = {
        "bootstrap.servers": args.bootstrap,
        "request.timeout.ms": 400,
        "default.api.timeout.ms": 800,
        "reconnect.backoff.ms": 10,
        "retry.backoff.ms": 10,
        "metadata.max.age.ms": 2000,
    }
    clients: dict[str, Any] = {}

    def producer() -> Any:
        if "p" not in clients:
            clients["p"] = KafkaProducer(
                {**common, "delivery.timeout.ms": 1200, "max.block.ms": 800, "linger.ms": 0, "acks": "all"}
            )
        return clients["p"]

    def consumer() -> Any:
        if "c" not in clients:
            clients["c"] = KafkaConsumer({**common, "group.id": "fuzz-g", "fetch.max.wait.ms": 100})
        return clients["c"]

    def admin() -> Any:
        if "a" not in clients:
            clients["a"] = KafkaAdminClient(common)
        return clients["a"]

    def op_produce() -> None:
        p = producer()
        futures = [p.send("fuzz-a", value=rng.randbytes(rng.randint(0, 50)), key=b"k") for _ in range(3)]
        p.flush(timeout_s=1.5)
        for f in futures:
            f.result(timeout=1.5)

    def op_consume() -> None:
        c = consumer()
        if not c.assignment():
            c.assign([("fuzz-a", 0)])
        c.poll(timeout_ms=100)

    def op_subscribe_poll() -> None:
        c = consumer()
        c.poll(timeout_ms=100)

    def op_admin() -> None:
        a = admin()
        rng.choice((a.list_topics, a.describe_cluster))(timeout_ms=800)

    ops = [op_produce, op_consume, op_admin, op_subscribe_poll]
    n = 0
    while True:
        op = rng.choice(ops)
        start = time.monotonic()
        exc: BaseException | None = None
        try:
            op()
        except Exception as e:  # noqa: BLE001 - classified below
            exc = e
        n += 1
        line = {
            "op": op.__name__,
            "exc": None if exc is None else type(exc).__name__,
            "clean": exc is None or _clean(exc),
            "s": round(time.monotonic() - start, 3),
        }
        if exc is not None and not line["clean"]:
            line["msg"] = repr(exc)[:300]
        print(json.dumps(line), flush=True)
        if exc is not None and (not line["clean"] or rng.random() < 0.2) or n % 50 == 0:
            for client in clients.values():
                try:
                    client.close()
                except Exception as e:  # noqa: BLE001
                    print(
                        json.dumps({"op": "close", "exc": type(e).__name__, "clean": _clean(e)}), flush=True
                    )
            clients.clear()


if __name__ == "__main__":
    sys.exit(main())
