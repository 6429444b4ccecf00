"""Pure logic of the streaming source (no Spark, no broker): option parsing of the streaming
options, admission control (min/max offsets, maxTriggerDelay, byte budget), lag metrics and the
group offset committer. A fake offset reader stands in for the brokers."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxRows, ReadMinRows

from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.datasource.group_commit import GroupOffsetCommitter
from spark_kafkalite.datasource.offset_range_calculator import (
    bytes_per_offset,
    new_offsets_available,
    offsets_for_bytes,
)
from spark_kafkalite.datasource.options import (
    KafkaLiteOptionError,
    parse_sink_options,
    parse_source_options,
    parse_time_ms,
)
from spark_kafkalite.datasource.progress import lag_metrics, offsets_behind_latest
from spark_kafkalite.datasource.stream_reader import KafkaLiteStreamReader

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
BOOT = {"kafka.bootstrap.servers": "127.0.0.1:1"}


def _opts(**options: str) -> Any:
    return parse_source_options({**BOOT, "subscribe": "t", **options}, streaming=True)


class FakeOffsetReader:
    """Latest offsets set by the test; earliest is 0; log size = 100 bytes per offset."""

    def __init__(self, latest: dict[TopicPartition, int]) -> None:
        self.latest = dict(latest)
        self.size_calls = 0

    def topic_partitions(self, *, missing_ok: bool = False) -> set[TopicPartition]:
        return set(self.latest)

    def latest_offsets(self, tps: Any, known: Any = None) -> dict[TopicPartition, int]:
        return {tp: self.latest[tp] for tp in tps}

    def earliest_offsets(self, tps: Any) -> dict[TopicPartition, int]:
        return dict.fromkeys(tps, 0)

    def log_sizes(self, tps: Any) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        self.size_calls += 1
        return {tp: 100 * self.latest[tp] for tp in tps}, dict.fromkeys(tps, 1)


def _reader(latest: dict[TopicPartition, int], **options: str) -> KafkaLiteStreamReader:
    reader = KafkaLiteStreamReader(_opts(**options))
    reader._offset_reader = FakeOffsetReader(latest)  # type: ignore[assignment]
    return reader


def _total(end: dict, start: dict) -> int:
    return sum(end["t"][p] - start["t"][p] for p in end["t"])


# -- options ---------------------------------------------------------------------------------
def test_time_strings_as_spark() -> None:
    assert parse_time_ms("15m", "x") == 900_000
    assert parse_time_ms("100", "x") == 100
    assert parse_time_ms("2s", "x") == 2000
    assert parse_time_ms("1h", "x") == 3_600_000
    assert parse_time_ms("3min", "x") == 180_000
    with pytest.raises(KafkaLiteOptionError, match="'maxTriggerDelay'.*invalid suffix"):
        parse_time_ms("5w", "maxTriggerDelay")
    with pytest.raises(KafkaLiteOptionError, match="'maxTriggerDelay'"):
        parse_time_ms("soon", "maxTriggerDelay")


def test_streaming_option_values() -> None:
    opts = _opts(
        minOffsetsPerTrigger="5",
        maxOffsetsPerTrigger="50",
        maxTriggerDelay="2s",
        maxBytesPerTrigger="4096",
        groupIdPrefix="etl",
    )
    assert (opts.min_offsets_per_trigger, opts.max_offsets_per_trigger) == (5, 50)
    assert opts.max_trigger_delay_ms == 2000 and opts.max_bytes_per_trigger == 4096
    assert _opts().max_trigger_delay_ms == 15 * 60 * 1000
    assert opts.group_id_prefix == "etl"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, r"minOffsetPerTrigger\(10\) is higher"),
        ({"maxBytesPerTrigger": "0"}, "maxBytesPerTrigger must be positive"),
        ({"minOffsetsPerTrigger": "x"}, "option 'minOffsetsPerTrigger'"),
        ({"commitOffsetsToGroup": "true"}, "requires option 'kafka.group.id'"),
        ({"commitOffsetsToGroup": "yes", "kafka.group.id": "g"}, "option 'commitOffsetsToGroup'"),
        (
            {"maxOffsetPerTrigger": "5"},
            "Unknown option 'maxoffsetpertrigger'.*Did you mean 'maxOffsetsPerTrigger'",
        ),
        ({"kafka.auto.offset.reset": "earliest"}, "Kafka option 'auto.offset.reset' is not supported"),
        ({"kafka.enable.auto.commit": "true"}, "Kafka option 'enable.auto.commit' is not supported"),
        ({"kafka.interceptor.classes": "x"}, "Kafka option 'interceptor.classes' is not supported"),
        ({"kafka.key.deserializer": "x"}, "Kafka option 'key.deserializer' is not supported as keys"),
        ({"kafka.value.deserializer": "x"}, "Kafka option 'value.deserializer' is not supported as values"),
        ({"groupIdPrefix": " "}, "option 'groupIdPrefix'"),
    ],
)
def test_streaming_option_errors(options: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaLiteOptionError, match=message):
        _opts(**options)


def test_batch_rejects_commit_to_group_and_unknown_sink_options() -> None:
    with pytest.raises(KafkaLiteOptionError, match="only valid in streaming"):
        parse_source_options(
            {**BOOT, "subscribe": "t", "commitOffsetsToGroup": "true", "kafka.group.id": "g"}, streaming=False
        )
    with pytest.raises(KafkaLiteOptionError, match="Unknown option 'topics' for the kafkalite sink.*'topic'"):
        parse_sink_options({**BOOT, "topics": "x"})
    with pytest.raises(KafkaLiteOptionError, match="'key.serializer' is not supported"):
        parse_sink_options({**BOOT, "kafka.key.serializer": "x"})
    # Spark's own keys in a writeStream option map are accepted
    assert parse_sink_options({**BOOT, "checkpointLocation": "/x", "queryName": "q"}).topic is None


# -- admission control -----------------------------------------------------------------------
def test_default_read_limit_order() -> None:
    assert _reader({T0: 0}).getDefaultReadLimit() == ReadAllAvailable()
    assert _reader({T0: 0}, minOffsetsPerTrigger="3").getDefaultReadLimit() == ReadMinRows(3)
    assert _reader({T0: 0}, maxBytesPerTrigger="9").getDefaultReadLimit() == ReadMaxBytes(9)
    assert _reader(
        {T0: 0}, maxBytesPerTrigger="9", maxOffsetsPerTrigger="7"
    ).getDefaultReadLimit() == ReadMaxRows(7)


def test_max_offsets_split_by_backlog() -> None:
    reader = _reader({T0: 90, T1: 10}, maxOffsetsPerTrigger="20")
    start = {"t": {"0": 0, "1": 0}}
    end = reader.latestOffset(start, ReadMaxRows(20))
    assert end == {"t": {"0": 18, "1": 2}}
    assert reader.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 90, "1": 10}}  # Trigger.Once


def test_min_offsets_delays_until_enough_or_max_trigger_delay() -> None:
    reader = _reader({T0: 2, T1: 0}, minOffsetsPerTrigger="5", maxTriggerDelay="1s")
    limit = reader.getDefaultReadLimit()
    start = {"t": {"0": 0, "1": 0}}
    # the first trigger of a run always proceeds (Spark: lastTriggerMillis starts at 0)
    assert reader.latestOffset(start, limit) == {"t": {"0": 2, "1": 0}}
    start = {"t": {"0": 2, "1": 0}}
    reader._offset_reader.latest = {T0: 4, T1: 1}  # type: ignore[union-attr]
    assert reader.latestOffset(start, limit) == start  # 3 new < 5: no batch
    reader._offset_reader.latest = {T0: 6, T1: 1}  # type: ignore[union-attr]
    assert reader.latestOffset(start, limit) == {"t": {"0": 6, "1": 1}}  # 5 new: go
    start = {"t": {"0": 6, "1": 1}}
    reader._offset_reader.latest = {T0: 7, T1: 1}  # type: ignore[union-attr]
    assert reader.latestOffset(start, limit) == start
    time.sleep(1.1)
    assert reader.latestOffset(start, limit) == {"t": {"0": 7, "1": 1}}  # delay elapsed


def test_min_offsets_ignored_under_available_now_and_with_read_all() -> None:
    reader = _reader({T0: 3}, minOffsetsPerTrigger="100", maxTriggerDelay="1h")
    reader._last_trigger_ms = int(time.time() * 1000)  # as if a batch just ran
    assert reader.latestOffset({"t": {"0": 0}}, ReadAllAvailable()) == {"t": {"0": 3}}
    reader.prepareForTriggerAvailableNow()
    assert reader.latestOffset({"t": {"0": 0}}, reader.getDefaultReadLimit()) == {"t": {"0": 3}}


def test_max_bytes_per_trigger() -> None:
    # 100 bytes per offset on both partitions: 1000 bytes = 10 offsets, split by backlog
    reader = _reader({T0: 80, T1: 20}, maxBytesPerTrigger="1000")
    end = reader.latestOffset({"t": {"0": 0, "1": 0}}, reader.getDefaultReadLimit())
    assert end == {"t": {"0": 8, "1": 2}}
    # with maxOffsetsPerTrigger the smaller cap wins
    reader = _reader({T0: 80, T1: 20}, maxBytesPerTrigger="100000", maxOffsetsPerTrigger="5")
    end = reader.latestOffset({"t": {"0": 0, "1": 0}}, reader.getDefaultReadLimit())
    assert _total(end, {"t": {"0": 0, "1": 0}}) <= 5


def test_byte_estimates() -> None:
    per = bytes_per_offset({T0: 3000, T1: 0}, {T0: 0, T1: 0}, {T0: 10, T1: 5}, {T0: 3})
    assert per == {T0: 100.0}
    # T1 has no estimate: uses the mean (100); 1000 bytes over 20 backlog offsets -> 10 offsets
    assert offsets_for_bytes(1000, {T0: 0, T1: 0}, {T0: 10, T1: 10}, per) == 10
    assert offsets_for_bytes(10, {T0: 0}, {T0: 10}, per) == 1  # never below one offset
    assert offsets_for_bytes(1000, {T0: 0}, {T0: 10}, {}) is None
    assert new_offsets_available({T0: 3, T1: -1}, {T0: 10, T1: 50, TopicPartition("t", 2): 4}) == 11


def test_new_partitions_under_a_cap_start_at_earliest() -> None:
    reader = _reader({T0: 10, T1: 10}, maxOffsetsPerTrigger="100")
    end = reader.latestOffset({"t": {"0": 10}}, ReadMaxRows(100))
    assert end == {"t": {"0": 10, "1": 10}}


# -- lag -------------------------------------------------------------------------------------
def test_lag_metrics_and_progress_helper() -> None:
    assert lag_metrics({T0: 5, T1: 10}, {T0: 9, T1: 10}) == {
        "minOffsetsBehindLatest": 0,
        "maxOffsetsBehindLatest": 4,
        "avgOffsetsBehindLatest": 2.0,
    }
    progress = {
        "sources": [
            {
                "endOffset": json.dumps({"t": {"0": 5, "1": 10}}),
                "latestOffset": json.dumps({"t": {"0": 9, "1": 12}}),
            }
        ]
    }
    lag = offsets_behind_latest(json.dumps(progress))
    assert lag["maxOffsetsBehindLatest"] == 4 and lag["partitions"] == {"t-0": 4, "t-1": 2}
    assert offsets_behind_latest({"sources": [{"endOffset": None, "latestOffset": None}]}) == {}


# -- group commits ---------------------------------------------------------------------------
class FakeAdmin:
    calls: list[tuple[str, dict]] = []
    fail_next = False

    def __init__(self, config: dict) -> None:
        assert "group.id" not in config

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: dict, timeout_ms: float | None = None
    ) -> None:
        assert timeout_ms == 10_000
        if FakeAdmin.fail_next:
            FakeAdmin.fail_next = False
            raise ConnectionError("coordinator not available")
        FakeAdmin.calls.append((group_id, dict(offsets)))

    def close(self) -> None:
        pass


def test_group_committer_skips_markers_and_repeats_and_survives_failures() -> None:
    FakeAdmin.calls = []
    committer = GroupOffsetCommitter(
        "g", {"bootstrap.servers": "x", "group.id": "g"}, admin_factory=FakeAdmin, backoff_s=0.3
    )
    assert committer.commit({T0: -1, T1: -1}) is False
    assert committer.commit({T0: 5, T1: -1}) is True
    assert committer.commit({T0: 5}) is False  # unchanged
    FakeAdmin.fail_next = True
    assert committer.commit({T0: 7}) is False and committer.failures == 1
    assert committer.commit({T0: 7}) is False  # backing off: no call
    time.sleep(0.35)
    assert committer.commit({T0: 7}) is True
    assert FakeAdmin.calls == [("g", {T0: 5}), ("g", {T0: 7})]


def test_topic_level_offsets_in_json() -> None:
    from spark_kafkalite.datasource.offsets import OffsetJsonError, parse_offsets_with_topic_defaults

    offsets, topics = parse_offsets_with_topic_defaults('{"a":"latest","b":{"1":5,"0":-2},"c":"EARLIEST"}')
    assert offsets == {TopicPartition("b", 1): 5, TopicPartition("b", 0): -2}
    assert topics == {"a": -1, "c": -2}
    with pytest.raises(OffsetJsonError, match="got"):
        parse_offsets_with_topic_defaults('{"a":"soon"}')
    with pytest.raises(KafkaLiteOptionError, match="ending offset for topic b can't be earliest"):
        parse_source_options({**BOOT, "subscribe": "b", "endingOffsets": '{"b":"earliest"}'}, streaming=False)
