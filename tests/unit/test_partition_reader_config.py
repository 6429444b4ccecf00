"""ReadConfig.consumer_config: the executor consumer's settings (Spark's kafkaParamsForExecutors
plus our fetch-size default)."""

from __future__ import annotations

from spark_kafkalite.datasource.partition_reader import ReadConfig


def test_executor_consumer_fetches_8_mib_per_partition_by_default() -> None:
    config = ReadConfig({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}, batch_rows=7).consumer_config()
    assert config["max.partition.fetch.bytes"] == str(8 * 1024 * 1024)
    assert config["max.poll.records"] == "7"
    assert config["auto.offset.reset"] == "none" and config["enable.auto.commit"] == "false"
    assert "group.id" not in config


def test_kafka_options_override_the_fetch_size() -> None:
    config = ReadConfig(
        {"bootstrap.servers": "127.0.0.1:1", "max.partition.fetch.bytes": "1048576"}
    ).consumer_config()
    assert config["max.partition.fetch.bytes"] == "1048576"
