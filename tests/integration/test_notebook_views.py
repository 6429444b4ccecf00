"""Jupyter's views on the session broker: ``LocalCluster._repr_html_`` (brokers, a topic's
partitions with their ISR, a group's lag from offsets committed by confluent-kafka) and the
admin client's results (``describe_topics``, ``describe_consumer_groups`` with a live
confluent-kafka member, ``consumer_group_lag``)."""

from __future__ import annotations

import time
from html.parser import HTMLParser

import confluent_kafka

from spark_kafkalite.client import KafkaAdminClient
from spark_kafkalite.local_cluster import LocalCluster


class _Tables(HTMLParser):
    """Captions -> rows of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._caption: str | None = None
        self._in: str | None = None
        self._row: list[str] | None = None

    def handle_starttag(self, tag: str, _attrs: object) -> None:
        if tag in ("caption", "td"):
            self._in = tag
            if tag == "td" and self._row is not None:
                self._row.append("")
        elif tag == "tr":
            self._row = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("caption", "td"):
            self._in = None
        elif tag == "tr" and self._row and self._caption is not None:
            self.tables[self._caption].append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._in == "caption":
            self._caption = data
            self.tables[data] = []
        elif self._in == "td" and self._row is not None:
            self._row[-1] += data


def test_cluster_renders_brokers_partitions_and_group_lag(cluster: LocalCluster, unique_topic: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(10):
        producer.produce(unique_topic, b"%d" % i)
    assert producer.flush(15) == 0
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": unique_topic,
            "client.id": "notebook-reader",
            "enable.auto.commit": False,
        }
    )
    admin = KafkaAdminClient(cluster.client_config())
    try:
        consumer.subscribe([unique_topic])
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment()
        consumer.commit(offsets=[confluent_kafka.TopicPartition(unique_topic, 0, 4)], asynchronous=False)
        group_html = admin.describe_consumer_groups([unique_topic])._repr_html_()
    finally:
        consumer.close()
    try:
        topics_html = admin.describe_topics([unique_topic])._repr_html_()
        lag = admin.consumer_group_lag(unique_topic)
        lag_html = lag._repr_html_()
    finally:
        admin.close()

    parser = _Tables()
    parser.feed(cluster._repr_html_())
    tables = parser.tables
    assert tables["Brokers"] == [
        ["1", cluster.bootstrap_servers, "running", "controller", cluster.metrics_urls[0]]
    ]
    assert [unique_topic, "0", "1", "[1]", "[1]", ""] in tables["Partitions"]
    assert not any(row[0].startswith("__") for row in tables["Partitions"])  # internal topics left out
    assert [unique_topic, "Empty", unique_topic, "0", "4", "10", "6"] in tables["Consumer groups"]

    parser = _Tables()
    parser.feed(topics_html)
    assert parser.tables["Topics"] == [[unique_topic, "0", "1", "0", "[1]", "[1]", ""]]

    parser = _Tables()
    parser.feed(group_html)
    (group_row,) = parser.tables[f"Group {unique_topic}"]
    assert group_row[0] == "Stable" and group_row[3].startswith("1 (127.0.0.1:") and group_row[-1] == "1"
    (member,) = parser.tables[f"Members of {unique_topic}"]
    assert member[0] and member[2] == "notebook-reader" and member[4] == f"{unique_topic}-0"

    assert {tp.partition: (p.committed, p.log_end_offset, p.lag) for tp, p in lag.items()} == {0: (4, 10, 6)}
    parser = _Tables()
    parser.feed(lag_html)
    assert parser.tables[f"Lag of group {unique_topic}"] == [
        [unique_topic, "0", "4", "10", "6"],
        ["total", "", "", "", "6"],
    ]
