"""The meters behind the broker's Prometheus endpoint (pure logic): Kafka's request names,
``errorCounts`` over nested responses, the request-time histograms and the topic meters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from broker.metrics.meters import (
    FAILED_FETCH,
    TIME_BUCKETS_MS,
    BrokerTopicStats,
    ControllerStats,
    IsrChangeMeters,
    RequestMetrics,
    RequestTimes,
    error_counts,
    record_fetch,
    request_name,
)
from spark_kafkalite.protocol.produce_response import (
    ProducePartitionResult,
    ProduceResponseData,
    ProduceTopicResult,
)


def test_request_names_are_kafkas_api_key_names() -> None:
    assert request_name(0) == "Produce"
    assert request_name(1) == "Fetch"
    assert request_name(2) == "ListOffsets"
    assert request_name(18) == "ApiVersions"
    assert request_name(23) == "OffsetForLeaderEpoch"


def test_error_counts_count_every_partition_and_the_top_level() -> None:
    response = ProduceResponseData(
        9,
        (
            ProduceTopicResult(
                "a", (ProducePartitionResult(0, 0, 5, 0, None), ProducePartitionResult(1, 6, -1, -1, "x"))
            ),
            ProduceTopicResult("b", (ProducePartitionResult(0, 6, -1, -1, "x"),)),
        ),
    )
    assert error_counts(response) == {0: 1, 6: 2}

    @dataclass
    class Partition:
        partition_index: int
        error_code: int
        records: bytes

    @dataclass
    class Topic:
        topic: str
        partitions: tuple[Partition, ...]

    @dataclass
    class Response:
        error_code: int
        responses: tuple[Topic, ...]

    fetch = Response(0, (Topic("t", (Partition(0, 0, b"xyz"), Partition(1, 1, b""))),))
    assert error_counts(fetch) == {0: 2, 1: 1}

    class Flat(NamedTuple):
        error_code: int
        error_message: str | None

    assert error_counts(Flat(58, "no")) == {58: 1}

    stats = BrokerTopicStats()
    record_fetch(stats, fetch.responses)
    assert stats.topics["t"][2] == 3  # bytes out of the partition without error
    assert stats.topics["t"][FAILED_FETCH] == 1
    assert stats.all_topics[FAILED_FETCH] == 1


def test_request_times_are_bucketed_under_each_name() -> None:
    metrics = RequestMetrics()
    metrics.record(1, 12, ("Fetch", "FetchConsumer"), {0: 3}, 0.2, 700.0)
    metrics.record(1, 12, ("Fetch", "FetchFollower"), {0: 1, 6: 1}, 0.0, 3.0)
    assert metrics.requests == {(1, 12): 2}
    assert metrics.errors == {(1, 0): 4, (1, 6): 1}
    fetch = metrics.times["Fetch"]
    assert sum(fetch.histogram(0)) == 2 and abs(fetch.sums[0] - 703.2) < 1e-9
    assert fetch.histogram(0)[TIME_BUCKETS_MS.index(1000)] == 1  # 700.2 ms: the (500, 1000] bucket
    assert fetch.histogram(0)[TIME_BUCKETS_MS.index(5)] == 1  # 3 ms: (2.5, 5]
    assert sum(metrics.times["FetchConsumer"].histogram(0)) == 1
    assert sum(metrics.times["FetchFollower"].histogram(2)) == 1


def test_request_time_parts_add_up_to_the_total() -> None:
    metrics = RequestMetrics()
    # a parked acks=all Produce: queue, local, remote (purgatory), response queue, send
    metrics.record(0, 11, ("Produce",), {0: 1}, 0.25, 1.5, 40.0, 3.0, 0.75)
    produce = metrics.times["Produce"]
    assert RequestTimes.PARTS[0] == "totaltimems" and len(RequestTimes.PARTS) == 6
    assert produce.sums == [45.5, 0.25, 1.5, 40.0, 3.0, 0.75]
    assert all(sum(produce.histogram(part)) == 1 for part in range(6))
    assert produce.histogram(0)[TIME_BUCKETS_MS.index(50)] == 1  # 45.5 ms: (25, 50]
    assert produce.histogram(3)[TIME_BUCKETS_MS.index(50)] == 1  # remote 40 ms


def test_topic_meters_keep_the_all_topics_total_after_a_topic_goes() -> None:
    stats = BrokerTopicStats()
    stats.record_produce("a", 10, 1000)
    stats.record_produce("b", 5, 300)
    stats.record_bytes_out("a", 1000)
    stats.remove_topic("a")
    assert list(stats.topics) == ["b"]
    assert stats.all_topics[:3] == [15, 1300, 1000]


def test_isr_changes_count_shrinks_and_expands() -> None:
    meters = IsrChangeMeters()
    meters.record(3, 2)
    meters.record(2, 3)
    meters.record(2, 3)
    meters.record(3, 3)
    assert (meters.shrinks, meters.expands) == (1, 2)


def test_leader_elections_count_leader_changes_of_existing_partitions() -> None:
    @dataclass
    class Registration:
        partition: int
        leader: int

    before = {("t", 0): 1, ("t", 1): 2, ("t", 2): 3}
    stats = ControllerStats()
    changed = [
        ("t", Registration(0, 2)),  # moved: an election
        ("t", Registration(1, 2)),  # ISR change only
        ("t", Registration(2, -1)),  # leaderless: no election
        ("t", Registration(3, 1)),  # a new partition's first leader: not counted
    ]
    stats.record(lambda topic, index: before.get((topic, index)), changed)
    assert stats.leader_elections == 1
