"""``kafkalite produce`` and ``kafkalite consume``, shaped like Kafka's
``kafka-console-producer.sh`` / ``kafka-console-consumer.sh`` (one record per line)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from spark_kafkalite.cli.common import (
    CliError,
    add_bootstrap,
    client_config,
    format_record,
    key_values,
)
from spark_kafkalite.cli.groups import consume_with_group

__all__ = ["add_produce_parser", "add_consume_parser", "cmd_produce", "cmd_consume"]


def add_produce_parser(commands: Any) -> None:
    """Add the ``produce`` command to the ``kafkalite`` subparsers ``commands``."""
    produce = commands.add_parser("produce", help="send stdin lines as records")
    add_bootstrap(produce)
    produce.add_argument("--topic", required=True)
    produce.add_argument("--partition", type=int, help="send every record to this partition")
    produce.add_argument(
        "--property",
        action="append",
        metavar="KEY=VALUE",
        help="parse.key=true, key.separator=SEP (default TAB)",
    )
    produce.add_argument("--producer-property", action="append", metavar="KEY=VALUE", help="producer config")


def add_consume_parser(commands: Any) -> None:
    """Add the ``consume`` command to the ``kafkalite`` subparsers ``commands``."""
    consume = commands.add_parser("consume", help="print records to stdout")
    add_bootstrap(consume)
    consume.add_argument("--topic", required=True)
    consume.add_argument("--partition", type=int, help="only this partition (default: all)")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    start.add_argument("--offset", help="start offset: a number (needs --partition), 'earliest' or 'latest'")
    consume.add_argument("--max-messages", type=int, help="exit after this many records")
    consume.add_argument("--timeout-ms", type=int, help="exit when no record arrives for this long")
    consume.add_argument(
        "--property",
        action="append",
        metavar="KEY=VALUE",
        help="print.key, print.partition, print.offset, print.timestamp (true/false), key.separator",
    )
    consume.add_argument("--consumer-property", action="append", metavar="KEY=VALUE", help="consumer config")
    consume.add_argument("--group", help="consume as a member of this consumer group (commits offsets)")


def cmd_produce(args: argparse.Namespace, stdin: TextIO, report: bool = True) -> int:
    """Send each line of ``stdin`` as a record (``kafkalite produce`` and
    ``kafka-console-producer.sh``); ``report`` prints the count on stderr at the end.

    Raises:
        CliError: a line without the key separator (with ``parse.key=true``) or a failed send.
    """
    from spark_kafkalite.client import KafkaProducer

    props = key_values(args.property, "--property")
    parse_key = props.get("parse.key", "false").strip().lower() == "true"
    separator = props.get("key.separator", "\t")
    config = client_config(
        args,
        "kafkalite-console-producer",
        {"max.block.ms": "15000"},
        args.producer_property,
        "--producer-property",
    )
    errors: list[BaseException | None] = []
    sent = 0
    with KafkaProducer(config) as producer:
        for line_number, raw in enumerate(stdin, start=1):
            line = raw.rstrip("\n").rstrip("\r")
            key: bytes | None = None
            value = line
            if parse_key:
                key_text, sep, value = line.partition(separator)
                if not sep:
                    raise CliError(
                        f"No key separator {separator!r} found on line number {line_number}: {line!r}"
                    )
                key = key_text.encode()
            future = producer.send(args.topic, value=value.encode(), key=key, partition=args.partition)
            future.add_done_callback(lambda f: errors.append(f.exception()) if f.exception() else None)
            sent += 1
            if errors:
                break
        producer.flush()
    if errors:
        raise CliError(f"failed to send to topic {args.topic}: {errors[0]}")
    if report:
        print(f"Produced {sent} records to topic {args.topic}.", file=sys.stderr)
    return 0


def cmd_consume(args: argparse.Namespace, stdout: TextIO) -> int:
    """Print records of ``--topic`` to ``stdout`` (``kafkalite consume`` and
    ``kafka-console-consumer.sh``) until ``--max-messages``, ``--timeout-ms`` without a record,
    or Ctrl-C; then ``Processed a total of N messages`` on stderr.

    Raises:
        CliError: the topic or partition does not exist, or a bad ``--offset``.
    """
    if args.group:
        return consume_with_group(args, stdout)
    from spark_kafkalite.client import KafkaConsumer, TopicPartition

    props = key_values(args.property, "--property")
    config = client_config(
        args, "kafkalite-console-consumer", None, args.consumer_property, "--consumer-property"
    )
    config["auto.offset.reset"] = "earliest" if args.from_beginning else "latest"
    consumer = KafkaConsumer(config)
    count = 0
    started = False
    try:
        partitions = consumer.partitions_for_topic(args.topic)
        if not partitions:
            raise CliError(f"topic {args.topic!r} does not exist")
        if args.partition is not None:
            if args.partition not in partitions:
                raise CliError(
                    f"partition {args.partition} does not exist in topic {args.topic!r} ({len(partitions)} partitions)"
                )
            tps = [TopicPartition(args.topic, args.partition)]
        else:
            tps = [TopicPartition(args.topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        if args.offset is not None:
            spec = args.offset.strip().lower()
            if spec == "earliest":
                consumer.seek_to_beginning(*tps)
            elif spec == "latest":
                consumer.seek_to_end(*tps)
            else:
                if args.partition is None:
                    raise CliError("--offset with a number needs --partition")
                try:
                    offset = int(spec)
                except ValueError:
                    raise CliError(
                        f"--offset must be a number, 'earliest' or 'latest', not {args.offset!r}"
                    ) from None
                consumer.seek(tps[0], offset)
        elif args.from_beginning:
            consumer.seek_to_beginning(*tps)
        else:
            consumer.seek_to_end(*tps)
        started = True
        last_record = time.monotonic()
        while args.max_messages is None or count < args.max_messages:
            polled = consumer.poll(timeout_ms=200)
            got = False
            for records in polled.values():
                for record in records:
                    stdout.write(format_record(record, props) + "\n")
                    count += 1
                    got = True
                    if args.max_messages is not None and count >= args.max_messages:
                        break
                if args.max_messages is not None and count >= args.max_messages:
                    break
            stdout.flush()
            now = time.monotonic()
            if got:
                last_record = now
            elif args.timeout_ms is not None and (now - last_record) * 1000 >= args.timeout_ms:
                break
    finally:
        consumer.close()
        if started:
            print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0
