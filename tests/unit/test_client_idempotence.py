"""Client idempotence bookkeeping (pure logic): sequences assigned at drain, retries keep their
sequence and go first, OUT_OF_ORDER handling (retry vs. epoch bump and renumbering), expired
batches leave unresolved sequences, header patching of a re-sequenced batch."""

from __future__ import annotations

from spark_kafkalite.client.clock import now_ms
from spark_kafkalite.client.metadata import Cluster, PartitionMetadata
from spark_kafkalite.client.producer.producer_batch import ProducerBatch
from spark_kafkalite.client.producer.record_accumulator import RecordAccumulator
from spark_kafkalite.client.producer.transaction_manager import TransactionManager
from spark_kafkalite.client.producer.txn_partition_map import TxnPartitionMap, increment_sequence
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import (
    KafkaConnectionError,
    MessageTooLargeError,
    OutOfOrderSequenceNumberError,
    UnknownProducerIdError,
)
from spark_kafkalite.protocol.record_batch import decode_batch, read_header, validate_batch

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
CLUSTER = Cluster(
    nodes={1: ("h", 1)},
    partitions={"t": {p: PartitionMetadata("t", p, 1, 0, (1,), (1,), (), 0) for p in (0, 1)}},
)


def setup(pid: int | None = 5) -> tuple[TxnPartitionMap, RecordAccumulator]:
    """The sequence state of an idempotent producer and an accumulator draining through it."""
    tm = TransactionManager()
    if pid is not None:
        tm.txn_partition_map.set_producer_id_and_epoch(pid, 0)
    acc = RecordAccumulator(batch_size=100, linger_ms=0, retry_backoff_ms=0, transaction_manager=tm)
    return tm.txn_partition_map, acc


def append(acc: RecordAccumulator, tp: TopicPartition, n: int) -> None:
    for i in range(n):
        acc.append(tp, (None, b"v%d" % i, 1000, []), 19, 0)  # 2 records per batch (61 + 2 * 19 <= 100)


def drain(acc: RecordAccumulator) -> list[ProducerBatch]:
    return acc.drain(CLUSTER, [1], 1 << 20, now_ms()).get(1, [])


def test_sequence_wraps() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(2**31 - 2, 3) == 1  # MAX-1 -> MAX, 0, 1


def test_nothing_drained_without_producer_id() -> None:
    seqs, acc = setup(pid=None)
    append(acc, T0, 2)
    assert drain(acc) == []
    seqs.set_producer_id_and_epoch(9, 0)
    (batch,) = drain(acc)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 0, 0)


def test_sequences_assigned_at_drain_per_partition() -> None:
    seqs, acc = setup()
    append(acc, T0, 6)
    append(acc, T1, 2)
    seen: list[tuple[TopicPartition, int]] = []
    for _ in range(3):
        seen += [(b.tp, b.base_sequence) for b in drain(acc)]
    assert sorted(seen) == [(T0, 0), (T0, 2), (T0, 4), (T1, 0)]
    assert seqs.sequence_of(T0) == 6 and seqs.in_flight_count(T0) == 3


def test_encoded_batch_carries_and_patches_producer_fields() -> None:
    seqs, acc = setup()
    append(acc, T0, 2)
    (batch,) = drain(acc)
    h = read_header(batch.encoded())
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (5, 0, 0)
    batch.set_producer_state(5, 1, 7)  # renumbered after an epoch bump: header + CRC patched
    h = validate_batch(batch.encoded())
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (5, 1, 7)
    assert decode_batch(batch.encoded()).values == [b"v0", b"v1"]


def test_retry_keeps_sequence_and_waits_for_lower_in_flight() -> None:
    seqs, acc = setup()
    append(acc, T0, 4)
    (b0,) = drain(acc)
    (b1,) = drain(acc)
    # b1's request failed (disconnect) while b0 is still in flight: b1 must wait for b0
    assert seqs.can_retry(b1, KafkaConnectionError("x"))
    acc.reenqueue(b1, now_ms())
    assert drain(acc) == []
    # b0 also fails and is put back: it goes first, then b1, same sequences
    acc.reenqueue(b0, now_ms())
    assert [b.base_sequence for b in drain(acc)] == [0]
    assert drain(acc) == []  # b1 waits until b0 completes
    seqs.handle_completed_batch(b0)
    assert [b.base_sequence for b in drain(acc)] == [2]


def test_out_of_order_for_a_later_batch_is_retried_without_bump() -> None:
    seqs, acc = setup()
    append(acc, T0, 4)
    (b0,) = drain(acc)
    (b1,) = drain(acc)
    assert seqs.can_retry(b1, OutOfOrderSequenceNumberError())  # b0 not acked yet: not a real gap
    assert not seqs.maybe_bump_epoch(lambda tp: False)


def test_out_of_order_for_the_next_batch_bumps_epoch_and_renumbers() -> None:
    seqs, acc = setup()
    append(acc, T0, 6)
    b0, b1, b2 = drain(acc)[0], drain(acc)[0], drain(acc)[0]
    seqs.handle_completed_batch(b0)
    assert seqs.can_retry(b1, OutOfOrderSequenceNumberError())  # next in line: a real gap
    acc.reenqueue(b1, now_ms())
    assert not seqs.maybe_bump_epoch(lambda tp: True)  # waits while T0 has a batch on the wire
    assert seqs.maybe_bump_epoch(lambda tp: False)
    assert seqs.producer_id_and_epoch.epoch == 1
    assert [(b.producer_epoch, b.base_sequence) for b in (b1, b2)] == [(1, 0), (1, 2)]
    assert seqs.sequence_of(T0) == 4


def test_unknown_producer_id_bumps_epoch() -> None:
    seqs, acc = setup()
    append(acc, T0, 2)
    (b0,) = drain(acc)
    assert seqs.can_retry(b0, UnknownProducerIdError())
    assert seqs.maybe_bump_epoch(lambda tp: False)
    assert (b0.producer_epoch, b0.base_sequence) == (1, 0)


def test_definite_failure_leaves_a_hole_and_bumps_epoch() -> None:
    seqs, acc = setup()
    append(acc, T0, 4)
    b0, b1 = drain(acc)[0], drain(acc)[0]
    seqs.handle_failed_batch(b0, MessageTooLargeError(), expired=False)
    assert seqs.maybe_bump_epoch(lambda tp: False)
    assert (b1.producer_epoch, b1.base_sequence) == (1, 0)


def test_expired_sent_batch_is_unresolved_until_partition_drains() -> None:
    seqs, acc = setup()
    append(acc, T0, 6)
    b0, b1 = drain(acc)[0], drain(acc)[0]
    b0.attempts = b1.attempts = 1
    seqs.handle_failed_batch(b0, TimeoutError(), expired=True)
    assert drain(acc) == []  # new batches wait while the outcome of b0 is unknown
    seqs.maybe_resolve_sequences()
    assert drain(acc) == []  # b1 still in flight
    seqs.handle_completed_batch(b1)  # b1 acked: the broker must have had b0 as well
    seqs.maybe_resolve_sequences()
    assert not seqs.maybe_bump_epoch(lambda tp: False)
    # last acked sequence 3 directly precedes the next sequence 4: resolved without a bump
    (b2,) = drain(acc)
    assert (b2.producer_epoch, b2.base_sequence) == (0, 4)


def test_expired_batches_without_ack_bump_epoch_for_the_partition_only() -> None:
    seqs, acc = setup()
    append(acc, T0, 4)
    append(acc, T1, 2)
    batches = drain(acc)
    t0_batch = next(b for b in batches if b.tp == T0)
    t1_batch = next(b for b in batches if b.tp == T1)
    t0_batch.attempts = 1
    seqs.handle_failed_batch(t0_batch, TimeoutError(), expired=True)
    seqs.maybe_resolve_sequences()
    assert seqs.maybe_bump_epoch(lambda tp: False)
    (b,) = drain(acc)  # next T0 batch restarts at 0 with the new epoch
    assert (b.tp, b.producer_epoch, b.base_sequence) == (T0, 1, 0)
    # T1 keeps its old-epoch batch in flight; new T1 batches wait for it, then restart at 0
    append(acc, T1, 2)
    assert drain(acc) == []
    seqs.handle_completed_batch(t1_batch)
    (b,) = drain(acc)
    assert (b.tp, b.producer_epoch, b.base_sequence) == (T1, 1, 0)
