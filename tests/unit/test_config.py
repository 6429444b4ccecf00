"""Broker configuration: properties parsing, overrides, typed values, errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import CONFIG_DEF, ConfigError, KafkaConfig, parse_overrides, parse_properties

BASE = {"node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": "/tmp/x"}


def make(**extra: str) -> KafkaConfig:
    props = dict(BASE)
    props.update({k.replace("_", "."): v for k, v in extra.items()})
    return KafkaConfig(props)


def test_properties_syntax() -> None:
    text = (
        "# comment\n! also a comment\n\n"
        "a=1\n"
        "b : two\n"
        "c three\n"
        "  d=  spaced value  \n"
        "e=line one \\\n    continued\n"
        "f=tab\\tand\\u0041\n"
        "g=\n"
    )
    props = parse_properties(text)
    assert props == {
        "a": "1",
        "b": "two",
        "c": "three",
        "d": "spaced value  ",
        "e": "line one continued",
        "f": "tab\tandA",
        "g": "",
    }


def test_defaults_and_types() -> None:
    config = make()
    assert config.node_id == 1
    assert config.num_partitions == 1
    assert config.auto_create_topics_enable is True
    assert config.message_max_bytes == 1048588
    assert config.socket_request_max_bytes == 104857600
    assert config["log.segment.bytes"] == 1073741824
    assert config.log_dirs == [Path("/tmp/x")]
    assert config.listeners[0].port == 0 and config.listeners[0].host == "127.0.0.1"
    assert config.advertised_listeners == config.listeners
    assert config.log_retention_ms == 168 * 3_600_000


def test_typed_parsing() -> None:
    config = make(
        **{
            "num.partitions": "6",
            "auto.create.topics.enable": "FALSE",
            "log.dirs": "/a, /b",
            "log.retention.minutes": "5",
            "log.flush.interval.messages": "10",
        }
    )
    assert config.num_partitions == 6
    assert config.auto_create_topics_enable is False
    assert config.log_dirs == [Path("/a"), Path("/b")]
    assert config.metadata_log_dir == Path("/a")  # the first log dir unless metadata.log.dir is set
    assert make(**{"metadata.log.dir": "/meta"}).metadata_log_dir == Path("/meta")
    assert config.log_retention_ms == 300_000
    assert config["log.flush.interval.messages"] == 10


def test_log_dir_fallback() -> None:
    props = {"node.id": "3", "log.dir": "/data/k"}
    config = KafkaConfig(props)
    assert config.log_dirs == [Path("/data/k")]
    assert config.listeners[0].port == 9092 and config.listeners[0].host == ""


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("num.partitions", "zero", "invalid int"),
        ("num.partitions", "0", "at least 1"),
        ("auto.create.topics.enable", "yes", "true or false"),
        ("log.segment.bytes", "10", "at least 14"),
        ("log.segment.bytes", "99999999999", "32-bit"),
        ("message.max.bytes", "-5", "at least 0"),
        ("log.cleanup.policy", "delete,shred", "not one of"),
        ("process.roles", "broker,witness", "not one of"),
        ("listeners", "PLAINTEXT:/127.0.0.1:9092", "invalid listener"),
        ("listeners", "PLAINTEXT://127.0.0.1:70000", "out of range"),
        ("listeners", "BOGUS://127.0.0.1:9093", "listener.security.protocol.map"),
        ("advertised.listeners", "OTHER://h:1", "listener.security.protocol.map"),
        ("node.id", "-1", "must be set"),
        ("log.message.timestamp.type", "BrokerTime", "not one of"),
        ("compression.type", "brotli", "not one of"),
        ("compression.gzip.level", "0", "between 1 and 9 or equal to -1"),
        ("compression.zstd.level", "23", "between -131072 and 22"),
        ("log.cleanup.policy", "shred", "log.cleanup.policy"),
    ],
)
def test_bad_values_name_the_key(key: str, value: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        make(**{key: value})
    assert info.value.key == key
    assert str(info.value).startswith(f"{key}:")
    assert fragment in str(info.value)


def test_unknown_key_rejected() -> None:
    with pytest.raises(ConfigError) as info:
        make(**{"log.segmnet.bytes": "1000"})
    assert info.value.key == "log.segmnet.bytes"
    assert "unknown configuration key" in str(info.value)


def test_advertised_listener_must_match_a_listener() -> None:
    props = dict(
        BASE,
        **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "advertised.listeners": "EXTERNAL://h:1",
        },
    )
    with pytest.raises(ConfigError) as info:
        KafkaConfig(props)
    assert info.value.key == "advertised.listeners"


def test_empty_advertised_listeners_defaults_to_listeners() -> None:
    config = make(**{"advertised.listeners": ""})
    assert config.advertised_listeners == config.listeners
    assert len(config.advertised_listeners) == 1


def test_shipped_broker_properties_advertise_the_bound_listener() -> None:
    path = Path(__file__).resolve().parents[2] / "conf" / "broker.properties"
    config = KafkaConfig.from_file(path, ["listeners=PLAINTEXT://127.0.0.1:0"])
    assert config.advertised_listeners == config.listeners
    assert config.advertised_listeners[0].port == 0


def test_broker_id_must_match_node_id() -> None:
    with pytest.raises(ConfigError) as info:
        make(**{"broker.id": "2"})
    assert info.value.key == "broker.id"
    assert KafkaConfig({"broker.id": "4", "log.dirs": "/x"}).node_id == 4


def test_overrides_win(tmp_path: Path) -> None:
    path = tmp_path / "b.properties"
    path.write_text("node.id=1\nlog.dirs=/x\nnum.partitions=2\n", encoding="utf-8")
    config = KafkaConfig.from_file(path, ["num.partitions=7", "listeners=PLAINTEXT://:0"])
    assert config.num_partitions == 7
    assert config.listeners[0].port == 0
    assert parse_overrides(["a=b=c"]) == {"a": "b=c"}
    with pytest.raises(ConfigError):
        parse_overrides(["novalue"])


def test_every_key_has_doc_and_valid_default() -> None:
    for key, spec in CONFIG_DEF.items():
        assert spec.doc, key
        spec.check(spec.default)
