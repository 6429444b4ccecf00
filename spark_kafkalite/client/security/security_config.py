"""What a connection needs to set up its channel (Java ``ChannelBuilders.clientChannelBuilder``):
``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), the TLS context for SSL and
SASL_SSL (:mod:`.ssl_factory`), and the SASL mechanism and credentials for SASL_*.

SASL settings, in either naming scheme:

* mechanism: Java's ``sasl.mechanism`` or librdkafka's ``sasl.mechanisms`` (its alias; one
  mechanism only). Both clients default to GSSAPI, which this client does not implement, so a
  SASL protocol without a mechanism is an error naming the supported ones.
* credentials: Java's ``sasl.jaas.config`` (``PlainLoginModule`` for PLAIN, ``ScramLoginModule``
  for SCRAM-SHA-256/512, options ``username`` and ``password``; :mod:`spark_kafkalite.protocol.jaas`)
  or librdkafka's ``sasl.username`` / ``sasl.password``. When both are given they must name the
  same user.

The password is kept out of ``repr`` and of every error message.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_kafkalite.client.security.ssl_factory import create_ssl_context
from spark_kafkalite.protocol.errors import InvalidConfigError
from spark_kafkalite.protocol.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasConfigError,
    single_login_module,
)
from spark_kafkalite.protocol.sasl_client import (
    PLAIN,
    SUPPORTED_MECHANISMS,
    SaslClient,
    create_sasl_client,
)

__all__ = ["ClientSecurity", "SaslCredentials"]


@dataclass(frozen=True)
class SaslCredentials:
    """A SASL mechanism with its user and password (``repr`` shows no password)."""

    mechanism: str
    username: str
    password: str = field(repr=False)

    @property
    def principal(self) -> str:
        """``User:<name>``, the principal a Kafka broker authenticates this user as."""
        return f"User:{self.username}"

    def new_client(self) -> SaslClient:
        """A fresh client for one exchange (one per connection)."""
        return create_sasl_client(self.mechanism, self.username, self.password)


def _text(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    if value is None or not str(value).strip():
        return None
    return str(value)


def _mechanism(config: Mapping[str, Any]) -> str:
    java = _text(config, "sasl.mechanism")
    rdkafka = _text(config, "sasl.mechanisms")
    if java and rdkafka and java.strip().upper() != rdkafka.strip().upper():
        raise InvalidConfigError("sasl.mechanism and sasl.mechanisms disagree: set one")
    raw = (java or rdkafka or "GSSAPI").strip()
    if "," in raw or " " in raw:
        raise InvalidConfigError(f"sasl.mechanism {raw!r}: only one mechanism may be given")
    mechanism = raw.upper()
    if mechanism not in SUPPORTED_MECHANISMS:
        raise InvalidConfigError(
            f"sasl.mechanism {raw} is not supported by this client: use {', '.join(SUPPORTED_MECHANISMS)}"
        )
    return mechanism


def _credentials(config: Mapping[str, Any], mechanism: str) -> SaslCredentials:
    username = _text(config, "sasl.username")
    password = config.get("sasl.password")
    jaas = _text(config, "sasl.jaas.config")
    if jaas is not None:
        try:
            entry = single_login_module(jaas)
        except JaasConfigError as exc:
            raise InvalidConfigError(f"sasl.jaas.config: {exc}") from None
        expected = PLAIN_LOGIN_MODULE if mechanism == PLAIN else SCRAM_LOGIN_MODULE
        if entry.login_module != expected:
            raise InvalidConfigError(
                f"sasl.jaas.config: sasl.mechanism {mechanism} needs login module {expected}, "
                f"not {entry.login_module}"
            )
        missing = [k for k in ("username", "password") if not entry.options.get(k)]
        if missing:
            raise InvalidConfigError(
                f"sasl.jaas.config: {entry.login_module} needs option(s) {', '.join(missing)}"
            )
        if username is not None and username != entry.options["username"]:
            raise InvalidConfigError("sasl.username and the username of sasl.jaas.config disagree: set one")
        return SaslCredentials(mechanism, entry.options["username"], entry.options["password"])
    if username is None or password is None or not str(password):
        raise InvalidConfigError(
            f"SASL mechanism {mechanism} needs credentials: sasl.username and sasl.password, "
            "or sasl.jaas.config"
        )
    return SaslCredentials(mechanism, username, str(password))


@dataclass(frozen=True)
class ClientSecurity:
    """A client's channel settings.

    Attributes:
        protocol: ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``.
        ssl_context: the TLS context (SSL, SASL_SSL), else None.
        sasl: the mechanism and credentials (SASL_*), else None.
    """

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslCredentials | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ClientSecurity:
        """Build and check the settings of a parsed client config (``parse_config``).

        Raises:
            InvalidConfigError: an unknown protocol, unsupported or ambiguous mechanism, missing
                or malformed credentials, or a TLS setting that does not load; the message names
                the key, never a secret.
        """
        protocol = str(config.get("security.protocol", "PLAINTEXT")).strip().upper()
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise InvalidConfigError(f"invalid security.protocol {protocol!r}")
        context = create_ssl_context(config) if protocol in ("SSL", "SASL_SSL") else None
        sasl = None
        if protocol.startswith("SASL_"):
            sasl = _credentials(config, _mechanism(config))
        return cls(protocol, context, sasl)
