"""``kafka-console-producer.sh`` and ``kafka-console-consumer.sh``: Kafka's ``ConsoleProducer`` /
``ConsoleConsumer`` flags over :func:`spark_kafkalite.cli.console.cmd_produce` and
:func:`~spark_kafkalite.cli.console.cmd_consume` (shared with ``kafkalite produce|consume``).

    kafka-console-producer.sh --bootstrap-server H:P --topic T
        [--property parse.key=true --property key.separator=:] [--producer-property k=v]
        [--command-config FILE | --producer.config FILE] [--compression-codec gzip]
        [--request-required-acks all] [--partition P]
    kafka-console-consumer.sh --bootstrap-server H:P --topic T [--from-beginning]
        [--partition P [--offset earliest|latest|N]] [--group G] [--max-messages N]
        [--timeout-ms MS] [--property print.key=true ...] [--consumer-property k=v]
        [--command-config FILE | --consumer.config FILE] [--isolation-level read_committed]

The producer sends one record per stdin line and prints nothing; the consumer prints one record
per line (``print.timestamp``, ``print.partition``, ``print.offset``, ``print.key``,
``key.separator``) and ``Processed a total of N messages`` on stderr when it stops.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from spark_kafkalite.cli.common import CliError
from spark_kafkalite.cli.console import cmd_consume, cmd_produce
from spark_kafkalite.cli.kafka_tools.tool import ToolParser, UsageError, require, run_tool

__all__ = ["producer_main", "consumer_main", "build_producer_parser", "build_consumer_parser"]


def _connection(parser: ToolParser, role: str) -> None:
    parser.add_argument("--bootstrap-server", help="REQUIRED: The server(s) to connect to.")
    parser.add_argument(
        "--command-config", help=f"Property file containing configs to be passed to the {role}."
    )
    parser.add_argument(f"--{role}.config", dest="role_config", help="Deprecated: use --command-config.")
    parser.add_argument(
        "--topic",
        help="The topic id to produce messages to." if role == "producer" else "The topic to consume on.",
    )
    parser.add_argument(
        f"--{role}-property",
        action="append",
        default=[],
        dest="client_property",
        help=f"A mechanism to pass user-defined properties in the form key=value to the {role}.",
    )
    parser.add_argument(
        "--property",
        action="append",
        default=[],
        help="A mechanism to pass user-defined properties in the form key=value.",
    )


def _shared_namespace(args: argparse.Namespace) -> dict[str, object]:
    if args.command_config and args.role_config:
        raise UsageError(
            "Options --command-config and --producer.config / --consumer.config cannot be used together"
        )
    if not args.bootstrap_server:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    require(args, "topic")
    return {
        "bootstrap_server": args.bootstrap_server,
        "command_config": args.command_config or args.role_config,
        "topic": args.topic,
        "property": args.property,
    }


def build_producer_parser() -> ToolParser:
    """The options of Kafka's ``ConsoleProducerOptions`` this tool supports."""
    parser = ToolParser(
        "kafka-console-producer.sh",
        "This tool helps to read data from standard input and publish it to Kafka.",
    )
    _connection(parser, "producer")
    parser.add_argument("--reader-property", action="append", default=[], help="Same as --property.")
    parser.add_argument(
        "--partition", type=int, help="The partition to produce to (default: the partitioner's choice)."
    )
    parser.add_argument(
        "--compression-codec",
        nargs="?",
        const="gzip",
        help="none, gzip (default without a value), snappy, lz4 or zstd.",
    )
    parser.add_argument(
        "--request-required-acks", help="The required acks of the producer requests (default all)."
    )
    parser.add_argument("--sync", action="store_true", help="Send each record as it is read (linger.ms=0).")
    parser.add_argument("--batch-size", type=int, help="Number of bytes per batch (batch.size).")
    parser.add_argument("--max-block-ms", type=int, help="How long a send may block (max.block.ms).")
    return parser


def _produce(args: argparse.Namespace) -> int:
    shared = _shared_namespace(args)
    overrides = []
    for flag, key in (
        ("compression_codec", "compression.type"),
        ("request_required_acks", "acks"),
        ("batch_size", "batch.size"),
        ("max_block_ms", "max.block.ms"),
    ):
        if getattr(args, flag) is not None:
            overrides.append(f"{key}={getattr(args, flag)}")
    if args.sync:
        overrides.append("linger.ms=0")
    produce = argparse.Namespace(
        **shared,
        partition=args.partition,
        producer_property=overrides + args.client_property,
    )
    produce.property = [*args.property, *args.reader_property]
    return cmd_produce(produce, sys.stdin, report=False)


def build_consumer_parser() -> ToolParser:
    """The options of Kafka's ``ConsoleConsumerOptions`` this tool supports."""
    parser = ToolParser(
        "kafka-console-consumer.sh",
        "This tool helps to read data from Kafka topics and outputs it to standard output.",
    )
    _connection(parser, "consumer")
    parser.add_argument("--formatter-property", action="append", default=[], help="Same as --property.")
    parser.add_argument("--partition", type=int, help="The partition to consume from (default: all).")
    parser.add_argument(
        "--offset",
        help="The offset to start from: a number, earliest or latest (default latest; needs --partition).",
    )
    parser.add_argument(
        "--from-beginning",
        action="store_true",
        help="Start with the earliest message when there is no committed offset.",
    )
    parser.add_argument("--group", help="The consumer group id of the consumer.")
    parser.add_argument(
        "--max-messages", type=int, help="The maximum number of messages to consume before exiting."
    )
    parser.add_argument(
        "--timeout-ms", type=int, help="Exit if no message is available for consumption for this long."
    )
    parser.add_argument("--isolation-level", help="read_committed or read_uncommitted (default).")
    parser.add_argument("--skip-message-on-error", action="store_true", help="Accepted for compatibility.")
    return parser


def _consume(args: argparse.Namespace) -> int:
    shared = _shared_namespace(args)
    if args.offset is not None and args.partition is None:
        raise UsageError("The partition is required when offset is specified.")
    if args.offset is not None and args.from_beginning:
        raise UsageError("Options from-beginning and offset cannot be specified together.")
    if args.group and args.partition is not None:
        raise CliError("Options group and partition cannot be specified together.")
    consumer_properties = list(args.client_property)
    if args.isolation_level:
        consumer_properties.append(f"isolation.level={args.isolation_level}")
    consume = argparse.Namespace(
        **shared,
        partition=args.partition,
        offset=args.offset,
        from_beginning=args.from_beginning,
        group=args.group,
        max_messages=args.max_messages,
        timeout_ms=args.timeout_ms,
        consumer_property=consumer_properties,
    )
    consume.property = [*args.property, *args.formatter_property]
    return cmd_consume(consume, sys.stdout)


def producer_main(argv: Sequence[str] | None = None) -> int:
    """``kafka-console-producer.sh``; returns the exit status."""
    return run_tool(build_producer_parser(), argv, _produce, "ERROR ")


def consumer_main(argv: Sequence[str] | None = None) -> int:
    """``kafka-console-consumer.sh``; returns the exit status."""
    return run_tool(
        build_consumer_parser(),
        argv,
        _consume,
        "ERROR Error processing message, terminating consumer process: ",
    )
