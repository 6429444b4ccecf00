"""Client security settings, pure logic: JAAS text, security.protocol / sasl.* / ssl.* checks,
the SASL client tokens (RFC 7677's SCRAM-SHA-256 example), and redaction of secrets."""

from __future__ import annotations

import argparse
import ssl
from pathlib import Path

import pytest

from spark_kafkalite.cli import cluster as cluster_cli
from spark_kafkalite.client.config import REDACTED, is_sensitive_config, parse_config, redact_config
from spark_kafkalite.client.security.security_config import ClientSecurity
from spark_kafkalite.client.security.ssl_factory import create_ssl_context
from spark_kafkalite.local_pki import LocalPki
from spark_kafkalite.local_security import ClusterSecurity
from spark_kafkalite.protocol.errors import InvalidConfigError
from spark_kafkalite.protocol.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasConfigError,
    parse_jaas_config,
    single_login_module,
)
from spark_kafkalite.protocol.sasl_client import (
    PlainSaslClient,
    SaslClientError,
    ScramSaslClient,
)

SECRET = "s3cr3t-Pa55"
SCRAM_JAAS = f'{SCRAM_LOGIN_MODULE} required username="alice" password="{SECRET}";'


# ---------------------------------------------------------------- JAAS


def test_jaas_kafka_examples() -> None:
    entry = single_login_module(SCRAM_JAAS)
    assert (entry.login_module, entry.control_flag) == (SCRAM_LOGIN_MODULE, "required")
    assert entry.options == {"username": "alice", "password": SECRET}
    broker = parse_jaas_config(
        f"{PLAIN_LOGIN_MODULE} REQUIRED username=admin password='admin-secret'\n"
        '  user_admin="admin-secret" /* a comment */ user_alice="a;b=c\\"d"; // trailing'
    )
    assert broker[0].control_flag == "required"
    assert broker[0].options == {
        "username": "admin",
        "password": "admin-secret",
        "user_admin": "admin-secret",
        "user_alice": 'a;b=c"d',
    }
    assert len(parse_jaas_config(SCRAM_JAAS + " " + SCRAM_JAAS)) == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Login module not specified"),
        (SCRAM_LOGIN_MODULE, "control flag not specified"),
        (f"{SCRAM_LOGIN_MODULE} mandatory username=a;", "Invalid login module control flag"),
        (f'{SCRAM_LOGIN_MODULE} required password="{SECRET}"', "not terminated by semi-colon"),
        (f"{SCRAM_LOGIN_MODULE} required password=;", "Value not specified for key 'password'"),
        (f'{SCRAM_LOGIN_MODULE} required password="{SECRET}', "unterminated quoted value"),
        (SCRAM_JAAS + SCRAM_JAAS, "contains 2 login modules"),
    ],
)
def test_jaas_errors_name_the_problem_not_the_secret(text: str, message: str) -> None:
    with pytest.raises(JaasConfigError, match=message) as info:
        single_login_module(text)
    assert SECRET not in str(info.value)


def test_jaas_entry_repr_hides_values() -> None:
    assert SECRET not in repr(single_login_module(SCRAM_JAAS))


# ---------------------------------------------------------------- SASL settings


def _security(**settings: object) -> ClientSecurity:
    return ClientSecurity.from_config(parse_config({"bootstrap.servers": "h:1", **settings}, {}, "test"))


def test_sasl_from_jaas_or_librdkafka_keys() -> None:
    java = _security(
        **{
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": SCRAM_JAAS,
        }
    )
    rdkafka = _security(
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "scram-sha-512",
            "sasl.username": "alice",
            "sasl.password": SECRET,
        }
    )
    assert java == rdkafka
    assert java.protocol == "SASL_PLAINTEXT" and java.ssl_context is None
    assert java.sasl is not None and java.sasl.principal == "User:alice"
    assert SECRET not in repr(java)
    plain = _security(
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "bob",
            "sasl.password": "x",
        }
    )
    assert plain.sasl is not None and plain.sasl.mechanism == "PLAIN"
    assert _security().protocol == "PLAINTEXT" and _security().sasl is None


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"sasl.username": "a", "sasl.password": SECRET}, "GSSAPI is not supported"),
        ({"sasl.mechanism": "PLAIN,SCRAM-SHA-256"}, "only one mechanism"),
        ({"sasl.mechanism": "PLAIN", "sasl.mechanisms": "SCRAM-SHA-256"}, "disagree"),
        ({"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "a"}, "needs credentials"),
        (
            {"sasl.mechanism": "PLAIN", "sasl.jaas.config": SCRAM_JAAS},
            "needs login module .*PlainLoginModule",
        ),
        (
            {
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": f"{SCRAM_LOGIN_MODULE} required password={SECRET};",
            },
            "needs option\\(s\\) username",
        ),
        (
            {"sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": SCRAM_JAAS, "sasl.username": "bob"},
            "disagree",
        ),
        (
            {
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": f'{SCRAM_LOGIN_MODULE} required password="{SECRET}"',
            },
            "semi-colon",
        ),
    ],
)
def test_bad_sasl_settings(settings: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message) as info:
        _security(**{"security.protocol": "SASL_SSL", **settings})
    assert SECRET not in str(info.value)


# ---------------------------------------------------------------- SASL tokens


def test_plain_token() -> None:
    client = PlainSaslClient("alice", SECRET)
    assert not client.is_complete
    assert client.initial_response() == b"\x00alice\x00" + SECRET.encode()
    assert client.is_complete and client.evaluate_challenge(b"") is None
    assert SECRET not in repr(client)


def test_scram_sha_256_rfc7677_example() -> None:
    client = ScramSaslClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.initial_response() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.evaluate_challenge(
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert not client.is_complete
    assert client.evaluate_challenge(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None
    assert client.is_complete


@pytest.mark.parametrize(
    ("server_first", "server_final", "message"),
    [
        (b"r=OTHER,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", None, "does not extend"),
        (b"r=abcXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1024", None, "below the minimum"),
        (b"r=abcXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=2000000", None, "at most 1000000"),
        (b"garbage", None, "server first message format"),
        (
            b"r=abcXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
            "invalid server signature",
        ),
        (b"r=abcXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", b"e=other-error", "server error"),
    ],
)
def test_scram_refuses_bad_server_tokens(
    server_first: bytes, server_final: bytes | None, message: str
) -> None:
    client = ScramSaslClient("SCRAM-SHA-512", "alice", SECRET, nonce="abc")
    client.initial_response()
    with pytest.raises(SaslClientError, match=message) as info:
        client.evaluate_challenge(server_first)
        client.evaluate_challenge(server_final or b"")
    assert SECRET not in str(info.value) and not client.is_complete


# ---------------------------------------------------------------- TLS settings


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> LocalPki:
    return LocalPki.create(tmp_path_factory.mktemp("pki"))


def test_ssl_context_from_librdkafka_and_java_pem_keys(pki: LocalPki) -> None:
    client = pki.issue_client("alice")
    encrypted = pki.issue_client("carol", key_password=SECRET)
    forms = [
        {
            "ssl.ca.location": str(pki.ca_path),
            "ssl.certificate.location": str(client.cert_path),
            "ssl.key.location": str(client.key_path),
        },
        {
            "ssl.ca.pem": pki.ca_pem(),
            "ssl.certificate.pem": client.cert_pem(),
            "ssl.key.pem": client.key_pem(),
        },
        {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca_path),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(client.chain_path),
        },
        {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": pki.ca_pem(),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": encrypted.cert_pem(),
            "ssl.keystore.key": encrypted.key_pem(),
            "ssl.key.password": SECRET,
        },
    ]
    for form in forms:
        context = create_ssl_context(form)
        assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
        assert context.cert_store_stats()["x509_ca"] == 1
    off = create_ssl_context(
        {"ssl.ca.location": str(pki.ca_path), "ssl.endpoint.identification.algorithm": "none"}
    )
    assert not off.check_hostname and off.verify_mode == ssl.CERT_REQUIRED
    assert (
        _security(**{"security.protocol": "ssl", "ssl.ca.location": str(pki.ca_path)}).ssl_context is not None
    )


def test_bad_ssl_settings(pki: LocalPki, tmp_path: Path) -> None:
    client = pki.issue_client("dave", key_password=SECRET)
    cases = [
        (
            {"ssl.truststore.type": "JKS", "ssl.truststore.location": str(pki.ca_path)},
            "'JKS' is not supported",
        ),
        (
            {
                "ssl.ca.location": str(pki.ca_path),
                "ssl.truststore.certificates": pki.ca_pem(),
                "ssl.truststore.type": "PEM",
            },
            "set only one of",
        ),
        ({"ssl.ca.location": str(tmp_path / "missing.pem")}, "no such file"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.key": client.key_pem()}, "must be set together"),
        (
            {"ssl.keystore.certificate.chain": client.cert_pem(), "ssl.keystore.key": client.key_pem()},
            "need ssl.keystore.type=PEM",
        ),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(client.chain_path),
                "ssl.keystore.password": "x",
            },
            "must not be set for a PEM keystore",
        ),
        ({"ssl.certificate.location": str(client.cert_path)}, "must be set together"),
        (
            {
                "ssl.certificate.location": str(client.cert_path),
                "ssl.key.location": str(client.key_path),
                "ssl.key.password": "wrong",
            },
            "cannot load the client certificate",
        ),
        ({"ssl.endpoint.identification.algorithm": "ldap"}, "use https or none"),
    ]
    for settings, message in cases:
        with pytest.raises(InvalidConfigError, match=message) as info:
            create_ssl_context(settings)
        assert SECRET not in str(info.value)


# ---------------------------------------------------------------- redaction


def test_secrets_are_redacted() -> None:
    config = {
        "sasl.jaas.config": SCRAM_JAAS,
        "kafka.sasl.password": SECRET,
        "ssl.key.password": SECRET,
        "ssl.keystore.key": SECRET,
        "sasl.oauthbearer.client.secret": SECRET,
        "bootstrap.servers": "h:1",
        "sasl.username": "alice",
    }
    redacted = redact_config(config)
    assert SECRET not in repr(redacted)
    assert redacted["bootstrap.servers"] == "h:1" and redacted["sasl.username"] == "alice"
    assert redacted["kafka.sasl.password"] == REDACTED
    assert is_sensitive_config("kafka.SSL.TRUSTSTORE.PASSWORD") and not is_sensitive_config(
        "kafka.ssl.ca.location"
    )


# ---------------------------------------------------------------- LocalCluster(security=...)


def test_cluster_security_broker_and_client_settings(tmp_path: Path) -> None:
    security = ClusterSecurity.of("sasl_ssl")
    assert (security.protocol, security.mechanism, security.username) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "admin",
    )
    assert security.password not in repr(security) and len(security.password) >= 20
    broker = security.broker_config(tmp_path, 1)
    assert broker["ssl.keystore.type"] == broker["ssl.truststore.type"] == "PEM"
    assert Path(broker["ssl.keystore.location"]).exists() and Path(broker["ssl.truststore.location"]).exists()
    jaas = single_login_module(broker["listener.name.sasl_ssl.plain.sasl.jaas.config"])
    assert jaas.login_module == PLAIN_LOGIN_MODULE
    assert jaas.options == {
        "username": "admin",
        "password": security.password,
        "user_admin": security.password,
    }
    assert broker["sasl.mechanism.inter.broker.protocol"] == "PLAIN"
    assert broker["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    client = security.client_config(tmp_path, "127.0.0.1:1")
    assert ClientSecurity.from_config(parse_config(client, {}, "test")).ssl_context is not None
    ca = (tmp_path / "tls" / "ca.pem").read_bytes()
    security.broker_config(tmp_path, 2)  # the CA is kept: one per cluster, certificates per node
    assert (tmp_path / "tls" / "ca.pem").read_bytes() == ca
    assert "sasl.jaas.config" not in ClusterSecurity.of("SSL").broker_config(tmp_path, 1)
    assert ClusterSecurity.of("SASL_PLAINTEXT").client_config(tmp_path, "h:1").get("ssl.ca.location") is None
    for bad in ({"protocol": "TLS"}, {"mechanism": "GSSAPI"}, {"username": 'a"b'}):
        with pytest.raises(ValueError):
            ClusterSecurity(**bad)  # type: ignore[arg-type]


def test_cluster_up_secure_keeps_the_password_of_the_data_dir(tmp_path: Path) -> None:
    args = argparse.Namespace(secure=True, security_protocol="SASL_SSL")
    first = cluster_cli._security(args, tmp_path)
    cluster_cli._write_client_properties(tmp_path, first.client_config(tmp_path, "127.0.0.1:1"))
    assert (tmp_path / "client.properties").stat().st_mode & 0o777 == 0o600
    assert cluster_cli.read_client_properties(tmp_path)["sasl.password"] == first.password
    assert cluster_cli._security(args, tmp_path).password == first.password
    assert cluster_cli._security(args, tmp_path / "fresh").password != first.password
    assert cluster_cli._security(argparse.Namespace(secure=False), tmp_path) is None
