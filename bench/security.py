"""Produce and consume throughput over TLS and SASL vs plaintext (issue #13): our client and
confluent-kafka, each over PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512) listeners of ONE broker.

One ``LocalCluster(security=ClusterSecurity("SASL_SSL", "SCRAM-SHA-512"))`` broker (a throwaway
CA and broker certificate from ``spark_kafkalite.local_pki``, the admin user's SCRAM credential
stored through the controller) is started with three listeners: ``PLAINTEXT``, ``SSL`` (server
authentication only) and ``SASL_SSL``. For each value size (default 100 B and 1 KiB):

- produce: every (client, listener) sends N keyed records (12-byte keys, acks=1, no idempotence,
  linger.ms=5, batch.size=65536) to one 4-partition topic, warmed up first (connections, TLS and
  SASL handshakes are not timed); ``bench/produce.py``'s producer runs with the listener's
  settings; delivery is checked through the topic's watermarks;
- consume: a topic filled once (confluent-kafka over PLAINTEXT) is read from the beginning by
  every (client, listener) with manual assignment (``bench/consume.py``'s readers); the timed part
  runs from ``assign`` to the N-th record, so it includes the consumer's connection (TLS
  handshake, SCRAM exchange: a few ms).

Clients and listeners alternate within a round; each table shows the median of ``--rounds``
rounds, and a last table the ratio of each secured listener's records/s to PLAINTEXT's, per client
(1.0 = no cost). The broker, the clients and TLS on both ends share the machine's cores.

    python bench/security.py [--records 50000] [--value-sizes 100,1024] [--rounds 3] [--quick]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from _common import (
    Result,
    base_parser,
    console,
    create_topic,
    emit_table,
    make_keys,
    median_of_rounds,
    print_table,
    topic_name,
    topic_record_count,
)
from consume import fill_topic, read_confluent, read_ours
from produce import Run, _confluent, _ours
from rich.table import Table

from spark_kafkalite import LocalCluster
from spark_kafkalite.local_cluster import free_ports
from spark_kafkalite.local_security import ClusterSecurity

LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
ReadFn = Callable[..., tuple[int, int, float]]
CLIENTS: list[tuple[str, Callable[[Run], float], ReadFn]] = [
    ("ours", _ours(idempotent=False), read_ours),
    ("peer: confluent-kafka", _confluent(idempotent=False), read_confluent),
]


def start_broker() -> tuple[LocalCluster, dict[str, tuple[str, Mapping[str, Any]]]]:
    """One broker with PLAINTEXT, SSL and SASL_SSL listeners; returns it and, per listener,
    (bootstrap address, the client's security settings)."""
    sasl_ssl, ssl_port, plain = free_ports(3)
    listeners = f"SASL_SSL://127.0.0.1:{sasl_ssl},SSL://127.0.0.1:{ssl_port},PLAINTEXT://127.0.0.1:{plain}"
    cluster = LocalCluster(
        security=ClusterSecurity(protocol="SASL_SSL", mechanism="SCRAM-SHA-512"),
        ports={1: (sasl_ssl, 0)},
        config_overrides={"listeners": listeners, "advertised.listeners": listeners},
    )
    cluster.start()
    sasl_config = cluster.client_config()
    sasl_config.pop("bootstrap.servers")
    settings: dict[str, tuple[str, Mapping[str, Any]]] = {
        "PLAINTEXT": (f"127.0.0.1:{plain}", {}),
        "SSL": (
            f"127.0.0.1:{ssl_port}",
            {"security.protocol": "SSL", "ssl.ca.location": sasl_config["ssl.ca.location"]},
        ),
        "SASL_SSL": (f"127.0.0.1:{sasl_ssl}", sasl_config),
    }
    return cluster, settings


def run_size(args: Any, settings: dict[str, tuple[str, Mapping[str, Any]]], size: int) -> dict[str, float]:
    """Produce and consume tables for one value size; returns records/s per
    ``"<op>|<client>|<listener>"`` (median round)."""
    plaintext = settings["PLAINTEXT"][0]
    keys, warmup_keys = make_keys(args.records), make_keys(args.warmup_records)
    value = os.urandom(size)
    produce_topic = topic_name(f"bench-security-produce-{size}")
    consume_topic = topic_name(f"bench-security-consume-{size}")
    for topic in (produce_topic, consume_topic):
        create_topic(plaintext, topic, args.partitions)
    console.print(
        f"filling {consume_topic} with {args.records:,} records of {size} bytes (confluent-kafka) ..."
    )
    fill_topic(plaintext, consume_topic, args.records, size, args.timeout_s)
    warmup = min(args.warmup_records, args.records)
    for _client, _produce, read in CLIENTS:  # untimed warm-up reads, one per client and listener
        for listener in LISTENERS:
            address, security = settings[listener]
            read(
                address,
                consume_topic,
                args.partitions,
                warmup,
                args.max_poll_records,
                args.timeout_s,
                security,
            )
    produced: dict[str, list[tuple[float, float | None, str]]] = {}
    consumed: dict[str, list[tuple[float, float | None, str]]] = {}
    for round_no in range(args.rounds):
        for client, produce, read in CLIENTS:
            for listener in LISTENERS:
                name = f"{client}, {listener}"
                address, security = settings[listener]
                console.print(f"{size}-byte values, round {round_no + 1}/{args.rounds}: {name} ...")
                before = topic_record_count(plaintext, produce_topic, args.partitions)
                run = Run(
                    address,
                    produce_topic,
                    keys,
                    warmup_keys,
                    value,
                    args.linger_ms,
                    args.batch_size,
                    args.timeout_s,
                    security,
                )
                elapsed = produce(run)
                written = topic_record_count(plaintext, produce_topic, args.partitions) - before
                expected = args.records + args.warmup_records
                note = "" if written == expected else f"WRONG COUNT: {written} of {expected} written"
                produced.setdefault(name, []).append((elapsed, None, note))
                count, nbytes, seconds = read(
                    address,
                    consume_topic,
                    args.partitions,
                    args.records,
                    args.max_poll_records,
                    args.timeout_s,
                    security,
                )
                note = ""
                if count < args.records:
                    note = f"TIMED OUT: {count:,} of {args.records:,} read"
                elif nbytes != count * size:
                    note = f"WRONG BYTES: {nbytes:,} value bytes for {count:,} records"
                consumed.setdefault(name, []).append((seconds, None, note))
    key_value_bytes = sum(len(k) for k in keys) + size * len(keys)
    rates: dict[str, float] = {}
    for op, timed, payload, mb_label in (
        ("produce", produced, key_value_bytes, "key+value MB/s"),
        ("consume", consumed, size * args.records, "value MB/s"),
    ):
        results: list[Result] = [
            median_of_rounds(name, args.records, rounds, payload) for name, rounds in timed.items()
        ]
        detail = (
            f"acks=1, linger.ms={args.linger_ms}, batch.size={args.batch_size}"
            if op == "produce"
            else f"assign from the beginning, batches of {args.max_poll_records}"
        )
        print_table(
            f"{op} over PLAINTEXT / SSL / SASL_SSL (SCRAM-SHA-512): {args.records:,} keyed records, "
            f"{size}-byte values, {args.partitions} partitions, {detail}, median of {args.rounds} rounds",
            results,
            mb_label=mb_label,
        )
        rates.update({f"{op}|{r.name}": r.records_per_s for r in results})
    return rates


def print_ratios(rates_by_size: dict[int, dict[str, float]]) -> None:
    """records/s over SSL and SASL_SSL divided by records/s over PLAINTEXT, per client, op, size."""
    columns = ["client", "op", "value bytes", "SSL / PLAINTEXT", "SASL_SSL / PLAINTEXT"]
    table = Table(title="TLS cost: records/s over the secured listener / records/s over PLAINTEXT (same run)")
    for column in columns:
        table.add_column(column, justify="left" if column in ("client", "op") else "right")
    rows: list[list[str]] = []
    for size, rates in rates_by_size.items():
        for op in ("produce", "consume"):
            for client, _produce, _read in CLIENTS:
                base = rates[f"{op}|{client}, PLAINTEXT"]
                rows.append(
                    [client, op, str(size)]
                    + [
                        f"{rates[f'{op}|{client}, {listener}'] / base:.2f}"
                        for listener in ("SSL", "SASL_SSL")
                    ]
                )
    for row in rows:
        table.add_row(*row)
    emit_table(str(table.title), columns, rows)
    console.print(table)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], default_records=50_000)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=65536, help="batch.size in bytes")
    parser.add_argument("--max-poll-records", type=int, default=500, help="max.poll.records / num_messages")
    parser.add_argument("--warmup-records", type=int, default=2_000)
    parser.add_argument("--value-sizes", default="100,1024", help="comma-separated value sizes in bytes")
    parser.add_argument("--rounds", type=int, default=3, help="timed runs of each (client, listener), median")
    parser.add_argument("--quick", action="store_true", help="10k records, 1k warm-up, 1 round")
    args = parser.parse_args()
    if args.bootstrap_server:
        parser.error(
            "bench/security.py starts its own broker (three listeners); --bootstrap-server is not used"
        )
    if args.quick:
        args.records, args.warmup_records, args.rounds = 10_000, 1_000, 1
    sizes = [int(s) for s in args.value_sizes.split(",") if s.strip()]
    cluster, settings = start_broker()
    try:
        print_ratios({size: run_size(args, settings, size) for size in sizes})
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
