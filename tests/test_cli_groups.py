"""``kafkalite groups list|describe|delete`` and ``kafkalite consume --group`` against a real
broker; results cross-checked with confluent-kafka."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest

from spark_kafkalite.cli import main
from spark_kafkalite.client import KafkaAdminClient, KafkaConsumer, KafkaProducer, NewTopic, TopicPartition
from spark_kafkalite.local_cluster import LocalCluster

GROUP_BROKER_CONFIG = {"offsets.topic.replication.factor": "1", "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def bootstrap() -> Iterator[str]:
    with LocalCluster(brokers=1, config_overrides=GROUP_BROKER_CONFIG) as cluster:
        yield cluster.bootstrap_servers


@pytest.fixture
def topic(bootstrap: str) -> str:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, 2, 1)])
    with KafkaProducer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(10):
            producer.send(name, value=f"line-{i}".encode(), partition=i % 2)
        producer.flush()
    return name


def _committed_by_confluent(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    ck = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = ck.committed([confluent_kafka.TopicPartition(topic, p) for p in range(2)], timeout=10)
        return {tp.partition: tp.offset for tp in found if tp.offset >= 0}
    finally:
        ck.close()


def test_consume_with_group_commits_and_resumes(
    bootstrap: str, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    group = f"cli-g-{uuid.uuid4().hex[:8]}"
    args = [
        "consume",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--group",
        group,
        "--from-beginning",
    ]
    assert main([*args, "--max-messages", "4", "--timeout-ms", "10000"]) == 0
    first = capsys.readouterr().out.split()
    assert len(first) == 4
    committed = _committed_by_confluent(bootstrap, group, topic)
    assert sum(committed.values()) == 4  # exactly what was printed
    assert main([*args, "--timeout-ms", "2000"]) == 0
    rest = capsys.readouterr().out.split()
    assert sorted(first + rest) == sorted(f"line-{i}" for i in range(10))
    assert _committed_by_confluent(bootstrap, group, topic) == {0: 5, 1: 5}


def test_consume_group_rejects_partition_and_offset(
    bootstrap: str, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["consume", "--bootstrap-server", bootstrap, "--topic", topic, "--group", "g", "--partition", "0"]
    )
    assert code == 1
    assert "cannot be used with --group" in capsys.readouterr().err


def test_groups_list_describe_delete(bootstrap: str, topic: str, capsys: pytest.CaptureFixture[str]) -> None:
    group = f"cli-g-{uuid.uuid4().hex[:8]}"
    member = KafkaConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": "cli-member",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": "false",
        }
    )
    try:
        member.subscribe([topic])
        got = 0
        for _ in range(100):
            got += sum(len(r) for r in member.poll(100).values())
            if got >= 10:
                break
        member.commit_sync({TopicPartition(topic, 0): 3, TopicPartition(topic, 1): 5})
        assert main(["groups", "list", "--bootstrap-server", bootstrap]) == 0
        assert group in capsys.readouterr().out.split()
        assert main(["groups", "list", "--bootstrap-server", bootstrap, "--state"]) == 0
        assert any(group in line and "Stable" in line for line in capsys.readouterr().out.splitlines())
        assert main(["groups", "describe", "--bootstrap-server", bootstrap, group]) == 0
        out = capsys.readouterr().out
        assert "state Stable" in out and "assignor range" in out and "cli-member" in out
        member_id = member.group_metadata()["member_id"]
        rows = {}
        for line in out.splitlines():
            cells = [c.strip() for c in line.strip("│┃|").split("│")]
            if len(cells) >= 6 and cells[0] == topic:
                rows[int(cells[1])] = cells
        # partition: committed, log end offset, lag, owning member
        assert rows[0][2:6] == ["3", "5", "2", member_id]
        assert rows[1][2:6] == ["5", "5", "0", member_id]
        assert main(["groups", "delete", "--bootstrap-server", bootstrap, group]) == 1  # still has a member
        assert "NON_EMPTY_GROUP" in capsys.readouterr().err
    finally:
        member.close()
    assert main(["groups", "delete", "--bootstrap-server", bootstrap, group]) == 0
    assert f"Deleted consumer group {group}." in capsys.readouterr().out
    assert main(["groups", "describe", "--bootstrap-server", bootstrap, group]) == 1
    assert "does not exist" in capsys.readouterr().err
