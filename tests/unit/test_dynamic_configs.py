"""Dynamic broker configs and GROUP config resources: the controller's validation and records
(``ConfigurationControlManager`` / ``DynamicBrokerConfig.validate`` / ``GroupConfig.validate``),
the metadata image, the broker's effective values and sources, and the single-node store."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.apis.config_helper import describe_broker_default_configs, describe_group_configs
from broker.config import KafkaConfig
from broker.controller.group_configs import group_config
from broker.controller.metadata_image import (
    RESOURCE_TYPE_BROKER,
    RESOURCE_TYPE_GROUP,
    ConfigRecord,
    MetadataImage,
    MetadataRecord,
)
from broker.controller.metadata_snapshot import diff_images, image_to_records
from broker.controller.resource_configs import alter_resource_configs
from broker.controller.single_node_controller import SingleNodeController
from broker.dynamic_broker_config import DynamicBrokerConfig
from spark_kafkalite.protocol.configs import AlterConfigOp, ConfigSource
from spark_kafkalite.protocol.errors import InvalidConfigError, InvalidRequestError

SET, DELETE, APPEND = int(AlterConfigOp.SET), int(AlterConfigOp.DELETE), int(AlterConfigOp.APPEND)
BROKER, GROUP = RESOURCE_TYPE_BROKER, RESOURCE_TYPE_GROUP


def config(**props: str) -> KafkaConfig:
    return KafkaConfig({"node.id": "1", **props})


def alter(image: MetadataImage, *changes: tuple, incremental: bool = True) -> tuple[MetadataImage, list]:
    records, errors = alter_resource_configs(image, incremental, changes, config().values, False)
    return image.apply(records)[0], errors


def test_broker_keys_that_cannot_change_are_refused_as_kafka_words_it() -> None:
    image = MetadataImage("c", 1)
    _, errors = alter(image, (BROKER, "1", [("num.partitions", SET, "3"), ("log.dirs", SET, "/x")]))
    assert isinstance(errors[0], InvalidRequestError)
    assert errors[0].message == "Cannot update these configs dynamically: Set(log.dirs, num.partitions)"
    _, errors = alter(image, (BROKER, "1", [("message.max.bytes", SET, "big")]))
    assert isinstance(errors[0], InvalidRequestError) and "message.max.bytes" in str(errors[0])
    _, errors = alter(image, (BROKER, "", [("max.connections.per.ip.overrides", SET, "no-port")]))
    assert isinstance(errors[0], InvalidRequestError) and "max.connections.per.ip.overrides" in str(errors[0])
    _, errors = alter(image, (BROKER, "", [("max.connections.per.ip", SET, "0")]))
    assert isinstance(errors[0], InvalidRequestError) and "only if" in str(errors[0])
    _, errors = alter(image, (BROKER, "one", [("message.max.bytes", SET, "1")]))
    assert errors[0].message == "Invalid broker name one"


def test_broker_configs_per_broker_and_cluster_default() -> None:
    image, errors = alter(
        MetadataImage("c", 1),
        (BROKER, "", [("message.max.bytes", SET, "2000"), ("background.threads", SET, "9")]),
        (BROKER, "1", [("log.cleanup.policy", APPEND, "compact"), ("log.retention.ms", SET, "60000")]),
    )
    assert errors == [None, None]
    assert dict(image.resource_config(BROKER, "")) == {"background.threads": "9", "message.max.bytes": "2000"}
    # APPEND starts from the broker's current value (log.cleanup.policy=delete)
    assert image.resource_config(BROKER, "1")["log.cleanup.policy"] == "delete,compact"
    dynamic = DynamicBrokerConfig(config(**{"message.max.bytes": "5000"}), 1)
    assert dynamic.update(image) == {"message.max.bytes", "log.cleanup.policy", "log.retention.ms"}
    values = dynamic.config.values
    assert (values["message.max.bytes"], values["log.retention.ms"]) == (2000, 60000)
    assert dynamic.synonyms("message.max.bytes") == [
        ("message.max.bytes", 2000, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("message.max.bytes", 5000, ConfigSource.STATIC_BROKER_CONFIG),
        ("message.max.bytes", 1048588, ConfigSource.DEFAULT_CONFIG),
    ]
    assert dynamic.update(image) == set()  # same resources: nothing to do
    # the per-broker value wins over the default; DELETE goes back to the static value
    image, _ = alter(image, (BROKER, "1", [("message.max.bytes", SET, "3000")]))
    assert dynamic.update(image) == {"message.max.bytes"} and values["message.max.bytes"] == 3000
    image, _ = alter(
        image,
        (BROKER, "1", [("message.max.bytes", DELETE, None)]),
        (BROKER, "", [("message.max.bytes", DELETE, None)]),
    )
    assert dynamic.update(image) == {"message.max.bytes"} and values["message.max.bytes"] == 5000
    described = describe_broker_default_configs(dynamic)
    assert [(d.name, d.value, d.source) for d in described] == [
        ("background.threads", "9", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    ]


def test_group_configs_are_validated_against_the_broker_bounds() -> None:
    image = MetadataImage("c", 1)
    cases = {
        "nope": "Unknown group config name: nope",
        "consumer.session.timeout.ms": "consumer.session.timeout.ms must be less than or equal to "
        "group.consumer.max.session.timeout.ms",
        "share.record.lock.duration.ms": "share.record.lock.duration.ms must be greater than or equal to "
        "group.share.min.record.lock.duration.ms",
        "share.auto.offset.reset": "share.auto.offset.reset",
    }
    values = {
        "nope": "1",
        "consumer.session.timeout.ms": "70000",
        "share.record.lock.duration.ms": "2000",
        "share.auto.offset.reset": "middle",
    }
    for key, message in cases.items():
        _, errors = alter(image, (GROUP, "g", [(key, SET, values[key])]))
        assert isinstance(errors[0], InvalidConfigError) and message in str(errors[0]), key
    _, errors = alter(image, (GROUP, "", [("consumer.session.timeout.ms", SET, "50000")]))
    assert isinstance(errors[0], InvalidRequestError)
    # a session timeout must exceed the heartbeat interval, checked on the whole set
    _, errors = alter(image, (GROUP, "g", [("share.heartbeat.interval.ms", SET, "15000")]))
    assert errors == [None]
    _, errors = alter(
        image,
        (GROUP, "g", [("share.heartbeat.interval.ms", "15000"), ("share.session.timeout.ms", "45000")]),
        incremental=False,
    )
    assert errors == [None]
    image, errors = alter(image, (GROUP, "g", [("consumer.session.timeout.ms", SET, "50000")]))
    assert errors == [None]
    effective = group_config(image, "g", config().values)
    assert (effective.consumer_session_timeout_ms, effective.consumer_heartbeat_interval_ms) == (50000, 5000)
    assert group_config(image, "other", config().values).consumer_session_timeout_ms == 45000
    described = {
        d.name: d for d in describe_group_configs(image.resource_config(GROUP, "g"), config().values)
    }
    assert (described["consumer.session.timeout.ms"].source, described["share.auto.offset.reset"].value) == (
        ConfigSource.GROUP_CONFIG,
        "latest",
    )


def test_image_round_trip_and_delta() -> None:
    records: list[MetadataRecord] = [
        ConfigRecord(BROKER, "", "log.retention.ms", "1000"),
        ConfigRecord(GROUP, "g", "consumer.session.timeout.ms", "50000"),
    ]
    image, delta = MetadataImage("c", 1).apply(records)
    assert set(delta.changed_resource_configs) == {(BROKER, ""), (GROUP, "g")}
    rebuilt = MetadataImage("c", 1).apply(image_to_records(image))[0]
    assert rebuilt.resource_configs == image.resource_configs
    assert diff_images(MetadataImage("c", 1), image).changed_resource_configs == ((BROKER, ""), (GROUP, "g"))
    emptied = image.apply([ConfigRecord(GROUP, "g", "consumer.session.timeout.ms", None)])[0]
    assert (GROUP, "g") not in emptied.resource_configs


def test_single_node_controller_stores_resource_configs(tmp_path: Path) -> None:
    state = {"image": MetadataImage("c", 1)}

    def commit(records: list[MetadataRecord]) -> None:
        state["image"] = state["image"].apply(records)[0]

    def controller() -> SingleNodeController:
        return SingleNodeController(
            1, lambda: state["image"], commit, resource_configs_file=tmp_path / "resource-configs.json"
        )

    errors = asyncio.run(
        controller().alter_resource_configs([(BROKER, "", [("log.retention.ms", SET, "1000")])], True, {})
    )
    assert errors == [None]
    state["image"] = MetadataImage("c", 1)
    asyncio.run(controller().startup({"PLAINTEXT": ("127.0.0.1", 9092)}, None))
    assert dict(state["image"].resource_config(BROKER, "")) == {"log.retention.ms": "1000"}
