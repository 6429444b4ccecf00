"""The pure parts of the Kafka-style scripts: Kafka's ``--add-config`` list syntax, the topic
include list, ACL operation names, topic id printing and joptsimple-style usage errors."""

from __future__ import annotations

import uuid

import pytest

from spark_kafkalite.cli.kafka_tools.acls import operation
from spark_kafkalite.cli.kafka_tools.offsets import parse_time
from spark_kafkalite.cli.kafka_tools.tool import UsageError, include_list, parse_config_list
from spark_kafkalite.cli.kafka_tools.topics import build_parser, kafka_uuid


def test_add_config_list_with_brackets() -> None:
    assert parse_config_list("k1=v1,k2=[a,b,c],k3=v3") == {"k1": "v1", "k2": "a,b,c", "k3": "v3"}
    assert parse_config_list("cleanup.policy=[compact,delete]") == {"cleanup.policy": "compact,delete"}
    with pytest.raises(UsageError, match="key=val"):
        parse_config_list("k1=v1,oops")


def test_include_list_matches_whole_names() -> None:
    pattern = include_list("'orders.*, payments'")
    assert [n for n in ("orders", "orders-eu", "payments", "payments-x") if pattern.fullmatch(n)] == [
        "orders",
        "orders-eu",
        "payments",
    ]


def test_acl_operation_names_as_kafka_reads_them() -> None:
    assert [
        operation(n) for n in ("All", "read", "DescribeConfigs", "DESCRIBE_CONFIGS", "IdempotentWrite")
    ] == [
        "ALL",
        "READ",
        "DESCRIBE_CONFIGS",
        "DESCRIBE_CONFIGS",
        "IDEMPOTENT_WRITE",
    ]
    with pytest.raises(UsageError, match="Unknown operation name: Any"):
        operation("Any")


def test_topic_id_is_printed_as_kafka_uuid() -> None:
    # Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding
    assert kafka_uuid(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert kafka_uuid(uuid.UUID("ffffffff-ffff-ffff-ffff-ffffffffffff")) == "_____________________w"


def test_get_offsets_time_names() -> None:
    assert [parse_time(t) for t in ("latest", "earliest", "max-timestamp", "-2", "1700000000000")] == [
        -1,
        -2,
        -3,
        -2,
        1700000000000,
    ]


def test_usage_errors_read_as_joptsimple_messages() -> None:
    parser = build_parser()
    with pytest.raises(UsageError, match="^foo is not a recognized option$"):
        parser.parse_tool_args(["--list", "--foo"])
    with pytest.raises(UsageError, match="^Option partitions requires an argument$"):
        parser.parse_tool_args(["--create", "--partitions"])
    with pytest.raises(UsageError, match="^Cannot parse argument 'x' of option partitions$"):
        parser.parse_tool_args(["--create", "--partitions", "x"])
    assert parser.parse_tool_args(["--create", "--topic=t", "--partitions=3"]).partitions == 3


def test_console_scripts_are_the_tools_table() -> None:
    # pip installs [project.scripts]; `kafkalite kafka-path` writes bin/ from TOOLS: the same nine
    import tomllib
    from pathlib import Path

    from spark_kafkalite.cli.kafka_tools import TOOLS

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    scripts = pyproject["project"]["scripts"]
    assert {name: target for name, target in scripts.items() if name.startswith("kafka-")} == TOOLS
    assert len(TOOLS) == 9
