"""A JoinGroup that repeats a protocol name must not count twice towards the protocols every
member supports (the wire fuzzer found a group left with no common protocol, and the
initial-join timer failing with IllegalGroupStateError)."""

from __future__ import annotations

from broker.coordinator.group.classic_group import GroupMetadata, MemberMetadata


def _member(member_id: str, protocols: list[tuple[str, bytes]]) -> MemberMetadata:
    return MemberMetadata(member_id, None, "c", "127.0.0.1", 1000, 1000, "consumer", protocols)


def test_repeated_protocol_name_counts_once() -> None:
    group = GroupMetadata("g", 0)
    group.add(_member("a", [("range", b"")]))
    assert group.supports_protocols("consumer", [("range", b""), ("range", b"x")])
    group.add(_member("b", [("range", b""), ("range", b"x")]))
    assert group.candidate_protocols() == {"range"}
    assert group.select_protocol() == "range"
    group.update_member(group.members["a"], [("range", b""), ("range", b"")], 1000, 1000, None)
    assert group.candidate_protocols() == {"range"}
