"""SCRAM credentials survive a single-node broker restart (scram-credentials.json), and
--add-scram never overwrites a credential that already exists."""

from __future__ import annotations

from pathlib import Path

from inprocess_broker import InProcessBroker

from broker.controller.scram_control import parse_add_scram


def _credentials(broker: InProcessBroker) -> dict:  # type: ignore[type-arg]
    return broker.call(lambda: dict(broker.ctx.image.scram_credentials))


def test_restart_keeps_credentials_and_add_scram_does_not_overwrite(tmp_path: Path) -> None:
    first = InProcessBroker(
        tmp_path, add_scram=[parse_add_scram("SCRAM-SHA-512=[name=alice,password=one]")]
    ).start()
    try:
        stored = _credentials(first)
        assert list(stored) == [("alice", 2)]
    finally:
        first.stop()
    again = [
        parse_add_scram("SCRAM-SHA-512=[name=alice,password=two]"),
        parse_add_scram("SCRAM-SHA-256=[name=bob,password=b]"),
    ]
    second = InProcessBroker(tmp_path, add_scram=again).start()
    try:
        after = _credentials(second)
        assert after[("alice", 2)] == stored[("alice", 2)]  # kept, not replaced by password "two"
        assert sorted(after) == [("alice", 2), ("bob", 1)]
    finally:
        second.stop()
