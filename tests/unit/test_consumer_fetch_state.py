"""Consumer fetch-side state (pure logic): per-partition fetch errors as Java's Fetcher handles
them, the offset epoch of returned records, and KIP-320 position validation states in
SubscriptionState."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.metadata.v12 import response as m12

from spark_kafkalite.client.config import parse_config
from spark_kafkalite.client.consumer.fetcher import CompletedFetch, Fetcher
from spark_kafkalite.client.consumer.kafka_consumer import CONSUMER_DEFAULTS
from spark_kafkalite.client.consumer.subscription_state import OffsetResetStrategy, SubscriptionState
from spark_kafkalite.client.metadata import Metadata
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import ErrorCode, TopicAuthorizationFailedError
from spark_kafkalite.protocol.record_batch_writer import encode_batch

TP = TopicPartition("t", 0)


def make_fetcher(
    reset: OffsetResetStrategy = OffsetResetStrategy.EARLIEST,
) -> tuple[Fetcher, SubscriptionState, Metadata]:
    cfg = parse_config({"bootstrap.servers": "h:1"}, CONSUMER_DEFAULTS, "test")
    subs = SubscriptionState(reset)
    subs.assign([TP])
    md = Metadata(cfg)
    md.build_request()
    md.update(
        m12.MetadataResponse(
            throttle_time=datetime.timedelta(0), brokers=(), cluster_id=None, controller_id=-1, topics=()
        ),
        0.0,
    )
    return Fetcher(None, md, subs, cfg), subs, md  # type: ignore[arg-type]


def batch(base_offset: int, count: int, epoch: int = -1) -> bytes:
    return encode_batch(
        [(None, f"v{base_offset + i}".encode(), 1000 + i, []) for i in range(count)],
        base_offset=base_offset,
        partition_leader_epoch=epoch,
    )


def add(fetcher: Fetcher, fetch_offset: int, records: bytes | None, error: int = 0, hw: int = 100) -> None:
    fetcher.buffer.add(CompletedFetch(TP, fetch_offset, error, hw, 0, hw, records))


def test_topic_authorization_failed_raises() -> None:
    fetcher, subs, _ = make_fetcher()
    subs.seek(TP, 0)
    add(fetcher, 0, None, error=ErrorCode.topic_authorization_failed)
    with pytest.raises(TopicAuthorizationFailedError):
        fetcher.collect_fetch()
    assert subs.position(TP) == 0


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
    ],
)
def test_leader_and_topic_errors_refresh_metadata(code: int) -> None:
    fetcher, subs, md = make_fetcher()
    subs.seek(TP, 5)
    assert not md.update_requested()
    add(fetcher, 5, None, error=code)
    assert fetcher.collect_fetch() == {}
    assert md.update_requested() and subs.position(TP) == 5


def test_offset_epoch_follows_returned_records() -> None:
    fetcher, subs, _ = make_fetcher()
    subs.seek(TP, 0)
    assert subs.state(TP).offset_epoch is None
    add(fetcher, 0, batch(0, 3, epoch=4) + batch(3, 2, epoch=6))
    assert [r.offset for r in fetcher.collect_fetch(4)[TP]] == [0, 1, 2, 3]
    assert (subs.position(TP), subs.state(TP).offset_epoch) == (4, 6)
    fetcher.collect_fetch()
    assert (subs.position(TP), subs.state(TP).offset_epoch) == (5, 6)
    subs.seek(TP, 1)
    assert subs.state(TP).offset_epoch is None


def test_partition_awaiting_validation_is_not_fetched_and_its_buffered_data_dropped() -> None:
    fetcher, subs, _ = make_fetcher()
    subs.seek(TP, 0)
    add(fetcher, 0, batch(0, 3, epoch=1))
    fetcher.collect_fetch(1)
    assert subs.maybe_validate_position_for_current_leader(TP, 1) is False  # first sight: remembered
    assert subs.maybe_validate_position_for_current_leader(TP, 2) is True  # leader changed
    assert not subs.has_valid_position(TP) and subs.fetchable_partitions() == []
    assert fetcher.collect_fetch() == {}  # the rest of the buffered batch is not handed out
    assert subs.position(TP) == 1


def test_validation_state_machine() -> None:
    subs = SubscriptionState(OffsetResetStrategy.EARLIEST)
    subs.assign([TP])
    subs.seek(TP, 10)
    state = subs.state(TP)
    # no offset epoch (a plain seek): a leader change needs no validation
    subs.maybe_validate_position_for_current_leader(TP, 3)
    assert not subs.maybe_validate_position_for_current_leader(TP, 4)
    assert subs.has_valid_position(TP)
    state.offset_epoch = 4
    assert not subs.maybe_validate_position_for_current_leader(TP, 4)  # same epoch
    assert subs.maybe_validate_position_for_current_leader(TP, 5)
    assert subs.partitions_needing_validation(0.0) == [TP]
    subs.set_validation_pending([TP], 1000.0)
    assert subs.partitions_needing_validation(0.0) == []
    assert subs.next_validation_delay_ms(0.0) == float("inf")  # in flight
    subs.validation_failed(TP, 500.0)
    assert subs.partitions_needing_validation(100.0) == [] and subs.next_validation_delay_ms(100.0) == 400.0
    assert subs.partitions_needing_validation(600.0) == [TP]
    assert not subs.complete_validation(TP, 11, 4)  # another position: stale answer
    assert subs.complete_validation(TP, 10, 4)
    assert subs.has_valid_position(TP) and subs.fetchable_partitions() == [TP]


def test_seek_with_epoch_validates_first_and_reset_cancels_validation() -> None:
    subs = SubscriptionState(OffsetResetStrategy.EARLIEST)
    subs.assign([TP])
    subs.seek(TP, 7, offset_epoch=2)
    assert not subs.has_valid_position(TP) and subs.partitions_needing_validation(0.0) == [TP]
    subs.request_offset_reset(TP)
    assert subs.partitions_needing_validation(0.0) == []
    subs.set_reset_pending([TP], 0.0)
    assert subs.maybe_complete_reset(TP, OffsetResetStrategy.EARLIEST, 3)
    assert subs.has_valid_position(TP) and subs.position(TP) == 3 and subs.state(TP).offset_epoch is None
