"""Encoding of producer state snapshot files (``<20-digit offset>.snapshot``), used by
:mod:`broker.log.producer_state_manager`.

Our own layout (nothing outside this broker reads it; unlike Kafka's, which keeps only each
producer's last batch, it keeps every retained batch), big-endian::

    version int16 (= 2) | crc32c uint32 over the rest | count int32 |
    count x (producer_id int64, epoch int16, last_timestamp_ms int64,
             current_txn_first_offset int64, coordinator_epoch int32, n int8,
             n x (first_seq int32, last_seq int32, first_offset int64, last_offset int64,
                  timestamp_ms int64))

``current_txn_first_offset`` (-1: no open transaction) and ``coordinator_epoch`` are Kafka's
``ProducerSnapshot`` fields ``CurrentTxnFirstOffset`` / ``CoordinatorEpoch``: the open
transactions are rebuilt from them. Version 1 files (written before transactions, without those
two fields) are still read, as producers without a transaction.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import crc32c

__all__ = ["SnapshotEntry", "encode_snapshot", "decode_snapshot", "SNAPSHOT_VERSION"]

SNAPSHOT_VERSION = 2
_VERSION_1 = 1

_HEAD = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhqqib")
_PRODUCER_V1 = struct.Struct(">qhqb")
_BATCH = struct.Struct(">iiqqq")

#: (producer_id, epoch, last_timestamp_ms, current_txn_first_offset, coordinator_epoch,
#:  [(first_seq, last_seq, first_offset, last_offset, ts)])
SnapshotEntry = tuple[int, int, int, int, int, list[tuple[int, int, int, int, int]]]


def encode_snapshot(entries: Iterable[SnapshotEntry]) -> bytes:
    """The file contents for ``entries``."""
    items = list(entries)
    body = bytearray(_COUNT.pack(len(items)))
    for pid, epoch, last_ts, txn_first_offset, coordinator_epoch, batches in items:
        body += _PRODUCER.pack(pid, epoch, last_ts, txn_first_offset, coordinator_epoch, len(batches))
        for batch in batches:
            body += _BATCH.pack(*batch)
    return _HEAD.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> list[SnapshotEntry]:
    """Parse a snapshot file.

    Raises:
        ValueError: wrong version, CRC mismatch, truncated or trailing bytes.
    """
    try:
        version, crc = _HEAD.unpack_from(data, 0)
        body = memoryview(data)[_HEAD.size :]
        if version not in (SNAPSHOT_VERSION, _VERSION_1):
            raise ValueError(f"unknown snapshot version {version}")
        if crc32c.crc32c(body) != crc:
            raise ValueError("CRC mismatch")
        (count,) = _COUNT.unpack_from(body, 0)
        pos = _COUNT.size
        out: list[SnapshotEntry] = []
        for _ in range(count):
            if version == _VERSION_1:
                pid, epoch, last_ts, n = _PRODUCER_V1.unpack_from(body, pos)
                txn_first_offset, coordinator_epoch = -1, -1
                pos += _PRODUCER_V1.size
            else:
                pid, epoch, last_ts, txn_first_offset, coordinator_epoch, n = _PRODUCER.unpack_from(body, pos)
                pos += _PRODUCER.size
            batches = []
            for _ in range(n):
                batches.append(_BATCH.unpack_from(body, pos))
                pos += _BATCH.size
            out.append((pid, epoch, last_ts, txn_first_offset, coordinator_epoch, batches))
    except struct.error as exc:
        raise ValueError(f"truncated snapshot: {exc}") from None
    if pos != len(body):
        raise ValueError("trailing bytes")
    return out
