"""The client's TLS context (Java ``SslFactory`` / ``DefaultSslEngineFactory`` in client mode),
built with the standard library's ``ssl`` from either naming scheme:

* librdkafka (``CONFIGURATION.md``): ``ssl.ca.location`` (CA file or directory), ``ssl.ca.pem``,
  ``ssl.certificate.location`` / ``ssl.certificate.pem``, ``ssl.key.location`` / ``ssl.key.pem``,
  ``ssl.key.password``, ``enable.ssl.certificate.verification``;
* Java PEM stores (KIP-651): ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` (a file
  of CA certificates) or ``ssl.truststore.certificates`` (inline); ``ssl.keystore.type=PEM`` with
  ``ssl.keystore.location`` (one file: private key + chain) or ``ssl.keystore.certificate.chain``
  + ``ssl.keystore.key`` (inline, key PKCS#8, encrypted keys take ``ssl.key.password``), read
  and loaded by :mod:`spark_kafkalite.tls` as the broker's listeners do.

``ssl.endpoint.identification.algorithm``: ``https`` (default, both clients) checks the broker
certificate's SAN against the host connected to; ``none`` or empty disables the check. With
neither CA setting the system's default CAs are trusted. JKS and PKCS12 stores are not
supported (the error says so). TLS 1.2 is the lowest version offered (Kafka's
``ssl.enabled.protocols`` default ``TLSv1.2,TLSv1.3``).

Errors name the config key at fault, never a key's or password's content.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from typing import Any

from spark_kafkalite.protocol.errors import InvalidConfigError
from spark_kafkalite.tls import (
    TlsConfigError,
    load_key_pair,
    read_pem_key_store,
    read_pem_trust_store,
)
from spark_kafkalite.tls import endpoint_identification_enabled as _endpoint_identification

__all__ = ["create_ssl_context", "endpoint_identification_enabled"]


def _get(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    if value is None:
        return None
    text = str(value)
    return text if text.strip() else None


def endpoint_identification_enabled(config: Mapping[str, Any]) -> bool:
    """``ssl.endpoint.identification.algorithm``: True for ``https``, False for ``none`` / empty.

    Raises:
        InvalidConfigError: any other value.
    """
    raw = config.get("ssl.endpoint.identification.algorithm", "https")
    try:
        return _endpoint_identification(raw)
    except TlsConfigError:
        raise InvalidConfigError(
            f"invalid ssl.endpoint.identification.algorithm {raw!r}: use https or none"
        ) from None


def _check_store_type(config: Mapping[str, Any], store: str) -> str | None:
    """The upper-cased ``ssl.<store>.type`` when set; only PEM is accepted."""
    raw = _get(config, f"ssl.{store}.type")
    if raw is None:
        return None
    kind = raw.strip().upper()
    if kind != "PEM":
        raise InvalidConfigError(
            f"ssl.{store}.type {raw!r} is not supported by this client: use PEM "
            f"(ssl.{store}.location, or the inline PEM forms)"
        )
    return kind


def _truststore(config: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(cafile, capath, cadata) from librdkafka's or Java's keys (one source only)."""
    ca_location = _get(config, "ssl.ca.location")
    ca_pem = _get(config, "ssl.ca.pem")
    ts_type = _check_store_type(config, "truststore")
    ts_location = _get(config, "ssl.truststore.location")
    ts_certs = _get(config, "ssl.truststore.certificates")
    if ts_certs is not None and ts_type != "PEM":
        raise InvalidConfigError("ssl.truststore.certificates needs ssl.truststore.type=PEM")
    if _get(config, "ssl.truststore.password") is not None and (ts_location or ts_certs):
        raise InvalidConfigError("ssl.truststore.password must not be set for a PEM truststore")
    given = [
        k
        for k, v in (
            ("ssl.ca.location", ca_location),
            ("ssl.ca.pem", ca_pem),
            ("ssl.truststore.location", ts_location),
            ("ssl.truststore.certificates", ts_certs),
        )
        if v is not None
    ]
    if len(given) > 1:
        raise InvalidConfigError(f"set only one of {', '.join(given)} (they all name the trusted CAs)")
    if ts_location is not None or ts_certs is not None:
        try:
            return None, None, read_pem_trust_store(ts_location, ts_certs)
        except TlsConfigError as exc:
            raise InvalidConfigError(str(exc)) from None
    if ca_location is not None:
        if os.path.isdir(ca_location):
            return None, ca_location, None
        if not os.path.isfile(ca_location):
            raise InvalidConfigError(f"ssl.ca.location: no such file or directory: {ca_location}")
        return ca_location, None, None
    return None, None, ca_pem


def _keystore(config: Mapping[str, Any]) -> tuple[tuple[str, str] | None, tuple[str, str, str] | None]:
    """((certfile, keyfile) of librdkafka's locations, or (chain PEM, key PEM, the key it came
    from) of the inline forms and Java's PEM key store) or (None, None)."""
    cert_location = _get(config, "ssl.certificate.location")
    key_location = _get(config, "ssl.key.location")
    cert_pem = _get(config, "ssl.certificate.pem")
    key_pem = _get(config, "ssl.key.pem")
    ks_type = _check_store_type(config, "keystore")
    ks_location = _get(config, "ssl.keystore.location")
    ks_chain = _get(config, "ssl.keystore.certificate.chain")
    ks_key = _get(config, "ssl.keystore.key")
    if ks_location is not None and ks_type != "PEM":
        raise InvalidConfigError(
            "ssl.keystore.location needs ssl.keystore.type=PEM (JKS and PKCS12 keystores are not supported)"
        )
    if (ks_chain is not None or ks_key is not None) and ks_type != "PEM":
        raise InvalidConfigError(
            "ssl.keystore.key and ssl.keystore.certificate.chain need ssl.keystore.type=PEM"
        )
    if (ks_chain is None) != (ks_key is None):
        raise InvalidConfigError("ssl.keystore.key and ssl.keystore.certificate.chain must be set together")
    if _get(config, "ssl.keystore.password") is not None and (ks_location or ks_key):
        raise InvalidConfigError(
            "ssl.keystore.password must not be set for a PEM keystore (an encrypted key takes ssl.key.password)"
        )
    sources = {
        "ssl.certificate.location/ssl.key.location": cert_location or key_location,
        "ssl.certificate.pem/ssl.key.pem": cert_pem or key_pem,
        "ssl.keystore.location": ks_location,
        "ssl.keystore.certificate.chain/ssl.keystore.key": ks_chain,
    }
    given = [k for k, v in sources.items() if v is not None]
    if len(given) > 1:
        raise InvalidConfigError(f"set only one client certificate source, not {' and '.join(given)}")
    if cert_location or key_location:
        if cert_location is None or key_location is None:
            raise InvalidConfigError("ssl.certificate.location and ssl.key.location must be set together")
        for key, path in (("ssl.certificate.location", cert_location), ("ssl.key.location", key_location)):
            if not os.path.isfile(path):
                raise InvalidConfigError(f"{key}: no such file: {path}")
        return (cert_location, key_location), None
    if cert_pem or key_pem:
        if cert_pem is None or key_pem is None:
            raise InvalidConfigError("ssl.certificate.pem and ssl.key.pem must be set together")
        return None, (cert_pem, key_pem, "ssl.key.pem")
    try:
        return None, read_pem_key_store(ks_location, ks_key, ks_chain)
    except TlsConfigError as exc:
        raise InvalidConfigError(str(exc)) from None


def create_ssl_context(config: Mapping[str, Any]) -> ssl.SSLContext:
    """A client ``SSLContext`` for the TLS settings in ``config`` (see module docstring).

    Raises:
        InvalidConfigError: conflicting or incomplete settings, a missing file, an unsupported
            store type, or certificates / a key that do not load (wrong ``ssl.key.password``
            included); the message names the keys involved.
    """
    cafile, capath, cadata = _truststore(config)
    from_files, pem = _keystore(config)
    password = _get(config, "ssl.key.password")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    verify = config.get("enable.ssl.certificate.verification", True)
    verify = verify if isinstance(verify, bool) else str(verify).strip().lower() != "false"
    context.check_hostname = verify and endpoint_identification_enabled(config)
    context.verify_mode = ssl.CERT_REQUIRED if verify else ssl.CERT_NONE
    try:
        if cafile or capath or cadata:
            context.load_verify_locations(cafile=cafile, capath=capath, cadata=cadata)
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise InvalidConfigError(f"cannot load the trusted CA certificates: {_reason(exc)}") from None
    try:
        if from_files is not None:
            context.load_cert_chain(from_files[0], from_files[1], password=password)
        elif pem is not None:
            load_key_pair(context, pem[0], pem[1], password, pem[2])
    except TlsConfigError as exc:
        raise InvalidConfigError(
            f"cannot load the client certificate and key (wrong or missing ssl.key.password?): {exc}"
        ) from None
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise InvalidConfigError(
            f"cannot load the client certificate and key (wrong or missing ssl.key.password?): {_reason(exc)}"
        ) from None
    return context


def _reason(exc: BaseException) -> str:
    """The library's reason without echoing inputs (OpenSSL reasons never contain key bytes)."""
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return f"{exc.library or 'SSL'}: {exc.reason}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return type(exc).__name__
