"""``arrow_sink.SinkBatchEncoder`` (pure logic, with a stand-in for the producer's metadata):
each partition's last record batch stays open across Arrow batches, and open batches are handed
over when they hold more than half of ``buffer.memory`` (the accumulator cannot see them)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from spark_kafkalite.datasource.arrow_sink import SinkBatchEncoder
from spark_kafkalite.protocol.record_batch import decode_batch


class _Metadata:
    """The two things the encoder asks the producer: its configuration and a topic's partitions."""

    def __init__(self, buffer_memory: int) -> None:
        self.config: dict[str, Any] = {
            "max.request.size": 1 << 20,
            "batch.size": 4096,
            "buffer.memory": buffer_memory,
        }

    def partitions_for(self, topic: str) -> set[int]:
        return {0, 1, 2, 3}


def _batch(start: int, rows: int) -> pa.RecordBatch:
    keys = pa.array([b"key-%d" % i for i in range(start, start + rows)], pa.binary())
    values = pa.array([b"v" * 50] * rows, pa.binary())
    return pa.RecordBatch.from_arrays([keys, values], names=["key", "value"])


def _encoder(buffer_memory: int) -> SinkBatchEncoder:
    return SinkBatchEncoder(
        _Metadata(buffer_memory),
        "t",
        has_key=True,
        has_partition=False,
        has_headers=False,
        has_timestamp=False,
    )


def _keys(sent: list[tuple[str, int, Any]]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    for _, partition, builder in sent:
        out.setdefault(partition, []).extend(decode_batch(builder.build()).keys)
    return out


def test_partial_batches_wait_for_the_next_arrow_batch() -> None:
    encoder = _encoder(1 << 25)
    assert list(encoder.encode(_batch(0, 20))) == []  # ~70 bytes x 5 rows per partition: all open
    sent = list(encoder.encode(_batch(20, 400)))  # the open batches fill up and close
    assert sent and all(builder.size_bytes > 4096 - 61 - 80 for _, _, builder in sent)
    rest = list(encoder.finish())
    assert len(rest) == 4 and list(encoder.finish()) == []
    keys = _keys(sent + rest)
    assert sorted(k for ks in keys.values() for k in ks) == sorted(b"key-%d" % i for i in range(420))
    for ks in keys.values():  # row order kept within each partition
        assert ks == sorted(ks, key=lambda k: int(k[4:]))


def test_open_batches_past_half_the_buffer_memory_are_handed_over() -> None:
    encoder = _encoder(2000)  # half: 1000 bytes; 20 rows of ~70 bytes are ~1400 bytes open
    sent = list(encoder.encode(_batch(0, 20)))
    assert len(sent) == 4 and sum(b.record_count for _, _, b in sent) == 20
    assert list(encoder.finish()) == []
