"""Metadata cache: parsing responses, refresh timing, KIP-320 stale-epoch protection."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import response as m12

from spark_kafkalite.client.metadata import Metadata, fetch_cluster, parse_metadata_response
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import KafkaConnectionError, KafkaTimeoutError

TOPIC_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def response(leader_epoch: int = 3, leader: int = 1, topics_extra: tuple = ()) -> m12.MetadataResponse:
    partitions = tuple(
        m12.MetadataResponsePartition(
            error_code=ErrorCode.none,
            partition_index=p,
            leader_id=leader,
            leader_epoch=leader_epoch,
            replica_nodes=(1, 2),
            isr_nodes=(1,),
            offline_replicas=(),
        )
        for p in range(2)
    )
    topics = (
        m12.MetadataResponseTopic(
            error_code=ErrorCode.none,
            name="t",
            topic_id=TOPIC_ID,
            is_internal=False,
            partitions=partitions,
        ),
        m12.MetadataResponseTopic(
            error_code=ErrorCode.unknown_topic_or_partition,
            name="missing",
            topic_id=None,
            is_internal=False,
            partitions=(),
        ),
        *topics_extra,
    )
    return m12.MetadataResponse(
        brokers=(
            m12.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9092, rack=None),
            m12.MetadataResponseBroker(node_id=2, host="127.0.0.1", port=9093, rack=None),
        ),
        throttle_time=datetime.timedelta(0),
        cluster_id="abc",
        controller_id=2,
        topics=topics,
    )


def test_parse_metadata_response() -> None:
    cluster = parse_metadata_response(response())
    assert cluster.nodes == {1: ("127.0.0.1", 9092), 2: ("127.0.0.1", 9093)}
    assert cluster.cluster_id == "abc" and cluster.controller_id == 2
    assert cluster.leader_for(TopicPartition("t", 1)) == 1
    pm = cluster.partition(TopicPartition("t", 0))
    assert pm is not None and pm.replicas == (1, 2) and pm.isr == (1,) and pm.leader_epoch == 3
    assert cluster.topic_ids["t"] == TOPIC_ID
    assert cluster.topic_errors == {"missing": ErrorCode.unknown_topic_or_partition}
    assert "missing" not in cluster.partitions
    assert cluster.available_partitions("t") == [0, 1]


def test_leaderless_partitions_are_not_available() -> None:
    cluster = parse_metadata_response(response(leader=-1))
    assert cluster.leader_for(TopicPartition("t", 0)) is None
    assert cluster.available_partitions("t") == []


def test_stale_leader_epoch_is_ignored() -> None:
    newer = parse_metadata_response(response(leader_epoch=5, leader=2))
    older = parse_metadata_response(response(leader_epoch=4, leader=1), previous=newer)
    assert older.leader_for(TopicPartition("t", 0)) == 2
    assert older.partition(TopicPartition("t", 0)).leader_epoch == 5  # type: ignore[union-attr]


def test_bootstrap_nodes_until_the_first_response() -> None:
    md = Metadata({"bootstrap.servers": "a:1,b:2"})
    assert sorted(md.node_ids()) == [-2, -1]
    assert md.node_address(-2) == ("b", 2)
    md.update(response(), 0.0)
    assert sorted(md.node_ids()) == [1, 2]
    assert md.version == 1


def test_refresh_timing() -> None:
    md = Metadata({"bootstrap.servers": "a:1", "metadata.max.age.ms": 1000, "retry.backoff.ms": 100})
    assert md.time_to_next_update(0.0) == 0  # nothing known yet
    md.mark_update_attempt(0.0)
    md.build_request()
    md.update(response(), 10.0)
    assert md.time_to_next_update(20.0) == 990.0  # max age
    md.request_update()
    assert md.time_to_next_update(50.0) == 50.0  # on demand, but retry.backoff.ms after the attempt
    assert md.time_to_next_update(200.0) == 0


def test_new_topic_is_fetched_without_the_retry_backoff() -> None:
    """Java's Metadata.requestUpdateForNewTopics: a topic of new interest is no retry."""
    md = Metadata({"bootstrap.servers": "a:1", "metadata.max.age.ms": 1000, "retry.backoff.ms": 100})
    md.mark_update_attempt(0.0)
    md.build_request()
    md.update(response(), 10.0)
    md.request_update()
    assert md.time_to_next_update(20.0) == 80.0  # a plain refresh waits out the backoff
    assert md.add_topics("new-topic") is True
    assert md.time_to_next_update(20.0) == 0  # a new topic does not
    md.mark_update_attempt(20.0)
    assert md.add_topics("new-topic") is False
    md.request_update()
    assert md.time_to_next_update(30.0) == 90.0  # known topics back off again
    md.set_topics({"new-topic", "other"})
    assert md.time_to_next_update(30.0) == 0


def test_update_requested_during_a_request_survives_its_response() -> None:
    md = Metadata({"bootstrap.servers": "a:1"})
    md.build_request()  # request in flight
    md.add_topics("new-topic")  # needs a newer response
    md.update(response(), 0.0)
    assert md.update_requested()


def test_retriable_topic_error_schedules_another_refresh() -> None:
    md = Metadata({"bootstrap.servers": "a:1"})
    creating = m12.MetadataResponseTopic(
        error_code=ErrorCode.leader_not_available,
        name="creating",
        topic_id=None,
        is_internal=False,
        partitions=(),
    )
    md.build_request()
    md.update(response(topics_extra=(creating,)), 0.0)
    assert md.update_requested()


def test_request_topics() -> None:
    md = Metadata({"bootstrap.servers": "a:1"})
    assert md.add_topics("b", "a") is True
    assert md.add_topics("a") is False
    request = md.build_request().build(12)
    assert [t.name for t in request.topics] == ["a", "b"]
    assert request.allow_auto_topic_creation is False


class _RefusingClient:
    """Every request fails: first the connection, then every wait runs out."""

    def __init__(self) -> None:
        self.sent = 0

    def least_loaded_node(self) -> int:
        return -1

    def send(self, node: int, request: object) -> int:
        self.sent += 1
        return self.sent

    def wait_for(self, future: int, timeout_ms: float) -> object:
        if future == 1:
            raise KafkaConnectionError("TLS handshake failed: is this a TLS listener?")
        raise KafkaTimeoutError(f"no response within {timeout_ms} ms")

    def poll(self, timeout_ms: float) -> None:
        return None


def test_fetch_cluster_names_the_connection_error_over_a_later_cut_short_wait() -> None:
    client = _RefusingClient()
    with pytest.raises(KafkaTimeoutError, match="is this a TLS listener"):
        fetch_cluster(client, None, timeout_ms=30.0, retry_backoff_ms=1.0)
    assert client.sent >= 2
