"""A three-node KRaft-style cluster (LocalCluster(brokers=3), real processes): the quorum forms,
topics get replicated assignments, Metadata shows leader / replicas / ISR to independent clients,
and the controller API keeps working (create topics, partitions, configs) from any node.

Metadata and leadership only: data replication is tested by the replication tests.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_kafkalite.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster3() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=3) as cluster:
        yield cluster


def _topic() -> str:
    return f"t-quorum-{uuid.uuid4().hex[:8]}"


def test_cluster_forms_with_one_active_controller(cluster3: LocalCluster) -> None:
    metadata = cluster3.metadata()
    assert sorted(metadata.nodes) == [1, 2, 3]
    assert metadata.controller_id in (1, 2, 3)
    # Every node agrees on the active controller and the cluster id.
    views = {cluster3.metadata(node_id=n).controller_id for n in (1, 2, 3)}
    ids = {cluster3.metadata(node_id=n).cluster_id for n in (1, 2, 3)}
    assert len(views) == 1 and len(ids) == 1 and None not in ids


def test_rf3_topic_metadata_with_confluent_kafka(cluster3: LocalCluster) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = _topic()
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=3)])[topic].result(30)
    md = admin.list_topics(topic, timeout=10)
    assert md.controller_id in (1, 2, 3)
    assert sorted(md.brokers) == [1, 2, 3]
    partitions = md.topics[topic].partitions
    assert sorted(partitions) == list(range(6))
    leaders = []
    for p in partitions.values():
        assert sorted(p.replicas) == [1, 2, 3]
        assert sorted(p.isrs) == [1, 2, 3]
        assert p.leader == p.replicas[0]
        leaders.append(p.leader)
    # Round-robin placement: leadership is spread evenly (6 partitions over 3 brokers).
    assert sorted(leaders.count(b) for b in (1, 2, 3)) == [2, 2, 2]


def test_rf2_topic_metadata_with_kafka_python(cluster3: LocalCluster) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    topic = _topic()
    admin = KafkaAdminClient(bootstrap_servers=cluster3.bootstrap_servers, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=2)])
        [described] = admin.describe_topics([topic])
    finally:
        admin.close()
    assert described["error_code"] == 0
    for p in described["partitions"]:
        assert len(p["replica_nodes"]) == 2 and len(set(p["replica_nodes"])) == 2
        assert sorted(p["isr_nodes"]) == sorted(p["replica_nodes"])
        assert p["leader_id"] == p["replica_nodes"][0] and p["offline_replicas"] == []


def test_replication_factor_above_live_brokers_is_refused(cluster3: LocalCluster) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = _topic()
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    with pytest.raises(KafkaException) as info:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=4)])[topic].result(30)
    assert "INVALID_REPLICATION_FACTOR" in str(info.value) or "replication factor" in str(info.value).lower()


def test_every_node_serves_controller_requests(cluster3: LocalCluster) -> None:
    """Topic creation sent to each node (followers forward to the active controller)."""
    from spark_kafkalite.client.admin import KafkaAdminClient
    from spark_kafkalite.client.types import NewTopic

    for node_id in (1, 2, 3):
        topic = _topic()
        admin = KafkaAdminClient({"bootstrap.servers": cluster3.broker_address(node_id)})
        try:
            admin.create_topics([NewTopic(topic, 2, 3)])
            admin.create_partitions({topic: 4})
            admin.incremental_alter_configs({topic: {"retention.ms": "60000"}})
        finally:
            admin.close()
        for n in (1, 2, 3):  # every broker applied the same metadata
            partitions = cluster3.metadata(node_id=n).partitions[topic]
            assert len(partitions) == 4 and all(len(p.replicas) == 3 for p in partitions.values())


def test_describe_cluster_with_confluent_kafka(cluster3: LocalCluster) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    described = admin.describe_cluster(request_timeout=10).result(20)
    assert sorted(node.id for node in described.nodes) == [1, 2, 3]
    assert described.controller is not None and described.controller.id == cluster3.controller_id()
    assert described.cluster_id == cluster3.metadata().cluster_id


def test_elect_leaders_on_a_balanced_cluster_is_not_needed(cluster3: LocalCluster) -> None:
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = _topic()
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=3)])[topic].result(30)
    results = admin.elect_leaders(
        ElectionType.PREFERRED, [TopicPartition(topic, 0), TopicPartition(topic, 7)]
    ).result(20)
    errors = {tp.partition: str(err) for tp, err in results.items()}
    assert "ELECTION_NOT_NEEDED" in errors[0] and "UNKNOWN_TOPIC_OR_PART" in errors[7]


def test_lone_voter_waits_for_a_quorum_and_stops_on_sigterm(tmp_path: Path) -> None:
    """``python -m broker --config conf/broker-2.properties`` alone: no quorum, so it waits
    (not serving) and still stops promptly on SIGTERM."""
    from spark_kafkalite.local_cluster import free_ports

    ports = dict(zip((1, 2, 3), free_ports(3), strict=True))
    voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in ports.items())
    conf = Path(__file__).resolve().parents[2] / "conf" / "broker-2.properties"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "broker",
            "--config",
            str(conf),
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{ports[2]}",
            "--override",
            f"controller.quorum.voters={voters}",
            "--override",
            f"log.dirs={tmp_path / 'b2'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    waiting = threading.Event()
    stderr_lines: list[str] = []

    def read_stderr() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            stderr_lines.append(line)
            if "waiting for the controller quorum" in line:
                waiting.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        # Wait for the log line rather than a fixed time: startup is slow on a loaded machine.
        assert waiting.wait(60), "".join(stderr_lines)[-2000:]
        time.sleep(1.0)
        assert process.poll() is None
        assert not (tmp_path / "b2" / ".broker-endpoints.json").exists()  # not serving yet
        process.send_signal(signal.SIGTERM)
        assert process.wait(20) == 0, "".join(stderr_lines)[-2000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_kcat_lists_brokers_controller_and_isr(cluster3: LocalCluster) -> None:
    import json
    import shutil

    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed")
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = _topic()
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=3)])[topic].result(30)
    out = subprocess.run(
        [kcat, "-b", cluster3.bootstrap_servers, "-L", "-J", "-t", topic],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    listing = json.loads(out.stdout)
    assert sorted(b["id"] for b in listing["brokers"]) == [1, 2, 3]
    assert listing["controllerid"] == cluster3.controller_id()
    [described] = listing["topics"]
    for p in described["partitions"]:
        assert sorted(r["id"] for r in p["replicas"]) == [1, 2, 3]
        assert sorted(i["id"] for i in p["isrs"]) == [1, 2, 3]
        assert p["leader"] == p["replicas"][0]["id"]


def test_scram_credentials_reach_every_node(cluster3: LocalCluster) -> None:
    """AlterUserScramCredentials sent to one node goes through the quorum
    (UserScramCredentialRecord); every node's image then describes it."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    user = f"u-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster3.broker_address(2)})
    upsertion = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"pw"
    )
    admin.alter_user_scram_credentials([upsertion])[user].result(30)
    for node in (1, 2, 3):
        node_admin = AdminClient({"bootstrap.servers": cluster3.broker_address(node)})
        deadline = time.monotonic() + 10
        while True:
            try:
                described = node_admin.describe_user_scram_credentials([user])[user].result(10)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
            (ScramMechanism.SCRAM_SHA_512, 4096)
        ]
