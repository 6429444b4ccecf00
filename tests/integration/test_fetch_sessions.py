"""KIP-227 fetch sessions against a real broker (in-process, so the session cache can be
inspected): raw-protocol error paths, kafka-python (uses sessions) and confluent-kafka
(librdkafka 2.x sends sessionless (0, -1) fetches) as independent peers, and our consumer."""

from __future__ import annotations

import datetime
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import kafka
import pytest
from inprocess_broker import InProcessBroker

from broker.replication.fetch_session_cache import fetch_session_cache_for
from spark_kafkalite.client.admin import KafkaAdminClient
from spark_kafkalite.client.consumer.kafka_consumer import KafkaConsumer
from spark_kafkalite.client.types import NewTopic, TopicPartition
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.framing import decode_response, encode_request

pytestmark = pytest.mark.timeout(90)


# -- fixtures ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    b = InProcessBroker(Path(tmp_path_factory.mktemp("sessions")))
    b.start()
    try:
        yield b
    finally:
        b.stop()


def cache_state(broker: InProcessBroker) -> dict[int, tuple[int, frozenset[tuple[str, int]], bool]]:
    """session id -> (epoch, partitions, privileged), read on the broker's loop."""

    def read() -> dict[int, tuple[int, frozenset[tuple[str, int]], bool]]:
        cache = fetch_session_cache_for(broker.ctx)
        return {s.id: (s.epoch, frozenset(s.partitions), s.privileged) for s in cache.sessions()}

    return broker.call(read)


def sessions_created(broker: InProcessBroker) -> int:
    return broker.call(lambda: fetch_session_cache_for(broker.ctx).sessions_created)


def create_topic(bootstrap: str, partitions: int) -> str:
    topic = "fs-" + uuid.uuid4().hex[:10]
    admin = KafkaAdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()
    return topic


def produce(bootstrap: str, topic: str, per_partition: dict[int, int], tag: str = "v") -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, count in per_partition.items():
        for i in range(count):
            producer.produce(topic, value=f"{tag}-{partition}-{i}".encode(), partition=partition)
    assert producer.flush(15) == 0


# -- raw wire -----------------------------------------------------------------------------------------
class Wire:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.correlation_id = 0

    def request(self, entity: Any) -> Any:
        self.correlation_id += 1
        self.sock.sendall(encode_request(entity, self.correlation_id, "raw-sessions"))
        size = struct.unpack(">i", self._recv(4))[0]
        got, response = decode_response(entity.__api_key__, entity.__version__, self._recv(size))
        assert got == self.correlation_id
        return response

    def _recv(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by broker")
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()


def fetch_request(
    session_id: int,
    epoch: int,
    parts: dict[tuple[str, int], int] | None = None,
    forget: list[tuple[str, int]] | None = None,
    version: int = 12,
    max_wait_ms: int = 0,
    replica_id: int = -1,
) -> Any:
    cls = request_class(ApiKey.FETCH, version)
    topic_cls, part_cls = nested(cls, "FetchTopic"), nested(cls, "FetchPartition")
    by_topic: dict[str, list[Any]] = {}
    for (t, p), offset in (parts or {}).items():
        by_topic.setdefault(t, []).append(
            make(
                part_cls,
                partition=p,
                current_leader_epoch=-1,
                fetch_offset=offset,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=1 << 20,
            )
        )
    forgotten: dict[str, list[int]] = {}
    for t, p in forget or []:
        forgotten.setdefault(t, []).append(p)
    forgotten_entities: tuple[Any, ...] = ()
    if version >= 7:
        f_cls = nested(cls, "ForgottenTopic")
        forgotten_entities = tuple(f_cls(topic=t, partitions=tuple(ps)) for t, ps in forgotten.items())
    return make(
        cls,
        replica_id=replica_id,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=tuple(topic_cls(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        forgotten_topics_data=forgotten_entities,
        rack_id="",
    )


def keys_of(response: Any) -> set[tuple[str, int]]:
    return {(str(t.topic), int(p.partition_index)) for t in response.responses for p in t.partitions}


def records_of(response: Any) -> dict[tuple[str, int], bytes]:
    return {
        (str(t.topic), int(p.partition_index)): bytes(p.records or b"")
        for t in response.responses
        for p in t.partitions
    }


@pytest.fixture
def wire(broker: InProcessBroker) -> Iterator[Wire]:
    w = Wire(broker.bootstrap_servers)
    yield w
    w.close()


# -- raw protocol ---------------------------------------------------------------------------------------
def test_full_then_incremental_only_changed_partitions(broker: InProcessBroker, wire: Wire) -> None:
    topic = create_topic(broker.bootstrap_servers, 3)
    produce(broker.bootstrap_servers, topic, {0: 2, 1: 2})
    parts = {(topic, p): 0 for p in range(3)}
    full = wire.request(fetch_request(0, 0, parts))
    assert full.error_code == 0 and full.session_id != 0
    assert keys_of(full) == set(parts)  # a full response lists every requested partition
    sid = full.session_id
    assert cache_state(broker)[sid][:2] == (1, frozenset(parts))

    # positions advanced for p0 and p1 (resent); nothing new anywhere: empty incremental response
    inc = wire.request(fetch_request(sid, 1, {(topic, 0): 2, (topic, 1): 2}))
    assert (inc.error_code, inc.session_id) == (0, sid)
    assert keys_of(inc) == set()
    assert cache_state(broker)[sid][0] == 2

    produce(broker.bootstrap_servers, topic, {1: 1, 2: 3})
    inc = wire.request(fetch_request(sid, 2))  # nothing resent: the session remembers offsets
    assert keys_of(inc) == {(topic, 1), (topic, 2)}
    recs = records_of(inc)
    assert recs[(topic, 1)] and recs[(topic, 2)]
    # the same data again (offsets not advanced): records -> still included, no HW change for p0
    inc = wire.request(fetch_request(sid, 3))
    assert keys_of(inc) == {(topic, 1), (topic, 2)}
    inc = wire.request(fetch_request(sid, 4, {(topic, 1): 3, (topic, 2): 3}))
    assert keys_of(inc) == set()


def test_unknown_session_id(wire: Wire, broker: InProcessBroker) -> None:
    topic = create_topic(broker.bootstrap_servers, 1)
    response = wire.request(fetch_request(987654, 1, {(topic, 0): 0}))
    assert (response.error_code, response.session_id, keys_of(response)) == (
        ErrorCode.fetch_session_id_not_found,
        0,
        set(),
    )
    # epoch > 0 without a session id is the same error
    response = wire.request(fetch_request(0, 3, {(topic, 0): 0}))
    assert response.error_code == ErrorCode.fetch_session_id_not_found


def test_wrong_epoch(wire: Wire, broker: InProcessBroker) -> None:
    topic = create_topic(broker.bootstrap_servers, 1)
    sid = wire.request(fetch_request(0, 0, {(topic, 0): 0})).session_id
    assert wire.request(fetch_request(sid, 1)).error_code == 0
    for bad in (1, 3, 2**31 - 1):  # a replay of epoch 1, a jump ahead, garbage
        response = wire.request(fetch_request(sid, bad))
        assert (response.error_code, response.session_id, keys_of(response)) == (
            ErrorCode.invalid_fetch_session_epoch,
            0,
            set(),
        )
    assert cache_state(broker)[sid][0] == 2  # errors leave the session as it was
    assert wire.request(fetch_request(sid, 2)).error_code == 0


def test_forgotten_partitions_are_no_longer_read(wire: Wire, broker: InProcessBroker) -> None:
    topic = create_topic(broker.bootstrap_servers, 2)
    sid = wire.request(fetch_request(0, 0, {(topic, 0): 0, (topic, 1): 0})).session_id
    inc = wire.request(fetch_request(sid, 1, forget=[(topic, 0)]))
    assert inc.error_code == 0 and inc.session_id == sid
    assert cache_state(broker)[sid][1] == frozenset({(topic, 1)})
    produce(broker.bootstrap_servers, topic, {0: 5, 1: 1})
    inc = wire.request(fetch_request(sid, 2))
    assert keys_of(inc) == {(topic, 1)}  # p0 has data but is not in the session any more
    # re-adding it is an ordinary incremental addition
    inc = wire.request(fetch_request(sid, 3, {(topic, 0): 0}))
    assert (topic, 0) in keys_of(inc) and records_of(inc)[(topic, 0)]


def test_forgetting_every_partition_closes_the_session(wire: Wire, broker: InProcessBroker) -> None:
    topic = create_topic(broker.bootstrap_servers, 1)
    sid = wire.request(fetch_request(0, 0, {(topic, 0): 0})).session_id
    response = wire.request(fetch_request(sid, 1, forget=[(topic, 0)]))
    assert (response.error_code, response.session_id) == (0, 0)
    assert sid not in cache_state(broker)
    assert wire.request(fetch_request(sid, 2)).error_code == ErrorCode.fetch_session_id_not_found


def test_close_with_final_epoch(wire: Wire, broker: InProcessBroker) -> None:
    topic = create_topic(broker.bootstrap_servers, 1)
    sid = wire.request(fetch_request(0, 0, {(topic, 0): 0})).session_id
    closing = wire.request(fetch_request(sid, -1))
    assert (closing.error_code, closing.session_id, keys_of(closing)) == (0, 0, set())
    assert sid not in cache_state(broker)
    assert wire.request(fetch_request(sid, 1)).error_code == ErrorCode.fetch_session_id_not_found


def test_initial_epoch_with_session_id_replaces_the_session(wire: Wire, broker: InProcessBroker) -> None:
    topic = create_topic(broker.bootstrap_servers, 1)
    sid = wire.request(fetch_request(0, 0, {(topic, 0): 0})).session_id
    again = wire.request(fetch_request(sid, 0, {(topic, 0): 0}))
    assert again.error_code == 0 and again.session_id not in (0, sid)
    state = cache_state(broker)
    assert sid not in state and again.session_id in state


def test_sessionless_requests_create_no_session(wire: Wire, broker: InProcessBroker) -> None:
    topic = create_topic(broker.bootstrap_servers, 1)
    produce(broker.bootstrap_servers, topic, {0: 3})
    before = sessions_created(broker)
    response = wire.request(fetch_request(0, -1, {(topic, 0): 0}))
    assert (response.error_code, response.session_id) == (0, 0) and records_of(response)[(topic, 0)]
    for version in (4, 6):  # no session fields at all
        response = wire.request(fetch_request(0, -1, {(topic, 0): 0}, version=version))
        assert records_of(response)[(topic, 0)]
    assert sessions_created(broker) == before


def test_incremental_fetch_long_polls_on_session_partitions(wire: Wire, broker: InProcessBroker) -> None:
    topic = create_topic(broker.bootstrap_servers, 1)
    sid = wire.request(fetch_request(0, 0, {(topic, 0): 0})).session_id
    started = time.monotonic()
    inc = wire.request(fetch_request(sid, 1, max_wait_ms=400))
    assert time.monotonic() - started >= 0.3 and keys_of(inc) == set()


def test_errors_are_always_included_in_incremental_responses(wire: Wire, broker: InProcessBroker) -> None:
    topic = create_topic(broker.bootstrap_servers, 1)
    sid = wire.request(fetch_request(0, 0, {(topic, 0): 0, (topic, 7): 0})).session_id
    for epoch in (1, 2):
        inc = wire.request(fetch_request(sid, epoch))
        codes = {int(p.partition_index): int(p.error_code) for t in inc.responses for p in t.partitions}
        assert codes == {7: ErrorCode.unknown_topic_or_partition}


def test_cache_full_gives_sessionless_responses(tmp_path: Path) -> None:
    small = InProcessBroker(tmp_path, {"max.incremental.fetch.session.cache.slots": "1"}).start()
    try:
        topic = create_topic(small.bootstrap_servers, 1)
        a, b = Wire(small.bootstrap_servers), Wire(small.bootstrap_servers)
        sid = a.request(fetch_request(0, 0, {(topic, 0): 0})).session_id
        assert sid != 0
        other = b.request(fetch_request(0, 0, {(topic, 0): 0}))
        assert (other.error_code, other.session_id) == (0, 0)  # no room, the young session stays
        assert (
            b.request(fetch_request(0, 0, {(topic, 0): 0}, replica_id=1)).session_id != 0
        )  # privileged evicts
        assert a.request(fetch_request(sid, 1)).error_code == ErrorCode.fetch_session_id_not_found
        a.close()
        b.close()
    finally:
        small.stop()


# -- independent peers -------------------------------------------------------------------------------
def test_kafka_python_consumer_uses_incremental_sessions(broker: InProcessBroker) -> None:
    topic = create_topic(broker.bootstrap_servers, 2)
    produce(broker.bootstrap_servers, topic, {0: 50, 1: 50})
    before = set(cache_state(broker))
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
    )
    try:
        consumer.assign([kafka.TopicPartition(topic, 0), kafka.TopicPartition(topic, 1)])
        got = _drain_kafka_python(consumer, 100)
        produce(broker.bootstrap_servers, topic, {0: 10}, tag="late")
        got += _drain_kafka_python(consumer, 10)
        assert sorted(got) == sorted(
            [f"v-{p}-{i}" for p in range(2) for i in range(50)] + [f"late-0-{i}" for i in range(10)]
        )
        for _ in range(5):  # idle polls: empty incremental fetches in the same session
            consumer.poll(timeout_ms=150)
        mine = {
            sid: s
            for sid, s in cache_state(broker).items()
            if sid not in before and s[1] == frozenset({(topic, 0), (topic, 1)})
        }
        assert len(mine) == 1, mine
        ((epoch, _, privileged),) = mine.values()
        assert epoch > 3 and not privileged
        # evict its session behind its back: it gets FETCH_SESSION_ID_NOT_FOUND and recovers
        sid = next(iter(mine))
        broker.call(lambda: fetch_session_cache_for(broker.ctx).remove(sid))
        produce(broker.bootstrap_servers, topic, {1: 5}, tag="after")
        assert sorted(_drain_kafka_python(consumer, 5)) == [f"after-1-{i}" for i in range(5)]
        for _ in range(5):  # a fetch parked before the removal may have answered in the old session
            consumer.poll(timeout_ms=150)
        state = cache_state(broker)
        assert any(
            s[1] == frozenset({(topic, 0), (topic, 1)})
            for k, s in state.items()
            if k not in before and k != sid
        ), (sid, state)
    finally:
        consumer.close()


def _drain_kafka_python(consumer: Any, count: int, timeout_s: float = 20) -> list[str]:
    got: list[str] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got.extend(r.value.decode() for r in records)
    return got


def test_confluent_kafka_sessionless_consumer(broker: InProcessBroker) -> None:
    topic = create_topic(broker.bootstrap_servers, 2)
    produce(broker.bootstrap_servers, topic, {0: 30, 1: 30})
    before = sessions_created(broker)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "fs-" + uuid.uuid4().hex[:6],
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(2)])
        got: list[str] = []
        deadline = time.monotonic() + 20
        while len(got) < 60 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value().decode())
        assert sorted(got) == sorted(f"v-{p}-{i}" for p in range(2) for i in range(30))
        # librdkafka sends (0, -1) full fetches: the broker must not create sessions for it
        assert sessions_created(broker) == before
    finally:
        consumer.close()


# -- our consumer -----------------------------------------------------------------------------------
def _poll_values(consumer: KafkaConsumer, count: int, timeout_s: float = 20) -> list[str]:
    got: list[str] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(200).values():
            got.extend(r.value.decode() for r in records)
    return got


def test_our_consumer_full_then_incremental_pause_resume(broker: InProcessBroker) -> None:
    topic = create_topic(broker.bootstrap_servers, 3)
    produce(broker.bootstrap_servers, topic, {0: 20, 1: 20, 2: 20})
    before_ids = set(cache_state(broker))
    before_created = sessions_created(broker)
    tps = [TopicPartition(topic, p) for p in range(3)]
    consumer = KafkaConsumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "auto.offset.reset": "earliest",
            "fetch.max.wait.ms": 100,
        }
    )
    try:
        consumer.assign(tps)
        assert sorted(_poll_values(consumer, 60)) == sorted(f"v-{p}-{i}" for p in range(3) for i in range(20))
        for _ in range(5):
            consumer.poll(50)
        mine = {k: v for k, v in cache_state(broker).items() if k not in before_ids}
        assert len(mine) == 1
        ((sid, (epoch, partitions, _)),) = mine.items()
        assert epoch > 3 and partitions == frozenset(tps)
        assert sessions_created(broker) == before_created + 1  # one session, reused by every fetch

        consumer.pause(tps[0])
        produce(broker.bootstrap_servers, topic, {0: 3, 1: 3}, tag="p")
        got = _poll_values(consumer, 3)
        assert sorted(got) == [f"p-1-{i}" for i in range(3)]
        for _ in range(3):
            consumer.poll(50)
        assert cache_state(broker)[sid][1] == frozenset(tps[1:])  # paused partition forgotten
        consumer.resume(tps[0])
        assert sorted(_poll_values(consumer, 3)) == [f"p-0-{i}" for i in range(3)]
        assert cache_state(broker)[sid][1] == frozenset(tps)
        assert sessions_created(broker) == before_created + 1
    finally:
        consumer.close()


def test_our_consumer_recovers_from_session_loss_without_loss_or_duplicates(broker: InProcessBroker) -> None:
    topic = create_topic(broker.bootstrap_servers, 2)
    consumer = KafkaConsumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "auto.offset.reset": "earliest",
            "fetch.max.wait.ms": 50,
        }
    )
    expected: list[str] = []
    got: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        consumer.poll(100)
        for round_ in range(4):
            produce(broker.bootstrap_servers, topic, {0: 5, 1: 5}, tag=f"r{round_}")
            expected += [f"r{round_}-{p}-{i}" for p in range(2) for i in range(5)]
            got += _poll_values(consumer, 10)

            # drop (round 0, 2) or corrupt the epoch of (round 1, 3) every session of this topic
            def sabotage(round_: int = round_) -> None:
                cache = fetch_session_cache_for(broker.ctx)
                for s in cache.sessions():
                    if any(k[0] == topic for k in s.partitions):
                        if round_ % 2 == 0:
                            cache.remove(s.id)
                        else:
                            s.epoch += 7

            broker.call(sabotage)
        got += _poll_values(consumer, 0, timeout_s=0.5)
        assert sorted(got) == sorted(expected)
    finally:
        consumer.close()


def test_our_consumer_closes_its_session_on_close(broker: InProcessBroker) -> None:
    topic = create_topic(broker.bootstrap_servers, 1)
    produce(broker.bootstrap_servers, topic, {0: 3})
    before = set(cache_state(broker))
    consumer = KafkaConsumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "auto.offset.reset": "earliest",
            "fetch.max.wait.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, 0)])
    assert len(_poll_values(consumer, 3)) == 3
    deadline = time.monotonic() + 5
    while not set(cache_state(broker)) - before and time.monotonic() < deadline:
        consumer.poll(50)
    mine = set(cache_state(broker)) - before
    assert len(mine) == 1
    # let the pipelined fetch finish so that no fetch is pending on close
    consumer._client.poll(500)
    consumer.close()
    assert not mine & set(cache_state(broker))


def test_our_consumer_without_sessions_sends_sessionless_fetches(broker: InProcessBroker) -> None:
    topic = create_topic(broker.bootstrap_servers, 1)
    produce(broker.bootstrap_servers, topic, {0: 4})
    before = sessions_created(broker)
    consumer = KafkaConsumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "auto.offset.reset": "earliest",
            "fetch.max.wait.ms": 50,
            "fetch.sessions.enable": "false",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        assert sorted(_poll_values(consumer, 4)) == [f"v-0-{i}" for i in range(4)]
        for _ in range(3):
            consumer.poll(50)
        assert sessions_created(broker) == before
    finally:
        consumer.close()
