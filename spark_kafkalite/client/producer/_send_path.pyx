# cython: language_level=3, binding=True, embedsignature=True, embedsignature.format=python
"""Compiled ``KafkaProducer.send`` for the common record (issue #10): the twin of
``send_path.py`` (same API; that module is the reference and documents the semantics).

A record with a bytes, str or null key and value, any headers, an integer or no partition and an
integer or no timestamp, of a topic in the cached metadata, is partitioned (Kafka
``Utils.murmur2`` of the key, Java ``BuiltInPartitioner.partitionForKey``; the sticky
partitioner, KIP-794, for a null key) and varint-encoded straight into the open
``ProducerBatch`` of its partition under the accumulator's lock, with one
``FutureRecordMetadata`` (batch, index, CreateTime) as its only per-record object. Everything
else (closed producer, fatal error, bytearray / memoryview / bad types, unknown topics, a
record too large) goes to the reference ``SendPath``, and a record that needs a new
batch (or waits for ``buffer.memory``) to the accumulator's own ``append_record``."""

from spark_kafkalite.client.producer._batch_state cimport AccumulatorState, BatchState, FutureState

import logging

from spark_kafkalite.client.producer import send_path as _reference
from spark_kafkalite.client.producer.future_record_metadata import FAST_FUTURES, FutureRecordMetadata
from spark_kafkalite.client.producer.producer_batch import RECORD_OVERHEAD_ESTIMATE
from spark_kafkalite.client.clock import now_ms
from spark_kafkalite.client.errors import IllegalStateError
from spark_kafkalite.client.types import RecordMetadata, TopicPartition
from spark_kafkalite.protocol.errors import KafkaError
from spark_kafkalite.protocol.record_encoding import murmur2

__all__ = ["SendPath", "IMPLEMENTATION"]

IMPLEMENTATION = "native"

cdef object _FRM = FutureRecordMetadata
cdef object _murmur2 = murmur2
cdef object _log = logging.getLogger("spark_kafkalite.client.producer.send_path")
cdef object _tuple_new = tuple.__new__
cdef object _normalize_headers = _reference.normalize_headers
cdef object _RecordMetadata = RecordMetadata
cdef Py_ssize_t _OVERHEAD = RECORD_OVERHEAD_ESTIMATE
cdef bint _FAST_FUTURES = FAST_FUTURES


cdef class RecordCallback:
    """The done-callback of a record future that calls Java-style ``callback(metadata,
    exception)`` (``send_path.callback_adapter``); a ``FutureRecordMetadata``'s metadata is read
    straight from its batch. What the callback raises is logged (a user callback must not break
    the I/O thread)."""

    cdef object callback

    def __cinit__(self, callback):
        self.callback = callback

    def __call__(self, future):
        cdef FutureState record
        cdef object batch, error, metadata = None
        if isinstance(future, FutureState):  # done: its batch holds the outcome
            record = <FutureState>future
            batch = record._batch
            error = batch.error_of(record._index)
            if error is None:
                base = batch.base_offset
                log_append_ms = batch.log_append_time_ms
                topic, partition = batch.tp
                metadata = _tuple_new(
                    _RecordMetadata,
                    (
                        topic,
                        partition,
                        base + record._index if base >= 0 else -1,
                        log_append_ms if log_append_ms >= 0 else record._timestamp_ms,
                    ),
                )
        else:
            error = future.exception()
            if error is None:
                metadata = future.result()
        try:
            self.callback(metadata, error)
        except Exception:
            _log.exception("producer callback failed")


cdef class SendPath:
    """See module docstring and ``send_path.SendPath``."""

    cdef object _ref
    cdef bint _closed
    cdef object _metadata
    cdef AccumulatorState _accumulator
    cdef object _sender
    cdef object _partitioner
    cdef object _acquire
    cdef object _release
    cdef dict _batches
    # topic -> (Cluster, {partition: metadata}, [TopicPartition], partition count, available ids)
    cdef dict _topics
    cdef Py_ssize_t _max_request_size
    cdef Py_ssize_t _batch_size
    cdef Py_ssize_t _buffer_memory
    cdef double _max_block_ms
    cdef double _linger_ms

    def __init__(
        self,
        metadata,
        accumulator,
        sender,
        partitioner,
        max_request_size,
        max_block_ms,
        linger_ms,
    ):
        """The producer's parts, as ``send_path.SendPath`` takes them (sizes in bytes, times in ms)."""
        self._ref = _reference.SendPath(
            metadata,
            accumulator,
            sender,
            partitioner,
            max_request_size,
            max_block_ms,
            linger_ms,
        )
        if not isinstance(accumulator, AccumulatorState) or not issubclass(_FRM, FutureState):
            raise TypeError(
                "the compiled SendPath needs the compiled _batch_state (KAFKALITE_PURE_PYTHON "
                "was set when the producer modules were imported?)"
            )
        self._closed = False
        self._metadata = metadata
        self._accumulator = accumulator
        self._sender = sender
        self._partitioner = partitioner
        self._acquire = accumulator._lock.acquire
        self._release = accumulator._lock.release
        self._batches = accumulator._batches
        self._topics = {}
        self._max_request_size = max_request_size
        self._batch_size = accumulator.batch_size
        self._buffer_memory = accumulator.buffer_memory
        self._max_block_ms = max_block_ms
        self._linger_ms = linger_ms

    @property
    def closed(self):
        return self._closed

    @closed.setter
    def closed(self, value):
        self._closed = bool(value)
        self._ref.closed = self._closed

    def wait_on_metadata(self, topic, partition, deadline):
        """``send_path.SendPath.wait_on_metadata``."""
        return self._ref.wait_on_metadata(topic, partition, deadline)

    def send(
        self,
        topic,
        value=None,
        key=None,
        partition=None,
        timestamp_ms=None,
        headers=None,
        callback=None,
    ):
        """``KafkaProducer.send`` (see there)."""
        cdef Py_ssize_t size, nparts, chosen, count
        cdef tuple entry
        cdef object cluster, parts, tp, dq, ts, future, header_list, hk, hv
        cdef AccumulatorState acc
        cdef BatchState last
        cdef FutureState record_future
        cdef bint full = False, done = False
        if (
            self._closed
            or (partition is not None and type(partition) is not int)
            or (timestamp_ms is not None and type(timestamp_ms) is not int)
        ):
            return self._ref.send(topic, value, key, partition, timestamp_ms, headers, callback)
        if type(key) is not bytes and key is not None:
            if type(key) is not str:  # bytearray, memoryview, a bad type: the reference
                return self._ref.send(topic, value, key, partition, timestamp_ms, headers, callback)
            key = (<str>key).encode("utf-8")
        if type(value) is not bytes and value is not None:
            if type(value) is not str:
                return self._ref.send(topic, value, key, partition, timestamp_ms, headers, callback)
            value = (<str>value).encode("utf-8")
        if self._sender.fatal_error is not None:
            return self._ref.send(topic, value, key, partition, timestamp_ms, headers, callback)
        size = _OVERHEAD
        if key is not None:
            size += len(<bytes>key)
        if value is not None:
            size += len(<bytes>value)
        if headers:  # normalised (copied, type-checked) only when the caller gave some
            header_list = _normalize_headers(headers)
            for hk, hv in header_list:
                size += len(<str>hk) + (len(<bytes>hv) if hv else 0) + 4
        else:
            header_list = None
        if size > self._max_request_size:
            return self._ref.send(topic, value, key, partition, timestamp_ms, header_list, callback)
        cluster = self._metadata._cluster
        entry = self._topics.get(topic)
        if entry is None or entry[0] is not cluster:
            parts = cluster.partitions.get(topic)
            if not parts:  # unknown topic: the reference waits for its metadata
                return self._ref.send(topic, value, key, partition, timestamp_ms, header_list, callback)
            nparts = len(parts)
            entry = (
                cluster,
                parts,
                [TopicPartition(topic, p) for p in range(nparts)],
                nparts,
                cluster.available_partitions(topic),
            )
            self._topics[topic] = entry
        nparts = entry[3]
        if partition is not None:
            if partition not in entry[1] or not 0 <= partition < nparts:
                return self._ref.send(topic, value, key, partition, timestamp_ms, header_list, callback)
            chosen = partition
        elif key is not None:
            chosen = (<long long>_murmur2(key) & 0x7FFFFFFF) % nparts
        else:  # sticky partition (KIP-794)
            chosen = self._partitioner.partition(topic, entry[4], nparts, size)
        tp = (<list>entry[2])[chosen]
        if _FAST_FUTURES:
            acc = self._accumulator
            self._acquire()
            try:
                if acc._used_bytes + size <= self._buffer_memory and not acc._closed:
                    dq = acc._batches.get(tp)
                    if dq:
                        last = <BatchState>dq[-1]
                        count = last.count
                        if (
                            not last.in_retry
                            and not last.closed
                            and (count == 0 or last.size_bytes + size <= self._batch_size)
                        ):
                            if timestamp_ms is None:
                                ts = last.builder.append_now(key, value, header_list)
                            else:
                                ts = timestamp_ms
                                last.builder.append(key, value, ts, header_list)
                            last.count = count + 1
                            last.size_bytes += size
                            acc._used_bytes += size
                            record_future = <FutureState>FutureState.__new__(_FRM)
                            record_future._batch = last
                            record_future._index = count
                            record_future._timestamp_ms = ts
                            future = record_future
                            if callback is not None:  # the batch is open: not done before this
                                record_future._record_callback = callback
                                (<object>last).watchers.append(future)
                                callback = None
                            full = len(dq) > 1 or last.size_bytes >= self._batch_size
                            done = True
            finally:
                self._release()
        if done:
            if full:
                self._sender.wakeup()
        else:  # a new batch, a batch in retry, waiting for buffer.memory, ...: the accumulator
            try:
                future, full, new_batch = self._accumulator.append_record(
                    tp, key, value, timestamp_ms, header_list, size, self._max_block_ms
                )
            except IllegalStateError:
                raise  # a transactional record after begin_commit / begin_abort
            except KafkaError as exc:
                failed = _reference.failed_future(exc, None)
                if callback is not None:
                    failed.add_done_callback(RecordCallback(callback))
                return failed
            if full or (new_batch and self._linger_ms < self._sender.poll_deadline_ms - now_ms()):
                self._sender.wakeup()
        if callback is not None:
            future.add_done_callback(RecordCallback(callback))
        return future
