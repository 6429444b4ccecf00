"""TLS contexts of the broker's listeners and of its own connections to other brokers, from the
resolved ``ssl.*`` values of a listener, PEM stores only (Kafka's ``SslFactory`` /
``DefaultSslEngineFactory`` with KIP-651 PEM key and trust stores; the store rules are in
:mod:`spark_kafkalite.tls`, shared with the client).

Every problem raises :class:`~broker.config_def.ConfigError` naming the key as configured
(e.g. ``listener.name.ssl.ssl.keystore.key``); key material never appears in messages.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from broker.config_def import ConfigError
from spark_kafkalite.tls import (
    TLS_VERSIONS,
    TlsConfigError,
    check_pem_store_type,
    endpoint_identification_enabled,
    load_key_pair,
    read_pem_key_store,
    read_pem_trust_store,
)

__all__ = ["create_server_ssl_context", "create_client_ssl_context", "KeyNamer"]

KeyNamer = Callable[[str], str]
"""``key_of(base_key)`` -> the key as the user set it (with its listener prefix, if any)."""

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


@contextlib.contextmanager
def _as_config_error(key_of: KeyNamer) -> Iterator[None]:
    try:
        yield
    except TlsConfigError as exc:
        raise ConfigError(key_of(exc.key), exc.message) from None


def _key_store(values: Mapping[str, Any], key_of: KeyNamer) -> tuple[str, str, str]:
    """(chain PEM, PKCS#8 key PEM, the key naming where the key came from)."""
    location, key, chain = (
        values["ssl.keystore.location"],
        values["ssl.keystore.key"],
        values["ssl.keystore.certificate.chain"],
    )
    store = None
    if location is not None or key is not None or chain is not None:
        with _as_config_error(key_of):
            check_pem_store_type(
                "keystore", str(values["ssl.keystore.type"]), values["ssl.keystore.password"]
            )
            store = read_pem_key_store(location, key, chain)
    if store is None:
        raise ConfigError(
            key_of("ssl.keystore.location"),
            "a TLS listener needs a key store: ssl.keystore.location or "
            "ssl.keystore.key + ssl.keystore.certificate.chain",
        )
    return store


def _load_key_store(context: ssl.SSLContext, values: Mapping[str, Any], key_of: KeyNamer) -> None:
    chain, key_pem, source = _key_store(values, key_of)
    with _as_config_error(key_of):
        load_key_pair(context, chain, key_pem, values["ssl.key.password"], source)


def _trust_store(values: Mapping[str, Any], key_of: KeyNamer) -> str | None:
    location, certificates = values["ssl.truststore.location"], values["ssl.truststore.certificates"]
    if location is None and certificates is None:
        return None
    with _as_config_error(key_of):
        check_pem_store_type(
            "truststore", str(values["ssl.truststore.type"]), values["ssl.truststore.password"]
        )
        return read_pem_trust_store(location, certificates)


def _protocols(context: ssl.SSLContext, values: Mapping[str, Any], key_of: KeyNamer) -> None:
    enabled = [TLS_VERSIONS[v] for v in values["ssl.enabled.protocols"] if v]
    if not enabled:
        raise ConfigError(key_of("ssl.enabled.protocols"), "at least one of TLSv1.2, TLSv1.3 is required")
    context.minimum_version, context.maximum_version = min(enabled), max(enabled)


def create_server_ssl_context(values: Mapping[str, Any], key_of: KeyNamer) -> ssl.SSLContext:
    """A server-side context for one listener from its resolved ``ssl.*`` values.

    Args:
        values: base key -> typed value, listener overrides already applied.
        key_of: names keys in errors as the user configured them.

    Raises:
        ConfigError: see :mod:`spark_kafkalite.tls`; also ``ssl.client.auth`` requested/required without
            a trust store (there is no JVM default trust store to fall back on).
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(context, values, key_of)
    _load_key_store(context, values, key_of)
    trusted = _trust_store(values, key_of)
    client_auth = str(values["ssl.client.auth"]).lower()
    if client_auth != "none":
        if trusted is None:
            raise ConfigError(
                key_of("ssl.client.auth"),
                f"{client_auth} needs a trust store (ssl.truststore.location or ssl.truststore.certificates)",
            )
        context.load_verify_locations(cadata=trusted)
    context.verify_mode = _CLIENT_AUTH[client_auth]
    return context


def create_client_ssl_context(values: Mapping[str, Any], key_of: KeyNamer) -> ssl.SSLContext:
    """A client-side context for this broker's own connections to another broker's TLS
    listener (replica fetchers, transaction markers): trusts the trust store, presents the key
    store (for ``ssl.client.auth``), and checks the host name when
    ``ssl.endpoint.identification.algorithm`` is ``https`` (Kafka's default).

    Raises:
        ConfigError: no trust store, or a key store that does not load (as for the server side).
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(context, values, key_of)
    trusted = _trust_store(values, key_of)
    if trusted is None:
        raise ConfigError(
            key_of("ssl.truststore.location"),
            "inter-broker TLS needs a trust store to verify the other brokers",
        )
    context.load_verify_locations(cadata=trusted)
    _load_key_store(context, values, key_of)
    with _as_config_error(key_of):
        context.check_hostname = endpoint_identification_enabled(
            values["ssl.endpoint.identification.algorithm"]
        )
    return context
