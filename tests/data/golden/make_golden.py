"""Regenerate the golden RecordBatch files: batches written by librdkafka (confluent-kafka), one
file per codec, copied from a kafkalite broker's log segment (the broker stores produced batches
as received, only assigning offsets). kafka-python's encoder is exercised offline in
tests/unit/test_record_decode.py (``DefaultRecordBatchBuilder``, all codecs).

    python tests/data/golden/make_golden.py

Records per file (``expected`` in tests/unit/test_record_decode.py): 30 records, key ``k<i>``
(null when i % 5 == 4), value ``v<i>`` x (i % 7 + 1) (null when i % 6 == 5), headers
``[("h", b"<i>"), ("n", None)]`` when i % 4 == 0, timestamp 1700000000000 + i (CreateTime).
"""

from __future__ import annotations

import time
from pathlib import Path

from spark_kafkalite import LocalCluster

HERE = Path(__file__).resolve().parent
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def records() -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]:
    out = []
    for i in range(30):
        key = None if i % 5 == 4 else f"k{i}".encode()
        value = None if i % 6 == 5 else f"v{i}".encode() * (i % 7 + 1)
        headers = [("h", str(i).encode()), ("n", None)] if i % 4 == 0 else []
        out.append((key, value, headers, 1_700_000_000_000 + i))
    return out


def produce_librdkafka(bootstrap: str, topic: str, codec: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 50, "acks": "all"})
    for key, value, headers, ts in records():
        p.produce(topic, key=key, value=value, headers=headers or None, timestamp=ts, partition=0)
    assert p.flush(30) == 0


def main() -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    with LocalCluster() as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for writer, produce in (("librdkafka", produce_librdkafka),):
            for codec in CODECS:
                topic = f"golden-{writer}-{codec}"
                admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                time.sleep(0.5)
                produce(cluster.bootstrap_servers, topic, codec)
                segment = cluster.log_dir(1) / f"{topic}-0" / "00000000000000000000.log"
                (HERE / f"{writer}-{codec}.bin").write_bytes(segment.read_bytes())
                print(writer, codec, segment.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
