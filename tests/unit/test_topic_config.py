"""Topic configs: validation, broker defaults, LogConfig, incremental ops, metadata records,
the durable store and DescribeConfigs sources (pure logic; the wire is tested in
tests/integration/test_topic_configs.py)."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from broker.apis.config_helper import (
    ConfigSource,
    ConfigType,
    describe_broker_configs,
    describe_topic_configs,
)
from broker.config import KafkaConfig
from broker.controller.configuration_control import (
    AlterConfigOp,
    config_records,
    incremental_overrides,
    legacy_overrides,
)
from broker.controller.controller import CreatableTopicSpec, CreatePartitionsSpec
from broker.controller.metadata_image import (
    RESOURCE_TYPE_TOPIC,
    ConfigRecord,
    MetadataImage,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from broker.controller.single_node_controller import SingleNodeController
from broker.controller.topic_config_store import load_topic_configs, save_topic_configs
from broker.controller.topic_configs import (
    TOPIC_CONFIG_DEF,
    broker_default,
    log_config_for,
    validate_topic_overrides,
)
from broker.dynamic_broker_config import DynamicBrokerConfig
from spark_kafkalite.protocol.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidRequestError,
    UnknownTopicOrPartitionError,
)


def broker(**props: str) -> KafkaConfig:
    return KafkaConfig({"node.id": "1", **{k.replace("_", "."): v for k, v in props.items()}})


# ---------------------------------------------------------------------------------------------
# validation


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
        ({"cleanup.policy": "foo"}, "cleanup.policy"),
        ({"retention.ms": "abc"}, "retention.ms"),
        ({"retention.ms": "-2"}, "retention.ms"),
        ({"segment.bytes": "10"}, "segment.bytes"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio"),
        ({"preallocate": "yes"}, "preallocate"),
        ({"retention.ms": None}, "Null value not supported for topic configs: retention.ms"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "min.compaction.lag.ms"),
        ({"message.timestamp.type": "BrokerTime"}, "message.timestamp.type"),
        ({"leader.replication.throttled.replicas": "0:x"}, "leader.replication.throttled.replicas"),
    ],
)
def test_invalid_overrides_name_the_key(overrides: dict[str, str | None], needle: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        validate_topic_overrides(overrides)
    assert needle in str(info.value)
    assert info.value.error_code == 40


def test_valid_overrides_become_canonical_strings() -> None:
    assert validate_topic_overrides(
        {
            "retention.ms": " 60000 ",
            "cleanup.policy": "delete",
            "preallocate": "TRUE",
            "min.cleanable.dirty.ratio": "0.25",
        }
    ) == {
        "retention.ms": "60000",
        "cleanup.policy": "delete",
        "preallocate": "true",
        "min.cleanable.dirty.ratio": "0.25",
    }


def test_every_topic_default_passes_its_own_validator() -> None:
    for name, spec in TOPIC_CONFIG_DEF.items():
        spec.key.check(spec.key.default)
        assert spec.key.doc, name


# ---------------------------------------------------------------------------------------------
# broker defaults and LogConfig


def test_broker_synonyms_in_precedence_order_with_unit_conversion() -> None:
    assert broker_default("retention.ms", broker().values) == (168 * 3_600_000, "log.retention.hours")
    assert broker_default("retention.ms", broker(log_retention_minutes="5").values) == (
        300_000,
        "log.retention.minutes",
    )
    both = broker(log_retention_minutes="5", log_retention_ms="42").values
    assert broker_default("retention.ms", both) == (42, "log.retention.ms")
    assert broker_default("retention.ms", broker(log_retention_hours="-1").values) == (
        -1,
        "log.retention.hours",
    )
    assert broker_default("segment.ms", broker(log_roll_hours="2").values) == (7_200_000, "log.roll.hours")
    assert broker_default("max.message.bytes", broker(message_max_bytes="1000").values) == (
        1000,
        "message.max.bytes",
    )
    # no broker synonym at all: the topic default
    assert broker_default("leader.replication.throttled.replicas", broker().values) == ([], None)


def test_log_config_from_broker_defaults_and_overrides() -> None:
    values = broker(log_segment_bytes="2000000", log_retention_hours="1").values
    plain = log_config_for(values, {})
    assert plain.segment_bytes == 2_000_000 and plain.retention_ms == 3_600_000
    assert plain.flush_interval_messages is None and plain.cleanup_policy == ("delete",)
    tuned = log_config_for(values, {"segment.bytes": "4096", "retention.ms": "-1", "flush.messages": "10"})
    assert tuned.segment_bytes == 4096 and tuned.retention_ms == -1 and tuned.flush_interval_messages == 10
    assert tuned.index_interval_bytes == plain.index_interval_bytes


# ---------------------------------------------------------------------------------------------
# incremental / legacy alter


def test_incremental_ops() -> None:
    values = broker().values
    current = {"retention.ms": "1000", "segment.bytes": "100000"}
    new = incremental_overrides(
        current,
        [
            ("retention.ms", AlterConfigOp.DELETE, None),
            ("segment.bytes", AlterConfigOp.SET, "200000"),
            ("cleanup.policy", AlterConfigOp.APPEND, "delete"),
        ],
        values,
    )
    assert new == {"segment.bytes": "200000", "cleanup.policy": "delete"}  # APPEND started from the default
    assert current == {"retention.ms": "1000", "segment.bytes": "100000"}  # not mutated
    assert incremental_overrides(new, [("cleanup.policy", AlterConfigOp.SUBTRACT, "delete")], values) == {
        "segment.bytes": "200000",
        "cleanup.policy": "",
    }
    with pytest.raises(InvalidConfigError, match="Unknown topic config name: no.such"):
        incremental_overrides({}, [("no.such", AlterConfigOp.DELETE, None)], values)


def test_incremental_errors() -> None:
    values = broker().values
    with pytest.raises(InvalidConfigError, match="retention.ms because its type is not LIST"):
        incremental_overrides({}, [("retention.ms", AlterConfigOp.APPEND, "5")], values)
    with pytest.raises(InvalidRequestError, match="duplicate config keys: retention.ms"):
        incremental_overrides({}, [("retention.ms", 0, "5"), ("retention.ms", 1, None)], values)
    with pytest.raises(InvalidRequestError, match="Unknown operation type 9"):
        incremental_overrides({}, [("retention.ms", 9, "5")], values)
    with pytest.raises(InvalidConfigError, match="retention.ms"):
        incremental_overrides({}, [("retention.ms", AlterConfigOp.SET, "soon")], values)


def test_legacy_alter_replaces_everything() -> None:
    assert legacy_overrides([("retention.bytes", "100")]) == {"retention.bytes": "100"}
    with pytest.raises(InvalidRequestError):
        legacy_overrides([("retention.bytes", "100"), ("retention.bytes", "200")])


def test_config_records_diff() -> None:
    records = config_records("t", {"a.b": "1", "gone": "x"}, {"a.b": "2", "new": "y"})
    assert records == [
        ConfigRecord(RESOURCE_TYPE_TOPIC, "t", "a.b", "2"),
        ConfigRecord(RESOURCE_TYPE_TOPIC, "t", "new", "y"),
        ConfigRecord(RESOURCE_TYPE_TOPIC, "t", "gone", None),
    ]
    assert config_records("t", {"same": "1"}, {"same": "1"}) == []


# ---------------------------------------------------------------------------------------------
# metadata image


def test_image_applies_config_records_and_drops_them_with_the_topic() -> None:
    tid = uuid.uuid4()
    image = MetadataImage("c", 1)
    image, delta = image.apply(
        [
            TopicRecord("t", tid),
            PartitionRecord(tid, 0, (1,), (1,), 1),
            ConfigRecord(2, "t", "retention.ms", "5"),
        ]
    )
    assert dict(image.topic_config("t")) == {"retention.ms": "5"}
    assert delta.changed_topic_configs == ()  # part of the creation
    image, delta = image.apply(
        [ConfigRecord(2, "t", "segment.ms", "9"), ConfigRecord(2, "t", "retention.ms", None)]
    )
    assert dict(image.topic_config("t")) == {"segment.ms": "9"} and delta.changed_topic_configs == ("t",)
    image, _ = image.apply([RemoveTopicRecord(tid)])
    assert image.topic_configs == {} and dict(image.topic_config("t")) == {}
    with pytest.raises(ValueError):
        image.apply([ConfigRecord(2, "missing", "retention.ms", "1")])


# ---------------------------------------------------------------------------------------------
# controller


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def make_controller() -> tuple[SingleNodeController, list[MetadataImage]]:
    state = [MetadataImage("c", 1)]

    def commit(records: list) -> None:
        state[0] = state[0].apply(records)[0]

    controller = SingleNodeController(1, lambda: state[0], commit)
    commit([RegisterBrokerRecord(1, {"PLAINTEXT": ("h", 1)})])
    return controller, state


def test_controller_create_with_configs_alter_and_create_partitions() -> None:
    controller, state = make_controller()
    [bad] = run(controller.create_topics([CreatableTopicSpec("t", 2, configs={"cleanup.policy": "foo"})]))
    assert isinstance(bad.error, InvalidConfigError) and "t" not in state[0].topics
    [dry] = run(
        controller.create_topics(
            [CreatableTopicSpec("t", 2, configs={"retention.ms": "7"})], validate_only=True
        )
    )
    assert dry.error is None and dry.configs == {"retention.ms": "7"} and "t" not in state[0].topics
    [ok] = run(controller.create_topics([CreatableTopicSpec("t", 2, configs={"retention.ms": "7"})]))
    assert ok.error is None and dict(state[0].topic_config("t")) == {"retention.ms": "7"}

    assert run(controller.incremental_alter_topic_configs([("t", [("segment.ms", 0, "100")])], {})) == [None]
    assert dict(state[0].topic_config("t")) == {"retention.ms": "7", "segment.ms": "100"}
    assert run(controller.alter_topic_configs([("t", [("retention.bytes", "5")])], validate_only=True)) == [
        None
    ]
    assert dict(state[0].topic_config("t")) == {"retention.ms": "7", "segment.ms": "100"}
    assert run(controller.alter_topic_configs([("t", [("retention.bytes", "5")])])) == [None]
    assert dict(state[0].topic_config("t")) == {"retention.bytes": "5"}
    [missing] = run(controller.alter_topic_configs([("nope", [])]))
    assert isinstance(missing, UnknownTopicOrPartitionError)

    assert run(controller.create_partitions([CreatePartitionsSpec("t", 5)])) == [("t", None)]
    assert sorted(state[0].topics["t"].partitions) == [0, 1, 2, 3, 4]
    errors = dict(
        run(controller.create_partitions([CreatePartitionsSpec("t", 5), CreatePartitionsSpec("x", 2)]))
    )
    assert isinstance(errors["t"], InvalidPartitionsError) and isinstance(
        errors["x"], UnknownTopicOrPartitionError
    )
    [(_, wrong)] = run(controller.create_partitions([CreatePartitionsSpec("t", 6, [[7]])]))
    assert wrong is not None and wrong.error_code == 39  # INVALID_REPLICA_ASSIGNMENT


def test_bootstrap_restores_configs_only_for_the_same_topic_id() -> None:
    controller, _ = make_controller()
    tid, other = uuid.uuid4(), uuid.uuid4()
    records = controller.bootstrap_records(
        {"PLAINTEXT": ("h", 1)},
        None,
        {"a": (tid, 1), "b": (tid, 1)},
        topic_configs={"a": (tid, {"retention.ms": "9", "bogus": "1"}), "b": (other, {"retention.ms": "9"})},
    )
    configs = [r for r in records if isinstance(r, ConfigRecord)]
    assert configs == [ConfigRecord(2, "a", "retention.ms", "9")]


# ---------------------------------------------------------------------------------------------
# store


def test_store_round_trip_and_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "topic-configs.json"
    assert load_topic_configs(path) == {}
    tid = uuid.uuid4()
    save_topic_configs(path, {"t": (tid, {"retention.ms": "5"})})
    assert load_topic_configs(path) == {"t": (tid, {"retention.ms": "5"})}
    assert json.loads(path.read_text())["version"] == 1
    path.write_text("{not json")
    assert load_topic_configs(path) == {}


# ---------------------------------------------------------------------------------------------
# describe


def test_describe_topic_sources_and_synonyms() -> None:
    config = broker(log_retention_hours="1")
    entries = {
        e.name: e for e in describe_topic_configs(DynamicBrokerConfig(config, 1), {"segment.bytes": "5000"})
    }
    assert set(entries) == set(TOPIC_CONFIG_DEF)
    seg = entries["segment.bytes"]
    assert (seg.value, seg.source, seg.read_only, seg.config_type) == (
        "5000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
        False,
        ConfigType.INT,
    )
    assert seg.synonyms[0] == ("segment.bytes", "5000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    ret = entries["retention.ms"]
    assert (ret.value, ret.source) == ("3600000", ConfigSource.STATIC_BROKER_CONFIG)
    assert ret.synonyms == (
        ("log.retention.hours", "1", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    )
    assert (entries["cleanup.policy"].value, entries["cleanup.policy"].source) == (
        "delete",
        ConfigSource.DEFAULT_CONFIG,
    )
    names = [
        e.name for e in describe_topic_configs(DynamicBrokerConfig(config, 1), {}, ["retention.ms", "nope"])
    ]
    assert names == ["retention.ms"]


def test_describe_broker_static_or_default() -> None:
    entries = {e.name: e for e in describe_broker_configs(DynamicBrokerConfig(broker(num_partitions="3"), 1))}
    assert (entries["num.partitions"].value, entries["num.partitions"].source) == (
        "3",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert entries["log.segment.bytes"].source == ConfigSource.DEFAULT_CONFIG
    assert entries["num.partitions"].read_only and not entries["log.segment.bytes"].read_only
