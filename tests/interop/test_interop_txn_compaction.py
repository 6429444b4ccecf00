"""Compaction of a topic written transactionally (issue #12; KIP-98, KIP-534): two
confluent-kafka transactional producers overwrite keys of a compacted topic, committing some
transactions and aborting others; while the background cleaner runs (small segments, tiny
``delete.retention.ms``) a read_committed confluent-kafka consumer must see exactly the latest
committed value per key, a read_uncommitted one no aborted record, and the segment files on disk
no marker whose transaction has no batch left (nor data of an aborted transaction)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from txn_peers import producer

from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.control_records import ControlRecordType, control_record_type
from spark_kafkalite.protocol.record_batch import decode_batch, iter_batch_headers

pytestmark = pytest.mark.timeout(90)

KEYS = [b"key-%d" % i for i in range(8)]
ROUNDS = 12


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(
        data_dir=tmp_path_factory.mktemp("txn-compaction"),
        config_overrides={"log.cleaner.backoff.ms": "100", "log.initial.task.delay.ms": "0"},
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def consume(bootstrap: str, topic: str, isolation: str) -> list[tuple[bytes, bytes]]:
    """(key, value) of every record a confluent-kafka consumer reads up to the partition end."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    out: list[tuple[bytes, bytes]] = []
    deadline = time.monotonic() + 15
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    return out
                continue
            out.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    raise AssertionError(f"{isolation} consumer did not reach the end of {topic}")


def log_state(partition_dir: Path) -> tuple[int, int, list[int], list[int]]:
    """Read the segment files: (records with a key of ``KEYS``, markers, offsets of markers none
    of whose transaction's batches is left, offsets of records of aborted transactions). The
    cleaner keeps a producer's last batch as an empty batch (no record), which still covers its
    transaction's marker."""
    for _ in range(20):  # the cleaner may swap a segment while we read
        try:
            files = [p.read_bytes() for p in sorted(partition_dir.glob("*.log"))]
            break
        except FileNotFoundError:
            time.sleep(0.05)
    else:
        raise AssertionError("segments kept changing")
    keyed = markers = 0
    dangling: list[int] = []
    aborted_data: list[int] = []
    open_batches: dict[int, list[int]] = {}  # producer id -> its batches since its last marker
    for data in files:
        for pos, header in iter_batch_headers(data):
            pid = header.producer_id
            if not header.is_control:
                keyed += sum(key in KEYS for key in decode_batch(data, pos).keys)
                if header.is_transactional:
                    open_batches.setdefault(pid, []).append(
                        header.base_offset if header.records_count else -1
                    )
                continue
            kind = control_record_type(data, pos, header)
            if kind is None:  # emptied by the cleaner (a producer's last marker)
                continue
            markers += 1
            batches = open_batches.pop(pid, [])
            if not batches:
                dangling.append(header.base_offset)
            elif kind == ControlRecordType.ABORT:
                aborted_data.extend(o for o in batches if o >= 0)
    return keyed, markers, dangling, aborted_data


def test_compacted_transactional_topic(local: LocalCluster) -> None:
    bootstrap = local.bootstrap_servers
    topic = "txn-compacted"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {
        "cleanup.policy": "compact",
        "segment.bytes": "600",
        "segment.ms": "100",
        "delete.retention.ms": "50",
        "min.cleanable.dirty.ratio": "0.01",
    }
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(timeout=15)
    producers = [producer(bootstrap, f"compaction-{name}") for name in "ab"]
    for p in producers:
        p.init_transactions(15)
    latest: dict[bytes, bytes] = {}
    aborted_values: set[bytes] = set()
    for r in range(ROUNDS):
        p = producers[r % 2]
        p.begin_transaction()
        values = {key: b"round-%d-%s" % (r, key) for key in KEYS[r % 3 :: 2]}
        for key, value in values.items():
            p.produce(topic, key=key, value=value, partition=0)
        p.flush(15)  # in the log before the transaction ends, also when it is aborted
        if r % 4 == 3:
            p.abort_transaction(15)
            aborted_values.update(values.values())
        else:
            p.commit_transaction(15)
            latest.update(values)
    transactions = ROUNDS

    # a plain producer keeps the log dirty (and rolling) so the cleaner makes its passes
    filler = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    partition_dir = local.log_dir(1) / f"{topic}-0"
    deadline = time.monotonic() + 30
    state = log_state(partition_dir)
    assert state[3], "no aborted data to clean"
    while time.monotonic() < deadline:
        keyed, markers, dangling, aborted_data = state
        if keyed == len(KEYS) and markers < transactions and not dangling and not aborted_data:
            break
        filler.produce(topic, key=b"filler", value=b"x" * 100, partition=0)
        filler.flush(5)
        time.sleep(0.1)
        state = log_state(partition_dir)
    keyed, markers, dangling, aborted_data = state
    assert keyed == len(KEYS), "the keys were not compacted"
    assert not aborted_data, f"data of aborted transactions left at {aborted_data}"
    assert not dangling, f"markers of transactions with no batch left at {dangling}"
    assert markers < transactions, "no marker was removed"

    committed = [(k, v) for k, v in consume(bootstrap, topic, "read_committed") if k != b"filler"]
    assert dict(committed) == latest
    assert len(committed) == len(latest)  # compacted: one record per key
    uncommitted = consume(bootstrap, topic, "read_uncommitted")
    assert not aborted_values & {v for _, v in uncommitted}
    assert {k: v for k, v in uncommitted if k != b"filler"} == latest
    for p in producers:
        p.flush(5)
