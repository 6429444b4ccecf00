"""Transactions (KIP-98) between our client and confluent-kafka (librdkafka) over our broker:

* confluent-kafka's transactional producer writes committed, aborted and committed transactions:
  our ``read_committed`` consumer returns exactly the committed records, ``read_uncommitted``
  all data records, neither a control record, and both end at the log end;
* our transactional producer (commit, abort, an empty transaction, records still unsent at the
  abort): a confluent-kafka ``read_committed`` consumer sees exactly what Kafka would;
  ``send_offsets_to_transaction``: the group's committed offset (read by confluent-kafka) is the
  one of the last committed transaction, never one of an aborted transaction;
* two of our producers with one ``transactional.id``: the older is fenced
  (``ProducerFencedError``) and none of its records becomes visible;
* a send paused after its check while another thread commits raises ``IllegalStateError``
  instead of appending its record outside the transaction; the LSO reaches the log end.
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from peers import ck_create_topic

from spark_kafkalite.client import KafkaConsumer, KafkaProducer, TopicPartition
from spark_kafkalite.client.errors import IllegalStateError, TransactionAbortedError
from spark_kafkalite.protocol.errors import InvalidProducerEpochError, KafkaError, ProducerFencedError

pytestmark = pytest.mark.timeout(90)

PARTITIONS = 2


def _ck_read(bootstrap: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    consumer.assign([CkTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    idle_since = None
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                if len(got) >= expected:
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since > 1.0:  # nothing more comes after the expected
                        break
                continue
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    finally:
        consumer.close()
    return got


def _our_read(bootstrap: str, topic: str, isolation: str) -> tuple[dict[int, list[bytes]], dict[int, int]]:
    """Everything up to the end offsets (the LSO under read_committed) per partition, and the
    position reached."""
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with KafkaConsumer({"bootstrap.servers": bootstrap, "isolation.level": isolation}) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 20
        while any(consumer.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=200).items():
                out[tp.partition].extend(r.value for r in records)
        return out, {tp.partition: consumer.position(tp) for tp in tps}


def _ck_transactional_producer(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5}
    )
    producer.init_transactions(20)
    return producer


def test_confluent_transactions_read_committed_by_our_consumer(
    bootstrap_servers: str, unique_topic: str
) -> None:
    ck_create_topic(bootstrap_servers, unique_topic, PARTITIONS)
    producer = _ck_transactional_producer(bootstrap_servers, f"ck-{unique_topic}")
    plan = [("c1", 10, True), ("a1", 6, False), ("c2", 4, True), ("a2", 3, False), ("c3", 5, True)]
    expected: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    all_data: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for name, count, commit in plan:
        producer.begin_transaction()
        for i in range(count):
            value = f"{name}-{i}".encode()
            producer.produce(unique_topic, value, partition=i % PARTITIONS)
            all_data[i % PARTITIONS].append(value)
            if commit:
                expected[i % PARTITIONS].append(value)
        producer.flush(10)  # aborted records are on the log, not only dropped from the buffer
        if commit:
            producer.commit_transaction(20)
        else:
            producer.abort_transaction(20)
    committed, committed_end = _our_read(bootstrap_servers, unique_topic, "read_committed")
    assert committed == expected
    uncommitted, uncommitted_end = _our_read(bootstrap_servers, unique_topic, "read_uncommitted")
    assert uncommitted == all_data  # aborted data too, but no control record
    # every transaction left one marker per partition: the position passed the last one
    for p in range(PARTITIONS):
        assert committed_end[p] == uncommitted_end[p] == len(all_data[p]) + len(plan)
    # an open transaction: read_committed stops at its first offset (the LSO)
    producer.begin_transaction()
    producer.produce(unique_topic, b"open", partition=0)
    producer.flush(10)
    tp0 = TopicPartition(unique_topic, 0)
    ends = {}
    for isolation in ("read_committed", "read_uncommitted"):
        with KafkaConsumer(
            {"bootstrap.servers": bootstrap_servers, "isolation.level": isolation}
        ) as consumer:
            ends[isolation] = consumer.end_offsets([tp0])[tp0]
    # ListOffsets latest: the LSO (the open transaction's first offset) vs the high watermark
    assert ends == {"read_committed": committed_end[0], "read_uncommitted": committed_end[0] + 1}
    still, _ = _our_read(bootstrap_servers, unique_topic, "read_committed")
    assert still == expected
    producer.commit_transaction(20)
    after, _ = _our_read(bootstrap_servers, unique_topic, "read_committed")
    assert after[0] == [*expected[0], b"open"]


def test_our_transactions_read_committed_by_confluent(bootstrap_servers: str, unique_topic: str) -> None:
    ck_create_topic(bootstrap_servers, unique_topic, PARTITIONS)
    expected: list[bytes] = []
    # linger.ms: a record sent just before abort_transaction is still unsent then (no race)
    config = {
        "bootstrap.servers": bootstrap_servers,
        "transactional.id": f"ours-{unique_topic}",
        "linger.ms": 10000,
    }
    with KafkaProducer(config) as producer:
        producer.init_transactions(20)
        for n, commit in enumerate([True, False, True]):
            producer.begin_transaction()
            values = [f"t{n}-{i}".encode() for i in range(7)]
            futures = [producer.send(unique_topic, v, partition=i % PARTITIONS) for i, v in enumerate(values)]
            producer.flush(10)
            assert all(f.result(10).offset >= 0 for f in futures)
            if commit:
                producer.commit_transaction(20)
                expected.extend(values)
            else:
                producer.abort_transaction(20)
        producer.begin_transaction()  # an empty transaction: no EndTxn on the wire, READY again
        producer.commit_transaction(20)
        producer.begin_transaction()  # records not yet sent when aborting fail, never written
        unsent = producer.send(unique_topic, b"never", partition=0)
        producer.abort_transaction(20)
        with pytest.raises(TransactionAbortedError):
            unsent.result(10)
    got = _ck_read(bootstrap_servers, unique_topic, "read_committed", len(expected))
    assert sorted(got) == sorted(expected)
    assert len(_ck_read(bootstrap_servers, unique_topic, "read_uncommitted", 21)) == 21


def test_send_offsets_to_transaction_commits_offsets_with_the_transaction(
    bootstrap_servers: str, unique_topic: str
) -> None:
    ck_create_topic(bootstrap_servers, unique_topic, PARTITIONS)
    group = f"g-{unique_topic}"
    source = TopicPartition(unique_topic, 1)
    config = {"bootstrap.servers": bootstrap_servers, "transactional.id": f"offsets-{unique_topic}"}
    with KafkaProducer(config) as producer:
        producer.init_transactions(20)
        for offset, commit in ((100, True), (200, False), (300, True), (400, False)):
            producer.begin_transaction()
            producer.send(unique_topic, b"v", partition=0)
            producer.send_offsets_to_transaction({source: offset}, group)
            if commit:
                producer.commit_transaction(20)
            else:
                producer.abort_transaction(20)
    # only the committed transactions' offsets become the group's (the last is 300)
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": group})
    try:
        [committed] = consumer.committed([CkTopicPartition(source.topic, source.partition)], timeout=10)
        assert committed.offset == 300
    finally:
        consumer.close()


def test_zombie_producer_is_fenced_and_its_records_stay_invisible(
    bootstrap_servers: str, unique_topic: str
) -> None:
    ck_create_topic(bootstrap_servers, unique_topic, PARTITIONS)
    tid = f"zombie-{unique_topic}"
    config = {"bootstrap.servers": bootstrap_servers, "transactional.id": tid}
    old = KafkaProducer(config)
    new = KafkaProducer(config)
    try:
        old.init_transactions(20)
        old.begin_transaction()
        old.send(unique_topic, b"zombie", partition=0).result(10)
        new.init_transactions(20)  # fences `old` and aborts its open transaction
        new.begin_transaction()
        new.send(unique_topic, b"live", partition=1)
        new.commit_transaction(20)
        # Produce with the old epoch: INVALID_PRODUCER_EPOCH, abortable (KIP-588) ...
        with pytest.raises(InvalidProducerEpochError):
            old.send(unique_topic, b"zombie-2", partition=0).result(10)
        with pytest.raises(KafkaError, match="error state"):
            old.commit_transaction(20)
        # ... and the abort's EndTxn finds the producer fenced: fatal from then on
        with pytest.raises(ProducerFencedError):
            old.abort_transaction(20)
        with pytest.raises(ProducerFencedError):
            old.begin_transaction()
    finally:
        old.close(5)
        new.close(5)
    got, _ = _our_read(bootstrap_servers, unique_topic, "read_committed")
    assert got == {0: [], 1: [b"live"]}
    assert _ck_read(bootstrap_servers, unique_topic, "read_committed", 1) == [b"live"]


def test_a_send_paused_across_commit_transaction_raises(bootstrap_servers: str, unique_topic: str) -> None:
    """Issue #12 review: a send in one thread that passed its transaction check, then paused
    while another thread committed, appended its record afterwards: a batch outside any
    transaction the coordinator knows (drained after EndTxn it lands past the COMMIT marker; here
    it stayed queued, never acknowledged). Now that send raises ``IllegalStateError`` (Java's
    ``IllegalStateException``), and the committed records are exactly what confluent-kafka's
    ``read_committed`` consumer reads, with the LSO at the log end. The pause is injected after
    the check (the race made deterministic)."""
    ck_create_topic(bootstrap_servers, unique_topic, PARTITIONS)
    config = {"bootstrap.servers": bootstrap_servers, "transactional.id": f"race-{unique_topic}"}
    checked, committed = threading.Event(), threading.Event()
    outcome: list[BaseException | Future[Any]] = []
    with KafkaProducer(config) as producer:
        producer.init_transactions(20)
        tm = producer._transaction_manager
        assert tm is not None
        check = tm.fail_if_not_ready_for_send

        def check_then_pause() -> None:
            check()
            if threading.current_thread().name == "late-sender":
                checked.set()
                assert committed.wait(20)

        tm.fail_if_not_ready_for_send = check_then_pause  # type: ignore[method-assign]

        def late_send() -> None:
            try:
                outcome.append(producer.send(unique_topic, b"late", partition=0))
            except IllegalStateError as exc:
                outcome.append(exc)

        producer.begin_transaction()
        values = [f"v{i}".encode() for i in range(6)]
        futures = [producer.send(unique_topic, v, partition=i % PARTITIONS) for i, v in enumerate(values)]
        thread = threading.Thread(target=late_send, name="late-sender")
        thread.start()
        assert checked.wait(20)
        producer.commit_transaction(20)
        committed.set()
        thread.join(20)
        assert all(f.result(0).offset >= 0 for f in futures)
        [late] = outcome
        assert isinstance(late, IllegalStateError), late
    assert sorted(_ck_read(bootstrap_servers, unique_topic, "read_committed", len(values))) == sorted(values)
    tps = [TopicPartition(unique_topic, p) for p in range(PARTITIONS)]
    ends = {}
    for isolation in ("read_committed", "read_uncommitted"):
        with KafkaConsumer(
            {"bootstrap.servers": bootstrap_servers, "isolation.level": isolation}
        ) as consumer:
            ends[isolation] = consumer.end_offsets(tps)
    assert ends["read_committed"] == ends["read_uncommitted"]  # no transaction left open
