"""SCRAM credentials in the metadata (Kafka's ScramControlManager rules, UserScramCredentialRecord
in the image and its snapshot records, the single-node file store) and the --add-scram syntax."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.controller.metadata_image import MetadataImage
from broker.controller.metadata_snapshot import image_to_records
from broker.controller.scram_control import (
    ScramDeletion,
    ScramUpsertion,
    alter_user_scram_credentials,
    describe_user_scram_credentials,
    parse_add_scram,
    scram_credential,
)
from broker.controller.scram_store import load_scram_credentials, save_scram_credentials
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramFormatter


def _upsert(name: str, mechanism: int = 2, iterations: int = 4096, password: str = "pw") -> ScramUpsertion:
    salt = b"salt-" + name.encode()
    formatter = ScramFormatter(SCRAM_SHA_512 if mechanism == 2 else SCRAM_SHA_256)
    return ScramUpsertion(
        name, mechanism, iterations, salt, formatter.salted_password(password, salt, iterations)
    )


def _image() -> MetadataImage:
    return MetadataImage(cluster_id="c", controller_id=1)


def test_alter_rules() -> None:
    image = _image()
    records, results = alter_user_scram_credentials(
        image, [], [_upsert("alice"), _upsert("bob", mechanism=1)]
    )
    assert [r[1] for r in results] == [ErrorCode.none, ErrorCode.none]
    image = image.apply(records)[0]
    stored = scram_credential(image, "alice", SCRAM_SHA_512)
    assert stored == ScramFormatter(SCRAM_SHA_512).credential_from_salted_password(
        b"salt-alice", _upsert("alice").salted_password, 4096
    )
    assert scram_credential(image, "alice", SCRAM_SHA_256) is None
    records, results = alter_user_scram_credentials(
        image,
        [ScramDeletion("bob", 1), ScramDeletion("ghost", 2), ScramDeletion("x", 9), ScramDeletion("dup", 2)],
        [
            _upsert("weak", iterations=4095),
            _upsert("strong", iterations=16385),
            _upsert("", iterations=4096),
            _upsert("odd", mechanism=0),
            ScramUpsertion("nosalt", 2, 4096, b"", b"x"),
            _upsert("dup"),
            _upsert("twice"),
            _upsert("twice"),
        ],
    )
    assert {name: code for name, code, _ in results} == {
        "bob": ErrorCode.none,
        "ghost": ErrorCode.resource_not_found,
        "x": ErrorCode.unsupported_sasl_mechanism,
        "dup": ErrorCode.resource_not_found,  # its deletion failed first: the upsertion is skipped
        "weak": ErrorCode.unacceptable_credential,
        "strong": ErrorCode.unacceptable_credential,
        "": ErrorCode.unacceptable_credential,
        "odd": ErrorCode.unsupported_sasl_mechanism,
        "nosalt": ErrorCode.unacceptable_credential,
        "twice": ErrorCode.duplicate_resource,
    }
    image = image.apply(records)[0]
    assert sorted(image.scram_credentials) == [("alice", 2)]
    _, results = alter_user_scram_credentials(image, [ScramDeletion("alice", 2)], [_upsert("alice")])
    assert results == [
        (
            "alice",
            ErrorCode.duplicate_resource,
            "A user credential cannot be altered twice in the same request",
        )
    ]


def test_describe_and_snapshot_records() -> None:
    records, _ = alter_user_scram_credentials(_image(), [], [_upsert("alice"), _upsert("bob", 1, 8192)])
    image = _image().apply(records)[0]
    assert describe_user_scram_credentials(image, None) == [
        ("alice", ErrorCode.none, None, ((2, 4096),)),
        ("bob", ErrorCode.none, None, ((1, 8192),)),
    ]
    results = describe_user_scram_credentials(image, ["bob", "nobody", "alice", "alice"])
    assert [(u, c) for u, c, _, _ in results] == [
        ("bob", ErrorCode.none),
        ("nobody", ErrorCode.resource_not_found),
        ("alice", ErrorCode.duplicate_resource),
    ]
    rebuilt = _image().apply(image_to_records(image))[0]
    assert rebuilt.scram_credentials == image.scram_credentials
    with pytest.raises(ValueError, match="unknown SCRAM credential"):
        image.apply(alter_user_scram_credentials(image, [ScramDeletion("bob", 1)], [])[0] * 2)


def test_file_store_round_trip(tmp_path: Path) -> None:
    records, _ = alter_user_scram_credentials(_image(), [], [_upsert("alice"), _upsert("bob", 1)])
    credentials = _image().apply(records)[0].scram_credentials
    path = tmp_path / "meta" / "scram-credentials.json"
    assert load_scram_credentials(path) == {}
    save_scram_credentials(path, credentials)
    assert load_scram_credentials(path) == dict(credentials)
    assert path.stat().st_mode & 0o777 == 0o600
    assert "pw" not in path.read_text()
    path.write_text('{"version": 1, "credentials": [{"name": "x"}]}')
    with pytest.raises(ValueError, match="corrupt SCRAM credential file"):
        load_scram_credentials(path)


def test_parse_add_scram() -> None:
    upsertion = parse_add_scram('SCRAM-SHA-256=[name=alice,password="a,b=c",iterations=8192]')
    assert (upsertion.name, upsertion.mechanism, upsertion.iterations) == ("alice", 1, 8192)
    assert upsertion.salted_password == ScramFormatter(SCRAM_SHA_256).salted_password(
        "a,b=c", upsertion.salt, 8192
    )
    salted = parse_add_scram("SCRAM-SHA-512=[name=bob,password=pw,salt=c2FsdA==]")
    assert salted.salt == b"salt" and salted.iterations == 4096
    assert "pw" not in repr(salted)
    for bad in (
        "SCRAM-SHA-1=[name=a,password=b]",
        "SCRAM-SHA-512=[name=a]",
        "SCRAM-SHA-512=[password=b]",
        "SCRAM-SHA-512=name=a,password=b",
        "SCRAM-SHA-512=[name=a,password=b,iterations=many]",
        "SCRAM-SHA-512=[name=a,password=b,salt=!!]",
        "SCRAM-SHA-512=[name=a,password=b,colour=red]",
    ):
        with pytest.raises(ValueError) as info:
            parse_add_scram(bad)
        assert "=b" not in str(info.value)
