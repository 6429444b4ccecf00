"""Principals of connections (Kafka's ``DefaultKafkaPrincipalBuilder``): ``User:ANONYMOUS`` on
PLAINTEXT (and TLS without a client certificate), ``User:<authorization id>`` after SASL (the TLS
client certificate is then ignored), ``User:<subject DN>`` for a TLS client certificate, the DN
in RFC 2253/4514 form, most specific first, as Java's ``X500Principal.getName()`` prints it
(``ssl.principal.mapping.rules`` = DEFAULT)."""

from __future__ import annotations

import ssl

from cryptography import x509

from spark_kafkalite.protocol.acl import ANONYMOUS_PRINCIPAL

__all__ = ["sasl_principal", "ssl_principal"]


def sasl_principal(authorization_id: str) -> str:
    """``User:<authorization id>``."""
    return f"User:{authorization_id}"


def ssl_principal(ssl_object: ssl.SSLObject | None) -> str:
    """The principal of a TLS connection: ``User:CN=...,O=...`` from the verified client
    certificate, or ``User:ANONYMOUS`` when the client sent none."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return ANONYMOUS_PRINCIPAL
    return "User:" + x509.load_der_x509_certificate(der).subject.rfc4514_string()
