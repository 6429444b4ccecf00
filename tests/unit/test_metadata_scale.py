"""Metadata and controller cost follows what changed, not the partition count (issue #19):
copy-on-write image deltas, AlterPartition batches, and their compare-and-set per item.

Counts and object identities, never timings."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from pytest import MonkeyPatch

from broker.controller.alter_partition_manager import AlterPartitionManager
from broker.controller.controller import CreatableTopicSpec
from broker.controller.controller_commands import (
    AlterPartitionCmd,
    AlterPartitionsCmd,
    CreateTopicsCmd,
    HeartbeatCmd,
    MetadataStateMachine,
    RegisterBrokerCmd,
)
from broker.controller.metadata_image import (
    ConfigRecord,
    MetadataImage,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from broker.controller.metadata_snapshot import diff_images, image_to_records
from broker.controller.replication_control import (
    ControllerSettings,
)
from broker.controller.topic_publisher import TopicMetadataPublisher
from broker.log.log_config import LogConfig
from broker.log.log_manager import LogManager
from broker.log.unified_log import UnifiedLog
from spark_kafkalite.protocol.errors import ErrorCode

SETTINGS = ControllerSettings(default_num_partitions=1, default_replication_factor=3)


def cluster(topics: dict[str, int]) -> MetadataStateMachine:
    machine = MetadataStateMachine(MetadataImage("cid", -1))
    for b in (1, 2, 3):
        _, (_, epoch) = machine.execute(
            SETTINGS, RegisterBrokerCmd(b, {"PLAINTEXT": ("h", 9000 + b)}, None, uuid.uuid4())
        )
        machine.execute(SETTINGS, HeartbeatCmd(b, epoch, machine.image.offset))
    for name, partitions in topics.items():
        _, outcomes = machine.execute(
            SETTINGS, CreateTopicsCmd((CreatableTopicSpec(name, partitions, 3),), (uuid.uuid4(),), 7)
        )
        assert outcomes[0].error is None
    return machine


def shrink(image: MetadataImage, topic: str, partition: int) -> PartitionRecord:
    reg = image.partition(topic, partition)
    assert reg is not None
    isr = tuple(b for b in reg.isr if b != reg.isr[-1] or b == reg.leader)[:2]
    return PartitionRecord(
        image.topics[topic].topic_id,
        partition,
        reg.replicas,
        isr,
        reg.leader,
        reg.leader_epoch,
        reg.partition_epoch + 1,
    )


def test_a_partition_change_shares_every_untouched_part_of_the_image() -> None:
    image = cluster({"big": 400, "other": 30}).image
    new, delta = image.apply([shrink(image, "big", 7)])
    assert [(n, p.partition) for n, p in delta.changed_partitions] == [("big", 7)]
    # untouched topics, brokers, configs, id index: the same objects
    assert new.topics["other"] is image.topics["other"]
    assert new.brokers is image.brokers and new.topic_configs is image.topic_configs
    assert new.topic_ids is image.topic_ids
    # the changed topic shares every registration but the changed one
    shared = sum(new.topics["big"].partitions[i] is image.topics["big"].partitions[i] for i in range(400))
    assert shared == 399
    assert list(new.topics["big"].partitions) == list(range(400))
    assert new.offset == image.offset + 1


def test_cost_of_one_change_does_not_grow_with_the_number_of_topics() -> None:
    small = cluster({f"t{i}": 1 for i in range(5)}).image
    large = cluster({f"t{i}": 1 for i in range(300)}).image
    for image in (small, large):
        new, _ = image.apply([shrink(image, "t3", 0)])
        rebuilt = [name for name in new.topics if new.topics[name] is not image.topics[name]]
        assert rebuilt == ["t3"]


def test_image_built_by_deltas_equals_one_rebuilt_from_a_snapshot() -> None:
    machine = cluster({"a": 50, "b": 3})
    image = machine.image
    tid = uuid.uuid4()
    image, _ = image.apply(
        [
            shrink(image, "a", 3),
            TopicRecord("c", tid),
            PartitionRecord(tid, 1, (1, 2), (1, 2), 1),
            PartitionRecord(tid, 0, (2, 3), (2, 3), 2),  # out of order: kept sorted
            ConfigRecord(2, "c", "retention.ms", "1000"),
            ConfigRecord(2, "a", "retention.ms", "5"),
            RemoveTopicRecord(image.topics["b"].topic_id),
        ]
    )
    assert list(image.topics["c"].partitions) == [0, 1]
    assert image.topic_by_id(tid) is image.topics["c"]
    assert "b" not in image.topics and image.topic_by_id(machine.image.topics["b"].topic_id) is None
    rebuilt = MetadataImage("cid", -1).apply(image_to_records(image))[0]
    assert rebuilt.topics == image.topics and rebuilt.topic_configs == image.topic_configs
    assert dict(rebuilt.topic_ids) == dict(image.topic_ids)
    assert diff_images(image, rebuilt).changed_partitions == ()


def items(machine: MetadataStateMachine, topic: str, partitions: range) -> list[AlterPartitionCmd]:
    image = machine.image
    out = []
    for p in partitions:
        reg = image.partition(topic, p)
        assert reg is not None
        out.append(
            AlterPartitionCmd(
                reg.leader,
                image.brokers[reg.leader].epoch,
                image.topics[topic].topic_id,
                p,
                reg.leader_epoch,
                (reg.leader,) + tuple(b for b in reg.isr if b != reg.leader)[:1],
                reg.partition_epoch,
            )
        )
    return out


def test_alter_partition_batch_checks_each_item_with_compare_and_set() -> None:
    machine = cluster({"t": 20})
    batch = items(machine, "t", range(20))
    offset = machine.image.offset
    records, results = machine.execute(SETTINGS, AlterPartitionsCmd(tuple(batch)))
    assert len(records) == 20 and machine.image.offset == offset + 20
    assert all(code == ErrorCode.none and reg is not None and len(reg.isr) == 2 for code, reg in results)
    # the same batch again: every partition epoch is stale now
    _, results = machine.execute(SETTINGS, AlterPartitionsCmd(tuple(batch)))
    assert {code for code, _ in results} == {ErrorCode.invalid_update_version}
    # two items for one partition in one batch: the second sees the first's new epoch
    first = items(machine, "t", range(1))[0]
    grow = AlterPartitionCmd(
        first.broker_id,
        first.broker_epoch,
        first.topic_id,
        0,
        first.leader_epoch,
        (1, 2, 3),
        first.partition_epoch,
    )
    shrink_again = AlterPartitionCmd(
        first.broker_id,
        first.broker_epoch,
        first.topic_id,
        0,
        first.leader_epoch,
        (first.broker_id,),
        first.partition_epoch,
    )
    _, results = machine.execute(SETTINGS, AlterPartitionsCmd((grow, shrink_again)))
    assert results[0][0] == ErrorCode.none
    assert results[1][0] == ErrorCode.invalid_update_version


def test_alter_partition_manager_sends_queued_changes_in_one_entry_per_round() -> None:
    machine = cluster({"t": 1200})
    commands: list[AlterPartitionsCmd] = []

    async def submit(command: AlterPartitionsCmd) -> object:
        commands.append(command)
        await asyncio.sleep(0)
        return machine.execute(SETTINGS, command)[1]

    async def run() -> list[tuple[ErrorCode, object]]:
        manager = AlterPartitionManager(submit)  # type: ignore[arg-type]
        results = await asyncio.gather(*(manager.submit(i) for i in items(machine, "t", range(1200))))
        assert manager.batches_sent == len(commands)
        return results

    results = asyncio.run(run())
    assert all(code == ErrorCode.none for code, _ in results)
    # 1,200 changes queued together: 3 entries of at most 500, not 1,200
    assert [len(c.items) for c in commands] == [500, 500, 200]


def test_topic_config_change_touches_only_that_topics_logs(tmp_path: Path, monkeypatch: MonkeyPatch) -> None:
    """TopicMetadataPublisher: a config change of one topic re-configures that topic's logs only
    (the log manager indexes logs by topic), however many other logs the broker holds; a created
    topic's logs start with its config."""
    machine = cluster({"big": 60, "small": 2})
    manager = LogManager([tmp_path / "logs"], LogConfig())
    manager.startup()
    publisher = TopicMetadataPublisher({}, manager, tmp_path / "topic-configs.json")
    image = machine.image
    publisher.publish(image, diff_images(MetadataImage("cid", -1), image))
    for name, topic in image.topics.items():
        for index in topic.partitions:
            manager.get_or_create_log(name, index, topic.topic_id)
    reconfigured: list[str] = []
    setter = UnifiedLog.config.fset  # type: ignore[attr-defined]

    def counting(log: UnifiedLog, config: LogConfig) -> None:
        reconfigured.append(log.topic)
        setter(log, config)

    monkeypatch.setattr(UnifiedLog, "config", UnifiedLog.config.setter(counting))  # type: ignore[attr-defined]
    walks: list[int] = []
    all_logs = LogManager.all_logs
    monkeypatch.setattr(LogManager, "all_logs", lambda self: walks.append(1) or all_logs(self))
    new_image, delta = image.apply([ConfigRecord(2, "small", "retention.ms", "1234")])
    publisher.publish(new_image, delta)
    assert reconfigured == ["small", "small"]
    assert all(manager.get_log("small", p).config.retention_ms == 1234 for p in (0, 1))  # type: ignore[union-attr]
    assert manager.get_log("big", 0).config.retention_ms != 1234  # type: ignore[union-attr]
    created_image, created = new_image.apply(
        [TopicRecord("third", uuid.uuid4()), ConfigRecord(2, "third", "retention.ms", "99")]
    )
    publisher.publish(created_image, created)
    assert reconfigured == ["small", "small"]  # no log of "third" yet: nothing else touched
    assert walks == []  # never a walk over every log of the broker
    third = manager.get_or_create_log("third", 0, created_image.topics["third"].topic_id)
    assert third.config.retention_ms == 99
    manager.shutdown()
