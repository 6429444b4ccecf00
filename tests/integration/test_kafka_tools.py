"""Kafka's command-line tools (``kafka-topics.sh`` ...) against one broker process with the
StandardAuthorizer (``allow.everyone.if.no.acl.found``, so the ACL commands work and everything
else is allowed): librdkafka's test-harness invocations run through the ``bin/`` directory of
``kafkalite kafka-path`` in one shell, everything else runs in-process through the tools' entry
points and is compared with Kafka's output formats (``TopicCommand``, ``ConfigCommand``,
``AclCommand``, ``ConsumerGroupCommand``, ``GetOffsetShell``, ``DeleteRecordsCommand``,
``TransactionsCommand``) and cross-checked with our admin client."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from spark_kafkalite.cli import main as kafkalite_main
from spark_kafkalite.cli.kafka_tools import tool_main
from spark_kafkalite.client import KafkaAdminClient, KafkaProducer
from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.acl import AclBindingFilter, AclOperation, AclPermissionType, ResourceType

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    local = LocalCluster(
        brokers=1,
        config_overrides={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
            "num.partitions": "2",
        },
    )
    local.start()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> Iterator[KafkaAdminClient]:
    with KafkaAdminClient({"bootstrap.servers": cluster.bootstrap_servers}) as client:
        yield client


Tool = Callable[..., tuple[int, str, str]]


@pytest.fixture
def tool(
    cluster: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Tool:
    """``tool("kafka-topics.sh", "--list", stdin="")`` -> (status, stdout, stderr), with
    ``--bootstrap-server`` and a ``--command-config`` file added."""
    properties = tmp_path / "client.properties"
    properties.write_text("# as Kafka's --command-config\nclient.id=kafka-tools-test\n", encoding="utf-8")
    capsys.readouterr()

    def run(name: str, *argv: str, stdin: str = "", connect: bool = True) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        extra = ["--bootstrap-server", cluster.bootstrap_servers, "--command-config", str(properties)]
        status = tool_main(name)([*extra, *argv] if connect else list(argv))
        out, err = capsys.readouterr()
        return status, out, err

    return run


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_librdkafka_harness_invocations_through_kafka_path(
    cluster: LocalCluster, admin: KafkaAdminClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The commands librdkafka's ``tests/test.c`` (``test_kafka_topics``, ``test_kafka_cmd``)
    runs with ``system()``, as tests 0045, 0077, 0109 and 0119 build them."""
    assert kafkalite_main(["kafka-path", "--dir", str(tmp_path / "kafka")]) == 0
    kafka_path = capsys.readouterr().out.strip()
    assert sorted(p.name for p in (Path(kafka_path) / "bin").iterdir()) == sorted(
        [
            "kafka-acls.sh",
            "kafka-configs.sh",
            "kafka-console-consumer.sh",
            "kafka-console-producer.sh",
            "kafka-consumer-groups.sh",
            "kafka-delete-records.sh",
            "kafka-get-offsets.sh",
            "kafka-topics.sh",
            "kafka-transactions.sh",
        ]
    )
    compacted, grown, gone, denied = (_topic(p) for p in ("rdk-0077", "rdk-0045a", "rdk-0045f", "rdk-0109"))
    admin.create_topics([_new_topic(gone, 1)])
    bs = cluster.bootstrap_servers
    commands = [
        f'$KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server {bs} --create --topic "{compacted}" '
        "--partitions 1 --replication-factor 1 --config cleanup.policy=compact --config segment.ms=500 "
        "--config segment.bytes=1048576 --config min.cleanable.dirty.ratio=0.01 "
        "--config delete.retention.ms=86400 --config file.delete.delay.ms=10000 "
        "--config max.compaction.lag.ms=100",
        f"$KAFKA_PATH/bin/kafka-acls.sh --bootstrap-server {bs} --add --deny-principal 'User:*' "
        f"--operation All --deny-host '*' --topic '{denied}'",
        f'$KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server {bs} --create --topic "{grown}" '
        "--replication-factor 1 --partitions 2",
        f"$KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server {bs} --alter --topic {grown} --partitions 4",
        f'$KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server {bs} --delete --topic "{gone}" ',
        f"$KAFKA_PATH/bin/kafka-acls.sh --bootstrap-server {bs} --add --allow-principal 'User:*' "
        f"--operation Describe --allow-host '*' --topic '{denied}'",
        f"$KAFKA_PATH/bin/kafka-acls.sh --bootstrap-server {bs} --remove --force --allow-principal 'User:*' "
        f"--operation Describe --allow-host '*' --topic '{denied}'",
    ]
    # the first through the shell and its bin/ wrapper (a Python start, ~0.5-1 s on a quiet
    # machine); the rest in-process with the argv the shell would pass
    env = dict(os.environ, KAFKA_PATH=kafka_path, PYTHONPATH=str(REPO))
    proc = subprocess.run(["sh", "-ec", commands[0]], capture_output=True, text=True, env=env, timeout=90)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == f"Created topic {compacted}.\n"
    for command in commands[1:]:
        script, *argv = shlex.split(command)
        assert tool_main(Path(script).name)(argv) == 0, command
    assert f"Created topic {grown}.\n" in capsys.readouterr().out

    configs = admin.describe_configs(compacted)
    assert {k: configs[k].value for k in ("cleanup.policy", "segment.ms", "max.compaction.lag.ms")} == {
        "cleanup.policy": "compact",
        "segment.ms": "500",
        "max.compaction.lag.ms": "100",
    }
    assert len(admin.describe_topics([grown])[grown]) == 4
    assert gone not in admin.list_topics()
    acls = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, denied))
    assert [(a.principal, a.host, a.operation, a.permission_type) for a in acls] == [
        ("User:*", "*", AclOperation.ALL, AclPermissionType.DENY)
    ]


def _new_topic(name: str, partitions: int, configs: dict[str, str] | None = None) -> object:
    from spark_kafkalite.client import NewTopic

    return NewTopic(name, partitions, 1, configs or {})


def test_topics_describe_output_and_errors(tool: Tool, admin: KafkaAdminClient) -> None:
    topic = _topic("tools.topics")
    status, out, err = tool(
        "kafka-topics.sh", "--create", "--topic", topic, "--partitions", "3", "--config", "retention.ms=60000"
    )
    assert (status, err) == (0, "")
    assert out.splitlines() == [
        "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could "
        "collide. To avoid issues it is best to use either, but not both.",
        f"Created topic {topic}.",
    ]
    status, out, err = tool("kafka-topics.sh", "--describe", "--topic", topic)
    assert (status, err) == (0, "")
    lines = out.splitlines()
    overrides = ",".join(
        f"{e.name}={e.value}" for e in admin.describe_configs(topic).values() if not e.is_default
    )
    assert "retention.ms=60000" in overrides.split(",")
    topic_id = admin.topic_ids([topic])[topic]
    from spark_kafkalite.cli.kafka_tools.topics import kafka_uuid

    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", kafka_uuid(topic_id))
    assert lines[0] == (
        f"Topic: {topic}\tTopicId: {kafka_uuid(topic_id)}\tPartitionCount: 3\tReplicationFactor: 1\t"
        f"Configs: {overrides}"
    )
    assert lines[1:] == [
        f"\tTopic: {topic}\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: N/A\tLastKnownElr: N/A"
        for p in range(3)
    ]
    # --topic is a regular expression matched against whole names; --list prints one per line
    status, out, _ = tool("kafka-topics.sh", "--list", "--topic", "tools\\.topics-.*")
    assert status == 0 and topic in out.splitlines()
    assert tool("kafka-topics.sh", "--describe", "--under-replicated-partitions", "--topic", topic)[:2] == (
        0,
        "",
    )
    assert tool("kafka-topics.sh", "--create", "--if-not-exists", "--topic", topic)[:2] == (0, _WARNING)

    # errors: Kafka's messages, streams and exit status 1
    status, out, err = tool("kafka-topics.sh", "--create", "--topic", topic)
    assert (status, out.splitlines()[-1]) == (
        1,
        f"Error while executing topic command : Topic '{topic}' already exists.",
    )
    assert tool("kafka-topics.sh", "--describe", "--topic", "no-such-topic") == (
        1,
        "",
        "Topic 'no-such-topic' does not exist as expected\n",
    )
    status, out, err = tool("kafka-topics.sh", "--list", "--no-such-flag")
    assert (status, out, err.splitlines()[0]) == (1, "", "no-such-flag is not a recognized option")
    assert "usage: kafka-topics.sh" in err
    status, _, err = tool("kafka-topics.sh", "--topic", topic)
    assert (status, err.splitlines()[0]) == (
        1,
        "Command must include exactly one action: --list, --describe, --create, --alter or --delete",
    )
    status, _, err = tool("kafka-topics.sh", "--create", "--partitions", "1")
    assert (status, err.splitlines()[0]) == (1, 'Missing required argument "[topic]"')
    status, _, err = tool("kafka-topics.sh", "--alter", "--topic", topic, "--config", "retention.ms=1")
    assert status == 1 and "the kafka-configs tool can be used" in err
    status, _, err = tool("kafka-topics.sh", "--list", connect=False)
    assert (status, err) == (1, "--bootstrap-server must be specified\n")

    assert tool("kafka-topics.sh", "--delete", "--topic", topic) == (0, "", "")
    assert topic not in admin.list_topics()


_WARNING = (
    "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could "
    "collide. To avoid issues it is best to use either, but not both.\n"
)


def test_configs_alter_and_describe(tool: Tool, admin: KafkaAdminClient) -> None:
    topic = _topic("tools-configs")
    admin.create_topics([_new_topic(topic, 1, {"segment.ms": "600000"})])
    status, out, err = tool(
        "kafka-configs.sh",
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
        "--add-config",
        "retention.ms=120000,cleanup.policy=[compact,delete]",
        "--delete-config",
        "segment.ms",
    )
    assert (status, out, err) == (0, f"Completed updating config for topic {topic}.\n", "")
    configs = admin.describe_configs(topic)
    assert configs["cleanup.policy"].value == "compact,delete"
    assert configs["segment.ms"].is_default

    status, out, err = tool("kafka-configs.sh", "--describe", "--topic", topic)
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"Dynamic configs for topic {topic} are:"
    assert lines[1] == (
        "  cleanup.policy=compact,delete sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}"
    )
    assert lines[2].startswith(
        "  retention.ms=120000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=120000"
    )
    assert len(lines) == 3
    status, out, _ = tool(
        "kafka-configs.sh", "--describe", "--entity-type", "topics", "--entity-name", topic, "--all"
    )
    assert status == 0 and out.startswith(f"All configs for topic {topic} are:\n")
    assert "  segment.ms=" in out and "DEFAULT_CONFIG" in out
    status, out, _ = tool("kafka-configs.sh", "--describe", "--entity-type", "brokers", "--entity-name", "1")
    assert status == 0 and out.startswith("Dynamic configs for broker 1 are:\n")

    status, _, err = tool("kafka-configs.sh", "--describe", "--entity-type", "widgets", "--entity-name", "x")
    assert (status, err.startswith("Invalid entity type widgets")) == (1, True)
    status, _, err = tool("kafka-configs.sh", "--alter", "--topic", topic)
    assert (status, err) == (
        1,
        "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter\n",
    )
    status, _, err = tool(
        "kafka-configs.sh", "--alter", "--topic", "no-such-topic", "--add-config", "retention.ms=1"
    )
    assert status == 1 and err.startswith("Error while executing config command with args: ")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in err


def test_console_groups_offsets_and_delete_records(tool: Tool, tmp_path: Path) -> None:
    topic = _topic("tools-console")
    assert tool("kafka-topics.sh", "--create", "--topic", topic, "--partitions", "1")[0] == 0
    status, out, err = tool(
        "kafka-console-producer.sh",
        "--topic",
        topic,
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        stdin="k1:one\nk2:two\nk3:three\n",
    )
    assert (status, out, err) == (0, "", "")
    status, out, err = tool(
        "kafka-console-consumer.sh",
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "2",
        "--property",
        "print.key=true",
        "--property",
        "key.separator=:",
        "--group",
        "tools-group",
        "--timeout-ms",
        "20000",
    )
    assert (status, out, err) == (0, "k1:one\nk2:two\n", "Processed a total of 2 messages\n")

    status, out, err = tool(
        "kafka-console-consumer.sh",
        "--topic",
        topic,
        "--partition",
        "0",
        "--offset",
        "2",
        "--max-messages",
        "1",
    )
    assert (status, out, err) == (0, "three\n", "Processed a total of 1 messages\n")
    status, _, err = tool("kafka-console-consumer.sh", "--topic", topic, "--offset", "2")
    assert (status, err.splitlines()[0]) == (1, "The partition is required when offset is specified.")
    status, out, err = tool("kafka-consumer-groups.sh", "--describe", "--group", "tools-group")
    assert (status, err) == (0, "\nConsumer group 'tools-group' has no active members.\n")
    assert out.splitlines()[1:] == [
        f"{'GROUP':<15} {'TOPIC':<{max(15, len(topic))}} {'PARTITION':<10} {'CURRENT-OFFSET':<15} "
        f"{'LOG-END-OFFSET':<15} {'LAG':<15} {'CONSUMER-ID':<15} {'HOST':<15} CLIENT-ID",
        f"{'tools-group':<15} {topic:<15} {'0':<10} {'2':<15} {'3':<15} {'1':<15} {'-':<15} {'-':<15} -",
    ]
    assert out.startswith("\n")
    status, out, _ = tool("kafka-consumer-groups.sh", "--list")
    assert status == 0 and "tools-group" in out.splitlines()
    status, out, _ = tool(
        "kafka-consumer-groups.sh",
        "--reset-offsets",
        "--group",
        "tools-group",
        "--topic",
        topic,
        "--to-earliest",
        "--execute",
    )
    assert status == 0 and out.splitlines()[-1].split() == ["tools-group", topic, "0", "0"]
    status, _, err = tool("kafka-consumer-groups.sh", "--describe", "--group", "no-such-group")
    assert (status, err) == (0, "Error: Consumer group 'no-such-group' does not exist.\n")

    assert tool("kafka-get-offsets.sh", "--topic", topic) == (0, f"{topic}:0:3\n", "")
    assert tool("kafka-get-offsets.sh", "--topic-partitions", f"{topic}:0", "--time", "-2") == (
        0,
        f"{topic}:0:0\n",
        "",
    )
    offsets = tmp_path / "offsets.json"
    offsets.write_text(
        json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": 2}], "version": 1})
    )
    assert tool("kafka-delete-records.sh", "--offset-json-file", str(offsets)) == (
        0,
        f"Executing records delete operation\nRecords delete operation completed:\npartition: {topic}-0\tlow_watermark: 2\n",
        "",
    )
    assert tool("kafka-get-offsets.sh", "--topic", topic, "--time", "earliest") == (0, f"{topic}:0:2\n", "")
    offsets.write_text(
        json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": 99}], "version": 1})
    )
    status, out, _ = tool("kafka-delete-records.sh", "--offset-json-file", str(offsets))
    assert status == 0 and out.splitlines()[-1].startswith(
        f"partition: {topic}-0\terror: OFFSET_OUT_OF_RANGE"
    )
    assert tool("kafka-get-offsets.sh", "--topic", "no-such-topic") == (
        1,
        "",
        "Error occurred: Could not match any topic-partitions with the specified filters\n",
    )
    status, _, err = tool("kafka-delete-records.sh")
    assert (status, err.splitlines()[0]) == (1, 'Missing required argument "[offset-json-file]"')
    status, out, _ = tool("kafka-consumer-groups.sh", "--delete", "--group", "tools-group")
    assert (status, out) == (0, "Deletion of requested consumer groups ('tools-group') was successful.\n")


def test_acls_and_transactions(tool: Tool, cluster: LocalCluster, admin: KafkaAdminClient) -> None:
    topic = _topic("tools-acls")
    admin.create_topics([_new_topic(topic, 1)])
    status, out, err = tool(
        "kafka-acls.sh",
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--operation",
        "DescribeConfigs",
        "--topic",
        topic,
    )
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    assert (status, err) == (0, "")
    assert out.startswith(f"Adding ACLs for resource `{pattern}`: \n \t")
    status, out, err = tool("kafka-acls.sh", "--list", "--topic", topic)
    assert (status, out, err) == (
        0,
        f"Current ACLs for resource `{pattern}`:\n"
        "\t(principal=User:alice, host=*, operation=DESCRIBE_CONFIGS, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n\n",
        "",
    )
    status, out, _ = tool(
        "kafka-acls.sh", "--add", "--allow-principal", "User:alice", "--operation", "read", "--topic", topic
    )
    assert status == 0 and "already exists." in out
    # without --force, --remove asks first: "n" keeps the ACLs
    status, out, _ = tool("kafka-acls.sh", "--remove", "--topic", topic, stdin="n\n")
    assert status == 0 and out.startswith("Are you sure you want to delete all ACLs for resource filter")
    assert tool("kafka-acls.sh", "--remove", "--force", "--topic", topic) == (0, "", "")
    assert tool("kafka-acls.sh", "--list", "--topic", topic) == (0, "", "")
    status, _, err = tool(
        "kafka-acls.sh", "--add", "--allow-principal", "User:alice", "--operation", "Fly", "--topic", topic
    )
    assert (status, err.splitlines()[0]) == (1, "Unknown operation name: Fly")

    tid = _topic("tools-txn")
    with KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": tid}) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, value=b"v")
        producer.commit_transaction()
    status, out, err = tool("kafka-transactions.sh", "list")
    assert (status, err) == (0, "")
    header, *rows = out.splitlines()
    assert header.split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert header.endswith("\t")
    assert [r.split()[0::3] for r in rows if r.startswith(tid)] == [[tid, "CompleteCommit"]]
    status, out, _ = tool("kafka-transactions.sh", "describe", "--transactional-id", tid)
    assert status == 0 and out.splitlines()[1].split("\t")[1].strip() == tid
    status, _, err = tool("kafka-transactions.sh", "describe")
    assert (status, err.splitlines()[0]) == (1, 'Missing required argument "[transactional-id]"')
