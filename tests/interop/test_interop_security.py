"""TLS and SASL listeners against independent clients: confluent-kafka (librdkafka) and kcat
produce and consume over SSL (mutual TLS), SASL_PLAINTEXT (PLAIN) and SASL_SSL (PLAIN and SCRAM:
a user bootstrapped with --add-scram, users managed with confluent-kafka's
alter/describe_user_scram_credentials); wrong passwords, untrusted certificates, plaintext
clients on a TLS port and garbage SASL frames are refused while the broker keeps serving others. One in-process broker with the four listeners
serves the module (its request handler is wrapped to record each request's principal)."""

from __future__ import annotations

import re
import shutil
import socket
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from broker.controller.scram_control import parse_add_scram
from spark_kafkalite.local_pki import LocalPki
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.framing import decode_response, encode_request
from tests.integration.inprocess_broker import InProcessBroker

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def _kcat_librdkafka_version() -> tuple[int, ...]:
    """librdkafka's version as ``kcat -V`` prints it ((0,) if unknown)."""
    if KCAT is None:
        return (0,)
    found = re.search(
        r"librdkafka (\d+)\.(\d+)\.(\d+)", subprocess.run([KCAT, "-V"], capture_output=True, text=True).stdout
    )
    return tuple(int(g) for g in found.groups()) if found else (0,)


# librdkafka before 2.6.1 appends its client nonce to the server's nonce a second time in the
# SCRAM client-final message (confluentinc/librdkafka#4895); Kafka 4.x compares the nonce strictly
# (RFC 5802) and refuses it, and so do we. Debian 12's kcat links librdkafka 2.0.2.
KCAT_SCRAM_OK = _kcat_librdkafka_version() >= (2, 6, 1)
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_alice="alice-secret" user_admin="admin-secret";'
)


class TlsFiles:
    """A throwaway CA with a broker (localhost, 127.0.0.1) and a client certificate."""

    def __init__(self, directory: Path) -> None:
        pki = LocalPki.create(directory)
        broker, client = pki.issue_server("broker"), pki.issue_client("client")
        self.ca, self.broker_keystore = pki.ca_path, broker.chain_path
        self.client_cert, self.client_key = client.cert_path, client.key_path


class _Secure:
    def __init__(self, broker: InProcessBroker, tls: TlsFiles, principals: list[tuple[str, str]]) -> None:
        self.broker, self.tls, self.principals = broker, tls, principals

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.broker.server.bound[listener][1]}"

    def client_config(self, listener: str, **extra: Any) -> dict[str, Any]:
        config: dict[str, Any] = {"bootstrap.servers": self.address(listener), "security.protocol": listener}
        if listener in ("SSL", "SASL_SSL"):
            config["ssl.ca.location"] = str(self.tls.ca)
        if listener == "SSL":
            config["ssl.certificate.location"] = str(self.tls.client_cert)
            config["ssl.key.location"] = str(self.tls.client_key)
        if listener.startswith("SASL"):
            config.update(
                {"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}
            )
        config.update(extra)
        return config


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Secure]:
    base = tmp_path_factory.mktemp("secure")
    tls = TlsFiles(base / "tls")
    broker = InProcessBroker(
        base / "logs",
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(tls.broker_keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(tls.ca),
            "listener.name.ssl.ssl.client.auth": "required",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
            "offsets.topic.replication.factor": "1",
            "group.initial.rebalance.delay.ms": "0",
            "connection.failed.authentication.delay.ms": "10",
        },
        add_scram=[parse_add_scram("SCRAM-SHA-512=[name=carol,password=carol-secret,iterations=8192]")],
    )
    principals: list[tuple[str, str]] = []
    broker.start()
    server = broker.server.socket_server
    assert server is not None
    handler = server.handler

    async def recording(rctx: Any, frame: bytes, body_offset: int) -> Any:
        if rctx.api_key != ApiKey.API_VERSIONS:  # (SASL: ApiVersions comes before authentication)
            principals.append((rctx.listener_name, rctx.principal))
        return await handler(rctx, frame, body_offset)

    server.handler = recording
    try:
        yield _Secure(broker, tls, principals)
    finally:
        broker.stop()


def _round_trip(config: dict[str, Any], topic: str, count: int = 20) -> list[bytes]:
    producer = confluent_kafka.Producer({**config, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), key=b"k")
    assert producer.flush(20) == 0
    consumer = confluent_kafka.Consumer(
        {**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def _topic() -> str:
    return f"t-sec-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("listener", ["SSL", "SASL_PLAINTEXT", "SASL_SSL"])
def test_confluent_produce_consume(secure: _Secure, listener: str) -> None:
    assert _round_trip(secure.client_config(listener), _topic()) == [f"v{i}".encode() for i in range(20)]
    seen = {p for name, p in secure.principals if name == listener}
    expected = "User:CN=client" if listener == "SSL" else "User:alice"
    assert seen == {expected}


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")
@pytest.mark.parametrize(
    ("listener", "overrides", "principal"),
    [
        ("SSL", {}, "User:CN=client"),
        ("SASL_PLAINTEXT", {"sasl.username": "admin", "sasl.password": "admin-secret"}, "User:admin"),
        pytest.param(
            "SASL_SSL",
            {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol", "sasl.password": "carol-secret"},
            "User:carol",
            marks=pytest.mark.skipif(
                not KCAT_SCRAM_OK, reason="kcat's librdkafka < 2.6.1 sends a SCRAM nonce Kafka 4.x refuses"
            ),
        ),
    ],
    ids=["ssl", "sasl-plaintext-plain", "sasl-ssl-scram-sha-512"],
)
def test_kcat_produce_consume(
    secure: _Secure, listener: str, overrides: dict[str, str], principal: str
) -> None:
    assert KCAT is not None
    topic = _topic()
    config = secure.client_config(listener, **overrides)
    args = ["-b", config.pop("bootstrap.servers")]
    for key, value in config.items():
        args += ["-X", f"{key}={value}"]
    lines = [f"line-{i}" for i in range(50)]
    subprocess.run(
        [KCAT, *args, "-t", topic, "-P", "-p", "0"],
        input="\n".join(lines) + "\n",
        text=True,
        check=True,
        timeout=30,
        capture_output=True,
    )
    out = subprocess.run(
        [KCAT, *args, "-t", topic, "-C", "-p", "0", "-o", "beginning", "-e", "-f", "%s\n"],
        text=True,
        check=True,
        timeout=30,
        capture_output=True,
    ).stdout
    assert out.split() == lines
    assert (listener, principal) in secure.principals


@pytest.mark.skipif(KCAT is None or KCAT_SCRAM_OK, reason="needs kcat with librdkafka < 2.6.1")
def test_kcat_old_scram_nonce_is_refused_as_kafka_4_refuses_it(secure: _Secure) -> None:
    assert KCAT is not None
    config = secure.client_config(
        "SASL_SSL",
        **{"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol", "sasl.password": "carol-secret"},
    )
    args = ["-b", config.pop("bootstrap.servers")]
    for key, value in config.items():
        args += ["-X", f"{key}={value}"]
    refused = subprocess.run([KCAT, *args, "-L"], capture_output=True, text=True, timeout=30)
    assert refused.returncode != 0
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in refused.stderr
    # the broker keeps serving: confluent-kafka (librdkafka 2.16) logs in as carol right after
    assert _round_trip(
        secure.client_config(
            "SASL_SSL",
            **{"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol", "sasl.password": "carol-secret"},
        ),
        _topic(),
        count=2,
    ) == [b"v0", b"v1"]


def _errors_of(config: dict[str, Any], timeout_s: float = 10.0) -> list[confluent_kafka.KafkaError]:
    """Errors librdkafka reports for a client that cannot get in (it keeps retrying: watch error_cb)."""
    errors: list[confluent_kafka.KafkaError] = []
    producer = confluent_kafka.Producer({**config, "error_cb": errors.append, "reconnect.backoff.ms": 200})
    deadline = time.monotonic() + timeout_s
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    return errors


def test_refusals_keep_the_broker_serving(secure: _Secure, tmp_path: Path) -> None:
    wrong = _errors_of(secure.client_config("SASL_SSL", **{"sasl.password": "not-the-password"}))
    assert wrong and "Invalid username or password" in wrong[0].str()
    untrusted = TlsFiles(tmp_path / "other-ca")
    rejected = _errors_of(secure.client_config("SASL_SSL", **{"ssl.ca.location": str(untrusted.ca)}))
    assert rejected and "certificate verify failed" in rejected[0].str()
    no_client_cert = {
        k: v for k, v in secure.client_config("SSL").items() if not k.startswith(("ssl.cert", "ssl.key"))
    }
    assert _errors_of(no_client_cert)  # ssl.client.auth=required
    plaintext = _errors_of({"bootstrap.servers": secure.address("SSL"), "socket.timeout.ms": 2000})
    assert plaintext
    assert _round_trip(secure.client_config("SASL_PLAINTEXT"), _topic(), count=3) == [b"v0", b"v1", b"v2"]


def _frame(api_key: ApiKey, version: int, **fields: Any) -> bytes:
    return encode_request(build(request_class(api_key, version), **fields), 7, "raw")


def _read(sock: socket.socket) -> bytes | None:
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    size = struct.unpack(">i", head)[0]
    body = b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_garbage_before_authentication(secure: _Secure) -> None:
    host, port = "127.0.0.1", secure.broker.server.bound["SASL_PLAINTEXT"][1]
    metadata = _frame(
        ApiKey.METADATA,
        12,
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    for payload in (
        metadata,  # a normal request before authentication
        struct.pack(">i", 600_000) + b"\0" * 16,  # above sasl.server.max.receive.size
        struct.pack(">i", 12) + b"\xde\xad\xbe\xef" * 3,  # not a Kafka request
    ):
        with socket.create_connection((host, port), timeout=10) as sock:
            sock.sendall(payload)
            assert _closed(sock)
    # another API during SaslAuthenticate: its error response with ILLEGAL_SASL_STATE, then
    # closed (Kafka's SaslServerAuthenticator.handleSaslToken)
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(_frame(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN") + _frame(ApiKey.LIST_GROUPS, 3))
        assert decode_response(ApiKey.SASL_HANDSHAKE, 1, _read(sock) or b"")[1].error_code == ErrorCode.none
        listed = decode_response(ApiKey.LIST_GROUPS, 3, _read(sock) or b"")[1]
        assert listed.error_code == ErrorCode.illegal_sasl_state and listed.groups == ()
        assert _closed(sock)
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(_frame(ApiKey.SASL_HANDSHAKE, 1, mechanism="GSSAPI"))
        response = decode_response(ApiKey.SASL_HANDSHAKE, 1, _read(sock) or b"")[1]
        assert response.error_code == ErrorCode.unsupported_sasl_mechanism and response.mechanisms == (
            "PLAIN",
        )
        assert _closed(sock)
    with socket.create_connection((host, port), timeout=10) as sock:  # SASL garbage, then a failure
        sock.sendall(_frame(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN"))
        _read(sock)
        sock.sendall(_frame(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=bytes(range(256))))
        failed = decode_response(ApiKey.SASL_AUTHENTICATE, 2, _read(sock) or b"")[1]
        assert failed.error_code == ErrorCode.sasl_authentication_failed
        assert _closed(sock)
    # many bad connections at once while a good client works
    threads = [threading.Thread(target=_garbage_connection, args=(host, port)) for _ in range(20)]
    for thread in threads:
        thread.start()
    assert _round_trip(secure.client_config("SASL_PLAINTEXT"), _topic(), count=3) == [b"v0", b"v1", b"v2"]
    for thread in threads:
        thread.join(10)


def _garbage_connection(host: str, port: int) -> None:
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(
            _frame(ApiKey.SASL_HANDSHAKE, 0, mechanism="PLAIN") + struct.pack(">i", 5) + b"\0\0\0\0\0"
        )
        assert _read(sock) is not None  # the handshake response; the bad raw token closes
        assert _closed(sock)


def _scram(secure: _Secure, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return secure.client_config(
        "SASL_SSL", **{"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
    )


def test_scram_users_bootstrap_alter_describe(secure: _Secure) -> None:
    # carol came from --add-scram at startup
    carol = _scram(secure, "SCRAM-SHA-512", "carol", "carol-secret")
    assert _round_trip(carol, _topic(), count=3) == [b"v0", b"v1", b"v2"]
    assert ("SASL_SSL", "User:carol") in secure.principals
    admin = AdminClient({"bootstrap.servers": secure.address("PLAINTEXT")})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
    futures = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion("bob", info, b"bob-secret"),
            UserScramCredentialUpsertion(
                "weak", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"x"
            ),
            UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_512),
        ]
    )
    futures["bob"].result(10)
    for user, code in (("weak", "UNACCEPTABLE_CREDENTIAL"), ("nobody", "RESOURCE_NOT_FOUND")):
        with pytest.raises(KafkaException) as error:
            futures[user].result(10)
        assert error.value.args[0].name() == code
    described = admin.describe_user_scram_credentials().result(10)
    assert {
        u: [(i.mechanism, i.iterations) for i in d.scram_credential_infos] for u, d in described.items()
    } == {
        "bob": [(ScramMechanism.SCRAM_SHA_256, 8192)],
        "carol": [(ScramMechanism.SCRAM_SHA_512, 8192)],
    }
    with pytest.raises(KafkaException) as error:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(10)
    assert error.value.args[0].name() == "RESOURCE_NOT_FOUND"
    bob = _scram(secure, "SCRAM-SHA-256", "bob", "bob-secret")
    assert _round_trip(bob, _topic(), count=2) == [b"v0", b"v1"]
    wrong = _errors_of(_scram(secure, "SCRAM-SHA-256", "bob", "bob-wrong"))
    assert wrong and "invalid credentials" in wrong[0].str()
    assert _errors_of(_scram(secure, "SCRAM-SHA-512", "bob", "bob-secret"))  # no SHA-512 credential
    admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)])[
        "bob"
    ].result(10)
    assert _errors_of(bob)
    assert secure.broker.call(lambda: sorted(secure.broker.ctx.image.scram_credentials)) == [("carol", 2)]
