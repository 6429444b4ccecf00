"""Client config parsing: string values coerced by the defaults' types, bootstrap and acks."""

from __future__ import annotations

import pytest

from spark_kafkalite.client.config import parse_acks, parse_bootstrap_servers, parse_config
from spark_kafkalite.protocol.errors import InvalidConfigError


def test_string_values_are_coerced_to_the_default_types() -> None:
    cfg = parse_config(
        {"bootstrap.servers": "h:1", "linger.ms": "7", "check.crcs": "false", "unknown.key": "x"},
        {"linger.ms": 5, "check.crcs": True},
        "test",
    )
    assert cfg["linger.ms"] == 7
    assert cfg["check.crcs"] is False
    assert cfg["request.timeout.ms"] == 30000
    assert cfg["unknown.key"] == "x"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "bootstrap.servers"),
        ({"bootstrap.servers": "h:1", "linger.ms": "soon"}, "linger.ms"),
        ({"bootstrap.servers": "h:1", "security.protocol": "TLS"}, "SASL_SSL"),
    ],
)
def test_bad_config_raises_invalid_config(config: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        parse_config(config, {"linger.ms": 5}, "test")


def test_bootstrap_servers_parsing() -> None:
    assert parse_bootstrap_servers("a:1, b:2,PLAINTEXT://c:3") == [("a", 1), ("b", 2), ("c", 3)]
    assert parse_bootstrap_servers(["[::1]:9092"]) == [("::1", 9092)]
    with pytest.raises(InvalidConfigError):
        parse_bootstrap_servers("nohostport")


@pytest.mark.parametrize(
    ("value", "expected"), [("all", -1), ("-1", -1), (-1, -1), ("1", 1), (1, 1), ("0", 0), (0, 0)]
)
def test_acks(value: object, expected: int) -> None:
    assert parse_acks(value) == expected


def test_bad_acks() -> None:
    with pytest.raises(InvalidConfigError):
        parse_acks("2")
