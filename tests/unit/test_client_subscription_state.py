"""SubscriptionState: assignment, positions and offset resets."""

from __future__ import annotations

import pytest

from spark_kafkalite.client.consumer.subscription_state import OffsetResetStrategy, SubscriptionState
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import InvalidConfigError

A = TopicPartition("t", 0)
B = TopicPartition("t", 1)


def test_assign_keeps_state_of_kept_partitions() -> None:
    subs = SubscriptionState()
    subs.assign([A, B])
    subs.seek(A, 10)
    subs.assign([A, ("u", 0)])  # type: ignore[list-item]
    assert subs.assigned_partitions() == {A, TopicPartition("u", 0)}
    assert subs.position(A) == 10
    assert not subs.is_assigned(B)


def test_new_partitions_need_a_position() -> None:
    subs = SubscriptionState(OffsetResetStrategy.EARLIEST)
    subs.assign([A, B])
    subs.seek(B, 3)
    assert subs.partitions_missing_position() == [A]
    assert subs.fetchable_partitions() == [B]


def test_reset_lifecycle() -> None:
    subs = SubscriptionState(OffsetResetStrategy.LATEST)
    subs.assign([A])
    subs.request_offset_reset(A)
    assert subs.is_offset_reset_needed(A) and subs.partitions_needing_reset(0) == [A]
    assert subs.next_reset_delay_ms(0) == 0
    subs.set_reset_pending([A], next_attempt_ms=100)
    assert subs.partitions_needing_reset(0) == []
    assert subs.next_reset_delay_ms(0) == float("inf")  # in flight: the response wakes us
    assert subs.maybe_complete_reset(A, OffsetResetStrategy.EARLIEST, 5) is False  # other strategy
    assert subs.maybe_complete_reset(A, OffsetResetStrategy.LATEST, 42) is True
    assert subs.position(A) == 42 and subs.has_valid_position(A)


def test_failed_reset_is_retried_after_backoff() -> None:
    subs = SubscriptionState()
    subs.assign([A])
    subs.request_offset_reset(A, OffsetResetStrategy.EARLIEST)
    subs.set_reset_pending([A], 1000)
    subs.reset_failed(A, next_attempt_ms=50)
    assert subs.partitions_needing_reset(10) == []
    assert subs.next_reset_delay_ms(10) == 40
    assert subs.partitions_needing_reset(60) == [A]


def test_seek_cancels_a_pending_reset() -> None:
    subs = SubscriptionState()
    subs.assign([A])
    subs.request_offset_reset(A, OffsetResetStrategy.EARLIEST)
    subs.set_reset_pending([A], 1000)
    subs.seek(A, 7)
    assert subs.maybe_complete_reset(A, OffsetResetStrategy.EARLIEST, 0) is False
    assert subs.position(A) == 7


def test_paused_partitions_are_not_fetchable() -> None:
    subs = SubscriptionState()
    subs.assign([A])
    subs.seek(A, 0)
    subs.pause(A)
    assert subs.fetchable_partitions() == [] and subs.paused_partitions() == {A}
    subs.resume(A)
    assert subs.fetchable_partitions() == [A]


@pytest.mark.parametrize(
    ("text", "strategy"),
    [
        ("earliest", OffsetResetStrategy.EARLIEST),
        ("smallest", OffsetResetStrategy.EARLIEST),
        ("latest", OffsetResetStrategy.LATEST),
        ("LARGEST", OffsetResetStrategy.LATEST),
        ("none", OffsetResetStrategy.NONE),
    ],
)
def test_parse_reset_strategy(text: str, strategy: OffsetResetStrategy) -> None:
    assert OffsetResetStrategy.parse(text) is strategy


def test_parse_bad_reset_strategy() -> None:
    with pytest.raises(InvalidConfigError):
        OffsetResetStrategy.parse("middle")
