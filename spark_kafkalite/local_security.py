"""Security of a :class:`~spark_kafkalite.local_cluster.LocalCluster` (``LocalCluster(security=...)``,
``kafkalite cluster up --secure``): a throwaway CA with one broker certificate per node
(:mod:`spark_kafkalite.local_pki`), a client listener speaking ``SSL``, ``SASL_PLAINTEXT`` or
``SASL_SSL``, and one admin user.

Broker side (Kafka's keys): the client listener is named after its protocol, with
``ssl.keystore.type=PEM`` / ``ssl.keystore.location`` (the node's key + chain) and
``ssl.truststore.type=PEM`` / ``ssl.truststore.location`` (the CA); ``sasl.enabled.mechanisms``
PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; the admin user's PLAIN password in
``listener.name.<listener>.plain.sasl.jaas.config`` (``user_<name>="<password>"``). With a SCRAM
mechanism the SCRAM credential (SCRAM-SHA-256 and -512, 4096 iterations) is then stored through
the controller with AlterUserScramCredentials, sent by our admin client logged in with PLAIN
(rather than ``python -m broker --add-scram``, which would show the password in ``ps``). Brokers
of a multi-node cluster replicate over the same listener: TLS with the host name check, and SASL
PLAIN as the admin user (``sasl.mechanism.inter.broker.protocol``, the ``username`` /
``password`` options of the listener's PLAIN JAAS entry).

Client side: :meth:`ClusterSecurity.client_config` gives the settings our client and
confluent-kafka both take (``security.protocol``, ``ssl.ca.location``, ``sasl.mechanism``,
``sasl.username``, ``sasl.password``); the password is random unless given and never appears in
``repr``.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_kafkalite.local_pki import LocalPki

__all__ = ["ClusterSecurity"]

_PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_PROTOCOLS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class ClusterSecurity:
    """How a LocalCluster is secured.

    Args:
        protocol: the client listener's protocol: ``SASL_SSL`` (default), ``SSL`` or
            ``SASL_PLAINTEXT``.
        mechanism: the SASL mechanism :meth:`client_config` uses (``SCRAM-SHA-512`` default,
            ``SCRAM-SHA-256``, ``PLAIN``); the brokers enable all three.
        username: the admin user.
        password: its password (random by default).

    Raises:
        ValueError: an unknown protocol or mechanism, or a user name with ``"`` or ``\\``.
    """

    protocol: str = "SASL_SSL"
    mechanism: str = "SCRAM-SHA-512"
    username: str = "admin"
    password: str = field(default_factory=lambda: secrets.token_urlsafe(18), repr=False)

    def __post_init__(self) -> None:
        protocol, mechanism = self.protocol.upper(), self.mechanism.upper()
        if protocol not in _PROTOCOLS:
            raise ValueError(f"security protocol {self.protocol!r}: use one of {', '.join(_PROTOCOLS)}")
        if mechanism not in _MECHANISMS:
            raise ValueError(f"SASL mechanism {self.mechanism!r}: use one of {', '.join(_MECHANISMS)}")
        if not self.username or any(c in self.username for c in '"\\=, '):
            raise ValueError(
                "the admin user name must be non-empty without quotes, backslashes, '=', ',' or spaces"
            )
        object.__setattr__(self, "protocol", protocol)
        object.__setattr__(self, "mechanism", mechanism)

    @classmethod
    def of(cls, value: ClusterSecurity | str | bool) -> ClusterSecurity:
        """``True`` -> the defaults, a protocol name -> that protocol, else ``value`` itself."""
        if isinstance(value, ClusterSecurity):
            return value
        if value is True:
            return cls()
        if isinstance(value, str):
            return cls(protocol=value)
        raise ValueError(f"security={value!r}: pass a ClusterSecurity, a protocol name or True")

    @property
    def listener(self) -> str:
        """The client listener's name (its protocol)."""
        return self.protocol

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def pki(self, data_dir: Path) -> LocalPki:
        """The CA of a cluster in ``data_dir`` (created on first use, kept across restarts)."""
        directory = data_dir / "tls"
        if (directory / "ca.pem").exists() and (directory / "ca-key.pem").exists():
            return LocalPki.load(directory)
        return LocalPki.create(directory)

    def broker_config(self, data_dir: Path, node_id: int) -> dict[str, str]:
        """The security keys of broker ``node_id`` (its certificate is issued on first use)."""
        props: dict[str, str] = {}
        if self.uses_tls:
            pki = self.pki(data_dir)
            keystore = pki.directory / f"broker-{node_id}-keystore.pem"
            if not keystore.exists():
                pki.issue_server(f"broker-{node_id}", ["localhost", "127.0.0.1"])
            props.update(
                {
                    "ssl.keystore.type": "PEM",
                    "ssl.keystore.location": str(keystore),
                    "ssl.truststore.type": "PEM",
                    "ssl.truststore.location": str(pki.ca_path),
                }
            )
        if self.uses_sasl:
            password = _jaas_quote(self.password)
            props["sasl.enabled.mechanisms"] = ",".join(_MECHANISMS)
            props["sasl.mechanism.inter.broker.protocol"] = "PLAIN"
            props[f"listener.name.{self.listener.lower()}.plain.sasl.jaas.config"] = (
                f"{_PLAIN_LOGIN_MODULE} required username={_jaas_quote(self.username)} password={password} "
                f"user_{self.username}={password};"
            )
        return props

    def client_config(self, data_dir: Path, bootstrap_servers: str) -> dict[str, Any]:
        """Settings for our client and confluent-kafka (and, with the ``kafka.`` prefix, the
        ``kafkalite`` Spark format)."""
        config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "security.protocol": self.protocol}
        if self.uses_tls:
            config["ssl.ca.location"] = str(data_dir / "tls" / "ca.pem")
        if self.uses_sasl:
            config.update(
                {
                    "sasl.mechanism": self.mechanism,
                    "sasl.username": self.username,
                    "sasl.password": self.password,
                }
            )
        return config

    def create_scram_user(self, data_dir: Path, bootstrap_servers: str, timeout_s: float) -> None:
        """Store the admin user's SCRAM-SHA-256 and -512 credentials (AlterUserScramCredentials,
        logged in with PLAIN). No-op unless :attr:`mechanism` is a SCRAM one (a PLAIN cluster
        needs no credential in the metadata).

        Raises:
            KafkaError: the brokers refused or did not answer in time.
        """
        if not (self.uses_sasl and self.mechanism.startswith("SCRAM-")):
            return
        from spark_kafkalite.client.admin import KafkaAdminClient
        from spark_kafkalite.client.admin_scram import ScramCredentialInfo, UserScramCredentialUpsertion

        config = {**self.client_config(data_dir, bootstrap_servers), "sasl.mechanism": "PLAIN"}
        with KafkaAdminClient({**config, "default.api.timeout.ms": int(timeout_s * 1000)}) as admin:
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):  # one request per user and mechanism:
                # Kafka refuses a user altered twice in one request (DUPLICATE_RESOURCE)
                info = ScramCredentialInfo(mechanism, 4096)
                admin.alter_user_scram_credentials(
                    [UserScramCredentialUpsertion(self.username, info, self.password)]
                )
