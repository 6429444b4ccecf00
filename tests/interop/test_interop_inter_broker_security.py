"""A 3-node cluster whose only broker listener is SASL_SSL, so replication (replica fetchers) and
every client go through TLS + SASL: the brokers authenticate to each other with PLAIN
(sasl.mechanism.inter.broker.protocol) and check each other's certificate and host name;
confluent-kafka creates a SCRAM-SHA-512 user, then produces acks=all to an RF=3 topic and
consumes with it. LocalCluster's listener named PLAINTEXT is mapped to SASL_SSL."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.local_pki import LocalPki

pytestmark = pytest.mark.timeout(120)

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-secret" user_broker="broker-secret" user_admin="admin-secret";'
)


def test_replication_over_sasl_ssl(tmp_path: Path) -> None:
    pki = LocalPki.create(tmp_path / "pki")
    keystore = pki.issue_server("broker").chain_path
    overrides = {
        "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,CONTROLLER:PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca_path),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.plaintext.plain.sasl.jaas.config": JAAS,
        "min.insync.replicas": "2",
    }
    tls = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca_path)}
    with LocalCluster(brokers=3, data_dir=tmp_path / "cluster", config_overrides=overrides) as cluster:
        admin_config = {
            "bootstrap.servers": cluster.bootstrap_servers,
            **tls,
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": "admin-secret",
        }
        admin = AdminClient(admin_config)
        upsertion = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret"
        )
        admin.alter_user_scram_credentials([upsertion])["alice"].result(30)
        topic = f"t-ibs-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=3)])[topic].result(30)
        alice = {
            "bootstrap.servers": cluster.bootstrap_servers,
            **tls,
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }
        producer = confluent_kafka.Producer({**alice, "acks": "all", "linger.ms": 5})
        for i in range(200):
            producer.produce(topic, f"v{i}".encode(), partition=i % 2)
        assert producer.flush(60) == 0
        # acks=all with min.insync.replicas=2 succeeded: followers fetched over SASL_SSL; all
        # three replicas end up in the ISR
        deadline = time.monotonic() + 30
        while True:
            partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
            if all(sorted(p.isrs) == [1, 2, 3] for p in partitions.values()):
                break
            assert time.monotonic() < deadline, {p.id: p.isrs for p in partitions.values()}
            time.sleep(0.2)
        consumer = confluent_kafka.Consumer(
            {**alice, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )
        consumer.subscribe([topic])
        values = set()
        deadline = time.monotonic() + 30
        while len(values) < 200 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.add(message.value())
        consumer.close()
        assert values == {f"v{i}".encode() for i in range(200)}
        for node in (1, 2, 3):
            assert "failed authentication" not in cluster.output(node)
