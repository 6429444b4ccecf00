"""Our client (producer, consumer, admin) over SSL, SASL_SSL with SCRAM-SHA-512 and
SASL_PLAINTEXT with PLAIN against our broker, with confluent-kafka (librdkafka) as the peer on
the same listeners: it reads what we wrote and we read what it wrote. Refusals are clean: a
wrong password, an untrusted CA, a certificate for another host, a mechanism the broker does
not enable and a TLS client on a plaintext port each give one clear error, no secret in it.

One in-process broker with the four listeners serves the module; the SCRAM user of the record
exchange is created by confluent-kafka's AdminClient, one more by ours (AlterUserScramCredentials)
for a librdkafka login."""

from __future__ import annotations

import socket
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest

from spark_kafkalite.client import (
    KafkaAdminClient,
    KafkaConsumer,
    KafkaProducer,
    NewTopic,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from spark_kafkalite.client.errors import SslAuthenticationError
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.local_pki import LocalPki
from spark_kafkalite.protocol.errors import (
    KafkaTimeoutError,
    ResourceNotFoundError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from tests.integration.inprocess_broker import InProcessBroker

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_alice="alice-plain-secret" user_admin="admin-secret";'
)
SCRAM_PASSWORD = "alice-scram-Secret-9"
RECORDS = 50


class Secure:
    def __init__(self, broker: InProcessBroker, pki: LocalPki) -> None:
        self.broker, self.pki = broker, pki

    def port(self, listener: str) -> int:
        return int(self.broker.server.bound[listener][1])

    def config(self, name: str, **extra: Any) -> dict[str, Any]:
        """Client settings (ours and librdkafka's share these keys) for a case of ``CASES``."""
        listener = name.split("-")[0]
        config: dict[str, Any] = {
            "bootstrap.servers": f"localhost:{self.port(listener)}",
            "security.protocol": listener,
        }
        if listener in ("SSL", "SASL_SSL"):
            config["ssl.ca.location"] = str(self.pki.ca_path)
        if name.endswith("-SCRAM-SHA-512"):
            config.update(
                {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": SCRAM_PASSWORD}
            )
        elif name.endswith("-PLAIN"):
            config.update(
                {"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-plain-secret"}
            )
        config.update(extra)
        return config


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secure]:
    base = tmp_path_factory.mktemp("secure")
    pki = LocalPki.create(base / "pki")
    server = pki.issue_server("broker", ["localhost", "127.0.0.1"])
    broker = InProcessBroker(
        base / "logs",
        {
            "listeners": (
                "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"
            ),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(server.chain_path),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca_path),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "offsets.topic.replication.factor": "1",
            "connection.failed.authentication.delay.ms": "10",
        },
    )
    broker.start()
    try:
        secure = Secure(broker, pki)
        admin = confluent_kafka.admin.AdminClient(secure.config("SASL_PLAINTEXT-PLAIN"))
        upsert = confluent_kafka.admin.UserScramCredentialUpsertion(
            "alice",
            confluent_kafka.admin.ScramCredentialInfo(
                confluent_kafka.admin.ScramMechanism.SCRAM_SHA_512, 4096
            ),
            SCRAM_PASSWORD.encode(),
        )
        admin.alter_user_scram_credentials([upsert])["alice"].result(15)
        yield secure
    finally:
        broker.stop()


CASES = ["SSL", "SASL_SSL-SCRAM-SHA-512", "SASL_PLAINTEXT-PLAIN"]


def _confluent_consume(config: dict[str, Any], topic: str, count: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer({**config, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def _our_consume(config: dict[str, Any], topic: str, count: int) -> list[bytes]:
    tp = TopicPartition(topic, 0)
    with KafkaConsumer(config) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                values.extend(r.value for r in records)
    return values


@pytest.mark.parametrize("case", CASES)
def test_our_client_and_librdkafka_exchange_records(secure: Secure, case: str) -> None:
    config = secure.config(case)
    ours, theirs = f"ours-{case}-{uuid.uuid4().hex[:6]}", f"theirs-{case}-{uuid.uuid4().hex[:6]}"
    with KafkaAdminClient(config) as admin:
        admin.create_topics([NewTopic(ours, 1, 1), NewTopic(theirs, 1, 1)])
        assert {ours, theirs} <= set(admin.list_topics())
    producer = KafkaProducer(config)
    try:
        futures = [producer.send(ours, f"v{i}".encode()) for i in range(RECORDS)]
        producer.flush()
        assert [f.result(10).offset for f in futures] == list(range(RECORDS))
    finally:
        producer.close()
    assert _confluent_consume(config, ours, RECORDS) == [f"v{i}".encode() for i in range(RECORDS)]

    peer = confluent_kafka.Producer(config)
    for i in range(RECORDS):
        peer.produce(theirs, f"w{i}".encode())
    assert peer.flush(15) == 0
    assert _our_consume(config, theirs, RECORDS) == [f"w{i}".encode() for i in range(RECORDS)]


def test_wrong_password_is_refused_cleanly(secure: Secure) -> None:
    wrong = "not-the-Password-42"
    config = secure.config("SASL_SSL-SCRAM-SHA-512", **{"sasl.password": wrong})
    started = time.monotonic()
    with pytest.raises(SaslAuthenticationFailedError) as info:
        with KafkaAdminClient(config) as admin:
            admin.list_topics()
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert "SCRAM-SHA-512" in message and "User:alice" in message
    assert wrong not in message and SCRAM_PASSWORD not in message

    producer = KafkaProducer({**config, "max.block.ms": 5000})
    try:
        with pytest.raises(SaslAuthenticationFailedError):
            producer.send("never", b"x").result(10)
    finally:
        producer.close()
    with KafkaConsumer(config) as consumer:
        consumer.assign([TopicPartition("never", 0)])
        with pytest.raises(SaslAuthenticationFailedError):
            consumer.position(TopicPartition("never", 0), timeout_ms=5000)

    plain = secure.config("SASL_SSL-SCRAM-SHA-512", **{"sasl.mechanism": "SCRAM-SHA-256"})
    with pytest.raises(UnsupportedSaslMechanismError, match="enabled: .*SCRAM-SHA-512"):
        with KafkaAdminClient(plain) as admin:
            admin.list_topics()


def test_our_admin_manages_scram_users_librdkafka_logs_in_with(secure: Secure) -> None:
    admin_config = secure.config("SASL_SSL-SCRAM-SHA-512")
    with KafkaAdminClient(admin_config) as admin:
        assert admin.describe_user_scram_credentials(["alice"]) == {
            "alice": [ScramCredentialInfo("SCRAM-SHA-512", 4096)]
        }
        admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("bob", ScramCredentialInfo("SCRAM-SHA-512", 8192), "bob-Pw-1")]
        )
        assert admin.describe_user_scram_credentials()["bob"] == [ScramCredentialInfo("SCRAM-SHA-512", 8192)]
    bob = secure.config("SASL_SSL-SCRAM-SHA-512", **{"sasl.username": "bob", "sasl.password": "bob-Pw-1"})
    assert confluent_kafka.admin.AdminClient(bob).list_topics(timeout=10).brokers
    with KafkaAdminClient(admin_config) as admin:
        admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", "SCRAM-SHA-512")])
        with pytest.raises(ResourceNotFoundError, match="bob"):
            admin.describe_user_scram_credentials(["bob"])
    with pytest.raises(SaslAuthenticationFailedError, match="User:bob"):
        with KafkaAdminClient(bob) as admin:
            admin.list_topics()


def test_untrusted_certificates_are_refused_cleanly(secure: Secure, tmp_path: Path) -> None:
    other_ca = LocalPki.create(tmp_path / "other")
    config = secure.config("SSL", **{"ssl.ca.location": str(other_ca.ca_path)})
    with pytest.raises(
        SslAuthenticationError,
        match="certificate was not accepted: self-signed certificate in certificate chain",
    ):
        with KafkaAdminClient(config) as admin:
            admin.list_topics()

    # a broker whose certificate (signed by the trusted CA) names another host
    elsewhere = secure.pki.issue_server("elsewhere", ["elsewhere.example"])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(elsewhere.cert_path, elsewhere.key_path)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve_one() -> None:
        connection, _ = listener.accept()
        try:
            context.wrap_socket(connection, server_side=True).close()
        except (ssl.SSLError, OSError):
            connection.close()

    server = threading.Thread(target=serve_one, daemon=True)
    server.start()
    mismatch = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(secure.pki.ca_path),
    }
    try:
        with pytest.raises(SslAuthenticationError, match="IP address mismatch|Hostname mismatch"):
            with KafkaAdminClient(mismatch) as admin:
                admin.list_topics()
    finally:
        server.join(5)
        listener.close()

    # a TLS client on the plaintext port: the broker closes it, the error says what to check
    tls_on_plain = {
        "bootstrap.servers": f"127.0.0.1:{secure.port('PLAINTEXT')}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(secure.pki.ca_path),
        "default.api.timeout.ms": 1500,
    }
    with pytest.raises(KafkaTimeoutError, match="is this a TLS listener"):
        with KafkaAdminClient(tls_on_plain) as admin:
            admin.list_topics()
