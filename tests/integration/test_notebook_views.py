"""``LocalCluster._repr_html_`` (Jupyter's view) on the session broker: brokers, a topic's
partitions with their ISR, and a group's lag from offsets committed by confluent-kafka."""

from __future__ import annotations

from html.parser import HTMLParser

import confluent_kafka

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
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": unique_topic}
    )
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition(unique_topic, 0, 4)], asynchronous=False)
    finally:
        consumer.close()

    parser = _Tables()
    parser.feed(cluster._repr_html_())
    tables = parser.tables
    assert tables["Brokers"] == [
        ["1", cluster.bootstrap_servers, "running", "controller", cluster.metrics_urls[0]]
    ]
    assert [unique_topic, "0", "1", "[1]", "[1]", ""] in tables["Partitions"]
    assert not any(row[0].startswith("__") for row in tables["Partitions"])  # internal topics left out
    assert [unique_topic, "Empty", unique_topic, "0", "4", "10", "6"] in tables["Consumer groups"]
