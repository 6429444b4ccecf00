"""The hand-written DescribeTransactionsResponse v0 reader against kio's encoder."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.describe_transactions.v0.response import (
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)

from spark_kafkalite.protocol.api_keys import ApiKey
from spark_kafkalite.protocol.errors import ErrorCode, InvalidRequestError
from spark_kafkalite.protocol.framing import decode_response, encode_response

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _frame(start_ms: int) -> bytes:
    state = TransactionState(
        error_code=ErrorCode.none,
        transactional_id="tx-1",
        transaction_state="Ongoing",
        transaction_timeout=datetime.timedelta(milliseconds=60000),
        transaction_start_time=_EPOCH + datetime.timedelta(milliseconds=start_ms),
        producer_id=4001,
        producer_epoch=3,
        topics=(TopicData(topic="orders", partitions=(0, 2)), TopicData(topic="b", partitions=())),
    )
    missing = TransactionState(
        error_code=ErrorCode.transactional_id_not_found,
        transactional_id="nope",
        transaction_state="",
        transaction_timeout=datetime.timedelta(0),
        transaction_start_time=_EPOCH,
        producer_id=-1,
        producer_epoch=-1,
        topics=(),
    )
    response = DescribeTransactionsResponse(
        throttle_time=datetime.timedelta(milliseconds=7), transaction_states=(state, missing)
    )
    return encode_response(response, correlation_id=42)[4:]  # without the size prefix


@pytest.mark.parametrize("start_ms", [1_790_000_000_123, 0, -1])
def test_reads_what_kio_writes_including_the_minus_one_start_time(start_ms: int) -> None:
    correlation_id, body = decode_response(ApiKey.DESCRIBE_TRANSACTIONS, 0, _frame(start_ms))
    assert correlation_id == 42 and body.throttle_time_ms == 7
    state, missing = body.transaction_states
    assert state.transaction_start_time_ms == start_ms
    assert (state.error_code, state.transactional_id, state.transaction_state) == (0, "tx-1", "Ongoing")
    assert (state.transaction_timeout_ms, state.producer_id, state.producer_epoch) == (60000, 4001, 3)
    assert [(t.topic, t.partitions) for t in state.topics] == [("orders", (0, 2)), ("b", ())]
    assert missing.error_code == ErrorCode.transactional_id_not_found and missing.topics == ()


def test_every_truncation_is_a_clean_error() -> None:
    frame = _frame(-1)
    for cut in range(5, len(frame)):  # 4 bytes of correlation id + the header's tag section
        with pytest.raises(InvalidRequestError):
            decode_response(ApiKey.DESCRIBE_TRANSACTIONS, 0, frame[:cut])


def test_a_huge_array_count_is_refused_before_allocating() -> None:
    frame = bytearray(_frame(-1)[:9])  # header (5 bytes) + throttle time
    frame += b"\xff\xff\xff\xff\x0f"  # compact array of 2**32 - 2 elements
    with pytest.raises(InvalidRequestError, match="exceeds"):
        decode_response(ApiKey.DESCRIBE_TRANSACTIONS, 0, bytes(frame))
