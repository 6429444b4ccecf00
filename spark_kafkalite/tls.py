"""The ``ssl.*`` PEM stores of Kafka's keys (``DefaultSslEngineFactory`` with KIP-651 PEM key and
trust stores), read and loaded once for the broker's listeners and the client.

Rules (``DefaultSslEngineFactory``): ``ssl.keystore.type`` / ``ssl.truststore.type`` must be PEM
and ``ssl.keystore.password`` / ``ssl.truststore.password`` unset for PEM; a key store is either
``ssl.keystore.location`` (one file: the key and the chain) or the inline ``ssl.keystore.key`` +
``ssl.keystore.certificate.chain``, never both; the key is PKCS#8 (``PRIVATE KEY`` or
``ENCRYPTED PRIVATE KEY`` with ``ssl.key.password``), exactly one, with at least one
``CERTIFICATE``; a trust store is ``ssl.truststore.location`` (a file of CA certificates) or the
inline ``ssl.truststore.certificates``, never both. ``ssl.endpoint.identification.algorithm``:
``https`` checks the peer's host name, ``none`` or empty does not.

Every problem raises :class:`TlsConfigError` naming the base key at fault; each side turns it into
its own error (the broker's ``ConfigError`` with the key as configured, the client's
``InvalidConfigError``). Key material never appears in messages.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives import serialization

__all__ = [
    "TLS_VERSIONS",
    "TlsConfigError",
    "check_pem_store_type",
    "endpoint_identification_enabled",
    "load_key_pair",
    "read_pem_key_store",
    "read_pem_trust_store",
]

TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
"""``ssl.enabled.protocols`` values -> the standard library's versions."""

_PEM_ENTRY = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----", re.DOTALL)
_PKCS8 = ("PRIVATE KEY", "ENCRYPTED PRIVATE KEY")


class TlsConfigError(ValueError):
    """A TLS setting that cannot be used: ``key`` is the base ``ssl.*`` key at fault, ``message``
    says why (never a key's or password's content)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


def _entries(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(0)) for m in _PEM_ENTRY.finditer(text)]


def _read(key: str, path: str) -> str:
    try:
        return Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise TlsConfigError(
            key, f"cannot read PEM file {path}: {getattr(exc, 'strerror', None) or exc}"
        ) from None


def check_pem_store_type(store: str, kind: str, password: str | None) -> None:
    """``ssl.<store>.type`` (``store``: ``keystore`` or ``truststore``) must be PEM and
    ``ssl.<store>.password`` unset.

    Raises:
        TlsConfigError: another type, or a password.
    """
    if kind.upper() != "PEM":
        raise TlsConfigError(
            f"ssl.{store}.type", f"{kind.upper()} {store}s are not supported; set ssl.{store}.type=PEM"
        )
    if password is not None:
        raise TlsConfigError(f"ssl.{store}.password", f"must not be set for PEM {store}s")


def read_pem_key_store(
    location: str | None, key: str | None, chain: str | None
) -> tuple[str, str, str] | None:
    """The key store of ``ssl.keystore.location`` or ``ssl.keystore.key`` +
    ``ssl.keystore.certificate.chain``: ``(chain PEM, PKCS#8 key PEM, the key it came from)``,
    None when none is set.

    Raises:
        TlsConfigError: both forms, half of the inline form, an unreadable file, a key that is not
            exactly one PKCS#8 key, or no certificate.
    """
    if location is None and key is None and chain is None:
        return None
    if location is not None and (key is not None or chain is not None):
        raise TlsConfigError(
            "ssl.keystore.location", "set either a location or the inline key and chain, not both"
        )
    chain_source: str | None = None
    if location is not None:
        text, source = _read("ssl.keystore.location", location), "ssl.keystore.location"
    else:
        if key is None or chain is None:
            missing = "ssl.keystore.key" if key is None else "ssl.keystore.certificate.chain"
            raise TlsConfigError(missing, "the inline PEM key and certificate chain go together")
        text, source, chain_source = key + "\n" + chain, "ssl.keystore.key", "ssl.keystore.certificate.chain"
    entries = _entries(text)
    if any(kind.endswith("PRIVATE KEY") and kind not in _PKCS8 for kind, _ in entries):
        raise TlsConfigError(
            source, "the private key must be PKCS#8 (BEGIN PRIVATE KEY or ENCRYPTED PRIVATE KEY)"
        )
    keys = [pem for kind, pem in entries if kind in _PKCS8]
    if len(keys) != 1:
        raise TlsConfigError(source, f"expected exactly one PEM private key, found {len(keys)}")
    certs = [pem for kind, pem in entries if kind == "CERTIFICATE"]
    if not certs:
        raise TlsConfigError(chain_source or source, "no PEM CERTIFICATE found")
    return "\n".join(certs) + "\n", keys[0] + "\n", source


def read_pem_trust_store(location: str | None, certificates: str | None) -> str | None:
    """The CA certificates of ``ssl.truststore.location`` or ``ssl.truststore.certificates`` as
    PEM text for ``load_verify_locations(cadata=...)``; None when neither is set.

    Raises:
        TlsConfigError: both set, an unreadable file, or no certificate.
    """
    if location is None and certificates is None:
        return None
    if location is not None and certificates is not None:
        raise TlsConfigError(
            "ssl.truststore.location", "set either a location or ssl.truststore.certificates, not both"
        )
    source = "ssl.truststore.location" if location is not None else "ssl.truststore.certificates"
    text = _read(source, location) if location is not None else str(certificates)
    certs = [pem for kind, pem in _entries(text) if kind == "CERTIFICATE"]
    if not certs:
        raise TlsConfigError(source, "no PEM CERTIFICATE found")
    return "\n".join(certs) + "\n"


def load_key_pair(
    context: ssl.SSLContext, chain: str, key_pem: str, password: str | None, source: str
) -> None:
    """Check ``key_pem`` (encrypted keys need ``password``) and load it with ``chain`` into
    ``context``. ``load_cert_chain`` reads files only: both go to a private temporary directory
    (0700, files 0600) that is removed once loaded.

    Raises:
        TlsConfigError: an encrypted key without ``ssl.key.password``, a wrong password or bad key,
            or a key and chain that do not load together (``source`` names the store's key).
    """
    encrypted = key_pem.startswith("-----BEGIN ENCRYPTED")
    if encrypted and password is None:
        raise TlsConfigError("ssl.key.password", "the private key is encrypted: set ssl.key.password")
    try:
        serialization.load_pem_private_key(
            key_pem.encode(), password.encode() if encrypted and password else None
        )
    except (ValueError, TypeError):
        problem_key = "ssl.key.password" if encrypted else source
        raise TlsConfigError(problem_key, "cannot load the private key (wrong password or bad key)") from None
    with tempfile.TemporaryDirectory(prefix="kafkalite-tls-") as tmp:
        cert_path, key_path = os.path.join(tmp, "chain.pem"), os.path.join(tmp, "key.pem")
        for path, text in ((cert_path, chain), (key_path, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write(text if text.endswith("\n") else text + "\n")
        try:
            context.load_cert_chain(cert_path, key_path, password=password)
        except ssl.SSLError as exc:
            raise TlsConfigError(
                source, f"the key and certificate chain do not load: {exc.reason or exc}"
            ) from None


def endpoint_identification_enabled(value: object) -> bool:
    """``ssl.endpoint.identification.algorithm``: True for ``https``, False for ``none``, empty
    or None.

    Raises:
        TlsConfigError: any other value.
    """
    text = "" if value is None else str(value).strip().lower()
    if text == "https":
        return True
    if text in ("", "none"):
        return False
    raise TlsConfigError(
        "ssl.endpoint.identification.algorithm", f"invalid value {value!r}: use https or none"
    )
