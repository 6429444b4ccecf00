"""KIP-320 position validation and disconnect handling of our consumer against a real broker
running in-process (so the test can bump a partition's leader epoch through the broker's own
metadata commit path and truncate its log, i.e. an unclean leader change on one node), and a TCP
proxy that cuts connections."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from inprocess_broker import InProcessBroker

from broker.controller.metadata_image import PartitionRecord
from spark_kafkalite.client.consumer.kafka_consumer import KafkaConsumer
from spark_kafkalite.client.consumer.offset_fetcher import LogTruncationError
from spark_kafkalite.client.types import TopicPartition

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    b = InProcessBroker(Path(tmp_path_factory.mktemp("validation"))).start()
    try:
        yield b
    finally:
        b.stop()


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value=value, partition=0)
        assert producer.flush(15) == 0  # one batch per record: truncation can cut anywhere


def consume(consumer: KafkaConsumer, count: int, timeout_s: float = 20) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(200).values():
            got.extend((r.offset, r.value) for r in records)
    return got


def leader_change(broker: InProcessBroker, topic: str, truncate_to: int | None = None) -> int:
    """Bump the leader epoch of ``topic``-0 through a committed metadata record (same leader),
    truncating the log first if asked (what an unclean election does to the log). Returns the
    new leader epoch."""

    def run() -> int:
        server = broker.server
        image = server.ctx.image
        registration = image.partition(topic, 0)
        if truncate_to is not None:
            server.ctx.log_manager.get_log(topic, 0).truncate_to(truncate_to)
        new_epoch = registration.leader_epoch + 1
        server.metadata_publisher.commit(
            [
                PartitionRecord(
                    image.topics[topic].topic_id,
                    0,
                    registration.replicas,
                    registration.isr,
                    registration.leader,
                    new_epoch,
                    registration.partition_epoch + 1,
                )
            ]
        )
        return new_epoch

    return broker.call(run)


def new_topic(broker: InProcessBroker, count: int) -> str:
    topic = "val-" + uuid.uuid4().hex[:8]
    produce(broker.bootstrap_servers, topic, [f"old-{i}".encode() for i in range(count)])
    return topic


def make_consumer(broker: InProcessBroker, policy: str) -> KafkaConsumer:
    return KafkaConsumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "auto.offset.reset": "earliest",
            "fetch.max.wait.ms": 100,
            "retry.backoff.ms": 50,
            **({"auto.offset.reset": policy}),
        }
    )


def test_leader_change_without_truncation_keeps_the_position(broker: InProcessBroker) -> None:
    topic = new_topic(broker, 10)
    tp = TopicPartition(topic, 0)
    with make_consumer(broker, "earliest") as consumer:
        consumer.assign([tp])
        assert [o for o, _ in consume(consumer, 10)] == list(range(10))
        state = consumer._subscriptions.state(tp)
        assert state.offset_epoch is not None and state.offset_epoch >= 0
        new_epoch = leader_change(broker, topic)
        produce(broker.bootstrap_servers, topic, [b"after-0", b"after-1"])
        assert consume(consumer, 2) == [(10, b"after-0"), (11, b"after-1")]
        assert state.current_leader_epoch == new_epoch and not state.awaiting_validation


@pytest.mark.parametrize("policy", ["earliest", "latest"])
def test_truncation_below_the_position_moves_it_back(broker: InProcessBroker, policy: str) -> None:
    topic = new_topic(broker, 20)
    tp = TopicPartition(topic, 0)
    with make_consumer(broker, policy) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        assert [o for o, _ in consume(consumer, 20)] == list(range(20))
        assert consumer.position(tp) == 20
        leader_change(broker, topic, truncate_to=12)
        produce(broker.bootstrap_servers, topic, [b"new-0", b"new-1", b"new-2"])
        # the position moves back to the end of our epoch on the new leader: offset 12
        assert consume(consumer, 3) == [(12, b"new-0"), (13, b"new-1"), (14, b"new-2")]


def test_truncation_with_reset_none_raises(broker: InProcessBroker) -> None:
    topic = new_topic(broker, 20)
    tp = TopicPartition(topic, 0)
    with make_consumer(broker, "none") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        assert [o for o, _ in consume(consumer, 20)] == list(range(20))
        leader_change(broker, topic, truncate_to=15)
        with pytest.raises(LogTruncationError) as info:
            consume(consumer, 1, timeout_s=15)
        assert info.value.partitions == {tp: 20}
        assert info.value.divergent_offsets == {tp: 15}
        consumer.seek(tp, 15)  # the application decides; fetching resumes from there
        produce(broker.bootstrap_servers, topic, [b"x"])
        assert consume(consumer, 1) == [(15, b"x")]


# -- disconnects ----------------------------------------------------------------------------------
class CuttingProxy:
    """Forwards 127.0.0.1:port to a target; ``cut()`` closes every current connection."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self.target: tuple[str, int] | None = None
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            assert self.target is not None
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._socks += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self._closed = True
        self._server.close()
        self.cut()


def test_disconnects_are_retried_without_loss_or_duplicates(tmp_path: Path) -> None:
    proxy = CuttingProxy()
    broker = InProcessBroker(tmp_path, {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    broker.start()
    host, port = broker.server.bound["PLAINTEXT"]
    proxy.target = (host, port)
    direct = f"{host}:{port}"
    topic = "cut-" + uuid.uuid4().hex[:8]
    try:
        produce(direct, topic, [b"warmup"])
        expected = [b"warmup"] + [f"r{i}".encode() for i in range(60)]
        consumer = KafkaConsumer(
            {
                "bootstrap.servers": f"127.0.0.1:{proxy.port}",
                "auto.offset.reset": "earliest",
                "fetch.max.wait.ms": 200,
                "max.poll.records": 7,
                "reconnect.backoff.ms": 20,
                "retry.backoff.ms": 20,
            }
        )
        got: list[tuple[int, bytes]] = []
        with consumer:
            consumer.assign([TopicPartition(topic, 0)])
            for round_ in range(6):
                produce(direct, topic, expected[1 + round_ * 10 : 1 + (round_ + 1) * 10])
                got += consume(consumer, 1 + (round_ + 1) * 10 - len(got), timeout_s=20)
                proxy.cut()
        assert [o for o, _ in got] == list(range(len(expected)))
        assert [v for _, v in got] == expected
    finally:
        broker.stop()
        proxy.close()


def test_seek_with_leader_epoch_is_validated_first(broker: InProcessBroker) -> None:
    """A position restored with its epoch (e.g. a committed offset) is checked before fetching."""
    topic = new_topic(broker, 20)
    tp = TopicPartition(topic, 0)
    old_epoch = broker.call(lambda: broker.server.ctx.image.partition(topic, 0).leader_epoch)
    leader_change(broker, topic, truncate_to=12)
    produce(broker.bootstrap_servers, topic, [b"new-0"])
    with make_consumer(broker, "earliest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 18, leader_epoch=old_epoch)
        assert consumer.position(tp) == 12  # truncated to the end of the old epoch
        assert consume(consumer, 1) == [(12, b"new-0")]
        consumer.seek(tp, 13, leader_epoch=old_epoch + 1)  # valid: nothing to truncate
        assert consumer.position(tp) == 13
