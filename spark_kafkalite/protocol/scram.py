"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka implements them: the key
derivation math, credentials and the four messages, shared by the broker's SASL server and the
client's SASL client. Pure: no I/O, no state machine.

Sources: Kafka's ``ScramMechanism`` (names, type ids 1/2, iterations 4096..16384),
``ScramFormatter`` (Hi, keys, proofs; passwords are plain UTF-8, no SASLprep; user names escape
``=`` -> ``=3D`` and ``,`` -> ``=2C``) and ``ScramMessages`` (message grammar: gs2 header ``n`` only,
an optional ``m=`` reserved field, extensions ``name=value`` after the nonce).

The AuthMessage is built from the exact texts exchanged (``client_first.bare``,
``server_first.text``, ``client_final.without_proof``), as RFC 5802 section 3 defines it.
Errors: :class:`ScramError` (a ``ValueError``) for any message that does not parse; its text
names the message and the problem, never a password or a proof.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, field

__all__ = [
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "ClientFinalMessage",
    "ClientFirstMessage",
    "ScramCredential",
    "ScramError",
    "ScramFormatter",
    "ScramMechanism",
    "ServerFinalMessage",
    "ServerFirstMessage",
    "auth_message",
    "client_final_message",
    "escape_sasl_name",
    "scram_mechanism",
    "scram_mechanism_for_type",
    "secure_random_nonce",
    "unescape_sasl_name",
]


class ScramError(ValueError):
    """A SCRAM message that does not follow RFC 5802's grammar (as Kafka's ``ScramMessages``
    parses it), or an exchange that cannot go on (nonce mismatch, bad channel binding)."""


@dataclass(frozen=True)
class ScramMechanism:
    """One SCRAM mechanism (Kafka's ``ScramMechanism`` enum).

    Attributes:
        mechanism_name: the SASL name, ``"SCRAM-SHA-256"`` or ``"SCRAM-SHA-512"``.
        hash_name: the ``hashlib`` name of H (``"sha256"`` / ``"sha512"``).
        type_id: the id in ``UserScramCredentialRecord`` and the KIP-554 APIs (1 or 2).
        min_iterations: the fewest iterations a server accepts for a stored credential (4096).
        max_iterations: the most iterations AlterUserScramCredentials accepts (16384,
            ``ScramMechanism.maxIterations``).
    """

    mechanism_name: str
    hash_name: str
    type_id: int
    min_iterations: int = 4096
    max_iterations: int = 16384

    @property
    def digest_size_bytes(self) -> int:
        """Output size of H in bytes (32 or 64)."""
        return hashlib.new(self.hash_name).digest_size


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
_BY_NAME = {m.mechanism_name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
_BY_TYPE = {m.type_id: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


def scram_mechanism(name: str) -> ScramMechanism | None:
    """The mechanism named ``name`` (exact, upper case as on the wire), or None."""
    return _BY_NAME.get(name)


def scram_mechanism_for_type(type_id: int) -> ScramMechanism | None:
    """The mechanism with record/API type id ``type_id`` (1 or 2), or None (0 is UNKNOWN)."""
    return _BY_TYPE.get(type_id)


@dataclass(frozen=True)
class ScramCredential:
    """What a server stores for one user and mechanism (Kafka's ``ScramCredential``): never the
    password, only ``salt``, ``stored_key`` = H(ClientKey), ``server_key`` and ``iterations``."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # keys are password equivalents: keep them out of logs
        return f"ScramCredential(iterations={self.iterations}, salt_bytes={len(self.salt)})"


class ScramFormatter:
    """The RFC 5802 section 3 functions for one mechanism (Kafka's ``ScramFormatter``).

    All inputs and outputs are bytes; ``password`` is encoded as plain UTF-8 when given a str.
    """

    def __init__(self, mechanism: ScramMechanism) -> None:
        self.mechanism = mechanism

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.mechanism.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        """H(data)."""
        return hashlib.new(self.mechanism.hash_name, data).digest()

    def salted_password(self, password: str | bytes, salt: bytes, iterations: int) -> bytes:
        """SaltedPassword = Hi(password, salt, i): PBKDF2-HMAC-H, output length = hash size."""
        if iterations <= 0:
            raise ScramError(f"iterations must be positive, got {iterations}")
        secret = password.encode() if isinstance(password, str) else password
        return hashlib.pbkdf2_hmac(self.mechanism.hash_name, secret, salt, iterations)

    def client_key(self, salted_password: bytes) -> bytes:
        """ClientKey = HMAC(SaltedPassword, "Client Key")."""
        return self._hmac(salted_password, b"Client Key")

    def stored_key(self, client_key: bytes) -> bytes:
        """StoredKey = H(ClientKey)."""
        return self.hash(client_key)

    def server_key(self, salted_password: bytes) -> bytes:
        """ServerKey = HMAC(SaltedPassword, "Server Key")."""
        return self._hmac(salted_password, b"Server Key")

    def client_signature(self, stored_key: bytes, auth_message: bytes) -> bytes:
        """ClientSignature = HMAC(StoredKey, AuthMessage)."""
        return self._hmac(stored_key, auth_message)

    def client_proof(self, salted_password: bytes, auth_message: bytes) -> bytes:
        """ClientProof = ClientKey XOR ClientSignature (what the client sends as ``p=``)."""
        key = self.client_key(salted_password)
        return _xor(key, self.client_signature(self.stored_key(key), auth_message))

    def server_signature(self, server_key: bytes, auth_message: bytes) -> bytes:
        """ServerSignature = HMAC(ServerKey, AuthMessage) (the server's ``v=``)."""
        return self._hmac(server_key, auth_message)

    def verify_client_proof(self, stored_key: bytes, auth_message: bytes, proof: bytes) -> bool:
        """True iff H(ClientProof XOR ClientSignature) == StoredKey, compared in constant time
        (``ScramSaslServer.verifyClientProof``). A proof of the wrong length is False."""
        signature = self.client_signature(stored_key, auth_message)
        if len(proof) != len(signature):
            return False
        return hmac.compare_digest(self.hash(_xor(proof, signature)), stored_key)

    def credential_from_salted_password(
        self, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        """The stored credential for a SaltedPassword (what AlterUserScramCredentials carries)."""
        return ScramCredential(
            salt=salt,
            stored_key=self.stored_key(self.client_key(salted_password)),
            server_key=self.server_key(salted_password),
            iterations=iterations,
        )

    def generate_credential(
        self, password: str | bytes, iterations: int, salt: bytes | None = None
    ) -> ScramCredential:
        """A new credential for ``password`` with a random 32-byte salt unless ``salt`` is given
        (``ScramFormatter.generateCredential``)."""
        salt = secrets.token_bytes(32) if salt is None else salt
        return self.credential_from_salted_password(
            salt, self.salted_password(password, salt, iterations), iterations
        )


def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(len(a), "big")


def secure_random_nonce() -> str:
    """A fresh nonce of printable ASCII without ``,`` (32 random bytes, URL-safe base64, no
    padding), for the client's ``r=`` or the server's nonce suffix."""
    return secrets.token_urlsafe(32)


def escape_sasl_name(username: str) -> str:
    """RFC 5802 saslname: ``=`` -> ``=3D``, ``,`` -> ``=2C`` (``ScramFormatter.saslName``)."""
    return username.replace("=", "=3D").replace(",", "=2C")


def unescape_sasl_name(sasl_name: str) -> str:
    """Inverse of :func:`escape_sasl_name`. Raises ScramError on an ``=`` not followed by ``2C``
    or ``3D`` (RFC 5802 section 5.1: the server MUST fail)."""
    if _SASLNAME.fullmatch(sasl_name) is None:
        raise ScramError("invalid saslname: '=' must be followed by 2C or 3D, ',' is not allowed")
    return re.sub("=2C|=3D", lambda m: "," if m.group() == "=2C" else "=", sasl_name)


def auth_message(client_first_bare: str, server_first: str, client_final_without_proof: str) -> bytes:
    """AuthMessage = client-first-message-bare "," server-first-message ","
    client-final-message-without-proof, UTF-8."""
    return f"{client_first_bare},{server_first},{client_final_without_proof}".encode()


# Grammar pieces, as ScramMessages.AbstractScramMessage (Java classes translated; saslname and
# values also take non-ASCII UTF-8 characters, which RFC 5802 allows and Kafka's regex does not).
_SAFE_CHAR = r"[^\x00,=]"
_VALUE = r"[^\x00,]+"
_SASLNAME_RE = rf"(?:{_SAFE_CHAR}|=2C|=3D)+"
_SASLNAME = re.compile(_SASLNAME_RE)
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"
_B64 = "[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64}{{4}})*(?:{_B64}{{3}}=|{_B64}{{2}}==)?"
_RESERVED = rf"(?:m={_VALUE},)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"

_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME_RE}))?,"
    rf"(?P<bare>{_RESERVED}n=(?P<saslname>{_SASLNAME_RE}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))"
)
_SERVER_FIRST = re.compile(
    rf"{_RESERVED}r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]{{1,10}}){_EXTENSIONS}"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})"
)
_SERVER_FINAL = re.compile(rf"(?:e=(?P<error>{_SAFE_CHAR}+)|v=(?P<signature>{_BASE64})){_EXTENSIONS}")


def _text(message: bytes, what: str) -> str:
    try:
        return bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError(f"invalid SCRAM {what} message: not UTF-8") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        raise ScramError(f"invalid SCRAM {what}: bad base64") from None


def _parse_extensions(text: str) -> dict[str, str]:
    extensions: dict[str, str] = {}
    for item in text.split(",")[1:]:
        name, _, value = item.partition("=")
        extensions[name] = value
    return extensions


@dataclass(frozen=True)
class ClientFirstMessage:
    """``gs2-header client-first-message-bare``: ``n,[a=authzid],[m=...,]n=saslname,r=nonce[,ext=v]*``.

    Attributes:
        username: the user name (unescaped).
        nonce: the client nonce.
        authorization_id: the gs2 ``a=`` value (unescaped), ``""`` when absent.
        extensions: the SCRAM extensions, e.g. ``{"tokenauth": "true"}`` (Kafka's ScramExtensions).
        bare: the client-first-message-bare text as sent (part of the AuthMessage).
    """

    username: str
    nonce: str
    authorization_id: str = ""
    extensions: dict[str, str] = field(default_factory=dict)
    bare: str = ""

    @classmethod
    def build(
        cls, username: str, nonce: str | None = None, extensions: dict[str, str] | None = None
    ) -> ClientFirstMessage:
        """A client's first message for ``username`` (fresh nonce unless given), no authzid."""
        nonce = secure_random_nonce() if nonce is None else nonce
        extensions = dict(extensions or {})
        bare = f"n={escape_sasl_name(username)},r={nonce}" + "".join(
            f",{k}={v}" for k, v in extensions.items()
        )
        return cls(username, nonce, "", extensions, bare)

    @property
    def gs2_header(self) -> str:
        """``n,,`` or ``n,a=<authzid>,``."""
        authzid = escape_sasl_name(self.authorization_id) if self.authorization_id else ""
        return f"n,{'a=' + authzid if authzid else ''},"

    def to_bytes(self) -> bytes:
        """The message as sent (UTF-8)."""
        return (self.gs2_header + self.bare).encode()

    @classmethod
    def parse(cls, message: bytes) -> ClientFirstMessage:
        """Parse a client-first message. Raises ScramError if it does not match the grammar
        (including gs2 flags other than ``n``: no channel binding)."""
        match = _CLIENT_FIRST.fullmatch(_text(message, "client first"))
        if match is None:
            raise ScramError("invalid SCRAM client first message format")
        authzid = match.group("authzid")
        return cls(
            username=unescape_sasl_name(match.group("saslname")),
            nonce=match.group("nonce"),
            authorization_id=unescape_sasl_name(authzid) if authzid else "",
            extensions=_parse_extensions(match.group("extensions")),
            bare=match.group("bare"),
        )


@dataclass(frozen=True)
class ServerFirstMessage:
    """``r=<client nonce + server nonce>,s=<base64 salt>,i=<iterations>``.

    Attributes:
        nonce: the combined nonce.
        salt: the salt bytes.
        iterations: the iteration count (> 0).
        text: the message text as sent (part of the AuthMessage).
    """

    nonce: str
    salt: bytes
    iterations: int
    text: str = ""

    @classmethod
    def build(cls, client_nonce: str, server_nonce: str, salt: bytes, iterations: int) -> ServerFirstMessage:
        """The server's reply for a client nonce (``ScramSaslServer``)."""
        nonce = client_nonce + server_nonce
        return cls(nonce, salt, iterations, f"r={nonce},s={_b64(salt)},i={iterations}")

    def to_bytes(self) -> bytes:
        """The message as sent (UTF-8)."""
        return self.text.encode()

    @classmethod
    def parse(cls, message: bytes) -> ServerFirstMessage:
        """Parse a server-first message. Raises ScramError on bad grammar or iterations <= 0."""
        text = _text(message, "server first")
        match = _SERVER_FIRST.fullmatch(text)
        if match is None:
            raise ScramError("invalid SCRAM server first message format")
        iterations = int(match.group("iterations"))
        if iterations <= 0:
            raise ScramError(f"invalid SCRAM server first message: iterations {iterations}")
        return cls(match.group("nonce"), _unb64(match.group("salt"), "salt"), iterations, text)


@dataclass(frozen=True)
class ClientFinalMessage:
    """``c=<base64 channel binding>,r=<nonce>[,ext=v]*,p=<base64 proof>``.

    Attributes:
        channel_binding: the decoded ``c=`` value (the gs2 header, e.g. ``b"n,,"``).
        nonce: the combined nonce (must equal the server-first nonce).
        proof: the ClientProof bytes.
        without_proof: client-final-message-without-proof as sent (part of the AuthMessage).
    """

    channel_binding: bytes
    nonce: str
    proof: bytes
    without_proof: str

    @staticmethod
    def without_proof_for(gs2_header: str, nonce: str) -> str:
        """``c=<base64 gs2 header>,r=<nonce>``: what the client signs before adding ``p=``."""
        return f"c={_b64(gs2_header.encode())},r={nonce}"

    def to_bytes(self) -> bytes:
        """The message as sent (UTF-8)."""
        return f"{self.without_proof},p={_b64(self.proof)}".encode()

    @classmethod
    def parse(cls, message: bytes) -> ClientFinalMessage:
        """Parse a client-final message. Raises ScramError on bad grammar or base64."""
        match = _CLIENT_FINAL.fullmatch(_text(message, "client final"))
        if match is None:
            raise ScramError("invalid SCRAM client final message format")
        return cls(
            channel_binding=_unb64(match.group("channel"), "channel binding"),
            nonce=match.group("nonce"),
            proof=_unb64(match.group("proof"), "proof"),
            without_proof=match.group("without_proof"),
        )


@dataclass(frozen=True)
class ServerFinalMessage:
    """``v=<base64 ServerSignature>`` or ``e=<error>`` (Kafka never sends ``e=``; a bad proof is
    an authentication failure instead).

    Attributes:
        server_signature: the signature bytes, or None for an error message.
        error: the ``e=`` value, or None.
    """

    server_signature: bytes | None
    error: str | None = None

    def to_bytes(self) -> bytes:
        """The message as sent (UTF-8)."""
        if self.server_signature is None:
            return f"e={self.error}".encode()
        return f"v={_b64(self.server_signature)}".encode()

    @classmethod
    def parse(cls, message: bytes) -> ServerFinalMessage:
        """Parse a server-final message. Raises ScramError on bad grammar or base64."""
        match = _SERVER_FINAL.fullmatch(_text(message, "server final"))
        if match is None:
            raise ScramError("invalid SCRAM server final message format")
        if match.group("error") is not None:
            return cls(None, match.group("error"))
        return cls(_unb64(match.group("signature"), "server signature"))


def client_final_message(
    formatter: ScramFormatter,
    password: str | bytes,
    client_first: ClientFirstMessage,
    server_first: ServerFirstMessage,
) -> tuple[ClientFinalMessage, bytes]:
    """The client's final message and the ServerSignature it must then receive
    (``ScramSaslClient``). Raises ScramError if the server nonce does not extend the client's
    (RFC 5802 section 5.1) or the iterations are below the mechanism's minimum."""
    if not server_first.nonce.startswith(client_first.nonce) or server_first.nonce == client_first.nonce:
        raise ScramError("invalid SCRAM server nonce: it does not extend the client nonce")
    if server_first.iterations < formatter.mechanism.min_iterations:
        raise ScramError(
            f"SCRAM iterations {server_first.iterations} below the minimum "
            f"{formatter.mechanism.min_iterations} for {formatter.mechanism.mechanism_name}"
        )
    salted = formatter.salted_password(password, server_first.salt, server_first.iterations)
    without_proof = ClientFinalMessage.without_proof_for(client_first.gs2_header, server_first.nonce)
    message = auth_message(client_first.bare, server_first.text, without_proof)
    proof = formatter.client_proof(salted, message)
    final = ClientFinalMessage(client_first.gs2_header.encode(), server_first.nonce, proof, without_proof)
    return final, formatter.server_signature(formatter.server_key(salted), message)
