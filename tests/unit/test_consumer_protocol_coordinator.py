"""Pure logic of the client group machinery with an injected clock and a scripted network
client: Heartbeat timers, the JoinGroup/SyncGroup state machine (MEMBER_ID_REQUIRED, leader
assignment), heartbeat error handling, poll-timeout leave, commit error mapping."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from spark_kafkalite.client.consumer.abstract_coordinator import MemberState
from spark_kafkalite.client.consumer.consumer_coordinator import (
    GROUP_DEFAULTS,
    CommitFailedError,
    ConsumerCoordinator,
)
from spark_kafkalite.client.consumer.group_requests import OffsetAndMetadata
from spark_kafkalite.client.consumer.heartbeat import Heartbeat
from spark_kafkalite.client.consumer.subscription_state import SubscriptionState
from spark_kafkalite.client.metadata import Metadata
from spark_kafkalite.client.request_future import RequestFuture
from spark_kafkalite.client.requests import CLIENT_API_VERSIONS, RequestBuilder
from spark_kafkalite.client.types import TopicPartition as TP
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.consumer_protocol import decode_assignment, decode_subscription
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.errors import ErrorCode, RebalanceInProgressError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_heartbeat_timers() -> None:
    clock = Clock()
    hb = Heartbeat(10000, 3000, 60000, 100, clock)
    assert not hb.should_heartbeat(clock.now)
    clock.now += 3000
    assert hb.should_heartbeat(clock.now)
    hb.sent_heartbeat(clock.now)
    assert not hb.should_heartbeat(clock.now + 5000)  # one in flight
    hb.fail_heartbeat(clock.now)
    assert hb.time_to_next_heartbeat(clock.now) == 100
    assert not hb.session_timeout_expired(clock.now + 6999)
    assert hb.session_timeout_expired(clock.now + 7000)
    hb.received_heartbeat(clock.now)
    assert not hb.session_timeout_expired(clock.now + 9999)
    assert hb.poll_timeout_expired(1000 + 60000)
    hb.poll(clock.now)
    assert not hb.poll_timeout_expired(1000 + 60000)
    with pytest.raises(ValueError):
        Heartbeat(3000, 3000, 1, 1)


class ScriptedClient:
    """Answers each request with ``responders[api_key](request)`` on the next ``poll``."""

    def __init__(self, responders: dict[int, Callable[[Any], dict[str, Any]]]) -> None:
        self.responders = responders
        self.sent: list[tuple[int, Any]] = []
        self.pending: list[tuple[RequestFuture, Any]] = []
        self.nodes: dict[int, tuple[str, int]] = {}

    def add_node(self, node_id: int, host: str, port: int) -> None:
        self.nodes[node_id] = (host, port)

    def is_unavailable(self, node_id: int) -> bool:
        return False

    def least_loaded_node(self) -> int:
        return 1

    def wakeup(self) -> None:
        pass

    def send(self, node: int, builder: RequestBuilder, timeout_ms: float | None = None) -> RequestFuture:
        version = CLIENT_API_VERSIONS[builder.api_key][1]
        if builder.max_version is not None:
            version = min(version, builder.max_version)
        request = builder.build(version)
        self.sent.append((node, request))
        future = RequestFuture()
        cls = response_class(builder.api_key, version)
        fields = self.responders[builder.api_key](request)
        self.pending.append((future, (cls, fields)))
        return future

    def poll(self, timeout_ms: float = 0) -> None:
        pending, self.pending = self.pending, []
        for future, (cls, fields) in pending:
            future.success(cls(**fields) if isinstance(fields, dict) else fields(cls))


def _coordinator(client: ScriptedClient, clock: Clock, **config: Any) -> ConsumerCoordinator:
    cfg = {
        **GROUP_DEFAULTS,
        "group.id": "g",
        "retry.backoff.ms": 10,
        "request.timeout.ms": 1000,
        "bootstrap.servers": "127.0.0.1:1",
        "client.id": "c",
        **config,
    }
    metadata = Metadata(cfg)
    return ConsumerCoordinator(client, metadata, SubscriptionState(), cfg, None, clock)  # type: ignore[arg-type]


def _find(_: Any) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "node_id": 7,
        "host": "h",
        "port": 9,
        "throttle_time": 0,
        "error_message": None,
    }


def test_join_with_member_id_required_then_lead_and_sync() -> None:
    clock = Clock()
    joins: list[Any] = []
    syncs: list[Any] = []

    def join(request: Any) -> Any:
        joins.append(request)
        if not request.member_id:
            return lambda cls: make(
                cls,
                error_code=ErrorCode.member_id_required,
                member_id="m-1",
                generation_id=-1,
                protocol_name=None,
                leader="",
                members=(),
                throttle_time=0,
                protocol_type=None,
                skip_assignment=False,
            )
        member_cls = nested(response_class(ApiKey.JOIN_GROUP, 9), "JoinGroupResponseMember")
        members = (
            member_cls(member_id="m-1", group_instance_id=None, metadata=request.protocols[0].metadata),
        )
        return lambda cls: make(
            cls,
            error_code=ErrorCode.none,
            member_id="m-1",
            generation_id=3,
            protocol_name="range",
            leader="m-1",
            members=members,
            throttle_time=0,
            protocol_type="consumer",
            skip_assignment=False,
        )

    def sync(request: Any) -> Any:
        syncs.append(request)
        return lambda cls: make(
            cls,
            error_code=ErrorCode.none,
            assignment=request.assignments[0].assignment,
            throttle_time=0,
            protocol_type="consumer",
            protocol_name="range",
        )

    client = ScriptedClient(
        {ApiKey.FIND_COORDINATOR: _find, ApiKey.JOIN_GROUP: join, ApiKey.SYNC_GROUP: sync}
    )
    coordinator = _coordinator(client, clock)
    coordinator.subscribe(["t"], None)
    # metadata for the leader's assignment: topic t with 2 partitions
    topic_cls = nested(response_class(ApiKey.METADATA, 12), "MetadataResponseTopic")
    part_cls = nested(response_class(ApiKey.METADATA, 12), "MetadataResponsePartition")
    broker_cls = nested(response_class(ApiKey.METADATA, 12), "MetadataResponseBroker")
    import uuid

    response = make(
        response_class(ApiKey.METADATA, 12),
        throttle_time=0,
        cluster_id="c",
        controller_id=1,
        brokers=(broker_cls(node_id=1, host="h", port=9, rack=None),),
        topics=(
            topic_cls(
                error_code=0,
                name="t",
                topic_id=uuid.uuid4(),
                is_internal=False,
                topic_authorized_operations=0,
                partitions=tuple(
                    part_cls(
                        error_code=0,
                        partition_index=p,
                        leader_id=1,
                        leader_epoch=0,
                        replica_nodes=(1,),
                        isr_nodes=(1,),
                        offline_replicas=(),
                    )
                    for p in range(2)
                ),
            ),
        ),
    )
    coordinator._metadata.update(response, 0)
    assert coordinator.ensure_active_group(clock.now + 1000)
    assert [j.member_id for j in joins] == ["", "m-1"]
    assert [name for name, _ in [(p.name, p.metadata) for p in joins[1].protocols]] == [
        "range",
        "cooperative-sticky",
    ]
    assert decode_subscription(joins[1].protocols[0].metadata).topics == ("t",)
    assert coordinator.state is MemberState.STABLE
    assert coordinator.generation.generation_id == 3 and coordinator.generation.member_id == "m-1"
    assert decode_assignment(syncs[0].assignments[0].assignment).partitions == (TP("t", 0), TP("t", 1))
    assert coordinator._subscriptions.assigned_partitions() == {TP("t", 0), TP("t", 1)}
    assert client.nodes[2**31 - 1 - 7] == ("h", 9)  # separate coordinator connection

    # heartbeat errors
    coordinator.heartbeat_sender.handle_heartbeat_error(
        int(ErrorCode.rebalance_in_progress), coordinator.generation
    )
    assert coordinator.rejoin_needed_or_pending() and coordinator.state is MemberState.STABLE
    generation = coordinator.generation
    coordinator.heartbeat_sender.handle_heartbeat_error(int(ErrorCode.illegal_generation), generation)
    assert coordinator.generation.member_id == "m-1" and coordinator.generation.generation_id == -1
    assert coordinator.state is MemberState.UNJOINED
    coordinator.heartbeat_sender.handle_heartbeat_error(
        int(ErrorCode.unknown_member_id), coordinator.generation
    )
    assert coordinator.generation.member_id == ""
    coordinator.heartbeat_sender.handle_heartbeat_error(
        int(ErrorCode.not_coordinator), coordinator.generation
    )
    assert coordinator._coordinator is None


def test_commit_errors_map_to_java_exceptions() -> None:
    clock = Clock()
    code = {"value": ErrorCode.illegal_generation}

    def commit(request: Any) -> Any:
        topic_cls = nested(response_class(ApiKey.OFFSET_COMMIT, 8), "OffsetCommitResponseTopic")
        part_cls = nested(response_class(ApiKey.OFFSET_COMMIT, 8), "OffsetCommitResponsePartition")
        return lambda cls: make(
            cls,
            throttle_time=0,
            topics=(
                topic_cls(name="t", partitions=(part_cls(partition_index=0, error_code=code["value"]),)),
            ),
        )

    client = ScriptedClient({ApiKey.FIND_COORDINATOR: _find, ApiKey.OFFSET_COMMIT: commit})
    coordinator = _coordinator(client, clock)
    offsets = {TP("t", 0): OffsetAndMetadata(5)}
    coordinator.subscribe(["t"], None)
    with pytest.raises(CommitFailedError):  # subscribed but never joined
        coordinator.offsets.commit_sync(offsets, clock.now + 1000)
    coordinator.state = MemberState.PREPARING_REBALANCE
    with pytest.raises(RebalanceInProgressError):
        coordinator.offsets.commit_sync(offsets, clock.now + 1000)
    from spark_kafkalite.client.consumer.abstract_coordinator import Generation

    coordinator.state = MemberState.STABLE
    coordinator.generation = Generation(4, "m", "range")
    with pytest.raises(CommitFailedError):
        coordinator.offsets.commit_sync(offsets, clock.now + 1000)
    assert coordinator.generation.generation_id == -1 and coordinator.rejoin_needed_or_pending()
    coordinator.state = MemberState.STABLE
    coordinator.generation = Generation(5, "m", "range")
    code["value"] = ErrorCode.rebalance_in_progress
    with pytest.raises(RebalanceInProgressError):
        coordinator.offsets.commit_sync(offsets, clock.now + 1000)
    code["value"] = ErrorCode.offset_metadata_too_large
    with pytest.raises(Exception, match="OFFSET_METADATA_TOO_LARGE"):
        coordinator.offsets.commit_sync(offsets, clock.now + 1000)
    code["value"] = ErrorCode.none
    coordinator.offsets.commit_sync(offsets, clock.now + 1000)
    sent = [r for _, r in client.sent if getattr(r, "generation_id_or_member_epoch", None) is not None]
    assert (sent[-1].generation_id_or_member_epoch, sent[-1].member_id) == (5, "m")


def test_poll_timeout_makes_the_heartbeat_thread_leave() -> None:
    clock = Clock()
    left: list[Any] = []

    def leave(request: Any) -> Any:
        left.append(request)
        return lambda cls: make(cls, throttle_time=0, error_code=0, members=())

    client = ScriptedClient({ApiKey.LEAVE_GROUP: leave})
    coordinator = _coordinator(client, clock, **{"max.poll.interval.ms": 5000})
    from spark_kafkalite.client.consumer.abstract_coordinator import Generation

    coordinator.generation = Generation(2, "m", "range")
    coordinator.state = MemberState.STABLE
    coordinator._heartbeat_enabled = True
    coordinator._coordinator = (99, "h", 9)
    coordinator.heartbeat_sender._client = client  # type: ignore[assignment]
    client.send_and_wait = lambda node, b, t: (client.send(node, b), client.poll(0))  # type: ignore[attr-defined]
    coordinator.heartbeat.reset_timeouts(clock.now)
    clock.now += 5001
    coordinator.heartbeat_sender.heartbeat_once()
    assert left and left[0].members[0].member_id == "m"
    assert coordinator.state is MemberState.UNJOINED and coordinator.generation.member_id == ""
    assert coordinator.rejoin_needed_or_pending()
