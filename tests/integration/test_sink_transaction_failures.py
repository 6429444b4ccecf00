"""The exactly-once sink's task (``exactly_once.write_task`` with our real producer) when the
transaction machinery fails, against in-process brokers over real sockets: the task must fail
promptly with an error naming the cause, never hang.

- ``no_coordinator``: ``transaction.state.log.replication.factor=3`` on one broker, so
  ``__transaction_state`` cannot be created and every FindCoordinator(transaction) answers
  COORDINATOR_NOT_AVAILABLE (Kafka's default replication factor on a one-broker cluster).
- ``fast_abort``: a working broker whose coordinator looks for timed-out transactions every
  100 ms (``transaction.abort.timed.out.transaction.cleanup.interval.ms``; Kafka: 10 s).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from inprocess_broker import InProcessBroker

from spark_kafkalite.client import KafkaAdminClient, KafkaProducer, NewTopic
from spark_kafkalite.client.consumer.group_requests import OffsetAndMetadata
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.datasource.errors import KafkaLiteWriteError
from spark_kafkalite.datasource.exactly_once import TaskIdentity, write_task
from spark_kafkalite.protocol.errors import KafkaTimeoutError, ProducerFencedError

pytestmark = pytest.mark.timeout(60)

MAX_BLOCK_MS = 1000


@pytest.fixture(scope="module")
def no_coordinator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    broker = InProcessBroker(
        Path(tmp_path_factory.mktemp("no-coordinator")), {"transaction.state.log.replication.factor": "3"}
    ).start()
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def fast_abort(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    broker = InProcessBroker(
        Path(tmp_path_factory.mktemp("fast-abort")),
        {
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
            "transaction.state.log.replication.factor": "1",
            "offsets.topic.replication.factor": "1",
        },
    ).start()
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


def _within(seconds: float, fn: Callable[[], Any]) -> tuple[float, BaseException | None]:
    """Run ``fn`` in a daemon thread; (elapsed seconds, what it raised). Fails the test when
    ``fn`` is still running after ``seconds`` (a hang must fail the test, not stall the suite)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            raised.append(exc)

    start = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    return time.monotonic() - start, raised[0] if raised else None


def test_close_does_not_wait_for_a_retrying_init_producer_id(no_coordinator: str) -> None:
    config = {"bootstrap.servers": no_coordinator, "max.block.ms": 500}
    for timeout_s, bound_s in ((0, 1.0), (0.5, 2.0)):
        producer = KafkaProducer({**config, "transactional.id": f"close-{uuid.uuid4().hex[:8]}"})
        with pytest.raises(KafkaTimeoutError):
            producer.init_transactions()
        elapsed, error = _within(10, lambda p=producer, t=timeout_s: p.close(t))
        assert error is None and elapsed < bound_s, (timeout_s, elapsed, error)


def test_a_task_fails_when_init_transactions_times_out(no_coordinator: str) -> None:
    txn_id = f"eos-{uuid.uuid4().hex[:8]}-0"

    def task() -> None:
        write_task(
            [pa.record_batch([pa.array([b"a"])], names=["value"])],
            TaskIdentity(txn_id, 0, 0),
            new_producer=lambda txn: KafkaProducer(
                {"bootstrap.servers": no_coordinator, "transactional.id": txn, "max.block.ms": MAX_BLOCK_MS}
            ),
            read_offsets=lambda _group: {},
            send_rows=lambda _rows, _producer: (0, None),
            offset_and_metadata=OffsetAndMetadata,
            transaction_timeout_ms=60000,
        )

    # before the fix the producer's close waited for the InitProducerId forever
    elapsed, error = _within(10, task)
    assert isinstance(error, KafkaTimeoutError) and "InitProducerId" in str(error), error
    # max.block.ms bounds the wait; the slack is for a loaded 2-core machine (a hang fails in _within)
    assert elapsed < MAX_BLOCK_MS / 1000 + 6.0


def test_a_transaction_aborted_on_timeout_is_reported_as_such(fast_abort: str, unique_topic: str) -> None:
    timeout_ms = 1000
    txn_id = f"eos-{uuid.uuid4().hex[:8]}-3"
    admin = KafkaAdminClient({"bootstrap.servers": fast_abort})
    try:
        admin.create_topics([NewTopic(unique_topic, 1, 1)])

        def send_rows(rows: Iterator[pa.RecordBatch], producer: Any) -> tuple[int, TopicPartition]:
            sent = 0
            for batch in rows:
                for value in batch.column(0).to_pylist():
                    producer.send(unique_topic, value=value, partition=0).result(10)
                    sent += 1
            # the task stalls (a slow input, a long GC) until the coordinator aborts on timeout
            deadline = time.monotonic() + 20
            while admin.describe_transactions([txn_id])[txn_id].state == "Ongoing":
                assert time.monotonic() < deadline, "the coordinator did not abort the transaction"
                time.sleep(0.05)
            return sent, TopicPartition(unique_topic, 0)

        # before the fix: ProducerFencedError "there is a newer producer with the same transactional.id"
        with pytest.raises(KafkaLiteWriteError) as info:
            write_task(
                [pa.record_batch([pa.array([b"a", b"b"])], names=["value"])],
                TaskIdentity(txn_id, 7, 3),
                new_producer=lambda txn: KafkaProducer(
                    {
                        "bootstrap.servers": fast_abort,
                        "transactional.id": txn,
                        "transaction.timeout.ms": timeout_ms,
                    }
                ),
                read_offsets=lambda group: admin.list_consumer_group_offsets_and_metadata(
                    group, require_stable=True
                ),
                send_rows=send_rows,
                offset_and_metadata=OffsetAndMetadata,
                transaction_timeout_ms=timeout_ms,
            )
    finally:
        admin.close()
    message = str(info.value)
    for part in (
        f"'{txn_id}' (batch 7, Spark partition 3)",
        "longer than kafka.transaction.timeout.ms (1000 ms)",
        "aborted it",
        "transaction.max.timeout.ms",
        "maxOffsetsPerTrigger",
    ):
        assert part in message, message
    assert isinstance(info.value.__cause__, ProducerFencedError)
