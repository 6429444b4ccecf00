"""``__consumer_offsets`` record formats and the group -> partition mapping (pure logic)."""

from __future__ import annotations

import struct

import pytest

from broker.coordinator.group.group_metadata_manager import java_string_hashcode, partition_for_group
from spark_kafkalite.protocol.group_records import (
    GroupMetadataKey,
    GroupMetadataRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetCommitKey,
    RecordFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),  # Java: "hello".hashCode()
        ("ab", 97 * 31 + 98),
        ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE
        (
            "zzzzzzzzzz",
            -(2**32) + (sum(122 * 31**i for i in range(10)) % 2**32)
            if (sum(122 * 31**i for i in range(10)) % 2**32) >= 2**31
            else sum(122 * 31**i for i in range(10)) % 2**32,
        ),
    ],
)
def test_java_string_hashcode(text: str, expected: int) -> None:
    assert java_string_hashcode(text) == expected


def test_java_hashcode_uses_utf16_code_units() -> None:
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16
    assert java_string_hashcode("\U0001f600") == (31 * 0xD83D + 0xDE00)


def test_partition_for_group_is_kafkas_abs_mod() -> None:
    assert partition_for_group("hello", 50) == 99162322 % 50
    assert partition_for_group("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    negative = next(
        g for g in (chr(65 + i % 26) * (i + 1) for i in range(200)) if java_string_hashcode(g) < 0
    )
    assert partition_for_group(negative, 7) == abs(java_string_hashcode(negative)) % 7


def test_offset_commit_key_bytes_match_kafka_layout() -> None:
    key = encode_offset_commit_key("g", "topic", 3)
    assert key == struct.pack(">hh1sh5si", 1, 1, b"g", 5, b"topic", 3)
    assert decode_key(key) == OffsetCommitKey("g", "topic", 3)


def test_group_metadata_key() -> None:
    key = encode_group_metadata_key("grp")
    assert key == struct.pack(">hh3s", 2, 3, b"grp")
    assert decode_key(key) == GroupMetadataKey("grp")
    assert decode_key(struct.pack(">h", 9) + b"x") is None  # newer record types are skipped


def test_offset_commit_value_v3_round_trip_and_layout() -> None:
    value = OffsetAndMetadata(42, 7, "meta", 1_700_000_000_000)
    raw = encode_offset_commit_value(value)
    assert raw[:2] == b"\x00\x03"
    assert raw == struct.pack(">hqih4sq", 3, 42, 7, 4, b"meta", 1_700_000_000_000)
    assert decode_offset_commit_value(raw) == value


def test_offset_commit_value_v1_carries_expire_timestamp() -> None:
    value = OffsetAndMetadata(5, -1, "", 1000, 2000)
    raw = encode_offset_commit_value(value)
    assert raw[:2] == b"\x00\x01"
    assert decode_offset_commit_value(raw) == value


def test_offset_commit_value_older_and_flexible_versions() -> None:
    v0 = struct.pack(">hqh2sq", 0, 9, 2, b"md", 123)
    assert decode_offset_commit_value(v0) == OffsetAndMetadata(9, -1, "md", 123, -1)
    v4 = struct.pack(">hqi", 4, 11, 3) + bytes([3]) + b"ab" + struct.pack(">q", 77) + bytes([0])
    assert decode_offset_commit_value(v4) == OffsetAndMetadata(11, 3, "ab", 77, -1)
    with pytest.raises(RecordFormatError):
        decode_offset_commit_value(struct.pack(">hq", 3, 1))  # truncated
    with pytest.raises(RecordFormatError):
        decode_offset_commit_value(struct.pack(">h", 5) + b"\x00" * 30)


def test_group_metadata_value_round_trip() -> None:
    members = (
        MemberRecord("m-1", None, "client", "/127.0.0.1", 30000, 10000, b"\x00\x01sub", b"assign"),
        MemberRecord("static-2", "inst-2", "c2", "/127.0.0.2", 60000, 45000, b"", b""),
    )
    record = GroupMetadataRecord("consumer", 4, "range", "m-1", 1234, members)
    raw = encode_group_metadata_value(record)
    assert raw[:2] == b"\x00\x03"
    assert decode_group_metadata_value(raw) == record
    empty = GroupMetadataRecord("consumer", 5, None, None, 99, ())
    assert decode_group_metadata_value(encode_group_metadata_value(empty)) == empty
