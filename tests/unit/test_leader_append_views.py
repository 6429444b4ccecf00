"""UnifiedLog.append_as_leader on a read-only view (a Produce request's frame, issue #10): the
view is never modified, and what is stored equals the in-place patched bytearray append
(base offset, partition leader epoch), across a segment roll."""

from __future__ import annotations

from pathlib import Path

from broker.log.log_config import LogConfig
from broker.log.unified_log import UnifiedLog
from spark_kafkalite.protocol.record_batch import iter_batch_headers, validate_batch
from spark_kafkalite.protocol.record_batch_writer import encode_batch


def _stored(log: UnifiedLog) -> bytes:
    return bytes(log.read(log.log_start_offset, 1 << 24).records)


def test_view_append_stores_the_same_bytes_as_an_in_place_append(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=400)  # rolls every couple of batches
    by_view = UnifiedLog(tmp_path / "a-0", config)
    in_place = UnifiedLog(tmp_path / "b-0", config)
    for i in range(6):
        batch = encode_batch([(b"k%d" % i, b"v" * 100, 1000 + i, []), (None, b"w", 1001 + i, [])])
        frame = b"prefix" + batch + b"suffix"
        view = memoryview(frame)[6 : 6 + len(batch)]
        info = by_view.append_as_leader(view, leader_epoch=3)
        assert frame == b"prefix" + batch + b"suffix"  # the request's bytes are untouched
        assert info.first_offset == 2 * i and info.last_offset == 2 * i + 1
        in_place.append_as_leader(bytearray(batch), leader_epoch=3)
    assert len(by_view.segments) > 1
    stored = _stored(by_view)
    assert stored == _stored(in_place)
    headers = [h for _, h in iter_batch_headers(stored)]
    assert [h.base_offset for h in headers] == [0, 2, 4, 6, 8, 10]
    assert {h.partition_leader_epoch for h in headers} == {3}
    for pos, _ in iter_batch_headers(stored):
        validate_batch(stored, pos)  # the CRC still holds: the patched bytes are outside it
