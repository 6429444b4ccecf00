"""SCRAM math and messages (spark_kafkalite.protocol.scram) against the RFC 5802 (SCRAM-SHA-1)
and RFC 7677 (SCRAM-SHA-256) example exchanges, and the grammar rules of Kafka's ScramMessages."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from spark_kafkalite.protocol.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ClientFinalMessage,
    ClientFirstMessage,
    ScramError,
    ScramFormatter,
    ScramMechanism,
    ServerFinalMessage,
    ServerFirstMessage,
    auth_message,
    client_final_message,
    escape_sasl_name,
    scram_mechanism,
    scram_mechanism_for_type,
    unescape_sasl_name,
)

# RFC 7677 section 3 (SCRAM-SHA-256) and RFC 5802 section 5 (SCRAM-SHA-1), user "user", password "pencil".
RFC7677 = (
    SCRAM_SHA_256,
    b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
)
RFC5802 = (
    ScramMechanism("SCRAM-SHA-1", "sha1", 0),
    b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
    b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
    b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
    b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
)


@pytest.mark.parametrize("vector", [RFC7677, RFC5802], ids=["rfc7677-sha256", "rfc5802-sha1"])
def test_rfc_exchange_client_side(vector: tuple) -> None:
    mechanism, c1, s1, c2, s2 = vector
    formatter = ScramFormatter(mechanism)
    client_first = ClientFirstMessage.parse(c1)
    assert (client_first.username, client_first.authorization_id) == ("user", "")
    assert client_first.to_bytes() == c1
    rebuilt = ClientFirstMessage.build("user", nonce=client_first.nonce)
    assert rebuilt.to_bytes() == c1
    server_first = ServerFirstMessage.parse(s1)
    assert server_first.iterations == 4096
    final, expected_signature = client_final_message(formatter, "pencil", rebuilt, server_first)
    assert final.to_bytes() == c2
    assert ServerFinalMessage(expected_signature).to_bytes() == s2
    assert ServerFinalMessage.parse(s2).server_signature == expected_signature


@pytest.mark.parametrize("vector", [RFC7677, RFC5802], ids=["rfc7677-sha256", "rfc5802-sha1"])
def test_rfc_exchange_server_side(vector: tuple) -> None:
    mechanism, c1, s1, c2, s2 = vector
    formatter = ScramFormatter(mechanism)
    server_first = ServerFirstMessage.parse(s1)
    credential = formatter.generate_credential("pencil", 4096, salt=server_first.salt)
    client_first = ClientFirstMessage.parse(c1)
    client_final = ClientFinalMessage.parse(c2)
    assert client_final.channel_binding == b"n,,"
    assert client_final.nonce == server_first.nonce
    message = auth_message(client_first.bare, server_first.text, client_final.without_proof)
    assert formatter.verify_client_proof(credential.stored_key, message, client_final.proof)
    assert ServerFinalMessage(formatter.server_signature(credential.server_key, message)).to_bytes() == s2
    other = formatter.generate_credential("pencil2", 4096, salt=server_first.salt)
    assert not formatter.verify_client_proof(other.stored_key, message, client_final.proof)
    assert not formatter.verify_client_proof(credential.stored_key, message, client_final.proof[:-1])
    assert not formatter.verify_client_proof(credential.stored_key, message + b"x", client_final.proof)


def test_sha512_matches_independent_formulas() -> None:
    formatter = ScramFormatter(SCRAM_SHA_512)
    salt, password = b"0123456789abcdef", "p\u00e4ss,word="
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, 4096)
    assert formatter.salted_password(password, salt, 4096) == salted
    credential = formatter.credential_from_salted_password(salt, salted, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    assert credential.stored_key == hashlib.sha512(client_key).digest()
    assert credential.server_key == hmac.new(salted, b"Server Key", "sha512").digest()
    assert len(credential.stored_key) == SCRAM_SHA_512.digest_size_bytes == 64
    assert "stored" not in repr(credential) and credential.stored_key.hex() not in repr(credential)
    # a full client/server round with a user name that needs escaping
    client_first = ClientFirstMessage.build("a=b,c")
    assert client_first.bare.startswith("n=a=3Db=2Cc,r=")
    parsed = ClientFirstMessage.parse(client_first.to_bytes())
    assert parsed.username == "a=b,c" and parsed.bare == client_first.bare
    server_first = ServerFirstMessage.build(parsed.nonce, "srv", salt, 4096)
    final, signature = client_final_message(formatter, password, client_first, server_first)
    received = ClientFinalMessage.parse(final.to_bytes())
    message = auth_message(parsed.bare, server_first.text, received.without_proof)
    assert formatter.verify_client_proof(credential.stored_key, message, received.proof)
    assert formatter.server_signature(credential.server_key, message) == signature


def test_mechanism_lookup() -> None:
    assert scram_mechanism("SCRAM-SHA-256") is SCRAM_SHA_256
    assert scram_mechanism("scram-sha-256") is None
    assert scram_mechanism_for_type(2) is SCRAM_SHA_512
    assert scram_mechanism_for_type(0) is None
    assert (SCRAM_SHA_256.min_iterations, SCRAM_SHA_256.max_iterations) == (4096, 16384)


def test_sasl_name_escaping() -> None:
    assert escape_sasl_name("=,x") == "=3D=2Cx"
    assert unescape_sasl_name("=3D=2Cx") == "=,x"
    for bad in ("a=b", "a=2c", "a,b", ""):
        with pytest.raises(ScramError):
            unescape_sasl_name(bad)


def test_client_first_grammar() -> None:
    parsed = ClientFirstMessage.parse(b"n,a=alice,m=reserved,n=alice,r=abc,tokenauth=true,foo=bar")
    assert parsed.authorization_id == "alice"
    assert parsed.extensions == {"tokenauth": "true", "foo": "bar"}
    assert parsed.bare == "m=reserved,n=alice,r=abc,tokenauth=true,foo=bar"
    assert ClientFirstMessage.build("u", nonce="n1", extensions={"tokenauth": "true"}).bare == (
        "n=u,r=n1,tokenauth=true"
    )
    for bad in (
        b"y,,n=alice,r=abc",  # channel binding flags other than "n"
        b"p=tls-unique,,n=alice,r=abc",
        b"n,,n=alice",  # no nonce
        b"n,,n=,r=abc",  # empty name
        b"n,,n=al=ice,r=abc",  # bad escape
        b"n,,n=alice,r=a b",  # nonce not printable
        b"n,,n=alice,r=abc,",  # dangling comma
        b"n,,n=alice,r=abc\n",
        b"\xff\xfe",
        b"",
    ):
        with pytest.raises(ScramError):
            ClientFirstMessage.parse(bad)


def test_server_and_final_grammar() -> None:
    salt = base64.b64encode(b"salt").decode()
    assert ServerFirstMessage.parse(f"r=ab,s={salt},i=4096,x=y".encode()).salt == b"salt"
    for bad in (f"r=ab,s={salt},i=0", "r=ab,s=!!,i=4096", f"r=ab,s={salt}", f"r=ab,s={salt},i=99999999999"):
        with pytest.raises(ScramError):
            ServerFirstMessage.parse(bad.encode())
    for bad in (b"c=biws,r=ab", b"c=biws,r=ab,p=abc", b"r=ab,c=biws,p=AAAA", b"c=b!ws,r=ab,p=AAAA"):
        with pytest.raises(ScramError):
            ClientFinalMessage.parse(bad)
    with_ext = ClientFinalMessage.parse(b"c=biws,r=ab,ext=1,p=AAAA")
    assert with_ext.without_proof == "c=biws,r=ab,ext=1" and with_ext.proof == b"\0\0\0"
    assert ServerFinalMessage.parse(b"e=invalid-proof") == ServerFinalMessage(None, "invalid-proof")
    assert ServerFinalMessage(None, "other-error").to_bytes() == b"e=other-error"
    with pytest.raises(ScramError):
        ServerFinalMessage.parse(b"x=1")


def test_client_checks_server_first() -> None:
    formatter = ScramFormatter(SCRAM_SHA_256)
    client_first = ClientFirstMessage.build("u", nonce="abc")
    for server_first in (
        ServerFirstMessage.build("xyz", "1", b"s", 4096),  # does not extend the client nonce
        ServerFirstMessage.build("abc", "", b"s", 4096),  # no server part
        ServerFirstMessage.build("abc", "1", b"s", 4095),  # below the minimum
    ):
        with pytest.raises(ScramError):
            client_final_message(formatter, "pw", client_first, server_first)
    with pytest.raises(ScramError):
        formatter.salted_password("pw", b"s", 0)
