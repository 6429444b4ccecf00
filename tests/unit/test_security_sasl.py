"""SASL on the broker without sockets: PLAIN and SCRAM servers, and the
per-connection authenticator's state machine (Kafka's SaslServerAuthenticator) fed with frames
built by kio, as a client would send them."""

from __future__ import annotations

import pytest

from broker.security.sasl_server import PlainSaslServer, SaslAuthenticationError, ScramSaslServer
from broker.security.sasl_server_authenticator import (
    IllegalSaslState,
    SaslAuthenticationFailed,
    SaslServerAuthenticator,
)
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.framing import SIZE_PREFIX, decode_response, encode_request
from spark_kafkalite.protocol.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ClientFirstMessage,
    ScramCredential,
    ScramFormatter,
    ScramMechanism,
    ServerFinalMessage,
    ServerFirstMessage,
    client_final_message,
)


def test_plain_server() -> None:
    users = {"alice": "alice-secret"}
    server = PlainSaslServer(users)
    assert server.evaluate_response(b"\0alice\0alice-secret") == b""
    assert server.complete and server.authorization_id == "alice"
    assert PlainSaslServer(users).evaluate_response(b"alice\0alice\0alice-secret") == b""
    for bad, message in (
        (b"\0alice\0wrong", "Invalid username or password"),
        (b"\0mallory\0alice-secret", "Invalid username or password"),
        (b"bob\0alice\0alice-secret", "authorization id"),
        (b"\0alice", "expected 3 tokens"),
        (b"\0\0pw", "username not specified"),
        (b"\0alice\0", "password not specified"),
        (b"\xff\0a\0b", "not UTF-8"),
    ):
        with pytest.raises(SaslAuthenticationError, match=message) as info:
            PlainSaslServer(users).evaluate_response(bad)
        assert "alice-secret" not in str(info.value)


class _Store:
    """Credentials as the metadata image holds them, by (user, mechanism name)."""

    def __init__(self, password: str = "alice-secret", iterations: int = 4096) -> None:
        self._credentials = {
            ("alice", m.mechanism_name): ScramFormatter(m).generate_credential(password, iterations)
            for m in (SCRAM_SHA_256, SCRAM_SHA_512)
        }

    def get(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._credentials.get((user, mechanism.mechanism_name))


def _store(password: str = "alice-secret", iterations: int = 4096) -> _Store:
    return _Store(password, iterations)


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512], ids=lambda m: m.mechanism_name)
def test_scram_server_accepts_the_right_password_only(mechanism) -> None:  # type: ignore[no-untyped-def]
    store = _store()
    for password, ok in (("alice-secret", True), ("wrong", False)):
        server = ScramSaslServer(mechanism, store.get)
        first = ClientFirstMessage.build("alice")
        server_first = ServerFirstMessage.parse(server.evaluate_response(first.to_bytes()))
        final, signature = client_final_message(ScramFormatter(mechanism), password, first, server_first)
        if ok:
            assert (
                ServerFinalMessage.parse(server.evaluate_response(final.to_bytes())).server_signature
                == signature
            )
            assert server.complete and server.authorization_id == "alice"
        else:
            with pytest.raises(SaslAuthenticationError, match="invalid credentials"):
                server.evaluate_response(final.to_bytes())
            assert not server.complete


def test_scram_server_refusals() -> None:
    store = _store()

    def first_step(message: bytes, lookup=store.get) -> ScramSaslServer:  # type: ignore[no-untyped-def]
        server = ScramSaslServer(SCRAM_SHA_512, lookup)
        server.evaluate_response(message)
        return server

    for bad in (b"n,,n=bob,r=abc", b"y,,n=alice,r=abc", b"garbage", b"n,a=bob,n=alice,r=abc"):
        with pytest.raises(SaslAuthenticationError):
            first_step(bad)
    with pytest.raises(SaslAuthenticationError, match="tokenauth"):
        first_step(b"n,,n=alice,r=abc,tokenauth=true")
    with pytest.raises(SaslAuthenticationError):  # stored iterations below 4096
        first_step(b"n,,n=alice,r=abc", _store(iterations=1024).get)
    # client-final: nonce not the server's, channel binding not the gs2 header, replayed
    first = ClientFirstMessage.build("alice", nonce="abc")
    server = first_step(first.to_bytes())
    with pytest.raises(SaslAuthenticationError):
        server.evaluate_response(b"c=biws,r=abc,p=AAAA")
    server = ScramSaslServer(SCRAM_SHA_512, store.get)
    server_first = ServerFirstMessage.parse(server.evaluate_response(first.to_bytes()))
    final, _ = client_final_message(ScramFormatter(SCRAM_SHA_512), "alice-secret", first, server_first)
    forged = final.to_bytes().replace(b"c=biws", b"c=eSws")
    with pytest.raises(SaslAuthenticationError):
        server.evaluate_response(forged)
    with pytest.raises(SaslAuthenticationError):  # failed servers stay failed
        server.evaluate_response(final.to_bytes())


def _request(api_key: ApiKey, version: int, correlation_id: int = 1, **fields: object) -> bytes:
    frame = encode_request(build(request_class(api_key, version), **fields), correlation_id, "test")
    return frame[4:]


def _response(api_key: ApiKey, version: int, frame: bytes | None):  # type: ignore[no-untyped-def]
    assert frame is not None
    return decode_response(api_key, version, frame[4:])[1]


def _authenticator() -> SaslServerAuthenticator:
    return SaslServerAuthenticator(("PLAIN", "SCRAM-SHA-512"), {"alice": "alice-secret"}, _store().get)


def test_authenticator_v1_flow_with_scram() -> None:
    auth = _authenticator()
    versions = auth.receive(
        _request(ApiKey.API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    )
    assert versions.delegate is not None and versions.response is None
    handshake = _response(
        ApiKey.SASL_HANDSHAKE,
        1,
        auth.receive(_request(ApiKey.SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-512")).response,
    )
    assert handshake.error_code == ErrorCode.none and handshake.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    first = ClientFirstMessage.build("alice")
    reply = auth.receive(_request(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=first.to_bytes()))
    server_first = ServerFirstMessage.parse(_response(ApiKey.SASL_AUTHENTICATE, 2, reply.response).auth_bytes)
    final, signature = client_final_message(
        ScramFormatter(SCRAM_SHA_512), "alice-secret", first, server_first
    )
    assert not auth.complete
    done = _response(
        ApiKey.SASL_AUTHENTICATE,
        2,
        auth.receive(_request(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=final.to_bytes())).response,
    )
    assert (
        done.error_code == ErrorCode.none
        and ServerFinalMessage.parse(done.auth_bytes).server_signature == signature
    )
    assert auth.complete and auth.principal == "User:alice"


def test_authenticator_v0_raw_tokens_with_plain() -> None:
    auth = _authenticator()
    handshake = _response(
        ApiKey.SASL_HANDSHAKE, 0, auth.receive(_request(ApiKey.SASL_HANDSHAKE, 0, mechanism="PLAIN")).response
    )
    assert handshake.error_code == ErrorCode.none
    reply = auth.receive(b"\0alice\0alice-secret")  # a raw token, no Kafka header
    assert reply.response == SIZE_PREFIX.pack(0) and auth.principal == "User:alice"
    bad = _authenticator()
    bad.receive(_request(ApiKey.SASL_HANDSHAKE, 0, mechanism="PLAIN"))
    with pytest.raises(SaslAuthenticationFailed) as info:
        bad.receive(b"\0alice\0nope")
    assert info.value.response is None  # v0 has no error frame: just close


def test_authenticator_refusals() -> None:
    # wrong password: SASL_AUTHENTICATION_FAILED response, then close
    auth = _authenticator()
    auth.receive(_request(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN"))
    with pytest.raises(SaslAuthenticationFailed) as info:
        auth.receive(_request(ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=b"\0alice\0nope"))
    failed = _response(ApiKey.SASL_AUTHENTICATE, 1, info.value.response)
    assert failed.error_code == ErrorCode.sasl_authentication_failed
    assert failed.error_message == "Authentication failed: Invalid username or password"
    # unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled list, then close
    with pytest.raises(SaslAuthenticationFailed) as info:
        _authenticator().receive(_request(ApiKey.SASL_HANDSHAKE, 1, mechanism="GSSAPI"))
    refused = _response(ApiKey.SASL_HANDSHAKE, 1, info.value.response)
    assert refused.error_code == ErrorCode.unsupported_sasl_mechanism and "PLAIN" in refused.mechanisms
    # anything else before authentication closes without a response
    for frames in (
        [
            _request(
                ApiKey.METADATA,
                12,
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        ],
        [_request(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"x")],  # before the handshake
        [_request(ApiKey.API_VERSIONS, 0), _request(ApiKey.API_VERSIONS, 0)],  # ApiVersions twice
        [b"\x00\x11\x00\x02" + _request(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN")[4:]],  # v2: unsupported
        [b"\x00\x11\x00\x01\x00\x00\x00\x01\xff\xff\x00\x40garbage"],  # SaslHandshake v1, truncated body
        [b"\x01\x02"],
    ):
        auth = _authenticator()
        with pytest.raises(IllegalSaslState):
            for frame in frames:
                auth.receive(frame)


def _exchange_with(auth: SaslServerAuthenticator):  # type: ignore[no-untyped-def]
    """The inter-broker SASL client's exchange, answered by a server authenticator in memory."""

    async def exchange(request):  # type: ignore[no-untyped-def]
        frame = encode_request(request, 1, "broker-2")[4:]
        try:
            reply = auth.receive(frame)
            response = reply.response
        except SaslAuthenticationFailed as exc:
            response = exc.response
        return decode_response(request.__api_key__, request.__version__, (response or b"")[4:])[1]

    return exchange


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_inter_broker_sasl_client(mechanism: str) -> None:
    import asyncio

    from broker.security.sasl_client import SaslClientError, sasl_client_authenticate

    auth = _authenticator()
    asyncio.run(sasl_client_authenticate(_exchange_with(auth), mechanism, "alice", "alice-secret"))
    assert auth.complete and auth.principal == "User:alice"
    with pytest.raises(SaslClientError, match="alice") as info:
        asyncio.run(sasl_client_authenticate(_exchange_with(_authenticator()), mechanism, "alice", "nope"))
    assert "nope" not in str(info.value)
    with pytest.raises(SaslClientError, match="UNSUPPORTED_SASL_MECHANISM"):
        asyncio.run(sasl_client_authenticate(_exchange_with(_authenticator()), "SCRAM-SHA-256", "alice", "x"))


def test_client_reads_the_session_lifetime_of_a_sasl_authenticate_response() -> None:
    """KIP-368: SaslAuthenticate v1+ answers the session lifetime (a timedelta in kio); the
    client keeps it in ms. Before v1 there is none (0)."""
    import datetime

    from spark_kafkalite.client.security.sasl_authenticator import SaslClientAuthenticator
    from spark_kafkalite.client.security.security_config import SaslCredentials
    from spark_kafkalite.protocol.api_keys import response_class
    from spark_kafkalite.protocol.framing import encode_response

    for version, lifetime, expected_ms in [(2, datetime.timedelta(minutes=5), 300_000), (0, None, 0)]:
        client = SaslClientAuthenticator(
            SaslCredentials("PLAIN", "alice", "secret"),
            1,
            {ApiKey.SASL_HANDSHAKE: (0, 1), ApiKey.SASL_AUTHENTICATE: (0, version)},
        )
        handshake = build(
            response_class(ApiKey.SASL_HANDSHAKE, 1), error_code=ErrorCode.none, mechanisms=("PLAIN",)
        )
        client.on_handshake_response(
            memoryview(encode_response(handshake, 6))[SIZE_PREFIX.size :]
        )  # sends PLAIN's token
        fields = {"error_code": ErrorCode.none, "error_message": None, "auth_bytes": b""}
        if lifetime is not None:
            fields["session_lifetime"] = lifetime
        frame = encode_response(build(response_class(ApiKey.SASL_AUTHENTICATE, version), **fields), 7)
        assert (
            client.on_authenticate_response(memoryview(frame)[SIZE_PREFIX.size :]) is None
        )  # PLAIN: one round
        assert client.session_lifetime_ms == expected_ms
