"""A throwaway certificate authority for local clusters, tests and notebooks (``kafkalite
cluster up --secure``, ``LocalCluster(security=...)``): never for production.

Made with ``cryptography`` the way librdkafka 2.16 / OpenSSL 3 and Java's PEM loader accept
(librdkafka's ``rdkafka_ssl.c``, Java's ``DefaultSslEngineFactory`` PEM support, KIP-651): EC P-256 keys written as PKCS#8 PEM, SHA-256 signatures; the
CA is self-signed with ``BasicConstraints(ca=True)`` and ``KeyUsage(keyCertSign, cRLSign,
digitalSignature)``, both critical; a broker certificate names its hosts as SANs (DNS names and
IP addresses, e.g. ``localhost`` and ``127.0.0.1``: an IP literal only matches an IP SAN) with
EKU serverAuth + clientAuth (brokers are clients of each other); a client certificate has EKU
clientAuth and its subject ``CN=<name>`` is the principal a broker derives for mutual TLS.

Files are written 0600 into the directory given (keys) and 0644 (certificates)::

    pki = LocalPki.create(tmp_dir)                     # ca.pem, ca-key.pem
    broker = pki.issue_server("broker", ["localhost", "127.0.0.1"])   # broker.pem, broker-key.pem
    alice = pki.issue_client("alice")                  # alice.pem, alice-key.pem
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["IssuedCertificate", "LocalPki"]

_VALIDITY = datetime.timedelta(days=30)


@dataclass(frozen=True)
class IssuedCertificate:
    """A certificate and its key on disk.

    Attributes:
        cert_path: the PEM certificate (leaf only).
        key_path: the PEM PKCS#8 private key (unencrypted unless a password was given).
        chain_path: one PEM file with the key and the leaf then the CA certificate (Java's
            ``ssl.keystore.type=PEM`` + ``ssl.keystore.location`` form).
        subject: the RFC 4514 subject, e.g. ``CN=alice`` (the mTLS principal is ``User:`` + it).
    """

    cert_path: Path
    key_path: Path
    chain_path: Path
    subject: str

    def cert_pem(self) -> str:
        return self.cert_path.read_text()

    def key_pem(self) -> str:
        return self.key_path.read_text()


def _write(path: Path, data: bytes, mode: int) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(path, mode)
    return path


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


class LocalPki:
    """A CA whose key lives in ``directory``; issues broker and client certificates there."""

    def __init__(
        self, directory: Path, ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey
    ) -> None:
        self.directory = directory
        self._ca_cert = ca_cert
        self._ca_key = ca_key
        self.ca_path = directory / "ca.pem"

    @classmethod
    def create(
        cls, directory: str | os.PathLike[str], common_name: str = "kafkalite throwaway CA"
    ) -> LocalPki:
        """A new self-signed CA in ``directory`` (created if needed): ``ca.pem``, ``ca-key.pem``."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        _write(path / "ca.pem", cert.public_bytes(serialization.Encoding.PEM), 0o644)
        _write(path / "ca-key.pem", _key_pem(key, None), 0o600)
        return cls(path, cert, key)

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> LocalPki:
        """The CA :meth:`create` wrote into ``directory`` (``ca.pem``, ``ca-key.pem``)."""
        path = Path(directory)
        cert = x509.load_pem_x509_certificate((path / "ca.pem").read_bytes())
        key = serialization.load_pem_private_key((path / "ca-key.pem").read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{path / 'ca-key.pem'} is not an EC private key")
        return cls(path, cert, key)

    def ca_pem(self) -> str:
        return self.ca_path.read_text()

    def _issue(
        self,
        name: str,
        subject: x509.Name,
        hosts: list[str],
        usages: list[x509.ObjectIdentifier],
        key_password: str | None,
    ) -> IssuedCertificate:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._ca_key.public_key()), critical=False
            )
        )
        if hosts:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        key_pem = _key_pem(key, key_password)
        ca_pem = self._ca_cert.public_bytes(serialization.Encoding.PEM)
        return IssuedCertificate(
            cert_path=_write(self.directory / f"{name}.pem", cert_pem, 0o644),
            key_path=_write(self.directory / f"{name}-key.pem", key_pem, 0o600),
            chain_path=_write(self.directory / f"{name}-keystore.pem", key_pem + cert_pem + ca_pem, 0o600),
            subject=subject.rfc4514_string(),
        )

    def issue_server(
        self, name: str, hosts: list[str] | None = None, key_password: str | None = None
    ) -> IssuedCertificate:
        """A broker certificate ``CN=<name>`` valid for ``hosts`` (default ``localhost`` and
        ``127.0.0.1``), EKU serverAuth + clientAuth; files ``<name>.pem``, ``<name>-key.pem``,
        ``<name>-keystore.pem``."""
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        return self._issue(
            name,
            subject,
            list(hosts or ["localhost", "127.0.0.1"]),
            [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
            key_password,
        )

    def issue_client(self, name: str, key_password: str | None = None) -> IssuedCertificate:
        """A client certificate ``CN=<name>`` (EKU clientAuth); same file names as
        :meth:`issue_server`. ``key_password`` encrypts the key (PKCS#8)."""
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        return self._issue(name, subject, [], [ExtendedKeyUsageOID.CLIENT_AUTH], key_password)
