"""Spark test setup: one shared SparkSession (pytest-spark's ``spark_session``, configured in
pyproject.toml: local[2], in-memory catalog, UTC) and the session broker (``cluster`` /
``bootstrap_servers`` from tests/conftest.py).

Before the session starts: Python workers must run this interpreter (``PYSPARK_PYTHON``), and the
directory holding ``pyspark_kafkalite.py`` must be on the workers' ``PYTHONPATH``: Spark finds
``pyspark_*`` modules with ``pkgutil.iter_modules()``, which does not see modules served by an
editable install's import hook (a regular ``pip install`` puts the module in site-packages).
"""

from __future__ import annotations

import os
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from spark_kafkalite.client import KafkaAdminClient, KafkaConsumer, KafkaProducer, NewTopic, TopicPartition
from spark_kafkalite.demo.session import expose_auto_registration_module

os.environ["PYSPARK_PYTHON"] = sys.executable
# A regular install (what `.ci/run` does) is discovered by Spark itself; only an editable install
# needs the module's directory on the workers' PYTHONPATH.
expose_auto_registration_module()
warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")


def pytest_configure(config: pytest.Config) -> None:
    # pyspark 4.3 warns that pandas >= 3 is not fully supported; the data source does not use pandas
    config.addinivalue_line(
        "filterwarnings", "ignore:PySpark does not yet fully support pandas:FutureWarning"
    )


@pytest.fixture(scope="session")
def spark(spark_session: Any) -> Any:
    """The shared SparkSession, quiet."""
    spark_session.sparkContext.setLogLevel("ERROR")
    return spark_session


@pytest.fixture
def make_topic(bootstrap_servers: str) -> Iterator[Callable[..., str]]:
    """``make_topic(partitions=1) -> name``: creates a uniquely named topic on the session broker."""
    admin = KafkaAdminClient({"bootstrap.servers": bootstrap_servers})

    def create(partitions: int = 1, prefix: str = "spark") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        admin.create_topics([NewTopic(name, partitions, 1)])
        return name

    try:
        yield create
    finally:
        admin.close()


@pytest.fixture
def produce(bootstrap_servers: str) -> Iterator[Callable[..., list[Any]]]:
    """``produce(topic, records)``: send ``(partition, key, value)`` tuples (or dicts of
    ``send`` arguments) and return their ``RecordMetadata`` in order."""
    producer = KafkaProducer({"bootstrap.servers": bootstrap_servers, "linger.ms": 0})

    def send(topic: str, records: list[Any]) -> list[Any]:
        futures = []
        for record in records:
            if isinstance(record, dict):
                futures.append(producer.send(topic, **record))
            else:
                partition, key, value = record
                futures.append(producer.send(topic, value=value, key=key, partition=partition))
        producer.flush()
        return [f.result(timeout=30) for f in futures]

    try:
        yield send
    finally:
        producer.close()


@pytest.fixture
def consume_all(bootstrap_servers: str) -> Callable[[str], list[Any]]:
    """``consume_all(topic) -> [ConsumerRecord]`` of every partition, from the log start to the
    high watermark, ordered by (partition, offset)."""

    def read(topic: str) -> list[Any]:
        consumer = KafkaConsumer({"bootstrap.servers": bootstrap_servers, "max.poll.records": 10_000})
        try:
            tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
            ends = consumer.end_offsets(tps)
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            records: list[Any] = []
            remaining = sum(ends.values()) - sum(consumer.beginning_offsets(tps).values())
            deadline = time.monotonic() + 30
            while remaining > 0 and time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=1000).values():
                    records.extend(batch)
                    remaining -= len(batch)
            return sorted(records, key=lambda r: (r.partition, r.offset))
        finally:
            consumer.close()

    return read
