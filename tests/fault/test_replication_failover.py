"""Replication through failures on real broker processes (issue 3 tests 1, 2, 3, 5, 7).

Each test starts ``LocalCluster(brokers=3)`` (combined broker+controller nodes), creates an
RF=3 topic with ``min.insync.replicas=2`` and checks the invariants of kafka_internals §8:
no acknowledged record lost, each stored once in send order, HW never moving backwards within
a leader, divergent tails truncated to the leader's log.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from fault.replication_helpers import (
    AckLog,
    assert_acked_read_back_once_in_order,
    confluent_producer,
    consume_all,
    create_topic,
    start_cluster,
)

pytestmark = pytest.mark.timeout(120)


def _produce_with_confluent(
    cluster, topic: str, acks: AckLog, stop: threading.Event, sent: list[int], rate_per_s: int = 2000
) -> None:
    producer = confluent_producer(cluster)
    seq = 0

    def callback(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acks.on_ack(msg.value(), msg.partition(), msg.offset())
        else:
            acks.on_fail(msg.value(), str(err))

    interval = 1.0 / rate_per_s
    next_t = time.monotonic()
    while not stop.is_set():
        try:
            producer.produce(topic, value=b"seq-%08d" % seq, callback=callback)
            seq += 1
            sent[0] = seq
        except BufferError:
            pass
        producer.poll(0)
        next_t += interval
        delay = next_t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    producer.flush(60)


def _leader_files(cluster, topic: str, node_id: int) -> bytes:
    part_dir = cluster.log_dir(node_id) / f"{topic}-0"
    return b"".join(p.read_bytes() for p in sorted(part_dir.glob("*.log")))


def test_leader_kill_under_acks_all_load_loses_nothing(tmp_path: Path) -> None:
    """Test 1 + 7 (confluent-kafka): kill -9 the leader under continuous acks=all load."""
    cluster = start_cluster(tmp_path)
    try:
        topic = create_topic(cluster, partitions=2)
        leader = cluster.wait_for_leader(topic, 0)
        acks = AckLog()
        stop = threading.Event()
        sent = [0]
        thread = threading.Thread(
            target=_produce_with_confluent, args=(cluster, topic, acks, stop, sent), daemon=True
        )
        thread.start()
        deadline = time.monotonic() + 20
        while len(acks.acked) < 2000 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(acks.acked) >= 2000, (
            f"load did not start: {len(acks.acked)} acks, failures {acks.failed[:3]}"
        )
        killed_at = time.monotonic()
        cluster.kill(leader)
        sent_at_kill = sent[0]
        new_leader = cluster.wait_for_leader(topic, 0, not_in=[leader], timeout_s=30)
        before = len(acks.acked)
        deadline = time.monotonic() + 30
        while len(acks.acked) < before + 2000 and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        thread.join(90)
        after = [
            t
            for (v, p, _o), (t, _) in zip(acks.acked, acks.ack_times, strict=True)
            if p == 0 and int(v.split(b"-")[1]) >= sent_at_kill
        ]
        assert after, "nothing sent after the leader was killed was acknowledged"
        first_after = after[0]
        assert not acks.failed, f"{len(acks.failed)} records failed, e.g. {acks.failed[:3]}"
        assert new_leader != leader
        consumed = consume_all(cluster, topic, partitions=2)
        assert_acked_read_back_once_in_order(acks, consumed)
        print(f"failover: first ack {first_after - killed_at:.2f} s after kill -9 of leader {leader}")
    finally:
        cluster.stop()


def test_leader_kill_kafka_python_producer_carries_on(tmp_path: Path) -> None:
    """Test 7 (kafka-python): the producer sees the new leader and carries on."""
    from kafka import KafkaProducer

    cluster = start_cluster(tmp_path)
    try:
        topic = create_topic(cluster)
        leader = cluster.wait_for_leader(topic, 0)
        producer = KafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers,
            acks="all",
            retries=50,
            retry_backoff_ms=200,
            max_in_flight_requests_per_connection=1,
            request_timeout_ms=10000,
            metadata_max_age_ms=1000,
        )
        acks = AckLog()
        for i in range(300):
            md = producer.send(topic, b"seq-%08d" % i).get(timeout=30)
            acks.on_ack(b"seq-%08d" % i, md.partition, md.offset)
        cluster.kill(leader)
        killed_at = time.monotonic()
        for i in range(300, 600):
            md = producer.send(topic, b"seq-%08d" % i).get(timeout=60)
            acks.on_ack(b"seq-%08d" % i, md.partition, md.offset)
        producer.close(10)
        assert cluster.wait_for_leader(topic, 0, not_in=[leader]) != leader
        consumed = consume_all(cluster, topic)
        # kafka-python without idempotence may store a retried record twice; none may be lost.
        stored = {v for _, v in consumed[0]}
        assert all(v in stored for v, _, _ in acks.acked)
        print(f"kafka-python: {time.monotonic() - killed_at:.2f} s for 300 records after the kill")
    finally:
        cluster.stop()


def test_follower_kill_restart_catches_up_and_rejoins_isr(tmp_path: Path) -> None:
    """Test 2: kill -9 a follower, keep producing, restart it: it catches up (identical log)
    and rejoins the ISR."""
    cluster = start_cluster(tmp_path)
    try:
        topic = create_topic(cluster)
        leader = cluster.wait_for_leader(topic, 0)
        follower = next(n for n in (1, 2, 3) if n != leader)
        producer = confluent_producer(cluster)
        for i in range(500):
            producer.produce(topic, b"seq-%08d" % i)
        producer.flush(30)
        cluster.kill(follower)
        isr = cluster.wait_for_isr(topic, 0, 2, timeout_s=30)
        assert follower not in isr
        errors: list[str] = []
        for i in range(500, 3000):
            producer.produce(topic, b"seq-%08d" % i, on_delivery=lambda e, m: e and errors.append(str(e)))
            producer.poll(0)
        assert producer.flush(30) == 0 and not errors
        cluster.restart(follower)
        isr = cluster.wait_for_isr(topic, 0, 3, timeout_s=40)
        assert follower in isr
        consumed = consume_all(cluster, topic)
        assert [v for _, v in consumed[0]] == [b"seq-%08d" % i for i in range(3000)]
        cluster.stop()
        assert _leader_files(cluster, topic, follower) == _leader_files(cluster, topic, leader)
    finally:
        cluster.stop()


def test_divergent_follower_tail_is_truncated(tmp_path: Path) -> None:
    """Test 5: the old leader writes records no follower fetched (acks=1, followers paused),
    dies; the new leader writes in a newer epoch; the old leader restarts as a follower and
    truncates its divergent tail to the leader's log (DivergingEpoch / leader epoch cache)."""
    # The followers are paused ~2 s below: a session longer than that keeps them unfenced (and
    # in the ISR), so the divergent tail stays on the old leader alone.
    cluster = start_cluster(
        tmp_path, **{"replica.lag.time.max.ms": "60000", "broker.session.timeout.ms": "6000"}
    )
    try:
        topic = create_topic(cluster)
        old_leader = cluster.wait_for_leader(topic, 0)
        followers = [n for n in (1, 2, 3) if n != old_leader]
        producer = confluent_producer(cluster)
        for i in range(100):
            producer.produce(topic, b"seq-%08d" % i)
        assert producer.flush(30) == 0
        for n in followers:
            cluster.pause(n)
        time.sleep(1.0)  # fetches parked on the leader (replica.fetch.wait.max.ms) answer empty first
        direct = confluent_producer(
            cluster,
            **{
                "acks": 1,
                "enable.idempotence": False,
                "bootstrap.servers": cluster.broker_address(old_leader),
            },
        )
        for i in range(100, 150):
            direct.produce(topic, b"divergent-%08d" % i)
        assert direct.flush(10) == 0  # acks=1: stored on the old leader only
        time.sleep(0.5)
        cluster.kill(old_leader)
        for n in followers:
            cluster.resume(n)
        new_leader = cluster.wait_for_leader(topic, 0, not_in=[old_leader], timeout_s=40)
        for i in range(1000, 1100):
            producer.produce(topic, b"seq-%08d" % i)
        assert producer.flush(40) == 0
        cluster.restart(old_leader)
        cluster.wait_for_isr(topic, 0, 3, timeout_s=40)
        consumed = consume_all(cluster, topic)
        values = [v for _, v in consumed[0]]
        assert values == [b"seq-%08d" % i for i in (*range(100), *range(1000, 1100))]
        cluster.stop()
        old_files = _leader_files(cluster, topic, old_leader)
        assert b"divergent-" not in old_files
        assert old_files == _leader_files(cluster, topic, new_leader)
        epochs = (
            (cluster.log_dir(old_leader) / f"{topic}-0" / "leader-epoch-checkpoint").read_text().split("\n")
        )
        assert epochs[0] == "0" and int(epochs[1]) >= 2  # epoch 0 then the new leader's epoch
    finally:
        cluster.stop()


def test_two_of_three_brokers_down_acknowledges_nothing_unstored(tmp_path: Path) -> None:
    """Test 3: with min.insync.replicas=2, an acks=all produce with only the leader left is
    refused (NOT_ENOUGH_REPLICAS once the ISR shrank; REQUEST_TIMED_OUT while the ISR change
    cannot be committed because the controller quorum lost its majority), and no acknowledged
    record is missing afterwards."""
    cluster = start_cluster(tmp_path)
    try:
        topic = create_topic(cluster)
        leader = cluster.wait_for_leader(topic, 0)
        followers = [n for n in (1, 2, 3) if n != leader]
        producer = confluent_producer(
            cluster,
            **{
                "message.timeout.ms": 8000,
                "enable.idempotence": False,
                "retries": 0,
                "request.timeout.ms": 4000,
            },
        )
        acks = AckLog()

        def cb(err, msg) -> None:  # type: ignore[no-untyped-def]
            if err is None:
                acks.on_ack(msg.value(), msg.partition(), msg.offset())
            else:
                acks.on_fail(msg.value(), err.name())

        for i in range(100):
            producer.produce(topic, b"seq-%08d" % i, on_delivery=cb)
        producer.flush(30)
        cluster.kill(followers[0])
        cluster.wait_for_isr(topic, 0, 2, timeout_s=30)
        cluster.kill(followers[1])
        time.sleep(1.0)
        for i in range(100, 110):
            producer.produce(topic, b"seq-%08d" % i, on_delivery=cb)
        producer.flush(30)
        failed = {v for v, _ in acks.failed}
        assert failed == {b"seq-%08d" % i for i in range(100, 110)}, acks.failed
        assert {e for _, e in acks.failed} <= {"NOT_ENOUGH_REPLICAS", "REQUEST_TIMED_OUT", "_MSG_TIMED_OUT"}
        cluster.restart(followers[0])
        cluster.restart(followers[1])
        cluster.wait_for_isr(topic, 0, 3, timeout_s=40)
        consumed = consume_all(cluster, topic)
        stored = {v for _, v in consumed[0]}
        assert all(v in stored for v, _, _ in acks.acked)
        assert len(acks.acked) == 100
    finally:
        cluster.stop()


def test_not_enough_replicas_when_isr_below_min(tmp_path: Path) -> None:
    """NOT_ENOUGH_REPLICAS exactly (before append): min.insync.replicas=3 and one follower down."""
    cluster = start_cluster(tmp_path)
    try:
        topic = create_topic(cluster, min_isr=3)
        leader = cluster.wait_for_leader(topic, 0)
        cluster.kill(next(n for n in (1, 2, 3) if n != leader))
        cluster.wait_for_isr(topic, 0, 2, timeout_s=30)
        producer = confluent_producer(cluster, **{"message.timeout.ms": 5000, "enable.idempotence": False})
        errors: list[str] = []
        producer.produce(topic, b"x", on_delivery=lambda e, m: errors.append(e.name() if e else "OK"))
        producer.flush(20)
        assert errors == ["NOT_ENOUGH_REPLICAS"] or errors == ["_MSG_TIMED_OUT"], errors
        assert consume_all(cluster, topic)[0] == []
    finally:
        cluster.stop()


def test_high_watermark_never_moves_backward_on_a_leader(tmp_path: Path) -> None:
    """Consumers' view of the HW (ListOffsets latest) never decreases while the same broker
    leads in the same epoch, through a follower kill and restart."""
    from confluent_kafka import Consumer, TopicPartition

    cluster = start_cluster(tmp_path)
    try:
        topic = create_topic(cluster)
        leader = cluster.wait_for_leader(topic, 0)
        follower = next(n for n in (1, 2, 3) if n != leader)
        consumer = Consumer({"bootstrap.servers": cluster.broker_address(leader), "group.id": "hw"})
        producer = confluent_producer(cluster)
        seen: list[int] = []
        for round_ in range(6):
            for i in range(300):
                producer.produce(topic, b"seq-%08d" % (round_ * 300 + i))
            producer.flush(30)
            if round_ == 2:
                cluster.kill(follower)
            if round_ == 4:
                cluster.restart(follower)
            for _ in range(5):
                try:
                    seen.append(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1])
                except KafkaException:
                    pass
                time.sleep(0.05)
        consumer.close()
        assert seen == sorted(seen) and seen[-1] == 1800, seen
    finally:
        cluster.stop()
