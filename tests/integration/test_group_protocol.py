"""Group coordinator APIs over raw sockets (kio entities per version): the error paths a real
client rarely shows (MEMBER_ID_REQUIRED, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
REBALANCE_IN_PROGRESS, NOT_COORDINATOR, INCONSISTENT_GROUP_PROTOCOL, NON_EMPTY_GROUP,
GROUP_ID_NOT_FOUND, FENCED_INSTANCE_ID) and every served version of each group API."""

from __future__ import annotations

import datetime
import socket
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build, nested
from spark_kafkalite.protocol.errors import ErrorCode as E
from spark_kafkalite.protocol.framing import decode_response, encode_request

pytestmark = pytest.mark.timeout(90)

MS = datetime.timedelta(milliseconds=1)
OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "100",
    "group.min.session.timeout.ms": "1000",
}


class Conn:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=20)
        self.cid = 0
        self.sent: list[tuple[int, Any]] = []

    def send(self, entity: Any) -> None:
        self.cid += 1
        self.sock.sendall(encode_request(entity, self.cid, "group-test"))
        self.sent.append((self.cid, entity))

    def receive(self) -> Any:
        cid_expected, entity = self.sent.pop(0)
        size = struct.unpack(">i", self._exactly(4))[0]
        cid, response = decode_response(entity.__api_key__, entity.__version__, self._exactly(size))
        assert cid == cid_expected
        return response

    def request(self, entity: Any) -> Any:
        self.send(entity)
        return self.receive()

    def _exactly(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by broker")
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def gcluster() -> Iterator[LocalCluster]:
    cluster = LocalCluster(brokers=1, config_overrides=OVERRIDES)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


TOPICS = ("t", "t1", "t2", "topic-x", "topic-y")  # 4 partitions each, in the module's cluster


@pytest.fixture(scope="module")
def topics(gcluster: LocalCluster) -> tuple[str, ...]:
    c = Conn(gcluster.bootstrap_servers)
    try:
        cls = request_class(ApiKey.CREATE_TOPICS, 5)
        topic_cls = nested(cls, "CreatableTopic")
        r = c.request(
            build(
                cls,
                topics=tuple(
                    topic_cls(name=n, num_partitions=4, replication_factor=1, assignments=(), configs=())
                    for n in TOPICS
                ),
                timeout=10000 * MS,
                validate_only=False,
            )
        )
        assert [t.error_code for t in r.topics] == [0] * len(TOPICS)
    finally:
        c.close()
    return TOPICS


@pytest.fixture
def conn(gcluster: LocalCluster, topics: tuple[str, ...]) -> Iterator[Conn]:
    c = Conn(gcluster.bootstrap_servers)
    find_coordinator(c, "warm-up")  # creates __consumer_offsets
    yield c
    c.close()


def find_coordinator(conn: Conn, key: str, version: int = 3, key_type: int = 0) -> Any:
    cls = request_class(ApiKey.FIND_COORDINATOR, version)
    return conn.request(build(cls, key=key, key_type=key_type, coordinator_keys=(key,)))


def join(
    conn: Conn,
    group: str,
    member_id: str = "",
    *,
    version: int = 7,
    instance_id: str | None = None,
    protocol_type: str = "consumer",
    protocols: tuple[tuple[str, bytes], ...] = (("range", b"meta"),),
    session_ms: int = 6000,
    send_only: bool = False,
) -> Any:
    cls = request_class(ApiKey.JOIN_GROUP, version)
    proto_cls = nested(cls, "JoinGroupRequestProtocol")
    entity = build(
        cls,
        group_id=group,
        session_timeout=session_ms * MS,
        rebalance_timeout=10000 * MS,
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type=protocol_type,
        protocols=tuple(proto_cls(name=n, metadata=m) for n, m in protocols),
        reason=None,
    )
    if send_only:
        conn.send(entity)
        return None
    return conn.request(entity)


def sync(
    conn: Conn,
    group: str,
    member_id: str,
    generation: int,
    assignments: dict[str, bytes],
    version: int = 3,
    **kw: Any,
) -> Any:
    cls = request_class(ApiKey.SYNC_GROUP, version)
    a_cls = nested(cls, "SyncGroupRequestAssignment")
    return conn.request(
        build(
            cls,
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=kw.get("instance_id"),
            protocol_type=kw.get("protocol_type"),
            protocol_name=kw.get("protocol_name"),
            assignments=tuple(a_cls(member_id=m, assignment=a) for m, a in assignments.items()),
        )
    )


def heartbeat(
    conn: Conn, group: str, member_id: str, generation: int, version: int = 3, instance_id: str | None = None
) -> int:
    cls = request_class(ApiKey.HEARTBEAT, version)
    r = conn.request(
        build(
            cls, group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance_id
        )
    )
    return int(r.error_code)


def stable_member(conn: Conn, group: str, assignment: bytes = b"A") -> Any:
    first = join(conn, group)
    assert first.error_code == E.member_id_required and first.member_id
    joined = join(conn, group, first.member_id)
    assert joined.error_code == 0 and joined.leader == joined.member_id
    synced = sync(conn, group, joined.member_id, joined.generation_id, {joined.member_id: assignment})
    assert synced.error_code == 0 and synced.assignment == assignment
    return joined


def delete_groups(conn: Conn, *groups: str, version: int = 2) -> dict[str, int]:
    cls = request_class(ApiKey.DELETE_GROUPS, version)
    r = conn.request(build(cls, groups_names=groups))
    return {x.group_id: int(x.error_code) for x in r.results}


def commit(
    conn: Conn,
    group: str,
    offsets: dict[tuple[str, int], int],
    *,
    version: int = 8,
    generation: int = -1,
    member_id: str = "",
) -> dict[tuple[str, int], int]:
    cls = request_class(ApiKey.OFFSET_COMMIT, version)
    t_cls = nested(cls, "OffsetCommitRequestTopic")
    p_cls = nested(cls, "OffsetCommitRequestPartition")
    topics: dict[str, list[Any]] = {}
    for (t, p), off in offsets.items():
        topics.setdefault(t, []).append(
            build(
                p_cls,
                partition_index=p,
                committed_offset=off,
                committed_leader_epoch=-1,
                committed_metadata=f"m{off}",
                commit_timestamp=-1,
            )
        )
    r = conn.request(
        build(
            cls,
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=None,
            retention_time=-1 * MS,
            topics=tuple(t_cls(name=t, partitions=tuple(ps)) for t, ps in topics.items()),
        )
    )
    return {(t.name, p.partition_index): int(p.error_code) for t in r.topics for p in t.partitions}


def fetch_offsets(
    conn: Conn, group: str, partitions: list[tuple[str, int]] | None, version: int = 6
) -> tuple[int, dict[tuple[str, int], tuple[int, str | None, int]]]:
    cls = request_class(ApiKey.OFFSET_FETCH, version)
    if version >= 8:
        g_cls = nested(cls, "OffsetFetchRequestGroup")
        t_cls = nested(cls, "OffsetFetchRequestTopics")
    else:
        t_cls = nested(cls, "OffsetFetchRequestTopic")
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        topics = tuple(t_cls(name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items())
    if version >= 8:
        r = conn.request(
            build(
                cls,
                groups=(build(g_cls, group_id=group, member_id=None, member_epoch=-1, topics=topics),),
                require_stable=False,
            )
        )
        g = r.groups[0]
        error, topics_out = int(g.error_code), g.topics
    else:
        r = conn.request(build(cls, group_id=group, topics=topics, require_stable=False))
        error, topics_out = int(getattr(r, "error_code", 0)), r.topics
    return error, {
        (t.name, p.partition_index): (int(p.committed_offset), p.metadata, int(p.error_code))
        for t in topics_out
        for p in t.partitions
    }


def _group() -> str:
    return "raw-" + uuid.uuid4().hex[:10]


# -- coordinator discovery ------------------------------------------------------------------------
def test_not_coordinator_before_offsets_topic_exists_then_found() -> None:
    with LocalCluster(brokers=1, config_overrides=OVERRIDES) as cluster:
        c = Conn(cluster.bootstrap_servers)
        try:
            r = join(c, "early-group", version=3)
            assert r.error_code == E.not_coordinator  # no __consumer_offsets partition is led here yet
            assert heartbeat(c, "early-group", "m", 1) == E.not_coordinator
            fc = find_coordinator(c, "early-group", version=0)
            host, port = cluster.bootstrap_servers.rsplit(":", 1)
            assert (fc.error_code, fc.node_id, fc.port) == (0, 1, int(port))
            assert join(c, "early-group", version=3).error_code == 0
        finally:
            c.close()


def test_coordinator_not_available_while_offsets_topic_cannot_be_created() -> None:
    overrides = {  # Kafka's defaults: 3 > 1 broker
        **OVERRIDES,
        "offsets.topic.replication.factor": "3",
        "transaction.state.log.replication.factor": "3",
    }
    with LocalCluster(brokers=1, config_overrides=overrides) as cluster:
        c = Conn(cluster.bootstrap_servers)
        try:
            r = find_coordinator(c, "g", version=1)
            assert r.error_code == E.coordinator_not_available and "__consumer_offsets" in r.error_message
            assert join(c, "g").error_code == E.not_coordinator
            # likewise __transaction_state (Kafka's transaction.state.log.replication.factor=3)
            r = find_coordinator(c, "txn", version=1, key_type=1)
            assert r.error_code == E.coordinator_not_available and "__transaction_state" in r.error_message
        finally:
            c.close()


@pytest.mark.parametrize("version", range(0, 7))
def test_find_coordinator_every_version(conn: Conn, gcluster: LocalCluster, version: int) -> None:
    r = find_coordinator(conn, "some-group", version)
    port = int(gcluster.bootstrap_servers.rsplit(":", 1)[1])
    entries = r.coordinators if version >= 4 else [r]
    assert [(e.error_code, e.node_id, e.port) for e in entries] == [(0, 1, port)]


def test_find_coordinator_batched_and_transaction_key(conn: Conn) -> None:
    cls = request_class(ApiKey.FIND_COORDINATOR, 4)
    r = conn.request(build(cls, key_type=0, coordinator_keys=("a", "b", "c")))
    assert [(c.key, c.error_code) for c in r.coordinators] == [("a", 0), ("b", 0), ("c", 0)]
    r = conn.request(build(cls, key_type=1, coordinator_keys=("txn",)))
    assert [(c.key, c.error_code, c.node_id) for c in r.coordinators] == [
        ("txn", 0, 1)
    ]  # __transaction_state
    assert find_coordinator(conn, "txn", version=2, key_type=1).error_code == 0
    share = request_class(ApiKey.FIND_COORDINATOR, 6)
    r = conn.request(build(share, key_type=2, coordinator_keys=("g:topic:0",)))
    assert r.coordinators[0].error_code == E.invalid_request


# -- membership error paths -------------------------------------------------------------------------
def test_member_id_required_illegal_generation_unknown_member(conn: Conn) -> None:
    group = _group()
    first = join(conn, group, version=4)
    assert first.error_code == E.member_id_required and first.member_id.startswith("group-test-")
    joined = join(conn, group, first.member_id, version=4)
    assert joined.error_code == 0 and joined.generation_id == 1 and joined.protocol_name == "range"
    assert [m.member_id for m in joined.members] == [first.member_id]
    gen = joined.generation_id
    assert sync(conn, group, joined.member_id, gen + 1, {}).error_code == E.illegal_generation
    assert sync(conn, group, "stranger", gen, {}).error_code == E.unknown_member_id
    assert sync(conn, group, joined.member_id, gen, {joined.member_id: b"x"}).assignment == b"x"
    assert heartbeat(conn, group, joined.member_id, gen) == 0
    assert heartbeat(conn, group, joined.member_id, gen + 1) == E.illegal_generation
    assert heartbeat(conn, group, "stranger", gen) == E.unknown_member_id
    assert join(conn, group, "made-up-member").error_code == E.unknown_member_id
    assert join(conn, group, session_ms=500).error_code == E.invalid_session_timeout
    assert join(conn, "", version=4).error_code == E.invalid_group_id


def test_rebalance_in_progress_and_inconsistent_protocol(conn: Conn, gcluster: LocalCluster) -> None:
    group = _group()
    a = stable_member(conn, group)
    other = Conn(gcluster.bootstrap_servers)
    try:
        assert join(other, group, protocol_type="connect").error_code == E.inconsistent_group_protocol
        assert join(other, group, protocols=(("sticky", b""),)).error_code == E.inconsistent_group_protocol
        b_id = join(other, group).member_id
        join(other, group, b_id, send_only=True)  # parked until a rejoins
        assert heartbeat(conn, group, a.member_id, a.generation_id) == E.rebalance_in_progress
        assert sync(conn, group, a.member_id, a.generation_id, {}).error_code == E.rebalance_in_progress
        rejoined = join(conn, group, a.member_id)
        b_joined = other.receive()
        assert rejoined.error_code == b_joined.error_code == 0
        assert rejoined.generation_id == b_joined.generation_id == a.generation_id + 1
        leader = rejoined if rejoined.leader == a.member_id else b_joined
        assert len(leader.members) == 2
        # v5 SyncGroup checks protocol type / name
        bad = sync(
            conn,
            group,
            a.member_id,
            rejoined.generation_id,
            {},
            version=5,
            protocol_type="consumer",
            protocol_name="roundrobin",
        )
        assert bad.error_code == E.inconsistent_group_protocol
    finally:
        other.close()


def test_session_timeout_expires_member(conn: Conn) -> None:
    group = _group()
    first = join(conn, group)
    joined = join(conn, group, first.member_id, session_ms=1000)
    sync(conn, group, joined.member_id, joined.generation_id, {joined.member_id: b""})
    import time

    time.sleep(2.5)  # no heartbeats: removed after session.timeout.ms
    assert heartbeat(conn, group, joined.member_id, joined.generation_id) == E.unknown_member_id
    assert describe(conn, group).group_state == "Empty"


def test_leave_group_versions_and_static_fencing(conn: Conn) -> None:
    group = _group()
    a = stable_member(conn, group)
    cls = request_class(ApiKey.LEAVE_GROUP, 1)
    assert conn.request(build(cls, group_id=group, member_id="ghost")).error_code == E.unknown_member_id
    assert conn.request(build(cls, group_id=group, member_id=a.member_id)).error_code == 0
    assert describe(conn, group).group_state == "Empty"
    # static membership (JoinGroup v5+): a second join with the same instance id fences the first id
    s1 = join(conn, group, instance_id="inst-1")
    assert s1.error_code == 0
    sync(conn, group, s1.member_id, s1.generation_id, {s1.member_id: b"S"}, instance_id="inst-1")
    s2 = join(conn, group, instance_id="inst-1")
    assert s2.error_code == 0 and s2.member_id != s1.member_id and s2.generation_id == s1.generation_id
    assert (
        heartbeat(conn, group, s1.member_id, s1.generation_id, instance_id="inst-1") == E.fenced_instance_id
    )
    assert heartbeat(conn, group, s2.member_id, s2.generation_id, instance_id="inst-1") == 0
    assert s2.members == ()  # v7: the rejoining static leader gets nothing to assign
    s3 = join(conn, group, instance_id="inst-1", version=9)
    assert s3.skip_assignment and [m.member_id for m in s3.members] == [s3.member_id]  # KIP-814
    assert (
        heartbeat(conn, group, s2.member_id, s2.generation_id, instance_id="inst-1") == E.fenced_instance_id
    )
    leave = request_class(ApiKey.LEAVE_GROUP, 5)
    member_cls = nested(leave, "MemberIdentity")
    r = conn.request(
        build(
            leave,
            group_id=group,
            members=(
                member_cls(member_id="", group_instance_id="inst-1", reason="bye"),
                member_cls(member_id="x", group_instance_id=None, reason=None),
            ),
        )
    )
    assert r.error_code == 0 and [m.error_code for m in r.members] == [0, E.unknown_member_id]


# -- offsets and admin ------------------------------------------------------------------------------
def test_commit_fetch_and_group_errors(conn: Conn) -> None:
    group = _group()
    assert commit(conn, group, {("t1", 0): 5, ("t1", 1): 6, ("t2", 0): 7}) == {
        ("t1", 0): 0,
        ("t1", 1): 0,
        ("t2", 0): 0,
    }
    err, got = fetch_offsets(conn, group, [("t1", 0), ("t1", 3)])
    assert err == 0 and got == {("t1", 0): (5, "m5", 0), ("t1", 3): (-1, "", 0)}
    # partitions unknown to the metadata are refused, the others committed
    assert commit(conn, group, {("t1", 9): 1, ("no-such-topic", 0): 1, ("t2", 1): 3}) == {
        ("t1", 9): E.unknown_topic_or_partition,
        ("no-such-topic", 0): E.unknown_topic_or_partition,
        ("t2", 1): 0,
    }
    err, everything = fetch_offsets(conn, group, None)
    assert err == 0 and {k: v[0] for k, v in everything.items()} == {
        ("t1", 0): 5,
        ("t1", 1): 6,
        ("t2", 0): 7,
        ("t2", 1): 3,
    }
    assert commit(conn, _group(), {("t1", 0): 1}, generation=3, member_id="m") == {
        ("t1", 0): E.illegal_generation
    }
    a = stable_member(conn, group)
    assert commit(conn, group, {("t1", 0): 9}) == {
        ("t1", 0): E.unknown_member_id
    }  # standalone, group not empty
    assert commit(conn, group, {("t1", 0): 9}, generation=a.generation_id, member_id=a.member_id) == {
        ("t1", 0): 0
    }
    assert delete_groups(conn, group, "never-existed-" + group) == {
        group: E.non_empty_group,
        "never-existed-" + group: E.group_id_not_found,
    }
    offset_delete = request_class(47, 0)
    t_cls = nested(offset_delete, "OffsetDeleteRequestTopic")
    p_cls = nested(offset_delete, "OffsetDeleteRequestPartition")
    r = conn.request(
        build(
            offset_delete, group_id=group, topics=(t_cls(name="t2", partitions=(p_cls(partition_index=0),)),)
        )
    )
    assert (
        r.error_code == E.non_empty_group
    )  # the raw member's metadata is not a ConsumerProtocol subscription
    leave = request_class(ApiKey.LEAVE_GROUP, 3)
    member_cls = nested(leave, "MemberIdentity")
    assert (
        conn.request(
            build(leave, group_id=group, members=(member_cls(member_id=a.member_id, group_instance_id=None),))
        ).error_code
        == 0
    )
    r = conn.request(
        build(
            offset_delete, group_id=group, topics=(t_cls(name="t2", partitions=(p_cls(partition_index=0),)),)
        )
    )
    assert r.error_code == 0 and r.topics[0].partitions[0].error_code == 0
    assert delete_groups(conn, group) == {group: 0}
    assert fetch_offsets(conn, group, None)[1] == {}
    assert delete_groups(conn, group) == {group: E.group_id_not_found}


@pytest.mark.parametrize("version", range(2, 10))
def test_offset_commit_every_version(conn: Conn, version: int) -> None:
    group = _group()
    assert commit(conn, group, {("topic-x", 3): 100 + version}, version=version) == {("topic-x", 3): 0}
    assert fetch_offsets(conn, group, [("topic-x", 3)])[1][("topic-x", 3)][0] == 100 + version


@pytest.mark.parametrize("version", range(1, 10))
def test_offset_fetch_every_version(conn: Conn, version: int) -> None:
    group = _group()
    commit(conn, group, {("topic-y", 0): 42})
    err, got = fetch_offsets(conn, group, [("topic-y", 0), ("topic-y", 1)], version=version)
    assert err == 0 and got == {("topic-y", 0): (42, "m42", 0), ("topic-y", 1): (-1, "", 0)}


def test_offset_fetch_v8_batched_groups(conn: Conn) -> None:
    g1, g2 = _group(), _group()
    commit(conn, g1, {("t", 0): 1})
    commit(conn, g2, {("t", 0): 2})
    cls = request_class(ApiKey.OFFSET_FETCH, 8)
    g_cls = nested(cls, "OffsetFetchRequestGroup")
    r = conn.request(
        build(
            cls,
            groups=(build(g_cls, group_id=g1, topics=None), build(g_cls, group_id=g2, topics=None)),
            require_stable=True,
        )
    )
    assert {g.group_id: [p.committed_offset for t in g.topics for p in t.partitions] for g in r.groups} == {
        g1: [1],
        g2: [2],
    }


@pytest.mark.parametrize("version", range(0, 10))
def test_join_group_every_version(conn: Conn, version: int) -> None:
    group = _group()
    r = join(conn, group, version=version)
    if version >= 4:
        assert r.error_code == E.member_id_required
        r = join(conn, group, r.member_id, version=version)
    assert r.error_code == 0 and r.generation_id == 1 and r.leader == r.member_id
    assert r.protocol_name == "range"
    assert sync(conn, group, r.member_id, 1, {r.member_id: b"z"}, version=min(version, 5)).assignment == b"z"
    assert heartbeat(conn, group, r.member_id, 1, version=min(version, 4)) == 0


def describe(conn: Conn, group: str, version: int = 5) -> Any:
    cls = request_class(ApiKey.DESCRIBE_GROUPS, version)
    return conn.request(build(cls, groups=(group,), include_authorized_operations=False)).groups[0]


@pytest.mark.parametrize("version", range(0, 6))
def test_list_and_describe_every_version(conn: Conn, version: int) -> None:
    group = _group()
    a = stable_member(conn, group, assignment=b"assigned")
    d = describe(conn, group, version)
    assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == (
        0,
        "Stable",
        "consumer",
        "range",
    )
    assert [(m.member_id, m.client_id, m.member_metadata, m.member_assignment) for m in d.members] == [
        (a.member_id, "group-test", b"meta", b"assigned")
    ]
    assert [m.client_host for m in d.members] == ["/127.0.0.1"]
    assert describe(conn, "unknown-" + group, version).group_state == "Dead"
    cls = request_class(ApiKey.LIST_GROUPS, version)
    listed = conn.request(build(cls, states_filter=(), types_filter=()))
    assert listed.error_code == 0 and group in {g.group_id for g in listed.groups}
    if version >= 4:
        only_empty = conn.request(build(cls, states_filter=("Empty",), types_filter=()))
        assert group not in {g.group_id for g in only_empty.groups}
        stable = conn.request(build(cls, states_filter=("stable",), types_filter=()))
        assert group in {g.group_id for g in stable.groups}


def test_offsets_of_deleted_topics_are_removed(conn: Conn) -> None:
    group = _group()
    name = "doomed-" + uuid.uuid4().hex[:8]
    create = request_class(ApiKey.CREATE_TOPICS, 5)
    topic_cls = nested(create, "CreatableTopic")
    created = conn.request(
        build(
            create,
            topics=(
                topic_cls(name=name, num_partitions=2, replication_factor=1, assignments=(), configs=()),
            ),
            timeout=10000 * MS,
            validate_only=False,
        )
    )
    assert created.topics[0].error_code == 0
    assert commit(conn, group, {(name, 0): 3, (name, 1): 4, ("t", 0): 5}) == {
        (name, 0): 0,
        (name, 1): 0,
        ("t", 0): 0,
    }
    delete = request_class(ApiKey.DELETE_TOPICS, 4)
    assert conn.request(build(delete, topic_names=(name,), timeout=10000 * MS)).responses[0].error_code == 0
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        remaining = fetch_offsets(conn, group, None)[1]
        if set(remaining) == {("t", 0)}:
            break
        time.sleep(0.1)
    assert set(fetch_offsets(conn, group, None)[1]) == {("t", 0)}
