"""TLS contexts from Kafka's ``ssl.*`` keys, PEM stores only (Kafka's ``DefaultSslEngineFactory``
with KIP-651 PEM key and trust stores).

Rules (``DefaultSslEngineFactory``): ``ssl.keystore.type`` / ``ssl.truststore.type`` must be PEM;
a key store is either ``ssl.keystore.location`` (one file: the key and the chain) or the inline
``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``, never both; the key is PKCS#8 (``PRIVATE
KEY`` or ``ENCRYPTED PRIVATE KEY`` with ``ssl.key.password``), exactly one, with at least one
``CERTIFICATE``; ``ssl.keystore.password`` / ``ssl.truststore.password`` must be unset for PEM.
Every problem raises :class:`~broker.config_def.ConfigError` naming the key as configured
(e.g. ``listener.name.ssl.ssl.keystore.key``); key material never appears in messages.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization

from broker.config_def import ConfigError

__all__ = ["create_server_ssl_context", "create_client_ssl_context", "KeyNamer"]

KeyNamer = Callable[[str], str]
"""``key_of(base_key)`` -> the key as the user set it (with its listener prefix, if any)."""

_PEM_ENTRY = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----", re.DOTALL)
_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def _entries(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(0)) for m in _PEM_ENTRY.finditer(text)]


def _read(values: Mapping[str, Any], key_of: KeyNamer, key: str) -> str:
    path = values[key]
    try:
        return Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            key_of(key), f"cannot read PEM file {path}: {getattr(exc, 'strerror', None) or exc}"
        ) from None


def _require_pem(values: Mapping[str, Any], key_of: KeyNamer, store: str) -> None:
    kind = str(values[f"ssl.{store}.type"]).upper()
    if kind != "PEM":
        raise ConfigError(
            key_of(f"ssl.{store}.type"), f"{kind} {store}s are not supported; set ssl.{store}.type=PEM"
        )
    if values[f"ssl.{store}.password"] is not None:
        raise ConfigError(key_of(f"ssl.{store}.password"), f"must not be set for PEM {store}s")


def _key_store(values: Mapping[str, Any], key_of: KeyNamer) -> tuple[str, str, str]:
    """(chain PEM, PKCS#8 key PEM, the key naming where the key came from)."""
    location, key, chain = (
        values["ssl.keystore.location"],
        values["ssl.keystore.key"],
        values["ssl.keystore.certificate.chain"],
    )
    if location is None and key is None and chain is None:
        raise ConfigError(
            key_of("ssl.keystore.location"),
            "a TLS listener needs a key store: ssl.keystore.location or "
            "ssl.keystore.key + ssl.keystore.certificate.chain",
        )
    _require_pem(values, key_of, "keystore")
    if location is not None and (key is not None or chain is not None):
        raise ConfigError(
            key_of("ssl.keystore.location"), "set either a location or the inline key and chain, not both"
        )
    if location is not None:
        text, source, chain_source = (
            _read(values, key_of, "ssl.keystore.location"),
            "ssl.keystore.location",
            None,
        )
    else:
        if key is None or chain is None:
            missing = "ssl.keystore.key" if key is None else "ssl.keystore.certificate.chain"
            raise ConfigError(key_of(missing), "the inline PEM key and certificate chain go together")
        text, source, chain_source = key + "\n" + chain, "ssl.keystore.key", "ssl.keystore.certificate.chain"
    entries = _entries(text)
    keys = [pem for kind, pem in entries if kind in ("PRIVATE KEY", "ENCRYPTED PRIVATE KEY")]
    if any(
        kind.endswith("PRIVATE KEY") and kind not in ("PRIVATE KEY", "ENCRYPTED PRIVATE KEY")
        for kind, _ in entries
    ):
        raise ConfigError(
            key_of(source), "the private key must be PKCS#8 (BEGIN PRIVATE KEY or ENCRYPTED PRIVATE KEY)"
        )
    if len(keys) != 1:
        raise ConfigError(key_of(source), f"expected exactly one PEM private key, found {len(keys)}")
    certs = [pem for kind, pem in entries if kind == "CERTIFICATE"]
    if not certs:
        raise ConfigError(key_of(chain_source or source), "no PEM CERTIFICATE found")
    return "\n".join(certs) + "\n", keys[0] + "\n", source


def _check_key(key_pem: str, password: str | None, key_of: KeyNamer, source: str) -> None:
    encrypted = key_pem.startswith("-----BEGIN ENCRYPTED")
    if encrypted and password is None:
        raise ConfigError(key_of("ssl.key.password"), "the private key is encrypted: set ssl.key.password")
    try:
        serialization.load_pem_private_key(
            key_pem.encode(), password.encode() if encrypted and password else None
        )
    except (ValueError, TypeError):
        problem_key = "ssl.key.password" if encrypted else source
        raise ConfigError(
            key_of(problem_key), "cannot load the private key (wrong password or bad key)"
        ) from None


def _load_chain(
    context: ssl.SSLContext, chain: str, key_pem: str, password: str | None, key_of: KeyNamer, source: str
) -> None:
    """``load_cert_chain`` reads files only: write both to a private temporary directory (0700,
    files 0600) and delete them once loaded."""
    with tempfile.TemporaryDirectory(prefix="kafkalite-tls-") as tmp:
        cert_path, key_path = os.path.join(tmp, "chain.pem"), os.path.join(tmp, "key.pem")
        for path, text in ((cert_path, chain), (key_path, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write(text)
        try:
            context.load_cert_chain(cert_path, key_path, password=password)
        except ssl.SSLError as exc:
            raise ConfigError(
                key_of(source), f"the key and certificate chain do not load: {exc.reason or exc}"
            ) from None


def _trust_store(values: Mapping[str, Any], key_of: KeyNamer) -> str | None:
    location, certificates = values["ssl.truststore.location"], values["ssl.truststore.certificates"]
    if location is None and certificates is None:
        return None
    _require_pem(values, key_of, "truststore")
    if location is not None and certificates is not None:
        raise ConfigError(
            key_of("ssl.truststore.location"),
            "set either a location or ssl.truststore.certificates, not both",
        )
    source = "ssl.truststore.location" if location is not None else "ssl.truststore.certificates"
    text = _read(values, key_of, source) if location is not None else str(certificates)
    certs = [pem for kind, pem in _entries(text) if kind == "CERTIFICATE"]
    if not certs:
        raise ConfigError(key_of(source), "no PEM CERTIFICATE found")
    return "\n".join(certs) + "\n"


def _protocols(context: ssl.SSLContext, values: Mapping[str, Any], key_of: KeyNamer) -> None:
    enabled = [_TLS_VERSIONS[v] for v in values["ssl.enabled.protocols"] if v]
    if not enabled:
        raise ConfigError(key_of("ssl.enabled.protocols"), "at least one of TLSv1.2, TLSv1.3 is required")
    context.minimum_version, context.maximum_version = min(enabled), max(enabled)


def create_server_ssl_context(values: Mapping[str, Any], key_of: KeyNamer) -> ssl.SSLContext:
    """A server-side context for one listener from its resolved ``ssl.*`` values.

    Args:
        values: base key -> typed value, listener overrides already applied.
        key_of: names keys in errors as the user configured them.

    Raises:
        ConfigError: see the module docstring; also ``ssl.client.auth`` requested/required without
            a trust store (there is no JVM default trust store to fall back on).
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(context, values, key_of)
    chain, key_pem, source = _key_store(values, key_of)
    password = values["ssl.key.password"]
    _check_key(key_pem, password, key_of, source)
    _load_chain(context, chain, key_pem, password, key_of, source)
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
    chain, key_pem, source = _key_store(values, key_of)
    password = values["ssl.key.password"]
    _check_key(key_pem, password, key_of, source)
    _load_chain(context, chain, key_pem, password, key_of, source)
    context.check_hostname = str(values["ssl.endpoint.identification.algorithm"] or "").lower() == "https"
    return context
