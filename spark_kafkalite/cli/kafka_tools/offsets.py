"""``kafka-get-offsets.sh`` and ``kafka-delete-records.sh``: Kafka's ``GetOffsetShell`` and
``DeleteRecordsCommand`` over our admin client (ListOffsets, DeleteRecords).

    kafka-get-offsets.sh --bootstrap-server H:P [--topic REGEX] [--partitions 0,1]
        [--topic-partitions t:0-2,u] [--time latest|earliest|max-timestamp|-1|-2|-3|TIMESTAMP_MS]
        [--exclude-internal-topics]
    kafka-delete-records.sh --bootstrap-server H:P --offset-json-file FILE

``kafka-get-offsets.sh`` prints ``topic:partition:offset`` per partition, sorted;
``kafka-delete-records.sh`` reads ``{"partitions": [{"topic": "t", "partition": 0, "offset": 5}],
"version": 1}`` (offset -1: the high watermark) and prints ``partition: t-0<TAB>low_watermark: 5``
(or ``error: ...``) per partition.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from typing import Any

from spark_kafkalite.cli.common import CliError, client_config
from spark_kafkalite.cli.kafka_tools.tool import (
    ToolParser,
    UsageError,
    add_connection,
    include_list,
    require,
    run_tool,
)

__all__ = [
    "get_offsets_main",
    "delete_records_main",
    "build_get_offsets_parser",
    "build_delete_records_parser",
    "parse_time",
]

_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4, "latest-tiered": -5}


def parse_time(text: str) -> int:
    """``--time``: a name of Kafka's ``OffsetSpec`` or a number (-1 latest, -2 earliest, -3 the
    record with the largest timestamp, else a timestamp in ms).

    Raises:
        CliError: neither.
    """
    if text.lower() in _TIMES:
        return _TIMES[text.lower()]
    try:
        return int(text)
    except ValueError:
        raise CliError(
            f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / -3 or max-timestamp, or a specified long format timestamp"
        ) from None


def build_get_offsets_parser() -> ToolParser:
    """The options of Kafka's ``GetOffsetShell``."""
    parser = ToolParser("kafka-get-offsets.sh", "An interactive shell for getting topic-partition offsets.")
    add_connection(parser)
    parser.add_argument("--broker-list", help="Deprecated: use --bootstrap-server.")
    parser.add_argument(
        "--topic", help="The topic to get the offsets for: a regular expression (default: all topics)."
    )
    parser.add_argument("--partitions", help="Comma separated list of partition ids (default: all).")
    parser.add_argument(
        "--topic-partitions", help="Comma separated list of topic-partition patterns: t:0-2,u:1,v"
    )
    parser.add_argument(
        "--time",
        default="latest",
        help="latest / -1, earliest / -2, max-timestamp / -3 or a timestamp in ms.",
    )
    parser.add_argument("--exclude-internal-topics", action="store_true", help="Exclude internal topics.")
    return parser


def _partition_filter(spec: str) -> Any:
    """``"0-2"`` / ``"3"`` / ``"5-"`` / ``""`` -> a predicate on partition ids."""
    if not spec:
        return lambda p: True
    low, dash, high = spec.partition("-")
    if not dash:
        return lambda p: p == int(low)
    return lambda p: (not low or p >= int(low)) and (not high or p < int(high))


def _selected(admin: Any, args: argparse.Namespace) -> list[Any]:
    from spark_kafkalite.client import TopicPartition

    if args.topic_partitions and (args.topic or args.partitions):
        raise UsageError("Option topic-partitions cannot be used with --topic or --partitions")
    names = [n for n in admin.list_topics() if not (args.exclude_internal_topics and n.startswith("__"))]
    rules: list[tuple[re.Pattern[str], Any]] = []
    if args.topic_partitions:
        for item in args.topic_partitions.split(","):
            topic, _, parts = item.partition(":")
            rules.append((include_list(topic or ".*"), _partition_filter(parts)))
    else:
        wanted = {int(p) for p in args.partitions.split(",")} if args.partitions else None
        rules.append((include_list(args.topic or ".*"), lambda p: wanted is None or p in wanted))
    matched = [n for n in names if any(r.fullmatch(n) for r, _ in rules)]
    described = admin.describe_topics(matched) if matched else {}
    return [
        TopicPartition(topic, info.partition)
        for topic in sorted(described)
        for info in described[topic]
        if any(r.fullmatch(topic) and keep(info.partition) for r, keep in rules)
    ]


def _get_offsets(args: argparse.Namespace) -> int:
    from spark_kafkalite.client import KafkaAdminClient

    args.bootstrap_server = args.bootstrap_server or args.broker_list
    if not args.bootstrap_server:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    spec = parse_time(args.time)
    with KafkaAdminClient(
        client_config(args, "kafka-get-offsets", {"exclude.internal.topics": "false"})
    ) as admin:
        tps = _selected(admin, args)
        if not tps:
            raise _TerseError("Could not match any topic-partitions with the specified filters")
        found = admin.list_offsets(dict.fromkeys(tps, spec))
        for tp in sorted(found):
            offset = found[tp].offset
            print(f"{tp.topic}:{tp.partition}:{'' if offset < 0 else offset}")
    return 0


class _TerseError(Exception):
    """Kafka's ``TerseException``: printed as ``Error occurred: <message>``."""


def build_delete_records_parser() -> ToolParser:
    """The options of Kafka's ``DeleteRecordsCommand``."""
    parser = ToolParser(
        "kafka-delete-records.sh",
        "This tool helps to delete records of the given partitions down to the specified offset.",
    )
    add_connection(parser)
    parser.add_argument(
        "--offset-json-file",
        help='REQUIRED: The JSON file with offset per partition: {"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version": 1}',
    )
    return parser


def _offsets_of(path: str) -> dict[Any, int]:
    from spark_kafkalite.client import TopicPartition

    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
    except OSError as exc:
        raise CliError(f"cannot read --offset-json-file {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError:
        raise CliError("The input string is not a valid JSON") from None
    if not isinstance(document, dict) or not isinstance(document.get("partitions"), list):
        raise CliError("Missing partitions field")
    out: dict[Any, int] = {}
    duplicates = []
    for item in document["partitions"]:
        try:
            tp = TopicPartition(str(item["topic"]), int(item["partition"]))
            offset = int(item["offset"])
        except (KeyError, TypeError, ValueError):
            raise CliError(f"Each partition needs topic, partition and offset: {item}") from None
        if tp in out:
            duplicates.append(f"{tp.topic}-{tp.partition}")
        out[tp] = offset
    if duplicates:
        raise CliError(f"Offset json file contains duplicate topic partitions: {','.join(duplicates)}")
    return out


def _delete_records(args: argparse.Namespace) -> int:
    from spark_kafkalite.client import KafkaAdminClient

    if not args.bootstrap_server:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    require(args, "offset-json-file")
    offsets = _offsets_of(args.offset_json_file)
    with KafkaAdminClient(client_config(args, "kafka-delete-records")) as admin:
        print("Executing records delete operation")
        results = admin.delete_records(offsets)
        print("Records delete operation completed:")
        for tp in sorted(results):
            result = results[tp]
            outcome = f"error: {result}" if isinstance(result, Exception) else f"low_watermark: {result}"
            print(f"partition: {tp.topic}-{tp.partition}\t{outcome}")
    return 0


def get_offsets_main(argv: Sequence[str] | None = None) -> int:
    """``kafka-get-offsets.sh``; returns the exit status."""
    return run_tool(build_get_offsets_parser(), argv, _get_offsets, "Error occurred: ")


def delete_records_main(argv: Sequence[str] | None = None) -> int:
    """``kafka-delete-records.sh``; returns the exit status."""
    return run_tool(build_delete_records_parser(), argv, _delete_records, "Error occurred: ")
