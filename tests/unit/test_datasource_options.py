"""Option parsing and validation of the kafkalite data source (pure logic, Spark's rules)."""

from __future__ import annotations

import pytest

from spark_kafkalite.client.types import TopicPartition as TP
from spark_kafkalite.datasource.options import (
    AssignStrategy,
    KafkaLiteOptionError,
    SubscribePatternStrategy,
    SubscribeStrategy,
    client_params,
    parse_sink_options,
    parse_source_options,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def src(streaming: bool = False, **extra: str):
    return parse_source_options({**BASE, **extra}, streaming=streaming)


def test_subscribe_splits_and_trims_topics() -> None:
    opts = src(subscribe=" a, b ,,c ")
    assert opts.strategy == SubscribeStrategy(("a", "b", "c"))
    assert opts.client_config == {"bootstrap.servers": "127.0.0.1:9092"}
    assert opts.starting.kind == "earliest" and opts.ending is not None and opts.ending.kind == "latest"
    assert opts.fail_on_data_loss is True and opts.include_headers is False


def test_keys_are_case_insensitive() -> None:
    opts = parse_source_options(
        {"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SubScribe": "t", "StartingOffsets": "EARLIEST"}, streaming=True
    )
    assert opts.strategy == SubscribeStrategy(("t",))
    assert opts.starting.kind == "earliest"


def test_assign_and_pattern() -> None:
    opts = src(assign='{"t":[1,0],"u":[3]}')
    assert opts.strategy == AssignStrategy((TP("t", 1), TP("t", 0), TP("u", 3)))
    pattern = src(subscribePattern="fl.*").strategy
    assert isinstance(pattern, SubscribePatternStrategy)
    assert pattern.matches("flights") and not pattern.matches("xflights")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({}, "One of the following options must be specified for Kafka source"),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, "Only one of the following options can be specified"),
        ({"subscribe": " , "}, "No topics to subscribe to as specified value for option 'subscribe'"),
        ({"assign": "a:0"}, "No topicpartitions to assign as specified value for option 'assign'"),
        ({"assign": '{"a":0}'}, "option 'assign'"),
        ({"subscribePattern": " "}, "Pattern to subscribe is empty"),
        ({"subscribePattern": "(["}, "option 'subscribePattern'"),
        ({"subscribe": "a", "minPartitions": "0"}, "minPartitions must be positive"),
        ({"subscribe": "a", "maxRecordsPerPartition": "x"}, "option 'maxRecordsPerPartition'"),
        ({"subscribe": "a", "failOnDataLoss": "maybe"}, "option 'failOnDataLoss'"),
        ({"subscribe": "a", "includeHeaders": "1"}, "option 'includeHeaders'"),
        (
            {"subscribe": "a", "kafka.auto.offset.reset": "latest"},
            "Kafka option 'auto.offset.reset' is not supported",
        ),
        (
            {"subscribe": "a", "kafka.key.deserializer": "x"},
            "Kafka option 'key.deserializer' is not supported",
        ),
        (
            {"subscribe": "a", "kafka.value.deserializer": "x"},
            "Kafka option 'value.deserializer' is not supported",
        ),
        (
            {"subscribe": "a", "kafka.enable.auto.commit": "true"},
            "Kafka option 'enable.auto.commit' is not supported",
        ),
        (
            {"subscribe": "a", "startingOffsets": "latest"},
            "starting offset can't be latest for batch queries",
        ),
        ({"subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'}, "startingOffsets for a-0 can't be latest"),
        (
            {"subscribe": "a", "endingOffsets": "earliest"},
            "ending offset can't be earliest for batch queries",
        ),
        ({"subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, "ending offset for a-0 can't be earliest"),
        (
            {"subscribe": "a", "startingOffsets": "{bad"},
            'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}',
        ),
        ({"subscribe": "a", "startingOffsets": '{"a":{"0":-3}}'}, "option 'startingOffsets'"),
        (
            {"subscribe": "a", "startingOffsets": '{"a":{"0":1}}', "endingOffsets": '{"a":{"1":5}}'},
            "MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET",
        ),
        (
            {"subscribe": "a", "startingOffsets": '{"a":{"0":9}}', "endingOffsets": '{"a":{"0":5}}'},
            "UNRESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET",
        ),
        ({"subscribe": "a", "startingTimestamp": "soon"}, "Expected a single long value, got soon"),
    ],
)
def test_batch_validation_errors(extra: dict[str, str], message: str) -> None:
    with pytest.raises(
        KafkaLiteOptionError, match=message.replace("(", r"\(").replace("{", r"\{").replace("[", r"\[")
    ):
        src(**extra)


def test_bootstrap_servers_required() -> None:
    with pytest.raises(KafkaLiteOptionError, match="Option 'kafka.bootstrap.servers' must be specified"):
        parse_source_options({"subscribe": "a"}, streaming=False)
    with pytest.raises(KafkaLiteOptionError, match="configuring Kafka producer"):
        parse_sink_options({"topic": "a"})


def test_streaming_defaults_and_rules() -> None:
    opts = src(streaming=True, subscribe="a", maxOffsetsPerTrigger="100")
    assert opts.starting.kind == "latest" and opts.ending is None
    assert opts.max_offsets_per_trigger == 100
    with pytest.raises(KafkaLiteOptionError, match="ending offset not valid in streaming queries"):
        src(streaming=True, subscribe="a", endingOffsets="latest")
    with pytest.raises(KafkaLiteOptionError, match="maxOffsetsPerTrigger"):
        src(streaming=True, subscribe="a", maxOffsetsPerTrigger="-5")
    with pytest.raises(KafkaLiteOptionError, match=r"minOffsetPerTrigger\(10\) is higher"):
        src(streaming=True, subscribe="a", maxOffsetsPerTrigger="5", minOffsetsPerTrigger="10")


def test_batch_ignores_max_offsets_per_trigger() -> None:
    assert src(subscribe="a", maxOffsetsPerTrigger="5").max_offsets_per_trigger is None


def test_specific_offsets_and_timestamps() -> None:
    opts = src(subscribe="a", startingOffsets='{"a":{"1":5,"0":-2}}', endingOffsets='{"a":{"0":-1,"1":9}}')
    assert opts.starting.offsets == {TP("a", 0): -2, TP("a", 1): 5}
    assert opts.ending is not None and opts.ending.offsets == {TP("a", 0): -1, TP("a", 1): 9}
    ts = src(subscribe="a", startingTimestamp="1000", startingOffsets="earliest")
    assert ts.starting.kind == "global_timestamp" and ts.starting.timestamp == 1000
    by_ts = src(
        streaming=True,
        subscribe="a",
        startingOffsetsByTimestamp='{"a":{"0":7}}',
        startingOffsetsByTimestampStrategy="latest",
    )
    assert by_ts.starting.kind == "timestamp" and by_ts.starting.no_match_latest
    assert by_ts.starting.timestamps == {TP("a", 0): 7}


def test_kafka_params_are_stripped() -> None:
    opts = src(subscribe="a", **{"kafka.request.timeout.ms": "5000", "kafkaConsumer.pollTimeoutMs": "700"})
    assert opts.client_config == {"bootstrap.servers": "127.0.0.1:9092", "request.timeout.ms": "5000"}
    assert opts.poll_timeout_ms == 700
    assert client_params({"kafka.acks": "all", "topic": "x"}) == {"acks": "all"}


def test_sink_options() -> None:
    sink = parse_sink_options({**BASE, "topic": " out ", "kafka.acks": "1"})
    assert sink.topic == "out" and sink.client_config["acks"] == "1"
    assert parse_sink_options(BASE).topic is None
    with pytest.raises(KafkaLiteOptionError, match="key.serializer"):
        parse_sink_options({**BASE, "kafka.key.serializer": "x"})
    with pytest.raises(KafkaLiteOptionError, match="value.serializer"):
        parse_sink_options({**BASE, "kafka.value.serializer": "x"})
