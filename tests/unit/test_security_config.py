"""Broker TLS/SASL configuration: Kafka's keys, per-listener prefixes, PEM stores (file and
inline, encrypted keys), errors that name the key as configured, and secrets kept out of the
config dump."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from broker.config import ConfigError, KafkaConfig
from spark_kafkalite.local_pki import LocalPki

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


class TlsFiles:
    def __init__(self, directory: Path) -> None:
        pki = LocalPki.create(directory)
        broker, client = pki.issue_server("broker"), pki.issue_client("client")
        self.pki, self.ca, self.broker_keystore = pki, pki.ca_path, broker.chain_path
        self.broker_cert, self.broker_key = broker.cert_path, broker.key_path
        self.client_cert, self.client_key = client.cert_path, client.key_path


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return TlsFiles(tmp_path_factory.mktemp("tls"))


def _props(tls: TlsFiles, tmp_path: Path, **extra: str) -> dict[str, str]:
    props = {
        "node.id": "1",
        "log.dirs": str(tmp_path),
        "listeners": "PLAINTEXT://:0,SSL://:0,SASL_PLAINTEXT://:0,SASL_SSL://:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca),
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
    }
    props.update({k.replace("__", "."): v for k, v in extra.items()})
    return props


def test_four_listeners(tls: TlsFiles, tmp_path: Path) -> None:
    config = KafkaConfig(_props(tls, tmp_path))
    security = config.listener_security
    assert security["PLAINTEXT"].ssl_context is None and not security["PLAINTEXT"].uses_sasl
    assert security["SSL"].ssl_context is not None
    assert security["SSL"].ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert security["SASL_SSL"].ssl_context is not None
    assert security["SASL_SSL"].ssl_context.verify_mode == ssl.CERT_NONE
    assert security["SASL_PLAINTEXT"].ssl_context is None
    assert security["SASL_SSL"].sasl_mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert dict(security["SASL_SSL"].plain_users) == {"alice": "alice-secret"}
    assert security["SASL_SSL"].sasl_max_receive_size == 524288


def test_inline_encrypted_pem_and_redaction(tls: TlsFiles, tmp_path: Path) -> None:
    issued = tls.pki.issue_server("encrypted", key_password="key-pass")
    cert, key = issued.cert_pem(), issued.key_pem()
    props = {
        "node.id": "1",
        "log.dirs": str(tmp_path),
        "listeners": "BROKER://:0",
        "listener.security.protocol.map": "BROKER:SASL_SSL",
        "listener.name.broker.ssl.keystore.type": "PEM",
        "listener.name.broker.ssl.keystore.key": key,
        "listener.name.broker.ssl.keystore.certificate.chain": cert,
        "listener.name.broker.ssl.key.password": "key-pass",
        "listener.name.broker.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.broker.plain.sasl.jaas.config": JAAS,
    }
    config = KafkaConfig(props)
    assert config.listener_security["BROKER"].ssl_context is not None
    dump = config.describe()
    for secret in ("alice-secret", "key-pass", "PRIVATE KEY"):
        assert secret not in dump
    assert "listener.name.broker.plain.sasl.jaas.config = [hidden]" in dump
    assert "listener.name.broker.sasl.enabled.mechanisms = PLAIN" in dump
    with pytest.raises(ConfigError, match="^listener.name.broker.ssl.key.password: cannot load") as info:
        KafkaConfig({**props, "listener.name.broker.ssl.key.password": "not-it-123"})
    assert "not-it-123" not in str(info.value)
    missing = {k: v for k, v in props.items() if k != "listener.name.broker.ssl.key.password"}
    with pytest.raises(ConfigError, match="^ssl.key.password: the private key is encrypted"):
        KafkaConfig(missing)


@pytest.mark.parametrize(
    ("extra", "key", "message"),
    [
        ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type", "set ssl.keystore.type=PEM"),
        (
            {"listener.name.ssl.ssl.keystore.location": "/nonexistent.pem"},
            "listener.name.ssl.ssl.keystore.location",
            "cannot read",
        ),
        ({"ssl.keystore.key": "x"}, "ssl.keystore.location", "not both"),
        ({"ssl.keystore.password": "x"}, "ssl.keystore.password", "must not be set"),
        (
            {"ssl.truststore.location": "", "listener.name.ssl.ssl.truststore.location": "/nonexistent"},
            "listener.name.ssl.ssl.truststore.location",
            "cannot read",
        ),
        ({"ssl.client.auth": "sometimes"}, "ssl.client.auth", "not one of"),
        ({"ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols", "not one of"),
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms", "GSSAPI is not supported"),
        (
            {"listener.name.sasl_ssl.sasl.enabled.mechanisms": ""},
            "listener.name.sasl_ssl.sasl.enabled.mechanisms",
            "enables no mechanism",
        ),
        (
            {"listener.name.sasl_ssl.plain.sasl.jaas.config": "PlainLoginModule"},
            "listener.name.sasl_ssl.plain.sasl.jaas.config",
            "control flag",
        ),
        (
            {
                "listener.name.sasl_ssl.plain.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            },
            "listener.name.sasl_ssl.plain.sasl.jaas.config",
            "PlainLoginModule",
        ),
        (
            {
                "listener.name.sasl_ssl.plain.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required;"
            },
            "listener.name.sasl_ssl.plain.sasl.jaas.config",
            "user_",
        ),
        (
            {"listener.name.sasl_ssl.gssapi.sasl.jaas.config": "x required;"},
            "listener.name.sasl_ssl.gssapi.sasl.jaas.config",
            "unsupported SASL mechanism",
        ),
        (
            {"listener.name.sasl_ssl.log.retention.ms": "1"},
            "listener.name.sasl_ssl.log.retention.ms",
            "cannot be set per listener",
        ),
        (
            {"listener.name.other.ssl.client.auth": "none"},
            "listener.name.other.ssl.client.auth",
            "not one of listeners",
        ),
        (
            {"listener.name.ssl.sasl.server.max.receive.size": "x"},
            "listener.name.ssl.sasl.server.max.receive.size",
            "invalid int",
        ),
    ],
)
def test_errors_name_the_key(
    tls: TlsFiles, tmp_path: Path, extra: dict[str, str], key: str, message: str
) -> None:
    props = {**_props(tls, tmp_path), **extra}
    if props.get("ssl.truststore.location") == "":
        del props["ssl.truststore.location"]
    with pytest.raises(ConfigError, match=message) as info:
        KafkaConfig(props)
    assert info.value.key == key


def test_pem_content_rules(tls: TlsFiles, tmp_path: Path) -> None:
    key_only = tmp_path / "key-only.pem"
    key_only.write_text(tls.broker_key.read_text())
    with pytest.raises(ConfigError, match="no PEM CERTIFICATE") as info:
        KafkaConfig({**_props(tls, tmp_path), "ssl.keystore.location": str(key_only)})
    assert info.value.key == "ssl.keystore.location"
    pkcs1 = tmp_path / "pkcs1.pem"
    pkcs1.write_text(
        tls.broker_key.read_text().replace("PRIVATE KEY", "EC PRIVATE KEY") + tls.broker_cert.read_text()
    )
    with pytest.raises(ConfigError, match="PKCS#8"):
        KafkaConfig({**_props(tls, tmp_path), "ssl.keystore.location": str(pkcs1)})
    other_key = tmp_path / "mismatch.pem"
    other_key.write_text(tls.client_key.read_text() + tls.broker_cert.read_text())
    with pytest.raises(ConfigError, match="do not load"):
        KafkaConfig({**_props(tls, tmp_path), "ssl.keystore.location": str(other_key)})
    no_trust = {k: v for k, v in _props(tls, tmp_path).items() if not k.startswith("ssl.truststore")}
    with pytest.raises(ConfigError, match="needs a trust store") as info:
        KafkaConfig(no_trust)
    assert info.value.key == "listener.name.ssl.ssl.client.auth"


def test_controller_listener_must_be_plaintext(tls: TlsFiles, tmp_path: Path) -> None:
    props = {
        **_props(tls, tmp_path),
        "listeners": "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "listener.security.protocol.map": "SSL:SSL,CONTROLLER:SSL",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": "1@127.0.0.1:9999",
    }
    for key in [k for k in props if k.startswith("listener.name.sasl")]:
        del props[key]
    with pytest.raises(ConfigError, match="controller listener CONTROLLER must be PLAINTEXT"):
        KafkaConfig(props)


def test_inter_broker_client_side(tls: TlsFiles, tmp_path: Path) -> None:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="broker" password="broker-secret" user_broker="broker-secret";'
    )
    props = {
        "node.id": "1",
        "log.dirs": str(tmp_path),
        "listeners": "INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:9999",
        "listener.security.protocol.map": "INTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": "1@127.0.0.1:9999,2@127.0.0.1:9998",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca),
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": jaas,
    }
    security = KafkaConfig(props).inter_broker_security
    assert security is not None and security.ssl_context is not None
    assert security.ssl_context.check_hostname and security.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert (security.sasl_mechanism, security.username, security.password) == (
        "PLAIN",
        "broker",
        "broker-secret",
    )
    assert "broker-secret" not in repr(security)
    assert not KafkaConfig(
        {**props, "ssl.endpoint.identification.algorithm": ""}
    ).inter_broker_security.ssl_context.check_hostname  # type: ignore[union-attr]
    single = {**props, "controller.quorum.voters": "1@127.0.0.1:9999"}
    assert KafkaConfig(single).inter_broker_security is None  # one node dials no other broker
    for extra, key in (
        ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}, "sasl.mechanism.inter.broker.protocol"),
        (
            {"listener.name.internal.plain.sasl.jaas.config": jaas.replace('username="broker" ', "")},
            "listener.name.internal.plain.sasl.jaas.config",
        ),
    ):
        with pytest.raises(ConfigError) as info:
            KafkaConfig({**props, **extra})
        assert info.value.key == key
