"""DescribeLogDirs (key 35) on a real broker with two log dirs: partition sizes equal the bytes
of the ``.log`` segment files on disk, checked with kafka-python's
``KafkaAdminClient.describe_log_dirs`` (the independent peer; confluent-kafka 2.x has no
DescribeLogDirs) and with our admin client; every served version (1-4) over a raw socket."""

from __future__ import annotations

import os
import socket
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kafka
import pytest

from spark_kafkalite.client import KafkaAdminClient, KafkaProducer, NewTopic, TopicPartition
from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.errors import UnknownTopicOrPartitionError
from spark_kafkalite.protocol.framing import decode_response, encode_request

pytestmark = pytest.mark.timeout(60)

PARTITIONS = 3


@pytest.fixture(scope="module")
def two_dir_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, list[Path]]]:
    data_dir = tmp_path_factory.mktemp("logdirs")
    dirs = [data_dir / "broker-1", data_dir / "second-dir"]  # the first is LocalCluster's own
    with LocalCluster(data_dir=data_dir, config_overrides={"log.dirs": ",".join(map(str, dirs))}) as cluster:
        yield cluster, dirs


@pytest.fixture(scope="module")
def produced(two_dir_cluster: tuple[LocalCluster, list[Path]]) -> str:
    """A topic with PARTITIONS partitions; partition p holds 20 * (p + 1) records."""
    cluster, _ = two_dir_cluster
    topic = "sizes-" + uuid.uuid4().hex[:8]
    with KafkaAdminClient({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    with KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0}) as producer:
        for p in range(PARTITIONS):
            for i in range(20 * (p + 1)):
                producer.send(topic, value=os.urandom(50 + i), partition=p)
            producer.flush(10)
    return topic


def on_disk_sizes(dirs: list[Path], topic: str) -> dict[TopicPartition, int]:
    """Bytes of the ``.log`` files per partition, summed over ``dirs``."""
    sizes: dict[TopicPartition, int] = {}
    for d in dirs:
        for p in range(PARTITIONS):
            files = list((d / f"{topic}-{p}").glob("*.log"))
            if files:
                tp = TopicPartition(topic, p)
                sizes[tp] = sizes.get(tp, 0) + sum(f.stat().st_size for f in files)
    return sizes


def test_our_admin_sizes_equal_log_files(
    two_dir_cluster: tuple[LocalCluster, list[Path]], produced: str
) -> None:
    cluster, dirs = two_dir_cluster
    expected = on_disk_sizes(dirs, produced)
    assert len(expected) == PARTITIONS and all(size > 0 for size in expected.values())
    assert {d for d in dirs if any(d.glob(f"{produced}-*"))} == set(dirs)  # spread over both dirs
    with KafkaAdminClient({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        assert admin.describe_log_dirs([produced]) == expected
        everything = admin.describe_log_dirs()
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_log_dirs([produced + "-missing"])
    assert {tp: s for tp, s in everything.items() if tp.topic == produced} == expected


def test_kafka_python_peer_sees_dirs_and_sizes(
    two_dir_cluster: tuple[LocalCluster, list[Path]], produced: str
) -> None:
    cluster, dirs = two_dir_cluster
    other = "other-" + uuid.uuid4().hex[:8]
    admin = kafka.KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10000)
    try:
        admin.create_topics([kafka.admin.NewTopic(other, 1, 1)])
        (broker,) = admin.describe_log_dirs(topic_partitions={produced: list(range(PARTITIONS))})
    finally:
        admin.close()
    assert broker["broker"] == 1
    results = broker["log_dirs"]
    assert sorted(r["log_dir"] for r in results) == sorted(os.path.abspath(d) for d in dirs)
    sizes: dict[TopicPartition, int] = {}
    for r in results:
        assert r["error_code"] == 0
        assert 0 < r["usable_bytes"] <= r["total_bytes"]
        for t in r["topics"]:
            assert t["name"] == produced  # the other topic was not asked for
            for p in t["partitions"]:
                assert (p["offset_lag"], p["is_future_key"]) == (0, False)
                assert (Path(r["log_dir"]) / f"{produced}-{p['partition_index']}").is_dir()
                sizes[TopicPartition(produced, p["partition_index"])] = p["partition_size"]
    assert sizes == on_disk_sizes(dirs, produced)


def raw_request(bootstrap: str, entity: Any) -> Any:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(encode_request(entity, 7, "log-dirs-test"))
        reader = sock.makefile("rb")
        (size,) = struct.unpack(">i", reader.read(4))
        cid, response = decode_response(entity.__api_key__, entity.__version__, reader.read(size))
    assert cid == 7
    return response


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_every_version(two_dir_cluster: tuple[LocalCluster, list[Path]], produced: str, version: int) -> None:
    cluster, dirs = two_dir_cluster
    cls = request_class(ApiKey.DESCRIBE_LOG_DIRS, version)
    response = raw_request(cluster.bootstrap_servers, cls(topics=None))
    assert getattr(response, "error_code", 0) == 0
    assert [r.log_dir for r in response.results] == [os.path.abspath(d) for d in dirs]
    sizes = {
        TopicPartition(t.name, int(p.partition_index)): int(p.partition_size)
        for r in response.results
        for t in r.topics
        if t.name == produced
        for p in t.partitions
    }
    assert sizes == on_disk_sizes(dirs, produced)
    for r in response.results:
        if version >= 4:
            assert 0 < r.usable_bytes <= r.total_bytes
        else:
            assert not hasattr(r, "total_bytes")
